"""Issue 14, item 2: URL state keys "versioned so old course links keep working".

Release 0.1.0's pages wrote some keys as letters (`bytes.z=3`, `budget.h=140`, `calc.sp=1`). A link written with
them opens exactly the state and numbers the same link with the new keys opens, the address bar is rewritten to the
new keys, and a value the widget cannot take under an old key is named in the notice by its new key. The old links
are built two ways: from each widget's renames table (builder.widgets WIDGETS' `renamed`) and, below, as literal
links in release 0.1.0's words, so a table that lost an entry fails too.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest

from builder.widgets import WIDGETS

# The widgets on the site's pages: page, widget id, widget, a state in the new keys (every renamed key set, each to a
# value other than the widget's default).
STATES = [
    ("index.html", "bytes", "bytes-per-param", {"params": "70000000000", "zero": "2", "dp": "4"}),
    ("index.html", "budget", "memory-budget",
     {"params_half_billions": "27", "micro_batch": "5", "seq_len_exponent": "13", "precision": "fp32"}),
    ("calculator.html", "calc", "calculator",
     {"sharding": "3", "implementation": "megatron", "tp": "2", "sequence_parallel": "1", "pp": "2",
      "virtual_stages": "2", "dp": "4", "model": "custom", "tied_embeddings": "1"}),
]
# Literal links as release 0.1.0 wrote them, each with the same link in today's keys.
OLD_LINKS = [
    ("index.html", "bytes", "bytes.z=3&bytes.n=16", "bytes.zero=3&bytes.dp=16"),
    ("index.html", "bytes", "bytes.p=124439808", "bytes.params=124439808"),
    ("index.html", "budget", "budget.h=140&budget.b=8", "budget.params_half_billions=140&budget.micro_batch=8"),
    ("index.html", "budget", "budget.q=fp8&budget.s=15", "budget.precision=fp8&budget.seq_len_exponent=15"),
    ("calculator.html", "calc", "calc.shard=3&calc.sp=1&calc.tp=2&calc.dp=8",
     "calc.sharding=3&calc.sequence_parallel=1&calc.tp=2&calc.dp=8"),
    ("calculator.html", "calc", "calc.formula=korthikanti&calc.vpp=4&calc.pp=4",
     "calc.implementation=korthikanti&calc.virtual_stages=4&calc.pp=4"),
    ("calculator.html", "calc", "calc.model=custom&calc.tied=1&calc.layers=4",
     "calc.model=custom&calc.tied_embeddings=1&calc.layers=4"),
    # An old positional id and old keys at once (links older than the widget's name).
    ("index.html", "bytes", "bytes-per-param-1.z=3&bytes-per-param-1.n=16", "bytes.zero=3&bytes.dp=16"),
]
# What the widget shows: its data attributes (the numbers the figure is drawn from), its text and every control.
SNAPSHOT = """(id) => {
  const root = document.getElementById(id);
  const controls = Array.from(root.querySelectorAll('input, select, [role=radio]')).map((e) =>
    [e.name || e.id || e.dataset.value, e.getAttribute('role') === 'radio' ? e.getAttribute('aria-checked')
      : e.type === 'checkbox' ? String(e.checked) : e.value]);
  return { data: { ...root.dataset }, text: root.innerText, controls };
}"""
NOTICE = "(id) => { const n = document.querySelector('#' + id + ' .wdg-link-notice'); return n ? n.textContent : null; }"


def old_keys(widget: str) -> dict[str, str]:
    """new key -> the old key the widget's renames table maps to it."""
    return {new: old for old, (new, _) in WIDGETS[widget].renamed.items()}


def opened(open_page, page: str, query: str, widget_id: str) -> tuple[dict, list[tuple[str, str]], object]:
    """The widget's snapshot and the address's query after the page settled (past the 300 ms URL writer)."""
    visit = open_page(f"{page}?{query}")
    visit.page.wait_for_timeout(400)
    shown = visit.page.evaluate(SNAPSHOT, widget_id)
    return shown, parse_qsl(urlsplit(visit.page.url).query, keep_blank_values=True), visit


def compare(open_page, page: str, widget_id: str, old_query: str, new_query: str, renamed: set[str]) -> None:
    new_shown, new_address, new_visit = opened(open_page, page, new_query, widget_id)
    old_shown, old_address, old_visit = opened(open_page, page, old_query, widget_id)
    assert old_visit.problems() == [] and new_visit.problems() == []
    assert old_shown == new_shown
    assert sorted(old_address) == sorted(new_address)
    assert not [key for key, _ in old_address if key.split(".", 1)[1] in renamed]
    assert new_visit.page.evaluate(NOTICE, widget_id) is None and old_visit.page.evaluate(NOTICE, widget_id) is None


@pytest.mark.parametrize("page, widget_id, widget, state", STATES, ids=[case[1] for case in STATES])
def test_release_0_1_0_keys_open_the_same_state(open_page, page, widget_id, widget, state):
    """Every renamed key, from the renames table: the same figure, numbers and controls; the address rewritten."""
    olds = old_keys(widget)
    assert set(olds) <= set(state)  # the state sets every renamed key
    new_query = urlencode({f"{widget_id}.{key}": value for key, value in state.items()})
    old_query = urlencode({f"{widget_id}.{olds.get(key, key)}": value for key, value in state.items()})
    assert old_query != new_query
    compare(open_page, page, widget_id, old_query, new_query, set(WIDGETS[widget].renamed))


@pytest.mark.parametrize("page, widget_id, old, new", OLD_LINKS, ids=[case[2] for case in OLD_LINKS])
def test_literal_old_links_open_the_same_state(open_page, page, widget_id, old, new):
    renamed = {key for spec in WIDGETS.values() for key in spec.renamed}
    compare(open_page, page, widget_id, old, new, renamed)


def test_the_new_key_wins_over_the_old(open_page):
    """A link with both (an old link edited by hand): the new key's value, and the old key is dropped."""
    shown, address, visit = opened(open_page, "index.html", "bytes.z=1&bytes.zero=3", "bytes")
    assert visit.page.locator("#bytes [role=radio][data-value='3']").get_attribute("aria-checked") == "true"
    assert ("bytes.zero", "3") in address and not [key for key, _ in address if key == "bytes.z"]


@pytest.mark.parametrize("page, widget_id, link, said", [
    ("index.html", "bytes", "bytes.n=99999&bytes.z=2", "bytes.dp=99999 was not used: it must be a whole number from 1 to 4,096"),
    ("index.html", "budget", "budget.q=fp64", "budget.precision=fp64 was not used: it must be one of fp32, bf16, fp16, fp8"),
    ("calculator.html", "calc", "calc.vpp=999&calc.tp=2",
     "calc.virtual_stages=999 was not used: it must be a whole number from 1 to 64"),
], ids=["bytes", "budget", "calc"])
def test_a_bad_value_under_an_old_key_is_named_by_its_new_key(open_page, page, widget_id, link, said):
    with open_page(f"{page}?{link}") as visit:
        text = visit.page.evaluate(NOTICE, widget_id)
        assert visit.problems() == []
    assert text is not None and said in text, text
