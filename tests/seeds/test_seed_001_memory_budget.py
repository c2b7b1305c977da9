"""Seed 001, "Memory Budget Allocator": each feature it describes, as a reader of the home page's memory-budget
widget (id "budget", content/index.md) sees it. Expected numbers come from the Python model
(builder.widgets.memory_budget, builder.model.teaching.budget_allocator) or are the seed's worked totals
(7B, b=1, s=2K, BF16: 13.0 + 13.0 + 26.1 + 0.50 = 52.7 GiB of 80.0 GiB, 27.3 GiB headroom).

The seed's props that are author options here (showBreakdown, capacityGb, slider bounds) are checked on the
fixture page tests/browser/widget_site/index.md, the only page that sets them.
"""

from __future__ import annotations

import pytest

from builder.model.teaching import BUDGET_PRECISIONS
from builder.model.units import GiB, format_bytes
from builder.widgets import memory_budget as mb
from tests.browser.test_widget_bytes_per_param import (  # noqa: F401 - fixtures
    open_fixture, widget_site, widget_site_url)
from tests.browser.helpers import drawn
from tests.seeds.conftest import CATALOGS, MODELS

PAGE = "index.html"
W = "#budget"
CONTEXT = mb.context({}, CATALOGS)  # {{< widget memory-budget id=budget >}}
CAP = CONTEXT["data"]["capacity"]
CAP_TEXT = CONTEXT["data"]["capacityText"]


# Release 0.1.0's URL keys, which this file names the sliders by -> the widget's keys (its renames table).
NEW = {old: new for old, (new, _) in mb.RENAMED.items()}


def want(halves: int = 14, batch: int = 1, seq_len: int = 2048, precision: str = "bf16") -> dict:
    """Python's texts, need and bucket bytes for a state (model size in half-billions)."""
    return mb.texts(halves, batch, seq_len, precision, CAP, CAP_TEXT, MODELS)


def text(page, key: str) -> str:
    """The first element showing text `key`, once the figure is drawn (a model or run not priced yet: a frame later)."""
    drawn(page, W)
    return page.locator(f"{W} [data-t={key}]").first.text_content()


def state_url(halves: int = 14, batch: int = 1, power: int = 11, precision: str = "bf16") -> str:
    size, micro_batch, seq, chosen = mb.KEYS.values()
    return f"?budget.{size}={halves}&budget.{micro_batch}={batch}&budget.{seq}={power}&budget.{chosen}={precision}"


def slider(page, key: str):
    """The slider of a state key as this file names it (release 0.1.0's URL key: h, b or s)."""
    return page.locator(f"{W} [data-k={NEW[key]}]")


def legend(page) -> list[str]:
    drawn(page, W)
    return page.locator(f"{W} .wdg-legend li").all_inner_texts()


# The four sliders ---------------------------------------------------------------------------------------------------

def test_model_size_slider_spans_0_5b_to_175b_in_half_billions(show):
    page = show()
    size = slider(page, "h")
    size.focus()
    page.keyboard.press("Home")
    assert text(page, "p") == "0.5B"
    page.keyboard.press("ArrowRight")
    assert text(page, "p") == "1.0B" and text(page, "k0") == format_bytes(want(2)["amounts"][0])
    page.keyboard.press("End")
    assert text(page, "p") == "175.0B"


def test_batch_size_slider_spans_1_to_64(show):
    page = show()
    batch = slider(page, "b")
    batch.focus()
    page.keyboard.press("End")
    assert text(page, "b") == "64" and text(page, "k3") == format_bytes(want(14, 64)["amounts"][3])
    page.keyboard.press("Home")
    assert text(page, "b") == "1"


def test_sequence_length_slider_spans_512_to_32k_tokens(show):
    page = show()
    seq = slider(page, "s")
    seq.focus()
    page.keyboard.press("Home")
    assert page.locator(f"{W} label[for=budget-s] + output").inner_text() == "512"
    page.keyboard.press("End")
    assert text(page, "s") == "32K" and text(page, "k3") == format_bytes(want(14, 1, 32768)["amounts"][3])
    assert "32K tokens" in page.locator(f"{W} .wdg-field").nth(2).inner_text()
    # Ours steps in powers of two where the seed's slider took every value; the page says why.
    page.keyboard.press("ArrowLeft")
    assert text(page, "s") == "16K"
    assert "sequence slider steps in powers of two" in page.locator("main").inner_text()


def test_sliders_are_native_ranges_with_labels_and_aria_valuetext(show):
    page = show()
    root = page.locator(W)
    expected = {"Model size": "7.0 billion parameters", "Batch size": "batch of 1", "Sequence length": "2048 tokens"}
    for name, words in expected.items():
        control = root.get_by_role("slider", name=name)
        assert control.get_attribute("type") == "range" and control.get_attribute("aria-valuetext") == words
        assert control.get_attribute("min") and control.get_attribute("max")
    root.get_by_role("slider", name="Batch size").focus()
    page.keyboard.press("ArrowRight")
    assert root.get_by_role("slider", name="Batch size").get_attribute("aria-valuetext") == "batch of 2"


def test_precision_pills_are_a_radiogroup(show):
    page = show()
    group = page.locator(W).get_by_role("radiogroup", name="Precision")
    radios = group.get_by_role("radio")
    assert radios.all_inner_texts() == [q.upper() for q in BUDGET_PRECISIONS] == ["FP32", "BF16", "FP16", "FP8"]
    assert [r.get_attribute("aria-checked") for r in radios.all()] == ["false", "true", "false", "false"]


def test_precision_tab_focuses_the_group_space_and_enter_commit(show):
    page = show()
    slider(page, "s").focus()
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.getAttribute('aria-checked')") == "true"
    assert page.evaluate("document.activeElement.textContent") == "BF16"
    group = page.locator(f"{W} [role=radio]")
    group.nth(0).focus()  # FP32, not checked
    page.keyboard.press("Space")
    assert group.nth(0).get_attribute("aria-checked") == "true" and text(page, "head").endswith("· FP32")
    group.nth(3).focus()
    page.keyboard.press("Enter")
    assert group.nth(3).get_attribute("aria-checked") == "true" and text(page, "head").endswith("· FP8")


@pytest.mark.parametrize("precision", list(BUDGET_PRECISIONS))
def test_precision_sets_bytes_per_parameter(show, precision):
    page = show()
    page.locator(W).get_by_role("radio", name=precision.upper()).click()
    weights = want(14, 1, 2048, precision)["amounts"][0]
    assert weights == 7 * 10**9 * BUDGET_PRECISIONS[precision]
    assert text(page, "k0") == format_bytes(weights)


# The default state and its worked totals ----------------------------------------------------------------------------

def test_default_state_is_7b_batch_1_2k_bf16(show):
    page = show()
    assert page.locator(f"{W} .wdg-head").inner_text() == "7.0B params · b=1 · s=2K · BF16"
    assert text(page, "head") == mb.TEXTS["head"].format("7.0B", 1, "2K", "BF16")


def test_weights_bucket_is_13_0_gib(show):
    page = show()
    amounts = want()["amounts"]
    assert round(amounts[0] / GiB, 1) == 13.0 and text(page, "k0") == format_bytes(amounts[0])
    assert "Weights 13.0 GiB" in legend(page)


def test_gradients_equal_weights_13_0_gib(show):
    page = show()
    amounts = want()["amounts"]
    assert amounts[1] == amounts[0] and "Gradients 13.0 GiB" in legend(page)


def test_optimizer_is_twice_the_weights_26_1_gib(show):
    page = show()
    amounts = want()["amounts"]
    assert amounts[2] == 2 * amounts[0] and round(amounts[2] / GiB, 1) == 26.1
    assert f"Optimizer (Adam m, v) {format_bytes(amounts[2])}" in legend(page)


def test_activations_use_a_7b_shaped_reference_4096_by_32(show):
    page = show()
    amounts = want()["amounts"]
    assert amounts[3] == 1 * 2048 * 4096 * 32 * 2 and round(amounts[3] / GiB, 2) == 0.50
    # Ours prints one decimal everywhere: the seed's "0.50 GiB" reads "0.5 GiB".
    assert f"Activations {format_bytes(amounts[3])}" in legend(page) and format_bytes(amounts[3]) == "0.5 GiB"
    assert "b × s × h × L × bytes" in page.locator(f"{W} table").inner_text()


def test_total_is_52_7_gib_of_80_gib_budget(show):
    page = show()
    total = want()["total"]
    assert round(total / GiB, 1) == 52.7 and CAP == 80 * GiB
    assert page.locator(f"{W} .wdg-total").first.inner_text() == (
        f"Four-bucket sum {format_bytes(total)} of {format_bytes(CAP)} budget: 27.3 GiB headroom (by this sum)")


def test_headroom_is_27_3_gib(show):
    page = show()
    assert round((CAP - want()["total"]) / GiB, 1) == 27.3
    assert text(page, "verdict") == mb.sum_verdict(want()["total"], CAP) == "27.3 GiB headroom"


def test_verdict_reads_exceeds_by_when_over_budget(show):
    page = show(state_url(140, 8))
    total = want(140, 8)["total"]
    assert total > CAP and text(page, "verdict") == f"exceeds by {format_bytes(total - CAP)}"


def test_capacity_line_stays_at_the_right_edge_until_a_bar_passes_it(show):
    page = show(state_url(1, 1))
    shown = want(1, 1)
    assert shown["need"] <= CAP
    line = page.locator(f"{W} line.tm-capacity")
    assert float(line.get_attribute("x1").rstrip("%")) == 100
    page = show(state_url(140, 8))
    shown = want(140, 8)
    geometry = mb.bar(shown["amounts"], shown["need"], CAP, True)
    assert float(line.get_attribute("x1").rstrip("%")) == pytest.approx(float(geometry["line"]), abs=0.001)
    assert float(geometry["line"]) < 100
    assert page.locator(f"{W} text.tm-capacity-label").text_content() == "80.0 GiB budget"


def test_overflow_past_the_capacity_is_hatched(show):
    page = show(state_url(140, 8))
    shown = want(140, 8)
    over = page.locator(f"{W} .wdg-over")
    geometry = mb.bar(shown["amounts"], shown["need"], CAP, True)["over"]
    assert over.get_attribute("fill") == "url(#budget-hatch)"
    assert float(over.get_attribute("width").rstrip("%")) == pytest.approx(float(geometry["w"]), abs=0.001)
    assert float(geometry["w"]) > 0
    page = show(state_url(1, 1))
    assert float(over.get_attribute("width").rstrip("%")) == 0


def test_breakdown_legend_has_swatch_label_and_gib_readout(show):
    page = show()
    items = page.locator(f"{W} .wdg-legend li")
    assert items.count() == 4 and items.locator(".wdg-swatch").count() == 4
    labels = [b[1] for b in mb.BUCKETS]
    assert legend(page) == [f"{label} {format_bytes(a)}" for label, a in zip(labels, want()["amounts"])]


# Accessibility ------------------------------------------------------------------------------------------------------

def test_figure_summary_lists_size_batch_sequence_precision_total_capacity_verdict(show):
    page = show()
    root = page.locator(W)
    assert root.get_attribute("role") == "figure"
    summary = page.locator("#" + root.get_attribute("aria-labelledby"))
    expected = want()["texts"]["sum"]
    assert summary.inner_text() == expected and page.get_by_role("figure", name=expected).count() == 1
    assert expected.startswith("Training memory budget. 7.0B parameters, batch 1, sequence 2K, BF16. "
                               "Four-bucket sum 52.7 GiB of 80.0 GiB: 27.3 GiB headroom.")


def test_live_region_mirrors_the_summary(show):
    page = show()
    slider(page, "b").focus()
    page.keyboard.press("End")
    drawn(page, W)
    live = page.locator(f"{W} [aria-live=polite]")
    assert live.text_content() == want(14, 64)["texts"]["sum"] == page.locator(f"{W} .wdg-summary").text_content()


def test_reduced_motion_swaps_bar_widths_instantly(show):
    page = show()
    page.emulate_media(reduced_motion="reduce")
    durations = f"[...document.querySelectorAll('{W} svg rect, {W} svg line')].map(e => parseFloat(getComputedStyle(e).transitionDuration))"
    assert max(page.evaluate(durations)) <= 0.00001


def test_colour_is_never_the_only_signal(show):
    page = show(state_url(140, 8))
    shown = want(140, 8)["texts"]
    # Every bucket has a label and a GiB readout; the fits / exceeds verdicts are words.
    assert legend(page) == [f"{b[1]} {shown[f'k{i}']}" for i, b in enumerate(mb.BUCKETS)]
    assert text(page, "verdict").startswith("exceeds by ") and text(page, "mverdict") == shown["mverdict"]
    assert page.locator(f"{W} .wdg-badge").inner_text() == "DOESN’T FIT"


def test_url_state_drives_the_parameters(show):
    # The seed's controlled params bag: here the page's URL sets model size, batch, sequence and precision.
    page = show(state_url(27, 5, 13, "fp32"))
    shown = want(27, 5, 8192, "fp32")["texts"]
    assert text(page, "head") == shown["head"] == "13.5B params · b=5 · s=8K · FP32"
    assert text(page, "tot") == shown["tot"]
    slider(page, "b").focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_function("() => location.search.includes('budget.micro_batch=6')")


def test_full_model_need_beside_the_four_bucket_sum(show):
    # Ours differs on purpose: the verdict and badge follow the full model's need, and the page says why.
    page = show()
    shown = want()
    assert text(page, "need") == format_bytes(shown["need"]) and text(page, "mverdict") == shown["texts"]["mverdict"]
    note = page.locator(f"{W} .wdg-note").last.inner_text()
    assert note.startswith("Why the two numbers differ: the four buckets are a simplified teaching model, "
                           "not the site’s full model.")


# The seed's props, as author options (the fixture page; no page of the site sets them) ---------------------------

def test_single_total_mode_capacity_and_slider_bounds(open_fixture):
    with open_fixture("index.html") as visit:
        page = visit.page
        root = page.locator("[data-widget=memory-budget]")
        assert root.locator("rect.tm-segment").count() == 1 and root.locator(".wdg-legend").count() == 0
        # gpu=rtx-4090: the CUDA total, deviceQuery 25386352640 bytes = 23.6 GiB (content/gpus.toml)
        assert "of 23.6 GiB GeForce RTX 4090 24GB" in root.locator(".wdg-total").first.inner_text()
        for key, shown, low, high in (("h", "p", "1.0B", "70.0B"), ("b", "b", "1", "16"), ("s", "s", "256", "8K")):
            root.locator(f"[data-k={NEW[key]}]").focus()
            page.keyboard.press("Home")
            assert root.locator(f"output[data-t={shown}]").inner_text() == low
            page.keyboard.press("End")
            assert root.locator(f"output[data-t={shown}]").inner_text() == high
        assert visit.problems() == []
