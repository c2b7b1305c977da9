"""The validate extra's modules for the tests that measure with them.

`make test-site` runs without torch (1.5 GB): there these tests skip. `make test` sets TM_REQUIRE_TORCH=1, so there a
missing module is an error, never a silent skip.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def modules(*names: str) -> list[ModuleType]:
    """Each named module imported: an import error under TM_REQUIRE_TORCH, else a skip of the calling test or module."""
    if os.environ.get("TM_REQUIRE_TORCH"):
        return [importlib.import_module(name) for name in names]
    return [pytest.importorskip(name) for name in names]
