"""Shared test fixtures: the built site, a sub-path HTTP server, Chromium through Playwright, test tools.

Browser prerequisites come from `make browser` (tests/browser_setup.py). When one is missing the
browser tests fail under CI (CI=true) and skip locally, naming what is missing.
Set BROWSER_SITE_DIR to test an already built site instead of building one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SUB_PATH = "training-memory"
BROWSER_TESTS_DIR = Path(__file__).resolve().parent / "browser"
# The seed-parity tests (issue 19): one browser test per feature of the earlier tools, tests/seeds/.
SEED_TESTS_DIR = Path(__file__).resolve().parent / "seeds"
BROWSER_DIRS = (BROWSER_TESTS_DIR, SEED_TESTS_DIR)
BUILD_TIMEOUT_S = 300


# A test still running this long after it started is a hang the Python-level timeout (pytest-timeout, 900 s in
# pyproject.toml) could not end: a deadlock that holds the GIL (a C++ thread join while another thread waits for the
# GIL) stops every Python thread and signal handler. faulthandler's watchdog is a C thread that needs no GIL: it prints
# every thread's stack and exits, so CI fails at the hang instead of at its 90-minute limit. It writes to a copy of
# the terminal's stderr taken at configure time, as pytest's own faulthandler plugin does (during a test stderr is
# captured, and what is captured is lost when the watchdog exits).
WATCHDOG_S = 960
WATCHDOG_FD: list[int] = []


def pytest_configure(config) -> None:
    WATCHDOG_FD.append(os.dup(sys.stderr.fileno()))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    import faulthandler

    faulthandler.dump_traceback_later(WATCHDOG_S, exit=True, file=WATCHDOG_FD[0])
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def pytest_collection_modifyitems(config, items) -> None:
    """Mark every test under tests/browser and tests/seeds with the `browser` marker."""
    for item in items:
        parents = Path(str(item.fspath)).resolve().parents
        if any(folder in parents for folder in BROWSER_DIRS):
            item.add_marker(pytest.mark.browser)


def in_ci() -> bool:
    """Tell whether we run under CI, where missing prerequisites are failures."""
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def require(found, what: str):
    """Return found, or fail (CI) / skip (locally) because `what` is missing."""
    if found:
        return found
    message = f"{what} is missing: run `make browser` (python -m tests.browser_setup)"
    if in_ci():
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def chromium_path() -> str:
    """The Chromium executable (Debian's, else Playwright's download)."""
    from tests.browser_setup import find_chromium

    return require(find_chromium(), "Chromium")


@pytest.fixture(scope="session")
def java_path() -> str:
    """The java executable the Nu HTML checker runs on."""
    return require(shutil.which("java"), "Java (for the Nu HTML checker)")


@pytest.fixture(scope="session")
def axe_source() -> str:
    """The source of axe-core's axe.min.js, from .tools/."""
    from tests.browser_setup import AXE

    path = require(AXE.path if AXE.path.exists() else None, f"axe-core {AXE.version} ({AXE.path})")
    return path.read_text(encoding="utf-8")


@pytest.fixture(scope="session")
def vnu_jar() -> Path:
    """The Nu HTML checker jar, from .tools/."""
    from tests.browser_setup import VNU

    return require(VNU.path if VNU.path.exists() else None, f"vnu-jar {VNU.version} ({VNU.path})")


def build_site(out: Path) -> None:
    """Build the site into out with the documented CLI, failing the test run with the builder's output."""
    command = [sys.executable, "-m", "builder", "build", "--force", "--quiet", "--out", str(out)]
    result = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=BUILD_TIMEOUT_S
    )
    if result.returncode != 0 or not (out / "index.html").is_file():
        output = (result.stdout + result.stderr).strip()[-3000:]
        pytest.fail(f"`{' '.join(command[1:])}` failed (exit {result.returncode}):\n{output}", pytrace=False)


@pytest.fixture(scope="session")
def served_root(tmp_path_factory) -> Path:
    """A directory whose only child is the built site, under the sub-path name."""
    root = tmp_path_factory.mktemp("served")
    prebuilt = os.environ.get("BROWSER_SITE_DIR")
    if prebuilt:
        (root / SUB_PATH).symlink_to(Path(prebuilt).resolve(), target_is_directory=True)
    else:
        build_site(root / SUB_PATH)
    return root


@pytest.fixture(scope="session")
def site_dir(served_root) -> Path:
    """The built site's directory."""
    return (served_root / SUB_PATH).resolve()


@pytest.fixture(scope="session")
def site_pages(site_dir) -> list[str]:
    """Every HTML page of the latest site, as paths relative to the site root (sorted). The pinned snapshots
    under v/ repeat these pages with a banner and another footer line; tests/browser/test_versions.py checks
    them."""
    pages = sorted(path.relative_to(site_dir).as_posix() for path in site_dir.rglob("*.html")
                   if not path.relative_to(site_dir).as_posix().startswith("v/"))
    assert pages, f"the built site at {site_dir} has no HTML pages"
    return pages


@pytest.fixture(scope="session")
def site_url(served_root) -> str:
    """The site's base URL on a loopback HTTP server, under the sub-path (like a GitHub Pages project site)."""
    from tests.browser.helpers import serve_directory

    with serve_directory(served_root) as origin:
        yield f"{origin}/{SUB_PATH}/"


@pytest.fixture(scope="session")
def chromium(chromium_path):
    """A headless Chromium driven by Playwright, shared by the whole session."""
    from playwright.sync_api import sync_playwright

    from tests.browser.helpers import LAUNCH_ARGS

    playwright = sync_playwright().start()
    browser = playwright.chromium.launch(executable_path=chromium_path, args=LAUNCH_ARGS, headless=True)
    yield browser
    browser.close()
    playwright.stop()


@pytest.fixture
def site_browser(chromium, site_url):
    """A SiteBrowser over the served site; closes its contexts after the test."""
    from tests.browser.helpers import SiteBrowser

    helper = SiteBrowser(chromium, site_url)
    yield helper
    helper.close()


@pytest.fixture
def file_browser(chromium, site_dir):
    """A SiteBrowser over the built site opened from file:// URLs."""
    from tests.browser.helpers import SiteBrowser

    helper = SiteBrowser(chromium, site_dir.as_uri() + "/")
    yield helper
    helper.close()


@pytest.fixture
def open_page(site_browser):
    """open_page(path, js=True, color_scheme='light', reduced_motion=False, viewport=(w, h)) -> PageVisit."""
    return site_browser.open_page


@pytest.fixture(scope="session")
def screenshot_dir(tmp_path_factory) -> Path:
    """Where screenshots go (BROWSER_SCREENSHOT_DIR if set, else a pytest temp dir)."""
    chosen = os.environ.get("BROWSER_SCREENSHOT_DIR")
    if chosen:
        path = Path(chosen)
        path.mkdir(parents=True, exist_ok=True)
        return path
    return tmp_path_factory.mktemp("screenshots")
