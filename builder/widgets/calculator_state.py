"""The calculator's form state as the model reads it: one definition, as rules (builder.model.expr).

The form state is a flat dict of strings (the controls' names, also the URL keys). Each control has a type
(CONTROL_TYPES: a whole number, a number, a box or a choice) that turns its text into a value once, the same way
here and in the browser (`typed`; the script's `typed`). FORM_RULES then derive, from those values (symbols
`form.<key>`), every Config option the form sets, in the model's own encoding of "not set" ("" for a name,
builder.model.ranges' `unset` for a number): the controls whose key is not the option's name (an option's control
takes its key from the option table's `url`: KEY; the serving weights' dtype, WEIGHTS, is the form's own), the
"policy"/"default"/"auto" choices that leave an option unset, and the gating of the fields
that count only in some runs (DeepSpeed ZeRO-3's limits with stage 3 only; DeepSpeed's gradient buckets with a
ZeRO stage, no FSDP strategy and not Megatron-LM, implementation megatron or a Megatron precision; DDP's
gradient_as_bucket_view with no sharding; FSDP's units of their own with an FSDP strategy).
`config_from_state` builds the Config from them. RUN_RULES add what builder.model.inputs.config_inputs works out
from such a Config (the ZeRO stage a sharding choice amounts to, the precision policy's dtypes with the form's
overrides, the GPUs a run uses), so the script gets the run's inputs from the same rules
(static/widgets/30-calculator.js evaluates them with 01-rules.js); tests/test_widgets_calculator.py checks
RUN_RULES against config_inputs for many form states.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any, Mapping

from builder.model import Config
from builder.model.architecture import Architecture
from builder.model.buckets import DEFAULTS as BUCKET_OPTIONS, UNSET as BUCKET_UNSET
from builder.model.config import FSDP_STAGE, FSDP_STRATEGIES, MEGATRON_PRECISIONS
from builder.model.expr import Expr, at, both, either, eq, isin, ne, negate, sym, when
from builder.model.options import OPTION_OF
from builder.model.overrides import overridden
from builder.model.partrules import RuleSet
from builder.model.serving import CHOSEN_WEIGHTS
from builder.model.zero3 import DEFAULTS as ZERO3_OPTIONS, UNSET as ZERO3_UNSET
from builder.widgets import full_model

PREFIX = "form."
# The control of the options whose URL key is not their name (builder.model.options' `url`, the one place it is
# written): one ZeRO / FSDP choice, one choice of whose activations are counted (an implementation's op list or
# Korthikanti's formula), Megatron's sequence parallelism, the interleaved schedule's virtual stages and the framework
# overhead in percent.
KEY = {option: OPTION_OF[option].url for option in ("zero", "implementation", "sequence_parallel",
                                                     "pp_virtual_stages", "overhead_fraction")}
WEIGHTS = "weights"  # serving: the weights' dtype (the calculator's own control; training's is param_dtype)
# The serving weights' choice that leaves their dtype to the checkpoint: 16-bit, or the quantisation it is published
# in (builder.model.serving.CHOSEN_WEIGHTS, which RUN_RULES evaluate as Config.policy does).
CHECKPOINT_WEIGHTS = "checkpoint"
GPUS = "gpus_used"  # RUN_RULES' count of the GPUs a run uses
POLICIES = "policies"  # the table RUN_RULES read each precision policy's dtypes from (full_model.policy_inputs)
# Serving keeps no optimizer or gradients: the weights' dtype is the form's own, over a plain bf16 policy.
SERVED_POLICY = "bf16"
# The ZeRO-3 limits count with the form's ZeRO / FSDP set to DeepSpeed's stage 3 only; DeepSpeed ZeRO's gradient
# buckets with a ZeRO stage and no FSDP strategy; PyTorch DDP's gradient_as_bucket_view with none.
ZERO3_SHARD, BUCKET_SHARDS, DDP_SHARD = "3", ("1", "2", "3"), "0"
# A ZeRO choice of the ZeRO / FSDP control -> its stage (an FSDP strategy sets zero 0; RUN_RULES' shard_stage reads
# its stage from builder.model.config.FSDP_STAGE).
SHARD_STAGES = {str(stage): stage for stage in OPTION_OF["zero"].choices}
OVERLAP = {"default": None, "on": True, "off": False}
# The dtype controls that override the precision policy, each with the Config option it sets and the name the
# rules read the chosen value by (builder.model.inputs.config_inputs' chosen_* inputs).
CHOSEN = {"param_dtype": "chosen_param_dtype", "optimizer_state_dtype": "chosen_state_dtype",
          "exp_avg_dtype": "chosen_exp_avg_dtype", "exp_avg_sq_dtype": "chosen_exp_avg_sq_dtype"}
# How each control's text becomes a value: "count" a whole number (0 when the text is not one), "number" a real
# number (0 when not one), "box" 1 or 0, "choice" the text itself.
WHOLE = re.compile(r"-?\d+")


def form(key: str) -> Expr:
    """A control's value, as FORM_RULES read it."""
    return sym(PREFIX + key)


def lookup(mapping: Mapping[str, Any], key: Expr) -> Expr:
    """The entry of a constant mapping for `key`, as nested conditions (0 where there is none)."""
    rule: Any = 0
    for name, value in reversed(mapping.items()):
        rule = when(eq(key, name), value, rule)
    return rule


def _unless(key: str, word: str) -> Expr:
    """A choice whose `word` leaves the option unset ("")."""
    return when(eq(form(key), word), "", form(key))


TRAIN = eq(form("mode"), "train")
# DeepSpeed's ZeRO engine: a ZeRO stage in a run that is not Megatron-LM's (builder.model.buckets' DEEPSPEED_ENGINE: not
# implementation megatron, nor a Megatron precision, one whose policy keeps Megatron's grad buffer).
_DEEPSPEED = both(isin(form(KEY["zero"]), *BUCKET_SHARDS), ne(form(KEY["implementation"]), "megatron"),
                  negate(isin(form("precision"), *MEGATRON_PRECISIONS)))
_FSDP = isin(form(KEY["zero"]), *FSDP_STRATEGIES)

# Form values -> the Config options they set (by the option's name, or CHOSEN's for a policy override).
FORM_RULES = RuleSet(symbols={
    "mode": form("mode"),
    "precision": when(TRAIN, form("precision"), SERVED_POLICY),
    "chosen_param_dtype": when(TRAIN, _unless("param_dtype", "policy"), _unless(WEIGHTS, CHECKPOINT_WEIGHTS)),
    "reduce_dtype": _unless("reduce_dtype", "policy"),
    "optimizer": form("optimizer"),
    "optimizer_impl": _unless("optimizer_impl", "default"),
    "float8": _unless("float8", "none"),
    **{CHOSEN.get(option, option): _unless(option, "policy")
       for option in ("optimizer_state_dtype", "exp_avg_dtype", "exp_avg_sq_dtype", "grad_accum_dtype")},
    **{option: form(option) for option in ("micro_batch", "seq_len", "grad_accum", "recompute", "recompute_layers",
                                           "attention", "padded", "loss", "dropout", "offload_activations", "compile",
                                           "float8_filter_output", "enable_fsdp_float8_all_gather", "dp",
                                           "tp", "pp", "cp", "ep", "offload", "checkpoint_save", "lora_rank",
                                           "lora_dropout", "qlora", "kbit_prepare", "batch", "context")},
    "activation_formula": when(eq(form(KEY["implementation"]), "korthikanti"), "korthikanti", "ops"),
    "implementation": when(eq(form(KEY["implementation"]), "korthikanti"), "hf", form(KEY["implementation"])),
    "fsdp": when(_FSDP, form(KEY["zero"]), ""),
    "zero": when(_FSDP, 0, lookup(SHARD_STAGES, form(KEY["zero"]))),
    "sequence_parallel": form(KEY["sequence_parallel"]),
    "pp_virtual_stages": form(KEY["pp_virtual_stages"]),
    "pp_schedule": when(form(KEY["pp_virtual_stages"]) > 1, "interleaved", "1f1b"),
    "gradient_as_bucket_view": both(TRAIN, eq(form(KEY["zero"]), DDP_SHARD), form("gradient_as_bucket_view")),
    # torchtune's custom_sharded_layers, as the rules read it (builder.model.inputs.custom_layers_input), with an FSDP
    # strategy only.
    "custom_sharded_layers": when(both(TRAIN, _FSDP), _unless("custom_sharded_layers", "none"), ""),
    **{option: when(both(eq(form(KEY["zero"]), ZERO3_SHARD), ne(form(option), default)), form(option), ZERO3_UNSET)
       for option, default in ZERO3_OPTIONS.items()},
    **{option: when(both(_DEEPSPEED, ne(form(option), default)), form(option), BUCKET_UNSET)
       for option, default in BUCKET_OPTIONS.items()},
    "overlap_comm": when(both(_DEEPSPEED, ne(form("overlap_comm"), "default")), eq(form("overlap_comm"), "on"),
                         BUCKET_UNSET),
    "contiguous_gradients": either(form("contiguous_gradients"), negate(_DEEPSPEED)),
    "kv_dtype": _unless("kv_dtype", "auto"),
    "overhead_fraction": form(KEY["overhead_fraction"]) / 100,
}, parts=())
FORM_READS = frozenset(FORM_RULES.reads())
# Config option -> the FORM_RULES symbol that sets it.
CONFIG_SYMBOLS = {option: CHOSEN.get(option, option) for option in
                  (*(name for name in FORM_RULES.symbols if name not in CHOSEN.values()), *CHOSEN)}


def _policy(name: str) -> Expr:
    """What the run's precision policy sets for `name` (the `policies` table: full_model.policy_inputs)."""
    return at(at(sym(POLICIES), sym("precision")), name)


# What config_inputs works out from such a Config: the ZeRO stage, the policy's dtypes with the form's overrides
# (builder.model.overrides' rule, which Config.policy evaluates too),
# the parameter count of the architecture (its shape's `parameters`), and the GPUs the run uses (dp x tp x pp x cp:
# expert parallelism is carved out of data parallelism).
RUN_RULES = RuleSet(symbols={
    "shard_stage": when(sym("fsdp"), lookup(FSDP_STAGE, sym("fsdp")), sym("zero")),
    **{name: _policy(name) for name in full_model.POLICY_INPUTS},
    **{name: overridden(name, CHOSEN_WEIGHTS if name == "param_dtype" else sym(chosen), _policy(name))
       for name, chosen in CHOSEN.items()},
    "params": sym("parameters"),
    GPUS: sym("dp") * sym("tp") * sym("pp") * sym("cp"),
}, parts=())
# The run's inputs the form sets (the rest are the architecture's and the fixed inputs).
RUN_INPUTS = tuple(name for name in (*FORM_RULES.symbols, *RUN_RULES.symbols)
                   if name not in ("precision", "zero", "chosen_param_dtype", GPUS))


def typed_value(kind: str, text: str) -> Any:
    """A control's text as its value, by its type (CONTROL_TYPES: count, number, box, choice)."""
    if kind == "count":
        return int(text) if WHOLE.fullmatch(text) else 0
    if kind == "number":  # exact, as config_inputs reads a Config's fraction; 0 when not a finite number
        try:
            number = float(text)
        except ValueError:
            number = 0.0
        return Fraction(str(number)) if math.isfinite(number) else Fraction(0)
    if kind == "box":
        return int(text == "1")
    return text


def typed(state: Mapping[str, str], types: Mapping[str, str]) -> dict[str, Any]:
    """Each control's value that FORM_RULES read, keyed `form.<key>`."""
    return {PREFIX + key: typed_value(kind, state[key]) for key, kind in types.items() if PREFIX + key in FORM_READS}


def typed_values(state: Mapping[str, str], types: Mapping[str, str]) -> dict[str, Any]:
    """Each control's value in `state`, by its key (what builder.widgets.calculator_fixes' program reads as `form`)."""
    return {key: typed_value(kind, state[key]) for key, kind in types.items() if key in state}


def config_values(state: Mapping[str, str], types: Mapping[str, str]) -> dict[str, Any]:
    """The Config options a form state sets (FORM_RULES), as Config takes them (unset -> None)."""
    env = FORM_RULES.environment(typed(state, types))
    values = {}
    for option, symbol in CONFIG_SYMBOLS.items():
        value, kind = env[symbol], OPTION_OF[option]
        if kind.optional and (value == "" or value == -1):
            values[option] = None
        elif kind.type == "flag":
            values[option] = bool(value)
        elif kind.type == "fraction":
            values[option] = float(value)
        elif kind.type in ("count", "stage"):
            values[option] = int(value)
        elif kind.type == "names":
            values[option] = tuple(name for name in value.split(",") if name)
        else:
            values[option] = value
    return values


def make_config(arch: Architecture, state: Mapping[str, str], types: Mapping[str, str]) -> Config:
    """The Config of a form state with its architecture."""
    return Config(model=arch, **config_values(state, types))


def encode() -> dict[str, Any]:
    """What the script evaluates: the two rule sets (form values -> options -> run inputs) and the names it keeps."""
    return {"prefix": PREFIX, "rules": [FORM_RULES.encode(), RUN_RULES.encode()], "inputs": list(RUN_INPUTS),
            "gpus": GPUS, "policies": POLICIES}
