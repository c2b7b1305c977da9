"""The calculator's form state -> the model's inputs as rules (builder/widgets/calculator_state.py): the rules the
script evaluates give, for any form state, exactly the inputs builder.model.inputs.config_inputs gives for the Config
that config_from_state builds from the same rules; the gating of hidden fields holds (DeepSpeed ZeRO-3's
zero_optimization.stage3_* limits count with stage 3 only, DeepSpeed's reduce_bucket_size and overlap_comm with a
ZeRO stage and not FSDP or Megatron-LM, PyTorch DDP's gradient_as_bucket_view with no sharding)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from builder.catalog import default_gpus, default_models
from builder.model.inputs import architecture_inputs
from builder.model.config import MEGATRON_PRECISIONS, PRECISIONS
from builder.model.inputs import config_inputs
from builder.widgets import calculator as calc
from builder.widgets import calculator_state as rules
from builder.widgets import full_model

MODELS = default_models()
GPUS = calc.catalog_gpus(default_gpus())
DEFAULTS = calc.default_state({"model": "llama-3-8b"}, MODELS, GPUS[0][0])
# Each control's possible values: a choice's own, a box's 0 and 1, a few numbers (0 and the defaults included).
NUMBERS = ["0", "1", "2", "3", "4", "8", "17", "100", "4096", "100000000", "500000000", "1000000000"]
CHOICES = {control.key: [value for value, _ in control.choices] or (["0", "1"] if control.kind == "check" else
                                                                    ["0", "0.05", "0.5", "1"] if control.step != "1"
                                                                    else NUMBERS)
           for _, _, controls in calc.form_groups(GPUS, MODELS) for control in controls
           if control.key not in calc.ARCH_KEYS and control.key not in ("start", "gpu", "unit", "model")}


def run_inputs_of(state: dict[str, str]) -> dict:
    """What the script computes: the two rule sets over the typed form state."""
    effective = calc.effective_state(state)
    env = {rules.POLICIES: {name: full_model.policy_inputs(name) for name in PRECISIONS},
           **architecture_inputs(MODELS[state["model"]]), **rules.typed(effective, calc.CONTROL_TYPES)}
    env = rules.RUN_RULES.environment(rules.FORM_RULES.environment(env))
    return {name: env[name] for name in rules.RUN_INPUTS}


@settings(max_examples=400, deadline=None)
@given(st.fixed_dictionaries({key: st.sampled_from(values) for key, values in CHOICES.items()}),
       st.sampled_from(sorted(MODELS)))
def test_the_scripts_rules_give_config_inputs_for_any_form_state(changes, model):
    state = DEFAULTS | changes | {"model": model}
    want = config_inputs(calc.config_from_state(state, MODELS))
    got = run_inputs_of(state)
    assert {name: got[name] for name in got} == {name: want[name] for name in got}


def test_the_form_sets_every_input_but_the_fixed_ones():
    assert set(rules.RUN_INPUTS) | set(calc.FIXED_INPUTS) == set(config_inputs(calc.config_from_state(DEFAULTS, MODELS)))
    assert not set(rules.RUN_INPUTS) & set(calc.FIXED_INPUTS)


def test_hidden_fields_count_only_where_they_show():
    zero3 = DEFAULTS | {"sharding": "3", "dp": "8", "stage3_max_live_parameters": "100000000"}
    # DeepSpeed edaa722 runtime/zero/config.py: stage3_max_live_parameters applies to stage 3 only.
    assert calc.config_from_state(zero3, MODELS).stage3_max_live_parameters == 10**8
    assert calc.config_from_state(zero3 | {"sharding": "2"}, MODELS).stage3_max_live_parameters is None
    # DeepSpeed's reduce_bucket_size (default 5e8) counts with a ZeRO stage, not under FSDP nor in a Megatron-LM run:
    # implementation megatron, or a Megatron precision (its zero 1 is Megatron's distributed optimizer,
    # builder.model.buckets), each of them.
    bucket = DEFAULTS | {"sharding": "1", "dp": "8", "reduce_bucket_size": "200000000", "overlap_comm": "on"}
    assert calc.config_from_state(bucket, MODELS).reduce_bucket_size == 2 * 10**8
    assert calc.config_from_state(bucket, MODELS).overlap_comm is True
    megatron = [{"precision": name} for name in MEGATRON_PRECISIONS]
    assert {"precision": "megatron-bf16"} in megatron and {"precision": "te-fp8"} in megatron
    for other in ({"sharding": "FULL_SHARD"}, {"implementation": "megatron"}, {"sharding": "0"}, *megatron):
        config = calc.config_from_state(bucket | other, MODELS)
        assert config.reduce_bucket_size is None and config.overlap_comm is None and config.contiguous_gradients
    # PyTorch DDP's gradient_as_bucket_view: a DDP run only (no ZeRO, no FSDP).
    ddp = DEFAULTS | {"dp": "8", "gradient_as_bucket_view": "1"}
    assert calc.config_from_state(ddp, MODELS).gradient_as_bucket_view
    assert not calc.config_from_state(ddp | {"sharding": "NO_SHARD"}, MODELS).gradient_as_bucket_view


def test_the_stylesheet_hides_deepspeeds_buckets_in_a_megatron_run():
    """Without the script too, the DeepSpeed bucket fields hide where the form does not pass them (FORM_RULES'
    _DEEPSPEED): implementation megatron, and each Megatron precision (builder.model.config.MEGATRON_PRECISIONS)."""
    import re
    from pathlib import Path

    css = (Path(__file__).resolve().parent.parent / "static" / "widgets.css").read_text(encoding="utf-8")
    hidden = re.findall(r"\[name=precision\] option\[value=([\w-]+)\]:checked\) \[data-show=deepspeed\]", css)
    assert sorted(hidden) == sorted(MEGATRON_PRECISIONS)
    assert "[name=implementation] option[value=megatron]:checked) [data-show=deepspeed]" in css


def test_the_script_gets_the_rules_and_no_mapping_of_its_own():
    data = calc.script_data(MODELS, GPUS, [], DEFAULTS)
    # The controls' types are not sent: the script reads each from its input (tests/test_widgets_calculator.py
    # holds that reading equal to CONTROL_TYPES).
    assert data["form"] == rules.encode() and "types" not in data
    assert calc.CONTROL_TYPES["lora_dropout"] == "number" and calc.CONTROL_TYPES["virtual_stages"] == "count"
    assert calc.CONTROL_TYPES["sequence_parallel"] == "box" and calc.CONTROL_TYPES["sharding"] == "choice"
