"""The rotary cos/sin table serving engines keep beside the weights (builder.model.rotary), and the positions read
from a config.json (architecture.rope_positions_of), pinned to the engines' code and the models' config.json files."""

from __future__ import annotations

import pytest

from builder.catalog import default_models
from builder.model import Config
from builder.model.architecture import from_hf_config, rope_tables
from builder.model.engines import EngineSettings, engine_report

MODELS = default_models()
LLAMA = {"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
         "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256}


@pytest.mark.parametrize("fields, rows", [
    # huggingface.co/meta-llama/Llama-3.1-8B config.json: llama3 scaling keeps max_position_embeddings (vLLM
    # rotary_embedding/__init__.py get_rope passes max_position to Llama3RotaryEmbedding).
    ({"max_position_embeddings": 131072, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
                                                          "original_max_position_embeddings": 8192}}, 131072),
    # DeepSeek-V2-Lite's config.json: YaRN, factor 40 over 4,096 positions (get_rope's deepseek_yarn branch builds
    # original_max_position x factor rows).
    ({"max_position_embeddings": 163840, "rope_scaling": {"type": "yarn", "factor": 40,
                                                          "original_max_position_embeddings": 4096}}, 163840),
    # Qwen3's model card: YaRN factor 4 over 32,768 while max_position_embeddings stays 40,960.
    ({"max_position_embeddings": 40960, "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                                         "original_max_position_embeddings": 32768}}, 131072),
    # LinearScalingRotaryEmbedding: max_position_embeddings x factor rows.
    ({"max_position_embeddings": 8192, "rope_scaling": {"type": "linear", "factor": 8.0}}, 65536),
    ({"max_position_embeddings": 4096}, 4096),
    ({}, 0),
])
def test_config_json_positions_are_the_rows_the_engines_build(fields, rows):
    assert from_hf_config({**LLAMA, **fields}).max_position_embeddings == rows


@pytest.mark.parametrize("fields, named", [
    ({"max_position_embeddings": "131072"}, "field max_position_embeddings: must be a whole number"),
    ({"max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": "8"}},
     "field rope_scaling.factor: must be a finite number"),
    ({"max_position_embeddings": 4096, "rope_scaling": [8]}, "field rope_scaling: must be an object"),
])
def test_bad_rope_fields_are_named(fields, named):
    with pytest.raises(ValueError, match=named):
        from_hf_config({**LLAMA, **fields})


def test_gemma_3_has_two_tables_and_a_model_without_positions_none():
    """vLLM models/gemma3.py: sliding layers rotate with rope_local_base_freq (10,000), full layers with rope_theta
    (1,000,000): two get_rope settings, two tables. Gemma 2 rotates every layer alike: one."""
    assert rope_tables(MODELS["gemma-3-1b"]) == 2 and rope_tables(MODELS["gemma-2-9b"]) == 1
    assert rope_tables(MODELS["gpt2"]) == 0


def test_every_tensor_parallel_rank_holds_the_whole_table():
    """The table is a buffer of the rotary module, not sharded: Llama 3.3 70B (131,072 positions x 128, bf16) holds
    32 MiB on each of 8 ranks in vLLM, and 64 MiB in SGLang, which keeps it in fp32 on CUDA."""
    config = Config(model=MODELS["llama-3.3-70b"], mode="serve", tp=8)
    # Beside it, the allocator's rounding (builder.model.allocator): the embedding and the head are 16,032 rows of
    # 8,192 on a rank, 250.5 MiB each, in 252 MiB segments: SGLang's free memory counts the 1.5 MiB left in each,
    # vLLM's allocated bytes none (more than 1 MiB left: the block is split).
    for engine, size, rounding in (("vllm", 2, 0), ("sglang", 4, 3 * 2**20)):
        values = engine_report(config, EngineSettings(engine=engine, max_model_len=8192), 80 * 2**30, "h100-80gb").values
        assert values["rotary_table"] == 131_072 * 128 * size
        assert values["allocator_rounding"] == rounding
        assert values["loaded_weights"] == values["weights_bytes"] + values["rotary_table"] + rounding


def test_latent_attention_rotates_its_decoupled_key_only():
    """Under MLA the table's width is qk_rope_head_dim (64), not the head width (192): vLLM deepseek_v2.py builds
    get_rope(qk_rope_head_dim, ...)."""
    config = Config(model=MODELS["deepseek-v2-lite"], mode="serve")
    values = engine_report(config, EngineSettings(max_model_len=8192), 80 * 2**30, "h100-80gb").values
    assert values["rotary_table"] == 163_840 * 64 * 2


# Qwen3-8B's config.json with YaRN switched on as its model card says (max_position_embeddings stays 40,960).
QWEN3_YARN = {**LLAMA, "model_type": "qwen3", "head_dim": 128, "max_position_embeddings": 40960,
              "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}


@pytest.mark.parametrize("engine, length", [
    # vllm/config/model.py _get_and_verify_max_len: under YaRN original_max_position_embeddings x factor.
    ("vllm", 131072),
    # SGLang python/sglang/srt/utils/hf_transformers_utils.py get_context_length (commit 2aa2e2d): a rope_scaling
    # naming original_max_position_embeddings keeps factor 1, so max_position_embeddings as it stands.
    ("sglang", 40960),
])
def test_yarn_with_an_original_gives_each_engine_its_own_default_length(engine, length):
    arch = from_hf_config(QWEN3_YARN)
    assert arch.max_position_embeddings == 131072 and arch.engine_positions(engine) == length
    values = engine_report(Config(model=arch, mode="serve"), EngineSettings(engine=engine), 141 * 2**30,
                           "h200").values
    assert values["max_model_len" if engine == "vllm" else "context_len"] == length
    # Both engines build the table's 131,072 rows (YaRNScalingRotaryEmbedding: original x factor).
    assert values["rotary_table"] == 131072 * 128 * (2 if engine == "vllm" else 4)


def test_sglang_refuses_a_context_above_its_own_limit_that_vllm_serves():
    arch = from_hf_config(QWEN3_YARN)
    sglang = engine_report(Config(model=arch, mode="serve"), EngineSettings(engine="sglang", context_length=65536),
                           141 * 2**30, "h200").values
    assert sglang["too_long"] and "greater than the derived context_length (40960)" in sglang["error"]
    vllm = engine_report(Config(model=arch, mode="serve"), EngineSettings(engine="vllm", max_model_len=65536),
                         141 * 2**30, "h200").values
    assert not vllm["too_long"]


@pytest.mark.parametrize("fields", [
    # llama3's scaling keeps max_position_embeddings in both engines (SGLang sets factor 1 for it too).
    {"max_position_embeddings": 131072, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
                                                         "original_max_position_embeddings": 8192}},
    # DeepSeek-V2-Lite: 4,096 x 40 is its max_position_embeddings: one length.
    {"max_position_embeddings": 163840, "rope_scaling": {"type": "yarn", "factor": 40,
                                                         "original_max_position_embeddings": 4096}},
    {"max_position_embeddings": 8192, "rope_scaling": {"type": "linear", "factor": 8.0}},
])
def test_engines_agree_where_the_config_is_consistent(fields):
    arch = from_hf_config({**LLAMA, **fields})
    assert arch.config_positions == 0 and arch.engine_positions("sglang") == arch.engine_positions("vllm")
