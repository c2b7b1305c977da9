"""The catalog model nearest in size to a parameter count: one rule for everything that knows a count only.

The teaching widgets show the full model for the catalog model nearest their count (builder.widgets.full_model),
and a bare count (`--params`, front matter's `params:`) takes its shape from the same model wherever a part needs
a shape the count does not give (DeepSpeed ZeRO-3's largest layer and the modules it keeps gathered,
builder.model.zero3): "assumed: shaped like Llama 3 70B". Nearest by ratio: a 7B question is nearer 6.74B than
8.03B. The browser picks with the same rule (NEAREST, sent encoded).

Only a model that can take the run's sequence is a candidate: GPT-2's learned position table has 1,024 rows
(Hugging Face transformers `modeling_gpt2.py`, `wpe = nn.Embedding(config.n_positions, ...)`), so a 1.5B count at
2,048 tokens is priced as the nearest model without that limit (builder.model.checks refuses the longer sequence
for GPT-2 itself). Rotary models have no table to index past and are candidates, but for the families whose training
the model takes only in one narrow form (NO_STAND_IN: gpt-oss).
"""

from __future__ import annotations

from typing import Any

from builder.model.architecture import Architecture, param_count
from builder.model.expr import Expr, best, both, each, either, eq, evaluate, maximum, row, sym


def nearest_row(rows: str | Expr, field: str) -> Expr:
    """The row of table `rows` (an input's name, or a rule making a table) whose `field` is nearest to the `asked`
    input by ratio: the smallest max(value / asked, asked / value), the first such row on a tie."""
    table = sym(rows) if isinstance(rows, str) else rows
    return best(table, -(maximum(sym(field) / sym("asked"), sym("asked") / sym(field))))


# Families whose own training is too narrow to stand in for a bare count: gpt-oss trains only as transformers runs
# it, with eager attention and neither QLoRA nor expert adapters (builder.model.checks), where a count's run takes
# the defaults (SDPA) and any framework.
NO_STAND_IN = ("gpt_oss",)

# The catalog rows that can take a sequence of `tokens` (learned `positions` at least that many, or none: 0) and
# stand in for a count (`stands_in`).
RUNNABLE = each(sym("catalog"), row(both(sym("stands_in"), either(eq(sym("positions"), 0),
                                                                 sym("positions") >= sym("tokens"))),
                                    id=sym("id"), name=sym("name"), parameters=sym("parameters")))

# The catalog model nearest in parameter count among those that can take the run's sequence.
NEAREST = nearest_row(RUNNABLE, "parameters")


def catalog_rows(models: dict[str, Architecture]) -> list[dict[str, Any]]:
    """Every catalog model as the NEAREST rule reads it, in catalog order."""
    return [{"id": key, "name": arch.extra.get("display", key), "parameters": param_count(arch),
             "positions": arch.learned_positions, "stands_in": int(arch.family not in NO_STAND_IN)}
            for key, arch in models.items()]


def nearest_model(models: dict[str, Architecture], params: int, tokens: int = 0) -> str:
    """The id of the catalog model nearest to `params` parameters that can take a sequence of `tokens` (NEAREST;
    0: any model)."""
    return evaluate(NEAREST, {"catalog": catalog_rows(models), "asked": params, "tokens": tokens})["id"]


def assumed_shape(models: dict[str, Architecture], params: int | None, tokens: int = 0) -> Architecture | None:
    """The architecture a bare count of `params` is assumed to have (the nearest catalog model that can take a
    sequence of `tokens`), or None without a count or a catalog."""
    if not params or not models:
        return None
    return models[nearest_model(models, params, tokens)]
