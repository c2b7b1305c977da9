"""PNG bytes of a cairo image surface, written faster than cairo's own writer and with the same pixels.

cairo's `cairo_surface_write_to_png` (src/cairo-png.c, cairo 1.16/1.18) hands each row to libpng, which tries every
row filter and deflates at zlib's default level: about 70 ms of CPU for one 1400x1456 chart, most of a cold build's
rasterising after the drawing itself. A chart has an opaque background, so, as cairo does for an opaque ARGB32
surface (its `write_png` picks PNG_COLOR_TYPE_RGB and drops the alpha byte), the image is written as 8-bit RGB: the
premultiplied channels of an opaque pixel are its colour. Rows use filter type 0 (None) and zlib level 1, which on
flat chart colours is smaller than cairo's output and several times quicker. Layout: PNG specification (W3C, Third
Edition), section 5 (signature, chunks and their CRC-32), 11.2.1 (IHDR), 7.3 and 9 (one filter-type byte per row).
A surface with any transparent pixel (none today) is left to cairo's writer, which un-premultiplies it.
The image goes through in strips of STRIP rows, each converted and handed to one zlib stream: the same bytes as
compressing the whole image at once (deflate, without a flush, does not depend on how its input is split), with
buffers of a few hundred KB that the allocator reuses and the CPU cache holds. Whole-image buffers (three of 7 to
9 MB a chart) came from fresh pages each time: 0.1 to 0.2 s more CPU over a site's 36 charts.
"""

from __future__ import annotations

import array
import io
import struct
import sys
import warnings
import zlib

with warnings.catch_warnings():  # deprecated since Python 3.11 (PEP 594), gone in 3.13: then opaque_rgb_sliced
    warnings.simplefilter("ignore", DeprecationWarning)
    try:
        import audioop
    except ImportError:
        audioop = None

SIGNATURE = b"\x89PNG\r\n\x1a\n"
LEVEL = 1  # zlib level: flat chart colours compress well even at the fastest level
STRIP = 64  # rows converted and compressed at a time (rgb_png)
COLOUR_TYPE_RGB = 2
WORD = next(code for code in "IL" if array.array(code).itemsize == 4)  # an array of 32-bit numbers


def chunk(kind: bytes, data: bytes) -> bytes:
    """One PNG chunk: length, type, data, CRC-32 of type and data (PNG specification, section 5.3)."""
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def opaque_rgb_rows(data: bytes | memoryview, width: int, height: int) -> bytes | None:
    """Scanlines of 8-bit RGB, each led by filter byte 0, from cairo ARGB32 rows (bytes B, G, R, A on a
    little-endian machine, no row padding); None when a pixel is not opaque."""
    rgb = opaque_rgb(data) if audioop is not None else opaque_rgb_sliced(bytes(data), width * height)
    if rgb is None:
        return None
    rows, row = memoryview(rgb), 3 * width
    return b"".join([part for start in range(0, len(rgb), row) for part in (b"\0", rows[start:start + row])])


def opaque_rgb(data: bytes | memoryview) -> bytes | None:
    """The pixels' R, G, B bytes (None when one is not opaque), three passes in C: each pixel read as a signed
    32-bit little-endian number, A * 2**24 + R * 2**16 + G * 2**8 + B, is opaque when it lies in [-2**24, -1]; its
    bytes reversed (A, R, G, B: an array's byteswap) and cut to the top three bytes of the 32-bit number they make
    (audioop.lin2lin from width 4 to 3), they are R, G, B."""
    low, high = audioop.minmax(data, 4)
    if low < -(1 << 24) or high > -1:
        return None
    swapped = array.array(WORD)
    swapped.frombytes(data)
    swapped.byteswap()  # several times quicker than audioop.byteswap
    return audioop.lin2lin(swapped, 4, 3)


def opaque_rgb_sliced(data: bytes, pixels: int) -> bytearray | None:
    """opaque_rgb by slices, where there is no audioop (Python 3.13 removed it): about twice as slow."""
    if data[3::4] != b"\xff" * pixels:
        return None
    rgb = bytearray(3 * pixels)
    rgb[0::3], rgb[1::3], rgb[2::3] = data[2::4], data[1::4], data[0::4]
    return rgb


def rgb_png(data: bytes | memoryview, width: int, height: int, stride: int) -> bytes | None:
    """PNG bytes of cairo ARGB32 pixels (`stride` bytes a row) as 8-bit RGB; None when a pixel is not opaque, or for
    a layout this does not read (padded rows, a big-endian machine): then cairo's writer is the one to use. The
    scanlines are compressed STRIP rows at a time into one stream (the module docstring)."""
    if sys.byteorder != "little" or stride != 4 * width:
        return None
    compressor = zlib.compressobj(LEVEL)
    compressed = []
    for top in range(0, height, STRIP):
        rows = opaque_rgb_rows(data[top * stride:min(top + STRIP, height) * stride], width, min(STRIP, height - top))
        if rows is None:
            return None
        compressed.append(compressor.compress(rows))
    compressed.append(compressor.flush())
    header = struct.pack(">IIBBBBB", width, height, 8, COLOUR_TYPE_RGB, 0, 0, 0)
    return SIGNATURE + chunk(b"IHDR", header) + chunk(b"IDAT", b"".join(compressed)) + chunk(b"IEND", b"")


def surface_png(surface) -> bytes:
    """PNG bytes of a cairo ARGB32 image surface (cairocffi): RGB when opaque (rgb_png), else cairo's own writer."""
    import cairocffi

    surface.flush()
    png = None
    if surface.get_format() == cairocffi.FORMAT_ARGB32:
        png = rgb_png(bytes(surface.get_data()), surface.get_width(), surface.get_height(), surface.get_stride())
    if png is None:
        output = io.BytesIO()
        surface.write_to_png(output)
        png = output.getvalue()
    return png
