"""torchtune has no mixed precision: the model refuses any precision but bf16 and fp32 under implementation torchtune.

Read at torchtune commit 30b8519 (content/references.toml torchtune-30b8519):
- torchtune/training/precision.py: PRECISION_STR_TO_DTYPE maps "fp16", "bf16", "fp32", "fp64" to one torch.dtype;
  get_dtype(cfg.dtype) returns that one dtype (fp32 when none is given);
- recipes/full_finetune_single_device.py, full_finetune_distributed.py, lora_finetune_single_device.py,
  lora_finetune_distributed.py: self._dtype = training.get_dtype(cfg.dtype, ...); fp16 raises ("full fp16 training is
  not supported with this recipe. Please use bf16 or fp32 instead."; the LoRA recipe: "fp16 precision is not supported
  in this recipe. Please use fp32 or bf16."); the model is built under training.set_default_dtype(self._dtype); the
  distributed recipes shard with training.shard_model, fully_shard with reshard_after_forward and an optional
  CPUOffloadPolicy, no MixedPrecisionPolicy; no recipe enters torch.autocast. Their docstrings: "When dtype=bf16, all
  activations, gradients and optimizer states are in bfloat16 ... Mixed precision training and fp16 precision are
  currently not supported."
So with torch.optim.AdamW (its moments zeros_like the parameter) a full bf16 fine-tune keeps 2 + 2 + 2 + 2 = 8 bytes
a parameter, no fp32 master copy: the published torchtune rows the model is pinned to (builder/validate/published.py,
tests/test_published.py, tests/test_fsdp_units.py, tests/test_lora_torchtune_model.py) are all at precision bf16.
"""

from __future__ import annotations

import pytest

from builder.catalog import default_models
from builder.cli import main
from builder.model import Config, estimate
from builder.model.config import validate_config
from builder.validate.published import training

MODELS = default_models()
LLAMA_3B = MODELS["llama-3.2-3b"]
FULL = Config(model=LLAMA_3B, precision="bf16", implementation="torchtune", optimizer="adamw", micro_batch=2,
              seq_len=4096, attention="flash")
LORA = FULL.with_changes(lora_rank=8, lora_targets=("q", "v"))
QLORA = LORA.with_changes(qlora=True)
FSDP = FULL.with_changes(model=MODELS["llama-3.1-70b"], fsdp="FULL_SHARD", dp=8, recompute="full")
RUNS = {"full": FULL, "lora": LORA, "qlora": QLORA, "fsdp": FSDP}
WORDS = ("precision: torchtune trains in one dtype, its recipes' bf16 or fp32 (weights, gradients, optimizer states "
         "and activations alike, no master copy, no torch.autocast); choose precision bf16 or fp32 without per-state "
         "dtypes, not ")


@pytest.mark.parametrize("run", sorted(RUNS))
@pytest.mark.parametrize("precision, states", [
    ("bf16-mixed", "bf16 weights, bf16 gradients, fp32 optimizer states and bf16 activations plus a master copy (fp32)"),
    ("fp16-mixed", "fp16 weights, fp16 gradients, fp32 optimizer states and fp16 activations plus a master copy (fp32)"),
    ("megatron-bf16", "bf16 weights, fp32 gradients, fp32 optimizer states and bf16 activations plus a master copy "
                      "(fp32)"),
    ("amp-bf16", "fp32 weights, fp32 gradients, fp32 optimizer states and bf16 activations under torch.autocast"),
    ("bf16-autocast", "bf16 weights, bf16 gradients, bf16 optimizer states and bf16 activations under torch.autocast"),
])
def test_a_precision_torchtune_does_not_have_is_refused(run, precision, states):
    """Full fine-tuning, LoRA, QLoRA and FSDP alike: one line naming precision and the dtypes asked for."""
    with pytest.raises(ValueError) as refused:
        validate_config(RUNS[run].with_changes(precision=precision))
    assert str(refused.value) == WORDS + states


@pytest.mark.parametrize("override, states", [
    ({"grad_dtype": "fp32"}, "bf16 weights, fp32 gradients, bf16 optimizer states and bf16 activations"),
    ({"master_dtype": "fp32"}, "bf16 weights, bf16 gradients, bf16 optimizer states and bf16 activations plus a "
                               "master copy (fp32)"),
    ({"optimizer_state_dtype": "fp32"}, "bf16 weights, bf16 gradients, fp32 optimizer states and bf16 activations"),
    ({"exp_avg_sq_dtype": "fp32"}, "bf16 weights, bf16 gradients, bf16 optimizer states and bf16 activations"),
    ({"param_dtype": "fp32"}, "fp32 weights, bf16 gradients, bf16 optimizer states and bf16 activations"),
])
def test_a_state_in_another_dtype_is_refused(override, states):
    """torch.optim.AdamW's moments are zeros_like the parameter and autograd's gradients take its dtype: a state
    given another dtype is not a torchtune run."""
    with pytest.raises(ValueError) as refused:
        validate_config(FULL.with_changes(**override))
    assert str(refused.value) == WORDS + states


@pytest.mark.parametrize("run", sorted(RUNS))
@pytest.mark.parametrize("precision", ["bf16", "fp32"])
def test_bf16_and_fp32_are_taken(run, precision):
    validate_config(RUNS[run].with_changes(precision=precision))


def test_full_bf16_keeps_8_bytes_a_parameter_no_master_copy():
    """bf16 weights, gradients and AdamW's two moments, 8 B a parameter: Llama 3.2 3B's 3,212,749,824 parameters
    (tied embeddings) take 25,701,998,592 B, what bf16-mixed's 16 B (with the fp32 master and moments) would double."""
    b = estimate(FULL)
    params = 3_212_749_824
    assert b.get("weights") == b.get("gradients") == b.get("optimizer/adam_m") == b.get("optimizer/adam_v") == 2 * params
    assert b.get("optimizer/master", default=0) == 0
    assert sum(b.get(p) for p in ("weights", "gradients", "optimizer/adam_m", "optimizer/adam_v")) == 25_701_998_592


def test_every_published_torchtune_case_is_a_bf16_run_the_model_takes():
    """The README rows builder/validate/published.py compares with (full_finetune_single_device, dtype bf16)."""
    cases = [case for case in training(MODELS) if case.config.implementation == "torchtune"]
    assert cases and {case.config.precision for case in cases} == {"bf16"}
    for case in cases:
        validate_config(case.config)


def test_the_command_line_names_precision(capsys):
    """Left out, --precision is bf16-mixed, which torchtune does not have: one line naming the flag."""
    assert main(["estimate", "--model", "llama-3.2-3b", "--implementation", "torchtune"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("python -m builder estimate: error: argument --precision: torchtune "
                                               "trains in one dtype")
    assert main(["estimate", "--model", "llama-3.2-3b", "--implementation", "torchtune", "--precision", "bf16"]) == 0
