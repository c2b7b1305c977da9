"""Annotations: what the notes beside a bar say, where they go (spread so they never overlap, on leader lines),
labels inside segments where they fit, callouts and chips under a bar in the rows layout, GPU capacity labels, and
the text summary a chart's <desc> falls back on."""

from __future__ import annotations

from dataclasses import dataclass, field

from builder.catalog import Gpu
from builder.charts.drawing import (FONT_SIZE, INSIDE_PAD, LANE, CHANNEL, CHIP_GAP, LEADER_RUN, LINE_HEIGHT,
                                    MIN_PLOT_HEIGHT, NOTE_GAP, ONE_LINE_WIDTH, PLOT_TOP, SMALL_SIZE, SWATCH,
                                    SWATCH_GAP, TAG_PAD, Box, Rect, Strokes, Words)
from builder.charts.format import format_amount, format_both
from builder.charts.layout import Frame
from builder.charts.segments import Segment, collect_segments, describe_segment, find_overflow
from builder.charts.spec import ChartSpec
from builder.charts.text import measure_text, width_of, wrap_text


@dataclass(frozen=True)
class Note:
    """A label to place beside a bar or line: where it points and its lines of text."""

    anchor: float  # y it points at
    lines: tuple[Words, ...]  # text, class and font; their x and y are set when the note is placed
    swatch: str = ""  # fill classes of the colour square, '' for none
    center: float = 0.0  # y of its middle once placed

    @property
    def height(self) -> float:
        """Vertical space the note takes."""
        return len(self.lines) * LINE_HEIGHT


@dataclass
class Column:
    """Notes beside one bar (or beside the capacity lines) and where they start."""

    leader_x: float  # where leader lines start (a bar's right edge, or where lines end)
    notes: list[Note] = field(default_factory=list)

    @property
    def text_x(self) -> float:
        """x where note text starts."""
        return self.leader_x + LEADER_RUN + SWATCH + SWATCH_GAP


def spread_notes(notes: list[Note], low: float, high: float) -> list[Note]:
    """Place notes as near their anchors as possible, in anchor order, never overlapping."""
    ordered = sorted(notes, key=lambda note: note.anchor)
    blocks: list[list[Note]] = []  # runs of notes that touch; each is placed as one
    tops: list[float] = []
    for note in ordered:
        blocks.append([note])
        tops.append(place_block([note], low, high))
        while len(blocks) > 1 and tops[-2] + height_of_block(blocks[-2]) + NOTE_GAP > tops[-1]:
            merged = blocks[-2] + blocks[-1]
            blocks[-2:] = [merged]
            tops[-2:] = [place_block(merged, low, high)]
    placed = []
    for block, top in zip(blocks, tops):
        for note in block:
            placed.append(Note(note.anchor, note.lines, note.swatch, top + note.height / 2))
            top += note.height + NOTE_GAP
    return placed


def height_of_block(block: list[Note]) -> float:
    """Height of notes stacked with gaps."""
    return sum(note.height for note in block) + NOTE_GAP * (len(block) - 1)


def place_block(block: list[Note], low: float, high: float) -> float:
    """Top of a block of notes: the mean of its members' ideal tops, kept within [low, high]."""
    offsets, ideal = 0.0, []
    for note in block:
        ideal.append(note.anchor - note.height / 2 - offsets)
        offsets += note.height + NOTE_GAP
    top = sum(ideal) / len(ideal)
    return max(low, min(top, high - height_of_block(block)))


def note_words(text: str, css: str, bold: bool = False, size: float = FONT_SIZE) -> Words:
    """A line of note text; its position is filled in when the note is placed."""
    return Words(0.0, 0.0, text, css, size=size, bold=bold)


def give_full_notes(spec: ChartSpec, index: int) -> bool:
    """Whether bar `index` gets full notes (name, amount, rule) or amounts only."""
    mode = spec.notes if spec.notes != "auto" else ("full" if len(spec.bars) <= 2 else "last")
    return mode == "full" or index == len(spec.bars) - 1


def write_notes(spec: ChartSpec, index: int, stack: list[Segment], overflow: list[Gpu]) -> list[tuple[Words, ...]]:
    """The lines of each note beside bar `index`: one per segment, then the peak of a step where it is not the sum
    of parts, then the DOESN'T FIT note (which compares the need, not the sum, with each GPU).

    Full notes read 'Weights 13.0 GiB · 2 B/param'; when that is too wide and the column has
    room, the rule moves to a second, smaller line (as in the reference diagram)."""
    bar = spec.bars[index]
    need = bar.needed
    peak = [(note_words(f"peak of a step {format_both(need, spec.unit, spec.also_unit)}", "tm-text tm-note tm-peak-note", bold=True),)
            ] if bar.peak_differs else []
    if not give_full_notes(spec, index):
        notes = [(note_words(format_both(s.bytes, spec.unit, spec.also_unit), "tm-text tm-note"),) for s in stack] + peak
        if overflow:  # narrow: the marker on a line of its own, then the GPUs
            notes.append((note_words("DOESN'T FIT", "tm-warning tm-note", bold=True),)
                         + tuple(note_words(gpu.display, "tm-warning tm-note") for gpu in overflow))
        return notes
    notes = [(note_words(describe_segment(s, spec.unit, spec.also_unit), "tm-text tm-note"),) for s in stack]
    two_lines = (2 * len(stack) + 2 * len(overflow)) * LINE_HEIGHT + (len(stack) + 1) * NOTE_GAP <= MIN_PLOT_HEIGHT
    if not (two_lines and max((width_of(n[0]) for n in notes), default=0) > ONE_LINE_WIDTH):
        notes += peak
        if overflow:
            notes.append(tuple(note_words(f"DOESN'T FIT {gpu.display} (+{format_amount(need - gpu.usable_bytes, spec.unit)})",
                                          "tm-warning tm-note", bold=True) for gpu in overflow))
        return notes
    notes = []
    for segment in stack:
        head = note_words(f"{segment.name} {format_both(segment.bytes, spec.unit, spec.also_unit)}", "tm-text tm-note")
        rule = note_words(segment.rule, "tm-text-dim tm-note", size=SMALL_SIZE)
        notes.append((head, rule) if segment.rule else (head,))
    notes += peak
    for gpu in overflow:
        over = format_amount(need - gpu.usable_bytes, spec.unit)
        notes.append((note_words(f"DOESN'T FIT {gpu.display}", "tm-warning tm-note", bold=True),
                      note_words(f"+{over} over its usable memory", "tm-warning tm-note", size=SMALL_SIZE)))
    return notes


def inside_lines(spec: ChartSpec, index: int, segment: Segment, layout: str) -> tuple[str, ...]:
    """What a label inside a segment says: everything its note would say, stacked as name / amount / rule in the
    columns layout, on one line in the rows layout (a bar there is one line tall)."""
    amount = format_both(segment.bytes, spec.unit, spec.also_unit)
    if not give_full_notes(spec, index):
        return (amount,) if layout == "columns" else (f"{segment.name} {amount}",)
    if layout == "rows":
        return (describe_segment(segment, spec.unit, spec.also_unit),)
    return (segment.name, amount) + ((segment.rule,) if segment.rule else ())


def fits_inside(lines: tuple[str, ...], width: float, height: float, size: float = FONT_SIZE) -> bool:
    """Whether `lines`, on their tag, fit inside a segment `width` x `height` units: the label-placement rule. The
    text is measured (measure_text), not guessed from its length."""
    if not lines:
        return False
    widest = max(measure_text(line, size) for line in lines)
    return (widest + 2 * (TAG_PAD + INSIDE_PAD) <= width
            and len(lines) * LINE_HEIGHT + 2 * INSIDE_PAD <= height)


def inside_label(lines: tuple[str, ...], box: Rect) -> tuple[list[Box | Strokes | Words], Rect]:
    """A label centred in the segment `box` (x0, top, x1, bottom): a tag of background colour, so the text keeps
    its contrast whatever the segment's colour, and the lines on it. Returns the items and the tag's box."""
    x0, top, x1, bottom = box
    widest = max(measure_text(line, FONT_SIZE) for line in lines)
    middle_x, middle_y = (x0 + x1) / 2, (top + bottom) / 2
    height = len(lines) * LINE_HEIGHT
    tag = (round(middle_x - widest / 2 - TAG_PAD, 2), round(middle_y - height / 2, 2),
           round(middle_x + widest / 2 + TAG_PAD, 2), round(middle_y + height / 2, 2))
    items: list[Box | Strokes | Words] = [Box(tag[0], tag[1], round(tag[2] - tag[0], 2), height, "tm-label-tag",
                                              rounded=True)]
    for number, line in enumerate(lines):
        baseline = round(tag[1] + number * LINE_HEIGHT + LINE_HEIGHT / 2 + 0.35 * FONT_SIZE, 2)
        items.append(Words(round(middle_x, 2), baseline, line, "tm-text tm-inside", anchor="middle"))
    return items, tag


def place_column(column: Column, frame: Frame) -> tuple[list[Box | Strokes | Words], list[Rect]]:
    """Spread a column's notes, draw leaders to their anchors; returns items and note boxes."""
    if not column.notes:
        return [], []
    placed = spread_notes(column.notes, PLOT_TOP - 6, frame.plot_bottom + 6)
    x = column.leader_x
    leaders = tuple(((x + 1, note.anchor), (x + 7, note.anchor), (x + LEADER_RUN - 6, note.center),
                     (x + LEADER_RUN - 1, note.center)) for note in placed)
    items: list[Box | Strokes | Words] = [Strokes(leaders, "tm-leader", 0.8)]
    boxes = []
    for note in placed:
        top = note.center - note.height / 2
        if note.swatch:
            items.append(Box(x + LEADER_RUN, round(note.center - SWATCH / 2, 2), SWATCH, SWATCH, note.swatch))
        for line_index, words in enumerate(note.lines):
            baseline = round(top + line_index * LINE_HEIGHT + LINE_HEIGHT / 2 + 0.35 * FONT_SIZE, 2)
            items.append(Words(column.text_x, baseline, words.text, words.css, words.size, words.bold))
        width = max(width_of(w) for w in note.lines)
        boxes.append((x + LEADER_RUN, top, column.text_x + width, top + note.height))
    return items, boxes


def plan_capacity_notes(spec: ChartSpec, frame: Frame, line_end: float) -> Column:
    """Labels for the GPU capacity lines, in a column where the lines end."""
    column = Column(leader_x=line_end)
    for gpu in sorted(spec.gpus, key=lambda g: (g.usable_bytes, g.display)):
        column.notes.append(Note(frame.y_of(gpu.usable_bytes), (
            note_words(gpu.display, "tm-text tm-capacity-label", bold=True, size=SMALL_SIZE),
            note_words(f"{format_amount(gpu.usable_bytes, spec.unit)} usable", "tm-text-dim tm-capacity-label",
                       size=SMALL_SIZE),
        )))
    return column


@dataclass(frozen=True)
class Chip:
    """A note under a bar in the rows layout: an optional colour square, then text."""

    text: str
    css: str
    swatch: str = ""
    bold: bool = False


def row_chips(spec: ChartSpec, index: int, overflow: list[Gpu]) -> list[list[Chip]]:
    """What is written under bar `index` after its segments' labels, as runs of chips: each run starts on a new
    line. The peak of a step where it is not the sum of parts, then what does not fit."""
    bar = spec.bars[index]
    runs = []
    if bar.peak_differs:
        runs.append([Chip(f"peak of a step {format_both(bar.needed, spec.unit, spec.also_unit)}",
                          "tm-text tm-note tm-peak-note", bold=True)])
    runs += [[Chip(f"DOESN'T FIT {gpu.display}", "tm-warning tm-note", bold=True),
              Chip(f"+{format_amount(bar.needed - gpu.usable_bytes, spec.unit)} over", "tm-warning tm-note")]
             for gpu in overflow]
    return runs


@dataclass(frozen=True)
class Callout:
    """A note under a horizontal bar, on a leader line from the point `anchor` (an x) of the bar it labels."""

    anchor: float
    text: str
    css: str
    swatch: str = ""  # fill classes of the colour square, '' for none


def wrap_note(text: str, width: float) -> list[str]:
    """A note's text in lines no wider than `width`: whole if it fits, else broken first where ' · ' separates
    its pieces (name and amount, then the rule), so that '8 B/param' is never split."""
    if measure_text(text, FONT_SIZE) <= width:
        return [text]
    return [line for piece in text.split(" · ") for line in wrap_text(piece, width, FONT_SIZE)]


def stack_callouts(callouts: list[Callout], left: float, right: float, bar_bottom: float,
                   top: float) -> tuple[list[Box | Strokes | Words], float]:
    """Callouts under a horizontal bar, one under another from `top`, between `left` and `right`, each on a leader
    line from its anchor on the bar's bottom edge (`bar_bottom`): down into a channel of its own under the bar, left
    to a lane of its own at the left edge, down to its callout and into it. The callout of the rightmost anchor goes
    on top, with the deepest channel and the innermost lane; so no leader crosses another, none passes a callout
    but its own, and every callout may use the whole width. Returns the items and the bottom."""
    ordered = sorted(callouts, key=lambda c: -c.anchor)
    count = len(ordered)
    text_left = left + (count - 1) * LANE + 6
    y = max(top, bar_bottom + 2 + count * CHANNEL + 2)
    items: list[Box | Strokes | Words] = []
    leaders = []
    for number, callout in enumerate(ordered):
        lead = SWATCH + SWATCH_GAP if callout.swatch else 0
        lines = wrap_note(callout.text, right - text_left - lead)
        middle = round(y + LINE_HEIGHT / 2, 2)
        lane = left + (count - 1 - number) * LANE
        channel = round(bar_bottom + 2 + (count - number) * CHANNEL, 2)
        anchor = round(callout.anchor, 2)
        leaders.append(((anchor, round(bar_bottom + 1, 2)), (anchor, channel), (lane, channel), (lane, middle),
                        (round(text_left - 2, 2), middle)))
        if callout.swatch:
            items.append(Box(round(text_left, 2), round(middle - SWATCH / 2, 2), SWATCH, SWATCH, callout.swatch))
        for index, line in enumerate(lines):
            baseline = round(y + index * LINE_HEIGHT + LINE_HEIGHT / 2 + 0.35 * FONT_SIZE, 2)
            items.append(Words(round(text_left + lead, 2), baseline, line, callout.css))
        y += LINE_HEIGHT * len(lines) + NOTE_GAP
    items.insert(0, Strokes(tuple(leaders), "tm-leader", 0.8))
    return items, y - NOTE_GAP


def flow_chips(runs: list[list[Chip]], left: float, right: float, top: float) -> tuple[list[Box | Words], float]:
    """Lay chips out in lines from `top` between `left` and `right`; returns the items and the bottom."""
    items: list[Box | Words] = []
    y = top
    for run in runs:
        x = left
        for chip in run:
            lead = SWATCH + SWATCH_GAP if chip.swatch else 0
            lines = wrap_text(chip.text, right - left - lead, FONT_SIZE, chip.bold)
            width = lead + max(measure_text(line, FONT_SIZE, chip.bold) for line in lines)
            if x > left and (len(lines) > 1 or x + width > right):
                x, y = left, y + LINE_HEIGHT
            baseline = round(y + LINE_HEIGHT / 2 + 0.35 * FONT_SIZE, 2)
            if chip.swatch:
                items.append(Box(x, round(y + (LINE_HEIGHT - SWATCH) / 2, 2), SWATCH, SWATCH, chip.swatch))
            for number, line in enumerate(lines):
                items.append(Words(round(x + lead, 2), round(baseline + number * LINE_HEIGHT, 2), line, chip.css,
                                   FONT_SIZE, chip.bold))
            y += LINE_HEIGHT * (len(lines) - 1)
            x += width + CHIP_GAP
        y += LINE_HEIGHT
    return items, y


def describe_chart(spec: ChartSpec) -> str:
    """A text summary of every bar's segments, used when the spec gives no description."""
    sentences = []
    for bar in spec.bars:
        pieces = ", ".join(describe_segment(s, spec.unit, spec.also_unit) for s in collect_segments(bar, spec))
        sentences.append(f"{bar.label}: {pieces}; sum of parts {format_both(bar.breakdown.total, spec.unit, spec.also_unit)}.")
        if bar.peak_differs:
            sentences.append(f"{bar.label}: peak of a step {format_amount(bar.needed, spec.unit)}.")
        for gpu in find_overflow(bar.needed, spec.gpus):
            over = format_amount(bar.needed - gpu.usable_bytes, spec.unit)
            sentences.append(f"{bar.label} DOESN'T FIT {gpu.display} ({over} over).")
    for gpu in spec.gpus:
        sentences.append(f"{gpu.display}: {format_amount(gpu.usable_bytes, spec.unit)} usable.")
    return " ".join(sentences)
