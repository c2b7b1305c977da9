"""The model data as it travels to the browser, smaller (issue 14, page weight); the rules themselves do not change.

Two things gzip does badly in the ~240 KB of rules builder/widgets/model_data.py sends:
- texts: about 2,300 ["str", text] (the parts' per-unit words, notes and sources with their linked citations, the
  checks' messages, the choices compared with), only about 450 distinct; the same source or note comes back in parts
  far apart, farther than the 32 KB gzip looks back, so gzip sends it again. Each distinct text goes once, in the
  list TEXTS (in the order the rules first meet them), and ["str", text] becomes ["$", i], the i-th of that list.
- names: every symbol, operator and key is a quoted JSON string. With the texts out, no string in the rules needs
  quotes (each is a name, an operator or a number), so the rules go as one string RULES, JSON with the quotes left out
  of every name (`compact`); putting them back (`expand`) is one regular expression, then JSON.parse.
- names again: with the quotes gone, each name still costs gzip a back-reference (two to three bytes) every time it
  comes back, some 30,000 times in the calculator's rules. Each distinct name goes once, in the list NAMES, and the
  rules write it as a code of one or two characters of CODE_ALPHABET (`code`): the most frequent names (as many as
  the alphabet has characters) get one character, the rest two; each group lists its names in the order the rules
  first meet them. The calculator's model data: 30.9 KB gzipped with the names written out, 28.5 KB coded.
The browser undoes all three once per data before compiling any rule (static/widgets/01-rules.js `unpacked`), so 01-rules.js
and 02-model.js evaluate the rules builder.model.expr's `encode` wrote; `unpack` here is the same inverse, for tests.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

TEXT = "str"  # builder.model.expr's text constant: ["str", text]
REFERENCE = "$"  # ["$", i]: the i-th of TEXTS
TEXTS = "texts"  # the key of the list of distinct texts
RULES = "rules"  # the key of the rules, written compact
NAMES = "names"  # the key of the list of distinct names, coded in the rules (`code`)
# The characters of a name's code (`code`); static/widgets/01-rules.js `unpacked` has the same string. None is a
# digit, quote, space or JSON punctuation, so a code is a token UNQUOTED matches and never reads as a number.
CODE_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_$"
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
    if isinstance(value, (list, tuple)):  # the kinds tested most often first (none is another's)
        return "[" + ",".join([compact(item) for item in value]) + "]"
    if isinstance(value, str):
        if not NAME.fullmatch(value):
            raise ValueError(f"packed.compact: {value!r} is not a name")
        return value
    if isinstance(value, bool) or value is None:
        raise ValueError(f"packed.compact: {value!r} has no compact form")
    if isinstance(value, int):
        return int.__repr__(value)  # what json.dumps writes for an int
    if isinstance(value, float):
        return json.dumps(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{compact(key)}:{compact(value[key])}" for key in sorted(value)) + "}"
    raise ValueError(f"packed.compact: {value!r} has no compact form")


def expand(text: str, names: list[str] | None = None) -> Any:
    """The value `compact` wrote (what 01-rules.js `unpacked` does: quotes back around every name, then JSON); with
    `names`, every token is a code (`code`) of the name at its place in `names`."""
    if names is None:
        return json.loads(UNQUOTED.sub(r'"\g<0>"', text))
    quoted = {code(index): json.dumps(name) for index, name in enumerate(names)}
    return json.loads(UNQUOTED.sub(lambda match: quoted[match.group(0)], text))


def code(index: int) -> str:
    """The code of the `index`-th name of NAMES: one character of CODE_ALPHABET for the first len(CODE_ALPHABET),
    then two."""
    size = len(CODE_ALPHABET)
    if index < size:
        return CODE_ALPHABET[index]
    if index >= size + size * size:
        raise ValueError(f"packed.code: more than {size + size * size} names")
    first, second = divmod(index - size, size)
    return CODE_ALPHABET[first] + CODE_ALPHABET[second]


def coded(text: str) -> tuple[str, list[str]]:
    """`text` (compact) with each name written as its code, and the names in code order: the most frequent names
    (ties: the first met) get the one-character codes; within each length, the order the text first meets them."""
    tokens = UNQUOTED.findall(text)
    counts = Counter(tokens)
    first_met = list(counts)  # a Counter keeps the order keys came in
    short = set(sorted(first_met, key=lambda name: -counts[name])[:len(CODE_ALPHABET)])  # stable: ties first-met
    names = [name for name in first_met if name in short] + [name for name in first_met if name not in short]
    codes = {name: code(index) for index, name in enumerate(names)}
    return UNQUOTED.sub(lambda match: codes[match.group(0)], text), names


def pack(rules: dict[str, Any], plain: dict[str, Any]) -> dict[str, Any]:
    """`rules` (JSON-ready) with each text once (TEXTS) and the rest written compact (RULES), each name as its code
    (NAMES), beside `plain` (values a script reads as they are, such as words with spaces)."""
    if {TEXTS, RULES, NAMES} & (set(rules) | set(plain)):
        raise ValueError(f"packed.pack: the keys {TEXTS!r}, {RULES!r} and {NAMES!r} are the packing's own")
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

    text, names = coded(compact(walk(rules)))
    return {RULES: text, NAMES: names, TEXTS: list(index), **plain}


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

    return {**walk(expand(data[RULES], data[NAMES])),
            **{key: value for key, value in data.items() if key not in (TEXTS, RULES, NAMES)}}
