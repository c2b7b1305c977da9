"""DeepSpeed ZeRO-3's gathered parameters as rules: what its parameter coordinator keeps whole on a GPU.

Read from DeepSpeed (commit edaa722):
- deepspeed/runtime/zero/config.py: stage3_prefetch_bucket_size 5e7, stage3_param_persistence_threshold 1e5,
  stage3_max_live_parameters 1e9, stage3_max_reuse_distance 1e9 (all counts of parameter elements);
- deepspeed/runtime/zero/parameter_offload.py mark_persistent_parameters and partition_parameters.py (ds_persist):
  a parameter of at most stage3_param_persistence_threshold elements is never partitioned (norms, biases), up to
  stage3_model_persistence_threshold (sys.maxsize: no limit) in all;
- deepspeed/runtime/zero/partitioned_param_coordinator.py: parameters are gathered module by module (a module's own
  parameters, one nn.Linear), in a trace recorded over a forward and the backward after it. fetch_sub_module gathers
  the current module, then prefetches the next parameters of the trace, whole, up to
  min(stage3_max_live_parameters - parameters gathered now, stage3_prefetch_bucket_size) elements;
  __params_to_release keeps a module's parameters gathered when the trace uses them again within
  stage3_max_reuse_distance elements. A module whose forward is followed by A elements of other modules is used
  again in backward after 2A (the rest of the forward, then the backward back to it): kept while 2A is under the
  distance. So the modules at the forward/backward turn stay gathered from their forward to their backward: the
  output layer always (A = 0), the last blocks while 2A < 1e9, and for a model under about 5e8 parameters
  (plus its embedding) everything.
- deepspeed/runtime/zero/stage3.py estimate_zero3_model_states_mem_needs and model_to_params: DeepSpeed's own
  estimator adds largest_layer_memory = 4 x largest_layer_params (the largest module's own parameters, gathered in
  16 bits, and their 16-bit gradients) to the sharded states; docs/code-docs/source/memory.rst prints its tables.

The peak of the gathered parameters is at the forward/backward turn: the small parameters, the module being
computed (the largest layer: the output layer, usually) with the prefetched ones, and the modules kept for reuse.
`comm/gathered_params` is what is gathered at every moment of forward and backward (small parameters, the largest
layer and the prefetch); `comm/reused_params` what the reuse distance adds around the turn
(builder.model.step counts it from the last layer's forward to its backward).

A bare parameter count has no modules: the shape comes from the catalog model nearest in size
(builder.model.assumed), worked out by the same rules (`assumed_inputs`), and the part says so.
"""

from __future__ import annotations

from typing import Any, Mapping

from builder.model.buckets import DEEPSPEED_ENGINE
from builder.model.cite import Cite
from builder.model.expr import (Expr, best, both, ceil, derive, either, eq, fmt, isin, maximum, minimum, ne, negate,
                                sym, total, when, within)
from builder.model.placement import TP_SHARE
from builder.model.tensors import NORM_TENSORS

COMMIT = "deepspeed-edaa722"  # DeepSpeed (commit edaa722), a key of content/references.toml
CONFIG_SOURCE = Cite(COMMIT, "deepspeed/runtime/zero/config.py DeepSpeedZeroConfig")
COORDINATOR = (Cite(COMMIT, "deepspeed/runtime/zero/partitioned_param_coordinator.py fetch_sub_module, "
                            "__params_to_release") + " and "
               + Cite(COMMIT, "deepspeed/runtime/zero/parameter_offload.py mark_persistent_parameters"))
ESTIMATOR = (Cite(COMMIT, "deepspeed/runtime/zero/stage3.py estimate_zero3_model_states_mem_needs")
             + ": largest_layer_memory = 4 x largest_layer_params")

# zero_optimization's stage3_* keys and DeepSpeed's defaults (config.py: pp_int(5e7), pp_int(1e5), pp_int(1e9),
# pp_int(1e9)), in elements. An option left unset reads -1 (builder.model.ranges: `unset`), then this default.
DEFAULTS = {"stage3_max_live_parameters": 10**9, "stage3_prefetch_bucket_size": 5 * 10**7,
            "stage3_param_persistence_threshold": 10**5, "stage3_max_reuse_distance": 10**9}
UNSET = -1
# What each option does, in DeepSpeed's docstrings' words (config.py), for --help and the authoring guide.
MEANINGS = {"stage3_max_live_parameters": "the maximum number of parameters resident per GPU before releasing",
            "stage3_prefetch_bucket_size": "maximum number of parameter elements to fetch ahead of use",
            "stage3_param_persistence_threshold": "do not partition parameters smaller than this threshold",
            "stage3_max_reuse_distance": "do not release a parameter if it will be reused within this threshold of "
                                         "parameters"}

# DeepSpeed's ZeRO-3: stage 3 of DeepSpeed's engine (no FSDP strategy, not Megatron-LM: builder.model.buckets).
DEEPSPEED_ZERO3 = both(eq(sym("shard_stage"), 3), DEEPSPEED_ENGINE)
KNOBS = {f"zero3_{name.removeprefix('stage3_')}": when(eq(sym(name), UNSET), default, sym(name))
         for name, default in DEFAULTS.items()}

# One tensor on this GPU (tensor parallelism splits it as builder.model.placement does) and how many of it the stage
# holds: a block's once per layer, the embeddings on the first stage, the final norm and the head on the last.
_SIZE = sym("dim0") * sym("rest") / TP_SHARE
_COPIES = sym("count") * when(sym("in_block"), sym("stage_layers"),
                              when(isin(sym("group"), "final_norm", "lm_head"), sym("stage_has_head"),
                                   sym("stage_has_embedding")))
# The shape's terms, worked out from an architecture's tensor table (builder.model.tensors) and what the stage holds
# (builder.model.placement.HOLDING), in elements on this GPU:
SHAPE: dict[str, Expr] = {
    # every tensor of at most the persistence threshold: never partitioned, so whole on every GPU
    "persistent": total(sym("parameter_tensors"),
                        when(_SIZE <= sym("zero3_param_persistence_threshold"), _SIZE * _COPIES, 0)),
    # DeepSpeed's largest_layer_params: the largest module's own parameters (a weight matrix; its bias, at most a
    # few thousand elements, left out)
    "largest_layer": within(best(sym("parameter_tensors"), when(both(sym("rest") > 1, _COPIES > 0), _SIZE, 0)),
                            _SIZE),
    # the output layer (a tied head is the embedding matrix, used again), and the final norm after the last block
    "head": when(sym("stage_has_head"), sym("vocab_rows"), 0),
    "final_norm": when(sym("stage_has_head"), sym("hidden") * NORM_TENSORS, 0),
    "block": sym("layer_unit"),
    "layers": sym("stage_layers"),
}
ASSUMED_NONE = {"assumed_model": "", **{f"assumed_{name}": 0 for name in SHAPE}}

# The terms for the run: its own architecture's, or the assumed shape's (inputs) for a bare count.
_TERMS = {f"zero3_{name}": when(sym("has_architecture"), rule, sym(f"assumed_{name}")) for name, rule in SHAPE.items()}
_WHOLE = when(sym("has_architecture"), sym("dense") + sym("expert"), sym("params"))
# The modules kept for reuse at the turn: those followed by fewer than half the reuse distance in the forward. The
# output layer always (the final norm is small, counted with the small parameters); then whole blocks from the last, the block the half-distance falls in
# counted whole; every block and the embedding when the distance reaches past the first block.
_HALF = sym("zero3_max_reuse_distance") / 2
_AFTER_BLOCKS = sym("zero3_head") + sym("zero3_final_norm")
_BLOCKS_KEPT = when(_HALF > _AFTER_BLOCKS, ceil((_HALF - _AFTER_BLOCKS) / maximum(sym("zero3_block"), 1)), 0)
# Gathered with `held` elements of modules whole (not counting the small ones): those, the prefetch DeepSpeed
# launches beside them (up to the bucket, within the live limit) and the small parameters, at most the whole model.
_GATHERED = lambda held: minimum(sym("zero3_whole"), sym("zero3_persistent") + held  # noqa: E731
                                 + minimum(sym("zero3_prefetch_bucket_size"),
                                           maximum(0, sym("zero3_max_live_parameters") - held)))
_KEPT = when(_BLOCKS_KEPT > sym("zero3_layers"), sym("zero3_whole"),
             sym("zero3_head") + _BLOCKS_KEPT * sym("zero3_block"))
SYMBOLS: dict[str, Expr] = {
    **KNOBS, **_TERMS,
    "zero3_whole": _WHOLE,
    # DeepSpeed ZeRO-3 (not FSDP) sharding the parameters, with a shape: the run's, or one assumed for a bare count.
    "zero3_gathers": both(eq(sym("mode"), "train"), DEEPSPEED_ZERO3, sym("param_ranks") > 1,
                          either(sym("has_architecture"), ne(sym("assumed_model"), ""))),
    "zero3_kept": _KEPT,
    # Elements gathered at every moment of forward and backward, and around the forward/backward turn.
    "zero3_now": _GATHERED(sym("zero3_largest_layer")),
    "zero3_turn": _GATHERED(maximum(sym("zero3_kept"), sym("zero3_largest_layer"))),
    "zero3_assumed": when(sym("has_architecture"), "",
                          fmt("assumed: shaped like {0}, the catalog model nearest in size; ", sym("assumed_model"))),
}


def assumed_inputs(shaped: Mapping[str, Any], model_name: str) -> dict[str, Any]:
    """The shape's terms (SHAPE) of an assumed architecture, as the inputs a bare count's rules read: `shaped` is
    what the rules read for that architecture's only stage (its shape, the run's settings, placement's HOLDING)."""
    env = derive({**KNOBS, **SHAPE}, shaped)
    return {"assumed_model": model_name, **{f"assumed_{name}": env[name] for name in SHAPE}}
