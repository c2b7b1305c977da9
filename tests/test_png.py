"""builder.png's RGB scanlines: audioop's three passes give the bytes the slices give, and both refuse a pixel that is
not opaque."""

from __future__ import annotations

import random

import pytest

from builder import png


def argb_pixels(width: int, height: int, seed: int) -> bytes:
    """Opaque cairo ARGB32 pixels (B, G, R, A bytes) with every channel value somewhere."""
    rng = random.Random(seed)
    return b"".join(bytes((rng.randrange(256), rng.randrange(256), rng.randrange(256), 255))
                    for _ in range(width * height))


@pytest.mark.skipif(png.audioop is None, reason="no audioop (Python 3.13+): the slices are the only way")
@pytest.mark.parametrize("alpha", [None, 0, 1, 0x7f, 0x80, 0xfe])
def test_audioop_and_slices_give_the_same_rgb(alpha):
    data = bytearray(argb_pixels(7, 5, seed=alpha or 3))
    if alpha is not None:
        data[4 * 17 + 3] = alpha
    data = bytes(data)
    assert png.opaque_rgb(data) == png.opaque_rgb_sliced(data, 35)
    if alpha is None:
        assert png.opaque_rgb(data)[:3] == bytes((data[2], data[1], data[0]))
    else:
        assert png.opaque_rgb(data) is None


def test_scanlines_lead_each_row_with_filter_none(monkeypatch):
    data = argb_pixels(4, 3, seed=1)
    rows = png.opaque_rgb_rows(data, 4, 3)
    assert len(rows) == 3 * (1 + 12) and rows[::13] == b"\0\0\0"
    monkeypatch.setattr(png, "audioop", None)
    assert png.opaque_rgb_rows(data, 4, 3) == rows


def test_strips_give_the_bytes_of_one_pass_over_the_image(monkeypatch):
    """rgb_png compresses STRIP rows at a time into one zlib stream: the PNG holds the very IDAT bytes that
    compressing every scanline at once gives (what it wrote before the strips), for a height that is not a multiple
    of STRIP; a pixel that is not opaque in the last strip still hands the image to cairo's writer (None)."""
    import struct
    import zlib

    monkeypatch.setattr(png, "STRIP", 4)
    width, height = 6, 11
    data = argb_pixels(width, height, seed=5)
    made = png.rgb_png(data, width, height, 4 * width)
    whole = zlib.compress(png.opaque_rgb_rows(data, width, height), png.LEVEL)
    header = struct.pack(">IIBBBBB", width, height, 8, png.COLOUR_TYPE_RGB, 0, 0, 0)
    assert made == png.SIGNATURE + png.chunk(b"IHDR", header) + png.chunk(b"IDAT", whole) + png.chunk(b"IEND", b"")
    last = bytearray(data)
    last[-1] = 0xfe
    assert png.rgb_png(bytes(last), width, height, 4 * width) is None
