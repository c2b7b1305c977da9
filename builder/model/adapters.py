"""LoRA adapter shapes as rules: the input and output width of every projection an adapter can target.

An adapter on a projection W (d_out x d_in) is lora_A (r x d_in) and lora_B (d_out x r) (Hu et al. 2021,
arXiv:2106.09685, section 4.1; PEFT 0.21.2 peft/tuners/lora/layer.py LoraLayer.update_layer: nn.Linear(in_features,
r) and nn.Linear(r, out_features)). builder.model.states counts r x (in + out) per adapter; builder.model.paging
needs each matrix on its own, since bitsandbytes pages a state only from 100,000 elements up.
"""

from __future__ import annotations

from builder.model.expr import eq, sym, when

MLP_WIDTH = when(sym("ffn"), sym("ffn"), sym("expert_ffn"))
# target -> (d_in, d_out) of the projection it adapts (transformers' Llama-family names; GeLU models have no gate).
SHAPES = {
    "q": (sym("hidden"), sym("heads") * sym("head_dim")),
    "k": (sym("hidden"), sym("kv_heads") * sym("head_dim")),
    "v": (sym("hidden"), sym("kv_heads") * sym("head_dim")),
    "o": (sym("heads") * sym("head_dim"), sym("hidden")),
    "gate": (when(eq(sym("mlp"), "gelu"), 0, sym("hidden")), when(eq(sym("mlp"), "gelu"), 0, MLP_WIDTH)),
    "up": (sym("hidden"), MLP_WIDTH),
    "down": (MLP_WIDTH, sym("hidden")),
}
