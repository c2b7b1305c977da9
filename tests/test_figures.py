"""Figures to reuse (issue 16 items 3 and 7): downloads that carry their own colours, and the embed view."""

from __future__ import annotations

import re
import struct
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from builder.build import SitePaths, build_site
from builder.palette import load_stylesheet

ROOT = Path(__file__).resolve().parent.parent
SVG = "{http://www.w3.org/2000/svg}"
SHEET = load_stylesheet()


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("figures") / "site"
    build_site(SitePaths(ROOT / "content", ROOT / "templates", ROOT / "static", out), quiet=True, force=True)
    return out


def chart_blocks(site: Path) -> list[tuple[str, str, str]]:
    """(page, chart id, block HTML) of every chart drawn on a page."""
    found = []
    for page in sorted(site.glob("*.html")):
        html = page.read_text(encoding="utf-8")
        for chart_id, block in re.findall(r'<div class="chart-block" id="chart-([\w-]+)">(.*?)<div class="table-scroll',
                                          html, re.S):
            if "<figure" in block:
                found.append((page.stem, chart_id, block))
    return found


def test_every_chart_links_its_svgs_png_and_embed_view_which_exist(site):
    blocks = chart_blocks(site)
    assert len(blocks) >= 20
    for slug, chart_id, block in blocks:
        stem = f"figures/{slug}-{chart_id}"
        links = re.findall(r'<a href="([^"]+)"', re.search(r'<p class="figure-links">.*?</p>', block, re.S).group(0))
        assert links == [f"{stem}.svg", f"{stem}-dark.svg", f"{stem}.png", f"{stem}.html"]
        for link in links:
            assert (site / link).is_file(), link
        assert "Configuration: " in block and "Sources: " in block


def test_downloaded_svgs_carry_their_own_colours_and_font_light_and_dark(site):
    light = (site / "figures/index-four-buckets.svg").read_text(encoding="utf-8")
    dark = (site / "figures/index-four-buckets-dark.svg").read_text(encoding="utf-8")
    for text, theme in ((light, "light"), (dark, "dark")):
        assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n<svg xmlns="http://www.w3.org/2000/svg"')
        root = ElementTree.fromstring(text.split("\n", 1)[1])
        assert "DejaVu Sans" in root.get("font-family")
        assert root.find(f"{SVG}rect").get("fill") == SHEET.colour("--tm-bg", theme)
        weights = next(p for p in root.iter(f"{SVG}path") if "tm-bucket-weights" in p.get("class", ""))
        assert weights.get("fill") == SHEET.colour("--tm-weights", theme)
        text_colour = {t.get("fill") for t in root.iter(f"{SVG}text") if "tm-text" in t.get("class", "").split()}
        assert text_colour == {SHEET.colour("--tm-text", theme)}
        assert "<style" not in text and "href" not in text and "url(" not in text
    assert light != dark


def test_png_is_the_light_chart_at_twice_its_size(site):
    data = (site / "figures/index-four-buckets.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    svg = ElementTree.fromstring((site / "figures/index-four-buckets.svg").read_text(encoding="utf-8").split("\n", 1)[1])
    assert (width, height) == (2 * int(svg.get("width")), 2 * int(svg.get("height")))


def test_embed_view_is_the_figure_alone_with_its_anchor_caption_and_a_way_back(site):
    html = (site / "figures/activations-vocabulary.html").read_text(encoding="utf-8")
    assert '<figure class="chart" id="chart-vocabulary">' in html
    assert html.count('class="tm-chart tm-chart-') == 2  # both layouts, switched by the stylesheet
    assert '<link rel="stylesheet" href="../static/site.css">' in html
    assert '<a href="../activations.html#chart-vocabulary">' in html
    assert "Configuration: Activations only matter here" in html and "Sources: " in html
    assert '<nav' not in html and "<script" not in html
    assert "default-src 'none'" in html
    assert '<a href="https://creativecommons.org/licenses/by/4.0/" rel="license">CC BY 4.0</a>' in html
    for attribute, url in re.findall(r'(href|src)="([^"]+)"', html):  # one plain link to the licence, nothing loaded
        licence = attribute == "href" and url == "https://creativecommons.org/licenses/by/4.0/"
        assert not re.match(r"[a-z]+:", url) or url == "data:," or licence, url


HALO_SVG = ('<svg xmlns="http://www.w3.org/2000/svg" width="200" height="40" viewBox="0 0 200 40">'
            '<rect width="200" height="40" fill="#ffffff"/>'
            '<path d="M0 18L200 18" stroke="#000000" stroke-width="2"/>'
            '<text x="10" y="23" font-size="14" fill="#cc0000" paint-order="stroke" stroke="#ffffff" stroke-width="4"'
            ' stroke-linejoin="round">Halo text here</text></svg>')


def test_png_keeps_the_text_halo_that_cairo_cannot_paint_in_order():
    """CairoSVG ignores paint-order (SVG 2), so the PNG gets the halo as a stroke-only copy under each text: a line
    passing behind a note is broken around it in the download as on the page, and the text stays on top."""
    from builder.figures import halo_as_copies, png_available, render_png

    root = halo_as_copies(ElementTree.fromstring(HALO_SVG))
    halo, text = root.findall(f"{SVG}text")
    assert (halo.get("fill"), halo.get("stroke"), halo.get("paint-order")) == ("none", "#ffffff", None)
    assert (text.get("fill"), text.get("stroke")) == ("#cc0000", None)
    if not png_available():
        pytest.skip("CairoSVG or cairo is not installed")
    from io import BytesIO

    from PIL import Image

    image = Image.open(BytesIO(render_png(HALO_SVG))).convert("RGB")
    row = [image.getpixel((x, 36)) for x in range(image.width)]  # the line's middle, at PNG_SCALE 2

    def dark(pixels):
        return sum(1 for p in pixels if max(p) < 80) / len(pixels)
    assert dark(row[300:400]) > 0.9  # the line, away from the text
    assert dark(row[30:200]) < 0.5  # behind the text: broken by the halo


def cairosvg_own_png(svg: bytes) -> bytes:
    """`svg` as CairoSVG's svg2png writes it, with cairo's own PNG writer: the pixels builder/svgdraw.py and
    builder/png.py must reproduce."""
    from cairosvg import svg2png

    return svg2png(bytestring=svg, scale=2)


def pixels(png: bytes) -> tuple[str, tuple[int, int], bytes]:
    from io import BytesIO

    from PIL import Image

    image = Image.open(BytesIO(png))
    return image.mode, image.size, image.tobytes()


def text_cases(*texts: str) -> str:
    return ('<svg xmlns="http://www.w3.org/2000/svg" width="320" height="200" viewBox="0 0 320 200" '
            'font-family="\'DejaVu Sans\', sans-serif"><rect width="320" height="200" fill="#ffffff"/>'
            + "".join(texts) + "</svg>")


# What builder/svgdraw.py draws itself: anchors, a central baseline, spaces (runs of them as one), a superscript, a
# rotated axis title, a dashed line with round joins inherited from a group, a translated group, a curve, bold, halos
# on white only (not drawn: white over white) and one whose edge meets a line (drawn).
DRAWN_SVG = text_cases(
    '<text x="10" y="20" font-size="12">Start: 1.9 GiB per GPU</text>',
    '<text x="160" y="40" font-size="13" text-anchor="middle" font-weight="700">Middle (GB = 10⁹ bytes)</text>',
    '<text x="310" y="60" font-size="12" text-anchor="end" paint-order="stroke" stroke="#ffffff" stroke-width="3"'
    ' fill="#cc0000">End,  two  spaces</text>',
    '<text x="15" y="150" font-size="12" text-anchor="middle" dominant-baseline="central"'
    ' transform="rotate(-90 15 150)">Rotated axis</text>',
    '<g stroke-linejoin="round" transform="translate(3.5)"><path d="M40 90L120 100Q150 130 180 90V120H40z"'
    ' fill="none" stroke="#2d333b" stroke-width="2.5" stroke-dasharray="6,4.5"/>'
    '<path d="M200 150H260V190H200z" fill="#1c6fca" stroke="#ffffff" stroke-width="0.5"/></g>',
    '<text x="200" y="80" font-size="14" fill="#cc0000" stroke="#1c6fca" stroke-width="1">Both</text>',
    '<path d="M40 174.8H140" stroke="#1c6fca" stroke-width="1"/>',  # just under the halo of a text on white
    '<text x="45" y="173" font-size="12" paint-order="stroke" stroke="#ffffff" stroke-width="3" fill="#cc0000"'
    ' stroke-linejoin="round">Tall HIM</text>',
    '<rect x="290" y="180" width="0" height="10" fill="#000000"/>')
# No background: some pixels stay transparent, and cairo's own writer writes the PNG (RGBA).
TRANSPARENT_SVG = ('<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20" viewBox="0 0 40 20">'
                   '<path d="M5 5H35V15H5z" fill="#cc0000"/></svg>')
# What it hands to CairoSVG's own drawer: an x of 0, letter-spacing, per-letter x, dx, a circle.
HANDED_ON_SVGS = [text_cases(case) for case in (
    '<text x="0" y="90" font-size="12">x of zero</text>',
    '<text x="40" y="110" font-size="12" letter-spacing="2">spaced</text>',
    '<text x="40 60 80" y="130" font-size="12">abc</text>',
    '<text x="120" y="130" dx="3" font-size="12">dx</text>',
    '<circle cx="50" cy="50" r="20" fill="#cc0000"/>')]


def test_png_has_the_pixels_cairosvg_draws_and_writes_itself():
    """builder/svgdraw.py makes only CairoSVG's calls that place ink, in its order, and builder/png.py writes an
    opaque surface as RGB as cairo's writer does (src/cairo-png.c): the PNG's pixels are CairoSVG's own, byte for
    byte; an SVG the drawer does not know is drawn by CairoSVG itself."""
    from builder.figures import PNG_SCALE, halo_as_copies, png_available, render_png
    from builder.svgdraw import Unsupported, draw_png

    if not png_available():
        pytest.skip("CairoSVG or cairo is not installed")
    for svg in (DRAWN_SVG, HALO_SVG, TRANSPARENT_SVG):
        assert draw_png(halo_as_copies(ElementTree.fromstring(svg)), PNG_SCALE)[:8] == b"\x89PNG\r\n\x1a\n"
    for svg in HANDED_ON_SVGS:
        with pytest.raises(Unsupported):
            draw_png(halo_as_copies(ElementTree.fromstring(svg)), PNG_SCALE)
    assert pixels(render_png(TRANSPARENT_SVG))[0] == "RGBA"
    for svg in (DRAWN_SVG, HALO_SVG, TRANSPARENT_SVG, *HANDED_ON_SVGS):
        ours = render_png(svg)
        assert ours[:8] == b"\x89PNG\r\n\x1a\n"
        theirs = cairosvg_own_png(ElementTree.tostring(halo_as_copies(ElementTree.fromstring(svg))))
        assert pixels(ours) == pixels(theirs)


def test_every_chart_png_has_the_pixels_cairosvg_draws_itself(site):
    """Every chart of the site, drawn by builder/svgdraw.py in the build, against CairoSVG's own drawer and cairo's
    PNG writer."""
    from builder.figures import PNG_SCALE, halo_as_copies, png_available
    from builder.svgdraw import draw_png

    if not png_available():
        pytest.skip("CairoSVG or cairo is not installed")
    charts = sorted(p for p in (site / "figures").glob("*.svg") if not p.name.endswith("-dark.svg"))
    assert len(charts) >= 20
    for chart in charts:
        light = halo_as_copies(ElementTree.fromstring(chart.read_text(encoding="utf-8").split("?>", 1)[-1]))
        draw_png(light, PNG_SCALE)  # the drawer knows every chart (none handed to CairoSVG)
        theirs = cairosvg_own_png(ElementTree.tostring(light))
        assert pixels(chart.with_suffix(".png").read_bytes()) == pixels(theirs), chart.name


def test_a_surface_with_transparency_is_left_to_cairos_writer():
    """builder/png.py writes RGB only for an opaque surface; one transparent pixel and cairo writes it (RGBA)."""
    cairocffi = pytest.importorskip("cairocffi")
    from builder.png import surface_png

    surface = cairocffi.ImageSurface(cairocffi.FORMAT_ARGB32, 4, 3)
    context = cairocffi.Context(surface)
    context.set_source_rgb(0.2, 0.4, 0.6)
    context.paint()
    assert pixels(surface_png(surface)) == ("RGB", (4, 3), bytes([51, 102, 153]) * 12)
    context.set_operator(cairocffi.OPERATOR_CLEAR)
    context.rectangle(0, 0, 1, 1)
    context.fill()
    mode, size, data = pixels(surface_png(surface))
    assert (mode, size, data[:8]) == ("RGBA", (4, 3), bytes([0, 0, 0, 0, 51, 102, 153, 255]))
