"""Serving memory as rules: the KV cache and the working set of a forward pass.

Evaluated by the estimator for `mode = serve` and, from the same rules, by the calculator's script.
"""

from __future__ import annotations

from builder.model.expr import fmt, maximum, minimum, per_unit, sym, when
from builder.model.partrules import PartRule, RuleSet, bytes_of

KV = "Kwon et al. 2023 (vLLM), arXiv:2309.06180, section 3: 2 x layers x kv_heads x head_dim x tokens x bytes"
WORKING = "vLLM chunked prefill (max_num_batched_tokens 8192); transformers logits_to_keep"
PREFILL_CHUNK = 8192  # tokens per prefill step: vLLM's max_num_batched_tokens default with chunked prefill


# The KV cache per token of this stage, shared with the engines' accounting (builder.model.engines).
KV_SYMBOLS = {
    # Sub-byte weights keep a 16-bit KV cache; otherwise the cache is in the weights' dtype ("auto").
    "kv_cache_dtype": when(sym("kv_dtype"), sym("kv_dtype"),
                           when(bytes_of(sym("param_dtype")) < 2, "bf16", sym("param_dtype"))),
    # Tensor parallelism splits KV heads; a rank keeps at least one (replicated when tp > kv_heads).
    "kv_heads_per_gpu": maximum(1, sym("kv_heads") // sym("tp")),
    "kv_per_token": 2 * sym("stage_layers") * sym("kv_heads_per_gpu") * sym("head_dim")
    * bytes_of(sym("kv_cache_dtype")),
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
        PartRule("kv_cache", sym("kv_per_token") * sym("batch") * sym("kv_tokens"),
                 "2 x L x kv_heads x d x batch x tokens x bytes", KV,
                 fmt("{0} B/token ({1})", per_unit(sym("kv_per_token")), sym("kv_cache_dtype")),
                 when(sym("sliding_window"), fmt("sliding window: keeps the last {0} tokens", sym("sliding_window")),
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
