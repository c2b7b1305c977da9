"""Annotated SVG breakdown charts rendered with matplotlib at build time.

Interface shared by the page renderer (builder/render.py) and this module: a ChartSpec goes
in, SVG markup comes out. The chart draws only the Breakdown it is given; every number on it
is formatted from those bytes.

How a chart is made, in the manner of m.css (plugins/m/plots.py):
1. plan_drawing lays everything out in SVG units (points, y pointing down): stacked bars
   to scale, leader-line notes spread so they never overlap, dashed GPU capacity lines,
   hatched overflow, a worked-example box. It is pure Python.
2. draw_svg hands the plan to matplotlib (Agg, svg.fonttype 'none' so text stays text, a
   fixed svg.hashsalt, no date metadata), with a placeholder colour for each CSS class.
3. finish_svg rewrites matplotlib's SVG: placeholder colours become classes (see
   static/charts.css), inline styles become presentation attributes (no style="" and no
   <style>, so a strict Content-Security-Policy holds), ids are dropped or prefixed with
   spec.chart_id, and <title>/<desc> plus a <title> per bar segment are added. Each class's
   light-theme colours are then written in as presentation attributes too (paint_svg, from
   static/charts.css through builder/palette.py), so the SVG carries its own colours and font;
   standalone_svg makes the light and dark files a reader downloads.
"""

from __future__ import annotations

import io
import math
import re
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field, replace
from functools import lru_cache

from builder.catalog import Gpu
from builder.model.breakdown import BUCKETS, Breakdown, Part
from builder.model.partnames import reader_name
from builder.model.units import GB, GiB, MiB, format_bytes
from builder.palette import THEMES, load_stylesheet


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

# What a reader sees for each bucket (first path segment of a part name).

# Layout, in SVG units (1 unit = 1 pt = 1 px at 100 % zoom).
FONT_SIZE = 12  # notes, bar labels, example text: 12 px is the smallest text a chart shows
SMALL_SIZE = 12  # ticks, axis title, capacity labels, bar totals (same floor; dimmer colour instead)
LINE_HEIGHT = 16  # one note line
NOTE_GAP = 2  # vertical space between two notes
MARGIN = 8  # around the whole chart
PLOT_TOP = 14  # y of the top of the value axis
MIN_PLOT_HEIGHT = 230  # the value axis is at least this tall; taller when notes need it
BAR_WIDTH = 48
BAR_GAP = 16  # space between the axis and the first bar
LEADER_RUN = 20  # from a bar's right edge to its notes' swatches
ONE_LINE_WIDTH = 230  # notes wider than this on one line move their rule to a second line
SWATCH = 8  # side of the colour square in front of a note
SWATCH_GAP = 4
COLUMN_GAP = 18  # between one bar's notes and the next bar
HATCH_SPACING = 6
EXAMPLE_PADDING = 8
EXAMPLE_LINE = 16
MIN_WIDTH = 420
# A chart of one bar draws it wide and tall, as seed 003's reference diagram does, so its labels fit inside.
SINGLE_BAR_WIDTH = 150
SINGLE_PLOT_HEIGHT = 320
INSIDE_PAD = 2  # least space between a segment's edge and the tag behind a label inside it
TAG_PAD = 4  # between a tag's side and its text
ASIDE_SIZE = 26  # the dashed box of a part the chart does not quantify (ChartSpec.aside), along the bar
ASIDE_WIDTH = 210  # its note wraps at this width in the columns layout

SVG_NAMESPACE = "http://www.w3.org/2000/svg"
HASH_SALT = "training-memory-explained"


# --- Plan: pure geometry -------------------------------------------------------------------


Rect = tuple[float, float, float, float]  # x0, top, x1, bottom


@dataclass(frozen=True)
class Box:
    """A rectangle; fill and stroke are CSS class lists ('' for none)."""

    x: float
    y: float
    width: float
    height: float
    fill: str
    stroke: str = ""
    line_width: float = 0.0
    gid: str = ""  # id of the group around it (segments), without the chart prefix
    tooltip: str = ""  # becomes a <title> inside that group
    rounded: bool = False


@dataclass(frozen=True)
class Strokes:
    """One or more polylines drawn with one CSS stroke class."""

    lines: tuple[tuple[tuple[float, float], ...], ...]
    stroke: str
    line_width: float = 0.8
    dashed: bool = False


@dataclass(frozen=True)
class Words:
    """One line of text at a baseline; `css` is its class list."""

    x: float
    y: float
    text: str
    css: str
    size: float = FONT_SIZE
    bold: bool = False
    anchor: str = "start"  # 'start', 'middle' or 'end'
    vertical: bool = False  # rotated 90° counter-clockwise, centred on (x, y)


@dataclass(frozen=True)
class Drawing:
    """A planned chart: its size and what to draw, bottom layer first."""

    width: float
    height: float
    items: tuple[Box | Strokes | Words, ...]


@dataclass(frozen=True)
class Segment:
    """One slice of a stacked bar: a bucket or a part, with what its note says."""

    key: str  # bucket or part name
    name: str  # shown to the reader
    bytes: int
    rule: str  # bytes-per-unit rule, e.g. '2 B/param'
    css: str  # fill classes
    detail: tuple[str, ...] = ()  # extra tooltip lines (the parts of a bucket)


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


def format_amount(n_bytes: float, unit: str) -> str:
    """Bytes with the unit, digits as in the data tables (builder/grids.py): one decimal, two
    below 1, and more when two would print a non-zero amount as 0.00."""
    value = n_bytes / UNIT_BYTES[unit]
    if 0 < abs(value) < 0.00005:
        return f"<{format_bytes(0.0001 * UNIT_BYTES[unit], unit, 4)}"
    digits = 1 if abs(value) >= 1 or value == 0 else 2
    while digits < 4 and value and round(abs(value), digits) == 0:
        digits += 1
    return format_bytes(n_bytes, unit, digits)


def format_both(n_bytes: float, unit: str, also: str = "") -> str:
    """An amount in `unit`, then in `also` in brackets when that is another unit: '112.0 GB (104.3 GiB)'."""
    text = format_amount(n_bytes, unit)
    return f"{text} ({format_amount(n_bytes, also)})" if also and also != unit else text


RULE = re.compile(r"(\d+(?:\.\d+)?) ?(B|KiB|MiB|GiB)/(\w+)(?: ?\(.*\))?")  # '4 B/param (fp32 master copy)'
RULE_BYTES = {"B": 1, "KiB": 2**10, "MiB": MiB, "GiB": GiB}
MAX_RULE = 40  # characters of a rule shown in a note; the tooltip and the data table give it whole


def combine_rules(rules: list[str]) -> str:
    """One short bytes-per-unit rule for a bucket: '4 B/param (fp32 m)' + '4 B/param (fp32 v)' -> '8 B/param';
    rules per token add up likewise; a rule that cannot be added shows as '…'."""
    present = [rule.strip() for rule in rules if rule.strip()]
    if len(present) <= 1:
        return shorten_rule(present[0]) if present else ""
    sums: dict[str, float] = {}
    leftover = False
    for rule in present:
        match = RULE.fullmatch(rule)
        if match:
            per = match.group(3)
            sums[per] = sums.get(per, 0.0) + float(match.group(1)) * RULE_BYTES[match.group(2)]
        else:
            leftover = True
    pieces = [format_rule(amount, per) for per, amount in sums.items()] or [shorten_rule(present[0])]
    return " + ".join(pieces + ["…"] * leftover)


def format_rule(n_bytes: float, per: str) -> str:
    """'12 B/param', '48.0 KiB/token'."""
    if n_bytes < 2**10:
        return f"{n_bytes:g} B/{per}"
    if n_bytes < MiB:
        return f"{n_bytes / 2**10:.1f} KiB/{per}"
    return f"{n_bytes / MiB:.1f} MiB/{per}"


def shorten_rule(rule: str) -> str:
    """A rule cut at a word to at most MAX_RULE characters, with '…' when cut."""
    if len(rule) <= MAX_RULE:
        return rule
    cut = rule[: MAX_RULE - 1].rsplit(" ", 1)[0].rstrip(" +(,;")
    return cut + "…"


def name_bucket(bucket: str, spec: ChartSpec) -> str:
    """Reader-facing name of a bucket (or of any part key): the chart's override, else builder.model.partnames'."""
    overrides = dict(spec.display_names)
    return overrides[bucket] if bucket in overrides else reader_name(bucket)


def name_part(part: Part, spec: ChartSpec) -> str:
    """Reader-facing name of a part, from builder.model.partnames: 'Adam first moment' for 'optimizer/adam_m'."""
    overrides = dict(spec.display_names)
    if part.name in overrides:
        return overrides[part.name]
    return reader_name(part.name)


def class_bucket(bucket: str) -> str:
    """CSS class of a bucket's fill: 'tm-bucket-kv-cache' for 'kv_cache'."""
    known = bucket if bucket in BUCKETS else "other"
    return "tm-bucket-" + known.replace("_", "-")


def order_parts(breakdown: Breakdown) -> list[Part]:
    """Parts in stacking order: by bucket as Breakdown.buckets() orders them, then as given."""
    rank = {bucket: index for index, bucket in enumerate(breakdown.buckets())}
    return sorted((p for p in breakdown.parts if p.bytes > 0), key=lambda p: rank[p.bucket])


def collect_segments(bar: ChartBar, spec: ChartSpec) -> list[Segment]:
    """The slices of one bar, bottom first, grouped by bucket or one per part."""
    parts = order_parts(bar.breakdown)
    if spec.group_by == "part":
        segments = []
        shade: dict[str, int] = {}
        for part in parts:
            index = shade.get(part.bucket, 0)
            shade[part.bucket] = index + 1
            css = f"{class_bucket(part.bucket)} tm-shade-{index % 3}"
            detail = (f"{name_part(part, spec)}: {part.per_unit}",) if len(part.per_unit) > MAX_RULE else ()
            segments.append(Segment(part.name, name_part(part, spec), part.bytes, shorten_rule(part.per_unit), css, detail))
        return segments
    segments = []
    for bucket in dict.fromkeys(p.bucket for p in parts):
        members = [p for p in parts if p.bucket == bucket]
        detail = tuple(f"{name_part(p, spec)}: {format_amount(p.bytes, spec.unit)}" + (f" · {p.per_unit}" if p.per_unit else "")
                       for p in members) if len(members) > 1 else ()
        amount = sum(p.bytes for p in members)
        rule = combine_rules([p.per_unit for p in members])
        segments.append(Segment(bucket, name_bucket(bucket, spec), amount, rule, class_bucket(bucket), detail))
    return segments


@lru_cache(maxsize=4096)
def measure_text(text: str, size: float, bold: bool = False) -> float:
    """Width of `text` in SVG units in matplotlib's DejaVu Sans (a wide font): the sum of glyph
    advances. Kerning is ignored, which errs wide by well under 1%: safe for layout."""
    advance = glyph_advances(bold)
    return sum(advance(ch) for ch in text) * size / 100


@lru_cache(maxsize=2)
def glyph_advances(bold: bool):
    """A cached function: advance width of one character at 100 pt (laying out whole strings
    with ft2font.set_text costs about a millisecond each; glyphs are looked up once)."""
    from matplotlib import font_manager
    from matplotlib.ft2font import LoadFlags

    properties = font_manager.FontProperties(family="DejaVu Sans", weight="bold" if bold else "normal")
    font = font_manager.get_font(font_manager.findfont(properties))
    font.set_size(100, 72)

    @lru_cache(maxsize=None)
    def advance(character: str) -> float:
        return font.load_char(ord(character), flags=LoadFlags.NO_HINTING).linearHoriAdvance / 65536

    return advance


def width_of(words: Words) -> float:
    """Width of one line of text."""
    return measure_text(words.text, words.size, words.bold)


def choose_ticks(top: float) -> tuple[float, list[float]]:
    """A round axis maximum at or above `top` (in display units) and about five ticks up to it."""
    if top <= 0:
        return 1.0, [0.0, 1.0]
    rough = top / 5
    magnitude = 10 ** math.floor(math.log10(rough))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= rough * (1 - 1e-9))
    count = math.ceil(top / step - 1e-9)
    return count * step, [round(i * step, 10) for i in range(count + 1)]


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


HALO = 2.4  # how much wider than its line the background band under a hatch or capacity line is


def with_halo(strokes: Strokes) -> list[Strokes]:
    """`strokes` on a solid band of background colour (class tm-halo), so the line keeps its contrast with the
    background whatever part lies behind it (WCAG non-text contrast, tests/test_palette.py)."""
    return [Strokes(strokes.lines, "tm-halo", round(strokes.line_width + HALO, 2)), strokes]


def note_words(text: str, css: str, bold: bool = False, size: float = FONT_SIZE) -> Words:
    """A line of note text; its position is filled in when the note is placed."""
    return Words(0.0, 0.0, text, css, size=size, bold=bold)


def describe_segment(segment: Segment, unit: str, also: str = "") -> str:
    """The note beside a segment: 'Weights 13.0 GiB · 2 B/param' (with `also`: 'Weights 28.0 GB (26.1 GiB) · ...')."""
    text = f"{segment.name} {format_both(segment.bytes, unit, also)}"
    return f"{text} · {segment.rule}" if segment.rule else text


def find_overflow(total: int, gpus: tuple[Gpu, ...]) -> list[Gpu]:
    """GPUs whose usable memory `total` exceeds, smallest first."""
    return sorted((gpu for gpu in gpus if total > gpu.usable_bytes), key=lambda gpu: (gpu.usable_bytes, gpu.display))


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


# --- Label placement: inside a segment where the label fits, else on a leader line ------------------------------


def bar_width_of(spec: ChartSpec) -> float:
    """Width of a bar in the columns layout: wide for a chart of one bar, so that its labels can sit inside it."""
    return SINGLE_BAR_WIDTH if len(spec.bars) == 1 else BAR_WIDTH


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


def dashed_box(x0: float, top: float, x1: float, bottom: float) -> Strokes:
    """The outline of a part the chart does not quantify (ChartSpec.aside): dashed, open to nothing."""
    corners = ((x0, top), (x1, top), (x1, bottom), (x0, bottom), (x0, top))
    return Strokes((tuple((round(x, 2), round(y, 2)) for x, y in corners),), "tm-aside", 1.0, dashed=True)


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
        items.append(Box(x, top_y, width, bottom_y - top_y, segment.css, "tm-segment", 0.5, gid, tooltip))
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


# --- Rows: one bar per row, for a column narrower than the column layout --------------------

# Widths a chart is laid out for, in SVG units (= CSS px at natural size). WIDE fits the text column from a
# 768 px viewport up (static/site.css: 48rem, less 2 x 2rem padding); NARROW fits a 320 px phone (1rem padding)
# and is scaled up, never down, on wider phones, so its 12-unit text never renders below 12 px.
WIDE_WIDTH = 700
NARROW_WIDTH = 288
ROW_BAR_HEIGHT = 22
CHIP_GAP = 14  # between two notes on one line under a bar
ROW_GAP = 14  # between one bar's notes and the next bar's label


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


LANE = 4  # between two callouts' leader lines where they run down the left edge
CHANNEL = 4  # between two callouts' leader lines where they run along under the bar


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
            shapes.append(Box(x0, y, round(x1 - x0, 2), ROW_BAR_HEIGHT, segment.css, "tm-segment", 0.5,
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


def wrap_text(text: str, width: float, size: float, bold: bool = False) -> list[str]:
    """Split `text` into lines no wider than `width` (explicit newlines are kept)."""
    lines: list[str] = []
    for paragraph in text.splitlines() or [""]:
        current = ""
        for word in paragraph.split():
            candidate = f"{current} {word}" if current else word
            if current and measure_text(candidate, size, bold) > width:
                lines.append(current)
                current = word
            else:
                current = candidate
        lines.append(current)
    return lines


# --- Draw: matplotlib -----------------------------------------------------------------------


class Palette:
    """Placeholder colours standing for CSS class lists, swapped back after rendering."""

    def __init__(self) -> None:
        self.classes: dict[str, str] = {}  # '#c0xxxx' -> class list

    def colour(self, css: str) -> str:
        """The placeholder colour for a class list ('none' for '')."""
        if not css:
            return "none"
        for placeholder, known in self.classes.items():
            if known == css:
                return placeholder
        placeholder = f"#c0{len(self.classes) + 1:04x}"
        self.classes[placeholder] = css
        return placeholder


@lru_cache(maxsize=1)
def load_matplotlib():
    """Import matplotlib once, on the first chart (the import is the slow part)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import artist, figure, patches, path, transforms
    from matplotlib.font_manager import FontProperties

    class TextLine(artist.Artist):
        """One line of text drawn straight through the renderer: no layout, no measuring."""

        def __init__(self, words: Words, colour: str, flip) -> None:
            super().__init__()
            self.set_zorder(3)  # above every shape, as in the plan
            self.words, self.colour, self.flip = words, colour, flip
            self.font = FontProperties(family="DejaVu Sans", size=words.size, weight="bold" if words.bold else "normal")

        def draw(self, renderer) -> None:
            """Write the text; finish_svg sets its position and anchor from the plan."""
            context = renderer.new_gc()
            context.set_foreground(self.colour)
            x, y = self.flip.transform((self.words.x, self.words.y))
            renderer.draw_text(context, x, y, self.words.text, self.font, 90 if self.words.vertical else 0)
            context.restore()

    return matplotlib, figure, patches, path, transforms, TextLine


RC_PARAMS = {
    "svg.fonttype": "none",  # text stays text
    "svg.hashsalt": HASH_SALT,  # deterministic ids (we rename them anyway)
    "path.simplify": False,
}


def draw_svg(drawing: Drawing, palette: Palette) -> str:
    """matplotlib's SVG for `drawing`, with placeholder colours from `palette`."""
    matplotlib, figure_module, patches, path, transforms, TextLine = load_matplotlib()
    with matplotlib.rc_context(RC_PARAMS):
        figure = figure_module.Figure(figsize=(drawing.width / 72, drawing.height / 72), dpi=72)
        figure.patch.set_visible(False)
        flip = transforms.Affine2D().scale(1, -1).translate(0, drawing.height)  # plan y points down
        for item in drawing.items:
            if isinstance(item, Box):
                figure.add_artist(make_box_patch(item, palette, flip, patches))
            elif isinstance(item, Strokes) and item.lines:
                figure.add_artist(make_strokes_patch(item, palette, flip, patches, path.Path))
            elif isinstance(item, Words):
                figure.add_artist(TextLine(item, palette.colour(item.css), flip))
        buffer = io.StringIO()
        figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    return buffer.getvalue()


def make_box_patch(box: Box, palette: Palette, flip, patches):
    """A matplotlib rectangle (rounded for the example box) for a planned Box."""
    options = dict(facecolor=palette.colour(box.fill), edgecolor=palette.colour(box.stroke), linewidth=box.line_width,
                   gid=box.gid or None, transform=flip, joinstyle="miter")
    if box.rounded:
        return patches.FancyBboxPatch((box.x, box.y), box.width, box.height, boxstyle="round,pad=0,rounding_size=5",
                                      **options)
    return patches.Rectangle((box.x, box.y), box.width, box.height, **options)


def make_strokes_patch(strokes: Strokes, palette: Palette, flip, patches, Path):
    """One matplotlib path holding all the polylines of a planned Strokes."""
    vertices, codes = [], []
    for line in strokes.lines:
        vertices.extend(line)
        codes.extend([Path.MOVETO] + [Path.LINETO] * (len(line) - 1))
    return patches.PathPatch(Path(vertices, codes), facecolor="none", edgecolor=palette.colour(strokes.stroke),
                             linewidth=strokes.line_width, capstyle="butt", joinstyle="round",
                             linestyle=(0, (4, 3)) if strokes.dashed else "solid", transform=flip)


# --- Finish: classes, ids, accessibility ----------------------------------------------------

PRESENTATION = {
    "fill", "stroke", "stroke-width", "stroke-dasharray", "stroke-dashoffset", "stroke-linecap",
    "stroke-linejoin", "stroke-opacity", "fill-opacity", "opacity", "font-size", "font-weight",
    "text-anchor",
}

SVG_DEFAULTS = {("stroke-dashoffset", "0"), ("stroke-linejoin", "miter"), ("stroke-linecap", "butt")}


def restyle_element(element: ElementTree.Element, palette: Palette) -> None:
    """Turn a style attribute into classes (placeholder colours) and presentation attributes."""
    style = element.attrib.pop("style", None)
    if style is None:
        return
    classes: list[str] = []
    for declaration in style.split(";"):
        prop, _, value = (s.strip() for s in declaration.partition(":"))
        if not prop:
            continue
        if value in palette.classes:
            classes.extend(palette.classes[value].split())
        elif prop in PRESENTATION and (prop, value) not in SVG_DEFAULTS:
            element.set(prop, value.removesuffix("px") if prop == "font-size" else value)
    if classes:
        element.set("class", " ".join(dict.fromkeys(classes)))


def compact_path(data: str) -> str:
    """Shorten matplotlib path data: 'M 10.004 10 \\nL 60 10 \\nz' -> 'M10 10L60 10z'."""
    data = re.sub(r"-?\d+\.\d{3,}", lambda m: f"{float(m.group()):.2f}".rstrip("0").rstrip("."), " ".join(data.split()))
    return re.sub(r" ?([MLCQz]) ?", r"\1", data)


def unwrap_groups(parent: ElementTree.Element) -> None:
    """Replace every <g> without attributes by its children, depth first."""
    children = []
    for child in list(parent):
        unwrap_groups(child)
        if child.tag == f"{{{SVG_NAMESPACE}}}g" and not child.attrib:
            children.extend(list(child))
        else:
            children.append(child)
    parent[:] = children


def finish_svg(raw: str, spec: ChartSpec, drawing: Drawing, palette: Palette) -> str:
    """Rewrite matplotlib's SVG: classes for colours, prefixed ids, title/desc, no style."""
    ElementTree.register_namespace("", SVG_NAMESPACE)
    root = ElementTree.fromstring(raw)
    ns = f"{{{SVG_NAMESPACE}}}"
    tooltips = {item.gid: item.tooltip for item in drawing.items if isinstance(item, Box) and item.gid}
    for parent in list(root.iter()):
        for child in list(parent):
            if child.tag in (f"{ns}defs", f"{ns}metadata", f"{ns}style"):
                parent.remove(child)
    for element in root.iter():
        restyle_element(element, palette)
        gid = element.attrib.pop("id", None)
        if gid in tooltips:
            element.set("id", f"{spec.chart_id}-{gid}")
            title = ElementTree.Element(f"{ns}title")
            title.text = tooltips[gid]
            element.insert(0, title)
        if element.tag == f"{ns}path":
            element.set("d", compact_path(element.get("d", "")))
    for element in root.iter():
        element.text = element.text if element.text and element.text.strip() else None
        element.tail = None
    place_texts(root, [item for item in drawing.items if isinstance(item, Words)])
    unwrap_groups(root)
    body = list(root)
    root.attrib.clear()
    root.set("viewBox", f"0 0 {drawing.width} {drawing.height}")
    # Natural size: text renders at its designed size; the page lets wide charts break out
    # of the text column and scroll sideways inside their figure on narrow screens.
    root.set("width", f"{drawing.width:g}")
    root.set("height", f"{drawing.height:g}")
    root.set("class", "tm-chart")
    root.set("role", "img")
    root.set("aria-labelledby", f"{spec.chart_id}-title {spec.chart_id}-desc")
    title = ElementTree.Element(f"{ns}title", id=f"{spec.chart_id}-title")
    title.text = spec.title
    desc = ElementTree.Element(f"{ns}desc", id=f"{spec.chart_id}-desc")
    desc.text = spec.description or describe_chart(spec)
    background = ElementTree.Element(f"{ns}rect", {"class": "tm-background", "width": f"{drawing.width:g}",
                                                   "height": f"{drawing.height:g}"})
    root[:] = [title, desc, background] + body
    paint_svg(root, "light")
    for child in root:
        child.tail = "\n"
    root.text = "\n"
    return ElementTree.tostring(root, encoding="unicode")


def paint_svg(root: ElementTree.Element, theme: str) -> None:
    """Write the colours and font static/charts.css gives each element in `theme` as presentation attributes
    (builder/palette.py), so the SVG keeps them away from the page; on the page, the stylesheet wins over them."""
    sheet = load_stylesheet()
    root.set("font-family", sheet.font_family())
    for element in root.iter():
        classes = element.get("class", "").split()
        if classes and element is not root:
            for prop, value in sheet.resolve(classes, theme).items():
                element.set(prop, value)


def standalone_svg(svg: str, theme: str = "light") -> str:
    """A chart's markup as a file of its own: an XML declaration, and every colour that of `theme` ('light' or
    'dark'). Byte-identical for equal input."""
    if theme not in THEMES:
        raise ValueError(f"theme {theme!r} (use {' or '.join(THEMES)})")
    ElementTree.register_namespace("", SVG_NAMESPACE)
    root = ElementTree.fromstring(svg)
    paint_svg(root, theme)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(root, encoding="unicode") + "\n"


def place_texts(root: ElementTree.Element, words: list[Words]) -> None:
    """Give each <text> its position and anchor from the plan (matplotlib draws them in plan order)."""
    elements = list(root.iter(f"{{{SVG_NAMESPACE}}}text"))
    if len(elements) != len(words):
        raise RuntimeError(f"charts: matplotlib wrote {len(elements)} texts for {len(words)} planned")
    for element, item in zip(elements, words):
        element.attrib.pop("transform", None)
        element.set("x", f"{item.x:g}")
        element.set("y", f"{item.y:g}")
        if item.anchor != "start":
            element.set("text-anchor", item.anchor)
        if item.vertical:
            element.set("transform", f"rotate(-90 {item.x:g} {item.y:g})")
            element.set("dominant-baseline", "central")


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


def render_chart(spec: ChartSpec, layout: str = "columns", width: float = WIDE_WIDTH) -> str:
    """SVG markup (no XML declaration) for `spec`; byte-identical for equal specs. `layout` 'columns': bars side
    by side with notes beside them, at their natural width; 'rows': one bar per row, `width` units wide."""
    check_spec(spec)
    drawing = plan_drawing(spec) if layout == "columns" else plan_rows(spec, width)
    palette = Palette()
    return finish_svg(draw_svg(drawing, palette), spec, drawing, palette)


def render_figure(spec: ChartSpec) -> str:
    """What a page shows: the chart for a wide column (the columns layout when it fits WIDE_WIDTH, else rows at
    WIDE_WIDTH) and for a narrow one (rows at NARROW_WIDTH), switched by static/site.css at 48rem with no script.
    The narrow one's ids are prefixed '<chart_id>-narrow'."""
    wide = render_chart(spec)
    if float(parse_width(wide)) > WIDE_WIDTH:
        wide = render_chart(spec, "rows", WIDE_WIDTH)
    narrow = render_chart(replace(spec, chart_id=f"{spec.chart_id}-narrow"), "rows", NARROW_WIDTH)
    return (wide.replace('class="tm-chart"', 'class="tm-chart tm-chart-wide"', 1) + "\n"
            + narrow.replace('class="tm-chart"', 'class="tm-chart tm-chart-narrow"', 1))


def parse_width(svg: str) -> str:
    """The width attribute of a chart's root element."""
    return re.search(r'<svg[^>]* width="([0-9.]+)"', svg).group(1)
