"""The columns layout: bars side by side on a vertical value axis, each followed by its column of leader-line
notes, dashed GPU capacity lines broken where a note sits on them, hatched overflow, a worked-example box."""

from __future__ import annotations

import math

from builder.catalog import Gpu
from builder.charts.annotate import (Column, Note, fits_inside, give_full_notes, inside_label, inside_lines,
                                     note_words, place_column, plan_capacity_notes, write_notes)
from builder.charts.drawing import (SEGMENT_EDGE, ASIDE_SIZE, ASIDE_WIDTH, BAR_GAP, COLUMN_GAP, FONT_SIZE, LINE_HEIGHT, MARGIN,
                                    MIN_PLOT_HEIGHT, MIN_WIDTH, NOTE_GAP, PLOT_TOP, SINGLE_PLOT_HEIGHT, SMALL_SIZE,
                                    Box, Drawing, Rect, Strokes, Words)
from builder.charts.format import format_both
from builder.charts.layout import (Frame, bar_width_of, choose_ticks, dashed_box, make_hatch, open_spans,
                                   plan_example, with_halo)
from builder.charts.segments import Segment, collect_segments, describe_segment, find_overflow
from builder.charts.spec import UNIT_BYTES, UNIT_MEANING, ChartBar, ChartSpec
from builder.charts.text import measure_text, width_of, wrap_text


def plan_frame(spec: ChartSpec, texts: list[list[tuple[Words, ...]]]) -> Frame:
    """Choose the axis range and a plot tall enough for the most crowded column of notes."""
    unit_bytes = UNIT_BYTES[spec.unit]
    amounts = [max(bar.breakdown.total, bar.needed) for bar in spec.bars] + [gpu.usable_bytes for gpu in spec.gpus]
    axis_top, ticks = choose_ticks(max(amounts) / unit_bytes)
    crowded = [sum(len(lines) * LINE_HEIGHT + NOTE_GAP for lines in column) for column in texts]
    crowded.append(len(spec.gpus) * (2 * LINE_HEIGHT + NOTE_GAP))
    plot_height = max(MIN_PLOT_HEIGHT if len(spec.bars) > 1 else SINGLE_PLOT_HEIGHT, math.ceil(max(crowded)))
    tick_width = max(measure_text(f"{tick:g}", SMALL_SIZE) for tick in ticks)
    axis_x = round(MARGIN + SMALL_SIZE + 8 + tick_width + 6, 1)
    return Frame(unit_bytes, tuple(ticks), axis_x, PLOT_TOP + plot_height, plot_height / (axis_top * unit_bytes))


def plan_bar(index: int, bar: ChartBar, stack: list[Segment], texts: list[tuple[Words, ...]], overflow: list[Gpu],
             x: float, frame: Frame, spec: ChartSpec) -> tuple[list[Box | Strokes | Words], list[Box | Strokes | Words],
                                                               list[Rect], Column, float, float]:
    """A bar's segments, the need's mark, overflow hatch, label and notes; returns them, the labels inside its
    segments and their tags' boxes, its column of leader-line notes, where it ends and its label's bottom. A segment
    whose label fits inside it (fits_inside) is labelled there; the others get a note on a leader line. The hatch
    runs from the smallest exceeded capacity to the need (or the stack's top, if higher)."""
    items: list[Box | Strokes | Words] = []
    labels: list[Box | Strokes | Words] = []
    tags: list[Rect] = []
    width = bar_width_of(spec)
    column = Column(leader_x=x + width)
    base = 0
    for segment, lines in zip(stack, texts):
        top_y, bottom_y = frame.y_of(base + segment.bytes), frame.y_of(base)
        tooltip = "\n".join((f"{bar.label}: {describe_segment(segment, spec.unit, spec.also_unit)}",) + segment.detail)
        gid = f"bar{index}-{segment.key.replace('/', '-')}"
        items.append(Box(x, top_y, width, bottom_y - top_y, segment.css, "tm-segment", SEGMENT_EDGE, gid, tooltip))
        inside = inside_lines(spec, index, segment, "columns")
        if fits_inside(inside, width, bottom_y - top_y):
            label, tag = inside_label(inside, (x, top_y, x + width, bottom_y))
            labels.extend(label)
            tags.append(tag)
        else:
            column.notes.append(Note((top_y + bottom_y) / 2, lines, segment.css))
        base += segment.bytes
    if spec.aside:
        bottom_y = frame.y_of(base)
        top_y = max(PLOT_TOP - 6, bottom_y - ASIDE_SIZE)
        items.append(dashed_box(x, top_y, x + width, bottom_y))
        if give_full_notes(spec, index):
            lines = tuple(note_words(line, "tm-text-dim tm-note") for line in wrap_text(spec.aside, ASIDE_WIDTH, FONT_SIZE))
            column.notes.append(Note((top_y + bottom_y) / 2, lines))
    extra = texts[len(stack):]
    if bar.peak_differs:
        peak_y = frame.y_of(bar.needed)
        items.append(Strokes((((x - 4, peak_y), (x + width + 4, peak_y)),), "tm-peak-line", 2.0))
        column.notes.append(Note(peak_y, extra.pop(0)))
    if overflow:
        line_y, top_y = frame.y_of(overflow[0].usable_bytes), frame.y_of(max(base, bar.needed))
        items.extend(with_halo(Strokes(make_hatch(x, top_y, x + width, line_y), "tm-overflow-hatch", 0.9)))
        items.append(Box(x, top_y, width, line_y - top_y, "", "tm-overflow-outline", 1.2))
        column.notes.append(Note((top_y + line_y) / 2, extra[-1]))
    note_width = max((width_of(w) for note in column.notes for w in note.lines), default=0)
    label_width = max(column.text_x + note_width - x, width + 40)
    y = frame.plot_bottom + 16
    for line in wrap_text(bar.label, label_width, FONT_SIZE, bold=True):
        items.append(Words(x, y, line, "tm-text tm-bar-label", bold=True))
        y += LINE_HEIGHT
    items.append(Words(x, y, f"{format_both(base, spec.unit, spec.also_unit)} {bar.total_words}",
                       "tm-text-dim tm-bar-total", size=SMALL_SIZE))
    items.append(Strokes((((x - 6, frame.plot_bottom), (x + width + 6, frame.plot_bottom)),), "tm-axis", 0.8))
    right = max([column.text_x + note_width if column.notes else x + width]
                + [x + width_of(w) for w in items if isinstance(w, Words)])
    return items, labels, tags, column, right, y


def plan_axis(spec: ChartSpec, frame: Frame) -> list[Box | Strokes | Words]:
    """The value axis: a line with ticks, their numbers, and a title naming the unit."""
    plot_top = frame.y_of(frame.ticks[-1] * frame.unit_bytes)
    tick_ys = [frame.y_of(t * frame.unit_bytes) for t in frame.ticks]
    ticks = tuple(((frame.axis_x - 4, y), (frame.axis_x, y)) for y in tick_ys)
    items: list[Box | Strokes | Words] = [
        Strokes((((frame.axis_x, plot_top), (frame.axis_x, frame.plot_bottom)),) + ticks, "tm-axis", 0.8)
    ]
    for tick in frame.ticks:
        items.append(Words(frame.axis_x - 6, frame.y_of(tick * frame.unit_bytes) + 3.5, f"{tick:g}", "tm-text tm-tick",
                           SMALL_SIZE, anchor="end"))
    items.append(Words(MARGIN + SMALL_SIZE / 2 + 1, round((plot_top + frame.plot_bottom) / 2, 2),
                       f"Memory per GPU ({UNIT_MEANING[spec.unit]})", "tm-text tm-axis-title",
                       size=SMALL_SIZE, anchor="middle", vertical=True))
    return items


def plan_capacity_lines(spec: ChartSpec, frame: Frame, line_end: float,
                        boxes: list[Rect]) -> list[Box | Strokes | Words]:
    """Dashed lines at each GPU's usable memory, broken where a note sits on them."""
    items: list[Box | Strokes | Words] = []
    for gpu in sorted(spec.gpus, key=lambda g: (g.usable_bytes, g.display)):
        y = frame.y_of(gpu.usable_bytes)
        gaps = [(x0 - 3, x1 + 3) for x0, top, x1, bottom in boxes if top - 1 <= y <= bottom + 1]
        pieces = tuple(((start, y), (end, y)) for start, end in open_spans(frame.axis_x, line_end, gaps))
        items.extend(with_halo(Strokes(pieces, "tm-capacity", 1.2, dashed=True)))
    return items


def plan_drawing(spec: ChartSpec) -> Drawing:
    """Lay out the whole chart in SVG units."""
    stacks = [collect_segments(bar, spec) for bar in spec.bars]
    overflows = [find_overflow(bar.needed, spec.gpus) for bar in spec.bars]
    texts = [write_notes(spec, index, stack, overflow) for index, (stack, overflow) in enumerate(zip(stacks, overflows))]
    frame = plan_frame(spec, texts)

    # Bars left to right, each followed by its column of notes; then the capacity labels.
    shapes: list[Box | Strokes | Words] = []
    inside: list[Box | Strokes | Words] = []
    tags: list[Rect] = []
    columns: list[Column] = []
    x = frame.axis_x + BAR_GAP
    labels_bottom = frame.plot_bottom
    for index, (bar, stack, overflow) in enumerate(zip(spec.bars, stacks, overflows)):
        items, labels, bar_tags, column, right, label_bottom = plan_bar(index, bar, stack, texts[index], overflow, x,
                                                                        frame, spec)
        labels_bottom = max(labels_bottom, label_bottom)
        shapes.extend(items)
        inside.extend(labels)
        tags.extend(bar_tags)
        columns.append(column)
        x = round(right + COLUMN_GAP, 1)
    line_end = x - COLUMN_GAP + 10
    width = x - COLUMN_GAP + MARGIN
    if spec.gpus:
        capacity = plan_capacity_notes(spec, frame, line_end)
        columns.append(capacity)
        width = capacity.text_x + max(width_of(w) for note in capacity.notes for w in note.lines) + MARGIN
    width = round(max(width, MIN_WIDTH))

    # Notes, then the capacity lines that must not run through them.
    notes: list[Box | Strokes | Words] = []
    boxes: list[Rect] = []
    for column in columns:
        items, column_boxes = place_column(column, frame)
        notes.extend(items)
        boxes.extend(column_boxes)
    lines = plan_capacity_lines(spec, frame, line_end, boxes + tags)

    items = shapes + lines + plan_axis(spec, frame) + inside + notes
    bottom = labels_bottom
    if spec.example:
        example, bottom = plan_example(spec, width, labels_bottom + 14)
        items.extend(example)
    return Drawing(width, math.ceil(bottom + MARGIN), tuple(items))
