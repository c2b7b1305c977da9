"""The result of an estimate: named parts that sum to the total.

Part names are path-like ('optimizer/adam_m', 'activations/attention'); the first path
segment is the bucket a chart stacks by. Every part carries its formula in words and its
source, and says when it is a simplification and what it leaves out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Iterable

# Buckets in stacking order (bottom of a bar first).
BUCKETS = ("weights", "master", "gradients", "optimizer", "activations", "kv_cache", "comm", "overhead")


@dataclass(frozen=True)
class Rate:
    """A bytes-per-unit rule as a number with its unit: `bytes` bytes per one `per` ('param', 'token'). Charts add
    the rates of a bucket's parts (builder/charts/format.py) from these numbers, never from Part.per_unit's words."""

    bytes: int | Fraction
    per: str


@dataclass(frozen=True)
class Part:
    """One named piece of per-GPU (or host) memory."""

    name: str  # path-like, e.g. 'optimizer/adam_m'
    bytes: int  # exact bytes on one GPU (or one node's host memory)
    formula: str  # how it is computed, in symbols defined by `where`
    source: str  # paper + equation or code + version
    per_unit: str = ""  # the bytes-per-unit rule a chart annotates, e.g. '2 B/param'
    simplification: str = ""  # what this part leaves out, when it is a simplification
    sharded_by: int = 1  # how many ranks share the unsharded amount (1: replicated)
    transient: bool = False  # live at the peak but not saved for backward (e.g. returned logits)
    rate: Rate | None = None  # per_unit as a number with its unit, where the rule is one rate (None: words only)

    @property
    def bucket(self) -> str:
        """First path segment: the stack the part belongs to."""
        return self.name.split("/", 1)[0]


@dataclass(frozen=True)
class Breakdown:
    """Per-GPU memory as parts; totals are sums of parts, never stored separately."""

    params: int  # total parameters of the model
    parts: tuple[Part, ...]  # on one GPU
    host_parts: tuple[Part, ...] = ()  # CPU memory per node (offload)
    trainable_params: int = 0
    notes: tuple[str, ...] = ()  # assumptions that apply to the whole estimate
    where: dict[str, str] = field(default_factory=dict)  # symbol -> meaning and value

    @property
    def total(self) -> int:
        """Per-GPU bytes: the sum of the parts."""
        return sum(p.bytes for p in self.parts)

    @property
    def host_total(self) -> int:
        """Host (CPU) bytes per node: the sum of the host parts."""
        return sum(p.bytes for p in self.host_parts)

    def part(self, name: str) -> Part:
        """The part called `name` (KeyError if absent)."""
        for p in self.parts:
            if p.name == name:
                return p
        raise KeyError(name)

    def get(self, name: str, default: int = 0, transient: bool = True) -> int:
        """Bytes of part `name`, or of all parts under the prefix `name/`; `default` if none.

        With transient=False, parts that are live but not saved for backward are left out
        (what saved_tensors_hooks measures)."""
        matched = [p.bytes for p in self.parts if (p.name == name or p.name.startswith(name + "/"))
                   and (transient or not p.transient)]
        return sum(matched) if matched else default

    def buckets(self) -> dict[str, int]:
        """Bytes per first path segment, in stacking order."""
        totals: dict[str, int] = {}
        for bucket in BUCKETS:
            amount = sum(p.bytes for p in self.parts if p.bucket == bucket)
            if any(p.bucket == bucket for p in self.parts):
                totals[bucket] = amount
        for p in self.parts:
            if p.bucket not in totals:
                totals[p.bucket] = sum(q.bytes for q in self.parts if q.bucket == p.bucket)
        return totals

    def as_dict(self) -> dict[str, int]:
        """Part name -> bytes, in order."""
        return {p.name: p.bytes for p in self.parts}


def whole_bytes(amount: Fraction | int | float) -> int:
    """Round a byte amount up to a whole byte (sub-byte dtypes pack, but allocations are whole)."""
    return int(math.ceil(amount))


def join_parts(*groups: Iterable[Part]) -> tuple[Part, ...]:
    """Concatenate part lists, dropping zero-byte parts and rejecting duplicate names."""
    seen: set[str] = set()
    out: list[Part] = []
    for group in groups:
        for part in group:
            if part.name in seen:
                raise ValueError(f"duplicate part {part.name!r}")
            seen.add(part.name)
            if part.bytes:
                out.append(part)
    return tuple(out)
