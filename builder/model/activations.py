"""Activation memory: what each operation saves for backward, op by op.

Two ways to count, chosen by Config.activation_formula:

* 'ops' (default): a list of the tensors each operation of one transformer block saves
  for its backward pass, with shape and dtype, summed. The list follows a named
  implementation (Config.implementation):
  - 'megatron': the GPT block as analysed by Korthikanti et al. 2022 (arXiv:2205.05198),
    section 4.1 (16-bit activations, 1-byte dropout masks, LayerNorm statistics
    neglected as the paper does). With a GeLU 4h MLP and dropout its sum is exactly
    sbh(34 + 5as/h) (Table 2), which tests check.
  - 'hf': Hugging Face transformers 5.23 modeling code under PyTorch 2.13 autograd,
    measured by `python -m builder validate` (content/validation/).
* 'korthikanti': the closed-form Table 2 formulas themselves, as a reference mode
  (layers only: the paper's Table 2 leaves out embeddings, logits and loss).

Symbols: s sequence length, b micro-batch size, h hidden size, a attention heads,
k key/value heads, d head dim, f MLP inner size, V vocabulary, t tensor-parallel size,
L layers. "Elements" are per micro-batch on one GPU, before dtype.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from builder.model import oplists
from builder.model.architecture import Architecture
from builder.model.config import Config
from builder.model.units import dtype_bytes

KORTHIKANTI = "Korthikanti et al. 2022, arXiv:2205.05198, Table 2"
FLASH = "Dao et al. 2022 (FlashAttention), arXiv:2205.14135, Algorithm 2: saves output and logsumexp"
HF_CODE = "transformers 5.23 modeling code, PyTorch 2.13 autograd (measured: content/validation/)"


@dataclass(frozen=True)
class Saved:
    """One tensor an operation saves for backward, evaluated for a configuration."""

    group: str  # part of the layer: 'norms', 'attention', 'attention_scores', 'mlp', 'dropout', 'router'
    op: str  # which operation saves it, in words
    elements: Fraction  # number of elements on this GPU for one micro-batch
    dtype: str  # 'act' (the activation dtype) or a concrete dtype ('fp32', 'bool', 'int64')
    core: bool = False  # inside core attention: dropped by selective recompute

    def bytes(self, activation_dtype: str) -> Fraction:
        """Bytes of this tensor given the activation dtype."""
        dtype = activation_dtype if self.dtype == "act" else self.dtype
        size = Fraction(8) if dtype == "int64" else dtype_bytes(dtype)
        return self.elements * size


# Conditions that hold when every weight trains (full fine-tuning or pre-training); under LoRA
# none of them holds and the adapters' lora_<target> conditions do instead.
FULL_TRAINING = ("grad_qkv", "grad_o", "grad_mlp_in", "grad_mlp_out", "grad_norm", "grad_head")


def symbols(arch: Architecture, config: Config, seq_len: int, micro_batch: int) -> dict[str, Fraction]:
    """Values of the op-list symbols on one GPU for one micro-batch (see builder.model.oplists)."""
    t = config.tp
    s = seq_len // config.cp
    tokens = micro_batch * s
    inner = arch.n_expert_ffn if arch.is_moe else arch.ffn
    return {
        "T": Fraction(tokens),
        "Tr": Fraction(tokens, t if config.sequence_parallel else 1),
        "b": Fraction(micro_batch),
        "s": Fraction(s),
        "S": Fraction(seq_len),
        "h": Fraction(arch.hidden),
        "a": Fraction(arch.heads // t),
        "k": Fraction(max(1, arch.n_kv_heads // t)),
        "d": Fraction(arch.d_head),
        "f": Fraction(inner // t),
        "V": Fraction(-(-arch.vocab // t)),
        "E": Fraction(arch.experts),
        "K": Fraction(arch.top_k),
        "r": Fraction(config.lora_rank),
    }


def conditions(arch: Architecture, config: Config) -> set[str]:
    """The op-list conditions that hold for this architecture and configuration."""
    eager = config.attention == "eager"
    held = {"eager" if eager else "fused"}
    repeat = eager and arch.n_kv_heads != arch.heads and config.implementation == "hf"
    held.add("gqa_repeat" if repeat else "no_gqa_repeat")
    held.add("dropout" if config.dropout else "no_dropout")
    if config.policy.activation != "fp32":
        held.add("low_precision")
    if arch.mlp == "swiglu":
        held.add("swiglu")
    elif arch.activation == "gelu_tanh_python" and config.implementation == "hf":
        held.add("gelu_python")
    else:
        held.add("gelu_fused")
    held.add("learned_positions" if arch.positions == "learned" else "rotary")
    if arch.norm == "layernorm" or config.implementation == "megatron":
        held.add("embedding_dropout")
    held.add("full_recompute" if config.recompute == "full" else "no_full_recompute")
    held.add("autocast" if fp32_residual(config) else "no_autocast")
    if config.lora_rank:
        held.update(f"lora_{target}" for target in config.lora_targets)
        held.update(lora_inputs(config.lora_targets, config.policy.activation != "fp32"))
    else:
        held.update(FULL_TRAINING)
    return held


# Projections that read the same tensor (q, k, v read the norm output; gate and up too).
LORA_SHARED_INPUTS = (("q", "k", "v"), ("gate", "up"))


def lora_inputs(targets: tuple[str, ...], low_precision: bool) -> set[str]:
    """Which adapters save an input of their own ('lora_in_<target>'). Each adapter casts its input to
    fp32 for lora_A; below fp32 each cast is a new tensor, but in an fp32 model the cast is the input
    itself, so adapters on projections that share an input save it once."""
    held = set()
    for target in targets:
        group = next((g for g in LORA_SHARED_INPUTS if target in g), (target,))
        first = next(t for t in group if t in targets)
        if low_precision or target == first:
            held.add(f"lora_in_{target}")
    return held


def fp32_residual(config: Config) -> bool:
    """transformers code under torch.autocast over fp32 weights: the residual stream (and every layer's
    input) stays fp32; the op lists' 'autocast' rows apply."""
    return config.policy.autocast and config.implementation == "hf"


def block_name(arch: Architecture, config: Config) -> str:
    """Which op list describes one block: 'megatron', 'hf-gpt2', 'hf-llama' or 'hf-mixtral'."""
    if config.implementation == "megatron":
        return "megatron"
    if arch.norm == "layernorm":
        return "hf-gpt2"
    return "hf-mixtral" if arch.is_moe else "hf-llama"


def holds(condition: str, held: set[str]) -> bool:
    """Whether an op-list condition ('' always, or names joined by '&') holds."""
    return all(c in held for c in condition.split("&")) if condition else True


def evaluate(rows: tuple[oplists.Row, ...], values: dict[str, Fraction], held: set[str]) -> list[Saved]:
    """Rows whose condition holds, with their element counts."""
    saved = []
    for row in rows:
        if not holds(row.condition, held):
            continue
        elements = Fraction(row.coefficient)
        for symbol in row.shape.split():
            elements *= values[symbol]
        saved.append(Saved(row.group, row.op, elements, row.dtype, row.core))
    return saved


def layer_saved(arch: Architecture, config: Config, values: dict[str, Fraction]) -> list[Saved]:
    """The evaluated op list of one block."""
    return evaluate(oplists.BLOCKS[block_name(arch, config)], values, conditions(arch, config))


def first_stage_saved(arch: Architecture, config: Config, values: dict[str, Fraction]) -> list[Saved]:
    """Embedding-side saved tensors (first pipeline stage)."""
    return evaluate(oplists.FIRST_STAGE, values, conditions(arch, config))


def last_stage_saved(arch: Architecture, config: Config, values: dict[str, Fraction]) -> list[Saved]:
    """Final norm, output-layer input and loss (last pipeline stage)."""
    rows = oplists.LAST_STAGE_RMSNORM if arch.norm == "rmsnorm" and config.implementation == "hf" \
        else oplists.LAST_STAGE_LAYERNORM
    return evaluate(rows, values, conditions(arch, config))


def apply_recompute(saved: list[Saved], config: Config, values: dict[str, Fraction]) -> list[Saved]:
    """Selective recompute drops core attention; full recompute keeps only the layer input."""
    if config.recompute == "selective":
        return [s for s in saved if not s.core]
    if config.recompute == "full":
        # Checkpointing keeps the block's input (Chen et al. 2016; Korthikanti et al. 2022 section 4.1: 2sbh).
        dtype = "fp32" if fp32_residual(config) else "act"
        return [Saved("checkpoint", "layer input kept by activation checkpointing", values["Tr"] * values["h"], dtype)]
    return saved


def saved_bytes(saved: list[Saved], activation_dtype: str) -> Fraction:
    """Total bytes of a list of saved tensors."""
    return sum((s.bytes(activation_dtype) for s in saved), Fraction(0))


def tensor_bytes(tensor: Saved, config: Config) -> Fraction:
    """Bytes of an evaluated row, where dtype 'grad' is the gradient dtype."""
    if tensor.dtype == "grad":
        return tensor.elements * dtype_bytes(config.policy.grad)
    return tensor.bytes(config.policy.activation)


def by_group(tensors: list[Saved], config: Config) -> dict[str, Fraction]:
    """Bytes of evaluated rows, added up per group (in first-seen order)."""
    groups: dict[str, Fraction] = {}
    for tensor in tensors:
        groups[tensor.group] = groups.get(tensor.group, Fraction(0)) + tensor_bytes(tensor, config)
    return groups


@dataclass(frozen=True)
class LayerMoment:
    """An oplists.Moment worked out for one configuration, per micro-batch on one GPU."""

    phase: str  # 'layer_forward' or 'layer_backward'
    op: str  # the instant, in words
    live: dict[str, Fraction]  # per group: bytes of the layer's rows live then (up to the anchor)
    kept: dict[str, Fraction]  # per group: bytes one layer keeps saved between forward and backward
    temporaries: Fraction  # the moment's own tensors (activations; freed rows counted negative)
    made: Fraction  # the layer's weight gradients made by then
    layer_grads: Fraction  # every weight gradient of one layer
    head_grads: Fraction  # the output layer's and final norm's weight gradients


# A checkpointed layer's forward runs without autograd: the norms' tensors, kept only for backward, are
# gone by the softmax (measured: content/validation/peak.json, the '-full-' case with a 512-token vocabulary).
NO_GRAD_GONE = ("norms",)


def _total(tensors: list[Saved], config: Config) -> Fraction:
    return sum((tensor_bytes(t, config) for t in tensors), Fraction(0))


def layer_moments(arch: Architecture, config: Config) -> list[LayerMoment]:
    """The oplists.MOMENTS of this block whose conditions hold (none for the Korthikanti reference mode)."""
    if config.activation_formula != "ops":
        return []
    values = symbols(arch, config, config.seq_len, config.micro_batch)
    held = conditions(arch, config)
    name = block_name(arch, config)
    block = oplists.BLOCKS[name]
    each = [evaluate((row,), values, held) for row in block]  # the block once, row by row (anchors are rows)
    kept = by_group([t for t in apply_recompute([t for ts in each for t in ts], config, values)
                     if t.group != "checkpoint"], config)
    layer_grads = _total(evaluate(oplists.LAYER_GRADS[name], values, held), config)
    head_grads = _total(evaluate(oplists.HEAD_GRADS, values, held), config)
    out = []
    for moment in oplists.MOMENTS[name]:
        if not holds(moment.condition, held):
            continue
        at = next(i for i, row in enumerate(block) if row.op == moment.anchor)
        extra = evaluate(moment.temporaries, values, held)
        live = [t for ts in each[:at + 1] for t in ts]
        if config.recompute == "full" and moment.phase == "layer_forward":
            live = [t for t in live if t.group not in NO_GRAD_GONE]
        made = _total([t for t in extra if t.dtype == "grad"], config)
        out.append(LayerMoment(moment.phase, moment.op, by_group(live, config), kept, _total(extra, config) - made,
                               made, layer_grads, head_grads))
    return out


# ---------------------------------------------------------------------------------------
# Korthikanti et al. 2022, Table 2: the reference formulas (bytes per layer)
# ---------------------------------------------------------------------------------------

# Table 2 of Korthikanti et al. 2022 as data. Key: recompute, then the layout ('1': no tensor
# parallelism, 't': tensor parallel, 's': tensor + sequence parallel). Row: the paper's notation,
# then bytes per layer = sbh x (c + c_t / t + k x 5as/(ht)) as (c, c_t, k). Full recomputation
# keeps only the layer input, 2sbh (split over t under SP). The calculator's script reads the same rows.
KORTHIKANTI_TABLE = {
    "none1": ("sbh(34 + 5as/h)", 34, 0, 1), "nonet": ("sbh(10 + 24/t + 5as/(ht))", 10, 24, 1),
    "nones": ("sbh(34/t + 5as/(ht))", 0, 34, 1),
    "selective1": ("34sbh", 34, 0, 0), "selectivet": ("sbh(10 + 24/t)", 10, 24, 0),
    "selectives": ("34sbh/t", 0, 34, 0),
    "full1": ("2sbh", 2, 0, 0), "fullt": ("2sbh", 2, 0, 0), "fulls": ("2sbh/t", 0, 2, 0),
}


def korthikanti_row(t: int, sequence_parallel: bool, recompute: str) -> tuple[str, int, int, int]:
    """The KORTHIKANTI_TABLE row for a tensor-parallel degree, SP and recompute setting."""
    return KORTHIKANTI_TABLE[recompute + ("1" if t == 1 else "s" if sequence_parallel else "t")]


def korthikanti_per_layer(s: int, b: int, h: int, a: int, t: int = 1, sequence_parallel: bool = False,
                          recompute: str = "none") -> Fraction:
    """Activation bytes per transformer layer, Table 2 of Korthikanti et al. 2022 (KORTHIKANTI_TABLE).

    no parallelism: sbh(34 + 5as/h); tensor parallel: sbh(10 + 24/t + 5as/(ht));
    tensor + sequence parallel: sbh(34/t + 5as/(ht)); selective recompute drops the
    5as/h term; full recompute keeps 2sbh (the layer input; /t under SP).
    """
    _, constant, per_t, attention = korthikanti_row(t, sequence_parallel, recompute)
    return s * b * h * (constant + Fraction(per_t, t) + attention * Fraction(5 * a * s, h * t))
