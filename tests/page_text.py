"""A content page's Markdown as a reader gets its words: every {{< estimate >}} shortcode replaced by the number the
build writes for it (builder/prose_numbers.py, with the shipped catalogs), whitespace collapsed to single spaces, so
that a test can look for a sentence however the page wraps it."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from builder import prose_numbers
from builder.catalog import default_gpus, default_models

CONTENT = Path(__file__).resolve().parents[1] / "content"


@lru_cache(maxsize=None)
def answer(flags: str) -> dict | str:
    """The command line's answer for the flags (prose_numbers.evaluate), once per test session."""
    return prose_numbers.evaluate(flags, {"model": default_models(), "gpu": default_gpus()})


def resolved(text: str) -> str:
    """`text` with its shortcodes replaced by their numbers (ValueError for a shortcode the build would refuse)."""
    return prose_numbers.SHORTCODE.sub(lambda match: prose_numbers.number(match.group("body"), answer), text)


def page_text(name: str) -> str:
    """content/<name> as read, on one line."""
    return " ".join(resolved((CONTENT / name).read_text(encoding="utf-8")).split())
