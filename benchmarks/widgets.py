"""Widget benchmark (issue 4): slider input to updated DOM, and the served widget script's gzipped size.

In headless Chromium, on the built home page, each widget's slider gets >= 200 input events; for
each, performance.now() is read before dispatching `input` and after the handler has updated the
DOM (handlers run synchronously: every text, bar and attribute is written when dispatchEvent
returns) -- the `p95_ms` the target applies to -- and again after forcing style and layout of
the page (`layout_p95_ms`, which depends on the whole page and on the machine's load).
The calculator is also timed over random states (the browser test's generator: catalog and
custom models, training and serving, every parallel layout), from the form's change event to
the updated DOM: its worst case is what a reader meets when a search needs many estimates.
Targets: p95 <= 4 ms, <= 6 KB gzipped of script per page (each page loads one script holding the
shared helpers and only the widgets it embeds: static/widgets-<widgets>.js).
"""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Scripts have no byte cap of their own: a page's weight is judged whole (HTML + CSS + JS + images, gzipped),
# in the build benchmark's page table; their sizes are reported here for that.
TARGETS = {"input_p95_ms": 4.0}
INPUTS = 300

MEASURE = """([selector, control, summarySelector, values, inputs]) => {
  const root = document.querySelector(selector), slider = root.querySelector(control);
  const summary = root.querySelector(summarySelector), times = [], laid = [];
  const low = +slider.min, high = +slider.max;
  const pick = (i) => values.length ? values[i % values.length] : low + ((i * 37) % (high - low + 1));
  for (let i = 0; i < inputs; i++) {
    slider.value = pick(i);
    const start = performance.now();
    slider.dispatchEvent(new Event('input', {bubbles: true}));
    const updated = performance.now();
    summary.getBoundingClientRect();  // force style and layout of the updated DOM
    times.push(updated - start);
    laid.push(performance.now() - start);
  }
  const at = (list, q) => list.sort((a, b) => a - b)[Math.min(list.length - 1, Math.ceil(q * list.length) - 1)];
  return {inputs, p50_ms: at(times, 0.5), p95_ms: at(times, 0.95), max_ms: at(times, 1),
          layout_p50_ms: at(laid, 0.5), layout_p95_ms: at(laid, 0.95)};
}"""

# Set every control of the calculator for one state, then one change event; per state, ms to updated DOM.
MEASURE_STATES = """([selector, states]) => {
  const form = document.querySelector(selector + ' form'), times = [];
  for (const state of states) {
    for (const [key, value] of Object.entries(state)) {
      const el = form.elements[key];
      if (el.type === 'checkbox') el.checked = value === '1'; else el.value = value;
    }
    const start = performance.now();
    form.dispatchEvent(new Event('change', {bubbles: true}));
    times.push(performance.now() - start);
  }
  const at = (q) => times.sort((a, b) => a - b)[Math.min(times.length - 1, Math.ceil(q * times.length) - 1)];
  return {states: states.length, p50_ms: at(0.5), p95_ms: at(0.95), max_ms: at(1)};
}"""
RANDOM_STATES = 240

# (page, widget, the control that gets input events, the element whose layout is forced, values to cycle)
# The calculator re-estimates and runs its two searches (largest micro-batch and sequence) on every input.
CASES = (
    ("index.html", "bytes-per-param", "[type=range]", "[data-t=sum]", []),
    ("index.html", "memory-budget", "[type=range]", "[data-t=sum]", []),
    ("calculator.html", "calculator", "[name=micro_batch]", "[data-out=live]", [1, 2, 3, 4, 6, 8, 12, 16, 24, 32]),
)


def build_site(out: Path) -> None:
    """Build the site into out (a fresh process, like `make site`)."""
    command = [sys.executable, "-m", "builder", "build", "--force", "--quiet", "--out", str(out)]
    if subprocess.run(command, cwd=ROOT).returncode != 0:
        raise SystemExit("benchmark: the site does not build (errors above); fix them first")


def scripts(site: Path) -> dict[str, dict[str, int]]:
    """Every widget script the site serves: raw and gzipped (level 9) bytes, and the pages loading it."""
    sizes = {}
    for path in sorted((site / "static").glob("widgets*.js")):
        data = path.read_bytes()
        pages = sorted(page.name for page in site.glob("*.html") if f'src="static/{path.name}"' in page.read_text())
        sizes[path.name] = {"bytes": len(data), "gzip_bytes": len(gzip.compress(data, compresslevel=9, mtime=0)),
                            "pages": pages}
    return sizes


def measure_inputs(site: Path) -> dict:
    """Per widget: p50/p95/max ms from a control's input event to the updated DOM."""
    from playwright.sync_api import sync_playwright

    from tests.browser.helpers import LAUNCH_ARGS
    from tests.browser_setup import find_chromium

    chromium = find_chromium()
    if not chromium:
        raise SystemExit("benchmark: Chromium is missing (run `make browser`)")
    results = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=LAUNCH_ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        for path, name, control, summary, values in CASES:
            page.goto((site / path).as_uri())
            arguments = [f"[data-widget={name}]", control, summary, values]
            page.evaluate(MEASURE, arguments + [20])  # warm-up: let the JIT see the handlers
            results[name] = {k: round(v, 4) if isinstance(v, float) else v
                             for k, v in page.evaluate(MEASURE, arguments + [INPUTS]).items()}
        results["calculator_states"] = measure_states(page, site)
        browser.close()
    return results


def measure_states(page, site: Path) -> dict:
    """The calculator over random states: p50/p95/max ms from the change event to the updated DOM."""
    import json
    import random

    from tests.browser.test_widget_calculator import random_state

    page.goto((site / "calculator.html").as_uri())
    data = json.loads(page.locator("[data-widget=calculator] script[type='application/json']").text_content())
    rng = random.Random(20240611)
    states = [random_state(rng, data["defaults"]) for _ in range(RANDOM_STATES)]
    timing = page.evaluate(MEASURE_STATES, ["[data-widget=calculator]", states])
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in timing.items()}


def bench_widgets() -> dict:
    """Slider-to-DOM latency per widget and the widget script's gzipped size."""
    workdir = Path(tempfile.mkdtemp(prefix="bench-widgets-"))
    try:
        site = workdir / "site"
        build_site(site)
        widgets = measure_inputs(site)
        served = scripts(site)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return {"cores": os.cpu_count(), "load_average_1min": round(os.getloadavg()[0], 2), "widgets": widgets,
            "scripts": served, "script_gzip_bytes": max(s["gzip_bytes"] for s in served.values()),
            "input_p95_ms": max(w["p95_ms"] for n, w in widgets.items() if n != "calculator_states"),
            "targets": TARGETS}


def print_widgets(result: dict) -> None:
    """Table of the widget benchmark."""
    print(f"widgets on {result['cores']} cores, 1-minute load {result['load_average_1min']} "
          "(Chromium, slider input -> updated DOM; then with the page's layout forced)")
    for name, row in result["widgets"].items():
        if name == "calculator_states":
            print(f"  calculator, {row['states']} random states (change -> updated DOM): p50 {row['p50_ms']:.3f} ms"
                  f"  p95 {row['p95_ms']:.3f} ms  max {row['max_ms']:.3f} ms")
            continue
        flag = "  ok" if row["p95_ms"] <= TARGETS["input_p95_ms"] else f"  OVER target {TARGETS['input_p95_ms']} ms"
        print(f"  {name:<18} {row['inputs']:4d} inputs  p50 {row['p50_ms']:7.3f} ms  p95 {row['p95_ms']:7.3f} ms"
              f"  max {row['max_ms']:7.3f} ms{flag}; with layout p50 {row['layout_p50_ms']:.3f} ms"
              f"  p95 {row['layout_p95_ms']:.3f} ms")
    for name, row in result["scripts"].items():
        size = row["gzip_bytes"]
        print(f"  static/{name:<45} {row['bytes']:6d} B raw, {size:6d} B gzipped  ({', '.join(row['pages'])})")
