"""Annotated SVG breakdown charts rendered with matplotlib at build time.

Interface shared by the page renderer (builder/render.py) and this module. The
implementation replaces `render_chart` (owned by the charts work in progress).
"""

from __future__ import annotations

from dataclasses import dataclass

from builder.catalog import Gpu
from builder.model.breakdown import Breakdown


@dataclass(frozen=True)
class ChartBar:
    """One stacked bar: a label under it and the breakdown it draws."""

    label: str  # e.g. '1 GPU' or 'ZeRO-3 / 8 GPUs'
    breakdown: Breakdown


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


def render_chart(spec: ChartSpec) -> str:
    """SVG markup (no XML declaration) for `spec`; byte-identical for equal specs."""
    raise NotImplementedError("charts: render_chart is being written")
