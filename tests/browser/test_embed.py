"""The embed view of a widget state (issue 16 item 3: "A calculator or widget state gets the same embed view
through its URL"): ?embed=<widget id> shows that widget's figure alone, in the state the rest of the URL gives,
with a link to the full page and the licence; each widget's "Copy embed link" gives that URL."""

from __future__ import annotations

import pytest

from tests.browser import checks

SHOWN = """(id) => {
  const visible = (el) => !!el && el.getClientRects().length > 0;
  const root = document.getElementById(id);
  const article = root.closest('article');
  return {
    embed: document.documentElement.dataset.embed || '',
    header: visible(document.querySelector('.site-header')), footer: visible(document.querySelector('.site-footer')),
    others: [...article.children].filter((el) => el !== root && !/^H[1-6]$/.test(el.tagName) && visible(el))
      .map((el) => el.tagName + '.' + el.className),
    title: article.querySelector('h1').getBoundingClientRect().width,  // kept for screen readers, 1 px wide
    widget: visible(root),
    controls: [...root.querySelectorAll('form, .wdg-controls, .wdg-keys, button')].filter(visible).length,
    credit: root.querySelector('.embed-credit a') ? root.querySelector('.embed-credit a').href : '',
    licence: root.querySelector('.licence') ? root.querySelector('.licence').textContent : '',
    summary: root.innerText,  // what a reader sees of it
  };
}"""

CASES = [("calculator.html", "calc", "calc.mode=serve&calc.model=llama-3-70b&calc.tp=8", "Llama 3 70B"),
         ("index.html", "bytes", "bytes.params=70000000000", "70.0B"),
         ("index.html", "budget", "budget.micro_batch=4", "batch 4")]


@pytest.mark.parametrize("page, widget, state, seen", CASES, ids=[case[1] for case in CASES])
def test_embed_view_shows_the_widget_alone_in_its_state(open_page, axe_source, page, widget, state, seen):
    with open_page(f"{page}?{state}&embed={widget}", viewport=(640, 900)) as visit:
        shown = visit.page.evaluate(SHOWN, widget)
        assert visit.problems() == []
        assert checks.run_axe(visit.page, axe_source) == []
    assert shown["embed"] == widget and shown["widget"]
    assert not shown["header"] and not shown["footer"] and shown["others"] == [] and shown["title"] <= 1
    assert shown["controls"] == 0  # a figure for a slide: the state is in the URL, the controls are not shown
    assert seen in shown["summary"]
    # The credit opens the full page in the same state; the licence travels with the figure.
    assert f"{page}?{state}" in shown["credit"] and "embed=" not in shown["credit"]
    assert "CC BY 4.0" in shown["licence"]


def test_embed_view_passes_axe_in_dark_at_a_phones_width(open_page, axe_source):
    with open_page("calculator.html?calc.model=mixtral-8x7b&embed=calc", color_scheme="dark", viewport=(320, 800)) as visit:
        assert checks.run_axe(visit.page, axe_source) == []
        overflow = visit.page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert visit.problems() == []
    assert overflow <= 0


def test_an_unknown_embed_id_leaves_the_page_whole(open_page):
    with open_page("calculator.html?embed=nothing") as visit:
        shown = visit.page.evaluate(SHOWN, "calc")
    assert shown["embed"] == "" and shown["header"] and shown["controls"] > 0


COPY_EMBED = """([id, control, value]) => {
  Object.defineProperty(navigator, 'clipboard', {configurable: true,
    value: {writeText: (text) => { window.copied = text; return Promise.resolve(); }}});
  const root = document.getElementById(id);
  const field = root.querySelector(control);
  field.value = value;
  field.dispatchEvent(new Event(field.tagName === 'SELECT' ? 'change' : 'input', {bubbles: true}));
  root.querySelector('[data-copy-embed]').click();
  return window.copied;
}"""


def test_copy_embed_link_gives_the_embed_view_of_what_is_on_screen(open_page, site_browser):
    with open_page("calculator.html") as visit:
        copied = visit.page.evaluate(COPY_EMBED, ["calc", "[name=model]", "llama-3-70b"])
    assert copied.startswith(site_browser.base_url + "calculator.html?") and "calc.model=llama-3-70b" in copied
    assert copied.endswith("embed=calc")
    with open_page(copied.removeprefix(site_browser.base_url)) as visit:
        shown = visit.page.evaluate(SHOWN, "calc")
        assert visit.problems() == []
    assert shown["embed"] == "calc" and "Llama 3 70B" in shown["summary"] and not shown["header"]
