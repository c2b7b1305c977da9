"""The rule language (builder.model.expr) and rule sets (builder.model.partrules): exact evaluation,
JSON round trips, clear errors, and the serving rules pinned to published KV-cache sizes."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from builder.catalog import default_models
from builder.model import Config, estimate
from builder.model.architecture import Architecture
from builder.model.expr import (RuleError, best, by, ceil, concat, decode, derive, each, encode, eq, evaluate, fixed,
                                fmt, isin, maximum, minimum, per_unit, row, sym, symbols_of, table, top, total, when,
                                within)
from builder.model.inputs import rule_inputs, stages
from builder.model.serving import SERVING

MODELS = default_models()
# OPT-13B (Zhang et al. 2022, Table 1): 40 layers, hidden 5120, 40 heads.
OPT_13B = Architecture(name="opt-13b", layers=40, hidden=5120, heads=40, vocab=50272, ffn=20480, mlp="gelu",
                       norm="layernorm", positions="learned", max_positions=2048)


def serving_env(arch: Architecture, **settings) -> dict:
    """The serving rule set's symbols for a single-GPU run of `arch`."""
    config = Config(model=arch, mode="serve", **settings)
    return SERVING.environment(rule_inputs(arch, config, stages(arch, config)[0]))


def test_kv_cache_per_token_is_the_vllm_papers_opt_13b_figure():
    # Kwon et al. 2023 (vLLM), section 3: "the KV cache of a single token demands 800 KB of space,
    # calculated as 2 (key and value vectors) x 5120 (hidden state size) x 40 (number of layers) x 2
    # (bytes per FP16)" = 819,200 bytes.
    assert serving_env(OPT_13B, param_dtype="fp16")["kv_per_token"] == 819_200


def test_kv_cache_per_token_follows_grouped_query_attention():
    # Llama 3 8B (config.json: 32 layers, 8 KV heads of 128): 2 x 32 x 8 x 128 x 2 B = 131,072 B = 128 KiB per
    # token in bf16, a quarter of Llama 2 7B's 512 KiB (32 KV heads), as Meta's GQA ratio 32:8 says.
    assert serving_env(MODELS["llama-3-8b"])["kv_per_token"] == 128 * 1024
    assert serving_env(MODELS["llama-2-7b"])["kv_per_token"] == 512 * 1024
    # Tensor parallelism 16 > 8 KV heads: each rank keeps one head (replicated), not half of one.
    assert serving_env(MODELS["llama-3-8b"], tp=16)["kv_heads_per_gpu"] == 1


def test_sliding_window_caps_the_cached_tokens():
    # Mistral 7B v0.1 (Jiang et al. 2023, section 2): a 4096-token window, so a 32K context caches 4096 tokens.
    env = serving_env(MODELS["mistral-7b"], context=32768)
    assert env["kv_tokens"] == 4096
    breakdown = estimate(Config(model=MODELS["mistral-7b"], mode="serve", context=32768))
    assert breakdown.part("kv_cache").bytes == env["kv_per_token"] * 4096
    assert breakdown.part("kv_cache").simplification == "sliding window: keeps the last 4096 tokens"


def test_evaluation_is_exact():
    # QLoRA's double-quantised constants (Dettmers et al. 2023, section 3): 8/64 + 32/(64 x 256) bits per
    # parameter = 0.127 bits, exactly 1/64 + 4/16384 bytes.
    constants = Fraction(1, 64) + Fraction(4, 64 * 256)
    assert evaluate(sym("n") * (Fraction(1, 64) + Fraction(4, 64 * 256)), {"n": 16384}) == 16384 * constants
    assert evaluate(ceil(sym("v") / sym("t")), {"v": 128256, "t": 3}) == 42752
    assert evaluate(sym("v") // sym("t"), {"v": 7, "t": 2}) == 3
    assert evaluate(minimum(3, sym("x"), 5), {"x": 4}) == 3 and evaluate(maximum(3, sym("x")), {"x": 4}) == 4


def test_conditions_evaluate_only_the_branch_taken():
    # The branch not taken may read a symbol that does not exist (a dense model has no expert width).
    rule = when(sym("experts"), sym("expert_ffn"), sym("ffn"))
    assert evaluate(rule, {"experts": 0, "ffn": 11008}) == 11008
    assert evaluate(isin(sym("o"), "adam", "adamw"), {"o": "adamw"}) == 1
    assert evaluate(eq(sym("o"), "sgd"), {"o": "adamw"}) == 0


def test_tables_and_sums():
    rows = [{"rows_": 4096, "cols": 4096}, {"rows_": 11008, "cols": 4096}]
    assert evaluate(total(sym("tensors"), sym("rows_") + sym("cols")), {"tensors": rows}) == 8192 + 15104
    assert symbols_of(total(sym("tensors"), sym("rows_"))) == {"tensors", "rows_"}


def test_rows_made_from_rows_and_the_largest():
    """each/concat (a step's live parts), best/within (its worst moment inside a layer) and top (its peak)."""
    parts = [{"name": "weights", "bytes": 10}, {"name": "gradients", "bytes": 30}, {"name": "optimizer", "bytes": 30}]
    doubled = each(sym("parts"), row(sym("bytes") > 10, name=sym("name"), bytes=sym("bytes") * 2))
    assert evaluate(doubled, {"parts": parts}) == [{"name": "gradients", "bytes": 60},
                                                   {"name": "optimizer", "bytes": 60}]
    assert evaluate(total(concat(doubled, table(row(1, bytes=5))), sym("bytes")), {"parts": parts}) == 125
    first = best(sym("parts"), sym("bytes"))
    assert evaluate(within(first, sym("name")), {"parts": parts}) == "gradients"  # the first of two largest
    assert evaluate(best(table(), 1), {}) is None
    assert evaluate(top(by(sym("parts"), "name", sym("bytes"))), {"parts": parts}) == "gradients"
    with pytest.raises(RuleError, match="top: .* is empty"):
        evaluate(top(by(table(), "name", 0)), {})


def test_constants_in_comparisons_branches_and_extremes_keep_exact_values():
    """A number constant beside a symbol is read when the rule is compiled (builder.model.expr _comparison, _extreme,
    _if): the values stay exact and the same (int or Fraction as written), on either side."""
    half = Fraction(1, 2)
    assert [evaluate(rule, {"x": 2}) for rule in (sym("x") > 1, 3 > sym("x"), sym("x") >= 2, sym("x") < half,
                                                  sym("x") <= 2)] == [1, 1, 1, 0, 1]
    assert evaluate(maximum(half, sym("x")), {"x": Fraction(1, 4)}) == half
    assert type(evaluate(maximum(sym("x"), 2), {"x": Fraction(4, 2)})) is Fraction  # the first of two largest
    assert evaluate(minimum(sym("x"), 1), {"x": True}) == 1 and evaluate(sym("x") - half, {"x": 1.5}) == 1
    assert evaluate(when(sym("a") > 1, 7, sym("b")), {"a": 2}) == 7  # the branch not taken reads nothing
    assert evaluate(when(sym("a") > 1, sym("b"), "none"), {"a": 0}) == "none"


def test_a_row_reads_its_fields_over_the_symbols_around_it_and_unknown_names_are_named():
    rows = [{"x": 1, "w": 10}, {"x": 2}]
    assert evaluate(total(sym("rows"), sym("x") * sym("w")), {"rows": rows, "w": 3}) == 10 + 6
    for rule, env in ((total(sym("rows"), sym("y")), {"rows": rows}), (sym("y") + 1, {}), (when(sym("a"), 1, 2), {})):
        with pytest.raises(RuleError, match="unknown symbol"):
            evaluate(rule, env)
    with pytest.raises(RuleError, match="unknown symbol 'later'"):
        derive({"first": sym("later") + 1, "later": 2}, {})


def test_words():
    assert evaluate(fmt("{0} B/token ({1})", per_unit(sym("x")), "bf16"), {"x": 131072}) == "131072 B/token (bf16)"
    assert evaluate(per_unit(Fraction(260, 256)), {}) == "1.02"
    assert evaluate(per_unit(Fraction(1, 2)), {}) == "0.5"
    assert evaluate(fixed(Fraction(1, 64) + Fraction(4, 16384), 4), {}) == "0.0159"


def test_json_round_trip():
    rule = when(sym("a") >= 2, ceil(sym("b") / 3) * Fraction(1, 2), fmt("{0}", 7))
    data = json.loads(json.dumps(encode(rule)))
    assert data == ["if", [">=", "a", 2], ["*", ["ceil", ["/", "b", 3]], ["/", 1, 2]], ["fmt", ["str", "{0}"], 7]]
    assert encode(decode(data)) == data


def test_errors_name_what_is_wrong():
    with pytest.raises(RuleError, match="unknown symbol 'hidden'"):
        evaluate(sym("hidden") * 2, {})
    with pytest.raises(RuleError, match="is not whole"):
        evaluate(fmt("{0}", sym("x") / 3), {"x": 1})
    with pytest.raises(RuleError, match="no entry 'fp7'"):
        from builder.model.expr import at
        evaluate(at(sym("t"), "fp7"), {"t": {"fp8": 1}})
    with pytest.raises(RuleError, match="unknown operator 'pow'"):
        decode(["pow", 2, 3])
    with pytest.raises(TypeError, match="no truth value"):
        bool(sym("x") > 1)


def test_every_rule_reads_only_inputs_and_symbols_derived_before_it():
    # A misspelt symbol in a branch that is rarely taken would only fail for a rare configuration: check every
    # rule of every set against rule_inputs' names (with `allocated` for the overheads and the table rows'
    # fields inside sums), and every check likewise.
    from builder.model.checks import CHECKS
    from builder.widgets.model_data import RULE_SETS

    arch = MODELS["llama-3-8b"]
    config = Config(model=arch)
    from builder.model.step import TRANSIENTS

    fields = {"group", "dim0", "rest", "count", "in_block", "bytes", "core", "grad", "position",
              # the step's rows: a GPU's parts, a moment inside a layer, a group's change, a moment of the step
              "name", "bucket", "phase", "op", "live", "temporaries", "made", "first_freed", "part", "delta",
              "allocated"}
    inputs = set(rule_inputs(arch, config, stages(arch, config)[0])) | {"allocated"} | fields
    # Saved activations are worked out on top of the op lists' conditions, the instants inside a layer on top of
    # both, the moments of a step on top of all three with the GPU's parts.
    on_top = {"activations": ("conditions",), "moments": ("conditions", "activations"),
              "step": ("conditions", "activations", "moments")}
    for set_name, rules in RULE_SETS.items():
        known = inputs | ({"parts"} if set_name == "step" else set())
        for below in on_top.get(set_name, ()):
            known |= set(RULE_SETS[below].symbols)
        for name, rule in rules.symbols.items():
            assert symbols_of(rule) <= known, (set_name, name, symbols_of(rule) - known)
            known.add(name)
        extra = [part for rules in TRANSIENTS.values() for part in rules] if set_name == "step" else []
        for part in [*rules.parts, *extra]:
            for field in ("when", "bytes", "formula", "source", "per_unit", "note", "sharded_by"):
                assert symbols_of(getattr(part, field)) <= known, (set_name, part.name, field)
    for check in CHECKS:
        assert symbols_of(check.refused) | symbols_of(check.message) <= inputs


@pytest.mark.parametrize("settings, message", [
    # Llama 3 8B has 32 query heads and 8 KV heads (config.json): TP 3 divides neither.
    ({"tp": 3}, "tp: 3 does not divide the 32 attention heads / 8 KV heads of llama-3-8b"),
    # TP 16 > 8 KV heads is allowed (each rank keeps one KV head, replicated), as Megatron and vLLM do.
    ({"tp": 16, "dp": 1}, None),
    ({"pp": 33}, "pp: 33 stages exceed the 32 layers of llama-3-8b"),
    ({"overhead_fraction": 12.5}, "overhead_fraction: must be a fraction between 0 and 10, got 12.5"),
    ({"fsdp": "HYBRID_SHARD", "dp": 12}, "fsdp_shard_group: the shard group (8 ranks) must divide dp x cp = 12"),
    ({"micro_batch": 0}, "micro_batch: must be at least 1, got 0"),
])
def test_configuration_checks_are_rules_with_one_line_reasons(settings, message):
    from builder.model.checks import first_refusal
    from builder.model.config import validate_config
    from builder.model.inputs import architecture_inputs, config_inputs

    config = Config(model=MODELS["llama-3-8b"], **settings)
    assert first_refusal({**architecture_inputs(config.model), **config_inputs(config)}) == message
    if message:
        with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)") + "$"):
            validate_config(config)
    else:
        validate_config(config)


def test_a_configurations_inputs_are_a_fresh_dict_each_time_with_its_own_values():
    """config_inputs is worked out once per configuration (an estimate asks several times) but hands out a dict a
    caller may change without changing the next one's."""
    from builder.model.inputs import config_inputs

    first = config_inputs(Config(micro_batch=2))
    first["micro_batch"] = 99
    again = config_inputs(Config(micro_batch=2))
    assert again is not first and again["micro_batch"] == 2 and again["dp"] == 1
    assert config_inputs(Config(micro_batch=3))["micro_batch"] == 3
    assert config_inputs(Config(precision="fp32"))["param_dtype"] == "fp32"


def test_an_estimate_without_words_has_the_same_parts_and_numbers_and_no_words():
    """estimate(config, words=False), what the Validation page's comparisons read: every part, byte, sharding,
    transient flag and rate of the full estimate (host parts and pipeline stages included), without the words."""
    from dataclasses import replace

    configs = (Config(model=MODELS["llama-3-8b"], zero=3, dp=8, offload="optimizer", recompute="selective"),
               Config(model=MODELS["llama-3-8b"], lora_rank=16, pp=2, grad_accum=4, attention="eager"),
               Config(model=MODELS["mistral-7b"], mode="serve", context=32768))
    for config in configs:
        full, numbers = estimate(config), estimate(config, words=False)
        blank = dict(formula="", source="", per_unit="", simplification="")
        assert numbers.parts == tuple(replace(p, **blank) for p in full.parts) and len(full.parts) >= 3
        assert numbers.host_parts == tuple(replace(p, **blank) for p in full.host_parts)
        assert (numbers.total, numbers.params, numbers.notes, numbers.where) == (full.total, full.params, full.notes, {})
        assert all(p.source for p in full.parts)
    assert estimate(configs[0]).host_parts  # an offloaded run keeps host parts
