"""The widgets a page may place: one registry, `WIDGETS`, imported directly, that holds for each widget everything
the rest of the build looks up by its name.

A widget is a module here with `context(options, catalogs) -> dict`: the default state computed by the Python model
(so the figure is complete before any script runs) and `data`, the JSON the script needs. builder/render.py checks a
placement's options against the widget's `options`, passes the state to its `partial` as `state` (with `state_json`
for a <script type="application/json"> block); builder/build.py bundles its `script` (static/widgets/) into the
page's script, and a widget with a script reads and writes its state in the page's URL (`?<id>.<key>=...`).
docs/AUTHORING.md lists every widget from its `summary`, `example` and each option's `help`.

To add a widget: write its module, its partial and (for an interactive one) its script, then one `Widget(...)` entry
below. Every option needs its `help` line (`python -m builder authoring-guide` refuses an option without one).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable

from builder.widgets import (bytes_per_param, calculator, exercises, memory_budget, notation, published,
                             serve_concurrency, validation, what_changed)


@dataclass(frozen=True)
class Widget:
    """One widget a page may place: its server side, its partial, its script and the options it accepts."""

    name: str  # what a placement writes: {{< widget name ... >}}
    title: str
    context: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]  # (options, catalogs) -> its state
    partial: str  # its template, under templates/
    script: str  # its script's file in static/widgets/; '': server-rendered only (no script, no URL state)
    options: dict[str, str]  # option -> kind: 'model', 'gpu', 'gpus', 'preset', 'int', 'number', 'str', 'bool'
    summary: str = ""  # what the widget shows, for docs/AUTHORING.md
    help: dict[str, str] = field(default_factory=dict)  # option -> what it sets, for docs/AUTHORING.md
    example: str = ""  # the options of a minimal placement, e.g. 'model=gpt2' (docs/AUTHORING.md, tests)
    # Its URL keys renamed since a release: old key -> [new key, release] (builder.widgets.renames), on the page as
    # data-renamed for static/widgets/00-core.js readState.
    renamed: dict[str, list[str]] = field(default_factory=dict)

    @property
    def scripted(self) -> bool:
        """True when the page loads a script for it (and its state lives in the page's URL)."""
        return bool(self.script)


PARAMS_HELP = "a raw parameter count to start from (7B, 350M, 7e9, 124439808)"
WIDGETS: dict[str, Widget] = {
    spec.name: spec
    for spec in (
        Widget("bytes-per-param", "Bytes per parameter",
               bytes_per_param.context, "partials/widget-bytes-per-param.html", "10-bytes-per-param.js",
               {"model": "model", "params": "str", "precision": "str", "optimizer": "str",
                "zero": "int", "dp": "int", "gpus": "gpus", "presets": "str", "segments": "str",
                "min_params": "str", "max_params": "str", "title": "str"},
               summary="Parameters times a table of bytes per parameter, ZeRO-sharded, against GPU capacities; "
                       "beside it the full model's need for the same run.",
               help={"model": "a catalog model whose parameter count the slider starts at",
                     "params": PARAMS_HELP,
                     "precision": "the default table's precision: bf16-mixed or fp16-mixed (anything else needs "
                                  "segments=)",
                     "optimizer": "the default table's optimizer: adamw or adam (anything else needs segments=)",
                     "zero": "the ZeRO stage to start at, 0 to 3",
                     "dp": "the number of GPUs to start at",
                     "gpus": "capacity lines: GPU ids, comma-separated",
                     "presets": "quick-pick chips, label:model-id or label:count, comma-separated "
                                "(presets=\"GPT-2:gpt2,7B:7e9\")",
                     "segments": "replace the table: label:bytes per parameter:ZeRO stage that shards it (1-3 or "
                                 "never), comma-separated (segments=\"INT4 weights:0.5:3,FP16 KV cache:1.5:3\")",
                     "min_params": "the slider's lower bound (100M)",
                     "max_params": "the slider's upper bound (70B)",
                     "title": "the heading over the widget"},
               example="model=gpt2", renamed=bytes_per_param.RENAMED),
        Widget("memory-budget", "Memory budget",
               memory_budget.context, "partials/widget-memory-budget.html", "20-memory-budget.js",
               {"preset": "preset", "model": "model", "params": "str", "micro_batch": "int", "seq_len": "int",
                "precision": "str", "gpu": "gpu", "budget": "str", "breakdown": "bool", "title": "str",
                "min_params": "str", "max_params": "str", "max_batch": "int", "min_seq_len": "int",
                "max_seq_len": "int"},
               summary="Weights, gradients, optimizer states and activations as four buckets against one "
                       "capacity, with the full model's need beside them.",
               help={"preset": "a preset whose model, params, micro_batch, seq_len and precision it starts from",
                     "model": "a catalog model to start from (its parameter count, snapped to 0.5B steps)",
                     "params": PARAMS_HELP,
                     "micro_batch": "the micro-batch to start at",
                     "seq_len": "the sequence length to start at (a power of two, 512 to 32768)",
                     "precision": "the precision to start at: fp32, bf16, fp16 or fp8 (bytes per weight)",
                     "gpu": "the capacity: this GPU's usable memory",
                     "budget": "the capacity as a size (budget=24GiB; default 80 GiB)",
                     "breakdown": "false: one total bar, no per-bucket legend",
                     "title": "the heading over the widget",
                     "min_params": "the model-size slider's lower bound (a multiple of 0.5B)",
                     "max_params": "the model-size slider's upper bound (a multiple of 0.5B)",
                     "max_batch": "the micro-batch slider's upper bound",
                     "min_seq_len": "the sequence slider's lower bound (a power of two)",
                     "max_seq_len": "the sequence slider's upper bound (a power of two)"},
               example="params=7B", renamed=memory_budget.RENAMED),
        Widget("validation", "Validation report",
               validation.context, "partials/widget-validation.html", "",
               {}, summary="Predicted against measured memory for every case in content/validation/ (the "
                       "Validation page)."),
        Widget("published-numbers", "Published numbers against the model",
               published.context, "partials/widget-published-numbers.html", "",
               {}, summary="Every published number the model is pinned to (papers' tables, documentation, engine "
                       "logs), with the model's prediction, the error and the tolerance (the Validation page)."),
        Widget("exercises", "Every page's exercises",
               exercises.context, "partials/widget-exercises.html", "",
               {}, summary="Every page's exercises by topic, each linking back to its page (the Exercises page)."),
        Widget("what-changed", "What changed",
               what_changed.context, "partials/widget-what-changed.html", "",
               {}, summary="Version to version, the key configurations' published numbers (content/releases/), "
                       "which moved, by how much and why, and what the current model moves since the latest "
                       "release (the What changed page)."),
        Widget("notation", "Notation",
               notation.context, "partials/widget-notation.html", "",
               {}, summary="The one symbol table, builder/model/notation.py (the Notation page)."),
        Widget("serve-concurrency", "Requests that fit under an inference engine",
               serve_concurrency.context, "partials/widget-serve-concurrency.html", "40-serve-concurrency.js",
               {"engine": "str", "model": "model", "gpu": "gpu", "tp": "int", "kv_dtype": "str", "tokens": "int",
                "title": "str"},
               summary="How many concurrent requests of N tokens fit under vLLM's or SGLang's own start-up "
                       "accounting, with model, GPU, tensor parallelism, KV dtype and memory share controls, and "
                       "the engine's division of the GPU.",
               help={"engine": "the engine to start with: vllm or sglang",
                     "model": "the catalog model to start with",
                     "gpu": "the GPU to start with",
                     "tp": "the tensor-parallel GPUs to start with: 1, 2, 4 or 8",
                     "kv_dtype": "the KV cache dtype to start with: auto, bf16, fp16 or fp8",
                     "tokens": "the tokens per request to start with (--max-model-len or --context-length)",
                     "title": "the heading over the widget"},
               example="model=llama-3-8b"),
        Widget("calculator", "Memory calculator",
               calculator.context, "partials/widget-calculator.html", "30-calculator.js",
               {"preset": "preset", "model": "model", "gpus": "gpus", "gpu": "gpu"},
               summary="Every knob of the memory model in one form: chart, parts table, what fits on which GPU.",
               help={"preset": "a preset the form starts from",
                     "model": "a catalog model the form starts from (over the preset's)",
                     "gpus": "the GPUs compared in the fits-on list, comma-separated",
                     "gpu": "the GPU the form starts with"},
               # A model whose positions hold the form's default sequence (GPT-2's 1,024 do not: 2,048 is refused).
               example="model=llama-3-8b", renamed=calculator.RENAMED),
    )
}


def widget_context(name: str, options: dict[str, Any], catalogs: dict[str, Any]) -> dict[str, Any]:
    """The widget's server-side state."""
    return WIDGETS[name].context(options, catalogs)


def script_widget(filename: str) -> str | None:
    """The widget whose script is static/widgets/`filename`; None: a file shared by every widget."""
    return next((widget.name for widget in WIDGETS.values() if widget.script == filename), None)


def to_json(value: Any) -> str:
    """Compact, deterministic JSON safe to embed in a <script type="application/json"> block."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
