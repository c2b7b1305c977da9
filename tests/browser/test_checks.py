"""The browser-test checks themselves, run on a hand-written good page and a deliberately bad one."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser import checks
from tests.browser.helpers import SiteBrowser, serve_directory

FIXTURE_SITE = Path(__file__).resolve().parent / "fixture_site"


@pytest.fixture(scope="module")
def fixture_browser(chromium, tmp_path_factory):
    """A SiteBrowser over the fixture pages, served under a sub-path."""
    root = tmp_path_factory.mktemp("fixture-served")
    (root / "training-memory").symlink_to(FIXTURE_SITE, target_is_directory=True)
    with serve_directory(root) as origin:
        helper = SiteBrowser(chromium, f"{origin}/training-memory/")
        yield helper
        helper.close()


def test_good_page_has_no_problems(fixture_browser, axe_source):
    """A clean page loads without errors and passes axe, layout and chart-text checks in both themes."""
    for scheme in ("light", "dark"):
        visit = fixture_browser.open_page("good/", color_scheme=scheme, viewport=(360, 740))
        assert visit.problems() == []
        assert checks.run_axe(visit.page, axe_source) == []
        assert checks.find_horizontal_overflow(visit.page) == []
        assert checks.find_chart_text_problems(visit.page) == []


def test_load_problems_are_recorded(fixture_browser):
    """Uncaught errors, 404s and requests to other origins are all reported."""
    problems = "\n".join(fixture_browser.open_page("bad/").problems())
    assert "uncaught: Error: fixture boom" in problems
    assert "failed request: 404" in problems and "bad/missing.png" in problems
    assert "request to another origin: http://example.invalid/remote.png" in problems


def test_axe_reports_rule_and_node(fixture_browser, axe_source):
    """axe violations name the rule and the offending node."""
    found = checks.run_axe(fixture_browser.open_page("bad/").page, axe_source)
    assert any(line.startswith("image-alt") and 'img[src$="chart.png"]' in line for line in found)
    assert any(line.startswith("color-contrast") and ".faint" in line for line in found)


def test_overflow_is_reported(fixture_browser):
    """A page wider than the viewport is reported with the element that sticks out."""
    found = checks.find_horizontal_overflow(fixture_browser.open_page("bad/", viewport=(360, 740)).page)
    assert len(found) == 1 and "div.wide" in found[0]


def test_chart_text_problems_are_reported(fixture_browser):
    """Overlapping, clipped and tiny SVG labels and cut-off charts are reported; adjacent lines are not."""
    found = checks.find_chart_text_problems(fixture_browser.open_page("bad/").page)
    assert "chart 'Crowded chart': text 'Overlapping one' overlaps 'Overlapping two'" in found
    assert "chart 'Crowded chart': text 'Clipped label' is clipped by the chart's edge" in found
    assert "chart 'Tiny chart' is cut off by a container with overflow hidden" in found
    assert "chart 'Tiny chart': 1 of 1 labels render below 12.0 px (smallest 4.0 px: 'Tiny label')" in found
    assert len(found) == 4, found


def test_chart_in_scroll_container_is_not_cut(fixture_browser):
    """A wide chart inside a horizontally scrolling container is neither overflow nor cut off at 360 px."""
    page = fixture_browser.open_page("good/", viewport=(360, 740)).page
    assert page.evaluate("document.querySelector('.scroll svg').getBoundingClientRect().right") > 360
    assert checks.find_chart_text_problems(page) == []
    assert checks.find_horizontal_overflow(page) == []


def test_hidden_chart_without_javascript_is_reported(fixture_browser):
    """The inventory marks a chart hidden by CSS as not shown."""
    inventory = checks.figure_inventory(fixture_browser.open_page("bad/", js=False).page)
    assert [chart["shown"] for chart in inventory["charts"]] == [False, True]


def test_broken_links_are_reported():
    """Missing files, missing anchors, root-relative and out-of-site URLs are reported; good links pass."""
    assert checks.find_broken_links(FIXTURE_SITE / "good") == []
    found = "\n".join(checks.find_broken_links(FIXTURE_SITE / "bad"))
    assert "href='missing.html': no such file missing.html" in found
    assert "href='#nope': no element with id 'nope'" in found
    assert "href='/absolute.html': root-relative URL" in found
    assert "href='../good/index.html#details': points outside the site" in found


def test_vnu_reports_errors_with_page_and_line(java_path, vnu_jar):
    """The Nu checker passes the good pages and reports the bad page's errors with file and line."""
    bad = FIXTURE_SITE / "bad" / "index.html"
    line = 1 + bad.read_text(encoding="utf-8").splitlines().index("<span><div>block in inline</div></span>")
    found = checks.run_vnu(java_path, vnu_jar, sorted(FIXTURE_SITE.rglob("*.html")), FIXTURE_SITE)
    assert [entry for entry in found if entry.startswith("good/")] == []
    assert any(entry.startswith(f"bad/index.html:{line}:") and "“div” not allowed" in entry for entry in found), found


def test_file_urls_catch_what_only_works_over_http(chromium):
    """From file:// the good pages load cleanly while a module script (blocked by CORS there) is reported."""
    helper = SiteBrowser(chromium, FIXTURE_SITE.as_uri() + "/")
    try:
        assert helper.open_page("good/index.html").problems() == []
        problems = "\n".join(helper.open_page("bad/index.html").problems())
        assert "failed request" in problems and "bad/module.js" in problems
    finally:
        helper.close()


def test_vnu_failure_to_run_is_reported(java_path, tmp_path):
    """A checker that cannot run yields a problem line rather than a silent pass."""
    found = checks.run_vnu(java_path, tmp_path / "missing.jar", [FIXTURE_SITE / "good" / "index.html"], FIXTURE_SITE)
    assert len(found) == 1 and found[0].startswith("vnu did not produce JSON")


def test_missing_prerequisite_fails_under_ci(monkeypatch):
    """Under CI a missing browser prerequisite fails the test instead of skipping it."""
    from tests.conftest import require

    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="Chromium is missing"):
        require(None, "Chromium")


def test_missing_prerequisite_skips_locally(monkeypatch):
    """Outside CI a missing browser prerequisite skips with the reason."""
    from tests.conftest import require

    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="make browser"):
        require(None, "Chromium")
    assert require("/usr/bin/chromium", "Chromium") == "/usr/bin/chromium"
