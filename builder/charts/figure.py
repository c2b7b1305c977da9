"""A chart from its spec: the one registration point of chart layouts (LAYOUTS; the kinds of chart a page defines,
phases and engine start-up, are listed in builder.grids.CHART_KINDS), render_chart for one layout and
render_figure for what a page shows (a wide and a narrow chart, switched by static/site.css with no script)."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from builder.charts.annotate import describe_chart
from builder.charts.columns import plan_drawing
from builder.charts.drawing import NARROW_WIDTH, WIDE_WIDTH, Drawing
from builder.charts.rows import plan_rows
from builder.charts.spec import ChartSpec, check_spec
from builder.charts.svg import write_svg


# The one registration point of chart layouts: name -> planner (spec, width in SVG units) -> Drawing. 'columns' lays
# bars side by side at their natural width (it ignores the width); 'rows' puts one bar per row, `width` units wide.
LAYOUTS: dict[str, Callable[[ChartSpec, float], Drawing]] = {
    "columns": lambda spec, width: plan_drawing(spec),
    "rows": plan_rows,
}


def plan_chart(spec: ChartSpec, layout: str = "columns", width: float = WIDE_WIDTH) -> Drawing:
    """The planned drawing of `spec` in `layout` (a LAYOUTS name)."""
    check_spec(spec)
    if layout not in LAYOUTS:
        raise ValueError(f"chart {spec.chart_id}: layout {layout!r} (use {' or '.join(LAYOUTS)})")
    return LAYOUTS[layout](spec, width)


def write_chart(spec: ChartSpec, drawing: Drawing, css: str = "tm-chart") -> str:
    """The markup of a planned chart; its <desc> is the spec's description, else a summary of every bar."""
    return write_svg(drawing, spec.chart_id, spec.title, spec.description or describe_chart(spec), css)


def render_chart(spec: ChartSpec, layout: str = "columns", width: float = WIDE_WIDTH) -> str:
    """SVG markup (no XML declaration) for `spec`; byte-identical for equal specs. `layout` 'columns': bars side
    by side with notes beside them, at their natural width; 'rows': one bar per row, `width` units wide."""
    return write_chart(spec, plan_chart(spec, layout, width))


def render_figure(spec: ChartSpec) -> str:
    """What a page shows: the chart for a wide column (the columns layout when it fits WIDE_WIDTH, else rows at
    WIDE_WIDTH) and for a narrow one (rows at NARROW_WIDTH), switched by static/site.css at 48rem with no script.
    The narrow one's ids are prefixed '<chart_id>-narrow'."""
    wide = plan_chart(spec, "columns")
    if wide.width > WIDE_WIDTH:
        wide = plan_chart(spec, "rows", WIDE_WIDTH)
    narrow_spec = replace(spec, chart_id=f"{spec.chart_id}-narrow")
    narrow = plan_chart(narrow_spec, "rows", NARROW_WIDTH)
    return (write_chart(spec, wide, "tm-chart tm-chart-wide") + "\n"
            + write_chart(narrow_spec, narrow, "tm-chart tm-chart-narrow"))
