"""The CUDA caching allocator's rounding of the weights an engine loads (builder.model.allocator), pinned to PyTorch's
c10/cuda/CUDACachingAllocator.cpp (commit 001074d) and to the engines' logs of Qwen2-family models, whose widths
leave their tensors short of the allocator's 2 MiB segments while Llama's and Qwen3's fill them."""

from __future__ import annotations

from fractions import Fraction

import pytest

from builder.catalog import default_models
from builder.model import Config
from builder.model.allocator import _segment_rounding, allocated_rounding
from builder.model.engines import EngineSettings, engine_report
from builder.model.expr import evaluate, sym
from builder.validate.published import QWQ_32B, QWEN_INSTRUCT_POSITIONS

MODELS = default_models()
MIB, GIB = 2**20, 2**30
QWEN7 = MODELS["qwen2.5-7b"].with_changes(max_position_embeddings=QWEN_INSTRUCT_POSITIONS)


@pytest.mark.parametrize("size, allocated, free", [
    # Qwen2.5 7B at size 1: qkv_proj 4,608 x 3,584 x 2 B = 31.5 MiB in a 32 MiB segment (0.5 MiB left: not split).
    (4608 * 3584 * 2, MIB // 2, MIB // 2),
    # gate_up_proj 37,888 x 3,584 x 2 B = 259 MiB in 260 MiB: exactly 1 MiB left, still not split (remaining >
    # kSmallSize splits).
    (37888 * 3584 * 2, MIB, MIB),
    # o_proj 3,584 x 3,584 x 2 B = 24.5 MiB in 26 MiB: 1.5 MiB left, split off; free memory still counts it.
    (3584 * 3584 * 2, 0, 3 * MIB // 2),
    # Under 10 MiB a request shares a 20 MiB segment: counted at its size.
    (8 * MIB - 512, 0, 0),
    # A whole number of 2 MiB: nothing more (Llama 3.1 8B's qkv_proj, 48 MiB).
    (6144 * 4096 * 2, 0, 0),
    # A request is rounded up to 512 bytes first: 10 MiB + 512 B in a 12 MiB segment, split (2 MiB - 512 B left).
    (10 * MIB + 1, 0, 2 * MIB - 512),
])
def test_one_tensor_costs_its_block_or_its_segment(size, allocated, free):
    assert evaluate(allocated_rounding(sym("size")), {"size": size}) == allocated
    assert evaluate(_segment_rounding(sym("size")), {"size": size}) == free


def _vllm(arch, tp):
    return engine_report(Config(model=arch, mode="serve", tp=tp), EngineSettings(max_model_len=8192), 80 * GIB,
                         "h100-80gb").values


@pytest.mark.parametrize("tp, rounding, logged", [
    # qkv_proj 0.5 + gate_up_proj 1 + down_proj 0.5 MiB a layer over 28 layers, and the embedding and the head
    # (1,039.5 MiB each) 0.5 MiB each; vLLM 0.10.1.1 on an A100 (dennislee22/vLLM-benchmarking, commit b474d1e):
    # "Model loading took 14.2488 GiB".
    (1, 57 * MIB, "14.2488"),
    # At size 2: qkv_proj 15.75 MiB (0.25) and gate_up_proj 129.5 MiB (0.5) a layer, the embedding and the head
    # 519.75 MiB (0.25 each): "Model loading took 7.1217 GiB".
    (2, Fraction(43, 2) * MIB, "7.1217"),
])
def test_qwen2_7b_loads_its_rounding_to_the_logs_fourth_decimal(tp, rounding, logged):
    values = _vllm(QWEN7, tp)
    assert values["allocator_rounding"] == rounding
    assert abs(values["loaded_weights"] / GIB - Fraction(logged)) <= Fraction(5, 10_000)
    # Without it the parameters and the rotary table fall 0.02 to 0.06 GiB short of the log.
    assert Fraction(logged) - (values["loaded_weights"] - rounding) / GIB > Fraction(2, 100)


def test_llama_and_qwen3_fill_their_segments():
    """Llama 3.1 8B's tensors are whole numbers of 2 MiB: nothing more, as its 14.99 GiB log shows; Qwen3 8B's
    embedding and head (151,936 x 4,096 x 2 B = 1,187 MiB each) take 1 MiB more each."""
    assert _vllm(MODELS["llama-3.1-8b"], 1)["allocator_rounding"] == 0
    assert _vllm(MODELS["qwen3-8b"], 1)["allocator_rounding"] == 2 * MIB


def test_sglang_counts_every_segment_whole():
    """SGLang's "mem usage" is free memory: QwQ-32B at size 4 holds qkv_proj 17.5, o_proj 12.5, gate_up_proj 135 and
    down_proj 67.5 MiB a layer in segments of 18, 14, 136 and 68 (3.5 MiB a layer, 64 layers) and the embedding and
    the head 371.25 MiB each in 372: 225.5 MiB, beside the fp32 rotary table of 131,072 x 128 (64 MiB). SGLang 0.4.3
    on four L4s (didier-durand/llms-in-clouds docs/sglang.md, commit b001c86): "mem usage=15.54 GB" (GiB)."""
    values = engine_report(Config(model=QWQ_32B, mode="serve", tp=4), EngineSettings(engine="sglang"), 23 * GIB,
                           "l4").values
    assert values["allocator_rounding"] == Fraction(451, 2) * MIB and values["rotary_table"] == 64 * MIB
    assert abs(values["loaded_weights"] / GIB - Fraction("15.54")) <= Fraction(5, 1000)
