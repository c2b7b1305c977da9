"""Per-op lists of saved tensors for representative cases, with sizes read as symbols.

The lead writes the model's op-level activation accounting from these lists
(content/validation/saved_tensors_<family>_<attention>_<dtype>.json).
"""

from __future__ import annotations

from typing import Any

from builder.validate.cases import ActivationCase, hf_config, symbol_values
from builder.validate.measure import observed_sdpa_kernel, run_forward
from builder.validate.saved import total_saved


def shape_in_symbols(shape: tuple[int, ...], symbols: dict[str, int]) -> str:
    """Read a shape as a product of symbols, e.g. (3, 4, 10, 10) -> 'b*a*s*s'; '1' for a scalar."""
    factors: list[str] = []
    for size in shape:
        if size == 1:
            continue
        factors.append(dimension_in_symbols(size, symbols))
    return "*".join(factors) or "1"


def dimension_in_symbols(size: int, symbols: dict[str, int]) -> str:
    """One dimension as a symbol, a product of two or three (b*s), a small multiple (3*h), or the number."""
    names = list(symbols)
    for name in names:
        if symbols[name] == size:
            return name
    for first in names:
        for second in names[names.index(first):]:
            if symbols[first] * symbols[second] == size:
                return f"{first}*{second}"
    for first in names:
        for second in names[names.index(first):]:
            for third in names[names.index(second):]:
                if symbols[first] * symbols[second] * symbols[third] == size:
                    return f"{first}*{second}*{third}"
    for factor in range(2, 9):
        for name in names:
            if factor * symbols[name] == size:
                return f"{factor}*{name}"
    return str(size)


def op_list(case: ActivationCase) -> dict[str, Any]:
    """Every tensor saved by a 1-layer forward of `case`, op by op, with its size in symbols."""
    recorder = run_forward(case, 1)
    symbols = symbol_values(case)
    rows = []
    for record in recorder.records:
        row = record.as_dict()
        row["elements"] = shape_in_symbols(record.shape, symbols)
        row["part"] = op_part(record.module)
        rows.append(row)
    return {
        "name": case.name,
        "inputs": case.as_dict(),
        "hf_config": hf_config(case, 1),
        "symbols": symbols,
        "totals": total_saved(recorder.records).as_dict(),
        "sdpa_kernel": observed_sdpa_kernel(recorder.records) if case.attention == "sdpa" else None,
        "saved": rows,
    }


def op_part(module: str) -> str:
    """'layer' for records inside a transformer block, 'rest' otherwise."""
    pieces = module.split(".")
    return "layer" if any(p in ("h", "layers") for p in pieces[:-1]) and any(p.isdigit() for p in pieces) else "rest"


def summarise_op_list(listing: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Bytes of distinct activation storages per symbolic size, per part ('layer', 'rest').

    Values are bytes per unit of the size: {'layer': {'b*s*h': 4, ...}} reads '4 bytes per
    b*s*h element'; a storage whose size has no symbolic reading is listed by its numbers.
    """
    symbols = listing["symbols"]
    summary: dict[str, dict[str, int]] = {"layer": {}, "rest": {}}
    for row in listing["saved"]:
        if row["kind"] != "activation" or row["duplicate_of"] is not None:
            continue
        key = storage_units(row, symbols)
        bucket = summary[row["part"]]
        bucket[key] = bucket.get(key, 0) + row["storage_bytes"] // value_of(key, symbols)
    return {part: dict(sorted(values.items())) for part, values in summary.items()}


def storage_units(row: dict[str, Any], symbols: dict[str, int]) -> str:
    """The symbolic size of the whole storage: the view's size, or k times it for a slice of a larger buffer."""
    if row["storage_bytes"] == row["tensor_bytes"] or not row["tensor_bytes"]:
        return row["elements"]
    ratio, remainder = divmod(row["storage_bytes"], row["tensor_bytes"])
    if remainder == 0:
        return f"{ratio}*{row['elements']}"
    element_size = row["tensor_bytes"] // max(1, value_of(row["elements"], symbols))
    return dimension_in_symbols(row["storage_bytes"] // max(1, element_size), symbols)


def value_of(units: str, symbols: dict[str, int]) -> int:
    """Numeric value of a product like 'b*s*h'."""
    value = 1
    for factor in units.split("*"):
        value *= symbols[factor] if factor in symbols else int(factor)
    return value
