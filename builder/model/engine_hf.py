"""Serving with Hugging Face `generate`: the peak of one `model.generate(input_ids, ...)` call, as rules.

Source read in transformers 5.23.0 (the installed release; paths under src/transformers/) and torch 2.13.

- The cache. GenerationConfig.cache_implementation (generation/configuration_utils.py) is None by default, and
  generate builds a DynamicCache then (generation/utils.py _prepare_cache_for_generation). "static" builds a
  StaticCache of max_cache_len = max_length - 1 = prompt + max_new_tokens - 1 tokens, or GenerationConfig.max_cache_len
  when that is larger (utils.py generate step 7, _prepare_static_cache); max_cache_len is ignored, with a warning, by
  any other cache (configuration_utils.py validate).
- DynamicLayer.update (cache_utils.py) is `self.keys = torch.cat([self.keys, key_states], dim=-2)`, then the same for
  values: while a layer grows by one token its old keys (or values) and the new ones are both alive, one layer's K
  of the old length more than the cache. StaticLayer.lazy_initialization allocates `torch.zeros((batch, kv_heads,
  max_cache_len, head_dim))` for K and V on the layer's first update, in the prefill, and update returns the whole
  tensors: attention then runs over max_cache_len keys.
- Attention (models/llama/modeling_llama.py eager_attention_forward): eager materialises the scores (batch, heads,
  query, keys) = matmul x scaling (+ the mask) in the model's dtype, then softmax(dtype=torch.float32), then
  .to(query.dtype). torch's softmax with a dtype converts the input first and then allocates the fp32 result
  (aten/src/ATen/native/SoftMax.cpp softmax: only fp16 on CUDA takes the half_to_float kernel), so in bf16 the
  bf16 scores, their fp32 copy and the fp32 softmax are alive at once: 2 + 4 + 4 = 10 bytes a score (fp16: 2 + 4
  and then + 2 for the cast back, 8; fp32: 4 + 4). SDPA and FlashAttention-2 (integrations/sdpa_attention.py,
  flash_attention.py) never hold the scores.
- The logits. generate passes logits_to_keep=1 when the model's forward takes it (utils.py generate:
  `if self._supports_logits_to_keep() and "logits_to_keep" not in model_kwargs`), so the prefill's lm_head makes
  (batch, 1, vocab) in the model's dtype; then _sample copies the last row to fp32 (`outputs.logits[:, -1]
  .to(copy=True, dtype=torch.float32)`). With logits_to_keep=0 (a model without the argument, or passed to
  generate) lm_head makes (batch, prompt, vocab).
- Sliding-window layers (Gemma 2's every other layer). DynamicCache(config=...) builds a DynamicSlidingWindowLayer for
  each layer whose layer_types entry is "sliding_attention" (cache_utils.py get_layer_types_and_kwargs, line 1910;
  DynamicCache.__init__, lines 2011-2018). Its update (lines 222-259) concatenates the old keys (values) with the new ones
  into full_key_states and full_value_states, both before either is assigned, then keeps
  `full_key_states[:, :, -self.sliding_window + 1 :, :]`, a view: the storage is the whole concatenation. So after the
  prefill a sliding layer still holds the whole prompt (its view is sliding_window - 1 tokens of a prompt-long
  tensor), and after a decode step it holds min(tokens, sliding_window) tokens; the last step's copy is that layer's
  old K and V together. StaticCache builds a StaticSlidingWindowLayer of min(sliding_window, max_cache_len) slots
  (lines 525-527), allocated in the prefill like a StaticLayer; a decode step on a full window rolls K and V into new
  tensors (`self.keys.roll(-1, dims=-2)`, lines 559-560) before copying them back: one layer's K and V of the window
  alive beside the cache. The prefill's keys for a sliding layer: the prompt with a dynamic cache (full_key_states),
  with a static one the prompt when it overflows the window (lines 578-581, 608) and the window's slots otherwise
  (line 602). Eager scores of a sliding layer are the full prompt x keys matrix with a banded mask; Gemma 2's
  eager_attention_forward (models/gemma2/modeling_gemma2.py lines 176-207) softcaps the scores (divide, tanh,
  multiply: one bf16 copy at a time), which stays under the softmax's 10 bytes a score.
- Latent attention (DeepSeek-V2/V3). DeepseekV2Attention.forward (models/deepseek_v2/modeling_deepseek_v2.py lines
  385-395; DeepseekV3Attention.forward, models/deepseek_v3/modeling_deepseek_v3.py lines 444-459) writes the cache
  "while the latent KV is still compressed": the layer's keys are the normed latent (batch, 1, tokens, kv_lora_rank)
  and its values the rotary key (batch, 1, tokens, qk_rope_head_dim), the same kv_lora_rank + qk_rope_head_dim
  elements a token as vLLM's and SGLang's MLA caches. But every forward then expands the whole cache of the layer
  (expand_kv, lines 348-364 / 407-424): kv_b_proj makes heads x (qk_nope_head_dim + v_head_dim) per cached token and
  a new key tensor heads x (qk_nope_head_dim + qk_rope_head_dim), and attention runs over those per-head keys and
  values; vLLM's and SGLang's MLA kernels absorb kv_b_proj into the query and output instead and never expand the
  cache. The expansion is one layer's at a time, but of every cached token, at every decode step.
- The moments: the prefill's last layer (every layer's cache written, plus the layer's largest working set or the
  logits) and the last decode step (the cache at prompt + max_new_tokens - 1 tokens, plus, for the dynamic cache,
  the torch.cat copy). Whichever is higher is the peak.

Simplifications, named on the page: one GPU (no device_map split, no tensor parallelism), the caching allocator's
rounding and fragmentation left out, the attention mask (bool, batch x prompt x keys, materialised for a static cache)
and the rotary and projection temporaries left out, an MoE layer's working set counted as its top_k experts' dense MLP
(or the dense MLP of the first layers when larger), the cache counted after every layer's update of a step (one
token a layer more than while the step runs), under latent attention the query's and value's own copies left out, and
generate's default max_length capped at max_position_embeddings for learned positions only (new_tokens).

Learned positions (GPT-2's wpe): the prompt and every new token but the last are looked up in the table
(models/gpt2/modeling_gpt2.py GPT2Model.forward), so prompt + max_new_tokens - 1 past its rows is an IndexError, refused
with the rule training's seq_len is held to (builder.model.serving.past_learned_positions; too_long below).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from builder.model.cite import Cite
from builder.model.expr import both, either, eq, floor, fmt, maximum, minimum, negate, real, sym, when
from builder.model.partrules import PartRule, RuleSet, bytes_of
from builder.model.serving import KV_SYMBOLS, learned_positions_text, past_learned_positions
from builder.model.units import GiB as GIB

HF_VERSION = "transformers 5.23.0 (torch 2.13)"


def _hf(locator: str) -> Cite:
    """A file (and function) of transformers 5.23.0, the version read."""
    return Cite("transformers-5-23", "src/transformers/" + locator)


CACHE_CHOICE = (_hf("generation/utils.py _prepare_cache_for_generation, _prepare_static_cache") + "; "
                + _hf("generation/configuration_utils.py GenerationConfig.cache_implementation"))
DYNAMIC = _hf("cache_utils.py DynamicLayer.update") + " (torch.cat per token)"
STATIC = (_hf("cache_utils.py StaticLayer.lazy_initialization") + " (torch.zeros of max_cache_len); "
          + _hf("generation/utils.py generate") + ": max_cache_len = max_length - 1")
EAGER = (_hf("models/llama/modeling_llama.py eager_attention_forward") + " (scores in the model's dtype, softmax in "
         "fp32, cast back); " + Cite("torch-softmax", "aten/src/ATen/native/SoftMax.cpp softmax")
         + " (the input converted before the fp32 result is allocated)")
SDPA = (_hf("integrations/sdpa_attention.py, integrations/flash_attention.py") + " (no score matrix); "
        + _hf("models/llama/modeling_llama.py LlamaAttention.forward"))
MLP = _hf("models/llama/modeling_llama.py LlamaMLP.forward") + ": down(act(gate(x)) * up(x))"
LOGITS = (_hf("generation/utils.py generate and _sample") + " (logits_to_keep=1 when _supports_logits_to_keep; "
          "_sample keeps outputs.logits of the last position as a float32 copy); "
          + _hf("models/llama/modeling_llama.py LlamaForCausalLM.forward") + " (slice_logits_to_keep before lm_head)")
SLIDING = (_hf("cache_utils.py DynamicSlidingWindowLayer.update lines 222-259") + " (keeps a view of the last "
           "sliding_window - 1 tokens of the concatenation), "
           + _hf("cache_utils.py StaticSlidingWindowLayer lines 525-608") + " (min(sliding_window, max_cache_len) "
           "slots, rolled when full); " + _hf("cache_utils.py get_layer_types_and_kwargs line 1910"))
ROLL = _hf("cache_utils.py StaticSlidingWindowLayer.update lines 559-564") + " (roll of K and V, then copy_)"
LATENT_CACHE = (_hf("models/deepseek_v2/modeling_deepseek_v2.py DeepseekV2Attention.forward lines 385-395") + " and "
                + _hf("models/deepseek_v3/modeling_deepseek_v3.py lines 444-459")
                + " (the cache holds the latent and the rotary key)")
EXPAND = (_hf("models/deepseek_v2/modeling_deepseek_v2.py DeepseekV2Attention.expand_kv lines 348-364") + ", "
          + _hf("models/deepseek_v3/modeling_deepseek_v3.py expand_kv lines 407-424")
          + " (kv_b_proj of every cached token, a new key tensor of qk_nope + qk_rope per head)")
WEIGHTS = "the weights as from_pretrained loads them (torch_dtype): " + _hf("modeling_utils.py from_pretrained")
DEFAULT_NEW_TOKENS = 20  # GenerationConfig's max_length 20 with no max_new_tokens: 20 new tokens (utils.py
# _prepare_generated_length: "by default let's always generate 20 new tokens")
ATTN_IMPLEMENTATIONS = ("eager", "sdpa", "flash_attention_2")  # from_pretrained(attn_implementation=...)
CACHE_IMPLEMENTATIONS = ("dynamic", "static")  # GenerationConfig.cache_implementation (None: dynamic)
# The model's own --attention words for the same choices.
ATTENTION_OF = {"eager": "eager", "sdpa": "sdpa", "flash_attention_2": "flash"}

FLAGS = (
    ("cache_implementation", "choice", "dynamic|static",
     "GenerationConfig.cache_implementation (transformers' default: a DynamicCache that grows)"),
    ("attn_implementation", "choice", "eager|sdpa|flash_attention_2",
     "from_pretrained's attn_implementation (default: --attention, which defaults to sdpa as transformers does)"),
    ("max_new_tokens", "whole", "N", "tokens generate adds after the prompt (transformers' default 20)"),
    ("max_cache_len", "whole", "TOKENS",
     "GenerationConfig.max_cache_len: a static cache's length when above prompt + max_new_tokens - 1"),
    ("logits_to_keep", "count", "N",
     "logits rows the prefill makes: 1 is generate's own for models that take it, 0 keeps every prompt token's"),
)
# Families whose transformers model refuses SDPA: from_pretrained without attn_implementation falls back to eager
# (modeling_utils.py get_correct_attn_implementation lines 1872-1879: "Sdpa is the default, so we try it and fallback
# to eager otherwise"), and attn_implementation="sdpa" raises.
NO_SDPA = {"gemma2": _hf("models/gemma2/modeling_gemma2.py line 352") + ": _supports_sdpa = False (sdpa does not "
                                                                      "support softcapping)"}
CHOICES = {"cache_implementation": CACHE_IMPLEMENTATIONS, "attn_implementation": ATTN_IMPLEMENTATIONS}


def inputs_of(settings: Any, config: Any) -> dict[str, Any]:
    """The settings as the rules read them: attn_implementation, else the model's --attention, which for a model
    without SDPA (Gemma 2) falls back to eager as from_pretrained's default does."""
    implementation = settings.attn_implementation or {v: k for k, v in ATTENTION_OF.items()}[config.attention]
    if implementation == "sdpa" and config.model.family in NO_SDPA and settings.attn_implementation is None:
        implementation = "eager"
    return {"cache_implementation": settings.cache_implementation or "dynamic",
            "attn_implementation": implementation,
            "max_new_tokens": new_tokens(settings, config),
            "max_cache_len": settings.max_cache_len or 0,
            "logits_to_keep": 1 if settings.logits_to_keep is None else settings.logits_to_keep}


def new_tokens(settings: Any, config: Any) -> int:
    """max_new_tokens as generate takes it: the one given; else GenerationConfig's default of 20 new tokens, with
    max_length (prompt + 20) capped at config.max_position_embeddings (utils.py _prepare_generated_length), which for
    GPT-2 is n_positions (GPT2Config.attribute_map), its learned positions: a prompt 4 short of them gets 4 (measured
    with a GPT-2 of 8 positions: tests/test_engine_hf.py). Simplification: a rotary model's cap is not applied (its
    config.json max_position_embeddings is not always the rows Architecture keeps), so a prompt within 20 tokens of
    it is counted with 20 new tokens. Under 1 where the prompt fills the positions (checked refuses it)."""
    if settings.max_new_tokens is not None:
        return settings.max_new_tokens
    positions = config.model.learned_positions
    return min(DEFAULT_NEW_TOKENS, positions - config.context) if positions else DEFAULT_NEW_TOKENS


B, S, N = sym("batch"), sym("context"), sym("max_new_tokens")
ACT = bytes_of(sym("activation_dtype"))
STATIC_CACHE = eq(sym("cache_implementation"), "static")
EAGER_ATTN = eq(sym("attn_implementation"), "eager")
PREFILL = sym("prefill_is_peak")


def gib(x: Any) -> Any:
    """Bytes as GiB with two decimals, for the lines."""
    return real(maximum(0, floor(x * 100 / GIB + Fraction(1, 2))) / 100)


LATENT = sym("kv_lora_rank") > 0
W = sym("sliding_window")
HF = RuleSet(
    symbols={
        **KV_SYMBOLS,
        # Tokens each layer's cache holds at the end: max_length - 1 (the last new token is never fed back).
        "final_tokens": S + N - 1,
        "static_len": maximum(sym("final_tokens"), sym("max_cache_len")),
        "decode_steps": N - 1,
        # A StaticSlidingWindowLayer's slots: min(sliding_window, max_cache_len).
        "sliding_static_len": minimum(W, sym("static_len")),
        # A DynamicSlidingWindowLayer's storage: the prompt after the prefill (its window is a view of it), then
        # min(tokens, sliding_window) once a decode step has concatenated.
        "sliding_final": when(sym("decode_steps"), minimum(sym("final_tokens"), W), S),
        "layer_token_bytes": sym("kv_per_token_layer") * B,
        # Layer-tokens a static cache allocates: full layers max_cache_len, sliding ones their window's slots.
        "static_tokens": sym("full_layers") * sym("static_len") + sym("sliding_layers") * sym("sliding_static_len"),
        "cache_prefill": sym("layer_token_bytes") * when(STATIC_CACHE, sym("static_tokens"), sym("stage_layers") * S),
        "cache_decode": sym("layer_token_bytes") * when(
            STATIC_CACHE, sym("static_tokens"),
            sym("full_layers") * sym("final_tokens") + sym("sliding_layers") * sym("sliding_final")),
        # The last decode step's copies. A full layer's torch.cat: its old keys (final_tokens - 1 of them; under
        # latent attention the kv_lora_rank latent) beside the new ones. A sliding layer concatenates K and V before
        # assigning either: its old K and V together. A full static window rolls K and V into new tensors.
        "key_per_token_layer": when(LATENT, sym("kv_lora_rank"), sym("kv_heads_per_gpu") * sym("head_dim"))
        * bytes_of(sym("kv_cache_dtype")),
        "full_concat": when(sym("full_layers"), sym("key_per_token_layer") * B * (sym("final_tokens") - 1), 0),
        "sliding_concat": when(sym("sliding_layers"), sym("layer_token_bytes") * when(
            sym("decode_steps") > 1, minimum(sym("final_tokens") - 1, W), S), 0),
        "roll_copy": when(both(STATIC_CACHE, sym("sliding_layers") > 0,
                               sym("final_tokens") - 1 >= sym("sliding_static_len")),
                          sym("layer_token_bytes") * sym("sliding_static_len"), 0),
        "concat_copy": when(STATIC_CACHE, 0, maximum(sym("full_concat"), sym("sliding_concat"))),
        # Keys the prefill attends to: the prompt, or the whole static cache (a full StaticLayer returns all its
        # slots; a sliding one the prompt when it overflows the window, else the window's slots).
        "prefill_keys": when(STATIC_CACHE, when(sym("full_layers"), sym("static_len"),
                                                maximum(S, sym("sliding_static_len"))), S),
        "score_bytes": when(eq(sym("activation_dtype"), "bf16"), 10,
                            when(eq(sym("activation_dtype"), "fp16"), 8, 2 * ACT)),
        "residual": 2 * B * S * sym("hidden") * ACT,
        # Latent attention's expand_kv, per cached token of one layer: kv_b_proj's heads x (qk_nope + v) and the new
        # key tensor's heads x (qk_nope + qk_rope) = heads x head_dim.
        "expanded_per_token": when(LATENT, sym("heads") * (2 * sym("head_dim") - sym("qk_rope_head_dim")
                                                          + sym("v_head_dim")), 0) * ACT,
        "prefill_expansion": B * sym("prefill_keys") * sym("expanded_per_token"),
        "attention_core": when(EAGER_ATTN, B * sym("heads") * S * sym("prefill_keys") * sym("score_bytes"),
                               B * S * when(LATENT, sym("heads") * (2 * sym("head_dim") + sym("v_head_dim")),
                                            (2 * sym("heads") + 2 * sym("kv_heads")) * sym("head_dim")) * ACT),
        "attention_work": sym("attention_core") + sym("prefill_expansion"),
        # An MoE layer: its top_k experts' MLP, or the dense MLP of the first layers (DeepSeek) when larger.
        "mlp_work": 3 * B * S * when(sym("experts"), maximum(sym("top_k") * sym("expert_ffn"),
                                                            when(sym("first_dense_layers"), sym("ffn"), 0)),
                                     sym("ffn")) * ACT,
        "attention_wins": sym("attention_work") >= sym("mlp_work"),
        "layer_work": sym("residual") + maximum(sym("attention_work"), sym("mlp_work")),
        "logits_rows": when(sym("logits_to_keep"), minimum(sym("logits_to_keep"), S), S),
        "prefill_logits": B * sym("logits_rows") * sym("vocab") * ACT,
        "logits_fp32": B * sym("vocab") * 4,
        "final_hidden": B * S * sym("hidden") * ACT,
        "logits_work": sym("final_hidden") + sym("prefill_logits") + sym("logits_fp32"),
        "logits_win": sym("logits_work") > sym("layer_work"),
        "prefill_work": maximum(sym("layer_work"), sym("logits_work")),
        "prefill_peak": sym("weights_bytes") + sym("cuda_context_bytes") + sym("cache_prefill") + sym("prefill_work"),
        # The last decode step's layer: the cache's copy while it grows (or rolls), or latent attention's expansion
        # of every cached token (after the update: the two are not alive together).
        "decode_expansion": B * when(STATIC_CACHE, sym("static_len"), sym("final_tokens")) * sym("expanded_per_token"),
        "cache_copy": sym("concat_copy") + sym("roll_copy"),
        "expansion_wins": sym("decode_expansion") > sym("cache_copy"),
        "decode_layer": maximum(sym("cache_copy"), sym("decode_expansion")),
        "decode_work": B * sym("vocab") * ACT + sym("logits_fp32"),
        "decode_peak": when(sym("decode_steps"), sym("weights_bytes") + sym("cuda_context_bytes")
                            + sym("cache_decode") + sym("decode_layer") + sym("decode_work"), 0),
        "prefill_is_peak": sym("prefill_peak") >= sym("decode_peak"),
        "peak": maximum(sym("prefill_peak"), sym("decode_peak")),
        "headroom": sym("gpu_total") - sym("peak"),
        # The prompt and every new token but the last go through the model: past a learned position table (GPT-2's
        # wpe) the lookup fails, the rule training's seq_len and a served context are held to.
        "too_long": past_learned_positions(sym("final_tokens")),
        "fits": both(negate(sym("too_long")), sym("peak") <= sym("gpu_total")),
        "moment": when(PREFILL, "prefill", "last decode step"),
        "error": when(sym("too_long"), fmt("generate: {0}", learned_positions_text(
            sym("final_tokens"), " (prompt + max_new_tokens - 1: the last new token is never fed back)")),
            when(sym("fits"), "", fmt(
                "torch.OutOfMemoryError: CUDA out of memory: generate's peak, {0} GiB at the {1}, is above the "
                "GPU's {2} GiB", gib(sym("peak")), sym("moment"), gib(sym("gpu_total"))))),
    },
    parts=(
        PartRule("weights", sym("weights_bytes"), "the weights as loaded", WEIGHTS, "as loaded"),
        PartRule("kv_cache", when(PREFILL, sym("cache_prefill"), sym("cache_decode")),
                 when(LATENT, when(STATIC_CACHE, "L x (d_c + d_rope) x batch x max_cache_len x bytes",
                                   "L x (d_c + d_rope) x batch x tokens x bytes"),
                      when(STATIC_CACHE, "2 x L x kv_heads x d x batch x max_cache_len x bytes",
                           "2 x L x kv_heads x d x batch x tokens x bytes")),
                 fmt("{0}; {1}{2}{3}", when(STATIC_CACHE, STATIC, DYNAMIC), CACHE_CHOICE,
                     when(sym("sliding_layers"), "; " + SLIDING, ""), when(LATENT, "; " + LATENT_CACHE, "")),
                 when(STATIC_CACHE, fmt("{0} tokens allocated (static)", sym("static_len")),
                      fmt("{0} tokens (dynamic)", when(PREFILL, S, sym("final_tokens")))),
                 when(sym("sliding_layers"), when(
                     STATIC_CACHE,
                     fmt("sliding window: {0} of {1} layers allocate {2} slots", sym("sliding_layers"),
                         sym("stage_layers"), sym("sliding_static_len")),
                     when(PREFILL, fmt("sliding window: {0} of {1} layers still hold the whole prompt after the "
                                       "prefill", sym("sliding_layers"), sym("stage_layers")),
                          fmt("sliding window: {0} of {1} layers keep {2} tokens", sym("sliding_layers"),
                              sym("stage_layers"), sym("sliding_final")))), "")),
        PartRule("kv_cache/concat_copy", sym("concat_copy"),
                 when(sym("sliding_concat") > sym("full_concat"), "K and V of one sliding layer at tokens - 1",
                      "K of one layer at tokens - 1"),
                 when(sym("sliding_concat") > sym("full_concat"), SLIDING, DYNAMIC),
                 when(sym("sliding_concat") > sym("full_concat"), "one sliding layer's old keys and values",
                      "one layer's old keys"), "alive while torch.cat makes the longer copy",
                 when=both(sym("concat_copy") > 0, negate(PREFILL), negate(sym("expansion_wins")))),
        PartRule("kv_cache/roll_copy", sym("roll_copy"), "K and V of one sliding layer's window", ROLL,
                 "one window rolled", "alive until copied back into the static slots",
                 when=both(sym("roll_copy") > 0, negate(PREFILL), negate(sym("expansion_wins")))),
        PartRule("activations/latent_expansion", when(PREFILL, sym("prefill_expansion"), sym("decode_expansion")),
                 "batch x keys x heads x (2 d_nope + d_rope + d_v) x bytes", EXPAND,
                 "one layer's cache expanded to every head's keys and values",
                 when=both(LATENT, either(both(PREFILL, negate(sym("logits_win")), sym("attention_wins")),
                                          both(negate(PREFILL), sym("expansion_wins"))))),
        PartRule("activations/layer_temporaries", sym("residual"), "2 x batch x prompt x h x bytes", SDPA,
                 "the residual stream and its normed copy", when=both(PREFILL, negate(sym("logits_win")))),
        PartRule("activations/attention_scores", sym("attention_core"), "batch x heads x prompt x keys x bytes", EAGER,
                 fmt("{0} B a score", sym("score_bytes")),
                 when=both(PREFILL, negate(sym("logits_win")), sym("attention_wins"), EAGER_ATTN)),
        PartRule("activations/attention", sym("attention_core"),
                 when(LATENT, "batch x prompt x heads x (2 d + d_v) x bytes",
                      "batch x prompt x (2 heads + 2 kv_heads) x d x bytes"),
                 SDPA, when(LATENT, "q, the query with its rotary part, and the output", "q, k, v and the output"),
                 "estimate: the kernel's own workspace left out",
                 when=both(PREFILL, negate(sym("logits_win")), sym("attention_wins"), negate(EAGER_ATTN))),
        PartRule("activations/mlp", sym("mlp_work"), "3 x batch x prompt x ffn x bytes", MLP,
                 "act(gate), up and their product",
                 when=both(PREFILL, negate(sym("logits_win")), negate(sym("attention_wins")))),
        PartRule("activations/final_hidden", sym("final_hidden"), "batch x prompt x h x bytes", LOGITS,
                 "the last layer's output", when=both(PREFILL, sym("logits_win"))),
        PartRule("activations/logits", when(PREFILL, sym("prefill_logits"), B * sym("vocab") * ACT),
                 "batch x rows x V x bytes", LOGITS,
                 fmt("{0} rows", when(PREFILL, sym("logits_rows"), 1)),
                 when=either(negate(PREFILL), sym("logits_win"))),
        PartRule("activations/logits_fp32", sym("logits_fp32"), "batch x V x 4", LOGITS, "the last row in fp32",
                 when=either(negate(PREFILL), sym("logits_win"))),
        PartRule("overhead/cuda_context", sym("cuda_context_bytes"), "given", "given with --cuda-context (assumed)", "fixed",
                 when=sym("cuda_context_bytes")),
    ),
)


def lines(values: dict[str, Any]) -> list[str]:
    """Both moments, the higher one marked (not transformers output: generate prints nothing about memory)."""
    prefill, decode = float(values["prefill_peak"]) / GIB, float(values["decode_peak"]) / GIB
    mark = ("  <- peak", "") if values["prefill_is_peak"] else ("", "  <- peak")
    out = [f"prefill ({values['batch']} x {values['context']:,} prompt tokens, {values['attn_implementation']}): "
           f"{prefill:.2f} GiB{mark[0]}"]
    if values["decode_steps"]:
        static = values["cache_implementation"] == "static"
        window = ""
        if values["sliding_layers"]:
            kept = int(values["sliding_static_len"] if static else values["sliding_final"])
            window = f", {int(values['sliding_layers'])} sliding-window layers of {kept:,}"
        out.append(f"last decode step ({values['cache_implementation']} cache of "
                   f"{int(values['static_len'] if static else values['final_tokens']):,} tokens{window}): "
                   f"{decode:.2f} GiB{mark[1]}")
    total = float(values["gpu_total"]) / GIB
    out.append(f"fits: the peak is {max(prefill, decode):.2f} GiB of {total:.2f} GiB" if values["fits"] else
               f"does not fit: {values['error']}")
    return out


def refused_by(values: dict[str, Any]) -> tuple[str, ...]:
    """The options a refusal names: a sequence past the learned positions is --max-new-tokens' (with the prompt's
    --context, which also moves it); running out of memory happens mid-call, not at start-up, so it names none."""
    return ("max_new_tokens", "context") if values["too_long"] else ()


def summary(values: dict[str, Any]) -> dict[str, Any]:
    """generate's numbers as --json gives them."""
    static = values["cache_implementation"] == "static"
    return {"cache_implementation": values["cache_implementation"],
            "attn_implementation": values["attn_implementation"], "batch": values["batch"],
            "prompt_tokens": values["context"], "max_new_tokens": values["max_new_tokens"],
            "logits_to_keep": values["logits_to_keep"],
            "cache_tokens": int(values["static_len"] if static else values["final_tokens"]),
            "kv_cache_bytes": int(values["cache_decode"]), "prefill_peak_bytes": int(values["prefill_peak"]),
            "decode_peak_bytes": int(values["decode_peak"]), "peak_bytes": int(values["peak"]),
            "peak_moment": values["moment"]}


def checked(settings: Any, config: Any) -> None:
    """ValueError naming the option for a run the rules do not honour (or transformers would refuse)."""
    if config.model is not None and config.model.checkpoint_quantization == "mxfp4":
        # transformers 5.23 quantizers/quantizer_mxfp4.py Mxfp4HfQuantizer.validate_environment keeps the experts in
        # MXFP4 only with Triton and the `kernels` package installed on a GPU of compute capability 7.5 or more, and
        # dequantises them to bf16 otherwise: the weights depend on the installation, and gpt-oss's generate (its
        # attention sinks, its sliding-window cache) is not modelled.
        raise ValueError(f"engine: {config.model.name}'s MXFP4 checkpoint under generate is not modelled "
                         "(transformers keeps MXFP4 experts or dequantises them to bf16 depending on the kernels "
                         "installed); serve it with --engine vllm or sglang")
    for name, words in CHOICES.items():
        value = getattr(settings, name)
        if value is not None and value not in words:
            raise ValueError(f"{name}: {value!r} is not one of {', '.join(words)}")
    for name in ("max_new_tokens", "max_cache_len"):
        value = getattr(settings, name)
        if value is not None and value < 1:
            raise ValueError(f"{name}: must be at least 1, got {value}")  # configuration_utils.py validate
    if settings.logits_to_keep is not None and settings.logits_to_keep < 0:
        raise ValueError(f"logits_to_keep: must be 0 (every row) or more, got {settings.logits_to_keep}")
    if settings.max_cache_len is not None and settings.cache_implementation != "static":
        # transformers warns and ignores it (configuration_utils.py GenerationConfig.validate).
        raise ValueError("max_cache_len: sizes a static cache only; add --cache-implementation static")
    implementation = settings.attn_implementation
    if implementation is not None and config.attention != "sdpa" and ATTENTION_OF[implementation] != config.attention:
        raise ValueError(f"attn_implementation: {implementation} disagrees with --attention {config.attention}; "
                         "give one of them")
    if implementation == "sdpa" and config.model.family in NO_SDPA:
        raise ValueError(f"attn_implementation: transformers' {config.model.family} models do not take sdpa "
                         "(Gemma 2's softcapping); leave it out for eager, or give flash_attention_2")
    if new_tokens(settings, config) < 1:
        # utils.py _validate_generated_length: "Input length of input_ids is 1024, but `max_length` is set to 1024."
        raise ValueError(f"context: a prompt of {config.context} tokens fills {config.model.name}'s "
                         f"{config.model.learned_positions} learned positions, where generate's default max_length "
                         "stops, so generate refuses it (\"Input length of input_ids is ..., but `max_length` is set "
                         "to ...\"); give a shorter prompt or --max-new-tokens")
    if config.tp > 1 or config.pp > 1:
        raise ValueError(f"{'tp' if config.tp > 1 else 'pp'}: --engine hf is modelled on one GPU (generate without "
                         "a device_map split or a tensor-parallel plan)")
    if config.kv_dtype:
        raise ValueError("kv_dtype: generate's cache is in the model's dtype under --engine hf (a quantized cache "
                         "is not modelled)")
