"""Garbage collection for one build run from the command line.

A cold build allocates a few million short-lived objects (rules, fractions, parts, SVG elements), and CPython's
collector, at its default threshold of 700 allocations, runs some 800 times over them; its full collections also
walk every object the imports made. Within `one_build` the objects that exist before the build (the imported
modules') are frozen out of collection (gc.freeze) and the youngest generation is collected every YOUNG allocations
instead of 700: the collector's CPU time in a cold build falls from about 0.35 s to under 0.1 s. The middle
generation is collected every MIDDLE young collections instead of 10: a cold build makes about 40 young collections,
and the three middle ones among them walked every object the build kept (its memos, its pages) for about 0.035 s to
free under a hundred; the young collections free the rest (some 37,000 objects in cycles). Nothing is left
uncollected (the cycles a build makes are still found, less often), and these settings are undone after the build,
so a process that builds many times (the tests) is as it was; `serve` keeps CPython's defaults.

Before that, `python -m builder` imports its modules with the collector off (`quiet_imports`): they make objects that
live as long as the process (functions, classes, rules, tables); some 170 collections, about 0.05 s in all,
freed under a thousand objects. Those objects are then frozen, as gc.freeze's documentation advises for objects made
at start-up, so no later collection walks them either; one_build's gc.unfreeze hands them back to the collector
(`serve` keeps them frozen: its modules live as long as it does).
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator

YOUNG = 10_000  # allocations between collections of the youngest generation (CPython's default: 700)
MIDDLE = 1_000  # young collections between collections of the middle generation (CPython's default: 10)


@contextmanager
def quiet_imports() -> Iterator[None]:
    """No collection during the block (the command line's imports), then what exists frozen (the module docstring)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


@contextmanager
def one_build() -> Iterator[None]:
    """Collect less during the block (see the module docstring)."""
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(YOUNG, MIDDLE, threshold[2])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()
