"""A link's state that a widget cannot use (issue 14 item 2: "Out-of-range and meaningless values get one line naming
the option and the limit ... in URL state (a visible notice in the widget, the rest of the state kept)"). Each
widget reads its settings from the link, leaves out the ones it cannot take, keeps the others, and says in a
notice which setting was left out and why, with the limit; a link it can use in full shows no notice."""

from __future__ import annotations

import pytest

from tests.browser import checks

NOTICE = "(id) => { const n = document.querySelector('#' + id + ' .wdg-link-notice'); return n ? n.textContent : null; }"

CASES = [
    # page, widget, link, what the notice must say, a setting it must keep (selector, attribute or property, value)
    ("index.html", "bytes", "bytes.dp=99999&bytes.zero=2&bytes.params=abc",
     ["bytes.dp=99999 was not used: it must be a whole number from 1 to 4,096",
      "bytes.params=abc was not used: it must be a whole number from 1 to 1,000,000,000,000,000"],
     ("[role=radio][data-value='2']", "aria-checked", "true")),
    ("index.html", "budget", "budget.precision=fp64&budget.micro_batch=4",
     ["budget.precision=fp64 was not used: it must be one of fp32, bf16, fp16, fp8"],
     ("[data-k=micro_batch]", "value", "4")),
    ("calculator.html", "calc", "calc.tp=2&calc.seq_len=1e400&calc.precision=nope&calc.colour=red",
     ["calc.seq_len=1e400 was not used: it must be a whole number from 1 to 4,194,304",
      "calc.precision=nope was not used: it must be one of bf16-mixed,",
      "calc.colour=red was not used: this figure has no such setting"],
     ("[name=tp]", "value", "2")),
    # The dtype overrides' keys are Config's option names; the CLI's own dtype list is wider than the calculator's.
    ("calculator.html", "calc", "calc.exp_avg_dtype=fp8&calc.grad_accum_dtype=fp64",
     ["calc.grad_accum_dtype=fp64 was not used: it must be one of policy, fp32, bf16, fp16"],
     ("[name=exp_avg_dtype]", "value", "fp8")),
    ("serving.html", "serve", "serve.tp=2&serve.max_model_len=abc&serve.context_length=4096",
     ["serve.max_model_len=abc was not used: it must be a whole number from 1 to 16,777,216",
      "serve.context_length=4096 was not used: it is a setting of the other engine"],
     ("[data-k=tp]", "value", "2")),
]


@pytest.mark.parametrize("page, widget, link, said, kept", CASES, ids=[case[1] for case in CASES])
def test_a_bad_link_setting_is_named_and_the_rest_kept(open_page, axe_source, page, widget, link, said, kept):
    with open_page(f"{page}?{link}", viewport=(360, 800), color_scheme="dark") as visit:
        text = visit.page.evaluate(NOTICE, widget)
        selector, attribute, value = kept
        element = visit.page.locator(f"#{widget} {selector}").first
        shown = element.input_value() if attribute == "value" else element.get_attribute(attribute)
        assert visit.problems() == []
        assert checks.run_axe(visit.page, axe_source) == []
    assert text is not None
    for words in said:
        assert words in text, text
    assert text.endswith("The figure shows the link's other settings.")
    assert shown == value


@pytest.mark.parametrize("page, widget, link", [("index.html", "bytes", "bytes.zero=3&bytes.dp=16"),
                                                ("calculator.html", "calc", "calc.tp=2&calc.mode=serve")])
def test_a_good_link_shows_no_notice(open_page, page, widget, link):
    with open_page(f"{page}?{link}") as visit:
        assert visit.page.evaluate(NOTICE, widget) is None
        assert visit.problems() == []
