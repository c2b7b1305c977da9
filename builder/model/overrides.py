"""An override wins over the precision policy: the one rule, as an expression (builder.model.expr), that
builder.model.config.Config.policy evaluates for every per-state dtype option and the calculator's form rules
(builder.widgets.calculator_state.RUN_RULES) send to the browser for the options its form sets.

A named precision policy (config.PRECISIONS) sets a dtype for each model state; each Config option below, when set,
replaces that one dtype (Config's comments: "overrides the policy's weight dtype", ...), and `master_dtype` "none"
removes the master copy (PyTorch's torch.autocast with fp32 parameters, or pure bf16, keep none). The rules read the
resolved dtype by the option's own name (builder.model.inputs.config_inputs), "" for a state that is not kept.
"""

from __future__ import annotations

from typing import Any

from builder.model.expr import Expr, eq, lift, sym, when

# Each override option -> the PrecisionPolicy field it replaces.
POLICY_OVERRIDES = {"param_dtype": "param", "master_dtype": "master", "grad_dtype": "grad",
                    "optimizer_state_dtype": "optimizer_state", "exp_avg_dtype": "exp_avg",
                    "exp_avg_sq_dtype": "exp_avg_sq", "activation_dtype": "activation"}
# The options whose word NO_STATE means "no such state at all" (Config's master_dtype: "'none' removes it").
REMOVABLE = ("master_dtype",)
NO_STATE = "none"


def overridden(option: str, chosen: Any, policy: Any) -> Expr:
    """The dtype `option` resolves to: `chosen` where one is chosen ("" where none is), else the policy's `policy`;
    "" (no such state) where `chosen` is NO_STATE and the option may remove its state."""
    chosen = lift(chosen)
    rule = when(chosen, chosen, policy)
    return when(eq(chosen, NO_STATE), "", rule) if option in REMOVABLE else rule


# The rule for each option over two symbols, as Config.policy evaluates it.
CHOSEN, POLICY = "chosen", "policy"
RULES = {option: overridden(option, sym(CHOSEN), sym(POLICY)) for option in POLICY_OVERRIDES}
