"""Seed 003, the reference diagram ("Training Memory Breakdown (per GPU)": 7B params, FP32 Adam = 7B * (4+4+4+4) =
112 GB), as a reader sees it on the model-states page at a phone's width and a desktop's: the chart is there, 112 GB
and 104.3 GiB are readable, and no two of its labels overlap (boxes measured by the browser, in its own font).

The figure is Transformer Math 101's (Anthony, Biderman, Schoelkopf 2023): fp32 weights 4 bytes, gradients 4 bytes,
Adam's two moments 4 + 4 bytes per parameter (Kingma & Ba 2014); 112 x 10^9 bytes is 104.3 GiB.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser

# Every text of the chart layout the page shows at this width, with the box the browser draws it in.
VISIBLE_TEXTS = """() => {
  const figure = document.querySelector('#chart-seven-billion-fp32');
  const svg = [...figure.querySelectorAll('svg.tm-chart')].find(s => s.getBoundingClientRect().width > 0);
  return {
    layout: svg.getAttribute('class'),
    width: svg.getBoundingClientRect().width,
    texts: [...svg.querySelectorAll('text')].map(t => {
      const r = t.getBoundingClientRect();
      return {text: t.textContent, cls: t.getAttribute('class'), size: parseFloat(getComputedStyle(t).fontSize),
              rotated: t.hasAttribute('transform'), x0: r.left, y0: r.top, x1: r.right, y1: r.bottom};
    }),
  };
}"""


@pytest.mark.parametrize("viewport, layout", [((390, 900), "tm-chart tm-chart-narrow"),
                                              ((1280, 900), "tm-chart tm-chart-wide")])
def test_seed_003_reference_diagram_reads_112_gb_and_104_3_gib_with_no_overlapping_labels(open_page, viewport, layout):
    """seed 003 reference diagram: weights 28 GB, gradients 28 GB, Adam m + v 56 GB = 112 GB (104.3 GiB)."""
    with open_page("model-states.html", js=True, viewport=viewport) as visit:
        chart = visit.page.evaluate(VISIBLE_TEXTS)
        assert visit.problems() == []
    assert chart["layout"] == layout
    assert chart["width"] <= viewport[0]
    texts = [t for t in chart["texts"] if not t["rotated"]]
    words = " ".join(t["text"] for t in texts)
    assert "112.0 GB (104.3 GiB) sum of parts" in words
    assert words.count("28.0 GB (26.1 GiB)") == 2 and "56.0 GB (52.2 GiB)" in words
    assert "= 112.0 GB = 104.3" in words  # the worked example, as the model works it out
    assert "Activations: not counted here." in words  # unquantified, and said so
    assert min(t["size"] for t in chart["texts"]) >= 12
    overlaps = [(a["text"], b["text"]) for i, a in enumerate(texts) for b in texts[i + 1:]
                if a["x0"] < b["x1"] - 0.5 and b["x0"] < a["x1"] - 0.5 and a["y0"] < b["y1"] - 0.5 and b["y0"] < a["y1"] - 0.5]
    assert overlaps == []


@pytest.fixture(scope="module")
def desktop(chromium, site_url):
    """The diagram's texts and description at 1280 px, read once for the feature tests below."""
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(site_url + "model-states.html")
    chart = page.evaluate(VISIBLE_TEXTS)
    chart["words"] = " ".join(t["text"] for t in chart["texts"])
    chart["described"] = page.locator("#chart-seven-billion-fp32").inner_text()
    context.close()
    return chart


def test_stacked_bar_names_params_gradients_optimizer_states_and_activations(desktop):
    """Seed 003's bar stacks Params, Gradients, Optimizer States and Activations, each named on the chart."""
    for part in ("Weights", "Gradients", "Optimizer", "Activations"):
        assert part in desktop["words"]


def test_annotations_give_each_parts_bytes_per_parameter(desktop):
    """Seed 003's notes: weights 4 bytes each in fp32, gradients the same size, Adam's two states in fp32."""
    assert desktop["words"].count("4 B/param (fp32)") >= 2 and "8 B/param" in desktop["words"]
    assert "(4 weights + 4 gradients + 4 m + 4 v) bytes" in " ".join(desktop["described"].split())


def test_activations_vary_with_batch_and_shrink_with_checkpointing(desktop):
    """Seed 003: 'Activations: varies with batch size (saved for backward pass) (reduced by gradient checkpointing)'."""
    described = " ".join(desktop["described"].split())
    assert "They vary with batch size and sequence length (saved for the backward pass) and shrink with " \
           "recomputation" in described


def test_worked_example_box_7b_times_16_bytes_is_112_gb(desktop):
    """Seed 003's box: 'Example: 7B params, FP32 Adam = 7B * (4+4+4+4) = 112 GB just for params/grads/optimizer'."""
    assert "7B parameters x (4 weights + 4 gradients" in desktop["words"]
    assert "= 112.0 GB = 104.3" in desktop["words"] and "just for weights, gradients and" in desktop["words"]
