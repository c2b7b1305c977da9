"""The suggested fixes' program (builder.widgets.calculator_fixes.FIXING) against a reference: the loop the calculator
ran before the program existed (each candidate tried in turn, "lower" by scanning every value down from the limit),
over random candidates, form values and needs. tests/browser/test_fixes_js.py runs the same cases in the browser."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from builder.widgets import calculator as calc
from builder.widgets.calculator_fixes import FIXING, MAX_FIXES, REFUSED

COUNTS = ("a", "b")  # the controls a candidate changes (counts, as micro_batch, seq_len, dp and tp are)
STEP = "c"  # the control a "lower" candidate may step by (as seq_len steps by cp)
CHOICES = {"x": ("p", "q"), "y": ("p", "q", "r")}  # the controls a candidate's settings set (choices)


@st.composite
def cases(draw) -> dict:
    """Candidates, form values, a capacity and each candidate's need: `base` + `slope` x value, refused above
    `refused_above` (a need that rises with the value, as the model's do in batch and sequence)."""
    candidates, needs = [], []
    for _ in range(draw(st.integers(1, 7))):
        kind = draw(st.sampled_from(("set", "lower", "double")))
        key = "" if kind == "set" else draw(st.sampled_from(COUNTS))
        chosen = draw(st.dictionaries(st.sampled_from(sorted(CHOICES)), st.sampled_from(("p", "q", "r")), max_size=2))
        candidates.append({"kind": kind, "key": key, "text": "", "step_by": draw(st.sampled_from(("", STEP))),
                           "ceiling": draw(st.sampled_from((0, 1, 4, 64, 4096))),
                           "settings": [{"control": c, "value": v} for c, v in chosen.items()]})
        needs.append({"base": draw(st.integers(0, 1500)), "slope": draw(st.integers(0, 200)),
                      "refused_above": draw(st.sampled_from((0, 3, 20, 10**6)))})
    form = {"a": draw(st.integers(0, 70)), "b": draw(st.integers(0, 70)), STEP: draw(st.integers(1, 8)),
            **{control: draw(st.sampled_from(values)) for control, values in CHOICES.items()}}
    return {"candidates": candidates, "form": form, "capacity": draw(st.integers(0, 3000)), "needs": needs}


def need(case: dict, entry: int, value: int) -> int | None:
    """What the run of candidate `entry` at `value` needs, or None where it is refused."""
    n = case["needs"][entry]
    return None if value > n["refused_above"] else n["base"] + n["slope"] * value


def reference(case: dict) -> list[dict]:
    """The fixes as the calculator's loop found them (builder/widgets/calculator.py before the program)."""
    form, capacity, found = case["form"], case["capacity"], []

    def fits(entry: int, value: int) -> bool:
        needed = need(case, entry, value)
        return needed is not None and needed <= capacity

    for entry, fix in enumerate(case["candidates"]):
        changes = any(form[s["control"]] != s["value"] for s in fix["settings"])
        value = None
        if fix["kind"] == "set":
            value = 1 if changes and fits(entry, 1) else None
        elif fix["kind"] == "lower":
            step = form[fix["step_by"]] if fix["step_by"] else 1
            limit = form[fix["key"]] - step
            if limit >= step:  # the limit, then every multiple of step below it, down to step
                tried = [limit, *range(step * ((limit - 1) // step), step - 1, -step)]
                value = next((v for v in tried if fits(entry, v)), None)
        else:
            n = max(1, form[fix["key"]])
            while n <= fix["ceiling"] and value is None:
                if (changes or n != form[fix["key"]]) and fits(entry, n):
                    value = n
                n *= 2
        if value is not None:
            found.append({"entry": entry, "value": value})
            if len(found) == MAX_FIXES:
                break
    return found


def run(case: dict) -> list[dict]:
    """The program's answer for a case, run exactly (Search.run)."""
    def measure(probe: dict) -> int:
        needed = need(case, probe["entry"], probe["value"])
        return REFUSED if needed is None else needed

    inputs = {key: case[key] for key in ("candidates", "form", "capacity")}
    return [{"entry": kept["entry"], "value": int(kept["value"])} for kept in FIXING.run(measure, inputs)]


@settings(max_examples=1500, deadline=None, derandomize=True)
@given(cases())
def test_the_program_finds_what_the_loop_found(case):
    assert run(case) == reference(case)


def test_a_case_by_hand():
    # One of each kind: a value 8 lowered to 3 (4 needs 1,040 > 1,000), a setting that fits, one that changes nothing
    # (not tried), a value doubled from 2 (the current value, with no settings: 4 is the first tried, 16 the first
    # that fits), and a value of 2 lowered in steps of 4 (none is below it: not tried).
    case = {"candidates": [
        {"kind": "lower", "key": "a", "text": "", "step_by": "", "ceiling": 0, "settings": []},
        {"kind": "set", "key": "", "text": "", "step_by": "", "ceiling": 0, "settings": [{"control": "x", "value": "q"}]},
        {"kind": "set", "key": "", "text": "", "step_by": "", "ceiling": 0, "settings": [{"control": "x", "value": "p"}]},
        {"kind": "double", "key": "b", "text": "", "step_by": "", "ceiling": 64, "settings": []},
        {"kind": "lower", "key": "b", "text": "", "step_by": "c", "ceiling": 0, "settings": []},
    ], "form": {"a": 8, "b": 2, "c": 4, "x": "p", "y": "p"}, "capacity": 1000,
        "needs": [{"base": 800, "slope": 60, "refused_above": 10**6}, {"base": 900, "slope": 0, "refused_above": 1},
                  {"base": 0, "slope": 0, "refused_above": 1}, {"base": 1600, "slope": -40, "refused_above": 10**6},
                  {"base": 0, "slope": 1, "refused_above": 10**6}]}
    assert run(case) == reference(case) == [{"entry": 0, "value": 3}, {"entry": 1, "value": 1},
                                            {"entry": 3, "value": 16}]


def test_the_settings_a_fix_makes_are_choices():
    # The program compares a setting with the control's typed value (calculator_state.typed_values), which is its
    # text only for a choice.
    for candidates in calc.FIXES.values():
        for fix in candidates:
            assert all(calc.CONTROL_TYPES[s["control"]] == "choice" for s in fix["settings"]), fix
            assert not fix["key"] or calc.CONTROL_TYPES[fix["key"]] == "count", fix
            assert not fix["step_by"] or calc.CONTROL_TYPES[fix["step_by"]] == "count", fix
