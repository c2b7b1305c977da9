"""The system's libcairo through ctypes: the few functions builder/svgdraw.py draws a chart's PNG with.

ctypes is in the standard library and opens the library in about 10 ms of CPU; cairocffi (what CairoSVG draws
through) parses cairo's C declarations with pycparser on every import, about 0.15 s of a cold build. Signatures:
cairo's cairo.h (1.16 and 1.18); enum values from the same header. `load()` is None where libcairo cannot be
opened (then the build writes no PNG).
"""

from __future__ import annotations

import ctypes
import sys
from ctypes import POINTER, Structure, c_char_p, c_double, c_int, c_uint, c_void_p
from functools import lru_cache

FORMAT_ARGB32 = 0
FONT_SLANT = {"normal": 0, "italic": 1, "oblique": 2}
FONT_WEIGHT_NORMAL, FONT_WEIGHT_BOLD = 0, 1
LINE_JOIN_MITER, LINE_JOIN_ROUND, LINE_JOIN_BEVEL = 0, 1, 2
LINE_CAP_BUTT, LINE_CAP_ROUND, LINE_CAP_SQUARE = 0, 1, 2
STATUS_SUCCESS = 0
# The file names cairocffi tries, without its ctypes.util.find_library step (which runs ldconfig or a compiler).
LIBRARY_NAMES = {"darwin": ("libcairo.2.dylib",), "win32": ("libcairo-2.dll",)}.get(sys.platform, ("libcairo.so.2",))


class Matrix(Structure):
    """cairo_matrix_t: x_device = xx * x + xy * y + x0, y_device = yx * x + yy * y + y0."""

    _fields_ = [(name, c_double) for name in ("xx", "yx", "xy", "yy", "x0", "y0")]


class TextExtents(Structure):
    """cairo_text_extents_t."""

    _fields_ = [(name, c_double) for name in ("x_bearing", "y_bearing", "width", "height", "x_advance", "y_advance")]


class FontExtents(Structure):
    """cairo_font_extents_t."""

    _fields_ = [(name, c_double) for name in ("ascent", "descent", "height", "max_x_advance", "max_y_advance")]


WRITE_FUNC = ctypes.CFUNCTYPE(c_int, c_void_p, POINTER(ctypes.c_ubyte), c_uint)

# name -> (restype, argtypes); cr: cairo_t *, surface: cairo_surface_t *
SIGNATURES = {
    "cairo_version_string": (c_char_p, []),
    "cairo_image_surface_create": (c_void_p, [c_int, c_int, c_int]),
    "cairo_image_surface_get_data": (c_void_p, [c_void_p]),
    "cairo_image_surface_get_stride": (c_int, [c_void_p]),
    "cairo_surface_flush": (None, [c_void_p]),
    "cairo_surface_status": (c_int, [c_void_p]),
    "cairo_surface_destroy": (None, [c_void_p]),
    "cairo_surface_write_to_png_stream": (c_int, [c_void_p, WRITE_FUNC, c_void_p]),
    "cairo_create": (c_void_p, [c_void_p]),
    "cairo_destroy": (None, [c_void_p]),
    "cairo_status": (c_int, [c_void_p]),
    "cairo_save": (None, [c_void_p]),
    "cairo_restore": (None, [c_void_p]),
    "cairo_scale": (None, [c_void_p, c_double, c_double]),
    "cairo_translate": (None, [c_void_p, c_double, c_double]),
    "cairo_transform": (None, [c_void_p, POINTER(Matrix)]),
    "cairo_get_matrix": (None, [c_void_p, POINTER(Matrix)]),
    "cairo_matrix_init_identity": (None, [POINTER(Matrix)]),
    "cairo_matrix_translate": (None, [POINTER(Matrix), c_double, c_double]),
    "cairo_matrix_rotate": (None, [POINTER(Matrix), c_double]),
    "cairo_matrix_invert": (c_int, [POINTER(Matrix)]),
    "cairo_rectangle": (None, [c_void_p, c_double, c_double, c_double, c_double]),
    "cairo_clip": (None, [c_void_p]),
    "cairo_new_path": (None, [c_void_p]),
    "cairo_move_to": (None, [c_void_p, c_double, c_double]),
    "cairo_rel_move_to": (None, [c_void_p, c_double, c_double]),
    "cairo_line_to": (None, [c_void_p, c_double, c_double]),
    "cairo_curve_to": (None, [c_void_p] + [c_double] * 6),
    "cairo_close_path": (None, [c_void_p]),
    "cairo_set_source_rgba": (None, [c_void_p, c_double, c_double, c_double, c_double]),
    "cairo_fill_preserve": (None, [c_void_p]),
    "cairo_stroke": (None, [c_void_p]),
    "cairo_set_line_width": (None, [c_void_p, c_double]),
    "cairo_set_line_join": (None, [c_void_p, c_int]),
    "cairo_set_line_cap": (None, [c_void_p, c_int]),
    "cairo_set_miter_limit": (None, [c_void_p, c_double]),
    "cairo_set_dash": (None, [c_void_p, POINTER(c_double), c_int, c_double]),
    "cairo_select_font_face": (None, [c_void_p, c_char_p, c_int, c_int]),
    "cairo_set_font_size": (None, [c_void_p, c_double]),
    "cairo_font_extents": (None, [c_void_p, POINTER(FontExtents)]),
    "cairo_text_extents": (None, [c_void_p, c_char_p, POINTER(TextExtents)]),
    "cairo_show_text": (None, [c_void_p, c_char_p]),
    "cairo_text_path": (None, [c_void_p, c_char_p]),
}


@lru_cache(maxsize=1)
def load() -> ctypes.CDLL | None:
    """libcairo with the functions of SIGNATURES typed; None where it cannot be opened or lacks one of them."""
    for name in LIBRARY_NAMES:
        try:
            library = ctypes.CDLL(name)
        except OSError:
            continue
        try:
            for function, (restype, argtypes) in SIGNATURES.items():
                getattr(library, function).restype = restype
                getattr(library, function).argtypes = argtypes
        except AttributeError:
            return None
        return library
    return None


def version() -> str:
    """The loaded libcairo's version ('1.16.0'); '' without one."""
    library = load()
    return library.cairo_version_string().decode() if library is not None else ""
