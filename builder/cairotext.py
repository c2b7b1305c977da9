"""CairoSVG's text drawer with less Python per letter: the same cairo calls that change the picture, so the same
pixels (tests/test_figures.py compares every chart's PNG with CairoSVG's own drawer).

CairoSVG (cairosvg/text.py `text`, version 2.9.1) draws a <text> one letter at a time, twice (once as a path for
the stroke, once with show_text for the fill), and for each letter also saves and restores the context, rotates it
by 0, moves by a zero offset and measures the letter again: about 25 cairo calls through cairocffi per letter, most
of a chart's rasterising time (a chart has thousands of letters). This drawer keeps, per letter, exactly the calls
that place ink: move_to, the anchor's rel_move_to, and text_path or show_text, with the letter's advance measured
once per text. The calls it leaves out change nothing: cairo's rel_move_to by (0, 0) moves the point by zero fixed-
point units, and rotate(0) multiplies the matrix by the identity (cos 0 = 1, sin 0 = 0, exact in floating point)
inside a save/restore that the path does not belong to. Anything else (a text on a path, per-letter x/y/dx/dy/rotate
lists, letter-spacing, an x or y of 0) is handed to CairoSVG's own drawer.
"""

from __future__ import annotations

from functools import lru_cache
from math import isinf

TESTED_VERSIONS = ("2.9.",)  # CairoSVG versions whose text.py this follows (read for 2.9.1)


def fast_text(surface, node, draw_as_text=False):
    """Draw `node` as cairosvg.text.text does (same calls that place ink), or hand it to that function."""
    from cairosvg import text as cairo_text
    from cairosvg.helpers import normalize, size

    if (not node.text or (node.get_href() or node.parent.get_href()) or node.get("letter-spacing")
            or any(key in node for key in ("dx", "dy", "rotate"))):
        return cairo_text.text(surface, node, draw_as_text)
    xs = normalize(node.get("x", "")).strip().split(" ") if "x" in node else []
    ys = normalize(node.get("y", "")).strip().split(" ") if "y" in node else []
    if len(xs) != 1 or len(ys) != 1:
        return cairo_text.text(surface, node, draw_as_text)
    x0, y0 = size(surface, xs[0], "x"), size(surface, ys[0], "y")
    if not x0 or not y0:
        return cairo_text.text(surface, node, draw_as_text)
    return _draw(surface, node, x0, y0, draw_as_text)


def _draw(surface, node, x0, y0, draw_as_text):
    """The straight-line case of cairosvg.text.text: one x and one y, no spacing, no rotation."""
    import cairocffi as cairo
    from cairosvg.bounding_box import EMPTY_BOUNDING_BOX, is_valid_bounding_box

    context = surface.context
    font_family = (node.get("font-family") or "sans-serif").split(",")[0].strip("\"' ")
    font_style = getattr(cairo, f'font_slant_{node.get("font-style")}'.upper(), cairo.FONT_SLANT_NORMAL)
    node_font_weight = node.get("font-weight")
    if node_font_weight and node_font_weight.isdigit() and int(node_font_weight) >= 550:
        node_font_weight = "bold"
    font_weight = getattr(cairo, f"font_weight_{node_font_weight}".upper(), cairo.FONT_WEIGHT_NORMAL)
    context.select_font_face(font_family, font_style, font_weight)
    context.set_font_size(surface.font_size)
    measure = _measures(surface, context)
    ascent, descent, _, max_x_advance, max_y_advance = measure(None)
    text = node.text
    x_bearing, y_bearing, width, height = measure(text)[:4]

    x_align = y_align = 0
    text_anchor = node.get("text-anchor")
    if text_anchor == "middle":
        x_align = - (width / 2 + x_bearing)
    elif text_anchor == "end":
        x_align = - (width + x_bearing)
    if max_x_advance > 0 and max_y_advance == 0:
        y_align = _baseline_shift(node, ascent, descent, y_bearing, height)

    extents = {letter: measure(letter) for letter in set(text)}
    library, pointer = cairo.cairo, context._pointer
    surface.cursor_d_position = [0, 0]  # an x and a y reset the offset, and no dx or dy adds to it
    draw = library.cairo_show_text if draw_as_text else library.cairo_text_path
    shift = x_align or y_align
    minx, miny, box_width, box_height = EMPTY_BOUNDING_BOX
    x, y = x0, y0
    for letter in text:
        letter_height, advance = extents[letter][3:5]
        library.cairo_move_to(pointer, x, y)
        if shift:
            library.cairo_rel_move_to(pointer, x_align, y_align)
        # the bounding box as extend_bounding_box grows it, letter by letter (same arithmetic, same order)
        left, top = x + advance + x_align + 0, y + y_align + 0
        right, bottom = x + advance + x_align + advance + 0, y + y_align + letter_height + 0
        maxx = float("-inf") if isinf(minx) else minx + box_width
        maxy = float("-inf") if isinf(miny) else miny + box_height
        minx, miny = min(minx, left, right), min(miny, top, bottom)
        box_width, box_height = max(maxx, left, right) - minx, max(maxy, top, bottom) - miny
        if not letter.isspace():
            draw(pointer, letter.encode("utf-8"))
        x += advance
    context._check_status()
    surface.cursor_position = (x, y)
    if is_valid_bounding_box((minx, miny, box_width, box_height)):
        node["text_bounding_box"] = (minx, miny, box_width, box_height)


def _measures(surface, context):
    """A function giving the context's font extents (of None) and a text's extents, as cairo measures them with the
    font now selected, measured once per scaled font of this drawing. cairo measures a text with the scaled font
    alone (cairo_text_extents: the gstate's scaled font, from the face, size, options and the matrix's linear part),
    so the same scaled font gives the same numbers; the scaled font is kept alive with them, so its address
    cannot come back as another font's."""
    import cairocffi

    scaled = context.get_scaled_font()
    key = int(cairocffi.ffi.cast("uintptr_t", scaled._pointer))
    fonts = surface.__dict__.setdefault("_tm_measures", {})
    if key not in fonts:
        fonts[key] = (scaled, {})
    known = fonts[key][1]

    def measure(text: str | None) -> tuple:
        if text not in known:
            known[text] = context.font_extents() if text is None else context.text_extents(text)
        return known[text]
    return measure


def _baseline_shift(node, ascent, descent, y_bearing, height):
    """cairosvg.text.text's vertical alignment for display-anchor and dominant/alignment-baseline."""
    display_anchor = node.get("display-anchor")
    alignment_baseline = node.get("dominant-baseline") or node.get("alignment-baseline")
    if display_anchor == "middle":
        return -height / 2 - y_bearing
    if display_anchor == "top":
        return -y_bearing
    if display_anchor == "bottom":
        return -height - y_bearing
    if alignment_baseline in ("central", "middle"):
        return (ascent + descent) / 2 - descent
    if alignment_baseline in ("text-before-edge", "before_edge", "top", "hanging", "text-top"):
        return ascent
    if alignment_baseline in ("text-after-edge", "after_edge", "bottom", "text-bottom"):
        return -descent
    return 0


@lru_cache(maxsize=1)
def install() -> bool:
    """Make CairoSVG draw <text> with fast_text (where its version is one this follows); True when installed."""
    import cairocffi
    import cairosvg
    from cairosvg import surface

    internals = (hasattr(cairocffi, "cairo") and hasattr(cairocffi, "ffi")  # what _draw calls through (cairocffi 1.x)
                 and all(hasattr(cairocffi.Context, name) for name in ("_check_status", "get_scaled_font")))
    if not cairosvg.__version__.startswith(TESTED_VERSIONS) or not internals:
        return False
    surface.TAGS["text"] = fast_text
    surface.text = fast_text  # Surface.draw compares the tag's drawer with `text` to fill a text with show_text
    return True
