"""Site-wide browser tests: every page of the built site, served under a sub-path and from file://.

Each test walks all pages and fails once with every problem found, one line per page, rule and node.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser import checks

PAGES_WITHOUT_FIGURES = {"references.html", "exercises.html", "notation.html", "what-changed.html"}


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
            # An embed view (figures/*.html) is the figure alone: a chart, no table (its page has the table).
            wanted = path not in PAGES_WITHOUT_FIGURES and (kind == "charts" or not path.startswith("figures/"))
            if not without[kind] and wanted:
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


WIDTHS = (320, 390, 768, 1280)
AXE_AT = {320: "light", 390: "dark", 768: "light"}  # plus 1280 px in both schemes: test_axe_finds_no_violations


def test_every_width_fits_without_sideways_scroll_and_chart_text_is_legible(site_browser, site_pages, axe_source,
                                                                           screenshot_dir: Path):
    """At 320, 390, 768 and 1280 px, light and dark, on every page: nothing inside main is wider than the viewport
    except inside a focusable scroll region, charts never scroll, every chart text renders at 12 px or more and no
    label overlaps another or is clipped; axe finds nothing at the narrower widths (each page is loaded once and
    resized)."""
    problems = []
    for path in site_pages:
        with site_browser.open_page(path, viewport=(WIDTHS[0], 800)) as visit:
            for scheme in ("light", "dark"):
                visit.page.emulate_media(color_scheme=scheme)
                for width in WIDTHS:
                    visit.page.set_viewport_size({"width": width, "height": 800})
                    found = checks.find_fit_problems(visit.page) + checks.find_chart_text_problems(visit.page)
                    if AXE_AT.get(width) == scheme:
                        found += checks.run_axe(visit.page, axe_source)
                    if found:
                        shot = screenshot_dir / f"{width}px-{scheme}" / (path.removesuffix(".html") + ".png")
                        shot.parent.mkdir(parents=True, exist_ok=True)
                        visit.page.screenshot(path=str(shot), full_page=True, animations="disabled")
                        problems += [f"{path} @{width}px {scheme}: {line} (screenshot {shot})" for line in found]
    fail_with(problems, "layout problems")
