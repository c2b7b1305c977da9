"""Which notation symbols a formula uses, and the line that links them to the Notation page.

The symbols themselves (letter, meaning, unit) live in one registry, builder.model.notation.SYMBOLS;
this module only reads LaTeX: `symbols_in(tex)` names the registry's symbols a formula writes, in
order of first use, and `symbols_line` is the HTML under a display formula linking each to its row.
"""

from __future__ import annotations

import html
import re

from builder.model.notation import Symbol, lookup

# Text and environment names are words, not symbols: '\text{bf16 weights}', '\begin{aligned}'.
WORDS = re.compile(r"\\(?:text|mathrm|operatorname|textbf|mathit|begin|end)\{[^{}]*\}")
# A subscript written as text names the symbol: 'N_{\text{other}}' is the symbol N_other.
TEXT_SUBSCRIPT = re.compile(r"_\{\\(?:text|mathrm)\{([^{}]*)\}\}")
SUBSCRIPT = r"(?:_(?:\{([^{}]*)\}|([A-Za-z0-9])))?"
# A command (with its subscript), an escaped character, a sub- or superscript not attached to a letter
# (an underbrace's label), or a letter with its subscript.
TOKEN = re.compile(r"\\([A-Za-z]+)" + SUBSCRIPT + r"|\\.|[_^]\{[^{}]*\}|([A-Za-z])" + SUBSCRIPT)
GREEK = ("Psi",)


def symbols_in(tex: str) -> list[str]:
    """The names (Symbol.name) of every symbol-like token in `tex`, in order of first use, known or not:
    single letters with their subscript ('N_d', 'd_in') and Greek letters ('Psi')."""
    tex = WORDS.sub(" ", TEXT_SUBSCRIPT.sub(lambda m: "_{" + re.sub(r"[^\w+]", "", m.group(1)) + "}", tex))
    found: list[str] = []
    for match in TOKEN.finditer(tex):
        command, letter = match.group(1), match.group(4)
        base = command if command in GREEK else letter
        if not base:
            continue
        subscript = (match.group(2) or match.group(3)) if command else (match.group(5) or match.group(6))
        name = f"{base}_{subscript.replace(' ', '')}" if subscript else base
        if name not in found:
            found.append(name)
    return found


def anchor(symbol: Symbol) -> str:
    """The fragment id of a symbol's row on the Notation page."""
    return f"sym-{re.sub(r'[^A-Za-z0-9]+', '-', symbol.name.replace('*', 'x')).strip('-')}"


def symbol_html(symbol: Symbol) -> str:
    """The symbol as HTML text: <var>N</var><sub>d</sub>."""
    sub = f"<sub>{html.escape(symbol.subscript)}</sub>" if symbol.subscript else ""
    return f"<var>{html.escape(symbol.letter)}</var>{sub}"


def symbols_line(tex: str, notation_url: str) -> str:
    """'Symbols: b micro-batch, s sequence length, ...' with each symbol linking to its Notation row ('' when
    the formula names none)."""
    known = list(dict.fromkeys(symbol for symbol in map(lookup, symbols_in(tex)) if symbol is not None))
    if not known:
        return ""
    items = ", ".join(f'<a href="{notation_url}#{anchor(s)}">{symbol_html(s)}</a> {html.escape(s.meaning)}'
                      for s in known)
    return f'<p class="formula-symbols"><a href="{notation_url}">Symbols</a>: {items}.</p>\n'
