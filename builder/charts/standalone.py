"""A chart as a file of its own: the page markup (builder/charts/svg.py) with what the page leaves to its
stylesheet written back, for the light and dark SVG files a reader downloads and the PNG made from the light one
(builder/figures.py).

A page's copy of a chart is lean (issue 14's page weight): classes but no colours or font, the text size once on
the root, no outline width on a bar segment, axis-aligned steps as H and V, or h and v where shorter (builder/charts/pathdata.py), overflow hatches as
a pattern. A file of its own has no stylesheet and no page weight to save, so standalone_svg undoes each of those,
in an order that gives the same bytes as the files had when the page carried them too: steps made absolute,
hatches drawn out, segments' outline widths, sizes and steps spelled out, then the colours and font of static/charts.css written in as
presentation attributes (builder/palette.py; no style="" and no <style>).
"""

from __future__ import annotations

import copy
import re
import xml.etree.ElementTree as ElementTree
from dataclasses import replace

from builder.charts.drawing import SEGMENT_EDGE
from builder.charts.layout import make_hatch
from builder.charts.pathdata import absolute, spelled_out
from builder.charts.svg import HATCH_REFERENCE, NS, SVG_NAMESPACE, hatch_tile, hatch_width, number, shape_element
from builder.palette import THEMES, load_stylesheet


def draw_hatches(root: ElementTree.Element) -> None:
    """Each patterned overflow area (svg.hatch_elements: the page's pattern of its hatch width, the area moved to
    the pattern's phase) drawn out again where it stands as its halo and hatch lines (make_hatch of the rectangle it
    covers): a file has no page to hold the pattern, and CairoSVG renders a pattern's tile at one pixel per unit and
    blurs it in the PNG's 2x."""
    for area in [e for e in root if e.get("class") == "tm-overflow-area"]:
        shift = float(re.fullmatch(r"translate\(([-\d.]+)\)", area.get("transform", "translate(0)")).group(1))
        x0, y0, x1, y1 = (float(v) for v in re.findall(r"[-\d.]+", area.get("d"))[:4])  # box_path's M x0 y0 H x1 V y1
        lines = make_hatch(round(x0 + shift, 2), y0, round(x1 + shift, 2), y1)
        index = list(root).index(area)
        root.remove(area)
        for offset, tile in enumerate(hatch_tile(hatch_width(HATCH_REFERENCE.fullmatch(area.get("fill")).group(1)))):
            element = shape_element(replace(tile, lines=lines), "")
            element.tail = "\n"
            root.insert(index + offset, element)


def spell_out_segment_edges(root: ElementTree.Element) -> None:
    """A bar segment's outline width, which the page's stylesheet gives it (svg.is_segment_edge), written back where
    svg.shape_element writes a box's width: after its path data."""
    for path in root.iter(f"{NS}path"):
        if "tm-segment" in path.get("class", "").split() and "stroke-width" not in path.attrib:
            attributes = dict(path.attrib)
            path.attrib.clear()
            path.set("d", attributes.pop("d"))
            path.set("stroke-width", number(SEGMENT_EDGE))
            path.attrib.update(attributes)


def spell_out_sizes(root: ElementTree.Element) -> None:
    """The root's font-size (svg.write_svg), if it names one, moved onto every text that inherits it, where
    text_element writes a size: after its font-weight, before its class."""
    size = root.attrib.pop("font-size", None)
    if size is None:
        return
    for text in root.iter(f"{NS}text"):
        if "font-size" not in text.attrib:
            attributes = dict(text.attrib)
            text.attrib.clear()
            if "font-weight" in attributes:
                text.set("font-weight", attributes.pop("font-weight"))
            text.set("font-size", size)
            text.attrib.update(attributes)


def absolute_steps(root: ElementTree.Element) -> None:
    """Every path's h dx and v dy written as the H x and V y they reach (pathdata.absolute)."""
    for path in root.iter(f"{NS}path"):
        path.set("d", absolute(path.get("d")))


def spell_out_steps(root: ElementTree.Element) -> None:
    """A line's and a rounded box's H x and V y written as the L x y they name (pathdata.spelled_out); a plain box
    (closed by z, no curve) keeps its H and V, as svg.box_path writes it for the page and the files alike."""
    for path in root.iter(f"{NS}path"):
        data = path.get("d")
        if "Q" in data or "z" not in data:
            path.set("d", spelled_out(data))


def paint_svg(root: ElementTree.Element, theme: str) -> None:
    """Write the colours and font static/charts.css gives each element in `theme` as presentation attributes
    (builder/palette.py), so the file keeps them without the page's stylesheet."""
    sheet = load_stylesheet()
    root.set("font-family", sheet.font_family())
    for element in root.iter():
        names = element.get("class", "").split()
        if names and element is not root:
            for prop, value in sheet.resolve(names, theme).items():
                element.set(prop, value)


def standalone_svg(svg: str, theme: str = "light") -> str:
    """A chart's page markup as a file of its own: an XML declaration, hatches, sizes and steps written out, and
    every colour that of `theme` ('light' or 'dark'). Byte-identical for equal input."""
    return standalone_svgs(svg, (theme,))[theme]


def standalone_svgs(svg: str, themes: tuple[str, ...] = THEMES) -> dict[str, str]:
    """standalone_svg of `svg` in each of `themes`, the markup read and written out once for all of them."""
    for theme in themes:
        if theme not in THEMES:
            raise ValueError(f"theme {theme!r} (use {' or '.join(THEMES)})")
    ElementTree.register_namespace("", SVG_NAMESPACE)
    root = ElementTree.fromstring(svg)
    absolute_steps(root)  # before draw_hatches, which reads a hatched box's corners
    draw_hatches(root)
    spell_out_segment_edges(root)
    spell_out_sizes(root)
    spell_out_steps(root)
    files = {}
    for number, theme in enumerate(themes):
        painted = root if number == len(themes) - 1 else copy.deepcopy(root)
        paint_svg(painted, theme)
        files[theme] = '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(painted, encoding="unicode") + "\n"
    return files
