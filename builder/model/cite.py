"""Citations in the model's sources: a key of content/references.toml plus a locator.

Every part's source is text in which each work it rests on is cited as `Cite(key, locator)`, e.g.
`Cite("korthikanti2022", "Table 2")` or `Cite("vllm-6adad08", "vllm/v1/worker/gpu_worker.py
determine_available_memory")`. A Cite is a string, written as the site's Markdown citation `[@key, locator]`,
so it passes through the expression language (`when`, `fmt`, `+`) like any text and the browser gets the same
text as Python. The words around a citation (what the cited code does) stay plain text.

This module only writes and finds citations; builder/sources.py renders them with the bibliography (the
reference's short form linked to the References page, then the locator) for pages, the browser and the CLI.
"""

from __future__ import annotations

import re
from typing import Iterator

KEY = r"[A-Za-z0-9_.:-]+"
# '[@key]' or '[@key, locator]'; a locator holds no ']' (Cite refuses one).
MARKER = re.compile(rf"\[@({KEY})(?:, ([^\]]*))?\]")


class Cite(str):
    """A citation of reference `key` at `locator` (an equation, a table, a section, 'file function' of the
    version the key names), as the text '[@key, locator]'."""

    key: str
    locator: str

    def __new__(cls, key: str, locator: str = "") -> "Cite":
        if not re.fullmatch(KEY, key):
            raise ValueError(f"citation key {key!r}: letters, digits and '-', '_', '.', ':' only")
        if "]" in locator or "[" in locator or locator != locator.strip():
            raise ValueError(f"citation locator {locator!r}: no brackets, no surrounding spaces")
        text = super().__new__(cls, f"[@{key}, {locator}]" if locator else f"[@{key}]")
        text.key, text.locator = key, locator
        return text

    def __reduce__(self) -> tuple:
        """Pickled as its key and locator (charts are drawn in worker processes)."""
        return Cite, (self.key, self.locator)


def pieces(text: str) -> Iterator[str | Cite]:
    """The text in order: plain runs as str, citations as Cite."""
    last = 0
    for match in MARKER.finditer(text):
        if match.start() > last:
            yield text[last:match.start()]
        yield Cite(match.group(1), match.group(2) or "")
        last = match.end()
    if last < len(text):
        yield text[last:]


def cited_keys(text: str) -> list[str]:
    """The reference keys `text` cites, in order, each once."""
    return list(dict.fromkeys(match.group(1) for match in MARKER.finditer(text)))


# A source that rests on no published work says so in its first words (an assumption the reader can change,
# the teaching model's simplification); every other source cites at least one reference.
UNCITED = ("assumed", "given", "user assumption", "a common calculator rule", "simplified teaching model")


def cites_or_says_why(text: str) -> bool:
    """True when `text` cites a reference or starts by saying it rests on none (UNCITED)."""
    return bool(cited_keys(text)) or text.startswith(UNCITED)
