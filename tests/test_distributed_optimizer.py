"""Megatron-LM's distributed optimizer and DeepSpeed's bf16 optimizer with fp32 gradient accumulation, pinned to
their sources.

Megatron-LM (commit d98e8a6) docs/user-guide/features/dist_optimizer.md, bytes per parameter (d: data-parallel
size): fp16 parameters and fp16 gradients 20, distributed 4 + 16/d; bf16 parameters and fp32 gradients 18,
6 + 12/d; fp32 parameters and gradients 16, 8 + 8/d. The distributed optimizer shards the fp32 main parameters, the
optimizer states and, for fp16 gradients, the fp32 copy the step makes of them
(megatron/core/optimizer/distrib_optimizer.py _copy_model_grads_to_main_grads); the grad buffer stays whole.
DeepSpeed (commit edaa722) deepspeed/runtime/engine.py _do_optimizer_sanity_check: bf16 with grad_accum_dtype fp32
under ZeRO stage 1 runs BF16_Optimizer, whose fp32 gradient buffer is the whole flat group
(bf16_optimizer.py: torch.zeros_like(self.bf16_groups_flat[i], dtype=self.grad_acc_dtype)), beside the bf16
gradients, with the fp32 master partition and the states sharded.
"""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from builder.catalog import default_models
from builder.cli import main
from builder.model import Config, validate_config
from builder.model.peak import assess

N = 1_000_000_000
LLAMA = default_models()["llama-3-8b"]


def per_param(config: Config) -> Fraction:
    breakdown, _ = assess(config)
    return Fraction(sum(p.bytes for p in breakdown.parts
                        if p.name.split("/")[0] in ("weights", "gradients", "optimizer")), N)


@pytest.mark.parametrize("precision, alone, constant, sharded", [
    ("megatron-fp16", 20, 4, 16), ("megatron-bf16", 18, 6, 12), ("fp32", 16, 8, 8),
])
@pytest.mark.parametrize("d", [2, 8, 64])
def test_megatron_distributed_optimizer_table(precision, alone, constant, sharded, d):
    # fp32 is a precision PyTorch DDP runs too: implementation megatron names Megatron-LM (its grad buffer, no DDP
    # buckets beside it; builder.model.gradbuffers).
    assert per_param(Config(params=N, precision=precision, dp=d, implementation="megatron")) == alone
    assert per_param(Config(params=N, precision=precision, dp=d, zero=1, implementation="megatron")) \
        == constant + Fraction(sharded, d)


@pytest.mark.parametrize("d", [2, 8, 64])
def test_megatron_bf16_grad_reduce_in_bf16_copies_the_gradients_like_fp16(d):
    """Megatron-LM --bf16 --grad-reduce-in-bf16 (commit d98e8a6, arguments.py: accumulate_allreduce_grads_in_fp32 off;
    param_and_grad_buffer.py group_params_for_buffers: a bf16 grad buffer) under implementation megatron, as bf16-mixed
    or as megatron-bf16 with grad_dtype bf16: the optimizer's main_grad.float() (optimizer.py
    Float16OptimizerWithFloat16Params._copy_model_grads_to_main_grads; distrib_optimizer.py, the shard) is a copy, as
    for --fp16 in the dist_optimizer.md table: 20 bytes per parameter, 4 + 16/d distributed."""
    for config in (Config(params=N, precision="bf16-mixed", dp=d, implementation="megatron"),
                   Config(params=N, precision="megatron-bf16", grad_dtype="bf16", dp=d, implementation="megatron")):
        assert per_param(config) == 20
        assert per_param(config.with_changes(zero=1)) == 4 + Fraction(16, d)


def test_llama_3_8b_megatron_bf16_reduce_in_bf16_copies_its_shard_at_the_step():
    """Llama 3 8B, implementation megatron, bf16-mixed (--bf16 --grad-reduce-in-bf16), the distributed optimizer on 8
    GPUs: distrib_optimizer.py _copy_model_grads_to_main_grads (commit d98e8a6) makes 4 B x N / 8 of fp32 gradients
    at the optimizer step, which zero_grad at the start of the next train_step frees; with Megatron's default fp32
    grad buffer (megatron-bf16) .float() is the buffer itself and nothing is copied."""
    config = Config(model=LLAMA, precision="bf16-mixed", implementation="megatron", dp=8, zero=1)
    breakdown, needed = assess(config)
    part = next(p for p in breakdown.parts if p.name == "optimizer/master_grads")
    assert part.bytes == 4 * 8_030_261_248 // 8 == 4_015_130_624
    for phase in needed.steps:
        names = {p.name for p in phase.parts}
        assert ("optimizer/master_grads" in names) == (phase.name == "optimizer_step"), phase.name
    fp32_buffer = {p.name for p in assess(config.with_changes(precision="megatron-bf16"))[0].parts}
    assert "optimizer/master_grads" not in fp32_buffer


@pytest.mark.parametrize("buffer_dtype, copied", [("bfloat16", 4), ("float32", 0)])
def test_megatron_main_grad_float_copies_only_a_16_bit_buffer(buffer_dtype, copied):
    """Measured on CPU with torch: Megatron-LM's two copies (commit d98e8a6) over one contiguous grad buffer,
    main_param.grad = model_param.main_grad.float() (optimizer.py, every parameter) and shard_main_param.grad =
    shard_model_grad.float() (distrib_optimizer.py, shard_model_grad = model_grad.view(-1)[start:end]): new fp32
    storage of 4 bytes per element copied from a bf16 buffer, none from an fp32 one (Tensor.float() returns it)."""
    torch = pytest.importorskip("torch")
    shapes, d = ((512, 256), (256,), (256, 512)), 8
    numel = sum(torch.Size(shape).numel() for shape in shapes)
    buffer = torch.zeros(numel, dtype=getattr(torch, buffer_dtype))  # _ParamAndGradBuffer.grad_data
    views, start = [], 0
    for shape in shapes:
        views.append(buffer[start:start + torch.Size(shape).numel()].view(shape))  # each param.main_grad
        start += torch.Size(shape).numel()

    def new_bytes(tensors):
        storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}
        storages.pop(buffer.untyped_storage().data_ptr(), None)
        return sum(storages.values())

    assert new_bytes([main_grad.float() for main_grad in views]) == copied * numel
    shard = numel // d
    for rank in range(d):
        low, high, copies, start = rank * shard, (rank + 1) * shard, [], 0
        for main_grad in views:
            begin, end = max(low, start) - start, min(high, start + main_grad.numel()) - start
            if begin < end:
                copies.append(main_grad.view(-1)[begin:end].float())
            start += main_grad.numel()
        assert new_bytes(copies) == copied * shard


def test_megatron_fp16_copies_gradients_to_fp32_only_at_the_step():
    _, needed = assess(Config(model=LLAMA, precision="megatron-fp16", dp=8, zero=1))
    for phase in needed.steps:
        names = {p.name for p in phase.parts}
        assert ("optimizer/master_grads" in names) == (phase.name == "optimizer_step"), phase.name


@pytest.mark.parametrize("d", [2, 8])
def test_deepspeed_bf16_optimizer_keeps_a_whole_fp32_gradient_buffer(d):
    """2 (bf16 weights) + 2 (bf16 gradients) + 4 (fp32 accumulation buffer, whole) + 12/d (master and moments)."""
    config = Config(params=N, precision="bf16-mixed", grad_accum_dtype="fp32", zero=1, dp=d)
    assert per_param(config) == 8 + Fraction(12, d)


@pytest.mark.parametrize("d", [2, 8])
def test_deepspeed_zero3_keeps_its_gradient_partitions_in_the_accumulation_dtype(d):
    """DeepSpeed (commit edaa722) stage3.py: grad_partitions_flat_buffer is allocated with
    dtype=self.gradient_accumulation_dtype, so fp32 accumulation makes the sharded gradients fp32 (4/d) instead of
    bf16 (2/d), with no second buffer: 2/d + 4/d + 12/d."""
    plain = Config(params=N, precision="bf16-mixed", zero=3, dp=d)
    fp32 = Config(params=N, precision="bf16-mixed", grad_accum_dtype="fp32", zero=3, dp=d)
    assert per_param(plain) == Fraction(16, d)
    assert per_param(fp32) == Fraction(18, d)
    names = {p.name for p in assess(fp32)[0].parts}
    assert "gradients/accumulation_buffer" not in names


def test_deepspeed_zero2_refuses_an_accumulation_dtype_it_would_ignore():
    """DeepSpeed (commit edaa722) stage_1_and_2.py: use_grad_accum_attribute = use_separate_grad_accum and not
    partition_gradients, and grads_in_partition is allocated in self.dtype, so ZeRO-2 accumulates in bf16."""
    with pytest.raises(ValueError, match="grad_accum_dtype: DeepSpeed's ZeRO stage 2"):
        validate_config(Config(params=N, precision="bf16-mixed", grad_accum_dtype="fp32", zero=2, dp=8))
    validate_config(Config(params=N, precision="bf16-mixed", grad_accum_dtype="bf16", zero=2, dp=8))


def json_estimate(capsys, *argv):
    assert main(["estimate", "--params", "1e9", "--json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_megatron_flag_for_the_distributed_optimizer_is_zero_stage_1(capsys):
    """Megatron-LM's --use-distributed-optimizer: 6 + 12/d bytes per parameter for bf16 weights with fp32
    gradients (docs/user-guide/features/dist_optimizer.md, commit d98e8a6)."""
    flag = json_estimate(capsys, "--precision", "megatron-bf16", "--dp", "8", "--use-distributed-optimizer")
    zero = json_estimate(capsys, "--precision", "megatron-bf16", "--dp", "8", "--zero", "1")
    assert flag["per_gpu_bytes"] == zero["per_gpu_bytes"] == 7_500_000_000


def test_megatron_flag_takes_bf16_mixed_under_implementation_megatron(capsys):
    """--implementation megatron --precision bf16-mixed is Megatron-LM's --bf16 --grad-reduce-in-bf16: its
    distributed optimizer gives 4 + 16/d bytes per parameter (the fp32 copy of the bf16 gradients sharded too)."""
    flag = json_estimate(capsys, "--implementation", "megatron", "--dp", "8", "--use-distributed-optimizer")
    zero = json_estimate(capsys, "--implementation", "megatron", "--dp", "8", "--zero", "1")
    assert flag["per_gpu_bytes"] == zero["per_gpu_bytes"] == 6_000_000_000


def test_megatron_refuses_a_reduce_dtype_it_does_not_read():
    """Megatron-LM reduces in its grad buffer's dtype (param_and_grad_buffer.py group_params_for_buffers, commit
    d98e8a6: grad_dtype = torch.float if grad_reduce_in_fp32 else param.dtype), so no reduce_dtype is read, the
    buffer's own included: it is refused with the way to ask for --grad-reduce-in-bf16 (grad_dtype)."""
    for reduce in ("bf16", "fp32"):
        for config in (Config(model=LLAMA, precision="megatron-bf16", reduce_dtype=reduce, dp=8, zero=1),
                       Config(model=LLAMA, precision="megatron-bf16", reduce_dtype=reduce, dp=8,
                              implementation="megatron")):
            with pytest.raises(ValueError, match=r"reduce_dtype: Megatron-LM reduces .* \(fp32\), which grad_dtype "
                                                 r"sets .* leave reduce_dtype out"):
                validate_config(config)


# Llama 3 8B, 8 GPUs, Megatron's bf16 with its fp32 main_grad buffer.
MEGATRON_ZERO1 = Config(model=LLAMA, precision="megatron-bf16", dp=8, zero=1)


def test_a_megatron_precision_with_zero_1_is_megatrons_distributed_optimizer():
    """A Megatron precision runs only in Megatron-LM (its --bf16 with the fp32 main_grad buffer,
    param_and_grad_buffer.py at d98e8a6), so its ZeRO stage 1 is Megatron's distributed optimizer whatever the op list: no DeepSpeed gradient
    bucket (stage_1_and_2.py setup_buckets at edaa722: 5e8 bf16 elements, 1,000,000,000 B) in the backward, and no
    DeepSpeed flat fp32 copy of the gradient partition at the step (stage_1_and_2.py step): Megatron's
    _copy_model_grads_to_main_grads (distrib_optimizer.py) steps on its fp32 buffer, .float() of which is itself.
    Before, the model counted both (the optimizer step 59.83 GiB with a 3.74 GiB copy, the peak 72.28 GiB); its model
    states and its moments are those of --implementation megatron's run, part for part."""
    breakdown, needed = assess(MEGATRON_ZERO1)
    names = {p.name for p in breakdown.parts}
    assert "comm/unsharded_grads" not in names
    step = next(phase for phase in needed.steps if phase.name == "optimizer_step")
    end = next(phase for phase in needed.steps if phase.name == "backward_end")
    assert "optimizer/grad_partition_fp32" not in {p.name for p in step.parts}
    assert step.total == end.total  # fused Adam (Megatron builds it) adds nothing at the step
    assert breakdown.part("gradients").bytes == 4 * 8_030_261_248  # the whole fp32 buffer on every rank
    megatron, _ = assess(MEGATRON_ZERO1.with_changes(implementation="megatron"))
    for bucket in ("weights", "gradients", "optimizer"):
        assert [(p.name, p.bytes) for p in breakdown.parts if p.bucket == bucket] == \
            [(p.name, p.bytes) for p in megatron.parts if p.bucket == bucket]
    # bf16-mixed without implementation megatron is DeepSpeed's ZeRO-1: its bucket and its flat fp32 copy.
    deepspeed, ds_needed = assess(MEGATRON_ZERO1.with_changes(precision="bf16-mixed"))
    assert deepspeed.part("comm/unsharded_grads").bytes == 5 * 10**8 * 2
    ds_step = next(phase for phase in ds_needed.steps if phase.name == "optimizer_step")
    assert "optimizer/grad_partition_fp32" in {p.name for p in ds_step.parts}


def test_llama_3_8b_megatron_bf16_zero_1_before_and_after():
    """The helper's numbers (commit 0eaf3f0's note): Llama 3 8B, --precision megatron-bf16 --use-distributed-optimizer
    on 8 GPUs peaked at 72.28 GiB with DeepSpeed's 1e9-byte bucket; without it the peak is that less, exactly."""
    needed = assess(MEGATRON_ZERO1)[1]
    assert round(needed.bytes / 2**30, 2) == 71.35
    assert round((needed.bytes + 10**9) / 2**30, 2) == 72.28


@pytest.mark.parametrize("precision, implementation", [
    ("megatron-bf16", "hf"), ("megatron-fp16", "hf"), ("te-fp8", "hf"), ("bf16-mixed", "megatron"),
])
@pytest.mark.parametrize("zero", [2, 3])
def test_megatron_refuses_deepspeeds_zero_2_and_3(precision, implementation, zero):
    """Megatron-LM shards with its distributed optimizer, which keeps the grad buffer whole (distrib_optimizer.py,
    docs/user-guide/features/dist_optimizer.md at d98e8a6): ZeRO stage 1. Stages 2 and 3 without FSDP are DeepSpeed's
    (stage_1_and_2.py partition_gradients, stage3.py at edaa722), which runs its own bf16 or fp16 precisions, not
    Megatron's main_grad buffer; Megatron-FSDP is not modelled. Refused in one line naming what to change."""
    config = Config(model=LLAMA, precision=precision, implementation=implementation, dp=8, zero=zero)
    with pytest.raises(ValueError, match=rf"^zero: .* is Megatron-LM's, .* ZeRO stage {zero} is DeepSpeed's, .*choose "
                                         r"zero 1 or fsdp, or a DeepSpeed run \(precision bf16-mixed or fp16-mixed "
                                         r"without implementation megatron\)$"):
        validate_config(config)
    validate_config(config.with_changes(zero=1))
    validate_config(config.with_changes(zero=0, fsdp="FULL_SHARD"))
    if implementation == "hf" and precision != "te-fp8":
        validate_config(config.with_changes(precision=precision.replace("megatron-", "") + "-mixed"))


def test_use_distributed_optimizer_refuses_fp32_without_implementation_megatron(capsys):
    """fp32 is PyTorch's precision too: alone it names no Megatron-LM run, whose --use-distributed-optimizer would be
    the model's DeepSpeed ZeRO-1 there. --implementation megatron names Megatron-LM: 8 + 8/d bytes per parameter
    (dist_optimizer.md)."""
    assert main(["estimate", "--params", "1e9", "--dp", "8", "--precision", "fp32",
                 "--use-distributed-optimizer"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not --precision fp32 alone" in err[0]
    flag = json_estimate(capsys, "--precision", "fp32", "--implementation", "megatron", "--dp", "8",
                         "--use-distributed-optimizer")
    assert flag["per_gpu_bytes"] == 9 * N


@pytest.mark.parametrize("argv, words", [
    (("--precision", "megatron-bf16", "--zero", "3"), "not stage 3 (--zero 3)"),
    (("--precision", "megatron-bf16", "--fsdp", "FULL_SHARD"), "--fsdp FULL_SHARD"),
    (("--precision", "bf16-mixed",), "not --precision bf16-mixed"),
    (("--mode", "serve"), "--mode serve"),
])
def test_megatron_flag_refuses_what_it_does_not_mean(capsys, argv, words):
    assert main(["estimate", "--params", "1e9", "--dp", "8", "--use-distributed-optimizer", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--use-distributed-optimizer" in err[0] and words in err[0]
