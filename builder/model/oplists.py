"""Op lists as data: which tensors each operation of a transformer block saves for backward.

Each row is (group, op, coefficient, shape, dtype, condition, core):
  group      part of the breakdown the bytes go to ('norms', 'attention', ...)
  op         the operation and what it saves, in words
  shape      a product of symbols (below); elements = coefficient x product
  dtype      'act' (the activation dtype), 'lin' (a linear layer's input as the layer saves it: the activation
             dtype, or the quantised copy a low-precision recipe keeps, builder.model.recipes), 'proj' (a
             projection's output: the activation dtype, or fp32 where bitsandbytes' 4-bit layer returns its fp32
             input's dtype under autocast), 'fp32', 'bool'
             (1 byte), 'int64' or 'int32'
  condition  when the row applies: '' always, or names joined by '&' (see CONDITIONS)
  core       inside core attention: selective recompute drops it

Symbols (per GPU, one micro-batch): T tokens (b x s), Tr tokens in TP-replicated regions
(T / t under sequence parallelism, else T), b micro-batch, s query tokens (after context
parallelism), S keys per query, h hidden, a query heads (/t), k KV heads (max(1, k/t)),
d head dim, f MLP inner width (/t), V vocabulary rows (/t), E experts, K top-k, r LoRA rank, g the shared experts'
inner width together (/t; DeepSeek-style shared experts); latent attention (DeepSeek): c the latent (kv_lora_rank),
q the query's low rank (q_lora_rank), p the rotary part of a query/key head (qk_rope_head_dim), n its non-rotary part
(d - p), v a value head; F the dense MLP's inner width (/t) in the first dense layers of an MoE model; P the keys per
query and gpt-oss's attention sink (S + 1: the width of its eager softmax).

Because they are data, the same rows are evaluated by builder.model.activations, shown
on the Activations page, compared with measurements (builder.validate) and shipped to the
calculator widget.
"""

from __future__ import annotations

from typing import NamedTuple

from builder.model.float8 import INSTANTS as FLOAT8_INSTANTS


class Row(NamedTuple):
    """One saved tensor of an op list."""

    group: str
    op: str
    coefficient: int
    shape: str
    dtype: str
    condition: str = ""
    core: bool = False
    # Which layers of an MoE model whose first layers keep a dense MLP (DeepSeek's first_k_dense_replace) the row is
    # in: '' every layer, 'moe' the MoE layers, 'dense' the first dense layers. One layer of the op list is the
    # average layer: a 'moe' row counts the MoE layers' share of it, a 'dense' row the dense layers' (exact over the
    # whole model; each pipeline stage gets the average layer).
    layers: str = ""


# Conditions a row may require (all joined by '&' must hold).
CONDITIONS = {
    "dropout": "dropout is active",
    "no_dropout": "dropout is off",
    "eager": "attention computed in eager PyTorch (s x s scores materialised)",
    "fused": "attention by a fused kernel (SDPA / FlashAttention)",
    "gqa_repeat": "fewer KV heads than query heads, K and V copied to every query head before attention: transformers' eager attention, or its SDPA attention given a mask (repeat_kv), or torchtune's MultiHeadAttention (expand, then flatten)",
    "no_gqa_repeat": "not gqa_repeat",
    "padding_mask": "transformers' SDPA attention given a 4-D mask (a padded micro-batch, packed sequences whose "
                    "position ids restart, or a sliding window every layer keeps that the sequence reaches): each "
                    "layer's kernel saves the mask, converted to the activation dtype",
    "batch_mask": "the 4-D mask has a row per sequence (a padded micro-batch)",
    "shared_mask": "the 4-D mask is one for every sequence (a sliding window, no padding), expanded over the batch",
    "low_precision": "activation dtype narrower than fp32 (an extra cast is saved)",
    "gelu_python": "GeLU written in Python ops (transformers NewGELUActivation)",
    "gelu_fused": "GeLU as one op (saves only its input)",
    "swiglu": "SwiGLU MLP",
    "swiglu_fused": "SwiGLU as Megatron-LM's fused kernel (bias_swiglu_fusion, its default): saves only its input",
    "swiglu_unfused": "SwiGLU as separate ops (transformers LlamaMLP: SiLU, then the product)",
    "learned_positions": "learned position embeddings",
    "rotary": "rotary position embeddings",
    "embedding_dropout": "a dropout layer after the embeddings (GPT-2's embd_pdrop; Llama-style models have none)",
    "full_recompute": "full activation recomputation (checkpointed layers)",
    "no_full_recompute": "not full_recompute",
    "sac_reduce_scatter": "torchtitan's per-op checkpointing over tensor-parallel ranks with sequence parallelism: the "
                          "reduce-scatter outputs are saved",
    "all_recomputed": "full recomputation of every layer (no recompute_layers count), or torchtitan's per-op "
                      "checkpointing (every layer wrapped): the stage's last layer is checkpointed too",
    # torch.autocast over fp32 weights (amp-bf16): the residual stream stays fp32, and each
    # linear layer casts its input itself, so projections sharing an input save a copy each.
    "autocast": "torch.autocast over fp32 weights (the residual stream, norms and rotary tables stay fp32)",
    "no_autocast": "not autocast",
    # Projections that read one tensor (q, k, v; gate, up) as separate layers: under torch.autocast or a
    # Transformer Engine recipe each layer casts or quantises the input itself and saves its own copy.
    "separate_inputs": "projections sharing an input save a copy each (autocast casts, or a low-precision recipe "
                       "quantises, the input in every layer; transformers code, separate projections)",
    "shared_input": "not separate_inputs",
    # The attention output projection's input under a low-precision recipe (builder.model.recipes): the fused
    # attention kernel saves it as its output anyway, and Megatron-LM has the projection save that original
    # (save_original_input) for every recipe but delayed scaling; otherwise the projection saves a quantised copy.
    "o_input_kept": "the output projection's 16-bit input is saved (no recipe, a fused attention kernel's own output, "
                    "or Megatron-LM's save_original_input)",
    "o_input_quantised": "the output projection saves a quantised copy of its input (a recipe, unless Megatron-LM's "
                         "save_original_input applies)",
    # Saved only for a weight gradient: gone when that weight is frozen (LoRA, QLoRA).
    "grad_qkv": "the q/k/v (or c_attn) weights train",
    "grad_o": "the attention output weights train",
    "grad_mlp_in": "the first MLP weights (c_fc, or gate and up) train",
    "grad_mlp_out": "the last MLP weights (c_proj or down) train",
    "grad_norm": "the norm weights train",
    "grad_head": "the output layer (lm_head) trains",
    # torch.compile over every transformers layer (HF_*_COMPILED): rows outside the layers that change with it.
    "compiled": "every transformers layer under torch.compile (inductor)",
    "not_compiled": "not compiled",
    "no_compiled_scores": "not compiled_scores",
    "compiled_scores": "a compiled eager attention recomputes an fp32 softmax over 16-bit scores (Llama's softmax in "
                       "fp32, or autocast): it keeps the scores, their row max and sum, and the causal mask",
    # How the loss is computed (builder.model.config.LOSSES).
    "loss_logprobs": "an eager loss (whole or chunked) saves the fp32 log-probabilities for its backward",
    "loss_compiled": "a compiled loss (whole, or each of torchtune's chunks) saves the logits and a per-token "
                     "logsumexp instead",
    "loss_chunked_compiled": "each of torchtune's compiled chunks also saves its per-token row max (measured on CPU)",
    "loss_fused_linear": "a fused linear cross-entropy computes the gradients in the forward and keeps no logits",
    "no_loss_fused_linear": "not loss_fused_linear",
    # LoRA adapters. PEFT: each adapted projection casts its input to the fp32 adapter dtype (saved by lora_A) and
    # keeps lora_A's output (saved by lora_B). torchtune: the adapters are in the model's dtype and lora_A reads the
    # projection's own input (LORA below has the sources).
    "lora_q": "a LoRA adapter on q", "lora_k": "a LoRA adapter on k", "lora_v": "a LoRA adapter on v",
    "lora_o": "a LoRA adapter on the output projection", "lora_gate": "a LoRA adapter on gate",
    "lora_up": "a LoRA adapter on up", "lora_down": "a LoRA adapter on down",
    # In an fp32 model the fp32 cast is the input itself: adapters on q, k and v (or gate and up)
    # share one saved input, and the adapter on o shares the fused attention kernel's saved output; below fp32, or
    # with LoRA dropout, each adapter's input is its own tensor.
    "lora_lm_head": "a LoRA adapter on the output layer (lm_head)",
    **{f"lora_in_{t}": f"the LoRA adapter on {t} saves an input of its own"
       for t in ("q", "k", "v", "o", "gate", "up", "down", "lm_head")},
    "lora_amp": "the adapters run under torch.autocast: lora_A saves its input as autocast casts it (16-bit) and "
                "lora_B saves lora_A's 16-bit output",
    "lora_fp32": "PEFT's adapters outside torch.autocast: lora_A saves its input cast to fp32 and lora_B lora_A's "
                 "fp32 output",
    "lora_native": "torchtune's adapters, built in the model's dtype: lora_A saves the projection's own input (or its "
                   "dropout output) uncast, lora_B lora_A's output in that dtype",
    "lora_dropout": "LoRA dropout is on (lora_dropout > 0, PEFT's or torchtune's)",
    "lora_frozen_o": "LoRA training: the output projection's base weight is frozen",
    "shared_experts": "the MoE layer has shared experts every token passes through (DeepSeek-style)",
    # Attention variants of transformers' code (HF_LLAMA_BLOCK: _QK_NORMS, _LATENT_ATTENTION).
    "qk_norm": "an RMSNorm over each query and key head before rotary (Qwen3's q_norm and k_norm)",
    "latent": "DeepSeek's multi-head latent attention (kv_lora_rank > 0): latent down and up projections, an "
              "RMSNorm over the latent, a rotary part of each head",
    "no_latent": "not latent",
    "q_lora": "latent attention whose query has a low-rank projection and its RMSNorm (q_lora_rank > 0: DeepSeek-V3)",
    "no_q_lora": "latent attention with one q_proj (q_lora_rank 0: DeepSeek-V2 and V2-Lite)",
    "fp32_projections": "the projections return fp32 (an fp32 model without autocast)",
    "first_dense": "an MoE model whose first layers keep a dense MLP (DeepSeek's first_k_dense_replace)",
    "rotary_complex": "rotary as complex numbers (DeepSeek-V2's freqs_cis; told by its MoE block, as every released "
                      "DeepSeek-V2 model has one)",
    "rotary_real": "not rotary_complex",
    # transformers' MoE blocks (_HF_MOE), by the architecture's moe_block.
    "router_fp32": "DeepSeek's router linear runs in fp32 (below fp32 it saves fp32 copies of its input and weight)",
    "group_limited": "DeepSeek-V2's group-limited routing (topk_method 'group_limited_greedy')",
    # gpt-oss (transformers 5.23 models/gpt_oss/modeling_gpt_oss.py): attention sinks, its MoE block, its RMSNorm.
    "sinks": "gpt-oss's eager attention: a learned sink logit per head joins each row of scores before the softmax",
    "no_sinks": "not sinks",
    "gpt_oss_moe": "gpt-oss's MoE block: a softmax over the top-k logits alone, biased experts, the clamped SwiGLU",
    "no_gpt_oss_moe": "not gpt_oss_moe",
    "half_rotary": "gpt-oss's rotary tables: cos and sin of half the head, multiplied into both halves",
    "no_half_rotary": "not half_rotary",
    "fp32_norm_product": "gpt-oss's RMSNorm multiplies its weight by the fp32 normalised input before casting back",
    "no_fp32_norm_product": "not fp32_norm_product",
    "topk_renormalised": "the top-k routing weights are divided by their sum (Mixtral; Qwen and DeepSeek-V3 with "
                         "norm_topk_prob)",
    "routing_weights_cast": "the routing weights are in the activation dtype (Qwen's MoE routers cast them; gpt-oss's "
                            "softmax keeps the logits' dtype)",
    "routing_weights_fp32": "the routing weights stay fp32 (Mixtral's and DeepSeek's routers)",
    "shared_expert_gate": "a sigmoid gate scales the shared expert's output (Qwen2-MoE)",
    # Phi-3's fused projections in transformers' code (HF_LLAMA_BLOCK: _PHI3_ATTENTION).
    "fused_projections": "transformers' Phi-3 layer: q, k and v from one qkv_proj, gate and up from one gate_up_proj",
    "unfused_projections": "not fused_projections",
    "qkv_view": "Phi-3 under a fused attention kernel with K and V not copied to every query head: V as the kernel "
                "saves it is a view of qkv_proj's output, which keeps that whole output alive",
    "o_copy": "Phi-3 under a fused kernel whose output follows the query's layout (SDPA's FlashAttention, the "
              "flash-attn package; not the memory-efficient kernel a mask selects): o_proj's input is a copy",
    "o_copy_adapter": "o_copy under LoRA with an adapter on o whose lora_A saves o_proj's input as it is",
    # torchao's float8 training (builder.model.float8): the instants of a converted linear layer (FLOAT8_MOMENTS).
    "float8": "torchao's float8 training: the block's linear layers are Float8Linear",
    "float8_forward": "float8, in a layer that is not checkpointed (a checkpointed layer's forward casts the same "
                      "tensors with fewer of them live than its backward)",
    "float8_weight_cast": "float8 without FSDP's float8 all-gather: every forward and backward casts the bf16 weight",
    "float8_rowwise_input_grad": "the input gradient's float8 matmul has row-wise scales (rowwise, "
                                 "rowwise_with_gw_hp): their product is an fp32 tensor of its output's shape",
    "float8_weight_grad": "the weight gradient's matmul in float8, its operands cast again (tensorwise, rowwise)",
    "float8_rowwise_weight_grad": "the weight gradient's float8 matmul has row-wise scales (rowwise)",
    "float8_weight_grad_hp": "the weight gradient's matmul in bf16 (rowwise_with_gw_hp)",
}

def _fp32_under_autocast(group: str, op: str, coefficient: int, shape: str, condition: str = "") -> tuple[Row, Row]:
    """A tensor of the residual stream's dtype: the activation dtype, but fp32 under torch.autocast over
    fp32 weights (the 'autocast' condition)."""
    both = condition + "&" if condition else ""
    return (Row(group, op, coefficient, shape, "act", both + "no_autocast"),
            Row(group, op + ", fp32 under autocast", coefficient, shape, "fp32", both + "autocast"))


# Core attention. Dao et al. 2022 Algorithm 2: fused kernels keep O and the fp32
# logsumexp; eager code keeps the s x s softmax output (and dropout mask and output).
CORE_16BIT_SOFTMAX = (
    Row("attention", "fused kernel: logsumexp per head and row (fp32)", 1, "b a s", "fp32", "fused", True),
    Row("attention_scores", "softmax output", 1, "b a s S", "act", "eager&no_autocast", True),
    # Under autocast the fp32 causal mask promotes the scores: an fp32 softmax output, then the
    # copy scores x V casts (the dropout output plays that part when dropout is on).
    Row("attention_scores", "softmax output (fp32: the fp32 mask promotes the scores under autocast)", 1,
        "b a s S", "fp32", "eager&autocast", True),
    Row("attention_scores", "softmax output cast to the autocast dtype (saved by scores x V)", 1, "b a s S", "act",
        "eager&autocast&no_dropout", True),
    Row("attention_scores", "attention dropout mask", 1, "b a s S", "bool", "eager&dropout", True),
    Row("attention_scores", "attention dropout output (input of scores x V)", 1, "b a s S", "act",
        "eager&dropout", True),
)
# transformers Llama: softmax(..., dtype=float32).to(query.dtype): fp32 output plus a cast copy.
# gpt-oss (transformers 5.23 models/gpt_oss/modeling_gpt_oss.py eager_attention_forward): the scores and the head's
# sink logit are joined (torch.cat: b x a x s x (S + 1)), their row max subtracted (max keeps its int64 indices), the
# softmax taken in the scores' own dtype (it keeps its output) and the sink's column sliced off: scores x V saves a
# view of that output, no copy. Measured on CPU: the gpt_oss cases of content/validation/moe.json.
CORE_FP32_SOFTMAX = (
    Row("attention", "fused kernel: logsumexp per head and row (fp32)", 1, "b a s", "fp32", "fused", True),
    Row("attention_scores", "softmax output (fp32)", 1, "b a s S", "fp32", "eager&no_sinks", True),
    Row("attention_scores", "softmax output cast to the activation dtype (saved by scores x V)", 1, "b a s S", "act",
        "eager&low_precision&no_dropout&no_sinks", True),
    Row("attention_scores", "softmax over the scores and the sink, in their dtype (scores x V saves a view of it)", 1,
        "b a s P", "act", "eager&sinks", True),
    Row("attention_scores", "row maximum of the scores and the sink: its indices (int64, saved by max)", 1, "b a s",
        "int64", "eager&sinks", True),
    Row("attention_scores", "attention dropout mask", 1, "b a s S", "bool", "eager&dropout", True),
    Row("attention_scores", "attention dropout output (input of scores x V)", 1, "b a s S", "act",
        "eager&dropout", True),
)

# PEFT 0.21.2 peft/tuners/lora/layer.py Linear.forward: result = base_layer(x), then per adapter
# x = self._cast_input_dtype(x, lora_A.weight.dtype) and result + lora_B(lora_A(dropout(x))) * scaling. The frozen base
# layer saves no input (no weight gradient); lora_A saves its input: the fp32 cast (a new tensor below fp32; in an fp32
# model the input itself, shared by adapters reading one tensor), or, with lora_dropout > 0 (nn.Dropout; at p = 0 it is
# nn.Identity), the dropout's fp32 output, with the dropout's 1-byte mask beside it; lora_B saves lora_A's r-wide
# output. The scaling multiplies by a Python number and saves nothing. bitsandbytes' MatMul4Bit (QLoRA's base layer)
# saves only the packed 4-bit weight, a parameter already counted. Measured with PEFT on CPU: tests/test_lora_peft.py.
# torchtune (commit 30b8519, the README's memory table; the same in v0.6.1) torchtune/modules/peft/lora.py
# LoRALinear.forward: out = F.linear(x, self.weight) (linear_nf4(input=x, weight=self.weight) under QLoRA), then
# lora_out = self.lora_a(self.dropout(x)) and out + (self.alpha / self.rank) * self.lora_b(lora_out), the adapters in
# the model's dtype (builder.model.adapters.ADAPTER_DTYPE) and no cast: lora_A saves the projection's input itself
# (the 'lora_native' rows: one tensor for q, k and v, one for gate and up, o's the attention kernel's own output),
# or with lora_dropout > 0 its own dropout output beside the mask (each LoRALinear has its own nn.Dropout; at 0,
# every config's value, nn.Identity); lora_B saves lora_A's r-wide output. torchao's LinearNF4.forward (QLoRA's base,
# torchao/dtypes/nf4tensor.py at v0.5.0) does ctx.save_for_backward(weight): the NF4 weight only. Measured on CPU
# with LoRALinear's forward copied into a transformers Llama layer, eager and compiled: tests/test_lora_torchtune.py.
def _lora_rows(group: str, target: str, shape: str) -> tuple[Row, ...]:
    """What the adapter on `target`, whose input has shape `shape`, saves: lora_A's input, its dropout mask, lora_B's
    input (lora_A's r-wide output), as PEFT (fp32, or under autocast) or torchtune (the model's dtype) keeps them."""
    return (
        Row(group, f"LoRA {target}: input cast to fp32, or its dropout output (saved by lora_A)", 1, shape, "fp32",
            f"lora_in_{target}&lora_fp32"),
        Row(group, f"LoRA {target}: input as autocast casts it for lora_A", 1, shape, "act",
            f"lora_in_{target}&lora_amp"),
        Row(group, f"LoRA {target}: dropout mask", 1, shape, "bool", f"lora_{target}&lora_dropout"),
        Row(group, f"LoRA {target}: lora_A output (saved by lora_B)", 1, "T r", "fp32", f"lora_{target}&lora_fp32"),
        Row(group, f"LoRA {target}: lora_A output under autocast (saved by lora_B)", 1, "T r", "act",
            f"lora_{target}&lora_amp"),
        Row(group, f"LoRA {target}: input lora_A saves in the model's dtype (the projection's own input, or its "
                   "dropout output)", 1, shape, "act", f"lora_in_{target}&lora_native"),
        Row(group, f"LoRA {target}: lora_A output in the model's dtype (saved by lora_B)", 1, "T r", "act",
            f"lora_{target}&lora_native"),
    )


LORA_ADAPTERS = tuple(
    row
    for target, shape in (("q", "Tr h"), ("k", "Tr h"), ("v", "Tr h"), ("o", "T a d"),
                          ("gate", "Tr h"), ("up", "Tr h"), ("down", "T f"))
    for row in _lora_rows("lora", target, shape)
)
LORA = LORA_ADAPTERS + (
    # The fused attention kernel saves its output for its own backward whether or not o_proj trains; in full training
    # that tensor is the o_proj input row's, under LoRA (o_proj frozen) it is this one.
    Row("attention", "attention output as the fused kernel saves it (o_proj frozen)", 1, "T a d", "act",
        "lora_frozen_o&fused"),
)

MLP_INNER = (
    # SwiGLU (transformers LlamaMLP): down(act(gate(x)) * up(x)).
    # Megatron-LM's fused SwiGLU (bias_swiglu_impl, its default: --swiglu sets bias_activation_fusion from
    # bias_swiglu_fusion, True unless --no-bias-swiglu-fusion) saves only its input, the first linear's output with
    # gate and up side by side (megatron/core/fusions/fused_bias_swiglu.py SwiGLUFunction.forward:
    # ctx.save_for_backward(input_for_backward)), and recomputes SiLU and the factors in its backward.
    Row("mlp", "first linear output, gate and up (saved by the fused SwiGLU)", 2, "T f", "act", "swiglu_fused"),
    Row("mlp", "SiLU input (gate projection output)", 1, "T f", "proj", "swiglu_unfused"),
    Row("mlp", "SiLU output (factor of the product)", 1, "T f", "proj", "swiglu_unfused"),
    Row("mlp", "up projection output (factor of the product)", 1, "T f", "proj", "swiglu_unfused"),
    Row("mlp", "down projection input (the product)", 1, "T f", "lin", "swiglu&grad_mlp_out"),
    # GeLU as one op (Megatron fused bias-GeLU, torch.nn.GELU).
    Row("mlp", "GeLU input", 1, "T f", "act", "gelu_fused"),
    # transformers NewGELUActivation: 0.5*x*(1+tanh(c*(x+0.044715*x**3))) in Python ops:
    # pow saves x, tanh saves its output, the last product saves 0.5*x and 1+tanh.
    Row("mlp", "GeLU: x (saved by pow)", 1, "T f", "act", "gelu_python"),
    Row("mlp", "GeLU: tanh output", 1, "T f", "act", "gelu_python"),
    Row("mlp", "GeLU: 0.5*x factor", 1, "T f", "act", "gelu_python"),
    Row("mlp", "GeLU: 1+tanh factor", 1, "T f", "act", "gelu_python"),
    Row("mlp", "second MLP linear input", 1, "T f", "lin", "gelu_fused&grad_mlp_out"),
    Row("mlp", "second MLP linear input", 1, "T f", "lin", "gelu_python&grad_mlp_out"),
)

# Megatron GPT block, Korthikanti et al. 2022 section 4.1 (LayerNorm statistics neglected
# as in the paper). With a GeLU 4h MLP and dropout this sums to sbh(34 + 5as/h).
_MEGATRON_ATTENTION = (
    Row("norms", "LayerNorm 1 input", 1, "Tr h", "act"),
    Row("attention", "QKV projection input", 1, "Tr h", "lin", "grad_qkv"),
    Row("attention", "Q for QK^T", 1, "T a d", "act"),
    Row("attention", "K for QK^T", 1, "T k d", "act"),
    Row("attention", "V for scores x V", 1, "T k d", "act"),
    *CORE_16BIT_SOFTMAX,
    Row("attention", "output projection input", 1, "T a d", "act", "grad_o&o_input_kept"),
    Row("attention", "output projection input, quantised copy", 1, "T a d", "lin", "grad_o&o_input_quantised"),
    Row("dropout", "attention output dropout mask", 1, "Tr h", "bool", "dropout"),
    Row("norms", "LayerNorm 2 input", 1, "Tr h", "act"),
)
MEGATRON_BLOCK = (
    *_MEGATRON_ATTENTION,
    Row("mlp", "first MLP linear input", 1, "Tr h", "lin", "grad_mlp_in"),
    *MLP_INNER,
    Row("dropout", "MLP output dropout mask", 1, "Tr h", "bool", "dropout"),
    *LORA,
)

# Megatron-LM's MoE layer (megatron/core/transformer/moe/, commit d98e8a6), with its defaults: dropless
# (moe_expert_capacity_factor None), softmax top-k routing in the input's dtype (moe_router_dtype None,
# moe_router_pre_softmax False, moe_router_fusion False), the allgather token dispatcher
# (moe_token_dispatcher_type 'allgather', moe_permute_fusion False), SequentialMLP experts (moe_grouped_gemm False)
# with the expert tensor-parallel size equal to tp (training/arguments.py: expert_tensor_parallel_size defaults to
# tensor_model_parallel_size), the fused SwiGLU on (bias_activation_fusion). Per GPU and micro-batch:
# - moe_layer.py MoELayer.forward: the router reads the local Tr tokens (sequence parallelism is required with tp > 1
#   in training; a ValueError otherwise).
# - moe_utils.py RouterGatingLinearFunction.forward: ctx.save_for_backward(inp, weight, bias): the pre-MLP norm's
#   output (the shared experts' first linear reads the same tensor).
# - moe_utils.py topk_routing_with_score_function: torch.topk(logits, k) (TopkBackward0 keeps the int64 indices, the
#   same tensor the scatter into the routing probabilities keeps), then torch.softmax(scores, dtype=float32)
#   (SoftmaxBackward0 keeps its fp32 [Tr, K] output) cast back to the logits' dtype.
# - router.py TopKRouter.routing with an aux loss on (--moe-aux-loss-coeff > 0; the default 0.0 turns it off, Megatron-
#   LM's examples/mixtral/train_mixtral_8x7b_distributed.sh sets 1e-2): compute_routing_scores_for_aux_loss's
#   softmax over every expert, fp32 [Tr, E], kept by its backward. Counted as on: an overstatement of 4E bytes per
#   token when it is off.
# - token_dispatcher.py MoEAllGatherTokenDispatcher: token_dispatch all-gathers the tokens, the routing map and the
#   routing probabilities over the tp x ep ranks (no tensor saved: the gather's backward is a reduce-scatter);
#   dispatch_postprocess keeps the local experts' columns, E/ep of them, of T x ep gathered tokens (T x E entries) and
#   masked_select (MaskedSelectBackward0 keeps its input, in the logits' dtype, and the bool mask) picks the routed
#   tokens' weights; moe_utils.py permute (unfused) copies each routed token with index_select (IndexSelectBackward0
#   keeps the int64 indices, which the dispatcher also keeps for unpermute). Its scatter_add keeps only those indices.
# - Routed tokens per GPU: the ep ranks' T x ep tokens, top-k each, over E/ep of the experts: T x K, with routing
#   balanced (real routing is uneven; the busiest GPU holds more).
# - experts.py SequentialMLP.forward -> transformer/mlp.py MLP.forward(per_token_scale=probs): the first linear keeps
#   its input (the permuted copy, T x K x h), fused_bias_swiglu.py WeightedSwiGLUFunction.forward
#   ctx.save_for_backward(input, weights) keeps the first linear's 2f-wide output and the routing weight, the second
#   linear keeps its f-wide input. A GeLU expert cannot use the fused kernel with a routing weight (MLP.forward raises
#   unless bias_activation_fusion is off): gelu keeps its input, the weighting product its output and the weight.
# - shared_experts.py SharedExpertMLP (moe_shared_expert_intermediate_size = shared experts x their width, tensor
#   parallel like a dense MLP): the dense MLP's rows at width g.
_MEGATRON_MOE = (
    Row("mlp", "MoE layer input, the pre-MLP norm output (saved by the router's gating linear and the shared "
               "experts' first linear)", 1, "Tr h", "act"),
    Row("router", "router top-k expert indices (int64, saved by topk and the scatter)", 1, "Tr K", "int64"),
    Row("router", "router softmax over the top-k logits (fp32)", 1, "Tr K", "fp32"),
    Row("router", "router softmax over every expert for the load-balancing loss (fp32; counted as on)", 1, "Tr E",
        "fp32"),
    Row("router", "routing weights of the local experts for every gathered token (saved by masked_select)", 1, "T E",
        "act"),
    Row("router", "routing map of the local experts for every gathered token (bool, saved by masked_select)", 1,
        "T E", "bool"),
    Row("router", "permutation indices of the routed tokens (int64, saved by index_select and kept for unpermute)",
        1, "T K", "int64"),
    Row("mlp", "expert first linear input: the permuted copy of every routed token", 1, "T K h", "lin",
        "grad_mlp_in"),
    Row("mlp", "expert first linear output, gate and up (saved by the fused weighted SwiGLU)", 2, "T K f", "act",
        "swiglu"),
    Row("mlp", "expert GeLU input", 1, "T K f", "act", "gelu_fused"),
    Row("mlp", "expert GeLU output (saved by the product with the routing weight)", 1, "T K f", "act", "gelu_fused"),
    Row("mlp", "routing weight of every routed token (saved by the weighted activation)", 1, "T K", "act"),
    Row("mlp", "expert second linear input (the weighted activation output)", 1, "T K f", "lin", "grad_mlp_out"),
    Row("mlp", "shared experts' first linear output, gate and up (saved by the fused SwiGLU)", 2, "T g", "act",
        "shared_experts&swiglu"),
    Row("mlp", "shared experts' GeLU input", 1, "T g", "act", "shared_experts&gelu_fused"),
    Row("mlp", "shared experts' second linear input", 1, "T g", "lin", "shared_experts&grad_mlp_out"),
)
MEGATRON_MOE_BLOCK = (
    *_MEGATRON_ATTENTION,
    *_MEGATRON_MOE,
    Row("dropout", "MLP output dropout mask", 1, "Tr h", "bool", "dropout"),
    *LORA,
)

_QKV_AS_SAVED = (
    Row("attention", "Q, K and V as the attention op saves them", 1, "T a d", "act", "no_gqa_repeat"),
    Row("attention", "Q, K and V as the attention op saves them", 2, "T k d", "act", "no_gqa_repeat&no_latent"),
    # Latent attention (_LATENT_ATTENTION): a key per head, and the value as SDPA or eager attention keeps it.
    Row("attention", "K as the attention op saves it (latent attention: non-rotary and rotary parts copied into one "
                     "tensor per head)", 1, "T a d", "act", "latent"),
    Row("attention", "V as SDPA saves it: a view of kv_b_proj's output (the value part)", 1, "T a v", "act",
        "latent&fused"),
    Row("attention", "V as SDPA saves it: the rest of that storage (the non-rotary keys)", 1, "T a n", "act",
        "latent&fused"),
    Row("attention", "V as scores x V saves it (a copy, v wide)", 1, "T a v", "act", "latent&eager"),
    Row("attention", "Q, and K and V repeated to every query head (repeat_kv)", 3, "T a d", "act", "gqa_repeat"),
)
# A padded micro-batch under transformers' SDPA attention (transformers 5.23): masking_utils.sdpa_mask keeps the 4-D
# mask only when some key is masked beyond causality (_ignore_causal_mask_sdpa: a padding mask that is all ones, or
# none, is skipped for is_causal=True) and makes it once per forward, bool, b x 1 x s x S (the padding mask's
# (b, 1, 1, S) and the causal (1, 1, s, S) combined); integrations/sdpa_attention.py then repeats K and V to every
# query head (use_gqa_in_sdpa is false with a mask on CUDA: the 'gqa_repeat' rows above, a copy from two KV heads a
# GPU on; from one, repeat_kv's reshape is a stride-0 view and nothing is copied) and passes the mask to
# torch.nn.functional.scaled_dot_product_attention. PyTorch 2.13 (aten/src/ATen/native/transformers/attention.cpp
# scaled_dot_product_attention) converts a bool mask inside every call (convert_boolean_attn_mask: at::where to 0 and
# -inf in the query's dtype; the cuDNN backend's twin uses -65504), so each layer makes its own b x 1 x s x S copy,
# and the kernel that takes a mask, cuDNN attention or the memory-efficient kernel (FlashAttention takes none:
# sdp_utils check_for_attn_mask), saves it as attn_bias for its backward, broadcast over the heads (preprocess_mask
# expands a stride-0 view after padding rows to a multiple of 8 keys when S is not one: not counted). Measured on CPU
# (CPU flash attention saves the converted mask the same way): the '-padded' cases of content/validation/
# activations.json, and tests/test_padded.py.
_PADDING_MASK = (
    Row("attention", "padding mask as the attention kernel saves it (converted to the activation dtype in each layer)",
        1, "b s S", "act", "padding_mask", True),
)

# transformers GPT2Block (LayerNorm, Conv1D, eager or SDPA attention, dropout).
HF_GPT2_BLOCK = (
    *_fp32_under_autocast("norms", "ln_1 input (the residual stream)", 1, "Tr h"),
    Row("norms", "ln_1 mean and rstd (fp32)", 2, "Tr", "fp32"),
    Row("attention", "c_attn input (ln_1 output)", 1, "Tr h", "lin", "grad_qkv"),
    *_QKV_AS_SAVED,
    *_PADDING_MASK,
    *CORE_16BIT_SOFTMAX,
    Row("attention", "c_proj input (merged heads)", 1, "T a d", "act", "grad_o&o_input_kept"),
    Row("attention", "c_proj input, quantised copy", 1, "T a d", "lin", "grad_o&o_input_quantised"),
    Row("dropout", "residual dropout mask after attention", 1, "Tr h", "bool", "dropout"),
    *_fp32_under_autocast("norms", "ln_2 input (the residual stream)", 1, "Tr h"),
    Row("norms", "ln_2 mean and rstd (fp32)", 2, "Tr", "fp32"),
    Row("mlp", "c_fc input (ln_2 output)", 1, "Tr h", "lin", "grad_mlp_in"),
    *MLP_INNER,
    Row("dropout", "residual dropout mask after the MLP", 1, "Tr h", "bool", "dropout"),
    *LORA,
)


def _rmsnorm(name: str, group: str = "norms", rows: str = "Tr", width: str = "h", condition: str = "",
             residual: bool = True) -> tuple[Row, ...]:
    """transformers LlamaRMSNorm (Qwen3RMSNorm, DeepseekV2RMSNorm and DeepseekV3RMSNorm are the same code):
    x.to(fp32), pow, mean, rsqrt, multiply, cast back, times weight. `rows` are the vectors normalised (the rsqrt's
    shape), each `width` wide. A norm on the residual stream (`residual`) reads an fp32 input under autocast, so its
    cast back is fp32 there; one on a projection's output (Qwen3's q/k norms, latent attention's) reads the autocast
    dtype and casts back to it."""
    both = condition + "&" if condition else ""
    cast = f"{name}: normalised input cast back to the input's dtype (saved by weight x)"
    # gpt-oss's GptOssRMSNorm (modeling_gpt_oss.py): (self.weight * hidden_states).to(input_dtype), the product
    # taken on the fp32 normalised input, which the product keeps for the weight's gradient, then cast back.
    kept = "grad_norm&no_fp32_norm_product"
    return (
        Row(group, f"{name}: input in fp32 (saved by pow and the multiply)", 1, f"{rows} {width}", "fp32", condition),
        Row(group, f"{name}: rsqrt of the mean square (fp32)", 1, rows, "fp32", condition),
        *(_fp32_under_autocast(group, cast, 1, f"{rows} {width}", both + kept) if residual
          else (Row(group, cast, 1, f"{rows} {width}", "act", both + kept),)),
        Row(group, f"{name}: normalised input in fp32 (saved by weight x, which gpt-oss takes before casting back)", 1,
            f"{rows} {width}", "fp32", both + "grad_norm&fp32_norm_product"),
    )


# transformers 5.23's MoE blocks (modeling_mixtral.py MixtralSparseMoeBlock, modeling_qwen2_moe.py
# Qwen2MoeSparseMoeBlock, modeling_qwen3_moe.py Qwen3MoeSparseMoeBlock, modeling_deepseek_v2.py DeepseekV2Moe,
# modeling_deepseek_v3.py DeepseekV3MoE) under PyTorch 2.13 autograd, with the experts implementation transformers
# 5.23 picks when none is asked for: 'grouped_mm' (modeling_utils.py PreTrainedModel.get_correct_experts_implementation;
# integrations/moe.py grouped_mm_experts_forward over the fused 3-D gate_up_proj and down_proj). Measured tensor by
# tensor on CPU for each block (content/validation/moe.json; tests/test_validation.py).
# - The routers. Mixtral (MixtralTopKRouter): the linear saves the norm output, softmax(logits.float()) keeps its fp32
#   [T, E] output, topk its int64 indices, and the in-place division by the top-k sum keeps that sum and a copy of the
#   weights before it (autograd's original-self copy). Qwen (Qwen2MoeTopKRouter, Qwen3MoeTopKRouter): the same, the
#   division only when norm_topk_prob, then .to(router_logits.dtype) casts the weights to the activation dtype.
#   DeepSeek-V2 (DeepseekV2TopkRouter): F.linear(hidden_states.type(float32), weight.type(float32)) saves fp32 copies of
#   its input and weight below fp32, softmax keeps its fp32 output, topk its indices; no renormalisation (norm_topk_prob
#   is not read), the routed scaling multiplies by a number (nothing saved); group_limited_greedy's masked_fill keeps its
#   [T, E] bool mask (the group maximum and the group top-k feed only that mask, whose branch dies with the forward's
#   locals). DeepSeek-V3 (DeepseekV3TopkRouter): the fp32 linear, sigmoid keeps its fp32 output (the gather keeps it
#   too), the gather keeps the top-k indices, the division (norm_topk_prob) its sum and copy; the group selection
#   feeds only the indices, so what its ops save is freed when the forward returns (the harness counts the tensors
#   the loss's graph still holds).
# - grouped_mm_experts_forward: hidden_states[perm // top_k], sample_weights[perm] and weighted_out[inv_perm] keep
#   three int64 [T x K] indices; both grouped matmuls keep the int32 offsets (one tensor of E); the first keeps its
#   sorted input, T x K rows of h; _default_apply_gate's chunk gives SiLU and the product views of one [T x K, 2f]
#   output (one storage, counted as the two rows below), the product keeps SiLU's output, the second grouped matmul its
#   f-wide input, and proj_out * sample_weights keeps the experts' outputs and the sorted routing weights (fp32 but
#   for Qwen's cast). Every routed pair is a row whatever the routing: T x K rows, however uneven.
# - Shared experts: DeepSeek's shared_experts (DeepseekV2MLP of moe_intermediate_size x n_shared_experts) and Qwen2-MoE's
#   shared_expert (Qwen2MoeMLP of shared_expert_intermediate_size) are LlamaMLPs on the norm output: the dense rows at
#   width g. Qwen2-MoE gates it: sigmoid(shared_expert_gate(x)) * shared_expert_output keeps the [T, 1] sigmoid output
#   and the shared expert's output.
# The norm output the router and the shared experts read is the block's 'gate/up projection input' row. Named
# simplification: DeepSeek's router keeps only its fp32 copy below fp32, so a DeepSeek layer without shared experts
# would not keep the 16-bit norm output that row counts (no released DeepSeek model has none).
_HF_MOE = (
    Row("router", "router input cast to fp32 (DeepSeek's router linear runs in fp32)", 1, "Tr h", "fp32",
        "router_fp32"),
    Row("router", "router weight cast to fp32 (saved by DeepSeek's fp32 router linear)", 1, "E h", "fp32",
        "router_fp32"),
    Row("router", "router scores over every expert (fp32: the softmax, or DeepSeek-V3's sigmoid)", 1, "T E", "fp32",
        "no_gpt_oss_moe"),
    Row("router", "group-limited routing mask (bool, saved by masked_fill)", 1, "T E", "bool", "group_limited"),
    Row("router", "top-k expert indices (int64)", 1, "T K", "int64"),
    Row("router", "top-k routing weights before renormalising (fp32, kept by the in-place division)", 1, "T K",
        "fp32", "topk_renormalised"),
    Row("router", "sum of the top-k routing weights (fp32, the divisor)", 1, "T", "fp32", "topk_renormalised"),
    Row("router", "gpt-oss: softmax over the top-k logits, in their dtype (saved by its backward)", 1, "T K", "act",
        "gpt_oss_moe"),
    Row("router", "routed pairs' token index, sort order and its inverse (int64, saved by three gathers)", 3, "T K",
        "int64"),
    Row("router", "gpt-oss: the sorted pairs' expert ids (int64, saved by the two bias gathers)", 1, "T K", "int64",
        "gpt_oss_moe"),
    Row("router", "routed pairs per expert, cumulated (int32, saved by both grouped matmuls)", 1, "E", "int32"),
    Row("mlp", "expert inputs gathered per routed token, sorted by expert", 1, "T K h", "lin"),
    Row("mlp", "SiLU input (gate half of the first grouped matmul's output)", 1, "T K f", "act", "no_gpt_oss_moe"),
    Row("mlp", "SiLU output (factor of the product)", 1, "T K f", "act", "no_gpt_oss_moe"),
    Row("mlp", "up half of the first grouped matmul's output (factor of the product)", 1, "T K f", "act",
        "no_gpt_oss_moe"),
    # gpt-oss's GptOssExperts._apply_gate: gate and up are strided halves of the first grouped matmul's output, each
    # clamped (both clamps keep that storage), gate * sigmoid(gate * alpha) keeps the clamped gate and the sigmoid's
    # output, (up + 1) * glu keeps both factors.
    Row("mlp", "gpt-oss: the first grouped matmul's output, gate and up interleaved (saved by both clamps)", 2,
        "T K f", "act", "gpt_oss_moe"),
    Row("mlp", "gpt-oss: the clamped gate (factor of gate x sigmoid)", 1, "T K f", "act", "gpt_oss_moe"),
    Row("mlp", "gpt-oss: sigmoid(gate x alpha) (its output, factor of the product)", 1, "T K f", "act", "gpt_oss_moe"),
    Row("mlp", "gpt-oss: the clamped up + 1 and the gated product glu (factors of the last product)", 2, "T K f",
        "act", "gpt_oss_moe"),
    Row("mlp", "down projection input (the product)", 1, "T K f", "lin"),
    Row("mlp", "routing weight of every routed pair, sorted (fp32, saved by the weighting product)", 1, "T K", "fp32",
        "routing_weights_fp32"),
    Row("mlp", "routing weight of every routed pair, sorted (in the activation dtype: Qwen's cast, gpt-oss's softmax; "
               "saved by the weighting product)",
        1, "T K", "act", "routing_weights_cast"),
    Row("mlp", "expert outputs before routing-weight scaling", 1, "T K h", "act"),
    Row("mlp", "shared experts' SiLU input (gate projection output)", 1, "T g", "act", "shared_experts"),
    Row("mlp", "shared experts' SiLU output (factor of the product)", 1, "T g", "act", "shared_experts"),
    Row("mlp", "shared experts' up projection output (factor of the product)", 1, "T g", "act", "shared_experts"),
    Row("mlp", "shared experts' down projection input (the product)", 1, "T g", "lin",
        "shared_experts&grad_mlp_out"),
    Row("mlp", "shared expert gate's sigmoid output", 1, "T", "act", "shared_expert_gate"),
    Row("mlp", "shared expert's output (saved by the gate's product)", 1, "T h", "act", "shared_expert_gate"),
)

# Qwen3's q/k norms (transformers 5.23 models/qwen3/modeling_qwen3.py Qwen3Attention.forward, the same in
# models/qwen3_moe/modeling_qwen3_moe.py): q_norm(q_proj(x).view(..., head_dim)) and k_norm(k_proj(x).view(...)), a
# Qwen3RMSNorm over each head's head_dim, before rotary. Each saves what a Llama RMSNorm saves, per head: its input in
# fp32 (in an fp32 model the projection's output itself; below fp32, or under autocast, whose projections return
# bf16, a new fp32 copy), the rsqrt (one per token and head) and the normalised input cast back (saved by the weight's
# product; gone when the weight is frozen). Rotary then multiplies by the shared cos and sin, saving nothing of q and
# k. Measured on CPU: the qwen3 and qwen3_moe cases of content/validation/moe.json (tests/test_attention_variants.py).
_QK_NORMS = (*_rmsnorm("q_norm", rows="T a", width="d", condition="qk_norm", residual=False),
             *_rmsnorm("k_norm", rows="T k", width="d", condition="qk_norm", residual=False))

# DeepSeek's multi-head latent attention (transformers 5.23 models/deepseek_v2/modeling_deepseek_v2.py and
# models/deepseek_v3/modeling_deepseek_v3.py, DeepseekV2Attention / DeepseekV3Attention forward and expand_kv).
# Symbols: c kv_lora_rank, q q_lora_rank, p qk_rope_head_dim, n qk_nope_head_dim (d - p), v v_head_dim; d the
# query/key head width n + p. q_proj (or, with q_lora_rank, q_a_proj) and kv_a_proj_with_mqa read the input norm's
# output (the shared projection input row). With q_lora_rank: q_a_layernorm (an RMSNorm over q) and q_b_proj's input.
# kv_a_proj_with_mqa's output (c + p wide) is split: kv_a_layernorm normalises the latent (c), whose fp32 input in an
# fp32 model is a view of that output, so its storage holds the rotary key too; kv_b_proj reads the normalised latent
# and returns each head's non-rotary key and value (n + v). Rotary (V2's complex product, V3's cos/sin products) saves
# only the shared tables. The query is a new tensor (torch.cat of its parts), the key too (new_empty, then the copies),
# the value a view of kv_b_proj's output: SDPA saves query and key (d wide) and the value's whole storage (n + v);
# eager attention's scores x V copies the value (v). The fused kernel's output follows the query's layout (heads
# first), so o_proj's input (v) is a copy (`.transpose(1, 2).contiguous()`). Measured on CPU: the deepseek cases of
# content/validation/moe.json (tests/test_attention_variants.py).
_LATENT_ATTENTION = (
    *_rmsnorm("q_a_layernorm", rows="T", width="q", condition="q_lora", residual=False),
    Row("attention", "q_b_proj input (q_a_layernorm output)", 1, "T q", "lin", "grad_qkv&q_lora"),
    *_rmsnorm("kv_a_layernorm", rows="T", width="c", condition="latent", residual=False),
    Row("norms", "kv_a_layernorm: the rotary key beside its input, one storage in an fp32 model (kv_a_proj_with_mqa's "
                 "output)", 1, "T p", "fp32", "latent&fp32_projections"),
    Row("attention", "kv_b_proj input (kv_a_layernorm output)", 1, "T c", "lin", "grad_qkv&latent"),
)

# Phi-3 and Phi-4 (transformers 5.23 models/phi3/modeling_phi3.py, Phi3Attention.forward and Phi3MLP.forward under
# PyTorch 2.13 autograd): the Llama layer but for two fused projections. qkv = qkv_proj(x) is one tensor of (a + 2k) d
# a token, sliced into q, k and v (views). Rotary (apply_rotary_pos_emb: torch.cat of the rotated part and the pass-
# through part) makes q and k new tensors, heads first in memory; v stays a view of qkv. A fused kernel saves V as it is
# given, so the whole of qkv stays alive (its Q and K parts too) wherever K and V are not copied to every query head
# (repeat_kv copies them; eager attention's matmul copies V anyway). The kernel's output follows the query's layout
# (PyTorch's CPU flash kernel and CUDA flash_api.cpp mha_fwd: out = empty_like(q)), heads first, so
# attn_output.transpose(1, 2).contiguous() is a copy, which o_proj saves beside the kernel's own output; the memory-
# efficient kernel (the one a mask selects: sdp_utils check_for_attn_mask rules FlashAttention out) returns
# batch x tokens x heads x d (attention.cu _efficient_attention_forward) and nothing is copied. Phi3MLP: gate_up_proj's
# output (2f) is chunked into gate and up (views); SiLU saves gate and the product saves up, the one 2f storage, the
# same bytes as Llama's two outputs. Under autocast (or a recipe) each Linear casts its input once: one cast for q, k
# and v, one for gate and up. Measured on CPU against the Llama layer of the same shape (tests/test_phi3.py).
_PHI3_ATTENTION = (
    Row("attention", "qkv_proj's output beyond V: its Q and K parts, kept by V's view (Phi-3)", 1, "T a d", "act",
        "qkv_view"),
    Row("attention", "qkv_proj's output beyond V: its Q and K parts, kept by V's view (Phi-3)", 1, "T k d", "act",
        "qkv_view"),
    Row("attention", "attention output as the fused kernel saves it, heads first (Phi-3: o_proj reads a copy)", 1,
        "T a d", "act", "o_copy&grad_o"),
    Row("attention", "o_proj input, the copy LoRA's lora_A on o saves as it is (Phi-3)", 1, "T a d", "act",
        "o_copy_adapter"),
)

# transformers Llama / Mistral / Qwen2 decoder layer (RMSNorm, SwiGLU, rotary, GQA), with Qwen3's q/k norms,
# DeepSeek's latent attention and Phi-3's fused projections where the architecture has them.
HF_LLAMA_BLOCK = (
    *_rmsnorm("input_layernorm"),
    Row("attention", "q/k/v projection input (RMSNorm output)", 1, "Tr h", "lin", "grad_qkv&shared_input"),
    Row("attention", "q, k and v projection inputs, each cast by autocast or quantised by a recipe", 3, "Tr h", "lin",
        "grad_qkv&separate_inputs&no_latent&unfused_projections"),
    Row("attention", "qkv_proj input, cast by autocast or quantised by a recipe (Phi-3: one layer)", 1, "Tr h", "lin",
        "grad_qkv&separate_inputs&fused_projections"),
    Row("attention", "q and kv_a_proj_with_mqa inputs, each cast by autocast or quantised by a recipe", 2, "Tr h",
        "lin", "grad_qkv&separate_inputs&latent"),
    *_QK_NORMS,
    *_LATENT_ATTENTION,
    *_QKV_AS_SAVED,
    *_PHI3_ATTENTION,
    *_PADDING_MASK,
    *CORE_FP32_SOFTMAX,
    Row("attention", "attention output as the fused kernel returns it (heads first, the query's layout)", 1, "T a v",
        "act", "latent&fused"),
    Row("attention", "o_proj input (merged heads)", 1, "T a d", "act", "grad_o&o_input_kept&no_latent"),
    Row("attention", "o_proj input, quantised copy", 1, "T a d", "lin", "grad_o&o_input_quantised&no_latent"),
    Row("attention", "o_proj input (merged heads, v wide)", 1, "T a v", "act", "grad_o&o_input_kept&latent"),
    Row("attention", "o_proj input, quantised copy (v wide)", 1, "T a v", "lin", "grad_o&o_input_quantised&latent"),
    *_rmsnorm("post_attention_layernorm"),
    Row("mlp", "gate/up projection input (RMSNorm output)", 1, "Tr h", "lin", "grad_mlp_in&shared_input"),
    Row("mlp", "gate and up projection inputs, each cast by autocast or quantised by a recipe", 2, "Tr h", "lin",
        "grad_mlp_in&separate_inputs&unfused_projections"),
    Row("mlp", "gate_up_proj input, cast by autocast or quantised by a recipe (Phi-3: one layer)", 1, "Tr h", "lin",
        "grad_mlp_in&separate_inputs&fused_projections"),
    *MLP_INNER,
    *LORA,
)
# transformers' MoE decoder layers: the Llama layer with an MoE block for its MLP. DeepSeek's first
# first_k_dense_replace layers keep a dense MLP of intermediate_size (modeling_deepseek_v2.py DeepseekV2DecoderLayer,
# modeling_deepseek_v3.py DeepseekV3DecoderLayer: DeepseekV2MLP / DeepseekV3MLP, a LlamaMLP, below that index): the
# Llama layer's MLP rows at width F, in those layers only, and the MoE block's rows in the others (Row.layers).
_FIRST_DENSE_MLP = tuple(r._replace(op=f"first dense layers: {r.op}", shape=r.shape.replace("f", "F"),
                                    condition=f"{r.condition}&first_dense", layers="dense")
                         for r in HF_LLAMA_BLOCK if r.condition in ("swiglu_unfused", "swiglu&grad_mlp_out"))
HF_MOE_BLOCK = (tuple(r for r in HF_LLAMA_BLOCK if not r.condition.startswith("swiglu")) + _FIRST_DENSE_MLP
                + tuple(r._replace(layers="moe") for r in _HF_MOE))

# Non-layer parts. Embedding backward needs the token ids; the loss keeps the fp32
# log-softmax (transformers ForCausalLMLoss upcasts logits.float()) and int64 labels. A compiled loss
# (torch.compile fuses the upcast and the log-softmax) keeps the logits themselves and a per-token logsumexp
# (measured: Cut Cross-Entropy's README, torch.compile row); torchtune's chunked loss keeps every chunk's
# log-probabilities, as many in all, and with each chunk's upcast and cross-entropy compiled (torchtune's
# compile_loss) every chunk's logits, its row max and the log of its sum of exponentials (measured on CPU, PyTorch
# 2.13: inductor's graph saves both per-token values); Liger Kernel's fused linear cross-entropy
# (liger_kernel/ops/fused_linear_cross_entropy.py) computes the lm_head input's and weight's gradients chunk by
# chunk in the forward and keeps them for backward, never the logits.
FIRST_STAGE = (
    Row("embedding", "token ids for the embedding backward (int64)", 1, "T", "int64"),
    Row("embedding", "position ids (int64)", 1, "s", "int64", "learned_positions"),
    Row("embedding", "embedding dropout mask (GPT-2 embd_pdrop)", 1, "Tr h", "bool", "dropout&embedding_dropout"),
    # Shared by every layer, so counted once: rotary cos and sin of shape (1, s, d) each. Latent attention rotates
    # only p of each head: DeepSeek-V3's cos and sin are (1, s, p) (its interleaved rotary multiplies by slices of
    # them, one storage each); DeepSeek-V2's rotary is one complex64 table freqs_cis (1, s, p/2), 4 bytes per p
    # whatever the activation dtype (modeling_deepseek_v2.py DeepseekV2RotaryEmbedding.forward, apply_rotary_emb).
    *_fp32_under_autocast("embedding", "rotary cos and sin (shared by every layer)", 2, "s d",
                          "rotary&no_latent&no_half_rotary"),
    # gpt-oss's rotary (modeling_gpt_oss.py GptOssRotaryEmbedding.forward, _apply_rotary_emb): cos and sin of half the
    # head each, (1, s, d/2), multiplied into both halves.
    *_fp32_under_autocast("embedding", "rotary cos and sin of half the head each (gpt-oss; shared by every layer)", 1,
                          "s d", "rotary&half_rotary"),
    *_fp32_under_autocast("embedding", "rotary cos and sin of the rotary part (shared by every layer)", 2, "s p",
                          "latent&rotary_real"),
    Row("embedding", "rotary table of the rotary part as complex numbers (complex64, shared by every layer)", 1,
        "s p", "fp32", "latent&rotary_complex"),
    # Checkpointed layers keep their tensor arguments: the 4-D causal mask eager attention
    # gets (b x 1 x s x S) and, for rotary models, the position ids. Shared by every layer.
    *_fp32_under_autocast("embedding", "4-D causal mask kept as a checkpoint input (made in the weights' dtype)",
                          1, "b s S", "eager&full_recompute"),
    Row("embedding", "position ids kept as a checkpoint input (int64)", 1, "s", "int64", "rotary&full_recompute"),
    # SDPA's 4-D padding mask (bool, made once per forward: masking_utils.sdpa_mask) is an argument of every
    # checkpointed layer, kept by the checkpoint (measured on CPU: tests/test_padded.py).
    Row("embedding", "4-D padding mask kept as a checkpoint input (bool)", 1, "b s S", "bool",
        "padding_mask&full_recompute&batch_mask"),
    # A sliding window's mask without padding is one s x S mask expanded over the batch (a stride-0 view: measured
    # on CPU, tests/test_phi3.py).
    Row("embedding", "4-D sliding-window mask kept as a checkpoint input (bool, one for every sequence)", 1, "s S",
        "bool", "padding_mask&full_recompute&shared_mask"),
    # A compiled eager attention that recomputes its softmax keeps the 4-D causal mask (shared by every layer).
    *_fp32_under_autocast("embedding", "4-D causal mask kept by the compiled layers (made in the weights' dtype)", 1,
                          "b s S", "compiled_scores&no_full_recompute"),
)
# An adapter on the output layer (lora_targets lm_head: PEFT's lora.Linear around transformers' lm_head, or torchtune's
# LoRALinear output_proj, LORA above has both forwards): the frozen base saves no input, so lora_A's input, the final
# norm's output (its fp32 cast under PEFT; under torchtune the tensor itself, which nothing else saves once the output
# layer is frozen), is its own; lora_B saves lora_A's T x r output. torchtune's chunked output calls the layer once a
# chunk: the chunks' inputs are views of one tensor, their lora_A outputs T x r in all.
HEAD_LORA = _lora_rows("head_lora", "lm_head", "Tr h")
_HEAD_AND_LOSS = (
    Row("final_norm", "lm_head input (final norm output)", 1, "Tr h", "act", "grad_head&no_loss_fused_linear"),
    *HEAD_LORA,
    Row("loss", "log_softmax output (fp32 logits upcast)", 1, "T V", "fp32", "loss_logprobs"),
    Row("loss", "logits kept for the compiled loss's backward", 1, "T V", "act", "loss_compiled"),
    Row("loss", "per-token logsumexp (fp32)", 1, "T", "fp32", "loss_compiled"),
    Row("loss", "per-token row max (fp32), saved beside the log-sum by each compiled chunk", 1, "T", "fp32",
        "loss_chunked_compiled"),
    Row("loss", "gradient of the lm_head input, made in the forward", 1, "T h", "act", "loss_fused_linear"),
    Row("loss", "lm_head weight gradient, made in the forward", 1, "V h", "grad", "loss_fused_linear&grad_head"),
    Row("loss", "shifted labels (int64)", 1, "T", "int64"),
    Row("loss", "NLL loss total weight (fp32 scalar)", 1, "", "fp32"),
)
LAST_STAGE_LAYERNORM = (
    *_fp32_under_autocast("final_norm", "ln_f input (the residual stream)", 1, "Tr h"),
    Row("final_norm", "ln_f mean and rstd (fp32)", 2, "Tr", "fp32"),
    *_HEAD_AND_LOSS,
)
LAST_STAGE_RMSNORM = (*_rmsnorm("final norm", "final_norm"), *_HEAD_AND_LOSS)

# torch.compile over a transformers layer ------------------------------------------------------------------
# torch.compile (PyTorch 2.13, the default inductor backend) traces a layer's forward and backward into one joint
# graph, and AOTAutograd's min-cut rematerialisation partitioner (torch/_functorch/partitioners.py,
# min_cut_rematerialization_partition) chooses what the forward hands the backward: the cheapest set of tensors from
# which the backward can recompute everything else. Pointwise ops and reductions (norms, GeLU, SiLU, casts, adds,
# rotary) may be recomputed; matrix multiplies, attention kernels and random ops (dropout's mask) may not. These
# rows are what it saves, measured tensor by tensor on CPU (see the Validation page); the ops fused into one kernel
# save nothing of their own.
_COMPILED_CORE = (
    Row("attention", "fused kernel: logsumexp per head and row (fp32)", 1, "b a s", "fp32", "fused", True),
    # Eager attention: the partitioner keeps the softmax output (in the activation dtype) and recomputes the rest.
    Row("attention_scores", "softmax output (in the activation dtype)", 1, "b a s S", "act", "eager", True),
    # An fp32 softmax over 16-bit scores (Llama's softmax(dtype=float32), or autocast's fp32 mask): the fp32
    # softmax is recomputed from the 16-bit scores, the causal mask and the softmax's row max and sum.
    Row("attention_scores", "scores in the activation dtype (the fp32 softmax is recomputed from them)", 1,
        "b a s S", "act", "compiled_scores", True),
    Row("attention_scores", "softmax row max and sum (fp32)", 2, "b a s", "fp32", "compiled_scores", True),
    Row("attention_scores", "attention dropout mask", 1, "b a s S", "bool", "eager&dropout", True),
    # Where the softmax is recomputed anyway, so is the dropout output (from the mask); otherwise it is kept.
    Row("attention_scores", "attention dropout output (input of scores x V)", 1, "b a s S", "act",
        "eager&dropout&no_compiled_scores", True),
)

HF_GPT2_BLOCK_COMPILED = (
    *_fp32_under_autocast("norms", "ln_1 input (the residual stream)", 1, "Tr h"),
    *_fp32_under_autocast("norms", "ln_1 mean and rstd (in the residual stream's dtype)", 2, "Tr"),
    Row("attention", "c_attn input (ln_1 output)", 1, "Tr h", "lin", "grad_qkv"),
    Row("attention", "Q, K and V as the attention op saves them", 3, "T a d", "act"),
    *_COMPILED_CORE,
    # A fused kernel's output, which its backward needs anyway; the merged copy c_proj reads is recomputed from it.
    Row("attention", "c_proj input (merged heads; a fused kernel's output)", 1, "T a d", "act"),
    Row("dropout", "residual dropout mask after attention", 1, "Tr h", "bool", "dropout"),
    # Under autocast the fp32 residual stream is recomputed from the attention output projection's 16-bit output.
    Row("norms", "ln_2 input (the residual stream)", 1, "Tr h", "act", "no_autocast"),
    Row("norms", "attention output projection output (ln_2's fp32 input is recomputed from it)", 1, "Tr h", "act",
        "autocast"),
    *_fp32_under_autocast("norms", "ln_2 mean and rstd (in the residual stream's dtype)", 2, "Tr"),
    Row("mlp", "c_fc input (ln_2 output)", 1, "Tr h", "lin", "grad_mlp_in"),
    # GeLU is fused: its input is kept and its output (the second linear's input); the tanh and the factors of the
    # Python-written GeLU are recomputed.
    Row("mlp", "GeLU input (c_fc output)", 1, "T f", "act"),
    Row("mlp", "second MLP linear input (GeLU output)", 1, "T f", "lin", "grad_mlp_out"),
    Row("dropout", "residual dropout mask after the MLP", 1, "Tr h", "bool", "dropout"),
)

HF_LLAMA_BLOCK_COMPILED = (
    # RMSNorm fused: its input and the rsqrt are kept, the fp32 copy and the normalised product recomputed.
    *_fp32_under_autocast("norms", "input_layernorm: layer input (the residual stream)", 1, "Tr h"),
    Row("norms", "input_layernorm: rsqrt of the mean square (fp32)", 1, "Tr", "fp32"),
    Row("attention", "q/k/v projection input (RMSNorm output)", 1, "Tr h", "lin", "grad_qkv"),
    Row("attention", "Q, K and V as the attention kernel saves them", 1, "T a d", "act", "no_gqa_repeat"),
    Row("attention", "Q, K and V as the attention kernel saves them", 2, "T k d", "act", "no_gqa_repeat"),
    Row("attention", "Q, and K and V repeated to every query head (repeat_kv)", 3, "T a d", "act", "gqa_repeat"),
    *_COMPILED_CORE,
    Row("attention", "o_proj input (merged heads; a fused kernel's output)", 1, "T a d", "act"),
    # Under autocast the fp32 residual stream is recomputed from o_proj's 16-bit output.
    Row("norms", "post_attention_layernorm input (the residual stream)", 1, "Tr h", "act", "no_autocast"),
    Row("norms", "o_proj output (post_attention_layernorm's fp32 input is recomputed from it)", 1, "Tr h", "act",
        "autocast"),
    Row("norms", "post_attention_layernorm: rsqrt of the mean square (fp32)", 1, "Tr", "fp32"),
    Row("mlp", "gate/up projection input (RMSNorm output)", 1, "Tr h", "lin", "grad_mlp_in"),
    # SwiGLU fused: the SiLU output is recomputed from the gate projection's output.
    Row("mlp", "SiLU input (gate projection output)", 1, "T f", "act"),
    Row("mlp", "up projection output (factor of the product)", 1, "T f", "act"),
    Row("mlp", "down projection input (the product)", 1, "T f", "lin", "grad_mlp_out"),
    # LoRA adapters (torchtune's, the only ones compiled: builder.model.checks): the partitioner keeps what eager code
    # saves, lora_A's input (one tensor per shared input; o's is the kernel output above) and lora_A's output
    # (measured on CPU: tests/test_lora_torchtune.py).
    *LORA_ADAPTERS,
)

# torchtitan's per-op selective activation checkpointing (torchtitan/distributed/activation_checkpoint.py at commit
# b5bcd76, SelectiveAC._wrap_block and its _get_custom_policy; the same rule as _apply_ac_to_transformer_block's
# _custom_policy in torchtitan/parallelisms/parallelize_llama.py at ba24697, December 2024): every transformer block is
# wrapped in ptd_checkpoint_wrapper with create_selective_checkpoint_contexts(policy), the policy's counter fresh for
# each call of the block. It MUST_SAVEs the outputs of the ops of _get_default_save_ops() (get_default_op_list().
# compute_intensive_ops: aten.mm, addmm, bmm, the SDPA flash and efficient kernels, _scaled_mm; aten.linear, aten.max,
# flex_attention, topk, reduce_scatter_tensor, all_to_all_single), except every second aten.mm / aten.linear (the count
# is incremented before the test `meta[mm_count_key] % 2 == 0`: the 1st, 3rd, 5th and 7th mm of a block are saved, the
# 2nd, 4th and 6th recomputed), and PREFER_RECOMPUTEs every other op. The checkpoint wrapper keeps the block's input
# (the 'activations/checkpoint' part, as under full recomputation). So a Llama-style block (torchtitan's Attention with
# separate wq, wk, wv, then wo, and FeedForward w2(F.silu(w1(x)) * w3(x)); transformers' LlamaAttention calls q_proj,
# k_proj, v_proj, then o_proj, and LlamaMLP down_proj(act_fn(gate_proj(x)) * up_proj(x)), gate before up) keeps, per
# GPU and micro-batch:
#   mm 1 q (saved), mm 2 k (recomputed), mm 3 v (saved), the attention kernel's outputs (saved), mm 4 o (recomputed),
#   mm 5 gate / w1 (saved), mm 6 up / w3 (recomputed), mm 7 down / w2 (saved).
# Tensor parallelism (torchtitan's plan: q, k, v, gate and up column-parallel, o and down row-parallel): the column-
# parallel outputs are per rank (/t, as the symbols say); a row-parallel mm's local output is the rank's partial sum,
# T x h in full before the reduction, so down's (the 7th mm, saved) counts T x h on every rank. Under sequence
# parallelism DTensor turns that partial sum into Tr x h with _c10d_functional.reduce_scatter_tensor, which the policy
# saves too (comm ops): o's and down's reduce-scatter outputs, Tr x h each. Without sequence parallelism the reduction
# is an all-reduce, which the policy recomputes (re-runs in the backward). The projections are bias-free (nn.Linear
# without bias: aten.mm; a bias would make aten.addmm, saved but not counted, which the checks refuse).
# Named simplifications: the flash kernel's philox seed and offset (two scalars) are not counted; the logsumexp is
# b x a x s fp32, as FlashAttention's (the memory-efficient kernel pads its rows to a multiple of 32).
# `shared` names the rows the recomputed layer's autograd saves again as the same tensor (the cache hands the recompute
# the kept output, which the backward then holds): V (the attention op saves v_proj's output as it is), the kernel's
# output (o_proj's input, the merged heads a view of it) and logsumexp, and the gate output (SiLU's input).
TORCHTITAN_OP_SAC = (
    Row("op_outputs", "q projection output (1st matmul of the block: saved)", 1, "T a d", "act"),
    Row("op_outputs", "v projection output (3rd matmul: saved)", 1, "T k d", "act"),
    Row("op_outputs", "attention kernel output (SDPA flash or efficient: saved)", 1, "T a d", "act"),
    Row("op_outputs", "attention kernel logsumexp per head and row (fp32: saved)", 1, "b a s", "fp32"),
    Row("op_outputs", "gate projection output (5th matmul: saved)", 1, "T f", "act"),
    Row("op_outputs", "down projection output (7th matmul: saved; under tensor parallelism each rank's partial sum, "
                      "T x h before the reduction)", 1, "T h", "act"),
    Row("op_outputs", "o projection's reduce-scatter output (sequence parallelism: saved as a comm op)", 1, "Tr h",
        "act", "sac_reduce_scatter"),
    Row("op_outputs", "down projection's reduce-scatter output (sequence parallelism: saved as a comm op)", 1, "Tr h",
        "act", "sac_reduce_scatter"),
)
# The rows of TORCHTITAN_OP_SAC the recomputed layer's autograd saves again (see above), by op.
TORCHTITAN_OP_SAC_SHARED = ("v projection output (3rd matmul: saved)",
                            "attention kernel output (SDPA flash or efficient: saved)",
                            "attention kernel logsumexp per head and row (fp32: saved)",
                            "gate projection output (5th matmul: saved)")
# Made after the instant of a checkpointed forward's MLP product (the 'layer_forward' moments): down's output and its
# reduce-scatter output.
TORCHTITAN_OP_SAC_AFTER_PRODUCT = (
    "down projection output (7th matmul: saved; under tensor parallelism each rank's partial sum, T x h before the "
    "reduction)",
    "down projection's reduce-scatter output (sequence parallelism: saved as a comm op)")

BLOCKS = {
    "megatron": MEGATRON_BLOCK,
    "megatron-moe": MEGATRON_MOE_BLOCK,
    "hf-gpt2": HF_GPT2_BLOCK,
    "hf-llama": HF_LLAMA_BLOCK,
    "hf-moe": HF_MOE_BLOCK,
    "hf-gpt2-compiled": HF_GPT2_BLOCK_COMPILED,
    "hf-llama-compiled": HF_LLAMA_BLOCK_COMPILED,
}


# ---------------------------------------------------------------------------------------
# Moments inside the last layer: what a layer's own forward and backward add for an instant
# ---------------------------------------------------------------------------------------

class Moment(NamedTuple):
    """One instant inside the last layer's forward or backward, when the layer's own temporaries peak.

    At that instant the layer's saved tensors up to and including the row `anchor` (an op of the
    block's list) are live, and those after it are not: in the forward they are not made yet, in
    the backward autograd has already freed them (a node's saved tensors go once it has run). The
    `temporaries` are rows like the op lists' (dtype 'grad' is the gradient dtype): the tensors
    that exist only at that instant, and in the backward the weight gradients the layer has made
    by then."""

    phase: str  # 'layer_forward', 'layer_backward' or 'final_norm_backward' (builder.model.step.PHASES)
    op: str  # the instant, in words
    condition: str  # when the moment exists ('' always), as Row.condition
    anchor: str  # the op of the last live row of the block ('': a moment outside it, every row saved)
    temporaries: tuple[Row, ...]
    # Rows of FIRST_STAGE that every layer saves (the rotary tables) and that the first layer's backward has freed by
    # this instant: gone in the first layer's moment, still held (by the layers before) in the last layer's.
    first_freed: tuple[Row, ...] = ()


def _residual_gradient() -> tuple[Row, Row]:
    """The gradient of the residual stream, held while the layer's branch runs its backward."""
    return _fp32_under_autocast("backward", "gradient of the residual stream (held across the branch)", 1, "Tr h")


# PyTorch 2.13 autograd: SoftmaxBackward0 (aten::_softmax_backward_data) allocates the gradient of
# the scores while the gradient of the softmax output (from scores x V's BmmBackward0) and of V are
# still held. transformers' Llama takes the softmax in fp32 (softmax(..., dtype=float32)), so the
# gradient of its bf16 copy is upcast first (ToCopyBackward0) and both gradients are fp32.
def _softmax_backward(fp32_softmax: bool) -> Moment:
    probs = (Row("backward", "gradient of the softmax output (fp32)", 1, "b a s S", "fp32"),
             Row("backward", "gradient of the scores (softmax backward, fp32)", 1, "b a s S", "fp32")) \
        if fp32_softmax else (
        *_fp32_under_autocast("backward", "gradient of the softmax output", 1, "b a s S"),
        *_fp32_under_autocast("backward", "gradient of the scores (softmax backward)", 1, "b a s S"))
    anchor = "softmax output (fp32)" if fp32_softmax else \
        "softmax output (fp32: the fp32 mask promotes the scores under autocast)"
    return Moment("layer_backward", "eager attention's softmax backward", "eager", anchor,
                  (*_residual_gradient(),
                   Row("backward", "gradient of V, one per query head", 1, "T a d", "act"), *probs,
                   # scores x V's node has run, so V as it saved it is gone (freed rows are negative).
                   Row("backward", "less V as scores x V saved it (freed)", -1, "T a d", "act", "gqa_repeat"),
                   Row("backward", "less V as scores x V saved it (freed)", -1, "T k d", "act", "no_gqa_repeat")))


# The scores materialised for the softmax: scores x scale, then the causal mask (aten::mul, aten::add,
# each a new tensor that frees the one before). transformers' Llama upcasts bf16 scores to fp32 inside
# softmax(dtype=float32); under torch.autocast the fp32 mask has already promoted them. In transformers
# the 4-D causal mask (made once in the weights' dtype, shared by every layer, freed when the model's
# forward returns) and q, k, v as the projections and rotary made them are live too.
def _attention_inputs() -> tuple[Row, ...]:
    """transformers, inside eager attention's forward: the 4-D causal mask and q, k, v as made before the
    attention op copies them (its copies of Q and K exist by the softmax; V's is made after it)."""
    return (*_fp32_under_autocast("forward", "4-D causal mask (made in the weights' dtype)", 1, "b s S",
                                  "no_full_recompute"),
            Row("forward", "q, k and v as the projections (and rotary) made them", 1, "T a d", "act"),
            Row("forward", "q, k and v as the projections (and rotary) made them", 2, "T k d", "act"),
            Row("forward", "less V's copy for scores x V, not made yet", -1, "T k d", "act", "no_gqa_repeat"),
            # Phi-3: the local qkv holds qkv_proj's output, (a + 2k) d, the size of Llama's q, k and v; the rotary
            # query and key are what the attention op saves (heads first, no copy), and with K copied to every head
            # the rotary key is held beside its copy.
            Row("forward", "Phi-3: the rotary key, held beside its copy to every query head", 1, "T k d", "act",
                "fused_projections&gqa_repeat"))


def _softmax_forward(fp32_softmax: bool, transformers: bool) -> Moment:
    rows = [*_fp32_under_autocast("forward", "attention scores after the causal mask", 1, "b a s S")]
    if fp32_softmax:
        rows += [Row("forward", "scores upcast to fp32 for the softmax", 1, "b a s S", "fp32",
                     "low_precision&no_autocast"),
                 # RMSNorm saves its fp32 cast; below fp32 (without autocast) the input itself is another tensor.
                 Row("forward", "the layer's input, held for the residual add", 1, "Tr h", "act",
                     "low_precision&no_autocast")]
    anchor = "softmax output (fp32)" if fp32_softmax else \
        "softmax output (fp32: the fp32 mask promotes the scores under autocast)"
    return Moment("layer_forward", "eager attention's softmax", "eager", anchor,
                  tuple(rows) + (_attention_inputs() if transformers else ()))


# Under torch.autocast the scores come out of the matmul in bf16 and the fp32 mask promotes them: the add
# (aten::add) holds the scaled bf16 scores, their fp32 upcast and the fp32 sum at once, before the softmax.
_MASK_ADD_UNDER_AUTOCAST = Moment(
    "layer_forward", "eager attention's causal-mask add under autocast", "eager&autocast",
    "fused kernel: logsumexp per head and row (fp32)",  # the row before the softmax's: the softmax is not made yet
    (Row("forward", "scaled scores (autocast dtype)", 1, "b a s S", "act"),
     Row("forward", "scaled scores upcast to fp32 by the mask add", 1, "b a s S", "fp32"),
     Row("forward", "attention scores after the causal mask (fp32)", 1, "b a s S", "fp32"), *_attention_inputs()))


def _layer_grads(*rows: Row) -> tuple[Row, ...]:
    """Weight gradients (dtype 'grad'; gone under LoRA: frozen weights), in the group 'gradients'."""
    return tuple(r._replace(group="gradients") for r in rows)


# Every dense block's weights, by the op lists' conditions (SwiGLU: gate and up; GeLU: one first linear).
_BLOCK_GRADS = _layer_grads(Row("", "output projection weight gradient", 1, "a d h", "grad", "grad_o&no_latent"),
                            Row("", "output projection weight gradient (v wide)", 1, "a v h", "grad", "grad_o&latent"),
                            Row("", "post-attention norm weight gradient", 1, "h", "grad", "grad_norm"),
                            Row("", "gate and up weight gradients", 2, "h f", "grad", "grad_mlp_in&swiglu"),
                            Row("", "first MLP weight gradient", 1, "h f", "grad", "grad_mlp_in&gelu_fused"),
                            Row("", "first MLP weight gradient", 1, "h f", "grad", "grad_mlp_in&gelu_python"),
                            Row("", "second MLP weight gradient", 1, "h f", "grad", "grad_mlp_out"))
# An MoE layer's weights. transformers 5 keeps each layer's experts as two fused 3-D parameters (gate_up_proj
# [E, 2f, h], down_proj [E, h, f]): grouped_mm's backward (PyTorch 2.13 GroupedMmBackward0) writes one gradient
# for each, every expert's slice included (zeros for an expert no token reached), made when the experts' backward
# runs, before attention's. Megatron-LM's SequentialMLP has a gradient per local expert, all of them made by then
# too. Shared experts: a dense MLP's three gradients at width g; Qwen2-MoE's shared expert gate its own (1 x h).
_MOE_GRADS = _layer_grads(Row("", "output projection weight gradient", 1, "a d h", "grad", "grad_o&no_latent"),
                          Row("", "output projection weight gradient (v wide)", 1, "a v h", "grad", "grad_o&latent"),
                          Row("", "post-attention norm weight gradient", 1, "h", "grad", "grad_norm"),
                          Row("", "router weight gradient", 1, "h E", "grad", "grad_mlp_in"),
                          Row("", "expert weight gradients (gate, up, down)", 3, "E h f", "grad", "grad_mlp_in"),
                          Row("", "shared experts' gate, up and down weight gradients", 3, "h g", "grad",
                              "grad_mlp_in&shared_experts"),
                          Row("", "shared expert gate weight gradient", 1, "h", "grad",
                              "grad_mlp_in&shared_expert_gate"))
# The attention's weights: q, k and v; Qwen3's q/k norms (_QK_NORMS); latent attention's projections and norms
# (_LATENT_ATTENTION: q_proj, or q_a_proj, q_a_layernorm and q_b_proj; kv_a_proj_with_mqa, c + p wide;
# kv_a_layernorm; kv_b_proj, n + v per head).
_QKV_GRADS = _layer_grads(Row("", "input norm weight gradient", 1, "h", "grad", "grad_norm"),
                          Row("", "q, k and v weight gradients", 1, "h a d", "grad", "grad_qkv&no_latent"),
                          Row("", "q, k and v weight gradients", 2, "h k d", "grad", "grad_qkv&no_latent"),
                          Row("", "q_norm and k_norm weight gradients", 2, "d", "grad", "grad_norm&qk_norm"),
                          Row("", "q_proj weight gradient", 1, "h a d", "grad", "grad_qkv&latent&no_q_lora"),
                          Row("", "q_a_proj weight gradient", 1, "h q", "grad", "grad_qkv&q_lora"),
                          Row("", "q_a_layernorm weight gradient", 1, "q", "grad", "grad_norm&q_lora"),
                          Row("", "q_b_proj weight gradient", 1, "q a d", "grad", "grad_qkv&q_lora"),
                          Row("", "kv_a_proj_with_mqa weight gradient (latent)", 1, "h c", "grad", "grad_qkv&latent"),
                          Row("", "kv_a_proj_with_mqa weight gradient (rotary key)", 1, "h p", "grad",
                              "grad_qkv&latent"),
                          Row("", "kv_a_layernorm weight gradient", 1, "c", "grad", "grad_norm&latent"),
                          Row("", "kv_b_proj weight gradient (non-rotary keys)", 1, "c a n", "grad", "grad_qkv&latent"),
                          Row("", "kv_b_proj weight gradient (values)", 1, "c a v", "grad", "grad_qkv&latent"))
_DOWN_GRAD = _layer_grads(Row("", "second MLP weight gradient", 1, "h f", "grad", "grad_mlp_out"))

# The MLP's product backward (MulBackward0): the gradient of the product (from the second linear's
# backward) and the gradients of both factors are live at once.
_SWIGLU_BACKWARD = Moment("layer_backward", "the MLP product's backward", "swiglu",
                          "up projection output (factor of the product)",
                          (*_residual_gradient(),
                           Row("backward", "gradient of the down projection input", 1, "T f", "act"),
                           Row("backward", "gradients of the SiLU output and of the up projection output", 2, "T f",
                               "act"), *_DOWN_GRAD))
_GELU_PYTHON_BACKWARD = Moment("layer_backward", "the MLP GeLU's last product backward", "gelu_python",
                               "GeLU: 1+tanh factor",
                               (*_residual_gradient(),
                                Row("backward", "gradient of the second MLP linear input", 1, "T f", "act"),
                                Row("backward", "gradients of the 0.5*x and 1+tanh factors", 2, "T f", "act"),
                                *_DOWN_GRAD))
_GELU_FUSED_BACKWARD = Moment("layer_backward", "the MLP GeLU's backward", "gelu_fused", "GeLU input",
                              (*_residual_gradient(),
                               Row("backward", "gradient of the GeLU output", 1, "T f", "act"),
                               Row("backward", "gradient of the GeLU input", 1, "T f", "act"), *_DOWN_GRAD))


def _with_grads(moment: Moment, grads: tuple[Row, ...]) -> Moment:
    """The moment with the layer's weight gradients made before it."""
    return moment._replace(temporaries=moment.temporaries + grads)


_DENSE_MOMENTS = (_SWIGLU_BACKWARD, _GELU_PYTHON_BACKWARD, _GELU_FUSED_BACKWARD)


# The MLP's forward in a checkpointed layer. torch.utils.checkpoint (non-reentrant, transformers' default; PyTorch
# 2.13 torch/utils/checkpoint.py _checkpoint_hook: its pack hook keeps no tensor) saves nothing in the forward, so a
# tensor lives only while the layer's Python code holds it, and the rows up to the anchor stand for what it holds
# only once corrected: the rows freed by then are subtracted, the locals that are no saved row added. transformers
# 5.23's decoder layers bind the attention weights eager attention returns to `_` (GPT2Block.forward
# `attn_output, _ = self.attn(...)`, LlamaDecoderLayer.forward `hidden_states, _ = self.self_attn(...)`): the
# softmax output (its cast to V's or the query's dtype, or its dropout output) lives until the layer returns, on
# top of the MLP's own tensors. Without recomputation these are saved rows anyway, and the end of the forward,
# which adds the output layer's, holds more. Measured on CPU: content/validation/peak.json, the GPT-2 eager
# '-full-' case with h1024 (the forward peaks in the GeLU's last product, the softmax output still live).
def _freed(block: tuple[Row, ...], ops: tuple[str, ...], condition: str = "") -> tuple[Row, ...]:
    """The block's rows `ops` as freed rows (negative): made in the layer's forward, dropped before this moment."""
    return tuple(r._replace(group="forward", op=f"less {r.op} (freed: a checkpointed forward saves nothing)",
                            coefficient=-r.coefficient, condition="&".join(c for c in (r.condition, condition) if c))
                 for r in block if r.op in ops)


def _held_attention_weights(block: tuple[Row, ...], softmax: str, freed_softmax: tuple[str, ...]) -> tuple[Row, ...]:
    """Of the attention weights' rows, those `_` does not hold (freed): the dropout mask, and the softmax output
    (`softmax`) under `freed_softmax` conditions, where its cast or dropout output is what is held."""
    return (*_freed(block, ("attention dropout mask",)),
            *(r for condition in freed_softmax for r in _freed(block, (softmax,), condition)))


_GPT2_ATTENTION_FREED = ("c_attn input (ln_1 output)", "Q, K and V as the attention op saves them",
                         "Q, and K and V repeated to every query head (repeat_kv)", _PADDING_MASK[0].op,
                         "fused kernel: logsumexp per head and row (fp32)", "c_proj input (merged heads)",
                         "c_proj input, quantised copy", "residual dropout mask after attention")
_GPT2_MLP_HELD = (
    *_fp32_under_autocast("forward", "the residual stream after attention, held for the MLP's residual add", 1,
                          "Tr h"),
    Row("forward", "the attention output projection's output, held by the block (attn_output)", 1, "Tr h", "act"),
    *_freed(HF_GPT2_BLOCK, _GPT2_ATTENTION_FREED),
    # The softmax output: freed where its dropout output is held (the fp32 one under autocast always: its cast is).
    *_held_attention_weights(HF_GPT2_BLOCK, "softmax output", ("dropout",)),
    *_freed(HF_GPT2_BLOCK, ("softmax output (fp32: the fp32 mask promotes the scores under autocast)",)),
    # Under autocast c_fc's saved 16-bit cast is made and freed inside c_fc: ln_2's fp32 output is what is held.
    *_freed(HF_GPT2_BLOCK, ("c_fc input (ln_2 output)",), "autocast"),
    Row("forward", "ln_2 output (fp32 under autocast), held for the MLP", 1, "Tr h", "fp32", "autocast"),
)
_GPT2_MLP_FORWARD = (
    # NewGELUActivation: 0.5 * x * (1 + tanh(...)): as 1 + tanh is made, x, 0.5 * x and the tanh are live.
    Moment("layer_forward", "a checkpointed layer's MLP GeLU (its last factor made)", "all_recomputed&gelu_python",
           "GeLU: 1+tanh factor", _GPT2_MLP_HELD),
    Moment("layer_forward", "a checkpointed layer's MLP GeLU", "all_recomputed&gelu_fused", "GeLU input",
           (*_GPT2_MLP_HELD, Row("forward", "GeLU output", 1, "T f", "act"))),
)
# LlamaMLP: down(act(gate(x)) * up(x)): as the product is made, the SiLU output and the up projection's are live
# (the gate projection's output is freed once the SiLU is made).
_LLAMA_MLP_FORWARD = Moment(
    "layer_forward", "a checkpointed layer's MLP product", "all_recomputed&swiglu",
    "up projection output (factor of the product)",
    (*_fp32_under_autocast("forward", "the residual stream after attention, held for the MLP's residual add", 1,
                           "Tr h"),
     Row("forward", "the product, being made (the down projection's input)", 1, "T f", "act"),
     # Phi-3: gate is a view of gate_up_proj's output, whose storage up's view holds: nothing is freed by the SiLU.
     Row("forward", "Phi-3: the gate half of gate_up_proj's output, held with the up half", 1, "T f", "proj",
         "fused_projections"),
     *_freed(HF_LLAMA_BLOCK, ("q/k/v projection input (RMSNorm output)",
                              "q, k and v projection inputs, each cast by autocast or quantised by a recipe",
                              "Q, K and V as the attention op saves them",
                              "Q, and K and V repeated to every query head (repeat_kv)", _PADDING_MASK[0].op,
                              "fused kernel: logsumexp per head and row (fp32)", "o_proj input (merged heads)",
                              "o_proj input, quantised copy", "SiLU input (gate projection output)",
                              # latent attention (_LATENT_ATTENTION)
                              *(r.op for r in _QKV_AS_SAVED if "latent" in r.condition.split("&")),
                              "q_b_proj input (q_a_layernorm output)", "kv_b_proj input (kv_a_layernorm output)",
                              "attention output as the fused kernel returns it (heads first, the query's layout)",
                              "o_proj input (merged heads, v wide)", "o_proj input, quantised copy (v wide)",
                              # Phi-3 (_PHI3_ATTENTION)
                              "qkv_proj input, cast by autocast or quantised by a recipe (Phi-3: one layer)",
                              *(r.op for r in _PHI3_ATTENTION))),
     # softmax(dtype=float32).to(query.dtype): below fp32 the cast is held, with dropout the dropout output.
     *_held_attention_weights(HF_LLAMA_BLOCK, "softmax output (fp32)", ("low_precision&no_dropout", "dropout")),
     # Separate casts (autocast, a recipe) are made and freed inside each projection: the norm's output is held.
     *_freed(HF_LLAMA_BLOCK, ("gate and up projection inputs, each cast by autocast or quantised by a recipe",
                              "gate_up_proj input, cast by autocast or quantised by a recipe (Phi-3: one layer)")),
     *_fp32_under_autocast("forward", "post_attention_layernorm output, held for the MLP", 1, "Tr h",
                           "separate_inputs")))
# torchao's float8 training (builder.model.float8): each converted linear layer's instants (float8.INSTANTS: the casts
# to float8, the layout copies and the matmuls' outputs) as moments of the layer, with what is live beside them. In
# the backward, autograd runs a Llama block's nodes newest first (engine.cpp ReadyQueue): down, the SwiGLU product, up
# (newer than the SiLU), the SiLU, gate, the post-attention norm, o, attention, then v, k and q; a projection's saved
# input is live during its own backward (its row is the anchor: the rows after it are freed), and so are the
# gradients made for the nodes still to run. In the forward, down's instants hold every row of the layer: a layer's
# other projections cast smaller tensors (with ffn at least hidden) with fewer rows live.
def _float8_moments(linear: str, anchor: str, shapes: dict[str, str], held: tuple[Row, ...] = (),
                    made: tuple[Row, ...] = (), phase: str = "backward") -> tuple[Moment, ...]:
    """The instants of `phase` of the converted projection `linear` (its input, output and weight `shapes`) as
    moments anchored at its saved input's row, with the tensors `held` beside them and the weight gradients `made`
    before them."""
    condition = "float8_forward" if phase == "forward" else "float8"
    return tuple(Moment(f"layer_{phase}", f"the {linear} projection's {instant.op}",
                        "&".join(c for c in (condition, instant.condition) if c), anchor,
                        (*held, *(Row(phase, f"{linear}: {term.what}", term.coefficient, shapes[term.operand],
                                      term.dtype, term.condition) for term in instant.terms), *made))
                 for instant in FLOAT8_INSTANTS if instant.phase == phase)


_MLP_IN, _MLP_OUT = {"in": "T h", "out": "T f", "w": "h f"}, {"in": "T f", "out": "T h", "w": "h f"}
_UP_GRAD = _layer_grads(Row("", "up weight gradient", 1, "h f", "grad", "grad_mlp_in&swiglu"))
_MLP_GRADS = (*_DOWN_GRAD, *_UP_GRAD, *_layer_grads(
    Row("", "gate weight gradient", 1, "h f", "grad", "grad_mlp_in&swiglu"),
    Row("", "post-attention norm weight gradient", 1, "h", "grad", "grad_norm")))
_O_GRADS = (*_MLP_GRADS, *_layer_grads(Row("", "output projection weight gradient", 1, "a d h", "grad",
                                           "grad_o&no_latent")))
_V_GRAD = _layer_grads(Row("", "v weight gradient", 1, "h k d", "grad", "grad_qkv&no_latent"))
_K_GRAD = _layer_grads(Row("", "k weight gradient", 1, "h k d", "grad", "grad_qkv&no_latent"))
_QKV_INPUT = "q/k/v projection input (RMSNorm output)"
FLOAT8_MOMENTS = (
    # The forward: the block's input (held by the model's loop over its layers) and the residual stream after
    # attention (held for the MLP's residual add) are live beside the saved rows, which hold neither (the norms save
    # fp32 copies); measured on CPU (tests/test_float8.py).
    *_float8_moments("down", "down projection input (the product)", _MLP_OUT,
                     (*_fp32_under_autocast("forward", "the block's input, held by the model's loop over the layers",
                                            1, "Tr h"),
                      *_fp32_under_autocast("forward", "the residual stream after attention, held for the MLP's "
                                                       "residual add", 1, "Tr h")), phase="forward"),
    *_float8_moments("down", "down projection input (the product)", _MLP_OUT, _residual_gradient()),
    *_float8_moments("up", "SiLU input (gate projection output)", _MLP_IN,
                     (*_residual_gradient(),
                      Row("backward", "gradient of the SiLU output (its backward runs after up's)", 1, "T f", "act"),
                      Row("backward", "gradient of the up projection output", 1, "T f", "act")), _DOWN_GRAD),
    *_float8_moments("gate", "gate/up projection input (RMSNorm output)", _MLP_IN,
                     (*_residual_gradient(),
                      Row("backward", "the up projection's input gradient (summed with gate's)", 1, "T h", "act"),
                      Row("backward", "gradient of the gate projection output (the SiLU's backward)", 1, "T f",
                          "act")), (*_DOWN_GRAD, *_UP_GRAD)),
    *_float8_moments("o", "o_proj input (merged heads)", {"in": "T a d", "out": "T h", "w": "a d h"},
                     _residual_gradient(), _MLP_GRADS),
    *_float8_moments("v", _QKV_INPUT, {"in": "T h", "out": "T k d", "w": "h k d"},
                     (*_residual_gradient(),
                      Row("backward", "gradient of the query (after rotary)", 1, "T a d", "act"),
                      Row("backward", "gradients of the key (after rotary) and of the value", 2, "T k d", "act")),
                     _O_GRADS),
    *_float8_moments("k", _QKV_INPUT, {"in": "T h", "out": "T k d", "w": "h k d"},
                     (*_residual_gradient(), Row("backward", "gradient of the query (after rotary)", 1, "T a d", "act"),
                      Row("backward", "the v projection's input gradient", 1, "T h", "act"),
                      Row("backward", "gradient of the key (after rotary)", 1, "T k d", "act")),
                     (*_O_GRADS, *_V_GRAD)),
    *_float8_moments("q", _QKV_INPUT, {"in": "T h", "out": "T a d", "w": "h a d"},
                     (*_residual_gradient(),
                      Row("backward", "the v and k projections' input gradients, summed", 1, "T h", "act"),
                      Row("backward", "gradient of the query (after rotary)", 1, "T a d", "act")),
                     (*_O_GRADS, *_V_GRAD, *_K_GRAD)),
)
_SOFTMAX_BACKWARD = _with_grads(_softmax_backward(False), _BLOCK_GRADS)
_FP32_SOFTMAX_BACKWARD = _with_grads(_softmax_backward(True), _BLOCK_GRADS)


# transformers 5.23 LlamaRMSNorm.forward (models/llama/modeling_llama.py; the MoE families' and torchtune's RMSNorm are
# the same ops): x.to(float32), pow(2), mean(-1), + eps, rsqrt, x * rsqrt, .to(input dtype), weight x. Its backward
# under PyTorch 2.13 autograd (tools/autograd/derivatives.yaml, torch/csrc/autograd/FunctionsManual.cpp) makes the
# gradients in fp32 whatever the model's dtype: weight x's backward hands on the gradient of the cast (and sums the
# weight's), ToCopyBackward0 upcasts it, the normalising product's backward makes the gradient of the fp32 input and
# the rsqrt's, MeanBackward1 expands the gradient of the mean square to the input's shape (a new tensor:
# sum_backward's expand divided by the width), and PowBackward0 (pow_backward: grad * (2 * x.pow(1))) makes
# x.pow(1) (a copy), twice it and the product, the C++ temporaries living to the end of the expression. So at the
# pow's backward four fp32 tensors of the input's size are live beside the gradient of the residual stream, and of
# the norm's saved tensors only its fp32 input (the cast back, saved by weight x, and the rsqrt, saved by the product
# and RsqrtBackward0, are freed). A fifth where the input is below fp32: x.to(float32) is a new tensor, and its
# ToCopyBackward0's input buffer holds the product's gradient of it until the pow's part comes. An fp32 input (an
# fp32 model, or the fp32 stream under autocast) is its own fp32 copy: that gradient goes to the input's producer
# and is added in place to the residual stream's gradient held there (engine.cpp InputBuffer::accumulate steals a
# gradient no one else holds). Measured on CPU: content/validation/peak.json (bf16 Llama cases whose backward peaks
# in the first layer's input norm) and, node by node, tests/test_validation.py (every norm's pow, fp32 and bf16).
# In the first layer the input norm's backward runs after the attention's, whose rotary products have freed the
# shared cos and sin (LlamaModel's forward returned, so nothing else holds them) unless the layer is checkpointed.
def _rmsnorm_backward(norm: str, made: tuple[Row, ...], first_freed: tuple[Row, ...] = ()) -> Moment:
    """The instant of the residual-stream RMSNorm `norm`'s backward (its pow's backward), with the layer's weight
    gradients `made` by then and the FIRST_STAGE rows the first layer has freed by then."""
    return Moment("layer_backward", f"the {norm} RMSNorm's backward (its pow)", "",
                  f"{norm}: input in fp32 (saved by pow and the multiply)",
                  (*_residual_gradient(),
                   Row("backward", f"{norm}: gradient of its fp32 input from the normalising product, held for the "
                                   "pow's part", 1, "Tr h", "fp32", "low_precision&no_autocast"),
                   Row("backward", f"{norm}: gradient of the mean square, expanded to the input's shape", 1, "Tr h",
                       "fp32"),
                   Row("backward", f"{norm}: the pow's backward: x.pow(1), 2 x.pow(1) and their product with the "
                                   "gradient", 3, "Tr h", "fp32"), *made),
                  first_freed)


def _not_attention(grads: tuple[Row, ...]) -> tuple[Row, ...]:
    """A block's weight gradients made before its attention's backward: all but the output projection's."""
    return tuple(r for r in grads if not r.op.startswith("output projection"))


# The rotary tables (FIRST_STAGE's rotary rows), freed once the first layer's attention backward has run, unless the
# first layer is checkpointed: torch.utils.checkpoint keeps the layer's arguments, position_embeddings among them, until
# the layer's backward has ended (measured on CPU: the tables are still live at a checkpointed first layer's input
# norm).
_ROTARY_TABLES = tuple(r._replace(condition=f"{r.condition}&no_full_recompute") for r in FIRST_STAGE
                       if r.op.startswith("rotary"))


def _rmsnorm_moments(grads: tuple[Row, ...]) -> tuple[Moment, Moment]:
    """The post-attention and input norms' backward instants of a block whose weight gradients are `grads` (after
    the post-attention norm's: every one but the attention's; after the input norm's: all of them)."""
    return (_rmsnorm_backward("post_attention_layernorm", _not_attention(grads)),
            _rmsnorm_backward("input_layernorm", _QKV_GRADS + grads, _ROTARY_TABLES))


# The final norm's backward (LlamaModel's norm, the same RMSNorm), after the output layer's and before the last layer's:
# the loss's and the output layer's saved tensors are freed, and of the final norm's own only its fp32 input is live
# (its rsqrt, its cast back and its output, saved by the product, weight x and the output layer, are freed). No
# residual stream's gradient is held: the final norm is not a residual branch, so the product's gradient of its fp32
# input waits in the input buffer whatever the dtype (an fp32 input's producer holds no other gradient to add it
# to). Every layer's saved tensors are live (the last layer is not recomputed yet); the output layer's weight
# gradient is made. The anchor '' marks a moment outside the block.
FINAL_NORM_BACKWARD = Moment(
    "final_norm_backward", "the final norm RMSNorm's backward (its pow)", "", "",
    (Row("backward", "final norm: its fp32 input, saved by its pow", 1, "Tr h", "fp32"),
     Row("backward", "final norm: gradient of its fp32 input from the normalising product, held for the pow's part",
         1, "Tr h", "fp32"),
     Row("backward", "final norm: gradient of the mean square, expanded to the input's shape", 1, "Tr h", "fp32"),
     Row("backward", "final norm: the pow's backward: x.pow(1), 2 x.pow(1) and their product with the gradient", 3,
         "Tr h", "fp32")))
MOMENTS = {
    "megatron": (_softmax_forward(False, False), _SOFTMAX_BACKWARD, *_DENSE_MOMENTS),
    # Megatron-LM's MoE layer: as transformers' MoE layers, its experts' own backward is not a moment here.
    "megatron-moe": (_softmax_forward(False, False), _with_grads(_softmax_backward(False), _MOE_GRADS)),
    "hf-gpt2": (_softmax_forward(False, True), _MASK_ADD_UNDER_AUTOCAST, *_GPT2_MLP_FORWARD, _SOFTMAX_BACKWARD,
               *_DENSE_MOMENTS),
    "hf-llama": (_softmax_forward(True, True), _MASK_ADD_UNDER_AUTOCAST, _LLAMA_MLP_FORWARD, _FP32_SOFTMAX_BACKWARD,
                 *_DENSE_MOMENTS, *FLOAT8_MOMENTS, *_rmsnorm_moments(_BLOCK_GRADS), FINAL_NORM_BACKWARD),
    # transformers' MoE layers: the experts' own backward is not a moment here (builder.model.peak.unmodelled names it).
    "hf-moe": (_softmax_forward(True, True), _MASK_ADD_UNDER_AUTOCAST,
               _with_grads(_softmax_backward(True), _MOE_GRADS), *_rmsnorm_moments(_MOE_GRADS), FINAL_NORM_BACKWARD),
    # A compiled layer runs its forward and its backward as generated kernels: their own temporaries are not
    # modelled (builder.model.peak.unmodelled names them), so a compiled layer has no moments of its own.
    "hf-gpt2-compiled": (),
    "hf-llama-compiled": (),
}

# Every weight gradient of one layer (what the first layer's moments have not made yet is the rest).
LAYER_GRADS = {name: _QKV_GRADS + (_MOE_GRADS if name in ("hf-moe", "megatron-moe") else _BLOCK_GRADS)
               for name in MOMENTS}

# Made by the output layer's backward before any layer's: the weight gradients of the head and final norm.
HEAD_GRADS = _layer_grads(Row("", "output layer weight gradient", 1, "V h", "grad", "grad_head"),
                          Row("", "final norm weight gradient", 1, "h", "grad", "grad_norm"))
