"""FSDP under pipeline parallelism: PyTorch's pipelining stage (torch/distributed/pipelining/stage.py,
backward_maybe_with_nosync) calls set_reshard_after_backward(False) and set_requires_gradient_sync(False) on an FSDP
stage until its last backward, and torchtitan shards with reshard_after_forward = not pp_enabled. So a stage's
parameters stay unsharded through the schedule and its unsharded gradients accumulate until the last backward."""

from __future__ import annotations

import pytest

from builder.catalog import default_models
from builder.model import Config, validate_config
from builder.model.architecture import param_count
from builder.model.peak import assess

LLAMA = default_models()["llama-3-70b"]


def parts_of(config: Config) -> dict[str, int]:
    return {p.name: p.bytes for p in assess(config)[0].parts}


def test_a_pipeline_stage_keeps_its_parameters_and_gradients_unsharded():
    # Llama 3 70B: 80 layers on 4 stages; the first stage holds 20 layers and the embedding, bf16.
    config = Config(model=LLAMA, fsdp="FULL_SHARD", dp=8, pp=4, grad_accum=8, recompute="full", seq_len=4096)
    parts = parts_of(config)
    layer = (param_count(LLAMA) - 2 * 128_256 * 8192 - 8192) // 80  # one decoder layer's parameters
    stage = 20 * layer + 128_256 * 8192  # the first stage's layers and its embedding
    assert parts["comm/gathered_params"] == 2 * stage
    assert parts["comm/unsharded_grads"] == 2 * stage
    # The same run without pipeline parallelism gathers a unit at a time: the block computed and the root unit, with
    # one block's all-gather buffer beside them.
    flat = parts_of(config.with_changes(pp=1))
    assert flat["comm/gathered_params"] == 2 * (layer + 2 * 128_256 * 8192 + 8192)
    assert flat["comm/all_gather_output"] == 2 * layer and "comm/all_gather_output" not in parts


def test_zero_3_without_fsdp_is_unchanged_by_the_rule():
    # DeepSpeed ZeRO-3 (no FSDP strategy) gathers module by module (builder.model.zero3): Llama 3 70B's
    # 128,256 x 8,192 output layer, past stage3_max_live_parameters (1e9, DeepSpeed config.py) so nothing is
    # prefetched, and its 161 RMSNorm weights of 8,192 (under stage3_param_persistence_threshold, 1e5), in bf16.
    # (With pipeline stages DeepSpeed refuses ZeRO-3 altogether: the test below.)
    config = Config(model=LLAMA, zero=3, dp=8, seq_len=4096)
    assert parts_of(config)["comm/gathered_params"] == 2 * (128_256 * 8192 + 161 * 8192)


@pytest.mark.parametrize("zero", [2, 3])
def test_deepspeed_refuses_zero_2_and_3_with_pipeline_parallelism(zero):
    """DeepSpeed (commit edaa722) deepspeed/runtime/pipe/engine.py asserts zero_optimization_stage() <
    ZeroStageEnum.gradients: "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism". FSDP with pipeline
    stages (torchtitan) stays allowed."""
    with pytest.raises(ValueError, match="incompatible with pipeline parallelism"):
        validate_config(Config(model=LLAMA, zero=zero, dp=8, pp=2, grad_accum=4))
    validate_config(Config(model=LLAMA, zero=1, dp=8, pp=2, grad_accum=4))
    validate_config(Config(model=LLAMA, fsdp="FULL_SHARD", dp=8, pp=2, grad_accum=4))


def test_fsdp2_backward_holds_the_previous_reduce_scatter_input_and_the_root_gradients():
    """PyTorch FSDP2 (torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py at 002a76f, FSDPParamGroup.post_backward;
    _fsdp_collectives.py at 010ae4a, foreach_reduce): a unit's post_backward copies its unsharded gradients into a new
    reduce-scatter input of the reduce dtype and keeps it in comm_ctx.reduce_scatter_state until the next unit's
    post_backward, so inside a block's backward the previous block's input is live beside the block's own gradients.
    The root unit (embeddings, output layer) reduces only in _root_post_backward_final_callback: the output layer's
    unsharded gradient lives through every layer's backward, not at the loss gradients' moment before it is made."""
    from builder.model.peak import phases
    config = Config(model=LLAMA, fsdp="FULL_SHARD", dp=8, recompute="full", seq_len=4096)
    parts = parts_of(config)
    layer = (param_count(LLAMA) - 2 * 128_256 * 8192 - 8192) // 80
    assert parts["comm/unsharded_grads"] == 2 * layer
    assert parts["comm/reduce_scatter_input"] == 2 * layer
    assert parts["comm/root_grads"] == 2 * 128_256 * 8192
    live = {p.name: {q.name for q in p.parts} for p in phases(config)}
    for moment in ("layer_backward", "first_layer_backward"):
        assert {"comm/reduce_scatter_input", "comm/root_grads"} <= live[moment]
    assert "comm/root_grads" not in live["backward_start"] and "comm/reduce_scatter_input" not in live["backward_start"]
    assert "comm/root_grads" not in live["optimizer_step"]
    # fp32 reduction: the reduce-scatter input is fp32, the output layer's autograd gradient stays bf16.
    fp32 = parts_of(config.with_changes(reduce_dtype="fp32"))
    assert fp32["comm/reduce_scatter_input"] == 4 * layer and fp32["comm/root_grads"] == 2 * 128_256 * 8192
    # Pipeline stages keep theirs whole (the rule above), so neither part applies there.
    assert "comm/reduce_scatter_input" not in parts_of(config.with_changes(pp=4, grad_accum=8))
