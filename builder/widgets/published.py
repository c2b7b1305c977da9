"""The Validation page's published numbers: builder.validate.published's cases, evaluated on every build.

Two tables (training, serving), one row per case: the configuration, the source (linked, with its version), what is
compared, the published value in its published unit, the model's prediction in the same unit, the error, the
tolerance and the verdict. Nothing here runs in the browser, and no number is written by hand.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from builder.validate.published import KINDS, Result, cases, evaluate

TABLES = {"training": "Training: parts of a step, sums of parts and bytes per parameter",
          "serving": "Serving: the engines' own start-up budgets"}


def context(options: dict[str, Any], catalogs: dict[str, Any]) -> dict[str, Any]:
    """Rows per table, the units' notes and the summary, for templates/partials/widget-published-numbers.html."""
    results = evaluate(cases(catalogs["model"], catalogs["gpu"]))
    tables = []
    for table, title in TABLES.items():
        mine = [r for r in results if r.case.table == table]
        notes = list(dict.fromkeys(r.case.unit_note for r in mine if r.case.unit_note))
        tables.append({"id": f"published-{table}", "title": title, "rows": [row(r, notes) for r in mine],
                       "notes": notes})
    return {"tables": tables, "total": len(results), "within": sum(r.ok for r in results),
            "outside": [row(r, []) for r in results if not r.ok], "data": {}}


def row(result: Result, notes: list[str]) -> dict[str, Any]:
    """One table line; `mark` points to the unit's note under the table."""
    case = result.case
    mark = f" ({notes.index(case.unit_note) + 1})" if case.unit_note in notes else ""
    return {"setup": case.setup, "source": case.source, "url": case.url,
            "compared": f"{case.compared} [{KINDS[case.kind]}]",
            "published": f"{number(case.published)} {case.unit}{mark}",
            "predicted": f"{number(result.predicted, decimals(case.published) + 2)} {case.unit}",
            "error": "0 (exact)" if result.error == 0 else f"{float(result.error) * 100:+.2g}%",
            "tolerance": case.tolerance, "verdict": "within tolerance" if result.ok else "OUTSIDE tolerance"}


def decimals(value: Fraction) -> int:
    """The decimals a published value is printed with (0 for a whole number, at most 4)."""
    return next((d for d in range(5) if (value * 10**d).denominator == 1), 4)


def number(value: Fraction, places: int | None = None) -> str:
    """A value with thousands separators: whole numbers as such, others with `places` (or their own) decimals."""
    if value.denominator == 1:
        return f"{int(value):,}"
    return f"{float(value):,.{decimals(value) if places is None else places}f}"
