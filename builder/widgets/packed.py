"""The model data as it travels to the browser, smaller (issue 14, page weight); the rules themselves do not change.

Two things gzip does badly in the ~240 KB of rules builder/widgets/model_data.py sends:
- texts: about 2,300 ["str", text] (the parts' per-unit words, notes and sources with their linked citations, the
  checks' messages, the choices compared with), only about 450 distinct; the same source or note comes back in parts
  far apart, farther than the 32 KB gzip looks back, so gzip sends it again. Each distinct text goes once, in the
  list TEXTS (in the order the rules first meet them), and ["str", text] becomes ["$", i], the i-th of that list.
- names: every symbol, operator and key is a quoted JSON string. With the texts out, no string in the rules needs
  quotes (each is a name, an operator or a number), so the rules go as one string RULES, JSON with the quotes left out
  of every name (`compact`); putting them back (`expand`) is one regular expression, then JSON.parse.
The browser undoes both once per data before compiling any rule (static/widgets/01-rules.js `unpacked`), so 01-rules.js
and 02-model.js evaluate the rules builder.model.expr's `encode` wrote; `unpack` here is the same inverse, for tests.
"""

from __future__ import annotations

import json
import re
from typing import Any

TEXT = "str"  # builder.model.expr's text constant: ["str", text]
REFERENCE = "$"  # ["$", i]: the i-th of TEXTS
TEXTS = "texts"  # the key of the list of distinct texts
RULES = "rules"  # the key of the rules, written compact
# A string the compact form writes without quotes: a name (symbol, part, key) or an operator, nothing JSON or the
# expansion would read otherwise (no quote, backslash, space, bracket, brace, comma or colon; no leading digit).
NAME = re.compile(r"(?![-+]?\d)(?!(?:true|false|null)$)[A-Za-z0-9_$/.+*%<>=!-]+")
# What `expand` quotes again (01-rules.js `unpacked` uses the same expression): every whole token between JSON's
# punctuation (nothing but [ { , : or the start before it) that is not a number.
UNQUOTED = re.compile(r"(?<![^\[{,:])(?!-?\d)[^\[\]{},:]+")


def _is_reference(value: Any) -> bool:
    return (isinstance(value, list) and len(value) == 2 and value[0] == REFERENCE and isinstance(value[1], int)
            and not isinstance(value[1], bool))


def compact(value: Any) -> str:
    """`value` (dicts, lists, numbers and NAME strings) as JSON, keys sorted, with no quotes around the strings."""
    if isinstance(value, bool) or value is None:
        raise ValueError(f"packed.compact: {value!r} has no compact form")
    if isinstance(value, (int, float)):
        return json.dumps(value)
    if isinstance(value, str):
        if not NAME.fullmatch(value):
            raise ValueError(f"packed.compact: {value!r} is not a name")
        return value
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(compact(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{compact(key)}:{compact(value[key])}" for key in sorted(value)) + "}"
    raise ValueError(f"packed.compact: {value!r} has no compact form")


def expand(text: str) -> Any:
    """The value `compact` wrote (what 01-rules.js `unpacked` does: quotes back around every name, then JSON)."""
    return json.loads(UNQUOTED.sub(r'"\g<0>"', text))


def pack(rules: dict[str, Any], plain: dict[str, Any]) -> dict[str, Any]:
    """`rules` (JSON-ready) with each text once (TEXTS) and the rest written compact (RULES), beside `plain` (values
    a script reads as they are, such as words with spaces)."""
    if {TEXTS, RULES} & (set(rules) | set(plain)):
        raise ValueError(f"packed.pack: the keys {TEXTS!r} and {RULES!r} are the packing's own")
    index: dict[str, int] = {}

    def walk(value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            if len(value) == 2 and value[0] == TEXT and isinstance(value[1], str):
                return [REFERENCE, index.setdefault(value[1], len(index))]
            if _is_reference(list(value)):
                raise ValueError(f"packed.pack: {value!r} would read as a reference")
            return [walk(item) for item in value]
        if isinstance(value, dict):
            return {key: walk(value[key]) for key in sorted(value)}  # the order the page's JSON has: keys sorted
        return value

    return {RULES: compact(walk(rules)), TEXTS: list(index), **plain}


def unpack(data: dict[str, Any]) -> dict[str, Any]:
    """The rules and plain values `pack` was given, as one mapping (each ["$", i] back as ["str", text])."""
    texts = data[TEXTS]

    def walk(value: Any) -> Any:
        if _is_reference(value):
            return [TEXT, texts[value[1]]]
        if isinstance(value, list):
            return [walk(item) for item in value]
        if isinstance(value, dict):
            return {key: walk(item) for key, item in value.items()}
        return value

    return {**walk(expand(data[RULES])), **{key: value for key, value in data.items() if key not in (TEXTS, RULES)}}
