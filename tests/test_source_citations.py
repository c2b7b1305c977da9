"""Every model part cites content/references.toml by key (builder.model.cite), and pages render the citations.

Each part's source is walked through every branch of its rule (`when`, `fmt`), so a part added with a free-text
source, a misspelt key or a paper written out by hand ('arXiv:...') fails here, whichever configuration would
show it."""

from __future__ import annotations

import gc
import importlib
import itertools
import pkgutil
import re
from pathlib import Path

import pytest

import builder.model
from builder.content import read_references
from builder.model.config import PRECISIONS
from builder.model.cite import Cite, cited_keys, cites_or_says_why, pieces
from builder.model.expr import Expr
from builder.model.partrules import PartRule, RuleSet, is_source
from builder.model.teaching import ADAM_SEGMENTS
from builder.sources import html_renderer, source_html, source_text

ROOT = Path(__file__).resolve().parent.parent
REFERENCES, ERRORS = read_references(ROOT / "content" / "references.toml", "content/references.toml")
for info in pkgutil.iter_modules(builder.model.__path__):
    importlib.import_module(f"builder.model.{info.name}")
RULES = [obj for obj in gc.get_objects() if isinstance(obj, PartRule)]
# Derived symbols that hold a source ('<...>_source', worked out once for many parts), by name.
SOURCE_SYMBOLS = {name: expr for obj in gc.get_objects() if isinstance(obj, RuleSet)
                  for name, expr in obj.symbols.items() if is_source(name)}


def texts(expr: Expr) -> set[str]:
    """Every text a source rule can evaluate to (a symbol's value as '{symbol}')."""
    if expr.op == "str":
        return {expr.args[0]}
    if expr.op == "if":
        return texts(expr.args[1]) | texts(expr.args[2])
    if expr.op == "sym" and is_source(expr.args[0]):
        return texts(SOURCE_SYMBOLS[expr.args[0]])
    if expr.op == "fmt":
        template, *args = expr.args
        return {t.format(*combo) for t in texts(template) for combo in itertools.product(*(texts(a) for a in args))}
    return {"{" + expr.op + "}"}


def sources() -> list[tuple[str, str]]:
    found = {(rule.name, text) for rule in RULES for text in texts(rule.source)}
    found |= {(segment.id, segment.source) for segment in ADAM_SEGMENTS}
    found |= {(f"precision {policy.name}", policy.source) for policy in PRECISIONS.values()}
    return sorted(found)


def test_the_bibliography_reads_cleanly():
    assert ERRORS == [] and len(RULES) > 90


@pytest.mark.parametrize("name,text", sources())
def test_every_part_cites_a_known_reference(name, text):
    unknown = [key for key in cited_keys(text) if key not in REFERENCES]
    assert not unknown, f"{name}: unknown reference keys {unknown} (add them to content/references.toml)"
    assert cites_or_says_why(text), f"{name}: its source cites no reference: {text!r} (write Cite(key, locator))"
    outside = "".join(piece for piece in pieces(text) if not isinstance(piece, Cite))
    assert not re.search(r"arXiv:|\(commit [0-9a-f]{7}\)", outside), \
        f"{name}: a paper or a commit written out by hand, not cited by key: {text!r}"


def test_a_citation_renders_as_the_short_form_and_locator():
    # Korthikanti et al. 2022 (arXiv:2205.05198) Table 2: the entry's first author and year, then the locator.
    text = "per layer: " + Cite("korthikanti2022", "Table 2") + " <exact>"
    assert source_text(text, REFERENCES) == "per layer: Korthikanti et al. 2022, Table 2 <exact>"
    assert source_html(text, REFERENCES) == (
        'per layer: <a href="references.html#ref-korthikanti2022">Korthikanti et al. 2022</a>, Table 2 &lt;exact&gt;')
    assert 'href="../references.html#ref-korthikanti2022"' in source_html(text, REFERENCES, "../")


def test_a_project_entry_renders_its_version():
    # vLLM's upstream main at 6adad08 (the commit builder/model/engines.py read), cited with the file and function.
    cite = Cite("vllm-6adad08", "vllm/v1/worker/gpu_worker.py determine_available_memory")
    assert source_text(cite, REFERENCES) == \
        "vLLM 0.27 (6adad08), vllm/v1/worker/gpu_worker.py determine_available_memory"


def test_a_citation_keeps_its_locator_whole():
    with pytest.raises(ValueError, match="locator"):
        Cite("korthikanti2022", "outputs.logits[:, -1]")
    with pytest.raises(ValueError, match="key"):
        Cite("no key", "Table 2")


def test_the_browser_gets_the_same_html_as_the_page():
    # The calculator's rows: the encoded source's text constants are the page's HTML for the same citation.
    rule = next(r for r in RULES if r.name == "activations/recompute_working_layer")
    encoded = RuleSet(symbols={}, parts=(rule,)).encode(html_renderer(REFERENCES))["parts"][0][5]
    assert encoded == ["str", source_html(rule.source.args[0], REFERENCES)]
    assert 'href="references.html#ref-chen2016"' in encoded[1]


def test_a_source_worked_out_once_reaches_the_browser_rendered():
    # A '<...>_source' symbol (the op lists' code, named by every activation part) is rendered like a part's source.
    from builder.model.activations import OP_CONDITIONS
    symbols = dict(OP_CONDITIONS.encode(html_renderer(REFERENCES))["symbols"])
    assert 'href="references.html#ref-korthikanti2022">Korthikanti et al. 2022</a>, Table 2' in str(symbols["op_source"])
    assert symbols["act_bytes"] == dict(OP_CONDITIONS.encode()["symbols"])["act_bytes"]


def test_every_constant_that_cites_names_a_known_key():
    # Sources built in Python (the moments of a step: builder.model.peak's autograd and AccumulateGrad parts).
    for info in pkgutil.iter_modules(builder.model.__path__):
        module = importlib.import_module(f"builder.model.{info.name}")
        for name, value in vars(module).items():
            if isinstance(value, str) and "[@" in value and not name.startswith("__"):
                assert set(cited_keys(value)) <= set(REFERENCES), f"builder.model.{info.name}.{name}"


def test_a_step_s_parts_render_their_citations():
    from builder.catalog import default_models
    from builder.model import Config
    from builder.model.peak import assess
    _, needed = assess(Config(model=default_models()["llama-3-8b"], grad_accum=2))
    shown = [source_text(part.source, REFERENCES) for phase in needed.steps for part in phase.parts]
    assert shown and not any("[@" in text for text in shown)
    assert any(text.startswith("PyTorch 2.13, torch/csrc/autograd/engine.cpp") for text in shown)


def test_templates_cite_known_keys():
    # A template that cites through the `source` filter ({{ "[@key, locator]" | source }}) names a known key.
    cited = [key for path in (ROOT / "templates").rglob("*.html")
             for text in re.findall(r'"(\[@[^"]*)"\s*\|\s*source', path.read_text(encoding="utf-8"))
             for key in cited_keys(text)]
    assert "rajbhandari2019" in cited and set(cited) <= set(REFERENCES)


def test_every_code_reference_names_its_version_in_its_short_form():
    # A code reference is pinned by its address (a GitHub commit or tag, a PyPI release): its short form names that
    # version, so a caption never reads "PyTorch 2026" beside "PyTorch 2.13" (pytorch/pytorch tag v2.13.0).
    pinned = 0
    for key, reference in REFERENCES.items():
        found = (re.search(r"github\.com/[^/]+/[^/]+/(?:blob|tree)/([^/#]+)", reference.url)
                 or re.search(r"pypi\.org/project/[^/]+/([^/]+)/", reference.url))
        if not found:
            continue
        pinned += 1
        version = found.group(1)
        if re.fullmatch(r"[0-9a-f]{7,40}", version):  # a commit: its short id, or the release it belongs to
            assert version[:7] in reference.short or re.search(r"\d+\.\d+", reference.short), (key, reference.short)
        else:  # a tag or a release: its major.minor
            assert ".".join(version.removeprefix("v").split(".")[:2]) in reference.short, (key, reference.short)
    assert pinned > 50
    assert REFERENCES["pytorch-adam"].short == REFERENCES["pytorch-2-13"].short == "PyTorch 2.13"


def test_a_caption_lists_one_work_per_short_form(monkeypatch):
    # torch/optim/adam.py and torch/csrc/distributed/c10d/reducer.cpp at v2.13.0 are one work, PyTorch 2.13: a
    # chart's caption names it once (the formula notes under the chart keep each file).
    import builder.render as render
    notes = [{"source": Cite("pytorch-adam", "Adam._init_group") + " and " + Cite("kingma2014", "Algorithm 1")},
             {"source": Cite("pytorch-ddp-reducer", "Reducer::initialize_buckets")},
             {"source": "measured"}]
    monkeypatch.setattr(render, "formula_notes", lambda chart: notes)
    works = render.chart_sources(None, REFERENCES)
    assert [source_text(work, REFERENCES) for work in works] == ["PyTorch 2.13", "Kingma & Ba 2014", "measured"]
