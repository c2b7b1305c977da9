"""URL state keys renamed since a release, so that links written with the old keys keep opening the same state.

A widget's state travels in the query string as <widget id>.<key>=<value>, and its keys are full words (an option's
own name or its framework's flag word, e.g. `sequence_parallel`, `virtual_stages`, `micro_batch`). Release 0.1.0
wrote some as letters (`calculator.sp=1`, `bytes-per-param.z=3`). Each widget keeps one renames table, old key ->
[new key, the release after which it was renamed], declared in its own module and registered with the widget
(builder.widgets.WIDGETS). The page carries the table as data (the widget's data-renamed attribute);
static/widgets/00-core.js readState reads an old key as its new key when the new key is absent and rewrites the
address to the new keys, the same way it reads a widget's old positional id. A renamed key is never reused.
"""

from __future__ import annotations


def renamed(release: str, **keys: str) -> dict[str, list[str]]:
    """A widget's renames table: each old key (the keyword) -> [its new key, the last release that wrote the old
    key]."""
    return {old: [new, release] for old, new in keys.items()}

