"""DeepSpeed's ZeRO-1/2 estimator beside the model's need (the Sharding page's "DeepSpeed's estimator for stages 1
and 2" paragraph).

Sources: DeepSpeed commit edaa722, deepspeed/runtime/zero/stage_1_and_2.py estimate_zero2_model_states_mem_needs
(without offload gpu_mem = 2 x total_params + int(18 x total_params / total_gpus): "2 = params_16bit, 18 =
2_grads_16bit + 4_grads_32bit + 4_params_32bit + 8_optimizer_states_32bit"; with cpu_offload gpu_mem = 2 x
total_params; printed as cpu_mem/2**30 and gpu_mem/2**30 followed by "GB"), its fix in pull request 5099 (commit
f4cb866, June 2024: before it, gpu_mem = 4 x total_params + int(16 x total_params / total_gpus)), and
docs/code-docs/source/memory.rst at edaa722, whose ZeRO-2 table for t5-3b (2851M parameters, 1 node, 8 GPUs) prints
5.31GB with offload_optimizer=cpu and 15.93GB with offload_optimizer=none.
"""

from __future__ import annotations

from builder.model import Config
from builder.model.peak import need

PARAMS, GPUS = 2_851_000_000, 8


def deepspeed_zero2(total_params: int, total_gpus: int, cpu_offload: bool) -> int:
    """estimate_zero2_model_states_mem_needs' gpu_mem at edaa722, as DeepSpeed writes it."""
    return 2 * total_params if cpu_offload else 2 * total_params + int(18 * total_params / total_gpus)


def deepspeed_zero2_before_5099(total_params: int, total_gpus: int) -> int:
    """The same without offload before pull request 5099 (16-bit weights and 16-bit gradients whole on every GPU)."""
    return 4 * total_params + int(16 * total_params / total_gpus)


def gib(value: int) -> str:
    """As the estimator prints it: divided by 2**30, two decimals."""
    return f"{value / 2**30:.2f}"


def test_memory_rst_table_is_the_formula_before_its_fix():
    """memory.rst's 15.93GB comes from the formula before pull request 5099; the code at edaa722 gives 11.28; the
    offloaded row, 5.31GB, is the same in both."""
    assert gib(deepspeed_zero2_before_5099(PARAMS, GPUS)) == "15.93"
    assert gib(deepspeed_zero2(PARAMS, GPUS, cpu_offload=False)) == "11.28"
    assert gib(deepspeed_zero2(PARAMS, GPUS, cpu_offload=True)) == "5.31"


def test_need_is_the_estimator_plus_the_steps_flat_copy():
    """The model's need for --params 2851e6 --zero 2 --dp 8 (bf16-mixed AdamW; DeepSpeed's config builds its FusedAdam,
    deepspeed/runtime/engine.py _configure_basic_optimizer, no temporaries): at the optimizer step, DeepSpeed's
    2 + 18/N bytes per parameter (its fp32 gradient partition is the step's cast) plus the flat 16-bit copy the step
    makes before the cast (2/N; stage_1_and_2.py step)."""
    run = need(Config(params=PARAMS, zero=2, dp=GPUS))
    assert run.peak.name == "optimizer_step"
    assert run.bytes == deepspeed_zero2(PARAMS, GPUS, False) + PARAMS // GPUS * 2 == 12_829_500_000
    assert gib(run.bytes) == "11.95" and gib(run.sum_of_parts) == "9.96"
    # A torch.optim AdamW handed to DeepSpeed steps foreach: one state-sized temporary more (4/N; torch/optim/adam.py
    # _multi_tensor_adam's _foreach_sqrt over the one flat fp32 partition of the group).
    foreach = need(Config(params=PARAMS, zero=2, dp=GPUS, optimizer_impl="foreach"))
    assert foreach.bytes == deepspeed_zero2(PARAMS, GPUS, False) + PARAMS // GPUS * (2 + 4) == 14_255_000_000
    assert gib(foreach.bytes) == "13.28"


def test_offloaded_optimizer_need_is_the_estimators():
    """With the optimizer offloaded the GPU keeps the 16-bit weights alone: DeepSpeed's 2 x total_params."""
    run = need(Config(params=PARAMS, zero=2, dp=GPUS, offload="optimizer"))
    assert run.bytes == deepspeed_zero2(PARAMS, GPUS, True) == 5_702_000_000
