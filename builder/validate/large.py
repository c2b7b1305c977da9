"""Real 7B-70B layer shapes, counted under FakeTensorMode: shapes and dtypes only, nothing allocated.

Same recorder and same 1-vs-2-layer split as builder/validate/measure.py; fake tensors
have storages with `nbytes()` and identities, so dedup by storage works unchanged.
Shapes from each model's public config.json (dimensions quoted in /work/shared/REFERENCES.md).
"""

from __future__ import annotations

from typing import Any

from builder.validate.cases import ActivationCase
from builder.validate.measure import measure_activation_case

LARGE_SHAPES = {
    # name: (family, hidden, heads, kv_heads, ffn, vocab)
    "llama-2-7b": ("llama", 4096, 32, 32, 11008, 32000),
    "llama-3-8b": ("llama", 4096, 32, 8, 14336, 128256),
    "mistral-7b": ("mistral", 4096, 32, 8, 14336, 32000),
    "llama-3-70b": ("llama", 8192, 64, 8, 28672, 128256),
}


def large_cases(small: bool = False) -> list[tuple[str, ActivationCase]]:
    """(shape name, case) at b=1, s=4096 in bf16; sdpa for all, eager and full recompute for Llama-2-7B."""
    cases = []
    for shape_name, (family, hidden, heads, kv_heads, ffn, vocab) in LARGE_SHAPES.items():
        base = ActivationCase(family=family, attention="sdpa", dtype="bfloat16", batch=1, seq_len=4096,
                              hidden=hidden, heads=heads, kv_heads=kv_heads, ffn=ffn, vocab=vocab)
        cases.append((shape_name, base))
        if shape_name == "llama-2-7b":
            cases.append((shape_name, base.with_changes(attention="eager")))
            cases.append((shape_name, base.with_changes(recompute="full")))
        if small:
            break
    return cases


def measure_large_case(shape_name: str, case: ActivationCase) -> dict[str, Any]:
    """Per-layer and rest bytes of one real-shape case, without allocating."""
    result = measure_activation_case(case, fake=True)
    result["shape"] = shape_name
    result["fake_tensors"] = True
    return result
