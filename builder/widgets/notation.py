"""The Notation page: the one symbol table (builder.model.notation.SYMBOLS), grouped, typeset as MathML."""

from __future__ import annotations

from typing import Any

from builder.model.notation import SYMBOLS
from builder.symbols import anchor


def context(options: dict[str, Any], catalogs: dict[str, Any]) -> dict[str, Any]:
    """Groups of symbols in registry order: each symbol's anchor, MathML, meaning and unit."""
    from builder.render import latex_to_mathml  # render imports the widgets; import it once it is loaded

    groups: dict[str, list[dict[str, str]]] = {}
    for symbol in SYMBOLS.values():
        groups.setdefault(symbol.group, []).append({
            "anchor": anchor(symbol), "mathml": latex_to_mathml(symbol.latex, "inline"), "name": symbol.name,
            "meaning": symbol.meaning, "unit": symbol.unit})
    return {"groups": [{"title": title, "symbols": symbols} for title, symbols in groups.items()]}
