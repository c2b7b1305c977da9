"""Amounts and names in words: '13.0 GiB', '112.0 GB (104.3 GiB)', 'Adam first moment', bytes-per-unit rules such
as '8 B/param', and the CSS class of a bucket."""

from __future__ import annotations

from fractions import Fraction
from typing import Sequence

from builder.charts.spec import UNIT_BYTES, ChartSpec
from builder.model.breakdown import BUCKETS, Part
from builder.model.expr import bytes_text
from builder.model.partnames import reader_name
from builder.model.units import MiB, format_bytes


def format_amount(n_bytes: float, unit: str) -> str:
    """Bytes with the unit, digits as in the data tables (builder/grids.py): one decimal, two
    below 1, and more when two would print a non-zero amount as 0.00."""
    value = n_bytes / UNIT_BYTES[unit]
    if 0 < abs(value) < 0.00005:
        return f"<{format_bytes(0.0001 * UNIT_BYTES[unit], unit, 4)}"
    digits = 1 if abs(value) >= 1 or value == 0 else 2
    while digits < 4 and value and round(abs(value), digits) == 0:
        digits += 1
    return format_bytes(n_bytes, unit, digits)


def format_both(n_bytes: float, unit: str, also: str = "") -> str:
    """An amount in `unit`, then in `also` in brackets when that is another unit: '112.0 GB (104.3 GiB)'."""
    text = format_amount(n_bytes, unit)
    return f"{text} ({format_amount(n_bytes, also)})" if also and also != unit else text


MAX_RULE = 40  # characters of a rule shown in a note; the tooltip and the data table give it whole


def combine_rules(parts: Sequence[Part]) -> str:
    """One short bytes-per-unit rule for a bucket, added up from its parts' rates (Part.rate: numbers with units,
    never the words read back): 4 B/param (fp32 m) + 4 B/param (fp32 v) -> '8 B/param'; rates per token add up
    likewise; a part whose rule is words only shows as '…'. A bucket of one part shows that part's words."""
    present = [part for part in parts if part.per_unit.strip()]
    if len(present) <= 1:
        return shorten_rule(present[0].per_unit.strip()) if present else ""
    sums: dict[str, Fraction] = {}
    for part in present:
        if part.rate is not None:
            sums[part.rate.per] = sums.get(part.rate.per, Fraction(0)) + Fraction(part.rate.bytes)
    leftover = any(part.rate is None for part in present)
    pieces = [format_rule(amount, per) for per, amount in sums.items()] or [shorten_rule(present[0].per_unit.strip())]
    return " + ".join(pieces + ["…"] * leftover)


def format_rule(n_bytes: Fraction, per: str) -> str:
    """'12 B/param', '2.12 B/param' (digits as the model prints a rate, builder.model.expr.bytes_text),
    '48.0 KiB/token'."""
    if n_bytes < 2**10:
        return f"{bytes_text(Fraction(n_bytes))} B/{per}"
    if n_bytes < MiB:
        return f"{float(n_bytes) / 2**10:.1f} KiB/{per}"
    return f"{float(n_bytes) / MiB:.1f} MiB/{per}"


def shorten_rule(rule: str) -> str:
    """A rule cut at a word to at most MAX_RULE characters, with '…' when cut."""
    if len(rule) <= MAX_RULE:
        return rule
    cut = rule[: MAX_RULE - 1].rsplit(" ", 1)[0].rstrip(" +(,;")
    return cut + "…"


def name_bucket(bucket: str, spec: ChartSpec) -> str:
    """Reader-facing name of a bucket (or of any part key): the chart's override, else builder.model.partnames'."""
    overrides = dict(spec.display_names)
    return overrides[bucket] if bucket in overrides else reader_name(bucket)


def name_part(part: Part, spec: ChartSpec) -> str:
    """Reader-facing name of a part, from builder.model.partnames: 'Adam first moment' for 'optimizer/adam_m'."""
    overrides = dict(spec.display_names)
    if part.name in overrides:
        return overrides[part.name]
    return reader_name(part.name)


def class_bucket(bucket: str) -> str:
    """CSS class of a bucket's fill: 'tm-bucket-kv-cache' for 'kv_cache'."""
    known = bucket if bucket in BUCKETS else "other"
    return "tm-bucket-" + known.replace("_", "-")
