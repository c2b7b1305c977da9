"""The rows layout: one horizontal bar per row, for a column narrower than the columns layout (a phone, or a chart
of many bars): capacity labels on top, each bar's label, bar and callouts under it, then the value axis."""

from __future__ import annotations

import math

from builder.charts.annotate import Callout, fits_inside, flow_chips, give_full_notes, inside_label, inside_lines, \
    row_chips, stack_callouts
from builder.charts.drawing import (SEGMENT_EDGE, ASIDE_SIZE, FONT_SIZE, LINE_HEIGHT, MARGIN, ROW_BAR_HEIGHT, ROW_GAP, SMALL_SIZE,
                                    Box, Drawing, Strokes, Words)
from builder.charts.format import format_amount, format_both
from builder.charts.layout import choose_ticks, dashed_box, make_hatch, open_spans, plan_example, with_halo
from builder.charts.segments import collect_segments, describe_segment, find_overflow
from builder.charts.spec import UNIT_BYTES, UNIT_MEANING, ChartSpec
from builder.charts.text import measure_text, width_of, wrap_text


def vertical_pieces(x: float, top: float, bottom: float,
                    words: list[Words]) -> tuple[tuple[tuple[float, float], ...], ...]:
    """A vertical line at `x` from `top` to `bottom`, broken where a line of text sits across it (seed 003: a dashed
    capacity line never crosses a note)."""
    gaps = []
    for w in words:
        width = width_of(w)
        left = w.x - (width / 2 if w.anchor == "middle" else width if w.anchor == "end" else 0)
        if not w.vertical and left - 3 <= x <= left + width + 3:
            gaps.append((w.y - w.size - 1, w.y + 4))
    return tuple(((x, y0), (x, y1)) for y0, y1 in open_spans(top, bottom, gaps) if y1 - y0 >= 4)  # no specks


def plan_rows(spec: ChartSpec, width: float) -> Drawing:
    """Lay the chart out `width` units wide: capacity labels on top, then for each bar its label, a horizontal
    stacked bar and its notes under it, then the value axis; capacity lines run down through every bar."""
    stacks = [collect_segments(bar, spec) for bar in spec.bars]
    overflows = [find_overflow(bar.needed, spec.gpus) for bar in spec.bars]
    unit_bytes = UNIT_BYTES[spec.unit]
    amounts = [max(bar.breakdown.total, bar.needed) for bar in spec.bars] + [gpu.usable_bytes for gpu in spec.gpus]
    axis_top, ticks = choose_ticks(max(amounts) / unit_bytes)
    left, right = MARGIN + 2, width - MARGIN - measure_text(f"{ticks[-1]:g}", SMALL_SIZE) / 2
    scale = (right - left) / (axis_top * unit_bytes)

    def x_of(n_bytes: float) -> float:
        return round(left + n_bytes * scale, 2)

    shapes: list[Box | Strokes | Words] = []
    texts: list[Box | Strokes | Words] = []
    y = float(MARGIN)
    gpus = sorted(spec.gpus, key=lambda g: (g.usable_bytes, g.display))
    label_bottoms = []
    for gpu in gpus:  # one line each, written beside where its line starts
        x = x_of(gpu.usable_bytes)
        text = f"{gpu.display}: {format_amount(gpu.usable_bytes, spec.unit)} usable"
        text_width = measure_text(text, SMALL_SIZE)
        start = x + 4 if x + 4 + text_width <= width - MARGIN else max(MARGIN, x - 4 - text_width)
        texts.append(Words(round(start, 2), round(y + 12, 2), text, "tm-text tm-capacity-label", SMALL_SIZE))
        y += LINE_HEIGHT
        label_bottoms.append(y)
    y += 6 if gpus else 0
    for index, (bar, stack, overflow) in enumerate(zip(spec.bars, stacks, overflows)):
        for line in wrap_text(bar.label, width - 2 * MARGIN, FONT_SIZE, bold=True):
            texts.append(Words(MARGIN, round(y + 12, 2), line, "tm-text tm-bar-label", bold=True))
            y += LINE_HEIGHT
        total = f"{format_both(sum(s.bytes for s in stack), spec.unit, spec.also_unit)} {bar.total_words}"
        texts.append(Words(MARGIN, round(y + 12, 2), total, "tm-text-dim tm-bar-total", SMALL_SIZE))
        y += LINE_HEIGHT + 4
        base = 0
        callouts = []
        for segment in stack:
            x0, x1 = x_of(base), x_of(base + segment.bytes)
            tooltip = "\n".join((f"{bar.label}: {describe_segment(segment, spec.unit, spec.also_unit)}",) + segment.detail)
            shapes.append(Box(x0, y, round(x1 - x0, 2), ROW_BAR_HEIGHT, segment.css, "tm-segment", SEGMENT_EDGE,
                              f"bar{index}-{segment.key.replace('/', '-')}", tooltip))
            inside = inside_lines(spec, index, segment, "rows")
            if fits_inside(inside, x1 - x0, ROW_BAR_HEIGHT):
                texts.extend(inside_label(inside, (x0, y, x1, y + ROW_BAR_HEIGHT))[0])
            else:
                callouts.append(Callout((x0 + x1) / 2, inside[0], "tm-text tm-note", segment.css))
            base += segment.bytes
        if spec.aside:
            x0 = x_of(base)
            x1 = min(x0 + ASIDE_SIZE, width - MARGIN)
            shapes.append(dashed_box(x0, y, x1, y + ROW_BAR_HEIGHT))
            if give_full_notes(spec, index):
                callouts.append(Callout((x0 + x1) / 2, spec.aside, "tm-text-dim tm-note"))
        if overflow:
            x0, x1 = x_of(overflow[0].usable_bytes), x_of(max(base, bar.needed))
            shapes.extend(with_halo(Strokes(make_hatch(x0, y, x1, y + ROW_BAR_HEIGHT), "tm-overflow-hatch", 1.2)))
            shapes.append(Box(x0, y, round(x1 - x0, 2), ROW_BAR_HEIGHT, "", "tm-overflow-outline", 1.5))
        if bar.peak_differs:
            x = x_of(bar.needed)
            shapes.append(Strokes((((x, y - 4), (x, y + ROW_BAR_HEIGHT + 4)),), "tm-peak-line", 2.0))
        y += ROW_BAR_HEIGHT
        if callouts:
            notes, y = stack_callouts(callouts, MARGIN, width - MARGIN, y, y + 6)
            texts.extend(notes)
        y += 4
        chips, y = flow_chips(row_chips(spec, index, overflow), MARGIN, width - MARGIN, y)
        texts.extend(chips)
        y += ROW_GAP
    axis_y = y - ROW_GAP + 6
    for gpu, label_bottom in zip(gpus, label_bottoms):
        x = x_of(gpu.usable_bytes)
        pieces = vertical_pieces(x, label_bottom - 2, axis_y, [w for w in texts if isinstance(w, Words)])
        shapes.extend(with_halo(Strokes(pieces, "tm-capacity", 1.5, dashed=True)))
    tick_marks = tuple(((x_of(t * unit_bytes), axis_y), (x_of(t * unit_bytes), axis_y + 4)) for t in ticks)
    shapes.append(Strokes((((left, axis_y), (right, axis_y)),) + tick_marks, "tm-axis", 0.8))
    for tick in ticks:
        texts.append(Words(x_of(tick * unit_bytes), round(axis_y + 18, 2), f"{tick:g}", "tm-text tm-tick", SMALL_SIZE,
                           anchor="middle" if tick else "start"))
    title = f"Memory per GPU ({UNIT_MEANING[spec.unit]})"
    texts.append(Words(MARGIN, round(axis_y + 18 + LINE_HEIGHT + 2, 2), title, "tm-text tm-axis-title", SMALL_SIZE))
    bottom = axis_y + 18 + LINE_HEIGHT + 6
    items = shapes + texts
    if spec.example:
        example, bottom = plan_example(spec, width, bottom + 8)
        items.extend(example)
    return Drawing(width, math.ceil(bottom + MARGIN), tuple(items))
