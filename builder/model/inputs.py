"""What the rules read: one pipeline stage of a configured run as flat, named inputs.

Names are full words (the calculator's controls and the URL state use the same ones), numbers are
exact, choices are their names, and tables (the bytes of each dtype) are mappings. The rule sets of
builder.model (serving, ...) read only these and the symbols they derive themselves.
"""

from __future__ import annotations

from typing import Any

from builder.model.architecture import Architecture
from builder.model.config import Config
from builder.model.placement import Stage
from builder.model.units import DTYPE_BYTES


def architecture_inputs(arch: Architecture) -> dict[str, Any]:
    """An architecture's shape as the rules read it (the custom-architecture controls' names)."""
    return {"layers": arch.layers, "hidden": arch.hidden, "heads": arch.heads, "kv_heads": arch.n_kv_heads,
            "head_dim": arch.d_head, "ffn": arch.ffn, "expert_ffn": arch.n_expert_ffn, "vocab": arch.vocab,
            "experts": arch.experts, "top_k": arch.top_k, "sliding_window": arch.sliding_window or 0}


def rule_inputs(arch: Architecture, config: Config, stage: Stage) -> dict[str, Any]:
    """Everything a rule set may read for one stage of `config` (its architecture `arch`)."""
    policy = config.policy
    return {**architecture_inputs(arch),
            "mode": config.mode, "tp": config.tp, "batch": config.batch, "context": config.context,
            "kv_dtype": config.kv_dtype or "", "param_dtype": policy.param, "activation_dtype": policy.activation,
            "stage_layers": stage.layers, "dtype_bytes": DTYPE_BYTES}
