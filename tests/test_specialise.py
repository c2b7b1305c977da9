"""builder/widgets/specialise.py: the teaching widgets' full model, specialised to the inputs their runs keep, gives
the whole model's values for every run the widgets can make. Each rule set, check and the stages are evaluated here
from the JSON, whole and specialised, in the scopes 02-model.js evaluates them in, and every derived symbol's value
and every part (name and bytes) compared; the browser tests (tests/browser/test_parity.py) check the scripts against
Python's estimate."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builder.catalog import load_models
from builder.model import Config
from builder.model.estimator import estimate_stage
from builder.model.expr import decode, derive, evaluate
from builder.model.inputs import architecture_inputs, config_inputs, run_inputs, stages
from builder.model.architecture import shape_inputs
from builder.widgets import full_model
from builder.widgets.model_data import model_data
from builder.widgets.packed import unpack
from builder.widgets.specialise import bound_names, one_valued, simplify, specialise
from builder.model.expr import Expr, sym

MODELS = load_models(Path(__file__).resolve().parent.parent / "content" / "models.toml")
BASES = {"bytes per parameter": Config(precision="bf16-mixed", optimizer="adamw"),
         "model states": Config(precision="megatron-bf16", optimizer="adamw"), "memory budget": Config()}


@lru_cache(maxsize=None)
def rules(config: Config) -> tuple[dict[str, Any], dict[str, Any]]:
    """The model data whole and specialised to `config` (as full_model.comparison_data sends it), unpacked."""
    whole = unpack(model_data(words=False, refusals=False))
    return whole, unpack(full_model.comparison_data(MODELS, config)["model"])


def evaluated(rule_set: Mapping[str, Any], env: Mapping[str, Any]) -> tuple[dict[str, Any], list[tuple[str, Any]]]:
    """A rule set's derived symbols over `env` and its parts ([name, bytes] where the condition holds)."""
    scope = derive({name: decode(rule) for name, rule in rule_set["symbols"]}, env)
    parts = [(p[0], evaluate(decode(p[2]), scope)) for p in rule_set["parts"] if evaluate(decode(p[1]), scope)]
    return scope, parts


def values(data: dict[str, Any], config: Config) -> dict[str, Any]:
    """Everything the data's rules give for one run, by where it comes from."""
    arch, sets, out = config.model, data["ruleSets"], {}
    run = run_inputs(arch, config)
    out["checks"] = [evaluate(decode(c[0]), run) for c in data["checks"] if evaluate(decode(c[0]), run)]
    out["shape checks"] = [evaluate(decode(c[0]), run) for c in data["shapeChecks"] if evaluate(decode(c[0]), run)]
    out["training"] = evaluate(decode(data["training"]), run)
    out["stages"] = evaluate(decode(data["stages"]), run)
    out["shapes"] = evaluated(sets["shapes"], shape_inputs(arch))[0]
    for stage in stages(arch, config):
        held, _ = evaluated(sets["holding"], {**run, **stage.inputs()})
        for name in ("states", "autocast", "checkpoint", "comm", "host") + (() if out["training"] else ("serving",)):
            out[name, stage] = evaluated(sets[name], held)
        conditions, _ = evaluated(sets["conditions"], held)
        activations, out["activations", stage] = evaluated(sets["activations"], conditions)
        moments, _ = evaluated(sets["moments"], activations)
        gpu, _ = estimate_stage(config, stage)
        table = [{"name": p.name, "bucket": p.name.split("/")[0], "bytes": p.bytes} for p in gpu if p.bytes]
        out["step", stage] = evaluated(sets["step"], {**moments, "parts": table})
        out["overheads", stage] = evaluated(sets["overheads"], {**config_inputs(config), "allocated": 10**10})
    return {key: (value[0] | {"parts": value[1]}) if isinstance(value, tuple) else value for key, value in out.items()}


def comparable(found: dict[str, Any], names: set[str]) -> dict[str, Any]:
    """The values of `found` with each scope cut to the symbols a specialised rule set derives (`names`)."""
    return {key: {k: v for k, v in value.items() if k in names or k == "parts"} if isinstance(value, dict) else value
            for key, value in found.items()}


runs = st.fixed_dictionaries({
    "base": st.sampled_from(sorted(BASES)), "model": st.sampled_from(sorted(MODELS)),
    "zero": st.integers(0, 3), "dp": st.sampled_from([1, 2, 8, 64]), "micro_batch": st.sampled_from([1, 4, 32]),
    "seq_len": st.sampled_from([512, 2048, 32768]),
    "precision": st.sampled_from([None, "fp32", "bf16-mixed", "fp16-mixed", "te-fp8"])})


@settings(max_examples=60, deadline=None)
@given(runs)
def test_the_specialised_rules_give_the_whole_rules_values(run):
    base = BASES[run["base"]]
    whole, special = rules(base)
    config = base.with_changes(model=MODELS[run["model"]], zero=run["zero"], dp=run["dp"],
                               micro_batch=run["micro_batch"], seq_len=run["seq_len"],
                               **({"precision": run["precision"]} if run["precision"] else {}))
    derived = {name for rule_set in special["ruleSets"].values() for name, _ in rule_set["symbols"]}
    try:
        want = values(whole, config)
    except Exception as error:  # a run the model refuses: the specialised rules refuse it the same way
        with pytest.raises(type(error)):
            values(special, config)
        return
    assert comparable(values(special, config), derived) == comparable(want, derived)


def test_the_specialised_rules_are_smaller_and_drop_what_the_widgets_never_reach():
    whole, special = rules(BASES["bytes per parameter"])
    assert len(json.dumps(special)) < 0.7 * len(json.dumps(whole))
    parts = lambda data: {p[0] for rule_set in data["ruleSets"].values() for p in rule_set["parts"]}  # noqa: E731
    for name in ("weights/lora_adapters", "checkpoint/gathered_units", "overhead/cuda_context"):  # no LoRA, no save
        assert name in parts(whole) and name not in parts(special)
    # Symbols several rule sets derive with the same rule (twins) are worked out as one: the paged optimizers' share
    # (the model states and the step), the exact-shapes test (the sharding every set derives) are constant here.
    sets_deriving = lambda data, name: [key for key, rule_set in data["ruleSets"].items()  # noqa: E731
                                        if name in dict(rule_set["symbols"])]
    for name in ("paged_share", "largest_paged", "exact_shapes"):
        assert len(sets_deriving(whole, name)) >= 2 and sets_deriving(special, name) == []


def twins(x_in_b: Any) -> dict[str, Any]:
    """Model data of three rule sets: `a` and `b` derive x (a as dp x 2, b as `x_in_b`), `b` and `c` derive y = x + 1
    with the same rule; each prices one part of x or y bytes."""
    def rule_set(symbols: list, priced: str) -> dict[str, Any]:
        return {"reads": ["dp"], "symbols": symbols, "parts": [["weights", 1, priced, *[["str", ""]] * 3, 0]]}
    y = ["y", ["+", "x", 1]]
    return {"ruleSets": {"a": rule_set([["x", ["*", "dp", 2]]], "x"), "b": rule_set([["x", x_in_b], y], "y"),
                         "c": rule_set([y], "y")}, "stages": 1, "checks": [], "shapeChecks": []}


def test_a_symbol_several_rule_sets_derive_with_the_same_rule_is_worked_out_as_one():
    priced = lambda data: {key: rule_set["parts"][0][2] for key, rule_set in data["ruleSets"].items()}  # noqa: E731
    # The same rule in a and b: x is dp x 2 = 8 everywhere, so y (b's and c's, the same rule over it) is 9.
    assert priced(specialise(twins(["*", "dp", 2]), {"dp": 4}, set())) == {"a": 8, "b": 9, "c": 9}
    # Different rules (dp x 2 in a, dp x 3 in b): x has two values, so it is kept apart, and so is y, which reads it,
    # though b and c derive y with the same rule; the rules are simplified as before, the symbols left to the browser.
    apart = specialise(twins(["*", "dp", 3]), {"dp": 4}, set())
    assert priced(apart) == {"a": "x", "b": "y", "c": "y"}
    assert apart["ruleSets"]["b"]["symbols"] == [["x", 12], ["y", ["+", "x", 1]]]


def test_one_valued_leaves_out_what_the_search_derives_inputs_fields_and_a_twin_reading_itself():
    data = twins(["*", "dp", 2])
    derived, fields = bound_names(data)
    assert one_valued(data, derived, fields) == {"x", "y"}
    assert one_valued(data, derived, {"x"}) == set()  # x an input's name too: neither it nor y, which reads it
    data["largest"] = {"start": [["y", 0]], "after": []}
    derived, fields = bound_names(data)
    assert one_valued(data, derived, fields) == {"x"}
    data = twins(["*", "dp", 2])
    for key in ("b", "c"):
        data["ruleSets"][key]["symbols"][-1] = ["y", ["+", "y", 1]]  # each set's y one more than the y it reads
    derived, fields = bound_names(data)
    assert one_valued(data, derived, fields) == {"x"}


def test_simplify_keeps_what_it_cannot_decide_and_python_s_truth():
    known = {"mode": "train", "lora_rank": 0, "tp": 2}
    rule = lambda e: simplify(e, known)  # noqa: E731
    assert repr(rule(Expr("if", Expr("==", sym("mode"), "train"), sym("x"), sym("y")))) == repr(sym("x"))
    assert repr(rule(Expr("and", Expr(">", sym("lora_rank"), 0), sym("x")))) == repr(Expr("num", 0))
    assert repr(rule(Expr("and", Expr("==", sym("mode"), "train"), sym("x")))) == repr(Expr("and", sym("x")))
    assert repr(rule(Expr("and", Expr("==", sym("mode"), "train"), Expr(">", sym("x"), 1)))) == repr(Expr(">", sym("x"), 1))
    assert repr(rule(Expr("or", Expr("==", sym("mode"), "serve"), sym("x"), Expr("==", sym("tp"), 2)))) == repr(Expr("num", 1))
    assert repr(rule(Expr("/", 1, Expr("-", sym("tp"), 2)))) == repr(Expr("/", 1, 0))  # never evaluated: left as is
    assert repr(rule(Expr("*", sym("tp"), sym("x")))) == repr(Expr("*", 2, sym("x")))
    assert repr(rule(Expr("table", Expr("row", Expr("==", sym("tp"), 1), "a", 1), Expr("row", 1, "a", 2)))) == repr(
        Expr("table", Expr("row", 1, "a", 2)))
