"""Fixtures for the seed-parity tests: one page per module, opened once in the session's Chromium.

A module names its page in PAGE; `page` opens it once (module scope) and each test puts the widget in the state it
needs through the widget's own URL state (`show`) or its controls. When the module ends, nothing the page logged
may be an error, a failed request or a request to another origin.
"""

from __future__ import annotations

import pytest

from builder.catalog import default_gpus, default_models
from tests.browser.helpers import SiteBrowser

MODELS = default_models()
GPU_CATALOG = default_gpus()
CATALOGS = {"model": MODELS, "gpu": GPU_CATALOG, "preset": {}}


@pytest.fixture(scope="module")
def visit(request, chromium, site_url):
    """The module's PAGE, opened once with JavaScript on, light scheme, motion allowed, 1280 x 800."""
    helper = SiteBrowser(chromium, site_url)
    opened = helper.open_page(request.module.PAGE)
    yield opened
    problems = opened.problems()
    helper.close()
    assert problems == [], problems


@pytest.fixture
def page(visit):
    """The module's page, back to the light scheme with motion allowed."""
    visit.page.emulate_media(color_scheme="light", reduced_motion="no-preference")
    return visit.page


@pytest.fixture
def show(page, visit):
    """show(query): load the module's page with this query string (the widget's URL state) and wait for it."""
    base = visit.url

    def load(query: str = ""):
        # The widgets start as their scripts run, before the load event; no network idle wait is needed.
        page.goto(base + query, wait_until="load")
        return page

    return load
