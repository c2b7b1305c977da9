"""The browser's rule evaluator (static/widgets/01-rules.js) against Python's (builder.model.expr): random
rules of the kind the model writes (integer inputs, sums, products, divisions, rounding, conditions, tables,
sums over their rows and sums by group, rows made from rows, the largest row and key, words)
give the same whole bytes and the same text in both."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builder.model.breakdown import whole_bytes
from builder.model.expr import (Expr, best, by, ceil, concat, each, encode, eq, evaluate, fixed, fmt, get, per_unit,
                                real, row, sym, table, top, total, when, within)
from builder.model.partrules import PartRule, RuleSet
from tests.conftest import ROOT

pytestmark = pytest.mark.browser

SYMBOLS = {"layers": 32, "hidden": 4096, "heads": 32, "tp": 4, "vocab": 128256, "zero": 0, "mode": "train"}
NUMBERS = ("layers", "hidden", "heads", "tp", "vocab", "zero")

leaves = st.one_of(st.integers(0, 70000).map(lambda n: Expr("num", Fraction(n))), st.sampled_from(NUMBERS).map(sym))


def _grow(children):
    pair = st.tuples(children, children)
    return st.one_of(
        pair.map(lambda p: p[0] + p[1]),
        pair.map(lambda p: p[0] * p[1]),
        # Divisions by a positive whole amount, as the model's are (ranks, heads, block sizes).
        st.tuples(children, st.integers(1, 4096)).map(lambda p: p[0] / p[1]),
        st.tuples(children, st.sampled_from(("tp", "heads", "layers"))).map(lambda p: p[0] // sym(p[1])),
        st.tuples(children, st.integers(1, 64)).map(lambda p: Expr("%", Expr("floor", p[0]), p[1])),
        children.map(lambda c: Expr("ceil", c)),
        st.tuples(children, children, children).map(lambda p: Expr("if", p[0] > p[1], p[1], p[2])),
        pair.map(lambda p: Expr("min", *p)),
        pair.map(lambda p: Expr("max", *p)),
        children.map(lambda c: Expr("if", Expr("==", sym("mode"), "train"), c, 0)),
        # A sum over a table whose first row is there only where its condition holds (the parameter-tensor
        # table's and the pipeline stages' form), a row field shadowing nothing and read beside a symbol.
        st.tuples(children, children, children, children).map(lambda p: total(
            table(row(p[0] > p[1], width=p[2]), row(1, width=p[3])), sym("width") * sym("tp") // sym("heads"))),
        # Sums kept apart by a field (the op lists' groups), one group read back, another with a default.
        st.tuples(children, children, children, children).map(lambda p: get(
            by(table(row(p[0] > p[1], group="mlp", width=p[2]), row(1, group="norms", width=p[3]),
                     row(p[1] > p[2], group="mlp", width=p[0])), "group", sym("width") * sym("tp")),
            "mlp", p[3]) + get(by(table(row(1, group="norms", width=p[0])), "group", sym("width")), "loss", 7)),
        # A row made from every row of a table, and tables one after another, summed (a step's live parts).
        st.tuples(children, children, children, children).map(lambda p: total(concat(
            each(table(row(p[0] > p[1], width=p[2]), row(1, width=p[3])),
                 row(sym("width") > p[0], value=sym("width") * sym("tp"))),
            table(row(1, value=p[1]))), sym("value"))),
        # The first row whose (whole) body is largest, read in its scope (a step's worst moment), or none; rows
        # often tie (the same leaf twice), and which one is first shows.
        st.tuples(children, children, children, children).map(lambda p: (lambda chosen: when(
            chosen, within(chosen, sym("tag") * 100000 + p[0]), p[3]))(
            best(table(row(p[0] > p[1], width=ceil(p[1]), tag=1), row(p[2] > 5, width=ceil(p[2]), tag=2),
                       row(1, width=ceil(p[3]), tag=3), row(1, width=ceil(p[1]), tag=4)),
                 sym("width") * sym("heads")))),
        # The first key of a mapping whose value is largest (the moment that sets a step's peak).
        st.tuples(children, children, children, children).map(lambda p: when(eq(top(by(
            table(row(1, group="mlp", width=ceil(p[0])), row(1, group="norms", width=ceil(p[1]))), "group",
            sym("width"))), "norms"), p[2], p[3])),
    )


rules = st.recursive(leaves, _grow, max_leaves=8)


@pytest.fixture(scope="module")
def rule_page(chromium):
    """A blank page with the shared helpers and the rule evaluator loaded (their names are globals there)."""
    context = chromium.new_context()
    page = context.new_page()
    page.set_content("<!doctype html><title>rules</title>")
    for name in ("00-core.js", "01-rules.js"):
        page.add_script_tag(content=(ROOT / "static" / "widgets" / name).read_text(encoding="utf-8"))
    yield page
    context.close()


def js(page, rules: list, env: dict) -> list:
    return page.evaluate("([rules, env]) => rules.map((r) => { const v = compileRule(r)(env);"
                         " return typeof v == 'string' ? v : toNumber(wholeBytes(v)); })", [rules, env])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(rules, min_size=20, max_size=20))
def test_random_rules_give_the_same_whole_bytes(rule_page, batch):
    # 60 batches of 20 rules: 1,200 random rules, one browser round trip per batch.
    expected = [whole_bytes(evaluate(rule, SYMBOLS)) for rule in batch]
    assert js(rule_page, [encode(rule) for rule in batch], SYMBOLS) == expected


# Amounts exact in binary (n / 2^k), as per-unit amounts are: both sides round the same double.
binary = st.tuples(st.integers(1, 999 * 64), st.sampled_from((1, 2, 4, 8, 16, 32, 64, 256))).map(
    lambda p: Fraction(p[0], p[1])).filter(lambda x: Fraction(1, 10000) <= x < Fraction(9995, 10))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(binary, st.integers(0, 4)), min_size=25, max_size=25))
def test_words_are_the_same(rule_page, batch):
    made = [fmt("{0} B/param, {1} ({2}), {3}", per_unit(x), fixed(x, k), sym("mode"), real(x)) for x, k in batch]
    assert js(rule_page, [encode(rule) for rule in made], SYMBOLS) == [evaluate(rule, SYMBOLS) for rule in made]


def test_a_rule_set_gives_the_same_parts(rule_page):
    rules = RuleSet(symbols={"per_gpu": sym("hidden") * sym("vocab") / sym("tp")},
                    parts=(PartRule("weights", sym("per_gpu") * 2, "", "a & b", fmt("{0} B/param", per_unit(2))),
                           PartRule("gradients", sym("per_gpu"), "", "", fmt(""), when=sym("zero"))))  # a real key: parts need names
    # The same compiled set, called with other inputs and then the first again (it reuses results by inputs).
    envs = [SYMBOLS, {**SYMBOLS, "tp": 8, "zero": 1}, SYMBOLS]
    got = rule_page.evaluate("([set, envs]) => { const priced = ruleSet(set); return envs.map((e) => priced(e)); }",
                             [json.loads(json.dumps(rules.encode())), envs])
    assert rules.encode()["reads"] == ["hidden", "tp", "vocab", "zero"]
    for env, parts_js in zip(envs, got):
        parts = rules.evaluate(env)
        assert parts_js == [[p.name, p.bytes, p.per_unit, "a &amp; b" if p.name == "weights" else "",
                             p.simplification, 0] for p in parts]
    assert [p.name for p in rules.evaluate(SYMBOLS)] == ["weights"]
    assert [p.bytes for p in rules.evaluate(envs[1])] == [4096 * 128256 // 8 * 2, 4096 * 128256 // 8]


# Exactness where doubles fall short: a framework overhead of p % of what is allocated (overheads.py: allocated x
# overhead_fraction, the fraction sent as the double p / 100 and read as its decimal, as Python reads a float) on
# hundreds of terabytes, and whole numbers a fraction away from an integer. A double within 2**-44 relative of an
# integer was once taken as that integer: 15 bytes at 2.8e14, so the calculator showed 277,887,380,423,639 bytes for
# Llama 3 70B's overhead at micro-batch 256 where Python's exact fractions give 277,887,380,423,640.
large = st.tuples(st.integers(2**30, 2**52), st.integers(1, 99), st.integers(1, 4096))


@settings(max_examples=10, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(large, min_size=30, max_size=30))
def test_large_amounts_round_as_exact_fractions(rule_page, batch):
    made = [ceil(sym("allocated") * sym("share")), sym("allocated") * sym("share"),
            (sym("allocated") * 3 + 1) / 3, Expr("%", sym("allocated"), sym("ranks")) + sym("allocated") / sym("ranks"),
            Expr("floor", sym("allocated") / sym("ranks")) * sym("ranks") - sym("allocated") / 7]
    got = rule_page.evaluate(
        "([rules, envs]) => envs.map((env) => rules.map((r) => toNumber(wholeBytes(compileRule(r)(env)))))",
        [[encode(rule) for rule in made], [{"allocated": a, "share": p / 100, "ranks": r} for a, p, r in batch]])
    want = [[whole_bytes(evaluate(rule, {"allocated": a, "share": p / 100, "ranks": r})) for rule in made]
            for a, p, r in batch]
    assert got == want


def test_the_model_data_comes_back_as_python_encoded_it(rule_page):
    """The model data travels packed (builder/widgets/packed.py: each text once, names without quotes); the script's
    `unpacked` gives back the rules Python's encode wrote, the same as packed.unpack, for the calculator's data
    (sources linked as the page links them), the teaching widgets' (numbers only) and serve's (the stage sets), once
    per data."""
    from builder.sources import default_references, html_renderer
    from builder.widgets.model_data import STAGE_SETS, model_data
    from builder.widgets.packed import pack, unpack

    # Beside the real data: negative, fractional and exponent numbers, the minus operator, texts with quotes and markup.
    made = {"parts": [["weights/x", [">=", "shard_stage", -1], ["/", 5, 1125899906842624], 0.5, 1e20,
                       ["-", "op_T2", -0.25], ["str", 'a "quoted" note & <a href="references.html#ref-x">x</a>'],
                       ["str", ""], ["str", "op_T2"]]]}
    for data in (model_data(source_html=html_renderer(default_references())), model_data(words=False, refusals=False),
                 model_data(STAGE_SETS, words=False), pack(made, {"phases": {"a": "two words"}})):
        got = rule_page.evaluate("(data) => [unpacked(data), unpacked(data) === unpacked(data)]", data)
        assert got == [unpack(data), True]
