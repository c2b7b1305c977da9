"""Seed 000, "GPU Memory Math Viz": each feature it describes, as a reader of the home page's bytes-per-parameter
widget (id "bytes", content/index.md) sees it. Expected numbers come from the Python model
(builder.widgets.bytes_per_param, builder.model.teaching) or are the seed's own worked totals (3.7B -> 62 GiB).

Author options that replace the seed's props (custom segments, presets, GPU lines, slider bounds) are checked on
the fixture page tests/browser/widget_site/index.md, the only page that sets them.
"""

from __future__ import annotations

import pytest

from builder.catalog import short_gpu_name
from builder.model.teaching import ADAM_SEGMENTS
from builder.model.units import GiB, format_bytes
from builder.widgets import bytes_per_param as bpp
from tests.browser.test_widget_bytes_per_param import (  # noqa: F401 - fixtures
    open_fixture, widget_site, widget_site_url)
from tests.browser.helpers import SETTLED, drawn
from tests.seeds.conftest import CATALOGS, GPU_CATALOG, MODELS

PAGE = "index.html"
W = "#bytes"
# The widget's placement on the home page: {{< widget bytes-per-param id=bytes model=llama-3-8b gpus=a100-80gb,h100-80gb >}}
OPTIONS = {"model": "llama-3-8b", "gpus": ["a100-80gb", "h100-80gb"]}
CONTEXT = bpp.context(OPTIONS, CATALOGS)
DATA = CONTEXT["data"]
START = CONTEXT["params"]
SEED_PARAMS = 3_700_000_000  # seed 000's worked example: "3.7B parameters. Total training memory 62 GiB."
GPT2 = DATA["presets"][0]["params"]


def want(params: int, zero: int = 0, gpus: int = 8) -> dict[str, str]:
    """Every text Python shows for this state, keyed as the partial's data-t attributes."""
    return bpp.texts(params, zero, gpus, DATA, MODELS)


def needs(params: int, zero: int = 0, gpus: int = 8) -> list[int]:
    """The full model's need on one GPU and per GPU under ZeRO (what the verdicts, badges and hatching use)."""
    return [c["need"] for c in bpp.comparisons(params, zero, gpus, DATA, MODELS)]


def text(page, key: str) -> str:
    """The first element showing text `key` (its text content, shown or not), once the figure is drawn (a model not
    priced yet is drawn a frame later)."""
    drawn(page, W)
    return page.locator(f"{W} [data-t={key}]").first.text_content()


def output(page) -> str:
    """The parameter count the slider's visible output shows."""
    return page.locator(f"{W} output[data-t=p]").inner_text()


def table(page) -> list[list[str]]:
    """The segment table's body rows as the reader sees them: segment, per param, on one GPU, per GPU."""
    drawn(page, W)
    return [[cell.inner_text().strip() for cell in row.locator("th, td").all()]
            for row in page.locator(f"{W} table tbody tr").all()]


def badges(page) -> list[bool]:
    """Whether each bar's DOESN'T FIT badge is shown."""
    drawn(page, W)
    return [b.is_visible() for b in page.locator(f"{W} .wdg-badge").all()]


def state_url(params: int, zero: int = 0, gpus: int = 8) -> str:
    return f"?bytes.params={params}&bytes.zero={zero}&bytes.dp={gpus}"


# The slider ------------------------------------------------------------------------------------------------------

def test_log_scale_slider_spans_100m_to_70b(show):
    page = show()
    slider = page.locator(f"{W} [type=range]")
    slider.focus()
    page.keyboard.press("Home")
    assert DATA["ticks"][0]["value"] == 100 * 10**6 and output(page) == bpp.format_params(100 * 10**6) == "100M"
    page.keyboard.press("End")
    assert DATA["ticks"][-1]["value"] == 70 * 10**9 and output(page) == bpp.format_params(70 * 10**9)
    # Log scale: every decade has as many slider positions (equal distance, equal ratio).
    values = [t["value"] for t in DATA["ticks"]]
    per_decade = [sum(1 for v in values if 10**k <= v < 10 ** (k + 1)) for k in (8, 9)]
    assert per_decade[0] == per_decade[1] == len(bpp.ROUND_STEPS)


def test_left_right_keys_move_the_slider_one_log_step(show):
    page = show()
    page.locator(f"{W} [type=range]").focus()
    page.keyboard.press("Home")
    for tick in DATA["ticks"][1:]:
        page.keyboard.press("ArrowRight")
        assert output(page) == bpp.format_params(tick["value"])
    page.keyboard.press("ArrowLeft")
    assert output(page) == bpp.format_params(DATA["ticks"][-2]["value"])


def test_slider_is_a_native_range_with_label_and_aria_valuetext(show):
    page = show()
    slider = page.locator(W).get_by_role("slider", name="Parameters")
    assert slider.get_attribute("type") == "range"
    assert (slider.get_attribute("min"), slider.get_attribute("max")) == ("0", str(len(DATA["ticks"]) - 1))
    assert slider.get_attribute("aria-valuetext") == bpp.params_words(START) == "8.03 billion parameters"
    assert slider.input_value() == str(CONTEXT["step"])
    slider.focus()
    page.keyboard.press("Home")
    assert slider.get_attribute("aria-valuetext") == "100 million parameters" and slider.input_value() == "0"


# The stacked bar and its readouts -----------------------------------------------------------------------------------

def test_six_segments_with_their_bytes_per_param(show):
    page = show()
    rows = table(page)
    assert [(r[0], r[1]) for r in rows] == [(s.label, f"{s.bytes_per_param} B") for s in ADAM_SEGMENTS]
    assert [s.bytes_per_param for s in ADAM_SEGMENTS] == [2, 4, 4, 4, 2, 2]  # seed 000's table
    assert page.locator(f"{W} .wdg-bar").first.locator("rect.tm-segment").count() == 6


def test_per_segment_gib_readouts(show):
    page = show(state_url(SEED_PARAMS))
    amounts = bpp.figure_bytes(SEED_PARAMS, 0, 1, DATA["segments"])
    assert [r[2] for r in table(page)] == [format_bytes(a) for a in amounts]
    # Seed 000: Master = 3.7B x 4B = 14 GiB; Weights 6.8 GiB (it truncates 6.89).
    assert round(amounts[1] / GiB) == 14 and int(10 * amounts[0] / GiB) == 68


def test_total_training_memory_is_62_gib_at_3_7b(show):
    page = show(state_url(SEED_PARAMS))
    total = sum(bpp.figure_bytes(SEED_PARAMS, 0, 1, DATA["segments"]))
    assert total == SEED_PARAMS * 18 and round(total / GiB) == 62
    head = page.locator(f"{W} .wdg-bar-head").first.inner_text()
    assert head.startswith(f"All on one GPU, sum of segments: {format_bytes(total)}")
    assert output(page) == "3.7B"


def test_memory_formula_lines_at_3_7b(show):
    page = show(state_url(SEED_PARAMS))
    texts = want(SEED_PARAMS)
    lines = [li.inner_text() for li in page.locator(f"{W} .wdg-formulas li:visible").all()]
    assert lines == [texts[f"f{i}"] for i in range(6)] + [texts["ftot"]]
    assert lines[0] == f"Weights = 3.7B × 2 B = {format_bytes(SEED_PARAMS * 2)}"
    assert lines[-1] == f"Total = 3.7B × 18 B = {format_bytes(SEED_PARAMS * 18)}"


def test_stacked_bar_widths_follow_the_segments(show):
    page = show(state_url(SEED_PARAMS))
    geometry = bpp.bars(SEED_PARAMS, 0, 8, DATA, needs(SEED_PARAMS))
    rects = page.locator(f"{W} .wdg-bar").first.locator("rect.tm-segment")
    widths = [float(r.get_attribute("width").rstrip("%")) for r in rects.all()]
    assert widths == pytest.approx([float(r["w"]) for r in geometry["rows"][0]["rects"]], abs=0.001)
    assert widths[1] == pytest.approx(2 * widths[0], abs=0.002)  # master (4 B) twice the weights (2 B)


def test_bar_scale_keeps_the_next_gpu_ceiling_in_view(show):
    page = show(state_url(GPT2))
    # max(total, need, largest GPU) x 1.15: a small model still shows the GPU lines, the largest at 1 / 1.15.
    largest = max(g["bytes"] for g in DATA["gpus"])
    lines = page.locator(f"{W} .wdg-bar").first.locator("line.tm-capacity")
    xs = [float(l.get_attribute("x1").rstrip("%")) for l in lines.all()]
    assert max(xs) == pytest.approx(100 / 1.15, abs=0.001)
    assert sum(bpp.figure_bytes(GPT2, 0, 1, DATA["segments"])) < largest


def test_dashed_gpu_capacity_lines_are_labelled(show):
    page = show()
    labels = [t.text_content() for t in page.locator(f"{W} .wdg-axis text").all()]
    gpus = [GPU_CATALOG[g] for g in OPTIONS["gpus"]]
    assert labels == [f"{short_gpu_name(g.display)} {format_bytes(g.usable_bytes)}" for g in gpus]
    # What a CUDA process sees (content/gpus.toml): deviceQuery 85100068864 and 85028896768 bytes.
    assert labels == ["A100 79.3 GiB", "H100 79.2 GiB"]
    lines = page.locator(f"{W} .wdg-bar").first.locator("line.tm-capacity").all()
    assert len(lines) == 2 and all(l.get_attribute("stroke-dasharray") for l in lines)


def test_doesnt_fit_badge_when_the_need_crosses_a_capacity_line(show):
    page = show()
    caps = [g["bytes"] for g in DATA["gpus"]]
    assert needs(START)[0] > min(caps) and badges(page)[0]
    assert page.locator(f"{W} .wdg-badge").first.inner_text() == "DOESN’T FIT"
    page = show(state_url(GPT2))
    assert needs(GPT2)[0] <= min(caps) and not badges(page)[0]
    # Ours differs on purpose: the badge follows the full model's need, not the segments' sum, and says why.
    assert "Why the verdicts use a different number:" in page.locator(W).inner_text()


def test_hatched_overflow_overlay(show):
    page = show()
    over = page.locator(f"{W} .wdg-bar").first.locator(".wdg-over")
    assert over.get_attribute("fill") == "url(#bytes-hatch)"
    geometry = bpp.bars(START, 0, 8, DATA, needs(START))["rows"][0]["over"]
    width = float(over.get_attribute("width").rstrip("%"))
    assert width == pytest.approx(float(geometry["w"]), abs=0.001) and width > 0
    page = show(state_url(GPT2))
    assert float(page.locator(f"{W} .wdg-bar").first.locator(".wdg-over").get_attribute("width").rstrip("%")) == 0


# ZeRO ------------------------------------------------------------------------------------------------------------

def test_zero_stage_radiogroup_with_aria_checked(show):
    page = show()
    group = page.locator(W).get_by_role("radiogroup", name="ZeRO stage")
    radios = group.get_by_role("radio")
    assert [r.inner_text() for r in radios.all()] == ["None", "Stage 1", "Stage 2", "Stage 3"]
    assert [r.get_attribute("aria-checked") for r in radios.all()] == ["true", "false", "false", "false"]
    radios.nth(2).click()
    assert [r.get_attribute("aria-checked") for r in radios.all()] == ["false", "false", "true", "false"]


@pytest.mark.parametrize("stage, sharded", [(1, {"Master", "Momentum", "Variance"}),
                                            (2, {"Master", "Momentum", "Variance", "Gradients"}),
                                            (3, {"Weights", "Master", "Momentum", "Variance", "Gradients"})],
                         ids=["stage1_shards_optimizer_states", "stage2_also_gradients", "stage3_also_weights"])
def test_zero_stage_shards_its_segments_across_the_gpus(show, stage, sharded):
    page = show()
    page.locator(W).get_by_role("radio", name=f"Stage {stage}").click()
    full = bpp.figure_bytes(START, 0, 1, DATA["segments"])
    per = bpp.figure_bytes(START, stage, 8, DATA["segments"])
    rows = table(page)
    assert [r[3] for r in rows] == [format_bytes(amount) for amount in per]
    assert {r[0] for r, a, b in zip(rows, full, per) if a != b} == sharded
    assert rows[-1][0] == "Activations" and rows[-1][3] == rows[-1][2]  # never sharded


def test_per_gpu_bar_appears_once_zero_is_active(show):
    page = show()
    second = page.locator(f"{W} .wdg-bar").nth(1)
    assert second.is_hidden()
    page.locator(W).get_by_role("radio", name="Stage 1").click()
    drawn(page, W)
    assert second.is_visible()
    texts = want(START, 1, 8)
    assert second.locator(".wdg-bar-head").inner_text().startswith(f"Per GPU (ZeRO stage 1, 8 GPUs): {texts['per']}")


def test_per_gpu_chips_read_name_over_n_or_name_full(show):
    page = show(state_url(START, 2, 8))
    chips = [li.inner_text() for li in page.locator(f"{W} .wdg-chips li").all()]
    assert chips == ["Weights (full)", "Master / 8 (sharded)", "Momentum / 8 (sharded)", "Variance / 8 (sharded)",
                     "Gradients / 8 (sharded)", "Activations (full)"]
    assert chips == [want(START, 2, 8)[f"c{i}"] for i in range(6)]


def test_gpu_count_defaults_to_8_and_divides_the_sharded_segments(show):
    page = show(state_url(START, 3, 8))
    count = page.locator(W).get_by_label("GPUs (data parallel)")
    assert count.input_value() == "8"
    count.fill("64")
    texts = want(START, 3, 64)
    assert text(page, "per") == texts["per"] and text(page, "c0") == "Weights / 64 (sharded)"
    assert [r[3] for r in table(page)] == [texts[f"g{i}"] for i in range(6)]


# Presets and keys --------------------------------------------------------------------------------------------------

def test_preset_chips_set_the_parameter_count(show):
    page = show()
    chips = page.locator(f"{W} [aria-pressed]")
    assert chips.all_inner_texts() == [f"{p['label']} {p['key']}" for p in DATA["presets"]]
    # Seed 000's GPT-2 / 7B / 13B / 70B, as catalog models with their exact counts (a chip shows what it sets).
    assert [p["label"] for p in DATA["presets"]] == ["GPT-2 · 124M", "Llama 2 7B · 6.74B", "Llama 2 13B · 13.0B",
                                                     "Llama 2 70B · 69.0B"]
    for index, preset in enumerate(DATA["presets"]):
        chips.nth(index).click()
        assert output(page) == bpp.format_params(preset["params"])
        assert [c.get_attribute("aria-pressed") for c in chips.all()] == [str(i == index).lower() for i in range(4)]


def test_number_keys_1_to_n_jump_to_presets(show):
    page = show()
    page.locator(f"{W} [type=range]").focus()
    for preset in reversed(DATA["presets"]):
        page.keyboard.press(preset["key"])
        assert output(page) == bpp.format_params(preset["params"])
        assert text(page, "tot") == want(preset["params"])["tot"]


def test_z_key_cycles_zero_stages(show):
    page = show()
    page.locator(f"{W} [type=range]").focus()
    checked = page.locator(f"{W} [role=radio][aria-checked=true]")
    for name in ("Stage 1", "Stage 2", "Stage 3", "None"):
        page.keyboard.press("z")
        assert checked.inner_text() == name


def test_keyboard_hints_are_shown(show):
    page = show()
    hints = page.locator(f"{W} .wdg-keys").inner_text()
    assert "← → on the slider change the parameters" in hints
    assert f"1–{len(DATA['presets'])} pick a preset" in hints and "Z cycles the ZeRO stage" in hints
    assert page.locator(f"{W} .wdg-pill kbd").all_inner_texts() == [p["key"] for p in DATA["presets"]]


# Accessibility ------------------------------------------------------------------------------------------------------

def test_figure_role_with_summary_naming_params_total_and_per_gpu(show):
    page = show()
    root = page.locator(W)
    assert root.get_attribute("role") == "figure"
    summary = page.locator("#" + root.get_attribute("aria-labelledby"))
    assert summary.inner_text() == want(START)["sum"]
    assert page.get_by_role("figure", name=want(START)["sum"]).count() == 1
    root.get_by_role("radio", name="Stage 3").click()
    texts = want(START, 3, 8)
    drawn(page, W)
    assert summary.inner_text() == texts["sum"]
    assert f"{bpp.format_params(START)} parameters" in texts["sum"] and f"{texts['per']} per GPU" in texts["sum"]


def test_live_region_mirrors_the_summary(show):
    page = show()
    live = page.locator(f"{W} [aria-live=polite]")
    page.locator(f"{W} [type=range]").focus()
    page.keyboard.press("Home")
    drawn(page, W)
    assert live.text_content() == want(DATA["ticks"][0]["value"])["sum"]
    assert live.text_content() == page.locator(f"{W} .wdg-summary").text_content()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_focus_visible_ring_offset_from_the_surface(show, scheme):
    page = show()
    page.emulate_media(color_scheme=scheme)
    page.locator(f"{W} [aria-pressed]").first.focus()
    page.keyboard.press("Tab")
    ring = page.evaluate("""() => { const e = document.activeElement, s = getComputedStyle(e);
      return [e.matches(':focus-visible'), s.outlineStyle, parseFloat(s.outlineWidth), parseFloat(s.outlineOffset),
              s.outlineColor, getComputedStyle(document.body).backgroundColor]; }""")
    assert ring[:2] == [True, "solid"] and ring[2] >= 2 and ring[3] >= 2 and ring[4] != ring[5]


def test_colour_is_never_the_only_signal(show):
    page = show(state_url(START, 1, 8))
    texts = want(START, 1, 8)
    # Per-segment GiB readouts, the badge and the per-GPU chips are words.
    assert [r[2] for r in table(page)] == [texts[f"s{i}"] for i in range(6)]
    assert page.locator(f"{W} .wdg-badge:visible").first.inner_text() == "DOESN’T FIT"
    assert page.locator(f"{W} .wdg-chips li").all_inner_texts() == [texts[f"c{i}"] for i in range(6)]
    assert page.locator(f"{W} .wdg-verdict").inner_text() == texts["verdict"]


def test_reduced_motion_snaps_bar_transitions(show):
    page = show()
    durations = (f"[...document.querySelectorAll('{W} svg rect, {W} svg line')]"
                 ".map(e => parseFloat(getComputedStyle(e).transitionDuration))")
    assert max(page.evaluate(durations)) >= 0.1
    page.emulate_media(reduced_motion="reduce")
    assert max(page.evaluate(durations)) <= 0.00001  # site.css leaves 0.01 ms: an instant swap


def test_reduced_motion_zero_detail_enters_without_movement(show):
    page = show()
    page.emulate_media(reduced_motion="reduce")
    page.locator(f"{W} [type=range]").focus()
    page.keyboard.press("z")
    drawn(page, W)
    second = page.locator(f"{W} .wdg-bar").nth(1)
    assert second.is_visible()
    # Two frames later nothing moves (with motion the bars glide for 0.2 s).
    settled = f"""() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(() =>
      done(document.querySelector('{W}').getAnimations({{subtree: true}}).filter(a => a.playState === 'running').length))))"""
    assert page.evaluate(settled) == 0
    page.emulate_media(reduced_motion="no-preference")
    # With motion, the same change starts 0.2 s glides: read as the change is drawn (at once, or a frame later for a
    # run not priced yet: in the microtask after that task), so a loaded machine's slow frames cannot let them
    # finish before they are counted.
    gliding = f"""async () => {{
      const root = document.querySelector('{W}');
      root.querySelector('[type=range]').dispatchEvent(new KeyboardEvent('keydown', {{key: 'z', bubbles: true}}));
      await ({SETTLED})(root);
      return root.getAnimations({{subtree: true}}).filter(a => a.effect.getTiming().duration >= 100).length;
    }}"""
    assert page.evaluate(gliding) > 0


def test_url_state_drives_parameter_count_and_zero_stage(show):
    # The seed's controlled mode (params, zeroStage from outside): here the page's URL sets them.
    page = show(state_url(13 * 10**9, 2, 16))
    assert output(page) == "13.0B" and page.locator(f"{W} [role=radio][aria-checked=true]").inner_text() == "Stage 2"
    assert text(page, "per") == want(13 * 10**9, 2, 16)["per"]
    page.locator(W).get_by_role("radio", name="Stage 3").click()
    page.wait_for_function("() => location.search.includes('bytes.zero=3')")


def test_activations_segment_is_named_a_placeholder(show):
    # Ours keeps the seed's 2 B/param activations on purpose and says it is a placeholder.
    page = show()
    note = page.locator(f"{W} .wdg-note").first.inner_text()
    assert note.startswith("Activations at 2 B per parameter is a placeholder of the classic bytes-per-parameter view, "
                           "not a model:")


# The seed's props, as author options (the fixture page; no page of the site sets them) ---------------------------

def test_custom_segment_table_presets_gpus_and_bounds(open_fixture):
    with open_fixture("index.html") as visit:
        root = visit.page.locator("[data-widget=bytes-per-param]")
        rows = [r.locator("th").inner_text().strip() for r in root.locator("table tbody tr").all()]
        assert rows == ["INT4 weights", "FP16 KV cache", "Activations"]
        assert [t.text_content() for t in root.locator(".wdg-axis text").all()] == [
            "RTX 4090 23.6 GiB", "L40S 44.3 GiB", "A100 79.3 GiB"]  # CUDA totals, content/gpus.toml
        assert "Llama 3 70B" in root.locator("[aria-pressed]").nth(1).inner_text()
        slider = root.locator("[type=range]")
        slider.focus()
        visit.page.keyboard.press("Home")
        assert root.locator("output").inner_text() == bpp.format_params(10**9)
        visit.page.keyboard.press("End")
        assert root.locator("output").inner_text() == bpp.format_params(500 * 10**9)
        assert root.locator("[type=number]").input_value() == "4"  # dp=4 (the seed's gpuCount)
        assert visit.problems() == []
