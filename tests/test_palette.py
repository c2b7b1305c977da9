"""The chart palette: parts told apart, also under colour-vision deficiencies, and every mark visible.

Colours come from static/charts.css through builder/palette.py (the one source the charts use too).
Colour science is written out here, independent of the builder:
- sRGB (IEC 61966-2-1) -> CIE XYZ (D65) -> CIELAB;
- CIEDE2000 (Sharma, Wu and Dalal 2005, checked against their published test pairs);
- protanopia and deuteranopia at severity 1.0 (Machado, Oliveira and Fernandes 2009), applied to linear RGB.
"""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import pytest

from builder.build import SitePaths, build_site
from builder.model.breakdown import BUCKETS
from builder.palette import THEMES, load_stylesheet, parse_stylesheet
from tests.html_tags import path_subpaths, svg_element

ROOT = Path(__file__).resolve().parent.parent
SVG = "{http://www.w3.org/2000/svg}"
MIN_DISTANCE = 10.0  # CIEDE2000 between adjacent parts
MIN_CONTRAST = 3.0  # WCAG 2.1 SC 1.4.11, non-text contrast

MACHADO = {  # Machado et al. 2009, Table 1, severity 1.0; rows give linear R, G, B
    "normal vision": ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)),
    "protanopia": ((0.152286, 1.052583, -0.204868), (0.114503, 0.786281, 0.099216),
                   (-0.003882, -0.048116, 1.051998)),
    "deuteranopia": ((0.367322, 0.860646, -0.227968), (0.280085, 0.672501, 0.047413),
                     (-0.011820, 0.042940, 0.968881)),
}


def linear_rgb(colour: str) -> tuple[float, float, float]:
    """#rrggbb -> linear-light sRGB channels in [0, 1]."""
    channels = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    return tuple(c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)


def simulate(linear: tuple[float, float, float], vision: str) -> tuple[float, float, float]:
    """What a viewer with `vision` sees, as linear RGB clipped to the gamut."""
    return tuple(min(1.0, max(0.0, sum(m * c for m, c in zip(row, linear)))) for row in MACHADO[vision])


def to_lab(linear: tuple[float, float, float]) -> tuple[float, float, float]:
    """Linear sRGB -> CIELAB (D65 white)."""
    r, g, b = linear
    x = (0.4124564 * r + 0.3575761 * g + 0.1804375 * b) / 0.95047
    y = 0.2126729 * r + 0.7151522 * g + 0.0721750 * b
    z = (0.0193339 * r + 0.1191920 * g + 0.9503041 * b) / 1.08883

    def f(t: float) -> float:
        return t ** (1 / 3) if t > 216 / 24389 else (24389 / 27 * t + 16) / 116

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def ciede2000(lab1: tuple[float, float, float], lab2: tuple[float, float, float]) -> float:
    """CIEDE2000 colour difference, kL = kC = kH = 1 (Sharma et al. 2005, equations 1-22)."""
    (l1, a1, b1), (l2, a2, b2) = lab1, lab2
    c_mean = (math.hypot(a1, b1) + math.hypot(a2, b2)) / 2
    g = 0.5 * (1 - math.sqrt(c_mean ** 7 / (c_mean ** 7 + 25 ** 7)))
    a1p, a2p = (1 + g) * a1, (1 + g) * a2
    c1p, c2p = math.hypot(a1p, b1), math.hypot(a2p, b2)
    h1p = math.degrees(math.atan2(b1, a1p)) % 360 if c1p else 0.0
    h2p = math.degrees(math.atan2(b2, a2p)) % 360 if c2p else 0.0
    delta_l, delta_c = l2 - l1, c2p - c1p
    if c1p * c2p == 0:
        delta_h = 0.0
    elif abs(h2p - h1p) <= 180:
        delta_h = h2p - h1p
    else:
        delta_h = h2p - h1p - 360 if h2p > h1p else h2p - h1p + 360
    delta_hue = 2 * math.sqrt(c1p * c2p) * math.sin(math.radians(delta_h / 2))
    l_mean, cp_mean = (l1 + l2) / 2, (c1p + c2p) / 2
    if c1p * c2p == 0:
        h_mean = h1p + h2p
    elif abs(h1p - h2p) <= 180:
        h_mean = (h1p + h2p) / 2
    else:
        h_mean = (h1p + h2p + 360) / 2 if h1p + h2p < 360 else (h1p + h2p - 360) / 2
    t = (1 - 0.17 * math.cos(math.radians(h_mean - 30)) + 0.24 * math.cos(math.radians(2 * h_mean))
         + 0.32 * math.cos(math.radians(3 * h_mean + 6)) - 0.20 * math.cos(math.radians(4 * h_mean - 63)))
    delta_theta = 30 * math.exp(-(((h_mean - 275) / 25) ** 2))
    r_c = 2 * math.sqrt(cp_mean ** 7 / (cp_mean ** 7 + 25 ** 7))
    s_l = 1 + 0.015 * (l_mean - 50) ** 2 / math.sqrt(20 + (l_mean - 50) ** 2)
    s_c = 1 + 0.045 * cp_mean
    s_h = 1 + 0.015 * cp_mean * t
    r_t = -math.sin(math.radians(2 * delta_theta)) * r_c
    return math.sqrt((delta_l / s_l) ** 2 + (delta_c / s_c) ** 2 + (delta_hue / s_h) ** 2
                     + r_t * (delta_c / s_c) * (delta_hue / s_h))


def distance(first: str, second: str, vision: str) -> float:
    """CIEDE2000 between two #rrggbb colours as a viewer with `vision` sees them."""
    return ciede2000(to_lab(simulate(linear_rgb(first), vision)), to_lab(simulate(linear_rgb(second), vision)))


def contrast(first: str, second: str) -> float:
    """WCAG 2 contrast ratio."""

    def luminance(colour: str) -> float:
        r, g, b = linear_rgb(colour)
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    high, low = sorted((luminance(first), luminance(second)), reverse=True)
    return (high + 0.05) / (low + 0.05)


SHEET = load_stylesheet()
BUCKET_CLASSES = [f"tm-bucket-{b.replace('_', '-')}" for b in BUCKETS] + ["tm-bucket-other"]


def fill_of(classes: list[str] | tuple[str, ...], theme: str) -> str:
    """The fill charts.css gives an element with these classes."""
    return SHEET.resolve(classes, theme)["fill"]


# --- The colour science itself ------------------------------------------------------------------


@pytest.mark.parametrize("lab1, lab2, expected", [
    # Sharma, Wu and Dalal (2005), Table 1: pairs 1, 7, 17 and 34 (to four decimals)
    ((50.0000, 2.6772, -79.7751), (50.0000, 0.0000, -82.7485), 2.0425),
    ((50.0000, 0.0000, 0.0000), (50.0000, -1.0000, 2.0000), 2.3669),
    ((50.0000, 2.5000, 0.0000), (73.0000, 25.0000, -18.0000), 27.1492),
    ((2.0776, 0.0795, -1.1350), (0.9033, -0.0636, -0.5514), 0.9082),
])
def test_ciede2000_matches_sharma_2005_test_data(lab1, lab2, expected):
    assert ciede2000(lab1, lab2) == pytest.approx(expected, abs=5e-5)
    assert ciede2000(lab2, lab1) == pytest.approx(expected, abs=5e-5)  # symmetric


def test_lab_of_srgb_primaries_and_white():
    assert to_lab(linear_rgb("#ffffff")) == pytest.approx((100.0, 0.0, 0.0), abs=0.01)
    assert to_lab(linear_rgb("#ff0000")) == pytest.approx((53.24, 80.09, 67.20), abs=0.05)
    assert to_lab(linear_rgb("#0000ff")) == pytest.approx((32.30, 79.19, -107.86), abs=0.05)


def test_machado_simulation_merges_red_and_green_and_keeps_grey():
    for vision in ("protanopia", "deuteranopia"):
        grey = simulate(linear_rgb("#808080"), vision)
        assert grey == pytest.approx(linear_rgb("#808080") * 1, abs=1e-3)  # rows sum to 1: greys stay grey
        # A red and a green of equal lightness that normal vision tells far apart become near-twins.
        assert distance("#b35900", "#4d7a00", "normal vision") > 20
        assert distance("#b35900", "#4d7a00", vision) < distance("#b35900", "#4d7a00", "normal vision") / 2


# --- The palette as charts.css declares it ------------------------------------------------------


def test_the_palette_is_read_from_charts_css():
    css = (ROOT / "static" / "charts.css").read_text(encoding="utf-8")
    light = re.search(r"--tm-kv-cache:\s*(#[0-9a-f]{6})", css).group(1)
    assert fill_of(["tm-bucket-kv-cache", "tm-segment"], "light") == light
    assert parse_stylesheet(css).colour("--tm-bg", "dark") == "#15171a"
    assert fill_of(["tm-bucket-kv-cache", "tm-shade-2"], "dark") == SHEET.colour("--tm-kv-cache-2", "dark")
    assert fill_of(["tm-bucket-kv-cache", "tm-shade-0"], "dark") == SHEET.colour("--tm-kv-cache", "dark")


@pytest.mark.parametrize("theme", THEMES)
def test_every_bucket_and_shade_has_its_own_colour_with_3_to_1_against_the_background(theme):
    background = SHEET.colour("--tm-bg", theme)
    fills = [fill_of([bucket, f"tm-shade-{shade}"], theme) for bucket in BUCKET_CLASSES for shade in range(3)]
    assert len(set(fills)) == len(fills) == 27
    for colour in fills:
        assert contrast(colour, background) >= MIN_CONTRAST, (theme, colour)


@pytest.mark.parametrize("vision", MACHADO)
@pytest.mark.parametrize("theme", THEMES)
def test_every_two_buckets_differ_by_at_least_10(theme, vision):
    """All pairs, not only neighbours: whichever buckets a future chart stacks, they stay apart."""
    colours = {bucket: fill_of([bucket], theme) for bucket in BUCKET_CLASSES}
    for (a, first), (b, second) in itertools.combinations(colours.items(), 2):
        assert distance(first, second, vision) >= MIN_DISTANCE, (theme, vision, a, b)


@pytest.mark.parametrize("vision", MACHADO)
@pytest.mark.parametrize("theme", THEMES)
def test_the_three_shades_of_a_bucket_differ_by_at_least_10(theme, vision):
    for bucket in BUCKET_CLASSES:
        shades = [fill_of([bucket, f"tm-shade-{shade}"], theme) for shade in range(3)]
        for first, second in itertools.combinations(shades, 2):
            assert distance(first, second, vision) >= MIN_DISTANCE, (theme, vision, bucket, first, second)


# --- The built charts ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site_html(tmp_path_factory) -> list[str]:
    """The HTML of every page of the real site."""
    out = tmp_path_factory.mktemp("palette") / "site"
    build_site(SitePaths(ROOT / "content", ROOT / "templates", ROOT / "static", out), quiet=True, force=True)
    return [page.read_text(encoding="utf-8") for page in sorted(out.glob("*.html"))]


@pytest.fixture(scope="module")
def chart_svgs(site_html) -> list[str]:
    """Every chart SVG of the real site, both layouts (not the widgets' own SVGs)."""
    found = [svg for page in site_html for svg in re.findall(r"<svg [^>]*class=\"tm-chart.*?</svg>", page, re.S)]
    svgs = [svg for svg in found if 'class="tm-background"' in svg]  # builder/charts' (svg.py), not a widget's
    assert len(svgs) > 30
    return svgs


def bars(svg: str) -> list[list[tuple[str, ...]]]:
    """The class lists of each stacked bar's segments, left to right, in a page's chart: a page writes a segment as
    its box (a path of class tm-segment holding its tooltip, builder/page_minify.lean_segments), so a bar is the
    segments whose boxes start on one line (the same top edge), in the order they are drawn."""
    rows: dict[float, list[tuple[float, tuple[str, ...]]]] = {}
    for path in svg_element(svg).iter(f"{SVG}path"):
        classes = tuple(path.get("class", "").split())
        if "tm-segment" in classes:
            left, top = min(path_subpaths(path.get("d"))[0], key=lambda point: (point[1], point[0]))
            rows.setdefault(round(top, 2), []).append((left, classes))
    return [[classes for _, classes in sorted(row)] for _, row in sorted(rows.items())]


def adjacent_pairs(svgs: list[str]) -> set[tuple[tuple[str, ...], tuple[str, ...]]]:
    """Class lists of the segments that touch in a stacked bar, in every chart."""
    pairs = set()
    for svg in svgs:
        for stack in bars(svg):
            pairs.update(zip(stack, stack[1:]))
    return pairs


@pytest.mark.parametrize("vision", MACHADO)
@pytest.mark.parametrize("theme", THEMES)
def test_adjacent_parts_in_every_built_chart_differ_by_at_least_10(chart_svgs, theme, vision):
    pairs = adjacent_pairs(chart_svgs)
    # Cross-bucket pairs and parts of one bucket (the vocabulary chart stacks several activation parts) both occur.
    assert any(first[0] == second[0] for first, second in pairs)
    assert len({(first[0], second[0]) for first, second in pairs if first[0] != second[0]}) >= 6
    for first, second in pairs:
        found = distance(fill_of(first, theme), fill_of(second, theme), vision)
        assert found >= MIN_DISTANCE, (theme, vision, first, second, round(found, 1))


def test_parts_of_one_bucket_cycle_through_its_shades_in_the_vocabulary_chart(chart_svgs):
    vocabulary = next(svg for svg in chart_svgs if 'id="vocabulary-title"' in svg)
    root = svg_element(vocabulary)
    stack = [classes for classes in bars(vocabulary)[0] if classes[0] == "tm-bucket-activations"]
    assert len(stack) >= 5
    shades = [next(c for c in classes if c.startswith("tm-shade-")) for classes in stack]
    assert shades[:4] == ["tm-shade-0", "tm-shade-1", "tm-shade-2", "tm-shade-0"]
    # Each part also carries its name directly: a note per segment in the wide layout.
    notes = [t.text for t in root.iter(f"{SVG}text") if "tm-note" in t.get("class", "")]
    assert len(notes) >= len(stack)


@pytest.mark.parametrize("theme", THEMES)
def test_hatch_and_capacity_lines_keep_3_to_1_with_what_is_behind_them(chart_svgs, theme):
    """Each hatch and capacity line lies on a band of background colour (tm-halo) drawn just before it with the
    same path, wider, so what is behind the line is the background, whatever part is under the band."""
    background = SHEET.colour("--tm-bg", theme)
    for css in ("tm-overflow-hatch", "tm-capacity"):
        line = SHEET.resolve([css], theme)
        assert "stroke-opacity" not in line
        assert contrast(line["stroke"], background) >= MIN_CONTRAST, (theme, css)
    assert SHEET.resolve(["tm-halo"], theme)["stroke"] == background
    seen = {"tm-overflow-hatch": 0, "tm-capacity": 0}
    for svg in chart_svgs:
        paths = list(svg_element(svg).iter(f"{SVG}path"))
        for before, path in zip(paths, paths[1:]):
            css = path.get("class", "")
            if css in seen:
                seen[css] += 1
                assert before.get("class") == "tm-halo" and before.get("d") == path.get("d"), svg[:80]
                assert float(before.get("stroke-width")) >= float(path.get("stroke-width")) + 2
    assert seen["tm-overflow-hatch"] >= 5 and seen["tm-capacity"] >= 20


def test_widget_capacity_lines_lie_on_a_background_band(site_html, theme="light"):
    """The widgets' dashed capacity lines (bytes per parameter, memory budget, calculator; the page charts draw theirs
    as paths, above) each lie on a tm-halo line drawn just before them at the same place, at least 2 px wider
    (issue #18: the capacity line keeps 3:1 with what is behind it)."""
    default_width = float(SHEET.resolve(["tm-capacity"], theme).get("stroke-width", "1").rstrip("px"))
    place = re.compile(r'(x1|x2|y1|y2)="([^"]*)"')
    width = lambda tag, default: float((re.search(r'stroke-width="([^"]*)"', tag) or [None, default])[1])
    seen = 0
    for page in site_html:
        lines = re.findall(r"<line [^>]*>", page)
        for before, line in zip(lines, lines[1:]):
            if 'class="tm-capacity"' in line:
                seen += 1
                assert 'class="tm-halo' in before and place.findall(before) == place.findall(line), line
                assert width(before, 0) >= width(line, default_width) + 2, before
    assert seen >= 8
