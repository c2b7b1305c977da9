"""Links written before the site's widgets were named (issue 16 item 7) still open the same state: a widget given
`id=` reads its old positional prefix when the new one is absent, and rewrites the URL to the new prefix."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser

# What a reader sees and what the controls hold: the widget's text and every control's value and checked state.
SNAPSHOT = """root => ({
  text: root.innerText,
  controls: Array.from(root.querySelectorAll('input, select, [role=radio]')).map(c =>
    [c.id || c.name || '', c.value || '', c.checked === true || c.getAttribute('aria-checked') === 'true'])
})"""

CASES = [  # page, widget, old query, the same state under the new id
    ("calculator.html", "calc", "calculator-1.mode=serve&calculator-1.gpu=l4&calculator-1.tp=2"),
    ("index.html", "bytes", "bytes-per-param-1.zero=3&bytes-per-param-1.dp=16"),
    ("index.html", "budget", "memory-budget-2.params_half_billions=140&memory-budget-2.micro_batch=8"),
]


def snapshot(visit, widget: str) -> dict:
    return visit.page.locator("#" + widget).evaluate(SNAPSHOT)


@pytest.mark.parametrize("page, widget, old", CASES, ids=[case[1] for case in CASES])
def test_an_old_positional_link_opens_the_same_state_and_is_rewritten(open_page, page, widget, old):
    legacy = old.split(".", 1)[0]
    new = old.replace(legacy + ".", widget + ".")
    with open_page(page) as visit:
        default = snapshot(visit, widget)
    with open_page(f"{page}?{new}") as visit:
        wanted = snapshot(visit, widget)
        assert visit.problems() == []
    assert wanted != default, "the state in the link changes what the widget shows"
    with open_page(f"{page}?{old}") as visit:
        assert snapshot(visit, widget) == wanted
        search = visit.page.evaluate("location.search")
        assert legacy + "." not in search and all(f"{widget}.{pair}" in search for pair in
                                                  new.replace(widget + ".", "").split("&"))
        assert visit.problems() == []


def test_the_new_prefix_wins_over_the_old_one(open_page):
    with open_page("index.html") as visit:
        default = snapshot(visit, "bytes")
    with open_page("index.html?bytes-per-param-1.zero=3&bytes.zero=0") as visit:
        assert snapshot(visit, "bytes") == default
