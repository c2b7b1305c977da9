"""What the rules read: one pipeline stage of a configured run as flat, named inputs.

Names are full words (the calculator's controls and the URL state use the same ones where they have
one), numbers are exact, choices are their names ("" for none), flags are 0 or 1, and tables (the bytes
of each dtype, the parameter tensors) are mappings and lists of rows. The rule sets of builder.model
(states, serving, overheads, ...) read only these and the symbols they derive themselves. What a
stage holds (dense, expert, linear, one block, the root unit) comes from builder.model.placement's rules.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from typing import Any

from builder.model.architecture import Architecture, param_count, shape_with_tensors
from builder.model.config import Config, _shard_stage
from builder.model.expr import exact
from builder.model.placement import CUSTOM_SHARDED_LAYERS, HOLDING, Stage, stages_of
from builder.model.buckets import DEFAULTS as BUCKET_OPTIONS, UNSET as BUCKET_UNSET
from builder.model.ranges import RANGE_OF
from builder.model.units import DTYPE_BYTES
from builder.model.zero3 import ASSUMED_NONE, DEFAULTS as ZERO3_OPTIONS, assumed_inputs

# An absent architecture (a raw parameter count): every shape input is 0 and every choice "".
NO_ARCHITECTURE = {"has_architecture": 0, "model_name": "", "model_family": "", "layers": 0, "hidden": 0, "heads": 0,
                   "kv_heads": 0,
                   "head_dim": 0, "ffn": 0, "expert_ffn": 0, "vocab": 0, "experts": 0, "top_k": 0, "shared_experts": 0,
                   "sliding_window": 0, "mlp": "", "norm": "", "tied_embeddings": 0, "position_embeddings": 0,
                   "fused_qkv": 0, "qkv_bias": 0, "out_bias": 0, "mlp_bias": 0, "qk_norm": 0, "activation_function": "",
                   "sliding_window_pattern": 0, "kv_lora_rank": 0, "qk_rope_head_dim": 0, "q_lora_rank": 0,
                   "v_head_dim": 0, "first_dense_layers": 0, "router_bias": 0, "sandwich_norms": 0,
                   "moe_block": "", "norm_topk": 0, "group_limited": 0, "checkpoint_quantization": "",
                   "checkpoint_block_rows": 0, "checkpoint_block_cols": 0, "attention_sinks": 0, "fused_projections": 0,
                   "parameter_tensors": [],
                   "parameters": 0}


def architecture_inputs(arch: Architecture | None) -> dict[str, Any]:
    """An architecture's shape as the rules read it (the custom-architecture controls' names), with its
    parameter-tensor table and parameter count (builder.model.tensors)."""
    return dict(NO_ARCHITECTURE) if arch is None else shape_with_tensors(arch)


def config_inputs(config: Config) -> dict[str, Any]:
    """The run's settings as the rules read them (the precision policy resolved to one dtype per state). A fresh
    dict each call, worked out once for the last configurations asked for: an estimate asks four or five times."""
    return dict(_config_inputs(config))


@lru_cache(maxsize=64)
def _config_inputs(config: Config) -> dict[str, Any]:
    policy = config.policy
    return {"mode": config.mode, "micro_batch": config.micro_batch, "seq_len": config.seq_len,
            "grad_accum": config.grad_accum, "pp_schedule": config.pp_schedule,
            "pp_virtual_stages": config.pp_virtual_stages,
            "params": param_count(config.model) if config.model else int(config.params or 0),
            "dp": config.dp, "tp": config.tp, "pp": config.pp, "cp": config.cp, "ep": config.ep,
            "shard_stage": _shard_stage(config), "fsdp": config.fsdp or "",
            "fsdp_shard_group": config.fsdp_shard_group or 0, "gpus_per_node": config.gpus_per_node,
            "custom_sharded_layers": custom_layers_input(config.custom_sharded_layers),
            "offload": config.offload, "optimizer": config.optimizer, "optimizer_impl": config.optimizer_impl or "",
            "param_dtype": policy.param, "master_dtype": policy.master or "", "grad_dtype": policy.grad,
            "optimizer_state_dtype": policy.optimizer_state, "chosen_state_dtype": config.optimizer_state_dtype or "",
            "exp_avg_dtype": policy.exp_avg or "", "exp_avg_sq_dtype": policy.exp_avg_sq or "",
            "chosen_exp_avg_dtype": config.exp_avg_dtype or "",
            "chosen_exp_avg_sq_dtype": config.exp_avg_sq_dtype or "",
            "msamp": int(policy.msamp), "grad_buffer": int(policy.grad_buffer),
            "gradient_as_bucket_view": int(config.gradient_as_bucket_view),
            "activation_dtype": policy.activation, "autocast": int(policy.autocast),
            "recipe": policy.recipe, "quantised_params": int(policy.quantised_params), "recompute": config.recompute,
            "recompute_layers": config.recompute_layers,
            "attention": config.attention, "padded": int(config.padded), "loss": config.loss,
            "dropout": int(config.dropout),
            "offload_activations": int(config.offload_activations), "checkpoint_save": config.checkpoint_save,
            "compile": int(config.compile), "float8": config.float8 or "",
            "enable_fsdp_float8_all_gather": int(config.enable_fsdp_float8_all_gather),
            "float8_filter_output": int(config.float8_filter_output),
            "implementation": config.implementation,
            "activation_formula": config.activation_formula, "sequence_parallel": int(config.sequence_parallel),
            "grad_accum_dtype": config.grad_accum_dtype or "",
            "reduce_dtype": config.reduce_dtype or "", "kv_dtype": config.kv_dtype or "",
            "weight_scales": config.weight_scales or "",
            "lora_rank": config.lora_rank, "lora_targets": list(config.lora_targets),
            "lora_dropout": Fraction(str(config.lora_dropout)), "qlora": int(config.qlora),
            "qlora_double_quant": int(config.qlora_double_quant), "kbit_prepare": config.kbit_prepare,
            "batch": config.batch, "context": config.context,
            "allocator_reserve": Fraction(str(config.allocator_reserve)),
            "overhead_fraction": Fraction(str(config.overhead_fraction)), "overhead_bytes": config.overhead_bytes,
            "cuda_context_bytes": config.cuda_context_bytes, "dtype_bytes": DTYPE_BYTES,
            **{option: RANGE_OF[option].unset if getattr(config, option) is None else getattr(config, option)
               for option in (*ZERO3_OPTIONS, *BUCKET_OPTIONS)},
            "overlap_comm": BUCKET_UNSET if config.overlap_comm is None else int(config.overlap_comm),
            "contiguous_gradients": int(config.contiguous_gradients),
            **ASSUMED_NONE}


def custom_layers_input(layers: tuple[str, ...]) -> str:
    """torchtune's custom_sharded_layers as the rules read them: one text, the names listed in
    CUSTOM_SHARDED_LAYERS' order joined by commas ("" for none), the calculator's choice for the same layout."""
    return ",".join(name for name in CUSTOM_SHARDED_LAYERS if name in layers)


# The dtype sizes as the rules read them (expr.exact): whole sizes as ints, the same values. config_inputs keeps
# DTYPE_BYTES itself, whose Fractions the widgets send as they always have (full_model.run_base).
RULE_DTYPE_BYTES = {name: exact(size) for name, size in DTYPE_BYTES.items()}


def run_inputs(arch: Architecture | None, config: Config) -> dict[str, Any]:
    """The inputs of a run, before a pipeline stage is chosen (the dtype sizes as RULE_DTYPE_BYTES); a bare count
    with an assumed shape (Config.shaped_like) gets that shape's terms (builder.model.zero3.assumed_inputs)."""
    inputs = {**architecture_inputs(arch), **config_inputs(config), "dtype_bytes": RULE_DTYPE_BYTES}
    shaped = config.shaped_like
    if arch is None and shaped is not None:
        whole = {**architecture_inputs(shaped), **config_inputs(config)}
        only = stages_of(whole)[0]
        inputs.update(assumed_inputs(HOLDING.environment({**whole, **only.inputs()}),
                                     shaped.extra.get("display", shaped.name)))
    return inputs


def stages(arch: Architecture | None, config: Config) -> list[Stage]:
    """The pipeline stages worth evaluating (builder.model.placement.STAGES)."""
    return stages_of(run_inputs(arch, config))


def run_key(config: Config) -> tuple[Config, str | None]:
    """What the rules' answers for `config` depend on, as a memo key: the config, and the assumed shape's display
    name, which run_inputs reads and an Architecture's equality leaves out."""
    shaped = config.shaped_like
    return config, shaped.extra.get("display") if shaped is not None else None


def rule_inputs(arch: Architecture | None, config: Config, stage: Stage) -> dict[str, Any]:
    """Everything a rule set may read for one stage of `config` (its architecture `arch`): the run's inputs,
    the stage's and what one GPU of the stage holds (builder.model.placement.HOLDING). A fresh dict each call
    (a caller may add to it), worked out once for the last few stages asked for (run_key): an estimate asks
    twice."""
    return dict(_rule_inputs(arch, stage, *run_key(config)))


@lru_cache(maxsize=16)
def _rule_inputs(arch: Architecture | None, stage: Stage, config: Config, shaped_display: str | None
                 ) -> dict[str, Any]:
    return HOLDING.environment({**run_inputs(arch, config), **stage.inputs()})
