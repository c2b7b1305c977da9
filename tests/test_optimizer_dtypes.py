"""Adam's moments each in their own dtype, and MS-AMP's O2 level, pinned to their sources.

FP8-LM (Peng et al. 2023, arXiv:2310.18313, section 2.2): fp16 master weights with a scaling factor, fp8 gradients,
an fp8 first moment and an fp16 second moment, 6 bytes per parameter instead of mixed-precision Adam's 16.
MS-AMP (commit 9746ea8): msamp/__init__.py initialize sets exp_avg_dtype=torch.uint8 and exp_avg_sq_dtype=
torch.float16 at opt_level 'O2' and takes Adam or AdamW only; msamp/optim/adamw.py LBAdamW.adamw_fn steps one
parameter at a time with param.float() and grads[i].float(); docs/user-tutorial/optimization-level.md's table:
O2 weight FP16, no master weight, weight gradient FP8, optimizer states FP8 + FP16.
"""

from __future__ import annotations

import pytest

from builder.catalog import default_models
from builder.model import Config
from builder.model.config import validate_config
from builder.model.peak import assess
from tests.test_cli import run

LLAMA = default_models()["llama-3-8b"]
N = 8_030_261_248
EMBEDDING = 128_256 * 4096  # Llama 3 8B's largest tensor


def states(config: Config) -> dict[str, int]:
    breakdown, _ = assess(config)
    return {p.name: p.bytes for p in breakdown.parts if p.name.split("/")[0] in ("weights", "gradients", "optimizer")}


def test_msamp_o2_keeps_six_bytes_per_parameter_as_fp8_lm_section_2_2():
    parts = states(Config(params=1_000_000_000, precision="msamp-o2"))
    assert parts == {"weights": 2_000_000_000, "gradients": 1_000_000_000, "optimizer/adam_m": 1_000_000_000,
                     "optimizer/adam_v": 2_000_000_000}
    assert sum(parts.values()) == 6 * 1_000_000_000  # FP8-LM: 16 bytes -> 6 bytes per parameter
    mixed = states(Config(params=1_000_000_000, precision="fp32"))
    assert sum(mixed.values()) == 16 * 1_000_000_000  # the paper's baseline: 4 + 4 + 4 + 4


def test_each_moment_takes_its_own_dtype():
    parts = states(Config(params=1_000_000_000, exp_avg_dtype="bf16"))
    assert parts["optimizer/adam_m"] == 2_000_000_000 and parts["optimizer/adam_v"] == 4_000_000_000
    parts = states(Config(params=1_000_000_000, optimizer_state_dtype="bf16", exp_avg_sq_dtype="fp32"))
    assert parts["optimizer/adam_m"] == 2_000_000_000 and parts["optimizer/adam_v"] == 4_000_000_000
    # The policy's moments give way to an explicit option.
    parts = states(Config(params=1_000_000_000, precision="msamp-o2", exp_avg_sq_dtype="fp32"))
    assert parts["optimizer/adam_m"] == 1_000_000_000 and parts["optimizer/adam_v"] == 4_000_000_000


def test_msamp_steps_one_parameter_at_a_time_in_fp32():
    """LBAdamW.adamw_fn: param.float() and grads[i].float() for one parameter, 2 x 4 B x the largest tensor."""
    _, needed = assess(Config(model=LLAMA, precision="msamp-o2"))
    step = [phase for phase in needed.steps if phase.name == "optimizer_step"][0]
    assert {p.name: p.bytes for p in step.parts}["optimizer/step_temporaries"] == 8 * EMBEDDING


@pytest.mark.parametrize("changes, words", [
    ({"optimizer": "sgd-momentum"}, "optimizer: precision msamp-o2 runs MS-AMP's LBAdam or LBAdamW"),
    ({"optimizer_impl": "fused"}, "optimizer_impl: precision msamp-o2 steps with MS-AMP's LBAdamW"),
    ({"zero": 1, "dp": 8}, "zero: precision msamp-o2 with ZeRO or FSDP is MS-AMP's O3 level"),
    ({"lora_rank": 16}, "lora_rank: precision msamp-o2 with LoRA adapters is not modelled"),
])
def test_msamp_refuses_what_msamp_does_not_run(changes, words):
    with pytest.raises(ValueError, match=words):
        validate_config(Config(model=LLAMA, precision="msamp-o2", **changes))


def test_per_moment_dtypes_on_the_command_line(capsys):
    code, out, _ = run(capsys, "estimate", "--params", "1e9", "--exp-avg-dtype", "fp8", "--exp-avg-sq-dtype", "fp16",
                       "--json")
    assert code == 0
    assert '"optimizer/adam_m": 1000000000' in out and '"optimizer/adam_v": 2000000000' in out
    code, _, err = run(capsys, "estimate", "--params", "1e9", "--optimizer", "lion", "--exp-avg-dtype", "fp8")
    assert code == 2 and "argument --exp-avg-dtype: only Adam and AdamW keep exp_avg; optimizer lion" in err


def test_msamp_converts_only_linear_layers():
    """MS-AMP (commit 9746ea8) msamp/nn/linear.py LinearReplacer: every nn.Linear (Llama 3 8B's 7 projections per
    layer and its untied output layer) becomes an FP8Linear with an fp16 weight, whose gradient is fp8
    (msamp/nn/functional.py _FP8GemmFunction.backward) and whose forward keeps an fp8 copy of the weight for backward
    (ctx.weight_fp8); the embedding and the norms keep the dtype the model was declared in, fp32
    (docs/user-tutorial/usage.md), with fp32 gradients. Llama 3 8B: 6,979,321,856 projection weights and
    525,336,576 in the output layer (128,256 x 4,096); 525,336,576 + 65 x 4,096 in the embedding and norms."""
    parts = states(Config(model=LLAMA, precision="msamp-o2"))
    linear = 32 * (2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 4096 * 14336) + EMBEDDING
    other = EMBEDDING + 65 * 4096
    assert linear + other == N
    assert parts["weights/scaling_linear"] == 2 * linear
    assert parts["weights/low_precision_copies"] == linear
    assert parts["weights"] == 4 * other
    assert parts["gradients"] == linear + 4 * other
    assert parts["optimizer/adam_m"] == N and parts["optimizer/adam_v"] == 2 * N  # every parameter's moments


def test_msamp_gives_a_tied_output_layer_its_own_weight():
    """LinearReplacer._build_fp8linear builds a new FP8Linear parameter for GPT-2's lm_head, which shares the token
    embedding's matrix: the fp32 embedding stays and an fp16 copy of the 50,257 x 768 matrix joins the linear weights."""
    gpt2 = default_models()["gpt2"]
    parts = states(Config(model=gpt2, seq_len=1024, precision="msamp-o2"))
    vocab = 50_257 * 768
    assert parts["weights/scaling_linear"] - 2 * vocab == 2 * 12 * (768 * 3 * 768 + 768 * 768 + 2 * 768 * 3072)
