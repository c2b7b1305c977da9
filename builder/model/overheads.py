"""The named overheads as rules: allocator reserve, a framework percentage, a fixed amount, the CUDA context.

Each is an assumption, named as one. The percentages apply to what is allocated (`allocated`: the sum of
the other parts, or what is live at a moment of the step).
"""

from __future__ import annotations

from builder.model.cite import Cite
from builder.model.expr import fixed, fmt, sym
from builder.model.partrules import PartRule, RuleSet

CONTEXT = (Cite("pytorch-cuda-notes", "memory management") + " (the CUDA context and loaded kernels are not counted "
           "by the caching allocator; typically 0.3-2 GiB, depending on the CUDA version and lazy module loading)")
ALLOCATOR = Cite("pytorch-cuda-notes", "memory management") + " (the caching allocator: reserved minus allocated)"
FLAT = "a common calculator rule: a flat 10% for allocator, NCCL buffers and workspaces"


def percent(fraction_symbol: str):
    """A fraction as a whole percentage: 0.1 -> '10%'."""
    return fmt("{0}%", fixed(sym(fraction_symbol) * 100, 0))


OVERHEADS = RuleSet(
    symbols={},
    parts=(
        PartRule("overhead/allocator_reserve", sym("allocated") * sym("allocator_reserve"),
                 fmt("{0} of allocated", percent("allocator_reserve")), ALLOCATOR, percent("allocator_reserve"),
                 "assumed fraction", when=sym("allocator_reserve")),
        PartRule("overhead/framework", sym("allocated") * sym("overhead_fraction"),
                 fmt("{0} of the parts above", percent("overhead_fraction")), FLAT, percent("overhead_fraction"),
                 "assumed percentage, not derived", when=sym("overhead_fraction")),
        PartRule("overhead/fixed", sym("overhead_bytes"), "fixed amount given by the user", "user assumption", "fixed",
                 "assumed", when=sym("overhead_bytes")),
        PartRule("overhead/cuda_context", sym("cuda_context_bytes"), "fixed per process", CONTEXT, "fixed",
                 "assumed size; depends on CUDA version, lazy loading and kernels loaded",
                 when=sym("cuda_context_bytes")),
    ),
)
