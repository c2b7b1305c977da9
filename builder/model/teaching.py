"""Teaching models from the seed widgets, kept apart from the full model and named as such.

* bytes_per_param: seed 000's view — memory = parameters x a table of bytes per parameter
  (weights 2, master 4, momentum 4, variance 4, gradients 2, activations 2), with ZeRO
  stages sharding segments across N GPUs. Exact for model states under mixed-precision
  Adam (Rajbhandari et al. 2019, section 3.1: 2 + 2 + 12 bytes); its 2 B/param for
  activations is a placeholder: real activations scale with batch x sequence, not
  parameters (see the full model).
* budget_allocator: seed 001's four buckets — optimizer = 2 x weights and activations =
  b x s x 4096 x 32 x bytes (a 7B-shaped reference). A deliberate simplification.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from builder.model.breakdown import Breakdown, Part, Rate
from builder.model.expr import ceil, each, fmt, per_unit, row, sym, when
from builder.model.partrules import PartRule, PerUnit, RuleSet, bytes_of
from builder.model.units import DTYPE_BYTES

ZERO_STAGES = ("none", "stage1", "stage2", "stage3")
ZERO_SOURCE = "Rajbhandari et al. 2019 (ZeRO), arXiv:1910.02054, section 5.1"


@dataclass(frozen=True)
class Segment:
    """One bytes-per-parameter segment of the seed-000 view."""

    id: str
    label: str
    bytes_per_param: Fraction
    shard_from: str  # the first ZeRO stage that shards it ('stage1'..'stage3', or 'never')
    source: str = ""
    simplification: str = ""


ADAM_SEGMENTS: tuple[Segment, ...] = (
    Segment("weights", "Weights", Fraction(2), "stage3", "bf16 weights: " + ZERO_SOURCE),
    Segment("master", "Master", Fraction(4), "stage1", "fp32 master copy (Micikevicius et al. 2017)"),
    Segment("momentum", "Momentum", Fraction(4), "stage1", "Adam first moment m, fp32 (Kingma & Ba 2014)"),
    Segment("variance", "Variance", Fraction(4), "stage1", "Adam second moment v, fp32 (Kingma & Ba 2014)"),
    Segment("gradients", "Gradients", Fraction(2), "stage2", "bf16 gradients: " + ZERO_SOURCE),
    Segment("activations", "Activations", Fraction(2), "never", "a teaching placeholder (bytes per parameter view)",
            "placeholder: activations really scale with batch x sequence x layers, not with parameters"),
)


# The seed-000 view as a rule: each segment's bytes on one GPU, params x bytes per parameter, divided by the
# GPUs that share it once the ZeRO stage reaches the segment's stage (its `shard`: 1-3, or 4 for never).
# Rows of `segments` carry num/den (exact bytes per parameter) and shard; the browser evaluates the same rule.
SEGMENT_SHARERS = when(sym("zero_stage") >= sym("shard"), sym("gpus"), 1)
SEGMENTS = RuleSet(symbols={"segment_bytes": each(sym("segments"), row(
    1, bytes=ceil(sym("params") * sym("num") / (sym("den") * SEGMENT_SHARERS)), sharers=SEGMENT_SHARERS))}, parts=())


def segment_rows(segments: tuple[Segment, ...]) -> list[dict[str, int]]:
    """The segments as the rule reads them: exact bytes per parameter as num/den, shard stage 1-4."""
    return [{"num": s.bytes_per_param.numerator, "den": s.bytes_per_param.denominator,
             "shard": ZERO_STAGES.index(s.shard_from) if s.shard_from != "never" else 4} for s in segments]


def bytes_per_param(params: int, segments: tuple[Segment, ...] = ADAM_SEGMENTS, zero: str = "none",
                    gpus: int = 1) -> Breakdown:
    """Per-GPU memory of the seed-000 view: params x bytes per segment, sharded by ZeRO stage."""
    if zero not in ZERO_STAGES:
        raise ValueError(f"zero: {zero!r} is not one of {', '.join(ZERO_STAGES)}")
    if params <= 0 or gpus < 1:
        raise ValueError("params must be positive and gpus at least 1")
    rows = SEGMENTS.environment({"params": params, "zero_stage": ZERO_STAGES.index(zero), "gpus": gpus,
                                 "segments": segment_rows(segments)})["segment_bytes"]
    parts = []
    for segment, priced in zip(segments, rows):
        divisor = int(priced["sharers"])
        parts.append(Part(segment.id, int(priced["bytes"]), f"N x {float(segment.bytes_per_param):g} B"
                          + (f" / {divisor}" if divisor > 1 else ""), segment.source,
                          f"{float(segment.bytes_per_param):g} B/param", segment.simplification, divisor,
                          rate=Rate(segment.bytes_per_param, "param")))
    return Breakdown(params=params, parts=tuple(parts),
                     notes=("teaching view: bytes per parameter",))


# The four-bucket budget is a teaching simplification, not a published formula; the sources of the real terms
# are named in each part's simplification.
BUDGET_SOURCE = "simplified teaching model: weights, gradients = weights, optimizer = 2 x weights, activations = b s h L"
BUDGET_PRECISIONS = {"fp32": Fraction(4), "bf16": Fraction(2), "fp16": Fraction(2), "fp8": Fraction(1)}


SIMPLIFIED = "simplified teaching model (four buckets): "
BUDGET_BYTES = bytes_of(sym("precision"))
BUDGET_WEIGHTS = ceil(sym("params") * BUDGET_BYTES)
# Seed 001's four buckets as rules (the memory-budget widget's script evaluates the same set). Inputs: params,
# micro_batch, seq_len, precision (a key of BUDGET_PRECISIONS), hidden, layers and the dtype_bytes table.
BUDGET = RuleSet(symbols={}, parts=(
    PartRule("weights", BUDGET_WEIGHTS, "N x bytes", BUDGET_SOURCE, PerUnit(BUDGET_BYTES, "param")),
    PartRule("gradients", BUDGET_WEIGHTS, "= weights", BUDGET_SOURCE, PerUnit(BUDGET_BYTES, "param")),
    PartRule("optimizer", 2 * BUDGET_WEIGHTS, "2 x weights (Adam m and v)", BUDGET_SOURCE,
             PerUnit(2 * BUDGET_BYTES, "param"),
             SIMPLIFIED + "real Adam states are fp32 (8 B/param) plus an fp32 master copy"),
    PartRule("activations", sym("micro_batch") * sym("seq_len") * sym("hidden") * sym("layers") * BUDGET_BYTES,
             "b x s x h x L x bytes", BUDGET_SOURCE, fmt("h={0}, L={1}", sym("hidden"), sym("layers")),
             SIMPLIFIED + "one tensor per layer; real layers save ~17-30x more (Korthikanti et al. 2022)"),
))


def budget_allocator(params: int, batch: int, seq_len: int, precision: str = "bf16",
                     hidden: int = 4096, layers: int = 32) -> Breakdown:
    """Seed 001's four buckets: weights, gradients = weights, optimizer = 2 x weights, activations = b s h L bytes."""
    if precision not in BUDGET_PRECISIONS:
        raise ValueError(f"precision: {precision!r} is not one of {', '.join(BUDGET_PRECISIONS)}")
    parts = BUDGET.evaluate({"params": params, "micro_batch": batch, "seq_len": seq_len, "precision": precision,
                             "hidden": hidden, "layers": layers, "dtype_bytes": DTYPE_BYTES})
    return Breakdown(params=params, parts=tuple(parts), notes=("simplified four-bucket teaching model",))
