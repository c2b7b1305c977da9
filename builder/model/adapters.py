"""LoRA adapter shapes as rules: the input and output width of every projection an adapter can target.

An adapter on a projection W (d_out x d_in) is lora_A (r x d_in) and lora_B (d_out x r) (Hu et al. 2021,
arXiv:2106.09685, section 4.1; PEFT 0.21.2 peft/tuners/lora/layer.py LoraLayer.update_layer: nn.Linear(in_features,
r) and nn.Linear(r, out_features)). builder.model.states counts r x (in + out) per adapter; builder.model.paging
needs each matrix on its own, since bitsandbytes pages a state only from 100,000 elements up.

The adapters' dtype (ADAPTER_DTYPE) is whose code builds them:
- PEFT (implementation hf, and megatron, which has no adapters of its own): fp32 in any model, since get_peft_model's
  autocast_adapter_dtype=True upcasts bf16 and fp16 adapters (PEFT 0.21.2 peft/tuners/tuners_utils.py
  cast_adapter_dtype; measured: tests/test_lora_peft.py);
- torchtune (implementation torchtune): the model's own dtype. recipes/lora_finetune_single_device.py _setup_model
  builds the whole model, lora_a and lora_b included, under training.set_default_dtype(self._dtype) (cfg.dtype, bf16
  in every LoRA and QLoRA config) and then checks it with training.validate_expected_param_dtype(self.adapter_params
  .items(), dtype=self._dtype); the recipe's docstring: "When dtype=bf16, all activations, gradients and optimizer
  states are in bfloat16" (torchtune at commit 30b8519, the README's memory table; the same in v0.6.1). Their
  gradients are in that dtype too, and torch.optim.AdamW makes its moments zeros_like the parameter.
"""

from __future__ import annotations

from builder.model.cite import Cite
from builder.model.expr import eq, sym, when

MLP_WIDTH = when(sym("ffn"), sym("ffn"), sym("expert_ffn"))
# target -> (d_in, d_out) of the projection it adapts in every block (transformers' Llama-family names; GeLU models
# have no gate).
SHAPES = {
    "q": (sym("hidden"), sym("heads") * sym("head_dim")),
    "k": (sym("hidden"), sym("kv_heads") * sym("head_dim")),
    "v": (sym("hidden"), sym("kv_heads") * sym("head_dim")),
    "o": (sym("heads") * sym("head_dim"), sym("hidden")),
    "gate": (when(eq(sym("mlp"), "gelu"), 0, sym("hidden")), when(eq(sym("mlp"), "gelu"), 0, MLP_WIDTH)),
    "up": (sym("hidden"), MLP_WIDTH),
    "down": (MLP_WIDTH, sym("hidden")),
}
# The output layer, once per model (on the pipeline stage with the head), named as PEFT's target_modules name it:
# transformers' LlamaForCausalLM.lm_head, nn.Linear(hidden, vocab) (PEFT's "all-linear" leaves it out, so it is named:
# peft/tuners/tuners_utils.py _maybe_include_all_linear_layers); torchtune's apply_lora_to_output=True makes its
# output_proj a LoRALinear(embed_dim, vocab_size) (torchtune/models/llama3/_component_builders.py lora_llama3 at
# 30b8519), not quantised under QLoRA ("TODO: quantize_base is not applied to final output_proj currently").
HEAD = "lm_head"
HEAD_SHAPE = (sym("hidden"), sym("vocab"))

# A run of torchtune's LoRA code: its LoRALinear adapters and, under QLoRA, torchao's NF4 weights (builder.model.states,
# .dequant and .activations read it from here).
TORCHTUNE = eq(sym("implementation"), "torchtune")
# The dtype the adapters (and so their gradients and, unless an optimizer dtype is chosen, their optimizer states)
# are kept in: the model's own under torchtune, fp32 under PEFT (the module docstring has the sources).
ADAPTER_DTYPE = when(TORCHTUNE, sym("param_dtype"), "fp32")
ADAPTER_SOURCE = when(TORCHTUNE,
                      Cite("torchtune-30b8519", "recipes/lora_finetune_single_device.py _setup_model")
                      + ": the model and its adapters built under training.set_default_dtype(dtype), checked by "
                        "validate_expected_param_dtype",
                      Cite("peft-lora", "peft/tuners/tuners_utils.py cast_adapter_dtype")
                      + ": autocast_adapter_dtype=True upcasts bf16 and fp16 adapters to fp32")
