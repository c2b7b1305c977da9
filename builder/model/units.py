"""Data types and byte units.

GiB = 2**30 bytes and GB = 10**9 bytes are different units; every number this project
prints names which one it uses. Nothing here rounds: parts stay in exact bytes.
"""

from __future__ import annotations

from fractions import Fraction

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


def parse_size(text: str) -> int:
    """Parse '1.5GiB', '300 MiB', '2GB' or a plain byte count into bytes."""
    units = {"GIB": GiB, "MIB": MiB, "KIB": KiB, "GB": GB, "MB": MB, "KB": KB, "B": 1, "": 1}
    cleaned = text.strip().replace(" ", "")
    number = cleaned.rstrip("GgMmKkIiBb")
    suffix = cleaned[len(number):].upper()
    if suffix not in units or not number:
        raise ValueError(f"cannot read size {text!r} (write e.g. 1.5GiB, 300MiB or 2GB)")
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"cannot read size {text!r} (write e.g. 1.5GiB, 300MiB or 2GB)") from None
    if value < 0:
        raise ValueError(f"size {text!r} is negative")
    return round(value * units[suffix])
