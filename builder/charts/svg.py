"""SVG output: a planned Drawing (builder/charts/drawing.py) written straight out as the markup a page inlines.

Why this bypasses matplotlib. The plan (builder/charts/columns.py, rows.py) already does the layout: every
coordinate, line of text and CSS class is decided before anything is drawn, and text is measured with a table of
matplotlib's own DejaVu Sans advances (builder/charts/text.py). Handing that plan to matplotlib only to rewrite its
SVG afterwards (placeholder colours back into classes, style="" into attributes, its ids renamed, each text moved
back to the planned spot) cost 0.5 s of CPU to import matplotlib in every cold build, plus its drawing, and took
more code than writing the markup. Written directly, the markup is deterministic by construction (no hash salt, no
date), no larger than before, and a build never imports matplotlib. Geometry is the plan's, to 0.01 unit; the 34
charts of the site rasterise to the same pixels as matplotlib's output did. PNGs for figure downloads have
CairoSVG's pixels (builder/figures.py, builder/svgdraw.py) for the file builder/charts/standalone.py makes of it.

What the markup holds: <title> and <desc> (ids prefixed with the chart's id, named by aria-labelledby), a
background, every shape as a <path> with its CSS classes, a <title> tooltip in the group of each bar segment, then
every line of text on top. It is lean, because a page inlines every chart twice (a wide and a narrow layout) and
that markup was most of the heaviest pages' weight (issue 14):
- no colour, halo or font: the page's stylesheet (static/charts.css) gives them to each class, and its rules win
  over presentation attributes anyway, so the page rendered the same before they were left out;
- the text size once, on the root (every text inherits it), and on a text only where it differs;
- no stroke-width on a bar segment: the stylesheet gives each the one width (drawing.SEGMENT_EDGE);
- an axis-aligned step of a line or of a rounded box's side as H x or V y (the point L x y names, a number shorter),
  and as h dx or v dy where that is shorter still and both ends are whole or half units (builder/charts/pathdata.py);
- an overflow hatch as a rectangle filled with a <pattern> (one tile of its lines and their halo), the only url()
  in the markup: the hatches' lines written out were a tenth of a page's chart markup. The pattern is the page's,
  written once whatever its charts (page_hatches, which builder/render.py puts at the top of <main>), one per hatch
  width, and a rectangle is moved (translate) to where the tile's lines fall as make_hatch phases them.
No style="" and no <style>, so a strict Content-Security-Policy holds. builder/charts/standalone.py writes all of
that back for the light and dark files a reader downloads.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from dataclasses import replace

from builder.charts.drawing import FONT_SIZE, HALO, HATCH_SPACING, SEGMENT_EDGE, Box, Drawing, Strokes, Words
from builder.charts.layout import make_hatch
from builder.charts.pathdata import relative

SVG_NAMESPACE = "http://www.w3.org/2000/svg"
NS = f"{{{SVG_NAMESPACE}}}"
CORNER = 5  # radius of a rounded box's corners (tags behind labels, the worked-example box)
DASH = (4, 3)  # a dashed line's dash and gap, in line widths


def number(value: float) -> str:
    """A coordinate to 0.01 unit, without trailing zeros: '72.9', '244', '-3.5'."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def box_path(box: Box) -> str:
    """Path data of a box: a rectangle ('M x0 y0 H x1 V y1 H x0 z': each corner's one new coordinate, a third
    shorter than four points, issue 14's page weight), or one with quarter-curve corners of CORNER units when
    rounded, its sides between them H and V too (standalone.spell_out_steps writes those back as L)."""
    x0, y0, x1, y1 = box.x, box.y, box.x + box.width, box.y + box.height
    if not box.rounded:
        return "M{} {}H{}V{}H{}z".format(*map(number, (x0, y0, x1, y1, x0)))
    r = CORNER
    points = (x0 + r, y0, x1 - r, x1, y0, x1, y0 + r, y1 - r, x1, y1, x1 - r, y1, x0 + r, x0, y1, x0, y1 - r,
              y0 + r, x0, y0, x0 + r, y0)
    return "M{} {}H{}Q{} {} {} {}V{}Q{} {} {} {}H{}Q{} {} {} {}V{}Q{} {} {} {}z".format(*map(number, points))


def strokes_path(strokes: Strokes) -> str:
    """Path data of polylines, a step along an axis as H x or V y (the point L x y names): 'M1 2H3V4M5 6L7 8'.
    standalone.spell_out_steps writes the Ls back, number for number."""
    data = []
    for line in strokes.lines:
        (x, y), *rest = ((number(x), number(y)) for x, y in line)
        data.append(f"M{x} {y}")
        for next_x, next_y in rest:
            data.append(f"H{next_x}" if next_y == y else f"V{next_y}" if next_x == x else f"L{next_x} {next_y}")
            x, y = next_x, next_y
    return "".join(data)


def classes(*lists: str) -> str:
    """Class lists joined, each class once, in order."""
    return " ".join(dict.fromkeys(name for css in lists for name in css.split()))


def shape_element(item: Box | Strokes, chart_id: str) -> ElementTree.Element | None:
    """The <path> of a box or of strokes; a box with an id comes in a <g> with its tooltip. None for no lines."""
    if isinstance(item, Strokes):
        if not item.lines:
            return None
        attributes = {"d": strokes_path(item), "fill": "none", "stroke-width": number(item.line_width),
                      "class": classes(item.stroke)}
        if item.dashed:
            attributes["stroke-dasharray"] = ",".join(number(length * item.line_width) for length in DASH)
        if any(len(line) > 2 for line in item.lines):  # rounded joins where a line bends (leaders, axes)
            attributes["stroke-linejoin"] = "round"
        return ElementTree.Element(f"{NS}path", attributes)
    attributes = {"d": box_path(item)}
    if not item.fill:
        attributes["fill"] = "none"
    if item.stroke and item.line_width and not is_segment_edge(item):
        attributes["stroke-width"] = number(item.line_width)
    attributes["class"] = classes(item.fill, item.stroke if item.line_width else "")
    path = ElementTree.Element(f"{NS}path", attributes)
    if not item.gid:
        return path
    group = ElementTree.Element(f"{NS}g", {"id": f"{chart_id}-{item.gid}"})
    ElementTree.SubElement(group, f"{NS}title").text = item.tooltip
    group.append(path)
    return group


def is_segment_edge(box: Box) -> bool:
    """Whether a box is a bar segment outlined at the width the page's stylesheet gives every segment (SEGMENT_EDGE),
    which its page markup then leaves out."""
    return box.stroke == "tm-segment" and box.line_width == SEGMENT_EDGE


# A page's hatch patterns: one per hatch width, named by it ('tm-hatch-1_2'), defined once by the page (page_hatches).
HATCH_ID = "tm-hatch-"
HATCH_REFERENCE = re.compile(r"url\(#(" + HATCH_ID + r"[0-9_]+)\)")


def hatch_id(width: float) -> str:
    """The page's pattern of hatch lines `width` wide (and their halo)."""
    return HATCH_ID + number(width).replace(".", "_")


def hatch_width(pattern_id: str) -> float:
    """The hatch line width a pattern id names (hatch_id's inverse)."""
    return float(pattern_id.removeprefix(HATCH_ID).replace("_", "."))


def hatch_tile(width: float) -> list[Strokes]:
    """The halo and the hatch of one HATCH_SPACING tile (tile coordinates: lines u + v = 0, spacing and 2 x spacing,
    each drawn past the tile's edges), as layout.with_halo draws a hatch of this width."""
    lines = (((-1, 1), (1, -1)), ((0, HATCH_SPACING), (HATCH_SPACING, 0)),
             ((HATCH_SPACING - 1, HATCH_SPACING + 1), (HATCH_SPACING + 1, HATCH_SPACING - 1)))
    return [Strokes(lines, "tm-halo", round(width + HALO, 2)), Strokes(lines, "tm-overflow-hatch", width)]


def hatch_elements(halo: Strokes, hatch: Strokes) -> list[ElementTree.Element]:
    """An overflow hatch (layout.make_hatch with its with_halo band) as the rectangle the page's pattern of its width
    fills (hatch_id, page_hatches): the same '/' lines, phased as make_hatch phases them (x + y = x0 + y0 + k x
    spacing) by moving the rectangle that far right (translate) and drawing it as far left, clipped to the
    rectangle instead of ending there. A tile of three lines instead of every line written out: the hatches were a
    tenth of a page's chart markup (issue 14's page weight); one tile a page, not one per hatch, was 1.3 KB of the
    heaviest chart page's."""
    x0, y0, x1, y1 = (float(number(v)) for v in hatch_box(hatch.lines))
    phase = float(number((sum(hatch_box(hatch.lines)[:2])) % HATCH_SPACING))
    attributes = {"d": box_path(Box(x0 - phase, y0, x1 - x0, y1 - y0, ""))}
    if phase:
        attributes["transform"] = f"translate({number(phase)})"
    attributes |= {"fill": f"url(#{hatch_id(hatch.line_width)})", "class": "tm-overflow-area"}
    return [ElementTree.Element(f"{NS}path", attributes)]


def page_hatches(html: str) -> str:
    """The hatch patterns a page's charts fill their overflow with (hatch_elements), each once, in an SVG of no size
    of its own that shows nothing (class tm-chart, so static/charts.css paints the tiles' lines as it paints a
    chart's); '' for a page with no hatch."""
    ids = sorted(set(HATCH_REFERENCE.findall(html)))
    if not ids:
        return ""
    ElementTree.register_namespace("", SVG_NAMESPACE)
    root = ElementTree.Element(f"{NS}svg", {"class": "tm-chart tm-defs", "width": "0", "height": "0",
                                            "aria-hidden": "true", "focusable": "false"})
    defs = ElementTree.SubElement(root, f"{NS}defs")
    for pattern_id in ids:
        tile = number(HATCH_SPACING)
        pattern = ElementTree.SubElement(defs, f"{NS}pattern", {"id": pattern_id, "patternUnits": "userSpaceOnUse",
                                                                "width": tile, "height": tile})
        for strokes in hatch_tile(hatch_width(pattern_id)):
            path = shape_element(strokes, "")
            path.set("d", relative(path.get("d")))
            pattern.append(path)
    return ElementTree.tostring(root, encoding="unicode")


def shape_elements(items: tuple[Box | Strokes | Words, ...], chart_id: str) -> list[ElementTree.Element]:
    """The shapes of a drawing in plan order (its words left out); a hatch and its halo become one patterned area."""
    elements: list[ElementTree.Element] = []
    shapes = [item for item in items if not isinstance(item, Words)]
    for index, item in enumerate(shapes):
        after = shapes[index + 1] if index + 1 < len(shapes) else None
        before = shapes[index - 1] if index else None
        if isinstance(after, Strokes) and is_hatch(item, after):
            continue  # drawn with its hatch, next
        if isinstance(before, Strokes) and is_hatch(before, item):
            elements += hatch_elements(before, item)
            continue
        element = shape_element(item, chart_id)
        if element is not None:
            elements.append(element)
    return elements


def is_hatch(halo: Box | Strokes, hatch: Box | Strokes) -> bool:
    """Whether two shapes are an overflow hatch of more than one line on its halo (with_halo's pair)."""
    return (isinstance(halo, Strokes) and isinstance(hatch, Strokes) and hatch.stroke == "tm-overflow-hatch"
            and halo.stroke == "tm-halo" and halo.lines == hatch.lines and len(hatch.lines) > 1
            and make_hatch(*hatch_box(hatch.lines)) == hatch.lines
            and [halo, hatch] == [replace(tile, lines=hatch.lines) for tile in hatch_tile(hatch.line_width)])


def hatch_box(lines: tuple[tuple[tuple[float, float], ...], ...]) -> tuple[float, float, float, float]:
    """x0, y0, x1, y1 around hatch lines: the hatched rectangle where make_hatch of it gives the same lines (not
    for a hatch narrower than its spacing, whose lines miss a corner: is_hatch leaves those drawn out)."""
    xs = [x for line in lines for x, _ in line]
    ys = [y for line in lines for _, y in line]
    return min(xs), min(ys), max(xs), max(ys)


def text_element(words: Words) -> ElementTree.Element:
    """A <text> at its planned baseline and anchor, and its size where it is not the root's FONT_SIZE; a vertical
    one is turned 90° about its point."""
    attributes = {"font-weight": "700"} if words.bold else {}
    if words.size != FONT_SIZE:
        attributes["font-size"] = f"{words.size:g}"
    attributes.update({"class": classes(words.css), "x": f"{words.x:g}", "y": f"{words.y:g}"})
    if words.anchor != "start":
        attributes["text-anchor"] = words.anchor
    if words.vertical:
        attributes["transform"] = f"rotate(-90 {words.x:g} {words.y:g})"
        attributes["dominant-baseline"] = "central"
    element = ElementTree.Element(f"{NS}text", attributes)
    element.text = words.text
    return element


def write_svg(drawing: Drawing, chart_id: str, title: str, description: str, css: str = "tm-chart") -> str:
    """The chart's page markup (no XML declaration; lean, as the module docstring says), its root of class `css`:
    shapes in plan order, then text on top of them. Byte-identical for equal input."""
    ElementTree.register_namespace("", SVG_NAMESPACE)
    width, height = f"{drawing.width:g}", f"{drawing.height:g}"
    # Natural size: text renders at its designed size; the page lets wide charts break out of the text column and
    # scroll sideways inside their figure on narrow screens.
    root = ElementTree.Element(f"{NS}svg", {"viewBox": f"0 0 {width} {height}", "width": width, "height": height,
                                            "class": css, "role": "img",
                                            "aria-labelledby": f"{chart_id}-title {chart_id}-desc",
                                            "font-size": f"{FONT_SIZE:g}"})
    ElementTree.SubElement(root, f"{NS}title", id=f"{chart_id}-title").text = title
    ElementTree.SubElement(root, f"{NS}desc", id=f"{chart_id}-desc").text = description
    ElementTree.SubElement(root, f"{NS}rect", {"class": "tm-background", "width": width, "height": height})
    root.extend(shape_elements(drawing.items, chart_id))
    root.extend(text_element(item) for item in drawing.items if isinstance(item, Words))
    for path in root.iter(f"{NS}path"):
        path.set("d", relative(path.get("d")))
    root.text = "\n"
    for child in root:
        child.tail = "\n"
    return ElementTree.tostring(root, encoding="unicode")
