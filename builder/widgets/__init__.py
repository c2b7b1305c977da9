"""Server-side state of the interactive widgets.

Each widget module has `context(options, catalogs) -> dict`: the default state computed by
the Python model (so the figure is complete before any script runs) and `data`, the JSON
the script needs. builder/render.py passes the dict to templates/partials/widget-<name>.html
as `state` (with `state_json` for a <script type="application/json"> block).
"""

from __future__ import annotations

import json
from importlib import import_module
from typing import Any

MODULES = {
    "bytes-per-param": "builder.widgets.bytes_per_param",
    "memory-budget": "builder.widgets.memory_budget",
    "calculator": "builder.widgets.calculator",
    "validation": "builder.widgets.validation",
    "published-numbers": "builder.widgets.published",
    "exercises": "builder.widgets.exercises",
    "notation": "builder.widgets.notation",
    "what-changed": "builder.widgets.what_changed",
    "serve-concurrency": "builder.widgets.serve_concurrency",
}


def widget_context(name: str, options: dict[str, Any], catalogs: dict[str, Any]) -> dict[str, Any]:
    """The widget's server-side state, or {} while its module does not exist yet."""
    try:
        module = import_module(MODULES[name])
    except ModuleNotFoundError:
        return {}
    return module.context(options, catalogs)


def to_json(value: Any) -> str:
    """Compact, deterministic JSON safe to embed in a <script type="application/json"> block."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
