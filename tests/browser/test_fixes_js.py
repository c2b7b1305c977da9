"""The suggested fixes' program run by the browser (static/widgets/02-model.js `searchRunner`, the loop the calculator's
script runs it with) against Python's run of it (Search.run) and the reference loop of tests/test_calculator_fixes.py,
on the same random cases: the same kept candidates and values, and the same probes measured in the same order."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builder.widgets.calculator_fixes import FIXING, REFUSED, encode
from tests.conftest import ROOT
from tests.test_calculator_fixes import cases, need, reference

pytestmark = pytest.mark.browser

# The need of a case's candidate at a value, as tests/test_calculator_fixes.py's `need` works it out; every probe the
# program asks for, in order; the kept rows.
RUN = """([program, refused, cases]) => {
  const run = searchRunner(program);
  return cases.map((c) => {
    const probes = [];
    const measure = ({ entry, value }) => {
      probes.push([entry, value]);
      const n = c.needs[entry];
      return value > n.refused_above ? refused : n.base + n.slope * value;
    };
    const kept = run(measure, { candidates: c.candidates, form: c.form, capacity: c.capacity });
    return [kept.map(({ entry, value }) => ({ entry, value })), probes];
  });
}"""


@pytest.fixture(scope="module")
def model_page(chromium):
    """A blank page with the shared helpers, the rule evaluator and the model's script loaded."""
    context = chromium.new_context()
    page = context.new_page()
    page.set_content("<!doctype html><title>fixes</title>")
    for name in ("00-core.js", "01-rules.js", "02-model.js"):
        page.add_script_tag(content=(ROOT / "static" / "widgets" / name).read_text(encoding="utf-8"))
    yield page
    context.close()


def python_run(case: dict) -> tuple[list[dict], list[list[int]]]:
    """Python's answer for a case and the probes it measured."""
    probes = []

    def measure(probe: dict) -> int:
        probes.append([probe["entry"], int(probe["value"])])
        needed = need(case, probe["entry"], probe["value"])
        return REFUSED if needed is None else needed

    kept = FIXING.run(measure, {key: case[key] for key in ("candidates", "form", "capacity")})
    return [{"entry": row["entry"], "value": int(row["value"])} for row in kept], probes


@settings(max_examples=15, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(cases(), min_size=40, max_size=40))
def test_the_browser_runs_the_program_as_python_does(model_page, batch):
    # 15 batches of 40 cases: 600 random cases, one browser round trip per batch.
    data = encode()
    got = model_page.evaluate(RUN, [data["program"], data["refused"], batch])
    for case, (kept, probes) in zip(batch, got):
        assert (kept, probes) == python_run(case)
        assert kept == reference(case)
