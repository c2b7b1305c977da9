"""Geometry both layouts share: axis ticks, the value scale, overflow hatching, halos under lines, broken lines,
the dashed box of a part a chart does not quantify, and the worked-example box."""

from __future__ import annotations

import math
from dataclasses import dataclass

from builder.charts.drawing import (BAR_WIDTH, EXAMPLE_LINE, EXAMPLE_PADDING, FONT_SIZE, HALO, HATCH_SPACING, MARGIN,
                                    SINGLE_BAR_WIDTH, Box, Strokes, Words)
from builder.charts.spec import ChartSpec
from builder.charts.text import wrap_text


def choose_ticks(top: float) -> tuple[float, list[float]]:
    """A round axis maximum at or above `top` (in display units) and about five ticks up to it."""
    if top <= 0:
        return 1.0, [0.0, 1.0]
    rough = top / 5
    magnitude = 10 ** math.floor(math.log10(rough))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= rough * (1 - 1e-9))
    count = math.ceil(top / step - 1e-9)
    return count * step, [round(i * step, 10) for i in range(count + 1)]


def make_hatch(x0: float, y0: float, x1: float, y1: float) -> tuple[tuple[tuple[float, float], ...], ...]:
    """Diagonal '/' lines filling the rectangle [x0, x1] x [y0, y1], HATCH_SPACING apart."""
    lines = []
    c = x0 + y0 + HATCH_SPACING
    while c < x1 + y1:
        left, right = max(x0, c - y1), min(x1, c - y0)
        if right - left > 0.1:
            lines.append(((round(left, 2), round(c - left, 2)), (round(right, 2), round(c - right, 2))))
        c += HATCH_SPACING
    if not lines:  # too thin to hatch: one line still marks it
        lines.append(((round(x0, 2), round(y1, 2)), (round(x1, 2), round(y1, 2))))
    return tuple(lines)


def with_halo(strokes: Strokes) -> list[Strokes]:
    """`strokes` on a solid band of background colour (class tm-halo), so the line keeps its contrast with the
    background whatever part lies behind it (WCAG non-text contrast, tests/test_palette.py)."""
    return [Strokes(strokes.lines, "tm-halo", round(strokes.line_width + HALO, 2)), strokes]


def open_spans(start: float, end: float, gaps: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The stretches of [start, end] that no gap covers (a dashed line broken where notes sit on it), rounded."""
    spans = []
    for gap_start, gap_end in sorted(gaps):
        if gap_start > start:
            spans.append((round(start, 2), round(gap_start, 2)))
        start = max(start, gap_end)
    if start < end:
        spans.append((round(start, 2), round(end, 2)))
    return spans


def dashed_box(x0: float, top: float, x1: float, bottom: float) -> Strokes:
    """The outline of a part the chart does not quantify (ChartSpec.aside): dashed, open to nothing."""
    corners = ((x0, top), (x1, top), (x1, bottom), (x0, bottom), (x0, top))
    return Strokes((tuple((round(x, 2), round(y, 2)) for x, y in corners),), "tm-aside", 1.0, dashed=True)


@dataclass(frozen=True)
class Frame:
    """The value axis: where it is and how many SVG units one byte takes."""

    unit_bytes: int
    ticks: tuple[float, ...]  # in display units
    axis_x: float
    plot_bottom: float
    scale: float  # SVG units per byte

    def y_of(self, n_bytes: float) -> float:
        """SVG y of a byte amount on the value axis."""
        return round(self.plot_bottom - n_bytes * self.scale, 2)


def bar_width_of(spec: ChartSpec) -> float:
    """Width of a bar in the columns layout: wide for a chart of one bar, so that its labels can sit inside it."""
    return SINGLE_BAR_WIDTH if len(spec.bars) == 1 else BAR_WIDTH


def plan_example(spec: ChartSpec, width: float, top: float) -> tuple[list[Box | Strokes | Words], float]:
    """The worked-example box across the chart; returns its items and its bottom."""
    inner = width - 2 * MARGIN - 2 * EXAMPLE_PADDING
    lines = wrap_text(spec.example, inner, FONT_SIZE)
    height = len(lines) * EXAMPLE_LINE + 2 * EXAMPLE_PADDING - 4
    items: list[Box | Strokes | Words] = [
        Box(MARGIN, top, width - 2 * MARGIN, height, "tm-example-box", "tm-example-border", 0.8, rounded=True)
    ]
    for line_index, line in enumerate(lines):
        baseline = top + EXAMPLE_PADDING + line_index * EXAMPLE_LINE + 0.8 * FONT_SIZE
        items.append(Words(MARGIN + EXAMPLE_PADDING, round(baseline, 2), line, "tm-text tm-example"))
    return items, top + height
