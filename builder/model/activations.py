"""Activation memory as rules: what each operation of a block saves for backward, op by op.

Two ways to count, chosen by the `activation_formula` input:

* 'ops' (default): the tensors each operation of one transformer block saves for its backward
  pass (builder.model.oplists: shape, dtype and the conditions under which each row applies),
  summed. The list follows a named implementation (the `implementation` input):
  - 'megatron': the GPT block as analysed by Korthikanti et al. 2022 (arXiv:2205.05198),
    section 4.1 (16-bit activations, 1-byte dropout masks, LayerNorm statistics
    neglected as the paper does). With a GeLU 4h MLP and dropout its sum is exactly
    sbh(34 + 5as/h) (Table 2), which tests check.
  - 'hf': Hugging Face transformers 5.23 modeling code under PyTorch 2.13 autograd,
    measured by `python -m builder validate` (content/validation/).
  - 'torchtune': the transformers list (torchtune's RMSNorm, rotary and SwiGLU save what transformers' do), with K
    and V copied to every query head before any attention (torchtune/modules/attention.py, TORCHTUNE_CODE), and
    torchtune's own LoRA adapters, in the model's dtype with no cast (oplists.LORA's 'lora_native' rows).
* 'korthikanti': the closed-form Table 2 formulas themselves, as a reference mode
  (layers only: the paper's Table 2 leaves out embeddings, logits and loss).

The op lists are data; this module compiles them once into rules of builder.model.expr: the op-list
symbols (s b T Tr S h a k d f V E K r, per GPU and micro-batch) and conditions become symbols derived
from the run's inputs (builder.model.inputs), every row a table row whose bytes are its coefficient x
shape x dtype size. ACTIVATIONS prices a stage's parts from them, and MOMENTS works out the instants
inside a layer that builder.model.peak weighs. The estimator and the calculator's script evaluate the
same rules, so nothing here is written twice.
"""

from __future__ import annotations

from functools import lru_cache
from fractions import Fraction
from typing import Any

from builder.model import oplists
from builder.model.adapters import TORCHTUNE
from builder.model.architecture import Architecture
from builder.model.cite import Cite
from builder.model.checks import OP_SAC, SLIDING_WINDOW_REACHED
from builder.model.config import CHECKPOINTING, LORA_TARGETS, Config
from builder.model.float8 import CONDITIONS as FLOAT8_CONDITIONS
from builder.model.expr import (Expr, at, both, by, ceil, derive, either, eq, evaluate, fixed, fmt, get, has, isin,
                                lift, maximum, minimum, ne, negate, per_unit, row, sym, table, total, when)
from builder.model.inputs import run_inputs, stages
from builder.model.partrules import PartRule, PerUnit, RuleSet, bytes_of
from builder.model.recipes import by_recipe, recipe_on
from builder.model.units import DTYPE_BYTES

KORTHIKANTI = Cite("korthikanti2022", "Table 2")
FLASH = Cite("dao2022", "Algorithm 2") + ": saves output and logsumexp"
HF_CODE = (Cite("transformers-5-23", "modeling code") + ", " + Cite("pytorch-2-13", "autograd")
           + " (measured: see the Validation page)")
# torchtune/modules/attention.py MultiHeadAttention.forward (v0.6.1, commit a6290a5, lines 284-290; the same since
# commit 1814feb of November 2024): with fewer KV heads than query heads, K and V are expanded and flattened to
# every query head before the attention call, so the kernel saves them at that size.
TORCHTUNE_CODE = (Cite("transformers-5-23", "op lists") + "; "
                  + Cite("torchtune-attention", "torchtune/modules/attention.py L284-290") + ": K, V copied to all heads")
CHEN = Cite("chen2016", "section 3")
# A padded micro-batch under transformers' SDPA attention (the 'padding_mask' condition, oplists._PADDING_MASK).
PADDED = (Cite("transformers-sdpa-mask", "masking_utils.py sdpa_mask, integrations/sdpa_attention.py use_gqa_in_sdpa")
          + " and " + Cite("pytorch-sdpa-mask", "attention.cpp convert_boolean_attn_mask")
          + ": padded batch (or a sliding window the sequence reaches), K and V copied to every query head, each "
            "layer's kernel saves the mask")
# transformers' MoE blocks (oplists._HF_MOE) with the experts implementation transformers picks by default.
HF_MOE = (Cite("transformers-moe", "integrations/moe.py grouped_mm_experts_forward") + " and each family's router "
          "and shared experts (measured byte for byte: see the Validation page)")
# transformers' attention variants (oplists._QK_NORMS, _LATENT_ATTENTION), measured whole layer on CPU.
HF_ATTENTION = (Cite("transformers-attention-variants", "Qwen3Attention, DeepseekV2Attention and DeepseekV3Attention")
                + ": Qwen3's q/k norms, DeepSeek's latent attention (measured: see the Validation page)")
# Megatron-LM's MoE layer (oplists.MEGATRON_MOE_BLOCK): its defaults, dropless, routing balanced.
MEGATRON_MOE = (Cite("megatron-d98e8a6", "megatron/core/transformer/moe/ router.py TopKRouter, moe_utils.py "
                     "RouterGatingLinearFunction and permute, token_dispatcher.py MoEAllGatherTokenDispatcher, "
                     "experts.py SequentialMLP")
                + " and " + Cite("megatron-d98e8a6", "megatron/core/fusions/fused_bias_swiglu.py WeightedSwiGLUFunction")
                + " (defaults: dropless, allgather dispatcher, unfused permute, aux loss counted as on; routing "
                  "balanced, T x top_k routed tokens per GPU)")
MEGATRON_BLOCK = (Cite("megatron-767a8a8", "megatron/core/transformer/transformer_block.py _checkpointed_forward")
                  + " (recompute_method 'block': the first recompute_num_layers layers of each pipeline stage)")
# torchtitan's per-op selective activation checkpointing (oplists.TORCHTITAN_OP_SAC has the rule and the sources).
TORCHTITAN_SAC = (Cite("torchtitan-ac-b5bcd76", "torchtitan/distributed/activation_checkpoint.py SelectiveAC._wrap_block, "
                                                "_get_default_save_ops")
                  + " (every second matrix multiply of a block recomputed, the other listed ops' outputs saved) and "
                  + Cite("pytorch-2-13", "torch/utils/checkpoint.py create_selective_checkpoint_contexts"))
OFFLOAD = (Cite("torchtune-0-6", "torchtune/training/_activation_offloading.py OffloadActivations") + " (saved tensors "
           "of 1,024 bytes or more copied to pinned host memory in the forward and brought back node by node in the "
           "backward, the 5 latest kept until their copies finish) and get_act_offloading_ctx_manager (the output "
           "layer's tensors stay on the GPU)")

# Conditions that hold when every weight trains (full fine-tuning or pre-training); under LoRA
# none of them holds and the adapters' lora_<target> conditions do instead.
FULL_TRAINING = ("grad_qkv", "grad_o", "grad_mlp_in", "grad_mlp_out", "grad_norm", "grad_head")
# Projections that read the same tensor (q, k, v read the norm output; gate and up too).
LORA_SHARED_INPUTS = (("q", "k", "v"), ("gate", "up"))
# A checkpointed layer's forward runs without autograd: the norms' tensors, kept only for backward, are
# gone by the softmax (measured: content/validation/peak.json, the '-full-' case with a 512-token vocabulary).
NO_GRAD_GONE = ("norms",)

# The op lists' symbols on one GPU for one micro-batch (oplists' docstring), as rules named op_<symbol>.
TP = sym("tp")
OP_SYMBOLS = {
    "op_s": sym("seq_len") // sym("cp"),
    "op_b": sym("micro_batch"),
    "op_T": sym("micro_batch") * sym("op_s"),
    "op_Tr": when(sym("sequence_parallel"), sym("op_T") / TP, sym("op_T")),
    "op_S": sym("seq_len"),
    "op_h": sym("hidden"),
    "op_a": sym("heads") // TP,
    "op_k": maximum(1, sym("kv_heads") // TP),
    "op_d": sym("head_dim"),
    "op_f": when(sym("experts") > 0, sym("expert_ffn"), sym("ffn")) // TP,
    "op_V": ceil(sym("vocab") / TP),
    "op_E": sym("experts"),
    "op_K": sym("top_k"),
    "op_r": sym("lora_rank"),
    # The shared experts of an MoE layer as one MLP (Megatron-LM's moe_shared_expert_intermediate_size), tensor parallel.
    "op_g": sym("shared_experts") * sym("expert_ffn") // TP,
    # DeepSeek's latent attention (oplists._LATENT_ATTENTION): the latent and the query's low rank are whole on every
    # GPU; the head widths are per head.
    "op_c": sym("kv_lora_rank"),
    "op_q": sym("q_lora_rank"),
    "op_p": sym("qk_rope_head_dim"),
    "op_n": sym("head_dim") - sym("qk_rope_head_dim"),
    "op_v": sym("v_head_dim"),
    # An MoE model's first dense layers (oplists.Row.layers): the dense MLP's width, and the dense and MoE layers'
    # shares of the average layer.
    "op_F": sym("ffn") // TP,
    # gpt-oss's eager softmax over the keys and the head's sink (oplists.CORE_FP32_SOFTMAX).
    "op_P": sym("seq_len") + 1,
    "op_dense_share": when(both(sym("experts") > 0, sym("first_dense_layers") > 0),
                           sym("first_dense_layers") / maximum(1, sym("layers")), 0),
    "op_moe_share": 1 - sym("op_dense_share"),
}


# PEFT's prepare_model_for_kbit_training (kbit_prepare "prepare") casts the embeddings, norms and output layer to fp32:
# the residual stream is fp32 from the embedding on, each norm's output is fp32, and bitsandbytes' Linear4bit.forward
# casts its input to the compute dtype for the 4-bit matmul and its output back to the input's dtype (fp32), so
# without torch.autocast every saved activation is fp32 whatever the policy's activation dtype (measured with
# bitsandbytes 0.50.2 and PEFT 0.21.2 on CPU: tests/test_qlora_peft.py). The dequantised weight copies stay in
# the compute dtype (builder.model.dequant reads the policy's activation dtype).
PREPARED_FP32 = both(sym("qlora"), eq(sym("kbit_prepare"), "prepare"), negate(sym("autocast")))
# The dtype a training run's activations are saved in: the policy's, or fp32 for a prepared QLoRA model.
SAVED_DTYPE = when(PREPARED_FP32, "fp32", sym("activation_dtype"))
# torch.autocast over 16-bit weights (Trainer's bf16=True on a model loaded in bf16, or a QLoRA model whose
# unquantised weights were not prepared): the residual stream stays 16-bit and autocast's casts of 16-bit tensors are
# the tensors themselves; only the fp32 LoRA adapters see a cast. Over fp32 weights (amp-bf16, a prepared QLoRA model)
# the stream stays fp32 (FP32_STREAM_AMP: the op lists' 'autocast' rows).
STREAM_16BIT_AMP = both(sym("autocast"), when(sym("qlora"), eq(sym("kbit_prepare"), "none"),
                                              ne(sym("param_dtype"), "fp32")))
FP32_STREAM_AMP = both(sym("autocast"), negate(STREAM_16BIT_AMP))


def _conditions() -> dict[str, Expr]:
    """The op lists' conditions (oplists.CONDITIONS) as rules of the run's inputs."""
    # torchtune's modules follow transformers' op for op (RMSNorm, rotary, SwiGLU), so its runs take the transformers
    # op lists; they differ in one place, K and V copied to every query head for every attention (TORCHTUNE_CODE).
    hf = isin(sym("implementation"), "hf", "torchtune")
    eager = eq(sym("attention"), "eager")
    swiglu = eq(sym("mlp"), "swiglu")
    low_precision = ne(SAVED_DTYPE, "fp32")
    gelu_python = both(negate(swiglu), eq(sym("activation_function"), "gelu_tanh_python"), hf)
    # transformers' SDPA attention given a 4-D mask (the 'padded' input: a padded micro-batch, or packed sequences
    # whose position ids restart; oplists._PADDING_MASK has the sources): the kernel saves the mask, and K and V are
    # copied to every query head as eager attention copies them (integrations/sdpa_attention.py use_gqa_in_sdpa,
    # repeat_kv). From a single KV head on the GPU, repeat_kv's expand and reshape make a view (stride 0 over the
    # heads), no copy, and the kernel saves that view: K and V stay at their own size (measured on CPU, the kv1 padded
    # case; eager attention's matmul copies them anyway).
    # A sliding window every layer keeps (Mistral 7B v0.1, Phi-3-mini-4k) makes the same mask once the keys reach the
    # window (checks.SLIDING_WINDOW_REACHED; MistralModel and Phi3Model take create_sliding_window_causal_mask whenever
    # config.sliding_window is set): one mask for every sequence (shared_mask). A pattern of sliding and full layers
    # (Gemma 2 and 3: the mask in the sliding layers only) is not modelled here.
    padding_mask = both(either(sym("padded"), SLIDING_WINDOW_REACHED), eq(sym("attention"), "sdpa"),
                        eq(sym("implementation"), "hf"))
    gqa_repeat = both(ne(sym("kv_heads"), sym("heads")),
                      either(both(eager, eq(sym("implementation"), "hf")), both(padding_mask, OP_SYMBOLS["op_k"] > 1),
                             eq(sym("implementation"), "torchtune")))
    full = eq(sym("recompute"), "full")
    # transformers code under torch.autocast over fp32 weights: the residual stream (and every layer's
    # input) stays fp32; the op lists' 'autocast' rows apply. Over 16-bit weights autocast leaves the stream 16-bit
    # (STREAM_16BIT_AMP): only the adapters see it.
    bf16_stream_amp = both(hf, STREAM_16BIT_AMP)
    autocast = both(hf, FP32_STREAM_AMP)
    adapters_amp = both(sym("autocast"), hf)  # the adapters under autocast, whatever the stream
    # A low-precision recipe (builder.model.recipes): every linear layer saves a quantised copy of its input.
    # Megatron-LM has the attention output projection keep its original input instead (save_original_input) for
    # every recipe but delayed scaling; a fused attention kernel saves that input as its own output regardless.
    recipe = recipe_on()
    separate = either(autocast, both(recipe, hf))
    projection_original = both(eq(sym("implementation"), "megatron"), by_recipe("projection_saves_original"))
    learned = sym("position_embeddings") > 0
    # A compiled eager attention with an fp32 softmax over 16-bit scores (transformers' Llama family takes the softmax
    # in fp32; under autocast the fp32 mask promotes GPT-2's scores too) recomputes it from the scores.
    compiled_scores = both(sym("compile"), hf, eager, low_precision, either(eq(sym("norm"), "rmsnorm"), autocast))
    lora = {target: both(sym("lora_rank") > 0, has(sym("lora_targets"), target)) for target in LORA_TARGETS}

    lora_dropout = sym("lora_dropout") > 0
    latent = both(hf, sym("kv_lora_rank") > 0)
    # Phi-3's fused projections in transformers' code (oplists._PHI3_ATTENTION); torchtune's Phi-3 has separate ones.
    fused_layers = both(eq(sym("implementation"), "hf"), sym("fused_projections"))
    # torchtune's adapters (oplists.LORA): in the model's dtype, no cast, so lora_A saves the projection's own input.
    native = TORCHTUNE

    def own_input(target: str) -> Expr:
        # Each adapter casts its input to fp32 for lora_A; below fp32 each cast is a new tensor, and with LoRA dropout
        # each adapter's dropout output is, but in an fp32 model without it the cast is the input itself: adapters on
        # projections that share an input save it once, and o's is the fused attention kernel's own saved output.
        # Under autocast over a 16-bit stream (QLoRA without prepare) PEFT's bitsandbytes layer skips the cast
        # (peft/tuners/lora/bnb.py Linear4bit.forward: requires_conversion = not torch.is_autocast_enabled()), and
        # lora_A saves the 16-bit input itself, shared as in an fp32 model; PEFT's plain layer casts to fp32 all the
        # same, and autocast casts that back for lora_A: a 16-bit copy of its own per adapter.
        # The output projection's input is the attention's 16-bit output under autocast: PEFT's bitsandbytes layer
        # passes it to lora_A as it is, the fused kernel's own saved output.
        # torchtune's LoRALinear casts nothing: as in an fp32 PEFT model, only dropout gives an adapter an input of its
        # own. A compiled layer keeps o_proj's input (the merged heads) in any case (oplists.HF_LLAMA_BLOCK_COMPILED),
        # so there o's adapter shares it with eager attention too.
        copied = both(low_precision, negate(both(bf16_stream_amp, sym("qlora"))), negate(native))
        if target == "o":
            return both(lora[target], either(both(low_precision, negate(both(adapters_amp, sym("qlora"))),
                                                  negate(native)),
                                             lora_dropout, both(eager, negate(sym("compile")))))
        group = next((g for g in LORA_SHARED_INPUTS if target in g), (target,))
        earlier = [has(sym("lora_targets"), other) for other in group[:group.index(target)]]
        return both(lora[target], either(copied, lora_dropout, negate(either(*earlier)))) if earlier \
            else lora[target]

    return {
        "eager": eager, "fused": negate(eager), "gqa_repeat": gqa_repeat, "no_gqa_repeat": negate(gqa_repeat),
        "padding_mask": padding_mask, "batch_mask": sym("padded"), "shared_mask": negate(sym("padded")),
        "dropout": sym("dropout"), "no_dropout": negate(sym("dropout")), "low_precision": low_precision,
        "gelu_python": gelu_python, "gelu_fused": both(negate(swiglu), negate(gelu_python)), "swiglu": swiglu,
        "swiglu_fused": both(swiglu, eq(sym("implementation"), "megatron")),
        "swiglu_unfused": both(swiglu, ne(sym("implementation"), "megatron")),
        "learned_positions": learned, "rotary": negate(learned),
        "embedding_dropout": either(eq(sym("norm"), "layernorm"), negate(hf)),
        "full_recompute": full, "no_full_recompute": negate(full),
        # Every layer checkpointed: full recomputation without a recompute_layers count, or torchtitan's per-op
        # checkpointing, which wraps every block (its forward saves nothing for autograd but the kept op outputs).
        "all_recomputed": either(both(full, eq(sym("recompute_layers"), 0)), OP_SAC),
        # torchao's float8 training (builder.model.float8, oplists.FLOAT8_MOMENTS): the instants of its casts; a
        # checkpointed layer's forward ones are not moments (its backward casts the same tensors with more live).
        **FLOAT8_CONDITIONS,
        "float8_forward": both(FLOAT8_CONDITIONS["float8"],
                               negate(either(both(full, eq(sym("recompute_layers"), 0)), OP_SAC))),
        "sac_reduce_scatter": both(OP_SAC, sym("tp") > 1, sym("sequence_parallel")),
        "autocast": autocast, "no_autocast": negate(autocast),
        # PEFT's adapters under torch.autocast (any stream): lora_A casts its input and lora_B's is lora_A's 16-bit
        # output; outside it they are fp32. torchtune's are in the model's dtype (builder.model.checks refuses
        # autocast with them).
        "lora_amp": both(adapters_amp, negate(native)), "lora_fp32": negate(either(adapters_amp, native)),
        "lora_native": native,
        "separate_inputs": separate, "shared_input": negate(separate),
        "o_input_kept": either(negate(recipe), negate(eager), projection_original),
        "o_input_quantised": both(recipe, negate(projection_original)),
        "compiled": both(sym("compile"), hf), "not_compiled": negate(both(sym("compile"), hf)),
        # transformers' Llama-family eager attention takes the softmax in fp32 (RMSNorm models); under autocast the
        # fp32 mask promotes GPT-2's scores too.
        "compiled_scores": compiled_scores, "no_compiled_scores": negate(compiled_scores),
        "loss_logprobs": isin(sym("loss"), "eager", "chunked"), "loss_compiled": isin(sym("loss"), "compiled", "chunked-compiled"),
        "loss_chunked_compiled": eq(sym("loss"), "chunked-compiled"),
        "loss_fused_linear": eq(sym("loss"), "fused-linear"), "no_loss_fused_linear": ne(sym("loss"), "fused-linear"),
        **{name: eq(sym("lora_rank"), 0) for name in FULL_TRAINING},
        **{f"lora_{target}": rule for target, rule in lora.items()},
        **{f"lora_in_{target}": own_input(target) for target in LORA_TARGETS},
        "lora_dropout": both(sym("lora_rank") > 0, lora_dropout), "lora_frozen_o": sym("lora_rank") > 0,
        "shared_experts": sym("shared_experts") > 0,
        # transformers' attention variants (oplists._QK_NORMS, _LATENT_ATTENTION); torchtune's Qwen3 attention has the
        # same q/k norms (its RMSNorm saves what transformers' does).
        "qk_norm": both(hf, sym("qk_norm")), "latent": latent, "no_latent": negate(latent),
        "q_lora": both(latent, sym("q_lora_rank") > 0), "no_q_lora": both(latent, eq(sym("q_lora_rank"), 0)),
        "fp32_projections": both(negate(low_precision), negate(autocast)),
        "first_dense": both(hf, sym("experts") > 0, sym("first_dense_layers") > 0),
        "rotary_complex": eq(sym("moe_block"), "deepseek_v2"), "rotary_real": ne(sym("moe_block"), "deepseek_v2"),
        # transformers' MoE blocks (the architecture's moe_block; oplists._HF_MOE).
        "router_fp32": both(hf, low_precision, isin(sym("moe_block"), "deepseek_v2", "deepseek_v3")),
        "group_limited": both(hf, sym("group_limited"), eq(sym("moe_block"), "deepseek_v2")),
        "topk_renormalised": both(sym("norm_topk"), ne(sym("moe_block"), "deepseek_v2")),
        "routing_weights_cast": isin(sym("moe_block"), "qwen2_moe", "qwen3_moe", "gpt_oss"),
        "routing_weights_fp32": negate(isin(sym("moe_block"), "qwen2_moe", "qwen3_moe", "gpt_oss")),
        # gpt-oss (transformers 5.23 models/gpt_oss/modeling_gpt_oss.py; measured: content/validation/moe.json).
        "sinks": both(hf, sym("attention_sinks")), "no_sinks": negate(both(hf, sym("attention_sinks"))),
        "gpt_oss_moe": both(hf, eq(sym("moe_block"), "gpt_oss")),
        "no_gpt_oss_moe": negate(both(hf, eq(sym("moe_block"), "gpt_oss"))),
        "half_rotary": both(hf, eq(sym("model_family"), "gpt_oss")),
        "no_half_rotary": negate(both(hf, eq(sym("model_family"), "gpt_oss"))),
        "fp32_norm_product": both(hf, eq(sym("model_family"), "gpt_oss")),
        "no_fp32_norm_product": negate(both(hf, eq(sym("model_family"), "gpt_oss"))),
        "shared_expert_gate": both(hf, sym("shared_experts") > 0, eq(sym("moe_block"), "qwen2_moe")),
        # Phi-3 (oplists._PHI3_ATTENTION): V a view of qkv_proj's output where the kernel gets it uncopied; the
        # kernel's output heads first (and o_proj's input a copy) but under the memory-efficient kernel a mask selects.
        "fused_projections": fused_layers, "unfused_projections": negate(fused_layers),
        "qkv_view": both(fused_layers, negate(eager), negate(gqa_repeat)),
        "o_copy": both(fused_layers, negate(eager), negate(padding_mask)),
        "o_copy_adapter": both(fused_layers, negate(eager), negate(padding_mask), lora["o"], negate(own_input("o"))),
    }


CONDITION_RULES = _conditions()
assert set(CONDITION_RULES) == set(oplists.CONDITIONS), set(CONDITION_RULES) ^ set(oplists.CONDITIONS)

# Which op list describes one block.
# Compiled transformers layers (torch.compile) have op lists of their own (oplists.HF_*_COMPILED).
COMPILED = sym("compile")
BLOCK = when(eq(sym("implementation"), "megatron"), when(sym("experts") > 0, "megatron-moe", "megatron"),
             when(eq(sym("norm"), "layernorm"), when(COMPILED, "hf-gpt2-compiled", "hf-gpt2"),
                  when(sym("experts") > 0, "hf-moe", when(COMPILED, "hf-llama-compiled", "hf-llama"))))


def _holds(condition: str) -> Any:
    """An op-list row's condition ('' always, or names joined by '&') as a rule."""
    names = [sym(f"holds_{name}") for name in condition.split("&") if name]
    return both(*names) if len(names) > 1 else names[0] if names else 1


def _bytes(r: oplists.Row) -> Expr:
    """A row's bytes: coefficient x its shape's symbols x the size of its dtype ('act': the activation dtype,
    'lin': a linear layer's input as it saves it, 'proj': a projection's output, 'grad': the gradient dtype)."""
    sizes = {"act": sym("act_bytes"), "lin": sym("lin_bytes"), "proj": sym("proj_bytes"), "grad": sym("grad_bytes"),
             "int64": lift(8), "int32": lift(4)}
    size = sizes[r.dtype] if r.dtype in sizes else DTYPE_BYTES[r.dtype]
    share = (sym(f"op_{r.layers}_share"),) if r.layers else ()  # an MoE model's dense or MoE layers (Row.layers)
    return Expr("*", r.coefficient, *(sym(f"op_{x}") for x in r.shape.split()), size, *share)


def rows_rule(rows: tuple[oplists.Row, ...], *fields: str) -> Expr:
    """A table rule of op-list rows: each row's group and bytes, and the `fields` asked for: 'core' (core
    attention, dropped by selective recompute), 'grad' (a weight gradient) or 'position' (its place in the list)."""
    def extra(i: int, r: oplists.Row) -> dict[str, Any]:
        values = {"core": int(r.core), "grad": int(r.dtype == "grad"), "position": i}
        return {name: values[name] for name in fields}

    return table(*(row(_holds(r.condition), group=r.group, bytes=_bytes(r), **extra(i, r)) for i, r in enumerate(rows)))


def rows_total(rows: tuple[oplists.Row, ...]) -> Any:
    """The bytes of the rows whose conditions hold, added up (a sum, without a table)."""
    terms = [when(_holds(r.condition), _bytes(r), 0) if r.condition else _bytes(r) for r in rows]
    return Expr("+", *terms) if terms else 0


def _by_block(rules: dict[str, Any]) -> Any:
    """The rule of the block the run uses (`BLOCK`), from one rule per op list."""
    (name, first), *rest = rules.items()
    return when(eq(sym("block"), name), first, _by_block(dict(rest))) if rest else first


# Korthikanti et al. 2022, Table 2, per layer: bytes = sbh x (c + c_t / t + k x 5as/(ht)), as (notation, c, c_t, k)
# per recompute setting and layout ('1': no tensor parallelism, 't': tensor parallel, 's': tensor + sequence
# parallel). Full recomputation keeps only the layer input, 2sbh (split over t under SP).
KORTHIKANTI_TABLE = {
    "none1": ("sbh(34 + 5as/h)", 34, 0, 1), "nonet": ("sbh(10 + 24/t + 5as/(ht))", 10, 24, 1),
    "nones": ("sbh(34/t + 5as/(ht))", 0, 34, 1),
    "selective1": ("34sbh", 34, 0, 0), "selectivet": ("sbh(10 + 24/t)", 10, 24, 0),
    "selectives": ("34sbh/t", 0, 34, 0),
    "full1": ("2sbh", 2, 0, 0), "fullt": ("2sbh", 2, 0, 0), "fulls": ("2sbh/t", 0, 2, 0),
}
_LAYOUT = when(eq(TP, 1), "1", when(sym("sequence_parallel"), "s", "t"))
# Table 2 has no row for torchtitan's per-op checkpointing: the checks refuse the reference mode with it, and its row
# here (all zero) only keeps the symbol defined for the op-by-op count.
KORTHIKANTI_ROW = at(table(*(row(both(eq(sym("recompute"), key[:-1]), eq(_LAYOUT, key[-1])), notation=notation,
                                 constant=c, per_t=c_t, attention=k)
                             for key, (notation, c, c_t, k) in KORTHIKANTI_TABLE.items()),
                           row(OP_SAC, notation="no Table 2 row", constant=0, per_t=0,
                               attention=0)), 0)
KORTHIKANTI_LAYER = sym("op_s") * sym("micro_batch") * sym("hidden") * (
    at(sym("korthikanti"), "constant") + at(sym("korthikanti"), "per_t") / TP
    + at(sym("korthikanti"), "attention") * 5 * sym("heads") * sym("op_s") / (sym("hidden") * TP))

SELECTIVE = eq(sym("recompute"), "selective")
NOTHING = by(table(), "group", 0)  # an empty mapping
FULL = eq(sym("recompute"), "full")
# torchtitan's per-op selective checkpointing (oplists.TORCHTITAN_OP_SAC), and the modes that checkpoint layers.
CHECKPOINTED = isin(sym("recompute"), *CHECKPOINTING)
# Full recomputation of every layer of a stage, or of its first `recompute_layers` only (Megatron-LM's block
# method); the checks keep that count below every stage's layers, so a stage's last layer is then never checkpointed.
# torchtitan's per-op checkpointing wraps every layer (the checks refuse a count with it).
ALL_RECOMPUTED = either(both(FULL, eq(sym("recompute_layers"), 0)), OP_SAC)
OPS = eq(sym("activation_formula"), "ops")
LAST_ROWS = when(both(eq(sym("norm"), "rmsnorm"), isin(sym("implementation"), "hf", "torchtune")),
                 rows_rule(oplists.LAST_STAGE_RMSNORM), rows_rule(oplists.LAST_STAGE_LAYERNORM))

# The conditions (holds_<name>), the block and the dtype sizes: what a run's shape and settings decide, not its
# sizes, so a search over batch or sequence length derives them once.
HF_SOURCE = when(either(CONDITION_RULES["qk_norm"], CONDITION_RULES["latent"]), HF_CODE + "; " + HF_ATTENTION, HF_CODE)
OP_CONDITIONS = RuleSet(symbols={**{f"holds_{name}": rule for name, rule in CONDITION_RULES.items()}, "block": BLOCK,
                                 "op_source": when(eq(sym("implementation"), "megatron"),
                                                   when(sym("experts") > 0, KORTHIKANTI + "; " + MEGATRON_MOE,
                                                        KORTHIKANTI),
                                                   when(eq(sym("implementation"), "torchtune"), TORCHTUNE_CODE,
                                                        when(CONDITION_RULES["padding_mask"],
                                                             when(sym("experts") > 0,
                                                                  fmt("{0}; {1}; {2}", HF_SOURCE, HF_MOE, PADDED),
                                                                  fmt("{0}; {1}", HF_SOURCE, PADDED)),
                                                             when(sym("experts") > 0,
                                                                  fmt("{0}; {1}", HF_SOURCE, HF_MOE),
                                                                  HF_SOURCE)))),
                                 "act_bytes": bytes_of(SAVED_DTYPE),
                                 # A projection's output: bitsandbytes' Linear4bit casts it back to its input's dtype,
                                 # fp32 in a prepared QLoRA model's stream, also under autocast.
                                 "proj_bytes": when(both(sym("qlora"), sym("holds_autocast")), DTYPE_BYTES["fp32"],
                                                    bytes_of(SAVED_DTYPE)),
                                 "grad_bytes": bytes_of(sym("grad_dtype")),
                                 # A linear layer's saved input: the activation dtype, or a recipe's quantised copy.
                                 "lin_bytes": when(recipe_on(), by_recipe("saved_input"), bytes_of(SAVED_DTYPE))},
                         parts=())
# The symbols every activation rule reads (on top of OP_CONDITIONS'): the op-list symbols, the block's rows (with
# their places, for the moments), what one layer keeps saved per group (selective recompute drops core attention,
# full recompute everything: its checkpoint is a part of its own) and the embedding's and head's rows.
SYMBOLS: dict[str, Any] = {
    **OP_SYMBOLS,
    "layer_rows": _by_block({name: rows_rule(rows, "core", "position") for name, rows in oplists.BLOCKS.items()}),
    # What a layer that is not checkpointed keeps, per group, and what the stage's last layer keeps.
    "layer_saved": when(SELECTIVE, by(sym("layer_rows"), "group", when(sym("core"), 0, sym("bytes"))),
                        by(sym("layer_rows"), "group", sym("bytes"))),
    "layer_kept": when(ALL_RECOMPUTED, NOTHING, sym("layer_saved")),
    "first_saved": by(when(sym("stage_has_embedding"), rows_rule(oplists.FIRST_STAGE), table()), "group",
                      sym("bytes")),
    "last_saved": by(when(sym("stage_has_head"), LAST_ROWS, table()), "group", sym("bytes")),
    "stage_copies": sym("stage_layers") * sym("stage_in_flight"),
    # The stage's checkpointed layers (all of them under full recomputation, or the first recompute_layers) and the
    # others, each per micro-batch in flight.
    "checkpointed": when(CHECKPOINTED, when(sym("recompute_layers"), sym("recompute_layers"), sym("stage_layers")), 0)
                    * sym("stage_in_flight"),
    "plain_layers": sym("stage_copies") - sym("checkpointed"),
    # Offloaded activations (torchtune): the GPU holds one layer's saved tensors (or checkpoint) at a time, the host
    # all of them.
    "gpu_plain": when(sym("offload_activations"), minimum(1, sym("plain_layers")), sym("plain_layers")),
    "gpu_checkpoints": when(sym("offload_activations"), minimum(1, sym("checkpointed")), sym("checkpointed")),
    "korthikanti": KORTHIKANTI_ROW,
}


def per_token(amount: Any) -> PerUnit:
    """Bytes per token on this GPU, the number and as a chart annotates it: '69.0 KiB/token' or '512 B/token'."""
    each = amount / maximum(1, sym("op_T"))
    return PerUnit(each, "token", words=when(each >= 1024, fmt("{0} KiB/token", fixed(each / 1024, 1)),
                                             fmt("{0} B/token", fixed(each, 0))))


def per_token_text(amount: Fraction, tokens: Fraction) -> str:
    """`per_token` of an amount already worked out."""
    return evaluate(per_token(sym("amount")).text(), {"amount": amount, "op_T": tokens})


def _groups(*lists: tuple[oplists.Row, ...]) -> tuple[str, ...]:
    """The groups of op lists, in the order they first appear."""
    return tuple(dict.fromkeys(r.group for rows in lists for r in rows))


LAYER_GROUPS = _groups(*oplists.BLOCKS.values())
FIRST_GROUPS = _groups(oplists.FIRST_STAGE)
LAST_GROUPS = _groups(oplists.LAST_STAGE_LAYERNORM, oplists.LAST_STAGE_RMSNORM)
# Whose code the op lists follow, worked out once with the conditions (OP_CONDITIONS) and named by every part.
SOURCE = sym("op_source")
CHECKPOINT = sym("op_Tr") * sym("hidden") * when(sym("holds_autocast"), DTYPE_BYTES["fp32"], sym("act_bytes"))
LAYER = total(sym("layer_rows"), sym("bytes"))
# torchtitan's per-op checkpointing: the op outputs one layer keeps (oplists.TORCHTITAN_OP_SAC), those of them the
# recomputed layer's autograd holds again, and those made after a checkpointed forward's MLP product.
SAC_LAYER = rows_total(oplists.TORCHTITAN_OP_SAC)
SAC_AFTER_PRODUCT = rows_total(tuple(r for r in oplists.TORCHTITAN_OP_SAC
                                     if r.op in oplists.TORCHTITAN_OP_SAC_AFTER_PRODUCT))
assert {r.op for r in oplists.TORCHTITAN_OP_SAC} >= set(oplists.TORCHTITAN_OP_SAC_AFTER_PRODUCT) | set(
    oplists.TORCHTITAN_OP_SAC_SHARED)
# What a stage's layers keep saved across the step: the layers that are not checkpointed their groups, the others
# their checkpoint.
STAGE_KEPT = (sum((get(sym("layer_saved"), group, 0) for group in LAYER_GROUPS), Expr("num", 0)) * sym("plain_layers")
              + CHECKPOINT * sym("checkpointed"))
OFFLOADED = sym("offload_activations")
SOME_RECOMPUTED = both(FULL, sym("recompute_layers") > 0)
IN_LAYERS = when(OFFLOADED, "one layer of the sum of tensors saved by each op (the other layers' on the host)",
                 when(SOME_RECOMPUTED, "(L_stage - K) x in_flight x sum of tensors saved by each op",
                      "L_stage x in_flight x sum of tensors saved by each op"))
IN_CHECKPOINTS = when(OFFLOADED, "one layer input (the other checkpoints on the host)",
                      when(SOME_RECOMPUTED, "K x in_flight x one layer input", "L_stage x in_flight x one layer input"))
ON_GPU_NOTE = when(OFFLOADED, "simplification: one whole layer on the GPU at a time, an upper bound (the backward "
                              "brings a layer back node by node, freeing each node's tensors when the next starts; "
                              "the forward keeps only the 5 latest); tensors under 1,024 bytes, which stay, are not "
                              "counted", "")



def _noted(base: Any, *notes: tuple[Any, str]) -> Any:
    """The note `base` with each (condition, text) whose condition holds put before it, joined by '; '."""
    for condition, text in reversed(notes):
        base = when(condition, when(ne(base, ""), fmt("{0}; {1}", text, base), text), base)
    return base


# Layer shapes the op lists do not follow, named on the parts they leave out (measured on small layers with
# transformers 5.23 on CPU: content/validation/moe.json, whole layer against the op lists).
MOE_FIRST_DENSE = both(sym("experts") > 0, sym("first_dense_layers") > 0)
# A compiled dense layer's op list (oplists.HF_LLAMA_BLOCK_COMPILED) is Llama's: Qwen3's q/k norms and DeepSeek's latent
# attention were measured without torch.compile only (oplists._QK_NORMS, _LATENT_ATTENTION).
COMPILED_HF = both(COMPILED, isin(sym("implementation"), "hf", "torchtune"), eq(sym("experts"), 0))
LAYER_NOTES = {
    "attention": ((both(sym("kv_lora_rank") > 0, COMPILED_HF),
                   "simplification: under torch.compile, latent attention (DeepSeek) is counted as standard attention "
                   "with head_dim-wide keys and values (not measured compiled)"),),
    "norms": ((both(sym("qk_norm"), COMPILED_HF),
               "simplification: under torch.compile, the RMSNorms over each query and key head (Qwen3) are not "
               "counted (not measured compiled)"),),
    # torchtune's QLoRA layers compiled: torchao's LinearNF4 saves only its weight in eager code; compiled, the same is
    # assumed (torchao is not installed where the compiled adapters were measured).
    "lora": ((both(COMPILED_HF, sym("qlora")),
              "simplification: under torch.compile, torchao's 4-bit base layers are taken to save what they save "
              "eagerly, their 4-bit weight only (measured compiled with 16-bit base layers)"),),
    **{group: ((both(MOE_FIRST_DENSE, eq(sym("implementation"), "megatron")),
                "simplification: the first dense layers are counted as MoE layers"),
               (both(MOE_FIRST_DENSE, ne(sym("implementation"), "megatron")),
                "simplification: every layer counts the average of the first dense layers and the MoE layers (exact "
                "over the whole model; a pipeline stage gets the average layer)"),
               # torchtune builds MoE layers of its own (a token-choice router and grouped experts), not measured.
               (both(sym("experts") > 0, eq(sym("implementation"), "torchtune")),
                "simplification: torchtune's own MoE layer is counted with transformers' rows (not measured)"))
       for group in ("mlp", "router")},
}

ACTIVATIONS = RuleSet(symbols=SYMBOLS, parts=(
    PartRule("activations/layers", KORTHIKANTI_LAYER * sym("stage_copies"),
             fmt("L_stage x in_flight x {0}", at(sym("korthikanti"), "notation")), KORTHIKANTI,
             fmt("{0} per layer", at(sym("korthikanti"), "notation")),
             "reference mode: Table 2 assumes a GPT block with 16-bit activations and dropout; embeddings, logits "
             "and loss are left out as in Table 2", when=negate(OPS)),
    *(PartRule(f"activations/{group}", at_group * sym("gpu_plain"), IN_LAYERS, SOURCE, per_token(at_group),
               _noted(ON_GPU_NOTE, *LAYER_NOTES.get(group, ())), when=OPS)
      for group in LAYER_GROUPS for at_group in [get(sym("layer_saved"), group, 0)]),
    # Checkpointing keeps the block's input (Chen et al. 2016; Korthikanti et al. 2022 section 4.1: 2sbh), and so does
    # torchtitan's per-op checkpointing (its ptd_checkpoint_wrapper around each block).
    PartRule("activations/checkpoint", CHECKPOINT * sym("gpu_checkpoints"), IN_CHECKPOINTS,
             when(SOME_RECOMPUTED, fmt("{0}; {1}", SOURCE, MEGATRON_BLOCK),
                  when(OP_SAC, fmt("{0}; {1}", SOURCE, TORCHTITAN_SAC), SOURCE)), per_token(CHECKPOINT),
             ON_GPU_NOTE, when=both(OPS, CHECKPOINTED)),
    # torchtitan's per-op checkpointing: the outputs of the ops its policy saves, in every layer (oplists.
    # TORCHTITAN_OP_SAC: 1st, 3rd, 5th and 7th matmul of the block, the attention kernel, reduce-scatters).
    PartRule("activations/op_outputs", SAC_LAYER * sym("gpu_checkpoints"),
             "L_stage x in_flight x (q, v, attention output and logsumexp, gate and down outputs of one layer)",
             TORCHTITAN_SAC, per_token(SAC_LAYER),
             "every second matmul recomputed (k, o, up); tensor parallelism: down's output is each rank's partial sum "
             "(T x h), and with sequence parallelism the reduce-scatter outputs of o and down are kept too; "
             "simplifications: separate bias-free q, k and v projections (torchtitan's Llama 3 configurations at "
             "b5bcd76 fuse them into one wqkv matmul, which keeps k too), the flash kernel's philox seed and offset "
             "not counted", when=both(OPS, OP_SAC)),
    # Offloaded: every layer's saved tensors in pinned host memory (builder.model.placement moves this part there).
    PartRule("activations/offloaded", STAGE_KEPT,
             "L_stage x in_flight x one layer's saved tensors, in host memory", OFFLOAD,
             per_token(STAGE_KEPT / maximum(1, sym("stage_copies"))),
             "the embedding's and final norm's saved tensors are counted on the GPU (torchtune offloads them too; "
             "only the output layer's stay)", when=both(OPS, OFFLOADED)),
    # Under torchtitan's per-op checkpointing the recomputation takes the layer's kept outputs from the cache: those
    # autograd saves again (v, the attention output and logsumexp, the gate output) are the kept tensors, the others
    # (q, down) are freed once the recomputed forward has used them, so the layer adds its saved tensors less its kept
    # outputs.
    PartRule("activations/recompute_working_layer", when(OP_SAC, maximum(0, LAYER - SAC_LAYER), LAYER),
             when(OP_SAC, "one layer's saved tensors, recomputed during its backward, less that layer's kept op outputs",
                  "one layer's saved tensors, recomputed during its backward"),
             CHEN, per_token(when(OP_SAC, maximum(0, LAYER - SAC_LAYER), LAYER)),
             when(OP_SAC, "peak during backward, not saved across layers; simplification: torchtitan's block is counted "
                          "with transformers' op list (its fused RMSNorm and complex-number rotary are not measured)",
                  "peak during backward, not saved across layers"), when=both(OPS, CHECKPOINTED),
             transient=True),
    *(PartRule(f"activations/{group}", amount, "sum of saved tensors", SOURCE, per_token(amount),
               when=both(OPS, sym(stage)))
      for groups, saved, stage in ((FIRST_GROUPS, "first_saved", "stage_has_embedding"),
                                   (LAST_GROUPS, "last_saved", "stage_has_head"))
      for group in groups for amount in [get(sym(saved), group, 0) * sym("stage_in_flight")]),
    PartRule("activations/logits", sym("op_T") * sym("op_V") * sym("act_bytes"), "b x s x V x bytes(activation dtype)",
             HF_CODE, fmt("{0} B per token per vocabulary entry", per_unit(sym("act_bytes"))),
             "the logits the forward returns (not a saved tensor); the peak of a step frees them before backward, "
             "as a loop that keeps only the loss does (a compiled loss keeps them as a saved tensor; a fused linear "
             "cross-entropy makes none)",
             when=both(OPS, sym("stage_has_head"), isin(sym("loss"), "eager", "chunked")), transient=True),
))
assert not set(FIRST_GROUPS) & set(LAST_GROUPS) and not set(LAYER_GROUPS) & set(FIRST_GROUPS + LAST_GROUPS)


# Inside a layer -------------------------------------------------------------------------------

def _moment(block: str, moment: oplists.Moment) -> Expr:
    """One oplists.Moment as a row of its block's MOMENTS table: where it holds (its condition), its phase
    and instant, what is live of the layer then per group (the rows up to its anchor; a checkpointed layer's
    forward has dropped the norms' tensors), its temporaries (activations; freed rows negative), the weight
    gradients the layer has made by then and, in the first layer, the shared first-stage tensors freed by then."""
    ops = [r.op for r in oplists.BLOCKS[block]]
    anchor = ops.index(moment.anchor) if moment.anchor else len(ops)
    live = sym("position") <= anchor
    if moment.phase == "layer_forward":
        live = both(live, negate(both(ALL_RECOMPUTED, isin(sym("group"), *NO_GRAD_GONE))))
    return row(_holds(moment.condition), phase=moment.phase, op=moment.op,
               live=by(sym("layer_rows"), "group", when(live, sym("bytes"), 0)),
               temporaries=rows_total(tuple(r for r in moment.temporaries if r.dtype != "grad")),
               made=rows_total(tuple(r for r in moment.temporaries if r.dtype == "grad")),
               first_freed=rows_total(moment.first_freed))


# The instants inside a layer whose conditions hold for the run (none for the Korthikanti reference mode), one
# table per kind (forward, backward, and the final norm's backward before the last layer's) in the op list's order,
# with every weight gradient of one layer and the output layer's (made before any layer's in the backward).
# builder.model.step weighs them.
MOMENT_KINDS = ("layer_forward", "layer_backward", "final_norm_backward")
MOMENT_SYMBOLS = {
    **{f"moments_{kind}": when(OPS, _by_block({block: table(*(_moment(block, m) for m in moments if m.phase == kind))
                                               for block, moments in oplists.MOMENTS.items()}), table())
       for kind in MOMENT_KINDS},
    "layer_grads": _by_block({name: rows_total(rows) for name, rows in oplists.LAYER_GRADS.items()}),
    "head_grads": rows_total(oplists.HEAD_GRADS),
}
MOMENTS = RuleSet(symbols=MOMENT_SYMBOLS, parts=())


def environment(arch: Architecture | None, config: Config) -> dict[str, Any]:
    """The activation symbols of a run (on its first pipeline stage; what one GPU holds is not read here)."""
    return ACTIVATIONS.environment(OP_CONDITIONS.environment({**run_inputs(arch, config),
                                                              **stages(arch, config)[0].inputs()}))


@lru_cache(maxsize=64)
def moment_environment(arch: Architecture | None, config: Config) -> dict[str, Any]:
    """The activation and moment symbols of a run: the same for every pipeline stage, so worked out once per run
    (do not change the mapping returned)."""
    return MOMENTS.environment(environment(arch, config))


def conditions(arch: Architecture, config: Config) -> set[str]:
    """The op-list conditions that hold for this architecture and configuration."""
    env = environment(arch, config)
    return {name for name in CONDITION_RULES if env[f"holds_{name}"]}


def korthikanti_per_layer(s: int, b: int, h: int, a: int, t: int = 1, sequence_parallel: bool = False,
                          recompute: str = "none") -> Fraction:
    """Activation bytes per transformer layer, Table 2 of Korthikanti et al. 2022 (the rule KORTHIKANTI_LAYER).

    no parallelism: sbh(34 + 5as/h); tensor parallel: sbh(10 + 24/t + 5as/(ht));
    tensor + sequence parallel: sbh(34/t + 5as/(ht)); selective recompute drops the
    5as/h term; full recompute keeps 2sbh (the layer input; /t under SP).
    """
    env = derive({"op_s": OP_SYMBOLS["op_s"], "korthikanti": KORTHIKANTI_ROW},
                 {"seq_len": s, "cp": 1, "micro_batch": b, "hidden": h, "heads": a, "tp": t,
                  "sequence_parallel": int(sequence_parallel), "recompute": recompute})
    return Fraction(evaluate(KORTHIKANTI_LAYER, env))
