"""The search for the largest value that fits, written once as rules (builder.model.expr) and run twice: exactly here
(`largest`, behind `--max micro-batch` and `--max seq-len`) and by the browser
(static/widgets/02-model.js `largest`, from the program builder/widgets/model_data.py sends). Neither side holds a
step of the search of its own: each runs the same loop over this data, "while `going`: measure the need at `probe`,
then work out `after`", and reads `answer` at the end.

What it finds: `limit` if its need fits `capacity`, else the largest `low` + k x `step` below `limit` whose need fits
(`low` included), or 0 (none) if even `low` does not. The need must be monotone (fitting up to some point, not after),
as tests/test_properties.py checks, so the answer is unique and any correct search finds it; how the guesses are made
only changes how many needs are worked out, never the answer (so the browser's doubles, which may guess differently,
still find the same value). Memory is close to affine in batch and sequence, so each guess lies on the straight line
between what the bracket's ends need (regula falsi, with the Illinois rule: an end kept twice counts half as far from
capacity; Dowell and Jarratt 1971, "A modified regula falsi method for computing the root of an equation", BIT 11)
and lands at or next to the answer; every third guess halves the bracket, so the worst case stays logarithmic.

The loop's first two measurements are `low` and `limit` themselves (`probes` 0 and 1); guesses inside the bracket
follow (`probes` 2 on).

The same loop runs other programs too (builder/widgets/calculator_fixes.py: the calculator's suggested fixes, which
runs this search for some of its candidates): a step whose `probe` is none (a row() whose condition does not hold)
measures nothing, and `after` may be a sequence of (name, rule) pairs that derives a name more than once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from builder.model.expr import (Expr, both, ceil, derive, encode, eq, evaluate, lift, maximum, minimum, mod, negate,
                                pairs, sym, when)

# The names the loop binds before working out `after`: the value just measured, and what the run needs there.
PROBE, MEASURED = "probe", "measured"


@dataclass(frozen=True)
class Search:
    """A search as rules: `start` (derived from the inputs), `going` (another step is wanted), `probe` (the value to
    measure, or none for a step that measures nothing), `after` (derived once the need at `probe` is known, bound as
    MEASURED; None where nothing was measured) and `answer`."""

    start: dict[str, Expr]
    going: Expr
    probe: Expr
    after: Mapping[str, Expr] | Sequence[tuple[str, Expr]]
    answer: Expr

    def run(self, measure: Callable[[Any], Any], inputs: Mapping[str, Any]) -> Any:
        """The answer for `inputs`, measuring the need with `measure` wherever the rules ask."""
        env = derive(self.start, inputs)
        while evaluate(self.going, env):
            at = evaluate(self.probe, env)
            env = derive(self.after, {**env, PROBE: at, MEASURED: None if at is None else measure(at)})
        return evaluate(self.answer, env)

    def encode(self) -> dict[str, Any]:
        """The JSON the browser runs (02-model.js `searchRunner`): rules in the expression language's JSON form."""
        return {"start": [[name, encode(rule)] for name, rule in self.start.items()], "going": encode(self.going),
                "probe": encode(self.probe), "after": [[name, encode(rule)] for name, rule in pairs(self.after)],
                "answer": encode(self.answer), "names": [PROBE, MEASURED]}


_probes, _capacity, _step = sym("probes"), sym("capacity"), sym("step")
_good, _bad, _good_need, _bad_need, _side = sym("good"), sym("bad"), sym("good_need"), sym("bad_need"), sym("side")
_measuring_low, _measuring_limit, _inside = eq(_probes, 0), eq(_probes, 1), _probes >= 2
_fits = sym(MEASURED) <= _capacity
# The candidates good + k x step below bad: k = 1 .. most.
_most = ceil((_bad - _good) / _step) - 1
# The guess: on the line between the ends' needs (regula falsi), or every third guess the bracket's middle.
_k = when(eq(mod(_probes - 2, 3), 2), _most // 2 + 1,
          (_capacity - _good_need) * (_most + 1) // (_bad_need - _good_need))

LARGEST = Search(
    start={"good": sym("low"), "bad": sym("limit"), "good_need": lift(0), "bad_need": lift(0), "side": lift(0),
           "probes": lift(0)},
    going=when(_measuring_low, 1, when(_measuring_limit, _good_need <= _capacity,
                                       both(_bad_need > _capacity, _most >= 1))),
    probe=when(_measuring_low, sym("low"), when(_measuring_limit, sym("limit"),
                                               _good + _step * minimum(maximum(_k, 1), _most))),
    after={
        # The Illinois rule: the end kept a second time in a row counts half as far from capacity.
        "good_need": when(_measuring_low, sym(MEASURED), when(_measuring_limit, _good_need, when(
            _fits, sym(MEASURED), when(_side < 0, _capacity - (_capacity - _good_need) / 2, _good_need)))),
        "bad_need": when(_measuring_low, _bad_need, when(_measuring_limit, sym(MEASURED), when(
            _fits, when(_side > 0, _capacity + (_bad_need - _capacity) / 2, _bad_need), sym(MEASURED)))),
        "good": when(both(_inside, _fits), sym(PROBE), _good),
        "bad": when(both(_inside, negate(_fits)), sym(PROBE), _bad),
        "side": when(_inside, when(_fits, 1, -1), 0),
        "probes": _probes + 1,
    },
    answer=when(_good_need > _capacity, 0, when(_bad_need <= _capacity, sym("limit"), _good)),
)


def largest(need_at: Callable[[int], int], capacity: int, low: int, limit: int, step: int = 1) -> int | None:
    """`limit` if its need fits `capacity`, else the largest multiple of `step` above `low` (`low` >= 1 included)
    below `limit` whose need fits, or None if even `low` does not (LARGEST, run exactly)."""
    found = LARGEST.run(need_at, {"capacity": capacity, "low": low, "limit": limit, "step": step})
    return int(found) or None
