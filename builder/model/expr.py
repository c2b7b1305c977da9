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
tables at (a table's entry), get (an entry, or a default where there is none), has (a list's member),
sum (a body summed over a table's rows, each row's fields bound as symbols), by (the same sums kept apart
by a field's value, as a mapping in first-seen order), table (the rows ["row", condition, name, value,
...] whose condition holds, as mappings; a row's field names are plain strings, not symbols), each (a row
made from every row of a table, in its scope, where the row's condition holds), concat (tables one after
another), best (the first row of a table whose body is largest; none for an empty table), within (a body
in one row's scope) and top (the first key of a mapping whose value is largest); text fmt
(str.format), bytes (a per-unit amount as '2', '0.5' or '1.02'), real (a float as Python writes it) and
fixed (f"{x:.kf}"). Logic returns 1 or 0 and, like Python, treats 0 and "" as false.
"""

from __future__ import annotations

import math
import operator
from fractions import Fraction
from operator import itemgetter
from typing import Any, Callable, Iterable, Mapping

Value = Any  # Fraction | int | str | dict | list


def _binary(op: str, reflected: bool = False):
    """The method behind a binary operator: a node with the operands in order (swapped when reflected)."""
    def method(self: Expr, other: Any) -> Expr:
        return Expr(op, other, self) if reflected else Expr(op, self, other)
    return method


class Expr:
    """One node of a rule: an operator and its operands (other nodes). Build with sym(), the
    arithmetic operators (+ - * / // and unary -), comparisons (< <= > >=) and the functions below."""

    __slots__ = ("op", "args", "_fn", "_symbols")

    def __init__(self, op: str, *args: Any):
        self.op = op
        self.args = args if op in _LEAVES else tuple([a if type(a) is Expr else lift(a) for a in args])
        self._fn: Callable | None = None  # the compiled rule, made on first evaluation

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
        return Expr("num", exact(value))
    if isinstance(value, str):
        return Expr("str", value)
    raise TypeError(f"a rule takes ints, Fractions, strings and rules, not {value!r}")


def exact(value: Any) -> Any:
    """A number as the rules keep it: a whole Fraction as its int (as `lift` writes a constant), anything else as it
    is. The same value; arithmetic on ints is several times quicker than on Fractions, and a Fraction times a
    Fraction stays one even when whole (bf16's Fraction(2) bytes made every sum of a layer's tensors Fraction sums)."""
    return value.numerator if type(value) is Fraction and value.denominator == 1 else value


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


def get(table: Any, key: Any, default: Any) -> Expr:
    """The entry `key` of a mapping, or `default` where it has none."""
    return Expr("get", table, key, default)


def total(rows: Any, body: Any) -> Expr:
    """The sum of `body` over a table's rows, with each row's fields bound as symbols."""
    return Expr("sum", rows, body)


def by(rows: Any, field: str, body: Any) -> Expr:
    """`total` kept apart by the value of a row's `field`: a mapping from each value (in the order the rows
    first show it) to the sum of `body` over the rows that have it."""
    return Expr("by", rows, field, body)


def each(rows: Any, made: Expr) -> Expr:
    """The table of `made` (a row()) worked out in the scope of every row of `rows` where its condition holds."""
    if made.op != "row":
        raise TypeError("each() makes a row() from every row")
    return Expr("each", rows, made)


def concat(*tables: Any) -> Expr:
    """The rows of the tables, one table after another."""
    return Expr("concat", *tables)


def best(rows: Any, body: Any) -> Expr:
    """The first row of a table whose `body` (in the row's scope) is largest; none (false) for an empty table."""
    return Expr("best", rows, body)


def within(one_row: Any, body: Any) -> Expr:
    """`body` in the scope of one row (a row's fields over the symbols around it)."""
    return Expr("within", one_row, body)


def top(mapping: Any) -> Expr:
    """The first key of a mapping whose value is largest."""
    return Expr("top", mapping)


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
    kind = type(value)
    if kind is int or kind is Fraction:  # the common case first (the checks below give the same answer)
        return value
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


class _RowScope(dict):
    """A row's fields over the symbols around it: a copy of the row (a field is read as a dict entry, without a call)
    whose missing names are looked up around it (a sum runs once per row)."""

    __slots__ = ("env",)

    def __missing__(self, name: str) -> Value:
        return self.env[name]


def _scope(row: Mapping[str, Value], env: Mapping[str, Value]) -> _RowScope:
    """The scope of `row` inside `env`."""
    scope = _RowScope(row)
    scope.env = env
    return scope


# Compilation: each rule becomes a Python function of the symbols once (kept on the node), as the browser's
# compileRule does, so that evaluating it again walks no tree and looks up no operator.

_Fn = Callable[[Mapping[str, Value]], Value]


def _unknown(name: str) -> RuleError:
    return RuleError(f"unknown symbol {name!r}")


def _symbol(args: tuple[Any, ...], fs: list[_Fn]) -> _Fn:
    """env[name], read without a Python call (an unknown name's KeyError becomes a RuleError where evaluation
    starts: evaluate, derive)."""
    return itemgetter(args[0])


def _constant(args: tuple[Any, ...], fs: list[_Fn]) -> _Fn:
    value = args[0]
    return lambda env: value


def _folded(arg: Expr) -> int | Fraction | None:
    """A number constant's value as _number gives it, computed once when the rule is compiled (None: not one)."""
    if arg.op != "num" or type(arg.args[0]) not in (int, Fraction):
        return None
    return arg.args[0]


def _add(args: tuple[Expr, ...], fs: list[_Fn]) -> _Fn:
    if len(fs) == 2:
        a, b = fs
        x, y = _folded(args[0]), _folded(args[1])
        if y is not None:
            return lambda env: _number(a(env)) + y
        if x is not None:
            return lambda env: x + _number(b(env))
        return lambda env: _number(a(env)) + _number(b(env))
    return lambda env: sum(_number(f(env)) for f in fs)


def _multiply(args: tuple[Expr, ...], fs: list[_Fn]) -> _Fn:
    if len(fs) == 2:
        a, b = fs
        x, y = _folded(args[0]), _folded(args[1])
        if y is not None:
            return lambda env: _number(a(env)) * y
        if x is not None:
            return lambda env: x * _number(b(env))
        return lambda env: _number(a(env)) * _number(b(env))
    return lambda env: math.prod([_number(f(env)) for f in fs])


def _quotient(x: int | Fraction, y: int | Fraction, node: Expr) -> Value:
    """x / y exactly, for the division `node`."""
    if y == 0:
        raise RuleError(f"division by zero in {encode(node)!r}")
    if type(x) is int and type(y) is int:  # a whole quotient stays an int (exact, and fast)
        return x // y if x % y == 0 else Fraction(x, y)  # one Fraction made, not two: the same value
    return Fraction(x) / y


def _divide(args: tuple[Expr, ...], fs: list[_Fn]) -> _Fn:
    a, b = fs
    node = Expr("/", *args)
    return lambda env: _quotient(_number(a(env)), _number(b(env)), node)


def _unary(function: Callable[[Any], Value]) -> Callable[[tuple, list[_Fn]], _Fn]:
    """An operator of one number."""
    def make(args: tuple[Expr, ...], fs: list[_Fn]) -> _Fn:
        a = fs[0]
        return lambda env: function(_number(a(env)))
    return make


def _binary_numbers(function: Callable[[Any, Any], Value]) -> Callable[[tuple, list[_Fn]], _Fn]:
    """An operator of two numbers; a number constant among them is read once, when compiled."""
    def make(args: tuple[Expr, ...], fs: list[_Fn]) -> _Fn:
        a, b = fs
        x, y = _folded(args[0]), _folded(args[1])
        if y is not None:
            return lambda env: function(_number(a(env)), y)
        if x is not None:
            return lambda env: function(x, _number(b(env)))
        return lambda env: function(_number(a(env)), _number(b(env)))
    return make


def _comparison(test: Callable[[Any, Any], bool]) -> Callable[[tuple, list[_Fn]], _Fn]:
    """A comparison of two numbers, 1 or 0; a number constant among them is read once, when compiled."""
    def make(args: tuple[Expr, ...], fs: list[_Fn]) -> _Fn:
        a, b = fs
        x, y = _folded(args[0]), _folded(args[1])
        if y is not None:
            return lambda env: 1 if test(_number(a(env)), y) else 0
        if x is not None:
            return lambda env: 1 if test(x, _number(b(env))) else 0
        return lambda env: 1 if test(_number(a(env)), _number(b(env))) else 0
    return make


def _extreme(choose: Callable[..., Value]) -> Callable[[tuple, list[_Fn]], _Fn]:
    """min or max of numbers (the first of the smallest or largest); of two, a number constant is read once."""
    def make(args: tuple[Expr, ...], fs: list[_Fn]) -> _Fn:
        if len(fs) == 2:
            a, b = fs
            x, y = _folded(args[0]), _folded(args[1])
            if x is not None:
                return lambda env: choose(x, _number(b(env)))
            if y is not None:
                return lambda env: choose(_number(a(env)), y)
            return lambda env: choose(_number(a(env)), _number(b(env)))
        return lambda env: choose(_number(f(env)) for f in fs)
    return make


def _binary_values(function: Callable[[Any, Any], Value]) -> Callable[[tuple, list[_Fn]], _Fn]:
    """An operator of two values of any kind (== and !=)."""
    def make(args: tuple[Expr, ...], fs: list[_Fn]) -> _Fn:
        a, b = fs
        return lambda env: function(a(env), b(env))
    return make


def _equal(args: tuple[Expr, ...], fs: list[_Fn]) -> _Fn:
    """==; a symbol against a constant (a text or a number, as written) is read without a call for either."""
    a, b = fs
    if args[1].op in ("str", "num"):
        constant = args[1].args[0]
        if args[0].op == "sym":
            name = args[0].args[0]

            def symbol_is(env: Mapping[str, Value]) -> int:
                try:
                    return int(env[name] == constant)
                except KeyError:
                    raise _unknown(name) from None
            return symbol_is
        return lambda env: int(a(env) == constant)
    return lambda env: int(a(env) == b(env))


def _if(args: tuple[Expr, ...], fs: list[_Fn]) -> _Fn:
    c, a, b = fs
    if args[0].op == "sym":  # a symbol as the condition is read without a call
        name = args[0].args[0]

        def choose(env: Mapping[str, Value]) -> Value:
            try:
                condition = env[name]
            except KeyError:
                raise _unknown(name) from None
            return a(env) if condition else b(env)
        return choose
    then, otherwise = (arg.args[0] if arg.op in ("num", "str") else None for arg in args[1:])
    if otherwise is not None:  # a constant branch is its value, read without a call
        return lambda env: a(env) if c(env) else otherwise
    if then is not None:
        return lambda env: then if c(env) else b(env)
    return lambda env: a(env) if c(env) else b(env)


# The operators over tables, as functions of their operands' values and of the body (a function of a row's scope):
# the compiled rules below call them, and so do the programs builder.model.exprcode writes.

def _entry(table: Value, key: Value, node: Expr) -> Value:
    """`at`: the entry `key` of the table `node` evaluated to."""
    try:
        return table[key]
    except (KeyError, IndexError, TypeError):
        raise RuleError(f"no entry {key!r} in {encode(node)!r}") from None


def _summed(rows: Iterable[Mapping], body: _Fn, env: Mapping[str, Value]) -> Value:
    """`sum`: the body summed over the rows."""
    return sum(_number(body(_scope(row, env))) for row in rows)


def _sums_by(key_name: Value, rows: Iterable[Mapping], body: _Fn, env: Mapping[str, Value]) -> dict[Value, Value]:
    """`by`: the body summed per value of the rows' field `key_name`, in first-seen order."""
    out: dict[Value, Value] = {}
    for row in rows:
        key = row[key_name]
        out[key] = out.get(key, 0) + _number(body(_scope(row, env)))
    return out


def _table_of(rows: Iterable[Mapping], made: _Fn, env: Mapping[str, Value]) -> list[Value]:
    """`each`: the row `made` in every row's scope, where its condition holds."""
    out = []
    for r in rows:
        fields = made(_scope(r, env))
        if fields is not None:
            out.append(fields)
    return out


def _first_largest(rows: Iterable[Mapping], body: _Fn, env: Mapping[str, Value]) -> Value:
    """`best`: the first row whose body is largest (None for no rows)."""
    chosen, most = None, None
    for r in rows:
        value = _number(body(_scope(r, env)))
        if most is None or value > most:
            chosen, most = r, value
    return chosen


def _within_row(r: Value, body: _Fn, env: Mapping[str, Value]) -> Value:
    """`within`: the body in one row's scope."""
    if not isinstance(r, Mapping):
        raise RuleError(f"within: {r!r} is not a row")
    return body(_scope(r, env))


def _top_key(mapping: Mapping[Value, Value], node: Expr) -> Value:
    """`top`: the first key of the mapping `node` evaluated to whose value is largest."""
    chosen, most = None, None
    for k, v in mapping.items():
        if most is None or _number(v) > most:
            chosen, most = k, _number(v)
    if most is None:
        raise RuleError(f"top: {encode(node)!r} is empty")
    return chosen


def _lookup(args: tuple[Expr, ...], fs: list[_Fn]) -> _Fn:
    t, k = fs
    return lambda env: _entry(t(env), k(env), args[0])


def _get(args: tuple[Expr, ...], fs: list[_Fn]) -> _Fn:
    t, k, d = fs

    def entry(env: Mapping[str, Value]) -> Value:
        table, key = t(env), k(env)
        return table[key] if key in table else d(env)
    return entry


def _sum_rows(args: tuple[Expr, ...], fs: list[_Fn]) -> _Fn:
    rows, body = fs
    return lambda env: _summed(rows(env), body, env)


def _by_rows(args: tuple[Expr, ...], fs: list[_Fn]) -> _Fn:
    rows, field, body = fs
    return lambda env: _sums_by(field(env), rows(env), body, env)


def _each(args: tuple[Expr, ...], fs: list[_Fn]) -> _Fn:
    rows, made = fs
    return lambda env: _table_of(rows(env), made, env)


def _best(args: tuple[Expr, ...], fs: list[_Fn]) -> _Fn:
    rows, body = fs
    return lambda env: _first_largest(rows(env), body, env)


def _within(args: tuple[Expr, ...], fs: list[_Fn]) -> _Fn:
    one, body = fs
    return lambda env: _within_row(one(env), body, env)


def _top(args: tuple[Expr, ...], fs: list[_Fn]) -> _Fn:
    mapping = fs[0]
    return lambda env: _top_key(mapping(env), args[0])


def _row(args: tuple[Expr, ...], fs: list[_Fn]) -> _Fn:
    condition, names, values = fs[0], [a.args[0] for a in args[1::2]], fs[2::2]
    pairs = list(zip(names, values))

    def fields(env: Mapping[str, Value]) -> dict[str, Value] | None:
        if not condition(env):
            return None
        return {name: value(env) for name, value in pairs}
    return fields


def _table(args: tuple[Expr, ...], fs: list[_Fn]) -> _Fn:
    return lambda env: [r for r in (f(env) for f in fs) if r is not None]


def _fmt(args: tuple[Expr, ...], fs: list[_Fn]) -> _Fn:
    template, rest = fs[0], fs[1:]
    return lambda env: _text(template(env)).format(*(_text(f(env)) for f in rest))


def _fixed_text(x: int | Fraction, digits: Value) -> str:
    """`fixed`: f"{x:.{digits}f}"."""
    return f"{float(x):.{int(digits)}f}"


def _real_text(x: int | Fraction) -> str:
    """`real`: a number as Python writes a float."""
    return repr(float(x))


def _fixed(args: tuple[Expr, ...], fs: list[_Fn]) -> _Fn:
    a, k = fs
    return lambda env: _fixed_text(_number(a(env)), k(env))


def _member(args: tuple[Expr, ...], fs: list[_Fn]) -> _Fn:
    """in; against constants only (the usual case: a choice among names), the constants are a tuple made once,
    compared as the list of their values was (==, in order)."""
    x, rest = fs[0], fs[1:]
    if all(a.op in ("str", "num") for a in args[1:]):
        constants = tuple(a.args[0] for a in args[1:])
        return lambda env: int(x(env) in constants)
    return lambda env: int(x(env) in [f(env) for f in rest])


def _all(args: tuple[Expr, ...], fs: list[_Fn]) -> _Fn:
    if len(fs) == 2:
        a, b = fs
        return lambda env: 1 if a(env) and b(env) else 0

    def both(env: Mapping[str, Value]) -> int:  # int(all(...)) without a generator: it stops at the first false
        for f in fs:
            if not f(env):
                return 0
        return 1
    return both


def _any(args: tuple[Expr, ...], fs: list[_Fn]) -> _Fn:
    if len(fs) == 2:
        a, b = fs
        return lambda env: 1 if a(env) or b(env) else 0

    def either(env: Mapping[str, Value]) -> int:  # int(any(...)) without a generator: it stops at the first true
        for f in fs:
            if f(env):
                return 1
        return 0
    return either


def _member_of(table: Value, x: Value) -> int:
    """`has`: 1 when the list holds x."""
    return int(x in table)


_Compiler = Callable[[tuple, list[_Fn]], _Fn]
OPERATORS: dict[str, _Compiler] = {
    "sym": _symbol,
    "num": _constant,
    "str": _constant,
    "+": _add,
    "-": _binary_numbers(operator.sub),
    "*": _multiply,
    "/": _divide,
    "neg": _unary(lambda x: -x),
    "%": _binary_numbers(operator.mod),
    "floor": _unary(math.floor),
    "ceil": _unary(math.ceil),
    "min": _extreme(min),
    "max": _extreme(max),
    "==": _equal,
    "!=": _binary_values(lambda x, y: int(x != y)),
    "<": _comparison(operator.lt),
    "<=": _comparison(operator.le),
    ">": _comparison(operator.gt),
    ">=": _comparison(operator.ge),
    "and": _all,
    "or": _any,
    "not": lambda args, fs: (lambda a: lambda env: int(not bool(a(env))))(fs[0]),
    "if": _if,
    "in": _member,
    "has": _binary_values(_member_of),
    "at": _lookup,
    "get": _get,
    "sum": _sum_rows,
    "by": _by_rows,
    "row": _row,
    "table": _table,
    "each": _each,
    "concat": lambda args, fs: lambda env: [r for f in fs for r in f(env)],
    "best": _best,
    "within": _within,
    "top": _top,
    "fmt": _fmt,
    "bytes": _unary(bytes_text),
    "real": _unary(_real_text),
    "fixed": _fixed,
}


def compiled(expr: Expr) -> _Fn:
    """The function a rule compiles to (made once, then kept on the node)."""
    fn = expr._fn
    if fn is None:
        fs = [] if expr.op in _LEAVES else [compiled(a) for a in expr.args]
        fn = expr._fn = OPERATORS[expr.op](expr.args, fs)
    return fn


def evaluate(expr: Expr, env: Mapping[str, Value]) -> Value:
    """The exact value of a rule with the symbols in `env` (numbers come back as ints or Fractions)."""
    try:
        return (expr._fn or compiled(expr))(env)
    except KeyError as error:  # a symbol read where `env` does not have it (_symbol)
        raise _unknown(error.args[0]) from None


def pairs(symbols: Mapping[str, Expr] | Iterable[tuple[str, Expr]]) -> list[tuple[str, Expr]]:
    """Derived symbols as (name, rule) pairs, in order: a mapping's items, or the pairs themselves."""
    return list(symbols.items()) if isinstance(symbols, Mapping) else list(symbols)


def derive(symbols: Mapping[str, Expr] | Iterable[tuple[str, Expr]], env: Mapping[str, Value]) -> dict[str, Value]:
    """`env` with each derived symbol added, in order (a symbol may use those before it); `symbols` a mapping or
    (name, rule) pairs (`pairs`), where a name derived again replaces its value."""
    listed = tuple(pairs(symbols))
    # The pairs as one Python function, once they are derived again (builder.model.exprcode).
    return derive_pairs(listed, env, _code.program(listed))


def derive_pairs(listed: tuple[tuple[str, Expr], ...], env: Mapping[str, Value], run: Callable | None
                 ) -> dict[str, Value]:
    """`derive` of (name, rule) pairs by their program `run` (builder.model.exprcode), or by each rule's compiled
    function where there is none (None)."""
    out = dict(env)
    try:
        if run is not None:
            run(out)
        else:
            for name, expr in listed:
                out[name] = (expr._fn or compiled(expr))(out)
    except KeyError as error:  # a symbol read before it is given or derived (_symbol)
        raise _unknown(error.args[0]) from None
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
    if expr.op == "row":  # field names are plain strings: ["row", condition, name, value, ...]
        return ["row", *(a.args[0] if i % 2 else encode(a) for i, a in enumerate(expr.args))]
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
    if op == "row":
        return Expr("row", *(Expr("str", a) if i % 2 else decode(a) for i, a in enumerate(args)))
    if op not in OPERATORS or op in _LEAVES:
        raise RuleError(f"unknown operator {op!r}")
    return _operation(op, tuple([decode(a) for a in args]))


def _operation(op: str, args: tuple[Expr, ...]) -> Expr:
    """Expr(op, *args) for operands that are nodes already (lift would pass each through unchanged)."""
    node = Expr.__new__(Expr)
    node.op, node.args, node._fn = op, args, None
    return node


def symbols_of(expr: Expr) -> frozenset[str]:
    """Every symbol a rule reads (row fields inside a sum included); worked out once per node (kept on it, as a rule
    does not change), since a caller asks again of the rules inside (builder.widgets.specialise folds every condition
    of a rule)."""
    try:
        return expr._symbols
    except AttributeError:
        pass
    if expr.op == "sym":
        found = frozenset(expr.args[:1])
    elif expr.op in _LEAVES:
        found = frozenset()
    else:  # an operand's set, where it holds what the others read (most nodes: no new set)
        found = frozenset()
        for read in [symbols_of(a) for a in expr.args]:
            if not read <= found:
                found = read if found <= read else found | read
    expr._symbols = found
    return found


from builder.model import exprcode as _code  # noqa: E402 (last: it reads this module's operators)
