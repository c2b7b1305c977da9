"""Where parameters live: how many of each group one GPU holds under TP, PP and EP.

Megatron-LM layout (Shoeybi et al. 2019, arXiv:1909.08053, section 3; Narayanan et al.
2021, arXiv:2104.04473): attention and MLP matrices split over t tensor-parallel ranks,
norms and the MoE router replicated, the vocabulary split over t (vocab-parallel
embedding and output layer); pipeline stage 1 holds the embeddings, the last stage the
final norm and output layer (and a copy of tied embeddings); experts split over e
expert-parallel ranks. Data-parallel sharding (ZeRO/FSDP) is applied afterwards.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from builder.model.architecture import Architecture, layer_param_groups
from builder.model.config import Config


@dataclass(frozen=True)
class Stage:
    """One pipeline stage as the GPU that runs it sees it."""

    name: str  # 'only', 'first' or 'last'
    layers: int  # transformer blocks on this stage
    has_embedding: bool
    has_head: bool  # final norm + output layer (logits, loss)
    in_flight: Fraction  # micro-batches whose activations are held at the peak


@dataclass(frozen=True)
class Holding:
    """Parameters one GPU holds, split by how data parallelism may shard them."""

    dense: Fraction  # non-expert parameters (sharded over the data-parallel group)
    expert: Fraction  # expert parameters (sharded over dp / ep)
    linear: Fraction  # of dense + expert: weights of linear layers (what 4-bit quantisation touches)
    layer_unit: Fraction  # one block's parameters on this GPU (an FSDP unit)
    root_unit: Fraction  # embeddings + final norm + head on this GPU (the FSDP root unit)

    @property
    def total(self) -> Fraction:
        """All parameters on this GPU."""
        return self.dense + self.expert


def stages(arch: Architecture | None, config: Config) -> list[Stage]:
    """The pipeline stages worth evaluating: the first (most in flight) and the last (the head)."""
    if arch is None or config.pp == 1:
        layers = arch.layers if arch else 0
        return [Stage("only", layers, True, True, Fraction(1))]
    p, v = config.pp, config.pp_virtual_stages
    per_stage = math.ceil(arch.layers / p)
    in_flight = Fraction(min(p, config.grad_accum))
    if config.pp_schedule == "interleaved" and v > 1:
        # Korthikanti et al. 2022 section 4.2.3: interleaving stores L(1 + (p-1)/(pm)) layers' worth.
        in_flight *= 1 + Fraction(p - 1, p * v)
    # Layers spread as evenly as possible: the first stage gets ceil(L/p), the last floor(L/p).
    return [
        Stage("first", per_stage, True, False, in_flight),
        Stage("last", arch.layers // p, False, True, Fraction(1)),
    ]


def _split_layer_group(arch: Architecture, config: Config, group: str, count: int) -> tuple[Fraction, bool, bool]:
    """(count on this GPU, is expert, is a linear weight) for one block's parameter group."""
    t, e = config.tp, config.ep
    if group == "norms" or group == "mlp/router":
        return Fraction(count), False, group == "mlp/router"
    if group == "attention/kv" and arch.n_kv_heads < t:
        # Fewer KV heads than TP ranks: each rank keeps one KV head (replicated).
        return Fraction(count, arch.n_kv_heads), False, True
    if group == "mlp/experts":
        return Fraction(count, t * e), True, True
    return Fraction(count, t), False, True


def holding(arch: Architecture | None, config: Config, stage: Stage) -> Holding:
    """Parameters on one GPU running `stage`."""
    if arch is None:
        params = Fraction(config.params or 0)
        return Holding(params, Fraction(0), params, Fraction(0), Fraction(0))
    dense = expert = linear = unit = Fraction(0)
    for group, count in layer_param_groups(arch).items():
        here, is_expert, is_linear = _split_layer_group(arch, config, group, count)
        unit += here
        if is_expert:
            expert += here * stage.layers
        else:
            dense += here * stage.layers
        if is_linear:
            linear += here * stage.layers
    t = config.tp
    vocab_rows = Fraction(math.ceil(arch.vocab / t) * arch.hidden)
    root = Fraction(0)
    if stage.has_embedding:
        root += vocab_rows + (arch.max_positions * arch.hidden if arch.positions == "learned" else 0)
    if stage.has_head:
        root += arch.hidden * (2 if arch.norm == "layernorm" else 1)
        if not arch.tied_embeddings or not stage.has_embedding:
            root += vocab_rows  # untied head, or the tied copy Megatron keeps on the last stage
    return Holding(dense + root, expert, linear, unit, root)
