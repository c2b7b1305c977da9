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
  Megatron precisions (megatron-*, te-*) count their fp32 or fp16 `gradients` as this buffer.
- PyTorch DistributedDataParallel (DDP_BUCKETS): the reducer allocates a flat `gradients` tensor per bucket, covering
  every gradient, at construction; with the default `gradient_as_bucket_view=False` each `param.grad` is a separate
  tensor copied into and back out of its bucket, so at the end of backward two gradient-sized copies are live and
  zero_grad frees only the `.grad` copy; with `gradient_as_bucket_view=True` each `.grad` is a view of its bucket
  (one copy, never freed).
- DeepSpeed's BF16_Optimizer (bf16 with data_types.grad_accum_dtype fp32, ZeRO stage 0 or 1), BF16_OPTIMIZER:
  `fp32_groups_gradients_flat` is allocated in its constructor (`_setup_for_real_optimizer`) and kept; the bf16
  `.grad` of each parameter is added into it after backward and cleared. The model's `gradients/accumulation_buffer`
  is this buffer (and, with a Megatron precision, Megatron's main_grad): live at every moment.

When the model calls a run DDP (DDP): training with data parallelism (dp > 1), no sharding (ZeRO stage 0, no FSDP),
not Megatron-LM (its own DDP, above: a Megatron precision or implementation megatron), DeepSpeed's grad_accum_dtype
not set and not MS-AMP (its own DDP).
The model cannot tell DeepSpeed's ZeRO stage 0 from DDP otherwise, and assumes DDP. DeepSpeed's stage 0 engine
reduces through temporary flattened buffers instead of persistent buckets (not modelled).
"""

from __future__ import annotations

from builder.model.cite import Cite
from builder.model.expr import both, either, eq, negate, sym

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
BF16_OPTIMIZER = (Cite("deepspeed-edaa722", "deepspeed/runtime/bf16_optimizer.py BF16_Optimizer."
                       "_setup_for_real_optimizer")
                  + ": fp32_groups_gradients_flat = torch.zeros_like(bf16_groups_flat, dtype=torch.float32), "
                  "allocated once and kept")
KEPT_NOTE = "allocated once when the model is wrapped and kept through every moment of the step"

# The run's framework as the model knows it (inputs from builder.model.inputs): Megatron-LM (and its grad buffer) with
# its precisions (PrecisionPolicy.grad_buffer) or its op list (implementation megatron, which names Megatron-LM for a
# precision both share, such as fp32); DeepSpeed's data_types.grad_accum_dtype names DeepSpeed.
MEGATRON = either(sym("grad_buffer"), eq(sym("implementation"), "megatron"))
DEEPSPEED_OPTION = sym("grad_accum_dtype")
DDP = both(eq(sym("mode"), "train"), sym("dp") > 1, eq(sym("shard_stage"), 0), negate(sym("fsdp")),
           negate(MEGATRON), negate(DEEPSPEED_OPTION), negate(sym("msamp")))
SYMBOLS = {
    "ddp": DDP,
    # The `gradients` part itself is storage kept for the run: Megatron's main_grad buffer, or DDP's buckets that the
    # gradients are views of.
    "grads_kept": both(eq(sym("mode"), "train"), negate(sym("in_backward")),
                       either(MEGATRON, both(sym("ddp"), sym("gradient_as_bucket_view")))),
}
# Parts that are gradient storage kept for the run whatever the framework (builder.model.step's 'kept' selector).
KEPT_PARTS = ("gradients/accumulation_buffer", "comm/ddp_buckets")
