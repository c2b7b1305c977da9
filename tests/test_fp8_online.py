"""fp8 quantised at load, as vLLM does it by release: `--quantization fp8` on a 16-bit checkpoint, and vLLM's online
fp8 words fp8_per_tensor, fp8_per_block and fp8_per_channel with the scales each stores. Upstream sources read from
the released wheels (PyPI vllm==X, file:line@release):

- vllm/model_executor/layers/quantization/fp8.py:106-112@0.31.0 (and @0.33.0): Fp8Config.__init__ raises "The `fp8`
  quantization method no longer supports online quantization. Please use `--quantization fp8_per_tensor` instead."
  when is_checkpoint_fp8_serialized is False; fp8.py:101@0.30.0 defaults it to False and quantises online.
- vllm/model_executor/model_loader/weight_utils.py:340-349@0.31.0 and :354-363@0.33.0, get_quant_config: a 16-bit
  checkpoint under --quantization fp8 (no quantization_config, Fp8Config.get_config_filenames() == []) never reaches
  that constructor: it logs "--quantization fp8 is deprecated for online quantization; use --quantization
  fp8_per_tensor instead." and returns fp8_per_tensor's OnlineQuantizationConfig. So vLLM does not refuse the run:
  fp8 on a 16-bit checkpoint stays fp8 at load, per tensor, in every release (weight_utils.py:385-390@0.30.0 builds
  Fp8Config() unserialized instead).
- SGLang python/sglang/srt/layers/quantization/fp8.py:264-266 and :1151-1175@0.5.23: Fp8Config's
  is_checkpoint_fp8_serialized defaults to False and Fp8LinearMethod quantises such weights at load.
- vllm/model_executor/layers/quantization/__init__.py:42-43@0.20.0: fp8_per_tensor and fp8_per_block among
  QuantizationMethods (v0.19.0's wheel has no vllm/config/quantization.py and neither word); fp8_per_channel from
  vllm/config/quantization.py:125@0.24.0 (_ONLINE_SHORTHANDS) and __init__.py:43@0.24.0, absent from
  __init__.py:41-44@0.23.0.
- vllm/model_executor/layers/quantization/online/fp8.py@0.33.0: Fp8PerTensorOnlineLinearMethod:237-250 (one fp32
  weight_scale a tensor), Fp8PerBlockOnlineLinearMethod:292-350 (weight_block_size [128, 128], an fp32
  weight_scale_inv per block) and Fp8PerBlockOnlineMoEMethod:718-730 ((out + 127) // 128 x (in + 127) // 128 fp32 a
  matrix), Fp8PtpcOnlineLinearMethod:426-440 (amax over dim -1: an fp32 weight_scale per output row).
"""

from __future__ import annotations

import json

import pytest

from tests.test_cli import run
from tests.test_cli_words import refused

SERVE = ["estimate", "--model", "llama-3-8b", "--mode", "serve"]
VLLM = ["--engine", "vllm", "--gpu", "h100-80gb"]


def parts(capsys, *argv: str) -> dict:
    code, out, err = run(capsys, *SERVE, *argv, "--json")
    assert code == 0, err
    return json.loads(out)["parts"]


# Llama 3 8B's linear matrices a layer (config.json: hidden 4096, 32 heads, 8 KV heads of 128, intermediate 14336):
# q and o 4096 x 4096, k and v 1024 x 4096, gate and up 14336 x 4096, down 4096 x 14336.
LLAMA_MATRICES = [(4096, 4096), (1024, 4096), (1024, 4096), (4096, 4096), (14336, 4096), (14336, 4096),
                  (4096, 14336)]


def engine_weights(capsys, *argv: str) -> int:
    code, out, err = run(capsys, *SERVE, *argv, *VLLM, "--json")
    assert code == 0, err
    return json.loads(out)["parts"]["weights"]


@pytest.mark.parametrize("release", ["0.30", "0.31", "0.33"])
def test_fp8_on_a_16_bit_checkpoint_is_fp8_at_load_in_every_vllm_release(capsys, release):
    """weight_utils.py:354-363@0.33.0 redirects fp8 to fp8_per_tensor (a warning, not Fp8Config's refusal at
    fp8.py:106-112@0.31.0); before 0.31 Fp8Config() quantises per tensor itself: the same bytes either side."""
    fp8 = engine_weights(capsys, "--quantization", "fp8", "--vllm-version", release)
    assert fp8 == engine_weights(capsys, "--quantization", "fp8_per_tensor", "--vllm-version", "0.33")
    assert fp8 < engine_weights(capsys, "--vllm-version", release) * 0.6


def test_fp8_per_block_adds_its_scales_to_what_vllm_loads(capsys):
    per_tensor = engine_weights(capsys, "--quantization", "fp8_per_tensor")
    assert engine_weights(capsys, "--quantization", "fp8_per_block") - per_tensor == 425_984 * 4


def test_fp8_per_tensor_is_fp8s_own_layout(capsys):
    """online/fp8.py:237-250@0.33.0: one fp32 scale a tensor, the rule fp8 already has (scales left out)."""
    assert parts(capsys, "--quantization", "fp8_per_tensor") == parts(capsys, "--quantization", "fp8")


def test_fp8_per_block_keeps_an_fp32_scale_per_128_by_128_block(capsys):
    """online/fp8.py:292-350@0.33.0: ceil(out/128) x ceil(in/128) fp32 weight_scale_inv a matrix, the DeepSeek-V3
    checkpoint's block rule (builder.model.placement layer_gemm_blocks) at 128 x 128."""
    blocks = sum(-(-rows // 128) * -(-cols // 128) for rows, cols in LLAMA_MATRICES) * 32
    assert blocks == 425_984
    got = parts(capsys, "--quantization", "fp8_per_block")
    assert got["weights/quantisation_constants"] == blocks * 4
    assert got["weights/quantised_linear"] == parts(capsys, "--quantization", "fp8")["weights/quantised_linear"]


def test_fp8_per_block_splits_its_blocks_over_tensor_parallelism(capsys):
    """Each rank keeps its share of a matrix's blocks, as the checkpoint's rule splits them."""
    one = parts(capsys, "--quantization", "fp8_per_block")["weights/quantisation_constants"]
    assert parts(capsys, "--quantization", "fp8_per_block", "--tp", "2")["weights/quantisation_constants"] == one // 2


def test_fp8_per_channel_keeps_an_fp32_scale_per_output_row(capsys):
    """online/fp8.py:426-440@0.33.0: an fp32 scale per output row, int8's rule (4 / hidden B a weight)."""
    got = parts(capsys, "--quantization", "fp8_per_channel")
    linear = got["weights/quantised_linear"]
    assert got["weights/quantisation_constants"] == pytest.approx(linear * 4 / 4096, abs=1)
    assert got["weights/quantisation_constants"] == parts(capsys, "--param-dtype", "int8")[
        "weights/quantisation_constants"]


@pytest.mark.parametrize("word, release, first", [("fp8_per_tensor", "0.19", "0.20.0"),
                                                  ("fp8_per_block", "0.19.1", "0.20.0"),
                                                  ("fp8_per_channel", "0.23", "0.24.0")])
def test_an_online_word_is_refused_before_the_release_that_has_it(capsys, word, release, first):
    """__init__.py:42-43@0.20.0 (not in 0.19.0); quantization.py:125@0.24.0 (not in 0.23.0)."""
    err = refused(capsys, *SERVE, "--quantization", word, *VLLM, "--vllm-version", release)
    assert "argument --quantization: the engine would refuse this run" in err
    assert f"vLLM {first}" in err and word in err


@pytest.mark.parametrize("word, release", [("fp8_per_tensor", "0.20"), ("fp8_per_block", "0.20.0"),
                                           ("fp8_per_channel", "0.24"), ("fp8_per_channel", "0.33")])
def test_an_online_word_is_taken_from_its_release_on(capsys, word, release):
    code, _, err = run(capsys, *SERVE, "--quantization", word, *VLLM, "--vllm-version", release)
    assert code == 0, err


@pytest.mark.parametrize("engine", ["sglang", "hf"])
def test_an_online_word_is_vllms_alone(capsys, engine):
    """SGLang 0.5.23's --quantization has no fp8_per_* word (python/sglang/srt/server_args.py); fp8 is its word."""
    err = refused(capsys, *SERVE, "--quantization", "fp8_per_block", "--engine", engine, "--gpu", "h100-80gb")
    assert "vLLM's online fp8 word" in err


def test_sglang_still_quantises_fp8_at_load(capsys):
    """SGLang fp8.py:1151-1175@0.5.23: an unserialized checkpoint quantised at load."""
    code, _, err = run(capsys, *SERVE, "--quantization", "fp8", "--engine", "sglang", "--gpu", "h100-80gb")
    assert code == 0, err


def test_an_fp8_checkpoint_is_unaffected(capsys):
    """DeepSeek-V3 is published in fp8 (quant_method fp8): --quantization fp8 is its own method at every release,
    and an online word is the mismatch vLLM refuses (vllm/config/model.py _verify_quantization@0.33.0)."""
    base = ["estimate", "--model", "deepseek-v3", "--mode", "serve", "--tp", "8"]
    code, _, err = run(capsys, *base, "--quantization", "fp8", "--engine", "vllm", "--gpu", "h200",
                       "--vllm-version", "0.33")
    assert code == 0, err
    err = refused(capsys, *base, "--quantization", "fp8_per_block")
    assert "does not match the quantization method specified in the `quantization` argument (fp8_per_block)" in err


def test_weight_scales_need_fp8_weights_quantised_at_load():
    from builder.model import Config
    from builder.model.config import validate_config
    from builder.catalog import default_models

    llama = default_models()["llama-3-8b"]
    validate_config(Config(model=llama, mode="serve", param_dtype="fp8", weight_scales="block"))
    for wrong in (dict(mode="serve", param_dtype="int8", weight_scales="channel"),
                  dict(mode="train", param_dtype="fp8", weight_scales="block"),
                  dict(mode="serve", param_dtype="fp8", weight_scales="row")):
        with pytest.raises(ValueError, match="^weight_scales: "):
            validate_config(Config(model=llama, **wrong))


def test_fp8_per_block_formula_names_its_own_block():
    """The scales' formula names the block the bytes are counted in: vLLM's fp8_per_block 128 x 128
    (online/fp8.py:300 weight_block_size = [128, 128], v0.33.0), not a checkpoint's block (a 16-bit one has none)."""
    from builder.catalog import default_models
    from builder.model import Config, estimate
    parts = estimate(Config(model=default_models()["llama-3-8b"], mode="serve", param_dtype="fp8",
                            weight_scales="block")).parts
    constants = next(p for p in parts if p.name == "weights/quantisation_constants")
    assert constants.formula == "ceil(rows / 128) x ceil(cols / 128) x 4 B per linear weight matrix"
