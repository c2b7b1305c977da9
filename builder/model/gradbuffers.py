"""Who owns gradient memory, and when, by framework: the gradient storage a framework allocates once, when it wraps
the model, and keeps through every moment of every step.

The step builder.model.step assumes by default is plain PyTorch on one GPU with `zero_grad(set_to_none=True)`:
gradients are made during backward and freed by zero_grad, so they are live before backward only when gradient
accumulation keeps them. Three frameworks keep gradient storage for the whole run instead:

- Megatron-LM's DistributedDataParallel (GRAD_BUFFER): `_ParamAndGradBuffer` allocates one contiguous `grad_data`
  buffer for every parameter's `main_grad` (fp32 with --accumulate-allreduce-grads-in-fp32, which Megatron's bf16
  runs set) at model wrap (a Megatron precision, or implementation megatron), and zeroes it between steps (`zero_grad_buffer`) without freeing it. With
  --use-distributed-optimizer only `param_data` (the gathered parameters) and the optimizer's shards change: the
  grad buffer stays whole on every rank (its reduce-scatter writes into the rank's own slice of it). The model's
  Megatron precisions (megatron-*, te-*) count their fp32 or fp16 `gradients` as this buffer; under implementation
  megatron a 16-bit policy's gradients (bf16-mixed: Megatron's --bf16 --grad-reduce-in-bf16) are this buffer too.
  Megatron's optimizer (MASTER_GRADS) steps its fp32 main parameters on an fp32 copy of the buffer, `.float()`,
  which is a copy only where the buffer is not fp32 (--fp16, or --bf16 with --grad-reduce-in-bf16): the whole
  model's without the distributed optimizer, the rank's shard with it. The copy is made at the optimizer step and
  freed by `optimizer.zero_grad()` at the start of the next step (builder.model.step counts it from the step on).
- PyTorch DistributedDataParallel (DDP_BUCKETS): the reducer allocates a flat `gradients` tensor per bucket, covering
  every gradient, at construction; with the default `gradient_as_bucket_view=False` each `param.grad` is a separate
  tensor copied into and back out of its bucket, so at the end of backward two gradient-sized copies are live and
  zero_grad frees only the `.grad` copy; with `gradient_as_bucket_view=True` each `.grad` is a view of its bucket
  (one copy, never freed).
- DeepSpeed's BF16_Optimizer (bf16 with data_types.grad_accum_dtype fp32, ZeRO stage 0 or 1), BF16_OPTIMIZER:
  `fp32_groups_gradients_flat` is allocated in its constructor (`_setup_for_real_optimizer`) and kept; the bf16
  `.grad` of each parameter is added into it after backward and cleared. The model's `gradients/accumulation_buffer`
  is this buffer (and, with a Megatron precision, Megatron's main_grad): live at every moment.
- DeepSpeed's ZeRO-3 (builder.model.states' DEEPSPEED_ZERO3_GRADS): `_setup_for_real_optimizer` allocates the
  rank's gradient partitions as one flat buffer, `grad_partitions_flat_buffer = torch.zeros(sum of every
  parameter's partition_numel(), dtype=gradient_accumulation_dtype, device=self.device)`, when the optimizer is
  built, and never frees it (each reduce-scatter writes into its narrow view of it): the model's `gradients` part
  (the rank's shard) is live at every moment, in the forward too. `self.device` is the CPU when the optimizer is
  offloaded, and then the GPU holds none.

When the model calls a run DDP (DDP): training with data parallelism (dp > 1), no sharding (ZeRO stage 0, no FSDP),
not Megatron-LM (its own DDP, above: a Megatron precision or implementation megatron), DeepSpeed's grad_accum_dtype
not set and not MS-AMP (its own DDP).
The model cannot tell DeepSpeed's ZeRO stage 0 from DDP otherwise, and assumes DDP. DeepSpeed's stage 0 engine
reduces through temporary flattened buffers instead of persistent buckets (not modelled).
"""

from __future__ import annotations

from builder.model.cite import Cite
from builder.model.expr import both, either, eq, ne, negate, sym

GRAD_BUFFER = (Cite("megatron-grad-buffer", "megatron/core/distributed/param_and_grad_buffer.py _ParamAndGradBuffer"
                    ".__init__")
               + ": self.grad_data = torch.zeros(self.numel, dtype=self.grad_dtype), every parameter's main_grad, "
               "allocated at model wrap whether or not use_distributed_optimizer, which only adds param_data; "
               + Cite("megatron-grad-buffer", "distributed_data_parallel.py zero_grad_buffer")
               + ": zeroes the buffer, keeps it")
DDP_BUCKETS = (Cite("pytorch-ddp-reducer", "torch/csrc/distributed/c10d/reducer.cpp Reducer::initialize_buckets")
               + ": bucket.gradients = at::empty(...) at construction, a view of it per parameter; "
               + Cite("pytorch-ddp-reducer", "reducer.cpp mark_variable_ready_dense")
               + ": grad copied into its bucket view, or grad = bucket_view with gradient_as_bucket_view; "
               + Cite("pytorch-ddp-reducer", "torch/nn/parallel/distributed.py DistributedDataParallel")
               + ": gradient_as_bucket_view=False by default")
# Megatron-LM (commit d98e8a6): --grad-reduce-in-bf16 turns accumulate_allreduce_grads_in_fp32 off for --bf16
# (megatron/training/arguments.py), which DistributedDataParallelConfig.grad_reduce_in_fp32 takes (training.py), and
# group_params_for_buffers (param_and_grad_buffer.py) gives the buffer grad_dtype = torch.float if grad_reduce_in_fp32
# else param.dtype. Float16OptimizerWithFloat16Params._copy_model_grads_to_main_grads (optimizer.py) sets
# main_param.grad = model_param.main_grad.float() for every parameter and DistributedOptimizer's
# (distrib_optimizer.py) shard_main_param.grad = shard_model_grad.float() for its shard; Tensor.float() of an fp32
# tensor is the tensor itself, so an fp32 buffer is copied nowhere. Both run in prepare_grads at the start of
# optimizer.step(); zero_grad(set_to_none=True), called at the start of train_step (training.py), drops them.
# Measured on CPU: those two functions, taken from commit d98e8a6 as they are, run over a bf16 buffer of 8,389,632
# elements, made 4 B x N of new fp32 storage (whole) and 4 B x N / 8 on each of 8 ranks, and none over an fp32
# buffer (tests/test_distributed_optimizer.py repeats their copies on torch tensors).
MASTER_GRADS = (Cite("megatron-d98e8a6", "megatron/core/optimizer/optimizer.py Float16OptimizerWithFloat16Params."
                     "_copy_model_grads_to_main_grads")
                + " (main_param.grad = model_param.main_grad.float(), every parameter) and "
                + Cite("megatron-d98e8a6", "distrib_optimizer.py _copy_model_grads_to_main_grads")
                + " (shard_main_param.grad = shard_model_grad.float(), the rank's shard): a copy where main_grad is "
                "not fp32 (--fp16, or --bf16 with --grad-reduce-in-bf16: "
                + Cite("megatron-d98e8a6", "megatron/training/arguments.py") + ", "
                + Cite("megatron-d98e8a6", "param_and_grad_buffer.py group_params_for_buffers")
                + "), dropped by optimizer.zero_grad() at the start of the next train_step; "
                + Cite("megatron-dist-optimizer", "docs/user-guide/features/dist_optimizer.md")
                + ": fp16 parameters and gradients, 20 bytes/param, 4 + 16/d distributed")
BF16_OPTIMIZER = (Cite("deepspeed-edaa722", "deepspeed/runtime/bf16_optimizer.py BF16_Optimizer."
                       "_setup_for_real_optimizer")
                  + ": fp32_groups_gradients_flat = torch.zeros_like(bf16_groups_flat, dtype=torch.float32), "
                  "allocated once and kept")
KEPT_NOTE = "allocated once when the model is wrapped and kept through every moment of the step"

# The run's framework as the model knows it (inputs from builder.model.inputs): Megatron-LM (and its grad buffer) with
# its precisions (PrecisionPolicy.grad_buffer) or its op list (implementation megatron, which names Megatron-LM for a
# precision both share, such as fp32); DeepSpeed's data_types.grad_accum_dtype names DeepSpeed. A Megatron precision
# exists only in Megatron-LM (its --bf16 or --fp16 with the main_grad buffer, the Transformer Engine recipes through
# it), so its run is Megatron-LM's whatever the op list: its ZeRO stage 1 is Megatron's distributed optimizer, not
# DeepSpeed's ZeRO-1 (builder.model.buckets' DEEPSPEED_ENGINE), and ZeRO stages 2 and 3 without FSDP are refused
# (builder.model.checks).
MEGATRON = either(sym("grad_buffer"), eq(sym("implementation"), "megatron"))
# DeepSpeed's ZeRO optimizer: a ZeRO stage with no FSDP strategy, in a run that is not Megatron-LM's (a Megatron
# precision or implementation megatron: Megatron's distributed optimizer).
DEEPSPEED_ENGINE = both(sym("shard_stage") >= 1, negate(sym("fsdp")), negate(MEGATRON))
DEEPSPEED_OPTION = sym("grad_accum_dtype")
DDP = both(eq(sym("mode"), "train"), sym("dp") > 1, eq(sym("shard_stage"), 0), negate(sym("fsdp")),
           negate(MEGATRON), negate(DEEPSPEED_OPTION), negate(sym("msamp")))
SYMBOLS = {
    "ddp": DDP,
    # Megatron-LM's optimizer steps an fp32 copy of a 16-bit grad buffer (MASTER_GRADS): a run of Megatron's own DDP
    # (not FSDP, whose sharded fp32 parameter is the master) with fp32 main parameters and gradients that are not.
    "master_grads": both(eq(sym("mode"), "train"), MEGATRON, negate(sym("fsdp")), eq(sym("master_dtype"), "fp32"),
                         ne(sym("grad_dtype"), "fp32")),
    # The `gradients` part itself is storage kept for the run: Megatron's main_grad buffer, DDP's buckets that the
    # gradients are views of, or DeepSpeed ZeRO-3's flat gradient partitions (states.DEEPSPEED_ZERO3_GRADS; on the GPU
    # only where the optimizer is not offloaded, and then the GPU has no gradients part to keep).
    "grads_kept": both(eq(sym("mode"), "train"), negate(sym("in_backward")),
                       either(MEGATRON, both(sym("ddp"), sym("gradient_as_bucket_view")),
                              both(eq(sym("shard_stage"), 3), DEEPSPEED_ENGINE))),
}
# Parts that are gradient storage kept for the run whatever the framework (builder.model.step's 'kept' selector).
KEPT_PARTS = ("gradients/accumulation_buffer", "comm/ddp_buckets")
