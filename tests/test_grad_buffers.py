"""Who owns gradient memory, and when (builder.model.gradbuffers), pinned to the frameworks' code.

- Megatron-LM (commit d98e8a6) megatron/core/distributed/param_and_grad_buffer.py: _ParamAndGradBuffer allocates
  grad_data (every parameter's main_grad, fp32 for bf16 runs) at model wrap, with or without the distributed
  optimizer; megatron/training/theoretical_memory_usage.py counts 18 B/param without the distributed optimizer
  (2 bf16 weights + 4 fp32 main_grad + 12 fp32 master and Adam moments).
- PyTorch 2.13 torch/csrc/distributed/c10d/reducer.cpp Reducer::initialize_buckets: one flat `gradients` tensor per
  bucket covering every gradient; with gradient_as_bucket_view=False (the default) each .grad is a separate tensor.
  Measured here on CPU (gloo, world size 1): the comm hook's GradBucket.buffer() storage is the size of every
  parameter, the same storage step after step although zero_grad(set_to_none=True) frees every .grad, and
  separate from the .grad tensors unless gradient_as_bucket_view=True (then every .grad is a view of it).
- DeepSpeed (commit edaa722) deepspeed/runtime/bf16_optimizer.py: fp32_groups_gradients_flat allocated in the
  constructor, the whole flat group (4 B/param), kept.
- DeepSpeed (commit edaa722) deepspeed/runtime/zero/stage3.py:742-751, DeepSpeedZeroOptimizer_Stage3.
  _setup_for_real_optimizer: grad_partitions_flat_buffer = torch.zeros(sum of every parameter's partition_numel(),
  dtype=gradient_accumulation_dtype, device=self.device), made when the optimizer is built, never freed; self.device
  is the CPU when the optimizer is offloaded (line 328).
"""

from __future__ import annotations

import pytest

from builder.catalog import default_models
from builder.cli import main
from builder.model import Config
from builder.model.peak import assess

LLAMA = default_models()["llama-3-8b"]
BEFORE_BACKWARD = ("forward", "backward_start")


def by_phase(config: Config) -> dict[str, dict[str, int]]:
    """Each moment of the step's live parts, name -> bytes (the stage that sets the need)."""
    _, needed = assess(config)
    return {phase.name: {p.name: p.bytes for p in phase.parts} for phase in needed.steps}


def parts(config: Config) -> dict[str, int]:
    breakdown, _ = assess(config)
    return breakdown.as_dict()


@pytest.mark.parametrize("dp, zero", [(1, 0), (8, 1)])
def test_megatron_main_grad_buffer_is_live_at_every_moment(dp, zero):
    """theoretical_memory_usage.py: 4 B/param of fp32 main_grad beside 2 B/param of bf16 weights; the buffer is whole
    with the distributed optimizer (zero 1) too, and live before backward at grad_accum 1."""
    config = Config(model=LLAMA, precision="megatron-bf16", tp=8, micro_batch=1, seq_len=4096, dp=dp, zero=zero)
    held = parts(config)
    assert held["gradients"] == 2 * held["weights"]  # 4 B/param fp32 vs 2 B/param bf16, unsharded
    for name, live in by_phase(config).items():
        assert live.get("gradients") == held["gradients"], name


def test_megatron_need_counts_the_buffer_at_the_start_of_backward():
    """The issue's example: llama-3-8b, megatron-bf16, tp 8, micro-batch 1, 4,096 tokens. The start of backward holds
    the fp32 main_grad buffer (4 B x 8,030,261,248 / 8 parameters, less what TP replicates) beside the weights."""
    config = Config(model=LLAMA, precision="megatron-bf16", tp=8, micro_batch=1, seq_len=4096)
    live = by_phase(config)["backward_start"]
    assert live["gradients"] >= 4 * 8_030_261_248 // 8
    assert live["gradients"] == 2 * live["weights"]


def test_plain_pytorch_on_one_gpu_makes_gradients_in_backward():
    """zero_grad(set_to_none=True) on one GPU: no gradient storage before backward at grad_accum 1."""
    live = by_phase(Config(model=LLAMA, micro_batch=1, seq_len=2048))
    for name in BEFORE_BACKWARD:
        assert not any(p.startswith("gradients") for p in live[name]), name
    assert "gradients" in live["backward_end"]


def test_ddp_buckets_are_a_second_copy_kept_for_the_run():
    config = Config(model=LLAMA, micro_batch=1, seq_len=2048, dp=8)
    held = parts(config)
    assert held["comm/ddp_buckets"] == held["gradients"]  # every gradient, in the parameters' dtype
    live = by_phase(config)
    for name in BEFORE_BACKWARD:
        assert live[name]["comm/ddp_buckets"] == held["gradients"] and "gradients" not in live[name], name
    assert live["backward_end"]["gradients"] == live["backward_end"]["comm/ddp_buckets"]  # two copies


def test_gradient_as_bucket_view_keeps_one_copy_for_the_run():
    config = Config(model=LLAMA, micro_batch=1, seq_len=2048, dp=8, gradient_as_bucket_view=True)
    held = parts(config)
    assert "comm/ddp_buckets" not in held
    assert sum(held.values()) == sum(parts(Config(model=LLAMA, micro_batch=1, seq_len=2048)).values())
    for name, live in by_phase(config).items():
        assert live.get("gradients") == held["gradients"], name


@pytest.mark.parametrize("settings", [dict(zero=1), dict(zero=2), dict(fsdp="FULL_SHARD"), dict(dp=1),
                                      dict(precision="megatron-bf16"), dict(implementation="megatron")])
def test_no_ddp_buckets_where_the_run_is_not_ddp(settings):
    """DeepSpeed ZeRO and FSDP reduce through their own buffers; Megatron-LM through its grad buffer."""
    config = Config(**{"model": LLAMA, "micro_batch": 1, "seq_len": 2048, "dp": 8, **settings})
    assert "comm/ddp_buckets" not in parts(config)


@pytest.mark.parametrize("zero", [0, 1])
def test_deepspeed_bf16_optimizer_buffer_is_live_at_every_moment(zero):
    """bf16_optimizer.py: the fp32 flat gradient buffer (4 B/param, the whole group) exists from the constructor on,
    so it counts before backward at grad_accum 1 as well."""
    config = Config(model=LLAMA, micro_batch=1, seq_len=2048, dp=8, zero=zero, grad_accum_dtype="fp32")
    held = parts(config)
    assert held["gradients/accumulation_buffer"] == 2 * held["gradients"]  # fp32 beside the bf16 gradients
    assert "comm/ddp_buckets" not in held  # grad_accum_dtype names DeepSpeed
    for name, live in by_phase(config).items():
        assert live.get("gradients/accumulation_buffer") == held["gradients/accumulation_buffer"], name


@pytest.mark.parametrize("grad_accum_dtype", [None, "fp32"])
def test_deepspeed_zero3_gradient_partitions_are_live_at_every_moment(grad_accum_dtype):
    """stage3.py:742-751: the rank's flat gradient partitions (8,030,261,248 / 8 parameters, in grad_accum_dtype,
    else the bf16 parameters' dtype) are allocated with the optimizer, so the forward holds them at grad_accum 1."""
    config = Config(model=LLAMA, micro_batch=1, seq_len=4096, dp=8, zero=3, grad_accum_dtype=grad_accum_dtype)
    held = parts(config)
    assert held["gradients"] == 8_030_261_248 // 8 * (4 if grad_accum_dtype else 2)
    for name, live in by_phase(config).items():
        assert live.get("gradients") == held["gradients"], name


def test_deepspeed_zero3_with_an_offloaded_optimizer_keeps_no_gradients_on_the_gpu():
    """stage3.py line 328: self.device is the CPU when the optimizer is offloaded, and the flat gradient partitions
    with it: no moment of the step holds them on the GPU."""
    config = Config(model=LLAMA, micro_batch=1, seq_len=4096, dp=8, zero=3, offload="optimizer")
    assert "gradients" not in parts(config)
    assert not any("gradients" in live for live in by_phase(config).values())


@pytest.mark.parametrize("argv", [
    ["--model", "llama-3-8b", "--gradient-as-bucket-view"],
    ["--model", "llama-3-8b", "--dp", "8", "--zero", "1", "--gradient-as-bucket-view"],
    ["--model", "llama-3-8b", "--dp", "8", "--precision", "megatron-bf16", "--gradient-as-bucket-view"],
])
def test_gradient_as_bucket_view_outside_ddp_is_refused(argv, capsys):
    assert main(["estimate", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--gradient-as-bucket-view" in err and "Traceback" not in err


def test_calculator_reads_the_option_with_no_sharding_only():
    from builder.widgets import calculator as calc

    models = default_models()
    state = calc.default_state({"dp": 8, "zero": 0}, models, "h100-80gb") | {"gradient_as_bucket_view": "1"}
    assert calc.config_from_state(state, models).gradient_as_bucket_view
    assert not calc.config_from_state(state | {"sharding": "3"}, models).gradient_as_bucket_view


def test_ddp_reducer_buckets_measured_on_cpu():
    """PyTorch's own DDP on CPU (gloo, world size 1): the reducer's bucket storage, seen by a comm hook."""
    dist = pytest.importorskip("torch.distributed")
    torch = pytest.importorskip("torch")

    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    started = not dist.is_initialized()
    if started:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        for view in (False, True):
            torch.manual_seed(0)
            model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 64))
            param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
            ddp = torch.nn.parallel.DistributedDataParallel(model, gradient_as_bucket_view=view)
            seen: list[tuple[int, int]] = []

            def hook(state, bucket):
                storage = bucket.buffer().untyped_storage()
                seen.append((storage.data_ptr(), storage.nbytes()))
                # At world size 1 the all-reduce is the identity: a completed future of the bucket, as DDP's
                # allreduce_hook would give. (allreduce_hook chains a Python callback that gloo's thread must take
                # the GIL to release; freeing the reducer, which joins that thread while holding the GIL, then
                # deadlocked now and then in the whole suite.)
                done = torch.futures.Future()
                done.set_result(bucket.buffer())
                return done

            ddp.register_comm_hook(None, hook)
            steps = []
            for _ in range(3):  # DDP rebuilds its buckets once, after the first step, in gradient order
                seen.clear()
                ddp(torch.randn(4, 64)).sum().backward()
                grads = {p.grad.untyped_storage().data_ptr() for p in model.parameters()}
                steps.append((sorted(seen), grads))
                for p in model.parameters():
                    p.grad = None  # zero_grad(set_to_none=True)
            buckets, grads = steps[2]
            assert buckets == steps[1][0]  # the same storage after set_to_none: kept for the run
            assert sum(size for _, size in buckets) == param_bytes  # every gradient
            shared = {ptr for ptr, _ in buckets} & grads
            assert (shared == grads) if view else (not shared and len(grads) == len(list(model.parameters())))
    finally:
        if started:
            dist.destroy_process_group()
