"""torchao's float8 training as torchtitan and torchtune run it (builder.model.float8), pinned to torchao's code and to
measurements of it.

Sources, as the model cites them:
- torchao 0.19.0.dev, commit 36027d8 (github.com/pytorch/ao), torchao/float8/: float8_linear.py
  matmul_with_hp_or_float8_args (forward: `ctx.save_for_backward(input_hp, weight_hp_t)`, then the input and weight
  cast and the float8 mm; backward: the output gradient cast, the weight cast for the input gradient, the output
  gradient cast again and the saved input cast for the weight gradient, in that order), float8_training_tensor.py
  _ToFloat8ConstrFunc.forward (`tensor.to(torch.float32) * scale`), float8_utils.py to_fp8_saturated (clamp, then the
  1-byte cast), float8_ops.py preprocess_addmm (`a_data.contiguous()`, `b_data.t().contiguous().t()`) and
  addmm_float8_unwrapped (row-wise without fast accumulation: `output *= a_inverse_scale * b_inverse_scale`), config.py
  Float8LinearConfig.from_recipe_name and __post_init__ (the float8 all-gather asserts tensorwise), fsdp_utils.py
  WeightWithDynamicFloat8CastTensor.fsdp_pre_all_gather / fsdp_post_all_gather.
- torchtitan commit b5bcd76 torchtitan/components/quantization/utils.py module_filter_fn (in and out features
  divisible by 16, filter_fqns) and commit 1ea5d51 docs/float8.md (enable_fsdp_float8_all_gather).
- Measured on CPU (torch 2.13.0+cpu, transformers 5.23.0) by `python -m builder.validate.float8 --torchao <tree>` with
  torchao 36027d8's source tree on the path (torchao is not installed): torch._scaled_mm allocating its output only
  and the row-wise in-place product taken a row at a time, as on a GPU (builder/validate/float8.py says why).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from builder.catalog import default_models
from builder.model import Config, estimate
from builder.model import float8, oplists
from builder.model.activations import _bytes, environment
from builder.model.config import validate_config
from builder.model.expr import derive, evaluate, sym
from builder.model.options import OPTION_OF
from builder.model.peak import phases
from builder.validate.cases import hf_config
from builder.validate.compare import predicted_peaks
from builder.validate.float8 import STEPS

MODELS = default_models()
LLAMA = MODELS["llama-3-8b"]  # 32 layers, hidden 4096, 32 heads and 8 KV heads of 128, ffn 14336, vocab 128256
T, H, F, V = 8192, 4096, 14336, 128256


def _phase(config: Config, name: str):
    return next(p for p in phases(config) if p.name == name)


def _transient(phase, part: str) -> int:
    return sum(p.bytes for p in phase.parts if p.name == part)


# What a converted layer saves ------------------------------------------------------------------------------------

def test_float8_layers_save_what_bf16_layers_save():
    """matmul_with_hp_or_float8_args.forward saves input_hp and weight_hp_t before casting: Llama 3 8B's layer saves
    the bf16 run's bytes, whatever the recipe. By hand, the linear layers' share at 8,192 tokens: q, k and v share the
    RMSNorm output (8192 x 4096 x 2 B), o_proj its merged heads (8192 x 4096 x 2 B), gate and up the second norm's
    output (8192 x 4096 x 2 B), down the SwiGLU product (8192 x 14336 x 2 B): 436,207,616 bytes, the weights being
    the parameters themselves."""
    base = Config(model=LLAMA, seq_len=T)
    plain = environment(LLAMA, base)
    inputs = ("q/k/v projection input (RMSNorm output)", "o_proj input (merged heads)",
              "gate/up projection input (RMSNorm output)", "down projection input (the product)")
    for recipe in float8.RECIPES:
        env = environment(LLAMA, replace(base, float8=recipe))
        assert env["layer_saved"] == plain["layer_saved"]
        rows = [r for r in oplists.HF_LLAMA_BLOCK if r.op in inputs]
        assert sum(evaluate(_bytes(r), env) for r in rows) == 2 * T * (H + H + H + F) == 436_207_616


# The instants of one converted layer ------------------------------------------------------------------------------

# Peak bytes one Float8Linear adds (forward: above its input and weight; backward: above its saved input, weight,
# output and the output's gradient), measured: (recipe, (M tokens, K in, N out), all_gather) -> (forward, backward).
MEASURED_LINEAR = {
    ("tensorwise", (256, 128, 512), False): (622_600, 1_441_804),
    ("tensorwise", (256, 128, 512), True): (294_924, 1_376_264),
    ("rowwise", (256, 128, 512), False): (625_664, 1_445_376),
    ("rowwise_with_gw_hp", (256, 128, 512), False): (625_664, 1_180_672),
    ("tensorwise", (1024, 128, 256), False): (1_179_652, 2_916_364),
    ("tensorwise", (1024, 128, 256), True): (1_179_652, 2_883_592),
    ("rowwise", (1024, 128, 256), False): (1_183_744, 2_921_984),
    ("rowwise_with_gw_hp", (1024, 128, 256), False): (1_183_744, 2_363_392),
    ("tensorwise", (64, 512, 512), False): (2_392_072, 2_392_072),
    ("tensorwise", (64, 512, 512), True): (294_916, 753_684),
    ("rowwise", (64, 512, 512), False): (2_394_368, 2_394_368),
    ("rowwise_with_gw_hp", (64, 512, 512), False): (2_394_368, 2_392_324),
    ("tensorwise", (512, 1024, 128), False): (4_718_596, 6_029_328),
    ("tensorwise", (512, 1024, 128), True): (4_718_596, 5_898_252),
    ("rowwise", (512, 1024, 128), False): (4_720_640, 6_040_064),
    ("rowwise_with_gw_hp", (512, 1024, 128), False): (4_720_640, 3_487_756),
}


def _largest(phase: str, recipe: str, m: int, k: int, n: int, all_gather: bool) -> int:
    env = derive({f"holds_{name}": rule for name, rule in float8.CONDITIONS.items()},
                 {"mode": "train", "float8": recipe, "enable_fsdp_float8_all_gather": int(all_gather)})
    rule = float8.largest(phase, {"in": m * k, "out": m * n, "w": k * n}, {"fp32": 4, "fp8": 1, "act": 2, "grad": 2}
                          .__getitem__, lambda name: sym(f"holds_{name}"))
    return evaluate(rule, env)


@pytest.mark.parametrize("key", list(MEASURED_LINEAR))
def test_one_layer_s_instants_are_the_measured_peaks(key):
    """The largest instant of the forward and of the backward, derived from matmul_with_hp_or_float8_args, against the
    measurement: never above it, and below by the scales alone (fp32 scalars, or a scale per row and per column) and,
    row-wise, one row of the CPU's in-place product (under 0.5%)."""
    recipe, shape, gather = key
    for phase, measured in zip(("forward", "backward"), MEASURED_LINEAR[key]):
        predicted = _largest(phase, recipe, *shape, gather)
        assert 0 <= measured - predicted <= 0.005 * measured, (phase, measured, predicted)


def test_hand_derived_instants_of_a_tensorwise_layer():
    """tensorwise, M x K input, K x N weight: the forward's input cast is 9MK (an fp32 copy, its clamped copy, the
    1-byte result), the weight's MK + 9KN; in the backward, casting the saved input for the weight gradient holds the
    output gradient in float8 twice (2MN), the float8 weight (KN), the bf16 input gradient (2MK) and the cast (9MK)."""
    m, k, n = 512, 1024, 128
    assert _largest("forward", "tensorwise", m, k, n, False) == max(9 * m * k, m * k + 9 * k * n) == 4_718_592
    assert _largest("backward", "tensorwise", m, k, n, False) == 2 * m * n + k * n + 2 * m * k + 9 * m * k
    # The float8 all-gather hands the weight over cast: no weight cast, the weight not a temporary.
    assert _largest("backward", "tensorwise", m, k, n, True) == 2 * m * n + 2 * m * k + 9 * m * k


def test_llama_3_8b_down_projection_sets_the_layer_s_instants():
    """Llama 3 8B, 8,192 tokens, one GPU, tensorwise, the output layer in bf16. Forward: down casts the SwiGLU product
    (9 x T x f) with the block's input and the residual stream after attention held (2 x T x h x 2 B); backward: down
    casts its saved input for the weight gradient (11 x T x f with the bf16 input gradient), beside the output gradient
    in float8 twice (2 x T x h), the float8 weight (h x f) and the residual stream's gradient (T x h x 2 B)."""
    config = Config(model=LLAMA, seq_len=T, float8="tensorwise", float8_filter_output=True)
    forward, backward = _phase(config, "layer_forward"), _phase(config, "layer_backward")
    assert forward.detail == "the down projection's forward: the input cast to float8"
    assert _transient(forward, "activations/layer_temporaries") == 4 * T * H + 9 * T * F == 1_191_182_336
    assert backward.detail == "the down projection's backward: the saved input cast to float8 for the weight gradient"
    assert _transient(backward, "activations/layer_temporaries") == 4 * T * H + H * F + 11 * T * F == 1_484_783_616
    # rowwise_with_gw_hp casts neither operand of the weight gradient: up's output-gradient cast (9 x T x f) is the
    # largest, with its gradient (T x f x 2 B), the SiLU output's waiting (T x f x 2 B) and the residual's.
    hp = _phase(replace(config, float8="rowwise_with_gw_hp"), "layer_backward")
    assert hp.detail == "the up projection's backward: the output gradient cast to float8"
    assert _transient(hp, "activations/layer_temporaries") == 2 * T * H + 4 * T * F + 9 * T * F == 1_593_835_520


# The output layer -------------------------------------------------------------------------------------------------

def test_a_converted_output_layer_casts_the_logits_gradient():
    """torchtitan converts the output layer (128,256 x 4,096: both divisible by 16) unless filter_fqns names it. Its
    backward, after the loss's, recasts the logits' gradient for the weight gradient: 10 x T x V + V x h + 2 x T x h
    bytes beside that gradient (T x V x 2 B); under FSDP2 the output layer's gradient (the root unit's) is counted
    apart until its matmul makes it. Filtered out, no such phase."""
    config = Config(model=LLAMA, seq_len=T, float8="tensorwise", fsdp="FULL_SHARD", dp=8)
    head = _phase(config, "head_backward")
    root = estimate(config).get("comm/root_grads")
    assert root == V * H * 2
    assert _transient(head, "activations/float8_casts") == 10 * T * V + V * H + 2 * T * H - root
    assert _transient(head, "activations/loss_grads") == T * V * 2
    forward = _phase(config, "head_forward")  # the weight cast: T x h in float8, then 9 x V x h
    assert _transient(forward, "activations/float8_casts") == T * H + 9 * V * H
    filtered = replace(config, float8_filter_output=True)
    assert {"head_forward", "head_backward"}.isdisjoint(p.name for p in phases(filtered))


def test_an_output_layer_torchtitan_would_skip_is_not_converted():
    """module_filter_fn: in and out features divisible by 16. A vocabulary of 128,257 leaves the output layer in bf16."""
    odd = replace(LLAMA, vocab=128_257)
    assert "head_backward" not in {p.name for p in phases(Config(model=odd, seq_len=1024, float8="rowwise"))}


# FSDP's float8 all-gather -----------------------------------------------------------------------------------------

def test_fsdp_float8_all_gather_gathers_one_byte_a_converted_parameter():
    """fsdp_pre_all_gather casts each shard to float8: the gathered units (the block computed and the root unit, and
    one block's all-gather buffer) hold Llama 3 8B's converted weights at 1 B instead of 2, with an fp32 scale each (7 a
    block, the output layer's)."""
    block, block_linear, root, head = 218_112_000, 218_103_808, 1_050_677_248, V * H

    def gathered(config):
        parts = estimate(config)
        return parts.get("comm/gathered_params") + parts.get("comm/all_gather_output")

    base = Config(model=LLAMA, seq_len=T, fsdp="FULL_SHARD", dp=8, float8="tensorwise")
    bf16 = gathered(base)
    assert bf16 == (2 * block + root) * 2 == 2_973_802_496
    assert estimate(base).get("comm/all_gather_output") == 2 * block
    assert gathered(replace(base, enable_fsdp_float8_all_gather=True)) \
        == bf16 - (2 * block_linear + head) + 4 * (2 * 7 + 1) == 2_012_258_364
    assert estimate(replace(base, enable_fsdp_float8_all_gather=True)).get("comm/all_gather_output") \
        == 2 * block - block_linear + 4 * 7
    kept_head = replace(base, enable_fsdp_float8_all_gather=True, float8_filter_output=True)
    assert gathered(kept_head) == bf16 - 2 * block_linear + 4 * 2 * 7


# Whole training steps, measured ---------------------------------------------------------------------------------

# (case, recipe, output layer filtered) -> (peak forward, peak backward), measured.
MEASURED_STEPS = {
    (0, "tensorwise", False): (131_515_560, 150_897_812), (0, "rowwise", False): (131_515_560, 150_935_688),
    (0, "rowwise_with_gw_hp", False): (131_515_560, 148_276_360), (0, "tensorwise", True): (131_515_560, 148_276_360),
    (1, "tensorwise", False): (37_733_508, 39_052_952), (1, "rowwise", False): (37_737_600, 39_063_560),
    (1, "rowwise_with_gw_hp", False): (37_737_600, 38_208_648), (1, "tensorwise", True): (37_733_508, 39_052_952),
    (2, "tensorwise", False): (109_687_848, 129_070_100), (2, "rowwise", False): (109_687_848, 129_107_976),
    (2, "rowwise_with_gw_hp", False): (109_687_848, 126_448_648), (2, "tensorwise", True): (109_687_848, 126_448_648),
}


@pytest.mark.parametrize("key", list(MEASURED_STEPS))
def test_whole_steps_match_the_measurement(key):
    """A two-layer transformers Llama (bf16, SGD with momentum) converted by torchao's convert_to_float8_training:
    the forward's and the backward's peaks within 0.05% (the scales are left out); the first case peaks in the output
    layer's backward, the second in the down projection's backward and, in the forward, its input cast."""
    index, recipe, filtered = key
    case = STEPS[index]
    predicted = predicted_peaks(case.as_dict(), hf_config(case.forward, case.layers), case.name, float8=recipe,
                                float8_filter_output=filtered)
    for quantity, measured in zip(("peak_forward", "peak_backward"), MEASURED_STEPS[key]):
        assert abs(predicted[quantity] - measured) <= 0.0005 * measured, quantity


# Refusals and words --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("changes, option", [
    (dict(float8="tensorwise", mode="serve"), "float8"),
    (dict(float8="tensorwise", precision="te-fp8"), "float8"),
    (dict(float8="tensorwise", precision="amp-bf16"), "float8"),
    (dict(float8="tensorwise", precision="bf16-mixed", implementation="megatron"), "float8"),
    (dict(float8="rowwise", recompute="selective-op"), "float8"),
    (dict(float8="rowwise", tp=2), "float8"),
    (dict(float8="rowwise", lora_rank=8), "float8"),
    (dict(float8="rowwise", loss="chunked"), "float8"),
    (dict(float8="rowwise", compile=True), "compile"),
    (dict(float8="rowwise", enable_fsdp_float8_all_gather=True, fsdp="FULL_SHARD", dp=8),
     "enable_fsdp_float8_all_gather"),
    (dict(float8="tensorwise", enable_fsdp_float8_all_gather=True), "enable_fsdp_float8_all_gather"),
    (dict(float8="tensorwise", enable_fsdp_float8_all_gather=True, fsdp="SHARD_GRAD_OP", dp=8),
     "enable_fsdp_float8_all_gather"),
    (dict(float8_filter_output=True), "float8_filter_output"),
])
def test_what_is_not_modelled_is_refused_in_one_line(changes, option):
    with pytest.raises(ValueError) as error:
        validate_config(Config(model=LLAMA, **changes))
    assert str(error.value).startswith(f"{option}: ") and "\n" not in str(error.value)


@pytest.mark.parametrize("model", ["gpt2", "mixtral-8x7b", "qwen2.5-7b"])
def test_blocks_other_than_llama_s_are_refused(model):
    """GPT-2's block, Mixtral's experts (torchtitan's Float8GroupedExpertsConverter), Qwen2.5's biased projections."""
    with pytest.raises(ValueError, match="^float8: torchao's float8 training is modelled for"):
        validate_config(Config(model=MODELS[model], float8="tensorwise", seq_len=1024))


def test_the_published_float8_rows_cannot_be_compared():
    """Every float8 row with a memory figure runs under torch.compile, which fuses the casts: torchtitan's Table 1
    (FSDP + torch.compile + Float8, per-op selective checkpointing, 76.8 GiB) and torchao's float8 training docs
    (torch.compile, FSDP2, per-op selective checkpointing). The model refuses both settings with float8."""
    table1 = Config(model=LLAMA, seq_len=8192, micro_batch=2, fsdp="FULL_SHARD", dp=8, recompute="selective-op",
                    float8="tensorwise", enable_fsdp_float8_all_gather=True)
    for config in (table1, replace(table1, recompute="full", compile=True)):
        with pytest.raises(ValueError):
            validate_config(config)


def test_options_speak_torchtitan_s_and_torchao_s_words():
    assert OPTION_OF["float8"].flag == "--float8" and OPTION_OF["float8"].choices == float8.RECIPES
    assert OPTION_OF["enable_fsdp_float8_all_gather"].flag == "--enable-fsdp-float8-all-gather"
    assert OPTION_OF["float8_filter_output"].flag == "--float8-filter-output"
    assert {OPTION_OF[name].url for name in ("float8", "enable_fsdp_float8_all_gather", "float8_filter_output")} == {
        "float8", "enable_fsdp_float8_all_gather", "float8_filter_output"}
