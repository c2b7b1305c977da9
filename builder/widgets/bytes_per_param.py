"""Bytes-per-parameter widget (seed 000): parameters x a table of bytes per parameter, ZeRO-sharded.

`context(options, catalogs)` computes the default figure with builder.model.teaching.bytes_per_param
(the SEGMENTS rule) and every text the page shows; static/widgets/10-bytes-per-param.js evaluates the
same rule and fills the same texts from `data`. The segments' sums stay on show, named as sums (seed
000's 62 GiB at 3.7B is reproducible); the verdicts ("fits on", the table's fit rows, the badges and the
hatching) compare the full model's need for the same run with each GPU (builder.widgets.full_model: the
peak of a step for the catalog model nearest in size), and the widget says why the two differ.

Author options (registered in builder/widgets/__init__.py, WIDGETS):
    model=llama-3-8b       start from a catalog model's parameter count
    params=7B              start from a raw count (7e9, 350M, 124439808)
    zero=0..3, dp=8        start ZeRO stage and GPU count
    gpus=a100-80gb,...     capacity lines (ids from content/gpus.toml; usable bytes)
    presets="GPT-2:gpt2,7B:7e9"   chips: label:model-id or label:count, or just a model id
    segments="INT4 weights:0.5:3,FP16 KV cache:1.5:3"   label:bytes per param:ZeRO stage that shards it (1-3, never)
    min_params=100M max_params=70B   slider bounds
    precision=bf16-mixed optimizer=adamw   the default table's assumptions (the only ones it models)
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from builder.catalog import short_gpu_name
from builder.model import Config
from builder.model.architecture import param_count
from builder.model.assumed import nearest_row
from builder.model.expr import encode, evaluate
from builder.model.ranges import RANGE_OF
from builder.model.teaching import ADAM_SEGMENTS, SEGMENTS, ZERO_STAGES, Segment, bytes_per_param
from builder.model.units import format_bytes, parse_count
from builder.widgets import full_model, link_notice
from builder.widgets.renames import renamed

# Seed 000's chips: catalog models where the catalog has them, else the seed's round counts.
DEFAULT_PRESETS = (("GPT-2", "gpt2", "124M"), ("7B", "llama-2-7b", "7B"), ("13B", "llama-2-13b", "13B"),
                   ("70B", "llama-2-70b", "70B"))
DEFAULT_GPUS = ("rtx-4090", "a100-80gb", "h100-80gb")
DEFAULT_PARAMS = 7 * 10**9
DEFAULT_BOUNDS = (100 * 10**6, 70 * 10**9)
DEFAULT_GPU_COUNT = 8
# The parameter slider's positions: round counts, each decade's 1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9
# (seed 000's slider lands on round values; 7B and 70B are positions, not 6.98B and 70.5B).
ROUND_STEPS = (10, 12, 15, 20, 25, 30, 40, 50, 60, 70, 80, 90)
NEAREST_TICK = nearest_row("ticks", "value")
SCALE_MARGIN = Fraction(115, 100)  # the bar spans max(total, largest GPU) x 1.15 (seed 000)
# A capacity label right of the bar's middle ends at its line; px between a label and its line. Significant digits
# of a parameter count ('6.74B').
LAYOUT = {"margin": float(SCALE_MARGIN), "end_at": Fraction(1, 2), "dx": 4}
PARAM_DIGITS = 3
SUPPORTED = {"precision": ("bf16-mixed", "fp16-mixed"), "optimizer": ("adam", "adamw")}
STAGE_NAMES = ("none", "stage 1", "stage 2", "stage 3")
COLOURS = {"weights": "weights", "master": "master", "momentum": "optimizer", "variance": "optimizer tm-shade-1",
           "gradients": "gradients", "activations": "activations", "kv": "kv-cache"}
CYCLE = ("weights", "kv-cache", "gradients", "optimizer", "activations", "comm", "overhead", "other")
UNITS = ((10**9, "B", "billion"), (10**6, "M", "million"), (10**3, "K", "thousand"), (1, "", ""))
# What the widget's state may hold (its URL keys, in its options' and the command line's words: params the parameter
# count, zero the ZeRO stage, dp the GPUs), whole numbers in these bounds: the parameter count's range on every
# surface (builder.model.ranges), ZeRO's stages, and up to 4,096 GPUs.
LINK_BOUNDS = {"params": (RANGE_OF["params"].low, int(RANGE_OF["params"].high)), "zero": (0, len(STAGE_NAMES) - 1),
               "dp": (1, 4096)}
# Release 0.1.0's keys (builder.widgets.renames).
RENAMED = renamed("0.1.0", p="params", z="zero", n="dp")
# The run the full model prices (Config's defaults otherwise: micro-batch 1, SDPA attention), of RUN_TOKENS tokens: a
# sequence every catalog model takes, GPT-2's 1,024 learned positions included (a longer one is refused).
RUN_TOKENS = 1024
TEXTS = {
    "run": "{0}, {1}, micro-batch {2} × {3} tokens, {4}",
    "one": "one GPU",
    "replicated": "no ZeRO (DDP) on {0} GPUs",
    "sharded": "ZeRO stage {0} on {1} GPUs",
    "verdict": "The full model needs {0} per GPU: {1}.",
    "fits": "fits on {0} ({1} headroom)",
    "exceeds": "exceeds {0} by {1}",
    "yes": "yes, {0} left",
    "no": "no, {0} over",
    # The figure's own lines ({0}, {1}, ...: the values texts() and the script fill in, in this order).
    "zero": "ZeRO {0}",
    "ftot": "Total = {0} × {1} B = {2}",
    "fper": "Per GPU with {0} on {1} GPUs = {2}",
    "hper": "Per GPU ({0}, {1} GPUs)",
    "segment": "{0} = {1} × {2} B{3} = {4}",
    "divided": " / {0}",
    "segment_sharded": "{0} / {1} (sharded)",
    "segment_full": "{0} (full)",
    "summary": "Bytes per parameter: {0} parameters, {1}, {2} GPUs. Sum of segments {3}{4}. {5}",
    "summary_per_gpu": ", {0} per GPU",
    "valuetext": "{0} parameters",
}


# Texts shared with the script (same rules in static/widgets/10-bytes-per-param.js) -----------

def format_params(params: int) -> str:
    """'124M', '3.7B', '6.74B', '70.0B': three significant digits rounded half up, at most one
    trailing zero kept (integer arithmetic, so the script prints the same)."""
    unit, suffix, _ = next(u for u in UNITS if params >= u[0])
    decimals = max(0, PARAM_DIGITS - len(str(params // unit)))
    digits = str((2 * params * 10**decimals + unit) // (2 * unit)).rjust(decimals + 1, "0")
    if not decimals:
        return digits + suffix
    return digits[:-decimals] + "." + (digits[-decimals:].rstrip("0") or "0") + suffix


def params_words(params: int) -> str:
    """The slider's aria-valuetext: '7.0 billion parameters'."""
    short = format_params(params)
    word = next((u[2] for u in UNITS if u[1] and short.endswith(u[1])), "")
    return TEXTS["valuetext"].format(short[:-1] + " " + word if word else short)


def fit_text(need: int, gpus: list[dict[str, Any]]) -> str:
    """'fits on A100 SXM 80GB (17.9 GiB headroom); exceeds RTX 4090 24GB by 38.0 GiB'."""
    return "; ".join(TEXTS["fits"].format(g["name"], format_bytes(g["bytes"] - need)) if need <= g["bytes"]
                     else TEXTS["exceeds"].format(g["name"], format_bytes(need - g["bytes"])) for g in gpus)


def full_config(data: dict[str, Any], zero: int, gpu_count: int) -> Config:
    """The run the full model prices: the widget's precision and optimizer, ZeRO stage `zero` on `gpu_count` GPUs."""
    return Config(precision=data["precision"], optimizer=data["optimizer"], zero=zero, dp=gpu_count,
                  seq_len=RUN_TOKENS)


def run_words(config: Config) -> str:
    """TEXTS['run'] for a run: 'bf16-mixed, adamw, micro-batch 1 × 1,024 tokens, ZeRO stage 2 on 8 GPUs'."""
    where = (TEXTS["sharded"].format(config.zero, config.dp) if config.zero
             else TEXTS["replicated"].format(config.dp) if config.dp > 1 else TEXTS["one"])
    return TEXTS["run"].format(config.precision, config.optimizer, config.micro_batch, f"{config.seq_len:,}", where)


def comparisons(params: int, zero: int, gpu_count: int, data: dict[str, Any],
                models: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The full model's need on one GPU, and per GPU under ZeRO stage `zero` on `gpu_count` GPUs."""
    alone, shared = (full_model.compare(models, params, config, run_words(config))
                     for config in (full_config(data, 0, 1), full_config(data, zero, gpu_count)))
    return alone, shared


def texts(params: int, zero: int, gpu_count: int, data: dict[str, Any], models: dict[str, Any],
          compared: tuple[dict[str, Any], dict[str, Any]] | None = None) -> dict[str, str]:
    """Every text of the figure for one state, keyed as the partial's data-t attributes (`compared`: the
    state's `comparisons`, when already worked out)."""
    segments = data["segments"]
    full = figure_bytes(params, 0, 1, segments)
    per = figure_bytes(params, zero, gpu_count, segments)
    short = format_params(params)
    stage = TEXTS["zero"].format(STAGE_NAMES[zero])
    alone, shared = compared or comparisons(params, zero, gpu_count, data, models)
    shown = shared  # the state's own run: with no ZeRO on several GPUs, DDP's buckets come on top of one GPU's need
    out = {"p": short, "tot": format_bytes(sum(full)), "per": format_bytes(sum(per)),
           "ftot": TEXTS["ftot"].format(short, data["sum"], format_bytes(sum(full))),
           "fper": TEXTS["fper"].format(stage, gpu_count, format_bytes(sum(per))),
           "hper": TEXTS["hper"].format(stage, gpu_count),
           "verdict": TEXTS["verdict"].format(format_bytes(shown["need"]), fit_text(shown["need"], data["gpus"])),
           "model": shown["line"], "need1": format_bytes(alone["need"]), "needn": format_bytes(shared["need"])}
    for index, segment in enumerate(segments):
        divisor = gpu_count if sharded(segment, zero) else 1
        out[f"s{index}"] = format_bytes(full[index])
        out[f"g{index}"] = format_bytes(per[index])
        out[f"f{index}"] = TEXTS["segment"].format(segment["label"], short, segment["text"],
                                                   TEXTS["divided"].format(divisor) if divisor > 1 else "",
                                                   format_bytes(per[index]))
        out[f"c{index}"] = (TEXTS["segment_sharded"].format(segment["label"], gpu_count) if divisor > 1
                            else TEXTS["segment_full"].format(segment["label"]))
    for index, gpu in enumerate(data["gpus"]):
        out[f"v{index}"] = fit_cell(alone["need"], gpu["bytes"])
        out[f"w{index}"] = fit_cell(shared["need"], gpu["bytes"])
    out["sum"] = TEXTS["summary"].format(short, stage, gpu_count, out["tot"],
                                         TEXTS["summary_per_gpu"].format(out["per"]) if zero else "", out["verdict"])
    return out


def fit_cell(need: int, capacity: int) -> str:
    """A table cell: 'yes, 17.9 GiB left' or 'no, 3.2 GiB over'."""
    if need <= capacity:
        return TEXTS["yes"].format(format_bytes(capacity - need))
    return TEXTS["no"].format(format_bytes(need - capacity))


def sharded(segment: dict[str, Any], zero: int) -> bool:
    """Whether ZeRO stage `zero` (0-3) shards this segment (its shard stage is 1-3, or 4 for never)."""
    return zero >= segment["shard"]


def figure_bytes(params: int, zero: int, gpu_count: int, segments: list[dict[str, Any]]) -> list[int]:
    """Per-segment bytes from the teaching model's SEGMENTS rule (the figure's only source of sums)."""
    table = tuple(Segment(s["id"], s["label"], Fraction(s["num"], s["den"]),
                          ZERO_STAGES[s["shard"]] if s["shard"] < 4 else "never") for s in segments)
    return [part.bytes for part in bytes_per_param(params, table, ZERO_STAGES[zero], gpu_count).parts]


# Reading the author's options -------------------------------------------------------------

def model_params(model_id: str, catalogs: dict[str, Any]) -> int:
    """A catalog model's parameter count."""
    return param_count(catalogs["model"][model_id])


def read_presets(text: str, catalogs: dict[str, Any]) -> list[dict[str, Any]]:
    """Preset chips from 'label:model-id' / 'label:7B' / 'model-id' items, keyed 1..n. A catalog model's chip
    names the model and its exact count ('Llama 2 7B · 6.74B'), so a chip never lands on a count it did not say."""
    presets = []
    for index, item in enumerate(i.strip() for i in text.split(",") if i.strip()):
        label, _, value = item.rpartition(":")
        if value in catalogs["model"]:
            params = model_params(value, catalogs)
            count = format_params(params)
            name = label or catalogs["model"][value].extra.get("display", value)
            name = name.removesuffix(f" ({count})")
            label = name if name.endswith(count) else f"{name} · {count}"
        else:
            params = parse_count(value)
            label = label or format_params(params)
        presets.append({"label": label, "params": params, "key": str(index + 1)})
    if len(presets) > 9:
        raise ValueError("presets: at most 9 (number keys 1-9)")
    return presets


def default_presets(catalogs: dict[str, Any]) -> str:
    """The default chips as a presets= value: catalog models by id (named by the catalog), else round counts."""
    return ",".join(model if model in catalogs["model"] else f"{label}:{count}"
                    for label, model, count in DEFAULT_PRESETS)


def read_segments(text: str | None) -> list[dict[str, Any]]:
    """The segment table: the seed's mixed-precision Adam table, or 'label:bytes:stage' items."""
    if text is None:
        return [segment_data(s.id, s.label, s.bytes_per_param, s.shard_from, s.simplification, i)
                for i, s in enumerate(ADAM_SEGMENTS)]
    segments = []
    for index, item in enumerate(i.strip() for i in text.split(",") if i.strip()):
        fields = item.split(":")
        if len(fields) != 3:
            raise ValueError(f"segment {item!r}: write label:bytes per param:stage (e.g. INT4 weights:0.5:3)")
        label, amount, stage = (f.strip() for f in fields)
        try:
            per = Fraction(amount)
        except ValueError:
            raise ValueError(f"segment {item!r}: bytes per param {amount!r} is not a number") from None
        stage = {"1": "stage1", "2": "stage2", "3": "stage3", "never": "never", "none": "never"}.get(
            stage.removeprefix("stage"))
        if stage is None or per <= 0:
            raise ValueError(f"segment {item!r}: bytes must be positive and the stage 1, 2, 3 or never")
        ident = re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-") or f"segment-{index + 1}"
        segments.append(segment_data(ident, label, per, stage, "", index))
    if not segments:
        raise ValueError("segments: give at least one label:bytes:stage item")
    return segments


def segment_data(ident: str, label: str, per: Fraction, shard_from: str, note: str, index: int) -> dict[str, Any]:
    """One segment as the script reads it: exact bytes per parameter as num/den, shard stage 1-4."""
    colour = next((c for key, c in COLOURS.items() if key in ident), CYCLE[index % len(CYCLE)])
    text = f"{float(per):g}" if per.denominator in (1, 2, 4, 5, 8, 10, 20, 25, 50, 100) else f"{per}"
    return {"id": ident, "label": label, "num": per.numerator, "den": per.denominator, "text": text,
            "shard": ZERO_STAGES.index(shard_from) if shard_from != "never" else 4,
            "colour": "tm-bucket-" + colour, "note": note}


def check_assumptions(options: dict[str, Any]) -> None:
    """precision/optimizer name the default table's assumptions; other values need segments=."""
    for key, allowed in SUPPORTED.items():
        if key in options and options[key] not in allowed and "segments" not in options:
            raise ValueError(f"{key}={options[key]} is not the seed-000 table (mixed-precision Adam: "
                             f"{key} {' or '.join(allowed)}); describe it with segments=label:bytes:stage,...")


# The figure ---------------------------------------------------------------------------------

def context(options: dict[str, Any], catalogs: dict[str, Any]) -> dict[str, Any]:
    """The server-rendered default state and the script's data (raises ValueError on bad options)."""
    check_assumptions(options)
    low = parse_count(options.get("min_params", "")) if "min_params" in options else DEFAULT_BOUNDS[0]
    high = parse_count(options.get("max_params", "")) if "max_params" in options else DEFAULT_BOUNDS[1]
    if not low < high:
        raise ValueError("min_params must be below max_params")
    params = (model_params(options["model"], catalogs) if "model" in options
              else parse_count(options["params"]) if "params" in options else DEFAULT_PARAMS)
    zero, gpu_count = options.get("zero", 0), options.get("dp", DEFAULT_GPU_COUNT)
    if not (LINK_BOUNDS["zero"][0] <= zero <= LINK_BOUNDS["zero"][1]
            and LINK_BOUNDS["dp"][0] <= gpu_count <= LINK_BOUNDS["dp"][1]):
        raise ValueError("zero must be {0}-{1} and dp {2}-{3}".format(*LINK_BOUNDS["zero"], *LINK_BOUNDS["dp"]))
    gpus = [{"name": catalogs["gpu"][g].display, "bytes": catalogs["gpu"][g].usable_bytes}
            for g in options.get("gpus", [g for g in DEFAULT_GPUS if g in catalogs["gpu"]])]
    segments = read_segments(options.get("segments"))
    total_bpp = sum((Fraction(s["num"], s["den"]) for s in segments), Fraction(0))
    models = catalogs["model"]
    data = {"segments": segments, "gpus": gpus, "ticks": slider_ticks(min(low, params), max(high, params)),
            "nearestTick": encode(NEAREST_TICK), "sum": f"{float(total_bpp):g}",
            "presets": read_presets(options.get("presets") or default_presets(catalogs), catalogs),
            "precision": options.get("precision", "bf16-mixed"), "optimizer": options.get("optimizer", "adamw"),
            "rules": SEGMENTS.encode(), "t": TEXTS, "full": None, "units": UNITS,
            "stages": STAGE_NAMES, "bounds": LINK_BOUNDS,
            "layout": {**LAYOUT, "end_at": float(LAYOUT["end_at"])}, "digits": PARAM_DIGITS,
            "link": {"words": link_notice.WORDS, "keys": {key: link_notice.whole(*bounds) for key, bounds in LINK_BOUNDS.items()}}}
    data["start"] = {"params": params, "zero": zero, "dp": gpu_count}
    data["base"] = full_model.run_base(full_config(data, 0, 1))
    data["full"] = full_model.comparison_data(models, full_config(data, 0, 1))
    compared = comparisons(params, zero, gpu_count, data, models)
    needs = [c["need"] for c in compared]
    return {"data": data, "params": params, "zero": zero, "gpu_count": gpu_count,
            "step": slider_step(params, data), "words": params_words(params),
            "bytes": ",".join(map(str, figure_bytes(params, 0, 1, segments))) + ";"
                     + ",".join(map(str, figure_bytes(params, zero, gpu_count, segments))),
            "texts": texts(params, zero, gpu_count, data, models, compared), "bars": bars(params, zero, gpu_count, data, needs),
            "needs": ",".join(map(str, needs)), "notes": [s for s in segments if s["note"]], "stages": STAGE_NAMES}


def slider_ticks(low: int, high: int) -> list[dict[str, int]]:
    """The slider's positions from low to high: the round counts between them, and the bounds themselves."""
    rounds = (step * 10**power for power in range(17) for step in ROUND_STEPS)  # 1.0 to 9.0e17, x10 per decade
    values = sorted({low, high} | {value // 10 for value in rounds if low < value // 10 < high})
    return [{"value": value, "index": index} for index, value in enumerate(values)]


def slider_step(params: int, data: dict[str, Any]) -> int:
    """The slider position nearest to `params` (NEAREST_TICK, as the script finds it)."""
    return evaluate(NEAREST_TICK, {"ticks": data["ticks"], "asked": params})["index"]


def bars(params: int, zero: int, gpu_count: int, data: dict[str, Any], needs: list[int]) -> dict[str, Any]:
    """Geometry in percent of the bar width: segments of both bars, the full model's need marked on each, the
    hatching past the smallest GPU the need exceeds, capacity lines."""
    full = figure_bytes(params, 0, 1, data["segments"])
    per = figure_bytes(params, zero, gpu_count, data["segments"])
    scale = max([sum(full), *needs] + [g["bytes"] for g in data["gpus"]]) * SCALE_MARGIN
    percent = lambda amount: f"{float(100 * amount / scale):.3f}"  # noqa: E731 - one formula
    lines = [{"x": percent(g["bytes"]), "end": g["bytes"] / scale > LAYOUT["end_at"], "dx": LAYOUT["dx"],
              "name": short_gpu_name(g["name"]),
              "capacity": format_bytes(g["bytes"])} for g in data["gpus"]]
    return {"lines": lines, "rows": [bar_row(amounts, need, data["gpus"], percent)
                                     for amounts, need in zip((full, per), needs)]}


def bar_row(amounts: list[int], need: int, gpus: list[dict[str, Any]], percent) -> dict[str, Any]:
    """One bar: stacked segment rectangles, the need's mark, and hatching from the smallest GPU the need exceeds
    to the end of the bar or the need, whichever is further."""
    starts = [sum(amounts[:i]) for i in range(len(amounts))]
    end = max(sum(amounts), need)
    exceeded = [g["bytes"] for g in gpus if g["bytes"] < need]
    over = min(exceeded) if exceeded else end
    return {"rects": [{"x": percent(s), "w": percent(a)} for s, a in zip(starts, amounts)], "need": percent(need),
            "over": {"x": percent(over), "w": percent(end - over)}, "fits": not exceeded}
