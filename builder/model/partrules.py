"""Parts of memory as rules: what each part costs, in the expression language of builder.model.expr.

A RuleSet is derived symbols (in order) and part rules over them. The estimator evaluates a rule set
with the inputs of one pipeline stage (builder.model.inputs) and gets Parts; the browser evaluates the
same rule set from `encode()` (static/widgets/01-rules.js) and gets the same bytes and the same words.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Mapping

from builder.model.breakdown import Part, Rate, whole_bytes
from builder.model import exprcode
from builder.model.expr import Expr, Value, at, derive_pairs, encode, evaluate, fmt, lift, per_unit, sym, symbols_of
from builder.model.partnames import is_registered


def bytes_of(dtype: Any) -> Expr:
    """Bytes per element of a dtype (a name or a rule naming one), from the `dtype_bytes` table input."""
    return at(sym("dtype_bytes"), dtype)


@dataclass(frozen=True)
class PerUnit:
    """A part's bytes-per-unit rule as a number with its unit: `amount` (a rule) bytes per one `per` ('param',
    'token'), and what it is in brackets ('bf16'). Its words ('2 B/param (bf16)', or `words` where the rule prints
    the amount otherwise) are made from the number; the number travels on too (Part.rate), so a chart adds rates
    without reading the words back."""

    amount: Any
    per: str
    what: Any = ""
    words: Any = None  # the words, when not '{amount} B/{per} ({what})' (e.g. '69.0 KiB/token')

    def text(self) -> Expr:
        """The rule in words, as the tables, the charts and the browser show it."""
        if self.words is not None:
            return lift(self.words)
        if isinstance(self.what, str) and not self.what:
            return fmt("{0} B/" + self.per, per_unit(self.amount))
        return fmt("{0} B/" + self.per + " ({1})", per_unit(self.amount), self.what)


@dataclass(frozen=True)
class PartRule:
    """One part: its name, bytes and per-unit words as rules, its formula in words and its source."""

    name: str
    bytes: Expr
    formula: Expr | str  # in the symbols Breakdown.where defines
    source: Expr | str  # text citing its works as Cite(key, locator) (builder.model.cite)
    per_unit: Expr | str | PerUnit  # what a chart annotates the part with, e.g. '2 B/param (bf16)' (PerUnit: a rate)
    note: Expr | str = ""  # the simplification, when the part is one
    when: Expr | int = 1  # the part exists only where this holds
    sharded_by: Expr | int = 1  # how many ranks share the unsharded amount (1: replicated)
    transient: bool = False  # live at the peak but not saved for backward
    rate: tuple[Expr, str] | None = field(default=None, init=False)  # (bytes per unit, unit) when per_unit is a PerUnit

    def __post_init__(self) -> None:
        if not is_registered(self.name):
            raise ValueError(f"part {self.name!r} has no reader-facing name in builder.model.partnames.PART_NAMES")
        if isinstance(self.per_unit, PerUnit):
            object.__setattr__(self, "rate", (lift(self.per_unit.amount), self.per_unit.per))
            object.__setattr__(self, "per_unit", self.per_unit.text())
        for name in ("bytes", "formula", "source", "per_unit", "note", "when", "sharded_by"):
            object.__setattr__(self, name, lift(getattr(self, name)))

    def when_holds(self, env: Mapping[str, Value]) -> bool:
        """Whether the part exists in an environment already derived."""
        return bool(evaluate(self.when, env))

    def part(self, env: Mapping[str, Value], words: bool = True) -> Part:
        """The part in an environment already derived; words=False: its numbers only (formula, source, per-unit
        words and note left empty, as 02-model.js `estimate(run, false)` leaves them), for a caller that reads none."""
        return self.made([evaluate(rule, env) for rule in self.evaluated(words)], words)

    def evaluated(self, words: bool) -> tuple[Expr, ...]:
        """The rules `part` evaluates, in order: the words (with `words`), the rate's amount (with a rate), the bytes
        and the sharding."""
        return ((self.formula, self.source, self.per_unit, self.note) if words else ()) \
            + ((self.rate[0],) if self.rate is not None else ()) + (self.bytes, self.sharded_by)

    def made(self, values: list[Value], words: bool) -> Part:
        """The part from the values of the rules `evaluated` gives, in its order."""
        texts = values[:4] if words else ["", "", "", ""]
        rate = Rate(values[-3], self.rate[1]) if self.rate is not None else None
        return Part(self.name, whole_bytes(values[-2]), *texts, int(values[-1]), self.transient, rate)


@dataclass(frozen=True)
class RuleSet:
    """Derived symbols, then the parts they price."""

    symbols: dict[str, Expr]
    parts: tuple[PartRule, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "symbols", {name: lift(expr) for name, expr in self.symbols.items()})

    @cached_property
    def pairs(self) -> tuple[tuple[str, Expr], ...]:
        """The derived symbols as (name, rule) pairs."""
        return tuple(self.symbols.items())

    @cached_property
    def symbols_program(self) -> exprcode.Lazy:
        """The derived symbols as one program (builder.model.exprcode), made once they are derived again."""
        return exprcode.derived(self.pairs)

    @cached_property
    def programs(self) -> dict[bool, exprcode.Lazy]:
        """The parts as one program (builder.model.exprcode) with words and one without, each made once the set's
        parts are worked out again."""
        return {words: exprcode.guarded([(r.when, r.evaluated(words)) for r in self.parts]) for words in (True, False)}

    def environment(self, inputs: Mapping[str, Value]) -> dict[str, Value]:
        """The inputs with every derived symbol added."""
        return derive_pairs(self.pairs, inputs, self.symbols_program.get())

    def evaluate(self, inputs: Mapping[str, Value], words: bool = True) -> list[Part]:
        """The parts whose condition holds, in order (words=False: numbers only, PartRule.part)."""
        return self.parts_of(self.environment(inputs), words)

    def parts_of(self, env: Mapping[str, Value], words: bool = True) -> list[Part]:
        """The parts whose condition holds in an environment already derived (`environment`)."""
        run = self.programs[words].get()
        if run is None:
            return [rule.part(env, words) for rule in self.parts if rule.when_holds(env)]
        parts = self.parts
        return [parts[index].made(values, words) for index, values in exprcode.run(run, env)]

    def reads(self) -> list[str]:
        """The inputs the set reads (every symbol its rules use that it does not derive), sorted; a table's row
        fields count too, as inputs that are never given."""
        used = set().union(*(symbols_of(expr) for expr in self.symbols.values()),
                           *(symbols_of(getattr(rule, name)) for rule in self.parts
                             for name in ("when", "bytes", "per_unit", "note", "source")))
        return sorted(used - set(self.symbols))

    def encode(self, source_html: Callable[[str], str] = html.escape, words: bool = True) -> dict[str, Any]:
        """The JSON the browser evaluates: symbols as [name, rule], parts as
        [name, condition, bytes, per-unit words, note, source (as HTML), transient], and the inputs it
        reads (the browser reuses a result while they stay the same). `source_html` turns a source's text
        constants into markup: builder.sources.html_renderer links each citation to the References page (a
        citation is one whole constant or inside one, so rendering constants renders every branch). A derived
        symbol that holds a source, worked out once for many parts, is named '<...>_source' and rendered too.
        `words=False`: numbers only, for a page that shows no part's words (02-model.js `estimate(run, false)`):
        per-unit words, notes and sources, and the symbols holding sources, are sent as empty text."""
        def text(expr: Expr) -> Any:
            return encode(expr) if words else EMPTY_TEXT

        return {"reads": self.reads(),
                "symbols": [[name, text(rendered(expr, source_html)) if is_source(name) else encode(expr)]
                            for name, expr in self.symbols.items()],
                "parts": [[r.name, encode(r.when), encode(r.bytes), text(r.per_unit), text(r.note),
                           text(rendered(r.source, source_html)), int(r.transient)] for r in self.parts]}


EMPTY_TEXT = encode(Expr("str", ""))  # a text rule sent in place of words a page does not show (model_data words)
SOURCE_SUFFIX = "_source"  # a derived symbol whose value is a source (text with citations)


def is_source(symbol: str) -> bool:
    """True for a derived symbol that holds a source: its text constants are rendered as a part's source is."""
    return symbol.endswith(SOURCE_SUFFIX)


def rendered(expr: Expr, to_html: Callable[[str], str] = html.escape) -> Expr:
    """A text rule with its text constants turned into markup by `to_html` (sources go into markup); the
    constants a condition compares with stay as they are."""
    if expr.op == "str":
        return Expr("str", to_html(expr.args[0]))
    if expr.op in ("sym", "num"):
        return expr
    if expr.op == "if":
        condition, *branches = expr.args
        return Expr("if", condition, *(rendered(a, to_html) for a in branches))
    return Expr(expr.op, *(rendered(a, to_html) for a in expr.args))
