"""Every parameter tensor of an architecture, as a table rule: counted here and by the browser alike.

The layout follows Hugging Face transformers, whose modules the counts are checked against
(tests/test_architecture.py pins each catalog model's published total):
- modeling_gpt2.py: Conv1D stores weights as (in, out), q/k/v fused into one c_attn (h, 3h), biases on
  every projection, LayerNorm (weight and bias), learned positions, the head tied to the embedding;
- modeling_llama.py, modeling_mistral.py, modeling_qwen2.py, modeling_qwen3.py: nn.Linear as (out, in),
  separate q/k/v/o (Qwen2 with q/k/v biases; Qwen3 with an RMSNorm of head_dim over each query and key
  head), RMSNorm (a weight), SwiGLU's gate, up and down;
- modeling_phi3.py (transformers 5.23): the Llama layout with q, k and v in one Phi3Attention.qkv_proj
  ((a + 2k) d, h) and gate and up in one Phi3MLP.gate_up_proj (2f, h), no biases (the fused_projections input);
- modeling_mixtral.py, modeling_qwen3_moe.py: a router Linear(h, experts) and per expert w1, w3 (ffn, h) and
  w2 (h, ffn);
  shared experts (DeepSeek-style) as another set of MLPs every token passes through; modeling_qwen2_moe.py's
  shared expert also has a gate, Linear(h, 1) (Qwen2MoeSparseMoeBlock.shared_expert_gate);
- models/gpt_oss/modeling_gpt_oss.py (transformers 5.23): q/k/v/o with biases (attention_bias), a learned sink
  logit per query head (GptOssAttention.sinks, num_attention_heads floats), a router Linear(h, experts) with a bias
  (GptOssTopKRouter.weight and .bias), and experts as fused 3-D parameters with biases (GptOssExperts.gate_up_proj
  (E, h, 2f) and gate_up_proj_bias (E, 2f), down_proj (E, f, h) and down_proj_bias (E, h)): the same elements as
  separate gate, up and down matrices with biases (mlp_bias) per expert.

Each row is one tensor shape: its group (where tensor parallelism splits it, builder.model.placement),
dim0 (the first dimension, along which FSDP2 shards), rest (the product of the other dimensions), count
(how many, per block for rows in a block) and in_block (1 for the L transformer blocks, 0 for the
embeddings, the final norm and the head).
"""

from __future__ import annotations

from builder.model.expr import both, either, eq, maximum, negate, row, sym, table, total, when
from builder.model.partrules import RuleSet

h, heads, kv, d = sym("hidden"), sym("heads"), sym("kv_heads"), sym("head_dim")
NORM_TENSORS = when(eq(sym("norm"), "layernorm"), 2, 1)  # LayerNorm: weight and bias; RMSNorm: weight
UP_MATRICES = when(eq(sym("mlp"), "swiglu"), 2, 1)  # SwiGLU's gate and up; GeLU's up only
SEPARATE = negate(sym("fused_qkv"))
FUSED = sym("fused_projections")  # Phi-3: qkv_proj and gate_up_proj, nn.Linear (out, in)
DENSE = negate(sym("experts"))


def _mlp(group: str, width, copies, condition, fused=0) -> tuple:
    """The rows of `copies` MLPs of inner width `width`: up (and gate) (width, h), or where `fused` holds gate and up
    as one (2 width, h) (Phi-3's gate_up_proj), down (h, width), biases."""
    biased = both(condition, sym("mlp_bias"))
    return (row(both(condition, negate(fused)), group=group, dim0=width, rest=h, count=UP_MATRICES * copies,
                in_block=1),
            row(both(condition, fused), group=group, dim0=2 * width, rest=h, count=copies, in_block=1),
            row(condition, group=group, dim0=h, rest=width, count=copies, in_block=1),
            row(biased, group=group, dim0=width, rest=1, count=UP_MATRICES * copies, in_block=1),
            row(biased, group=group, dim0=h, rest=1, count=copies, in_block=1))


# Multi-head latent attention (DeepSeek-V2/V3; transformers modeling_deepseek_v2.py DeepseekV2Attention): a query
# either through one q_proj or through q_a_proj (q_lora, h), its RMSNorm and q_b_proj (a*d, q_lora); the keys and
# values through kv_a_proj_with_mqa (kv_lora + rope, h), an RMSNorm of kv_lora and kv_b_proj (a*(nope + v), kv_lora);
# the output o_proj (h, a*v). head_dim is the query/key width (nope + rope), v_head_dim the value's.
MLA = sym("kv_lora_rank") > 0
Q_LORA = sym("q_lora_rank") > 0
STANDARD = both(SEPARATE, negate(MLA))
VALUE_DIM = when(both(MLA, sym("v_head_dim") > 0), sym("v_head_dim"), d)
# MoE models whose first layers keep a dense MLP (DeepSeek first_k_dense_replace): a block's rows are the average
# block, so the dense MLP counts first_dense_layers / layers of a block and the MoE rows the rest (exact over the
# whole model; a pipeline stage gets the average block).
LAYERS = maximum(sym("layers"), 1)
DENSE_SHARE = when(sym("experts"), sym("first_dense_layers") / LAYERS, 1)
MOE_SHARE = when(sym("experts"), (sym("layers") - sym("first_dense_layers")) / LAYERS, 0)
PARAMETER_TENSORS = table(
    row(1, group="embedding/tokens", dim0=sym("vocab"), rest=h, count=1, in_block=0),
    row(sym("position_embeddings"), group="embedding/positions", dim0=sym("position_embeddings"), rest=h, count=1,
        in_block=0),
    # GPT-2: c_attn (h, 3h) and its bias, c_proj (h, h) and its bias (Conv1D: (in, out)).
    row(sym("fused_qkv"), group="attention/qkv", dim0=h, rest=3 * h, count=1, in_block=1),
    row(sym("fused_qkv"), group="attention/qkv", dim0=3 * h, rest=1, count=1, in_block=1),
    row(sym("fused_qkv"), group="attention/out", dim0=h, rest=h, count=1, in_block=1),
    row(sym("fused_qkv"), group="attention/out", dim0=h, rest=1, count=1, in_block=1),
    # Separate projections: q (a*d, h), k and v (kv*d, h), o (h, a*d), with their biases where the model has them;
    # Phi-3's qkv_proj ((a + 2 kv) d, h) in their place.
    row(both(SEPARATE, negate(Q_LORA), negate(FUSED)), group="attention/q", dim0=heads * d, rest=h, count=1,
        in_block=1),
    row(both(STANDARD, negate(FUSED)), group="attention/kv", dim0=kv * d, rest=h, count=2, in_block=1),
    row(FUSED, group="attention/qkv", dim0=(heads + 2 * kv) * d, rest=h, count=1, in_block=1),
    row(SEPARATE, group="attention/out", dim0=h, rest=heads * VALUE_DIM, count=1, in_block=1),
    row(both(SEPARATE, sym("qkv_bias")), group="attention/q", dim0=heads * d, rest=1, count=1, in_block=1),
    row(both(STANDARD, sym("qkv_bias")), group="attention/kv", dim0=kv * d, rest=1, count=2, in_block=1),
    row(both(SEPARATE, sym("out_bias")), group="attention/out", dim0=h, rest=1, count=1, in_block=1),
    # gpt-oss's attention sinks: one learned logit per query head (split over tensor-parallel ranks with the heads,
    # as vLLM's and SGLang's gpt_oss.py shard self.sinks).
    row(sym("attention_sinks"), group="attention/sinks", dim0=heads, rest=1, count=1, in_block=1),
    # Latent attention's down projections (replicated over tensor-parallel ranks, as vLLM's ReplicatedLinear has
    # them), their RMSNorms and the up projections.
    row(Q_LORA, group="attention/latent", dim0=sym("q_lora_rank"), rest=h, count=1, in_block=1),
    row(Q_LORA, group="norms", dim0=sym("q_lora_rank"), rest=1, count=1, in_block=1),
    row(Q_LORA, group="attention/q", dim0=heads * d, rest=sym("q_lora_rank"), count=1, in_block=1),
    row(MLA, group="attention/latent", dim0=sym("kv_lora_rank") + sym("qk_rope_head_dim"), rest=h, count=1,
        in_block=1),
    row(MLA, group="norms", dim0=sym("kv_lora_rank"), rest=1, count=1, in_block=1),
    row(MLA, group="attention/kv_up", dim0=heads * (d - sym("qk_rope_head_dim") + VALUE_DIM),
        rest=sym("kv_lora_rank"), count=1, in_block=1),
    # The norms of a block (before attention and before the MLP; Gemma 2 and 3 also after each), and Qwen3's
    # per-head q and k RMSNorms.
    row(1, group="norms", dim0=h, rest=1, count=when(sym("sandwich_norms"), 4, 2) * NORM_TENSORS, in_block=1),
    row(sym("qk_norm"), group="norms", dim0=d, rest=1, count=2, in_block=1),
    *_mlp("mlp", sym("ffn"), DENSE_SHARE, either(DENSE, sym("first_dense_layers") > 0), FUSED),
    row(sym("experts"), group="mlp/router", dim0=sym("experts"), rest=h, count=MOE_SHARE, in_block=1),
    row(both(sym("experts"), sym("router_bias")), group="mlp/router", dim0=sym("experts"), rest=1, count=MOE_SHARE,
        in_block=1),
    *_mlp("mlp/experts", sym("expert_ffn"), sym("experts") * MOE_SHARE, sym("experts")),
    *_mlp("mlp/shared_experts", sym("expert_ffn"), sym("shared_experts") * MOE_SHARE, sym("shared_experts")),
    row(both(sym("shared_experts"), eq(sym("moe_block"), "qwen2_moe")), group="mlp/router", dim0=1, rest=h,
        count=MOE_SHARE, in_block=1),
    row(1, group="final_norm", dim0=h, rest=1, count=NORM_TENSORS, in_block=0),
    row(negate(sym("tied_embeddings")), group="lm_head", dim0=sym("vocab"), rest=h, count=1, in_block=0),
)

# All parameters: a block's rows once per layer, the rest once (a tied head is the embedding, counted once).
PARAMETERS = total(sym("parameter_tensors"), sym("dim0") * sym("rest") * sym("count")
                   * when(sym("in_block"), sym("layers"), 1))
# The table and the count, derived from an architecture's shape (builder.model.architecture.shape_inputs).
# A head width of 0 (a custom architecture's empty field) is hidden // heads, as Architecture.d_head has it.
# Parameters one token passes through: an MoE layer counts top_k of its routed experts (one expert's share of a
# layer's routed-expert rows, times the experts a token skips, taken off every layer).
ROUTED_EXPERT_PARAMETERS = total(sym("parameter_tensors"), when(eq(sym("group"), "mlp/experts"),
                                                                sym("dim0") * sym("rest") * sym("count"), 0))
ACTIVE_PARAMETERS = sym("parameters") - when(sym("experts"), sym("layers") * (sym("experts") - sym("top_k"))
                                             * ROUTED_EXPERT_PARAMETERS / maximum(sym("experts"), 1), 0)
SHAPES = RuleSet(symbols={"head_dim": when(sym("head_dim") > 0, sym("head_dim"), sym("hidden") // sym("heads")),
                          "parameter_tensors": PARAMETER_TENSORS, "parameters": PARAMETERS,
                          "active_parameters": ACTIVE_PARAMETERS}, parts=())
