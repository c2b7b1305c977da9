"""torchao's low-bit AdamW (torchao 0.19 torchao/optim/): AdamW8bit, AdamW4bit and AdamWFp8 quantise both moments
block-wise (subclass_8bit.py: uint8 codes + an fp32 scale per 256 elements; subclass_4bit.py: two 4-bit codes per
byte + an fp32 scale per 128, torchao's default block size; subclass_fp8.py: float8_e4m3fn + an fp32 scale per 256),
and step one parameter at a time under torch.compile (adam.py single_param_adam)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from builder.catalog import default_models
from builder.model import Config
from builder.model.peak import assess
from tests.test_cli import run

LLAMA = default_models()["llama-3-8b"]
N = 8_030_261_248
EMBEDDING = 128_256 * 4096  # Llama 3 8B's largest tensor (the input embedding; the head is the same size)


@pytest.mark.parametrize("optimizer, per_element", [
    ("adamw8bit-torchao", 1 + Fraction(4, 256)), ("adamw4bit", Fraction(1, 2) + Fraction(4, 128)),
    ("adamwfp8", 1 + Fraction(4, 256)),
])
def test_moments_are_codes_plus_one_fp32_scale_per_block(optimizer, per_element):
    breakdown, _ = assess(Config(model=LLAMA, optimizer=optimizer))
    parts = {p.name: p.bytes for p in breakdown.parts}
    for moment in ("optimizer/adam_m", "optimizer/adam_v"):
        assert parts[moment] == -(-N * per_element // 1)
    assert parts["optimizer/master"] == 4 * N  # bf16 mixed precision keeps its fp32 master copy


@pytest.mark.parametrize("optimizer, step_bytes", [("adamw8bit-torchao", 8), ("adamw4bit", 25), ("adamwfp8", 0)])
def test_the_compiled_step_holds_buffers_for_the_largest_parameter(optimizer, step_bytes):
    _, needed = assess(Config(model=LLAMA, optimizer=optimizer))
    steps = [phase for phase in needed.steps if phase.name == "optimizer_step"]
    temporaries = {p.name: p.bytes for p in steps[0].parts}.get("optimizer/step_temporaries", 0)
    assert temporaries == step_bytes * EMBEDDING


def test_torchao_optimizers_refuse_what_they_do_not_offer(capsys):
    code, _, err = run(capsys, "estimate", "--model", "llama-3-8b", "--optimizer", "adamw4bit",
                       "--optimizer-impl", "foreach")
    assert code == 2 and "--optimizer-impl" in err and "one parameter at a time" in err
    code, _, err = run(capsys, "estimate", "--model", "llama-3-8b", "--optimizer", "adamw4bit",
                       "--optimizer-state-dtype", "bf16")
    assert code == 2 and "low-bit states are fixed" in err
