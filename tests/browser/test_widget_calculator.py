"""Browser tests of the calculator widget (issue 4, seeds 002 and 004) on the calculator page.

The script evaluates the memory model from the data Python emits; here Chromium drives it to
chosen states (every catalog model, the starting points, refusals, suggestions, dtypes, DeepSpeed's
and DDP's fields) and every part name, byte count and displayed text is compared with builder.model
for the same Config (`compare`; tests/browser/test_parity.py does the same at random states). Also: invalid
states show validate_config's message, every control works by keyboard and by pointer, axe-core,
deep links, no-JS figure, file://, and layout at 360 and 1280 px.
"""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest

from builder.catalog import default_gpus, default_models
from builder.model.partnames import reader_name
from builder.sources import default_references, source_text
from builder.widgets import calculator as calc
from tests.browser import checks
from tests.browser.helpers import SETTLED, drawn

pytestmark = pytest.mark.browser

PAGE = "calculator.html"
WIDGET = "[data-widget=calculator]"
NARROW, WIDE = (360, 740), (1280, 800)
REFERENCES = default_references()
MODELS = default_models()
GPUS = calc.catalog_gpus(default_gpus())

# Set controls as a user would (radio buttons clicked, fields changed), one change event, then read.
SET_STATE = """([selector, state]) => {
  const root = document.querySelector(selector), form = root.querySelector('form');
  for (const [key, value] of Object.entries(state)) {
    const el = form.elements[key];
    if (el instanceof RadioNodeList) [...el].find(r => r.value === value).click();
    else if (el.type === 'checkbox') el.checked = value === '1';
    else el.value = value;
  }
  form.dispatchEvent(new Event('change', {bubbles: true}));
}"""
# Read once the widget's answers are final (the --max searches and suggestions follow the figure by a frame).
READ = """async (selector) => {
  const root = document.querySelector(selector), text = s => { const e = root.querySelector(s); return e && !e.hidden ? e.textContent : null; };
  await (""" + SETTLED + """)(root);
  const result = root.querySelector('[data-out=result]');
  return {
    summary: text('[data-out=summary]'), live: text('[data-out=live]'), error: text('[data-out=error]'),
    shown: !result.hidden,
    parts: [...root.querySelectorAll('[data-part]')].map(tr => [tr.dataset.part, Number(tr.dataset.bytes),
      ...[...tr.children].slice(1).map(td => td.textContent)]),
    total: root.querySelector('[data-total]') && Number(root.querySelector('[data-total]').dataset.total),
    total_text: text('[data-total]'), verdict: text('.calc-verdict'), host: text('.calc-host'),
    need: root.querySelector('[data-need]') && Number(root.querySelector('[data-need]').dataset.need),
    need_text: text('[data-need]'), basis: text('[data-out=basis]'),
    fits: [...root.querySelectorAll('.calc-fits li')].map(li => [li.dataset.gpu, li.dataset.fits === 'true',
      li.textContent.slice(2)]),
    max_batch: text('[data-out=max_batch]'), max_seq: text('[data-out=max_seq]'),
    arch: text('[data-out=arch]'), shards: text('[data-out=shards]'),
    unit: root.querySelector('.calc-table thead th:nth-child(2)') && root.querySelector('.calc-table thead th:nth-child(2)').textContent,
    id: root.id, labels: [...root.querySelectorAll('[data-part] th')].map(th => th.textContent),
    fixes: [...root.querySelectorAll('[data-fix]')].map(a => [a.textContent, a.getAttribute('href')]),
    fixes_text: text('.calc-fixes'),
    state: Object.fromEntries([...root.querySelector('form').elements].filter(e => e.name && (e.type !== 'radio' || e.checked))
      .map(e => [e.name, e.type === 'checkbox' ? (e.checked ? '1' : '0') : e.value])),
  };
}"""


# The state the form is served in (the widget's defaults: the script reads them from the markup too, issue 14), from
# the controls' default values, whatever the script or a link has set since.
SERVED = """(selector) => Object.fromEntries([...document.querySelector(selector + ' form').elements]
  .filter(e => e.name && (e.type !== 'radio' || e.defaultChecked)).map(e => [e.name, e.type === 'checkbox'
    ? (e.defaultChecked ? '1' : '0') : e.tagName === 'SELECT' ? [...e.options].find(o => o.defaultSelected).value
    : e.defaultValue]))"""


def widget_data(page) -> dict:
    """The JSON the server embedded for the calculator, with the widget's defaults as its form is served."""
    data = json.loads(page.locator(f"{WIDGET} script[type='application/json']").text_content())
    return data | {"defaults": page.evaluate(SERVED, WIDGET)}


def set_state(page, changes: dict[str, str]) -> dict:
    """Apply form changes and return what the widget shows."""
    page.evaluate(SET_STATE, [WIDGET, changes])
    return page.evaluate(READ, WIDGET)


def expected(state: dict[str, str], shown: list[str], defaults: dict[str, str] | None = None) -> dict:
    """What the widget must show for this state, from builder.model through calculator.results (suggestions'
    links against the widget's defaults)."""
    return calc.results(state, MODELS, GPUS, shown, defaults or DEFAULTS[0])


def compare(got: dict, want: dict, where: str) -> tuple[list[str], int]:
    """Differences between the browser and Python for one state (any byte counts), and the largest byte difference."""
    problems = []
    if want["error"]:
        if got["error"] != want["error"] or got["shown"]:
            problems.append(f"{where}: error {got['error']!r} != {want['error']!r}")
        if got["summary"] != want["summary"]:
            problems.append(f"{where}: summary {got['summary']!r} != {want['summary']!r}")
        return problems, 0
    names = [p[0] for p in got["parts"]]
    if names != [p["name"] for p in want["parts"]]:
        return [f"{where}: parts {names} != {[p['name'] for p in want['parts']]}"], 0
    worst = 0
    for g, w in zip(got["parts"], want["parts"]):
        worst = max(worst, abs(g[1] - w["bytes"]))
        if g[1] != w["bytes"]:
            problems.append(f"{where}: {w['name']} {g[1]} != {w['bytes']} bytes")
        # The source as the reader sees it: each citation's short form (a link) and locator.
        shown = [w["size"], w["rule"], source_text(w["source"], REFERENCES)]
        if g[2:] != shown:
            problems.append(f"{where}: {w['name']} shows {g[2:]} != {shown}")
    if got["need"] != want["need"]:
        problems.append(f"{where}: need {got['need']} != {want['need']} bytes")
    texts = {"summary": want["summary"], "live": want["summary"], "total_text": want["total_text"],
             "need_text": want["need_text"], "basis": want["basis"],
             "max_batch": want["max_batch"], "max_seq": want["max_seq"], "host": want["host"] or None,
             "arch": want["arch"], "shards": want["shards"], "unit": want["unit"],
             "verdict": ("DOESN'T FIT " if not want["fits_chosen"] else "") + want["verdict"]}
    problems += [f"{where}: {key} {got[key]!r} != {value!r}" for key, value in texts.items() if got[key] != value]
    fits = [[f["id"], f["fits"], f["text"]] for f in want["fits"]]
    if got["fits"] != fits:
        problems.append(f"{where}: fits-on list {got['fits']} != {fits}")
    labels = [reader_name(p["name"]) for p in want["parts"]]
    if got["labels"] != labels:
        problems.append(f"{where}: part names {got['labels']} != {labels}")
    fixes = [[f["text"], "?" + urlencode([(f"{got['id']}.{k}", v) for k, v in f["link"]])] for f in want["fixes"]]
    if got["fixes"] != fixes:
        problems.append(f"{where}: suggestions {got['fixes']} != {fixes}")
    if not want["fits_chosen"] and not want["fixes"] and got["fixes_text"] != want["fixes_none"]:
        problems.append(f"{where}: no suggestion, but {got['fixes_text']!r} != {want['fixes_none']!r}")
    return problems, worst


DEFAULTS: list[dict[str, str]] = [{}]  # the page's calculator defaults, once a test has opened it


@pytest.fixture
def calculator(open_page):
    """The calculator page with JavaScript, and the widget's embedded data."""
    with open_page(PAGE) as visit:
        data = widget_data(visit.page)
        DEFAULTS[0] = data["defaults"]
        yield visit.page, data, visit


def test_default_state_equals_server_render(calculator):
    """With the script running, the default figure is what Python rendered, and nothing logged an error."""
    page, data, visit = calculator
    got = page.evaluate(READ, WIDGET)
    problems, worst = compare(got, expected(data["defaults"], data["shown"]), "default")
    assert problems == [] and worst == 0
    assert got["state"] == data["defaults"]
    assert visit.problems() == []
    # The markup too: the script filled the partial's macro templates and wrote what the server wrote.
    served, live = page.evaluate("""async (selector) => {
      const html = await (await fetch(location.href)).text();
      const doc = new DOMParser().parseFromString(html, 'text/html');
      return [doc.querySelector(selector + ' [data-out=result]').innerHTML,
              document.querySelector(selector + ' [data-out=result]').innerHTML];
    }""", WIDGET)
    assert "<svg" in served and "<tr data-part" in served and live == served


# The figure after each state redrawn in place (07-live-templates.js): parts, GPU lines, overflow, badge and suggestions
# come and go, and the architecture, mode and GPU change.
REDRAWN = [{"micro_batch": "4", "seq_len": "8192"}, {"micro_batch": "2"}, {"mode": "serve", "model": "llama-3-70b"},
           {"mode": "train", "model": "custom", "layers": "6", "gpu": "l4"}, {"sharding": "3", "lora_rank": "16"}, {"micro_batch": "16", "sharding": "0", "dp": "1", "recompute": "none"}]
FIGURE = """async (selector) => { const root = document.querySelector(selector);
  await (""" + SETTLED + """)(root); return root.querySelector('[data-out=result]').innerHTML; }"""


def test_a_figure_redrawn_in_place_is_what_a_first_draw_writes(calculator, open_page):
    """Redrawn in place from the previous state's figure, the figure's markup is what the page opened at that state's
    link draws afresh; back at the defaults, it is the served page's."""
    page, data, visit = calculator
    served = page.evaluate(FIGURE, WIDGET)
    state = dict(data["defaults"])
    for changes in REDRAWN:
        state |= changes
        set_state(page, state)
        redrawn = page.evaluate(FIGURE, WIDGET)
        page.wait_for_timeout(400)  # the URL is written 300 ms after the change
        with open_page(PAGE + page.evaluate("location.search")) as fresh:
            assert fresh.page.evaluate(FIGURE, WIDGET) == redrawn, changes
    set_state(page, data["defaults"])
    assert page.evaluate(FIGURE, WIDGET) == served
    assert visit.problems() == []


def test_every_select_offers_the_forms_choices_once_the_script_runs(calculator):
    """The page sends a select's chosen option and the words only it has (calculator.page_choices, issue 14); the
    script adds the rest: every select then offers the form's choices (calculator.form_groups), in order, each with
    its words, and the chosen one still chosen."""
    page, data, _ = calculator
    got = page.evaluate("""(selector) => Object.fromEntries([...document.querySelectorAll(selector + ' select')]
      .map(s => [s.name, [s.value, [...s.options].map(o => [o.value, o.text])]]))""", WIDGET)
    want = {c.key: [data["defaults"][c.key], [list(pair) for pair in c.choices]]
            for _, _, controls in calc.form_groups(GPUS, MODELS) for c in controls if c.kind == "select"}
    assert got == want


def test_every_catalog_model_matches_python_in_both_modes(calculator):
    """Each catalog model as a reader picks it, trained and served at the defaults, and a custom model whose head
    width is left empty (hidden / heads), shows what Python shows: a model whose shape reaches a rule the
    script cannot evaluate would fail here, whatever the random states happen to pick."""
    page, data, visit = calculator
    problems = []
    # A model with learned positions (GPT-2's 1,024) at its longest sequence: the longest that fits stops there, in
    # the script as in Python (questions.length_limit; the calculator's searches' cap).
    within = {model: {"seq_len": str(arch.learned_positions), "context": str(arch.learned_positions)}
              for model, arch in MODELS.items() if arch.learned_positions}
    # gpt-oss trains only with eager attention (transformers' GptOssPreTrainedModel._supports_sdpa is False): the
    # calculator's default, SDPA, is refused for it, and a reader switches (the refusal says how).
    needs = {model: {"attention": "eager"} for model, arch in MODELS.items() if arch.family == "gpt_oss"}
    states = [data["defaults"] | {"model": model, "mode": mode} | within.get(model, {})
              | (needs.get(model, {}) if mode == "train" else {})
              for model in MODELS for mode in ("train", "serve")]
    states.append(data["defaults"] | {"model": "custom", "head_dim": "", "hidden": "1000", "heads": "8"})
    for state in states:
        got = set_state(page, state)
        want = expected(state, data["shown"])
        assert not want["error"], (state["model"], want["error"])
        problems += compare(got, want, f"{state['model']} {state['mode']}")[0]
    assert problems == [], "\n".join(problems[:20])
    assert visit.problems() == []


INVALID = [
    {"model": "llama-3-8b", "tp": "3"},
    {"model": "gpt2", "seq_len": "1024", "pp": "13"},
    {"model": "gpt2", "seq_len": "1025"},  # past GPT-2's 1,024 learned positions
    {"model": "llama-3-8b", "ep": "2", "dp": "2"},
    {"model": "mixtral-8x7b", "ep": "4", "dp": "2"},
    {"model": "llama-3-8b", "cp": "3", "seq_len": "4096"},
    {"model": "llama-3-8b", "sharding": "0", "offload": "optimizer"},
    {"model": "llama-3-8b", "sharding": "2", "offload": "params"},
    {"model": "llama-3-8b", "lora_rank": "0", "qlora": "1"},
    {"model": "llama-3-8b", "sharding": "HYBRID_SHARD", "dp": "12"},
    {"model": "llama-3-8b", "micro_batch": "0"},
    {"model": "llama-3-8b", "overhead": "1001"},  # a fraction above 10 (ranges.py: 0 to 10)
    {"model": "llama-3-8b", "pp": "4", "virtual_stages": "3"},
    {"model": "custom", "heads": "32", "kv_heads": "5"},
    {"model": "custom", "experts": "8", "top_k": "9"},
    {"model": "custom", "layers": "0"},
    # Megatron-LM reduces in its grad buffer's dtype (param_and_grad_buffer.py group_params_for_buffers, d98e8a6).
    {"model": "llama-3-8b", "precision": "megatron-bf16", "implementation": "megatron", "sharding": "1",
     "reduce_dtype": "bf16"},
    # A Megatron precision is Megatron-LM's run: its distributed optimizer is ZeRO stage 1, stage 2 is DeepSpeed's.
    {"model": "llama-3-8b", "precision": "megatron-bf16", "sharding": "2", "dp": "8"},
    # DeepSpeed's ZeRO-1 keeps its buckets in the parameters' dtype: no reduce dtype is counted there.
    {"model": "llama-3-8b", "sharding": "1", "dp": "8", "reduce_dtype": "fp32"},
]


@pytest.mark.parametrize("changes", INVALID, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_invalid_states_show_the_models_message(calculator, changes):
    """An invalid combination shows validate_config's (or Architecture's) message, and no figure."""
    page, data, _ = calculator
    state = data["defaults"] | changes
    want = expected(state, data["shown"])
    assert want["error"], f"{changes} should be invalid"
    got = set_state(page, changes)
    assert got["error"] == want["error"] and not got["shown"] and got["summary"] == want["summary"]
    assert set_state(page, data["defaults"])["error"] is None  # and it recovers


def test_every_control_by_keyboard(calculator):
    """Each control changes the state from the keyboard: arrows in radio groups (native radio buttons), selects and
    number fields, Space on checkboxes."""
    page, data, _ = calculator
    base = data["defaults"] | {"model": "custom", "mode": "train", "sharding": "3", "dp": "2"}
    names = page.evaluate(f"() => [...document.querySelector('{WIDGET} form').elements].filter(e => e.name && e.type !== 'radio').map(e => e.name)")
    unchanged = []
    for name in names:
        page.evaluate(SET_STATE, [WIDGET, base])
        field = page.locator(f"{WIDGET} [name={name}]")
        # DDP's field shows with no sharding, FSDP's units with an FSDP strategy, serving's fields in serving.
        for reveal in ({"sharding": "0"}, {"sharding": "FULL_SHARD"}, {"mode": "serve"}):
            if not field.is_visible():
                page.evaluate(SET_STATE, [WIDGET, reveal])
        before = page.evaluate(READ, WIDGET)["state"]
        field.focus()
        kind = field.get_attribute("type") or "select"
        key = {"checkbox": "Space", "select": "ArrowUp" if name == "model" else "ArrowDown"}.get(kind, "ArrowUp")
        page.keyboard.press(key)
        after = page.evaluate(READ, WIDGET)["state"]
        if after[name] == before[name]:
            unchanged.append(name)
    for group in ("mode", "recompute"):
        radio = page.locator(f"{WIDGET} [role=radiogroup] [name={group}]:checked")
        before = page.evaluate(READ, WIDGET)["state"][group]
        radio.focus()
        page.keyboard.press("ArrowRight")
        after = page.evaluate(READ, WIDGET)["state"][group]
        focused = page.evaluate("document.activeElement.checked && document.activeElement.value")
        if after == before or focused != after:
            unchanged.append(group)
        page.evaluate(SET_STATE, [WIDGET, {"mode": "train"}])
    assert unchanged == [], f"keyboard did not change: {unchanged}"


def test_every_control_by_pointer(calculator):
    """Clicks on radios and checkboxes, picking options and typing into number fields all update the figure (read
    once it is drawn: a state not shown before is drawn a frame later, aria-busy until then)."""
    page, data, _ = calculator

    def summary() -> str:
        drawn(page, WIDGET)
        return page.locator(f"{WIDGET} [data-out=summary]").text_content()

    page.locator(f"{WIDGET} label:has(> [name=mode][value=serve])").click()
    assert "serving" in summary()
    page.locator(f"{WIDGET} [name=weights]").select_option("int4")
    drawn(page, WIDGET)
    assert page.locator(f"{WIDGET} [data-part='weights/quantised_linear']").count() == 1
    page.locator(f"{WIDGET} [name=batch]").fill("8")
    page.locator(f"{WIDGET} [name=batch]").dispatch_event("change")
    assert "8 x 4,096 tokens" in summary()
    page.locator(f"{WIDGET} label:has(> [name=mode][value=train])").click()
    page.locator(f"{WIDGET} label:has(> [name=recompute][value=full])").click()
    drawn(page, WIDGET)
    assert page.locator(f"{WIDGET} [data-part='activations/checkpoint']").count() == 1
    page.locator(f"{WIDGET} [name=model]").select_option("custom")
    assert summary().startswith("Custom model")
    page.locator(f"{WIDGET} label:has-text('Tied embeddings')").click()
    page.locator(f"{WIDGET} [name=layers]").fill("4")
    page.locator(f"{WIDGET} [name=layers]").dispatch_event("input")
    state = page.evaluate(READ, WIDGET)["state"]
    assert state["tied_embeddings"] == "1" and state["layers"] == "4"
    got = page.evaluate(READ, WIDGET)
    assert compare(got, expected(state, data["shown"]), "pointer")[0] == []


def test_url_round_trip(calculator, open_page):
    """The state lives in the URL (non-default values only) and opening that URL restores it."""
    page, data, _ = calculator
    state = data["defaults"] | {"model": "custom", "layers": "6", "mode": "serve", "kv_dtype": "fp8", "tp": "2", "gpu": "l4"}
    shown = set_state(page, state)
    page.wait_for_function("() => location.search.includes('calc.mode=serve')")  # written 300 ms later
    query = page.evaluate("location.search")
    assert "calc.mode=serve" in query and "calc.precision" not in query
    with open_page(PAGE + query) as visit:
        restored = visit.page.evaluate(READ, WIDGET)
        assert restored["state"] == state and restored["summary"] == shown["summary"]
        assert visit.page.locator(f"{WIDGET} [name=mode][value=serve]").is_checked()
        assert visit.problems() == []


def test_without_javascript_the_default_figure_is_there(open_page):
    """With JavaScript off the summary, chart, parts table, fits-on list and answers are the server's."""
    with open_page(PAGE, js=False) as visit:
        data = widget_data(visit.page)
        got = visit.page.evaluate(READ, WIDGET)
        assert compare(got, expected(data["defaults"], data["shown"]), "no-js") == ([], 0)
        assert visit.page.locator(f"{WIDGET} .calc-chart svg rect").count() > 5


def test_works_from_file_urls(file_browser):
    """Opened from file://, the script runs (a state change redraws) and logs no error."""
    with file_browser.open_page(PAGE) as visit:
        got = set_state(visit.page, {"mode": "serve"})
        assert "serving" in got["summary"] and visit.problems() == []


# Elements of the widget that stick out of it (wide content must scroll inside its own wrapper).
WIDGET_OVERFLOW = """(selector) => {
  const root = document.querySelector(selector), edge = root.getBoundingClientRect().right + 0.5;
  const scrolled = el => { for (let a = el.parentElement; a && a !== root; a = a.parentElement)
    if (getComputedStyle(a).overflowX !== 'visible') return true; return false; };
  return [...root.querySelectorAll('*')].filter(el => el.getBoundingClientRect().right > edge && !scrolled(el)
    && !el.closest('svg, [hidden]')).map(el => `${el.tagName} ${el.className} sticks out of the widget`);
}"""

STATES = {
    "default": {},
    "overflow": {"model": "llama-3-70b", "sharding": "0", "dp": "1", "gpu": "h100-80gb"},
    "sharded": {"model": "mixtral-8x7b", "sharding": "3", "dp": "8", "ep": "2", "tp": "2", "offload": "optimizer"},
    "serving": {"mode": "serve", "weights": "int4", "batch": "32"},
    "invalid": {"tp": "3"},
}


@pytest.mark.parametrize("color_scheme", ["light", "dark"])
def test_axe_finds_no_violations(open_page, axe_source, color_scheme):
    """axe-core reports nothing in the default, overflow, sharded, serving and error states, light and dark."""
    problems = []
    with open_page(PAGE, color_scheme=color_scheme) as visit:
        for name, changes in STATES.items():
            data = widget_data(visit.page)
            set_state(visit.page, data["defaults"] | changes)
            problems += [f"{name}: {line}" for line in checks.run_axe(visit.page, axe_source)]
    assert problems == []


@pytest.mark.parametrize("viewport", [NARROW, WIDE], ids=["360px", "1280px"])
def test_layout_and_screenshots(open_page, screenshot_dir, viewport):
    """No horizontal overflow and no overlapping or clipped chart text at 360 and 1280 px, light and dark."""
    problems = []
    for scheme in ("light", "dark"):
        with open_page(PAGE, color_scheme=scheme, viewport=viewport, reduced_motion=True) as visit:
            data = widget_data(visit.page)
            for name in ("default", "overflow"):
                set_state(visit.page, data["defaults"] | STATES[name])
                problems += [f"{scheme} {name}: {p}" for p in visit.page.evaluate(WIDGET_OVERFLOW, WIDGET)]
                problems += [f"{scheme} {name}: {p}" for p in checks.find_chart_text_problems(visit.page)
                             if "calc-chart" in p]
                visit.page.locator(WIDGET).screenshot(path=str(screenshot_dir / f"calculator-{name}-{scheme}-{viewport[0]}.png"))
    assert problems == []


# Mode switches (issue 19, section 1) ------------------------------------------------------

def reader_sets(page, key: str, value: str) -> None:
    """Change one control as a reader does: pick an option, type a number, tick a box, click a choice."""
    field = page.locator(f"{WIDGET} [name={key}]")
    kind = field.first.get_attribute("type") or "select"
    if kind == "radio":
        page.locator(f"{WIDGET} [name={key}][value={value}]").click()
    elif kind == "checkbox":
        field.set_checked(value == "1")
    elif kind == "select":
        field.select_option(value)
    else:
        field.fill(value)


def other_values(page, key: str, current: str) -> list[str]:
    """Every other choice of a select or radio group, the other state of a checkbox, or a few numbers."""
    choices = page.evaluate("""([selector, key]) => {
      const el = document.querySelector(selector).querySelector('form').elements[key];
      if (el instanceof RadioNodeList) return [...el].map(r => r.value);
      if (el.tagName === 'SELECT') return [...el.options].map(o => o.value);
      if (el.type === 'checkbox') return ['0', '1'];
      return null;
    }""", [WIDGET, key])
    numbers = {"lora_rank": ["16"], "lora_dropout": ["0.1"], "recompute_layers": ["3"], "micro_batch": ["8"], "seq_len": ["65536"], "grad_accum": ["4"], "virtual_stages": ["2"],
               "cp": ["2", "3"], "batch": ["64"], "context": ["131072"]}
    return [v for v in (choices or numbers[key]) if v != current]


def test_zero3_then_serving_holds_the_whole_model(calculator):
    """Regression (issue 19): ZeRO-3 on 8 GPUs in training, then Serving. Each replica holds all of Llama 3 8B's
    weights (16,060,522,496 B in bf16, 15.0 GiB), so a T4 16GB cannot hold it with a batch of 1 x 4,096 tokens."""
    page, data, _ = calculator
    set_state(page, data["defaults"] | {"model": "llama-3-8b", "mode": "train", "gpu": "t4"})
    reader_sets(page, "sharding", "3")
    reader_sets(page, "dp", "8")
    assert page.evaluate(READ, WIDGET)["parts"][0][1] == 8_030_261_248 * 2 // 8  # training: sharded over 8
    reader_sets(page, "mode", "serve")
    got = page.evaluate(READ, WIDGET)
    weights = dict((p[0], p[1]) for p in got["parts"])["weights"]
    assert weights == 8_030_261_248 * 2  # published: 8,030,261,248 parameters (Meta Llama 3 8B model card)
    assert got["verdict"].startswith("DOESN'T FIT") and "exceeds by" in got["verdict"]
    problems, _ = compare(got, expected(got["state"], data["shown"]), "zero3 then serve")
    assert problems == []
    # The hidden training controls cannot be reached in serving, and their values do not count.
    assert not page.locator(f"{WIDGET} [name=sharding]").is_visible()


def test_training_controls_never_change_serving_numbers(calculator):
    """Property (issue 19): from every training setting a reader can choose, a switch to Serving shows exactly
    what serving shows from the plain state; and serving settings never change a training figure."""
    page, data, _ = calculator
    base = data["defaults"] | {"model": "mixtral-8x7b", "dp": "4", "gpu": "h100-80gb"}
    for mode, other in (("train", "serve"), ("serve", "train")):
        set_state(page, base | {"mode": other})
        reference = page.evaluate(READ, WIDGET)
        assert reference["error"] is None
        keys = [k for k, shown in calc.MODE_ONLY.items() if shown == mode]
        assert {"sharding", "offload", "precision", "lora_rank", "sequence_parallel", "cp", "virtual_stages"} <= set(keys) if mode == "train" else keys
        tried = 0
        for key in keys:
            for value in other_values(page, key, base[key]):
                set_state(page, base | {"mode": mode})
                reader_sets(page, key, value)
                reader_sets(page, "mode", other)
                got = page.evaluate(READ, WIDGET)
                tried += 1
                assert got["state"][key] == value
                for field in ("summary", "parts", "total", "verdict", "fits", "max_batch", "max_seq", "error"):
                    assert got[field] == reference[field], f"{mode} {key}={value} changed {other} {field}"
        assert tried >= (30 if mode == "train" else 10)


COPY_RIGHT_AFTER_A_CHANGE = """(widget) => {
  Object.defineProperty(navigator, 'clipboard', {configurable: true,
    value: {writeText: (text) => { window.copied = text; return Promise.resolve(); }}});
  const root = document.querySelector(widget);
  root.querySelector('[name=mode][value=serve]').click();  // a change, and in the same task:
  root.querySelector('[data-copy]').click();
  return [window.copied, location.search];
}"""


def test_copy_link_right_after_a_change_copies_that_change(calculator, open_page, site_browser):
    """Copy link pressed in the same moment as a change (before the URL is written, 300 ms later) copies a link
    that reopens the changed state."""
    page, _, _ = calculator
    copied, search = page.evaluate(COPY_RIGHT_AFTER_A_CHANGE, WIDGET)
    assert "calc.mode=serve" not in search  # the address bar has not caught up yet
    assert copied.startswith(site_browser.base_url + PAGE) and "calc.mode=serve" in copied
    with open_page(copied.removeprefix(site_browser.base_url)) as visit:
        assert visit.page.locator(f"{WIDGET} [name=mode][value=serve]").is_checked()
        assert visit.problems() == []


# Issue 18: a run that does not fit names the nearest changes that would, each a link that applies it ------------

NOT_FITTING = [{"micro_batch": "4", "seq_len": "8192"}, {"model": "llama-3-70b"},
               {"mode": "serve", "model": "llama-3-70b"}, {"mode": "serve", "batch": "512", "context": "32768"},
               {"micro_batch": "16", "sharding": "0", "dp": "1", "recompute": "none"}]


def test_a_run_that_does_not_fit_names_what_would_as_python_does(calculator):
    page, data, visit = calculator
    shown = []
    for changes in NOT_FITTING:
        state = data["defaults"] | changes
        want = expected(state, data["shown"], data["defaults"])
        assert not want["fits_chosen"], changes
        got = set_state(page, state)
        problems, _ = compare(got, want, str(changes))
        assert problems == []
        shown.append([text for text, _ in got["fixes"]])
    assert shown[0] == ["fits with micro-batch 1", "fits with full recomputation",
                        "fits on 8 GPUs with ZeRO-3 and full recomputation", "fits with sequences of 2,202 tokens"]  # as Python: tests/test_widgets_calculator.py
    assert shown[2] == ["fits with int8 weights", "fits on 16 GPUs with tensor parallel 2"]
    assert shown[4] == []  # no single change fits: the result says so (compare checked the words)
    assert page.locator(f"{WIDGET} .calc-fixes").text_content().startswith("None of the usual changes")
    assert visit.problems() == []


@pytest.mark.parametrize("index", [1, 3])
def test_clicking_a_suggestion_applies_it_and_the_run_then_fits(calculator, index):
    page, data, visit = calculator
    state = data["defaults"] | {"micro_batch": "4", "seq_len": "8192"}
    set_state(page, state)
    target = calc.fixes(state, MODELS, next(g[2] for g in GPUS if g[0] == state["gpu"]))[index]
    link = page.locator(f"{WIDGET} [data-fix]").nth(index)
    assert link.text_content() == target[0]
    link.click()
    got = page.evaluate(READ, WIDGET)
    assert got["state"] == target[1] and got["verdict"].startswith("H100 SXM 80GB (79.2 GiB usable): fits with")  # CUDA total
    problems, _ = compare(got, expected(target[1], data["shown"], data["defaults"]), "after the click")
    assert problems == [] and got["fixes"] == []
    assert page.evaluate("document.activeElement.classList.contains('calc-verdict')")
    # The link is the state's URL too: opened afresh, it shows the same run.
    page.wait_for_timeout(400)
    reopened = page.context.new_page()
    reopened.goto(page.url)
    again = reopened.evaluate(READ, WIDGET)
    assert again["state"] == target[1] and again["need"] == got["need"]
    reopened.close()
    assert visit.problems() == []


# Issue 19 section 2: named starting points, the unit switch, the readouts, parameter and reduce dtypes ----------

def test_choosing_the_classic_start_shows_161_4_gb(calculator):
    """Seed 004's worked example, chosen from the starting points as a reader picks it: the form takes its
    settings and the sum of parts reads 161.4 GB, as Python computes it; changing another setting leaves it."""
    page, data, visit = calculator
    page.locator(f"{WIDGET} [name=start]").select_option("classic-8b")
    got = page.evaluate(READ, WIDGET)
    want_state = calc.start_state("classic-8b", MODELS, data["defaults"]["gpu"])
    assert got["state"] == want_state
    assert got["state"]["unit"] == "GB" and got["state"]["implementation"] == "korthikanti" and got["state"]["overhead"] == "10"
    assert got["total_text"].startswith("161.4 GB = ") and got["unit"] == "GB"
    problems, worst = compare(got, expected(want_state, data["shown"]), "classic-8b")
    assert problems == [] and worst == 0
    page.locator(f"{WIDGET} [name=micro_batch]").fill("2")
    assert page.evaluate(READ, WIDGET)["state"]["start"] == ""
    assert visit.problems() == []


@pytest.mark.parametrize("start", [key for key, *_ in calc.STARTS])
def test_every_start_matches_python(calculator, start):
    page, data, _ = calculator
    page.locator(f"{WIDGET} [name=start]").select_option(start)
    got = page.evaluate(READ, WIDGET)
    want_state = calc.start_state(start, MODELS, data["defaults"]["gpu"])
    assert got["state"] == want_state
    assert compare(got, expected(want_state, data["shown"]), start)[0] == []


def test_unit_dtypes_and_start_live_in_the_url_and_old_links_still_open(calculator, open_page):
    page, data, _ = calculator
    state = data["defaults"] | {"unit": "GB", "param_dtype": "fp32", "reduce_dtype": "fp32", "model": "mixtral-8x7b"}
    shown = set_state(page, state)
    assert shown["unit"] == "GB" and "active per token" in shown["arch"]
    page.wait_for_function("() => location.search.includes('calc.reduce_dtype=fp32')")
    query = page.evaluate("location.search")
    assert "calc.unit=GB" in query and "calc.param_dtype=fp32" in query
    with open_page(PAGE + query) as visit:
        restored = visit.page.evaluate(READ, WIDGET)
        assert restored["state"] == state and restored["summary"] == shown["summary"]
    # A link from before these controls: they take their defaults (GiB, the policy's dtypes).
    with open_page(PAGE + "?calculator-1.mode=serve&calculator-1.tp=2") as visit:
        restored = visit.page.evaluate(READ, WIDGET)
        assert restored["state"] == data["defaults"] | {"mode": "serve", "tp": "2"}
        assert restored["unit"] == "GiB" and visit.problems() == []


# Issue 19 section 2: fp8 and fp4 training as Transformer Engine holds them --------------------------------------

@pytest.mark.parametrize("precision, copy, words", [
    ("te-fp8", "2 B/linear param (fp8 data + fp8 transpose)", "float8_tensor.py"),
    ("te-nvfp4", "1.12 B/linear param (row-wise + column-wise fp4, an E4M3 scale per 16 each)", "nvfp4_tensor.py"),
])
def test_choosing_fp8_or_fp4_shows_the_recipes_copies_as_python_does(calculator, precision, copy, words):
    """A reader picks an fp8 or fp4 recipe from the Precision control: the calculator prices what Python prices
    (TransformerEngine 2.20.0.dev0: bf16 weights stay, a quantised copy of each linear weight is added, the saved
    linear inputs shrink), names the copy's bytes and cites TE's tensor file, and the page explains why."""
    page, data, visit = calculator
    assert precision in [o for o in page.locator(f"{WIDGET} [name=precision] option").evaluate_all(
        "os => os.map(o => o.value)")]
    # Without FSDP, whose mixed precision keeps each shard in fp32 (the Sharding page): Megatron's bf16 weights.
    state = data["defaults"] | {"model": "llama-3-8b", "precision": precision, "seq_len": "4096", "sharding": "0",
                                "dp": "1"}
    got = set_state(page, state)
    problems, worst = compare(got, expected(state, data["shown"]), precision)
    assert problems == [] and worst == 0
    rows = {p[0]: p for p in got["parts"]}
    assert rows["weights"][3] == "2 B/param (bf16)"  # the bf16 weights are still there
    copies = rows["weights/low_precision_copies"]
    assert copies[3] == copy and "TransformerEngine 2.20.0.dev0" in copies[4] and words in copies[4]
    assert "Low-precision weight copies" in got["labels"]
    # Against Megatron's bf16 policy (the same states without the recipe): more memory in weights, less saved.
    base = set_state(page, state | {"precision": "megatron-bf16"})
    act = lambda shown: sum(p[1] for p in shown["parts"] if p[0].startswith("activations/"))  # noqa: E731
    assert act(got) < act(base) and got["total"] > base["total"] - act(base) + act(got)
    assert "1 byte per parameter" in page.locator("main").text_content()
    assert visit.problems() == []


def test_deepspeed_zero3_limits_show_and_count_with_stage_3_only(calculator):
    """DeepSpeed ZeRO-3's stage3_* limits (DeepSpeed commit edaa722, runtime/zero/config.py) are calculator fields
    shown with ZeRO stage 3 only; there they move the gathered parameters exactly as Python's model does (a persistence
    threshold of 0 partitions even the norms), and under any other stage they neither show nor count."""
    page, data, _ = calculator
    fields = [f"{WIDGET} [name={control.key}]" for control in calc.PARALLEL_CONTROLS if control.show == calc.ZERO3_SHOWN]
    base = data["defaults"] | {"model": "llama-3-8b", "mode": "train", "dp": "8", "sharding": "3"}
    shown = set_state(page, base)
    assert all(page.locator(field).is_visible() for field in fields)
    reader_sets(page, "stage3_param_persistence_threshold", "0")
    reader_sets(page, "stage3_prefetch_bucket_size", "0")
    got = page.evaluate(READ, WIDGET)
    want = expected(got["state"], data["shown"])
    assert got["need"] == want["need"] and got["need"] < shown["need"]
    assert [p[:2] for p in got["parts"]] == [[p["name"], p["bytes"]] for p in want["parts"]]
    set_state(page, base | {"sharding": "1"})
    assert not any(page.locator(field).is_visible() for field in fields)
    one = page.evaluate(READ, WIDGET)
    assert one["need"] == expected(one["state"], data["shown"])["need"]
    # A limit left changed in the form (say, from a link) counts for nothing under stage 1.
    assert set_state(page, base | {"sharding": "1", "stage3_param_persistence_threshold": "0"})["need"] == one["need"]


def test_deepspeed_gradient_buckets_show_and_count_with_a_zero_stage_only(calculator):
    """DeepSpeed's reduce_bucket_size, overlap_comm and contiguous_gradients (commit edaa722, runtime/zero/config.py)
    are calculator fields shown with a ZeRO stage and no FSDP strategy; with overlap_comm on under ZeRO-2 the
    unsharded gradients are setup_buckets' two buffers (stage_1_and_2.py), as Python counts them, and under FSDP the
    fields neither show nor count."""
    page, data, _ = calculator
    fields = [f"{WIDGET} [name={option}]" for option in ("reduce_bucket_size", "overlap_comm", "contiguous_gradients")]
    base = data["defaults"] | {"model": "llama-3-8b", "mode": "train", "dp": "8", "sharding": "2"}
    set_state(page, base)
    assert all(page.locator(field).is_visible() for field in fields)
    got = set_state(page, base | {"overlap_comm": "on", "reduce_bucket_size": "200000000"})
    want = expected(got["state"], data["shown"])
    assert got["need"] == want["need"]
    assert [p[:2] for p in got["parts"]] == [[p["name"], p["bytes"]] for p in want["parts"]]
    assert dict(p[:2] for p in got["parts"])["comm/unsharded_grads"] == 2 * 2 * 10**8 * 2
    set_state(page, base | {"sharding": "FULL_SHARD"})
    assert not any(page.locator(field).is_visible() for field in fields)
    plain = page.evaluate(READ, WIDGET)
    assert set_state(page, base | {"sharding": "FULL_SHARD", "overlap_comm": "on"})["need"] == plain["need"]


def test_ddp_gradient_as_bucket_view_shows_and_counts_with_no_sharding_only(calculator):
    """PyTorch DDP's gradient_as_bucket_view (PyTorch 2.13 reducer.cpp: each .grad a view of its bucket) shows with
    ZeRO / FSDP none only; there it removes DDP's second copy of the gradients exactly as Python's model does, and
    under ZeRO stage 1 it neither shows nor counts."""
    page, data, _ = calculator
    field = f"{WIDGET} [name=gradient_as_bucket_view]"
    base = data["defaults"] | {"model": "llama-3-8b", "mode": "train", "dp": "8", "sharding": "0"}
    copies = set_state(page, base)
    assert page.locator(field).is_visible()
    assert "comm/ddp_buckets" in [p[0] for p in copies["parts"]]
    views = set_state(page, base | {"gradient_as_bucket_view": "1"})
    want = expected(views["state"], data["shown"])
    assert views["need"] == want["need"] and views["need"] < copies["need"]
    assert [p[:2] for p in views["parts"]] == [[p["name"], p["bytes"]] for p in want["parts"]]
    one = set_state(page, base | {"sharding": "1", "gradient_as_bucket_view": "1"})
    assert not page.locator(field).is_visible()
    assert one["need"] == set_state(page, base | {"sharding": "1"})["need"]


def test_fsdp_units_of_their_own_show_and_count_with_fsdp_only(calculator):
    """torchtune's custom_sharded_layers (torchtune/training/_distributed.py shard_model at 30b8519) shows with an FSDP
    strategy only; there the token embedding and the output layer, units of their own, leave the root unit and change
    the output layer's backward with torchtune's chunked loss exactly as Python's model does (PyTorch 2.13 FSDP2's
    hooks, tests/test_fsdp_units.py), and with ZeRO stage 3 they neither show nor count."""
    page, data, _ = calculator
    field = f"{WIDGET} [name=custom_sharded_layers]"
    base = data["defaults"] | {"model": "llama-3-8b", "mode": "train", "dp": "8", "sharding": "FULL_SHARD",
                               "loss": "chunked", "recompute": "full"}
    root = set_state(page, base)
    assert page.locator(field).is_visible()
    units = set_state(page, base | {"custom_sharded_layers": "tok_embeddings,output"})
    want = expected(units["state"], data["shown"])
    assert units["need"] == want["need"] and units["need"] < root["need"]
    assert [p[:2] for p in units["parts"]] == [[p["name"], p["bytes"]] for p in want["parts"]]
    assert "comm/gathered_output" in [p[0] for p in units["parts"]]
    zero3 = set_state(page, base | {"sharding": "3", "custom_sharded_layers": "tok_embeddings,output"})
    assert not page.locator(field).is_visible()
    assert zero3["need"] == set_state(page, base | {"sharding": "3"})["need"]


# Issue 13: the optimizer states' and the accumulation's dtypes, as the command line and a page's settings take them --

def cli_bytes(*flags: str) -> tuple[int, int]:
    """What the command line's Config needs per GPU and its sum of parts (builder.cli builds it from the flags)."""
    from builder import cli
    from builder.model.peak import assess

    breakdown, needed = assess(cli.config_from_args(cli.make_parser().parse_args(["estimate", *flags])))
    return needed.bytes, breakdown.total


# The page's calculator starts from its preset (content/calculator.md): these are its flags.
PRESET_FLAGS = ("--model", "llama-3-8b", "--seq-len", "4096", "--recompute", "selective", "--fsdp", "FULL_SHARD",
                "--dp", "8")


@pytest.mark.parametrize("key, value", [("optimizer_state_dtype", "bf16"), ("exp_avg_dtype", "fp8"),
                                        ("exp_avg_sq_dtype", "fp16"), ("reduce_dtype", "fp32")])
def test_a_link_with_a_dtype_key_opens_that_setting_and_prices_it_as_the_cli(open_page, key, value):
    """calc.<option>=<dtype> in a link (the Config option's own name, as in front matter) sets that control; the
    live figure is Python's for the same state, and its need and sum of parts are the command line's with
    --<option> <dtype> (which differ from the run without it)."""
    with open_page(f"{PAGE}?calc.{key}={value}") as visit:
        data = widget_data(visit.page)
        got = visit.page.evaluate(READ, WIDGET)
        state = data["defaults"] | {key: value}
        assert got["state"] == state and visit.page.locator(f"{WIDGET} .wdg-link-notice").count() == 0
        problems, worst = compare(got, expected(state, data["shown"], data["defaults"]), f"{key}={value}")
        assert problems == [] and worst == 0
        flag = "--" + key.replace("_", "-")
        assert (got["need"], got["total"]) == cli_bytes(*PRESET_FLAGS, flag, value) != cli_bytes(*PRESET_FLAGS)
        assert visit.problems() == []


@pytest.mark.parametrize("changes, words", [
    # bitsandbytes' 8-bit AdamW keeps block-wise uint8 codes (Dettmers et al. 2021): no state dtype to choose.
    ({"optimizer": "adam8bit", "optimizer_state_dtype": "bf16"}, "adam8bit has no state dtype to choose"),
    # Lion keeps one momentum buffer (Chen et al. 2023, Algorithm 1), no exp_avg.
    ({"optimizer": "lion", "exp_avg_dtype": "fp8"}, "only Adam and AdamW keep exp_avg; optimizer lion has none"),
    # DeepSpeed (commit edaa722) stage_1_and_2.py: ZeRO-2 accumulates in the gradients' own dtype.
    ({"sharding": "2", "grad_accum_dtype": "fp32"}, "DeepSpeed's ZeRO stage 2 accumulates gradients in their own dtype"),
    # torchtune has no mixed precision (torchtune/training/precision.py get_dtype at 30b8519; tests/
    # test_torchtune_precision.py): the preset's bf16-mixed under implementation torchtune.
    ({"implementation": "torchtune"}, "torchtune trains in one dtype, its recipes' bf16 or fp32"),
])
def test_a_refused_dtype_shows_the_command_lines_sentence(calculator, capsys, changes, words):
    """Picked as a reader picks them, a combination the model refuses shows validate_config's sentence, the one the
    command line prints after its flag for the same run, and no figure."""
    from tests.test_cli import run

    page, data, visit = calculator
    for key, value in changes.items():
        reader_sets(page, key, value)
    got = page.evaluate(READ, WIDGET)
    assert words in got["error"] and not got["shown"]
    sharding = ("--zero", changes["sharding"]) if "sharding" in changes else ("--fsdp", "FULL_SHARD")
    flags = [word for key, value in changes.items() if key != "sharding"
             for word in ("--" + key.replace("_", "-"), value)]
    code, _, err = run(capsys, "estimate", *PRESET_FLAGS[:-4], "--dp", "8", *sharding, *flags)
    option, _, sentence = got["error"].partition(": ")
    assert code == 2 and err.strip().endswith(f"argument --{option.replace('_', '-')}: {sentence}")
    assert visit.problems() == []
