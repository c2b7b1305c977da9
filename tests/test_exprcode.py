"""Rules run as compiled programs (builder.model.exprcode: derived symbols, a rule set's parts, the checks) give what
the rules' own compiled functions give: the same values of the same types, and the same errors."""

from __future__ import annotations

from contextlib import contextmanager
from fractions import Fraction

import pytest

from builder.catalog import default_models
from builder.model import Config, estimate, exprcode
from builder.model.expr import (RuleError, at, best, by, ceil, concat, derive, each, eq, fixed, fmt, get, has, isin,
                                maximum, minimum, mod, ne, negate, per_unit, real, row, sym, table, top, total, when,
                                within, both, either, floor)

MODELS = default_models()


def typed(value):
    """A value with the type of every number in it, so that 2 and Fraction(2) differ."""
    if isinstance(value, dict):
        return {key: typed(v) for key, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [typed(v) for v in value]
    return type(value).__name__, value


@contextmanager
def closures(monkeypatch):
    """Within this context, every rule is evaluated by its compiled functions (no program)."""
    with monkeypatch.context() as patch:
        patch.setattr(exprcode.Lazy, "get", lambda self: None)
        yield


@contextmanager
def programs(monkeypatch):
    """Within this context, every program is made the first time it is asked for."""
    get = exprcode.Lazy.get
    with monkeypatch.context() as patch:
        patch.setattr(exprcode.Lazy, "get", lambda self: get(self) or get(self))
        yield


def both_ways(monkeypatch, run):
    """What `run()` gives with closures and with programs."""
    with closures(monkeypatch):
        reference = run()
    with programs(monkeypatch):
        compiled = run()
    return reference, compiled


RULES = {
    "n": sym("a") + sym("b") * 3 - Fraction(1, 3),
    "q": sym("a") / sym("b") + sym("a") // 2 + ceil(sym("n")) + floor(sym("n")) + mod(sym("a"), 3),
    "sums": sym("a") + sym("b") + sym("n") + 0,
    "flags": both(sym("a") > 1, either(sym("b") <= 0, negate(sym("flag"))), ne(sym("kind"), "x"), sym("a") >= 7),
    "choice": when(eq(sym("kind"), "adam"), sym("n"), when(isin(sym("kind"), "sgd", sym("other")), 2, sym("flag"))),
    "extreme": minimum(sym("a"), 3, sym("n")) + maximum(sym("b"), Fraction(1, 2)) + maximum(sym("q")),
    "entry": at(sym("sizes"), sym("kind")) + get(sym("sizes"), "none", sym("a")) + has(sym("names"), "q"),
    "rows": table(row(sym("a") > 1, name="first", bytes=sym("a") * 2), row(0, name="never", bytes=1),
                  row(1, name="second", bytes=sym("n"))),
    "all": concat(sym("rows"), each(sym("rows"), row(sym("bytes") > 1, name=sym("name"),
                                                      bytes=sym("bytes") + sym("a")))),
    "total": total(sym("all"), sym("bytes") * sym("a")),
    "grouped": by(sym("all"), "name", sym("bytes")),
    "largest": top(sym("grouped")),
    "worst": within(best(sym("all"), sym("bytes")), sym("name")),
    "words": fmt("{0} B ({1}, {2}, {3})", per_unit(sym("n")), real(sym("b")), fixed(sym("n"), 3), sym("kind")),
    "a": sym("a") * 10,  # a name derived again: the later rules read the new value
    "after": sym("a") + sym("flag"),
}
INPUTS = {"a": 7, "b": Fraction(5, 2), "flag": True, "kind": "adam", "other": "lion",
          "sizes": {"adam": 8, "sgd": 2, "lion": Fraction(1, 2)},
          "names": ["q", "k"]}


def test_a_program_gives_every_operators_values_with_their_types(monkeypatch):
    for inputs in (INPUTS, {**INPUTS, "kind": "sgd", "a": 2, "b": 0.5, "flag": False},
                   {**INPUTS, "kind": "lion", "sizes": {"lion": Fraction(1, 2), "none": 3}}):
        reference, compiled = both_ways(monkeypatch, lambda: derive(RULES, inputs))
        assert typed(compiled) == typed(reference)


@pytest.mark.parametrize("rules, inputs, message", [
    ({"x": sym("missing") + 1}, {}, "unknown symbol 'missing'"),
    ({"x": when(sym("missing"), 1, 2)}, {}, "unknown symbol 'missing'"),
    ({"x": eq(sym("missing"), "a")}, {}, "unknown symbol 'missing'"),
    ({"x": sym("later") + 1, "later": 2}, {}, "unknown symbol 'later'"),
    ({"x": total(sym("rows"), sym("y"))}, {"rows": [{"z": 1}]}, "unknown symbol 'y'"),
    ({"x": sym("a") / sym("b")}, {"a": 1, "b": 0}, "division by zero in"),
    ({"x": at(sym("t"), "fp7")}, {"t": {"fp8": 1}}, "no entry 'fp7'"),
    ({"x": fmt("{0}", sym("a") / 3)}, {"a": 1}, "is not whole"),
    ({"x": sym("a") + 1}, {"a": "text"}, "is not a number"),
    ({"x": top(by(table(), "name", 0))}, {}, "top: .* is empty"),
    ({"x": within(sym("a"), 1)}, {"a": 3}, "within: 3 is not a row"),
])
def test_a_program_raises_the_same_errors(monkeypatch, rules, inputs, message):
    for context in (closures, programs):
        with context(monkeypatch), pytest.raises(RuleError, match=message):
            derive(rules, inputs)


def test_a_deep_rule_is_called_as_its_compiled_function(monkeypatch):
    deep = sym("a")
    for _ in range(3 * exprcode.MAX_DEPTH):
        deep = deep + 1
    reference, compiled = both_ways(monkeypatch, lambda: derive({"deep": deep, "after": deep * 2}, {"a": 1}))
    assert typed(compiled) == typed(reference) and compiled["after"] == 2 * (1 + 3 * exprcode.MAX_DEPTH)


def test_estimates_and_the_validation_comparisons_are_the_same_with_programs(monkeypatch):
    from builder.validate.compare import compare_documents
    from builder.widgets.validation import load_documents

    configs = (Config(model=MODELS["llama-3-8b"], zero=3, dp=8, offload="optimizer", recompute="selective"),
               Config(model=MODELS["llama-3-8b"], lora_rank=16, pp=2, grad_accum=4, attention="eager"),
               Config(model=MODELS["mistral-7b"], mode="serve", context=32768),
               Config(model=MODELS["llama-2-7b"], precision="fp32", optimizer="sgd", tp=2, fsdp="FULL_SHARD", dp=4))
    documents = load_documents()
    reference, compiled = both_ways(monkeypatch, lambda: ([repr(estimate(config)) for config in configs],
                                                          compare_documents(documents)))
    assert compiled == reference and len(reference[1]) > 100


def test_a_program_is_made_the_second_time_its_pairs_are_derived(monkeypatch):
    monkeypatch.setattr(exprcode, "_PROGRAMS", {})
    pairs = (("x", sym("a") + 1),)
    assert exprcode.program(pairs) is None
    made = exprcode.program(pairs)
    assert made is not None and exprcode.program(pairs) is made
    env = {"a": 1}
    made(env)
    assert env == {"a": 1, "x": 2}
