"""What a chart shows: a ChartSpec of ChartBars, checked by check_spec. Rendering is a pure function of it."""

from __future__ import annotations

import re
from dataclasses import dataclass

from builder.catalog import Gpu
from builder.model.breakdown import Breakdown
from builder.model.units import GB, GiB, MiB


@dataclass(frozen=True)
class ChartBar:
    """One stacked bar: a label under it and the breakdown it draws."""

    label: str  # e.g. '1 GPU' or 'ZeRO-3 / 8 GPUs'
    breakdown: Breakdown
    need: int | None = None  # what the run needs (builder.model.peak.need); None: the sum of parts
    total_words: str = "sum of parts"  # what the amount under the bar is ('live' for a moment of a step)

    @property
    def needed(self) -> int:
        """What overflow marks and DOESN'T FIT notes compare with capacity: the need, else the sum of parts."""
        return self.breakdown.total if self.need is None else self.need

    @property
    def peak_differs(self) -> bool:
        """True when the need is not the sum of parts (a training step peaks above or below it)."""
        return self.need is not None and self.need != self.breakdown.total


@dataclass(frozen=True)
class ChartSpec:
    """Everything one chart shows; rendering is a pure function of this."""

    chart_id: str  # unique within a page; prefixes every id inside the SVG
    title: str  # becomes <title>
    description: str  # becomes <desc>: a text summary with the numbers
    bars: tuple[ChartBar, ...]
    gpus: tuple[Gpu, ...] = ()  # dashed capacity lines
    unit: str = "GiB"  # 'GiB' (2**30) or 'GB' (10**9), written on the axis
    example: str = ""  # worked-example box under the chart
    group_by: str = "bucket"  # 'bucket' (first path segment) or 'part' (every part)
    display_names: tuple[tuple[str, str], ...] = ()  # (part or bucket name, text shown) overrides
    # 'full': every bar's notes read 'Weights 13.0 GiB · 2 B/param'; 'last': only the last bar's
    # do, the others give the amount (same stacking order, names in tooltips); 'auto': 'full'
    # for one or two bars, 'last' for more, so wide charts stay readable.
    notes: str = "auto"
    also_unit: str = ""  # 'GiB' or 'GB': every amount is also given in this unit, e.g. '112.0 GB (104.3 GiB)'
    # A part the chart does not quantify (seed 003's activations, 'varies with batch size'): an empty dashed box
    # of no particular size on top of each bar, with this text on a leader line. '' for none.
    aside: str = ""


UNIT_BYTES = {"GiB": GiB, "GB": GB, "MiB": MiB}
UNIT_MEANING = {"GiB": "GiB = 2³⁰ bytes", "GB": "GB = 10⁹ bytes", "MiB": "MiB = 2²⁰ bytes"}


def check_spec(spec: ChartSpec) -> None:
    """Raise ValueError naming the field when `spec` cannot be drawn."""
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", spec.chart_id):
        raise ValueError(f"chart_id {spec.chart_id!r} must be a letter then letters, digits, '-' or '_'")
    if spec.unit not in UNIT_BYTES:
        raise ValueError(f"chart {spec.chart_id}: unit {spec.unit!r} (use GiB, GB or MiB)")
    if spec.group_by not in ("bucket", "part"):
        raise ValueError(f"chart {spec.chart_id}: group_by {spec.group_by!r} (use 'bucket' or 'part')")
    if spec.notes not in ("auto", "full", "last"):
        raise ValueError(f"chart {spec.chart_id}: notes {spec.notes!r} (use 'auto', 'full' or 'last')")
    if not spec.bars:
        raise ValueError(f"chart {spec.chart_id}: bars is empty")
    if spec.also_unit and spec.also_unit not in UNIT_BYTES:
        raise ValueError(f"chart {spec.chart_id}: also_unit {spec.also_unit!r} (use GiB, GB or MiB)")
