"""A Megatron-LM run (a Megatron precision, or implementation megatron) is refused the options of other frameworks,
each with Megatron-LM's own words, read in Megatron-LM commit d98e8a6:

- megatron/training/training.py train_step: `optimizer.step()` after forward_backward_func, with or without the
  distributed optimizer: no optimizer step inside backward;
- megatron/training/checkpointing.py save_checkpoint, with `ckpt_format = "torch_dist"` by default
  (megatron/training/config/training_config.py): Megatron's own distributed checkpointing, which the model does not
  price, so no torch.save, DCP or DeepSpeed save stands in for it;
- megatron/core/distributed/param_and_grad_buffer.py group_params_for_buffers: the micro-batches' gradients
  accumulate in the grad buffer (main_grad) in its own dtype; DeepSpeed's data_types.grad_accum_dtype means nothing.

Under an FSDP strategy the model counts PyTorch FSDP, whose options stay open.
"""

from __future__ import annotations

import pytest

from builder.catalog import default_models
from builder.model import Config, validate_config

LLAMA = default_models()["llama-3-8b"]
MEGATRON_RUNS = [dict(precision="megatron-bf16", dp=8), dict(precision="megatron-bf16", dp=8, zero=1),
                 dict(implementation="megatron", precision="bf16-mixed", dp=8)]


def refusal(**changes) -> str:
    with pytest.raises(ValueError) as refused:
        validate_config(Config(model=LLAMA, seq_len=4096, **changes))
    return str(refused.value)


@pytest.mark.parametrize("run", MEGATRON_RUNS)
def test_megatron_steps_after_backward(run):
    message = refusal(optimizer_impl="in-backward", **run)
    assert message.startswith("optimizer_impl: Megatron-LM steps its optimizer after backward "
                              "(megatron/training/training.py train_step: optimizer.step(), Megatron-LM d98e8a6)")
    # The same step inside backward is open to a run that is not Megatron-LM's.
    validate_config(Config(model=LLAMA, seq_len=4096, optimizer_impl="in-backward", dp=8))


@pytest.mark.parametrize("save", ["torch-save", "dcp", "deepspeed", "deepspeed-16bit"])
@pytest.mark.parametrize("run", MEGATRON_RUNS)
def test_megatron_saves_its_own_way(run, save):
    message = refusal(checkpoint_save=save, **run)
    named = "a Megatron precision" if run["precision"] == "megatron-bf16" else "implementation megatron"
    assert message.startswith(f"checkpoint_save: a Megatron-LM run ({named}) saves with Megatron-LM's own "
                              "checkpointing"), message
    assert f"not modelled, not with {save}" in message
    # Before this refusal, zero 1 under a Megatron precision was told to choose a DeepSpeed save.
    assert "DeepSpeed" not in message


def test_pytorch_fsdp_under_a_megatron_precision_keeps_its_saves():
    validate_config(Config(model=LLAMA, seq_len=4096, precision="megatron-bf16", fsdp="FULL_SHARD", dp=8,
                           checkpoint_save="dcp"))


@pytest.mark.parametrize("run, grad_dtype", [(MEGATRON_RUNS[0], "fp32"), (MEGATRON_RUNS[2], "bf16")])
def test_megatron_accumulates_in_its_grad_buffer(run, grad_dtype):
    message = refusal(grad_accum_dtype="fp32", **run)
    assert message.startswith("grad_accum_dtype: DeepSpeed's data_types.grad_accum_dtype; a Megatron-LM run")
    assert f"accumulates gradients in its grad buffer (main_grad), in grad_dtype ({grad_dtype})" in message
    # DeepSpeed's own bf16 optimizer takes it (deepspeed/runtime/engine.py _do_optimizer_sanity_check, edaa722).
    validate_config(Config(model=LLAMA, seq_len=4096, grad_accum_dtype="fp32", dp=8, zero=1))
