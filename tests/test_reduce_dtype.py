"""reduce_dtype: read where the model counts gradients held in it, refused everywhere else.

Where a reduce dtype is real and counted:
- FSDP: MixedPrecisionPolicy.reduce_dtype (FSDP2, torch/distributed/fsdp/_fully_shard/_fsdp_api.py) and
  MixedPrecision.reduce_dtype (FSDP1), the dtype of a unit's reduce-scatter input (_fsdp_collectives.py
  foreach_reduce), counted as comm/unsharded_grads and comm/reduce_scatter_input;
- DeepSpeed ZeRO-3: communication_data_type (engine.py communication_data_type, DeepSpeed edaa722), the dtype of its
  reduce bucket (stage3.py:731-735) and of the reduce-scatter's flat copy (coalesced_collectives.py).
Where it is not:
- Megatron-LM reduces in its grad buffer's dtype (param_and_grad_buffer.py group_params_for_buffers, d98e8a6);
- PyTorch DDP has no reduce dtype (torch/nn/parallel/distributed.py: its reducer's buckets are the gradients'
  dtype); its communication hooks (bf16_compress_hook) cast a bucket for the all-reduce, not modelled;
- DeepSpeed ZeRO-1/2 keeps its buckets in the parameters' dtype (stage_1_and_2.py setup_buckets) and casts a bucket's
  flat copy to communication_data_type only for its collective (allreduce_bucket, gradient_reduction_w_predivide:
  tensor.to(communication_data_type), copied back), a transient the model does not count.
"""

from __future__ import annotations

import inspect
import itertools

import pytest

from builder.catalog import default_models
from builder.model import Config, estimate, validate_config
from builder.model.expr import evaluate, symbols_of
from builder.model.inputs import rule_inputs, stages
from builder.model.states import COMM, READS_REDUCE_DTYPE

MODELS = default_models()
LLAMA = MODELS["llama-3-8b"]
GPT2 = MODELS["gpt2"]


@pytest.mark.parametrize("changes", [
    dict(fsdp="FULL_SHARD", dp=8), dict(fsdp="SHARD_GRAD_OP", dp=8), dict(fsdp="HYBRID_SHARD", dp=16),
    dict(fsdp="FULL_SHARD", dp=2, pp=2, grad_accum=2), dict(zero=3, dp=8), dict(zero=3, dp=8, lora_rank=16),
])
def test_reduce_dtype_changes_what_fsdp_and_zero3_hold(changes):
    """Where it is read, fp32 instead of bf16 doubles the gradients held in it."""
    run = Config(model=LLAMA, seq_len=4096, **changes)
    bf16, fp32 = estimate(run.with_changes(reduce_dtype="bf16")), estimate(run.with_changes(reduce_dtype="fp32"))
    assert fp32.total > bf16.total == estimate(run).total


@pytest.mark.parametrize("changes, words", [
    (dict(dp=8), "data parallelism without sharding (PyTorch DDP, DeepSpeed's stage 0) reduces the gradients in their "
                 "own dtype (bf16)"),
    (dict(dp=8, grad_accum_dtype="fp32", zero=1), "DeepSpeed's ZeRO stage 1 keeps its buckets in the parameters' "
                                                  "dtype (bf16)"),
    (dict(dp=8, zero=2), "DeepSpeed's ZeRO stage 2 keeps its buckets in the parameters' dtype (bf16) and casts a "
                         "bucket's copy to communication_data_type only for its collective"),
    (dict(dp=8, fsdp="NO_SHARD"), "fsdp NO_SHARD over 8 rank(s) reduce-scatters no sharded gradients"),
    (dict(dp=1, fsdp="FULL_SHARD"), "fsdp FULL_SHARD over 1 rank(s)"),
    (dict(dp=8, fsdp="FULL_SHARD", lora_rank=16), "with LoRA adapters (lora_rank 16) FSDP's unsharded gradients are "
                                                  "the adapters'"),
    (dict(dp=1), "one GPU (dp x cp = 1) reduces no gradients"),
    (dict(dp=8, zero=1, precision="megatron-bf16"), "Megatron-LM reduces the gradients in its grad buffer"),
    (dict(dp=8, implementation="megatron", precision="bf16-mixed"), "Megatron-LM reduces the gradients in its grad "
                                                                     "buffer, in their own dtype (bf16)"),
])
def test_reduce_dtype_is_refused_where_nothing_reads_it(changes, words):
    config = Config(model=LLAMA, reduce_dtype="fp32", **changes)
    with pytest.raises(ValueError) as refused:
        validate_config(config)
    message = str(refused.value)
    assert message.startswith(f"reduce_dtype: {words}"), message
    assert message.endswith("(zero 3: communication_data_type); leave reduce_dtype out")
    validate_config(config.with_changes(reduce_dtype=None))


def test_a_raw_count_has_no_unit_to_reduce():
    with pytest.raises(ValueError, match="reduce_dtype: it is counted unit by unit or bucket by bucket, which needs an "
                                         "architecture"):
        validate_config(Config(params=8 * 10**9, fsdp="FULL_SHARD", dp=8, reduce_dtype="fp32"))


def test_pytorch_ddp_takes_no_reduce_dtype_its_hooks_cast():
    """torch/nn/parallel/distributed.py (the installed PyTorch): DistributedDataParallel's constructor has no dtype to
    reduce in; a 16-bit reduction is a communication hook's (default_hooks.bf16_compress_hook), which the model does
    not count."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel

    assert not [name for name in inspect.signature(DistributedDataParallel.__init__).parameters if "dtype" in name]
    assert callable(default_hooks.bf16_compress_hook) and callable(default_hooks.fp16_compress_hook)


# The parts whose bytes are in the reduce dtype (the rule that reads it, not a list kept by hand).
READERS = [part for part in COMM.parts if "gradient_reduce_dtype" in symbols_of(part.bytes)]


def _runs():
    for arch, shard, dp, precision, implementation, lora, pp in itertools.product(
            (LLAMA, GPT2, None), (dict(zero=0), dict(zero=1), dict(zero=2), dict(zero=3), dict(fsdp="FULL_SHARD"),
                                  dict(fsdp="SHARD_GRAD_OP"), dict(fsdp="NO_SHARD"), dict(fsdp="HYBRID_SHARD")),
            (1, 2, 16), ("bf16-mixed", "megatron-bf16"), ("hf", "megatron"), (0, 8), (1, 2)):
        model = dict(model=arch, seq_len=512) if arch else dict(params=10**9)
        config = Config(**model, **shard, dp=dp, precision=precision, implementation=implementation, lora_rank=lora,
                        pp=pp, grad_accum=pp)
        try:
            validate_config(config)
        except ValueError:
            continue
        yield config


def test_the_refusal_and_the_parts_that_read_it_agree():
    """READS_REDUCE_DTYPE, which the refusal negates, holds for a run exactly where one of the parts whose bytes are in
    the reduce dtype is counted, stage by stage, over shardings, data-parallel sizes, precisions, op lists, LoRA and
    pipeline stages."""
    assert {part.name for part in READERS} == {"comm/unsharded_grads", "comm/reduce_scatter_input",
                                               "comm/output_reduce_scatter_input", "comm/reduce_bucket"}
    seen = {True: 0, False: 0}
    for config in _runs():
        for stage in stages(config.model, config):
            inputs = rule_inputs(config.model, config, stage)
            env = COMM.environment(inputs)
            read = any(part.when_holds(env) for part in READERS)
            assert read == bool(evaluate(READS_REDUCE_DTYPE, inputs)), config
            seen[read] += 1
    assert seen[True] > 20 and seen[False] > 20
