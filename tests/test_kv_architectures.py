"""The KV cache of the architectures people serve: latent attention (DeepSeek-V2/V3), layers mixing full and
sliding-window attention (Gemma 2), and the engines' --kv-cache-dtype words.

Pinned to published engine logs where one gives every input, and otherwise to the engines' own code (named in each
test): vLLM's vllm/v1/kv_cache_interface.py and vllm/v1/core/kv_cache_utils.py (commit 001cabc), SGLang's
python/sglang/srt/model_executor/pool_configurator.py (commit 003fca8).
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import pytest

from builder.catalog import default_gpus, default_models
from builder.cli import main
from builder.model import Config, estimate
from builder.model.architecture import from_hf_config, param_count, shape_inputs
from builder.model.engine_sglang import MLA_LINE, refused_by
from builder.model.engines import LOG_LINE, EngineSettings, engine_report

MODELS = default_models()
GPUS = default_gpus()
GIB = 2**30


def vllm(arch, *, tp=1, pp=1, kv_dtype=None, gpu="h100-80gb", **settings):
    config = Config(model=arch, mode="serve", tp=tp, pp=pp, kv_dtype=kv_dtype)
    return engine_report(config, EngineSettings(**settings), GPUS[gpu].usable_bytes, gpu).values


def sglang(arch, *, tp=1, kv_dtype=None, gpu="h100-80gb", **settings):
    config = Config(model=arch, mode="serve", tp=tp, kv_dtype=kv_dtype)
    return engine_report(config, EngineSettings(engine="sglang", **settings), GPUS[gpu].usable_bytes, gpu).values


# Latent attention -----------------------------------------------------------------------------------------------

def test_deepseek_v2_lite_latent_cache_matches_a_published_vllm_log():
    """vllm PR #20665 (vLLM 0.9.2 dev, July 2025): `vllm serve deepseek-ai/DeepSeek-V2-Lite --max-model-len=1024
    --enforce-eager --tensor-parallel-size=2 --pipeline-parallel-size=2` on L4s logs "Available KV cache memory:
    12.13 GiB" on ranks 0-1 (the first stage, 14 of 27 layers), "GPU KV cache size: 807,792 tokens" and "Maximum
    concurrency for 1,024 tokens per request: 788.86x": 50,487 blocks of 16 tokens. A block of one layer holds 16
    tokens x (512 latent + 64 rotary key) x 2 bytes = 18,432 B on each of the two TP ranks (not halved)."""
    r = vllm(MODELS["deepseek-v2-lite"], tp=2, pp=2, gpu="l4", max_model_len=1024, enforce_eager=True,
             kv_cache_memory=int(Fraction("12.13") * GIB))
    assert r["stage_layers"] == 14 and r["page"] == 16 * 576 * 2
    # The block count the printed 12.13 GiB allows (its 0.01 GiB rounding) holds the log's and ours.
    low, high = ((Fraction("12.13") + d) * GIB // (14 * r["page"]) for d in (Fraction(-5, 1000), Fraction(5, 1000)))
    assert low <= 807_792 // 16 <= high and low <= r["num_blocks"] <= high
    assert r["blocks_per_request"] == 1024 // 16
    assert LOG_LINE.format(807_792, 1024, (807_792 // 16) / 64) == \
        "GPU KV cache size: 807,792 tokens, Maximum concurrency for 1,024 tokens per request: 788.86x"
    # KV memory for the logged blocks is within 3% of ours (here exactly the rounding of the printed GiB).
    assert r["num_blocks"] * 14 * r["page"] == pytest.approx(807_792 // 16 * 14 * r["page"], rel=0.03)


def test_deepseek_v3_fp8_latent_cache_matches_a_published_sglang_log():
    """A published SGLang log of DeepSeek-V3 (DP/TP/EP on H200s, fp8 KV cache, max_total_num_tokens 524288), quoted
    in a log parser's docstring: "KV Cache is allocated. #tokens: 524288, KV size: 17.16 GB" (SGLang's GB are GiB).
    MLATokenToKVPool keeps (tokens + one page) x 61 layers x (512 + 64) x 1 byte; the cell is not divided by TP."""
    arch = MODELS["deepseek-v3"]
    for tp in (1, 8):
        assert sglang(arch, tp=tp, kv_dtype="fp8")["cell"] == 61 * 576
    cell = 61 * 576
    # The log's release printed no dtype in this line; 0.5.18 to 0.5.23 print it (memory_pool.py
    # KVCache._finalize_allocation_log), and the numbers are the log's.
    assert MLA_LINE.format("torch.float8_e4m3fn", 524_288, (524_288 + 1) * cell / GIB) == \
        "KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 524288, KV size: 17.16 GB"


def test_glm_flash_latent_cache_matches_a_published_sglang_log():
    """A published SGLang log of GLM-4.7-Flash (Glm4MoeLiteForCausalLM, latent attention: 47 layers, kv_lora_rank 512,
    qk_rope_head_dim 64, bf16): "KV Cache is allocated. #tokens: 383872, KV size: 19.36 GB"."""
    cell = 47 * (512 + 64) * 2
    # Printed without the dtype, as the DeepSeek-V3 log above; the numbers are the log's.
    assert MLA_LINE.format("torch.bfloat16", 383_872, (383_872 + 1) * cell / GIB) == \
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 383872, KV size: 19.36 GB"


def test_latent_cache_is_a_fraction_of_full_kv_and_does_not_shrink_with_tp():
    """DeepSeek-V2 (arXiv:2405.04434) Table 1: MLA caches (d_c + d_h^R) l = (512 + 64) l elements per token, where
    multi-head attention with the same 16 heads of 192 would cache 2 x 16 x 192 l; tensor parallelism does not
    split the latent (vLLM MLAAttentionSpec has one head)."""
    plain = estimate(Config(model=MODELS["deepseek-v2-lite"], mode="serve", context=4096, batch=1))
    assert plain.part("kv_cache").bytes == 27 * 576 * 2 * 4096
    assert vllm(MODELS["deepseek-v2-lite"], tp=4, kv_cache_memory=GIB, max_model_len=4096)["page"] == 16 * 576 * 2


def test_deepseek_configs_are_read_and_their_counts_match_the_published_ones():
    """DeepSeek-V2-Lite config.json (huggingface.co/deepseek-ai/DeepSeek-V2-Lite; the same fields as Megatron-LM
    d98e8a6 examples/post_training/modelopt/conf/deepseek-ai/DeepSeek-V2-Lite.sh): 15,706,484,224 parameters in the
    safetensors index; DeepSeek-V3's main model 671,026,419,200."""
    v2 = {"model_type": "deepseek_v2", "num_hidden_layers": 27, "hidden_size": 2048, "num_attention_heads": 16,
          "num_key_value_heads": 16, "intermediate_size": 10944, "vocab_size": 102400, "kv_lora_rank": 512,
          "q_lora_rank": None, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
          "n_routed_experts": 64, "n_shared_experts": 2, "num_experts_per_tok": 6, "moe_intermediate_size": 1408,
          "first_k_dense_replace": 1, "moe_layer_freq": 1, "hidden_act": "silu", "topk_method": "greedy"}
    assert param_count(from_hf_config(v2)) == 15_706_484_224
    v3 = {**v2, "model_type": "deepseek_v3", "num_hidden_layers": 61, "hidden_size": 7168, "num_attention_heads": 128,
          "num_key_value_heads": 128, "intermediate_size": 18432, "vocab_size": 129280, "q_lora_rank": 1536,
          "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8, "moe_intermediate_size": 2048,
          "first_k_dense_replace": 3, "topk_method": "noaux_tc"}
    assert param_count(from_hf_config(v3)) == 671_026_419_200 == param_count(MODELS["deepseek-v3"])
    with pytest.raises(ValueError, match="num_nextn_predict_layers"):
        from_hf_config({**v3, "num_nextn_predict_layers": 1})


# Sliding-window and full layers -----------------------------------------------------------------------------------

def test_gemma_2_alternates_and_keeps_the_window_in_half_its_layers():
    """transformers modeling_gemma2.py: the even layers slide over 4096 tokens, the odd attend to everything (42
    layers: 21 of each); KV per token and layer: 2 x 8 heads x 256 x 2 bytes = 8,192 B. Gemma 2 9B has 9,241,705,984
    parameters (keras-hub gemma2_9b_en preset, the safetensors index)."""
    arch = MODELS["gemma-2-9b"]
    assert param_count(arch) == 9_241_705_984
    kv = estimate(Config(model=arch, mode="serve", context=8192, batch=4)).part("kv_cache").bytes
    assert kv == 4 * 8192 * (21 * 8192 + 21 * 4096)
    assert from_hf_config({"model_type": "gemma2", "num_hidden_layers": 42, "hidden_size": 3584,
                           "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256,
                           "intermediate_size": 14336, "vocab_size": 256000, "sliding_window": 4096}
                          ).sliding_window_pattern == 2


# google/gemma-3-1b-it config.json (huggingface.co, transformers_version 4.50.0.dev0): model_type gemma3_text, 26
# layers, hidden 1152, 4 query heads and 1 KV head of head_dim 256, intermediate 6912, vocabulary 262,144,
# sliding_window 512 with sliding_window_pattern 6, query_pre_attn_scalar 256, rope_theta 1e6 (full layers) and
# rope_local_base_freq 1e4 (sliding layers), rope_scaling null, 32,768 positions, tie_word_embeddings left to
# Gemma3TextConfig's default (True).
GEMMA3_1B_IT = {
    "architectures": ["Gemma3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "attn_logit_softcapping": None, "bos_token_id": 2, "cache_implementation": "hybrid", "eos_token_id": [1, 106],
    "final_logit_softcapping": None, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 1152,
    "initializer_range": 0.02, "intermediate_size": 6912, "max_position_embeddings": 32768,
    "model_type": "gemma3_text", "num_attention_heads": 4, "num_hidden_layers": 26, "num_key_value_heads": 1,
    "pad_token_id": 0, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000,
    "rope_scaling": None, "rope_theta": 1000000, "sliding_window": 512, "sliding_window_pattern": 6,
    "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0", "use_cache": True, "vocab_size": 262144}


def test_gemma_3_config_json_reads_as_the_catalogs_gemma_3_1b(capsys, tmp_path):
    """--config reads a Gemma 3 config.json as transformers 5.23's Gemma3TextConfig does (layer_types from
    sliding_window_pattern; q_norm, k_norm and four RMSNorms a block; tied embeddings): the catalog's gemma-3-1b field
    for field, 999,885,952 parameters (the safetensors metadata, keras-hub's gemma3_1b preset), two rotary tables (local
    and global). The per-layer-type rope_parameters transformers 5 saves read the same; what is not modelled
    (rope_scaling on the full layers only, as Gemma 3 4B has; softcapping; bidirectional attention) is refused by
    name."""
    catalog = MODELS["gemma-3-1b"]
    arch = from_hf_config(GEMMA3_1B_IT, "gemma-3-1b")
    assert arch == catalog.with_changes(source="", published_params=None) and param_count(arch) == 999_885_952
    assert shape_inputs(arch)["rope_tables"] == 2
    saved = {key: value for key, value in GEMMA3_1B_IT.items() if key not in ("rope_theta", "rope_local_base_freq",
                                                                               "rope_scaling", "sliding_window_pattern")}
    saved |= {"layer_types": ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(26)],
              "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e6},
                                  "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}}
    assert from_hf_config(saved, "gemma-3-1b") == arch
    for field, value in (("rope_scaling", {"factor": 8.0, "rope_type": "linear"}), ("final_logit_softcapping", 30.0),
                         ("use_bidirectional_attention", True), ("hidden_activation", "silu")):
        with pytest.raises(ValueError, match=f"config.json \\(gemma3_text\\) field '{field}'"):
            from_hf_config({**GEMMA3_1B_IT, field: value})
    path = tmp_path / "config.json"
    path.write_text(json.dumps(GEMMA3_1B_IT))
    assert main(["estimate", "--config", str(path), "--mode", "serve", "--context", "32768", "--json"]) == 0
    served = json.loads(capsys.readouterr().out)
    assert main(["estimate", "--model", "gemma-3-1b", "--mode", "serve", "--context", "32768", "--json"]) == 0
    assert served["parts"] == json.loads(capsys.readouterr().out)["parts"]


def test_a_regular_layer_types_pattern_is_read_and_an_irregular_one_refused():
    """transformers' layer_types (Gemma 3: five sliding layers, then one full)."""
    base = {"model_type": "llama", "num_hidden_layers": 12, "hidden_size": 64, "num_attention_heads": 4,
            "intermediate_size": 128, "vocab_size": 100, "sliding_window": 1024}
    gemma3_like = ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(12)]
    arch = from_hf_config({**base, "layer_types": gemma3_like})
    assert (arch.sliding_window, arch.sliding_window_pattern) == (1024, 6)
    with pytest.raises(ValueError, match="layer_types"):
        from_hf_config({**base, "layer_types": ["full_attention"] + ["sliding_attention"] * 11})


def test_vllm_groups_hybrid_layers_as_its_own_docstring_says():
    """kv_cache_utils.py _get_kv_cache_groups_uniform_page_size: "a model with 10 full attention layers and 20
    sliding window attention layers ... 3 kv_cache_groups, each of which contains 10 layers"; one block holds one
    layer of each group, so the pool has available / (page x 10) blocks; a request takes ceil(max_model_len / 16) in
    the full group and, in each sliding group, kv_cache_interface.py SlidingWindowSpec.max_memory_usage_bytes's
    cdiv(min(window - 1 + tokens per step, max_model_len), 16) + 1 ("+1 here because the sliding window may not start
    from the beginning of the block"). That is one batch in flight, as vLLM before 0.26 (--vllm-version 0.24); from
    v0.26.0 a sliding group holds max_num_batched_tokens for each of two batches in flight (vllm/config/vllm.py
    max_in_flight_tokens, asynchronous scheduling by default; SlidingWindowSpec.max_admission_blocks_per_request at
    v0.33.0)."""
    arch = MODELS["gemma-2-9b"].with_changes(layers=30, sliding_window_pattern=3)
    r = vllm(arch, kv_cache_memory=4 * GIB, max_model_len=32768, max_num_batched_tokens=2048, vllm_version="0.24")
    assert (r["full_layers"], r["sliding_layers"]) == (10, 20)
    assert (r["group_layers"], r["full_groups"], r["sliding_groups"]) == (10, 1, 2)
    assert r["num_blocks"] == 4 * GIB // r["page"] // 10
    assert r["blocks_per_request"] == 32768 // 16 + 2 * (math.ceil((4096 - 1 + 2048) / 16) + 1)
    newest = vllm(arch, kv_cache_memory=4 * GIB, max_model_len=32768, max_num_batched_tokens=2048)
    assert newest["blocks_per_request"] == 32768 // 16 + 2 * (math.ceil((4096 - 1 + 2 * 2048) / 16) + 1)
    # Gemma 2 (21 + 21): two groups of 21 layers.
    g = vllm(MODELS["gemma-2-9b"], kv_cache_memory=4 * GIB, max_model_len=8192, max_num_batched_tokens=2048)
    assert (g["group_layers"], g["full_groups"], g["sliding_groups"]) == (21, 1, 1)
    # A window that covers max_model_len saves nothing, and costs a block: the sliding group takes
    # cdiv(min(w - 1 + T, max_model_len), 16) + 1 blocks whether max_model_len caps the window or not (001cabc).
    assert vllm(MODELS["gemma-2-9b"], kv_cache_memory=4 * GIB, max_model_len=4096)["blocks_per_request"] == 256 + 257


def test_vllm_concurrency_matches_vllms_own_hybrid_test():
    """vLLM's tests/v1/core/test_kv_cache_utils.py test_get_max_concurrency_for_kv_cache_config (commit eaba533):
    32 full-attention layers and 32 sliding-window layers (window 1024), 32 KV heads of 128 in fp16, block size 16,
    max_model_len 16,384 and max_num_batched_tokens 1,024; with (1024 + 129) x 3 blocks the hybrid model's
    concurrency is 3: 1,024 blocks for the full group and cdiv(1023 + 1024, 16) + 1 = 129 for the sliding one."""
    arch = MODELS["gemma-2-9b"].with_changes(layers=64, heads=32, kv_heads=32, head_dim=128, sliding_window=1024,
                                            sliding_window_pattern=2)
    page = 16 * 2 * 32 * 128 * 2
    r = vllm(arch, kv_dtype="fp16", kv_cache_memory=(1024 + 129) * 3 * 32 * page, max_model_len=16384,
             max_num_batched_tokens=1024, vllm_version="0.24")  # one batch in flight, as at eaba533
    assert (r["page"], r["group_layers"], r["full_groups"], r["sliding_groups"]) == (page, 32, 1, 1)
    assert r["num_blocks"] == (1024 + 129) * 3 and r["blocks_per_request"] == 1024 + 129
    assert r["max_concurrency"] == 3


def test_sglang_keeps_gemma_2_in_one_pool_of_every_layer():
    """SGLang 0.5.18 to 0.5.23 configs/model_config.py is_hybrid_swa_model lists the architectures that get two pools
    (Llama4ForConditionalGeneration, Gemma4ForCausalLM, SWA_SINK_ARCHS' GptOssForCausalLM, ...): Gemma2ForCausalLM
    and Gemma3ForCausalLM are not among them, so MHATokenToKVPool holds every layer's K and V for every token (42
    layers x 2 x 8 KV heads x 256 x 2 bytes = 344,064 B a token for Gemma 2 9B) and the log has no "Use sliding
    window memory pool" line."""
    r = sglang(MODELS["gemma-2-9b"])
    assert not r["hybrid_swa"] and r["cell"] == 42 * 2 * 8 * 256 * 2 == 344_064
    assert r["swa_max_total_num_tokens"] == 0 and r["concurrent_requests"] == r["full_requests"]
    # --swa-full-tokens-ratio sizes no pool here: the run is the same.
    assert sglang(MODELS["gemma-2-9b"], swa_full_tokens_ratio=0.5)["max_total_num_tokens"] \
        == r["max_total_num_tokens"]
    assert sglang(MODELS["gemma-3-1b"])["cell"] == 26 * 2 * 1 * 256 * 2


def listed_hybrid():
    """Gemma 2 9B's shape (21 full and 21 sliding layers, a window of 4,096) in a family SGLang lists (gpt-oss's),
    so the two-pool sizing can be read on round numbers."""
    return MODELS["gemma-2-9b"].with_changes(family="gpt_oss")


def test_sglang_splits_a_listed_hybrid_model_into_a_full_and_a_sliding_pool():
    """pool_configurator.py HybridSWAPoolConfigurator: cell = F x per-token + swa_full_tokens_ratio x S x per-token
    (default ratio 0.8), the sliding pool holding int(full tokens x ratio) tokens, page-aligned."""
    r = sglang(listed_hybrid())
    assert r["hybrid_swa"] and r["cell"] == 8192 * (21 + Fraction(8, 10) * 21)
    assert r["swa_max_total_num_tokens"] == int(r["max_total_num_tokens"] * Fraction(8, 10))
    half = sglang(listed_hybrid(), swa_full_tokens_ratio=0.5)
    assert half["cell"] == 8192 * (21 + Fraction(1, 2) * 21)
    assert half["max_total_num_tokens"] > r["max_total_num_tokens"]
    # A model of one attention kind keeps one pool of every layer.
    assert sglang(MODELS["llama-3-8b"])["cell"] == 32 * 2 * 8 * 128 * 2


def test_sglang_hybrid_concurrency_is_the_fewer_of_its_two_pools(capsys):
    """A request needs its whole length in the full pool and at most SGLang's window (sliding_window - 1, models/
    gemma2.py get_attention_sliding_window_size) plus a page in the sliding pool: pool_configurator.py (commit
    003fca8) refuses a sliding pool at or under that floor ("SWA pool (N tokens) cannot hold even one request")."""
    def at(context, **settings):
        return sglang(listed_hybrid(), context_length=context, **settings)
    short, long = at(4096), at(16384)
    full, swa = short["max_total_num_tokens"], short["swa_max_total_num_tokens"]
    # Requests no longer than the window hold all their tokens in both pools: the smaller sliding pool binds.
    assert short["swa_request_tokens"] == 4096 and short["concurrent_requests"] == swa // 4096 < full // 4096
    # Longer requests hold the window and a page in the sliding pool: the full pool binds.
    assert long["swa_request_tokens"] == 4095 + 1 and long["concurrent_requests"] == full // 16384 < swa // 4096
    # A single-kind model is the full pool alone.
    llama = sglang(MODELS["llama-3-8b"], context_length=4096)
    assert llama["concurrent_requests"] == llama["max_total_num_tokens"] // 4096
    # The floor: a sliding pool of at most window + page tokens is SGLang's own refusal.
    tiny = at(4096, swa_full_tokens_ratio=0.01)
    assert tiny["swa_too_small"] and not tiny["fits"]
    assert "cannot hold even one request: the prefill admission floor is sliding_window_size (4095) + page_size (1)" \
        in tiny["error"]
    # The refusal names the flag at fault, as SGLang's message does ("Increase --swa-full-tokens-ratio or the total
    # KV budget"), and the memory fraction that sets that budget; a pool with no room at all is the fraction's.
    assert refused_by(tiny) == ("swa_full_tokens_ratio", "mem_fraction_static")
    assert main(["estimate", "--model", "gemma-2-9b", "--mode", "serve", "--engine", "sglang", "--gpu", "h100-80gb",
                 "--mem-fraction-static", "0.1"]) == 2
    err = capsys.readouterr().err
    assert "argument --mem-fraction-static: the engine would refuse this run: " in err and err.count("\n") == 1


# fp8 and the engines' words -----------------------------------------------------------------------------------------

def test_kv_cache_dtype_takes_the_engines_words(capsys):
    """vLLM and SGLang --kv-cache-dtype: fp8_e4m3 and fp8_e5m2 store 1 byte; a per-tensor fp8 cache keeps its
    scales outside the pages (vLLM KVQuantMode.FP8_PER_TENSOR), so the page halves exactly."""
    base = ["estimate", "--model", "deepseek-v2-lite", "--mode", "serve", "--engine", "vllm", "--gpu", "h100-80gb",
            "--max-model-len", "4096", "--kv-cache-memory", "1GiB", "--json"]
    assert main(base) == 0
    bf16 = json.loads(capsys.readouterr().out)
    assert main(base + ["--kv-cache-dtype", "fp8_e5m2"]) == 0
    fp8 = json.loads(capsys.readouterr().out)
    assert bf16["num_blocks"] == 2**30 // (16 * 576 * 2) // 27 and fp8["num_blocks"] == 2**30 // (16 * 576) // 27
    assert main(base + ["--kv-cache-dtype", "nvfp4"]) == 2
    err = capsys.readouterr().err
    assert "argument --kv-cache-dtype: 'nvfp4' is not modelled" in err and err.count("\n") == 1
    assert main(base + ["--kv-cache-dtype", "fp8", "--kv-dtype", "fp8"]) == 2
    assert "--kv-cache-dtype or --kv-dtype" in capsys.readouterr().err


def test_vllm_per_token_head_scales_live_in_the_pages(capsys):
    """vllm/v1/kv_cache_interface.py (commit 001cabc): get_kv_quant_mode maps fp8_per_token_head and
    int8_per_token_head to KVQuantMode.*_PER_TOKEN_HEAD, and AttentionSpec.page_size_bytes adds
    2 x block_size x num_kv_heads x 4 bytes of fp32 scales to the real page. Llama 3 8B (8 KV heads of 128): a
    16-token page of one layer is 16 x 2 x 8 x 128 x 1 = 32,768 B of values and 2 x 16 x 8 x 4 = 1,024 B of scales."""
    base = ["estimate", "--model", "llama-3-8b", "--mode", "serve", "--gpu", "h100-80gb", "--max-model-len", "4096",
            "--kv-cache-memory", "1GiB", "--json"]
    for word in ("fp8_per_token_head", "int8_per_token_head"):
        assert main(base + ["--engine", "vllm", "--kv-cache-dtype", word]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["num_blocks"] == 2**30 // (32768 + 1024) // 32
        assert "AttentionSpec.page_size_bytes" in out["sources"]["kv_cache"]
    assert main(base + ["--engine", "vllm", "--kv-cache-dtype", "fp8"]) == 0
    assert json.loads(capsys.readouterr().out)["num_blocks"] == 2**30 // 32768 // 32
    # The scales are vLLM's: without it the word is refused, naming the flag.
    for engine in ([], ["--engine", "sglang"]):
        assert main(base[:-3] + engine + ["--kv-cache-dtype", "fp8_per_token_head"]) == 2
        err = capsys.readouterr().err
        assert "argument --kv-cache-dtype: 'fp8_per_token_head' is vLLM's per-token-head mode" in err
        assert err.count("\n") == 1
    with pytest.raises(ValueError, match="kv_cache_dtype"):
        vllm(MODELS["llama-3-8b"], kv_cache_memory=GIB, kv_cache_dtype="fp8_per_token_head")  # kv_dtype not fp8


def test_swa_ratio_is_refused_outside_its_range(capsys):
    assert main(["estimate", "--model", "gemma-2-9b", "--mode", "serve", "--engine", "sglang", "--gpu", "h100-80gb",
                 "--swa-full-tokens-ratio", "1.5"]) == 2
    err = capsys.readouterr().err
    assert "--swa-full-tokens-ratio" in err and err.count("\n") == 1


def test_sglang_gives_gpt_oss_its_two_pools(capsys):
    """SGLang 0.5.23 configs/model_config.py is_hybrid_swa_model lists GptOssForCausalLM (SWA_SINK_ARCHS): gpt-oss-20b's
    12 full and 12 sliding layers (window 128, layer_types in openai/gpt-oss-20b config.json) of 8 KV heads of 64
    get HybridSWAPoolConfigurator's cell, 2 x 8 x 64 x 2 B = 2,048 B a layer and token, x (12 + 0.8 x 12)."""
    r = sglang(MODELS["gpt-oss-20b"], context_length=4096)
    assert r["hybrid_swa"] and r["cell"] == 2048 * (12 + Fraction(8, 10) * 12)
    # A request keeps SGLang's window (sliding_window - 1 = 127) and a page (1 on Hopper) in the sliding pool.
    assert r["swa_request_tokens"] == 128
    assert r["concurrent_requests"] == r["max_total_num_tokens"] // 4096 < r["swa_max_total_num_tokens"] // 128
    # SGLang's own refusal under the admission floor, naming the flag at fault.
    assert main(["estimate", "--model", "gpt-oss-20b", "--mode", "serve", "--engine", "sglang", "--gpu", "h100-80gb",
                 "--swa-full-tokens-ratio", "0.00005"]) == 2
    err = capsys.readouterr().err
    assert "argument --swa-full-tokens-ratio: the engine would refuse this run (--mem-fraction-static also moves it)" \
        in err and "sliding_window_size (127) + page_size (1)" in err and err.count("\n") == 1


def test_sglang_0_5_23_warns_when_the_pool_cannot_hold_one_full_request():
    """SGLang 0.5.23 managers/tp_worker.py TpModelWorker.get_worker_info logs "KV pool holds %d tokens, fewer than
    --context-length %d. One full-length request cannot fit, ..." (not in 0.5.22's): gpt-oss-120b on one H100 at its
    own 131,072-token context keeps a pool shorter than one request."""
    from builder.model.engine_sglang import SHORT_POOL_LINE, log_lines
    r = sglang(MODELS["gpt-oss-120b"])
    tokens = int(r["max_total_num_tokens"])
    assert 0 < tokens < r["context_len"] == 131072 and r["concurrent_requests"] == 0
    assert SHORT_POOL_LINE.format(tokens, 131072) in log_lines(r)
    older = sglang(MODELS["gpt-oss-120b"], sglang_version="0.5.22")
    assert not any(line.startswith("KV pool holds") for line in log_lines(older))
    assert not any(line.startswith("KV pool holds") for line in log_lines(sglang(MODELS["gpt-oss-20b"])))
