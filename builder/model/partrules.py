"""Parts of memory as rules: what each part costs, in the expression language of builder.model.expr.

A RuleSet is derived symbols (in order) and part rules over them. The estimator evaluates a rule set
with the inputs of one pipeline stage (builder.model.inputs) and gets Parts; the browser evaluates the
same rule set from `encode()` (static/widgets/01-rules.js) and gets the same bytes and the same words.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any, Mapping

from builder.model.breakdown import Part, whole_bytes
from builder.model.expr import Expr, Value, derive, encode, evaluate, lift


@dataclass(frozen=True)
class PartRule:
    """One part: its name, bytes and per-unit words as rules, its formula in words and its source."""

    name: str
    bytes: Expr
    formula: str  # in the symbols Breakdown.where defines
    source: str  # paper + section, or code file + version
    per_unit: Expr  # the words a chart annotates the part with, e.g. '2 B/param (bf16)'
    note: Expr = field(default_factory=lambda: lift(""))  # the simplification, when the part is one
    when: Expr = field(default_factory=lambda: lift(1))  # the part exists only where this holds
    transient: bool = False  # live at the peak but not saved for backward

    def part(self, env: Mapping[str, Value]) -> Part:
        return Part(self.name, whole_bytes(evaluate(self.bytes, env)), self.formula, self.source,
                    evaluate(self.per_unit, env), evaluate(self.note, env), transient=self.transient)


@dataclass(frozen=True)
class RuleSet:
    """Derived symbols, then the parts they price."""

    symbols: dict[str, Expr]
    parts: tuple[PartRule, ...]

    def environment(self, inputs: Mapping[str, Value]) -> dict[str, Value]:
        """The inputs with every derived symbol added."""
        return derive(self.symbols, inputs)

    def evaluate(self, inputs: Mapping[str, Value]) -> list[Part]:
        """The parts whose condition holds, in order."""
        env = self.environment(inputs)
        return [rule.part(env) for rule in self.parts if evaluate(rule.when, env)]

    def encode(self) -> dict[str, Any]:
        """The JSON the browser evaluates: symbols as [name, rule], parts as
        [name, condition, bytes, per-unit words, note, source (HTML-escaped), transient]."""
        return {"symbols": [[name, encode(expr)] for name, expr in self.symbols.items()],
                "parts": [[r.name, encode(r.when), encode(r.bytes), encode(r.per_unit), encode(r.note),
                           html.escape(r.source), int(r.transient)] for r in self.parts]}
