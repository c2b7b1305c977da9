"""What the rules read: one pipeline stage of a configured run as flat, named inputs.

Names are full words (the calculator's controls and the URL state use the same ones where they have
one), numbers are exact, choices are their names ("" for none), flags are 0 or 1, and tables (the bytes
of each dtype, the parameter tensors) are mappings and lists of rows. The rule sets of builder.model
(states, serving, overheads, ...) read only these and the symbols they derive themselves. What a
stage holds (dense, expert, linear, one block, the root unit) comes from builder.model.placement.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from builder.model.architecture import Architecture, param_count, parameter_tensors
from builder.model.config import Config, _shard_stage
from builder.model.placement import Stage, holding
from builder.model.units import DTYPE_BYTES

# An absent architecture (a raw parameter count): every shape input is 0 and every choice "".
NO_ARCHITECTURE = {"has_architecture": 0, "model_name": "", "layers": 0, "hidden": 0, "heads": 0, "kv_heads": 0,
                   "head_dim": 0, "ffn": 0, "expert_ffn": 0, "vocab": 0, "experts": 0, "top_k": 0, "sliding_window": 0,
                   "mlp": "", "norm": "", "tied_embeddings": 0, "tensors": []}


def architecture_inputs(arch: Architecture | None) -> dict[str, Any]:
    """An architecture's shape as the rules read it (the custom-architecture controls' names), with its
    parameter tensors as rows of (dim0, the product of the other dims, count)."""
    if arch is None:
        return dict(NO_ARCHITECTURE)
    return {"has_architecture": 1, "model_name": arch.name, "layers": arch.layers, "hidden": arch.hidden,
            "heads": arch.heads, "kv_heads": arch.n_kv_heads, "head_dim": arch.d_head, "ffn": arch.ffn,
            "expert_ffn": arch.n_expert_ffn, "vocab": arch.vocab, "experts": arch.experts, "top_k": arch.top_k,
            "sliding_window": arch.sliding_window or 0, "mlp": arch.mlp, "norm": arch.norm,
            "tied_embeddings": int(arch.tied_embeddings),
            # Per-tensor shapes are modelled for dense layers (the only ones FSDP's exact chunks are counted for).
            "tensors": [] if arch.is_moe else [{"dim0": shape[0], "rest": math.prod(shape[1:]), "count": count}
                                               for shape, count in parameter_tensors(arch)]}


def config_inputs(config: Config) -> dict[str, Any]:
    """The run's settings as the rules read them (the precision policy resolved to one dtype per state)."""
    policy = config.policy
    return {"mode": config.mode, "micro_batch": config.micro_batch, "seq_len": config.seq_len,
            "grad_accum": config.grad_accum, "pp_schedule": config.pp_schedule,
            "pp_virtual_stages": config.pp_virtual_stages,
            "params": param_count(config.model) if config.model else int(config.params or 0),
            "dp": config.dp, "tp": config.tp, "pp": config.pp, "cp": config.cp, "ep": config.ep,
            "shard_stage": _shard_stage(config), "fsdp": config.fsdp or "",
            "fsdp_shard_group": config.fsdp_shard_group or 0, "gpus_per_node": config.gpus_per_node,
            "offload": config.offload, "optimizer": config.optimizer,
            "param_dtype": policy.param, "master_dtype": policy.master or "", "grad_dtype": policy.grad,
            "optimizer_state_dtype": policy.optimizer_state, "chosen_state_dtype": config.optimizer_state_dtype or "",
            "activation_dtype": policy.activation, "grad_accum_dtype": config.grad_accum_dtype or "",
            "reduce_dtype": config.reduce_dtype or "", "kv_dtype": config.kv_dtype or "",
            "lora_rank": config.lora_rank, "lora_targets": list(config.lora_targets), "qlora": int(config.qlora),
            "qlora_double_quant": int(config.qlora_double_quant), "batch": config.batch, "context": config.context,
            "allocator_reserve": Fraction(str(config.allocator_reserve)),
            "overhead_fraction": Fraction(str(config.overhead_fraction)), "overhead_bytes": config.overhead_bytes,
            "cuda_context_bytes": config.cuda_context_bytes, "dtype_bytes": DTYPE_BYTES}


def rule_inputs(arch: Architecture | None, config: Config, stage: Stage) -> dict[str, Any]:
    """Everything a rule set may read for one stage of `config` (its architecture `arch`)."""
    held = holding(arch, config, stage)
    return {**architecture_inputs(arch), **config_inputs(config), "stage_layers": stage.layers,
            "dense": held.dense, "expert": held.expert, "linear": held.linear, "layer_unit": held.layer_unit,
            "root_unit": held.root_unit}
