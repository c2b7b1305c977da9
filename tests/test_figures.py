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
