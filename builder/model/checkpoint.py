"""Saving a checkpoint between steps, as rules: what each framework's save adds to GPU memory.

A save runs after the optimizer step, with no activations live: the model states (and the gradients, which the
loop this model assumes frees only at the next step's zero_grad) plus the save's own temporaries. These rules
price the temporaries on one pipeline stage's GPU as one part per kind (copies made for the state dict, units
gathered while it is made); builder.model.step counts them in its "checkpoint save" moment only, which exists
when the `checkpoint_save` option names a save. Each save is the framework's own, read in its code:

- 'torch-save': torch.save({'model': model.state_dict(), 'optimizer': optimizer.state_dict()}) on a GPU that holds
  whole tensors. The state dicts hold detached views and the optimizer's own state tensors (no copy), and torch.save
  copies each storage to host memory one at a time before writing it: nothing on the GPU.
- 'full-state-dict': FSDP's StateDictType.FULL_STATE_DICT with FullStateDictConfig's defaults (offload_to_cpu=False,
  rank0_only=False): every unit is all-gathered in full precision and each parameter cloned on the GPU, so the
  clones of the whole model stay there; the root unit stays gathered through the whole call.
- 'full-state-dict-offload': the same with offload_to_cpu=True and rank0_only=True (accelerate's choice): each unit
  gathered moves to host memory before its clones are made, so one unit at a time is on the GPU; under NO_SHARD
  there is nothing to gather and the clones stay on the GPU (offloading applies only to a sharded strategy).
- 'sharded-state-dict': FSDP's SHARDED_STATE_DICT (ShardedStateDictConfig's default): each unit is gathered, and
  this rank's dim-0 chunk of every parameter cloned into a ShardedTensor; the root unit stays gathered.
- 'dcp': torch.distributed.checkpoint.save (or async_save) of the sharded state dict of FSDP2's fully_shard
  (get_model_state_dict / get_optimizer_state_dict): the local shards are written as they are, each copied to
  host memory (async_save stages into host memory): nothing on the GPU.
- 'deepspeed': DeepSpeed's engine.save_checkpoint: each rank's module state dict (under ZeRO-3 its partitioned
  placeholders) and its optimizer's partitions, as references, through torch.save: nothing on the GPU.
- 'deepspeed-16bit': the same and engine.save_16bit_model with zero_optimization.
  stage3_gather_16bit_weights_on_model_save: every module's own parameters are gathered in turn (on every rank),
  moved to host memory on rank 0 and released: one module's 16-bit parameters on the GPU at a time.

Not modelled (named on the Sharding page): Megatron-LM's distributed checkpointing, FSDP2's full state dict
(get_model_state_dict with full_state_dict=True), FSDP's full optimizer state dict, LOCAL_STATE_DICT.
"""

from __future__ import annotations

from builder.model.expr import both, either, eq, fmt, isin, maximum, ne, negate, sym, when
from builder.model.optimizers import OPTIMIZER_STEP
from builder.model.partrules import PartRule, RuleSet, bytes_of
from builder.model.cite import Cite
from builder.model.states import SHARDING

TORCH_SAVE = (Cite("pytorch-2-13", "torch/nn/modules/module.py _save_to_state_dict") + " (param.detach(): a view), "
              + Cite("pytorch-2-13", "torch/optim/optimizer.py state_dict") + " (the state tensors themselves), "
              + Cite("pytorch-2-13", "torch/serialization.py _save")
              + " (each storage copied to host memory, storage.cpu(), before it is written)")
FULL_STATE_DICT = (Cite("pytorch-2-13", "torch/distributed/fsdp/_state_dict_utils.py _full_post_state_dict_hook")
                   + " (state_dict[fqn].detach().clone() inside _unshard_fsdp_state_params), "
                   "_unshard_param_utils.py _unshard_fsdp_state_params, _flat_param.py _force_full_precision "
                   "(SUMMON_FULL_PARAMS gathers the full-precision parameters)")
FULL_OFFLOAD = (Cite("pytorch-2-13", "torch/distributed/fsdp/_unshard_param_utils.py _unshard_fsdp_state_params")
                + " (offload_to_cpu and handle.uses_sharded_strategy: handle.to_cpu()), _flat_param.py to_cpu (the "
                "gathered unit moved to host memory, its GPU copy freed); "
                + Cite("accelerate-1-15", "FullyShardedDataParallelPlugin")
                + " (FULL_STATE_DICT: offload_to_cpu=True, rank0_only=True)")
SHARDED_STATE_DICT = (Cite("pytorch-2-13", "torch/distributed/fsdp/_state_dict_utils.py _sharded_pre_state_dict_hook")
                      + " (unshard, offload_to_cpu=False), _sharded_post_state_dict_hook and _shard_utils.py "
                      "_create_chunk_sharded_tensor (chunks[rank].clone())")
DCP = (Cite("pytorch-2-13", "torch/distributed/checkpoint/filesystem.py") + " (_SerialCpuLoader and "
       "_OverlappingCpuLoader: each tensor copied to host memory as it is written), staging.py (async_save stages "
       "into host memory)")
DEEPSPEED = (Cite("deepspeed-edaa722", "deepspeed/runtime/engine.py _save_checkpoint and _save_zero_checkpoint")
             + " (module and optimizer state dicts as they are, written by the checkpoint engine's torch.save), "
             + Cite("deepspeed-edaa722", "deepspeed/runtime/zero/stage3.py _rigid_state_dict")
             + " (fp32 partitions as they are)")
DEEPSPEED_16BIT = (Cite("deepspeed-edaa722", "deepspeed/runtime/engine.py _zero3_consolidated_16bit_state_dict")
                   + " (GatheredParameters(module.parameters(recurse=False), modifier_rank=0), then "
                   "param.detach().cpu() on rank 0: one module at a time) and save_16bit_model")

FSDP_SAVES = ("full-state-dict", "full-state-dict-offload", "sharded-state-dict")
DEEPSPEED_SAVES = ("deepspeed", "deepspeed-16bit")
# The saves that gather a unit or a module, so need an architecture's shapes.
GATHERING = (*FSDP_SAVES, "deepspeed-16bit")

SAVE = sym("checkpoint_save")
TRAIN = eq(sym("mode"), "train")
# FSDP gathers and clones in the parameters' own (full) precision: the fp32 master under mixed precision.
FULL_PRECISION = when(sym("master_dtype"), sym("master_dtype"), sym("param_dtype"))
full_bytes = bytes_of(FULL_PRECISION)
# A strategy with something to gather (FULL_SHARD, SHARD_GRAD_OP, HYBRID_SHARD; not NO_SHARD).
SHARDS = both(sym("fsdp"), ne(sym("fsdp"), "NO_SHARD"))
# The stage's parameters (every rank of the stage's tensor-parallel split), and this rank's dim-0 chunk of them.
STAGE = sym("dense") + sym("expert")
CHUNK = sym("dense") / sym("shard_group") + sym("expert") / sym("expert_shard_group")
# The largest unit FSDP gathers: one transformer block, the root unit (embeddings, final norm, head) or, wrapped as
# units of their own (torchtune's custom_sharded_layers: builder.model.placement), the token embedding and the output
# layer, which then leave the root unit (fsdp_root) the rest.
LARGEST_UNIT = maximum(maximum(sym("layer_unit"), sym("fsdp_root")), maximum(sym("embedding_unit"), sym("output_unit")))
# The largest unit but the root (gathered beside it while the root stays gathered).
LARGEST_CHILD = maximum(sym("layer_unit"), maximum(sym("embedding_unit"), sym("output_unit")))

SHARDED = eq(SAVE, "sharded-state-dict")
OFFLOADED = eq(SAVE, "full-state-dict-offload")

CHECKPOINT_SAVE = RuleSet(symbols={**SHARDING, "largest_tensor": OPTIMIZER_STEP["largest_tensor"]}, parts=(
    # The parameters each save clones on the GPU: the whole stage (FULL_STATE_DICT; offloaded, only under NO_SHARD),
    # or this rank's chunk of every parameter (SHARDED_STATE_DICT).
    PartRule("checkpoint/state_dict_copies", when(SHARDED, CHUNK, STAGE) * full_bytes,
             when(SHARDED, "(N_stage / ranks) x bytes(full precision)", "N_stage x bytes(full precision)"),
             when(SHARDED, SHARDED_STATE_DICT, when(OFFLOADED, FULL_OFFLOAD, FULL_STATE_DICT)),
             when(SHARDED, fmt("this rank's chunk of every parameter ({0})", FULL_PRECISION),
                  fmt("every parameter, cloned ({0})", FULL_PRECISION)),
             when(SHARDED, "simplification: every chunk counted as cloned while the last units are gathered "
                           "(dim-0 chunks rounded as an even split)",
                  when(OFFLOADED, "NO_SHARD has nothing to gather, so offload_to_cpu does not apply and the clones "
                                  "stay on the GPU", "the clones, made unit by unit, stay on the GPU until the "
                                                     "state dict is returned")),
             when=both(TRAIN, either(isin(SAVE, "full-state-dict", "sharded-state-dict"),
                                     both(OFFLOADED, negate(SHARDS)))), transient=True),
    # The units gathered at the save's fullest moment: FULL_STATE_DICT's root unit (gathered through the call) and
    # the last block, or the root's own clones, whichever is larger; offloaded, one unit at a time;
    # SHARDED_STATE_DICT's root unit and one block.
    PartRule("checkpoint/gathered_units", when(SHARDED, sym("fsdp_root") + LARGEST_CHILD, LARGEST_UNIT)
             * full_bytes,
             when(SHARDED, when(sym("custom_sharded_layers"), "(root unit + largest other unit) x bytes(full precision)",
                                "(root unit + one block) x bytes(full precision)"),
                  when(sym("custom_sharded_layers"), "largest unit x bytes(full precision)",
                       "max(one block, root unit) x bytes(full precision)")),
             when(SHARDED, SHARDED_STATE_DICT, when(OFFLOADED, FULL_OFFLOAD, FULL_STATE_DICT)),
             when(SHARDED, when(sym("custom_sharded_layers"), "root unit + the largest other unit", "root unit + 1 block"),
                  "the largest unit"),
             when(SHARDED, "the root unit stays gathered through the call while each other unit is gathered in turn",
                  when(OFFLOADED, "one unit gathered at a time, moved to host memory before it is cloned",
                       when(sym("custom_sharded_layers"),
                            "simplification: the largest unit (a block, the root unit, or the token embedding or "
                            "output layer as units of their own) gathered beside the clones",
                            "simplification: the root unit's own clones, or the last block gathered beside the root "
                            "unit, whichever is larger"))),
             when=both(TRAIN, sym("has_architecture"), SHARDS, isin(SAVE, *FSDP_SAVES)), transient=True),
    # DeepSpeed's 16-bit consolidation: one module's own parameters gathered at a time.
    PartRule("checkpoint/gathered_units", sym("largest_tensor") * bytes_of(sym("param_dtype")),
             "largest module's parameters x bytes(param dtype)", DEEPSPEED_16BIT,
             fmt("1 module ({0})", sym("param_dtype")),
             "simplification: the largest parameter tensor stands for the largest module (a bias beside it left "
             "out); the consolidated state dict itself (2 B x N) is in rank 0's host memory",
             when=both(TRAIN, sym("has_architecture"), eq(SAVE, "deepspeed-16bit")), transient=True),
))
