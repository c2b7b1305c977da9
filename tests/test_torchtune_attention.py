"""torchtune's attention keeps K and V at every query head's size (implementation 'torchtune').

torchtune/modules/attention.py, MultiHeadAttention.forward, lines 284-290 (v0.6.1, commit a6290a5; the same at commit
1814feb of November 2024): "if self.num_heads != self.num_kv_heads: expand_shape = (b, self.num_kv_heads, q_per_kv,
-1, self.head_dim); k = k.unsqueeze(2).expand(expand_shape).flatten(1, 2)" and the same for v, before the attention
call, which saves the K and V it is given. Against transformers' fused attention, which saves K and V at the KV
heads (integrations/sdpa_attention.py: repeat_kv only when use_gqa_in_sdpa is false), each layer keeps
2 x (query heads - KV heads) x tokens x head dim more elements.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from builder.catalog import default_models
from builder.model import Config, estimate

MODELS = default_models()


def _attention(config: Config) -> int:
    return estimate(config).get("activations/attention")


@pytest.mark.parametrize("compile_layers", [False, True])
def test_torchtune_keeps_k_and_v_at_every_query_heads_size(compile_layers):
    model = MODELS["llama-3.2-3b"]  # config.json: 24 query heads, 8 KV heads of 128, 28 layers
    assert (model.heads, model.kv_heads, model.head_dim, model.layers) == (24, 8, 128, 28)
    hf = Config(model=model, precision="bf16", micro_batch=2, seq_len=4096, attention="flash", compile=compile_layers)
    extra = _attention(replace(hf, implementation="torchtune")) - _attention(hf)
    assert extra == model.layers * 2 * (24 - 8) * 2 * 4096 * 128 * 2  # bf16: 2 bytes an element


def test_nothing_changes_without_grouped_query_attention_or_in_eager_attention():
    """With as many KV heads as query heads torchtune copies nothing; transformers' eager attention copies too
    (repeat_kv in eager_attention_forward), so there the two lists agree."""
    mha = Config(model=MODELS["llama-2-7b"], precision="bf16", micro_batch=1, seq_len=2048, attention="flash")
    assert MODELS["llama-2-7b"].kv_heads == MODELS["llama-2-7b"].heads
    assert _attention(replace(mha, implementation="torchtune")) == _attention(mha)
    eager = Config(model=MODELS["llama-3.2-3b"], precision="bf16", micro_batch=1, seq_len=1024, attention="eager")
    assert estimate(replace(eager, implementation="torchtune")).total == estimate(eager).total


def test_the_implementation_is_a_checked_option():
    from builder.model.config import IMPLEMENTATIONS, validate_config
    assert "torchtune" in IMPLEMENTATIONS
    with pytest.raises(ValueError, match="implementation"):
        validate_config(Config(model=MODELS["llama-3.2-3b"], implementation="torchtitan"))
