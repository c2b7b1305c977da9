"""Data types and byte units.

GiB = 2**30 bytes and GB = 10**9 bytes are different units; every number this project
prints names which one it uses. Nothing here rounds: parts stay in exact bytes.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any

KiB = 2**10
MiB = 2**20
GiB = 2**30
KB = 10**3
MB = 10**6
GB = 10**9

# Bytes per element. Sub-byte types are Fractions so that sums stay exact.
# fp4/nf4/int4 pack two values per byte (Dettmers et al. 2023, QLoRA, section 2).
DTYPE_BYTES: dict[str, Fraction] = {
    "fp64": Fraction(8),
    "fp32": Fraction(4),
    "tf32": Fraction(4),  # tf32 is a matmul mode: values are still stored in 32 bits
    "bf16": Fraction(2),
    "fp16": Fraction(2),
    "fp8": Fraction(1),
    "int8": Fraction(1),
    "fp4": Fraction(1, 2),
    "nf4": Fraction(1, 2),
    "int4": Fraction(1, 2),
    "bool": Fraction(1),
}


def dtype_bytes(dtype: str) -> Fraction:
    """Bytes per element of `dtype` (raises ValueError naming the known types)."""
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        known = ", ".join(sorted(DTYPE_BYTES))
        raise ValueError(f"unknown dtype {dtype!r} (known: {known})") from None


def to_gib(n_bytes: float) -> float:
    """Bytes to gibibytes (2**30)."""
    return n_bytes / GiB


def to_gb(n_bytes: float) -> float:
    """Bytes to gigabytes (10**9)."""
    return n_bytes / GB


def format_bytes(n_bytes: float, unit: str = "GiB", digits: int = 1) -> str:
    """Format bytes in 'GiB' or 'GB' with the unit written out, e.g. '13.0 GiB'."""
    if unit == "GiB":
        return f"{n_bytes / GiB:.{digits}f} GiB"
    if unit == "GB":
        return f"{n_bytes / GB:.{digits}f} GB"
    if unit == "MiB":
        return f"{n_bytes / MiB:.{digits}f} MiB"
    raise ValueError(f"unknown unit {unit!r} (use GiB, GB or MiB)")


COUNT_SUFFIXES = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}
COUNT_LIMIT = 10**15  # no count the model takes (parameters, tokens, ranks) comes near a quadrillion
_COUNT = re.compile(r"\s*(-?[0-9][0-9_,]*(?:\.[0-9_]+)?(?:[eE][+-]?[0-9]{1,3})?)\s*([KkMmBbTt]?)\s*")


def parse_count(value: Any, low: int = 1, high: int = COUNT_LIMIT) -> int:
    """The one reader of counts (parameters, tokens, ranks, batch sizes), on every surface: an int, a float with
    no fraction, or text such as '7B', '7b', '350M', '7e9', '7_000_000_000' or '124,439,808'. Raises ValueError
    naming the accepted spellings and the range [low, high] for anything else (bool, inf, nan, 1e400, 7.5, '')."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"must be a whole number such as 4096, 4K, 7B, 7e9 or 7_000_000_000, got {value!r}")
    if isinstance(value, str):
        match = _COUNT.fullmatch(value) if len(value) < 64 else None
        if not match:
            shown = value if len(value) < 64 else value[:20] + "..."
            raise ValueError(f"must be a whole number such as 4096, 4K, 7B, 7e9 or 7_000_000_000, got {shown!r}")
        exact = Fraction(match.group(1).replace("_", "").replace(",", "")) * COUNT_SUFFIXES[match.group(2).upper()]
    elif isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"must be a whole number between {low:,} and {high:,}, got {value!r}")
    else:
        exact = Fraction(value)
    if exact.denominator != 1:
        raise ValueError(f"must be a whole number, got {value!r}")
    if not low <= exact <= high:
        raise ValueError(f"must be between {low:,} and {high:,}, got {value!r}")
    return int(exact)


_LONG_WORD = re.compile(r"[^\s,]{65,}")


def clip(message: str) -> str:
    """A one-line message with any word over 64 characters (a pasted value, 10 MB of text) shown by its start and
    its end, where a long path keeps its file name and line (.../config.json:3:)."""
    return _LONG_WORD.sub(lambda m: m.group(0)[:20] + "..." + m.group(0)[-24:], message)


SIZE_LIMIT = 2**50  # 1 PiB: no size the model takes (a GPU, an overhead) comes near it


def parse_size(text: str) -> int:
    """Parse '1.5GiB', '300 MiB', '2GB' or '512B' into bytes: the one reader of sizes. A number without a unit is
    refused (500 could be bytes or MiB, 80 GiB or GB), except 0, which is 0 in every unit."""
    units = {"GIB": GiB, "MIB": MiB, "KIB": KiB, "GB": GB, "MB": MB, "KB": KB, "B": 1, "": 1}
    if len(text) > 64:
        raise ValueError(f"cannot read size {text[:20] + '...'!r} (write e.g. 1.5GiB, 300MiB or 2GB)")
    cleaned = text.strip().replace(" ", "")
    number = cleaned.rstrip("GgMmKkIiBb")
    suffix = cleaned[len(number):].upper()
    if suffix not in units or not number:
        raise ValueError(f"cannot read size {text!r} (write e.g. 1.5GiB, 300MiB or 2GB)")
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"cannot read size {text!r} (write e.g. 1.5GiB, 300MiB or 2GB)") from None
    if not math.isfinite(value) or not 0 <= value * units[suffix] <= SIZE_LIMIT:
        raise ValueError(f"size {text!r} must be between 0 bytes and 1 PiB")
    if not suffix and value:
        raise ValueError(f"size {text!r} has no unit: write it with one, e.g. {number}GiB, {number}GB, {number}MiB "
                         f"or {number}B (GiB is 2**30 bytes, GB 10**9)")
    return round(value * units[suffix])
