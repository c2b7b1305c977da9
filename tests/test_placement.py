"""Placement as rules (builder.model.placement): the pipeline stages and what one GPU of a stage holds, pinned to
the Megatron-LM layout (Shoeybi et al. 2019, section 3; Narayanan et al. 2021) and Korthikanti et al. 2022."""

from __future__ import annotations

from fractions import Fraction

import pytest

from builder.catalog import default_models
from builder.model import Config
from builder.model.inputs import rule_inputs, stages

MODELS = default_models()


def held(model_id: str, stage: int = 0, **settings) -> dict:
    arch = MODELS[model_id]
    config = Config(model=arch, **settings)
    return rule_inputs(arch, config, stages(arch, config)[stage])


def test_pipeline_stages_split_the_layers_and_hold_micro_batches_in_flight():
    # Llama 3 8B has 32 layers (config.json): 3 stages give the first ceil(32/3) = 11, the last floor(32/3) = 10.
    arch = MODELS["llama-3-8b"]
    first, last = stages(arch, Config(model=arch, pp=3, grad_accum=8))
    assert (first.layers, first.has_embedding, first.has_head, first.in_flight) == (11, True, False, 3)
    assert (last.layers, last.has_embedding, last.has_head, last.in_flight) == (10, False, True, 1)
    # 1F1B holds min(p, micro-batches) in flight: 2 micro-batches on 4 stages keep 2.
    assert stages(arch, Config(model=arch, pp=4, grad_accum=2))[0].in_flight == 2
    # Korthikanti et al. 2022, section 4.2.3: interleaving with m virtual stages stores 1 + (p-1)/(pm) times as much:
    # p = 4, m = 2 gives 4 x (1 + 3/8) = 5.5 micro-batches' worth.
    interleaved = Config(model=arch, pp=4, grad_accum=8, pp_schedule="interleaved", pp_virtual_stages=2)
    assert stages(arch, interleaved)[0].in_flight == Fraction(11, 2)
    # Megatron-LM (commit d98e8a6) schedules.py get_pp_rank_microbatches: interleaved warm-up of
    # (p - rank - 1) x 2 + (v - 1) x p chunks, capped at m x v, plus the steady state's next forward; a chunk is 1/v
    # of the stage. p = 4, v = 2, m = 8: rank 0 holds 6 + 4 + 1 = 11 chunks (5.5 stages' worth), rank 3 holds
    # 0 + 4 + 1 = 5 chunks (2.5), where 1F1B's last stage holds 1.
    first, last = stages(arch, interleaved)
    assert (first.in_flight, last.in_flight) == (Fraction(11, 2), Fraction(5, 2))
    # p = 4, v = 4, m = 4: rank 0's warm-up 6 + 12 = 18 is capped at m x v = 16 chunks, all of them: 4 stages' worth.
    capped = Config(model=arch, pp=4, grad_accum=4, pp_schedule="interleaved", pp_virtual_stages=4, seq_len=256)
    first, last = stages(arch, capped)
    assert (first.in_flight, last.in_flight) == (4, Fraction(13, 4))
    assert [s.name for s in stages(arch, Config(model=arch))] == ["only"]


def test_tensor_parallel_ranks_split_matrices_and_keep_one_kv_head_each_when_they_outnumber_them():
    # Llama 3 8B: hidden 4096, 32 query heads and 8 KV heads of 128, SwiGLU ffn 14336, RMSNorm (config.json).
    # TP 16 > 8 KV heads: each rank keeps one KV head (K and V, 4096 x 128 each) instead of half of one.
    unit = held("llama-3-8b", tp=16, dp=1)["layer_unit"]
    q = o = 4096 * 4096 // 16
    kv = 2 * 4096 * 128
    norms = 2 * 4096  # replicated
    mlp = 3 * 4096 * 14336 // 16
    assert unit == q + kv + o + norms + mlp == 14_163_968
    # TP 8 = KV heads: an even split.
    assert held("llama-3-8b", tp=8)["layer_unit"] == 2 * 4096 * 4096 // 8 + 2 * 4096 * 1024 // 8 + 2 * 4096 \
        + 3 * 4096 * 14336 // 8


def test_expert_parallel_ranks_split_the_experts_and_replicate_the_router():
    # Mixtral 8x7B (config.json): 32 layers, hidden 4096, 8 experts of ffn 14336 (w1, w3, w2), router 4096 x 8.
    inputs = held("mixtral-8x7b", tp=2, ep=4, dp=4)
    assert inputs["expert"] == 32 * 8 * 3 * 4096 * 14336 // (2 * 4)
    assert inputs["layer_unit"] - inputs["layer_expert"] == (2 * 4096 * 4096 + 2 * 4096 * 1024) // 2 + 4096 * 8 \
        + 2 * 4096


def test_the_last_stage_keeps_its_own_copy_of_tied_embeddings():
    # GPT-2 ties its head to the token embedding (50257 x 768) and has LayerNorm (weight and bias) and 1024
    # learned positions. Megatron-LM keeps a copy of the tied embedding on the last stage for the output layer.
    first, last = held("gpt2", 0, pp=2, grad_accum=2), held("gpt2", 1, pp=2, grad_accum=2)
    assert first["root_unit"] == 50257 * 768 + 1024 * 768
    assert last["root_unit"] == 2 * 768 + 50257 * 768
    only = held("gpt2")
    assert only["root_unit"] == 50257 * 768 + 1024 * 768 + 2 * 768  # the tied head is the embedding: once


@pytest.mark.parametrize("model_id", ["gpt2", "llama-3-8b", "mixtral-8x7b"])
def test_one_gpu_without_parallelism_holds_every_parameter(model_id):
    inputs = held(model_id)
    assert inputs["dense"] + inputs["expert"] == inputs["params"] == inputs["parameters"]
    # Of those, the weight matrices are everything but norms, biases, the embeddings and the head.
    assert inputs["linear_matrices"] <= inputs["linear"] < inputs["params"]


def test_interleaving_needs_a_group_of_pp_micro_batches():
    """Megatron-LM (commit d98e8a6) schedules.py: microbatch_group_size_per_vp_stage (default pp) > num_microbatches
    raises ValueError."""
    from builder.model.config import validate_config

    arch = MODELS["llama-3-8b"]
    with pytest.raises(ValueError, match="grad_accum: Megatron-LM's interleaved schedule"):
        validate_config(Config(model=arch, pp=4, grad_accum=2, pp_schedule="interleaved", pp_virtual_stages=2))
