"""Memory budget allocator widget (seed 001): four buckets against one capacity, and the full model beside them.

The buckets come from builder.model.teaching.BUDGET, seed 001's deliberately simplified rules (optimizer = 2 x
weights, activations = b x s x 4096 x 32 x bytes), evaluated here and, from the same rules, by
static/widgets/20-memory-budget.js. Their sum stays on show, named as a sum, so seed 001's worked example
(52.7 GiB of 80.0 GiB, 27.3 GiB headroom) is reproducible. The verdict, the badge and the hatching follow the
full model's need for the same run (builder.widgets.full_model: the peak of a step for the nearest catalog
model), and the widget says in one line why the two numbers differ.

Author options (registered in builder/widgets/__init__.py, WIDGETS):
    params=7B | model=llama-3-8b | preset=name   starting model size (snapped to the slider's 0.5B steps)
    micro_batch=1 seq_len=2048 precision=bf16   starting batch, sequence (a power of two, 512-32768), precision
    budget=80GiB | gpu=h100-80gb                 the capacity (default 80 GiB, seed 001's A100)
    breakdown=false                              single-total mode: one bar, no per-bucket legend
    min_params=0.5B max_params=175B              the model-size slider's bounds (multiples of 0.5B; seed 001's
    max_batch=64 min_seq_len=512 max_seq_len=32768   modelSizeBnMin/Max, batchSizeMax; sequences are powers of two)
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from builder.model import Config
from builder.model.architecture import param_count
from builder.model.teaching import BUDGET, BUDGET_PRECISIONS, budget_allocator
from builder.model.units import GiB, format_bytes, parse_count, parse_size
from builder.widgets import full_model, link_notice
from builder.widgets.renames import renamed

HALF_BILLION = 500_000_000  # the model-size slider's step (seed 001: 0.5-175B)
PARAM_STEPS = (1, 350)  # slider range in half-billions
BATCH_RANGE = (1, 64)
SEQ_POWERS = (9, 15)  # sequence 2^9 = 512 ... 2^15 = 32768 tokens
DEFAULT_BUDGET = 80 * GiB
HIDDEN, LAYERS = 4096, 32  # seed 001's 7B-shaped activation reference
PRECISION_ALIASES = {"bf16-mixed": "bf16", "fp16-mixed": "fp16"}
# The widget's URL keys (its state), by what each holds: the model size in half-billions of parameters (the size
# slider's 0.5B steps), the micro-batch, the sequence length's power of two (2^k tokens: the sequence slider's steps)
# and the precision. The partial and the script read them from here (the context's `url_keys`, the data's `keys`).
KEYS = {"size": "params_half_billions", "batch": "micro_batch", "seq": "seq_len_exponent", "precision": "precision"}
# Release 0.1.0's keys (builder.widgets.renames).
RENAMED = renamed("0.1.0", h=KEYS["size"], b=KEYS["batch"], s=KEYS["seq"], q=KEYS["precision"])
SIZE, BATCH, SEQ, PRECISION = KEYS.values()
BUCKETS = (("weights", "Weights", "weights"), ("gradients", "Gradients", "gradients"),
           ("optimizer", "Optimizer (Adam m, v)", "optimizer"), ("activations", "Activations", "activations"))
# The full model's precision policy for each of the widget's precisions, and the words naming it. bf16 and fp16
# training run in mixed precision (Micikevicius et al. 2017: fp32 master weights and optimizer states); fp8 training
# runs as Transformer Engine's fp8 recipe under Megatron-LM (builder.model.recipes: bf16 weights, fp32 main_grad,
# master and states, plus a cached fp8 copy of each linear weight), not with 1-byte weights.
FULL_POLICY = {"fp32": ("fp32", "fp32"), "bf16": ("bf16-mixed", "bf16 mixed precision"),
               "fp16": ("fp16-mixed", "fp16 mixed precision"),
               "fp8": ("te-fp8", "Transformer Engine fp8 (bf16 weights plus an fp8 copy of each linear weight)")}
# The texts of the figure as str.format templates, filled here and by the script.
TEXTS = {
    "head": "{0} params · b={1} · s={2} · {3}",
    "headroom": "{0} headroom",  # seed 001's words, for the four-bucket sum
    "over": "exceeds by {0}",
    "run": "{0}, AdamW, micro-batch {1} × {2} tokens on one GPU",
    "summary": "Training memory budget. {0} parameters, batch {1}, sequence {2}, {3}. Four-bucket sum {4} of {5}: "
               "{6}. The full model ({7}) needs {8}: {9}.",
    # The sliders' aria-valuetext.
    "valuetext_h": "{0} billion parameters",
    "valuetext_b": "batch of {0}",
    "valuetext_s": "{0} tokens",
}


# Texts (the script fills the same templates) ----------------------------------------------

def seq_text(seq_len: int) -> str:
    """'512', '2K', '32K'."""
    return f"{seq_len // 1024}K" if seq_len >= 1024 else str(seq_len)


def sum_verdict(total: int, capacity: int) -> str:
    """'27.3 GiB headroom' or 'exceeds by 12.1 GiB': seed 001's words for the four-bucket sum."""
    if total <= capacity:
        return TEXTS["headroom"].format(format_bytes(capacity - total))
    return TEXTS["over"].format(format_bytes(total - capacity))


def full_config(batch: int, seq_len: int, precision: str) -> Config:
    """The run the full model prices for a state: the policy for the precision, AdamW, one GPU."""
    return Config(precision=FULL_POLICY[precision][0], micro_batch=batch, seq_len=seq_len)


def texts(halves: int, batch: int, seq_len: int, precision: str, capacity: int, capacity_text: str,
          models: dict[str, Any]) -> dict[str, Any]:
    """Every text of the figure for one state, keyed as the partial's data-t attributes, and the need."""
    amounts = bucket_bytes(halves, batch, seq_len, precision)
    total, size, label = sum(amounts), f"{halves / 2:.1f}B", precision.upper()
    run = TEXTS["run"].format(FULL_POLICY[precision][1], batch, f"{seq_len:,}")
    full = full_model.compare(models, halves * HALF_BILLION, full_config(batch, seq_len, precision), run)
    need_verdict = full_model.verdict(full["need"], capacity, capacity_text)
    out = {"p": size, "b": str(batch), "s": seq_text(seq_len), "q": label, "tot": format_bytes(total),
           "verdict": sum_verdict(total, capacity), "head": TEXTS["head"].format(size, batch, seq_text(seq_len), label),
           "need": format_bytes(full["need"]), "mverdict": need_verdict, "model": full["line"]}
    for index, amount in enumerate(amounts):
        out[f"k{index}"] = format_bytes(amount)
    name = out["mname"] = models[full["id"]].extra.get("display", full["id"])
    out["sum"] = TEXTS["summary"].format(size, batch, seq_text(seq_len), label, out["tot"], format_bytes(capacity),
                                         out["verdict"], name, out["need"], need_verdict)
    return {"texts": out, "need": full["need"], "total": total, "amounts": amounts}


def bucket_bytes(halves: int, batch: int, seq_len: int, precision: str) -> list[int]:
    """Weights, gradients, optimizer, activations from the teaching model."""
    breakdown = budget_allocator(halves * HALF_BILLION, batch, seq_len, precision, HIDDEN, LAYERS)
    return [part.bytes for part in breakdown.parts]


# Reading the author's options -------------------------------------------------------------

def read_bounds(options: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """The sliders' bounds: model size in half-billions, batch, and sequence as powers of two."""
    low = parse_count(str(options.get("min_params", PARAM_STEPS[0] * HALF_BILLION)))
    high = parse_count(str(options.get("max_params", PARAM_STEPS[1] * HALF_BILLION)))
    if low % HALF_BILLION or high % HALF_BILLION or not 0 < low < high:
        raise ValueError(f"min_params and max_params must be multiples of 0.5B with min below max, got {low:,} and {high:,}")
    batch_high = options.get("max_batch", BATCH_RANGE[1])
    if not BATCH_RANGE[0] < batch_high <= 65536:
        raise ValueError(f"max_batch must be 2-65536, got {batch_high}")
    seq = [options.get("min_seq_len", 2 ** SEQ_POWERS[0]), options.get("max_seq_len", 2 ** SEQ_POWERS[1])]
    if any(n < 2 or n & (n - 1) for n in seq) or not seq[0] < seq[1] or seq[1] > 2**22:
        raise ValueError(f"min_seq_len and max_seq_len must be powers of two with min below max (at most 4194304), got "
                         f"{seq[0]} and {seq[1]}")
    return {SIZE: (low // HALF_BILLION, high // HALF_BILLION), BATCH: (BATCH_RANGE[0], batch_high),
            SEQ: (seq[0].bit_length() - 1, seq[1].bit_length() - 1)}


def start_state(options: dict[str, Any], catalogs: dict[str, Any], bounds: dict[str, tuple[int, int]]) -> dict[str, Any]:
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
    halves = min(max(round(Fraction(params, HALF_BILLION)), bounds[SIZE][0]), bounds[SIZE][1])
    batch, seq_len = settings.get("micro_batch", 1), settings.get("seq_len", 2048)
    precision = PRECISION_ALIASES.get(settings.get("precision", "bf16"), settings.get("precision", "bf16"))
    if not bounds[BATCH][0] <= batch <= bounds[BATCH][1]:
        raise ValueError(f"micro_batch must be {bounds[BATCH][0]}-{bounds[BATCH][1]}, got {batch}")
    low, high = (2**k for k in bounds[SEQ])
    if seq_len not in [2**k for k in range(bounds[SEQ][0], bounds[SEQ][1] + 1)]:
        raise ValueError(f"seq_len must be a power of two from {low} to {high}, got {seq_len}")
    if precision not in BUDGET_PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(BUDGET_PRECISIONS)} (seed 001), got {precision!r}")
    return {SIZE: halves, BATCH: batch, SEQ: seq_len.bit_length() - 1, PRECISION: precision}


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
    bounds = read_bounds(options)
    start = start_state(options, catalogs, bounds)
    capacity, capacity_name = read_capacity(options, catalogs)
    capacity_text = f"{format_bytes(capacity)} {capacity_name}"
    seq_len = 2 ** start[SEQ]
    models = catalogs["model"]
    shown = texts(start[SIZE], start[BATCH], seq_len, start[PRECISION], capacity, capacity_text, models)
    breakdown = options.get("breakdown", True)
    data = {"start": start, "capacity": capacity, "capacityText": capacity_text, "hidden": HIDDEN, "layers": LAYERS,
            "unit": HALF_BILLION, "rules": BUDGET.encode(), "t": TEXTS | {"words": {k: v[1] for k, v in FULL_POLICY.items()}},
            "full": full_model.comparison_data(models, Config()),
            "base": full_model.run_base(Config()),
            "policies": {key: full_model.policy_inputs(policy) for key, (policy, _) in FULL_POLICY.items()},
            "precisions": list(BUDGET_PRECISIONS), "keys": KEYS,
            "link": {"words": link_notice.WORDS,
                     "keys": {**{key: link_notice.whole(*bounds[key]) for key in (SIZE, BATCH, SEQ)},
                              PRECISION: link_notice.choice(*BUDGET_PRECISIONS)}}}
    example = budget_allocator(start[SIZE] * HALF_BILLION, start[BATCH], seq_len, start[PRECISION], HIDDEN, LAYERS)
    return {"data": data, "start": start, "bounds": bounds, "url_keys": KEYS, "seq_len": seq_len,
            "capacity_name": capacity_name,
            "capacity_text": format_bytes(capacity), "breakdown": breakdown,
            "buckets": [{"id": b[0], "label": b[1], "colour": "tm-bucket-" + b[2], "formula": part.formula,
                         "note": part.simplification} for b, part in zip(BUCKETS, example.parts)],
            "texts": shown["texts"],
            "bar": bar(shown["amounts"], shown["need"], capacity, breakdown), "bytes": ",".join(map(str, shown["amounts"])),
            "need": shown["need"],
            "valuetext": {SIZE: TEXTS["valuetext_h"].format(f"{start[SIZE] / 2:.1f}"),
                          BATCH: TEXTS["valuetext_b"].format(start[BATCH]), SEQ: TEXTS["valuetext_s"].format(seq_len)}}


def bar(amounts: list[int], need: int, capacity: int, breakdown: bool) -> dict[str, Any]:
    """Geometry in percent: the stack (or one total), the capacity line, the full model's need marked on the same
    scale, and the hatched overflow from the capacity to the need when the need does not fit."""
    total = sum(amounts)
    scale = max(capacity, total, need)  # seed 001: the capacity line stays at the right edge until a bar passes it
    percent = lambda amount: f"{float(100 * Fraction(amount, scale)):.3f}"  # noqa: E731 - one formula
    parts = amounts if breakdown else [total]
    starts = [sum(parts[:i]) for i in range(len(parts))]
    end = max(total, need)
    return {"rects": [{"x": percent(s), "w": percent(a)} for s, a in zip(starts, parts)],
            "line": percent(capacity), "end": 2 * capacity > scale, "need": percent(need), "need_end": 2 * need > scale,
            "over": {"x": percent(capacity), "w": percent(end - capacity if need > capacity else 0)},
            "fits": need <= capacity}
