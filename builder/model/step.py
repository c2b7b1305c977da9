"""The peak of a training step as rules: what is live at each moment, and which moment is highest.

`estimate` sums every part (weights, gradients, optimizer states, all saved activations, the logits). No
moment of a real step holds exactly that: saved activations are freed during backward while gradients
appear, and some tensors live only for an instant (the fp32 upcast of the logits, the loss gradients, the
optimizer's temporaries). The rule set STEP works out, for one pipeline stage's GPU, the parts live at
each candidate moment (a table of rows: name, bytes), the reserved parts on top of each (builder.model.
overheads, of what is live then), and the highest moment (`peak_phase`, `step_need`). builder.model.peak
turns the same rows into the named, cited parts `--phases` prints; the calculator's script evaluates the
same rules, so the verdict the page shows is the command line's.

The training loop assumed is the usual one: `optimizer.zero_grad(set_to_none=True)`, a forward that keeps
only the loss (as transformers' Trainer does), `loss.backward()`, `optimizer.step()`. With gradient
accumulation the gradients stay allocated across micro-batches, so they are live in the forward too.

Inside a layer (oplists.MOMENTS, worked out by builder.model.activations' MOMENTS rules): the instants
when a layer's own forward or backward temporaries peak, in the last layer (all saved activations still
live, few gradients) and, for the backward, in the first layer (all gradients but that layer's unmade
ones and the embeddings', made last, few activations left); and an RMSNorm model's final norm, whose
backward runs between the output layer's and the last layer's. Simplifications, named: live memory moves
evenly from the last layer to the first (the layers are alike), so only those two ends are candidates; like
the end of backward, the first layer's moment leaves out the saved activations of other micro-batches a
pipeline stage still holds; a mixture-of-experts layer's expert gradients count every expert (expert
parallelism holds E / ep of them); under FSDP and DeepSpeed ZeRO (gradient shards made as each unit's
gradients are reduced) the first layer's moment counts every shard, the embeddings' and the layer's own
unmade ones included; the instants inside the projections' own backward (a matrix product making its
input's and weight's gradients) are not moments.
The optimizer's temporaries follow how its step runs (builder.model.optimizers: for-loop, foreach, fused, or
inside backward, where each gradient is freed as its parameter steps and no step phase follows); the loss's
follow how it is computed (the `loss` input: transformers' eager loss, torch.compile, torchtune's chunks or
Liger's fused linear cross-entropy).

A checkpoint saved after the step (the `checkpoint_save` option, builder.model.checkpoint) is one more moment:
the model states and gradients with the save's own temporaries, and no activations.

Inputs: a stage's rule inputs with the activation and moment symbols (builder.model.activations), and
`parts`, the GPU's parts as rows {name, bucket, bytes} (the bucket is the name's first path segment).
"""

from __future__ import annotations

from fractions import Fraction

from builder.model import dequant, float8, oplists
from builder.model.activations import (CHECKPOINTED, FP32_STREAM_AMP, LAYER_GROUPS, OP_SAC, SAC_AFTER_PRODUCT,
                                       SAC_LAYER, SAVED_DTYPE, per_token)
from builder.model.cite import Cite
from builder.model.float8 import CASTS as FLOAT8_CASTS, HEAD as FLOAT8_HEAD
from builder.model.expr import (Expr, at, best, both, by, ceil, concat, each, either, eq, floor, fmt, get, isin, maximum,
                                minimum, negate, ne, row, sym, table, top, total, when, within)
from builder.model.optimizers import (FOREACH_ADAFACTOR, FOREACH_ADAM, FOREACH_LION, IN_BACKWARD, LOOP_SOURCE,
                                      OPTIMIZER_STEP)
from builder.model.gradbuffers import KEPT_PARTS, SYMBOLS as GRAD_BUFFERS
from builder.model.overheads import OVERHEADS
from builder.model.paging import CODE_SHARE, PAGED, PAGED_IN_NOTE, PAGED_PARTS
from builder.model.partrules import PartRule, PerUnit, RuleSet, bytes_of
from builder.model.placement import HOLDING, SHARD_MODEL
from builder.model.states import FSDP2_EMBEDDING_GRADS, FSDP2_UNITS, SHARDING, TRAIN, WHOLE_STAGE
from builder.model.buckets import DEEPSPEED_ENGINE

LOSS = (Cite("transformers-loss", "src/transformers/loss/loss_utils.py ForCausalLMLoss") + " (logits.float(), "
        "transformers 5.23) and " + Cite("pytorch-2-13", "log_softmax / nll_loss backward")
        + "; measured: see the Validation page")
TIED = (Cite("pytorch-2-13", "autograd") + ": the embedding's dense gradient and its sum with the head's gradient of "
        "the shared matrix; measured: see the Validation page")
COMPILED_LOSS = (Cite("wijmans2024") + " (Cut Cross-Entropy) and its README's benchmark (Gemma 2 2B, 8,192 tokens, "
                 "256,000 vocabulary, PyTorch 2.4.1): torch.compile's loss 4,000 MB (the bf16 logits), gradient "
                 "12,000 MB (fp32 and bf16 gradients of the logits)")
CHUNKED_LOSS = (Cite("torchtune-0-6", "torchtune/modules/loss/ce_chunked_output_loss.py CEWithChunkedOutputLoss")
                + " (num_output_chunks=8): each chunk upcast and cross-entropied on its own")
# torchtune's compile=True compiles the chunked loss in place: training.compile_loss replaces
# CEWithChunkedOutputLoss.compute_cross_entropy (logits.float() then F.cross_entropy, one chunk) with its
# torch.compile'd version (torchtune/training/_compile.py compile_loss, recipes/full_finetune_single_device.py
# line 292, commit 1814feb; the same in 0.6's ce_chunked_output_loss.py). Measured on CPU (PyTorch 2.13, inductor;
# content/validation/peak.json, builder/validate/peak.py's ChunkedOutputLoss): each chunk's compiled graph saves its
# 16-bit logits (its input), its labels and two fp32 values per token (the row max and the log of the sum of
# exponentials; no fp32 copy of the logits), and its backward is one pass over the chunk (nll_loss's scatter
# decomposed into a where over an iota, the softmax recomputed from the saved logits, row max and log-sum) that writes
# the chunk's gradient in the logits' dtype directly: no fp32 gradient is made, only a per-token fp32 sum beside it.
# The gradient replaces the chunk's logits, which the same call frees, one chunk at a time.
CHUNKED_COMPILED_LOSS = (Cite("torchtune-0-6", "torchtune/training/_compile.py compile_loss") + " (1814feb: "
                         "compute_cross_entropy of each chunk compiled); measured on CPU (PyTorch 2.13, inductor): "
                         "each chunk's compiled backward writes its gradient in the logits' dtype, no fp32 gradient; "
                         "see the Validation page")
FUSED_LINEAR = (Cite("liger-kernel", "src/liger_kernel/ops/fused_linear_cross_entropy.py") + ": chunk_size = "
                "next_power_of_2(cdiv(BT, cdiv(V, H))), one chunk's logits at a time, overwritten by their gradient")
LOSS_CHUNKS = 8  # torchtune CEWithChunkedOutputLoss's num_output_chunks
CHUNKED = isin(sym("loss"), "chunked", "chunked-compiled")  # torchtune's chunked loss, eager or compiled
# The share of the whole T x V loss tensors one moment holds: the whole for an eager loss, one chunk for
# torchtune's chunked loss; and the source of the eager and chunked losses' tensors.
LOSS_SHARE = when(eq(sym("loss"), "chunked"), Fraction(1, LOSS_CHUNKS),
                  when(eq(sym("loss"), "eager"), 1, 0))
EAGER_OR_CHUNKED = when(eq(sym("loss"), "chunked"), CHUNKED_LOSS, LOSS)
HEAD_BACKWARD = (Cite("pytorch-autograd-engine", "torch/csrc/autograd/engine.cpp ReadyQueue::CompareNodeTaskTime")
                 + " (runs the node with the higher sequence number first) and "
                 + Cite("pytorch-autograd-engine", "torch/csrc/autograd/input_buffer.cpp accumulate")
                 + " (a sum out of place unless the buffered gradient is contiguous and unshared); "
                 + Cite("torchtune-0-6", "CEWithChunkedOutputLoss") + "; measured: see the Validation page")
ACCUMULATE = Cite("pytorch-2-13", "autograd AccumulateGrad") + ": .grad persists across micro-batches until zero_grad"
AUTOGRAD = (Cite("pytorch-2-13", "torch/csrc/autograd/engine.cpp") + " (autograd: a node's saved tensors are freed "
            "once it has run; derivatives from tools/autograd/derivatives.yaml); measured: see the Validation page")
PHASES = ("layer_forward", "head_forward", "forward", "backward_start", "head_backward", "final_norm_backward",
          "layer_backward", "first_layer_backward", "backward_end", "optimizer_step", "checkpoint_save")
PHASE_TITLES = {"layer_forward": "forward through the last layer",
                "head_forward": "forward through the output layer",
                "forward": "end of forward (loss computed)",
                "backward_start": "start of backward (loss gradients)",
                "head_backward": "backward through the output layer",
                "final_norm_backward": "backward through the final norm",
                "layer_backward": "backward through the last layer",
                "first_layer_backward": "backward through the first layer",
                "backward_end": "end of backward (all gradients)",
                "optimizer_step": "optimizer step",
                "checkpoint_save": "checkpoint save (after the step)"}

# The estimate's parts that are live at the peak but not saved for backward (Part.transient): the
# returned logits and the layer recomputed under full recomputation. 'saved' below leaves them out.
NOT_SAVED = ("activations/logits", "activations/recompute_working_layer")

# Which parts are live at each moment of the step, as selectors of the estimate's parts: a bucket
# ('weights'), a part's name ('activations/logits'), 'saved' (the saved activations: the activations
# bucket less its transient parts), 'accumulating' (the gradients, when gradient accumulation
# keeps them across micro-batches) or 'kept' (gradient storage a framework allocates once and keeps for the run:
# builder.model.gradbuffers, Megatron-LM's main_grad buffer, PyTorch DDP's buckets, DeepSpeed's BF16_Optimizer buffer).
# DeepSpeed ZeRO-3's parameters kept for reuse (comm/reused_params, builder.model.zero3) are the last blocks and the
# output layer, gathered from their forward until their backward: live from the last layer's forward to its backward,
# released before the first layer's.
# DeepSpeed ZeRO-3's reduce bucket (comm/reduce_bucket, builder.model.buckets) is allocated at the optimizer's start:
# live at every moment, as are the gradient buffers a framework keeps for the run ('kept', builder.model.gradbuffers).
# FSDP2's all-gather buffer (comm/all_gather_output, builder.model.states' FSDP2_GATHERED) is live from the first
# block's forward to the last block's backward that prefetches (AT_PHASE: what is gathered at each moment).
_IN_BACKWARD = ("weights", "optimizer", "kept", "accumulating", "comm/gathered_params", "comm/all_gather_output",
                "comm/reused_params", "comm/unsharded_grads", "comm/reduce_bucket", "saved")
LIVE = {
    "layer_forward": ("weights", "optimizer", "kept", "accumulating", "comm/gathered_params",
                      "comm/all_gather_output", "comm/reused_params", "comm/reduce_bucket", "saved"),
    # The output layer converted to float8 (builder.model.float8): its forward's casts, before the loss has saved
    # anything. FSDP2: the output layer's unit when it is one of its own.
    "head_forward": ("weights", "optimizer", "kept", "accumulating", "comm/gathered_params",
                     "comm/all_gather_output", "comm/gathered_output", "comm/reused_params", "comm/reduce_bucket",
                     "saved_less_loss"),
    # FSDP2: the output layer's unit where it is kept gathered from its forward to its backward (AT_PHASE).
    "forward": ("weights", "optimizer", "kept", "accumulating", "comm/gathered_params", "comm/all_gather_output",
                "comm/gathered_output", "comm/reused_params", "comm/reduce_bucket", "saved", "activations/logits"),
    "backward_start": (*_IN_BACKWARD, "comm/gathered_output"),
    # A chunked loss's backward has run (its saved log-probabilities are freed): the output layer's backward, chunk
    # by chunk, summing the weight gradient of every chunk; or, converted to float8, its backward's casts. FSDP2: the
    # output layer's unit when it is one of its own; the root unit's output-layer gradient is the sum being made
    # (gradients/head_sum: .grad is set once every chunk's has come), so comm/root_grads is not live yet.
    "head_backward": ("weights", "optimizer", "kept", "accumulating", "comm/gathered_params",
                      "comm/all_gather_output", "comm/unsharded_grads", "comm/reduce_bucket", "comm/gathered_output",
                      "saved_less_loss"),
    # Between the output layer's backward and the last layer's (an RMSNorm model's final norm): as inside the last
    # layer, less any block's reduce-scatter input (no block has made gradients yet; FSDP2: AT_PHASE), and the output
    # layer's unit where the final norm is in it.
    "final_norm_backward": (*_IN_BACKWARD, "comm/root_grads", "comm/output_reduce_scatter_input",
                            "comm/gathered_output", "stepping"),
    # With the optimizer stepping inside backward, the one gradient in flight (and its step, a transient below).
    # FSDP2: the previous block's reduce-scatter input and the root unit's output-layer gradient, or the output unit's
    # reduce-scatter input (freed at the last block's post-backward) (builder.model.states).
    "layer_backward": (*_IN_BACKWARD, "comm/reduce_scatter_input", "comm/root_grads",
                       "comm/output_reduce_scatter_input", "stepping"),
    # Inside the first layer's backward: every gradient (less what that layer has not made yet), and of the
    # saved tensors only the embedding's and the first layer's own (added per moment). FSDP2: the token embedding's
    # unit, prefetched, when it is one of its own.
    "first_layer_backward": ("weights", "optimizer", "gradients", "kept", "comm/gathered_params",
                             "comm/unsharded_grads", "comm/reduce_bucket", "comm/reduce_scatter_input",
                             "comm/root_grads", "comm/gathered_embeddings", "activations/embedding"),
    # After the first layer's backward, which freed the layer it recomputed: the recomputed layer is live here only
    # as the stand-in for that layer's backward where the op list has no moment inside it (RECOMPUTED_AT_END).
    # FSDP2: the token embedding's unit, when it is one of its own (its gradient: TRANSIENTS).
    "backward_end": ("weights", "optimizer", "gradients", "kept", "comm/gathered_params", "comm/unsharded_grads",
                     "comm/reduce_bucket", "comm/root_grads", "comm/gathered_embeddings", "recomputed_at_end"),
    "optimizer_step": ("weights", "optimizer", "gradients", "kept", "comm/reduce_bucket"),
    # Saving a checkpoint after the step (builder.model.checkpoint): the model states and the gradients (freed only by
    # the next step's zero_grad in the loop assumed here), no activations, and the save's own temporaries.
    "checkpoint_save": ("weights", "optimizer", "gradients", "kept", "comm/reduce_bucket", "checkpoint"),
}
# Parts the estimate counts that exist only from the optimizer step on: Megatron-LM's fp32 copy of a 16-bit grad
# buffer (builder.model.gradbuffers.MASTER_GRADS), made by the step and freed by the next step's zero_grad, so live
# at a checkpoint save after the step too.
STEP_ONLY = ("optimizer/master_grads",)
AFTER_STEP = ("optimizer_step", "checkpoint_save")
# The phases inside a layer, and the kind of oplists.Moment each one takes the worst of.
MOMENT_PHASES = {"layer_forward": "layer_forward", "layer_backward": "layer_backward",
                 "first_layer_backward": "layer_backward", "final_norm_backward": "final_norm_backward"}
# The output layer's saved tensors: not made yet inside the last layer's forward, freed before its backward.
HEAD_SAVED = tuple(dict.fromkeys(f"activations/{r.group}"
                                 for r in oplists.LAST_STAGE_LAYERNORM + oplists.LAST_STAGE_RMSNORM))


def _part(name: str) -> Expr:
    """The bytes of the GPU's part called `name` (0 where it has none)."""
    return get(sym("part_bytes"), name, 0)


# The stage with the output layer: the one whose loss keeps its labels (every loss does).
HEAD = _part("activations/loss") > 0
EMBEDDING = _part("activations/embedding") > 0
FULL_TUNING = eq(sym("lora_rank"), 0)
# torchao's float8 training with the output layer converted (builder.model.float8.HEAD): the largest instant of its
# forward and of its backward (float8.INSTANTS), its input b x s x h, its output the b x s x V logits and its weight
# V x h. FSDP2 counts the output layer's gradient as the root unit's (comm/root_grads) through the whole backward
# phase: the instants before the weight gradient's matmul are counted less it, that one without its own.
_FLOAT8_SIZES = {"in": sym("op_T") * sym("hidden"), "out": sym("op_T") * sym("op_V"), "w": sym("op_V") * sym("hidden")}
_FLOAT8_DTYPES = {"fp32": 4, "fp8": 1, "act": sym("act_bytes"), "grad": sym("grad_bytes")}
FLOAT8_HEAD_FORWARD, FLOAT8_HEAD_BACKWARD = (
    float8.largest(phase, _FLOAT8_SIZES, _FLOAT8_DTYPES.__getitem__, lambda name: sym(f"holds_{name}"))
    for phase in ("forward", "backward"))
FLOAT8_HEAD_NOTE = ("the largest of its casts, layout copies and matmul outputs, each instant beside the gradient of "
                    "the logits; under FSDP2 less the output layer's weight gradient (counted as the root unit's "
                    "gradients) until its matmul makes it")
# Weight gradients are new tensors of this backward: not accumulated into, not an unsharded unit's, not stepped
# and freed as they are made.
FRESH = both(eq(sym("grad_accum"), 1), eq(_part("comm/unsharded_grads"), 0), negate(sym("in_backward")),
             negate(sym("grads_kept")))
STEP_IMPL = sym("step_impl")
# A tied embedding's backward, the last of the step: its dense gradient and the sum with the output layer's gradient
# of the shared matrix (TRANSIENTS' backward_end).
TIED_TEMPORARIES = when(both(HEAD, EMBEDDING, sym("tied_embeddings"), FULL_TUNING),
                        2 * sym("op_V") * sym("hidden") * sym("grad_bytes"), 0)
# Under full recomputation the first layer's backward recomputes the layer, and frees it before the embedding's
# backward runs (autograd runs the embedding's backward last; torch.utils.checkpoint's recomputed tensors go with the
# layer's backward): the end of backward holds no recomputed layer. Where the op list has no moment inside the first
# layer's backward (a compiled layer), the recomputed layer stands in for that moment here, in place of the tied
# embedding's temporaries when it is the larger (the two are never live at once). Measured on CPU (builder.validate's
# peak cases, GPT-2 with tied embeddings and full recomputation): the backward's peak is the first layer's moment,
# not the recomputed layer on top of the embedding's temporaries.
LEARNED_POSITIONS = sym("position_embeddings") > 0
# The embeddings' weight gradients on a stage with the embeddings, fully fine-tuned: made by the embeddings' backward
# (EmbeddingBackward0), which autograd runs only once every gradient of its output has come (engine.cpp: a node is
# ready when its dependencies are met), that is after the first layer's whole backward, so they do not exist inside
# it. The token embedding's, unless it is tied to the output layer on this stage (then the output layer's backward
# has already made the shared matrix's gradient), and learned position embeddings' (GPT-2's wpe). Measured on CPU:
# content/validation/peak.json (bf16 Llamas whose backward peaks in the first layer, and GPT-2 and Llama steps that
# peak in its MLP or softmax backward).
EMBEDDING_GRADS = when(both(EMBEDDING, FULL_TUNING),
                       (when(both(sym("tied_embeddings"), HEAD), 0, sym("op_V")) + sym("position_embeddings"))
                       * sym("hidden") * sym("grad_bytes"), 0)
EMBEDDING_LOCALS = (Cite("transformers-5-23", "src/transformers/models/gpt2/modeling_gpt2.py GPT2Model.forward, "
                         "models/llama/modeling_llama.py LlamaModel.forward") + "; measured: see the Validation page")
RECOMPUTED_AT_END = both(negate(sym("moment_first_layer_backward")),
                         _part("activations/recompute_working_layer") > TIED_TEMPORARIES)


# DeepSpeed ZeRO's step with the optimizer on the GPU: for each parameter group (stages 1 and 2) or sub-group (stage 3)
# it flattens the group's gradient partition into a new tensor, casts that to fp32 for the optimizer, frees the flat
# copy, steps and frees the fp32 gradient (DeepSpeed edaa722 deepspeed/runtime/zero/stage_1_and_2.py step:
# flat_grad_partition = self.flatten(self.averaged_gradients[i]); single_grad_partition = flat_grad_partition.to(
# self.single_partition_of_fp32_groups[i].dtype); del flat_grad_partition; ... self.single_partition_of_fp32_groups[
# i].grad = None; stage3.py _prepare_fp32_grad_for_sub_group: self.flatten(self.averaged_gradients[sub_group_id]).to(
# self.fp32_partitioned_groups_flat[sub_group_id].dtype), freed by _release_sub_group). A stage 3 sub-group closes once
# its parameters' partitions reach sub_group_size (stage3.py _create_fp16_sub_groups; config.py sub_group_size
# pp_int(1e9)), so it holds at most sub_group_size + one parameter's partition. The gradient partition's elements, per
# pipeline stage: the stage's master part over bytes(master dtype) where there is one, else its gradients part over
# bytes(grad dtype) (under ZeRO-1, whose gradients are whole, over the optimizer's ranks: an expert's share is taken as
# a dense one's there). The gradients are in grad_accum_dtype under ZeRO-3 when one is set (stage3.py
# grad_partitions_flat_buffer), else in the gradient dtype; already fp32, .to() makes no copy.
DEEPSPEED_STEP_GRADS = (Cite("deepspeed-edaa722", "deepspeed/runtime/zero/stage_1_and_2.py step")
                        + ": the flat gradient partition and its fp32 cast, one parameter group at a time; "
                        + Cite("deepspeed-edaa722", "deepspeed/runtime/zero/stage3.py _prepare_fp32_grad_for_sub_group")
                        + ": the same per sub-group, up to sub_group_size (1e9, config.py) elements")
DEEPSPEED_SUB_GROUP = 10**9
_DS_GRAD_DTYPE = when(both(eq(sym("shard_stage"), 3), sym("grad_accum_dtype")), sym("grad_accum_dtype"),
                      sym("grad_dtype"))
_DS_PARTITION = when(_part("optimizer/master") > 0, _part("optimizer/master") / bytes_of(sym("master_dtype")),
                     _part("gradients") / bytes_of(_DS_GRAD_DTYPE)
                     / when(sym("shard_stage") < 2, sym("optimizer_ranks"), 1))
_DS_ELEMENTS = when(eq(sym("shard_stage"), 3),
                    minimum(_DS_PARTITION, DEEPSPEED_SUB_GROUP + sym("largest_tensor") / sym("optimizer_ranks")),
                    _DS_PARTITION)
_DS_BYTES = bytes_of(_DS_GRAD_DTYPE) + when(eq(_DS_GRAD_DTYPE, "fp32"), 0, 4)
# The optimizer DeepSpeed's ZeRO steps is handed one flat fp32 (sub-)group at a time (builder.model.optimizers:
# stage_1_and_2.py _optimizer_step, self.optimizer.param_groups = [original_param_groups[group_no]]; stage3.py
# _optimizer_step, self.optimizer.param_groups[param_group_id]['params'] = [fp32_param]), so a foreach step's list is
# that (sub-)group and its temporaries are the (sub-)group's share of the part they are sized like: under stage 3 at
# most sub_group_size + one parameter's partition of the partition's elements; under stages 1 and 2 one parameter
# group, counted as the whole partition (as _DS_ELEMENTS).
_DS_GROUP_SHARE = when(both(DEEPSPEED_ENGINE, _DS_PARTITION > 0), minimum(1, _DS_ELEMENTS / _DS_PARTITION), 1)
_DS_SUB_GROUP = _DS_GROUP_SHARE < 1
FOREACH_SUB_GROUP = (Cite("deepspeed-edaa722", "deepspeed/runtime/zero/stage3.py _optimizer_step") + ": the optimizer "
                     "steps one sub-group's flat fp32 partition at a time, param_groups[...]['params'] = [fp32_param], "
                     "up to sub_group_size (1e9, config.py) elements and one parameter's partition")


def _foreach_step(part: str, optimizers: tuple[str, ...], formula: str, source: str, per_unit: str,
                  note: str) -> PartRule:
    """A foreach step's temporaries, sized like the GPU's part `part` (under DeepSpeed's ZeRO-3 one sub-group's share
    of it)."""
    return PartRule("optimizer/step_temporaries", _part(part) * _DS_GROUP_SHARE,
                    when(_DS_SUB_GROUP, formula + " of one sub-group: sub_group_size + the largest partition", formula),
                    when(_DS_SUB_GROUP, fmt("{0}; {1}", source, FOREACH_SUB_GROUP), source),
                    when(_DS_SUB_GROUP, per_unit + ", one sub-group at a time", per_unit), note,
                    when=both(eq(STEP_IMPL, "foreach"), isin(sym("optimizer"), *optimizers)), transient=True)


def _deepspeed_step_grads() -> PartRule:
    """DeepSpeed ZeRO's flat gradient partition and its fp32 cast, made and freed inside its step."""
    return PartRule("optimizer/grad_partition_fp32", _DS_ELEMENTS * _DS_BYTES,
                    when(eq(sym("shard_stage"), 3),
                         when(eq(_DS_GRAD_DTYPE, "fp32"), "min(N, sub_group_size) x 4 B",
                              "min(N, sub_group_size) x (bytes(grad) + 4 B)"),
                         when(eq(_DS_GRAD_DTYPE, "fp32"), "N x 4 B", "N x (bytes(grad) + 4 B)")),
                    DEEPSPEED_STEP_GRADS,
                    PerUnit(_DS_BYTES, "param", when(eq(_DS_GRAD_DTYPE, "fp32"), "flat fp32 copy",
                                                     fmt("flat {0} copy + fp32 cast", _DS_GRAD_DTYPE))),
                    "one parameter group (stage 3: sub-group) at a time, counted as the whole partition (stage 3: up "
                    "to sub_group_size + one parameter's partition); the flat copy is freed before the optimizer "
                    "runs, so beside the step's own temporaries this is an upper bound by it",
                    when=both(TRAIN, DEEPSPEED_ENGINE, FULL_TUNING, negate(isin(sym("offload"), "optimizer", "both")),
                              negate(sym("in_backward")), negate(sym("master_grads")), negate(sym("msamp"))),
                    transient=True)


def _stepping_in_backward() -> PartRule:
    """The temporaries of one parameter's step, run inside backward (a moment of backward's own)."""
    return PartRule("optimizer/step_temporaries", sym("loop_temporaries"), "k x largest tensor x bytes(state dtype)",
                    fmt("{0}; {1}", IN_BACKWARD, LOOP_SOURCE), "one parameter's step at a time",
                    "the optimizer steps each parameter inside backward", when=both(sym("in_backward"),
                                                                                     sym("loop_temporaries") > 0),
                    transient=True)


def _paging_in(inside_backward: bool) -> PartRule:
    """A paged optimizer's states of the parameter it steps, paged in for its step: at the optimizer step, or inside
    backward when each parameter is stepped from its gradient hook (builder.model.paging)."""
    return PartRule("optimizer/paged_in", sym("paged_in"), "largest parameter x 2 moments x bytes(state code)", PAGED,
                    "one parameter's two moments", PAGED_IN_NOTE,
                    when=both(sym("in_backward"), sym("paged_in") > 0) if inside_backward else sym("paged_in") > 0,
                    transient=True)


def _dequantised(backward: bool) -> PartRule:
    """QLoRA's dequantised copy of the largest 4-bit weight inside a layer's forward or backward
    (builder.model.dequant)."""
    return PartRule("weights/dequantised_linear", dequant.BACKWARD if backward else dequant.FORWARD,
                    dequant.BACKWARD_FORMULA if backward else dequant.FORWARD_FORMULA, dequant.SOURCE,
                    dequant.PER_UNIT, dequant.BACKWARD_NOTE if backward else dequant.FORWARD_NOTE,
                    when=sym("dequant_backward" if backward else "dequant_forward"), transient=True)


# The tensors that live for one moment of the step only (PartRule.transient), by moment. The symbols are the
# op lists' (builder.model.activations): op_T tokens and op_V vocabulary rows on this GPU.
TRANSIENTS: dict[str, tuple[PartRule, ...]] = {
    "forward": (
        PartRule("activations/logits_fp32", sym("op_T") * sym("op_V") * 4 * LOSS_SHARE, "b x s x V x 4 B",
                 EAGER_OR_CHUNKED,
                 per_token(sym("op_T") * sym("op_V") * 4 * LOSS_SHARE),
                 when(eq(sym("loss"), "chunked"), "one chunk of eight upcast to fp32 at a time",
                      "the loss upcasts the logits to fp32"),
                 when=both(HEAD, ne(SAVED_DTYPE, "fp32"), LOSS_SHARE > 0), transient=True),
        PartRule("activations/loss_chunk", ceil(sym("op_T") / ceil(sym("op_V") / sym("hidden"))) * sym("op_V")
                 * sym("act_bytes"), "ceil(b x s / ceil(V / h)) x V x bytes(activation dtype)", FUSED_LINEAR,
                 "one chunk's logits", "simplification: Liger rounds the chunk up to a power of two, up to twice this",
                 when=both(HEAD, eq(sym("loss"), "fused-linear")), transient=True),
        PartRule("activations/final_hidden_fp32", sym("op_T") * sym("hidden") * 4, "b x s x h x 4 B", LOSS,
                 per_token(sym("op_T") * sym("hidden") * 4),
                 "the final norm's fp32 output, held by the model output until the loss is computed",
                 when=both(HEAD, FP32_STREAM_AMP), transient=True),
    ),
    "backward_start": (
        PartRule("activations/loss_grads", 2 * sym("op_T") * sym("op_V") * 4 * LOSS_SHARE, "2 x b x s x V x 4 B",
                 EAGER_OR_CHUNKED,
                 per_token(2 * sym("op_T") * sym("op_V") * 4 * LOSS_SHARE),
                 when(eq(sym("loss"), "chunked"), "one chunk's gradients of the log-probabilities and fp32 logits",
                      "gradient of the log-probabilities and of the fp32 logits"),
                 when=both(HEAD, LOSS_SHARE > 0), transient=True),
        PartRule("activations/loss_grads", sym("op_T") * (sym("op_V") * sym("act_bytes") + 4) / LOSS_CHUNKS,
                 "b x s x (V x bytes(activation dtype) + 4 B) / 8", CHUNKED_COMPILED_LOSS,
                 per_token(sym("op_T") * (sym("op_V") * sym("act_bytes") + 4) / LOSS_CHUNKS),
                 "one chunk's gradient of its logits, in their dtype, and a per-token fp32 sum (the chunks run one "
                 "at a time)",
                 when=both(HEAD, eq(sym("loss"), "chunked-compiled")), transient=True),
        PartRule("activations/loss_grads", sym("op_T") * sym("op_V") * (4 + sym("act_bytes")),
                 "b x s x V x (4 B + bytes(activation dtype))", COMPILED_LOSS,
                 per_token(sym("op_T") * sym("op_V") * (4 + sym("act_bytes"))),
                 "the fused backward's fp32 gradient of the logits and its cast", when=both(HEAD, eq(sym("loss"),
                                                                                               "compiled")),
                 transient=True),
    ),
    # torchtune's chunked loss: the engine runs every chunk's loss backward first (their nodes are newer than the
    # output layer's), so each chunk's logit gradient waits for its output-layer backward; the output layer's weight
    # gradient of the first two chunks to run and their sum (out of place: the first is a transposed view) are live
    # at once, with the logit gradients of the other chunks.
    "head_backward": (
        PartRule("activations/loss_grads", sym("op_T") * sym("op_V") * sym("act_bytes") * (LOSS_CHUNKS - 2)
                 / LOSS_CHUNKS, "(C - 2) / C x b x s x V x bytes(activation dtype)", HEAD_BACKWARD,
                 per_token(sym("op_T") * sym("op_V") * sym("act_bytes") * (LOSS_CHUNKS - 2) / LOSS_CHUNKS),
                 "the logits' gradients of the chunks whose output-layer backward has not run yet",
                 when=both(HEAD, CHUNKED), transient=True),
        PartRule("gradients/head_sum", 3 * sym("op_V") * sym("hidden") * sym("grad_bytes"), "3 x V x h x bytes(grad)",
                 HEAD_BACKWARD, "3 V x h gradients",
                 "two chunks' output-layer weight gradients and their sum, before the sum goes to .grad",
                 when=both(HEAD, CHUNKED, FULL_TUNING), transient=True),
        # The output layer converted to float8 (eager loss): the loss's backward has made the gradient of the logits
        # in their dtype (ToCopyBackward of logits.float()), the output layer's incoming gradient, and its backward
        # casts it, the weight and its saved input (FLOAT8_HEAD_BACKWARD).
        PartRule("activations/loss_grads", sym("op_T") * sym("op_V") * sym("act_bytes"),
                 "b x s x V x bytes(activation dtype)", LOSS, per_token(sym("op_T") * sym("op_V") * sym("act_bytes")),
                 "the gradient of the logits, in their dtype: the output layer's incoming gradient",
                 when=both(HEAD, FLOAT8_HEAD), transient=True),
        PartRule("activations/float8_casts", FLOAT8_HEAD_BACKWARD - _part("comm/root_grads"),
                 "the largest instant of the output layer's float8 backward", FLOAT8_CASTS,
                 per_token(FLOAT8_HEAD_BACKWARD), FLOAT8_HEAD_NOTE, when=both(HEAD, FLOAT8_HEAD), transient=True),
    ),
    # The output layer converted to float8: the largest instant of its forward, the casts of its input and weight and
    # the logits it makes (FLOAT8_HEAD_FORWARD).
    "head_forward": (
        PartRule("activations/float8_casts", FLOAT8_HEAD_FORWARD, "the largest instant of the output layer's float8 "
                 "forward", FLOAT8_CASTS, per_token(FLOAT8_HEAD_FORWARD),
                 "the casts of its input and weight, or at its matmul the logits it makes",
                 when=both(HEAD, FLOAT8_HEAD), transient=True),
    ),
    "layer_forward": (
        _dequantised(backward=False),
        # transformers' model forward keeps its embedding outputs in locals until it returns: GPT-2's token and
        # position embeddings (GPT2Model.forward `inputs_embeds`, `position_embeds`; their sum is the first layer's
        # input), Llama's token embedding (LlamaModel.forward `inputs_embeds`), which below fp32 (without autocast)
        # no layer saves unless the first layer is checkpointed: its input norm saves an fp32 copy instead.
        PartRule("activations/embedding_outputs",
                 when(LEARNED_POSITIONS, (sym("op_T") + sym("op_s")) * sym("hidden"), sym("op_T") * sym("hidden"))
                 * when(FP32_STREAM_AMP, 4, sym("act_bytes")),
                 when(LEARNED_POSITIONS, "(b x s + s) x h x bytes(residual stream)", "b x s x h x bytes(activation dtype)"),
                 EMBEDDING_LOCALS, per_token(sym("op_T") * sym("hidden") * when(FP32_STREAM_AMP, 4, sym("act_bytes"))),
                 "the model's forward holds them until it returns (freed before the loss)",
                 when=both(EMBEDDING, eq(sym("implementation"), "hf"),
                           either(LEARNED_POSITIONS, both(negate(CHECKPOINTED), negate(FP32_STREAM_AMP),
                                                          ne(SAVED_DTYPE, "fp32")))),
                 transient=True),
    ),
    "final_norm_backward": (_stepping_in_backward(), _paging_in(inside_backward=True)),
    "layer_backward": (_stepping_in_backward(), _paging_in(inside_backward=True), _dequantised(backward=True)),
    "first_layer_backward": (_stepping_in_backward(), _paging_in(inside_backward=True), _dequantised(backward=True)),
    "backward_end": (
        # FSDP2: the token embedding's unsharded gradient, made by its backward, the last of the step, and reduce-scattered
        # only in the final callback by its unit (the root, or its own: its input, the token ids, needs no gradient).
        # A tied embedding's is the temporaries below.
        PartRule("comm/embedding_grads", HOLDING.symbols["vocab_rows"] * bytes_of(sym("param_dtype")),
                 "token embedding's gradient x bytes(param dtype)", FSDP2_EMBEDDING_GRADS,
                 fmt("the token embedding's unsharded gradient ({0})", sym("param_dtype")),
                 "made by the embedding's backward, the last of the step",
                 when=both(FSDP2_UNITS, EMBEDDING, negate(sym("tied_embeddings"))), transient=True),
        PartRule("gradients/tied_embedding_temporaries", 2 * sym("op_V") * sym("hidden") * sym("grad_bytes"),
                 "2 x V/t x h x bytes(grad)", TIED, "2 V x h gradients",
                 "unsharded: the sum is formed before any reduce-scatter",
                 when=both(HEAD, EMBEDDING, sym("tied_embeddings"), FULL_TUNING, negate(RECOMPUTED_AT_END)),
                 transient=True),
        _stepping_in_backward(),
        _paging_in(inside_backward=True),
    ),
    # builder.model.optimizers: what each optimizer's step allocates, by implementation (fused: nothing).
    "optimizer_step": (
        _deepspeed_step_grads(),
        _foreach_step("optimizer/adam_v", ("adam", "adamw"), "one second-moment-sized tensor", FOREACH_ADAM,
                      "as the second moment", "torch.optim foreach; fused optimizers have none"),
        _foreach_step("gradients", ("adafactor",), "one gradient-sized tensor", FOREACH_ADAFACTOR, "as the gradients",
                      "the factored second moment expanded to each matrix's shape"),
        _foreach_step("optimizer/momentum", ("lion",), "one momentum-sized tensor", FOREACH_LION, "as the momentum",
                      "the interpolated update of every tensor at once"),
        PartRule("optimizer/step_temporaries", sym("loop_temporaries"), "k x largest tensor x bytes(state dtype)",
                 LOOP_SOURCE, "one parameter's step at a time", "the for-loop steps one tensor at a time",
                 when=both(eq(STEP_IMPL, "for-loop"), sym("loop_temporaries") > 0), transient=True),
        _paging_in(inside_backward=False),
    ),
}

# What a moment inside a layer adds, in words: part name -> formula (source AUTOGRAD, at the moment's op).
MOMENT_PARTS = {
    "activations/recomputed_in_last_layer": "the recomputed layer's tensors made up to this moment",
    "activations/layer_temporaries": "the op's inputs' and outputs' gradients (a norm's in fp32), or the scores it "
                                     "materialises",
    "gradients/made_so_far": "weight gradients of the output layer and of the last layer's later weights",
    "activations/first_layer": "the first layer's saved tensors still live at this moment",
}


def _selects(selector: str) -> Expr:
    """Whether a LIVE selector picks the part in scope (a row of `parts`)."""
    if selector == "saved":
        return both(eq(sym("bucket"), "activations"), negate(isin(sym("name"), *NOT_SAVED)))
    if selector == "saved_less_loss":
        return both(_selects("saved"), ne(sym("name"), "activations/loss"))
    if selector == "accumulating":
        return both(eq(sym("bucket"), "gradients"), sym("grad_accum") > 1)
    if selector == "kept":
        return either(isin(sym("name"), *KEPT_PARTS), both(eq(sym("name"), "gradients"), sym("grads_kept")))
    if selector == "recomputed_at_end":
        return both(eq(sym("name"), "activations/recompute_working_layer"), RECOMPUTED_AT_END)
    if selector == "stepping":
        return both(eq(sym("bucket"), "gradients"), sym("in_backward"))
    return eq(sym("name"), selector) if "/" in selector else eq(sym("bucket"), selector)


def _group_delta(group: str) -> Expr:
    """In a moment's scope (a MOMENTS row): what is live of `group` in the layer then, less what one layer keeps."""
    return get(sym("live"), group, 0) - get(sym("layer_kept"), group, 0)


def _have(group: str) -> Expr:
    return _part(f"activations/{group}")


# In a moment's scope, inside the last layer: the change of the saved groups the GPU holds (each rounded as a
# part), the rows of groups it holds no part of (recomputed under full recomputation), the temporaries and,
# in the backward, the weight gradients made so far. The output layer's saved tensors (gone then) are the same
# for every moment, so they are left out of the choice and out of the rows instead.
RECOMPUTED = sum((when(_have(g), 0, _group_delta(g)) for g in LAYER_GROUPS), Expr("num", 0))
# torchtitan's per-op checkpointing (builder.model.activations' 'activations/op_outputs'): inside the last layer its own
# kept outputs are not all there. In the forward, at the MLP product, down's output (and its reduce-scatter output) is
# not made yet; in the backward the recomputation has taken every kept output from the cache (torch.utils.checkpoint's
# _CachedTorchDispatchMode marks each entry consumed; torchtitan's early_stop=False recomputes the whole layer first):
# those autograd saves again are the moment's rows (v, the attention output and logsumexp, the gate output), the others
# are freed.
OP_OUTPUTS = "activations/op_outputs"
OP_OUTPUTS_DELTA = when(OP_SAC, when(eq(sym("phase"), "layer_forward"), -SAC_AFTER_PRODUCT, -SAC_LAYER), 0)
MADE = when(both(FRESH, isin(sym("phase"), "layer_backward", "final_norm_backward")),
            sym("made") + when(HEAD, sym("head_grads"), 0), 0)
LAST_LAYER = (sum((when(_have(g), ceil(_have(g) + _group_delta(g)) - _have(g), 0) for g in LAYER_GROUPS),
                  Expr("num", 0))
              + when(_part(OP_OUTPUTS), ceil(_part(OP_OUTPUTS) + OP_OUTPUTS_DELTA) - _part(OP_OUTPUTS), 0)
              + ceil(RECOMPUTED) + ceil(sym("temporaries")) + ceil(MADE))
# At the final norm's backward (on the stage with the output layer): its temporaries and the output layer's gradient.
FINAL_NORM = ceil(sym("temporaries")) + ceil(MADE)
# Inside the first layer's backward: every gradient but the layer's own not made yet and the embeddings' (made by
# their backward, which autograd runs after the first layer's: EMBEDDING_GRADS), the layer's rows live then, the
# shared first-stage tensors less those the layer has freed by then (the rotary tables after its attention's
# backward), and the temporaries.
UNMADE = sym("layer_grads") - sym("made") + EMBEDDING_GRADS
FIRST_GRADIENTS = _part("gradients")
FIRST_SHARED = _part("activations/embedding")
FIRST_LAYER = (when(both(FRESH, FIRST_GRADIENTS), maximum(0, ceil(FIRST_GRADIENTS - UNMADE)) - FIRST_GRADIENTS, 0)
               + when(FIRST_SHARED, maximum(0, ceil(FIRST_SHARED - sym("first_freed"))) - FIRST_SHARED, 0)
               + ceil(sum((get(sym("live"), g, 0) for g in LAYER_GROUPS), Expr("num", 0))) + ceil(sym("temporaries")))
# What the first layer's moment changes of the estimate's parts, in words (builder.model.peak names the part so).
FIRST_LAYER_NOTES = {"gradients": "the first layer's weight gradients not made yet and the embeddings' (their backward "
                                  "runs last)",
                     "activations/embedding": "the rotary tables, freed by the first layer's attention backward"}


# What FSDP2 holds gathered at each moment (builder.model.states' FSDP2_GATHERED: the unsharded parameters of the block
# computed and of the root unit, comm/gathered_params, and one unit's flat all-gather buffer, comm/all_gather_output),
# where that is not both. Read in PyTorch 2.13 (torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py,
# _fsdp_state.py) and measured on CPU with a fake process group at every moment below, both layouts, the loss inside
# and outside the model's forward (builder.validate.fsdp_units, tests/test_fsdp_units.py):
# - no block is being computed at the output layer's forward and backward, the final norm's backward, the end of
#   forward and of backward: comm/gathered_params is the root unit alone;
# - after the forward the root unit is resharded with torchtune (ROOT_RESHARDED: shard_model passes
#   reshard_after_forward=True to it) and gathered again by its pre-backward, a hook on the model's outputs; it stays
#   gathered where fully_shard is left its default for the root (accelerate 1.15's fsdp2_prepare_model, torchtitan).
#   Where the loss is computed outside the model's forward (torchtune's recipes; its chunked loss always is), the loss
#   gradients are made before the logits' gradient fires that hook: at the end of forward and the start of backward
#   no block is gathered, and the root only where it is kept. Where transformers' causal LM computes it in its forward
#   (LOSS_IN_FORWARD), the end of forward is inside the root's forward (the root and the last block's buffer, which the
#   root's post-forward frees) and the hook sits on the loss, so at the loss gradients the root is gathered with the
#   last block prefetched;
# - the buffer is the last block's (or the output layer's own unit's) after the forward's last block, the last block
#   prefetched from the root's pre-backward until the last layer's backward, none at the first layer's backward (its
#   pre-backward prefetches nothing, or the token embedding's unit: comm/gathered_embeddings) or after it;
# - with the output layer a unit of its own: at its forward its buffer is its own, and at its backward (torchtune's
#   chunked loss) each chunk's pre-backward prefetches the output layer itself (its previous call), already gathered,
#   and the last block only at the first chunk's backward, the last to run, when one chunk's weight gradient is being
#   added to the sum, not two: no buffer. At the end of forward (loss in the forward) its buffer is the output unit's;
# - torchtitan's and accelerate 1.15's output unit (the final norm with the output layer, reshard_after_forward=False:
#   placement.SHARD_MODEL, every implementation but torchtune, so every run with the loss in the forward) stays
#   gathered from its forward: post_forward's reshard returns at once where _reshard_after_forward is False
#   (_fsdp_param_group.py FSDPParamGroup.reshard), so at the end of forward and the loss gradients it is gathered, and
#   a pre-backward or prefetch finds it so (unshard: "if self.is_unsharded: return"): at the loss gradients no
#   buffer, the loss in the forward or not (torchtitan's Trainer computes it on the logits). Its post_backward
#   runs when its forward inputs' gradient is made, the final norm's (RegisterPostBackwardFunction on the inputs of
#   the group's first module), and frees it (reshard_after_backward): it is gathered through the final norm's
#   backward too.
# At the loss gradients, the output layer's and the final norm's backward no block has made a gradient (its
# weights' or, with LoRA, its adapters').
# FSDP unit by unit (not a pipeline stage kept whole: builder.model.states' WHOLE_STAGE), fine-tuned whole or with LoRA.
FSDP_UNITS = both(TRAIN, sym("has_architecture"), sym("fsdp"), negate(WHOLE_STAGE))
# transformers' causal LMs compute the loss in their forward when given labels (LlamaForCausalLM.forward calls
# self.loss_function; Trainer passes the labels); torchtune's recipes call the loss on the logits the model returns,
# and its chunked loss takes the chunks torchtune's decoder returns.
LOSS_IN_FORWARD = both(eq(sym("implementation"), "hf"), negate(CHUNKED))
# torchtune's shard_model calls fully_shard on the model with its reshard_after_forward (True: FULL_SHARD); accelerate
# 1.15 (transformers' Trainer) leaves the root to fully_shard's default, which keeps it gathered after the forward.
ROOT_RESHARDED = SHARD_MODEL
_BUFFER = _part("comm/all_gather_output")  # one block, as gathered (float8 where it is); 0 without FSDP unit by unit
_OWN_OUTPUT = _part("comm/gathered_output")
# comm/gathered_output where the output unit is kept gathered after its forward (torchtitan's and accelerate 1.15's:
# placement.SHARD_MODEL), else not live.
_KEPT_OUTPUT = when(SHARD_MODEL, 0, sym("bytes"))
_ROOT_ONLY = ceil(sym("bytes") - _BUFFER)  # comm/gathered_params less the block computed
_ROOT_GATHERED = when(_BUFFER > 0, _ROOT_ONLY, sym("bytes"))  # comm/gathered_params where no block is being computed
_NO_BLOCK_GRADS = when(FSDP_UNITS, 0, sym("bytes"))  # comm/unsharded_grads before any block's backward has run
# The end of forward and the start of backward: the root unit where the loss is in the forward or the root is kept,
# the output layer's unit where it is kept, and one buffer where the loss is in the forward (at the loss gradients
# none where the output unit is kept: the prefetch finds it gathered).
_AFTER_FORWARD = {"comm/gathered_params": when(_BUFFER > 0, when(either(LOSS_IN_FORWARD, negate(ROOT_RESHARDED)),
                                                                   _ROOT_ONLY, 0), sym("bytes")),
                  "comm/all_gather_output": when(LOSS_IN_FORWARD, when(_OWN_OUTPUT > 0, _OWN_OUTPUT, sym("bytes")), 0),
                  "comm/gathered_output": _KEPT_OUTPUT,
                  # At the loss gradients no block's backward has run, so none has made gradients (the forward holds
                  # none in any case).
                  "comm/unsharded_grads": _NO_BLOCK_GRADS}
AT_PHASE: dict[str, dict[str, Expr]] = {
    "head_forward": {"comm/gathered_params": _ROOT_GATHERED,
                     "comm/all_gather_output": when(_OWN_OUTPUT > 0, _OWN_OUTPUT, sym("bytes"))},
    "forward": _AFTER_FORWARD,
    "backward_start": {**_AFTER_FORWARD,
                       "comm/all_gather_output": when(both(LOSS_IN_FORWARD, eq(_OWN_OUTPUT, 0)), sym("bytes"), 0)},
    "head_backward": {
        "comm/gathered_params": _ROOT_GATHERED,
        "comm/all_gather_output": when(_OWN_OUTPUT > 0, 0, sym("bytes")),
        "comm/unsharded_grads": _NO_BLOCK_GRADS,
    },
    "final_norm_backward": {"comm/gathered_params": _ROOT_GATHERED,
                            "comm/gathered_output": _KEPT_OUTPUT,
                            "comm/unsharded_grads": _NO_BLOCK_GRADS},
    "backward_end": {"comm/gathered_params": _ROOT_GATHERED},
}
# What AT_PHASE changes, in words (builder.model.peak names the part so).
_ROOT_NOTE = "FSDP2: no block is being computed, only the root unit is gathered"
_AFTER_FORWARD_NOTES = {
    "comm/gathered_params": "FSDP2: no block is being computed; the root unit is gathered where the loss is "
                            "computed in the model's forward or the root is kept after it (torchtune reshards it)",
    "comm/all_gather_output": "FSDP2: with the loss computed in the model's forward, the last unit's all-gather "
                              "buffer, or the block the root's pre-backward prefetches (none where the output layer's "
                              "unit is kept gathered)",
    "comm/gathered_output": "FSDP2: the final norm and output layer's unit, kept gathered from its forward to its "
                            "backward (torchtitan's and accelerate's layout)",
}
AT_PHASE_NOTES = {
    ("head_forward", "comm/gathered_params"): _ROOT_NOTE + " (the output layer's forward)",
    ("head_forward", "comm/all_gather_output"): "FSDP2: the output layer's own unit's all-gather buffer, kept until "
                                                "the forward ends",
    **{(phase, name): note for phase in ("forward", "backward_start") for name, note in _AFTER_FORWARD_NOTES.items()},
    ("head_backward", "comm/gathered_params"): _ROOT_NOTE + " (the output layer's backward)",
    ("final_norm_backward", "comm/gathered_params"): _ROOT_NOTE + " (the final norm's backward)",
    ("final_norm_backward", "comm/unsharded_grads"): "FSDP2 at the final norm's backward: no block has made gradients "
                                                     "yet",
    ("final_norm_backward", "comm/gathered_output"): "FSDP2: the final norm and output layer's unit, freed when the "
                                                     "final norm's backward ends (torchtitan's and accelerate's "
                                                     "layout)",
    ("backward_start", "comm/unsharded_grads"): "FSDP2 at the loss gradients: no block has made gradients yet",
    ("backward_end", "comm/gathered_params"): _ROOT_NOTE + " (the token embedding's backward)",
}


def _at_phase(phase: str, bytes_: Expr) -> Expr:
    """A part's bytes at `phase` (a row of `parts` in scope): AT_PHASE's where it changes the part, else `bytes_`."""
    changed = AT_PHASE.get(phase, {})
    rule = bytes_
    for name, amount in changed.items():
        rule = when(eq(sym("name"), name), amount, rule)
    return rule


def _rows(phase: str) -> Expr:
    """The parts live at `phase`, as rows {name, bytes, accumulated, kept}: the parts LIVE selects (inside a layer,
    changed by the worst moment), the moment's own tensors (TRANSIENTS) and, inside a layer, its tensors."""
    selected = either(*(_selects(s) for s in LIVE[phase]))
    if phase not in AFTER_STEP:
        selected = both(selected, negate(isin(sym("name"), *STEP_ONLY)))
    kept = both(_selects("kept"), "kept" in LIVE[phase])
    accumulated = both(_selects("accumulating"), "accumulating" in LIVE[phase], negate(kept))
    moment = sym(f"moment_{phase}")
    kind = MOMENT_PHASES.get(phase)
    if kind is None:
        held = each(sym("step_parts"), row(selected, name=sym("name"), bytes=_at_phase(phase, sym("bytes")),
                                           accumulated=accumulated, kept=kept))
        extra = table()
    elif phase == "final_norm_backward":
        # Every saved tensor but the output layer's and the loss's (the final norm's own live ones are the moment's
        # rows), the output layer's weight gradient made and the norm's temporaries.
        held = each(sym("step_parts"), row(both(selected, negate(isin(sym("name"), *HEAD_SAVED))), name=sym("name"),
                                      accumulated=accumulated, kept=kept, bytes=_at_phase(phase, sym("bytes"))))
        extra = table(row(1, name="activations/layer_temporaries", bytes=ceil(at(moment, "temporaries"))),
                      row(1, name="gradients/made_so_far", bytes=ceil(within(moment, MADE))))
    elif phase == "first_layer_backward":
        held = each(sym("step_parts"), row(selected, name=sym("name"), accumulated=accumulated, kept=kept, bytes=when(
            both(FRESH, eq(sym("name"), "gradients")),
            maximum(0, ceil(sym("bytes") - within(moment, UNMADE))),
            when(eq(sym("name"), "activations/embedding"),
                 maximum(0, ceil(sym("bytes") - at(moment, "first_freed"))), _at_phase(phase, sym("bytes"))))))
        extra = table(row(1, name="activations/first_layer",
                          bytes=ceil(within(moment, sum((get(sym("live"), g, 0) for g in LAYER_GROUPS),
                                                        Expr("num", 0))))),
                      row(1, name="activations/layer_temporaries", bytes=ceil(at(moment, "temporaries"))))
    else:
        change = sym(f"change_{phase}")
        held = each(sym("step_parts"), row(both(selected, negate(isin(sym("name"), *HEAD_SAVED))), name=sym("name"),
                                      accumulated=accumulated, kept=kept,
                                      bytes=when(eq(sym("bucket"), "activations"),
                                                 ceil(sym("bytes") + get(change, sym("name"), 0)), sym("bytes"))))
        extra = table(row(1, name="activations/recomputed_in_last_layer", bytes=ceil(within(moment, RECOMPUTED))),
                      row(1, name="activations/layer_temporaries", bytes=ceil(at(moment, "temporaries"))),
                      row(1, name="gradients/made_so_far", bytes=ceil(within(moment, MADE))))
    transients = table(*(row(rule.when, name=rule.name, bytes=ceil(rule.bytes), accumulated=0, kept=0)
                         for rule in TRANSIENTS.get(phase, ())))
    return when(moment, concat(held, transients, extra), table()) if kind else concat(held, transients, extra)


# What each instant of a moment phase adds to the parts live then (a MOMENTS row in scope): the phase takes the
# instant where it is largest.
MOMENT_BODIES = {"layer_forward": LAST_LAYER, "layer_backward": LAST_LAYER, "first_layer_backward": FIRST_LAYER,
                 "final_norm_backward": FINAL_NORM}


def _moment_symbols(phase: str) -> dict[str, Expr]:
    """The worst moment of a phase inside a layer (a MOMENTS row, or none), and for the last layer what it changes
    of each saved group (part name -> bytes)."""
    kind = MOMENT_PHASES[phase]
    body = MOMENT_BODIES[phase]
    holds = both(sym("has_activations"), HEAD) if phase == "final_norm_backward" else sym("has_activations")
    out = {f"moment_{phase}": when(holds, best(sym(f"moments_{kind}"), body), 0)}
    if phase not in ("first_layer_backward", "final_norm_backward"):
        out[f"change_{phase}"] = when(sym(f"moment_{phase}"), by(table(*(
            row(1, part=f"activations/{g}", delta=within(sym(f"moment_{phase}"), _group_delta(g)))
            for g in LAYER_GROUPS), row(OP_SAC, part=OP_OUTPUTS, delta=within(sym(f"moment_{phase}"),
                                                                                OP_OUTPUTS_DELTA))),
            "part", sym("delta")), by(table(), "part", 0))
    return out


# The reserved parts on top of what is live (`allocated`, a row field where this is summed): each rounded up.
RESERVED = sum((when(rule.when, ceil(rule.bytes), 0) for rule in OVERHEADS.parts), Expr("num", 0))

STEP = RuleSet(symbols={
    **SHARDING, **OPTIMIZER_STEP, **dequant.SYMBOLS, **GRAD_BUFFERS,
    # The parts as the GPU must hold them: a paged optimizer's paged states can sit in host memory
    # (builder.model.paging), so its moments count only what stays a plain GPU tensor.
    "step_parts": each(sym("parts"), row(1, name=sym("name"), bucket=sym("bucket"), bytes=when(
        both(sym("paged"), isin(sym("name"), *PAGED_PARTS)),
        sym("bytes") - floor(sym("bytes") * sym("paged_share") * CODE_SHARE), sym("bytes")))),
    "part_bytes": by(sym("parts"), "name", sym("bytes")),
    "bucket_bytes": by(sym("parts"), "bucket", sym("bytes")),
    "has_activations": get(sym("bucket_bytes"), "activations", 0) > 0,
    **{name: rule for phase in MOMENT_PHASES for name, rule in _moment_symbols(phase).items()},
    **{f"step_{phase}": _rows(phase) for phase in PHASES},
    # The moments of the step there are (a phase inside a layer only where one of its moments holds), with
    # what is live then; the bytes of each with the reserved parts on top; the highest, the first on ties.
    # The optimizer's step runs inside backward when in_backward holds: no step phase follows. A checkpoint save is a
    # moment only when the run saves one (checkpoint_save).
    "step_live": table(*(row(sym(f"moment_{phase}") if phase in MOMENT_PHASES else
                             negate(sym("in_backward")) if phase == "optimizer_step" else
                             ne(sym("checkpoint_save"), "none") if phase == "checkpoint_save" else
                             both(HEAD, either(CHUNKED, FLOAT8_HEAD)) if phase == "head_backward" else
                             both(HEAD, FLOAT8_HEAD) if phase == "head_forward" else 1, phase=phase,
                             allocated=total(sym(f"step_{phase}"), sym("bytes"))) for phase in PHASES)),
    "step_totals": by(sym("step_live"), "phase", sym("allocated") + RESERVED),
    "peak_phase": top(sym("step_totals")),
    "step_need": at(sym("step_totals"), sym("peak_phase")),
}, parts=())
