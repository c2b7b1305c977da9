"""The calculator's suggested fixes, written once as a program of rules (builder.model.search.Search, in the expression
language of builder.model.expr) and run twice: exactly here (builder.widgets.calculator.fixes, for the
server-rendered figure) and by the browser (static/widgets/30-calculator.js `fixes`, through 02-model.js
`searchRunner`, from the JSON `encode` sends). Neither side holds a step of it: each runs the same loop over this
data and only supplies the measure, which builds the trial form state of a probe (a candidate's settings, then its
key set to the value tried) and returns what that run needs, or REFUSED where the model refuses the run.

Inputs: `candidates` (builder.widgets.calculator.FIXES for the run's mode: rows of kind, key, settings as rows of
control and value, step_by, ceiling and text), `form` (each control's typed value, calculator_state.typed_values)
and `capacity` (the chosen GPU's usable bytes). Each candidate is tried in turn by the search its kind names:
  "set"     measure the run with its settings, if they change the state: found if it fits;
  "lower"   the largest value of `key` below the current one that fits, in steps of `step_by`'s value (1 where it
            has none), from one step up: builder.model.search.LARGEST, as questions.max_micro_batch and max_seq_len
            search;
  "double"  the current value of `key` (at least 1), then twice, four times, ... up to `ceiling`: the first that
            fits, the current value itself only where the settings change the state.
A candidate that finds a value is kept, as a row of `entry` (its index) and `value` (the value found; 1 for "set"),
until MAX_FIXES are kept. The answer is the table of kept rows, in the candidates' order.

A step of the program is one of three phases: "enter" (the candidate's search is set up from its row), "measure"
(its search measures a value and moves on) and "leave" (its answer is kept if it found one; the next candidate is
entered). Only "measure" steps call the measure.
"""

from __future__ import annotations

from typing import Any

from builder.model.expr import (Expr, at, both, concat, eq, lift, maximum, ne, negate, row, sym, table, total, when,
                                within)
from builder.model.search import LARGEST, MEASURED, PROBE, Search

# What the measure returns for a run the model refuses: it counts as not fitting.
REFUSED = -1
# At most this many suggestions are shown.
MAX_FIXES = 4

_capacity, _form = sym("capacity"), sym("form")
_fits = sym(MEASURED) <= _capacity
# The candidate's settings change the form state (a setting's control holds another value now). The settings' controls
# are choices, whose typed value is their text (tests/test_widgets_calculator.py checks).
_changes = total(sym("settings"), ne(at(_form, sym("control")), sym("value"))) > 0
_current = at(_form, sym("key"))

# The searches, one per kind of candidate: each `start` reads the candidate's row (its fields as symbols).
_tried, _fitted = sym("tried"), sym("fitted")
SET = Search(start={"changes": _changes, "tried": lift(0), "fitted": lift(0)},
             going=both(sym("changes"), negate(_tried)), probe=lift(1),
             after={"fitted": _fits, "tried": lift(1)}, answer=_fitted)

_doubling, _doubled = sym("doubling"), sym("doubled")
DOUBLE = Search(
    start={"changes": _changes, "doubled": lift(0), "up_to": sym("ceiling"),
           # The current value is tried only where the settings change the state (else it is the run that does not fit).
           "doubling": when(both(negate(sym("changes")), eq(maximum(1, _current), _current)), 2 * maximum(1, _current),
                            maximum(1, _current))},
    going=both(_doubling <= sym("up_to"), negate(_doubled)), probe=_doubling,
    after={"doubled": _fits, "doubling": when(_fits, _doubling, 2 * _doubling)},
    answer=when(_doubled, _doubling, 0))

_step, _limit = sym("step"), sym("limit")
LOWER = Search(
    start={"step": when(sym("step_by"), at(_form, sym("step_by")), 1), "low": _step, "limit": _current - _step,
           **LARGEST.start},
    going=both(_limit >= _step, LARGEST.going), probe=LARGEST.probe, after=LARGEST.after,
    answer=when(_limit >= _step, LARGEST.answer, 0))

KINDS = {"set": SET, "lower": LOWER, "double": DOUBLE}


def in_turn(kinds: dict[str, Search], most: int) -> Search:
    """One search that tries each row of `candidates` in turn with the search of its `kind` and keeps the
    candidates that find a value (as rows of `entry` and `value`), at most `most` of them."""
    entry, phase, found = sym("entry"), sym("phase"), sym("found")
    candidate = at(sym("candidates"), entry)
    kind = at(candidate, "kind")

    def by_kind(part: str) -> Expr:
        """The current candidate's kind's `going`, `probe` or `answer`."""
        rule: Any = 0
        for name, search in reversed(kinds.items()):
            rule = when(eq(kind, name), getattr(search, part), rule)
        return rule

    def in_phase(step: str, of_kind: str, name: str, rule: Expr) -> tuple[str, Expr]:
        """`name` derived by `rule` in this phase for a candidate of this kind, kept as it is otherwise."""
        return name, when(both(eq(phase, step), eq(kind, of_kind)), rule, sym(name))

    leaving = eq(phase, "leave")
    steps: list[tuple[str, Expr]] = [
        # The kinds' rules read the value measured as PROBE, and a refused run as one that needs more than fits.
        (PROBE, when(eq(phase, "measure"), at(sym(PROBE), "value"), 0)),
        (MEASURED, when(eq(phase, "measure"), when(eq(sym(MEASURED), REFUSED), _capacity + 1, sym(MEASURED)), 0)),
        # Enter: the kind's search set up, each rule in the scope of the candidate's row.
        *(in_phase("enter", of_kind, name, within(candidate, rule))
          for of_kind, search in kinds.items() for name, rule in search.start.items()),
        # Measure: the kind's search moves on.
        *(in_phase("measure", of_kind, name, rule)
          for of_kind, search in kinds.items() for name, rule in search.after.items()),
        # Leave: the candidate's answer kept where it found a value, and the next candidate entered.
        ("answered", when(leaving, by_kind("answer"), 0)),
        ("found", when(ne(sym("answered"), 0),
                       concat(found, table(row(1, entry=entry, value=sym("answered")))), found)),
        ("entry", when(leaving, entry + 1, entry)),
        ("phase", when(leaving, "enter", when(by_kind("going"), "measure", "leave"))),
    ]
    # Every name a kind's search derives, until its candidate is entered.
    state = {name: lift(0) for search in kinds.values() for name in search.start}
    return Search(start={"entry": lift(0), "found": table(), "phase": lift("enter"), **state},
                  going=both(entry < total(sym("candidates"), 1), total(found, 1) < most),
                  probe=row(eq(phase, "measure"), entry=entry, value=by_kind("probe")),
                  after=steps, answer=found)


FIXING = in_turn(KINDS, MAX_FIXES)


def encode() -> dict[str, Any]:
    """What the script runs: the program, and the marker its measure returns for a refused run."""
    return {"program": FIXING.encode(), "refused": REFUSED}
