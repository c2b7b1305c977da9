"""Annotated SVG breakdown charts, drawn at build time in pure Python.

A ChartSpec goes in, SVG markup comes out; every number on a chart is formatted from the Breakdown it is given.
One job per module:

  spec.py      ChartSpec, ChartBar and check_spec: what a chart shows
  format.py    amounts, names and bytes-per-unit rules in words
  segments.py  what each bar is made of (buckets or parts) and the GPUs it overflows
  text.py      text metrics (DejaVu Sans glyph advances from glyphs.py, made by glyphgen.py) and wrapping
  drawing.py   dimensions and the planned primitives: Box, Strokes, Words in a Drawing
  layout.py    geometry both layouts share: ticks, scale, hatching, halos, broken lines, the example box
  annotate.py  notes on leader lines, labels inside segments, callouts, chips, capacity labels, the text summary
  columns.py   the columns layout (bars side by side); rows.py the rows layout (one bar per row)
  svg.py       the lean SVG a page inlines, straight from the Drawing (its docstring says why not matplotlib)
  pathdata.py  path data as text: relative steps on the page, absolute and spelled-out ones in the downloads
  standalone.py  a page's SVG as a file of its own (colours, font and hatches written in) for the downloads
  figure.py    LAYOUTS, the one registration point of layouts, and render_chart / render_figure

What the rest of the site uses is exported here.
"""

from builder.charts.annotate import Callout, Note, fits_inside, spread_notes, stack_callouts
from builder.charts.drawing import NARROW_WIDTH, WIDE_WIDTH, Box, Drawing, Strokes, Words
from builder.charts.figure import LAYOUTS, plan_chart, render_chart, render_figure
from builder.charts.format import class_bucket, combine_rules, format_amount, format_both, name_bucket, name_part
from builder.charts.spec import ChartBar, ChartSpec, check_spec
from builder.charts.standalone import standalone_svg
from builder.charts.text import measure_text, wrap_text

__all__ = [
    "LAYOUTS", "NARROW_WIDTH", "WIDE_WIDTH", "Box", "Callout", "ChartBar", "ChartSpec", "Drawing", "Note", "Strokes",
    "Words", "check_spec", "class_bucket", "combine_rules", "fits_inside", "format_amount", "format_both", "measure_text", "name_bucket",
    "name_part", "plan_chart", "render_chart", "render_figure", "spread_notes", "stack_callouts", "standalone_svg",
    "wrap_text",
]
