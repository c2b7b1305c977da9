"""Parameter counts equal the published counts exactly (sources: each model's config.json
on huggingface.co; the totals quoted in ../shared/REFERENCES.md and the model cards)."""

import json
import math

import pytest

from builder.catalog import CatalogError, default_models, load_hf_config, load_models
from builder.model.architecture import (active_param_count, from_hf_config, param_count, param_groups,
                                        parameter_tensors, shape_inputs)

MODELS = default_models()

# Published totals. REFERENCES.md: gpt2, llama-2-7b, llama-3-8b, llama-3-70b, mistral-7b,
# qwen2.5-7b, mixtral-8x7b. Model cards / safetensors index totals for the rest.
PUBLISHED = {
    "gpt2": 124_439_808,
    "gpt2-xl": 1_557_611_200,
    "llama-2-7b": 6_738_415_616,
    "llama-2-13b": 13_015_864_320,
    "llama-2-70b": 68_976_648_192,
    "llama-3-8b": 8_030_261_248,
    "llama-3-70b": 70_553_706_496,
    "llama-3.1-405b": 405_853_388_800,
    "llama-3.2-1b": 1_235_814_400,
    "llama-3.2-3b": 3_212_749_824,
    "mistral-7b": 7_241_732_096,
    "mixtral-8x7b": 46_702_792_704,
    "qwen2.5-0.5b": 494_032_768,
    "qwen2.5-7b": 7_615_616_512,
    "qwen2.5-72b": 72_706_203_648,
    # Qwen3 (safetensors index totals of the Hugging Face repositories); q_norm and k_norm included.
    "qwen3-4b": 4_022_468_096,
    "qwen3-8b": 8_190_735_360,
    "qwen3-14b": 14_768_307_200,
    "qwen3-30b-a3b": 30_532_122_624,
    # DeepSeek-V2-Lite: safetensors index total; DeepSeek-V3: the main model without its multi-token-prediction layer
    # (config.json recounted tensor by tensor, router bias included); Gemma 2 9B: keras-hub's gemma2_9b_en preset.
    "deepseek-v2-lite": 15_706_484_224,
    "deepseek-v3": 671_026_419_200,
    "gemma-2-9b": 9_241_705_984,
    # Gemma 3 1B: the Hugging Face repository's safetensors total and keras-hub's gemma3_1b preset ("params":
    # 999885952); q_norm and k_norm and four RMSNorms a block included.
    "gemma-3-1b": 999_885_952,
    # keras-hub 71453d0 presets (converted from the Hugging Face checkpoints): mistral_0.3_7b_en, qwen3_32b_en,
    # qwen3_moe_235b_a22b_en; Qwen3-32B's safetensors index total_size 65,524,246,528 B is the same count in bf16.
    "mistral-7b-v0.3": 7_248_023_552,
    "qwen3-32b": 32_762_123_264,
    "qwen3-235b-a22b": 235_093_634_560,
    # The Hugging Face Hub's safetensors metadata (BF16 parameters) of mistralai/Mixtral-8x22B-v0.1 and
    # deepseek-ai/DeepSeek-V2 (Mistral AI: "141B total"; DeepSeek-V2 paper: "236B total").
    "mixtral-8x22b": 140_630_071_296,
    "deepseek-v2": 235_741_434_880,
    # gpt-oss: the model card's 20.91B and 116.83B (OpenAI 2025, arXiv:2508.10925, Table 1), exactly the Hub's
    # safetensors counts without the MXFP4 block scales (huggingface.js 00d37b2; tests/test_gpt_oss.py).
    "gpt-oss-20b": 20_914_757_184,
    "gpt-oss-120b": 116_829_156_672,
}


@pytest.mark.parametrize("model_id", sorted(PUBLISHED))
def test_parameter_count_matches_published(model_id):
    assert param_count(MODELS[model_id]) == PUBLISHED[model_id]
    assert MODELS[model_id].published_params == PUBLISHED[model_id]


def test_catalog_has_exactly_the_required_ids_at_least():
    assert set(PUBLISHED) <= set(MODELS)


def test_mixtral_active_parameters_match_references():
    # REFERENCES.md: Mixtral-8x7B 12,879,925,248 active (8 experts, top-2).
    assert active_param_count(MODELS["mixtral-8x7b"]) == 12_879_925_248


def test_groups_sum_to_total_and_tied_head_is_counted_once():
    groups = param_groups(MODELS["gpt2"])
    assert "lm_head" not in groups
    assert sum(groups.values()) == 124_439_808
    assert groups["embedding/positions"] == 1024 * 768


def test_hf_config_files_give_the_same_counts(tmp_path):
    configs = {
        "gpt2": {"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 50257,
                 "n_positions": 1024, "activation_function": "gelu_new"},
        "llama-3-8b": {"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096,
                       "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
                       "vocab_size": 128256, "tie_word_embeddings": False},
        "qwen2.5-7b": {"model_type": "qwen2", "num_hidden_layers": 28, "hidden_size": 3584,
                       "num_attention_heads": 28, "num_key_value_heads": 4, "intermediate_size": 18944,
                       "vocab_size": 152064, "tie_word_embeddings": False, "use_sliding_window": False,
                       "sliding_window": 131072},
        "mixtral-8x7b": {"model_type": "mixtral", "num_hidden_layers": 32, "hidden_size": 4096,
                         "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
                         "vocab_size": 32000, "num_local_experts": 8, "num_experts_per_tok": 2},
        "qwen3-8b": {"model_type": "qwen3", "num_hidden_layers": 36, "hidden_size": 4096, "num_attention_heads": 32,
                     "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 12288, "vocab_size": 151936,
                     "tie_word_embeddings": False, "use_sliding_window": False, "sliding_window": None},
        "qwen3-30b-a3b": {"model_type": "qwen3_moe", "num_hidden_layers": 48, "hidden_size": 2048,
                          "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
                          "intermediate_size": 6144, "moe_intermediate_size": 768, "num_experts": 128,
                          "num_experts_per_tok": 8, "vocab_size": 151936, "tie_word_embeddings": False,
                          "decoder_sparse_step": 1, "mlp_only_layers": []},
        "mistral-7b": {"model_type": "mistral", "num_hidden_layers": 32, "hidden_size": 4096,
                       "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
                       "vocab_size": 32000, "sliding_window": 4096},
        # huggingface.co/mistralai/Mistral-7B-v0.3 config.json: the v3 vocabulary and no sliding window.
        "mistral-7b-v0.3": {"model_type": "mistral", "num_hidden_layers": 32, "hidden_size": 4096,
                            "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
                            "vocab_size": 32768, "sliding_window": None, "rope_theta": 1000000.0,
                            "max_position_embeddings": 32768, "tie_word_embeddings": False},
        "mixtral-8x22b": {"model_type": "mixtral", "num_hidden_layers": 56, "hidden_size": 6144,
                          "num_attention_heads": 48, "num_key_value_heads": 8, "intermediate_size": 16384,
                          "vocab_size": 32768, "num_local_experts": 8, "num_experts_per_tok": 2,
                          "max_position_embeddings": 65536, "sliding_window": None},
        "qwen3-32b": {"model_type": "qwen3", "num_hidden_layers": 64, "hidden_size": 5120, "num_attention_heads": 64,
                      "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 25600, "vocab_size": 151936,
                      "max_position_embeddings": 40960, "tie_word_embeddings": False, "use_sliding_window": False,
                      "sliding_window": None, "max_window_layers": 64},
        "qwen3-235b-a22b": {"model_type": "qwen3_moe", "num_hidden_layers": 94, "hidden_size": 4096,
                            "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 128,
                            "intermediate_size": 12288, "moe_intermediate_size": 1536, "num_experts": 128,
                            "num_experts_per_tok": 8, "norm_topk_prob": True, "vocab_size": 151936,
                            "max_position_embeddings": 40960, "tie_word_embeddings": False,
                            "decoder_sparse_step": 1, "mlp_only_layers": []},
        # huggingface.co/deepseek-ai/DeepSeek-V2 config.json (its memory-relevant fields).
        "deepseek-v2": {"model_type": "deepseek_v2", "num_hidden_layers": 60, "hidden_size": 5120,
                        "num_attention_heads": 128, "num_key_value_heads": 128, "intermediate_size": 12288,
                        "moe_intermediate_size": 1536, "n_routed_experts": 160, "n_shared_experts": 2,
                        "num_experts_per_tok": 6, "first_k_dense_replace": 1, "moe_layer_freq": 1,
                        "topk_method": "group_limited_greedy", "n_group": 8, "topk_group": 3,
                        "norm_topk_prob": False, "q_lora_rank": 1536, "kv_lora_rank": 512,
                        "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "vocab_size": 102400,
                        "max_position_embeddings": 163840, "tie_word_embeddings": False,
                        "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0,
                                         "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096,
                                         "type": "yarn"}},
    }
    for model_id, config in configs.items():
        path = tmp_path / f"{model_id}.json"
        path.write_text(json.dumps(config))
        arch = load_hf_config(path)
        assert param_count(arch) == PUBLISHED[model_id], model_id
    assert from_hf_config(configs["mistral-7b"]).sliding_window == 4096
    assert from_hf_config(configs["mistral-7b-v0.3"]).sliding_window is None
    # The catalog entries are the shapes the config.json files read to (the activation aside: catalog entries of
    # SwiGLU models leave it at its default, which only GeLU accounting reads).
    for model_id in ("mistral-7b-v0.3", "mixtral-8x22b", "qwen3-32b", "qwen3-235b-a22b", "deepseek-v2"):
        read, entry = shape_inputs(from_hf_config(configs[model_id], model_id)), shape_inputs(MODELS[model_id])
        read["activation_function"] = entry["activation_function"]
        assert read == entry, model_id
    assert from_hf_config(configs["qwen2.5-7b"]).sliding_window is None


def test_hf_config_errors_name_the_file_and_key(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    with pytest.raises(CatalogError, match=r"config\.json: config.json \(llama\) is missing 'num_attention_heads'"):
        load_hf_config(path)
    path.write_text('{"model_type": "llama",\n  oops}')
    with pytest.raises(CatalogError, match=r"config\.json:2: invalid JSON"):
        load_hf_config(path)
    path.write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(CatalogError, match="not supported"):
        load_hf_config(path)


def test_catalog_errors_name_file_and_line(tmp_path):
    path = tmp_path / "models.toml"
    path.write_text('[ok]\nlayers = 2\nhidden = 8\nheads = 2\nvocab = 10\nffn = 16\n\n[bad]\nlayers = 2\nhidden = 8\n'
                    'heads = 3\nvocab = 10\nffn = 16\nkv_heads = 2\n')
    with pytest.raises(CatalogError, match=r"models\.toml:8: \[bad\] .*kv_heads"):
        load_models(path)
    path.write_text('[x]\nlayers = 2\nwidth = 8\n')
    with pytest.raises(CatalogError, match=r"models\.toml:1: \[x\] unknown field\(s\): width"):
        load_models(path)
    path.write_text('[x]\nlayers = = 2\n')
    with pytest.raises(CatalogError, match=r"models\.toml:2: invalid TOML"):
        load_models(path)


@pytest.mark.parametrize("model_id", list(PUBLISHED))
def test_parameter_tensors_add_up_to_the_published_count(model_id):
    """FSDP2 shards tensor by tensor (architecture.parameter_tensors): every parameter must be in one."""
    arch = MODELS[model_id]
    assert sum(count * math.prod(shape) for shape, count in parameter_tensors(arch)) == PUBLISHED[model_id]


def test_parameter_tensors_include_mlp_biases_outside_gpt2():
    """A Llama-family block with mlp_bias=True (transformers LlamaConfig.mlp_bias) has gate, up and down biases."""
    arch = MODELS["llama-3.2-1b"].with_changes(mlp_bias=True)
    assert param_count(arch) - param_count(MODELS["llama-3.2-1b"]) == arch.layers * (2 * arch.ffn + arch.hidden)
    assert sum(count * math.prod(shape) for shape, count in parameter_tensors(arch)) == param_count(arch)


LLAMA_CONFIG = {"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
                "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256}


@pytest.mark.parametrize("fields, named", [
    # A checkpoint format the model does not follow (it follows fp8: test_checkpoint_quantization_is_read).
    ({"quantization_config": {"quant_method": "awq", "bits": 4}}, "field quantization_config.quant_method: 'awq'"),
    ({"hidden_act": "gelu_pytorch_tanh"}, "'hidden_act'"),
    ({"layer_types": ["full_attention"] + ["sliding_attention"] * 31, "sliding_window": 4096}, "'layer_types' mixes"),
])
def test_config_fields_that_change_memory_are_refused_by_name(fields, named):
    """Issue 13: a config.json field that changes memory but is not modelled is an error naming it."""
    with pytest.raises(ValueError, match=named):
        from_hf_config({**LLAMA_CONFIG, **fields})


def test_config_fields_the_model_follows():
    # transformers' Qwen2: with use_sliding_window, layers from max_window_layers on slide; all or none is modelled.
    qwen = {**LLAMA_CONFIG, "model_type": "qwen2", "sliding_window": 4096, "use_sliding_window": True}
    assert from_hf_config({**qwen, "max_window_layers": 0}).sliding_window == 4096
    assert from_hf_config({**qwen, "max_window_layers": 32}).sliding_window is None
    with pytest.raises(ValueError, match="'max_window_layers' = 8"):
        from_hf_config({**qwen, "max_window_layers": 8})
    assert from_hf_config({**LLAMA_CONFIG, "layer_types": ["full_attention"] * 32}).sliding_window is None
    # Dropout runs in training when the family's probabilities are above 0 (GPT-2's config.json: 0.1 each).
    gpt2 = {"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 50257, "n_positions": 1024}
    assert from_hf_config({**gpt2, "attn_pdrop": 0.1, "resid_pdrop": 0.1, "embd_pdrop": 0.1}).extra["dropout"]
    assert not from_hf_config({**gpt2, "attn_pdrop": 0, "resid_pdrop": 0, "embd_pdrop": 0}).extra["dropout"]
    with pytest.raises(ValueError, match="some dropouts and not others"):
        from_hf_config({**gpt2, "attn_pdrop": 0.1, "resid_pdrop": 0.0, "embd_pdrop": 0.1})
    # Attention dropout apart from the others: fused attention keeps a seed only, so only eager attention minds.
    assert from_hf_config({**gpt2, "attn_pdrop": 0.0, "resid_pdrop": 0.1, "embd_pdrop": 0.1}).extra == {
        "dropout": True, "attention_dropout_differs": True}
    assert not from_hf_config(LLAMA_CONFIG).extra["dropout"]  # attention_dropout defaults to 0.0


def test_a_sequence_past_gpt2s_learned_positions_is_refused_as_transformers_fails_on_it():
    """transformers' GPT2Model looks each position id up in wpe, a table of n_positions rows (modeling_gpt2.py,
    5.23): a tiny GPT-2 of 8 positions runs 8 tokens and fails on 9 with an index error. The model takes the same 8
    and refuses 9, for training (seq_len) and serving (context), naming the option; a rotary model has no table to
    index past and trains beyond max_position_embeddings (Llama 3 8B: 8,192)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from builder.model import Config, estimate

    tiny = {"model_type": "gpt2", "n_layer": 1, "n_embd": 16, "n_head": 2, "n_positions": 8, "vocab_size": 32}
    model = GPT2LMHeadModel(GPT2Config(**{k: v for k, v in tiny.items() if k != "model_type"})).eval()
    with torch.no_grad():
        model(torch.zeros((1, 8), dtype=torch.long))
        with pytest.raises(IndexError):
            model(torch.zeros((1, 9), dtype=torch.long))
    arch = from_hf_config(tiny, "tiny-gpt2")
    assert arch.learned_positions == 8
    estimate(Config(model=arch, seq_len=8))
    estimate(Config(model=arch, mode="serve", context=8))
    for changes, option in (({"seq_len": 9}, "seq_len"), ({"mode": "serve", "context": 9}, "context")):
        with pytest.raises(ValueError, match=f"^{option}: tiny-gpt2 has 8 learned positions"):
            estimate(Config(model=arch, **changes))
    assert MODELS["llama-3-8b"].learned_positions == 0
    estimate(Config(model=MODELS["llama-3-8b"], seq_len=16384))
