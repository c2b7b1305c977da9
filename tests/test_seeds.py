"""The seed widgets' worked examples, reproduced under their own stated assumptions
(../shared/seeds/000, 001, 003, 004; quoted in ../shared/REFERENCES.md)."""

from fractions import Fraction

import pytest

from builder.catalog import default_models
from builder.model import GB, GiB, Config, estimate
from builder.model.teaching import ADAM_SEGMENTS, bytes_per_param, budget_allocator

MODELS = default_models()


def test_seed_000_bytes_per_param_view():
    # Seed 000: "Total = 3.7B x 18 bytes = 62 GiB"; "Weights = 3.7B x 2B = 6.8 GiB", "Master = ... 14 GiB".
    view = bytes_per_param(3_700_000_000)
    assert view.total == 3_700_000_000 * 18
    assert round(view.total / GiB) == 62
    assert round(view.get("weights") / GiB, 1) == 6.9  # 6.89 GiB: the seed's "6.8" truncates
    assert round(view.get("master") / GiB) == 14
    assert [s.bytes_per_param for s in ADAM_SEGMENTS] == [2, 4, 4, 4, 2, 2]


def test_seed_000_zero_stages_shard_the_right_segments():
    # Seed 000: stage 1 shards optimizer states, stage 2 also gradients, stage 3 also weights.
    params, gpus = 7_000_000_000, 8
    none = bytes_per_param(params, zero="none", gpus=gpus)
    stage1 = bytes_per_param(params, zero="stage1", gpus=gpus)
    stage3 = bytes_per_param(params, zero="stage3", gpus=gpus)
    assert none.total == params * 18
    assert stage1.total == params * (2 + 2 + 2) + params * 12 // gpus
    assert stage3.total == params * 2 + params * 16 // gpus  # activations (placeholder) never sharded
    assert stage1.part("gradients").sharded_by == 1 and stage3.part("gradients").sharded_by == 8


def test_seed_001_budget_allocator_default_state():
    # Seed 001: 7B, b=1, s=2K, BF16 -> 13.0 + 13.0 + 26.1 + 0.50 = 52.7 GiB of 80 GiB, 27.3 GiB headroom.
    view = budget_allocator(7_000_000_000, batch=1, seq_len=2048, precision="bf16")
    assert round(view.get("weights") / GiB, 1) == 13.0
    assert round(view.get("gradients") / GiB, 1) == 13.0
    assert round(view.get("optimizer") / GiB, 1) == 26.1
    assert round(view.get("activations") / GiB, 2) == 0.50
    assert round(view.total / GiB, 1) == 52.7
    assert round((80 * GiB - view.total) / GiB, 1) == 27.3
    assert "simplified" in view.part("optimizer").simplification


def test_seed_003_fp32_adam_112_gb():
    # Seed 003: "7B params, FP32 Adam = 7B * (4+4+4+4) = 112 GB" (decimal GB).
    # The 112 GB itself (Transformer Math 101) is a case of builder/validate/published.py (tests/test_published.py).
    breakdown = estimate(Config(params=7_000_000_000, precision="fp32", optimizer="adam"))
    assert {p.name for p in breakdown.parts} == {"weights", "gradients", "optimizer/adam_m", "optimizer/adam_v"}


def test_seed_004_llama_3_8b_each_part():
    # Seed 004: Llama-3-8B, bf16, Adam 12 B/param, b=1, s=4096, selective recompute (34sbh per layer),
    # no sharding, +10% overhead: params 16.1, grads 16.1, optimizer 96.4, activations 18.3,
    # overhead 14.7, total 161.4 GB (decimal).
    config = Config(model=MODELS["llama-3-8b"], precision="bf16-mixed", optimizer="adam", micro_batch=1,
                    seq_len=4096, recompute="selective", activation_formula="korthikanti", overhead_fraction=0.10)
    b = estimate(config)
    assert round(b.get("weights") / GB, 1) == 16.1
    assert round(b.get("gradients") / GB, 1) == 16.1
    assert round(b.get("optimizer") / GB, 1) == 96.4  # master 4 + m 4 + v 4 = 12 B/param
    assert b.get("activations") == 34 * 4096 * 1 * 4096 * 32
    assert round(b.get("activations") / GB, 1) == 18.3
    assert round(b.get("overhead") / GB, 1) == 14.7
    assert round(b.total / GB, 1) == 161.4
    assert b.total == sum(p.bytes for p in b.parts)


@pytest.mark.parametrize("precision, per_param", [("bf16-mixed", 16), ("fp16-mixed", 16), ("megatron-bf16", 18),
                                                   ("fp32", 16), ("bf16", 8)])
def test_model_state_bytes_per_param(precision, per_param):
    # ZeRO section 3.1: mixed-precision Adam = 2 + 2 + 12 = 16 B/param; Megatron's fp32 main_grad: 18;
    # REFERENCES.md pitfall: "fp16 mixed precision given as 8 B/param (it is 16-18)".
    b = estimate(Config(params=1_000_000, precision=precision))
    assert Fraction(b.total, 1_000_000) == per_param
