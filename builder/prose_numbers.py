"""Numbers in a page's prose, computed when the site is built: the `{{< estimate "FLAGS" FIELD >}}` shortcode.

    the model gives {{< estimate "--model qwen3-14b --mode serve --engine vllm --gpu h100-80gb
    --max-num-seqs 16 --max max-model-len" max.value >}} tokens

FLAGS are the command line's: the shortcode reads what `python -m builder estimate FLAGS --json` prints, through
the command's own parser, model and JSON contract (builder/cli.py estimate_json), with the site's catalogs. FIELD
is a path into that JSON, keys joined by '.' (`max.value`, `parts.kv_cache`, `phases.backward_start.bytes`);
several paths joined by '+' are added up, and a last key ending in '*' adds up every key that starts with what
comes before the '*' (`parts.optimizer*`). How the value is written (UNIT_RULE) and the options (OPTION_WORDS)
are documented in docs/AUTHORING.md from here. A shortcode the command would refuse, a field the answer lacks or
an unknown option is a content error naming the page's file and line. Without `--gpu` in FLAGS the answer has no
verdicts (`fits` is empty): a number reads the GPU catalog only where it names a GPU.

The shortcode may span lines inside a paragraph, and sits anywhere inline text does (a table cell, a list item);
at the start of a line it is still prose, not a block placement.
"""

from __future__ import annotations

import re
import shlex
from typing import Any, Callable, Mapping

from builder.catalog import CatalogError
from builder.model.units import parse_size

START = re.compile(r"\{\{<\s*estimate\b")
SHORTCODE = re.compile(r"\{\{<\s*estimate\b(?P<body>.*?)>\}\}", re.S)
FORM = '{{< estimate "FLAGS" FIELD key=value ... >}}'

BYTE_UNITS = {"GiB": 2**30, "GB": 10**9, "MiB": 2**20, "KiB": 2**10, "bytes": 1}
BYTE_TABLES = ("parts", "host_parts")  # every entry of these (and of a phase's parts) is a number of bytes
UNIT_RULE = ("A field of bytes (its key ends in `bytes`, or it is an entry of `parts`, `host_parts` or a phase's "
             "`parts`) is written in GiB with two decimals and the unit, `58.73 GiB`; a whole number with "
             "thousands separators, `17,872` (tokens, requests, parameters); any other number with two decimals, "
             "`461.19`.")
OPTION_WORDS = {
    "unit": ("for bytes: `GiB` (the default), `GB`, `MiB`, `KiB` or `bytes` (a whole number)", "unit=GB"),
    "digits": ("decimals to write (default: 2; 0 for `bytes` and whole numbers; 1 for `against`)", "digits=1"),
    "bare": ("`true`: the number without its unit, for a table whose header names it", "bare=true"),
    "per": ("another field to divide by, written as a plain number with two decimals: bytes per parameter",
            "per=params"),
    "against": ("a published figure (a size such as `58.11GiB`, or a number) to compare with: written as the "
                "difference in percent of that figure, `1.1% more` or `0.6% less`", "against=58.11GiB"),
}


def evaluate(flags: str, catalogs: Mapping[str, Any]) -> dict[str, Any] | str:
    """The command's JSON answer for FLAGS with these catalogs ('model', 'gpu'), or its refusal in its own words
    (a string: a refusal is remembered like an answer, builder/incremental.py BuildMemory.estimates)."""
    from builder.cli import UsageError, estimate_json

    try:
        argv = shlex.split(flags)
    except ValueError as error:
        return f"cannot read the flags: {error}"
    if "--config" in argv or any(arg.startswith("--config=") for arg in argv):
        return "argument --config: a page's numbers come from the catalogs (--model or --params), not a file"
    # Without --gpu the answer's verdicts ("fits") would walk every GPU of the catalog, and a page whose number reads
    # no GPU would be built again for an edit to any (builder/catalog_reads.py): they are left out.
    asks_gpu = any(arg == "--gpu" or arg.startswith("--gpu=") for arg in argv)
    try:
        return estimate_json(argv, catalogs.get("model"), catalogs.get("gpu") if asks_gpu else {})
    except (UsageError, CatalogError, ValueError) as error:
        return str(error)


def parse(body: str) -> tuple[str, str, dict[str, str]]:
    """(FLAGS, FIELD, options) from what stands between 'estimate' and '>}}'; ValueError naming the problem."""
    if not body.strip().startswith('"'):
        raise ValueError(f"write {FORM}: the flags come first, in double quotes")
    try:
        words = shlex.split(body)
    except ValueError as error:
        raise ValueError(f"cannot read {body.strip()!r} ({error}); write {FORM}") from None
    if len(words) < 2:
        raise ValueError(f"no field after the flags; write {FORM}")
    flags, field, *rest = words
    options: dict[str, str] = {}
    for word in rest:
        key, equals, value = word.partition("=")
        if not equals or not re.fullmatch(r"[a-z_]+", key):
            raise ValueError(f"cannot read option {word!r} (write key=value)")
        if key not in OPTION_WORDS:
            raise ValueError(f"unknown option {key!r} (known: {', '.join(OPTION_WORDS)})")
        if key in options:
            raise ValueError(f"option {key!r} given twice")
        options[key] = value
    return " ".join(flags.split()), field, options


def pick(data: Mapping[str, Any], field: str) -> tuple[float, bool]:
    """(the value, whether it is bytes) of FIELD in the answer: paths joined by '+' added up, a last key ending in
    '*' standing for every key with that prefix; ValueError naming a missing key and the keys there are."""
    total, kinds = 0, set()
    for path in field.split("+"):
        keys = path.strip().split(".")
        node: Any = data
        for depth, key in enumerate(keys):
            if not isinstance(node, Mapping):
                raise ValueError(f"{'.'.join(keys[:depth])!r} is a value, not a group of fields")
            if key.endswith("*") and depth == len(keys) - 1:
                chosen = [name for name in node if name.startswith(key[:-1])]
                if not chosen:
                    raise ValueError(f"no key of {'.'.join(keys[:depth]) or 'the answer'!r} starts with "
                                     f"{key[:-1]!r} (there are: {', '.join(node)})")
                node = [node[name] for name in chosen]
            elif key not in node:
                raise ValueError(f"no {'.'.join(keys[:depth + 1])!r} in the answer (there are: "
                                 f"{', '.join(node)})")
            else:
                node = node[key]
        values = node if isinstance(node, list) else [node]
        for value in values:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"{path.strip()!r} is {value!r}, not a number")
            total += value
        kinds.add(is_bytes(keys))
    if len(kinds) > 1:
        raise ValueError("adds bytes to a count")
    return total, kinds.pop()


def is_bytes(keys: list[str]) -> bool:
    """True for a path to bytes: its key ends in 'bytes', or it is an entry of a table of parts."""
    return keys[-1].endswith("bytes") or (len(keys) > 1 and keys[-2] in BYTE_TABLES)


def whole_number(text: str, option: str) -> int:
    """A digits= value; ValueError otherwise."""
    if not re.fullmatch(r"[0-9]", text):
        raise ValueError(f"option {option} must be a whole number from 0 to 9, got {text!r}")
    return int(text)


def written(value: float, in_bytes: bool, options: Mapping[str, str], data: Mapping[str, Any]) -> str:
    """The value as the page shows it (UNIT_RULE and the options)."""
    digits = whole_number(options["digits"], "digits") if "digits" in options else None
    bare = options.get("bare", "false")
    if bare not in ("true", "false"):
        raise ValueError(f"option bare must be true or false, got {bare!r}")
    unit = options.get("unit")
    if unit is not None and (not in_bytes or unit not in BYTE_UNITS):
        raise ValueError(f"option unit={unit}: " + (f"use {', '.join(BYTE_UNITS)}" if in_bytes
                                                     else "the field is not bytes"))
    if "per" in options:
        if "against" in options or unit:
            raise ValueError("option per writes a plain ratio: give it without unit or against")
        divisor, _ = pick(data, options["per"])
        if not divisor:
            raise ValueError(f"option per: {options['per']!r} is 0")
        return f"{value / divisor:,.{2 if digits is None else digits}f}"
    if "against" in options:
        published = published_figure(options["against"], in_bytes)
        change = (value - published) / published * 100
        shown = f"{abs(change):.{1 if digits is None else digits}f}"
        return f"{shown}% {'more' if change > 0 else 'less'}" if float(shown) else "the same"
    if in_bytes:
        unit = unit or "GiB"
        places = (0 if unit == "bytes" else 2) if digits is None else digits
        number = f"{value / BYTE_UNITS[unit]:,.{places}f}"
    elif isinstance(value, int) and digits is None:
        number = f"{value:,}"
    else:
        number = f"{value:,.{2 if digits is None else digits}f}"
    return number if bare == "true" or not in_bytes else f"{number} {unit}"


def published_figure(text: str, in_bytes: bool) -> float:
    """An against= figure: a size for a field of bytes, a number otherwise; ValueError naming it."""
    try:
        figure = parse_size(text) if in_bytes else float(text.replace(",", ""))
    except ValueError:
        raise ValueError(f"option against: {text!r} is not " + ("a size such as 58.11GiB" if in_bytes
                                                                 else "a number")) from None
    if not figure:
        raise ValueError("option against: the figure is 0")
    return figure


def number(body: str, answer: Callable[[str], dict[str, Any] | str]) -> str:
    """The text a shortcode stands for: `answer(FLAGS)` is the command's JSON answer or its refusal (evaluate,
    through the build's memo); ValueError naming the problem."""
    try:
        flags, field, options = parse(body)
    except ValueError as error:
        raise ValueError(f"estimate: {error}") from None
    data = answer(flags)
    if isinstance(data, str):
        raise ValueError(f'estimate "{flags}": {data}')
    try:
        value, in_bytes = pick(data, field)
        return written(value, in_bytes, options, data)
    except ValueError as error:
        raise ValueError(f'estimate "{flags}" {field}: {error}') from None
