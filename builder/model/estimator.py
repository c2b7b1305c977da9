"""estimate(config) -> Breakdown: per-GPU memory as named, cited parts.

Order of work: place parameters on this GPU (placement.py), then model states
(weights, master copy, gradients, optimizer states) sharded by ZeRO/FSDP, then
activations (activations.py) or, when serving, the KV cache, then communication
buffers and the named overheads. Pipeline parallelism is evaluated per stage and the
fuller stage is reported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction

from builder.model import activations as act
from builder.model.architecture import Architecture, param_count, parameter_tensors
from builder.model.breakdown import Breakdown, Part, join_parts, whole_bytes
from builder.model.config import Config, _shard_stage, validate_config
from builder.model.inputs import rule_inputs
from builder.model.placement import Holding, Stage, holding, lora_params, stages
from builder.model.serving import SERVING
from builder.model.units import dtype_bytes

ZERO = "Rajbhandari et al. 2019 (ZeRO), arXiv:1910.02054, section 5 (Pos, Pos+g, Pos+g+p)"
FSDP = "Zhao et al. 2023 (PyTorch FSDP), arXiv:2304.11277, section 3"
MIXED = "Micikevicius et al. 2017, arXiv:1710.03740, section 3 (fp32 master weights)"
TM101 = "Anthony, Biderman, Schoelkopf 2023, Transformer Math 101 (EleutherAI)"
BNB = "Dettmers et al. 2021 (8-bit optimizers), arXiv:2110.02861; bitsandbytes optimizer.py: uint8 state + fp32 absmax per 256-element block"
ADAFACTOR = "Shazeer & Stern 2018 (Adafactor), arXiv:1804.04235, section 3: factored second moment (rows + columns)"
LION = "Chen et al. 2023 (Lion), arXiv:2302.06675, Algorithm 1: one momentum buffer"
LORA = "Hu et al. 2021 (LoRA), arXiv:2106.09685, section 4.1"
QLORA = "Dettmers et al. 2023 (QLoRA), arXiv:2305.14314, section 3: NF4 with block size 64, double quantisation"
OFFLOAD = "Ren et al. 2021 (ZeRO-Offload), arXiv:2101.06840, section 4: fp32 states and gradients on the host"
CONTEXT = "PyTorch CUDA notes (CUDA context and kernels, not counted by the caching allocator); REFERENCES.md: 0.3-2 GiB"

# Per-unit rules (what a part costs per parameter, token or block), as str.format templates.
# The calculator's script fills the same templates (builder/widgets/calculator.py sends them).
RULES = {
    "param": "{0} B/param ({1})",
    "master": "{0} B/param ({1} master copy)",
    "state": "{0} B/param ({1} {2})",
    "factored": "{0} B/param",
    "adapter": "4 B/adapter param (fp32)",
    "adapter_grads": "4 B/adapter param (fp32); frozen base weights get none",
    "per_layer": "{0} per layer",
    "logits": "{0} B per token per vocabulary entry",
    "linear": "{0} B/linear param ({1})",
    "gathered": "2 blocks + root unit",
    "reduce": "1 block ({0})",
    "percent": "{0}%",
}


@dataclass(frozen=True)
class Sharding:
    """How many ranks share each model state (1 = replicated)."""

    params: int
    grads: int
    optimizer: int
    expert_params: int
    expert_grads: int
    expert_optimizer: int
    label: str


def sharding(config: Config) -> Sharding:
    """Divisors of ZeRO stages / FSDP strategies for dense and expert parameters."""
    stage = _shard_stage(config)
    # Context-parallel ranks hold the same parameters, so ZeRO/FSDP shard over dp x cp
    # (Megatron-LM's distributed optimizer uses the data-parallel-with-context group).
    group = config.dp * config.cp
    if config.fsdp == "HYBRID_SHARD":
        group = config.fsdp_shard_group or min(group, config.gpus_per_node)
    expert_group = max(1, group // config.ep)
    pick = lambda needed, n: n if stage >= needed else 1  # noqa: E731
    label = f"FSDP {config.fsdp}" if config.fsdp else f"ZeRO-{stage}"
    return Sharding(pick(3, group), pick(2, group), pick(1, group),
                    pick(3, expert_group), pick(2, expert_group), pick(1, expert_group), label)


def _per_gpu(held: Holding, dense_div: int, expert_div: int) -> Fraction:
    """Parameters of a state on this GPU after data-parallel sharding."""
    return held.dense / dense_div + held.expert / expert_div


def _sharded(arch: Architecture | None, config: Config, held: Holding, dense_div: int, expert_div: int) -> Fraction:
    """Like _per_gpu, but FSDP (per-parameter sharding, FSDP2 fully_shard) splits each tensor along
    dim 0 in chunks of ceil(dim0 / n) (torch.chunk), so the first ranks hold the rounded-up chunk."""
    exact_shapes = (arch is not None and config.fsdp and dense_div > 1 and not arch.is_moe
                    and config.tp == config.pp == config.ep == 1 and not config.lora_rank)
    if not exact_shapes:
        return _per_gpu(held, dense_div, expert_div)
    return Fraction(sum(count * -(-shape[0] // dense_div) * math.prod(shape[1:])
                        for shape, count in parameter_tensors(arch)))


def _fmt_b(value: Fraction) -> str:
    """Bytes per parameter as a short string ('2', '0.5', '1.02')."""
    if value.denominator == 1:
        return str(value.numerator)
    return f"{float(value):.3g}"


# ---------------------------------------------------------------------------------------
# Model states
# ---------------------------------------------------------------------------------------

def weight_parts(arch: Architecture | None, config: Config, held: Holding, shard: Sharding) -> list[Part]:
    """Weights in their dtype (4-bit bases with their quantisation constants)."""
    policy = config.policy
    count = _sharded(arch, config, held, shard.params, shard.expert_params)
    note = f"{shard.label} shards weights over {shard.params} ranks" if shard.params > 1 else ""
    quantised = config.qlora or (config.mode == "serve" and dtype_bytes(policy.param) < 2)
    if config.offload in ("params", "both"):
        return []  # on the host; see host_parts
    if not quantised:
        per = dtype_bytes(policy.param)
        return [Part("weights", whole_bytes(count * per), "N_gpu x bytes(param dtype)",
                     MIXED if policy.master else TM101, RULES["param"].format(_fmt_b(per), policy.param),
                     note, shard.params)]
    # Quantised linear weights; embeddings, norms and the output layer stay 16-bit.
    fraction = held.linear / held.total if held.total else Fraction(1)
    linear = count * fraction
    other = count - linear
    nibble = Fraction(1, 2) if config.qlora else dtype_bytes(policy.param)
    if nibble == 1:
        # fp8: one fp32 scale per tensor (negligible); int8: one fp32 scale per output row
        # (LLM.int8, Dettmers et al. 2022, arXiv:2208.07339, section 3), about 4/h B/param.
        constants = Fraction(0) if policy.param == "fp8" else Fraction(4, arch.hidden if arch else 4096)
        constant_rule = "per-tensor scales" if policy.param == "fp8" else "fp32 scale per output row"
        source = "Micikevicius et al. 2022 (FP8 formats), arXiv:2209.05433" if policy.param == "fp8" else \
            "Dettmers et al. 2022 (LLM.int8), arXiv:2208.07339"
    elif config.qlora or policy.param == "nf4":
        # QLoRA: fp32 absmax per 64 weights, or with double quantisation an 8-bit absmax per 64
        # plus an fp32 constant per 256 blocks: 0.5 -> 0.127 bits per parameter (section 3).
        constants = (Fraction(1, 64) + Fraction(4, 64 * 256)) if config.qlora_double_quant else Fraction(4, 64)
        constant_rule, source = "NF4 constants (block 64, double quantised)", QLORA
    else:
        constants = Fraction(2 + 2, 128)  # fp16 scale + zero per group of 128 (GPTQ/AWQ default)
        constant_rule, source = "fp16 scale + zero per 128 weights", \
            "Frantar et al. 2022 (GPTQ), arXiv:2210.17323; group size 128"
    base_dtype = "bf16" if config.qlora else "fp16"
    return [
        Part("weights/quantised_linear", whole_bytes(linear * nibble), f"N_linear x {_fmt_b(nibble)} B", source,
             RULES["param"].format(_fmt_b(nibble), "nf4" if config.qlora else policy.param), "", shard.params),
        Part("weights/quantisation_constants", whole_bytes(linear * constants),
             "N_linear x constant bytes", source, RULES["param"].format(f"{float(constants):.4f}", constant_rule),
             "", shard.params),
        Part("weights/unquantised", whole_bytes(other * dtype_bytes(base_dtype)),
             "N_embeddings+norms x 2 B", source, RULES["param"].format(2, base_dtype),
             "embeddings, norms and output layer are kept in 16-bit", shard.params),
    ]


def trainable_holding(arch: Architecture | None, config: Config, held: Holding, stage: Stage) -> Holding:
    """Parameters that get gradients and optimizer states (all, or only LoRA adapters)."""
    if not config.lora_rank or arch is None:
        return held
    adapters = lora_params(arch, config, stage.layers)
    return Holding(adapters, Fraction(0), Fraction(0), Fraction(0), Fraction(0))


def master_and_grad_parts(config: Config, trainable: Holding, shard: Sharding, lora: bool) -> list[Part]:
    """fp32 master copy and gradients (and a separate accumulation buffer if configured)."""
    policy = config.policy
    parts: list[Part] = []
    if lora:
        # PEFT keeps adapters in fp32 (autocast_adapter_dtype=True): fp32 weights, fp32 grads, no master.
        weights = _per_gpu(trainable, shard.params, shard.expert_params)
        parts.append(Part("weights/lora_adapters", whole_bytes(weights * 4), "N_adapters x 4 B", LORA,
                          RULES["adapter"], "", shard.params))
        grads = _per_gpu(trainable, shard.grads, shard.expert_grads)
        parts.append(Part("gradients", whole_bytes(grads * 4), "N_adapters x 4 B", LORA,
                          RULES["adapter_grads"], "", shard.grads))
        return parts
    master = _sharded(config.model, config, trainable, shard.optimizer, shard.expert_optimizer)
    if policy.master and policy.master != policy.param:
        per = dtype_bytes(policy.master)
        parts.append(Part("optimizer/master", whole_bytes(master * per), "N x bytes(master dtype)", MIXED,
                          RULES["master"].format(_fmt_b(per), policy.master),
                          "counted with optimizer states, as ZeRO's K does", shard.optimizer))
    grads = _sharded(config.model, config, trainable, shard.grads, shard.expert_grads)
    per = dtype_bytes(policy.grad)
    parts.append(Part("gradients", whole_bytes(grads * per), "N x bytes(grad dtype)", MIXED,
                      RULES["param"].format(_fmt_b(per), policy.grad), "", shard.grads))
    if config.grad_accum_dtype and config.grad_accum_dtype != policy.grad:
        per = dtype_bytes(config.grad_accum_dtype)
        parts.append(Part("gradients/accumulation_buffer", whole_bytes(grads * per),
                          "N x bytes(accumulation dtype)",
                          "Megatron-LM main_grad buffer (theoretical_memory_usage.py)",
                          RULES["param"].format(_fmt_b(per), config.grad_accum_dtype), "", shard.grads))
    return parts


def optimizer_parts(arch: Architecture | None, config: Config, trainable: Holding, shard: Sharding) -> list[Part]:
    """Optimizer states: Adam m and v, momentum, 8-bit blocks, Adafactor factors."""
    count = _sharded(arch, config, trainable, shard.optimizer, shard.expert_optimizer)
    state = config.policy.optimizer_state
    if config.lora_rank and arch is not None and not config.optimizer_state_dtype:
        state = "fp32"  # torch keeps optimizer states in the parameter's dtype: LoRA adapters are fp32
    per = dtype_bytes(state)
    name = config.optimizer
    if name in ("adam", "adamw"):
        return [Part(f"optimizer/adam_{m}", whole_bytes(count * per), "N x bytes(state dtype)",
                     "Kingma & Ba 2014 (Adam), arXiv:1412.6980, Algorithm 1; " + ZERO,
                     RULES["state"].format(_fmt_b(per), state, label), "", shard.optimizer)
                for m, label in (("m", "first moment"), ("v", "second moment"))]
    if name == "adam8bit":
        block = Fraction(1) + Fraction(4, 256)
        return [Part(f"optimizer/adam_{m}", whole_bytes(count * block), "N x (1 B + 4 B / 256)", BNB,
                     RULES["param"].format(_fmt_b(block), "uint8 + fp32 absmax per 256"),
                     "bitsandbytes keeps tensors under 4096 elements in 32-bit; ignored here", shard.optimizer)
                for m in ("m", "v")]
    if name in ("sgd-momentum", "lion"):
        source = LION if name == "lion" else "PyTorch torch.optim.SGD momentum_buffer; " + TM101
        return [Part("optimizer/momentum", whole_bytes(count * per), "N x bytes(state dtype)", source,
                     RULES["state"].format(_fmt_b(per), state, "momentum"), "", shard.optimizer)]
    if name == "adafactor":
        if arch is None:
            raise ValueError("optimizer: adafactor's factored state needs an architecture, not a raw count")
        factored = _adafactor_elements(arch)
        ratio = Fraction(factored, param_count(arch))
        return [Part("optimizer/adafactor_factors", whole_bytes(count * ratio * per),
                     "sum over matrices of (rows + columns) x bytes; vectors in full", ADAFACTOR,
                     RULES["factored"].format(f"{float(ratio * per):.4f}"),
                     "no first moment (beta1 = None, the default); "
                     "factors spread over GPUs in proportion to parameters", shard.optimizer)]
    return []  # plain SGD keeps no state


def _adafactor_elements(arch: Architecture) -> int:
    """Second-moment elements of Adafactor for the whole model: r + c per matrix, n per vector."""
    h, a, k, d, f = arch.hidden, arch.heads, arch.n_kv_heads, arch.d_head, arch.ffn or arch.n_expert_ffn
    per_layer = (h + a * d) * 2 + (h + k * d) * 2 + arch.mlp_matrices * (h + f) * max(1, arch.experts)
    per_layer += 2 * h * (2 if arch.norm == "layernorm" else 1)
    total = per_layer * arch.layers + (arch.vocab + h)
    if not arch.tied_embeddings:
        total += arch.vocab + h
    return total


# ---------------------------------------------------------------------------------------
# Activations
# ---------------------------------------------------------------------------------------

def activation_parts(arch: Architecture | None, config: Config, stage: Stage) -> list[Part]:
    """Saved activations for the micro-batches in flight on this stage."""
    if arch is None:
        return []
    policy = config.policy
    b, s = config.micro_batch, config.seq_len
    if config.activation_formula == "korthikanti":
        per_layer = act.korthikanti_per_layer(s // config.cp, b, arch.hidden, arch.heads, config.tp,
                                              config.sequence_parallel, config.recompute)
        total = per_layer * stage.layers * stage.in_flight
        rule = act.korthikanti_row(config.tp, config.sequence_parallel, config.recompute)[0]
        return [Part("activations/layers", whole_bytes(total), f"L_stage x in_flight x {rule}", act.KORTHIKANTI,
                     RULES["per_layer"].format(rule),
                     "reference mode: Table 2 assumes a GPT block with 16-bit activations "
                     "and dropout; embeddings, logits and loss are left out as in Table 2")]
    values = act.symbols(arch, config, s, b)
    source = act.KORTHIKANTI if config.implementation == "megatron" else act.HF_CODE
    saved = act.apply_recompute(act.layer_saved(arch, config, values), config, values)
    groups: dict[str, Fraction] = {}
    for tensor in saved:
        groups[tensor.group] = groups.get(tensor.group, Fraction(0)) + tensor.bytes(policy.activation)
    scale = stage.layers * stage.in_flight
    tokens = values["T"]
    parts = [Part(f"activations/{group}", whole_bytes(amount * scale),
                  "L_stage x in_flight x sum of tensors saved by each op",
                  source, _per_token_rule(amount, tokens), "")
             for group, amount in groups.items()]
    if config.recompute == "full":
        working = act.saved_bytes(act.layer_saved(arch, config, values), policy.activation)
        parts.append(Part("activations/recompute_working_layer", whole_bytes(working),
                          "one layer's saved tensors, recomputed during its backward",
                          "Chen et al. 2016, arXiv:1604.06174, section 3", _per_token_rule(working, tokens),
                          "peak during backward, not saved across layers", transient=True))
    extra: list[act.Saved] = []
    if stage.has_embedding:
        extra += act.first_stage_saved(arch, config, values)
    if stage.has_head:
        extra += act.last_stage_saved(arch, config, values)
    for group in dict.fromkeys(s.group for s in extra):
        amount = act.saved_bytes([s for s in extra if s.group == group], policy.activation) * stage.in_flight
        parts.append(Part(f"activations/{group}", whole_bytes(amount), "sum of saved tensors", source,
                          _per_token_rule(amount, tokens), ""))
    if stage.has_head:
        logits = values["T"] * values["V"] * dtype_bytes(policy.activation)
        parts.append(Part("activations/logits", whole_bytes(logits),
                          "b x s x V x bytes(activation dtype)", act.HF_CODE,
                          RULES["logits"].format(_fmt_b(dtype_bytes(policy.activation))),
                          "the logits the forward returns (not a saved tensor); the peak of a step frees them before "
                          "backward, as a loop that keeps only the loss does",
                          transient=True))
    return parts


AUTOCAST = ("PyTorch 2.13 autocast (aten/src/ATen/autocast_mode.cpp cached_cast): a linear layer under "
            "torch.autocast casts its fp32 weight to the autocast dtype and autograd saves that copy for backward")


def autocast_copy_parts(arch: Architecture | None, config: Config, stage: Stage) -> list[Part]:
    """torch.autocast over fp32 weights: the low-precision weight copies linear layers save for backward."""
    policy = config.policy
    if arch is None or not policy.autocast:
        return []
    # Weights only: a linear layer casts its bias too but does not save it.
    held = holding(replace(arch, qkv_bias=False, out_bias=False, mlp_bias=False), config, stage)
    # Under full recomputation a layer saves nothing; its copies are made again in its backward.
    layers = Fraction(0) if config.recompute == "full" else held.linear
    head = Fraction(math.ceil(arch.vocab / config.tp) * arch.hidden) if stage.has_head else Fraction(0)
    amount = (layers + head) * dtype_bytes(policy.activation) * stage.in_flight
    return [Part("activations/autocast_weight_copies", whole_bytes(amount),
                 "in_flight x (linear weights of the stage's layers + head) x bytes(autocast dtype)", AUTOCAST,
                 RULES["linear"].format(_fmt_b(dtype_bytes(policy.activation)), policy.activation),
                 "simplification: the op lists follow autocast's device-independent effects (fp32 residual "
                 "stream, norms and rotary tables; one input copy per projection); CUDA autocast also runs pow, "
                 "exp and softmax in fp32, which changes GPT-2's Python GeLU (not modelled)")]


def _per_token_rule(amount: Fraction, tokens: Fraction) -> str:
    """Bytes per token as an annotation, e.g. '69.0 KiB/token'."""
    per_token = amount / max(1, tokens)
    if per_token >= 1024:
        return f"{float(per_token) / 1024:.1f} KiB/token"
    return f"{float(per_token):.0f} B/token"


# ---------------------------------------------------------------------------------------
# Serving
# ---------------------------------------------------------------------------------------

def kv_cache_bytes(layers: int, kv_heads: int, head_dim: int, tokens: int, dtype: str = "bf16") -> int:
    """KV-cache bytes: 2 (K and V) x layers x kv_heads x head_dim x tokens x bytes (Kwon et al. 2023, section 3)."""
    return whole_bytes(2 * layers * kv_heads * head_dim * tokens * dtype_bytes(dtype))


def serving_parts(arch: Architecture | None, config: Config, stage: Stage) -> list[Part]:
    """KV cache (GQA- and sliding-window-aware) and a small activation working set (builder.model.serving)."""
    if arch is None:
        return []
    return SERVING.evaluate(rule_inputs(arch, config, stage))


# ---------------------------------------------------------------------------------------
# Communication buffers, offload and overheads
# ---------------------------------------------------------------------------------------

def comm_parts(arch: Architecture | None, config: Config, held: Holding, shard: Sharding) -> list[Part]:
    """Unsharded parameters and gradients in flight under ZeRO-3 / FSDP sharding."""
    if arch is None or config.mode != "train" or shard.params == 1 and shard.grads == 1:
        return []
    policy = config.policy
    parts = []
    if shard.params > 1:
        units = 2 * held.layer_unit + held.root_unit
        parts.append(Part("comm/gathered_params", whole_bytes(units * dtype_bytes(policy.param)),
                          "(2 x one block + root unit) x bytes(param dtype)", FSDP, RULES["gathered"],
                          "simplification: the block being computed and the prefetched one, plus the root "
                          "unit (embeddings, head) that stays gathered"))
    reduce_dtype = config.reduce_dtype or policy.grad
    parts.append(Part("comm/unsharded_grads", whole_bytes(held.layer_unit * dtype_bytes(reduce_dtype)),
                      "one block's gradients x bytes(reduce dtype)", FSDP, RULES["reduce"].format(reduce_dtype),
                      "simplification: one unit's full gradients before its reduce-scatter"))
    return parts


def _percent(fraction: float) -> str:
    """A fraction as RULES['percent'] writes it: 0.1 -> '10%' (as the calculator's whole-percent field does)."""
    return RULES["percent"].format(f"{fraction * 100:.0f}")


def overhead_parts(config: Config, allocated: int) -> list[Part]:
    """CUDA context, allocator reserve and a framework percentage, as named assumptions."""
    parts = []
    if config.allocator_reserve:
        parts.append(Part("overhead/allocator_reserve", whole_bytes(allocated * Fraction(str(config.allocator_reserve))),
                          f"{config.allocator_reserve:.0%} of allocated", "PyTorch caching allocator notes "
                          "(reserved minus allocated)", _percent(config.allocator_reserve), "assumed fraction"))
    if config.overhead_fraction:
        parts.append(Part("overhead/framework", whole_bytes(allocated * Fraction(str(config.overhead_fraction))),
                          f"{config.overhead_fraction:.0%} of the parts above", "a common calculator rule: a flat 10% "
                          "for allocator, NCCL buffers and workspaces", _percent(config.overhead_fraction),
                          "assumed percentage, not derived"))
    if config.overhead_bytes:
        parts.append(Part("overhead/fixed", config.overhead_bytes, "fixed amount given by the user",
                          "user assumption", "fixed", "assumed"))
    if config.cuda_context_bytes:
        parts.append(Part("overhead/cuda_context", config.cuda_context_bytes, "fixed per process", CONTEXT,
                          "fixed", "assumed size; depends on CUDA version, lazy loading and kernels loaded"))
    return parts


def offload_parts(parts: list[Part], config: Config) -> tuple[list[Part], list[Part]]:
    """Move offloaded states to the host: (GPU parts, host parts per GPU)."""
    if config.offload == "none":
        return parts, []
    moved_buckets = set()
    if config.offload in ("optimizer", "both"):
        moved_buckets |= {"optimizer", "gradients"}
    gpu, host = [], []
    for part in parts:
        if part.bucket in moved_buckets:
            host.append(part)
        else:
            gpu.append(part)
    return gpu, host


# ---------------------------------------------------------------------------------------
# The orchestrator
# ---------------------------------------------------------------------------------------

def estimate_stage(config: Config, stage: Stage) -> tuple[list[Part], list[Part]]:
    """GPU parts and host parts (per GPU) for one pipeline stage."""
    arch = config.model
    held = holding(arch, config, stage)
    shard = sharding(config)
    parts = weight_parts(arch, config, held, shard)
    if config.mode == "train":
        trainable = trainable_holding(arch, config, held, stage)
        lora = bool(config.lora_rank) and arch is not None
        states = master_and_grad_parts(config, trainable, shard, lora)
        states += optimizer_parts(arch, config, trainable, shard)
        parts += states
        parts += activation_parts(arch, config, stage)
        parts += autocast_copy_parts(arch, config, stage)
    else:
        parts += serving_parts(arch, config, stage)
    parts += comm_parts(arch, config, held, shard)
    gpu, host = offload_parts(parts, config)
    if config.offload in ("params", "both"):
        weights = whole_bytes(_per_gpu(held, shard.params, shard.expert_params) * dtype_bytes(config.policy.param))
        host.append(Part("weights", weights, "N_gpu x bytes(param dtype)", OFFLOAD, "on the host", ""))
    allocated = sum(p.bytes for p in gpu)
    gpu += overhead_parts(config, allocated)
    return gpu, host


def stage_estimates(config: Config) -> list[tuple[Stage, list[Part], list[Part]]]:
    """(stage, GPU parts, host parts per GPU) for every pipeline stage worth evaluating (config validated)."""
    validate_config(config)
    return [(stage, *estimate_stage(config, stage)) for stage in stages(config.model, config)]


def estimate(config: Config) -> Breakdown:
    """Per-GPU memory of the fullest pipeline stage, as named parts that sum to the total."""
    return breakdown_of(config, stage_estimates(config))


def breakdown_of(config: Config, evaluated: list[tuple[Stage, list[Part], list[Part]]]) -> Breakdown:
    """The Breakdown of the stage whose parts sum the highest (the first such) among `stage_estimates`."""
    arch = config.model
    fullest = max(range(len(evaluated)), key=lambda i: (sum(p.bytes for p in evaluated[i][1]), -i))
    stage, gpu, host = evaluated[fullest]
    per_node = min(config.gpus_per_node, config.dp * config.tp * config.pp * config.cp)
    host_parts = tuple(Part(f"host/{p.name}", p.bytes * per_node, f"{per_node} GPUs per node x ({p.formula})",
                            p.source, p.per_unit, p.simplification) for p in host)
    params = param_count(arch) if arch else int(config.params or 0)
    trainable = params
    if config.lora_rank and arch is not None:
        trainable = int(lora_params(arch, config.with_changes(tp=1), arch.layers))
    notes = []
    if stage.name != "only":
        notes.append(f"pipeline stage reported: {stage.name} of {config.pp} ({stage.layers} layers, "
                     f"{float(stage.in_flight):g} micro-batches in flight)")
    if config.pp > 1 and config.grad_accum < config.pp:
        notes.append(f"only {config.grad_accum} micro-batch(es) per step, fewer than the {config.pp} stages: "
                     "the pipeline holds that many in flight")
    return Breakdown(params=params, parts=join_parts(gpu), host_parts=join_parts(host_parts),
                     trainable_params=trainable if config.mode == "train" else 0, notes=tuple(notes),
                     where=_symbols(config))


def _symbols(config: Config) -> dict[str, str]:
    """Symbols used in part formulas, with their values."""
    arch = config.model
    where = {"N": "parameters on this GPU", "b": f"micro-batch = {config.micro_batch}",
             "s": f"sequence length = {config.seq_len}"}
    if arch is not None:
        where.update({"L": f"layers = {arch.layers}", "h": f"hidden = {arch.hidden}",
                      "a": f"heads = {arch.heads}", "V": f"vocabulary = {arch.vocab}"})
    if config.tp > 1:
        where["t"] = f"tensor-parallel size = {config.tp}"
    return where
