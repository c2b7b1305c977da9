"""The full model's number beside a teaching widget's rule of thumb: one number per question.

The two teaching widgets (bytes per parameter, seed 000; the memory budget, seed 001) keep their seeds'
simplified rules and say so. Beside them they show what the site's full model needs for the same run: the
peak of a training step on the fullest GPU, reserved parts on top (builder.model.peak.need), for the catalog
model nearest in parameter count (the teaching rules know a count, the full model needs an architecture).
Their verdicts ("fits", "exceeds by", the badge and the hatching) compare that need with capacity; the teaching
sum stays on show, named as a sum. The browser evaluates the same rules (static/widgets/02-model.js) from
`comparison_data`, and picks the nearest model with the same NEAREST rule.
"""

from __future__ import annotations

from typing import Any

from builder.model import Config
from builder.model.architecture import Architecture, param_count, shape_inputs
from builder.model.breakdown import Breakdown
from builder.model.assumed import NEAREST, catalog_rows, nearest_model
from builder.model.expr import encode
from builder.model.inputs import config_inputs
from builder.model.peak import Need, assess
from builder.model.units import format_bytes
from builder.widgets.model_data import json_value, model_data

# The inputs a precision policy sets (builder.model.inputs.config_inputs), so a widget can switch policy.
POLICY_INPUTS = ("param_dtype", "master_dtype", "grad_dtype", "optimizer_state_dtype", "activation_dtype", "autocast",
                 "recipe", "quantised_params", "exp_avg_dtype", "exp_avg_sq_dtype", "msamp", "grad_buffer")
# The line both the server and the script fill: model, its count, the run, the need, the moment, the sum.
TEXTS = {
    "line": "The full model for {0}, {1} parameters, {2}: needs {3} per GPU at the peak of a step, at the {4}; "
            "its sum of parts is {5}.",
    "fits": "fits in {0} with {1} headroom",
    "exceeds": "exceeds {0} by {1}",
}


def run_base(config: Config) -> dict[str, Any]:
    """A run's settings as the rules read them (config_inputs), JSON-ready; the script adds the architecture."""
    return {key: json_value(value) if not isinstance(value, dict) else {k: json_value(v) for k, v in value.items()}
            for key, value in config_inputs(config).items()}


def policy_inputs(precision: str) -> dict[str, Any]:
    """What a named precision policy sets, as the rules read it."""
    inputs = config_inputs(Config(precision=precision))
    return {key: inputs[key] for key in POLICY_INPUTS}


# The inputs the teaching widgets' scripts change from their `base` when they price a run (nearestModel's `changes`):
# the ZeRO stage and GPU count (10-bytes-per-param.js), the batch, the sequence and a precision policy's inputs
# (20-memory-budget.js). One list for both, so two widgets on a page send the same specialised model once.
CHANGED = ("shard_stage", "dp", "micro_batch", "seq_len", *POLICY_INPUTS)


def comparison_data(models: dict[str, Architecture], config: Config) -> dict[str, Any]:
    """What the script needs to evaluate the full model for the nearest catalog model: numbers only (the line shows
    the need, the moment and the sum, never a part's words: 03-teaching.js calls `estimate(run, false)`; the
    widgets' controls stay in range, so no refusal is shown), which sends about 40% fewer bytes gzipped. Every run
    is `config`'s inputs (the script's `base`, run_base) with a catalog model's shape, its count and inputs of CHANGED
    set, so the rules go specialised to the rest (builder.widgets.specialise)."""
    shaped = {"params", *(key for arch in models.values() for key in shape_inputs(arch))}
    runs = [{**shape_inputs(arch), "params": param_count(arch)} for arch in models.values()]
    model = model_data(words=False, refusals=False, fixed=config_inputs(config), varying=shaped | set(CHANGED),
                       domain=runs)
    return {"model": model, "catalog": catalog_rows(models), "nearest": encode(NEAREST),
            "shapes": {key: shape_inputs(arch) for key, arch in models.items()}, "t": TEXTS}


def verdict(need: int, capacity: int, capacity_text: str) -> str:
    """'fits in 80.0 GiB budget with 27.3 GiB headroom' or 'exceeds 80.0 GiB budget by 12.1 GiB'."""
    if need <= capacity:
        return TEXTS["fits"].format(capacity_text, format_bytes(capacity - need))
    return TEXTS["exceeds"].format(capacity_text, format_bytes(need - capacity))


def compare(models: dict[str, Architecture], params: int, config: Config, run_words: str) -> dict[str, Any]:
    """The full model for the catalog model nearest `params` that can take `config`'s sequence, run as `config`: its
    id, need and line."""
    key = nearest_model(models, params, config.seq_len)
    arch = models[key]
    breakdown, needed = assess(config.with_changes(model=arch))
    return {"id": key, "need": needed.bytes, "sum": breakdown.total, "breakdown": breakdown, "needed": needed,
            "line": line_text(arch, key, breakdown, needed, run_words)}


def line_text(arch: Architecture, key: str, breakdown: Breakdown, needed: Need, run_words: str) -> str:
    """TEXTS['line'] filled for one comparison."""
    return TEXTS["line"].format(arch.extra.get("display", key), f"{param_count(arch):,}", run_words,
                                format_bytes(needed.bytes), needed.peak.title, format_bytes(breakdown.total))
