"""The model's rules for a widget whose runs keep most inputs fixed, with what those inputs decide worked out here
(issue 14, page weight).

A teaching widget (bytes per parameter, the memory budget) prices every run with the same settings but a few: the
catalog model, its count and the one or two inputs its controls move (full_model.comparison_data). Sent whole, the
model carries every rule those settings can never reach: serving, LoRA, offload, ZeRO-3's limits, checkpoint saves,
the op lists of every other attention and loss. `specialise` takes the model data as builder.model_data encodes it
and the inputs that stay fixed, and simplifies each rule with their values, as Python's own evaluator computes them
(expr.evaluate): a symbol with a fixed value becomes its value, an operation on constants its result (what cannot
be evaluated, such as a division by zero in a branch never taken, is left as it is), a condition that is a constant
picks its branch, `and`/`or` lose their constant operands, and a part, a table's row or a check whose condition is a
constant false goes. A derived symbol whose rule becomes a constant is a fixed value for the rules after it.

Nothing is approximated: for every run with those fixed inputs, the simplified rules give the values the whole
rules give (the same parts, bytes and moments), so the browser's numbers stay Python's (tests/browser/test_parity.py
runs the teaching widgets against Python's estimate of the whole model), and the rules are still the ones Python
emits: no script holds a formula.

A name is fixed only where nothing else binds it: a symbol some rule set derives, a field of a table's rows and an
input the caller lists as varying (`varying`) are never replaced. A rule set's `reads` (the inputs the browser
compares to reuse its last result) lose the fixed ones, which never change.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Iterator, Mapping

from builder.model.expr import Expr, RuleError, decode, encode, evaluate, lift

# Operators whose value is 1 or 0, so `and` of one of them is the operand itself.
_TRUTH = {"==", "!=", "<", "<=", ">", ">=", "and", "or", "not", "in", "has"}
Scalar = (int, Fraction, str)


def _is_constant(e: Expr) -> bool:
    return e.op in ("num", "str")


def _value(e: Expr) -> Any:
    return e.args[0]


def _rows(e: Expr) -> Iterator[Expr]:
    """Every node of a rule."""
    yield e
    if e.op not in ("sym", "num", "str"):
        for a in e.args:
            yield from _rows(a)


def simplify(e: Expr, known: Mapping[str, Any]) -> Expr:
    """`e` with the symbols of `known` (name -> int, Fraction or str) replaced by their values and what they decide
    worked out (the module docstring)."""
    if e.op == "sym":
        name = e.args[0]
        return lift(known[name]) if name in known else e
    if e.op in ("num", "str"):
        return e
    if e.op == "row":  # field names (odd places) are plain strings
        return Expr("row", *(a if i % 2 else simplify(a, known) for i, a in enumerate(e.args)))
    if e.op == "if":
        condition = simplify(e.args[0], known)
        if _is_constant(condition):
            return simplify(e.args[1] if _value(condition) else e.args[2], known)
        return Expr("if", condition, simplify(e.args[1], known), simplify(e.args[2], known))
    if e.op in ("and", "or"):
        deciding = e.op == "or"  # the operand value that decides: true for or, false for and
        kept = []
        for a in e.args:
            a = simplify(a, known)
            if not _is_constant(a):
                kept.append(a)
            elif bool(_value(a)) == deciding:  # the result whatever the others are
                return lift(int(deciding))
        if not kept:
            return lift(int(not deciding))
        if len(kept) == 1 and kept[0].op in _TRUTH:
            return kept[0]
        return Expr(e.op, *kept)
    args = [simplify(a, known) for a in e.args]
    if e.op == "table":
        args = [a for a in args if not (a.op == "row" and _is_constant(a.args[0]) and not _value(a.args[0]))]
    node = Expr(e.op, *args)
    if all(_is_constant(a) for a in args) and e.op not in ("table", "row", "concat"):
        try:
            value = evaluate(node, {})
        except (RuleError, ArithmeticError, ValueError, TypeError, KeyError, IndexError):
            return node
        if isinstance(value, Scalar) and not isinstance(value, bool):
            return lift(value)
    return node


def _false(rule: Any) -> bool:
    """Whether an encoded condition is the constant false."""
    return isinstance(rule, int) and not isinstance(rule, bool) and rule == 0 or rule == ["str", ""]


def bound_names(sent: Mapping[str, Any]) -> tuple[dict[str, int], set[str]]:
    """The names a rule binds rather than reads: how many times each derived symbol is derived (over every rule set
    and the search), and the fields of every table's rows."""
    derived: dict[str, int] = {}
    fields: set[str] = set()
    rules: list[Any] = []
    for rule_set in sent["ruleSets"].values():
        for name, rule in rule_set["symbols"]:
            derived[name] = derived.get(name, 0) + 1
            rules.append(rule)
        rules += [rule for part in rule_set["parts"] for rule in part[1:6]]
    for start_or_after in ("start", "after"):
        for name, _ in sent.get("largest", {}).get(start_or_after, []):
            derived[name] = derived.get(name, 0) + 1
    rules += [sent["stages"]] + [rule for check in sent["checks"] + sent["shapeChecks"] for rule in check]
    for rule in rules:
        for node in _rows(decode(rule)):
            if node.op == "row":
                fields.update(a.args[0] for a in node.args[1::2])
    return derived, fields


def specialise(sent: dict[str, Any], fixed: Mapping[str, Any], varying: set[str] | frozenset[str]) -> dict[str, Any]:
    """The model data `sent` (model_data's, before packing) simplified for runs whose inputs `fixed` (name -> value
    as the run has it: ints, Fractions, text; other values are left unused) never change, while the inputs named in
    `varying` do; the search for the largest value that fits is sent as it is."""
    derived, fields = bound_names(sent)
    inputs = set(fixed) | set(varying)
    known = {name: value for name, value in fixed.items() if name not in varying and name not in derived
             and name not in fields and isinstance(value, Scalar) and not isinstance(value, bool)}
    # A derived symbol derived in one place only, and neither an input's name nor a row's field, whose rule comes out
    # constant is known too; to a fixed point, since a rule set may read what a later one derives.
    grew = True
    while grew:
        grew = False
        for rule_set in sent["ruleSets"].values():
            for name, data in rule_set["symbols"]:
                if derived[name] != 1 or name in inputs or name in fields or name in known:
                    continue
                simple = simplify(decode(data), known)
                if _is_constant(simple):
                    known[name] = _value(simple)
                    grew = True

    def rule(data: Any) -> Any:
        return encode(simplify(decode(data), known))

    rule_sets = {}
    for set_name, rule_set in sent["ruleSets"].items():
        parts = []
        for name, when, *rest in rule_set["parts"]:
            when = rule(when)
            if not _false(when):
                parts.append([name, when, *(rule(r) for r in rest[:4]), *rest[4:]])
        # A fixed input read is the same for every run: the browser need not compare it to reuse a result.
        rule_sets[set_name] = {"reads": [name for name in rule_set["reads"] if name not in known], "parts": parts,
                               "symbols": [[name, rule(data)] for name, data in rule_set["symbols"]]}
    checks = {key: [[refused, rule(message)] for refused, message in ((rule(c), m) for c, m in sent[key])
                    if not _false(refused)] for key in ("checks", "shapeChecks")}
    out = {**sent, "ruleSets": rule_sets, "stages": rule(sent["stages"]), **checks}
    if "training" in sent:
        out["training"] = rule(sent["training"])
    return out
