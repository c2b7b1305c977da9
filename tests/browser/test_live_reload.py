"""Live reload in Chromium under a sub-path: an edit reloads the open page where it was scrolled to;
a content error shows every 'path:line: message' over the last good page until the next good build."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from builder import build as build_module
from builder.serve import Preview, make_server
from builder.watch import watch_folders
from tests.browser.helpers import watch_page
from tests.test_build import copy_fixture, fake_chart, fake_estimate

BASE = "/training-memory/"
TIMEOUT_MS = 15_000


def problems(visit) -> list[str]:
    """What went wrong on the page, less the event stream that a reload closes (ERR_ABORTED)."""
    return [problem for problem in visit.problems()
            if not (problem.endswith(BASE + "__preview__/events") and "ERR_ABORTED" in problem)]


def save(path: Path, text: str) -> None:
    """Save as editors do: write a hidden temporary file, rename it over the page."""
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


@pytest.fixture
def preview(tmp_path, monkeypatch):
    """A live preview of a copy of the fixture site under BASE: (base URL, Preview), watching content/."""
    monkeypatch.setattr(build_module, "load_estimate", lambda: fake_estimate)
    monkeypatch.setattr(build_module, "load_chart_renderer", lambda: fake_chart)
    paths = copy_fixture(tmp_path)
    built = Preview(paths, quiet=True)
    assert built.build()
    server = make_server(paths.out, 0, BASE, events=built.events)
    stop = threading.Event()
    threads = [threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True),
               threading.Thread(target=watch_folders, args=([paths.content], built.on_change, stop), daemon=True)]
    for thread in threads:
        thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}{BASE}", built
    stop.set()
    built.events.close()
    server.shutdown()
    server.server_close()
    for thread in threads:
        thread.join(timeout=5)


@pytest.fixture
def page(chromium, preview):
    """A page of the preview, open and connected to its build events; yields (page, visit, Preview)."""
    from playwright.sync_api import expect

    url, built = preview
    context = chromium.new_context(viewport={"width": 800, "height": 500}, locale="en-GB", timezone_id="UTC")
    tab = context.new_page()
    tab.set_default_timeout(TIMEOUT_MS)
    visit = watch_page(tab, url + "index.html?calc=1")
    tab.goto(visit.url, wait_until="load")
    expect(tab.locator("html[data-preview=live]")).to_have_count(1)  # the event stream said hello
    yield tab, visit, built
    context.close()


def test_an_edit_reloads_the_page_where_it_was(page, capsys):
    from playwright.sync_api import expect

    tab, visit, built = page
    tab.evaluate("window.scrollTo(0, 400)")
    scrolled = tab.evaluate("window.scrollY")
    assert scrolled > 100
    index = built.paths.content / "index.md"
    started = time.perf_counter()
    save(index, index.read_text(encoding="utf-8").replace("Intro paragraph", "Edited paragraph"))
    expect(tab.locator("main")).to_contain_text("Edited paragraph", timeout=TIMEOUT_MS)
    seconds = time.perf_counter() - started
    tab.wait_for_function(f"() => window.scrollY === {scrolled}")  # a function: a bare expression is eval()ed, which the CSP refuses
    assert tab.url.endswith("index.html?calc=1")  # the URL, and so the widgets' state, is kept
    assert built.builds == 2  # one save, one rebuild
    assert problems(visit) == []  # no CSP violation, no failed request
    with capsys.disabled():
        print(f"\nedit to page shown: {seconds * 1000:.0f} ms")


def test_an_edit_to_another_page_does_not_reload_this_one(page):
    tab, _, built = page
    tab.evaluate("window.untouched = true")
    references = built.paths.content / "references.md"
    save(references, references.read_text(encoding="utf-8") + "\nOne more line.\n")
    deadline = time.monotonic() + 10
    while built.events.latest.number < 2:
        assert time.monotonic() < deadline, "no rebuild after the edit"
        time.sleep(0.05)
    assert "references.html" in built.events.latest.changed
    tab.wait_for_timeout(500)
    assert tab.evaluate("window.untouched === true")


def test_content_errors_show_over_the_last_good_page_until_fixed(page, axe_source):
    from playwright.sync_api import expect

    tab, visit, built = page
    index = built.paths.content / "index.md"
    good = index.read_text(encoding="utf-8")
    tab.evaluate("window.untouched = true")
    save(index, good.replace("{{< widget bytes-per-param", "{{< widget sparkles")
         .replace("[@korthikanti2022;", "[@nobody2020;"))
    alert = tab.get_by_role("alert")
    expect(alert).to_contain_text("The build failed: 2 errors", timeout=TIMEOUT_MS)
    lines = alert.locator("li").all_inner_texts()
    assert lines == list(built.events.latest.errors) and len(lines) == 2
    assert all(line.startswith(f"{index}:") for line in lines)
    assert "unknown citation key 'nobody2020'" in lines[0] and "unknown widget" in lines[1]
    expect(tab.locator("main")).to_contain_text("Intro paragraph")  # the last good page is underneath
    tab.evaluate(axe_source + "\n;undefined")
    violations = tab.evaluate("axe.run('#preview-build-errors', {resultTypes: ['violations']})"
                              ".then(r => r.violations.map(v => v.id + ': ' + v.help))")
    assert violations == []
    save(index, good)
    expect(alert).to_have_count(0, timeout=TIMEOUT_MS)
    assert tab.evaluate("window.untouched === true")  # same output as before: no reload needed
    assert problems(visit) == []


def test_a_page_opened_during_a_broken_build_shows_the_errors(chromium, preview):
    from playwright.sync_api import expect

    url, built = preview
    index = built.paths.content / "index.md"
    index.write_text(index.read_text(encoding="utf-8").replace("order: 1", "order: first"), encoding="utf-8")
    assert not built.build()
    context = chromium.new_context()
    try:
        tab = context.new_page()
        tab.goto(url, wait_until="load")
        expect(tab.get_by_role("alert")).to_contain_text("order must be an integer", timeout=TIMEOUT_MS)
        tab.get_by_role("button", name="Hide").click()
        expect(tab.get_by_role("alert")).to_have_count(0)
    finally:
        context.close()
