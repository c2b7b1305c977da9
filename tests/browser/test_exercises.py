"""Exercises in a browser: the answer opens without JavaScript, and symbols link to the Notation page."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("js", [False, True])
def test_answer_opens_without_javascript(site_browser, js):
    with site_browser.open_page("model-states.html", js=js) as visit:
        exercise = visit.page.locator("#exercise-adam-zero1")
        result = exercise.locator(".exercise-result")
        assert exercise.locator("h3").inner_text() == "Exercise 1"
        assert not result.is_visible()  # closed until asked for
        exercise.locator("summary", has_text="Answer").click()
        assert result.is_visible()
        assert "GiB" in result.inner_text() and "GB" in result.inner_text()


def test_a_formula_symbol_leads_to_its_notation_row(site_browser):
    with site_browser.open_page("model-states.html", js=False) as visit:
        visit.page.locator(".formula-symbols a[href$='#sym-Psi']").first.click()
        visit.page.wait_for_url("**/notation.html#sym-Psi")
        row = visit.page.locator("#sym-Psi")
        assert "parameters of the whole model" in row.inner_text()
