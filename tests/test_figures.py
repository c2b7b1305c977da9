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
            '<line x1="0" y1="18" x2="200" y2="18" stroke="#000000" stroke-width="2"/>'
            '<text x="10" y="23" font-size="14" fill="#cc0000" paint-order="stroke" stroke="#ffffff" stroke-width="4"'
            ' stroke-linejoin="round">Halo text here</text></svg>')


def test_png_keeps_the_text_halo_that_cairo_cannot_paint_in_order():
    """CairoSVG ignores paint-order (SVG 2), so the PNG gets the halo as a stroke-only copy under each text: a line
    passing behind a note is broken around it in the download as on the page, and the text stays on top."""
    from builder.figures import halo_as_copies, load_cairosvg, render_png

    root = halo_as_copies(ElementTree.fromstring(HALO_SVG))
    halo, text = root.findall(f"{SVG}text")
    assert (halo.get("fill"), halo.get("stroke"), halo.get("paint-order")) == ("none", "#ffffff", None)
    assert (text.get("fill"), text.get("stroke")) == ("#cc0000", None)
    if load_cairosvg() is None:
        pytest.skip("CairoSVG or cairo is not installed")
    from io import BytesIO

    from PIL import Image

    image = Image.open(BytesIO(render_png(HALO_SVG))).convert("RGB")
    row = [image.getpixel((x, 36)) for x in range(image.width)]  # the line's middle, at PNG_SCALE 2

    def dark(pixels):
        return sum(1 for p in pixels if max(p) < 80) / len(pixels)
    assert dark(row[300:400]) > 0.9  # the line, away from the text
    assert dark(row[30:200]) < 0.5  # behind the text: broken by the halo
