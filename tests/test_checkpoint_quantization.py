"""A checkpoint published quantised (Architecture.checkpoint_quantization, config.json's quantization_config): served
in its own format, as vLLM and SGLang serve it, with its fp32 block scales; training keeps 16-bit weights.

Sources pinned here:
- DeepSeek-V3's checkpoint (github.com/deepseek-ai/DeepSeek-V3 README_WEIGHTS.md, "FP8 Weight Documentation", commit
  9b4e978): quantization_config {quant_method fp8, fmt e4m3, weight_block_size [128, 128]}, float8_e4m3fn weights
  with a float32 weight_scale_inv per 128 x 128 block, ceil(out / 128) x ceil(in / 128) a matrix
  (inference/model.py Linear); vLLM 0.33.0's Fp8LinearMethod.create_weights and Fp8MoEMethod.create_weights
  (vllm/model_executor/layers/quantization/fp8.py) build the same shapes per rank.
- A vLLM v0.11.2 start-up log of DeepSeek-R1-0528 (DeepSeek-V3's shapes and fp8 checkpoint) on 8 H200s,
  --tensor-parallel-size 8, --max-model-len 8192, --gpu-memory-utilization 0.92, "quantization=fp8" with no flag
  given: "Model loading took 79.7390 GiB memory", "Available KV cache memory: 41.60 GiB", "GPU KV cache size: 635,648
  tokens" (ashishkamra/vllm-memory-estimator test_data/validation_db.json record 88e492a0, commit 8b0e21d; the log
  lines in tests/test_validation_db.py, commit 7ab974c).
"""

from __future__ import annotations

import math

import pytest

from builder.catalog import default_gpus, default_models
from builder.cli import main
from builder.model import Config, estimate
from builder.model.architecture import from_hf_config, param_count
from builder.model.engines import EngineSettings, engine_report

MODELS = default_models()
DSV3 = MODELS["deepseek-v3"]
GIB = 2**30


def parts(config: Config) -> dict[str, int]:
    return {part.name: part.bytes for part in estimate(config).parts}


def scales(rows: int, cols: int) -> int:
    """One matrix's fp32 scales in 128 x 128 blocks (README_WEIGHTS.md: a block not aligned to 128 is padded)."""
    return math.ceil(rows / 128) * math.ceil(cols / 128)


# DeepSeek-V3's matrices (config.json: hidden 7168, q_lora_rank 1536, kv_lora_rank 512 + rope 64, 128 heads of
# nope 128 + rope 64 and v 128, dense MLP 18432 in the first 3 layers, 256 routed + 1 shared expert of 2048 in 58):
# (rows, columns) of each, and whether tensor parallelism splits it (q_a_proj and kv_a_proj_with_mqa are replicated,
# vLLM's ReplicatedLinear).
ATTENTION = {"q_a_proj": (1536, 7168, False), "q_b_proj": (128 * 192, 1536, True),
             "kv_a_proj_with_mqa": (576, 7168, False), "kv_b_proj": (128 * 256, 512, True),
             "o_proj": (7168, 128 * 128, True)}
DENSE_MLP = [(18432, 7168), (18432, 7168), (7168, 18432)]
EXPERT = [(2048, 7168), (2048, 7168), (7168, 2048)]


def published_scales(tp: int) -> int:
    """The scales of one rank, tensor by tensor: 61 layers' attention, 3 dense MLPs, 58 MoE layers of 257 experts."""
    attention = sum(scales(r, c) // (tp if split else 1) for r, c, split in ATTENTION.values())
    dense = sum(scales(r, c) for r, c in DENSE_MLP) // tp
    moe = 257 * sum(scales(r, c) for r, c in EXPERT) // tp
    return 61 * attention + 3 * dense + 58 * moe


def test_the_catalog_says_which_quantisation_the_checkpoint_carries():
    assert (DSV3.checkpoint_quantization, DSV3.checkpoint_block) == ("fp8", (128, 128))
    # The shapes of the scales the README's rule gives: kv_a_proj_with_mqa's 576 rows take 5 blocks (4.5 rounded up).
    assert scales(576, 7168) == 5 * 56 and scales(128 * 256, 512) == 256 * 4


@pytest.mark.parametrize("tp", [1, 8])
def test_deepseek_v3_is_served_in_fp8_with_its_block_scales(tp):
    got = parts(Config(model=DSV3, mode="serve", tp=tp))
    assert "weights" not in got
    # The scales: every matrix's blocks rounded up, 4 bytes each (163,352,928 B on one GPU).
    assert got["weights/quantisation_constants"] == 4 * published_scales(tp)
    assert published_scales(1) == 40_838_232
    # 1 B per linear weight; the embedding, output layer, router, norms and the router's bias at 2 B.
    vocab_rows, router = 2 * 129280 * 7168, 58 * (256 * 7168 + 256)
    norms = 61 * 2 * 7168 + 61 * (1536 + 512) + 7168
    unquantised = (vocab_rows // tp) + router + norms
    linear = param_count(DSV3) - vocab_rows - router - norms
    assert got["weights/unquantised"] == 2 * unquantised
    replicated = 61 * (1536 + 576) * 7168
    assert got["weights/quantised_linear"] == (linear - replicated) // tp + replicated


def test_the_weights_match_vllms_log_not_twice_it():
    """vLLM v0.11.2, DeepSeek-R1-0528 on 8 H200s (module docstring): "Model loading took 79.7390 GiB". The model's
    weights as loaded (parts, rotary table, allocator rounding) are 0.5% under: vLLM's MLA also keeps a bf16 copy of
    each rank's kv_b_proj, dequantised to split W_UK and W_UV from it (vllm/model_executor/layers/attention/
    mla_attention.py split_kv_b_proj, get_and_maybe_dequant_weights, release v0.33.0), 61 x 512 x 16 x 256 x 2 B =
    0.24 GiB, not modelled. The bf16 weights the model counted before are twice the log."""
    served = Config(model=DSV3, mode="serve", tp=8)
    h200 = default_gpus()["h200"]
    report = engine_report(served, EngineSettings(vllm_version="0.11", max_model_len=8192,
                                                  gpu_memory_utilization=0.92), h200.usable_bytes, "h200", h200)
    loaded = report.values["loaded_weights"] / GIB
    assert loaded == pytest.approx(79.739, rel=0.01)
    assert 79.739 - loaded == pytest.approx(61 * 512 * 16 * 256 * 2 / GIB, abs=0.25)
    bf16 = sum(parts(served.with_changes(param_dtype="bf16")).values())
    assert bf16 / GIB > 2 * 79.739 * 0.98
    # The KV cache stays bf16 beside fp8 weights (the engines' "auto"): the log's 635,648 tokens of 61 x 576 x 2 B
    # are its 41.60 GiB.
    per_token = parts(served.with_changes(batch=1, context=1))["kv_cache"]
    assert per_token == 61 * 576 * 2
    assert 635_648 * per_token / GIB == pytest.approx(41.60, abs=0.005)


def test_training_keeps_bf16_weights():
    trained = parts(Config(model=DSV3, mode="train", tp=8, pp=8, ep=8, dp=8))
    assert "weights/quantised_linear" not in trained and "weights" in trained


@pytest.fixture
def cli(capsys):
    def run(*words: str) -> tuple[int, str, str]:
        code = main(["estimate", "--model", "deepseek-v3", "--mode", "serve", "--tp", "8", *words])
        out = capsys.readouterr()
        return code, out.out, out.err
    return run


def test_the_command_line_serves_the_checkpoint_and_names_it(cli):
    code, out, _ = cli()
    assert code == 0
    assert "weights/quantised_linear" in out and "1 B/param (fp8)" in out
    assert "fp32 scale per 128x128 block" in out
    assert "the checkpoint's own fp8 (config.json quantization_config)" in out
    # The engines' --quantization fp8 and --dtype bfloat16 change nothing: the checkpoint's format already.
    for words in (["--quantization", "fp8"], ["--dtype", "bfloat16"]):
        assert cli(*words)[1] == out
    # --dtype float16 is the activations' and the 16-bit weights' dtype; the linear weights stay fp8.
    code, half, _ = cli("--dtype", "float16")
    assert code == 0 and "1 B/param (fp8)" in half and "2 B/param (fp16)" in half


@pytest.mark.parametrize("words, message", [
    # vllm/config/model.py ModelConfig._verify_quantization (and SGLang's model_config.py, the same words).
    (["--quantization", "awq"], "argument --quantization: the engine would refuse this run: Quantization method "
                                "specified in the model config (fp8) does not match the quantization method specified "
                                "in the `quantization` argument (awq)."),
    # vLLM's Fp8Config.get_supported_act_dtypes: bfloat16 and float16.
    (["--dtype", "float32"], "argument --dtype: torch.float32 is not supported for quantization method fp8."),
])
def test_the_engines_refusals_are_mirrored(cli, words, message):
    code, _, err = cli(*words)
    assert code == 2 and message in err


def test_the_models_own_words_still_name_another_weight_dtype(cli):
    code, out, _ = cli("--precision", "bf16")
    assert code == 0 and "weights/quantised_linear" not in out and "2 B/param (bf16)" in out
    code, out, _ = cli("--param-dtype", "int4")
    assert code == 0 and "0.5 B/param (int4)" in out


# A Qwen3-8B-shaped config.json carrying the quantization_config DeepSeek-V3's README_WEIGHTS.md prints (fp8, e4m3,
# 128 x 128 blocks, dynamic activations): the field is read whatever the model type.
QWEN3_FP8 = {"model_type": "qwen3", "num_hidden_layers": 36, "hidden_size": 4096, "num_attention_heads": 32,
             "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 12288, "vocab_size": 151936,
             "tie_word_embeddings": False, "hidden_act": "silu",
             "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                     "weight_block_size": [128, 128]}}


def test_a_config_json_quantization_config_is_read():
    arch = from_hf_config(QWEN3_FP8)
    assert (arch.checkpoint_quantization, arch.checkpoint_block) == ("fp8", (128, 128))
    got = parts(Config(model=arch, mode="serve"))
    # q 4096 x 4096, k and v 1024 x 4096, o 4096 x 4096, gate and up 12288 x 4096, down 4096 x 12288: all 128-aligned.
    per_layer = (4096 * 4096 * 2 + 1024 * 4096 * 2 + 12288 * 4096 * 3)
    assert got["weights/quantised_linear"] == 36 * per_layer
    assert got["weights/quantisation_constants"] == 4 * 36 * per_layer // (128 * 128)
    # Without weight_block_size: one scale a tensor, left out as the other per-tensor scales.
    per_tensor = from_hf_config({**QWEN3_FP8, "quantization_config": {"quant_method": "fp8",
                                                                       "activation_scheme": "static"}})
    assert per_tensor.checkpoint_block == (0, 0)
    assert parts(Config(model=per_tensor, mode="serve")).get("weights/quantisation_constants", 0) == 0


@pytest.mark.parametrize("quant, field", [
    ({"quant_method": "gptq", "bits": 4}, "quantization_config.quant_method: 'gptq' is a checkpoint format this "
                                          "model does not follow (it follows fp8, mxfp4)"),
    ({"quant_method": "fp8", "weight_block_size": [128]}, "quantization_config.weight_block_size: must be two"),
    ({"quant_method": "fp8", "ignored_layers": ["model.layers.0.mlp.down_proj"]},
     "quantization_config.ignored_layers: names layers left unquantised"),
])
def test_a_quantisation_the_model_does_not_follow_is_refused_by_name(quant, field):
    with pytest.raises(ValueError, match="config.json field " + field.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[")):
        from_hf_config({**QWEN3_FP8, "quantization_config": quant})


def test_a_page_can_take_the_quantisation_away():
    """A chart bar's `arch: {checkpoint_quantization: ""}` serves DeepSeek-V3 as a 16-bit checkpoint (its block size
    goes with it)."""
    from builder.grids import change_architecture

    bf16 = change_architecture(DSV3, {"checkpoint_quantization": ""})
    assert bf16.checkpoint_block == (0, 0)
    assert parts(Config(model=bf16, mode="serve", tp=8))["weights"] == parts(
        Config(model=DSV3, mode="serve", tp=8, param_dtype="bf16"))["weights"]
