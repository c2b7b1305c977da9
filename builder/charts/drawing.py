"""A planned chart: dimensions in SVG units (1 unit = 1 pt = 1 px at 100 % zoom, y pointing down) and the
primitives a plan is made of (Box, Strokes, Words in a Drawing). The layout modules fill a Drawing with every
coordinate, text and CSS class; builder/charts/svg.py writes it out as it is."""

from __future__ import annotations

from dataclasses import dataclass

# Layout, in SVG units.
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
# The line between two bar segments (their stroke, the background's colour): the page's stylesheet gives every
# segment this width (static/charts.css, `svg.tm-chart .tm-segment:not([stroke-width])`), so a page's chart writes it
# on none (svg.shape_element) and a file of its own writes it back (standalone.spell_out_segment_edges).
SEGMENT_EDGE = 0.5
HALO = 2.4  # how much wider than its line the background band under a hatch or capacity line is
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

# Rows layout. Widths a chart is laid out for, in SVG units (= CSS px at natural size). WIDE fits the text column
# from a 768 px viewport up (static/site.css: 48rem, less 2 x 2rem padding); NARROW fits a 320 px phone (1rem
# padding) and is scaled up, never down, on wider phones, so its 12-unit text never renders below 12 px.
WIDE_WIDTH = 700
NARROW_WIDTH = 288
ROW_BAR_HEIGHT = 22
CHIP_GAP = 14  # between two notes on one line under a bar
ROW_GAP = 14  # between one bar's notes and the next bar's label
LANE = 4  # between two callouts' leader lines where they run down the left edge
CHANNEL = 4  # between two callouts' leader lines where they run along under the bar

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
