"""Issue 19, section 2: seed 003's reference diagram, the label-placement rule, and capacity lines that never cross a
note, checked on every chart of the built site.

Seed 003 is a hand-drawn "Training Memory Breakdown (per GPU)" whose boxed example reads "7B params, FP32 Adam =
7B * (4+4+4+4) = 112 GB just for params/grads/optimizer". The same figure is in EleutherAI's Transformer Math 101
(Anthony, Biderman, Schoelkopf 2023: fp32 weights 4 bytes, gradients 4 bytes, Adam 8 bytes per parameter) and follows
from Kingma & Ba 2014 (Adam keeps a first and a second moment per parameter).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from builder.charts import (
    Callout,
    ChartBar,
    ChartSpec,
    fits_inside,
    measure_text,
    render_chart,
    stack_callouts,
)
from builder.model import Config, estimate
from builder.model.breakdown import Breakdown, Part
from builder.model.units import GB, GiB
from tests.html_tags import path_subpaths, svg_element

SVG = "{http://www.w3.org/2000/svg}"
SEVEN_B = 7_000_000_000


def text_box(text: ElementTree.Element, inherited: str) -> tuple[float, float, float, float]:
    """x0, top, x1, bottom of a horizontal <text>, from its baseline, font size (its own, else the `inherited` one
    of the chart's root) and measured width (DejaVu Sans, a wide font: browsers' system fonts are narrower, so the
    box errs large)."""
    x, y, size = float(text.get("x")), float(text.get("y")), float(text.get("font-size", inherited))
    width = measure_text(text.text or "", size, text.get("font-weight") == "700")
    left = {"start": x, "middle": x - width / 2, "end": x - width}[text.get("text-anchor", "start")]
    return left, y - 0.8 * size, left + width, y + 0.25 * size


def text_boxes(root: ElementTree.Element) -> list[tuple[tuple[float, float, float, float], str]]:
    """Every horizontal text's box and words (the rotated axis title is left out: it sits outside the plot)."""
    return [(text_box(t, root.get("font-size")), t.text or "") for t in root.iter(f"{SVG}text")
            if not t.get("transform")]


def capacity_segments(root: ElementTree.Element) -> list[tuple[float, float, float, float, float]]:
    """Each straight piece of every dashed capacity line: x0, y0, x1, y1 and half the stroke width."""
    pieces = []
    for path in root.iter(f"{SVG}path"):
        if "tm-capacity" not in (path.get("class") or "").split():
            continue
        assert path.get("stroke-dasharray"), "a capacity line is dashed"
        half = float(path.get("stroke-width", "1")) / 2
        for points in path_subpaths(path.get("d")):
            pieces += [(x0, y0, x1, y1, half) for (x0, y0), (x1, y1) in zip(points, points[1:])]
    return pieces


def crossings(root: ElementTree.Element) -> list[str]:
    """Texts that a capacity line runs through (capacity lines are horizontal or vertical)."""
    found = []
    for x0, y0, x1, y1, half in capacity_segments(root):
        for (left, top, right, bottom), words in text_boxes(root):
            if (min(x0, x1) - half < right and left < max(x0, x1) + half
                    and min(y0, y1) - half < bottom and top < max(y0, y1) + half):
                found.append(f"{words!r} at ({left:.1f}, {top:.1f}) by the line ({x0}, {y0})-({x1}, {y1})")
    return found


def page_charts(html: str) -> list[ElementTree.Element]:
    """Every chart SVG (wide and narrow) inlined in a page (not the page's hatch patterns, class tm-defs, which
    draw nothing)."""
    return [svg_element(m.group()) for m in re.finditer(r'<svg[^>]*class="tm-chart[^"]*".*?</svg>', html, re.S)
            if "tm-defs" not in m.group().split(">", 1)[0]]


# --- Seed 003's numbers, as the model works them out ------------------------------------------------------------


def test_seed_003_reference_diagram_numbers_come_from_the_model():
    """seed 003 reference diagram: 7B parameters, fp32 with Adam = 7B x (4 + 4 + 4 + 4) bytes = 112 GB (Transformer
    Math 101, Anthony et al. 2023; Adam's two moments, Kingma & Ba 2014): weights 28 GB, gradients 28 GB, Adam m + v
    56 GB; 112 GB is 104.3 GiB."""
    breakdown = estimate(Config(params=SEVEN_B, precision="fp32", optimizer="adam"))
    buckets = breakdown.buckets()
    assert buckets == {"weights": 28 * GB, "gradients": 28 * GB, "optimizer": 56 * GB}
    assert breakdown.total == 112 * GB
    assert round(breakdown.total / GiB, 1) == 104.3
    assert [round(buckets[b] / GiB, 1) for b in ("weights", "gradients", "optimizer")] == [26.1, 26.1, 52.2]


def seven_b_spec(**changes) -> ChartSpec:
    """The reference diagram as the model-states page declares it: GB, with GiB beside, activations as an aside."""
    fields = dict(chart_id="seven-b", title="7B fp32 Adam", description="", unit="GB", also_unit="GiB",
                  bars=(ChartBar("7B parameters, fp32, Adam",
                                 estimate(Config(params=SEVEN_B, precision="fp32", optimizer="adam"))),),
                  aside="Activations: not counted here.")
    fields.update(changes)
    return ChartSpec(**fields)


@pytest.mark.parametrize("layout, width", [("columns", 700), ("rows", 700), ("rows", 288)])
def test_seed_003_reference_diagram_reads_112_gb_and_104_3_gib(layout, width):
    """seed 003 reference diagram: every amount in GB (the seed's unit) with GiB beside, in both layouts."""
    root = ElementTree.fromstring(render_chart(seven_b_spec(), layout, width))
    words = " ".join(t.text or "" for t in root.iter(f"{SVG}text"))
    assert "112.0 GB (104.3 GiB) sum of parts" in words
    assert words.count("28.0 GB (26.1 GiB)") == 2 and "56.0 GB (52.2 GiB)" in words
    assert "Activations: not counted here." in words
    assert crossings(root) == []


def test_seed_003_reference_diagram_labels_sit_inside_its_wide_bar():
    """seed 003 reference diagram: in the wide layout the one bar is drawn wide and every segment's label fits
    inside it, as the seed's do; the activations' note (an unquantified aside) is on a leader line."""
    root = ElementTree.fromstring(render_chart(seven_b_spec()))
    inside = [t.text for t in root.iter(f"{SVG}text") if "tm-inside" in t.get("class", "").split()]
    assert inside == ["Weights", "28.0 GB (26.1 GiB)", "4 B/param (fp32)",
                      "Gradients", "28.0 GB (26.1 GiB)", "4 B/param (fp32)",
                      "Optimizer", "56.0 GB (52.2 GiB)", "8 B/param"]
    notes = [t.text for t in root.iter(f"{SVG}text") if "tm-note" in t.get("class", "").split()]
    assert notes[0] == "Activations: not counted here."


# --- The label-placement rule ------------------------------------------------------------------------------------


def test_a_label_fits_inside_only_when_its_measured_width_and_height_do():
    label = ("Weights 28.0 GB",)
    width = measure_text(label[0], 12)
    assert fits_inside(label, width + 20, 22)
    assert not fits_inside(label, width, 22)  # no room for its tag's padding
    assert not fits_inside(label, width + 20, 12)  # too short for a line of 12 px text
    assert not fits_inside(("W", "x", "y"), 200, 40)  # three lines need 48 units and more


def two_part_bar(small: int) -> Breakdown:
    """A big segment whose label fits and a small one whose label cannot."""
    return Breakdown(params=1, parts=(Part("weights", 60 * GiB, "x", "test", per_unit="2 B/param"),
                                      Part("gradients", small, "x", "test", per_unit="2 B/param")))


@pytest.mark.parametrize("layout, width", [("rows", 288), ("rows", 700), ("columns", 700)])
def test_a_label_wider_than_its_segment_goes_to_a_leader_line(layout, width):
    spec = ChartSpec(chart_id="two", title="two", description="", bars=(ChartBar("one", two_part_bar(GiB // 2)),),
                     notes="full")
    root = ElementTree.fromstring(render_chart(spec, layout, width))
    inside = " ".join(t.text for t in root.iter(f"{SVG}text") if "tm-inside" in t.get("class", "").split())
    notes = " ".join(t.text for t in root.iter(f"{SVG}text") if "tm-note" in t.get("class", "").split())
    assert "Weights" in inside and "Gradients" not in inside
    assert "Gradients 0.50 GiB" in notes and "Weights" not in notes
    leaders = [p for p in root.iter(f"{SVG}path") if p.get("class") == "tm-leader"]
    assert len(leaders) == 1


def test_stacked_callouts_never_overlap_and_no_leader_crosses_another_callout():
    callouts = [Callout(x, f"Part {i} {'long words ' * (i % 4)}· {i} B/param", "tm-text tm-note", "tm-bucket-weights")
                for i, x in enumerate([12.0, 15.0, 60.0, 61.0, 140.0, 250.0, 279.0])]
    items, bottom = stack_callouts(callouts, 8, 280, 40, 46)
    words = [item for item in items if hasattr(item, "text")]
    boxes = []
    for w in words:
        width = measure_text(w.text, w.size)
        boxes.append((w.x, w.y - 0.8 * w.size, w.x + width, w.y + 0.25 * w.size))
        assert 8 <= w.x and w.x + width <= 280
    assert not [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:]
                if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]]
    leaders = next(item for item in items if hasattr(item, "lines")).lines
    assert len(leaders) == len(callouts)
    pieces = [(p, q) for line in leaders for p, q in zip(line, line[1:])]
    for (x0, y0), (x1, y1) in pieces:  # each piece is horizontal or vertical and misses every text
        assert x0 == x1 or y0 == y1
        for left, top, right, low in boxes:
            assert not (min(x0, x1) < right and left < max(x0, x1) and min(y0, y1) < low and top < max(y0, y1))
    for i, a in enumerate(leaders):  # and no two leaders cross
        for b in leaders[i + 1:]:
            for (p0, p1) in zip(a, a[1:]):
                for (q0, q1) in zip(b, b[1:]):
                    assert not segments_cross(p0, p1, q0, q1)
    assert bottom <= 46 + 16 * 20


def segments_cross(p0, p1, q0, q1) -> bool:
    """Whether a horizontal and a vertical piece cross at an inner point of both."""
    for (a0, a1), (b0, b1) in (((p0, p1), (q0, q1)), ((q0, q1), (p0, p1))):
        if a0[1] == a1[1] and b0[0] == b1[0]:
            return (min(a0[0], a1[0]) < b0[0] < max(a0[0], a1[0])) and (min(b0[1], b1[1]) < a0[1] < max(b0[1], b1[1]))
    return False


# --- Every chart of the built site ----------------------------------------------------------------------------


def test_dashed_capacity_lines_never_cross_a_note_on_any_chart_of_the_built_site(site_dir: Path):
    """Issue 19: "Dashed capacity lines never cross a note", in the wide and the narrow layout of every chart of
    every page (each text's box from its measured width)."""
    checked, found = 0, []
    for page in sorted(site_dir.glob("*.html")):
        for root in page_charts(page.read_text(encoding="utf-8")):
            checked += 1
            found += [f"{page.name} {root.get('class')} {root.find(f'{SVG}title').text!r}: {c}" for c in crossings(root)]
    assert checked >= 50  # every page's charts, two layouts each
    assert found == []


def test_seed_003_reference_diagram_is_on_the_model_states_page(site_dir: Path):
    """seed 003 reference diagram: the model-states page draws it, 112 GB beside 104.3 GiB, in both layouts."""
    html = (site_dir / "model-states.html").read_text(encoding="utf-8")
    charts = [root for root in page_charts(html) if root.find(f"{SVG}title").text.startswith("7B parameters, fp32")]
    assert sorted(root.get("class") for root in charts) == ["tm-chart tm-chart-narrow", "tm-chart tm-chart-wide"]
    for root in charts:
        words = " ".join(t.text or "" for t in root.iter(f"{SVG}text"))
        assert "112.0 GB (104.3 GiB) sum of parts" in words and "= 112.0 GB = 104.3 GiB" in words
