"""Derived symbols compiled to one Python function: the program `derive` runs (builder.model.expr).

`derive` works out a list of (name, rule) pairs in order, each rule reading the inputs and the symbols before it. Run
as the rules' own compiled functions (expr.compiled), every operator is a Python call and every symbol a dictionary
lookup. Here the whole list becomes the source of one function instead: each rule one Python expression with its
operators written inline, each derived symbol a local variable as well as its entry in the environment, a body over a
table's rows a lambda of the row's scope, and the `_number` check (expr._number) left out where an operand is a
number already (the result of arithmetic, a comparison, or a derived symbol that is one). The operations and their
order are the compiled functions' (the table operators are the same functions of expr), so the values are the same,
to the type: the same ints and Fractions, texts, rows and errors. `get`, and an operator nested deeper than MAX_DEPTH,
call the rule's compiled function.

A program is made the second time the same pairs are derived (`program`): a list derived once is not worth compiling.
The same writer makes the program of guarded groups of rules (`guarded`): a rule set's parts, each evaluated where its
condition holds (builder.model.partrules), and the configuration checks, up to the first that refuses
(builder.model.checks).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Callable, Iterable, Mapping

from builder.model import expr as rules
from builder.model.expr import Expr

MAX_DEPTH = 40  # operators nested deeper than this are called as compiled functions (Python's parser limits nesting)
ARITHMETIC = {"+": " + ", "-": " - ", "*": " * ", "%": " % "}
COMPARISONS = {"<": " < ", "<=": " <= ", ">": " > ", ">=": " >= "}
# Operators with a body worked out in each row's scope: (the function of expr that runs it, how many operands come
# before the body, whether it always gives a number). The body becomes a lambda of the row's scope.
SCOPED = {"sum": ("_summed", 1, True), "by": ("_sums_by", 2, False), "each": ("_table_of", 1, False),
          "best": ("_first_largest", 1, False), "within": ("_within_row", 1, False)}
# expr's functions a program calls, by the names it calls them.
HELPERS = {"N": rules._number, "TEXT": rules._text, "QUOTIENT": rules._quotient, "ENTRY": rules._entry,
           "TOP": rules._top_key, "FLOOR": math.floor, "CEIL": math.ceil, "BYTES": rules.bytes_text,
           "REAL": rules._real_text, "FIXED": rules._fixed_text, "HAS": rules._member_of, "SCOPE": rules._scope,
           **{name: getattr(rules, name) for name, _, _ in SCOPED.values()}}


class _Writer:
    """The source of one program and the objects it names (helpers, constants, nodes, compiled functions)."""

    def __init__(self) -> None:
        self.names: dict[str, Any] = dict(HELPERS)
        self.local: dict[str, tuple[str, bool]] = {}  # derived symbol -> (local variable, whether a number)
        self.scopes = 0  # row scopes named so far (each body's own variable)

    def constant(self, value: Any) -> str:
        """A name the program reads `value` by."""
        name = f"K{len(self.names)}"
        self.names[name] = value
        return name

    def value(self, node: Expr, env: str, depth: int) -> str:
        """The node's value."""
        return self.code(node, env, depth)[0]

    def number(self, node: Expr, env: str, depth: int) -> str:
        """The node's value as expr._number gives it."""
        code, numeric = self.code(node, env, depth)
        return code if numeric else f"N({code})"

    def code(self, node: Expr, env: str, depth: int) -> tuple[str, bool]:
        """(Python expression, whether its value is always an int or a Fraction) for `node`, with the symbols in the
        variable `env`: the program's environment (whose derived symbols are locals too) or a row's scope."""
        op, args = node.op, node.args
        if op == "sym":
            local = self.local.get(args[0]) if env == "env" else None  # in a row's scope a field may hide it
            return local or (f"{env}[{args[0]!r}]", False)
        if op in ("num", "str"):
            value = args[0]
            numeric = op == "num" and type(value) in (int, Fraction)
            return (f"({value!r})" if type(value) in (int, str) else self.constant(value)), numeric
        if depth > MAX_DEPTH or op not in WRITTEN:  # get's default is evaluated only where the entry is missing
            return f"{self.constant(rules.compiled(node))}({env})", False
        return WRITTEN[op](self, node, env, depth + 1)

    def program(self, pairs: list[tuple[str, Expr]]) -> Callable[[dict], None]:
        """The function that adds each derived symbol to the environment it is given, in order."""
        lines = ["def program(env):"]
        for index, (name, node) in enumerate(pairs):
            code, numeric = self.code(node, "env", 0)
            lines.append(f"    v{index} = env[{name!r}] = {code}")
            self.local[name] = (f"v{index}", numeric)
        return self.made(lines + ["    return None"], f"deriving {pairs[0][0]}.." if pairs else "deriving nothing")

    def guarded(self, groups: list[tuple[Expr, tuple[Expr, ...]]], first: bool) -> Callable[[Mapping], list]:
        """The function that gives (index, [values]) for each group whose guard holds, in order: the group's rules
        evaluated, in order, only where its guard holds; `first`: for the first such group only."""
        lines = ["def program(env):", "    out = []"]
        for index, (guard, rules_) in enumerate(groups):
            values = "".join(f"{self.value(node, 'env', 0)}, " for node in rules_)
            lines += [f"    if {self.value(guard, 'env', 0)}:", f"        out.append(({index}, [{values}]))"]
            if first:
                lines.append("        return out")
        return self.made(lines + ["    return out"], f"{len(groups)} guarded groups")

    def made(self, lines: list[str], what: str) -> Callable:
        """The function `lines` define, compiled under a file name of its own ('<rules 12: deriving op_s..>'): a
        profiler keys functions by file, line and name, so programs sharing one name would be reported as one,
        the others' time lost (pstats keeps one entry)."""
        global _MADE
        _MADE += 1
        exec(compile("\n".join(lines), f"<rules {_MADE}: {what}>", "exec"), self.names)
        return self.names["program"]


_MADE = 0  # programs made so far in this process (each one's file name: _Writer.made)


def _scoped(w: _Writer, node: Expr, env: str, depth: int) -> tuple[str, bool]:
    function, before, numeric = SCOPED[node.op]
    w.scopes += 1
    scope = f"s{w.scopes}"
    if node.op == "sum":  # expr._summed written out: the body inline, over each row's scope
        rows, body = node.args
        return (f"sum([{w.number(body, scope, depth)} for r{w.scopes} in {w.value(rows, env, depth)} "
                f"for {scope} in [SCOPE(r{w.scopes}, {env})]])"), True
    operands = [w.value(a, env, depth) for a in node.args[:before]]
    if node.op == "by":  # by(rows, field, body) runs as _sums_by(field, rows, ...): the field is evaluated first
        operands.reverse()
    return f"{function}({', '.join(operands)}, lambda {scope}: {w.value(node.args[before], scope, depth)}, {env})", \
        numeric


def _arithmetic(w: _Writer, node: Expr, env: str, depth: int) -> tuple[str, bool]:
    if not node.args:  # sum() and math.prod() of nothing
        return ("(0)" if node.op == "+" else "(1)"), True
    return "(" + ARITHMETIC[node.op].join(w.number(a, env, depth) for a in node.args) + ")", True


def _comparison(w: _Writer, node: Expr, env: str, depth: int) -> tuple[str, bool]:
    a, b = (w.number(x, env, depth) for x in node.args)
    return f"(1 if {a}{COMPARISONS[node.op]}{b} else 0)", True


def _logic(w: _Writer, node: Expr, env: str, depth: int) -> tuple[str, bool]:
    if not node.args:
        return ("(1)" if node.op == "and" else "(0)"), True
    return f"(1 if ({f' {node.op} '.join(w.value(a, env, depth) for a in node.args)}) else 0)", True


def _if(w: _Writer, node: Expr, env: str, depth: int) -> tuple[str, bool]:
    (condition, _), then, otherwise = (w.code(a, env, depth) for a in node.args)
    return f"({then[0]} if {condition} else {otherwise[0]})", then[1] and otherwise[1]


def _member(w: _Writer, node: Expr, env: str, depth: int) -> tuple[str, bool]:
    x, choices = w.value(node.args[0], env, depth), node.args[1:]
    if all(a.op in ("str", "num") for a in choices):
        return f"int({x} in {w.constant(tuple(a.args[0] for a in choices))})", True
    return f"int({x} in [{', '.join(w.value(a, env, depth) for a in choices)}])", True


def _row(w: _Writer, node: Expr, env: str, depth: int) -> tuple[str, bool]:
    args = node.args
    fields = ", ".join(f"{name.args[0]!r}: {w.value(value, env, depth)}" for name, value in zip(args[1::2], args[2::2]))
    return f"({{{fields}}} if {w.value(args[0], env, depth)} else None)", False


def _table(w: _Writer, node: Expr, env: str, depth: int) -> tuple[str, bool]:
    made = "".join(f"{w.value(a, env, depth)}, " for a in node.args)
    return f"[r for r in ({made}) if r is not None]", False


def _fmt(w: _Writer, node: Expr, env: str, depth: int) -> tuple[str, bool]:
    texts = [f"TEXT({w.value(a, env, depth)})" for a in node.args]
    return f"{texts[0]}.format({', '.join(texts[1:])})", False


def _call(function: str, numbers: int, numeric: bool, node_last: bool = False):
    """An operator written as a call of `function` on its operands (the first `numbers` of them as numbers), and the
    node's first operand (the table an error names) after them when `node_last`."""
    def write(w: _Writer, node: Expr, env: str, depth: int) -> tuple[str, bool]:
        operands = [w.number(a, env, depth) if i < numbers else w.value(a, env, depth)
                    for i, a in enumerate(node.args)]
        if node_last:
            operands.append(w.constant(node.args[0]))
        return f"{function}({', '.join(operands)})", numeric
    return write


def _quotient(w: _Writer, node: Expr, env: str, depth: int) -> tuple[str, bool]:
    a, b = (w.number(x, env, depth) for x in node.args)
    return f"QUOTIENT({a}, {b}, {w.constant(node)})", True


def _extreme(w: _Writer, node: Expr, env: str, depth: int) -> tuple[str, bool]:
    numbers = [w.number(a, env, depth) for a in node.args]
    return (f"{node.op}({', '.join(numbers)})" if len(numbers) != 1 else f"({numbers[0]})"), True


WRITTEN: dict[str, Callable[[_Writer, Expr, str, int], tuple[str, bool]]] = {
    **{op: _arithmetic for op in ARITHMETIC}, **{op: _comparison for op in COMPARISONS},
    **{op: _scoped for op in SCOPED},
    "/": _quotient,
    "neg": lambda w, node, env, depth: (f"(-{w.number(node.args[0], env, depth)})", True),
    "floor": _call("FLOOR", 1, True), "ceil": _call("CEIL", 1, True),
    "min": _extreme, "max": _extreme,
    "==": lambda w, node, env, depth: (f"int({w.value(node.args[0], env, depth)} == "
                                       f"{w.value(node.args[1], env, depth)})", True),
    "!=": lambda w, node, env, depth: (f"int({w.value(node.args[0], env, depth)} != "
                                       f"{w.value(node.args[1], env, depth)})", True),
    "and": _logic, "or": _logic,
    "not": lambda w, node, env, depth: (f"(0 if {w.value(node.args[0], env, depth)} else 1)", True),
    "if": _if, "in": _member, "has": _call("HAS", 0, True),
    "at": _call("ENTRY", 0, False, node_last=True), "top": _call("TOP", 0, False, node_last=True),
    "row": _row, "table": _table,
    "concat": lambda w, node, env, depth: (f"[{', '.join('*' + w.value(a, env, depth) for a in node.args)}]", False),
    "fmt": _fmt, "bytes": _call("BYTES", 1, False), "real": _call("REAL", 1, False), "fixed": _call("FIXED", 1, False),
}

class Lazy:
    """A program made the second time it is asked for (`get`; None before): rules evaluated once are not worth
    compiling."""

    __slots__ = ("make", "asked", "program")

    def __init__(self, make: Callable[[], Callable | None]) -> None:
        self.make, self.asked, self.program = make, 0, None

    def get(self) -> Callable | None:
        if self.program is None:
            self.asked += 1
            if self.asked < 2:
                return None
            self.program = self.make() or _CLOSURES
        return self.program if self.program is not _CLOSURES else None


_CLOSURES = object()  # rules left to the compiled functions (a plain value among them: they fail as those fail)
_PROGRAMS: dict[tuple, Lazy] = {}  # derived (name, rule) pairs -> their program
MAX_PROGRAMS = 1024  # lists remembered at most (a caller making new rules on every call must not grow it for ever)


def run(program: Callable, env: Mapping) -> Any:
    """program(env), a symbol the environment lacks (a KeyError) raised as expr.evaluate raises it."""
    try:
        return program(env)
    except KeyError as error:
        raise rules._unknown(error.args[0]) from None


def rules_only(nodes: Iterable[Any]) -> bool:
    """Whether every one is a rule (else the compiled functions evaluate them, and fail as they do)."""
    return all(type(node) is Expr for node in nodes)


def program(pairs: tuple[tuple[str, Expr], ...]) -> Callable[[dict], None] | None:
    """The program of derived (name, rule) pairs (`_Writer.program`), made the second time they are asked for."""
    lazy = _PROGRAMS.get(pairs)
    if lazy is None:
        lazy = derived(pairs)
        if len(_PROGRAMS) < MAX_PROGRAMS:
            _PROGRAMS[pairs] = lazy
    return lazy.get()


def derived(pairs: tuple[tuple[str, Expr], ...]) -> Lazy:
    """The program of derived (name, rule) pairs (`_Writer.program`), for a caller that keeps it (a rule set)."""
    return Lazy(lambda: _Writer().program(list(pairs)) if rules_only(rule for _, rule in pairs) else None)


def guarded(groups: list[tuple[Expr, tuple[Expr, ...]]], first: bool = False) -> Lazy:
    """The program of guarded groups of rules (`_Writer.guarded`), made the second time it is asked for."""
    return Lazy(lambda: _Writer().guarded(groups, first)
                if rules_only(node for guard, rules_ in groups for node in (guard, *rules_)) else None)
