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
constant false goes. A derived symbol whose rule becomes a constant is a fixed value for the rules after it, where it
has one value wherever it is read: derived in one place, or by several rule sets with the same rule (a twin, such as
the sharding that the model states, communication, host, checkpoint and step sets each derive: `one_valued`).

Nothing is approximated: for every run with those fixed inputs, the simplified rules give the values the whole
rules give (the same parts, bytes and moments), so the browser's numbers stay Python's (tests/browser/test_parity.py
runs the teaching widgets against Python's estimate of the whole model), and the rules are still the ones Python
emits: no script holds a formula.

A name is fixed only where nothing else binds it: a symbol some rule set derives, a field of a table's rows and an
input the caller lists as varying (`varying`) are never replaced. A rule set's `reads` (the inputs the browser
compares to reuse its last result) lose the fixed ones, which never change.
"""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any, Callable, Collection, Iterator, Mapping, Sequence

from builder.model.expr import Expr, RuleError, decode, encode, evaluate, lift, symbols_of

# Operators whose value is 1 or 0, so `and` of one of them is the operand itself.
_TRUTH = {"==", "!=", "<", "<=", ">", ">=", "and", "or", "not", "in", "has"}
Scalar = (int, Fraction, str)


def _is_constant(e: Expr) -> bool:
    return e.op in ("num", "str")


def _value(e: Expr) -> Any:
    return e.args[0]


def _rows(e: Expr) -> Iterator[Expr]:
    """Every node of a rule (depth first, a node before its operands, in order)."""
    pending = [e]
    while pending:
        node = pending.pop()
        yield node
        if node.op not in ("sym", "num", "str"):
            pending.extend(reversed(node.args))


def simplify(e: Expr, known: Mapping[str, Any], fold: Callable[[Expr], Expr | None] = lambda e: None) -> Expr:
    """`e` with the symbols of `known` (name -> int, Fraction or str) replaced by their values and what they decide
    worked out (the module docstring); `fold` gives a condition's constant value where it has one for every run the
    widget makes (Domain.fold), else None."""
    if e.op in _TRUTH:
        folded = fold(e)
        if folded is not None:
            return folded
    if e.op == "sym":
        name = e.args[0]
        return lift(known[name]) if name in known else e
    if e.op in ("num", "str"):
        return e
    if e.op == "row":  # field names (odd places) are plain strings
        return Expr("row", *(a if i % 2 else simplify(a, known, fold) for i, a in enumerate(e.args)))
    if e.op == "if":
        condition = simplify(e.args[0], known, fold)
        if _is_constant(condition):
            return simplify(e.args[1] if _value(condition) else e.args[2], known, fold)
        return Expr("if", condition, simplify(e.args[1], known, fold), simplify(e.args[2], known, fold))
    if e.op in ("and", "or"):
        deciding = e.op == "or"  # the operand value that decides: true for or, false for and
        kept = []
        for a in e.args:
            a = simplify(a, known, fold)
            if not _is_constant(a):
                kept.append(a)
            elif bool(_value(a)) == deciding:  # the result whatever the others are
                return lift(int(deciding))
        if not kept:
            return lift(int(not deciding))
        if len(kept) == 1 and kept[0].op in _TRUTH:
            return kept[0]
        return Expr(e.op, *kept)
    args = [simplify(a, known, fold) for a in e.args]
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


def one_valued(sent: Mapping[str, Any], derived: Mapping[str, int], apart: Collection[str],
               decoded: Callable[[Any], Expr] = decode) -> set[str]:
    """The derived symbols that have one value wherever a rule reads them, so that a value worked out for one stands
    for it everywhere: a symbol derived in one place (`derived`: bound_names' counts), and twins, a symbol several rule
    sets derive with the same rule (its JSON; each set derives it in its own scope, as the model's SHARDING is derived
    by the model states, communication, host, checkpoint and step sets), where every derived symbol that rule reads is
    one-valued too and is not the twin itself. A symbol the search derives, or derived by two rule sets with different
    rules, is not one-valued (kept apart, never simplified), nor is any name of `apart` (an input's name or a row's
    field, bound elsewhere too) nor a twin that reads one of them."""
    rules: dict[str, set[str]] = {}  # name -> its rules' JSON, one entry per distinct rule
    in_sets: dict[str, int] = {}  # name -> how many rule sets derive it
    reads: dict[str, frozenset[str]] = {}
    for rule_set in sent["ruleSets"].values():
        for name, rule in rule_set["symbols"]:
            rules.setdefault(name, set()).add(json.dumps(rule, sort_keys=True))
            in_sets[name] = in_sets.get(name, 0) + 1
            reads[name] = symbols_of(decoded(rule))
    one = {name for name, count in derived.items() if name not in apart and (
        count == 1 or count == in_sets.get(name) and len(rules[name]) == 1 and name not in reads[name])}
    while True:  # a twin reading a symbol that is not one-valued is not either, nor what reads it in turn
        lost = {name for name in one if derived[name] > 1 and any(read in derived and read not in one
                                                                   for read in reads[name])}
        if not lost:
            return one
        one -= lost


def bound_names(sent: Mapping[str, Any], decoded: Callable[[Any], Expr] = decode) -> tuple[dict[str, int], set[str]]:
    """The names a rule binds rather than reads: how many times each derived symbol is derived (over every rule set
    and the search), and the fields of every table's rows; `decoded` gives a rule's tree from its JSON."""
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
        for node in _rows(decoded(rule)):
            if node.op == "row":
                fields.update(a.args[0] for a in node.args[1::2])
    return derived, fields


class Domain:
    """The runs a widget can make, as far as its jointly varying inputs go: one mapping of their values each (the
    catalog models' shapes and counts: a teaching widget prices only the catalog model nearest a count). For each, the
    values of the known inputs, of those inputs and of every derived symbol they decide (`learn`), so that a condition
    reading only those (`fold`) is worked out for every run at once: where it comes out the same for all, it is that
    constant (a Megatron op list on a page whose runs are all Hugging Face models)."""

    def __init__(self, entries: Sequence[Mapping[str, Any]], known: Mapping[str, Any]) -> None:
        self.envs = [{**known, **entry} for entry in entries]
        self.names = set.intersection(*(set(env) for env in self.envs)) if self.envs else set()

    def values(self, e: Expr) -> list[Any] | None:
        """`e`'s value in every run of the domain, or None where one of them cannot be evaluated here (it reads a
        symbol the domain does not decide)."""
        if not self.envs or not symbols_of(e) <= self.names:
            return None
        try:
            return [evaluate(e, env) for env in self.envs]
        except (RuleError, ArithmeticError, ValueError, TypeError, KeyError, IndexError):
            return None

    def learn(self, name: str, e: Expr) -> list[Any] | None:
        """`name`'s values in the domain's runs, from its rule `e`, kept for the rules after it (None: not decided)."""
        found = self.values(e)
        if found is not None:
            for env, value in zip(self.envs, found):
                env[name] = value
            self.names.add(name)
        return found

    def fold(self, e: Expr) -> Expr | None:
        """A condition's value where every run of the domain gives the same one, else None."""
        found = self.values(e)
        if found is None or any(value != found[0] or type(value) is not type(found[0]) for value in found):
            return None
        return lift(found[0]) if isinstance(found[0], Scalar) and not isinstance(found[0], bool) else None


def specialise(sent: dict[str, Any], fixed: Mapping[str, Any], varying: set[str] | frozenset[str],
               domain: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The model data `sent` (model_data's, before packing) simplified for runs whose inputs `fixed` (name -> value
    as the run has it: ints, Fractions, text; other values are left unused) never change, while the inputs named in
    `varying` do; `domain`: the values some of the varying inputs take together, one mapping per possibility (Domain),
    when the widget's runs take no others. The search for the largest value that fits is sent as it is."""
    trees: dict[int, Expr] = {}  # id of a rule's JSON (alive in `sent` throughout) -> the rule it decodes to

    def decoded(data: Any) -> Expr:
        """The rule `data` encodes, decoded once however often it is asked for: bound_names reads every rule, the
        fixed point below reads the symbols' rules once a pass, and the result is made from every rule again (about
        a third of the CPU time of specialising a teaching widget's model, decoded each time). A tree is shared,
        never changed: simplify makes new nodes."""
        tree = trees.get(id(data))
        if tree is None:
            tree = trees[id(data)] = decode(data)
        return tree

    derived, fields = bound_names(sent, decoded)
    inputs = set(fixed) | set(varying)
    known = {name: value for name, value in fixed.items() if name not in varying and name not in derived
             and name not in fields and isinstance(value, Scalar) and not isinstance(value, bool)}
    if any(set(entry) - set(varying) for entry in domain):
        raise ValueError("specialise: a domain names varying inputs only")
    # An input some rule derives again or binds as a row's field is not decided by the domain (as not by `fixed`).
    runs = Domain([{name: value for name, value in entry.items() if name not in derived and name not in fields}
                   for entry in domain], known)
    # A one-valued derived symbol (derived in one place only, or by several rule sets with the same rule: one_valued),
    # neither an input's name nor a row's field, whose rule comes out constant is known too, and one the domain
    # decides is learnt for each of its runs (a constant where they all agree); to a fixed point, since a rule set may
    # read what a later one derives. A twin is worked out where it is first met; its other derivations give the same.
    one = one_valued(sent, derived, inputs | fields, decoded)
    grew = True
    while grew:
        grew = False
        for rule_set in sent["ruleSets"].values():
            for name, data in rule_set["symbols"]:
                if name not in one or name in known:
                    continue
                simple = simplify(decoded(data), known, runs.fold)
                if not _is_constant(simple) and name not in runs.names and runs.learn(name, simple) is not None:
                    same = runs.fold(simple)
                    simple = simple if same is None else same  # the same in every run: a constant
                    grew = True
                if _is_constant(simple):
                    known[name] = _value(simple)
                    for env in runs.envs:
                        env[name] = known[name]
                    runs.names.add(name)
                    grew = True

    def rule(data: Any) -> Any:
        return encode(simplify(decoded(data), known, runs.fold))

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


def prune(sent: dict[str, Any], read: Collection[str]) -> dict[str, Any]:
    """`sent` (specialise's) without the derived symbols nothing reads: no rule of it (a rule set's symbols and parts,
    the checks, the stages, the training test, the search) and none of `read`, the names the script looks up itself
    (model_data.READ); to a fixed point, since a symbol dropped may have been the only reader of another. Specialised
    rules drop many (the op lists' symbols of runs the widget never makes); nothing else changes."""
    rule_sets = {name: dict(rule_set) for name, rule_set in sent["ruleSets"].items()}
    search = sent.get("largest", {})
    fixed_rules = [sent["stages"], sent.get("training", 0), *(rule for check in sent["checks"] + sent["shapeChecks"]
                                                               for rule in check),
                   *(rule for key in ("start", "after") for _, rule in search.get(key, [])),
                   *(search[key] for key in ("going", "probe", "answer") if key in search)]
    reads: dict[int, frozenset[str]] = {}  # id of a rule's JSON (alive in `sent` throughout) -> the symbols it reads

    def symbols(rule: Any) -> frozenset[str]:
        if id(rule) not in reads:
            reads[id(rule)] = symbols_of(decode(rule))
        return reads[id(rule)]

    while True:
        rules = fixed_rules + [rule for rule_set in rule_sets.values()
                               for rule in [data for _, data in rule_set["symbols"]]
                               + [rule for part in rule_set["parts"] for rule in part[1:6]]]
        used = set(read).union(*(symbols(rule) for rule in rules))
        dropped = False
        for rule_set in rule_sets.values():
            kept = [symbol for symbol in rule_set["symbols"] if symbol[0] in used]
            dropped |= len(kept) < len(rule_set["symbols"])
            rule_set["symbols"] = kept
        if not dropped:
            return {**sent, "ruleSets": rule_sets}
