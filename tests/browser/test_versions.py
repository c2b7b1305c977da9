"""Pinned versions in the browser (issue 16 item 4): the snapshot pages under v/<version>/, "Cite this page" and
the What changed page load cleanly, pass axe in light and dark from 320 to 1280 px, and work without JavaScript
and from file://."""

from __future__ import annotations

import tomllib

import pytest

from builder.release import PYPROJECT, project_version
from tests.browser import checks

VERSION = project_version()
ROOT_DIR = PYPROJECT.parent  # the release date is content/site.toml's `released`, as CITATION.cff's is
RELEASED = tomllib.loads((ROOT_DIR / "content" / "site.toml").read_text(encoding="utf-8"))["released"]
SNAPSHOT = f"v/{VERSION}/"
WIDTHS = (320, 1280)


def fail_with(problems: list[str], what: str) -> None:
    """Fail with every problem found, one per line."""
    if problems:
        pytest.fail(f"{len(problems)} {what}:\n" + "\n".join(f"  {line}" for line in problems), pytrace=False)


@pytest.fixture(scope="module")
def snapshot_pages(site_dir) -> list[str]:
    """Every HTML page of this version's snapshot, relative to the site root."""
    pages = sorted(path.relative_to(site_dir).as_posix() for path in (site_dir / SNAPSHOT).rglob("*.html"))
    assert len(pages) >= 13
    return pages


def test_snapshot_has_every_page_of_the_latest_site(site_dir, site_pages, snapshot_pages):
    assert [page.removeprefix(SNAPSHOT) for page in snapshot_pages] == site_pages


def test_snapshot_and_what_changed_pages_pass_axe_and_fit_from_320_to_1280(site_browser, axe_source):
    """A snapshot page with a widget, one with the bibliography, an embeddable figure, and the What changed page
    (latest and pinned): no load problem, no axe violation and nothing wider than the screen, light and dark."""
    pages = ["what-changed.html", SNAPSHOT + "what-changed.html", SNAPSHOT + "calculator.html",
             SNAPSHOT + "references.html", SNAPSHOT + "index.html"]
    problems = []
    for path in pages:
        with site_browser.open_page(path, viewport=(WIDTHS[0], 800)) as visit:
            problems += [f"{path}: {problem}" for problem in visit.problems()]
            for scheme in ("light", "dark"):
                visit.page.emulate_media(color_scheme=scheme)
                for width in WIDTHS:
                    visit.page.set_viewport_size({"width": width, "height": 800})
                    found = checks.run_axe(visit.page, axe_source) + checks.find_fit_problems(visit.page)
                    problems += [f"{path} @{width}px {scheme}: {line}" for line in found]
    fail_with(problems, "problems on snapshot and What changed pages")


def test_nu_checker_finds_no_errors_in_the_snapshot(java_path, vnu_jar, site_dir, snapshot_pages):
    fail_with(checks.run_vnu(java_path, vnu_jar, [site_dir / p for p in snapshot_pages], site_dir),
              "Nu HTML checker errors")


def test_snapshot_banner_leads_back_to_the_latest_page_from_file_urls(file_browser):
    with file_browser.open_page(SNAPSHOT + "serving.html", js=False) as visit:
        page = visit.page
        banner = page.locator(".snapshot-banner")
        assert banner.is_visible()
        assert banner.inner_text().startswith(f"Version {VERSION} of {RELEASED}: this page as it was published then.")
        assert page.locator('link[rel="canonical"]').get_attribute("href") == "../../serving.html"
        banner.get_by_role("link", name="The latest version is here").click()
        page.wait_for_load_state()
        assert page.url == file_browser.base_url + "serving.html"
        assert page.locator(".snapshot-banner").count() == 0
        page.locator("footer").get_by_role("link", name=f"This page at version {VERSION}").click()
        page.wait_for_load_state()
        assert page.url == file_browser.base_url + SNAPSHOT + "serving.html"
        assert visit.problems() == []


def test_cite_this_page_reads_without_javascript_and_selects_whole_on_click(site_browser):
    with site_browser.open_page("activations.html", js=False) as visit:
        page = visit.page
        cite = page.locator("details.cite")
        assert not page.locator(".cite-text").first.is_visible()  # closed until asked for
        cite.locator("summary").click()
        bibtex, plain = page.locator(".cite-text").all()
        assert bibtex.is_visible() and plain.is_visible()
        assert bibtex.inner_text().startswith(f"@misc{{training-memory-explained-{VERSION}-activations,\n")
        assert plain.inner_text() == (
            "Training Memory, Explained contributors (2026). “Activations: what each op saves, attention "
            "implementations, recompute, logits and loss”. Training Memory, Explained, version "
            f"{VERSION} of {RELEASED} (accessed YYYY-MM-DD).")
        plain.click()
        assert page.evaluate("window.getSelection().toString()") == plain.inner_text()
        assert cite.get_by_role("link", name=f"this page at version {VERSION}").get_attribute("href") == \
            SNAPSHOT + "activations.html"
        assert visit.problems() == []


def test_what_changed_lists_every_key_configuration_without_javascript(site_browser):
    from builder.build import SitePaths, gather_content
    from builder.releases import key_configurations, read_record
    from tests.conftest import ROOT

    gathered, _ = gather_content(SitePaths(ROOT / "content", ROOT / "templates", ROOT / "static", ROOT / "unused"))
    configurations = key_configurations(gathered.models, gathered.presets, gathered.pages)[0]
    labels = [label for _, label, _ in configurations]
    # The first release's own table keeps the labels it published (the classic start's has since named its
    # 161.4 GB as the sum of parts).
    record, _ = read_record(ROOT / "content" / "releases" / "0.1.0.toml")
    published = [record.numbers[key].label for key, _, _ in configurations]
    with site_browser.open_page("what-changed.html", js=False) as visit:
        page = visit.page
        heading = page.get_by_role("heading", name=f"Since version {VERSION}: changes in no release yet")
        assert heading.is_visible()
        rows = page.locator("#changes-unreleased ~ .table-scroll tbody th").all_inner_texts()
        assert rows == labels and len(labels) == 6
        first = page.locator("#changes-v0-1-0 ~ .table-scroll tbody th")
        assert first.all_inner_texts() == published != labels
        assert visit.problems() == []
