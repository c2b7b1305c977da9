"""Paged optimizers (bitsandbytes' PagedAdamW and PagedAdamW8bit) as rules: which of their states can leave the GPU.

What bitsandbytes 0.50.2.dev0 (commit 95f9af3) does:
- bitsandbytes/optim/optimizer.py Optimizer8bit.get_state_buffer: with is_paged, a state of a parameter of at least
  1e5 elements is made by functional.py get_paged, which takes CUDA unified memory (csrc/pythonInterface.cpp
  cget_managed_ptr: cudaMallocManaged(..., cudaMemAttachHost)); a smaller parameter's state is a plain GPU tensor
  (torch.zeros_like). The 8-bit states' absmax per 256-element block (Optimizer2State.init_state) is a plain GPU
  tensor too: only the uint8 codes are paged.
- Optimizer8bit.step: one parameter at a time, prefetch_state(p) (cudaMemPrefetchAsync of its state1 and state2 to
  the GPU), update_step, sync_gpu(p); page_mng.prefetch_all() is commented out.
- Unified memory is the CUDA driver's, outside PyTorch's caching allocator: when the GPU runs short, the driver
  evicts its pages to host memory and brings them back when a kernel touches them (Dettmers et al. 2023, QLoRA,
  arXiv:2305.14314, section 3, "Paged Optimizers").

So the states stay in the sum of parts (the estimate), in full; the need counts of them only what must be on the GPU:
the plain ones (parameters under 1e5 elements, and the absmax), at every moment, and at the optimizer step the paged
states of one parameter, the largest, which the step prefetches and updates before the next. Stepped inside backward
(one optimizer per parameter, from its gradient hook: torchtune's optimizer_in_bwd with PagedAdamW8bit), each
parameter's paged states come in with its step, so backward's moments hold the largest one's. Simplification, named:
the driver keeps more pages on the GPU whenever there is room (the need is a floor, not what a profiler shows), the
time paging costs is not modelled, and the host memory that holds evicted states is not counted on the host.
"""

from __future__ import annotations

from fractions import Fraction

from builder.model.adapters import HEAD, HEAD_SHAPE, SHAPES
from builder.model.cite import Cite
from builder.model.expr import both, eq, has, isin, maximum, sym, total, when
from builder.model.placement import TP_SHARE

PAGED_OPTIMIZERS = ("paged-adamw", "paged-adamw8bit")
PAGE_MIN = 100_000  # bitsandbytes get_state_buffer: p.numel() < 1e5 stays a plain GPU tensor
PAGED = (Cite("bitsandbytes-95f9af3", "bitsandbytes/optim/optimizer.py Optimizer8bit.get_state_buffer")
         + " (states of parameters of 1e5 elements or more in CUDA unified memory, functional.py get_paged: "
         "cudaMallocManaged) and Optimizer8bit.step (prefetch_state and update_step one parameter at a time); "
         + Cite("dettmers2023", "section 3"))
PAGED_NOTE = ("paged: in CUDA unified memory, which the driver evicts to host memory when the GPU runs short; counted "
              "in full in the sum of parts, while the need counts only the states of parameters under 100,000 "
              "elements (and the 8-bit absmax) and, while a parameter is stepped (at the optimizer step, or inside "
              "backward with in-backward), that parameter's paged states")
PAGED_IN_NOTE = ("simplification: the step prefetches and updates one parameter's paged states at a time, so the "
                 "largest parameter's are counted; the driver may keep more of them on the GPU while there is room")
RESIDENT_NOTE = "its paged states can sit in host memory: only the plain GPU tensors among them are counted"
# The moments' parts whose bytes paging takes off the GPU, and the share of a part that is paged codes (the 8-bit
# state: 1 B codes and a 4 B absmax per 256, the absmax not paged).
PAGED_PARTS = ("optimizer/adam_m", "optimizer/adam_v")
CODE_BYTES = when(eq(sym("optimizer"), "paged-adamw8bit"), 1, 4)
CODE_SHARE = when(eq(sym("optimizer"), "paged-adamw8bit"), 1 / (1 + Fraction(4, 256)), 1)

# One parameter tensor on this GPU (as builder.model.optimizers counts it: split over the tensor-parallel ranks).
_ELEMENTS = sym("dim0") * sym("rest") / when(eq(sym("group"), "mlp/experts"), sym("tp"), TP_SHARE)
_COPIES = sym("count") * when(sym("in_block"), sym("layers"), 1)
_FULL_SHARE = (total(sym("parameter_tensors"), when(_ELEMENTS >= PAGE_MIN, _ELEMENTS * _COPIES, 0))
               / total(sym("parameter_tensors"), _ELEMENTS * _COPIES))


def _adapter(elements) -> object:
    """An adapter matrix's elements where they are paged, else 0."""
    return when(elements >= PAGE_MIN, elements, 0)


_TARGETED = [(has(sym("lora_targets"), t), sym("lora_rank") * d_in, sym("lora_rank") * d_out)
             for t, (d_in, d_out) in SHAPES.items()]
_BLOCK_PAGED = sum((when(on, _adapter(a) + _adapter(b), 0) for on, a, b in _TARGETED), start=Fraction(0))
_BLOCK_ALL = sum((when(on, a + b, 0) for on, a, b in _TARGETED), start=Fraction(0))
# The output layer's adapter (lora_targets lm_head), once on the stage with the head: lora_A r x hidden, lora_B
# vocab x r (paged from 100,000 elements: a vocabulary of 6,250 or more at r 16).
_HEAD_ON = both(has(sym("lora_targets"), HEAD), sym("stage_has_head"))
_HEAD_A, _HEAD_B = (sym("lora_rank") * size for size in HEAD_SHAPE)
_ADAPTER_SHARE = when(_HEAD_ON, (_BLOCK_PAGED * sym("stage_layers") + _adapter(_HEAD_A) + _adapter(_HEAD_B))
                      / (_BLOCK_ALL * sym("stage_layers") + _HEAD_A + _HEAD_B),
                      _BLOCK_PAGED / _BLOCK_ALL)
_LARGEST_ADAPTER = maximum(0, *(when(on, maximum(_adapter(a), _adapter(b)), 0) for on, a, b in _TARGETED))

PAGING = {
    "paged": isin(sym("optimizer"), *PAGED_OPTIMIZERS),
    # The share of the optimizer's elements in paged states (1 without an architecture: every tensor counted large).
    "paged_share": when(sym("paged"), when(sym("has_architecture"),
                                           when(sym("lora_rank"), _ADAPTER_SHARE, _FULL_SHARE), 1), 0),
    # At the optimizer step: the largest paged parameter's states (both moments), on this GPU; under LoRA the largest
    # adapter matrix of those targeted (split over the tensor-parallel ranks, as builder.model.states splits them).
    "largest_paged": when(both(sym("lora_rank"), sym("has_architecture")),
                          when(_HEAD_ON, maximum(_LARGEST_ADAPTER, _adapter(_HEAD_A), _adapter(_HEAD_B)),
                               _LARGEST_ADAPTER) / sym("tp"),
                          when(sym("largest_trainable") >= PAGE_MIN, sym("largest_trainable"), 0)),
    "paged_in": when(sym("paged"), sym("largest_paged") * 2 * CODE_BYTES / sym("optimizer_ranks"), 0),
}
