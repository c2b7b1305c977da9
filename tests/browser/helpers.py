"""Browser-test helpers: a sub-path static server and pages that record what went wrong while loading.

Widget tests (issue 4) use the `open_page` fixture from tests/conftest.py, which is
`SiteBrowser.open_page` bound to the built site:

    def test_zero_cycles(open_page, axe_source):
        with open_page("calculator.html?zero=3", js=True, color_scheme="dark",
                       reduced_motion=True, viewport=(360, 800)) as visit:
            visit.page.keyboard.press("z")
            assert visit.problems() == []              # console errors, failed or foreign requests
            assert checks.run_axe(visit.page, axe_source) == []
            assert checks.find_chart_text_problems(visit.page) == []
            assert checks.find_horizontal_overflow(visit.page) == []

Other fixtures (tests/conftest.py): site_url, site_dir, site_pages, site_browser, file_browser
(same API over file:// URLs), chromium, axe_source, vnu_jar, java_path, screenshot_dir.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
    # Nothing but loopback resolves, so a stray request to another origin fails fast and offline.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
]
# A promise of the moment (performance.now()) a widget's answers are final: a widget that works some answers out
# after drawing the rest (the calculator's --max searches and suggested fixes, a frame later) marks the part it has
# still to fill in aria-busy="true" until then. Resolves at once when nothing is busy; fails after SETTLE_LIMIT_MS
# still busy (a script that threw before clearing aria-busy), so a broken widget fails its test instead of hanging
# the whole run.
SETTLE_LIMIT_MS = 30_000
SETTLED = """(root) => new Promise((done, fail) => {
  const busy = () => root.querySelector('[aria-busy="true"]');
  if (!busy()) return done(performance.now());
  const watch = new MutationObserver(() => {
    if (!busy()) { clearTimeout(limit); watch.disconnect(); done(performance.now()); }
  });
  const limit = setTimeout(() => { watch.disconnect();
    fail(new Error(`#${root.id}: still aria-busy after LIMIT ms (did its script throw?)`)); }, LIMIT);
  watch.observe(root, {attributes: true, attributeFilter: ['aria-busy'], subtree: true});
})""".replace("LIMIT", str(SETTLE_LIMIT_MS))


def drawn(page, selector: str) -> None:
    """Wait until nothing in the widget at `selector` is aria-busy: what it draws a frame later is in (SETTLED)."""
    page.evaluate(f"(selector) => ({SETTLED})(document.querySelector(selector)).then(() => true)", selector)


DEFAULT_VIEWPORT = (1280, 800)
LOAD_TIMEOUT_MS = 15_000


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Static file handler with correct types for module scripts and no access log."""

    extensions_map = {
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".js": "text/javascript",
        ".mjs": "text/javascript",
        ".json": "application/json",
        ".svg": "image/svg+xml",
        ".css": "text/css",
        ".woff2": "font/woff2",
        ".webmanifest": "application/manifest+json",
    }

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - signature from the base class
        """Keep the test output clean."""

    def end_headers(self) -> None:
        """Disable caching so every page load really fetches what it needs."""
        self.send_header("Cache-Control", "no-store")
        super().end_headers()


@contextlib.contextmanager
def serve_directory(root: Path) -> Iterator[str]:
    """Serve root on a free loopback port for the duration of the block; yield the origin URL."""
    handler = functools.partial(QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="site-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def origin_of(url: str) -> str:
    """Return scheme://host:port of a URL ('file://' for file URLs)."""
    parts = urlsplit(url)
    if parts.scheme == "file":
        return "file://"
    return f"{parts.scheme}://{parts.netloc}"


def is_inert_url(url: str) -> bool:
    """Tell whether a request URL never leaves the page (data:, blob:, about:)."""
    return urlsplit(url).scheme in {"data", "blob", "about"}


@dataclass
class PageVisit:
    """A loaded page and everything that went wrong while it loaded and ran."""

    page: object
    url: str
    context: object = None
    console_errors: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    foreign_requests: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        """Return every recorded problem as one readable line each."""
        return (
            [f"console error: {text}" for text in self.console_errors]
            + [f"failed request: {text}" for text in self.failed_requests]
            + [f"request to another origin: {text}" for text in self.foreign_requests]
        )

    def close(self) -> None:
        """Close the browser context this page lives in."""
        if self.context is not None:
            self.context.close()
            self.context = None

    def __enter__(self) -> PageVisit:
        """Use as `with open_page(...) as visit:` to close the context afterwards."""
        return self

    def __exit__(self, *exc_info) -> None:
        """Close the context when the block ends."""
        self.close()


def watch_page(page, url: str) -> PageVisit:
    """Attach listeners that record console errors, failed and foreign requests."""
    visit = PageVisit(page=page, url=url)
    own_origin = origin_of(url)

    def on_console(message) -> None:
        if message.type == "error":
            location = message.location or {}
            where = f" ({location.get('url', '')}:{location.get('lineNumber', '')})" if location.get("url") else ""
            visit.console_errors.append(message.text + where)

    def on_request(request) -> None:
        if not is_inert_url(request.url) and origin_of(request.url) != own_origin:
            visit.foreign_requests.append(request.url)

    def on_response(response) -> None:
        if response.status >= 400:
            visit.failed_requests.append(f"{response.status} {response.url}")

    def on_request_failed(request) -> None:
        visit.failed_requests.append(f"{request.failure} {request.url}")

    page.on("console", on_console)
    page.on("pageerror", lambda error: visit.console_errors.append(f"uncaught: {error.name}: {error.message}"))
    page.on("request", on_request)
    page.on("response", on_response)
    page.on("requestfailed", on_request_failed)
    return visit


class SiteBrowser:
    """Opens pages of one site (served over HTTP or as files) in fresh browser contexts."""

    def __init__(self, browser, base_url: str):
        """Remember the browser and the URL every relative path is resolved against."""
        self.browser = browser
        self.base_url = base_url if base_url.endswith("/") else base_url + "/"
        self.contexts: list = []

    def open_page(
        self,
        path: str = "",
        *,
        js: bool = True,
        color_scheme: str = "light",
        reduced_motion: bool = False,
        viewport: tuple[int, int] = DEFAULT_VIEWPORT,
    ) -> PageVisit:
        """Open base_url + path in a new context with the given settings and wait until it is settled."""
        context = self.browser.new_context(
            java_script_enabled=js,
            color_scheme=color_scheme,
            reduced_motion="reduce" if reduced_motion else "no-preference",
            viewport={"width": viewport[0], "height": viewport[1]},
            locale="en-GB",
            timezone_id="UTC",
        )
        self.contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(LOAD_TIMEOUT_MS)
        url = self.base_url + path.lstrip("/")
        visit = watch_page(page, url)
        visit.context = context
        page.goto(url, wait_until="load")
        settle(page, js)
        return visit

    def close(self) -> None:
        """Close every context this helper opened (closing one twice is harmless)."""
        for context in self.contexts:
            context.close()
        self.contexts.clear()


def settle(page, js: bool) -> None:
    """Wait for web fonts and pending network requests so measurements are stable."""
    page.wait_for_load_state("networkidle")
    if js:
        page.evaluate("document.fonts.ready.then(() => true)")
