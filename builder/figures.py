"""Figures to reuse (issue 16): each chart as files of its own and a figure-only embed page.

For a chart `<chart-id>` on page `<slug>.html` the build writes, under figures/:
- `<slug>-<chart-id>.svg` and `<slug>-<chart-id>-dark.svg`: the chart's wide layout with its colours and font
  written in (builder.charts.standalone_svg), light and dark;
- `<slug>-<chart-id>.png`: the light SVG rasterised at 2x over the system's cairo library, with CairoSVG's pixels:
  drawn by builder.svgdraw (the calls CairoSVG makes, without its Python per element) or, for an SVG outside what
  that drawer knows, by CairoSVG itself, and written by builder.png (cairo's pixels, its PNG writer's work at a
  fraction of the CPU); left out, with its link, where cairo or CairoSVG cannot be loaded. A PNG builder.svgdraw
  drew is kept in the build cache by a hash of the SVG, the drawing code and the cairo version, so an unchanged
  chart is not rasterised again (it is most of a cold build);
- `<slug>-<chart-id>.html`: the figure alone, with its caption, for an iframe or a slide.
The page links them from the chart's block, whose anchor `chart-<chart-id>` the embed page also carries.
"""

from __future__ import annotations

import copy
import hashlib
import os
import re
import xml.etree.ElementTree as ElementTree
from functools import lru_cache
from pathlib import Path

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
def png_available() -> bool:
    """Whether PNGs can be drawn: libcairo opens (builder.cairolib) and CairoSVG, for an SVG builder.svgdraw does
    not know, is installed (found, not imported: a build imports it only for such an SVG)."""
    from importlib.util import find_spec

    from builder import cairolib

    return cairolib.load() is not None and find_spec("cairosvg") is not None


@lru_cache(maxsize=1)
def rasteriser_version() -> bytes:
    """What a PNG drawn by builder.svgdraw depends on besides its SVG: this module's, builder/svgdraw.py's,
    builder/cairolib.py's and builder/png.py's code, the cairo version and PNG_SCALE."""
    from builder import cairolib, png, svgdraw

    code = b"".join(Path(module.__file__).read_bytes() for module in (svgdraw, cairolib, png))
    return Path(__file__).read_bytes() + code + f"\0{cairolib.version()}\0{PNG_SCALE}".encode()


def png_cache_path(light_svg: str, cache: Path | None) -> Path | None:
    """Where the PNG of `light_svg` is kept in the build cache (None: no cache)."""
    if cache is None:
        return None
    key = hashlib.sha256(light_svg.encode("utf-8") + b"\0" + rasteriser_version()).hexdigest()
    return cache / "png" / f"{key}.png"


HALO_ATTRIBUTES = ("stroke", "stroke-width", "paint-order", "stroke-linejoin")


def halo_as_copies(root: ElementTree.Element) -> ElementTree.Element:
    """`root` with each haloed text (paint-order="stroke") split in two, for renderers without paint-order: a copy
    carrying only the stroke, then the text carrying only its fill, so the fill is painted over the halo as in a
    browser."""
    svg_text = "{http://www.w3.org/2000/svg}text"
    for parent in list(root.iter()):
        for index in reversed(range(len(parent))):
            text = parent[index]
            if text.tag != svg_text or text.get("paint-order") != "stroke":
                continue
            halo = copy.deepcopy(text)
            halo.set("fill", "none")
            halo.attrib.pop("paint-order")
            halo.tail = None
            for attribute in HALO_ATTRIBUTES:
                text.attrib.pop(attribute, None)
            parent.insert(index, halo)
    return root


def cairosvg_png(svg: bytes) -> bytes:
    """`svg` drawn by CairoSVG itself at PNG_SCALE (as its svg2png does: 96 dpi), written by builder.png."""
    from cairosvg.parser import Tree
    from cairosvg.surface import PNGSurface

    from builder.png import surface_png

    drawing = PNGSurface(Tree(bytestring=svg), None, 96, scale=PNG_SCALE)  # output None: draw, write nothing
    try:
        return surface_png(drawing.cairo)
    finally:
        drawing.finish()


def render_png(light_svg: str, cache: Path | None = None) -> bytes | None:
    """The light SVG as a PNG at PNG_SCALE, from the cache when it holds it; None without cairo or CairoSVG. Cairo
    ignores paint-order, so the halo that keeps notes legible where a line passes behind them (a background stroke
    painted under the text) is drawn as a stroke-only copy of the text placed just before it (halo_as_copies).
    Only builder.svgdraw's PNGs are cached: CairoSVG's also depend on its version."""
    from builder.svgdraw import Unsupported, draw_png

    if not png_available():
        return None
    path = png_cache_path(light_svg, cache)
    if path is not None and path.is_file():
        return path.read_bytes()
    root = halo_as_copies(ElementTree.fromstring(light_svg.split("?>", 1)[-1]))
    try:
        png = draw_png(root, PNG_SCALE)
    except Unsupported:
        return cairosvg_png(ElementTree.tostring(root))
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # never a half-written PNG under its name
        partial.write_bytes(png)
        os.replace(partial, path)
    return png


def figure_files(slug: str, chart_id: str, figure_svg: str, cache: Path | None = None) -> dict[str, bytes]:
    """The downloadable files of one chart, keyed by output path (the PNG from `cache` when it holds it)."""
    from builder.charts.standalone import standalone_svgs

    stem = f"{FOLDER}/{figure_name(slug, chart_id)}"
    svgs = standalone_svgs(wide_layout(figure_svg), ("light", "dark"))
    light = svgs["light"]
    files = {f"{stem}.svg": light.encode("utf-8"), f"{stem}-dark.svg": svgs["dark"].encode("utf-8")}
    png = render_png(light, cache)
    if png is not None:
        files[f"{stem}.png"] = png
    return files
