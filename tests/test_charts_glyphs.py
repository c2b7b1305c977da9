"""The glyph-advance table charts measure text with (builder/charts/glyphs.py) is DejaVu Sans's own metrics.

The table is generated once from the DejaVu Sans 2.35 files matplotlib ships (builder/charts/glyphgen.py), so a build
never imports matplotlib; where matplotlib is installed this checks the table still equals what its fonts report.
"""

from __future__ import annotations

import pytest

from builder.charts import measure_text
from builder.charts.glyphgen import TARGET, read_advances, write_module
from builder.charts.glyphs import MISSING, UNITS_PER_EM


def test_the_glyph_table_is_the_one_generated_from_matplotlibs_fonts():
    pytest.importorskip("matplotlib")
    assert TARGET.read_text(encoding="utf-8") == write_module(*read_advances()), \
        "builder/charts/glyphs.py is stale: run .venv/bin/python -m builder.charts.glyphgen"


def test_text_is_measured_as_matplotlib_measures_it():
    pytest.importorskip("matplotlib")
    from matplotlib import font_manager
    from matplotlib.ft2font import LoadFlags

    for bold in (False, True):
        properties = font_manager.FontProperties(family="DejaVu Sans", weight="bold" if bold else "normal")
        font = font_manager.get_font(font_manager.findfont(properties))
        font.set_size(100, 72)
        for text in ("Optimizer 52.2 GiB · 8 B/param", "Memory per GPU (GiB = 2³⁰ bytes)", "DOESN'T FIT H100 SXM 80GB"):
            expected = sum(font.load_char(ord(ch), flags=LoadFlags.NO_HINTING).linearHoriAdvance / 65536
                           for ch in text) * 12 / 100
            assert measure_text(text, 12, bold) == pytest.approx(expected, abs=1e-9)


def test_published_dejavu_sans_advances():
    # DejaVu Sans 2.35 (hmtx table, 2048 units per em): the space is 651 units, 'M' 1767 and the digits 1303; a
    # character the font lacks takes the missing-glyph box's 1229.
    assert UNITS_PER_EM == 2048 and MISSING == 1229
    assert measure_text(" ", 2048) == 651 and measure_text("M", 2048) == 1767
    assert measure_text("0123456789", 2048) == 10 * 1303
    assert measure_text("中", 2048) == 1229  # U+4E2D: DejaVu Sans has no CJK
