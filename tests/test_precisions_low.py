"""fp8 and fp4 training as Transformer Engine holds them (issue 19 section 2), pinned to the upstream source.

Sources, as the model cites them (builder.model.recipes):
- TransformerEngine 2.20.0.dev0, commit d0067d0 (github.com/NVIDIA/TransformerEngine):
  transformer_engine/pytorch/module/linear.py (`_Linear` forward: the weight quantised with row-wise and
  column-wise usage into a workspace, cached in `_fp8_workspaces` when is_first_microbatch is given; the input
  saved for backward quantised, "Discard row-wise data since it is not needed in backward pass");
  transformer_engine/pytorch/tensor/float8_tensor.py (`inner_tensor_specs`: `_data` 1 B and, without non-TN fp8
  GEMMs, `_transpose` 1 B), mxfp8_tensor.py (row-wise and column-wise data 1 B each, a 1 B scale per 32 each),
  nvfp4_tensor.py (two E2M1 values per byte, a 1 B E4M3 scale per 16, each way);
  transformer_engine/pytorch/quantization.py `quantized_model_init` (only quantised copies of the parameters).
- Megatron-LM commit d98e8a6 (github.com/NVIDIA/Megatron-LM): megatron/training/theoretical_memory_usage.py
  (bf16 weights, fp32 main_grad, fp32 master and Adam moments: 18 B/param), transformer_config.py
  (--fp8-recipe delayed by default, --fp8-param-gather, --fp4-format), transformer_engine.py (TELinear passes
  is_first_microbatch), attention.py (linear_proj saves its original input for every recipe but delayed).
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from builder.catalog import default_models
from builder.model import Config
from builder.model.activations import environment
from builder.model.config import PRECISIONS, validate_config
from builder.model.estimator import estimate
from builder.model.recipes import RECIPES

MODELS = default_models()
LLAMA = MODELS["llama-3-8b"]
N = 7_000_000_000  # a raw parameter count: every parameter a linear weight
STATES = ("weights", "gradients", "optimizer", "master")


def state_bytes(config: Config) -> int:
    return sum(p.bytes for p in estimate(config).parts if p.bucket in STATES)


def parts(config: Config) -> dict[str, int]:
    return {p.name: p.bytes for p in estimate(config).parts}


@pytest.mark.parametrize("precision, per_param", [
    # Megatron's 18 (2 bf16 weight + 4 fp32 main_grad + 4 fp32 master + 4 + 4 Adam) plus TE's copy of the weight:
    ("te-fp8", 18 + 2),  # float8_tensor.py: _data + _transpose, 1 B each (Hopper)
    ("te-mxfp8", 18 + 2 * (1 + Fraction(1, 32))),  # mxfp8_tensor.py: 1 B data + 1 B scale per 32, both ways
    ("te-nvfp4", 18 + 2 * (Fraction(1, 2) + Fraction(1, 16))),  # nvfp4_tensor.py: 0.5 B + 1 B per 16, both ways
    # quantized_model_init / --fp8-param-gather: no bf16 weight, the fp8 weight (data + transpose) instead.
    ("te-fp8-params", 18 - 2 + 2),
    ("megatron-bf16", 18),
])
def test_bytes_per_parameter_are_te_and_megatrons(precision, per_param):
    """Adam, one GPU, a raw count (all linear): model states per parameter as the TE source implies."""
    assert Fraction(state_bytes(Config(params=N, precision=precision, optimizer="adam")), N) == per_param


def test_not_one_byte_per_parameter():
    """The naive calculators' fp8 (1 B/param weights) is wrong: fp8 training keeps more, not less, than bf16."""
    fp8 = state_bytes(Config(model=LLAMA, precision="te-fp8"))
    bf16 = state_bytes(Config(model=LLAMA, precision="megatron-bf16"))
    assert fp8 > bf16
    # Only the blocks' linear weights get a copy (the embeddings and the output layer stay bf16): Llama 3 8B's
    # linear weights are 8,030,261,248 - 2 x 128,256 x 4,096 (embedding, head) - 65 x 4,096 (norms).
    linear = 8_030_261_248 - 2 * 128_256 * 4_096 - 65 * 4_096
    got = parts(Config(model=LLAMA, precision="te-fp8"))
    assert got["weights/low_precision_copies"] == 2 * linear
    assert got["weights"] == 2 * 8_030_261_248
    assert fp8 - bf16 == 2 * linear
    nvfp4 = parts(Config(model=LLAMA, precision="te-nvfp4"))
    assert nvfp4["weights/low_precision_copies"] == linear * Fraction(9, 8)


def test_fp8_params_replace_the_bf16_linear_weights():
    got = parts(Config(model=LLAMA, precision="te-fp8-params"))
    linear = 8_030_261_248 - 2 * 128_256 * 4_096 - 65 * 4_096
    assert got["weights/quantised_linear"] == 2 * linear
    assert got["weights"] == 2 * (8_030_261_248 - linear)
    assert "weights/low_precision_copies" not in got
    assert got["optimizer/master"] == 4 * 8_030_261_248 and got["gradients"] == 4 * 8_030_261_248


def test_saved_linear_inputs_shrink_megatron_op_list():
    """Megatron's GPT block (Korthikanti 4.1 op list): QKV, fc1 and fc2 inputs saved quantised (linear.py);
    the output projection keeps its bf16 input under MXFP8 and NVFP4 (attention.py save_original_input) and
    saves an fp8 copy besides under delayed scaling."""
    s, h, f = 4096, LLAMA.hidden, LLAMA.ffn
    base = dict(model=LLAMA, seq_len=s, implementation="megatron", attention="flash")
    env = {p: environment(LLAMA, Config(**base, precision=p)) for p in ("megatron-bf16", "te-fp8", "te-nvfp4")}
    attention = {p: e["layer_saved"]["attention"] for p, e in env.items()}
    mlp = {p: e["layer_saved"]["mlp"] for p, e in env.items()}
    # fc1 input (s h) and fc2 input (s f): 2 B -> 1 B (fp8) or 9/16 B (NVFP4).
    assert mlp["megatron-bf16"] - mlp["te-fp8"] == s * h + s * f
    assert mlp["megatron-bf16"] - mlp["te-nvfp4"] == (s * h + s * f) * (2 - Fraction(9, 16))
    # QKV input 2 B -> 1 B; the output projection (a d = h for Llama) adds a 1 B copy under delayed scaling.
    assert attention["megatron-bf16"] - attention["te-fp8"] == s * h - s * h
    assert attention["megatron-bf16"] - attention["te-nvfp4"] == s * h * (2 - Fraction(9, 16))


def test_transformers_projections_each_save_their_quantised_input():
    """transformers Llama with TE layers: q, k and v (gate and up) quantise the shared input each."""
    s, h = 4096, LLAMA.hidden
    fp8 = environment(LLAMA, Config(model=LLAMA, seq_len=s, precision="te-fp8", attention="eager"))
    bf16 = environment(LLAMA, Config(model=LLAMA, seq_len=s, precision="megatron-bf16", attention="eager"))
    # q/k/v: 3 x 1 B instead of 1 x 2 B; o_proj (eager: no kernel keeps it) 1 B instead of 2 B.
    assert fp8["layer_saved"]["attention"] - bf16["layer_saved"]["attention"] == s * h * (3 - 2) - s * h


def test_every_recipe_is_a_policy_and_serving_ignores_it():
    assert {p.recipe for p in PRECISIONS.values()} - {""} == set(RECIPES)
    served = Config(model=LLAMA, mode="serve", precision="bf16")
    assert "weights/low_precision_copies" not in parts(served)


def test_qlora_with_a_recipe_is_refused_in_one_line():
    with pytest.raises(ValueError) as error:
        validate_config(Config(model=LLAMA, precision="te-fp8", lora_rank=8, qlora=True))
    assert str(error.value).startswith("qlora: ") and "\n" not in str(error.value)


def test_sharded_parameters_count_one_blocks_copy():
    """FSDP: TE caches no copy (linear.py: no workspace cache under FSDP2); one gathered block's is counted."""
    got = parts(Config(model=LLAMA, precision="te-fp8", fsdp="FULL_SHARD", dp=8))
    block = (8_030_261_248 - 2 * 128_256 * 4_096 - 65 * 4_096) // LLAMA.layers
    assert got["weights/low_precision_copies"] == 2 * block
