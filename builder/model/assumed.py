"""The catalog model nearest in size to a parameter count: one rule for everything that knows a count only.

The teaching widgets show the full model for the catalog model nearest their count (builder.widgets.full_model),
and a bare count (`--params`, front matter's `params:`) takes its shape from the same model wherever a part needs
a shape the count does not give (DeepSpeed ZeRO-3's largest layer and the modules it keeps gathered,
builder.model.zero3): "assumed: shaped like Llama 3 70B". Nearest by ratio: a 7B question is nearer 6.74B than
8.03B. The browser picks with the same rule (NEAREST, sent encoded).
"""

from __future__ import annotations

from typing import Any

from builder.model.architecture import Architecture, param_count
from builder.model.expr import Expr, best, evaluate, maximum, sym


def nearest_row(rows: str, field: str) -> Expr:
    """The row of table `rows` whose `field` is nearest to the `asked` input by ratio: the smallest
    max(value / asked, asked / value), the first such row on a tie."""
    return best(sym(rows), -(maximum(sym(field) / sym("asked"), sym("asked") / sym(field))))


# The catalog model nearest in parameter count.
NEAREST = nearest_row("catalog", "parameters")


def catalog_rows(models: dict[str, Architecture]) -> list[dict[str, Any]]:
    """Every catalog model as the NEAREST rule reads it, in catalog order."""
    return [{"id": key, "name": arch.extra.get("display", key), "parameters": param_count(arch)}
            for key, arch in models.items()]


def nearest_model(models: dict[str, Architecture], params: int) -> str:
    """The id of the catalog model nearest to `params` parameters (NEAREST)."""
    return evaluate(NEAREST, {"catalog": catalog_rows(models), "asked": params})["id"]


def assumed_shape(models: dict[str, Architecture], params: int | None) -> Architecture | None:
    """The architecture a bare count of `params` is assumed to have (the nearest catalog model), or None without
    a count or a catalog."""
    if not params or not models:
        return None
    return models[nearest_model(models, params)]
