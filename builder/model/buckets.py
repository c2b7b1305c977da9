"""DeepSpeed ZeRO's gradient buckets as rules: the buffers its optimizer reduces gradients through.

Read from DeepSpeed (commit edaa722):
- deepspeed/runtime/zero/config.py:102-138 and :383-385 (DeepSpeedZeroConfig): contiguous_gradients True,
  reduce_bucket_size pp_int(5e8) elements, allgather_bucket_size pp_int(5e8), overlap_comm None, which the validator
  overlap_comm_valid makes True for stage 3 and False otherwise;
- deepspeed/runtime/zero/stage_1_and_2.py (stages 1 and 2): setup_buckets (:2493-2512), run at the first gradient of
  a backward (process_gradients, :1761), allocates with contiguous_gradients one buffer of reduce_bucket_size elements
  in the model's 16-bit dtype (self.dtype, "not dtype for autocast") and, with overlap_comm, a second one ("double
  buffers to avoid data access conflict"); _release_ipg_buffers (:828-835) frees them at the backward's epilogue.
  contiguous_gradients is forced on with an offloaded optimizer (:260). Without contiguous gradients each gradient
  stays its own tensor until its bucket is reduced, kept one bucket longer with overlap_comm (:1744).
  The updated parameters are all-gathered at the step (all_gather_dp_groups, deepspeed/runtime/utils.py:1016-1019)
  straight into the flat 16-bit groups by all_gather_into_tensor: allgather_bucket_size allocates nothing there;
- deepspeed/runtime/zero/stage3.py (stage 3): with contiguous_gradients one buffer of reduce_bucket_size elements in
  the communication dtype, allocated once at the optimizer's start (:731-735) and kept; __add_grad_to_ipg_bucket
  (:1543-1566) copies each gradient into it; __reduce_and_partition_ipg_grads (:1566-1610) reduces a full bucket
  through __avg_scatter_grads and deepspeed/runtime/comm/coalesced_collectives.py:158-205 reduce_scatter_coalesced,
  which torch.cat's the bucket's gradients, padded per rank, into a new flat tensor before the reduce-scatter.
  overlap_comm there puts the reduction on its own stream; it adds no buffer.

The model's ZeRO without an FSDP strategy is DeepSpeed's, unless the run is Megatron-LM's (a Megatron precision, whose
grad buffer only Megatron-LM keeps, or implementation megatron: builder.model.gradbuffers' MEGATRON): its ZeRO stage 1
is Megatron's distributed optimizer, which reduces into its grad buffer and has neither these buckets nor DeepSpeed's
flat fp32 copy of the gradients at the step (builder.model.checks refuses Megatron-LM with ZeRO stages 2 and 3).
"""

from __future__ import annotations

from builder.model.cite import Cite
from builder.model.expr import Expr, both, either, eq, isin, minimum, negate, sym, when
from builder.model.gradbuffers import DEEPSPEED_ENGINE, MEGATRON

COMMIT = "deepspeed-edaa722"  # DeepSpeed (commit edaa722), a key of content/references.toml
CONFIG_SOURCE = Cite(COMMIT, "deepspeed/runtime/zero/config.py:102-138, 383-385 DeepSpeedZeroConfig, overlap_comm_valid")
STAGE12_SOURCE = (Cite(COMMIT, "deepspeed/runtime/zero/stage_1_and_2.py:2493-2512 setup_buckets")
                  + ": buf_0 and, with overlap_comm, buf_1, torch.empty(reduce_bucket_size, dtype=self.dtype), freed by "
                  ":828-835 _release_ipg_buffers; "
                  + Cite(COMMIT, "deepspeed/runtime/utils.py:1016-1019 all_gather_dp_groups"))
STAGE12_FLAT_SOURCE = (Cite(COMMIT, "deepspeed/runtime/zero/stage_1_and_2.py:1691-1717 reduce_ipg_grads")
                       + ": without contiguous_gradients, buffered_reduce_fallback; :1876-1908 allreduce_and_copy "
                       "(overlap_comm: _clear_previous_reduced_grads first) and :1833-1841 allreduce_bucket: "
                       "tensor = self.flatten(bucket), the bucket's gradients copied flat, then copied back")
STAGE3_SOURCE = (Cite(COMMIT, "deepspeed/runtime/zero/stage3.py:731-735")
                 + ": bucket.buffer = torch.empty(self.reduce_bucket_size, dtype=dtype), allocated at the optimizer's "
                 "start")
REDUCE_SCATTER_SOURCE = (Cite(COMMIT, "deepspeed/runtime/zero/stage3.py:1566-1610 __reduce_and_partition_ipg_grads")
                         + "; " + Cite(COMMIT, "deepspeed/runtime/comm/coalesced_collectives.py:158-205 "
                                               "reduce_scatter_coalesced")
                         + ": torch.cat of the bucket's gradients, padded per rank")

# zero_optimization's keys and DeepSpeed's defaults (config.py). An option left unset reads -1
# (builder.model.ranges: `unset`), then the default; overlap_comm's default depends on the stage.
DEFAULTS = {"reduce_bucket_size": 5 * 10**8}
UNSET = -1
MEANINGS = {"reduce_bucket_size": "number of elements reduced/allreduced at a time",
            "overlap_comm": "attempts to overlap the reduction of the gradients with backward computation",
            "contiguous_gradients": "copies the gradients to a contiguous buffer as they are produced"}

# DeepSpeed's ZeRO optimizer (builder.model.gradbuffers' DEEPSPEED_ENGINE): its buckets are counted where the run has
# an architecture (a bare parameter count counts model states only).
DEEPSPEED_ZERO = both(eq(sym("mode"), "train"), DEEPSPEED_ENGINE, sym("has_architecture"))
_STAGE3 = eq(sym("shard_stage"), 3)
SYMBOLS: dict[str, Expr] = {
    "deepspeed_zero": DEEPSPEED_ZERO,
    "ds_reduce_bucket": when(eq(sym("reduce_bucket_size"), UNSET), DEFAULTS["reduce_bucket_size"],
                             sym("reduce_bucket_size")),
    "ds_overlap": when(eq(sym("overlap_comm"), UNSET), _STAGE3, sym("overlap_comm")),
    "ds_contiguous": either(sym("contiguous_gradients"),
                            both(negate(_STAGE3), isin(sym("offload"), "optimizer", "both"))),
    # A bucket's gradients, in elements: the whole bucket, or all the stage's trainable parameters when they are fewer
    # (only a parameter that requires a gradient gets a reduction hook: stage3.py create_reduce_and_remove_grad_hooks,
    # stage_1_and_2.py create_gradient_handling_hooks, DeepSpeed edaa722; under LoRA, the adapters).
    "ds_bucket_filled": minimum(sym("ds_reduce_bucket"),
                                when(sym("lora"), sym("adapters"), sym("dense") + sym("expert"))),
}
# ZeRO-1/2 in the backward: the buffers (each the whole reduce_bucket_size, however small the model), twice over with
# overlap_comm; or without contiguous gradients the gradients waiting in a bucket and the flat copy the reduction
# makes of them (STAGE12_FLAT_SOURCE; with overlap_comm the previous bucket's are cleared before it is made).
STAGE12_ELEMENTS = when(sym("ds_contiguous"), sym("ds_reduce_bucket") * when(sym("ds_overlap"), 2, 1),
                        sym("ds_bucket_filled") * 2)
# ZeRO-3: the buffer, held from the optimizer's start; in the backward, the reduce-scatter's flat copy of a bucket and,
# without contiguous gradients, the bucket's gradients as their own tensors.
STAGE3_HELD = when(sym("ds_contiguous"), sym("ds_reduce_bucket"), 0)
STAGE3_BACKWARD = sym("ds_bucket_filled") * when(sym("ds_contiguous"), 1, 2)
