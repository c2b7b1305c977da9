"""Memory budget allocator widget (seed 001): four buckets against one capacity.

The numbers come from builder.model.teaching.budget_allocator, seed 001's deliberately
simplified model (optimizer = 2 x weights, activations = b x s x 4096 x 32 x bytes); the
widget says so and links to the full model's pages. static/widgets/20-memory-budget.js
recomputes `texts` with the same rules from `data`.

Author options (registered in builder/content.py, WIDGETS):
    params=7B | model=llama-3-8b | preset=name   starting model size (snapped to the slider's 0.5B steps)
    micro_batch=1 seq_len=2048 precision=bf16   starting batch, sequence (a power of two, 512-32768), precision
    budget=80GiB | gpu=h100-80gb                 the capacity (default 80 GiB, seed 001's A100)
    breakdown=false                              single-total mode: one bar, no per-bucket legend
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from builder.model.architecture import param_count
from builder.model.teaching import BUDGET_PRECISIONS, budget_allocator
from builder.model.units import GiB, format_bytes, parse_size
from builder.model.units import parse_count

HALF_BILLION = 500_000_000  # the model-size slider's step (seed 001: 0.5-175B)
PARAM_STEPS = (1, 350)  # slider range in half-billions
BATCH_RANGE = (1, 64)
SEQ_POWERS = (9, 15)  # sequence 2^9 = 512 ... 2^15 = 32768 tokens
DEFAULT_BUDGET = 80 * GiB
HIDDEN, LAYERS = 4096, 32  # seed 001's 7B-shaped activation reference
PRECISION_ALIASES = {"bf16-mixed": "bf16", "fp16-mixed": "fp16"}
BUCKETS = (("weights", "Weights", "weights"), ("gradients", "Gradients", "gradients"),
           ("optimizer", "Optimizer (Adam m, v)", "optimizer"), ("activations", "Activations", "activations"))


# Texts shared with the script (same rules in static/widgets/20-memory-budget.js) -------------

def seq_text(seq_len: int) -> str:
    """'512', '2K', '32K'."""
    return f"{seq_len // 1024}K" if seq_len >= 1024 else str(seq_len)


def budget_verdict(total: int, capacity: int) -> str:
    """'27.3 GiB headroom' or 'exceeds by 12.1 GiB' (seed 001's words)."""
    if total <= capacity:
        return f"{format_bytes(capacity - total)} headroom"
    return f"exceeds by {format_bytes(total - capacity)}"


def texts(halves: int, batch: int, seq_len: int, precision: str, capacity: int) -> dict[str, str]:
    """Every text of the figure for one state, keyed as the partial's data-t attributes."""
    amounts = bucket_bytes(halves, batch, seq_len, precision)
    total, size, label = sum(amounts), f"{halves / 2:.1f}B", precision.upper()
    out = {"p": size, "b": str(batch), "s": seq_text(seq_len), "q": label, "tot": format_bytes(total),
           "verdict": budget_verdict(total, capacity), "head": f"{size} params · b={batch} · s={seq_text(seq_len)} · {label}"}
    for index, amount in enumerate(amounts):
        out[f"k{index}"] = format_bytes(amount)
    out["sum"] = (f"Training memory budget. {size} parameters, batch {batch}, sequence {seq_text(seq_len)}, {label}. "
                  f"Total {out['tot']} of {format_bytes(capacity)}: "
                  + ("fits, " if total <= capacity else "does not fit, ") + out["verdict"] + ".")
    return out


def bucket_bytes(halves: int, batch: int, seq_len: int, precision: str) -> list[int]:
    """Weights, gradients, optimizer, activations from the teaching model."""
    breakdown = budget_allocator(halves * HALF_BILLION, batch, seq_len, precision, HIDDEN, LAYERS)
    return [part.bytes for part in breakdown.parts]


# Reading the author's options -------------------------------------------------------------

def start_state(options: dict[str, Any], catalogs: dict[str, Any]) -> dict[str, Any]:
    """The starting model size, batch, sequence and precision (preset, then model/params, then options)."""
    settings = dict(catalogs["preset"][options["preset"]].settings) if "preset" in options else {}
    if "model" in options or "params" in options:  # the placement's own size wins over the preset's
        settings.pop("model", None), settings.pop("params", None)
    settings.update({k: options[k] for k in ("model", "params", "micro_batch", "seq_len", "precision")
                     if k in options})
    if "model" in settings:
        params = param_count(catalogs["model"][settings["model"]])
    else:
        params = parse_count(str(settings.get("params", "7B")))
    halves = min(max(round(Fraction(params, HALF_BILLION)), PARAM_STEPS[0]), PARAM_STEPS[1])
    batch, seq_len = settings.get("micro_batch", 1), settings.get("seq_len", 2048)
    precision = PRECISION_ALIASES.get(settings.get("precision", "bf16"), settings.get("precision", "bf16"))
    if not BATCH_RANGE[0] <= batch <= BATCH_RANGE[1]:
        raise ValueError(f"micro_batch must be {BATCH_RANGE[0]}-{BATCH_RANGE[1]}, got {batch}")
    if seq_len not in [2**k for k in range(SEQ_POWERS[0], SEQ_POWERS[1] + 1)]:
        raise ValueError(f"seq_len must be a power of two from 512 to 32768, got {seq_len}")
    if precision not in BUDGET_PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(BUDGET_PRECISIONS)} (seed 001), got {precision!r}")
    return {"h": halves, "b": batch, "s": seq_len.bit_length() - 1, "q": precision}


def read_capacity(options: dict[str, Any], catalogs: dict[str, Any]) -> tuple[int, str]:
    """(bytes, label) of the budget: a GPU's usable memory, a size, or 80 GiB."""
    if "gpu" in options:
        gpu = catalogs["gpu"][options["gpu"]]
        return gpu.usable_bytes, gpu.display
    capacity = parse_size(options["budget"]) if "budget" in options else DEFAULT_BUDGET
    if capacity <= 0:
        raise ValueError("budget must be positive")
    return capacity, "budget"


# The figure ---------------------------------------------------------------------------------

def context(options: dict[str, Any], catalogs: dict[str, Any]) -> dict[str, Any]:
    """The server-rendered default state and the script's data (raises ValueError on bad options)."""
    start = start_state(options, catalogs)
    capacity, capacity_name = read_capacity(options, catalogs)
    seq_len = 2 ** start["s"]
    amounts = bucket_bytes(start["h"], start["b"], seq_len, start["q"])
    breakdown = options.get("breakdown", True)
    data = {"start": start, "capacity": capacity, "hidden": HIDDEN, "layers": LAYERS,
            "precisions": [{"id": key, "num": value.numerator, "den": value.denominator}
                           for key, value in BUDGET_PRECISIONS.items()]}
    example = budget_allocator(start["h"] * HALF_BILLION, start["b"], seq_len, start["q"], HIDDEN, LAYERS)
    return {"data": data, "start": start, "seq_len": seq_len, "capacity_name": capacity_name,
            "capacity_text": format_bytes(capacity), "breakdown": breakdown,
            "buckets": [{"id": b[0], "label": b[1], "colour": "tm-bucket-" + b[2], "formula": part.formula,
                         "note": part.simplification} for b, part in zip(BUCKETS, example.parts)],
            "texts": texts(start["h"], start["b"], seq_len, start["q"], capacity),
            "bar": bar(amounts, capacity, breakdown), "bytes": ",".join(map(str, amounts)),
            "valuetext": {"p": f"{start['h'] / 2:.1f} billion parameters", "b": f"batch of {start['b']}",
                          "s": f"{seq_len} tokens"}}


def bar(amounts: list[int], capacity: int, breakdown: bool) -> dict[str, Any]:
    """Geometry in percent: the stack (or one total), the capacity line and the hatched overflow."""
    total = sum(amounts)
    scale = max(capacity, total)  # seed 001: the capacity line stays at the right edge until the total passes it
    percent = lambda amount: f"{float(100 * Fraction(amount, scale)):.3f}"  # noqa: E731 - one formula
    parts = amounts if breakdown else [total]
    starts = [sum(parts[:i]) for i in range(len(parts))]
    over = min(capacity, total)
    return {"rects": [{"x": percent(s), "w": percent(a)} for s, a in zip(starts, parts)],
            "line": percent(capacity), "end": 2 * capacity > scale, "over": {"x": percent(over), "w": percent(total - over)},
            "fits": total <= capacity}
