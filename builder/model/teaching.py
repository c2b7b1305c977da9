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

from builder.model.breakdown import Breakdown, Part, whole_bytes

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


def bytes_per_param(params: int, segments: tuple[Segment, ...] = ADAM_SEGMENTS, zero: str = "none",
                    gpus: int = 1) -> Breakdown:
    """Per-GPU memory of the seed-000 view: params x bytes per segment, sharded by ZeRO stage."""
    if zero not in ZERO_STAGES:
        raise ValueError(f"zero: {zero!r} is not one of {', '.join(ZERO_STAGES)}")
    if params <= 0 or gpus < 1:
        raise ValueError("params must be positive and gpus at least 1")
    stage = ZERO_STAGES.index(zero)
    parts = []
    for segment in segments:
        sharded = segment.shard_from != "never" and stage >= ZERO_STAGES.index(segment.shard_from)
        divisor = gpus if sharded else 1
        amount = params * segment.bytes_per_param / divisor
        parts.append(Part(segment.id, whole_bytes(amount), f"N x {float(segment.bytes_per_param):g} B"
                          + (f" / {divisor}" if divisor > 1 else ""), segment.source,
                          f"{float(segment.bytes_per_param):g} B/param", segment.simplification, divisor))
    return Breakdown(params=params, parts=tuple(parts),
                     notes=("teaching view: bytes per parameter",))


# The four-bucket budget is a teaching simplification, not a published formula; the sources of the real terms
# are named in each part's simplification.
BUDGET_SOURCE = "simplified teaching model: weights, gradients = weights, optimizer = 2 x weights, activations = b s h L"
BUDGET_PRECISIONS = {"fp32": Fraction(4), "bf16": Fraction(2), "fp16": Fraction(2), "fp8": Fraction(1)}


def budget_allocator(params: int, batch: int, seq_len: int, precision: str = "bf16",
                     hidden: int = 4096, layers: int = 32) -> Breakdown:
    """Seed 001's four buckets: weights, gradients = weights, optimizer = 2 x weights, activations = b s h L bytes."""
    if precision not in BUDGET_PRECISIONS:
        raise ValueError(f"precision: {precision!r} is not one of {', '.join(BUDGET_PRECISIONS)}")
    per = BUDGET_PRECISIONS[precision]
    weights = whole_bytes(params * per)
    simplified = "simplified teaching model (four buckets): "
    parts = (
        Part("weights", weights, "N x bytes", BUDGET_SOURCE, f"{float(per):g} B/param"),
        Part("gradients", weights, "= weights", BUDGET_SOURCE, f"{float(per):g} B/param"),
        Part("optimizer", 2 * weights, "2 x weights (Adam m and v)", BUDGET_SOURCE, f"{float(2 * per):g} B/param",
             simplified + "real Adam states are fp32 (8 B/param) plus an fp32 master copy"),
        Part("activations", whole_bytes(batch * seq_len * hidden * layers * per), "b x s x h x L x bytes",
             BUDGET_SOURCE, f"h={hidden}, L={layers}",
             simplified + "one tensor per layer; real layers save ~17-30x more (Korthikanti et al. 2022)"),
    )
    return Breakdown(params=params, parts=parts, notes=("simplified four-bucket teaching model",))
