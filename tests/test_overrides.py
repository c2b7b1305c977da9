"""An override wins over the precision policy, written once (builder/model/overrides.py): Config.policy evaluates the
rule, and the calculator's RUN_RULES send the same rule to the browser (tests/test_calculator_state.py holds those to
config_inputs for any form state)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from builder.model.config import PRECISIONS, Config, PrecisionPolicy
from builder.model.expr import encode, sym, symbols_of
from builder.model.overrides import POLICY_OVERRIDES, overridden
from builder.model.serving import CHOSEN_WEIGHTS
from builder.widgets import calculator_state


def written_out(config: Config) -> PrecisionPolicy:
    """Config.policy as it was written before the rule (each field spelled out)."""
    base = PRECISIONS[config.precision]
    master = base.master if config.master_dtype is None else config.master_dtype
    return replace(base, param=config.param_dtype or base.param, master=None if master == "none" else master,
                   grad=config.grad_dtype or base.grad,
                   optimizer_state=config.optimizer_state_dtype or base.optimizer_state,
                   exp_avg=config.exp_avg_dtype or base.exp_avg, exp_avg_sq=config.exp_avg_sq_dtype or base.exp_avg_sq,
                   activation=config.activation_dtype or base.activation)


DTYPES = st.sampled_from((None, "fp32", "bf16", "fp16", "fp8"))


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.sampled_from(sorted(PRECISIONS)), st.fixed_dictionaries(
    {option: (st.one_of(DTYPES, st.just("none")) if option == "master_dtype" else DTYPES)
     for option in POLICY_OVERRIDES}))
def test_the_rule_gives_the_policy_as_it_was_written_out(precision, overrides):
    config = Config(precision=precision, **overrides)
    assert config.policy == written_out(config)


def test_an_override_replaces_one_dtype_and_none_removes_the_master_copy():
    mixed = Config(precision="bf16-mixed")
    assert (mixed.policy.param, mixed.policy.master, mixed.policy.optimizer_state) == ("bf16", "fp32", "fp32")
    assert Config(precision="bf16-mixed", master_dtype="none").policy.master is None
    assert Config(precision="bf16-mixed", optimizer_state_dtype="bf16").policy.optimizer_state == "bf16"
    assert Config(precision="bf16-mixed", optimizer_state_dtype="bf16").policy.param == "bf16"
    # MS-AMP O2 keeps Adam's moments in fp8 and fp16 (exp_avg, exp_avg_sq); an override replaces one of them only.
    msamp = Config(precision="msamp-o2", exp_avg_dtype="fp16").policy
    assert (msamp.exp_avg, msamp.exp_avg_sq, msamp.master) == ("fp16", "fp16", None)
    # "none" removes only a state that may be left out: a weight dtype of "none" stays a (refused) dtype name.
    assert Config(param_dtype="none").policy.param == "none"


def test_the_calculator_sends_the_same_rule():
    """The weights' choice goes through the rule Config.policy evaluates too (builder.model.serving.CHOSEN_WEIGHTS:
    a served checkpoint published quantised keeps its own format unless the form names another dtype)."""
    for option, chosen in calculator_state.CHOSEN.items():
        rule = calculator_state.RUN_RULES.symbols[option]
        expected = overridden(option, CHOSEN_WEIGHTS if option == "param_dtype" else sym(chosen),
                              calculator_state._policy(option))
        assert encode(rule) == encode(expected)
    assert set(symbols_of(CHOSEN_WEIGHTS)) == {"chosen_param_dtype", "mode", "checkpoint_quantization"}
