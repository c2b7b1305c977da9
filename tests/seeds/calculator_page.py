"""What the seed-002 and seed-004 tests share: the calculator page (widget id "calc", content/calculator.md), its
starting state as Python computes it, and reading and setting the form as a reader does."""

from __future__ import annotations

import pytest

from builder.catalog import default_gpus
from builder.widgets import calculator as calc
from tests.browser.test_widget_calculator import READ, SET_STATE
from tests.seeds.conftest import MODELS

PAGE = "calculator.html"
W = "#calc"
GPUS = calc.catalog_gpus(default_gpus())
# The placement: {{< widget calculator id=calc preset=llama-3-8b-fsdp gpus=rtx-4090,a100-80gb,h200 gpu=h100-80gb >}},
# its preset as content/calculator.md's front matter defines it.
SHOWN = ["rtx-4090", "a100-80gb", "h200"]
PRESET = {"model": "llama-3-8b", "precision": "bf16-mixed", "optimizer": "adamw", "seq_len": 4096, "micro_batch": 1,
          "recompute": "selective", "fsdp": "FULL_SHARD", "dp": 8}
DEFAULTS = calc.default_state(PRESET, MODELS, "h100-80gb")


def expected(state: dict[str, str]) -> dict:
    """What Python shows for a form state (calculator.results)."""
    return calc.results(state, MODELS, GPUS, SHOWN, DEFAULTS)


def config(state: dict[str, str]):
    return calc.config_from_state(state, MODELS)


def read(page) -> dict:
    """What the widget shows: summary, parts (name, bytes, size, rule, source), totals, readouts, fits-on, state."""
    return page.evaluate(READ, W)


def set_form(page, changes: dict[str, str]) -> dict:
    """Change form controls as a reader does (one change event) and read the widget."""
    page.evaluate(SET_STATE, [W, changes])
    return read(page)


def rows(shown: dict) -> dict[str, tuple[str, str]]:
    """The parts table as {part: (size text, rule)}."""
    return {p[0]: (p[2], p[3]) for p in shown["parts"]}


def want_rows(state: dict[str, str]) -> dict[str, tuple[str, str]]:
    return {p["name"]: (p["size"], p["rule"]) for p in expected(state)["parts"]}


@pytest.fixture
def form(page):
    """The calculator back at its starting state, through its own controls."""
    shown = set_form(page, DEFAULTS)
    assert shown["state"] == DEFAULTS
    return page
