"""Browser tests of the serving widget (issue 15 item 5b) on the Serving page: how many concurrent requests of N tokens
fit under vLLM's or SGLang's own accounting. The script's numbers and texts must equal Python's
(builder.widgets.serve_concurrency.evaluate, i.e. builder.model.engines.engine_report), at random states in
tests/browser/test_parity.py; the figure is complete without JavaScript, its state lives in the URL, and axe finds nothing in light and dark at 320,
390 and 1280 px."""

from __future__ import annotations

import pytest

from builder.catalog import default_gpus, default_models
from builder.widgets.serve_concurrency import CONTROLS, KV_CHOICES, TP_CHOICES, evaluate
from tests.browser import checks
from tests.browser.test_widget_bytes_per_param import widget_data

pytestmark = pytest.mark.browser

WIDGET = "[data-widget=serve-concurrency]"
PAGE = "serving.html"
MODELS, GPUS = default_models(), default_gpus()

READ = """(root) => ({
  texts: Object.fromEntries([...root.querySelectorAll('[data-t]')].map(e => [e.dataset.t, e.textContent])),
  requests: Number(root.dataset.requests),
  legend: [...root.querySelectorAll('.serve-parts li')].map(li => li.textContent),
  widths: [...root.querySelectorAll('.wdg-svg rect')].map(r => r.getAttribute('width')),
  state: Object.fromEntries([...root.querySelectorAll('select[data-k]')].map(s => [s.dataset.k, s.value])),
  length: root.querySelector('[data-k=length]').value, share: root.querySelector('[data-k=share]').value,
})"""
DRIVE = """([selector, action]) => {
  const root = document.querySelector(selector);
  for (const k of ['engine', 'model', 'gpu', 'tp', 'kv_dtype']) {
    if (action[k] === undefined) continue;
    const s = root.querySelector(`select[data-k=${k}]`);
    s.value = action[k]; s.dispatchEvent(new Event('change', {bubbles: true}));
  }
  for (const k of ['length', 'share']) {
    if (action[k] === undefined) continue;
    const i = root.querySelector(`[data-k=${k}]`);
    i.value = action[k]; i.dispatchEvent(new Event('input', {bubbles: true}));
  }
  return (READ)(root);
}""".replace("(READ)", f"({READ})")


def read(page) -> dict:
    return page.locator(WIDGET).evaluate(READ)


def python_state(shown: dict) -> dict:
    """The state on screen as serve_concurrency reads it."""
    words = CONTROLS[shown["state"]["engine"]]
    return {**shown["state"], words["length"]: shown["length"], words["share"]: shown["share"]}


def assert_matches_python(shown: dict, want: dict | None = None) -> None:
    """Texts, requests, parts and bar equal Python's for the state on screen (`want`: Python's, if worked out already
    for that state)."""
    state = python_state(shown)
    want = want or evaluate(state, MODELS, GPUS)
    for key in ("summary", "answer", "pool"):
        assert shown["texts"][key] == want[key], f"{state}: {key}: shown {shown['texts'][key]!r}, Python {want[key]!r}"
    assert shown["requests"] == want["requests"], state
    assert shown["legend"] == [f"{p['name']} {p['amount']}" for p in want["parts"]], state
    assert shown["widths"] == [p["width"] + "%" for p in want["parts"]], state


def test_default_figure_is_pythons_with_and_without_javascript(open_page):
    with open_page(PAGE, js=False) as visit:
        static = read(visit.page)
        assert visit.page.locator(f"{WIDGET} .wdg-controls").is_hidden()
    with open_page(PAGE) as visit:
        live = read(visit.page)
        assert visit.problems() == []
    for key in ("summary", "answer", "pool"):
        assert static["texts"][key] == live["texts"][key]
    assert static["legend"] == live["legend"] and static["widths"] == live["widths"]
    assert_matches_python(live)
    # Llama 3 8B on an H100 under vLLM's defaults, 8,192-token requests: a whole number of requests.
    assert live["texts"]["answer"].startswith("Requests of 8,192 tokens that fit at once: ")


def test_every_select_offers_every_choice_once_the_script_runs(open_page):
    """The page sends each select's chosen option and the words only it has (builder.widgets.choices, issue 14's page
    weight); the script adds the rest: both engines by their titles, every catalog model and GPU by its name, the
    tensor-parallel sizes and the KV dtypes, in the catalogs' order, the chosen one (from the link) still chosen."""
    with open_page(PAGE + "?serve.gpu=t4&serve.tp=2") as visit:
        got = visit.page.locator(WIDGET).evaluate("""(root) => Object.fromEntries([...root.querySelectorAll('select')]
          .map(s => [s.dataset.k, [s.value, [...s.options].map(o => [o.value, o.text])]]))""")
        assert visit.problems() == []
    assert got == {"engine": ["vllm", [["vllm", "vLLM"], ["sglang", "SGLang"]]],
                   "model": ["llama-3-8b", [[key, arch.extra.get("display", key)] for key, arch in MODELS.items()]],
                   "gpu": ["t4", [[key, gpu.display] for key, gpu in GPUS.items()]],
                   "tp": ["2", [[tp, tp] for tp in TP_CHOICES]], "kv_dtype": ["auto", [list(pair) for pair in KV_CHOICES]]}


def test_state_lives_in_the_url_under_the_engines_own_words(open_page):
    query = "?serve.engine=sglang&serve.model=qwen3-8b&serve.gpu=b200&serve.context_length=4096"
    with open_page(PAGE + query) as visit:
        shown = read(visit.page)
        assert shown["state"]["engine"] == "sglang" and shown["length"] == "4096"
        assert shown["texts"]["lengthflag"] == "--context-length"
        assert shown["texts"]["shareflag"] == "--mem-fraction-static"
        assert_matches_python(shown)
        # The published SGLang log for Qwen3-8B on one B200 (sglang PR #23669): 992,896 tokens; the model's pool is
        # within 3 pages of 64 tokens of it.
        tokens = int(shown["texts"]["pool"].split(", ")[1].split(" ")[0].replace(",", ""))
        assert abs(tokens - 992_896) <= 3 * 64
        visit.page.evaluate(DRIVE, [WIDGET, {"share": "0.8", "length": "16384"}])
        visit.page.wait_for_function("() => location.search.includes('serve.mem_fraction_static=0.8')")
        url = visit.page.url
        assert "serve.context_length=16384" in url and "max_model_len" not in url
    with open_page(url.split("/")[-1]) as visit:
        again = read(visit.page)
        assert again["share"] == "0.8" and again["length"] == "16384"
        assert_matches_python(again)


def test_a_refused_run_says_so_in_the_engines_words(open_page):
    with open_page(PAGE + "?serve.model=llama-3-70b&serve.gpu=l4&serve.max_model_len=8192") as visit:
        shown = read(visit.page)
        assert shown["texts"]["answer"].startswith("vLLM would not start: ")
        assert shown["requests"] == 0
        assert_matches_python(shown)


def test_invalid_numbers_are_marked_and_not_applied(open_page):
    with open_page(PAGE) as visit:
        before = read(visit.page)
        after = visit.page.evaluate(DRIVE, [WIDGET, {"share": "1.5"}])
        assert after["texts"]["answer"] == before["texts"]["answer"]
        assert visit.page.locator(f"{WIDGET} [data-k=share]").get_attribute("aria-invalid") == "true"


def test_live_region_and_figure_semantics(open_page):
    with open_page(PAGE) as visit:
        root = visit.page.locator(WIDGET)
        assert root.get_attribute("role") == "figure"
        assert root.locator("[aria-live=polite]").count() == 1
        for control in root.locator("select, input").all():
            assert visit.page.locator(f"label[for={control.get_attribute('id')}]").count() == 1


def test_embed_view_shows_the_widget_alone(open_page):
    with open_page(PAGE + "?serve.engine=sglang&embed=serve") as visit:
        assert visit.page.evaluate("document.documentElement.dataset.embed") == "serve"
        assert visit.page.locator(f"{WIDGET} .embed-credit").count() == 1
        assert read(visit.page)["state"]["engine"] == "sglang"


@pytest.mark.parametrize("color_scheme", ["light", "dark"])
@pytest.mark.parametrize("width", [320, 390, 1280])
def test_axe_and_layout(open_page, axe_source, color_scheme, width):
    """axe-core finds nothing and nothing scrolls sideways, light and dark, at 320, 390 and 1280 px, in a fitting
    and a refused state."""
    problems = []
    for query in ("", "?serve.model=llama-3-70b&serve.gpu=l4"):
        with open_page(PAGE + query, color_scheme=color_scheme, viewport=(width, 900)) as visit:
            visit.page.locator(WIDGET).scroll_into_view_if_needed()
            problems += checks.run_axe(visit.page, axe_source) + checks.find_horizontal_overflow(visit.page)
    assert problems == []
