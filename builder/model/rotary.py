"""The rotary cos/sin table a serving engine keeps beside the weights.

vLLM and SGLang precompute cos and sin for every position the model allows when they build the model, and keep
the table on the GPU as a buffer (it is in vLLM's "Model loading took" and SGLang's weight load):

- rows: the model's positions (max_position_embeddings; original_max_position_embeddings x factor under YaRN:
  builder.model.architecture.rope_positions_of), columns: the rotary dimension (cos and sin halves), the head
  width or, under multi-head latent attention, the decoupled rotary key's qk_rope_head_dim;
- one table per distinct rotary setting: get_rope hands every layer with the same setting one shared module
  (_ROPE_DICT), so one for most models and two for Gemma 3 (local and global bases);
- not sharded: every tensor-parallel rank holds the whole table;
- vLLM keeps it in the model's dtype (cache.to(dtype)); SGLang keeps it in fp32 on CUDA ("cache needs to be in
  FP32 for numerical stability"), and on ROCm from 0.5.22 ("Keep fp32 on HIP, matching CUDA behavior"); 0.5.18 to
  0.5.21 cast it to the model's dtype on ROCm, unless SGLANG_ROPE_CACHE_FP32 is set (SGLang PR #29729).

Training does not hold one: transformers computes cos and sin for the positions of each forward
(LlamaRotaryEmbedding keeps only inv_freq).
"""

from __future__ import annotations

from typing import Any

from builder.model.cite import Cite
from builder.model.expr import fmt, sym, when
from builder.model.partrules import PartRule

ROTARY_DIM = when(sym("kv_lora_rank") > 0, sym("qk_rope_head_dim"), sym("head_dim"))
FORMULA = "tables x positions x rotary dim x bytes"
VLLM_SOURCE = (Cite("vllm-6adad08", "vllm/model_executor/layers/rotary_embedding/base.py RotaryEmbeddingBase.__init__ "
                                    "and __init__.py get_rope")
               + ": a cos/sin buffer of max_position_embeddings x rotary_dim in the model's dtype, one per rotary "
               "setting (_ROPE_DICT), whole on every rank")
SGLANG_SOURCE = (Cite("sglang-0.5.23", "python/sglang/srt/layers/rotary_embedding/base.py RotaryEmbedding.__init__ "
                                       "and factory.py get_rope")
                 + ": the same table, kept in fp32 on CUDA, and on ROCm from 0.5.22 (the model's dtype on ROCm in "
                 + Cite("sglang-d315eb7", "0.5.18") + " to 0.5.21)")


def table_bytes(element_bytes: Any) -> Any:
    """The tables' bytes at `element_bytes` a value (a rule)."""
    return sym("rope_tables") * sym("rope_positions") * ROTARY_DIM * element_bytes


def table_part(source: str) -> PartRule:
    """The table as an engine's part (symbol rotary_table), where the model has one."""
    return PartRule("weights/rotary_table", sym("rotary_table"), FORMULA, source,
                    fmt("{0}{1} positions x {2}", when(sym("rope_tables") > 1, fmt("{0} tables of ", sym("rope_tables")),
                                                        ""), sym("rope_positions"), ROTARY_DIM),
                    when=sym("rotary_table"))
