"""What PyTorch's CUDA caching allocator adds to the weights a serving engine loads, and what the engine reports.

The engine builds every weight tensor on the GPU with torch.empty, one tensor a projection of a rank's shard
(vLLM and SGLang fuse q, k and v into one qkv_proj, gate and up into one gate_up_proj, an MoE layer's experts into
w13 and w2). PyTorch's allocator (c10/cuda/CUDACachingAllocator.cpp, read at commit 001074d) hands each one a block:

- the request is rounded up to 512 bytes (round_size, kMinBlockSize);
- one of 10 MiB or more gets a new segment of its size rounded up to 2 MiB (get_allocation_size: kRoundLarge);
  one between 1 and 10 MiB a 20 MiB segment it may share (kLargeBuffer), one of 1 MiB or less a 2 MiB one;
- the block is split off its segment only when more than 1 MiB would be left (should_split: remaining >
  kSmallSize); otherwise the block is the whole segment, and the allocated bytes count the block
  (alloc_found_block: allocated_bytes += block->size);
- torch.cuda.empty_cache() gives back only segments with nothing allocated in them.

So a tensor of 10 MiB or more costs its size rounded up to 2 MiB where that adds at most 1 MiB, in allocated bytes
(what vLLM's "Model loading took" reads: torch.cuda.max_memory_allocated just after resetting the peak,
vllm/platforms/cuda.py get_current_memory_usage), and its size rounded up to 2 MiB always in free memory (what
SGLang's "mem usage" reads: the free memory before minus after the load, each by cudaMemGetInfo after
empty_cache, get_available_gpu_memory). A tensor that is a whole number of 2 MiB costs nothing more: every one of
Llama 3.1 8B and of Qwen3 8B and 32B but their embeddings. Qwen2's widths (hidden 3,584; MLP 18,944, 13,824,
27,648 or 29,568) leave most of theirs short of a whole number of 2 MiB: 57 MiB for Qwen2.5 7B on one GPU in vLLM
(Qwen2-7B-Instruct, the same sizes, in vLLM 0.10.1.1: "Model loading took 14.2488 GiB", builder/validate/published.py).

Simplifications, named: tensors under 10 MiB (norms, biases, routers, learned positions, and at high
tensor-parallel sizes the attention's), which share segments, are counted at their size, and so are latent
attention's own projections (q, kv_a, kv_b: counted at their size whatever it is);
a tensor is counted as if it took a new segment, where the allocator may hand it a block freed earlier (the rotary
table's fp32 working tensors, freed when the table is made) and split what is left: DeepSeek-R1-Distill-Qwen-14B
at tensor parallel size 2 has 168 MiB counted and 164 MiB where the allocator's rules are replayed in the engine's
order of construction. The engine's own small buffers (vLLM's attention scale scalars, 512 bytes each) are left out.
"""

from __future__ import annotations

from typing import Any

from builder.model import rotary
from builder.model.cite import Cite
from builder.model.expr import both, ceil, either, maximum, negate, row, sym, table, total, when
from builder.model.partrules import PartRule, bytes_of
from builder.model.tensors import DENSE, DENSE_SHARE, MLA, MOE_SHARE, UP_MATRICES, VALUE_DIM
from builder.model.units import MiB as MIB

MIN_BLOCK = 512  # kMinBlockSize: every request is rounded up to it
SMALL = MIB  # kSmallSize: the largest small request, and the most a block keeps unsplit
MIN_LARGE = 10 * MIB  # kMinLargeAlloc: from here a request gets a segment of its own size
ROUND_LARGE = 2 * MIB  # kRoundLarge: such a segment's rounding
VOCAB_PADDING = 64  # vocab_parallel_embedding.py DEFAULT_VOCAB_PADDING_SIZE: the vocabulary padded to a multiple

ALLOCATOR = Cite("pytorch-caching-allocator", "c10/cuda/CUDACachingAllocator.cpp round_size, get_allocation_size, "
                                              "should_split and alloc_found_block")
VLLM_SOURCE = (ALLOCATOR + ": a tensor of 10 MiB or more gets a segment of its size rounded up to 2 MiB, and the "
               "whole segment where at most 1 MiB would be left; "
               + Cite("vllm-002db49", "vllm/platforms/cuda.py get_current_memory_usage")
               + ": vLLM counts allocated bytes")
SGLANG_SOURCE = (ALLOCATOR + ": a tensor of 10 MiB or more gets a segment of its size rounded up to 2 MiB; "
                 + Cite("sglang-0.5.23", "python/sglang/srt/utils/common.py get_available_gpu_memory")
                 + ": SGLang counts free memory after empty_cache, which keeps every segment in use whole")
FORMULA = "tensors of 10 MiB or more x their rounding to 2 MiB"
NOTE = ("simplification: tensors under 10 MiB share segments and are counted at their size; blocks the allocator "
        "reuses from freed temporaries are counted as new segments")

h, t = sym("hidden"), sym("tp")
LINEAR_BYTES = bytes_of(sym("param_dtype"))  # the linear weights' format as served (fp8 and int8 1 B, int4 1/2 B)
EMBEDDING_BYTES = maximum(LINEAR_BYTES, 2)  # embeddings and head stay 16-bit beside quantised linear weights
VOCAB_ROWS = ceil(sym("vocab") / VOCAB_PADDING) * VOCAB_PADDING / t
LAYERS = sym("stage_layers")
# One rank's weight tensors of at least a megabyte or so as the engines build them (vLLM models/llama.py, qwen2.py,
# mixtral.py, deepseek_v2.py; linear.py QKVParallelLinear, MergedColumnParallelLinear, RowParallelLinear;
# fused_moe/layer.py w13_weight and w2_weight): each row one tensor's bytes and how many the stage holds.
WEIGHT_TENSORS = table(
    row(sym("stage_has_embedding"), size=VOCAB_ROWS * h * EMBEDDING_BYTES, count=1),
    row(both(sym("stage_has_head"), either(negate(sym("tied_embeddings")), negate(sym("stage_has_embedding")))),
        size=VOCAB_ROWS * h * EMBEDDING_BYTES, count=1),
    # q, k and v fused, a rank's query heads and its KV heads (one at least: kv_heads_per_gpu).
    row(negate(MLA), size=(sym("heads") / t + 2 * sym("kv_heads_per_gpu")) * sym("head_dim") * h * LINEAR_BYTES,
        count=LAYERS),
    row(1, size=h * sym("heads") / t * VALUE_DIM * LINEAR_BYTES, count=LAYERS),
    row(either(DENSE, sym("first_dense_layers") > 0), size=UP_MATRICES * sym("ffn") / t * h * LINEAR_BYTES,
        count=DENSE_SHARE * LAYERS),
    row(either(DENSE, sym("first_dense_layers") > 0), size=h * sym("ffn") / t * LINEAR_BYTES,
        count=DENSE_SHARE * LAYERS),
    row(sym("experts"), size=sym("experts") * UP_MATRICES * sym("expert_ffn") * h * LINEAR_BYTES / (t * sym("ep")),
        count=MOE_SHARE * LAYERS),
    row(sym("experts"), size=sym("experts") * sym("expert_ffn") * h * LINEAR_BYTES / (t * sym("ep")),
        count=MOE_SHARE * LAYERS),
    row(sym("shared_experts"), size=UP_MATRICES * sym("shared_experts") * sym("expert_ffn") / t * h * LINEAR_BYTES,
        count=MOE_SHARE * LAYERS),
    row(sym("shared_experts"), size=h * sym("shared_experts") * sym("expert_ffn") / t * LINEAR_BYTES,
        count=MOE_SHARE * LAYERS),
)


def _segment_rounding(size: Any) -> Any:
    """What a tensor of `size` bytes (a rule) adds when it takes a segment of its own: its request rounded up to
    512 B, then to 2 MiB; nothing under 10 MiB."""
    request = ceil(size / MIN_BLOCK) * MIN_BLOCK
    return when(request >= MIN_LARGE, ceil(request / ROUND_LARGE) * ROUND_LARGE - request, 0)


def allocated_rounding(size: Any) -> Any:
    """The bytes a tensor of `size` adds to the allocated bytes: the rest of its segment where the block is not
    split (at most 1 MiB left), else nothing."""
    rest = _segment_rounding(size)
    return when(rest <= SMALL, rest, 0)


def loaded_symbols(rotary_bytes: Any, free_memory: bool) -> dict[str, Any]:
    """An engine's symbols for the weights as it reports them loaded: the rotary table at `rotary_bytes` a value
    (rotary_table), the allocator's rounding (allocator_rounding: the segments' whole size where the engine counts
    free memory, the unsplit blocks' where it counts allocated bytes) and their sum with the parameters
    (loaded_weights)."""
    rounding = _segment_rounding(sym("size")) if free_memory else allocated_rounding(sym("size"))
    return {"rotary_table": rotary.table_bytes(rotary_bytes),
            "weight_tensors": WEIGHT_TENSORS,
            "allocator_rounding": total(sym("weight_tensors"), sym("count") * rounding),
            "loaded_weights": sym("weights_bytes") + sym("rotary_table") + sym("allocator_rounding")}


def rounding_part(source: str, free_memory: bool) -> PartRule:
    """The rounding as an engine's part (symbol allocator_rounding), where there is any."""
    words = "segments in use, whole" if free_memory else "blocks left unsplit"
    return PartRule("weights/allocator_rounding", sym("allocator_rounding"), FORMULA, source, words, NOTE,
                    when=sym("allocator_rounding"))
