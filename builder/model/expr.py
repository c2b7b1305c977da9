"""The model's rules as data: a small expression language, evaluated exactly here and by the browser.

A rule (what a part of memory costs, a symbol derived from the inputs, the words a part is annotated
with) is written once, in Python, as an expression tree built with ordinary operators:

    kv_per_token = 2 * sym("stage_layers") * maximum(1, sym("kv_heads") // sym("tp")) * ...

`evaluate` computes it here with exact Fractions. `encode` turns it into JSON that
static/widgets/01-rules.js compiles and evaluates in the browser, so the calculator and every other
widget carry no formula of their own: there is one definition, evaluated twice.

JSON form: a number is a constant, a string is a symbol, a list is [operator, operand, ...];
["str", text] is a string constant and ["/", n, d] an exact fraction. Operators:
arithmetic + - * / % neg floor ceil min max; comparison == != < <= > >=; logic and or not if in;
tables at (a table's entry), has (a list's member), sum (a body summed over a table's rows,
each row's fields bound as symbols) and table (the rows ["row", condition, name, value, ...] whose
condition holds, as mappings); text fmt (str.format), bytes (a per-unit amount as '2', '0.5'
or '1.02'), real (a float as Python writes it) and fixed (f"{x:.kf}"). Logic returns 1 or 0 and,
like Python, treats 0 and "" as false.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Callable, Mapping

Value = Any  # Fraction | int | str | dict | list


def _binary(op: str, reflected: bool = False):
    """The method behind a binary operator: a node with the operands in order (swapped when reflected)."""
    def method(self: Expr, other: Any) -> Expr:
        return Expr(op, other, self) if reflected else Expr(op, self, other)
    return method


class Expr:
    """One node of a rule: an operator and its operands (other nodes). Build with sym(), the
    arithmetic operators (+ - * / // and unary -), comparisons (< <= > >=) and the functions below."""

    __slots__ = ("op", "args")

    def __init__(self, op: str, *args: Any):
        self.op = op
        self.args = args if op in _LEAVES else tuple(lift(a) for a in args)

    # a + b, b + a (reflected), ... build nodes; a // b is floor(a / b).
    __add__, __radd__ = _binary("+"), _binary("+", reflected=True)
    __sub__, __rsub__ = _binary("-"), _binary("-", reflected=True)
    __mul__, __rmul__ = _binary("*"), _binary("*", reflected=True)
    __truediv__, __rtruediv__ = _binary("/"), _binary("/", reflected=True)
    __lt__, __le__, __gt__, __ge__ = _binary("<"), _binary("<="), _binary(">"), _binary(">=")

    def __floordiv__(self, other: Any) -> Expr:
        return Expr("floor", Expr("/", self, other))

    def __rfloordiv__(self, other: Any) -> Expr:
        return Expr("floor", Expr("/", other, self))

    def __neg__(self) -> Expr:
        return Expr("neg", self)

    def __bool__(self) -> bool:
        raise TypeError("a rule has no truth value until it is evaluated: use when(), both() or either()")

    def __repr__(self) -> str:
        return f"Expr({encode(self)!r})"


_LEAVES = ("sym", "num", "str")


def lift(value: Any) -> Expr:
    """A Python constant (int, Fraction, str) as a node; nodes pass through."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, bool):
        return Expr("num", int(value))
    if isinstance(value, int):
        return Expr("num", value)
    if isinstance(value, Fraction):
        return Expr("num", value.numerator if value.denominator == 1 else value)
    if isinstance(value, str):
        return Expr("str", value)
    raise TypeError(f"a rule takes ints, Fractions, strings and rules, not {value!r}")


def sym(name: str) -> Expr:
    """An input or a derived symbol, looked up by name when the rule is evaluated."""
    return Expr("sym", name)


def mod(a: Any, b: Any) -> Expr:
    """a % b for whole numbers (b > 0): nonzero when b does not divide a."""
    return Expr("%", a, b)


def floor(x: Any) -> Expr:
    return Expr("floor", x)


def ceil(x: Any) -> Expr:
    return Expr("ceil", x)


def minimum(*xs: Any) -> Expr:
    return Expr("min", *xs)


def maximum(*xs: Any) -> Expr:
    return Expr("max", *xs)


def eq(a: Any, b: Any) -> Expr:
    return Expr("==", a, b)


def ne(a: Any, b: Any) -> Expr:
    return Expr("!=", a, b)


def both(*xs: Any) -> Expr:
    return Expr("and", *xs)


def either(*xs: Any) -> Expr:
    return Expr("or", *xs)


def negate(x: Any) -> Expr:
    return Expr("not", x)


def when(condition: Any, then: Any, otherwise: Any) -> Expr:
    """`then` where `condition` holds, else `otherwise` (only the branch taken is evaluated)."""
    return Expr("if", condition, then, otherwise)


def isin(x: Any, *choices: Any) -> Expr:
    return Expr("in", x, *choices)


def has(table: Any, x: Any) -> Expr:
    """Whether a list input holds `x` (e.g. whether the LoRA targets name a projection)."""
    return Expr("has", table, x)


def at(table: Any, key: Any) -> Expr:
    """The entry `key` of a table (a mapping input such as the bytes of each dtype)."""
    return Expr("at", table, key)


def total(rows: Any, body: Any) -> Expr:
    """The sum of `body` over a table's rows, with each row's fields bound as symbols."""
    return Expr("sum", rows, body)


def row(condition: Any, **fields: Any) -> Expr:
    """One row of a table: its fields (rules) where `condition` holds; a table leaves it out elsewhere."""
    return Expr("row", condition, *(item for name, value in fields.items() for item in (name, value)))


def table(*rows: Expr) -> Expr:
    """A table (a list of rows, each a mapping of field names to values) from rows made by row()."""
    return Expr("table", *rows)


def fmt(template: str, *args: Any) -> Expr:
    """str.format(template, *args): args are text or whole numbers (format others with per_unit or fixed)."""
    return Expr("fmt", template, *args)


def per_unit(x: Any) -> Expr:
    """A bytes-per-unit amount as the tables print it: whole numbers as they are, others to 3 significant
    digits ('2', '0.5', '1.02'); for amounts from 0.0001 up to 999."""
    return Expr("bytes", x)


def real(x: Any) -> Expr:
    """A number as Python writes a float: '0.1', '10.0', '12.5' (for values written with few digits)."""
    return Expr("real", x)


def fixed(x: Any, digits: int) -> Expr:
    """f"{x:.{digits}f}" (ties to even, as Python prints the nearest double)."""
    return Expr("fixed", x, digits)


# Evaluation ---------------------------------------------------------------------------------

class RuleError(ValueError):
    """A rule that cannot be evaluated: an unknown symbol or table entry, or text where a number goes."""


def _number(value: Value) -> int | Fraction:
    """A number as exact arithmetic wants it: whole numbers as ints (fast and exact), others as Fractions."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, Fraction)):
        return value
    if isinstance(value, float):
        return Fraction(str(value))
    raise RuleError(f"{value!r} is not a number")


def _text(value: Value) -> str:
    """A value as fmt prints it: text as is, whole numbers without a fraction."""
    if isinstance(value, str):
        return value
    number = _number(value)
    if number.denominator != 1:
        raise RuleError(f"fmt: {float(number)} is not whole; format it with per_unit() or fixed()")
    return str(number.numerator)


def bytes_text(value: Fraction) -> str:
    """A per-unit amount: '2', '0.5', '1.02' (the 'bytes' operator)."""
    if value.denominator == 1:
        return str(value.numerator)
    return f"{float(value):.3g}"


class _RowScope:
    """A row's fields over the symbols around it (looked up, not copied: a sum runs once per row)."""

    __slots__ = ("row", "env")

    def __init__(self, row: Mapping[str, Value], env: Mapping[str, Value]):
        self.row, self.env = row, env

    def __getitem__(self, name: str) -> Value:
        row = self.row
        return row[name] if name in row else self.env[name]


def _sum_rows(args: tuple[Expr, ...], env: Mapping[str, Value]) -> Fraction:
    rows, body = evaluate(args[0], env), args[1]
    return sum(_number(evaluate(body, _RowScope(row, env))) for row in rows)


def _row(args: tuple[Expr, ...], env: Mapping[str, Value]) -> dict[str, Value] | None:
    if not evaluate(args[0], env):
        return None
    return {evaluate(args[i], env): evaluate(args[i + 1], env) for i in range(1, len(args), 2)}


def _table(args: tuple[Expr, ...], env: Mapping[str, Value]) -> list[dict[str, Value]]:
    return [r for r in (evaluate(a, env) for a in args) if r is not None]


def _lookup(args: tuple[Expr, ...], env: Mapping[str, Value]) -> Value:
    table, key = evaluate(args[0], env), evaluate(args[1], env)
    try:
        return table[key]
    except (KeyError, IndexError, TypeError):
        raise RuleError(f"no entry {key!r} in {encode(args[0])!r}") from None


def _symbol(args: tuple[Any, ...], env: Mapping[str, Value]) -> Value:
    try:
        return env[args[0]]
    except KeyError:
        raise RuleError(f"unknown symbol {args[0]!r}") from None


_Op = Callable[[tuple, Mapping[str, Value]], Value]


def _numbers(args: tuple[Expr, ...], env: Mapping[str, Value]) -> list[Fraction]:
    return [_number(evaluate(a, env)) for a in args]


def _divide(args: tuple[Expr, ...], env: Mapping[str, Value]) -> Fraction:
    a, b = _numbers(args, env)
    if b == 0:
        raise RuleError(f"division by zero in {encode(Expr('/', *args))!r}")
    if type(a) is int and type(b) is int and a % b == 0:
        return a // b  # a whole quotient stays an int (exact, and fast)
    return Fraction(a) / b


OPERATORS: dict[str, _Op] = {
    "sym": _symbol,
    "num": lambda args, env: args[0],
    "str": lambda args, env: args[0],
    "+": lambda args, env: sum(_numbers(args, env)),
    "-": lambda args, env: _number(evaluate(args[0], env)) - _number(evaluate(args[1], env)),
    "*": lambda args, env: math.prod(_numbers(args, env)),
    "/": _divide,
    "neg": lambda args, env: -_number(evaluate(args[0], env)),
    "%": lambda args, env: _number(evaluate(args[0], env)) % _number(evaluate(args[1], env)),
    "floor": lambda args, env: math.floor(_number(evaluate(args[0], env))),
    "ceil": lambda args, env: math.ceil(_number(evaluate(args[0], env))),
    "min": lambda args, env: min(_numbers(args, env)),
    "max": lambda args, env: max(_numbers(args, env)),
    "==": lambda args, env: int(evaluate(args[0], env) == evaluate(args[1], env)),
    "!=": lambda args, env: int(evaluate(args[0], env) != evaluate(args[1], env)),
    "<": lambda args, env: int(_number(evaluate(args[0], env)) < _number(evaluate(args[1], env))),
    "<=": lambda args, env: int(_number(evaluate(args[0], env)) <= _number(evaluate(args[1], env))),
    ">": lambda args, env: int(_number(evaluate(args[0], env)) > _number(evaluate(args[1], env))),
    ">=": lambda args, env: int(_number(evaluate(args[0], env)) >= _number(evaluate(args[1], env))),
    "and": lambda args, env: int(all(bool(evaluate(a, env)) for a in args)),
    "or": lambda args, env: int(any(bool(evaluate(a, env)) for a in args)),
    "not": lambda args, env: int(not bool(evaluate(args[0], env))),
    "if": lambda args, env: evaluate(args[1] if bool(evaluate(args[0], env)) else args[2], env),
    "in": lambda args, env: int(evaluate(args[0], env) in [evaluate(a, env) for a in args[1:]]),
    "has": lambda args, env: int(evaluate(args[1], env) in evaluate(args[0], env)),
    "at": _lookup,
    "sum": _sum_rows,
    "row": _row,
    "table": _table,
    "fmt": lambda args, env: _text(evaluate(args[0], env)).format(*(_text(evaluate(a, env)) for a in args[1:])),
    "bytes": lambda args, env: bytes_text(_number(evaluate(args[0], env))),
    "real": lambda args, env: repr(float(_number(evaluate(args[0], env)))),
    "fixed": lambda args, env: f"{float(_number(evaluate(args[0], env))):.{int(evaluate(args[1], env))}f}",
}


def evaluate(expr: Expr, env: Mapping[str, Value]) -> Value:
    """The exact value of a rule with the symbols in `env` (numbers come back as ints or Fractions)."""
    return OPERATORS[expr.op](expr.args, env)


def derive(symbols: Mapping[str, Expr], env: Mapping[str, Value]) -> dict[str, Value]:
    """`env` with each derived symbol added, in order (a symbol may use those before it)."""
    out = dict(env)
    for name, expr in symbols.items():
        out[name] = evaluate(expr, out)
    return out


# JSON ---------------------------------------------------------------------------------------

def encode(expr: Expr) -> Any:
    """The JSON form the browser evaluates (see the module docstring)."""
    if expr.op == "sym":
        return expr.args[0]
    if expr.op == "num":
        value = Fraction(expr.args[0])
        return value.numerator if value.denominator == 1 else ["/", value.numerator, value.denominator]
    if expr.op == "str":
        return ["str", expr.args[0]]
    return [expr.op, *(encode(a) for a in expr.args)]


def decode(data: Any) -> Expr:
    """The rule a JSON form encodes (the inverse of `encode`)."""
    if isinstance(data, str):
        return sym(data)
    if isinstance(data, bool) or not isinstance(data, (int, list)) or isinstance(data, list) and not data:
        raise RuleError(f"not a rule: {data!r}")
    if isinstance(data, int):
        return lift(data)
    op, *args = data
    if op == "str":
        return Expr("str", args[0])
    if op not in OPERATORS or op in _LEAVES:
        raise RuleError(f"unknown operator {op!r}")
    return Expr(op, *(decode(a) for a in args))


def symbols_of(expr: Expr) -> set[str]:
    """Every symbol a rule reads (row fields inside a sum included)."""
    if expr.op == "sym":
        return {expr.args[0]}
    if expr.op in _LEAVES:
        return set()
    return set().union(*(symbols_of(a) for a in expr.args))
