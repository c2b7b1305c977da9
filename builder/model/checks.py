"""The checks that need the model's inputs, as rules: each says when an architecture's shape (SHAPE_CHECKS) or a
configuration (CHECKS) is refused and, in one line, why. Architecture and validate_config run them (after the
checks of each option's own type and range); the calculator's script runs the same rules on a reader's form
(a custom architecture, the run), with the same words.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from builder.model import exprcode
from builder.model.adapters import HEAD as LORA_HEAD
from builder.model.expr import (Expr, Value, both, either, encode, eq, evaluate, fmt, has, isin, mod, ne, negate, real,
                                sym, when)
from builder.model.checkpoint import DEEPSPEED_SAVES, FSDP_SAVES, GATHERING
from builder.model.float8 import HEAD as FLOAT8_HEAD
from builder.model.gradbuffers import DDP, MEGATRON
from builder.model.ranges import RANGES, Range
from builder.model.serving import learned_positions_text, past_learned_positions
from builder.model.states import FSDP_MIXED, HYBRID_GROUP, READS_REDUCE_DTYPE, SHARD_GROUP, SHARD_RANKS
from builder.model.buckets import DEEPSPEED_ENGINE, UNSET as BUCKET_UNSET
from builder.model.zero3 import DEEPSPEED_ZERO3, DEFAULTS as ZERO3_OPTIONS, UNSET as ZERO3_UNSET

# torchtitan's per-op selective checkpointing as the rules name it (builder.model.activations reads it from here).
OP_SAC = eq(sym("recompute"), "selective-op")
# A sliding window every layer keeps (Mistral 7B v0.1, Phi-3-mini-4k) that the sequence reaches: transformers 5.23
# makes a 4-D mask for it (masking_utils.py _ignore_causal_mask_sdpa: `local_attention_size is not None and
# kv_length >= local_attention_size`), which its SDPA attention takes as a padded batch's (builder.model.activations).
SLIDING_WINDOW_REACHED = both(sym("sliding_window") > 0, eq(sym("sliding_window_pattern"), 0),
                              sym("seq_len") >= sym("sliding_window"))
SLIDING_MASK = both(SLIDING_WINDOW_REACHED, eq(sym("attention"), "sdpa"), eq(sym("implementation"), "hf"))

# Whole-number options that must be at least 1 and are always given, in the order they are checked.
POSITIVE = tuple(r.option for r in RANGES if r.whole and r.low == 1 and r.unset is None)


@dataclass(frozen=True)
class Check:
    """A configuration the model refuses (`refused` holds) and the one-line message that says why."""

    refused: Expr
    message: Expr


ARCH = sym("has_architecture")
# Optimizers whose blockwise low-bit states fix their own dtype: bitsandbytes' 8-bit AdamW and its paged version,
# torchao's AdamW8bit, AdamW4bit and AdamWFp8 (builder.model.states' rules for each).
LOW_BIT_OPTIMIZERS = ("adam8bit", "paged-adamw8bit", "adamw8bit-torchao", "adamw4bit", "adamwfp8")
SAVE = sym("checkpoint_save")
# A run of Megatron-LM's own data parallelism (builder.model.gradbuffers' MEGATRON without an FSDP strategy, which
# the model counts as PyTorch FSDP), and how a message names what made the run Megatron-LM's.
MEGATRON_DDP = both(eq(sym("mode"), "train"), MEGATRON, negate(sym("fsdp")))
MEGATRON_NAMED = when(sym("grad_buffer"), "a Megatron precision", "implementation megatron")
# The states torchtune keeps in its one dtype besides the weights (the CHECKS row on implementation torchtune).
TORCHTUNE_ONE_DTYPE = ("grad_dtype", "optimizer_state_dtype", "activation_dtype")

# An architecture's shape (its shape inputs, builder.model.tensors; kv_heads as many as the heads where not given).
SHAPE_CHECKS: tuple[Check, ...] = (
    *(Check(sym(size) <= 0, fmt("{0}: {1} must be positive, got {2}", sym("model_name"), size, sym(size)))
      for size in ("layers", "hidden", "heads", "vocab")),
    Check(either(sym("kv_heads") <= 0, mod(sym("heads"), sym("kv_heads"))),
          fmt("{0}: kv_heads ({1}) must divide heads ({2})", sym("model_name"), sym("kv_heads"), sym("heads"))),
    Check(both(sym("experts"), either(sym("top_k") <= 0, sym("top_k") > sym("experts"))),
          fmt("{0}: top_k must be in 1..experts ({1}), got {2}", sym("model_name"), sym("experts"), sym("top_k"))),
)


def range_checks(bounds: Range) -> tuple[Check, ...]:
    """The checks of one row of builder.model.ranges.RANGES: below its low end, above its high end, each in one
    line naming the option and the limit."""
    value = sym(bounds.option)
    if not bounds.whole:
        return (Check(either(value < bounds.low, value > bounds.high),
                      fmt("{0}: must be a fraction between {1} and {2}, got {3}", bounds.option,
                          bounds.text(bounds.low), bounds.text(bounds.high), real(value))),)
    below = value < bounds.low if bounds.unset is None else both(value < bounds.low, ne(value, bounds.unset))
    return (Check(below, fmt("{0}: must be at least {1}, got {2}", bounds.option, bounds.text(bounds.low), value)),
            Check(value > bounds.high,
                  fmt("{0}: must be at most {1}, got {2}", bounds.option, bounds.text(bounds.high), value)))


CHECKS: tuple[Check, ...] = (
    *(check for bounds in RANGES for check in range_checks(bounds)),
    # A sequence past a learned position table (builder.model.serving.past_learned_positions); vLLM and SGLang refuse
    # such a length at start-up (builder.model.serving.beyond_model, the rule both engines' checks use), generate
    # with its new tokens (builder.model.engine_hf).
    *(Check(both(eq(sym("mode"), mode), past_learned_positions(sym(length))),
            fmt("{0}: {1}", length, learned_positions_text(sym(length))))
      for mode, length in (("train", "seq_len"), ("serve", "context"))),
    # gpt-oss's MXFP4 checkpoint (Architecture.checkpoint_quantization, builder.model.states' MXFP4 rules) serves in bf16:
    # vLLM 0.33.0 quantization/mxfp4.py Mxfp4Config.get_supported_act_dtypes is [torch.bfloat16] (another --dtype is
    # refused at start-up), SGLang 0.5.23's gpt-oss override sets dtype bfloat16 for an mxfp4 checkpoint
    # (arg_groups/model_overrides/gpt_oss.py), and the checkpoint's own quant_method leaves no other weight format
    # (vLLM: "Quantization method specified in the model config (mxfp4) does not match the quantization method
    # specified in the `quantization` argument", vllm/config/model.py _verify_quantization).
    Check(both(ARCH, eq(sym("mode"), "serve"), eq(sym("checkpoint_quantization"), "mxfp4"), ne(sym("param_dtype"), "bf16")),
          fmt("param_dtype: {0}'s checkpoint keeps its experts in MXFP4 and the rest in bf16, and the engines serve "
              "it in bf16 alone (vLLM's Mxfp4Config supports bfloat16 activations only; SGLang sets dtype bfloat16); "
              "{1} weights are not a way to serve it", sym("model_name"), sym("param_dtype"))),
    # gpt-oss in training, as transformers 5.23 runs it (models/gpt_oss/modeling_gpt_oss.py, measured on CPU:
    # content/validation/moe.json): eager attention, whose sinks join the softmax (GptOssPreTrainedModel has
    # _supports_sdpa = False, and a flash_attention_2 request is swapped for the kernels its
    # _compatible_flash_implementations list, kernels-community/vllm-flash-attn3 first: modeling_utils.py), and 3-D
    # expert parameters (GptOssExperts), which bitsandbytes' 4-bit layers (nn.Linear) and PEFT's target_modules do not
    # reach.
    *(Check(both(ARCH, eq(sym("mode"), "train"), eq(sym("model_family"), "gpt_oss"), refused),
            fmt(why, sym("model_name"), *args)) for refused, why, args in (
        (ne(sym("implementation"), "hf"), "implementation: {0}'s layers are modelled as transformers runs them "
         "(implementation hf), not as {1}'s", (sym("implementation"),)),
        (eq(sym("attention"), "sdpa"), "attention: transformers' gpt-oss takes no SDPA (GptOssPreTrainedModel."
         "_supports_sdpa is False: its attention sinks join the softmax); {0} trains with eager attention", ()),
        (eq(sym("attention"), "flash"), "attention: transformers swaps flash_attention_2 for the kernels {0} lists "
         "(kernels-community/vllm-flash-attn3 first), whose training with attention sinks is not measured; choose "
         "eager attention", ()),
        (sym("qlora"), "qlora: bitsandbytes quantises nn.Linear layers, and {0}'s experts are 3-D parameters "
         "(GptOssExperts) that would stay 16-bit; QLoRA over it is not modelled", ()),
        (both(sym("lora_rank") > 0, either(has(sym("lora_targets"), "gate"), has(sym("lora_targets"), "up"),
                                           has(sym("lora_targets"), "down"))),
         "lora_targets: {0}'s experts are 3-D parameters (GptOssExperts' gate_up_proj and down_proj), which PEFT "
         "adapts through target_parameters, not modelled; target the attention (q, k, v, o)", ()),
    )),
    Check(both(sym("qlora"), eq(sym("lora_rank"), 0)), fmt("qlora: QLoRA needs lora_rank > 0")),
    Check(both(ne(sym("kbit_prepare"), "none"), negate(sym("qlora"))),
          fmt("kbit_prepare: {0} prepares a 4-bit model for training; it needs qlora", sym("kbit_prepare"))),
    # prepare-bf16 casts the output layer back to bf16 and leaves the norms in fp32: the final norm's fp32 output meets
    # a bf16 lm_head, which F.linear refuses without torch.autocast ("expected m1 and m2 to have the same dtype",
    # measured with PEFT 0.21.2 and bitsandbytes 0.50.2); artidoro/qlora runs it under Trainer's bf16 autocast.
    Check(both(eq(sym("mode"), "train"), eq(sym("kbit_prepare"), "prepare-bf16"), negate(sym("autocast"))),
          fmt("kbit_prepare: prepare-bf16 leaves the final norm's output fp32 and the output layer bf16, which only "
              "runs under torch.autocast; choose a precision under autocast (amp-bf16 or bf16-autocast: Trainer's "
              "bf16=True) or kbit_prepare prepare")),
    Check(both(sym("lora_dropout") > 0, eq(sym("lora_rank"), 0)),
          fmt("lora_dropout: LoRA dropout acts on the adapters' input and needs lora_rank > 0")),
    # torchtune has no mixed precision: every recipe (recipes/full_finetune_single_device.py,
    # full_finetune_distributed.py, lora_finetune_single_device.py, lora_finetune_distributed.py at 30b8519) reads
    # cfg.dtype through training.get_dtype (torchtune/training/precision.py PRECISION_STR_TO_DTYPE: bf16, fp32, ...),
    # builds the model in it (training.set_default_dtype), refuses fp16 ("full fp16 training is not supported with
    # this recipe. Please use bf16 or fp32 instead."), shards with fully_shard without a MixedPrecisionPolicy
    # (training.shard_model) and runs without torch.autocast; the docstrings: "When dtype=bf16, all activations,
    # gradients and optimizer states are in bfloat16 ... Mixed precision training and fp16 precision are currently
    # not supported." So weights, gradients, optimizer states (torch.optim's zeros_like the parameter) and
    # activations share the one dtype, with no master copy: precision bf16 or fp32.
    # Its QLoRA weights are torchao's NF4Tensor, whose to_nf4 always double-quantises the scalers
    # (torchao/dtypes/nf4tensor.py NF4Tensor.from_tensor at v0.5.0), and it has no prepare_model_for_kbit_training
    # (PEFT's).
    Check(both(eq(sym("mode"), "train"), eq(sym("implementation"), "torchtune"),
               either(sym("autocast"), negate(isin(sym("param_dtype"), "bf16", "fp32")), sym("master_dtype"),
                      *(ne(sym(state), sym("param_dtype")) for state in TORCHTUNE_ONE_DTYPE),
                      *(both(sym(moment), ne(sym(moment), sym("param_dtype")))
                        for moment in ("exp_avg_dtype", "exp_avg_sq_dtype")))),
          fmt("precision: torchtune trains in one dtype, its recipes' bf16 or fp32 (weights, gradients, optimizer "
              "states and activations alike, no master copy, no torch.autocast); choose precision bf16 or fp32 "
              "without per-state dtypes, not {0} weights, {1} gradients, {2} optimizer states and {3} "
              "activations{4}{5}", sym("param_dtype"), sym("grad_dtype"), sym("optimizer_state_dtype"),
              sym("activation_dtype"), when(sym("master_dtype"), fmt(" plus a master copy ({0})", sym("master_dtype")),
                                            ""),
              when(sym("autocast"), " under torch.autocast", ""))),
    Check(both(eq(sym("implementation"), "torchtune"), sym("qlora"), negate(sym("qlora_double_quant"))),
          fmt("qlora_double_quant: torchtune's QLoRA weights are torchao's NF4Tensor, whose to_nf4 always "
              "double-quantises the scalers")),
    Check(both(eq(sym("implementation"), "torchtune"), ne(sym("kbit_prepare"), "none")),
          fmt("kbit_prepare: {0} is PEFT's prepare_model_for_kbit_training; torchtune's QLoRA keeps the unquantised "
              "weights in the model's dtype (kbit_prepare none)", sym("kbit_prepare"))),
    Check(both(eq(sym("mode"), "train"), ne(sym("recipe"), ""), sym("qlora")),
          fmt("qlora: QLoRA's NF4 base weights do not combine with the Transformer Engine recipe {0} (it quantises "
              "16-bit linear weights); choose a precision such as bf16-mixed", sym("recipe"))),
    # An adapter on the output layer (lora_targets lm_head). torchtune refuses it over tied embeddings
    # (torchtune/models/llama3_2/_component_builders.py lora_llama3_2 at v0.6.1: "apply_lora_to_output is currently
    # not supporting in llama3.2 1b and 3b, as the projection layer weights are tied to the embeddings"); PEFT accepts
    # it with a warning (peft/tuners/tuners_utils.py _check_tied_modules, 0.21.2), the adapter its own beside the tied
    # weight. Liger's fused linear cross-entropy takes self.lm_head.weight and never calls the output layer
    # (liger_kernel/transformers/model/llama.py lce_forward), so an adapter there would not run.
    Check(both(sym("lora_rank") > 0, has(sym("lora_targets"), LORA_HEAD), eq(sym("implementation"), "torchtune"),
               sym("tied_embeddings")),
          fmt("lora_targets: torchtune refuses an adapter on the output layer (apply_lora_to_output) of {0}, whose "
              "output layer is tied to the token embedding", sym("model_name"))),
    Check(both(sym("lora_rank") > 0, has(sym("lora_targets"), LORA_HEAD), eq(sym("loss"), "fused-linear")),
          fmt("lora_targets: the fused linear cross-entropy (loss fused-linear) reads the output layer's weight and "
              "never runs the layer, so an adapter on lm_head would not train; choose another loss")),
    # Phi-3 in transformers (models/phi3/modeling_phi3.py): q, k and v are one nn.Linear, qkv_proj, and gate and up
    # another, gate_up_proj, so PEFT adapts the fused layer (target_modules qkv_proj, gate_up_proj): one lora_A for
    # the three, a lora_B of (a + 2k) d, where the adapters modelled are one per projection. torchtune builds Phi-3
    # and Phi-4 with separate projections (torchtune/models/phi3/_component_builders.py phi3 at bd2a0fc; phi4_14b
    # uses it), and is modelled.
    Check(both(sym("lora_rank") > 0, sym("fused_projections"), eq(sym("implementation"), "hf"),
               either(*(has(sym("lora_targets"), target) for target in ("q", "k", "v", "gate", "up")))),
          fmt("lora_targets: {0} fuses q, k and v into one layer (qkv_proj) and gate and up into another "
              "(gate_up_proj) in transformers, which PEFT adapts whole, not modelled; choose among o, down and "
              "lm_head (the default targets are q, k, v and o), or implementation torchtune (separate projections)",
              sym("model_name"))),
    Check(both(ARCH, sym("lora_rank") > sym("hidden")),
          fmt("lora_rank: {0} exceeds the hidden size {1} of {2}: a rank above a projection's smaller side adds "
              "parameters, not rank", sym("lora_rank"), sym("hidden"), sym("model_name"))),
    Check(both(ARCH, sym("tp") > 1, either(mod(sym("heads"), sym("tp")),
                                            both(mod(sym("kv_heads"), sym("tp")),
                                                 mod(sym("tp"), sym("kv_heads"))))),
          fmt("tp: {0} does not divide the {1} attention heads / {2} KV heads of {3}", sym("tp"), sym("heads"),
              sym("kv_heads"), sym("model_name"))),
    Check(both(ARCH, sym("pp") > sym("layers")),
          fmt("pp: {0} stages exceed the {1} layers of {2}", sym("pp"), sym("layers"), sym("model_name"))),
    Check(both(ARCH, eq(sym("pp_schedule"), "interleaved"),
               mod(sym("layers"), sym("pp") * sym("pp_virtual_stages"))),
          fmt("pp_virtual_stages: pp x virtual stages must divide {0} layers", sym("layers"))),
    # Megatron-LM's interleaved schedule runs micro-batches in groups of microbatch_group_size_per_vp_stage (default
    # pp) and refuses fewer micro-batches than a group (schedules.py forward_backward_pipelining_with_interleaving,
    # commit d98e8a6).
    Check(both(ARCH, eq(sym("mode"), "train"), eq(sym("pp_schedule"), "interleaved"), sym("pp_virtual_stages") > 1,
               sym("pp") > 1, sym("grad_accum") < sym("pp")),
          fmt("grad_accum: Megatron-LM's interleaved schedule (pp_virtual_stages {0}) runs micro-batches in groups "
              "of pp = {1} and needs grad_accum of at least {1}, got {2}", sym("pp_virtual_stages"), sym("pp"),
              sym("grad_accum"))),
    Check(both(ARCH, sym("ep") > 1, either(negate(sym("experts")), mod(sym("experts"), sym("ep")))),
          fmt("ep: {0} must divide the experts of an MoE model ({1} has {2})", sym("ep"), sym("model_name"),
              sym("experts"))),
    # Megatron-LM refuses to train an MoE layer over tensor-parallel ranks without sequence parallelism
    # (megatron/core/transformer/moe/moe_layer.py MoELayer.forward raises a ValueError, commit d98e8a6).
    Check(both(ARCH, eq(sym("mode"), "train"), eq(sym("implementation"), "megatron"), sym("experts") > 0,
               sym("tp") > 1, negate(sym("sequence_parallel"))),
          fmt("sequence_parallel: Megatron-LM trains a mixture-of-experts layer over tp = {0} ranks only with "
              "sequence parallelism on (MoELayer.forward raises otherwise)", sym("tp"))),
    Check(both(ARCH, sym("ep") > 1, mod(sym("dp"), sym("ep"))),
          fmt("ep: expert parallelism is carved out of data parallelism: {0} must divide dp {1}", sym("ep"),
              sym("dp"))),
    Check(both(eq(sym("mode"), "train"), sym("cp") > 1, mod(sym("seq_len"), sym("cp"))),
          fmt("cp: {0} must divide seq_len {1}", sym("cp"), sym("seq_len"))),
    # Megatron-LM (a Megatron precision, whose grad buffer only Megatron-LM keeps, or implementation megatron:
    # builder.model.gradbuffers) shards with its distributed optimizer, which shards the fp32 main parameters and the
    # optimizer states and keeps the grad buffer whole (distrib_optimizer.py, commit d98e8a6): ZeRO stage 1, which the
    # model counts as Megatron's (builder.model.buckets). ZeRO stages 2 and 3 without an FSDP strategy are DeepSpeed's
    # (stage_1_and_2.py, stage3.py at edaa722), whose precisions are its own (bf16 or fp16 weights and gradients, with
    # or without data_types.grad_accum_dtype), not Megatron's main_grad buffer; Megatron-LM's own sharding of the
    # gradients and parameters, Megatron-FSDP (--use-megatron-fsdp), is not modelled.
    Check(both(eq(sym("mode"), "train"), MEGATRON, sym("shard_stage") >= 2, negate(sym("fsdp"))),
          fmt("zero: {0} is Megatron-LM's, whose distributed optimizer (--use-distributed-optimizer) shards only what "
              "zero 1 shards and keeps its grad buffer whole; ZeRO stage {1} is DeepSpeed's, not Megatron-LM's "
              "(Megatron-FSDP is not modelled): choose zero 1 or fsdp, or a DeepSpeed run (precision bf16-mixed or "
              "fp16-mixed without implementation megatron)",
              MEGATRON_NAMED, sym("shard_stage"))),
    Check(both(negate(eq(sym("offload"), "none")), sym("shard_stage") < 1),
          fmt("offload: CPU offload needs ZeRO stage 1 or more, or an FSDP strategy that shards")),
    Check(both(isin(sym("offload"), "params", "both"), sym("shard_stage") < 3),
          fmt("offload: offloading parameters needs ZeRO-3 or FSDP FULL_SHARD/HYBRID_SHARD")),
    Check(both(sym("recompute_layers") > 0, ne(sym("recompute"), "full")),
          fmt("recompute_layers: counts the fully recomputed layers of each stage; it needs recompute full")),
    Check(both(sym("recompute_layers") > 0, eq(sym("activation_formula"), "korthikanti")),
          fmt("recompute_layers: the Table 2 reference formula has no partial recomputation; count activations op by "
              "op (activation_formula ops)")),
    Check(both(ARCH, sym("recompute_layers") > 0, sym("recompute_layers") >= sym("layers") // sym("pp")),
          fmt("recompute_layers: {0} would checkpoint every layer of a stage ({1} layers over {2} stages); leave it "
              "at 0 to recompute every layer", sym("recompute_layers"), sym("layers"), sym("pp"))),
    Check(both(sym("offload_activations"), ne(sym("mode"), "train")),
          fmt("offload_activations: offloading saved activations applies to training; a served model saves none")),
    Check(both(sym("offload_activations"), eq(sym("activation_formula"), "korthikanti")),
          fmt("offload_activations: the Table 2 reference formula counts layers as one sum; count activations op by "
              "op (activation_formula ops) to offload them")),
    Check(both(sym("offload_activations"), negate(ARCH)),
          fmt("offload_activations: saved activations need an architecture, not a raw count")),
    # torchtitan's per-op selective checkpointing (builder.model.oplists.TORCHTITAN_OP_SAC): which op outputs the
    # policy keeps depends on the order and kind of a block's matrix multiplies, modelled for a dense Llama-style block
    # (RMSNorm, separate bias-free q, k and v projections, SwiGLU) in PyTorch eager mode, and refused elsewhere.
    *(Check(both(eq(sym("mode"), "train"), OP_SAC, refused), fmt("recompute: selective-op " + why, *args))
      for refused, why, args in (
          (negate(ARCH), "counts a block's op outputs and needs an architecture, not a raw count", ()),
          (eq(sym("activation_formula"), "korthikanti"),
           "is counted op by op; the Table 2 reference formula has no row for it (activation_formula ops)", ()),
          (eq(sym("implementation"), "megatron"),
           "is torchtitan's policy over PyTorch eager blocks; Megatron-LM's layers recompute with selective or full",
           ()),
          (both(ARCH, sym("experts") > 0),
           "is modelled for dense models; {0} is a mixture-of-experts model (torchtitan saves its router's top-k and "
           "all-to-all outputs and force-recomputes the router gate's matmuls, not modelled)", (sym("model_name"),)),
          (both(ARCH, sym("kv_lora_rank") > 0),
           "is modelled for separate q, k and v projections; {0}'s latent attention has other matmuls, counted in "
           "another order by the policy's every-second-matmul rule", (sym("model_name"),)),
          (both(ARCH, either(ne(sym("norm"), "rmsnorm"), ne(sym("mlp"), "swiglu"), sym("fused_qkv"),
                             sym("fused_projections"))),
           "is modelled for a Llama-style block (RMSNorm, separate q, k and v projections, SwiGLU) whose seven "
           "matmuls the policy counts; {0} has another block", (sym("model_name"),)),
          (both(ARCH, either(sym("qkv_bias"), sym("out_bias"), sym("mlp_bias"))),
           "is modelled for bias-free projections; {0}'s biases make addmm ops, which the policy saves without "
           "counting them as matmuls", (sym("model_name"),)),
          (eq(sym("attention"), "eager"),
           "with eager attention would keep the scores' batched matmuls (the policy saves every bmm); choose sdpa, "
           "PyTorch's fused kernels, which torchtitan runs", ()),
          # flash is transformers' flash_attention_2 (the flash-attn package): its kernel, flash_attn::
          # _flash_attn_forward, is not in _get_default_save_ops(), so the policy would recompute it.
          (eq(sym("attention"), "flash"),
           "with the flash-attn package's kernel would recompute it (it is not among the ops the policy saves); "
           "choose sdpa, PyTorch's fused kernels, which torchtitan runs and whose outputs the policy keeps", ()),
          (sym("compile"),
           "under torch.compile saves the compiled regions' outputs (inductor_compiled_code), not modelled; leave "
           "compile off", ()),
          (sym("lora_rank") > 0,
           "with LoRA adapters (lora_rank {0}): the adapters' matmuls shift the policy's every-second count, not "
           "modelled", (sym("lora_rank"),)),
          (ne(sym("recipe"), ""),
           "with the low-precision recipe {0}: the policy keeps scaled matmuls' outputs and amax reductions, not "
           "modelled; choose a precision such as bf16-mixed", (sym("recipe"),)),
          (sym("padded"), "with a padding mask is not modelled (torchtitan trains on packed, unpadded sequences)", ()),
          (SLIDING_MASK, "with transformers' sliding-window mask ({0}'s window of {1}, which seq_len {2} reaches) is "
           "not modelled", (sym("model_name"), sym("sliding_window"), sym("seq_len"))),
          (sym("cp") > 1, "with context parallelism (cp {0}): ring attention's per-step kernel outputs are not "
           "modelled", (sym("cp"),)),
          (sym("offload_activations"),
           "keeps op outputs on the GPU; offloading saved activations is torchtune's, modelled with none or full",
           ()),
      )),
    # torch.compile over transformers' layers (builder.model.oplists' compiled lists, measured on CPU): what was
    # measured, and nothing else.
    Check(both(sym("compile"), ne(sym("mode"), "train")),
          fmt("compile: what torch.compile changes here is what a training step saves for backward; a served model "
              "saves none")),
    Check(both(sym("compile"), negate(ARCH)),
          fmt("compile: saved activations need an architecture, not a raw count")),
    Check(both(sym("compile"), eq(sym("activation_formula"), "korthikanti")),
          fmt("compile: the Table 2 reference formula has no op list to compile; count activations op by op "
              "(activation_formula ops)")),
    Check(both(sym("compile"), eq(sym("implementation"), "megatron")),
          fmt("compile: torch.compile is modelled over transformers' layers (implementation hf); Megatron-LM's block "
              "runs its own fused kernels")),
    Check(both(sym("compile"), ARCH, sym("fused_projections"), eq(sym("implementation"), "hf")),
          fmt("compile: a compiled layer with fused projections ({0}'s qkv_proj and gate_up_proj) is not measured "
              "yet; leave compile off", sym("model_name"))),
    Check(both(sym("compile"), ARCH, sym("experts") > 0),
          fmt("compile: a compiled mixture-of-experts layer ({0}) is not measured yet; leave compile off",
              sym("model_name"))),
    # Compiled LoRA layers are measured with torchtune's adapters (bf16 and fp32, eager and SDPA attention, lora_dropout
    # 0: tests/test_lora_torchtune.py), as torchtune's compile_model compiles each layer (torchtune/training/_compile.py
    # at 30b8519), not with PEFT's fp32 adapters, on Llama-family layers only (torchtune builds no other).
    Check(both(sym("compile"), sym("lora_rank") > 0, ne(sym("implementation"), "torchtune")),
          fmt("compile: compiled layers with PEFT's LoRA adapters (lora_rank {0}) are not measured yet; compiled "
              "LoRA layers are modelled with torchtune's adapters (implementation torchtune)", sym("lora_rank"))),
    Check(both(sym("compile"), sym("lora_rank") > 0, ARCH, eq(sym("norm"), "layernorm")),
          fmt("compile: compiled LoRA layers are measured on Llama-family layers (RMSNorm, as torchtune builds them), "
              "not on {0}'s; leave compile off", sym("model_name"))),
    Check(both(sym("compile"), sym("lora_dropout") > 0),
          fmt("compile: a compiled LoRA layer with lora_dropout {0} keeps dropout outputs or masks as the partitioner "
              "chooses, not modelled; torchtune's configs set lora_dropout 0.0", real(sym("lora_dropout")))),
    Check(both(sym("compile"), ne(sym("recipe"), "")),
          fmt("compile: compiled layers are measured without a Transformer Engine recipe ({0}); choose a precision "
              "such as bf16-mixed", sym("recipe"))),
    Check(both(sym("compile"), ne(sym("float8"), "")),
          fmt("compile: compiled layers are measured without torchao's float8 layers (float8 {0}): under "
              "torch.compile the casts fuse and inductor chooses what they save, not measured; leave compile off",
              sym("float8"))),
    # torchao's float8 training (builder.model.float8): modelled eager, for a dense Llama-style block every linear of
    # which torchtitan converts, trained in bf16 without autocast, as torchtitan runs it.
    *(Check(both(ne(sym("float8"), ""), refused), fmt("float8: " + why, *values)) for refused, why, values in (
        (ne(sym("mode"), "train"), "torchao's float8 training converts the linear layers of a training run; a served "
         "model has none (mode {0})", (sym("mode"),)),
        (ne(sym("recipe"), ""), "torchao's float8 layers and the Transformer Engine recipe {0} are two ways to train "
         "in fp8; choose one (float8 with precision bf16-mixed, or the recipe alone)", (sym("recipe"),)),
        (sym("msamp"), "torchao's float8 layers and MS-AMP's own fp8 linear layers (precision msamp-o2) are two ways "
         "to train in fp8; choose one", ()),
        (either(ne(sym("param_dtype"), "bf16"), ne(sym("activation_dtype"), "bf16"), sym("autocast")),
         "modelled with bf16 weights and activations and no torch.autocast, as torchtitan runs it (FSDP's param_dtype "
         "bfloat16: precision bf16-mixed or bf16), not {0} weights and {1} activations{2}",
         (sym("param_dtype"), sym("activation_dtype"), when(sym("autocast"), " under autocast", ""))),
        (negate(ARCH), "torchao's float8 training needs an architecture (which linear layers are converted, and "
         "their sizes), not a raw count", ()),
        (eq(sym("activation_formula"), "korthikanti"), "its casts are instants of each linear layer, counted op by op; "
         "the Table 2 reference formula has none (activation_formula ops)", ()),
        (eq(sym("implementation"), "megatron"), "torchao's Float8Linear replaces PyTorch's nn.Linear (torchtitan, "
         "torchtune); Megatron-LM trains in fp8 with Transformer Engine (precision te-fp8)", ()),
        (isin(sym("recompute"), "selective", "selective-op"), "torchao's float8 training with recompute {0} is not "
         "modelled (Megatron-LM's selective recomputation is not torchtitan's; torchtitan's per-op policy would save "
         "the float8 matmuls' outputs and the casts' amax reductions); choose none or full", (sym("recompute"),)),
        (both(ARCH, sym("experts") > 0), "torchao's float8 training is modelled for dense models; {0}'s experts are "
         "converted by torchtitan's Float8GroupedExpertsConverter (grouped float8 matmuls), not modelled",
         (sym("model_name"),)),
        (both(ARCH, either(ne(sym("norm"), "rmsnorm"), ne(sym("mlp"), "swiglu"), sym("fused_qkv"),
                           sym("fused_projections"), sym("kv_lora_rank") > 0)),
         "torchao's float8 training is modelled for a Llama-style block (RMSNorm, separate q, k and v projections, "
         "SwiGLU), torchtitan's; {0} has another block", (sym("model_name"),)),
        (both(ARCH, either(sym("qkv_bias"), sym("out_bias"), sym("mlp_bias"))), "torchao's float8 training is "
         "modelled for bias-free projections; {0}'s biases are added after each float8 matmul (Float8Linear.forward), "
         "not modelled", (sym("model_name"),)),
        (both(ARCH, either(mod(sym("hidden"), 16), mod(sym("ffn"), 16), mod(sym("heads") * sym("head_dim"), 16),
                           mod(sym("kv_heads") * sym("head_dim"), 16))),
         "{0} has a linear layer with a size that 16 does not divide (hidden {1}, ffn {2}, heads x head_dim {3}, "
         "kv_heads x head_dim {4}), which torchtitan leaves in bf16; a partly converted block is not modelled",
         (sym("model_name"), sym("hidden"), sym("ffn"), sym("heads") * sym("head_dim"),
          sym("kv_heads") * sym("head_dim"))),
        (sym("tp") > 1, "torchao's float8 training with tensor parallelism (tp {0}) is not modelled (torchao's "
         "float8 tensor-parallel styles gather activations in float8)", (sym("tp"),)),
        (sym("lora_rank") > 0, "torchao's float8 training with LoRA adapters (lora_rank {0}) is not modelled "
         "(torchtitan converts the frozen base layers too)", (sym("lora_rank"),)),
        (both(FLOAT8_HEAD, ne(sym("loss"), "eager")), "the output layer converted to float8 is modelled with the "
         "eager loss, whose gradient of the logits it casts whole; with loss {0} leave the output layer in bf16 "
         "(float8_filter_output: torchtitan's filter_fqns output)", (sym("loss"),)),
    )),
    Check(both(sym("enable_fsdp_float8_all_gather"), ne(sym("float8"), "tensorwise")),
          fmt("enable_fsdp_float8_all_gather: FSDP's float8 all-gather casts each weight shard with one scale a "
              "tensor, so it needs float8 tensorwise (torchao's Float8LinearConfig asserts it; torchtitan gathers "
              "the rowwise recipes in bf16), got {0}",
              when(sym("float8"), fmt("float8 {0}", sym("float8")), "float8 off"))),
    Check(both(sym("enable_fsdp_float8_all_gather"),
               either(negate(isin(sym("fsdp"), "FULL_SHARD", "HYBRID_SHARD")), SHARD_RANKS < 2)),
          fmt("enable_fsdp_float8_all_gather: FSDP's float8 all-gather is modelled with fsdp FULL_SHARD or "
              "HYBRID_SHARD over dp x cp above 1 (torchtitan turns it off without data-parallel sharding), not {0}",
              when(sym("fsdp"), fmt("fsdp {0} over {1} ranks", sym("fsdp"), SHARD_RANKS),
                   fmt("zero {0}", sym("shard_stage"))))),
    Check(both(sym("enable_fsdp_float8_all_gather"), isin(sym("offload"), "params", "both")),
          fmt("enable_fsdp_float8_all_gather: with the parameters offloaded (offload {0}) the shards are cast to "
              "float8 from host memory, not modelled", sym("offload"))),
    Check(both(sym("enable_fsdp_float8_all_gather"), FLOAT8_HEAD, sym("tied_embeddings")),
          fmt("enable_fsdp_float8_all_gather: {0} ties its output layer to the embedding, which a float8 all-gather "
              "of the converted output layer would break; leave the output layer in bf16 (float8_filter_output)",
              sym("model_name"))),
    Check(both(sym("float8_filter_output"), eq(sym("float8"), "")),
          fmt("float8_filter_output: leaves the output layer out of float8 training; it needs float8")),
    # A padded micro-batch's mask (builder.model.oplists._PADDING_MASK): transformers' SDPA attention, op by op, in
    # training, and not yet measured under torch.compile.
    Check(both(sym("padded"), ne(sym("mode"), "train")),
          fmt("padded: a padded micro-batch changes what a training step saves for backward; a served model saves "
              "none")),
    Check(both(sym("padded"), ne(sym("implementation"), "hf")),
          fmt("padded: the padding mask counted is transformers' (implementation hf), not {0}'s",
              sym("implementation"))),
    Check(both(sym("padded"), eq(sym("activation_formula"), "korthikanti")),
          fmt("padded: the Table 2 reference formula has no attention mask; count activations op by op "
              "(activation_formula ops)")),
    Check(both(sym("padded"), sym("compile")),
          fmt("padded: compiled layers with a padding mask are not measured yet; leave compile off or padded off")),
    Check(both(eq(sym("mode"), "train"), sym("compile"), SLIDING_MASK),
          fmt("compile: compiled layers with transformers' sliding-window mask ({0}'s window of {1}, which seq_len {2} "
              "reaches) are not measured yet; leave compile off or train on shorter sequences", sym("model_name"),
              sym("sliding_window"), sym("seq_len"))),
    Check(both(ne(sym("loss"), "eager"), eq(sym("activation_formula"), "korthikanti")),
          fmt("loss: the Table 2 reference formula leaves out the logits and the loss, so loss {0} would change "
              "nothing; count activations op by op (activation_formula ops)", sym("loss"))),
    # How the optimizer's step runs (builder.model.optimizers): what each optimizer offers, and what a step inside
    # backward cannot do.
    Check(both(eq(sym("optimizer_impl"), "fused"), eq(sym("optimizer"), "adafactor")),
          fmt("optimizer_impl: torch.optim.Adafactor has no fused implementation (PyTorch 2.13); choose for-loop, "
              "foreach or in-backward")),
    Check(both(isin(sym("optimizer_impl"), "foreach", "fused"), isin(sym("optimizer"), "adamw8bit-torchao", "adamw4bit",
                                                                      "adamwfp8")),
          fmt("optimizer_impl: torchao's {0} steps one parameter at a time (a compiled for-loop) and has no {1} "
              "implementation; choose for-loop or in-backward", sym("optimizer"), sym("optimizer_impl"))),
    Check(both(isin(sym("optimizer_impl"), "for-loop", "foreach"), eq(sym("optimizer"), "adam8bit")),
          fmt("optimizer_impl: bitsandbytes' 8-bit AdamW runs one fused kernel per parameter and has no {0} "
              "implementation; choose fused or in-backward", sym("optimizer_impl"))),
    # bitsandbytes' paged optimizers step in their own loop (Optimizer8bit.step: prefetch, fused update, sync, one
    # parameter at a time), which is what pages the states in; torch's implementations and DeepSpeed's CPU Adam
    # (optimizer offload) are other optimizers. A step in backward keeps that loop: one such optimizer per parameter,
    # stepped from its gradient hook (torchtune's optimizer_in_bwd, recipes/configs/llama3_1/8B_full_single_device.yaml
    # with PagedAdamW8bit).
    Check(both(isin(sym("optimizer"), "paged-adamw", "paged-adamw8bit"),
               isin(sym("optimizer_impl"), "for-loop", "foreach")),
          fmt("optimizer_impl: bitsandbytes' {0} pages each parameter's states in and updates them with one fused "
              "kernel in its own step; it has no {1} implementation (choose fused or in-backward, or leave "
              "optimizer_impl unset)", sym("optimizer"), sym("optimizer_impl"))),
    Check(both(isin(sym("optimizer"), "paged-adamw", "paged-adamw8bit"), isin(sym("offload"), "optimizer", "both")),
          fmt("offload: optimizer {0} keeps its states in CUDA unified memory, which pages them to the host itself; "
              "offloading the optimizer (DeepSpeed's CPU Adam) is another optimizer", sym("optimizer"))),
    # The optimizer states' dtypes (optimizer_state_dtype; Adam's moments one by one, exp_avg_dtype and
    # exp_avg_sq_dtype, torch's names, which MS-AMP's LBAdamW takes too): the chosen options, not a policy's. Plain
    # SGD keeps no state (torch/optim/sgd.py 2.13: no momentum_buffer without momentum); bitsandbytes' PagedAdamW keeps
    # fp32 states whatever the parameters' dtype (bitsandbytes 0.50.2.dev0 optimizer.py Optimizer2State.init_state,
    # optim_bits=32); the blockwise low-bit optimizers fix their codes' dtype (bitsandbytes' 8-bit and paged 8-bit
    # AdamW, Dettmers et al. 2021; torchao 0.19's AdamW8bit, AdamW4bit and AdamWFp8).
    Check(both(sym("chosen_state_dtype"), isin(sym("optimizer"), *LOW_BIT_OPTIMIZERS, "paged-adamw", "sgd")),
          fmt("optimizer_state_dtype: {0} has no state dtype to choose ({1}); leave optimizer_state_dtype unset or "
              "choose another optimizer", sym("optimizer"),
              when(eq(sym("optimizer"), "sgd"), "plain SGD keeps no state",
                   when(eq(sym("optimizer"), "paged-adamw"), "bitsandbytes' PagedAdamW keeps fp32 states",
                        "its blockwise low-bit states are fixed")))),
    *(Check(both(sym("chosen_" + option), negate(isin(sym("optimizer"), "adam", "adamw"))),
            fmt("{0}: only Adam and AdamW keep {1}; optimizer {2} has none (leave {0} unset or choose optimizer adam "
                "or adamw)", option, moment, sym("optimizer")))
      for moment, option in (("exp_avg", "exp_avg_dtype"), ("exp_avg_sq", "exp_avg_sq_dtype"))),
    *(Check(both(eq(sym("optimizer_impl"), "in-backward"), refused), fmt("optimizer_impl: " + why, *values))
      for refused, why, values in (
          (negate(ARCH), "in-backward needs an architecture (one parameter's gradient at a time), not a raw count",
           ()),
          (sym("grad_accum") > 1, "in-backward steps each parameter as its gradient is made, so gradients cannot "
           "accumulate over micro-batches (grad_accum {0})", (sym("grad_accum"),)),
          (sym("grad_accum_dtype"), "in-backward frees each gradient at once; a separate accumulation buffer "
           "(grad_accum_dtype) is not modelled with it", ()),
          (sym("lora_rank") > 0, "in-backward with LoRA adapters is not modelled", ()),
          (MEGATRON_DDP, "Megatron-LM steps its optimizer after backward (megatron/training/training.py "
           "train_step: optimizer.step(), Megatron-LM d98e8a6), with or without its distributed optimizer; "
           "in-backward is modelled with FSDP or without sharding outside Megatron-LM", ()),
          (both(sym("shard_stage") > 0, negate(sym("fsdp")), negate(MEGATRON)), "DeepSpeed's ZeRO runs its own "
           "optimizer step after backward; in-backward is modelled with FSDP or without sharding", ()),
          (ne(sym("offload"), "none"), "the optimizer steps on the host under CPU offload, not inside backward",
           ()),
          (either(sym("pp") > 1, sym("ep") > 1), "torchtitan refuses the step in backward with pipeline or expert "
           "parallelism", ()),
      )),
    # MS-AMP O2 (precision msamp-o2): msamp.initialize takes torch.optim.Adam, AdamW or apex FusedAdam only, and
    # LBAdamW has one implementation, a loop over the parameters (MS-AMP commit 9746ea8 msamp/__init__.py,
    # msamp/optim/adamw.py); its ZeRO support is level O3 through its own DeepSpeed integration, not modelled.
    *(Check(both(eq(sym("mode"), "train"), sym("msamp"), refused), fmt(why, *values)) for refused, why, values in (
        (negate(isin(sym("optimizer"), "adam", "adamw")), "optimizer: precision msamp-o2 runs MS-AMP's LBAdam or "
         "LBAdamW, so it takes optimizer adam or adamw, not {0}", (sym("optimizer"),)),
        (isin(sym("optimizer_impl"), "foreach", "fused", "in-backward"), "optimizer_impl: precision msamp-o2 steps "
         "with MS-AMP's LBAdamW, one parameter at a time; it has no {0} implementation (choose for-loop or leave "
         "optimizer_impl unset)", (sym("optimizer_impl"),)),
        (sym("shard_stage") > 0, "zero: precision msamp-o2 with ZeRO or FSDP is MS-AMP's O3 level (its own DeepSpeed "
         "integration), not modelled; leave zero and fsdp unset", ()),
        (sym("lora_rank") > 0, "lora_rank: precision msamp-o2 with LoRA adapters is not modelled", ()),
    )),
    # grad_accum_dtype is DeepSpeed's data_types.grad_accum_dtype. Megatron-LM accumulates the micro-batches' gradients
    # in its grad buffer (main_grad), in the buffer's own dtype (param_and_grad_buffer.py group_params_for_buffers,
    # commit d98e8a6: torch.float unless --grad-reduce-in-bf16), which the model's grad_dtype is: a second buffer
    # would be counted on top of it.
    Check(both(MEGATRON_DDP, sym("grad_accum_dtype")),
          fmt("grad_accum_dtype: DeepSpeed's data_types.grad_accum_dtype; a Megatron-LM run ({0}) accumulates "
              "gradients in its grad buffer (main_grad), in grad_dtype ({1}): set grad_dtype instead (Megatron's "
              "default fp32 buffer is precision megatron-bf16; --grad-reduce-in-bf16 is grad_dtype bf16) and leave "
              "grad_accum_dtype out", MEGATRON_NAMED, sym("grad_dtype"))),
    # DeepSpeed ZeRO-2 partitions the gradients (partition_gradients), so it keeps no separate grad_accum attribute
    # and accumulates in the gradients' own dtype whatever data_types.grad_accum_dtype says (DeepSpeed commit edaa722,
    # deepspeed/runtime/zero/stage_1_and_2.py: use_grad_accum_attribute only without partition_gradients;
    # grads_in_partition is allocated in self.dtype).
    Check(both(eq(sym("mode"), "train"), eq(sym("shard_stage"), 2), negate(sym("fsdp")), sym("grad_accum_dtype"),
               ne(sym("grad_accum_dtype"), sym("grad_dtype"))),
          fmt("grad_accum_dtype: DeepSpeed's ZeRO stage 2 accumulates gradients in their own dtype ({0}) whatever "
              "grad_accum_dtype says, so {1} would change nothing; leave grad_accum_dtype out, or use zero 1 "
              "(BF16_Optimizer's fp32 buffer) or zero 3 (fp32 gradient partitions)", sym("grad_dtype"),
              sym("grad_accum_dtype"))),
    # FSDP under mixed precision casts every reduced gradient to the sharded parameter's dtype (the master dtype:
    # builder.model.states.FSDP_MIXED_SOURCE), so accumulating in that dtype is what it does already.
    Check(both(eq(sym("mode"), "train"), FSDP_MIXED, sym("grad_accum_dtype"),
               eq(sym("grad_accum_dtype"), sym("master_dtype"))),
          fmt("grad_accum_dtype: FSDP under mixed precision keeps the sharded gradients in the parameters' own dtype "
              "({0}), so {1} would change nothing; leave grad_accum_dtype out", sym("master_dtype"),
              sym("grad_accum_dtype"))),
    # Saving a checkpoint (builder.model.checkpoint): each save is one framework's, and works on the states that
    # framework shards.
    *(Check(both(ne(SAVE, "none"), refused), fmt("checkpoint_save: " + why, *values)) for refused, why, values in (
        (ne(sym("mode"), "train"), "a checkpoint save is a moment of a training step; a served model has none (mode "
         "{0})", (sym("mode"),)),
        (MEGATRON_DDP, "a Megatron-LM run ({1}) saves with Megatron-LM's own checkpointing "
         "(megatron/training/checkpointing.py save_checkpoint; --ckpt-format is torch_dist by default, "
         "megatron/training/config/training_config.py; Megatron-LM d98e8a6), which is not modelled, not with {0}; "
         "leave checkpoint_save out",
         (SAVE, MEGATRON_NAMED)),
        (both(isin(SAVE, *GATHERING), negate(ARCH)), "{0} gathers one unit or module at a time, which needs an "
         "architecture, not a raw count", (SAVE,)),
        (both(isin(SAVE, *FSDP_SAVES), negate(sym("fsdp"))), "{0} is FSDP's state_dict type; it needs fsdp (an FSDP "
         "strategy), got zero {1} without fsdp", (SAVE, sym("shard_stage"))),
        (both(eq(SAVE, "sharded-state-dict"), eq(sym("fsdp"), "NO_SHARD")), "FSDP refuses sharded-state-dict with fsdp "
         "NO_SHARD (its parameters are not sharded); choose full-state-dict or another fsdp strategy", ()),
        (both(isin(SAVE, *DEEPSPEED_SAVES), sym("fsdp")), "{0} is DeepSpeed's save_checkpoint; fsdp {1} saves with "
         "full-state-dict, full-state-dict-offload, sharded-state-dict or dcp", (SAVE, sym("fsdp"))),
        (both(eq(SAVE, "deepspeed-16bit"), ne(sym("shard_stage"), 3)), "deepspeed-16bit gathers ZeRO-3's partitioned "
         "weights (stage3_gather_16bit_weights_on_model_save); it needs zero 3, got zero {0}", (sym("shard_stage"),)),
        (both(isin(SAVE, "torch-save", "dcp"), sym("shard_stage") > 0, negate(sym("fsdp")), negate(MEGATRON)),
         "{0} does not save "
         "DeepSpeed's ZeRO partitions (zero {1}); choose deepspeed or deepspeed-16bit", (SAVE, sym("shard_stage"))),
        (both(isin(SAVE, *FSDP_SAVES), sym("lora_rank") > 0), "{0} with LoRA adapters is not modelled (the clones "
         "would be the frozen base in its own dtype plus the adapters)", (SAVE,)),
        (both(eq(SAVE, "deepspeed-16bit"), sym("tp") > 1), "deepspeed-16bit with tensor parallelism (tp {0}) also "
         "gathers the tensor-parallel shards, which is not modelled", (sym("tp"),)),
        (both(eq(SAVE, "torch-save"), sym("fsdp")), "torch-save writes the tensors a rank holds; under fsdp {0} "
         "FSDP's own state_dict types save: choose full-state-dict, full-state-dict-offload, sharded-state-dict or "
         "dcp", (sym("fsdp"),)),
    )),
    # DeepSpeed's pipeline engine refuses ZeRO-2 and ZeRO-3 (DeepSpeed commit edaa722, deepspeed/runtime/pipe/engine.py:
    # "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism"); FSDP with pipeline stages is torchtitan's.
    Check(both(eq(sym("mode"), "train"), sym("shard_stage") >= 2, negate(sym("fsdp")), sym("pp") > 1),
          fmt("zero: DeepSpeed's pipeline engine refuses ZeRO stage {0} with pipeline parallelism (pp {1}): "
              "\"ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism\"; use zero 1, or fsdp with pp",
              sym("shard_stage"), sym("pp"))),
    # DeepSpeed ZeRO-3's own options (builder.model.zero3) mean nothing to another stage or to FSDP.
    *(Check(both(ne(sym(option), ZERO3_UNSET), negate(DEEPSPEED_ZERO3)),
            fmt("{0}: a DeepSpeed ZeRO-3 option; it needs zero 3 without fsdp, not {1}", option,
                when(sym("fsdp"), fmt("fsdp {0}", sym("fsdp")), fmt("zero {0}", sym("shard_stage")))))
      for option in ZERO3_OPTIONS),
    # DeepSpeed ZeRO's bucket options (builder.model.buckets) mean nothing without DeepSpeed's ZeRO optimizer.
    *(Check(both(refused, negate(DEEPSPEED_ENGINE)),
            fmt("{0}: a DeepSpeed ZeRO option; it needs zero 1, 2 or 3 without fsdp, not {1}", option,
                when(sym("fsdp"), fmt("fsdp {0}", sym("fsdp")),
                     when(both(MEGATRON, sym("shard_stage") > 0),
                          fmt("zero {0} under Megatron-LM (a Megatron precision or implementation megatron: its "
                              "distributed optimizer)", sym("shard_stage")),
                          fmt("zero {0}", sym("shard_stage"))))))
      for option, refused in (("reduce_bucket_size", ne(sym("reduce_bucket_size"), BUCKET_UNSET)),
                              ("overlap_comm", ne(sym("overlap_comm"), BUCKET_UNSET)),
                              ("contiguous_gradients", negate(sym("contiguous_gradients"))))),
    # PyTorch DDP's own option (builder.model.gradbuffers): a run the model calls DDP only.
    Check(both(sym("gradient_as_bucket_view"), negate(DDP)),
          fmt("gradient_as_bucket_view: a PyTorch DDP option; it needs training with dp > 1, zero 0 and no fsdp, "
              "not Megatron-LM (a Megatron precision or implementation megatron: it keeps its own grad buffer), no "
              "grad_accum_dtype (DeepSpeed) and no MS-AMP")),
    # The reduce dtype is read where the model counts gradients made or copied in it (builder.model.states'
    # READS_REDUCE_DTYPE): FSDP's reduce-scatter (MixedPrecisionPolicy.reduce_dtype, MixedPrecision.reduce_dtype) and
    # DeepSpeed's ZeRO-3 (communication_data_type: its reduce bucket). Elsewhere nothing reads it, and it is refused
    # with what the run reduces in instead:
    # - Megatron-LM reduces the gradients in its grad buffer, in the buffer's own dtype (param_and_grad_buffer.py
    #   group_params_for_buffers, commit d98e8a6: grad_dtype = torch.float if grad_reduce_in_fp32 else param.dtype),
    #   which the model's gradients are (builder.model.gradbuffers): grad_dtype sets it;
    # - PyTorch's DistributedDataParallel has no reduce dtype (torch/nn/parallel/distributed.py, 2.13): its buckets
    #   are the gradients' dtype; a communication hook (bf16_compress_hook, fp16_compress_hook) casts a bucket to 16
    #   bits for its all-reduce, not modelled;
    # - DeepSpeed's ZeRO stages 1 and 2 keep their buckets in the 16-bit parameter dtype; communication_data_type
    #   (engine.py communication_data_type, default the fp16 or bf16 of the run) only casts a bucket's flat copy for
    #   its collective (stage_1_and_2.py allreduce_bucket, gradient_reduction_w_predivide: tensor.to(
    #   communication_data_type), copied back), a transient not modelled;
    # - FSDP that shards no gradients (NO_SHARD, or one rank), FSDP with LoRA adapters (their gradients' own dtype),
    #   and a raw parameter count (no unit or bucket to count) count nothing in it either.
    Check(both(eq(sym("mode"), "train"), sym("reduce_dtype"), negate(READS_REDUCE_DTYPE)),
          fmt("reduce_dtype: {0}; the reduce dtype is counted for FSDP's reduce-scatter (fsdp FULL_SHARD, "
              "SHARD_GRAD_OP or HYBRID_SHARD over dp x cp above 1: MixedPrecisionPolicy.reduce_dtype) and DeepSpeed's "
              "ZeRO-3 (zero 3: communication_data_type); leave reduce_dtype out",
              when(MEGATRON,
                   fmt("Megatron-LM reduces the gradients in its grad buffer, in their own dtype ({0}), which "
                       "grad_dtype sets (Megatron's --grad-reduce-in-bf16 is grad_dtype bf16, or precision bf16-mixed "
                       "with implementation megatron)", sym("grad_dtype")),
                   when(negate(ARCH), "it is counted unit by unit or bucket by bucket, which needs an architecture, "
                                      "not a raw count",
                        when(sym("fsdp"),
                             when(sym("lora_rank") > 0, fmt("with LoRA adapters (lora_rank {0}) FSDP's unsharded "
                                                            "gradients are the adapters', counted in their own dtype",
                                                            sym("lora_rank")),
                                  fmt("fsdp {0} over {1} rank(s) reduce-scatters no sharded gradients", sym("fsdp"),
                                      SHARD_GROUP)),
                             when(sym("shard_stage") > 0,
                                  fmt("DeepSpeed's ZeRO stage {0} keeps its buckets in the parameters' dtype ({1}) and "
                                      "casts a bucket's copy to communication_data_type only for its collective, a "
                                      "transient not modelled", sym("shard_stage"), sym("param_dtype")),
                                  when(SHARD_RANKS > 1,
                                       fmt("data parallelism without sharding (PyTorch DDP, DeepSpeed's stage 0) "
                                           "reduces the gradients in their own dtype ({0}): DistributedDataParallel "
                                           "has no reduce dtype, and a communication hook such as bf16_compress_hook "
                                           "is not modelled", sym("grad_dtype")),
                                       "one GPU (dp x cp = 1) reduces no gradients"))))))),
    # torchtune's custom_sharded_layers (builder.model.placement): units of FSDP's own, beside an architecture's blocks.
    Check(both(sym("custom_sharded_layers"), either(negate(sym("fsdp")), ne(sym("mode"), "train"))),
          fmt("custom_sharded_layers: the modules FSDP wraps as units of their own; it needs training with fsdp")),
    Check(both(sym("custom_sharded_layers"), negate(ARCH)),
          fmt("custom_sharded_layers: the token embedding and the output layer are an architecture's; give a model, "
              "not a parameter count")),
    # A tied output layer is the token embedding's weight: torchtune has no output module then (TiedLinear) and
    # torchtitan wraps the embeddings, norm and head as one unit (torchtitan/distributed/fsdp.py at b5bcd76).
    # The float8 all-gather's weights are counted in the blocks and the root unit's output layer (states.COMM
    # float8_gathered); torchtune's own units for the embedding and the output layer are not modelled with it.
    Check(both(sym("custom_sharded_layers"), sym("enable_fsdp_float8_all_gather")),
          fmt("custom_sharded_layers: with enable_fsdp_float8_all_gather the output layer's own unit would gather it "
              "in float8; the two together are not modelled")),
    Check(both(sym("custom_sharded_layers"), sym("tied_embeddings")),
          fmt("custom_sharded_layers: {0} ties its output layer to the token embedding, whose weight then has to stay "
              "in one unit with it (torchtitan wraps them together; torchtune has no output module of its own): "
              "leave the embeddings and the head in the root unit", sym("model_name"))),
    Check(both(eq(sym("fsdp"), "HYBRID_SHARD"), mod(SHARD_RANKS, HYBRID_GROUP)),
          fmt("fsdp_shard_group: the shard group ({0} ranks) must divide dp x cp = {1}", HYBRID_GROUP,
              SHARD_RANKS)),
)


# id of a tuple of checks -> (the tuple, kept alive; the program of them all, builder.model.exprcode). By id: a tuple
# of checks hashes every rule in it.
_PROGRAMS: dict[int, tuple[tuple[Check, ...], exprcode.Lazy]] = {}


def first_refusal(inputs: Mapping[str, Value], checks: tuple[Check, ...] = CHECKS) -> str | None:
    """The message of the first of `checks` that refuses these inputs, or None."""
    known = _PROGRAMS.get(id(checks))
    if known is None or known[0] is not checks:
        known = _PROGRAMS[id(checks)] = (checks, exprcode.guarded([(c.refused, (c.message,)) for c in checks],
                                                                  first=True))
    run = known[1].get()
    if run is None:
        for check in checks:
            if evaluate(check.refused, inputs):
                return evaluate(check.message, inputs)
        return None
    refused = exprcode.run(run, inputs)
    return refused[0][1][0] if refused else None


def encode_checks(checks: tuple[Check, ...] = CHECKS) -> list[list[Any]]:
    """The checks as the browser evaluates them: [refused, message] each."""
    return [[encode(c.refused), encode(c.message)] for c in checks]
