"""Serving memory as rules: the KV cache and the working set of a forward pass.

Evaluated by the estimator for `mode = serve` and, from the same rules, by the calculator's script.
"""

from __future__ import annotations

from typing import Any

from builder.model.cite import Cite
from builder.model.expr import both, eq, fmt, maximum, minimum, per_unit, sym, when
from builder.model.partrules import PartRule, PerUnit, RuleSet, bytes_of

KV = Cite("kwon2023", "section 3") + ": 2 x layers x kv_heads x head_dim x tokens x bytes"
MLA_KV = (Cite("deepseek2024", "sections 2.1.2-2.1.3 and Table 1") + ": (d_c + d_h^R) x layers elements per token; "
          + Cite("vllm-001cabc", "vllm/v1/kv_cache_interface.py MLAAttentionSpec.real_page_size_bytes")
          + " (block_size x 1 head x (kv_lora_rank + qk_rope_head_dim) x dtype bytes, the same on every TP rank); "
          + Cite("sglang-003fca8", "python/sglang/srt/model_executor/pool_configurator.py _compute_cell_size")
          + " (MLA: kv_lora_rank + qk_rope_head_dim per layer, not divided by TP)")
SLIDING_KV = (Cite("vllm-001cabc", "vllm/v1/kv_cache_interface.py SlidingWindowSpec.max_memory_usage_bytes")
              + ": a sliding layer keeps its window; " + Cite("transformers-5-23", "Gemma2/Gemma3 layer_types")
              + " (every Nth layer full attention)")
WORKING = (Cite("vllm-6adad08") + " chunked prefill (max_num_batched_tokens 8192); "
           + Cite("transformers-5-23") + " logits_to_keep")
PREFILL_CHUNK = 8192  # tokens per prefill step: vLLM's max_num_batched_tokens default with chunked prefill

# The engines' --kv-cache-dtype words and the dtype each stores (vLLM vllm/config/cache.py CacheDType and
# vllm/v1/kv_cache_interface.py get_kv_quant_mode, commit 001cabc; SGLang server_args.py --kv-cache-dtype). "auto" is
# the weights' dtype. The fp8 modes ("fp8" is e4m3 on NVIDIA GPUs) keep one fp32 k and one v scale per layer
# (KVQuantMode.FP8_PER_TENSOR: 8 bytes a layer, with the layer's weights, not in the KV cache's pages).
KV_CACHE_DTYPES = {"auto": None, "bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "fp16": "fp16",
                   "float32": "fp32", "fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8"}
# The engines' --quantization words for the weight formats the model counts (builder.model.states QUANTISATION): AWQ
# and GPTQ checkpoints at 4 bits (an fp16 scale and zero per group of 128; the Marlin kernels' names too), and fp8
# (vLLM quantises a 16-bit checkpoint's linear weights at load, per-tensor scales, embeddings and output layer kept
# 16-bit: vllm/model_executor/layers/quantization/fp8.py; SGLang the same word). From v0.31.0 vLLM's Fp8Config no
# longer quantises online itself (fp8.py:106-112 at v0.31.0 raises "The `fp8` quantization method no longer supports
# online quantization" for a checkpoint not fp8-serialized), but get_quant_config never builds it so for a 16-bit
# checkpoint: it logs "--quantization fp8 is deprecated for online quantization; use --quantization fp8_per_tensor
# instead." and loads fp8_per_tensor's OnlineQuantizationConfig (vllm/model_executor/model_loader/weight_utils.py:
# 340-349 at v0.31.0, :354-363 at v0.33.0), the same 1 B a weight and one fp32 scale a tensor; v0.30.0 and before
# build Fp8Config() unserialized (weight_utils.py:385-390 quant_cls(), fp8.py:101 is_checkpoint_fp8_serialized=False
# at v0.30.0), which quantises per tensor at load. So `fp8` on a 16-bit checkpoint is fp8 at load in every release; SGLang 0.5.23's
# Fp8Config still quantises online (python/sglang/srt/layers/quantization/fp8.py:1151-1175). The formats whose
# layout the model does not follow are refused by name.
QUANTIZATION_DTYPES = {"awq": "int4", "awq_marlin": "int4", "gptq": "int4", "gptq_marlin": "int4", "fp8": "fp8"}
# vLLM's online fp8 words (vllm/config/quantization.py _ONLINE_SHORTHANDS; before v0.22.0 the OnlineQuantScheme enum
# of the same file): a 16-bit checkpoint's LinearBase and RoutedExperts weights quantised to fp8 at load, the
# embeddings and output layer (VocabParallelEmbedding, ParallelLMHead) left 16-bit (online/base.py
# OnlineQuantizationConfig.get_quant_method, _ONLINE_LINEAR_METHODS and _ONLINE_MOE_METHODS at v0.33.0). Each with
# its weights' scale layout (Config.weight_scales) as vllm/model_executor/layers/quantization/online/fp8.py stores it
# at v0.33.0: fp8_per_tensor one fp32 weight_scale a tensor ("": fp8's own rule, the scales left out as negligible;
# Fp8PerTensorOnlineLinearMethod.process_weights_after_loading, :237-250), fp8_per_block an fp32 weight_scale_inv per
# 128 x 128 block, ceil(out/128) x ceil(in/128) a matrix (Fp8PerBlockOnlineLinearMethod, :292-350, and
# Fp8PerBlockOnlineMoEMethod's w13/w2 scales, :700-730: the DeepSeek-V3 checkpoint's layout), fp8_per_channel an fp32
# weight_scale per output row (Fp8PtpcOnlineLinearMethod, :426-440, amax over dim -1; int8's per-row rule).
ONLINE_FP8_SCALES = {"fp8_per_tensor": "", "fp8_per_block": "block", "fp8_per_channel": "channel"}
ONLINE_FP8_BLOCK = 128  # Fp8PerBlockOnlineLinearMethod.weight_block_size = [128, 128] (online/fp8.py:300, v0.33.0)
# The first vLLM release each word is in (minor x 100 + patch, builder.model.engines.release_code): fp8_per_tensor
# and fp8_per_block from v0.20.0 (vllm/model_executor/layers/quantization/__init__.py:42-43 QuantizationMethods and
# vllm/config/quantization.py OnlineQuantScheme at v0.20.0; v0.19.0 has neither that file nor the words),
# fp8_per_channel from v0.24.0 (vllm/config/quantization.py:125 _ONLINE_SHORTHANDS and quantization/__init__.py:43 at
# v0.24.0; not in v0.23.0's _ONLINE_SHORTHANDS nor its QuantizationMethods, __init__.py:41-44). An older --vllm-version is refused.
ONLINE_FP8_FROM = {"fp8_per_tensor": 2000, "fp8_per_block": 2000, "fp8_per_channel": 2400}
QUANTIZATION_DTYPES |= {word: "fp8" for word in ONLINE_FP8_SCALES}
QUANTIZATION_UNMODELLED = {
    "compressed-tensors": "the checkpoint's own scheme decides the format: give it with --param-dtype (int8 for "
                          "W8A8, fp8 for FP8, int4 for W4A16)",
    "bitsandbytes": "vLLM's in-flight NF4 blocks and their constants are not modelled: give --param-dtype nf4 for "
                    "bitsandbytes' own 4-bit layout",
    "gguf": "GGUF's block formats are not modelled",
    "modelopt": "the checkpoint's own scheme decides the format: give it with --param-dtype",
    "experts_int8": "int8 experts beside 16-bit attention are not modelled",
}
# The quantisations a checkpoint may be published in that the model follows (the catalog's checkpoint_quantization,
# config.json's quantization_config.quant_method), each with the dtype its quantised weights are stored in: fp8,
# float8_e4m3fn linear weights with an fp32 weight_scale_inv per weight_block_size block, or one per tensor without
# blocks (vllm/model_executor/layers/quantization/fp8.py Fp8Config.from_config, Fp8LinearMethod.create_weights and
# Fp8MoEMethod.create_weights, release v0.33.0). vLLM and SGLang read the method from the checkpoint and serve in it
# with no --quantization flag, and refuse a --quantization that names another (vllm/config/model.py
# ModelConfig._verify_quantization, release v0.33.0; SGLang python/sglang/srt/configs/model_config.py
# _parse_quant_hf_config and _verify_quantization, release v0.5.23): CHECKPOINT_MISMATCH, their words.
# mxfp4, gpt-oss's (vllm/model_executor/layers/quantization/mxfp4.py, release v0.33.0), stores only its routed experts'
# matrices quantised, beside 16-bit weights whose dtype the run keeps (""): builder.model.states' MXFP4 rules.
CHECKPOINT_QUANTIZATIONS = {"fp8": "fp8", "mxfp4": ""}
CHECKPOINT_MISMATCH = ("Quantization method specified in the model config ({0}) does not match the quantization "
                       "method specified in the `quantization` argument ({1}).")


def _checkpoint_dtype(method: Any) -> Any:
    """The dtype a checkpoint published in quantisation `method` (a rule) stores its weights in; "" for none."""
    rule: Any = ""
    for name, dtype in CHECKPOINT_QUANTIZATIONS.items():
        rule = when(eq(method, name), dtype, rule)
    return rule


# The dtype the checkpoint's quantised weights are stored in ("" for a 16-bit checkpoint, and for mxfp4's experts).
CHECKPOINT_DTYPE = _checkpoint_dtype(sym("checkpoint_quantization"))
# The weights' dtype a run asks for (chosen_param_dtype: "" for none, then the precision policy's): a served
# checkpoint published quantised is loaded in its own format unless the run names the weights' dtype itself, as the
# engines load it; training loads the 16-bit weights. Config.policy evaluates it, and the calculator's RUN_RULES.
CHOSEN_WEIGHTS = when(sym("chosen_param_dtype"), sym("chosen_param_dtype"),
                      when(both(eq(sym("mode"), "serve"), sym("checkpoint_quantization")), CHECKPOINT_DTYPE, ""))
# The words of a layout a checkpoint ships in, taken for a model whose checkpoint is of it (its weights as the
# checkpoint has them: Architecture.checkpoint_quantization) and refused for another: gpt-oss's MXFP4 experts, which vLLM
# reads from config.json's quant_method whether or not --quantization mxfp4 is given
# (vllm/model_executor/layers/quantization/mxfp4.py GptOssMxfp4Config.override_quantization_method matches the
# checkpoint's 'mxfp4' and an explicit --quantization mxfp4 alike); SGLang the same word.
QUANTIZATION_CHECKPOINT = {"mxfp4": "mxfp4"}
# The activation dtypes each method runs in (vLLM's get_supported_act_dtypes: awq.py and gptq.py float16 only, their
# Marlin kernels and fp8.py float16 and bfloat16); another --dtype is refused at start-up
# (vllm/config/vllm.py VllmConfig._get_quantization_config).
QUANTIZATION_ACT_DTYPES = {"awq": ("fp16",), "gptq": ("fp16",), "awq_marlin": ("fp16", "bf16"),
                           "gptq_marlin": ("fp16", "bf16"), "fp8": ("fp16", "bf16"), "mxfp4": ("bf16",),
                           # online/base.py OnlineQuantizationConfig.get_supported_act_dtypes (v0.33.0)
                           **{word: ("fp16", "bf16") for word in ONLINE_FP8_SCALES}}
# The engines' --dtype words (vLLM and SGLang): the weights' and activations' dtype; "auto" keeps the checkpoint's.
MODEL_DTYPES = {"auto": None, "bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32",
                "float": "fp32"}

# vLLM's per-token-head modes (vllm/v1/kv_cache_interface.py get_kv_quant_mode, KVQuantMode.FP8_PER_TOKEN_HEAD and
# INT8_PER_TOKEN_HEAD, commit 001cabc): 1-byte values, and an fp32 k and v scale per token and KV head carved from the
# cache's own pages (AttentionSpec.page_size_bytes: real page + 2 x block_size x num_kv_heads x 4 B). The dtype each
# stores; the scales are vLLM's, so the words need --engine vllm (builder.model.engines).
KV_CACHE_PER_TOKEN_HEAD = {"fp8_per_token_head": "fp8", "int8_per_token_head": "int8"}
PER_TOKEN_HEAD_SCALE_BYTES = 2 * 4  # a k and a v scale in fp32, per token and KV head
PER_TOKEN_HEAD = (Cite("vllm-001cabc", "vllm/v1/kv_cache_interface.py AttentionSpec.page_size_bytes") + ": + 2 x "
                  "block_size x num_kv_heads x 4 B of fp32 scales for KVQuantMode.FP8_PER_TOKEN_HEAD / "
                  "INT8_PER_TOKEN_HEAD")
# Modes whose layout is not modelled: refused by name rather than counted wrong.
KV_CACHE_UNMODELLED = {
    "nvfp4": "packed fp4 values with an fp8 scale per 16 (kv_cache_interface.py FullAttentionSpec.real_page_size_bytes)",
    "fp4_e2m1": "SGLang's fp4 cache keeps a scale per 16 values (pool_configurator.py _compute_cell_size)",
    "fp8_ds_mla": "vLLM's FlashMLA sparse layout, 656 bytes a token (kv_cache_interface.py MLAAttentionSpec)",
}


# The model's own length limit as vLLM derives it from config.json (vllm/config/model.py _get_and_verify_max_len):
# max_position_embeddings (the rotary table's rows: under YaRN the original times the factor), or GPT-2's
# n_positions; SGLang's (get_context_length, CONTEXT_LENGTH) differs only where a rope_scaling that names
# original_max_position_embeddings scales it (YaRN, or linear or dynamic scaling with an original): SGLang then keeps
# max_position_embeddings as it stands (architecture.context_positions_of). 0 where the model gives none.
# A length asked above it is refused at start-up by both engines.
MODEL_LENGTH = maximum(sym("rope_positions"), sym("position_embeddings"))
CONTEXT_LENGTH = maximum(sym("context_positions"), sym("position_embeddings"))
LENGTH_KEY = when(sym("rope_positions") > 0, "max_position_embeddings", "n_positions")


def beyond_model(length: Any, limit: Any = MODEL_LENGTH) -> Any:
    """Whether a request `length` (a rule) passes the model's own `limit` (vLLM's by default), where it has one."""
    return both(limit > 0, length > limit)


# The rows of a learned position table (GPT-2's wpe, n_positions: 1,024); 0 for rotary positions, which a training
# run may take past max_position_embeddings. transformers' GPT2Model looks each position id up in that table, so a
# sequence longer than its rows is an index error (IndexError: index out of range in self, measured on CPU with a
# GPT-2 of 8 positions under generate: tests/test_engine_hf.py). One rule for every run that feeds a sequence through
# the model: training's seq_len, a served context (builder.model.checks) and generate's prompt with its new tokens
# (builder.model.engine_hf).
LEARNED_POSITIONS = sym("position_embeddings")


def past_learned_positions(tokens: Any) -> Any:
    """Whether a sequence of `tokens` (a rule) indexes past the model's learned positions, where it has them."""
    return beyond_model(tokens, LEARNED_POSITIONS)


def learned_positions_text(tokens: Any, which: Any = "") -> Any:
    """Why past_learned_positions refuses, in one line after the option's name; `which` says which tokens the
    sequence holds where that is not plain (" (...)")."""
    return fmt("{0} has {1} learned positions (the rows of its position embedding table), so a sequence of {2} "
               "tokens{3} would index past them; at most {1}", sym("model_name"), LEARNED_POSITIONS, tokens, which)

# The KV cache per token of this stage, shared with the engines' accounting (builder.model.engines, engine_sglang).
LATENT = sym("kv_lora_rank") > 0
KV_SYMBOLS = {
    # Quantised (sub-2-byte) weights keep a KV cache in the 16-bit dtype the model runs in (--dtype); otherwise the
    # cache is in the weights' dtype ("auto"). An fp8 cache (vLLM --kv-cache-dtype fp8) adds one fp32 k and v scale
    # per layer, kept with the layer's weights (8 B a layer).
    "kv_cache_dtype": when(sym("kv_dtype"), sym("kv_dtype"),
                           when(bytes_of(sym("param_dtype")) < 2, sym("activation_dtype"), sym("param_dtype"))),
    # Tensor parallelism splits KV heads; a rank keeps at least one (replicated when tp > kv_heads). Latent attention
    # caches one latent per token that every rank keeps whole (vLLM's MLA backends, SGLang's MLATokenToKVPool).
    "kv_heads_per_gpu": when(LATENT, 1, maximum(1, sym("kv_heads") // sym("tp"))),
    # Elements one layer keeps per token on this rank: K and V of its heads, or the latent and the rotary key.
    "kv_width": when(LATENT, sym("kv_lora_rank") + sym("qk_rope_head_dim"),
                     2 * sym("kv_heads_per_gpu") * sym("head_dim")),
    "kv_per_token_layer": sym("kv_width") * bytes_of(sym("kv_cache_dtype")),
    "kv_per_token": sym("stage_layers") * sym("kv_per_token_layer"),
    # Layers that attend to the whole context and layers that keep a window: with a pattern, every Nth layer is
    # full (a pipeline stage gets its share of them, rounded down); without one, every layer slides.
    "full_layers": when(sym("sliding_window"),
                        when(sym("sliding_window_pattern"), sym("stage_layers") // maximum(sym("sliding_window_pattern"), 1),
                             0), sym("stage_layers")),
    "sliding_layers": sym("stage_layers") - sym("full_layers"),
}

SERVING = RuleSet(
    symbols={
        **KV_SYMBOLS,
        # A sliding-window layer keeps only the last `sliding_window` tokens.
        "kv_tokens": when(sym("sliding_window"), minimum(sym("context"), sym("sliding_window")), sym("context")),
        "prefill_tokens": minimum(sym("batch") * sym("context"), PREFILL_CHUNK),
        "ffn_per_gpu": when(sym("ffn"), sym("ffn"), sym("expert_ffn")) // sym("tp"),
    },
    parts=(
        PartRule("kv_cache", sym("kv_per_token_layer") * sym("batch")
                 * (sym("full_layers") * sym("context") + sym("sliding_layers") * sym("kv_tokens")),
                 when(LATENT, "L x (d_c + d_rope) x batch x tokens x bytes",
                      "2 x L x kv_heads x d x batch x tokens x bytes"),
                 when(LATENT, MLA_KV, when(sym("sliding_window"), KV + "; " + SLIDING_KV, KV)),
                 PerUnit(sym("kv_per_token"), "token", sym("kv_cache_dtype")),
                 when(sym("sliding_window"),
                      when(sym("full_layers"),
                           fmt("sliding window: {0} of {1} layers keep the last {2} tokens", sym("sliding_layers"),
                               sym("stage_layers"), sym("sliding_window")),
                           fmt("sliding window: keeps the last {0} tokens", sym("sliding_window"))),
                      "")),
        PartRule("activations/working_set",
                 sym("prefill_tokens") * (2 * sym("hidden") + 3 * sym("ffn_per_gpu"))
                 * bytes_of(sym("activation_dtype")) + sym("batch") * sym("vocab") * 4,
                 "prefill chunk x (2h + 3f) x bytes + batch x V x 4 (last-token logits)", WORKING,
                 fmt("per prefill chunk"),
                 fmt("simplification: one layer's transient tensors for a prefill chunk of up to {0} tokens; "
                     "engines size this buffer themselves", PREFILL_CHUNK)),
    ),
)
