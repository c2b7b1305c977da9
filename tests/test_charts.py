"""Charts: SVG breakdown charts drawn from hand-built Breakdowns (not the real model).

Each expected number is computed here from the bytes the test puts in, so a chart that drew
a different amount, the wrong unit or a stale label fails.
"""

from __future__ import annotations

import re
from fractions import Fraction
import statistics
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from builder.catalog import Gpu
from builder.charts import (
    Box,
    ChartBar,
    ChartSpec,
    Note,
    Words,
    combine_rules,
    format_amount,
    measure_text,
    Strokes,
    render_chart,
    spread_notes,
    standalone_svg,
)
from builder.charts.pathdata import absolute, relative, spelled_out
from builder.charts.svg import box_path, number, page_hatches, strokes_path
from builder.model.breakdown import Breakdown, Part, Rate
from builder.model.partnames import PART_NAMES
from builder.model.units import GB, GiB, MiB

SVG = "{http://www.w3.org/2000/svg}"
CSS_PATH = Path(__file__).resolve().parent.parent / "static" / "charts.css"
PARAMS = 7_000_000_000
H100 = Gpu("h100-sxm-80gb", "H100 SXM 80GB", 81559 * MiB, "80 GB")
A100_40 = Gpu("a100-40gb", "A100 SXM 40GB", 40960 * MiB, "40 GB")


def make_training(shards: int = 1, activation_bytes: int = 8 * GiB) -> Breakdown:
    """Mixed-precision Adam for 7B parameters: 16 B/param of model states plus activations."""
    return Breakdown(
        params=PARAMS,
        parts=(
            Part("weights", 2 * PARAMS, "2·P", "test", per_unit="2 B/param"),
            Part("master", 4 * PARAMS // shards, "4·P", "test", per_unit="4 B/param"),
            Part("gradients", 2 * PARAMS // shards, "2·P", "test", per_unit="2 B/param"),
            Part("optimizer/adam_m", 4 * PARAMS // shards, "4·P", "test", per_unit="4 B/param", rate=Rate(4, "param")),
            Part("optimizer/adam_v", 4 * PARAMS // shards, "4·P", "test", per_unit="4 B/param", rate=Rate(4, "param")),
            Part("activations/attention", activation_bytes // 2, "s·b·h", "test", per_unit="5 B/token/layer"),
            Part("activations/mlp", activation_bytes // 2, "s·b·h", "test"),
            Part("overhead/cuda_context", 600 * MiB, "fixed", "test", per_unit="fixed"),
        ),
    )


def make_serving(params: int = 1_000_000_000) -> Breakdown:
    """A small serving breakdown that fits on any listed GPU."""
    return Breakdown(
        params=params,
        parts=(
            Part("weights", 2 * params, "2·P", "test", per_unit="2 B/param"),
            Part("kv_cache", 3 * GiB, "2·L·s·h", "test", per_unit="128 KiB/token"),
        ),
    )


def make_spec(**changes) -> ChartSpec:
    """A two-bar training chart with two GPU lines; keyword arguments replace fields."""
    fields = dict(
        chart_id="train-7b",
        title="Training a 7B model: memory per GPU",
        description="",
        bars=(ChartBar("1 GPU", make_training()), ChartBar("ZeRO-3 / 8 GPUs", make_training(shards=8))),
        gpus=(A100_40, H100),
        example="Example: 7B params × (2 + 4 + 2 + 4 + 4) B = 112 GB = 104.3 GiB before activations.",
    )
    fields.update(changes)
    return ChartSpec(**fields)


def parse(svg: str) -> ElementTree.Element:
    """Parse chart markup (it must be well-formed XML on its own), each text given the font-size it inherits from
    the root where it names none, as a browser reads it."""
    root = ElementTree.fromstring(svg)
    for text in root.iter(f"{SVG}text"):
        text.attrib.setdefault("font-size", root.get("font-size"))
    return root


def parse_file(svg: str) -> ElementTree.Element:
    """Parse a downloadable file (standalone_svg: an XML declaration, then the chart)."""
    assert svg.startswith('<?xml version="1.0" encoding="UTF-8"?>\n')
    return ElementTree.fromstring(svg.split("\n", 1)[1])


def texts_of(root: ElementTree.Element, css: str = "") -> list[ElementTree.Element]:
    """Every <text>, or those whose class list contains `css`."""
    return [t for t in root.iter(f"{SVG}text") if not css or css in t.get("class", "").split()]


def strings_of(root: ElementTree.Element, css: str = "") -> list[str]:
    """The contents of those <text> elements."""
    return [t.text or "" for t in texts_of(root, css)]


def gib(n_bytes: int) -> str:
    """The amount as the test expects to read it in GiB."""
    return f"{n_bytes / GiB:.1f} GiB"


def path_box(data: str) -> tuple[float, float, float, float]:
    """x0, y0, x1, y1 of the points in path data (M, L, H, V and relative h and v commands; Q's points count)."""
    points = [point for line in polylines(data) for point in line]
    return min(x for x, _ in points), min(y for _, y in points), max(x for x, _ in points), max(y for _, y in points)


def polylines(data: str) -> list[list[tuple[float, float]]]:
    """The points of each subpath of path data: absolute M, L, Q, H and V commands and relative h and v, as a
    browser reads them (z ends a subpath)."""
    lines, x, y = [], 0.0, 0.0
    for command, arguments in re.findall(r"([MLQHVhvz])([^MLQHVhvz]*)", data):
        numbers = [float(n) for n in arguments.split()]
        if command == "z":
            continue
        if command in "Hh":
            x = numbers[0] + (x if command == "h" else 0)
            lines[-1].append((x, y))
        elif command in "Vv":
            y = numbers[0] + (y if command == "v" else 0)
            lines[-1].append((x, y))
        else:
            if command == "M":
                lines.append([])
            for x, y in zip(numbers[0::2], numbers[1::2]):
                lines[-1].append((x, y))
    return lines


def test_path_box_reads_boxes_and_lines():
    assert path_box("M10 82H110.3V104H10z") == (10, 82, 110.3, 104)
    assert path_box("M1 2L3 4M-5 6L7 8") == (-5, 2, 7, 8)
    assert path_box("M10 82h100.3v22H10z") == (10, 82, 110.3, 104)
    assert polylines("M1 2H3V4L5 6M-5 6L7 8") == [[(1, 2), (3, 2), (3, 4), (5, 6)], [(-5, 6), (7, 8)]]
    assert polylines("M1 2h2v-2H0") == [[(1, 2), (3, 2), (3, 0), (0, 0)]]


def segments_of(root: ElementTree.Element, chart_id: str, bar: int) -> dict[str, tuple[float, float, float, float]]:
    """Segment key -> box of the bar's segment paths, from the ids the chart gives them."""
    found = {}
    prefix = f"{chart_id}-bar{bar}-"
    for group in root.iter(f"{SVG}g"):
        if group.get("id", "").startswith(prefix):
            found[group.get("id")[len(prefix):]] = path_box(group.find(f"{SVG}path").get("d"))
    return found


# --- Determinism and structure -----------------------------------------------------------------


def test_two_renders_of_equal_specs_are_byte_identical():
    first = render_chart(make_spec())
    second = render_chart(make_spec())  # equal, freshly built objects
    assert first == second
    assert render_chart(make_spec(chart_id="other")) != first


def test_svg_starts_with_title_and_desc_and_is_labelled_by_them():
    root = parse(render_chart(make_spec(description="Two bars: 112.9 GiB and 33.0 GiB.")))
    title, desc = root[0], root[1]
    assert title.tag == f"{SVG}title" and title.text == "Training a 7B model: memory per GPU"
    assert desc.tag == f"{SVG}desc" and desc.text == "Two bars: 112.9 GiB and 33.0 GiB."
    assert root.get("role") == "img"
    assert root.get("aria-labelledby") == "train-7b-title train-7b-desc"
    assert title.get("id") == "train-7b-title" and desc.get("id") == "train-7b-desc"


def test_empty_description_is_written_from_the_numbers():
    root = parse(render_chart(make_spec()))
    desc = root[1].text
    assert f"1 GPU: Weights {gib(2 * PARAMS)} · 2 B/param" in desc
    assert f"sum of parts {gib(make_training().total)}" in desc
    assert "1 GPU DOESN'T FIT H100 SXM 80GB" in desc


def test_every_id_is_prefixed_with_the_chart_id_and_unique():
    root = parse(render_chart(make_spec()))
    ids = [element.get("id") for element in root.iter() if element.get("id")]
    assert len(ids) > 10
    assert all(i.startswith("train-7b-") for i in ids), [i for i in ids if not i.startswith("train-7b-")]
    assert len(ids) == len(set(ids))


def test_svg_has_its_natural_size_is_self_contained_and_free_of_inline_styles():
    svg = render_chart(make_spec())
    root = parse(svg)
    assert re.fullmatch(r"0 0 \d+ \d+", root.get("viewBox"))
    # Natural size, so text renders at its designed size; the page scrolls wide charts instead.
    _, _, width, height = root.get("viewBox").split()
    assert (root.get("width"), root.get("height")) == (width, height)
    assert "style=" not in svg and "<style" not in svg  # strict CSP: no inline styles
    assert re.search(r'<rect class="tm-background" width="(\d+)" height="(\d+)"', svg).groups() == (width, height)
    assert "href" not in svg and "@import" not in svg and "<image" not in svg
    # The one url(): the overflow hatch's pattern, the page's (svg.page_hatches: once a page, whatever its charts),
    # defined in an SVG that takes no room, with the tile of that hatch width, painted by charts.css as a chart is.
    assert re.findall(r"url\(([^)]*)\)", svg) == ["#tm-hatch-0_9"] and "<pattern" not in svg
    defs = parse(page_hatches(svg + svg))
    assert [p.get("id") for p in defs.iter(f"{SVG}pattern")] == ["tm-hatch-0_9"] and page_hatches(svg[:200]) == ""
    assert (defs.get("class"), defs.get("width"), defs.get("height"), defs.get("aria-hidden")) == (
        "tm-chart tm-defs", "0", "0", "true")
    assert [(p.get("class"), p.get("stroke-width")) for p in defs.iter(f"{SVG}path")] == [
        ("tm-halo", "3.3"), ("tm-overflow-hatch", "0.9")]
    assert not svg.startswith("<?xml")
    assert len(svg.encode()) < 25_000


def test_text_stays_text_with_no_font_embedded():
    svg = render_chart(make_spec())
    # The page's copy names no font (static/charts.css gives svg.tm-chart its stack); the file a reader downloads
    # names that stack once, on its root. No font file or glyph outlines are embedded in either.
    css = CSS_PATH.read_text(encoding="utf-8")
    stack = re.search(r"svg\.tm-chart \{[^}]*font-family: ([^;]+);", css).group(1)
    assert "font-family" not in svg
    standalone = standalone_svg(svg)
    assert parse_file(standalone).get("font-family") == stack.replace('"', "'")
    assert standalone.count("font-family") == 1
    for text in (svg, standalone):
        assert "<text" in text and "glyph" not in text and "<use" not in text and "@font-face" not in text


def test_both_themes_written_from_one_reading_are_each_themes_file():
    """figure_files writes the light and dark files from one reading of the markup (standalone_svgs): each is the
    file standalone_svg writes for its theme alone."""
    from builder.charts.standalone import standalone_svgs

    svg = render_chart(make_spec())
    files = standalone_svgs(svg)
    assert files == {"light": standalone_svg(svg, "light"), "dark": standalone_svg(svg, "dark")}
    assert files["light"] != files["dark"] and standalone_svgs(svg, ("dark",)) == {"dark": files["dark"]}


def test_text_size_is_said_once_on_the_page_and_on_every_text_in_a_download():
    """Every text inherits FONT_SIZE from the page copy's root; the download (cairo, other editors) names it on
    each text again, after its weight and before its class, and not on the root."""
    svg = render_chart(make_spec())
    page = ElementTree.fromstring(svg)
    assert page.get("font-size") == "12" and svg.count("font-size") == 1  # drawing.FONT_SIZE, the 12 px floor
    root = parse_file(standalone_svg(svg))
    texts = texts_of(root)
    assert root.get("font-size") is None and len(texts) > 20
    for text in texts:
        names = list(text.attrib)
        assert text.get("font-size") == "12"
        assert names.index("font-size") == names.index("class") - 1
        assert "font-weight" not in names or names.index("font-weight") == 0


def test_segments_leave_their_outline_width_to_the_page_and_a_download_writes_it_back():
    """Every bar segment is outlined at drawing.SEGMENT_EDGE, which the page's stylesheet gives it (the page's copy
    names no width on a segment; a segment drawn at another width would keep its own, which the rule leaves alone);
    the download writes it back where a box's width goes, after its path data."""
    from builder.charts.drawing import SEGMENT_EDGE

    svg = render_chart(make_spec())
    segments = [path for path in ElementTree.fromstring(svg).iter(f"{SVG}path")
                if "tm-segment" in path.get("class", "").split()]
    assert len(segments) > 5 and all("stroke-width" not in path.attrib for path in segments)
    css = CSS_PATH.read_text(encoding="utf-8")
    assert re.search(r"svg\.tm-chart \.tm-segment:not\(\[stroke-width\]\) \{ stroke-width: ([\d.]+)px; \}",
                     css).group(1) == f"{SEGMENT_EDGE:g}"
    written = [path for path in parse_file(standalone_svg(svg)).iter(f"{SVG}path")
               if "tm-segment" in path.get("class", "").split()]
    assert len(written) == len(segments)
    assert all(list(path.attrib)[:3] == ["d", "stroke-width", "class"] and path.get("stroke-width") == "0.5"
               for path in written)


def test_lines_and_rounded_boxes_step_along_the_axes_with_h_and_v_and_a_download_spells_them_as_l():
    """A page's line is H x / V y where it runs along an axis (the point L x y names, a number shorter); the
    download writes each step as L x y again, the same numbers."""
    lines = (((642.5, 89), (642.5, 106), (20, 106), (20, 116), (24, 116)), ((1, 2), (3.25, 4.5), (3.25, 4.5)))
    data = strokes_path(Strokes(lines, "tm-leader"))
    assert data == "M642.5 89V106H20V116H24M1 2L3.25 4.5H3.25"
    page = f'<svg xmlns="http://www.w3.org/2000/svg" font-size="12"><path d="{data}" class="tm-leader" /></svg>'
    path = parse_file(standalone_svg(page)).find(f"{SVG}path")
    assert path.get("d") == "M642.5 89L642.5 106L20 106L20 116L24 116M1 2L3.25 4.5L3.25 4.5"
    box = '<svg xmlns="http://www.w3.org/2000/svg" font-size="12"><path d="M10 82H110.3V104H10z" /></svg>'
    assert parse_file(standalone_svg(box)).find(f"{SVG}path").get("d") == "M10 82H110.3V104H10z"  # boxes keep H, V
    # A rounded box (the worked example's, 8 to 692 across, 676 to 720 down, corners of 5) steps along its sides.
    data = box_path(Box(8, 676, 684, 44, "tm-example-box", rounded=True))
    assert data == "M13 676H687Q692 676 692 681V715Q692 720 687 720H13Q8 720 8 715V681Q8 676 13 676z"
    page = f'<svg xmlns="http://www.w3.org/2000/svg" font-size="12"><path d="{data}" /></svg>'
    assert parse_file(standalone_svg(page)).find(f"{SVG}path").get("d") == (
        "M13 676L687 676Q692 676 692 681L692 715Q692 720 687 720L13 720Q8 720 8 715L8 681Q8 676 13 676z")


def test_page_steps_are_relative_where_shorter_and_a_download_gets_the_same_numbers_back():
    """h dx and v dy where shorter than H x and V y (a bar's height 'v22', a leader's last run 'h4') and both ends
    are whole or half units, which a browser's floating point adds exactly; the difference taken exactly, so the
    absolute numbers come back as written."""
    assert relative("M642.5 89V106H20V116H24") == "M642.5 89v17H20v10h4"
    assert relative("M10 82H18.36V104H10z") == "M10 82H18.36v22H10z"  # h8.36 would land near 18.36, not on it
    assert relative("M10 82H110.3V104H10z") == "M10 82H110.3v22H10z"  # h100.3 is no shorter
    assert relative("M13 676H687Q692 676 692 681V715") == "M13 676H687Q692 676 692 681v34"  # from the curve's end
    assert relative("M0.1 0.2H0.3V0.3") == "M0.1 0.2H0.3V0.3"  # a tie stays absolute
    assert absolute("M642.5 89v17H20v10h4") == "M642.5 89V106H20V116H24"
    assert absolute("M10 82h100.3v22H10zM5 5h-0.01") == "M10 82H110.3V104H10zM5 5H4.99"
    assert spelled_out("M642.5 89V106H20") == "M642.5 89L642.5 106L20 106"


@given(st.lists(st.tuples(st.sampled_from("HV"), st.integers(-100_000, 100_000)), min_size=1, max_size=8),
       st.integers(-100_000, 100_000), st.integers(-100_000, 100_000))
def test_absolute_undoes_relative_for_any_numbers_of_two_decimals(steps, x, y):
    def text(hundredths: int) -> str:
        return number(hundredths / 100)

    data = f"M{text(x)} {text(y)}" + "".join(command + text(value) for command, value in steps) + "z"
    assert absolute(relative(data)) == data


OPERANDS = {"M": 2, "L": 2, "H": 1, "V": 1, "Q": 4, "z": 0}


@given(st.lists(st.tuples(st.sampled_from("MLHVQz"), st.lists(st.integers(-100_000, 100_000), min_size=4, max_size=4)),
                max_size=8))
def test_path_data_without_the_commands_a_rewrite_changes_comes_back_as_it_is(steps):
    """pathdata's rewrites return data with none of the commands they rewrite as it is (pathdata.unchanged): the
    commands it reads, put back together, are the data itself."""
    from builder.charts.pathdata import commands, unchanged

    data = "".join(command + " ".join(number(value / 100) for value in values[:OPERANDS[command]])
                   for command, values in [("M", [0, 0, 0, 0])] + steps)
    for rewritten in ("HV", "hv"):
        if unchanged(data, rewritten):
            assert "".join(command + operands for command, operands, _, _ in commands(data)) == data
    if not any(c in data for c in "HVhv"):
        assert relative(data) == absolute(data) == spelled_out(data) == data


# --- Colours are classes ------------------------------------------------------------------------


def test_colours_are_classes_on_the_page_and_written_in_a_download():
    """Every colour is named by a class: the page's stylesheet paints it, per theme, and the page's copy carries
    no colour of its own (issue 14's page weight). The file a reader downloads has the light-theme colour
    static/charts.css gives that class written in as a presentation attribute."""
    svg = render_chart(make_spec(group_by="part"))
    assert not re.search(r"\b(rgb|hsl)a?\(", svg) and not re.search(r"#[0-9a-fA-F]{3}", svg)
    assert set(re.findall(r' (fill|stroke)="([^"]*)"', svg)) == {("fill", "none"), ("fill", "url(#tm-hatch-0_9)")}
    assert "paint-order" not in svg and "opacity" not in svg  # the text halo too is the stylesheet's
    css = CSS_PATH.read_text(encoding="utf-8")
    light, _ = read_theme_colours(css)
    root = parse_file(standalone_svg(svg))
    coloured = 0
    for element in root.iter():
        for attribute in ("fill", "stroke"):
            value = element.get(attribute)
            if value not in (None, "none"):
                coloured += 1
                assert element.get("class"), (element.tag, element.attrib)
                assert value in light.values() or re.search(rf"--tm-[a-z-]+-[12]:\s*{value};", css), value
    assert coloured > 50
    weights = next(p for p in root.iter(f"{SVG}path") if "tm-bucket-weights" in p.get("class", "").split())
    assert (weights.get("fill"), weights.get("stroke")) == (light["--tm-weights"], light["--tm-bg"])
    note = next(t for t in root.iter(f"{SVG}text") if "tm-note" in t.get("class", "").split())
    assert (note.get("fill"), note.get("stroke"), note.get("paint-order")) == (light["--tm-text"], light["--tm-bg"],
                                                                             "stroke")
    segment_classes = [g.find(f"{SVG}path").get("class") for g in parse(svg).iter(f"{SVG}g")]
    assert "tm-bucket-weights tm-shade-0 tm-segment" in segment_classes
    assert "tm-bucket-optimizer tm-shade-1 tm-segment" in segment_classes


def test_every_class_the_svg_uses_is_styled_in_charts_css():
    css = CSS_PATH.read_text(encoding="utf-8")
    defined = set(re.findall(r"\.(tm-[a-z0-9-]+)", css))
    specs = [make_spec(group_by="part"), make_spec(bars=(ChartBar("kv", make_serving()),), gpus=())]
    used = set()
    for spec in specs:
        svg = render_chart(spec)  # with the page's hatch patterns (svg.page_hatches), painted by the same rules
        for element in [*parse(svg).iter(), *(parse(page_hatches(svg)).iter() if page_hatches(svg) else ())]:
            used.update(element.get("class", "").split())
    # hooks for tests and page CSS, with no rule of their own
    hooks = {"tm-tick", "tm-axis-title", "tm-bar-label", "tm-bar-total", "tm-example", "tm-shade-0"}
    assert used - defined - hooks == set()
    assert {"tm-chart", "tm-bucket-weights", "tm-bucket-kv-cache", "tm-overflow-hatch", "tm-capacity"} <= used


def read_theme_colours(css: str) -> tuple[dict[str, str], dict[str, str]]:
    """The --tm-* custom properties of the light (:root) and dark (prefers-color-scheme) blocks."""
    dark_start = css.index("prefers-color-scheme: dark")
    light = dict(re.findall(r"(--tm-[a-z-]+):\s*(#[0-9a-fA-F]{6})", css[:dark_start]))
    dark = dict(re.findall(r"(--tm-[a-z-]+):\s*(#[0-9a-fA-F]{6})", css[dark_start:]))
    return light, dark


def contrast(foreground: str, background: str) -> float:
    """WCAG 2 contrast ratio of two #rrggbb colours."""

    def luminance(colour: str) -> float:
        channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
        linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    high, low = sorted((luminance(foreground), luminance(background)), reverse=True)
    return (high + 0.05) / (low + 0.05)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_text_colours_meet_wcag_aa_in_both_themes(theme):
    light, dark = read_theme_colours(CSS_PATH.read_text(encoding="utf-8"))
    colours = light if theme == "light" else dark
    assert set(light) == set(dark)  # every colour has a dark-theme value
    for text in ("--tm-text", "--tm-text-dim", "--tm-warning"):
        for background in ("--tm-bg", "--tm-example-bg"):
            assert contrast(colours[text], colours[background]) >= 4.5, (theme, text, background)
    # Lines and the capacity line are graphics: 3:1 (WCAG 1.4.11).
    for line in ("--tm-line", "--tm-capacity", "--tm-warning"):
        assert contrast(colours[line], colours["--tm-bg"]) >= 3.0, (theme, line)


# --- Numbers and labels -------------------------------------------------------------------------


def test_notes_name_each_bucket_with_its_amount_and_rule():
    spec = make_spec()
    notes = strings_of(parse(render_chart(spec)), "tm-note")
    one, eight = make_training(), make_training(shards=8)
    for breakdown in (one, eight):
        assert f"Weights {gib(breakdown.get('weights'))} · 2 B/param" in notes
        assert f"Master weights {gib(breakdown.get('master'))} · 4 B/param" in notes
        assert f"Gradients {gib(breakdown.get('gradients'))} · 2 B/param" in notes
        assert f"Optimizer {gib(breakdown.get('optimizer'))} · 8 B/param" in notes  # adam_m + adam_v
    assert "Optimizer 52.2 GiB · 8 B/param" in notes  # 8 B × 7e9 = 56e9 B = 52.15 GiB
    assert f"Activations {gib(8 * GiB)} · 5 B/token/layer" in notes
    assert f"Overhead {format_amount(600 * MiB, 'GiB')} · fixed" in notes
    assert "Overhead 0.59 GiB · fixed" in notes  # 600 MiB never reads as 0.0 / 0.6 GiB


def test_wide_notes_put_the_rule_on_a_second_line_when_the_column_has_room():
    parts = (
        Part("weights", 2 * PARAMS, "2·P", "test", per_unit="2 B/param (bf16, one copy per data-parallel rank)"),
        Part("gradients", 2 * PARAMS, "2·P", "test", per_unit="2 B/param (bf16)"),
    )
    small = Gpu("small", "Small 20GB", 20 * GiB, "20 GB")
    spec = make_spec(bars=(ChartBar("1 GPU", Breakdown(params=PARAMS, parts=parts)),), gpus=(small,))
    root = parse(render_chart(spec))
    notes = strings_of(root, "tm-note")
    assert notes == [
        "DOESN'T FIT Small 20GB", f"+{gib(4 * PARAMS - 20 * GiB)} over its usable memory",
        f"Weights {gib(2 * PARAMS)}", "2 B/param (bf16, one copy per…",  # cut to 40 characters at a word
    ]
    # A chart of one bar draws it wide (seed 003): the gradients' label fits inside its segment, the weights' does not.
    assert strings_of(root, "tm-inside") == ["Gradients", gib(2 * PARAMS), "2 B/param (bf16)"]
    rules = [t for t in texts_of(root, "tm-note") if t.text.startswith("2 B/param")]
    assert all(t.get("class") == "tm-text-dim tm-note" and t.get("font-size") == "12" for t in rules)  # dimmer, never smaller than 12
    assert overlapping(all_text_boxes(root)) == []


def test_long_bar_labels_wrap_under_their_bar():
    label = "autocast with fp32 master weights and bf16 activations"
    spec = make_spec(bars=tuple(ChartBar(label if i == 0 else f"bar {i}", make_training()) for i in range(3)))
    root = parse(render_chart(spec))
    lines = strings_of(root, "tm-bar-label")
    assert len(lines) > 4 and " ".join(lines[:-2]) == label
    assert overlapping(all_text_boxes(root)) == []


def test_group_by_part_gives_every_part_a_segment_and_a_note():
    spec = make_spec(group_by="part", bars=(ChartBar("1 GPU", make_training()),), gpus=())
    root = parse(render_chart(spec))
    notes = strings_of(root, "tm-note")
    inside = strings_of(root, "tm-inside")  # the one bar is wide: big parts are labelled inside their segment
    assert inside[3:6] == ["Adam first moment", gib(4 * PARAMS), "4 B/param"]  # reader-facing names (partnames)
    assert f"Gradients {gib(2 * PARAMS)} · 2 B/param" in notes  # too short a segment for three lines: a note
    assert f"MLP activations {gib(4 * GiB)}" in notes  # no rule given: none printed
    assert set(segments_of(root, "train-7b", 0)) == {
        "weights", "master", "gradients", "optimizer-adam_m", "optimizer-adam_v",
        "activations-attention", "activations-mlp", "overhead-cuda_context",
    }


def test_display_names_override_bucket_and_part_names():
    spec = make_spec(group_by="part", display_names=(("optimizer/adam_m", "Adam first moment"),))
    assert f"Adam first moment {gib(4 * PARAMS)} · 4 B/param" in strings_of(parse(render_chart(spec)), "tm-note")


def test_wide_charts_give_full_notes_to_the_last_bar_and_amounts_to_the_others():
    shards = (1, 2, 4, 8)
    bars = tuple(ChartBar(f"ZeRO-{i}", make_training(shards=n)) for i, n in enumerate(shards))
    auto = parse(render_chart(make_spec(bars=bars, gpus=(H100,))))
    notes = strings_of(auto, "tm-note")
    assert f"Optimizer {gib(8 * PARAMS // 8)} · 8 B/param" in notes  # ZeRO-3, the last bar
    assert gib(8 * PARAMS // 2) in notes and f"Optimizer {gib(8 * PARAMS // 2)} · 8 B/param" not in notes  # ZeRO-1
    assert notes[:3] == ["0.59 GiB", "8.0 GiB", "DOESN'T FIT"] and "H100 SXM 80GB" in notes  # ZeRO-0, top down
    full = parse(render_chart(make_spec(bars=bars, gpus=(H100,), notes="full")))
    assert f"Optimizer {gib(8 * PARAMS // 2)} · 8 B/param" in strings_of(full, "tm-note")
    width = lambda root: float(root.get("viewBox").split()[2])  # noqa: E731
    assert width(auto) < width(full) - 200
    assert overlapping(all_text_boxes(auto)) == [] and overlapping(all_text_boxes(full)) == []


def test_bar_labels_and_totals_under_the_bars():
    root = parse(render_chart(make_spec()))
    assert strings_of(root, "tm-bar-label") == ["1 GPU", "ZeRO-3 / 8 GPUs"]
    assert strings_of(root, "tm-bar-total") == [
        f"{gib(make_training().total)} sum of parts",
        f"{gib(make_training(shards=8).total)} sum of parts",
    ]


def test_segment_titles_give_name_and_amount_on_hover():
    root = parse(render_chart(make_spec()))
    group = next(g for g in root.iter(f"{SVG}g") if g.get("id") == "train-7b-bar0-optimizer")
    title = group.find(f"{SVG}title").text
    assert title.startswith(f"1 GPU: Optimizer {gib(8 * PARAMS)} · 8 B/param")
    assert f"Adam first moment: {gib(4 * PARAMS)}" in title


def test_gb_charts_divide_by_ten_to_the_nine_and_say_so():
    spec = make_spec(unit="GB", gpus=())
    root = parse(render_chart(spec))
    notes = strings_of(root, "tm-note")
    assert f"Weights {2 * PARAMS / GB:.1f} GB · 2 B/param" in notes  # 14.0 GB, not 13.0
    assert "Weights 14.0 GB · 2 B/param" in notes
    assert not any("GiB" in note for note in notes)
    assert strings_of(root, "tm-axis-title") == ["Memory per GPU (GB = 10⁹ bytes)"]


def test_axis_title_states_the_binary_unit():
    assert strings_of(parse(render_chart(make_spec())), "tm-axis-title") == ["Memory per GPU (GiB = 2³⁰ bytes)"]


def test_example_box_holds_the_whole_example_text():
    spec = make_spec()
    root = parse(render_chart(spec))
    lines = strings_of(root, "tm-example")
    assert " ".join(lines).split() == spec.example.split()
    assert not strings_of(parse(render_chart(make_spec(example=""))), "tm-example")


# --- Capacity lines and overflow ----------------------------------------------------------------


def test_capacity_lines_are_dashed_and_labelled_with_usable_memory():
    root = parse(render_chart(make_spec()))
    lines = [p for p in root.iter(f"{SVG}path") if p.get("class") == "tm-capacity"]
    assert len(lines) == 2 and all(p.get("stroke-dasharray") for p in lines)
    labels = strings_of(root, "tm-capacity-label")
    # top to bottom: the bigger GPU's line is higher
    assert labels == ["H100 SXM 80GB", f"{gib(81559 * MiB)} usable", "A100 SXM 40GB", f"{gib(40960 * MiB)} usable"]
    assert "79.6 GiB usable" in labels


def overflow_marks(root: ElementTree.Element) -> tuple[list[str], int]:
    """The DOESN'T FIT texts and the number of hatches: areas filled with the page's hatch pattern, and hatches of
    one line (a sliver of overflow), which are drawn as that line."""
    marks = [t for t in strings_of(root) if "DOESN'T FIT" in t]
    hatches = [p for p in root.iter(f"{SVG}path") if p.get("class") in ("tm-overflow-area", "tm-overflow-hatch")]
    return marks, len(hatches)


def test_overflow_is_hatched_and_named_exactly_where_a_bar_exceeds_a_line():
    spec = make_spec()
    total = make_training().total  # 112.9 GiB: over both lines; the ZeRO-3 bar (33 GiB) fits both
    marks, hatches = overflow_marks(parse(render_chart(spec)))
    assert marks == [
        f"DOESN'T FIT A100 SXM 40GB (+{gib(total - A100_40.usable_bytes)})",
        f"DOESN'T FIT H100 SXM 80GB (+{gib(total - H100.usable_bytes)})",
    ]
    assert hatches == 1  # one hatched region, above the lowest line it crosses


def test_hatch_starts_at_the_lowest_exceeded_line_and_ends_at_the_bar_top():
    root = parse(render_chart(make_spec()))
    hatch = next(p for p in root.iter(f"{SVG}path") if p.get("class") == "tm-overflow-area")  # what it fills
    a100_line = next(p for p in root.iter(f"{SVG}path") if p.get("class") == "tm-capacity" and p is not None)
    bar = segments_of(root, "train-7b", 0)
    x0, y0, x1, y1 = path_box(hatch.get("d"))
    shift = float(re.fullmatch(r"translate\(([-\d.]+)\)", hatch.get("transform", "translate(0)")).group(1))
    x0, x1 = x0 + shift, x1 + shift  # drawn that far left, moved right to the pattern's phase
    line_y = path_box(a100_line.get("d"))[1]
    assert y1 == pytest.approx(line_y, abs=0.6)
    assert y0 == pytest.approx(min(box[1] for box in bar.values()), abs=0.6)
    assert x0 >= bar["weights"][0] - 0.01 and x1 <= bar["weights"][2] + 0.01


def test_nothing_about_fitting_when_every_bar_fits():
    spec = make_spec(bars=(ChartBar("1 GPU", make_serving()),))
    marks, hatches = overflow_marks(parse(render_chart(spec)))
    assert marks == [] and hatches == 0


def test_a_bar_exactly_at_capacity_fits():
    exact = Breakdown(params=1, parts=(Part("weights", H100.usable_bytes, "all", "test"),))
    marks, hatches = overflow_marks(parse(render_chart(make_spec(bars=(ChartBar("exact", exact),), gpus=(H100,)))))
    assert marks == [] and hatches == 0
    over = Breakdown(params=1, parts=(Part("weights", H100.usable_bytes + 1, "all", "test"),))
    marks, hatches = overflow_marks(parse(render_chart(make_spec(bars=(ChartBar("over", over),), gpus=(H100,)))))
    assert marks == ["DOESN'T FIT H100 SXM 80GB (+<0.0001 GiB)"] and hatches == 1


def test_no_gpu_lines_means_no_fitting_marks_at_all():
    svg = render_chart(make_spec(gpus=()))
    root = parse(svg)
    assert overflow_marks(root) == ([], 0)
    assert "tm-capacity" not in svg and "usable" not in svg


# --- Geometry -----------------------------------------------------------------------------------


def test_segments_are_drawn_to_scale_across_bars():
    spec = make_spec(group_by="part")
    root = parse(render_chart(spec))
    ratios = []
    for index, bar in enumerate(spec.bars):
        boxes = segments_of(root, spec.chart_id, index)
        for part in bar.breakdown.parts:
            x0, y0, x1, y1 = boxes[part.name.replace("/", "-")]
            ratios.append((y1 - y0) / part.bytes)
    assert len(ratios) == 16
    assert max(ratios) == pytest.approx(min(ratios), rel=0.01)  # coordinates are rounded to 0.01


def test_segments_stack_without_gaps_in_bucket_order():
    root = parse(render_chart(make_spec()))
    boxes = segments_of(root, "train-7b", 0)
    order = ["weights", "master", "gradients", "optimizer", "activations", "overhead"]
    assert list(boxes) == order
    for lower, upper in zip(order, order[1:]):
        assert boxes[upper][3] == pytest.approx(boxes[lower][1], abs=0.01)


def text_box(text: ElementTree.Element) -> tuple[float, float, float, float]:
    """x0, top, x1, bottom of a horizontal <text>, from its baseline, font size and measured width."""
    x, y, size = float(text.get("x")), float(text.get("y")), float(text.get("font-size"))
    width = measure_text(text.text, size, text.get("font-weight") == "700")
    left = {"start": x, "middle": x - width / 2, "end": x - width}[text.get("text-anchor", "start")]
    return (left, y - 0.8 * size, left + width, y + 0.25 * size)


def note_boxes(root: ElementTree.Element) -> list[tuple[float, float, float, float]]:
    """Boxes of the note lines and capacity labels."""
    return [text_box(t) for t in texts_of(root, "tm-note") + texts_of(root, "tm-capacity-label")]


def all_text_boxes(root: ElementTree.Element) -> list[tuple[float, float, float, float]]:
    """Boxes of every horizontal text (all but the rotated axis title)."""
    return [text_box(t) for t in texts_of(root) if not t.get("transform")]


def overlapping(boxes: list[tuple[float, float, float, float]]) -> list[tuple]:
    """Pairs of boxes that overlap."""
    return [
        (a, b) for i, a in enumerate(boxes) for b in boxes[i + 1 :]
        if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]
    ]


def make_many_tiny_parts(count: int) -> Breakdown:
    """One big part and `count` parts of a few MiB each, all under one bar."""
    keys = [key for key in PART_NAMES if key.startswith("activations/")]  # real parts: charts name them
    assert count <= len(keys)
    tiny = tuple(
        Part(keys[i], (i + 1) * MiB, "x", "test", per_unit=f"{i + 1} B/token")
        for i in range(count)
    )
    return Breakdown(params=1, parts=(Part("weights", 60 * GiB, "x", "test", per_unit="2 B/param"),) + tiny)


def test_notes_never_overlap_even_for_many_tiny_parts():
    bars = (ChartBar("tiny", make_many_tiny_parts(24)), ChartBar("1 GPU", make_training()))
    spec = make_spec(group_by="part", bars=bars)
    svg = render_chart(spec)
    root = parse(svg)
    boxes = note_boxes(root)
    assert len(boxes) == 25 + 1 + 8 + 2 + 4  # parts of both bars, three DOESN'T FIT lines, two two-line capacity labels
    assert overlapping(boxes) == []
    assert overlapping(all_text_boxes(root)) == []  # nor with ticks, bar labels or the example
    width, height = (float(v) for v in root.get("viewBox").split()[2:])
    assert all(0 <= x0 and x1 <= width and 0 <= top and bottom <= height for x0, top, x1, bottom in boxes)


def test_every_text_fits_inside_the_view_box():
    root = parse(render_chart(make_spec(group_by="part")))
    width, height = (float(v) for v in root.get("viewBox").split()[2:])
    boxes = all_text_boxes(root)
    assert len(boxes) == len(texts_of(root)) - 1  # all but the rotated axis title
    for x0, top, x1, bottom in boxes:
        assert 0 <= x0 and x1 <= width and 0 <= top and bottom <= height
    assert overlapping(boxes) == []


def test_leader_lines_start_at_segment_midpoints():
    spec = make_spec(bars=(ChartBar("tiny", make_many_tiny_parts(12)),), gpus=(), group_by="part")
    root = parse(render_chart(spec))
    boxes = segments_of(root, spec.chart_id, 0)
    leaders = next(p for p in root.iter(f"{SVG}path") if p.get("class") == "tm-leader").get("d")
    starts = [float(y) for y in re.findall(r"M-?[\d.]+ (-?[\d.]+)", leaders)]
    assert strings_of(root, "tm-inside")[0] == "Weights"  # the big part is labelled inside, with no leader
    midpoints = sorted((box[1] + box[3]) / 2 for key, box in boxes.items() if key != "weights")
    assert sorted(starts) == pytest.approx(midpoints, abs=0.02)


# --- Helpers ------------------------------------------------------------------------------------


def test_spread_notes_keeps_order_and_leaves_no_overlap():
    words = (Words(0, 0, "x", "tm-text"),)
    notes = [Note(100.0, words) for _ in range(5)] + [Note(20.0, words)]
    placed = spread_notes(notes, 0.0, 300.0)
    centers = [note.center for note in placed]
    assert centers == sorted(centers)
    assert all(b - a >= 14 for a, b in zip(centers, centers[1:]))
    assert centers[0] == pytest.approx(20.0)  # an isolated note stays on its anchor
    assert statistics.mean(centers[1:]) == pytest.approx(100.0)  # a crowd centres on its anchor


def test_spread_notes_stays_within_bounds_when_there_is_room():
    words = (Words(0, 0, "x", "tm-text"),)
    placed = spread_notes([Note(299.0, words) for _ in range(4)], 0.0, 300.0)
    assert max(note.center + note.height / 2 for note in placed) <= 300.0


def test_format_amount_never_hides_a_small_amount():
    assert format_amount(13 * GiB, "GiB") == "13.0 GiB"
    assert format_amount(600 * MiB, "GiB") == "0.59 GiB"
    assert format_amount(20 * MiB, "GiB") == "0.02 GiB"  # 0.0195
    assert format_amount(0.96 * GiB, "GiB") == "0.96 GiB"  # as the data table prints it
    assert format_amount(3 * MiB, "GiB") == "0.003 GiB"  # 0.0029: two decimals would say 0.00
    assert format_amount(0, "GiB") == "0.0 GiB"
    assert format_amount(2 * 10**9, "GB") == "2.0 GB"


def rated(words: str, amount: float | None = None, per: str = "param") -> Part:
    """A part whose rule is `words`, and the rate `amount` B/`per` as numbers (None: words only)."""
    return Part("optimizer/adam_m", 1, "x", "test", per_unit=words,
                rate=None if amount is None else Rate(Fraction(amount), per))


def test_combine_rules_adds_rates_as_numbers_and_marks_the_rest():
    # ZeRO (Rajbhandari et al. 2020, section 3.1): mixed-precision Adam keeps an fp32 copy of the parameters, the
    # momentum and the variance, K = 12 bytes per parameter.
    fp32_adam = [rated("4 B/param (fp32 master copy)", 4), rated("4 B/param (fp32 first moment)", 4),
                 rated("4 B/param (fp32 second moment)", 4)]
    assert combine_rules(fp32_adam) == "12 B/param"
    # bitsandbytes' 8-bit Adam (Dettmers et al. 2021, arXiv:2110.02861; bitsandbytes optimizer.py): a uint8 state
    # plus an fp32 absmax per 256-element block, 1 + 4/256 = 1.015625 B each. The amounts are added, not the words:
    # the two states make 2.03125 B/param (printed '2.03'), where adding the words '1.02' would give 2.04.
    assert combine_rules([rated("1.02 B/param", 1 + Fraction(4, 256))] * 2) == "2.03 B/param"
    assert combine_rules([rated("4 B/param", 4), rated("2 B/token", 2, "token")]) == "4 B/param + 2 B/token"
    # Llama-2-7B's KV cache in fp16 (config.json: 32 layers, hidden 4096): K and V, 2 x 32 x 4096 x 2 B = 512 KiB per
    # token; two 256 KiB/token rates are added in bytes and shown in KiB from 1 KiB up.
    kv = [rated("256.0 KiB/token", 256 * 1024, "token"), rated("256.0 KiB/token", 256 * 1024, "token")]
    assert combine_rules(kv + [rated("2 B per token per vocabulary entry")]) == "512.0 KiB/token + …"
    assert combine_rules([rated("2 B/param (bf16)", 2), rated("")]) == "2 B/param (bf16)"  # one rule: its words
    assert combine_rules([rated(""), rated("")]) == ""


def test_long_rules_are_shortened_in_notes_and_given_whole_in_tooltips():
    rule = "2 blocks + root unit + 1 block, each 2 B/param of the largest layer (bf16)"
    breakdown = Breakdown(params=1, parts=(Part("comm/gathered_params", 3 * GiB, "x", "test", per_unit=rule),))
    spec = make_spec(bars=(ChartBar("1 GPU", breakdown),), gpus=(), group_by="part")
    root = parse(render_chart(spec))
    # too wide for one line, so the rule takes a second line of its own
    assert strings_of(root, "tm-note") == ["Gathered parameters 3.0 GiB", "2 blocks + root unit + 1 block, each 2…"]
    assert rule in next(g for g in root.iter(f"{SVG}g") if g.get("id")).find(f"{SVG}title").text


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(unit="GB10"), "unit"),
        (dict(group_by="layer"), "group_by"),
        (dict(chart_id="1 bad id"), "chart_id"),
        (dict(bars=()), "bars"),
        (dict(notes="some"), "notes"),
    ],
)
def test_bad_specs_are_refused_naming_the_field(changes, message):
    with pytest.raises(ValueError, match=message):
        render_chart(make_spec(**changes))


def test_overflow_follows_the_need_not_the_sum():
    """Issue 13: a bar whose sum of parts fits an H100 but whose step peaks above it gets the peak's mark, the
    DOESN'T FIT note and the hatch up to the peak; the same bar judged by its sum would fit."""
    sharded = make_training(shards=8)
    need = H100.usable_bytes + 3 * GiB
    assert sharded.total < H100.usable_bytes < need
    root = parse(render_chart(make_spec(bars=(ChartBar("ZeRO-3", sharded, need=need),), gpus=(H100,), notes="full")))
    notes = strings_of(root, "tm-note")
    assert f"peak of a step {gib(need)}" in notes
    assert "DOESN'T FIT H100 SXM 80GB (+3.0 GiB)" in notes
    assert strings_of(root, "tm-bar-total") == [f"{gib(sharded.total)} sum of parts"]
    assert [e for e in root.iter() if "tm-peak-line" in (e.get("class") or "")]
    assert "peak of a step" in root[1].text and "DOESN'T FIT H100 SXM 80GB (3.0 GiB over)" in root[1].text
    # Judged by the sum (no need given), the same bar fits: the sum alone would have said "fits".
    plain = parse(render_chart(make_spec(bars=(ChartBar("ZeRO-3", sharded),), gpus=(H100,), notes="full")))
    assert not any("DOESN'T FIT" in n for n in strings_of(plain, "tm-note"))


# --- Rows layout and the page's two layouts (issue 18) -------------------------------------------


def test_a_page_figure_holds_a_wide_and_a_narrow_layout_that_fit_their_columns():
    from builder.charts import NARROW_WIDTH, WIDE_WIDTH, render_figure

    svg = render_figure(make_spec(group_by="part"))
    wide, narrow = (parse(part) for part in svg.split("\n<svg")[0:1] + ["<svg" + svg.split("\n<svg", 1)[1]])
    assert wide.get("class") == "tm-chart tm-chart-wide" and narrow.get("class") == "tm-chart tm-chart-narrow"
    assert float(wide.get("width")) <= WIDE_WIDTH and float(narrow.get("width")) == NARROW_WIDTH == 288
    ids = [e.get("id") for root in (wide, narrow) for e in root.iter() if e.get("id")]
    assert len(ids) == len(set(ids)) and all(i.startswith("train-7b-narrow-") for e in narrow.iter() if (i := e.get("id")))
    # 12 px is the floor: the narrow layout is never scaled down, the wide one is shown at its natural size.
    assert {t.get("font-size") for root in (wide, narrow) for t in texts_of(root)} == {"12"}


@pytest.mark.parametrize("width", [288, 700])
def test_rows_layout_capacity_lines_never_cross_a_text(width):
    """Issue 19 (the reference diagram's rule): a dashed capacity line is broken where a label or note sits across
    it, so it never runs through words."""
    root = parse(render_chart(make_spec(group_by="part"), "rows", width))
    boxes = all_text_boxes(root)
    crossed = []
    for line in (e for e in root.iter() if e.tag.endswith("path") and "tm-capacity" in (e.get("class") or "")):
        for (x0, y0), (x1, y1) in (pair for points in polylines(line.get("d")) for pair in zip(points, points[1:])):
            crossed += [box for box in boxes if x0 == x1 and box[0] < x0 < box[2] and box[1] < max(y0, y1)
                        and min(y0, y1) < box[3]]
    assert crossed == []


@pytest.mark.parametrize("width", [288, 700])
def test_rows_layout_keeps_every_text_inside_and_apart(width):
    root = parse(render_chart(make_spec(group_by="part"), "rows", width))
    assert root.get("viewBox").split()[2] == str(width)
    boxes = all_text_boxes(root)
    assert len(boxes) == len(texts_of(root))  # nothing is rotated in the rows layout
    for x0, top, x1, bottom in boxes:
        assert 0 <= x0 and x1 <= width and 0 <= top and bottom <= float(root.get("viewBox").split()[3])
    assert overlapping(boxes) == []


def test_rows_layout_names_amounts_and_what_does_not_fit():
    spec = make_spec()
    root = parse(render_chart(spec, "rows", 288))
    notes = strings_of(root, "tm-note")
    training, sharded = make_training(), make_training(shards=8)
    # No label fits inside a segment at 288 units, so each is a note on a leader line, the rightmost segment's on top.
    assert strings_of(root, "tm-inside") == []
    assert notes == [
        "Overhead 0.59 GiB · fixed", f"Activations {gib(8 * GiB)} · 5 B/token/layer",
        f"Optimizer {gib(8 * PARAMS)} · 8 B/param", f"Gradients {gib(2 * PARAMS)} · 2 B/param",
        f"Master weights {gib(4 * PARAMS)} · 4 B/param", f"Weights {gib(2 * PARAMS)} · 2 B/param",
        "DOESN'T FIT A100 SXM 40GB", f"+{gib(training.total - A100_40.usable_bytes)} over",
        "DOESN'T FIT H100 SXM 80GB", f"+{gib(training.total - H100.usable_bytes)} over",
        "Overhead 0.59 GiB · fixed", f"Activations {gib(8 * GiB)} · 5 B/token/layer",
        f"Optimizer {gib(8 * PARAMS // 8)} · 8 B/param", f"Gradients {gib(2 * PARAMS // 8)} · 2 B/param",
        f"Master weights {gib(4 * PARAMS // 8)} · 4 B/param", f"Weights {gib(2 * PARAMS)} · 2 B/param",
    ]
    assert sharded.total < A100_40.usable_bytes  # so the second bar has no DOESN'T FIT
    labels = strings_of(root, "tm-capacity-label")
    assert labels == [f"A100 SXM 40GB: {gib(A100_40.usable_bytes)} usable", f"H100 SXM 80GB: {gib(H100.usable_bytes)} usable"]
    # Segments of one bar are to scale: weights (2 B/param) are half the master copy (4 B/param).
    segments = segments_of(root, "train-7b", 0)
    weights, master = segments["weights"], segments["master"]
    assert (master[2] - master[0]) == pytest.approx(2 * (weights[2] - weights[0]), abs=0.05)
    assert weights[2] == pytest.approx(master[0], abs=0.01)  # stacked left to right without gaps
