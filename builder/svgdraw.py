"""A chart's SVG drawn straight onto libcairo: the cairo calls CairoSVG makes that place ink, with the same state and
the same numbers, so the same pixels, without CairoSVG's Python per element (most of a chart's rasterising after
cairo's own work, and its import).

What it follows: CairoSVG 2.9.1's Surface.__init__ and set_context_size (the surface and the viewBox), Surface.draw
(per element: save, transform, line join, cap and dash, miter limit 4, the shape, then fill and stroke, children),
helpers.transform, path.path, shapes.rect, colors.color, the parser's attribute inheritance and white space, and
text.text's straight-line case (one x and one y, letters placed one by one, as builder/cairotext.py drew it before
this module). Calls that place no ink are left out: cairo draws nothing for a fill or stroke with a fully
transparent colour (cairo-surface.c `nothing_to_do`), so an unfilled text is not shown and an unstroked text is not
turned into a path; the miter limit, 4 in every element, is set once; and a white halo (a text's stroke-only copy,
builder/figures.py halo_as_copies) over pixels that are all white already is not stroked, as it would leave each of
them white (Drawing.all_white): most of the halos, and the largest part of cairo's own work on a chart. The calls that
place ink keep their order.

It knows the SVG builder/charts writes: svg, g, path (M L H V Q Z), rect, text (no tspan), title and desc, colours
as #rrggbb or none, lengths as plain numbers, rotate() and translate(). Anything else raises Unsupported, and
builder/figures.py hands the SVG to CairoSVG itself; tests/test_figures.py compares every chart's pixels with
CairoSVG's.
"""

from __future__ import annotations

import ctypes
import math
import re
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, replace

from builder import cairolib
from builder.png import rgb_png

SVG = "{http://www.w3.org/2000/svg}"
# Attributes a child takes from its parent in CairoSVG (all but cairosvg/parser.py's NOT_INHERITED_ATTRIBUTES),
# among those this drawer reads; the others it reads belong to their element only.
INHERITED = frozenset(("fill", "stroke", "stroke-width", "stroke-linejoin", "stroke-linecap", "stroke-dasharray",
                       "font-family", "font-size", "font-weight", "font-style", "text-anchor", "dominant-baseline"))
OWN = {"svg": {"width", "height", "viewBox"}, "g": {"transform"}, "path": {"d", "transform"},
       "rect": {"x", "y", "width", "height", "transform"}, "text": {"x", "y", "transform"}}
INERT = frozenset(("id", "class", "role", "paint-order"))  # CairoSVG draws nothing from these (no <style> here)
SKIPPED = frozenset(("title", "desc"))  # drawn as nothing, their text never shown
JOINS = {"round": cairolib.LINE_JOIN_ROUND, "bevel": cairolib.LINE_JOIN_BEVEL}
CAPS = {"round": cairolib.LINE_CAP_ROUND, "square": cairolib.LINE_CAP_SQUARE}
COLOUR = re.compile(r"#[0-9a-f]{6}")
WHITE = (1.0, 1.0, 1.0, 1)
PATH_DATA = re.compile(r"(?:[MLHVQZz]|-?\d+(?:\.\d+)?|[ ,])*")
PATH_TOKEN = re.compile(r"[MLHVQZz]|-?\d+(?:\.\d+)?")
ROTATE = re.compile(r"rotate\((-?[\d.]+)(?: (-?[\d.]+) (-?[\d.]+))?\)")
TRANSLATE = re.compile(r"translate\((-?[\d.]+)(?: (-?[\d.]+))?\)")
ARGUMENTS = {"M": 2, "L": 2, "H": 1, "V": 1, "Q": 4, "Z": 0, "z": 0}


class Unsupported(ValueError):
    """An SVG outside what this drawer knows (CairoSVG draws it instead)."""


@dataclass(frozen=True)
class Pen:
    """The line state an element strokes with, as CairoSVG leaves it in cairo: a join, cap or dash is set by an
    element that names one it knows and otherwise stays as its parent set it."""

    join: int = cairolib.LINE_JOIN_MITER
    cap: int = cairolib.LINE_CAP_BUTT
    dash: tuple[float, ...] = ()


def number(value: str | None, name: str) -> float:
    """A length as CairoSVG's helpers.size reads a plain number (float); units and percentages are not drawn here."""
    try:
        return float(value)
    except (TypeError, ValueError):
        raise Unsupported(f"{name}={value!r}") from None


def colour(value: str | None) -> tuple[float, float, float, float]:
    """colors.color for 'none', '#rrggbb' and CairoSVG's default black; (0, 0, 0, 0) without a colour."""
    if not value:
        return 0, 0, 0, 0
    value = value.strip().lower()
    if value == "none":
        return 0, 0, 0, 0
    if value == "black":
        return 0, 0, 0, 1
    if not COLOUR.fullmatch(value):
        raise Unsupported(f"colour {value!r}")
    return int(value[1:3], 16) / 255, int(value[3:5], 16) / 255, int(value[5:7], 16) / 255, 1


def visible_text(text: str | None) -> str:
    """The parser's white space for a text without children (xml:space default): line breaks dropped, tabs as
    spaces, runs of spaces as one, none at either end."""
    text = re.sub("[\n\r]", "", text or "").replace("\t", " ")
    return re.sub(" +", " ", text).strip(" ")


class Drawing:
    """One SVG drawn on a new ARGB32 image surface (CairoSVG's PNGSurface at 96 dpi and `scale`)."""

    def __init__(self, root: ElementTree.Element, scale: float) -> None:
        self.lib = cairolib.load()
        if self.lib is None:
            raise Unsupported("libcairo cannot be loaded")
        if root.tag != f"{SVG}svg":
            raise Unsupported(f"root {root.tag}")
        self.root, self.scale = root, scale
        self.extents: dict[tuple, dict] = {}  # font -> {text: what cairo measured} (measure)
        self.font: tuple = ()  # the selected font, as cairo measures with it (select_font)
        self.measured: dict[str | None, tuple[float, ...]] = {}  # the selected font's entry of `extents`
        self.surface = self.cr = None

    def png(self) -> bytes:
        """The drawing as PNG bytes (builder.png; cairo's own writer for a surface that is not opaque)."""
        attributes = self.attributes(self.root, {}, "svg")
        lib = self.lib
        width, height, viewbox = self.viewport(attributes)
        self.height = int(round(height))
        self.surface = lib.cairo_image_surface_create(cairolib.FORMAT_ARGB32, int(round(width)), self.height)
        self.cr = lib.cairo_create(self.surface)
        try:
            self.set_viewport(width, height, viewbox)
            lib.cairo_set_miter_limit(self.cr, 4.0)  # every element's stroke-miterlimit default in CairoSVG
            self.children(self.root, attributes, Pen())
            if lib.cairo_status(self.cr) != cairolib.STATUS_SUCCESS:
                raise RuntimeError(f"cairo status {lib.cairo_status(self.cr)} drawing a chart")
            return self.write(int(round(width)), int(round(height)))
        finally:
            lib.cairo_destroy(self.cr)
            lib.cairo_surface_destroy(self.surface)

    # The surface and the viewBox (Surface.__init__, node_format, set_context_size, preserve_ratio) ---------------

    def viewport(self, attributes: dict[str, str]) -> tuple[float, float, tuple[float, ...]]:
        """(width, height) in pixels at this scale and the viewBox, as PNGSurface sizes its surface."""
        if "viewBox" not in attributes or "width" not in attributes or "height" not in attributes:
            raise Unsupported("an svg without width, height and viewBox")
        viewbox = tuple(float(p) for p in re.sub("[ \n\r\t,]+", " ", attributes["viewBox"]).split())
        width, height = number(attributes["width"], "width"), number(attributes["height"], "height")
        if len(viewbox) != 4 or viewbox[2] <= 0 or viewbox[3] <= 0 or not width or not height:
            raise Unsupported(f"viewBox={attributes['viewBox']!r}")
        return width * self.scale, height * self.scale, viewbox

    def set_viewport(self, width: float, height: float, viewbox: tuple[float, ...]) -> None:
        """Surface.__init__'s unit scale and set_context_size for the root, with preserveAspectRatio xMidYMid meet."""
        lib, cr = self.lib, self.cr
        lib.cairo_scale(cr, 1, 1)
        rect_x, rect_y = viewbox[0:2]
        scale_x, scale_y = width / viewbox[2], height / viewbox[3]
        scale_x = scale_y = min(scale_x, scale_y)
        translate_x = (width / scale_x - viewbox[2]) / 2
        translate_y = 0 + (height / scale_y - viewbox[3]) / 2
        rect_x, rect_y = rect_x * scale_x, rect_y * scale_y
        lib.cairo_translate(cr, 0.0, 0.0)  # the current point, none yet
        lib.cairo_translate(cr, -rect_x, -rect_y)
        lib.cairo_rectangle(cr, rect_x, rect_y, width, height)
        lib.cairo_clip(cr)
        lib.cairo_scale(cr, scale_x, scale_y)
        lib.cairo_translate(cr, translate_x, translate_y)

    # Elements -----------------------------------------------------------------------------------------------

    def attributes(self, element: ElementTree.Element, inherited: dict[str, str], tag: str) -> dict[str, str]:
        """The element's attributes over those it inherits; Unsupported for one this drawer does not know."""
        own = OWN.get(tag, frozenset())
        for name in element.attrib:
            if name not in INHERITED and name not in own and name not in INERT and not name.startswith("aria-"):
                raise Unsupported(f"<{tag} {name}>")
        return {**inherited, **element.attrib}

    def children(self, element: ElementTree.Element, attributes: dict[str, str], pen: Pen) -> None:
        """Draw every child of `element` in document order."""
        inherited = {name: value for name, value in attributes.items() if name in INHERITED}
        for child in element:
            tag = child.tag[len(SVG):] if child.tag.startswith(SVG) else child.tag
            if tag in SKIPPED:
                if len(child):
                    raise Unsupported(f"<{tag}> with child elements")  # CairoSVG would draw them
                continue
            if tag not in OWN or tag == "svg":
                raise Unsupported(f"<{tag}>")
            self.element(child, tag, self.attributes(child, inherited, tag), pen)

    def element(self, element: ElementTree.Element, tag: str, attributes: dict[str, str], pen: Pen) -> None:
        """One element and its children, within its transform (Surface.draw)."""
        if tag == "rect" and (not number(attributes.get("width"), "width")
                              or not number(attributes.get("height"), "height")):
            return  # CairoSVG draws nothing of an element of width or height 0
        pen = self.pen(attributes, pen)
        transform = attributes.get("transform")
        if transform is not None:
            self.lib.cairo_save(self.cr)
            self.transform(transform)
        if tag == "path":
            self.shape(attributes, pen, self.path)
        elif tag == "rect":
            self.shape(attributes, pen, self.rectangle)
        elif tag == "text":
            if len(element):
                raise Unsupported("a text with child elements")
            self.text(visible_text(element.text), attributes, pen)
        self.children(element, attributes, pen)
        if transform is not None:
            self.lib.cairo_restore(self.cr)

    def pen(self, attributes: dict[str, str], pen: Pen) -> Pen:
        """The line state after the element's stroke-linejoin, stroke-linecap and stroke-dasharray (Surface.draw)."""
        join = JOINS.get(attributes.get("stroke-linejoin"), pen.join)
        cap = CAPS.get(attributes.get("stroke-linecap"), pen.cap)
        dash = pen.dash
        if attributes.get("stroke-dasharray"):
            dashes = tuple(number(d, "stroke-dasharray") for d in
                           re.sub("[ \n\r\t,]+", " ", attributes["stroke-dasharray"]).split())
            if sum(dashes):
                dash = dashes
        return replace(pen, join=join, cap=cap, dash=dash) if (join, cap, dash) != (pen.join, pen.cap, pen.dash) \
            else pen

    def transform(self, value: str) -> None:
        """helpers.transform for one rotate() or translate(): the matrix built, inverted twice (as CairoSVG checks
        it can be inverted) and applied."""
        matrix = cairolib.Matrix()
        lib = self.lib
        lib.cairo_matrix_init_identity(matrix)
        if found := ROTATE.fullmatch(value):
            angle, x, y = found.groups()
            x, y = (number(x, "transform"), number(y, "transform")) if x is not None else (0, 0)
            lib.cairo_matrix_translate(matrix, x, y)
            lib.cairo_matrix_rotate(matrix, math.radians(number(angle, "transform")))
            lib.cairo_matrix_translate(matrix, -x, -y)
        elif found := TRANSLATE.fullmatch(value):
            x, y = found.groups()
            lib.cairo_matrix_translate(matrix, number(x, "transform"), number(y, "transform") if y is not None else 0)
        else:
            raise Unsupported(f"transform={value!r}")
        if lib.cairo_matrix_invert(matrix) != cairolib.STATUS_SUCCESS:
            raise Unsupported(f"transform={value!r} cannot be inverted")
        lib.cairo_matrix_invert(matrix)
        lib.cairo_transform(self.cr, matrix)

    # Shapes -------------------------------------------------------------------------------------------------

    def shape(self, attributes: dict[str, str], pen: Pen, outline) -> None:
        """A path or rect: its outline filled, then stroked (Surface.draw's fill and stroke)."""
        lib, cr = self.lib, self.cr
        fill = colour(attributes.get("fill", "black"))
        stroke, width = self.stroke_of(attributes)
        if not fill[3] and not stroke[3]:
            return
        outline(attributes)
        if fill[3]:
            lib.cairo_set_source_rgba(cr, *fill)
            lib.cairo_fill_preserve(cr)
        if stroke[3] and width > 0:
            self.stroke(stroke, width, pen)
        else:
            lib.cairo_new_path(cr)

    def stroke_of(self, attributes: dict[str, str]) -> tuple[tuple[float, ...], float]:
        """The stroke's colour and line width (stroke-width defaults to 1)."""
        return colour(attributes.get("stroke")), number(attributes.get("stroke-width", "1"), "stroke-width")

    def stroke(self, rgba: tuple[float, ...], width: float, pen: Pen) -> None:
        """Stroke the current path (which cairo then clears) with the element's pen."""
        lib, cr = self.lib, self.cr
        lib.cairo_save(cr)
        lib.cairo_set_line_join(cr, pen.join)
        lib.cairo_set_line_cap(cr, pen.cap)
        if pen.dash:
            lib.cairo_set_dash(cr, (ctypes.c_double * len(pen.dash))(*pen.dash), len(pen.dash), 0)
        lib.cairo_set_line_width(cr, width)
        lib.cairo_set_source_rgba(cr, *rgba)
        lib.cairo_stroke(cr)
        lib.cairo_restore(cr)

    def rectangle(self, attributes: dict[str, str]) -> None:
        """shapes.rect without rounded corners."""
        if "rx" in attributes or "ry" in attributes:
            raise Unsupported("a rounded rect")
        x, y = number(attributes.get("x", "0"), "x"), number(attributes.get("y", "0"), "y")
        self.lib.cairo_rectangle(self.cr, x, y, number(attributes["width"], "width"),
                                 number(attributes["height"], "height"))

    def path(self, attributes: dict[str, str]) -> None:
        """path.path for absolute M, L, H, V, Q and Z, starting with M: the same points, the same calls."""
        data = attributes.get("d", "")
        if not PATH_DATA.fullmatch(data):
            raise Unsupported(f"path data {data[:40]!r}")
        tokens = PATH_TOKEN.findall(data)
        if not tokens or tokens[0] != "M":
            raise Unsupported("path data not starting with M")
        lib, cr = self.lib, self.cr
        current = first = None
        last = None
        index = 0
        while index < len(tokens):
            letter = tokens[index]
            if letter not in ARGUMENTS:
                raise Unsupported(f"path data {data[:40]!r}")
            index += 1
            while True:  # a letter's arguments, repeated while numbers follow (after M, as L)
                count = ARGUMENTS[letter]
                values = tokens[index:index + count]
                if len(values) < count or any(v in ARGUMENTS for v in values):
                    raise Unsupported(f"path data {data[:40]!r}")
                index += count
                values = [float(v) for v in values]
                if last in (None, "M", "Z", "z"):
                    first = None
                if letter not in ("M", "Z", "z") and first is None:
                    first = current
                if letter == "M":
                    lib.cairo_move_to(cr, *values)
                    current = values[0], values[1]
                elif letter == "L":
                    lib.cairo_line_to(cr, *values)
                    current = values[0], values[1]
                elif letter == "H":
                    lib.cairo_line_to(cr, values[0], current[1])
                    current = values[0], current[1]
                elif letter == "V":
                    lib.cairo_line_to(cr, current[0], values[0])
                    current = current[0], values[0]
                elif letter == "Q":
                    (x1, y1), (x2, y2, x3, y3) = current, values
                    lib.cairo_curve_to(cr, x2 * 2 / 3 + x1 / 3, y2 * 2 / 3 + y1 / 3, x2 * 2 / 3 + x3 / 3,
                                       y2 * 2 / 3 + y3 / 3, x3, y3)
                    current = x3, y3
                elif first:
                    lib.cairo_close_path(cr)
                    current = first
                last = letter
                if count == 0 or index >= len(tokens) or tokens[index] in ARGUMENTS:
                    break
                letter = "L" if letter == "M" else letter

    # Text (builder/cairotext.py's straight-line case of text.text) ----------------------------------------------

    def text(self, text: str, attributes: dict[str, str], pen: Pen) -> None:
        """A text's stroke outline (text_path, then stroke) and its letters (show_text), as CairoSVG draws it."""
        fill = colour(attributes.get("fill", "black"))
        stroke, width = self.stroke_of(attributes)
        stroked = stroke[3] and width > 0
        if not fill[3] and not stroked:
            return
        if not text:
            raise Unsupported("an empty text")
        x0, y0 = number(attributes.get("x"), "x"), number(attributes.get("y"), "y")
        if not x0 or not y0:
            raise Unsupported("a text at x or y 0")  # CairoSVG then places it from its cursor
        lib, cr = self.lib, self.cr
        self.select_font(attributes)
        ascent, descent, _, max_x_advance, max_y_advance = self.measure(None)
        x_bearing, y_bearing, text_width, height = self.measure(text)[:4]
        x_align = y_align = 0
        anchor = attributes.get("text-anchor")
        if anchor == "middle":
            x_align = - (text_width / 2 + x_bearing)
        elif anchor == "end":
            x_align = - (text_width + x_bearing)
        if max_x_advance > 0 and max_y_advance == 0:
            y_align = baseline_shift(attributes.get("dominant-baseline"), ascent, descent)
        advances = {letter: self.measure(letter)[4] for letter in set(text)}
        shift = x_align or y_align
        if not fill[3] and stroke == WHITE and self.all_white(self.ink_box(text, x0 + x_align, y0 + y_align,
                                                                           width, pen)):
            return  # a halo on white only: cairo would leave every pixel as it is (all_white)
        if stroked:  # text_path in Surface.draw's drawing step, then the stroke after the fill
            self.letters(text, x0, y0, x_align, y_align, shift, advances, lib.cairo_text_path)
        if fill[3]:
            lib.cairo_set_source_rgba(cr, *fill)
            self.letters(text, x0, y0, x_align, y_align, shift, advances, lib.cairo_show_text)
        if stroked:
            self.stroke(stroke, width, pen)

    def ink_box(self, text: str, x: float, y: float, width: float, pen: Pen) -> tuple[int, int, int, int] | None:
        """The device pixels (left, top, right, bottom; right and bottom excluded) a stroke `width` wide of the
        letters placed from (x, y) can touch: each letter's ink extents, the stroke's reach beyond the outline (half
        its width, a miter up to the miter limit 4 times that) and 2 pixels of antialiasing; None where the matrix
        turns or skews (not worked out here)."""
        matrix = cairolib.Matrix()
        self.lib.cairo_get_matrix(self.cr, matrix)
        if matrix.yx or matrix.xy:
            return None
        reach = width / 2 * (4 if pen.join == cairolib.LINE_JOIN_MITER else 1)
        left = top = math.inf
        right = bottom = -math.inf
        for letter in text:
            x_bearing, y_bearing, ink_width, ink_height, advance = self.measure(letter)[:5]
            if not letter.isspace():
                left, right = min(left, x + x_bearing), max(right, x + x_bearing + ink_width)
                top, bottom = min(top, y + y_bearing), max(bottom, y + y_bearing + ink_height)
            x += advance
        if left == math.inf:
            return None
        xs = sorted((matrix.xx * (left - reach) + matrix.x0, matrix.xx * (right + reach) + matrix.x0))
        ys = sorted((matrix.yy * (top - reach) + matrix.y0, matrix.yy * (bottom + reach) + matrix.y0))
        return math.floor(xs[0]) - 2, math.floor(ys[0]) - 2, math.ceil(xs[1]) + 3, math.ceil(ys[1]) + 3

    def all_white(self, box: tuple[int, int, int, int] | None) -> bool:
        """Whether every pixel of `box` (clipped to the surface) is opaque white. Cairo strokes an opaque colour by
        interpolating each pixel towards it by the coverage in 8-bit steps rounded exactly (pixman's and cairo's
        image compositors: x * a / 255 rounded), so white over white stays white whatever the coverage: a white
        stroke inside such a box places no ink."""
        if box is None:
            return False
        lib = self.lib
        lib.cairo_surface_flush(self.surface)
        stride = lib.cairo_image_surface_get_stride(self.surface)
        data = lib.cairo_image_surface_get_data(self.surface)
        left, top = max(box[0], 0), max(box[1], 0)
        right, bottom = min(box[2], stride // 4), min(box[3], self.height)
        white = b"\xff" * (4 * (right - left))
        return all(ctypes.string_at(data + row * stride + 4 * left, 4 * (right - left)) == white
                   for row in range(top, bottom))

    def letters(self, text, x, y, x_align, y_align, shift, advances, draw) -> None:
        """Each letter placed at the running x (and the anchor's shift) and drawn by `draw`; spaces only advance."""
        move_to, rel_move_to, cr = self.lib.cairo_move_to, self.lib.cairo_rel_move_to, self.cr
        for letter in text:
            move_to(cr, x, y)
            if shift:
                rel_move_to(cr, x_align, y_align)
            if not letter.isspace():
                draw(cr, letter.encode("utf-8"))
            x += advances[letter]

    def select_font(self, attributes: dict[str, str]) -> None:
        """text.text's font: the first family named, the style, the weight (bold from 550) and the size."""
        family = (attributes.get("font-family") or "sans-serif").split(",")[0].strip("\"' ")
        slant = cairolib.FONT_SLANT.get(str(attributes.get("font-style")).lower(), cairolib.FONT_SLANT["normal"])
        weight = attributes.get("font-weight")
        if weight and weight.isdigit() and int(weight) >= 550:
            weight = "bold"
        bold = cairolib.FONT_WEIGHT_BOLD if str(weight).lower() == "bold" else cairolib.FONT_WEIGHT_NORMAL
        size = number(attributes.get("font-size", "16"), "font-size")  # CairoSVG's default: 12pt at 96 dpi
        self.lib.cairo_select_font_face(self.cr, family.encode("utf-8"), slant, bold)
        self.lib.cairo_set_font_size(self.cr, size)
        matrix = cairolib.Matrix()
        self.lib.cairo_get_matrix(self.cr, matrix)
        # What cairo measures with: the scaled font, from the face, the size and the matrix's linear part.
        self.font = (family, slant, bold, size, matrix.xx, matrix.yx, matrix.xy, matrix.yy)
        self.measured = self.extents.setdefault(self.font, {})

    def measure(self, text: str | None) -> tuple[float, ...]:
        """The selected font's extents (text None) or a text's, measured once per font of this drawing (looked up
        by the text alone in the font's own table: a chart's letters are measured some 80,000 times)."""
        found = self.measured.get(text)
        if found is None:
            if text is None:
                extents = cairolib.FontExtents()
                self.lib.cairo_font_extents(self.cr, extents)
            else:
                extents = cairolib.TextExtents()
                self.lib.cairo_text_extents(self.cr, text.encode("utf-8"), extents)
            found = self.measured[text] = tuple(getattr(extents, name) for name, _ in extents._fields_)
        return found

    # The PNG ------------------------------------------------------------------------------------------------

    def write(self, width: int, height: int) -> bytes:
        """PNG bytes of the surface: builder.png for an opaque one, else cairo's writer."""
        lib = self.lib
        lib.cairo_surface_flush(self.surface)
        stride = lib.cairo_image_surface_get_stride(self.surface)
        # The surface's own memory, read in place (not copied: it lives until png() destroys the surface).
        data = memoryview((ctypes.c_ubyte * (stride * height)).from_address(
            lib.cairo_image_surface_get_data(self.surface))).cast("B")
        png = rgb_png(data, width, height, stride)
        if png is not None:
            return png
        chunks = []

        def collect(closure, data, length) -> int:
            chunks.append(ctypes.string_at(data, length))
            return cairolib.STATUS_SUCCESS
        if lib.cairo_surface_write_to_png_stream(self.surface, cairolib.WRITE_FUNC(collect), None):
            raise RuntimeError("cairo could not write a PNG")
        return b"".join(chunks)


def baseline_shift(baseline: str | None, ascent: float, descent: float) -> float:
    """text.text's vertical alignment for dominant-baseline (display-anchor and alignment-baseline not drawn here)."""
    if baseline in ("central", "middle"):
        return (ascent + descent) / 2 - descent
    if baseline in ("text-before-edge", "before_edge", "top", "hanging", "text-top"):
        return ascent
    if baseline in ("text-after-edge", "after_edge", "bottom", "text-bottom"):
        return -descent
    return 0


def draw_png(root: ElementTree.Element, scale: float) -> bytes:
    """The SVG `root` as PNG bytes at `scale` (96 dpi); Unsupported when it holds what this drawer does not know."""
    return Drawing(root, scale).png()
