"""Text metrics: the width of a line of text in DejaVu Sans and wrapping to a width.

Widths are sums of glyph advances read from builder/charts/glyphs.py, a table generated once from the DejaVu Sans
files matplotlib ships (builder/charts/glyphgen.py says how; tests/test_charts_glyphs.py checks the table still
equals matplotlib's metrics where matplotlib is installed). A build therefore never imports matplotlib. DejaVu Sans
is a wide font: browsers' system fonts are narrower, so a layout measured with it errs roomy.
"""

from __future__ import annotations

from functools import lru_cache

from builder.charts.drawing import Words
from builder.charts.glyphs import ADVANCES, MISSING, UNITS_PER_EM


@lru_cache(maxsize=4096)
def measure_text(text: str, size: float, bold: bool = False) -> float:
    """Width of `text` in SVG units in DejaVu Sans at `size`: the sum of glyph advances, as matplotlib's text layout
    measures it unhinted. Kerning is ignored, which errs wide by well under 1%: safe for layout."""
    advance = glyph_advances(bold)
    return sum(advance.get(ord(ch), advance[None]) for ch in text) * size / 100


@lru_cache(maxsize=2)
def glyph_advances(bold: bool) -> dict[int | None, float]:
    """Code point -> advance width at 100 pt (None: a character the font lacks), from builder/charts/glyphs.py."""
    table: dict[int | None, float] = {None: MISSING * 100 / UNITS_PER_EM}
    for run in "".join(ADVANCES["bold" if bold else "normal"]).split(";"):
        first, advances = run.split(":")
        code = int(first)
        for item in advances.split(","):
            units, _, count = item.partition("*")  # 'advance*count': that many code points with one advance
            for _ in range(int(count or 1)):
                table[code] = int(units) * 100 / UNITS_PER_EM
                code += 1
    return table


def width_of(words: Words) -> float:
    """Width of one line of text."""
    return measure_text(words.text, words.size, words.bold)


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
