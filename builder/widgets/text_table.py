"""The model data's texts, each sent once (issue 14, page weight).

The rules builder/widgets/model_data.py sends hold about 2,300 texts (["str", text]: the parts' per-unit words,
notes and sources with their linked citations, the checks' messages, choices compared with), only about 450 of them
distinct, and the same source or note comes back in parts far apart in the ~240 KB of data: farther than the 32 KB
gzip looks back, so gzip sends it again. `pack` sends every distinct text once, in the list `texts` (in the order the
JSON first meets them), and writes each ["str", text] as ["$", i], the i-th of that list; `unpack` is its inverse.
The browser undoes it once per model data before compiling any rule (static/widgets/01-rules.js `unpackTexts`), so
01-rules.js and 02-model.js evaluate the same rules `encode` wrote: nothing but the spelling of a text changes.
"""

from __future__ import annotations

from typing import Any

TEXT = "str"  # builder.model.expr's text constant: ["str", text]
REFERENCE = "$"  # ["$", i]: the i-th of TEXTS
TEXTS = "texts"  # the key of the list of distinct texts


def _is_reference(value: Any) -> bool:
    return (isinstance(value, list) and len(value) == 2 and value[0] == REFERENCE and isinstance(value[1], int)
            and not isinstance(value[1], bool))


def pack(data: dict[str, Any]) -> dict[str, Any]:
    """`data` (JSON-ready: dicts, lists, numbers, strings) with every ["str", text] as ["$", i] and the distinct
    texts under TEXTS, numbered in the order the serialised JSON meets them (keys sorted, as builder.widgets.to_json
    writes them): gzip finds texts used together near each other."""
    if TEXTS in data:
        raise ValueError(f"text_table.pack: the data already has a key {TEXTS!r}")
    index: dict[str, int] = {}

    def walk(value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            if len(value) == 2 and value[0] == TEXT and isinstance(value[1], str):
                return [REFERENCE, index.setdefault(value[1], len(index))]
            if _is_reference(list(value)):
                raise ValueError(f"text_table.pack: {value!r} would read as a reference")
            return [walk(item) for item in value]
        if isinstance(value, dict):
            return {key: walk(value[key]) for key in sorted(value)}
        return value

    packed = walk(data)
    packed[TEXTS] = list(index)
    return packed


def unpack(data: dict[str, Any]) -> dict[str, Any]:
    """The data `pack` was given: each ["$", i] back as ["str", text] (what 01-rules.js `unpackTexts` does)."""
    texts = data[TEXTS]

    def walk(value: Any) -> Any:
        if _is_reference(value):
            return [TEXT, texts[value[1]]]
        if isinstance(value, list):
            return [walk(item) for item in value]
        if isinstance(value, dict):
            return {key: walk(item) for key, item in value.items()}
        return value

    return {key: walk(value) for key, value in data.items() if key != TEXTS}
