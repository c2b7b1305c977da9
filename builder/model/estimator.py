"""estimate(config) -> Breakdown: per-GPU memory as named, cited parts.

Order of work: place parameters on this GPU (placement.py), then model states
(weights, master copy, gradients, optimizer states) sharded by ZeRO/FSDP, then
activations (activations.py) or, when serving, the KV cache, then communication
buffers and the named overheads. Pipeline parallelism is evaluated per stage and the
fuller stage is reported.
"""

from __future__ import annotations

from builder.model.activations import ACTIVATIONS, OP_CONDITIONS
from builder.model.architecture import Architecture, param_count
from builder.model.breakdown import Breakdown, Part, join_parts
from builder.model.config import Config, validate_config
from builder.model.expr import derive
from builder.model.inputs import architecture_inputs, config_inputs, rule_inputs, stages
from builder.model.notation import SYMBOLS
from builder.model.overheads import OVERHEADS
from builder.model.autocast import AUTOCAST_COPIES
from builder.model.checkpoint import CHECKPOINT_SAVE
from builder.model.placement import Stage
from builder.model.serving import SERVING
from builder.model.states import ADAPTERS, COMM, HOST, MODEL_STATES

# ---------------------------------------------------------------------------------------
# Model states (builder.model.states)
# ---------------------------------------------------------------------------------------

def model_state_parts(inputs: dict, config: Config, words: bool = True) -> list[Part]:
    """Weights, master copy, gradients, adapters and optimizer states (builder.model.states' rules)."""
    if config.optimizer == "adafactor" and config.mode == "train" and config.model is None:
        raise ValueError("optimizer: adafactor's factored state needs an architecture, not a raw count")
    return MODEL_STATES.evaluate(inputs, words)


# ---------------------------------------------------------------------------------------
# Activations
# ---------------------------------------------------------------------------------------

def activation_parts(arch: Architecture | None, inputs: dict, words: bool = True) -> list[Part]:
    """Saved activations for the micro-batches in flight on this stage (builder.model.activations' rules)."""
    return ACTIVATIONS.evaluate(OP_CONDITIONS.environment(inputs), words) if arch is not None else []


def training_activation_parts(arch: Architecture | None, inputs: dict, words: bool = True) -> list[Part]:
    """Every part a training stage prices under 'activations/': the saved activations and the autocast copies of
    the weights (builder.model.autocast), in the estimate's order."""
    return activation_parts(arch, inputs, words) + AUTOCAST_COPIES.evaluate(inputs, words)


# ---------------------------------------------------------------------------------------
# Serving
# ---------------------------------------------------------------------------------------

def serving_parts(arch: Architecture | None, config: Config, stage: Stage, inputs: dict, words: bool = True
                  ) -> list[Part]:
    """KV cache (GQA- and sliding-window-aware) and a small activation working set (builder.model.serving)."""
    if arch is None:
        return []
    return SERVING.evaluate(inputs, words)


# ---------------------------------------------------------------------------------------
# Communication buffers, offload and overheads
# ---------------------------------------------------------------------------------------

def overhead_parts(config: Config, allocated: int, words: bool = True) -> list[Part]:
    """CUDA context, allocator reserve and a framework percentage of `allocated`, as named assumptions
    (builder.model.overheads)."""
    return OVERHEADS.evaluate({**config_inputs(config), "allocated": allocated}, words)


def offload_parts(parts: list[Part], inputs: dict) -> tuple[list[Part], list[Part]]:
    """Move offloaded states to the host (the buckets, or parts by full name, of placement.HOLDING's `offloaded`):
    (GPU parts, host parts per GPU)."""
    moved = {r["bucket"] for r in inputs["offloaded"]}
    stays = [p.bucket not in moved and p.name not in moved for p in parts]
    return [p for p, kept in zip(parts, stays) if kept], [p for p, kept in zip(parts, stays) if not kept]


# ---------------------------------------------------------------------------------------
# The orchestrator
# ---------------------------------------------------------------------------------------

def estimate_stage(config: Config, stage: Stage, words: bool = True) -> tuple[list[Part], list[Part]]:
    """GPU parts and host parts (per GPU) for one pipeline stage (words=False: numbers only, PartRule.part)."""
    arch = config.model
    inputs = rule_inputs(arch, config, stage)
    parts = model_state_parts(inputs, config, words)
    if config.mode == "train":
        parts += training_activation_parts(arch, inputs, words)
        parts += CHECKPOINT_SAVE.evaluate(inputs, words)
    else:
        parts += serving_parts(arch, config, stage, inputs, words)
    parts += COMM.evaluate(inputs, words)
    gpu, host = offload_parts(parts, inputs)
    host += HOST.evaluate(inputs, words)
    allocated = sum(p.bytes for p in gpu)
    gpu += overhead_parts(config, allocated, words)
    return gpu, host


def stage_estimates(config: Config, words: bool = True) -> list[tuple[Stage, list[Part], list[Part]]]:
    """(stage, GPU parts, host parts per GPU) for every pipeline stage worth evaluating (config validated)."""
    validate_config(config)
    return [(stage, *estimate_stage(config, stage, words)) for stage in stages(config.model, config)]


def estimate(config: Config, words: bool = True) -> Breakdown:
    """Per-GPU memory of the fullest pipeline stage, as named parts that sum to the total. words=False: the same
    parts and numbers without their words (formulas, sources, per-unit words, notes and the symbols' meanings), for
    a caller that reads numbers only (the Validation page's comparisons)."""
    return breakdown_of(config, stage_estimates(config, words), words)


def saved_activations(config: Config) -> int | None:
    """`estimate(config, words=False).get("activations", default=None, transient=False)`: the activation bytes saved
    for backward on the reported GPU (None: no activation part), for a caller that wants that one number (the
    Validation page asks it 448 times, twice per measured case). A training run with one pipeline stage to evaluate (every
    measured case) is priced by the rules of 'activations/' parts alone (training_activation_parts, then the
    offload that may move them): the model states, checkpoint saves, buffers and overheads, a third of an
    estimate's work, cannot change the number, since with one stage there is no fuller stage for them to pick. The
    configuration is checked as `estimate` checks it; a rule set this leaves out is not evaluated, so it refuses
    nothing here. Any other run gets the whole estimate."""
    validate_config(config)
    evaluated = stages(config.model, config)
    if config.mode != "train" or len(evaluated) != 1:
        return estimate(config, words=False).get("activations", default=None, transient=False)
    inputs = rule_inputs(config.model, config, evaluated[0])
    gpu, _ = offload_parts(training_activation_parts(config.model, inputs, words=False), inputs)
    return Breakdown(params=0, parts=join_parts(gpu)).get("activations", default=None, transient=False)


def breakdown_of(config: Config, evaluated: list[tuple[Stage, list[Part], list[Part]]], words: bool = True
                 ) -> Breakdown:
    """The Breakdown of the stage whose parts sum the highest (the first such) among `stage_estimates`."""
    arch = config.model
    fullest = max(range(len(evaluated)), key=lambda i: (sum(p.bytes for p in evaluated[i][1]), -i))
    stage, gpu, host = evaluated[fullest]
    per_node = int(rule_inputs(arch, config, stage)["host_copies"])
    host_parts = tuple(Part(f"host/{p.name}", p.bytes * per_node,
                            f"{per_node} GPUs per node x ({p.formula})" if words else "",
                            p.source, p.per_unit, p.simplification, rate=p.rate) for p in host)
    params = param_count(arch) if arch else int(config.params or 0)
    trainable = params
    if config.lora_rank and arch is not None:
        # The adapters rule (builder.model.states) for the whole model on one rank.
        whole_model = {**architecture_inputs(arch), **config_inputs(config.with_changes(tp=1)),
                       "stage_layers": arch.layers, "stage_has_head": 1}
        trainable = int(derive(ADAPTERS, whole_model)["adapters"])
    notes = []
    if stage.name != "only":
        notes.append(f"pipeline stage reported: {stage.name} of {config.pp} ({stage.layers} layers, "
                     f"{float(stage.in_flight):g} micro-batches in flight)")
    if config.pp > 1 and config.grad_accum < config.pp:
        notes.append(f"only {config.grad_accum} micro-batch(es) per step, fewer than the {config.pp} stages: "
                     "the pipeline holds that many in flight")
    return Breakdown(params=params, parts=join_parts(gpu), host_parts=join_parts(host_parts),
                     trainable_params=trainable if config.mode == "train" else 0, notes=tuple(notes),
                     where=_symbols(config) if words else {})


def _symbols(config: Config) -> dict[str, str]:
    """Symbols used in part formulas, with their meanings (builder.model.notation) and values."""
    arch = config.model
    values: dict[str, object] = {"N": None, "N_gpu": None, "b": config.micro_batch, "s": config.seq_len}
    if arch is not None:
        values.update({"L": arch.layers, "h": arch.hidden, "a": arch.heads, "V": arch.vocab})
    if config.tp > 1:
        values["t"] = config.tp
    return {name: SYMBOLS[name].meaning + ("" if value is None else f" = {value}") for name, value in values.items()}
