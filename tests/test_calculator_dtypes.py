"""The optimizer states' dtypes and the gradient accumulation dtype (issue 13: every option on the command line, in
front matter and in the calculator).

One rule per refusal (builder.model.checks), so the command line, a page's chart settings and the calculator say the
same sentence: plain SGD keeps no state (torch/optim/sgd.py 2.13: no momentum_buffer without momentum); bitsandbytes'
PagedAdamW keeps fp32 states whatever the parameters' dtype (bitsandbytes 0.50.2.dev0 optimizer.py
Optimizer2State.init_state with optim_bits=32); its 8-bit optimizers and torchao's low-bit AdamW keep block-wise codes
of a fixed dtype (Dettmers et al. 2021, arXiv:2110.02861; torchao 0.19 torchao/optim/subclass_*.py); only Adam and
AdamW keep exp_avg and exp_avg_sq (torch/optim/adam.py, the names MS-AMP's LBAdamW takes as exp_avg_dtype and
exp_avg_sq_dtype). The calculator's controls carry the options' own names and price what the command line prices:
Llama 3 8B has 8,030,261,248 parameters (Meta's model card), so each state's bytes are that count times its dtype's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builder.catalog import default_gpus, default_models
from builder.content import read_page
from builder.grids import make_config
from builder.model import Config
from builder.model.config import validate_config
from builder.widgets import calculator as calc
from builder.widgets.packed import unpack
from tests.test_cli import run

MODELS = default_models()
GPUS = calc.catalog_gpus(default_gpus())
N = 8_030_261_248  # Llama 3 8B (Meta's model card)

# (the settings, in Config's and the form's words; the flags; the sentence after "option: ")
REFUSED = [
    ({"optimizer": "adam8bit", "optimizer_state_dtype": "bf16"}, "optimizer_state_dtype",
     "adam8bit has no state dtype to choose (its blockwise low-bit states are fixed); leave optimizer_state_dtype "
     "unset or choose another optimizer"),
    ({"optimizer": "paged-adamw8bit", "optimizer_state_dtype": "fp16"}, "optimizer_state_dtype",
     "paged-adamw8bit has no state dtype to choose (its blockwise low-bit states are fixed); leave "
     "optimizer_state_dtype unset or choose another optimizer"),
    ({"optimizer": "adamw4bit", "optimizer_state_dtype": "fp8"}, "optimizer_state_dtype",
     "adamw4bit has no state dtype to choose (its blockwise low-bit states are fixed); leave optimizer_state_dtype "
     "unset or choose another optimizer"),
    ({"optimizer": "paged-adamw", "optimizer_state_dtype": "bf16"}, "optimizer_state_dtype",
     "paged-adamw has no state dtype to choose (bitsandbytes' PagedAdamW keeps fp32 states); leave "
     "optimizer_state_dtype unset or choose another optimizer"),
    ({"optimizer": "sgd", "optimizer_state_dtype": "bf16"}, "optimizer_state_dtype",
     "sgd has no state dtype to choose (plain SGD keeps no state); leave optimizer_state_dtype unset or choose "
     "another optimizer"),
    ({"optimizer": "lion", "exp_avg_dtype": "fp8"}, "exp_avg_dtype",
     "only Adam and AdamW keep exp_avg; optimizer lion has none (leave exp_avg_dtype unset or choose optimizer adam "
     "or adamw)"),
    ({"optimizer": "sgd-momentum", "exp_avg_sq_dtype": "fp16"}, "exp_avg_sq_dtype",
     "only Adam and AdamW keep exp_avg_sq; optimizer sgd-momentum has none (leave exp_avg_sq_dtype unset or choose "
     "optimizer adam or adamw)"),
    # DeepSpeed (commit edaa722) stage_1_and_2.py: ZeRO-2 partitions the gradients and accumulates in their own dtype.
    ({"zero": 2, "dp": 8, "grad_accum_dtype": "fp32"}, "grad_accum_dtype",
     "DeepSpeed's ZeRO stage 2 accumulates gradients in their own dtype (bf16) whatever grad_accum_dtype says, so "
     "fp32 would change nothing; leave grad_accum_dtype out, or use zero 1 (BF16_Optimizer's fp32 buffer) or zero 3 "
     "(fp32 gradient partitions)"),
]


def flags(settings: dict) -> list[str]:
    """The command line's words for Config settings."""
    return [word for option, value in settings.items() for word in ("--" + option.replace("_", "-"), str(value))]


def form(settings: dict) -> dict[str, str]:
    """The calculator's form state for Config settings (its controls carry the options' names; zero is 'shard')."""
    return calc.default_state({"model": "llama-3-8b", **settings}, MODELS, "h100-80gb")


@pytest.mark.parametrize("settings, option, words", REFUSED, ids=[f"{r[1]}-{r[0].get('optimizer', 'zero2')}"
                                                                   for r in REFUSED])
def test_one_sentence_on_the_command_line_in_front_matter_and_in_the_calculator(settings, option, words, capsys,
                                                                                tmp_path):
    message = f"{option}: {words}"
    with pytest.raises(ValueError) as error:
        validate_config(Config(model=MODELS["llama-3-8b"], **settings))
    assert str(error.value) == message
    # The command line: exit 2, one line naming the flag.
    code, out, err = run(capsys, "estimate", "--model", "llama-3-8b", *flags(settings))
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert f"argument --{option.replace('_', '-')}: {words}" in err and "Traceback" not in err
    # A page's chart settings: file and line of the option.
    lines = "\n".join(f"        {key}: {value}" for key, value in settings.items())
    page_file = tmp_path / "page.md"
    page_file.write_text(f"""---
title: T
slug: t
order: 1
summary: S
charts:
  c:
    title: T
    description: D
    unit: GiB
    gpus: [h100-80gb]
    bars:
      - label: x
        model: llama-3-8b
{lines}
---
Body.
""", encoding="utf-8")
    page, errors = read_page(page_file, "page.md")
    assert errors == []
    _, errors = make_config(page.charts["c"].bars[0], {}, MODELS, "page.md")
    line = 15 + list(settings).index(option)
    assert [str(e) for e in errors] == [f"page.md:{line}: bar 'x': front matter `{option}`: {words}"]
    # The calculator, from a form state with the same settings: the same sentence, no figure.
    result = calc.results(form(settings), MODELS, GPUS, [])
    assert result["error"] == message and result["summary"].endswith(message)


def test_the_rules_replace_validate_configs_own_copy():
    """validate_config has no sentence of its own for these options: builder.model.checks holds them, and the
    calculator's data carries them as rules."""
    source = (Path(__file__).resolve().parents[1] / "builder" / "model" / "config.py").read_text(encoding="utf-8")
    assert "has no state dtype to choose" not in source and "only Adam and AdamW keep" not in source
    checks = json.dumps(unpack(calc.script_data(MODELS, GPUS, [], form({}))["model"])["checks"])
    assert "has no state dtype to choose" in checks and "only Adam and AdamW keep" in checks


@pytest.mark.parametrize("settings, part, per_param", [
    # Adam's moments in bf16 instead of fp32: 2 bytes per parameter each (Transformer Math 101's pure bf16).
    ({"optimizer_state_dtype": "bf16"}, "optimizer/adam_m", 2),
    ({"optimizer_state_dtype": "bf16"}, "optimizer/adam_v", 2),
    # FP8-LM section 2.2 / MS-AMP LBAdamW: an fp8 first moment and an fp16 second moment.
    ({"exp_avg_dtype": "fp8"}, "optimizer/adam_m", 1),
    ({"exp_avg_sq_dtype": "fp16"}, "optimizer/adam_v", 2),
    ({"exp_avg_dtype": "fp8"}, "optimizer/adam_v", 4),  # the other moment keeps the policy's fp32
    # An fp32 accumulation buffer beside bf16 gradients (DeepSpeed data_types.grad_accum_dtype; Megatron's main_grad).
    ({"grad_accum_dtype": "fp32"}, "gradients/accumulation_buffer", 4),
])
def test_each_control_prices_what_the_command_line_prices(settings, part, per_param, capsys):
    """Llama 3 8B on one GPU, bf16 mixed precision with AdamW: the calculator's form with the control set, the
    command line with the flag and a page's settings give one Config, and the state's bytes are the published
    parameter count times the dtype's size."""
    state = form(settings)
    assert all(state[option] == value for option, value in settings.items())  # front matter's words, the form's keys
    config = calc.config_from_state(state, MODELS)
    result = calc.results(state, MODELS, GPUS, [])
    code, out, _ = run(capsys, "estimate", "--model", "llama-3-8b", *flags(settings), "--json")
    cli = json.loads(out)
    assert code == 0 and config == Config(model=MODELS["llama-3-8b"], **settings)
    assert {p["name"]: p["bytes"] for p in result["parts"]} == cli["parts"]
    assert result["need"] == cli["need_bytes"] and result["total"] == cli["per_gpu_bytes"]
    assert cli["parts"][part] == per_param * N


def test_deepspeed_zero3_keeps_its_gradient_partitions_in_the_accumulation_dtype(capsys):
    """DeepSpeed (commit edaa722) stage3.py grad_partitions_flat_buffer, dtype=gradient_accumulation_dtype: with
    grad_accum_dtype fp32 under ZeRO-3 on 8 GPUs the gradients are fp32 partitions, no second buffer."""
    settings = {"zero": 3, "dp": 8, "grad_accum_dtype": "fp32"}
    state = form(settings)
    assert state["sharding"] == "3" and state["grad_accum_dtype"] == "fp32"
    result = calc.results(state, MODELS, GPUS, [])
    code, out, _ = run(capsys, "estimate", "--model", "llama-3-8b", *flags(settings), "--json")
    cli = json.loads(out)
    parts = {p["name"]: p["bytes"] for p in result["parts"]}
    assert code == 0 and parts == cli["parts"] and result["need"] == cli["need_bytes"]
    assert parts["gradients"] == 4 * N // 8 and "gradients/accumulation_buffer" not in parts


def test_the_controls_take_the_options_names_and_refuse_other_values():
    """Each control's key is its Config option (the same word in front matter, on the command line and in a link),
    "policy" leaves the option unset, and a page's setting outside the control's choices is named."""
    keys = calc.link_keys(GPUS, MODELS)
    for option in ("optimizer_state_dtype", "exp_avg_dtype", "exp_avg_sq_dtype", "grad_accum_dtype"):
        assert keys[option][0] == "choice" and "policy" in keys[option] and "fp32" in keys[option]
        assert calc.MODE_ONLY[option] == "train"
        assert getattr(calc.config_from_state(form({}), MODELS), option) is None
    with pytest.raises(ValueError, match="option 'exp_avg_dtype': 'bool' is not one of the calculator's choices"):
        form({"exp_avg_dtype": "bool"})
