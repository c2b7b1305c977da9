"""The checks that need the model's inputs, as rules: each says when an architecture's shape (SHAPE_CHECKS) or a
configuration (CHECKS) is refused and, in one line, why. Architecture and validate_config run them (after the
checks of each option's own type and range); the calculator's script runs the same rules on a reader's form
(a custom architecture, the run), with the same words.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from builder.model.expr import Expr, Value, both, either, encode, eq, evaluate, fmt, isin, mod, ne, negate, real, sym
from builder.model.ranges import RANGES, Range
from builder.model.states import HYBRID_GROUP, SHARD_RANKS

# Whole-number options that must be at least 1 and are always given, in the order they are checked.
POSITIVE = tuple(r.option for r in RANGES if r.whole and r.low == 1 and r.unset is None)


@dataclass(frozen=True)
class Check:
    """A configuration the model refuses (`refused` holds) and the one-line message that says why."""

    refused: Expr
    message: Expr


ARCH = sym("has_architecture")

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
    Check(both(sym("qlora"), eq(sym("lora_rank"), 0)), fmt("qlora: QLoRA needs lora_rank > 0")),
    Check(both(eq(sym("mode"), "train"), ne(sym("recipe"), ""), sym("qlora")),
          fmt("qlora: QLoRA's NF4 base weights do not combine with the Transformer Engine recipe {0} (it quantises "
              "16-bit linear weights); choose a precision such as bf16-mixed", sym("recipe"))),
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
    Check(both(ARCH, sym("ep") > 1, mod(sym("dp"), sym("ep"))),
          fmt("ep: expert parallelism is carved out of data parallelism: {0} must divide dp {1}", sym("ep"),
              sym("dp"))),
    Check(both(eq(sym("mode"), "train"), sym("cp") > 1, mod(sym("seq_len"), sym("cp"))),
          fmt("cp: {0} must divide seq_len {1}", sym("cp"), sym("seq_len"))),
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
    Check(both(sym("compile"), ARCH, sym("experts") > 0),
          fmt("compile: a compiled mixture-of-experts layer ({0}) is not measured yet; leave compile off",
              sym("model_name"))),
    Check(both(sym("compile"), sym("lora_rank") > 0),
          fmt("compile: compiled layers with LoRA adapters (lora_rank {0}) are not measured yet; leave compile off or "
              "set lora_rank 0", sym("lora_rank"))),
    Check(both(sym("compile"), ne(sym("recipe"), "")),
          fmt("compile: compiled layers are measured without a Transformer Engine recipe ({0}); choose a precision "
              "such as bf16-mixed", sym("recipe"))),
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
    *(Check(both(eq(sym("optimizer_impl"), "in-backward"), refused), fmt("optimizer_impl: " + why, *values))
      for refused, why, values in (
          (negate(ARCH), "in-backward needs an architecture (one parameter's gradient at a time), not a raw count",
           ()),
          (sym("grad_accum") > 1, "in-backward steps each parameter as its gradient is made, so gradients cannot "
           "accumulate over micro-batches (grad_accum {0})", (sym("grad_accum"),)),
          (sym("grad_accum_dtype"), "in-backward frees each gradient at once; a separate accumulation buffer "
           "(grad_accum_dtype) is not modelled with it", ()),
          (sym("lora_rank") > 0, "in-backward with LoRA adapters is not modelled", ()),
          (both(sym("shard_stage") > 0, negate(sym("fsdp"))), "DeepSpeed's ZeRO runs its own optimizer step after "
           "backward; in-backward is modelled with FSDP or without sharding", ()),
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
    Check(both(eq(sym("fsdp"), "HYBRID_SHARD"), mod(SHARD_RANKS, HYBRID_GROUP)),
          fmt("fsdp_shard_group: the shard group ({0} ranks) must divide dp x cp = {1}", HYBRID_GROUP,
              SHARD_RANKS)),
)


def first_refusal(inputs: Mapping[str, Value], checks: tuple[Check, ...] = CHECKS) -> str | None:
    """The message of the first of `checks` that refuses these inputs, or None."""
    for check in checks:
        if evaluate(check.refused, inputs):
            return evaluate(check.message, inputs)
    return None


def encode_checks(checks: tuple[Check, ...] = CHECKS) -> list[list[Any]]:
    """The checks as the browser evaluates them: [refused, message] each."""
    return [[encode(c.refused), encode(c.message)] for c in checks]
