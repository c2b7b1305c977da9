"""The Notation page: the one symbol table (builder.model.notation.SYMBOLS), grouped."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from builder.model.notation import SYMBOLS
from builder.symbols import anchor, symbol_html


def context(options: dict[str, Any], catalogs: dict[str, Any]) -> dict[str, Any]:
    """Groups of symbols in registry order: each symbol's anchor, HTML, meaning and unit."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for symbol in SYMBOLS.values():
        groups.setdefault(symbol.group, []).append({
            "anchor": anchor(symbol), "html": Markup(symbol_html(symbol)), "name": symbol.name,
            "meaning": symbol.meaning, "unit": symbol.unit})
    return {"groups": [{"title": title, "symbols": symbols} for title, symbols in groups.items()]}
