"""Which optimizer step a run gets with optimizer_impl unset: the optimizer its framework builds (builder.model.
optimizers' DEFAULT_IMPL), each default pinned to the source line it follows, and DeepSpeed's ZeRO handing the optimizer
one flat (sub-)group at a time (builder.model.step's foreach bound).

Sources (read at the commits content/references.toml cites):
- DeepSpeed edaa722, deepspeed/runtime/engine.py _configure_basic_optimizer: for the config's optimizer Adam or AdamW,
  `if torch_adam: torch.optim.AdamW(...)`, else `if self.zero_use_cpu_optimizer(): DeepSpeedCPUAdam(...)`, else
  `FusedAdam(model_parameters, **optimizer_parameters, adam_w_mode=effective_adam_w_mode)`; for Lion, FusedLion unless
  offloaded. deepspeed/ops/adam/fused_adam.py FusedAdam.step: one multi_tensor_applier(self.multi_tensor_adam, ...) per
  dtype, in place.
- DeepSpeed edaa722, deepspeed/runtime/zero/stage3.py _optimizer_step: `self.optimizer.param_groups[param_group_id]
  ['params'] = [fp32_param]` for one sub-group, then step; step() loops `for sub_group_id, group in enumerate(self.
  fp16_groups)`. _create_fp16_sub_groups closes a sub-group once its partitions reach sub_group_size (config.py
  sub_group_size: int = Field(pp_int(1e9))). stage_1_and_2.py _optimizer_step: `self.optimizer.param_groups =
  [original_param_groups[group_no]]`, one group's flat fp32 partition.
- Megatron-LM d98e8a6, megatron/core/optimizer/__init__.py: `from transformer_engine.pytorch.optimizers import
  FusedAdam as Adam`, else `from apex.optimizers import FusedAdam as Adam`, torch.optim.AdamW only when neither imports.
- Megatron-LM d98e8a6, megatron/training/arguments.py (the --bf16 branch of validate_args): `elif not
  args.accumulate_allreduce_grads_in_fp32 and args.main_grads_dtype == torch.float32:
  args.accumulate_allreduce_grads_in_fp32 = True`, so a --bf16 run keeps fp32 main grads (unless --grad-reduce-in-bf16).
- PyTorch 2.13 (installed), torch/optim/optimizer.py _default_to_fused_or_foreach and transformers 5.23 (installed),
  training_args.py default_optim: checked against the installed packages below.
"""

from __future__ import annotations

import importlib
import inspect

from builder.catalog import default_gpus, default_models
from builder.model import Config, estimate
from builder.model.peak import need, phases
from builder.widgets.calculator import config_from_state, start_state

MODELS = default_models()
H100 = default_gpus()["h100-80gb"].usable_bytes
GIB = 2**30


def step_temporaries(config: Config) -> int:
    """The optimizer step's own temporaries in `config` (0 where the step allocates none)."""
    step = next(phase for phase in phases(config) if phase.name == "optimizer_step")
    return next((part.bytes for part in step.parts if part.name == "optimizer/step_temporaries"), 0)


def llama8b(**changes) -> Config:
    return Config(model=MODELS["llama-3-8b"], seq_len=1024, **changes)


def test_engine_configure_basic_optimizer_builds_fused_adam_under_deepspeed_zero():
    """engine.py _configure_basic_optimizer: ZeRO's Adam and AdamW are FusedAdam, its Lion FusedLion (fused, no
    temporaries); DeepSpeed has no SGD or Adafactor type, so those stay torch.optim's defaults."""
    for zero in (1, 2, 3):
        for optimizer in ("adamw", "adam", "lion"):
            run = llama8b(dp=8, zero=zero, optimizer=optimizer)
            assert step_temporaries(run) == 0
            assert need(run).bytes == need(run.with_changes(optimizer_impl="fused")).bytes
            assert step_temporaries(run.with_changes(optimizer_impl="foreach")) > 0
        # Adafactor: torch.optim's for-loop (its own default), one tensor of the largest parameter's partition.
        adafactor = llama8b(dp=8, zero=zero, optimizer="adafactor")
        assert step_temporaries(adafactor) == step_temporaries(adafactor.with_changes(optimizer_impl="for-loop")) > 0
    # FSDP is not DeepSpeed: torch.optim's foreach, one second moment's shard.
    fsdp = llama8b(dp=8, fsdp="FULL_SHARD")
    assert step_temporaries(fsdp) == estimate(fsdp).get("optimizer/adam_v") > 0


def test_megatron_core_optimizer_init_imports_transformer_engine_fused_adam():
    """megatron/core/optimizer/__init__.py: Adam is Transformer Engine's (or Apex's) FusedAdam, replicated or with the
    distributed optimizer (zero 1 in a Megatron-LM run). A Megatron precision names Megatron-LM by itself (only it keeps
    the main_grad buffer), so its run builds the same fused Adam under transformers' op list (implementation hf)."""
    for zero in (0, 1):
        for implementation in ("megatron", "hf"):
            run = llama8b(dp=8, zero=zero, implementation=implementation, precision="megatron-bf16")
            assert step_temporaries(run) == 0
            assert step_temporaries(run.with_changes(optimizer_impl="foreach")) == estimate(run).get("optimizer/adam_v")
    # A precision PyTorch shares (bf16-mixed) names no framework without implementation megatron: torch.optim's foreach.
    assert step_temporaries(llama8b(dp=8, precision="bf16-mixed")) > 0


def test_optimizer_default_to_fused_or_foreach_picks_foreach_for_a_plain_run():
    """torch/optim/optimizer.py _default_to_fused_or_foreach (PyTorch 2.13): with neither foreach nor fused given,
    fused stays off and foreach is on wherever every parameter is a tensor on a foreach device, CUDA among them. A
    plain run's AdamW step (no framework the model can tell) holds one second moment more."""
    import torch
    from torch.optim.optimizer import _default_to_fused_or_foreach, _get_foreach_kernels_supported_devices

    assert "cuda" in _get_foreach_kernels_supported_devices()
    assert _default_to_fused_or_foreach([], differentiable=False, use_fused=False) == (False, True)
    defaults = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))]).defaults
    assert defaults["foreach"] is None and defaults["fused"] is None
    # torch/optim/adam.py adam (AdamW's too): foreach and fused both None call _default_to_fused_or_foreach.
    assert "_default_to_fused_or_foreach(" in inspect.getsource(importlib.import_module("torch.optim.adam").adam)
    plain = llama8b()
    assert step_temporaries(plain) == estimate(plain).get("optimizer/adam_v") > 0


def test_training_args_default_optim_is_fused_which_the_model_cannot_tell():
    """transformers 5.23 training_args.py: default_optim = "adamw_torch_fused" with torch >= 2.8. The model has no
    setting that says "Hugging Face Trainer", so its default stays torch.optim's foreach: a Trainer run gives
    optimizer_impl fused (the Model states page says so)."""
    from transformers import TrainingArguments

    assert TrainingArguments.__dataclass_fields__["optim"].default == "adamw_torch_fused"
    assert step_temporaries(llama8b()) > 0 and step_temporaries(llama8b(optimizer_impl="fused")) == 0


def test_stage3_optimizer_step_foreach_temporary_is_one_sub_group():
    """stage3.py _optimizer_step: a foreach step's list is one sub-group's flat fp32 partition. Llama 3.1 70B over 16
    ranks holds 70,553,706,496 / 16 = 4,409,606,656 parameters a rank, more than sub_group_size (1e9): one sub-group
    is at most 1e9 + the largest parameter's partition (the 128,256 x 8,192 embedding / 16 = 65,667,072), and
    _foreach_sqrt of its fp32 second moment is (1e9 + 65,667,072) x 4 B = 4,262,668,288 B (3.97 GiB), not the
    whole second moment's 16.43 GiB. The run (full recomputation) then fits an H100, which it did not before."""
    run = Config(model=MODELS["llama-3.1-70b"], zero=3, dp=16, recompute="full")
    foreach = run.with_changes(optimizer_impl="foreach")
    assert step_temporaries(foreach) == (10**9 + 128_256 * 8_192 // 16) * 4 == 4_262_668_288
    assert estimate(foreach).get("optimizer/adam_v") == 70_553_706_496 // 16 * 4  # 16.43 GiB, the old count
    assert f"{need(foreach).bytes / GIB:.2f}" == "76.56" and need(foreach).bytes <= H100
    # DeepSpeed's own FusedAdam (the default): no temporary at all; its peak is then at the start of backward, where
    # the flat gradient partitions (held from the optimizer's construction: stage3.py:742-751) are live too.
    assert step_temporaries(run) == 0 and f"{need(run).bytes / GIB:.2f}" == "75.09"
    # A partition within one sub-group (Llama 3 8B over 8 ranks: 1,003,782,656 < 1e9 + its largest partition) keeps
    # the whole second moment.
    small = llama8b(dp=8, zero=3, optimizer_impl="foreach")
    assert step_temporaries(small) == estimate(small).get("optimizer/adam_v")


def test_stage_1_and_2_optimizer_step_foreach_temporary_is_the_partition():
    """stage_1_and_2.py _optimizer_step: one parameter group's flat fp32 partition at a time, counted as the whole
    partition (one group): foreach's temporary is the rank's whole second moment."""
    for zero in (1, 2):
        run = llama8b(dp=8, zero=zero, optimizer_impl="foreach")
        assert step_temporaries(run) == estimate(run).get("optimizer/adam_v") == 8_030_261_248 // 8 * 4


def test_arguments_bf16_keeps_fp32_main_grads_in_the_3d_start():
    """megatron/training/arguments.py: --bf16 sets accumulate_allreduce_grads_in_fp32, so the calculator's Megatron
    start point (3D parallel 70B) keeps fp32 gradients (precision megatron-bf16: 4 B beside 2 B weights) and, with
    Megatron's FusedAdam, no step temporaries."""
    config = config_from_state(start_state("3d-70b", MODELS, "h100-80gb"), MODELS)
    assert (config.implementation, config.precision, config.policy.grad) == ("megatron", "megatron-bf16", "fp32")
    parts = estimate(config)
    assert parts.get("gradients") == 2 * parts.get("weights")
    assert step_temporaries(config) == 0
