"""The serving widget: how many concurrent requests of N tokens fit, under vLLM's or SGLang's own accounting.

Python evaluates the default state with builder.model.engines.engine_report, so the figure is complete before any
script runs, and emits what the browser needs to evaluate any other state: the engines' rule sets (encoded), the
shared model's rule sets (the weights and what a GPU of a stage holds), the architectures, every GPU's engine
defaults (engines.engine_inputs) and the reader-facing part names. static/widgets/40-serve-concurrency.js evaluates
them with 02-model.js's engineReport and holds controls, texts and drawing only; tests/browser/test_widget_serve.py
compares its numbers with this module's for random states.

The state is a flat dict of strings whose keys are the command line's words (engine, model, gpu, tp, kv_dtype) and
each engine's own flags (vLLM: max_model_len, gpu_memory_utilization; SGLang: context_length,
mem_fraction_static); it lives in the URL as <widget id>.<key>=<value>. An empty share is the engine's default.

Author options (builder/widgets/__init__.py WIDGETS): engine, model, gpu, tp, kv_dtype, tokens, title.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from builder.charts import class_bucket
from builder.model import Config
from builder.model.architecture import param_count, shape_inputs
from builder.model.breakdown import Part
from builder.model.inputs import config_inputs
from builder.model.engines import (ENGINES, EngineSettings, default_length, engine_gpu_total, engine_inputs,
                                   engine_report)
from builder.model.partnames import reader_name
from builder.model.ranges import RANGE_OF
from builder.model.units import format_bytes
from builder.widgets import link_notice
from builder.widgets.choices import sent as sent_choices
from builder.widgets.full_model import run_base
from builder.widgets.model_data import STAGE_SETS, json_value, model_data

# Each engine's own words for the widget's two engine controls (its command-line flags, in snake case), the input
# of the rules each sets, and the share's bounds (vLLM: (0, 1]; SGLang: (0, 1): engines._checked).
CONTROLS = {
    "vllm": {"length": "max_model_len", "length_input": "max_model_len", "share": "gpu_memory_utilization",
             "share_input": "gpu_memory_utilization", "share_max": "1", "share_value": "utilization",
             "tokens": "kv_cache_tokens"},
    "sglang": {"length": "context_length", "length_input": "context_len", "share": "mem_fraction_static",
               "share_input": "mem_fraction_static", "share_max": "0.99", "share_value": "fraction",
               "tokens": "max_total_num_tokens"},
}
SHARE_MIN = "0.01"
# The engines the widget offers: those with a memory share and a KV pool (Hugging Face generate has neither: its
# peak is on the Serving page and the command line).
OFFERED = {key: engine for key, engine in ENGINES.items() if key in CONTROLS}
# The bar: its top and height in px (the template draws the server's figure with the same numbers).
BAR = {"y": 2, "height": 24}
TP_CHOICES = ("1", "2", "4", "8")
KV_CHOICES = (("auto", "auto (the weights' dtype)"), ("bf16", "bf16"), ("fp16", "fp16"), ("fp8", "fp8"))
DEFAULTS = {"engine": "vllm", "model": "llama-3-8b", "gpu": "h100-80gb", "tp": "1", "kv_dtype": "auto",
            "tokens": "8192"}
# The texts, as str.format templates the script fills the same way.
TEXTS = {
    "answer": "Requests of {0} tokens that fit at once: {1}",
    "pool": "KV cache: {0}, {1} tokens; memory share {2}",
    "refused": "{0} would not start: {1}",
    "summary": "{0} served by {1} on {2}, tensor parallel {3}, KV cache {4}: {5}.",
}


def engine_of(state: dict[str, str]) -> str:
    return state["engine"] if state.get("engine") in OFFERED else DEFAULTS["engine"]


def settings_of(state: dict[str, str]) -> EngineSettings:
    """The engine's settings for a state (the share left to the engine's default when empty)."""
    engine = engine_of(state)
    words = CONTROLS[engine]
    share = state.get(words["share"], "")
    return EngineSettings(engine=engine, **{words["length"]: int(state[words["length"]])},
                          **({words["share"]: float(share)} if share else {}))


def config_of(state: dict[str, str], models: dict[str, Any]) -> Config:
    """The served run: its context the engine's own request length for the model (engine_lengths), which the engine
    holds requests to; the state's length is the engine's setting."""
    kv, arch = state.get("kv_dtype", "auto"), models[state["model"]]
    return Config(model=arch, mode="serve", tp=int(state["tp"]), kv_dtype=None if kv == "auto" else kv,
                  context=default_length(Config(model=arch, mode="serve"), engine_of(state)))


def engine_lengths(models: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Each offered engine's request length for each model where its flag is not given (engines.default_length: the
    model's own limit, GPT-2's 1,024 learned positions among them)."""
    return {name: {key: default_length(Config(model=arch, mode="serve"), name) for key, arch in models.items()}
            for name in OFFERED}


def shown_parts(parts: tuple[Part, ...], total: int) -> list[dict[str, Any]]:
    """The engine's parts as the figure lists them: reader-facing name, bytes, colour class, share of the GPU's
    total in percent (the bar's widths)."""
    return [{"name": reader_name(p.name), "bytes": p.bytes, "amount": format_bytes(p.bytes, "GiB", 2),
             "css": class_bucket(p.name.split("/")[0]), "width": f"{float(100 * Fraction(p.bytes, total)):.3f}"}
            for p in parts if p.bytes > 0]


def evaluate(state: dict[str, str], models: dict[str, Any], gpus: dict[str, Any]) -> dict[str, Any]:
    """Every text and number the figure shows for one state (what the script must reproduce)."""
    engine, gpu = engine_of(state), gpus[state["gpu"]]
    words, title = CONTROLS[engine], OFFERED[engine].title
    arch = models[state["model"]]
    name, length = arch.extra.get("display", state["model"]), int(state[words["length"]])
    kv = state.get("kv_dtype", "auto")
    try:
        total = engine_gpu_total(engine, gpu)
        report = engine_report(config_of(state, models), settings_of(state), total, gpu.id, gpu)
    except ValueError as error:
        report, refusal = None, str(error)
    else:
        refusal = "" if report.fits else report.values["error"]
    if refusal:
        answer = TEXTS["refused"].format(title, refusal)
        out = {"answer": answer, "pool": "", "requests": 0, "parts": [], "share": ""}
    else:
        v = report.values
        requests = int(v["concurrent_requests"])
        answer = TEXTS["answer"].format(f"{length:,}", f"{requests:,}")
        share = v[words["share_value"]]
        out = {"answer": answer, "requests": requests, "parts": shown_parts(report.parts, total),
               "pool": TEXTS["pool"].format(format_bytes(kv_bytes(report.parts), "GiB", 2),
                                            f"{int(v[words['tokens']]):,}", fraction_text(share)),
               "share": fraction_text(share)}
    out["summary"] = TEXTS["summary"].format(name, title, gpu.display, state["tp"], kv, answer)
    return out


KV_PART = "kv_cache"  # the part whose size the pool line gives


def kv_bytes(parts: tuple[Part, ...]) -> int:
    return next(p.bytes for p in parts if p.name == KV_PART)


def fraction_text(value: Any) -> str:
    """A share as the engines print it: 0.92, 0.854."""
    return f"{float(value):g}"


def start_state(options: dict[str, Any], catalogs: dict[str, Any]) -> dict[str, str]:
    """The state the figure starts in: the author's options over DEFAULTS."""
    state = dict(DEFAULTS) | {k: str(options[k]) for k in ("engine", "model", "gpu", "tp", "kv_dtype", "tokens")
                              if k in options}
    if state["engine"] not in OFFERED:
        raise ValueError(f"engine must be one of {', '.join(OFFERED)}, got {state['engine']!r}")
    if state["tp"] not in TP_CHOICES:
        raise ValueError(f"tp must be one of {', '.join(TP_CHOICES)}, got {state['tp']}")
    if state["kv_dtype"] not in dict(KV_CHOICES):
        raise ValueError(f"kv_dtype must be one of {', '.join(dict(KV_CHOICES))}, got {state['kv_dtype']!r}")
    tokens = int(state.pop("tokens"))
    bounds = RANGE_OF["context"]
    if not bounds.low <= tokens <= bounds.high:
        raise ValueError(f"tokens must be {bounds.low}-{bounds.high:,}, got {tokens}")
    words = CONTROLS[state["engine"]]
    state[words["length"]], state[words["share"]] = str(tokens), ""
    return state


def script_data(catalogs: dict[str, Any], start: dict[str, str]) -> dict[str, Any]:
    """What the script evaluates: the model's and the engines' rules, shapes, GPU defaults, names, texts."""
    models, gpus = catalogs["model"], catalogs["gpu"]
    return {
        # Numbers only: engineModel reads parts' bytes, never their words; the checks' refusals are shown.
        "model": model_data(STAGE_SETS, words=False),
        "engines": {key: {"rules": engine.rules.encode(words=False), "fewest": engine.fewest, "title": engine.title}
                    for key, engine in OFFERED.items()},
        "controls": CONTROLS,
        "base": run_base(Config(mode="serve")),
        "lengths": engine_lengths(models),  # a run's context under each engine (config_of)
        # Each model's weights dtype served (Config.policy's CHOSEN_WEIGHTS: a checkpoint published quantised, such
        # as DeepSeek-V3's fp8, is served in its own format), as config_of's run has it.
        "weights": {key: config_inputs(Config(model=arch, mode="serve"))["param_dtype"]
                    for key, arch in models.items()},
        "shapes": {key: shape_inputs(arch) for key, arch in models.items()},
        "parameters": {key: param_count(arch) for key, arch in models.items()},
        "names": {key: arch.extra.get("display", key) for key, arch in models.items()},
        # Each engine's start-up inputs on each GPU (the GPU total each engine starts from: engines.engine_gpu_total).
        "gpus": {key: {"name": gpu.display, "engine": {
            name: {k: json_value(v) for k, v in engine_inputs(
                EngineSettings(engine=name), engine_gpu_total(name, gpu), gpu.id, 1, gpu).items()}
            for name in OFFERED}} for key, gpu in gpus.items()},
        "parts": {rule.name: {"name": reader_name(rule.name), "css": class_bucket(rule.name.split("/")[0])}
                  for engine in OFFERED.values() for rule in engine.rules.parts},
        "kvPart": KV_PART, "t": TEXTS, "start": start, "bar": BAR,
        "link": {"words": link_notice.WORDS, "keys": link_keys(catalogs)},
    }


def link_keys(catalogs: dict[str, Any]) -> dict[str, list]:
    """What a link may set: each control's choices, and each engine's length and memory share in its own words."""
    keys = {"engine": link_notice.choice(*OFFERED), "model": link_notice.choice(*catalogs["model"]),
            "gpu": link_notice.choice(*catalogs["gpu"]), "tp": link_notice.choice(*TP_CHOICES),
            "kv_dtype": link_notice.choice(*(value for value, _ in KV_CHOICES))}
    for words in CONTROLS.values():
        keys[words["length"]] = link_notice.whole(1, int(RANGE_OF["context"].high))
        keys[words["share"]] = link_notice.fraction(SHARE_MIN, words["share_max"])
    return keys


def context(options: dict[str, Any], catalogs: dict[str, Any]) -> dict[str, Any]:
    """The server-rendered default state and the script's data (raises ValueError on bad options)."""
    models, gpus = catalogs["model"], catalogs["gpu"]
    for kind, key in (("model", "model"), ("gpu", "gpu")):
        if key in options and options[key] not in catalogs[kind]:
            raise ValueError(f"{key}: unknown {kind} {options[key]!r}")
    start = start_state(options, catalogs)
    shown = evaluate(start, models, gpus)
    # Each select's options as the page sends them (builder.widgets.choices; the controls show with the script only):
    # the chosen one and the words the data does not hold (the script names engines, models and GPUs from it).
    selects = {"engine": [(key, engine.title) for key, engine in OFFERED.items()],
               "model": [(key, arch.extra.get("display", key)) for key, arch in models.items()],
               "gpu": [(key, gpu.display) for key, gpu in gpus.items()], "tp": [(tp, tp) for tp in TP_CHOICES],
               "kv_dtype": list(KV_CHOICES)}
    named = {"engine": OFFERED, "model": models, "gpu": gpus}
    return {"data": script_data(catalogs, start), "start": start, "shown": shown,
            "choices": {key: sent_choices(tuple(pairs), start[key], named.get(key, ())) for key, pairs in selects.items()},
            "controls": CONTROLS[engine_of(start)], "share_min": SHARE_MIN,
            "tokens_max": int(RANGE_OF["context"].high), "bar": BAR}
