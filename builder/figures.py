"""Figures to reuse (issue 16): each chart as files of its own and a figure-only embed page.

For a chart `<chart-id>` on page `<slug>.html` the build writes, under figures/:
- `<slug>-<chart-id>.svg` and `<slug>-<chart-id>-dark.svg`: the chart's wide layout with its colours and font
  written in (builder.charts.standalone_svg), light and dark;
- `<slug>-<chart-id>.png`: the light SVG rasterised at 2x with CairoSVG (pure Python over the system's cairo
  library), left out, with its link, where cairo cannot be loaded;
- `<slug>-<chart-id>.html`: the figure alone, with its caption, for an iframe or a slide.
The page links them from the chart's block, whose anchor `chart-<chart-id>` the embed page also carries.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from functools import lru_cache

FOLDER = "figures"
PNG_SCALE = 2


def figure_name(slug: str, chart_id: str) -> str:
    """The stem every file of a chart shares: 'activations-vocabulary'."""
    return f"{slug}-{chart_id}"


def figure_links(slug: str, chart_id: str, png: bool) -> dict[str, str]:
    """Relative URLs, from a top-level page, of a chart's downloads and embed view."""
    stem = f"{FOLDER}/{figure_name(slug, chart_id)}"
    links = {"svg": f"{stem}.svg", "svg_dark": f"{stem}-dark.svg", "embed": f"{stem}.html"}
    if png:
        links["png"] = f"{stem}.png"
    return links


def wide_layout(figure_svg: str) -> str:
    """The first SVG of a page figure (the wide layout; the narrow one follows it)."""
    match = re.search(r"<svg\b.*?</svg>", figure_svg, re.S)
    if match is None:
        raise ValueError("a chart figure without an <svg>")
    return match.group(0)


@lru_cache(maxsize=1)
def load_cairosvg():
    """CairoSVG, or None where it or the cairo library is missing (then no PNG is written)."""
    try:
        import cairosvg
    except (ImportError, OSError):
        return None
    return cairosvg


def render_png(light_svg: str) -> bytes | None:
    """The light SVG as a PNG at PNG_SCALE; None without CairoSVG. Cairo ignores paint-order, so the halo that
    keeps notes legible on the page (a background stroke painted under the text) is left out of the raster."""
    cairosvg = load_cairosvg()
    if cairosvg is None:
        return None
    root = ElementTree.fromstring(light_svg.split("?>", 1)[-1])
    for text in root.iter("{http://www.w3.org/2000/svg}text"):
        for attribute in ("stroke", "stroke-width", "paint-order", "stroke-linejoin"):
            text.attrib.pop(attribute, None)
    return cairosvg.svg2png(bytestring=ElementTree.tostring(root), scale=PNG_SCALE)


def figure_files(slug: str, chart_id: str, figure_svg: str) -> dict[str, bytes]:
    """The downloadable files of one chart, keyed by output path."""
    from builder.charts import standalone_svg

    stem = f"{FOLDER}/{figure_name(slug, chart_id)}"
    wide = wide_layout(figure_svg)
    light = standalone_svg(wide, "light")
    files = {f"{stem}.svg": light.encode("utf-8"), f"{stem}-dark.svg": standalone_svg(wide, "dark").encode("utf-8")}
    png = render_png(light)
    if png is not None:
        files[f"{stem}.png"] = png
    return files
