"""Peak memory by phase of a training step: what is live when, as named and cited parts.

The rules are builder.model.step's (the moments of a step, what is live at each, the reserved parts on top,
the highest). This module turns what they work out into Phases of Parts with their formulas and sources, and
`need` is what every verdict compares with capacity: the largest moment over every pipeline stage, reserved
parts included (serving: the steady state). builder/validate/peak.py measures the same moments (allocator
events on CPU, torch.cuda.max_memory_allocated on a GPU) and the Validation page compares them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from builder.model.activations import moment_environment
from builder.model.breakdown import Breakdown, Part, join_parts
from builder.model.config import Config
from builder.model.estimator import breakdown_of, estimate, overhead_parts, stage_estimates
from builder.model.gradbuffers import KEPT_NOTE
from builder.model.inputs import run_key
from builder.model.paging import PAGED_PARTS, RESIDENT_NOTE
from builder.model.expr import evaluate, sym, within
from builder.model.step import (ACCUMULATE, AT_PHASE_NOTES, AUTOGRAD, FIRST_LAYER_NOTES, MOMENT_BODIES, MOMENT_PARTS,
                                MOMENT_PHASES, NOT_SAVED, PHASE_TITLES, PHASES, STEP, TRANSIENTS)

__all__ = ["NOT_SAVED", "PHASES", "Phase", "Need", "phases", "phases_of", "instants", "peak", "need", "assess",
           "unmodelled"]


@dataclass(frozen=True)
class Phase:
    """One moment of a training step: the parts live then."""

    name: str  # one of PHASES
    parts: tuple[Part, ...]
    detail: str = ""  # inside a layer: the instant (an oplists.Moment's op)

    @property
    def total(self) -> int:
        """Bytes live at this moment."""
        return sum(p.bytes for p in self.parts)

    @property
    def title(self) -> str:
        """The moment in words."""
        return PHASE_TITLES[self.name]


def phases(config: Config, breakdown: Breakdown | None = None) -> tuple[Phase, ...]:
    """The candidate peaks of one training step on the GPU `estimate` reports (training only)."""
    if config.mode != "train":
        raise ValueError("mode: phases of a step are for training; serving has one steady state")
    return phases_of(config, (breakdown or estimate(config)).parts)


def step_environment(config: Config, parts: tuple[Part, ...]) -> dict:
    """The STEP rules worked out for a GPU holding `parts` (one pipeline stage's)."""
    rows = [{"name": p.name, "bucket": p.bucket, "bytes": p.bytes} for p in parts]
    return STEP.environment({**moment_environment(config.model, config), "parts": rows})


def phases_of(config: Config, parts: tuple[Part, ...], env: dict | None = None) -> tuple[Phase, ...]:
    """The candidate peaks of one training step on a GPU holding `parts` (one pipeline stage's), from the STEP
    rules (`env` when already worked out): the parts live at each moment with their words, and the reserved
    parts (allocator reserve and framework percentage, which scale with what is allocated, and the fixed
    amounts) worked out again on top of what is live then: a 10% framework overhead is 10% of the peak."""
    env = env or step_environment(config, parts)
    named = {p.name: p for p in parts}
    steps = []
    for live in env["step_live"]:
        name = live["phase"]
        moment = env.get(f"moment_{name}") if name in MOMENT_PHASES else None
        detail = moment["op"] if moment else ""
        tensors = [_named(r, named, name, detail, env) for r in env[f"step_{name}"] if r["bytes"]]
        steps.append(Phase(name, join_parts(tensors, overhead_parts(config, live["allocated"])), detail))
    return tuple(steps)


def _named(live: dict, named: dict[str, Part], phase: str, op: str, env: dict) -> Part:
    """A row of a moment's live parts as a Part with its words: the estimate's own part (held across
    micro-batches, or changed inside a layer), the moment's own tensor, or a tensor of the instant in a layer."""
    name, amount = live["name"], int(live["bytes"])
    if name in MOMENT_PARTS:
        return Part(name, amount, MOMENT_PARTS[name], AUTOGRAD, "", f"at {op}", transient=True)
    if name not in named:
        rule = next(r for r in TRANSIENTS[phase] if r.name == name and r.when_holds(env))
        return rule.part(env)
    part = named[name]
    if live.get("kept") and amount == part.bytes:
        return Part(name, amount, part.formula, part.source, part.per_unit, KEPT_NOTE)
    if live["accumulated"]:
        return Part(name, amount, part.formula, ACCUMULATE, part.per_unit, "held across micro-batches",
                    rate=part.rate)
    if amount != part.bytes and (phase, name) in AT_PHASE_NOTES:
        return Part(name, amount, part.formula, part.source, part.per_unit, AT_PHASE_NOTES[phase, name],
                    rate=part.rate)
    if amount != part.bytes and env.get("paged") and name in PAGED_PARTS:
        return Part(name, amount, part.formula, part.source, part.per_unit, RESIDENT_NOTE, rate=part.rate)
    if amount != part.bytes:
        change = FIRST_LAYER_NOTES.get(name, "what the first layer has not made or has freed") \
            if phase == "first_layer_backward" \
            else "what the last layer has not made or has freed"
        return Part(name, amount, part.formula, part.source, part.per_unit, f"less {change} at {op}",
                    rate=part.rate)
    return part


def instants(config: Config, phase: str, breakdown: Breakdown | None = None) -> dict[str, int]:
    """Every instant a moment phase inside a layer weighs (MOMENT_PHASES: its oplists.Moment rows that hold for the
    run), as its op in words -> bytes live then, reserved parts left out; the phase is the largest (the first on
    ties). Where the run has no such moment, none."""
    parts = (breakdown or estimate(config)).parts
    env = step_environment(config, parts)
    chosen = env.get(f"moment_{phase}")
    if not chosen:
        return {}
    body = MOMENT_BODIES[phase]
    live = sum(r["bytes"] for r in env[f"step_{phase}"])
    base = live - evaluate(within(sym("moment"), body), {**env, "moment": chosen})
    return {m["op"]: int(base + evaluate(within(sym("moment"), body), {**env, "moment": m}))
            for m in env[f"moments_{MOMENT_PHASES[phase]}"]}


def peak(config: Config, breakdown: Breakdown | None = None) -> Phase:
    """The highest of `phases(config, breakdown)` (the STEP rules' `peak_phase`: the first such, in step order)."""
    parts = (breakdown or estimate(config)).parts
    env = step_environment(config, parts)
    return next(phase for phase in phases_of(config, parts, env) if phase.name == env["peak_phase"])


@dataclass(frozen=True)
class Need:
    """What a run needs on its fullest GPU: the number every verdict compares with capacity.

    Training: the highest moment of a step (the STEP rules' `step_need`) over every pipeline stage,
    reserved parts included. Serving: the steady state, which is the sum of parts."""

    bytes: int  # what "fits", "exceeds by", --max and the fits-on lists compare with capacity
    sum_of_parts: int  # the estimate's total (the fullest stage's parts added up), shown beside it
    peak: Phase | None  # training: the moment that sets the need; serving: None
    steps: tuple[Phase, ...] = ()  # training: every moment of the stage that sets the need
    stage: str = "only"  # the pipeline stage that sets the need

    @property
    def basis(self) -> str:
        """What the need is, in words: 'peak of a step, at the start of backward' or 'sum of parts'."""
        return f"peak of a step, at the {self.peak.title}" if self.peak else "sum of parts (serving steady state)"


def need(config: Config, evaluated: list | None = None) -> Need:
    """What `config` needs per GPU (see Need), from `stage_estimates(config)` when already at hand."""
    evaluated = evaluated if evaluated is not None else stage_estimates(config)
    total = max(sum(p.bytes for p in gpu) for _, gpu, _ in evaluated)
    if config.mode != "train":
        return Need(total, total, None)
    best: Need | None = None
    for stage, gpu, _ in evaluated:
        parts = join_parts(gpu)
        env = step_environment(config, parts)
        if best is None or env["step_need"] > best.bytes:
            steps = phases_of(config, parts, env)
            top = next(phase for phase in steps if phase.name == env["peak_phase"])
            best = Need(int(env["step_need"]), total, top, steps, stage.name)
    assert best is not None
    return best


def assess(config: Config) -> tuple[Breakdown, Need]:
    """The estimate and the need of `config`, from one evaluation of its pipeline stages; worked out once for the
    last ASSESSED configurations asked for (inputs.run_key): a site build asks again for about one in six, the same
    run drawn on two charts, answered in an exercise and shown by a widget. The answer is shared (both frozen, but
    Breakdown.where is a dict): callers read it and never change it."""
    return _assess(*run_key(config))


ASSESSED = 256  # a site build assesses about 140 distinct configurations


@lru_cache(maxsize=ASSESSED)
def _assess(config: Config, shaped_display: str | None) -> tuple[Breakdown, Need]:
    evaluated = stage_estimates(config)
    return breakdown_of(config, evaluated), need(config, evaluated)


def unmodelled(config: Config) -> tuple[str, ...]:
    """What the phases leave out for this configuration, in words."""
    notes = []
    if config.model is not None and config.model.is_moe:
        notes.append("the instants inside the expert MLPs (forward and backward)")
    if config.model is not None and (config.model.qk_norm or config.model.kv_lora_rank):
        notes.append("the backward instants of the attention's own RMSNorms (Qwen3's q/k norms, latent attention's)")
    if config.model is not None and config.model.fused_projections and config.implementation == "hf":
        notes.append("the backward of Phi-3's q, k and v slices (each makes a zeroed tensor as wide as qkv_proj's "
                     "output, SliceBackward0, before they are summed)")
    if config.dropout and config.attention == "eager":
        notes.append("the attention dropout's own instant (the dropout mask and output exist; their instant is not "
                     "measured on a GPU yet)")
    if config.attention != "eager":
        notes.append("the fused attention kernel's backward workspace")
    if config.compile:
        notes.append("a compiled layer's own instants (the temporaries of inductor's generated forward and backward "
                     "kernels)")
    if config.implementation == "megatron" or config.activation_formula == "korthikanti":
        notes.append("Megatron's fused vocab-parallel cross entropy (the loss gradients follow transformers)")
    if config.activation_formula == "korthikanti":
        notes.append("a layer's own instants (the reference formulas have no op list)")
    if config.float8:
        notes.append("torchao's float8 scales (one fp32 number per tensor, row or column)")
    if config.enable_fsdp_float8_all_gather:
        notes.append("each weight shard's cast to float8 before FSDP's all-gather")
    return tuple(notes)
