"""The one widget registry (builder/widgets WIDGETS): each entry's partial, script and context exist, and no
widget file is reached by name outside it."""

from __future__ import annotations

import re
from pathlib import Path

from builder.build import page_sources, widget_sources
from builder.widgets import WIDGETS, script_widget

ROOT = Path(__file__).resolve().parent.parent


def test_every_widget_names_its_partial_script_and_context():
    for name, widget in WIDGETS.items():
        assert widget.name == name and (ROOT / "templates" / widget.partial).is_file(), name
        assert widget.context.__module__.startswith("builder.widgets."), name
        if widget.scripted:
            assert (ROOT / "static" / "widgets" / widget.script).is_file(), name
            assert script_widget(widget.script) == name


def test_every_widget_script_belongs_to_a_registered_widget_or_to_all():
    # A script file is a widget's own only through the registry; the others (00-core.js, 01-rules.js, ...) are
    # shared and bundled when a widget's own file uses what they define.
    sources = widget_sources(ROOT / "static")
    own = {path.name for path in sources if script_widget(path.name)}
    assert own == {widget.script for widget in WIDGETS.values() if widget.scripted}
    calculator = [path.name for path in page_sources(sources, ("calculator",))]
    assert "30-calculator.js" in calculator and "10-bytes-per-param.js" not in calculator


def test_the_build_reaches_widgets_through_the_registry():
    # No module loaded by its name as a string, no partial or script path made from a widget's name.
    for path in ("builder/render.py", "builder/build.py", "builder/widgets/__init__.py"):
        text = (ROOT / path).read_text(encoding="utf-8")
        assert "import_module(MODULES" not in text and not re.search(r'f"partials/widget-\{', text), path
