"""Site-wide browser tests: every page of the built site, served under a sub-path and from file://.

Each test walks all pages and fails once with every problem found, one line per page, rule and node.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser import checks

NARROW = (360, 740)
WIDE = (1280, 800)
PAGES_WITHOUT_FIGURES = {"references.html", "exercises.html", "notation.html"}


def fail_with(problems: list[str], what: str) -> None:
    """Fail the test with a numbered list of problems, if there are any."""
    if problems:
        listing = "\n".join(f"  {n}. {line}" for n, line in enumerate(problems, 1))
        pytest.fail(f"{len(problems)} {what}:\n{listing}", pytrace=False)


def test_pages_load_cleanly_under_sub_path(site_browser, site_pages):
    """Every page loads with no console error, no failed request and nothing from another origin."""
    problems = []
    for path in site_pages:
        with site_browser.open_page(path) as visit:
            problems += [f"{path}: {problem}" for problem in visit.problems()]
            if not visit.page.url.startswith(site_browser.base_url):
                problems.append(f"{path}: ended up outside the sub-path at {visit.page.url}")
    fail_with(problems, "load problems")


def test_charts_and_tables_show_without_javascript(site_browser, site_pages):
    """With JavaScript off every chart and table is shown, and none that scripts add is missing."""
    problems = []
    for path in site_pages:
        with site_browser.open_page(path, js=False) as visit:
            without = checks.figure_inventory(visit.page)
        with site_browser.open_page(path) as visit:
            with_js = checks.figure_inventory(visit.page)
        for kind in ("charts", "tables"):
            problems += [f"{path}: {kind[:-1]} {item['name']} hidden without JavaScript"
                         for item in without[kind] if not item["shown"]]
            if len(without[kind]) < len(with_js[kind]):
                problems.append(f"{path}: {len(without[kind])} {kind} without JavaScript, {len(with_js[kind])} with it")
            if not without[kind] and path not in PAGES_WITHOUT_FIGURES:
                problems.append(f"{path}: no {kind} without JavaScript (every page has a chart and a data table)")
    fail_with(problems, "missing charts or tables")


@pytest.mark.parametrize("color_scheme", ["light", "dark"])
def test_axe_finds_no_violations(site_browser, site_pages, axe_source, color_scheme):
    """axe-core reports zero violations on every page in the given colour scheme."""
    problems = []
    for path in site_pages:
        with site_browser.open_page(path, color_scheme=color_scheme) as visit:
            problems += [f"{path} [{color_scheme}]: {line}" for line in checks.run_axe(visit.page, axe_source)]
    fail_with(problems, f"axe-core violations ({color_scheme})")


def test_nu_checker_finds_no_errors(java_path, vnu_jar, site_dir, site_pages):
    """The W3C Nu HTML checker reports zero errors over all pages."""
    files = [site_dir / path for path in site_pages]
    fail_with(checks.run_vnu(java_path, vnu_jar, files, site_dir), "Nu HTML checker errors")


def test_internal_links_and_anchors_resolve(site_dir, site_pages):
    """Every internal href/src points at a file of the site and every #fragment at an existing id."""
    fail_with(checks.find_broken_links(site_dir), "broken internal links")


def test_site_works_from_file_urls(file_browser, site_pages):
    """Every page opened from a file:// URL loads all it needs, with no console error."""
    problems = []
    for path in site_pages:
        with file_browser.open_page(path) as visit:
            problems += [f"{path} (file://): {problem}" for problem in visit.problems()]
    fail_with(problems, "problems from file://")


@pytest.mark.parametrize("viewport", [NARROW, WIDE], ids=["360px", "1280px"])
def test_layout_fits_and_chart_text_is_legible(site_browser, site_pages, screenshot_dir: Path, viewport):
    """At 360 and 1280 px nothing overflows sideways and no chart label overlaps another or is clipped."""
    problems = []
    for path in site_pages:
        shot = screenshot_dir / f"{viewport[0]}px" / (path.replace("/", "__").removesuffix(".html") + ".png")
        shot.parent.mkdir(parents=True, exist_ok=True)
        with site_browser.open_page(path, viewport=viewport) as visit:
            visit.page.screenshot(path=str(shot), full_page=True, animations="disabled")
            found = checks.find_horizontal_overflow(visit.page) + checks.find_chart_text_problems(visit.page)
        problems += [f"{path} @{viewport[0]}px: {line} (screenshot {shot})" for line in found]
    fail_with(problems, f"layout problems at {viewport[0]} px")
