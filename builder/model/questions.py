"""The questions users ask of an estimate: does it fit, how far can I push it, how many GPUs.

Every answer compares capacity with what the run needs (builder.model.peak.need): the peak of
a training step, reserved parts included, or the serving steady state; never the sum of parts
alone, which a step can exceed. All searches rely on monotonicity that tests/test_properties.py
checks: memory never decreases with micro-batch, sequence length or parameters, and never increases with more
data-parallel ranks under ZeRO/FSDP.
"""

from __future__ import annotations

from dataclasses import dataclass

from builder.model.config import Config, _shard_stage
from builder.model.peak import need
from builder.model.search import largest
from builder.model.units import format_bytes

# A fit in words (Fit.verdict); the calculator's script uses the same templates.
VERDICTS = {"fits": "fits with {0} headroom", "exceeds": "exceeds by {0}"}


@dataclass(frozen=True)
class Fit:
    """How a breakdown compares with one GPU's usable capacity."""

    capacity: int  # usable bytes of the GPU
    needed: int  # per-GPU bytes the run needs (builder.model.peak.Need.bytes)

    @property
    def headroom(self) -> int:
        """Capacity minus need; negative when it does not fit."""
        return self.capacity - self.needed

    @property
    def fits(self) -> bool:
        """True when the estimate is at most the capacity."""
        return self.needed <= self.capacity

    def verdict(self, unit: str = "GiB") -> str:
        """'fits with 27.3 GiB headroom' or 'exceeds by 12.1 GiB'."""
        if self.fits:
            return VERDICTS["fits"].format(format_bytes(self.headroom, unit))
        return VERDICTS["exceeds"].format(format_bytes(-self.headroom, unit))


def fits(config: Config, capacity: int) -> bool:
    """True when what `config` needs per GPU is at most `capacity` bytes."""
    return need(config).bytes <= capacity


# The search for the largest value that fits: builder.model.search.LARGEST, rules the browser runs too.


def max_micro_batch(config: Config, capacity: int, limit: int = 1 << 16) -> int | None:
    """Largest micro-batch (training) or batch (serving) that fits, or None if even 1 does not."""
    field = "micro_batch" if config.mode == "train" else "batch"
    return largest(lambda n: need(config.with_changes(**{field: n})).bytes, capacity, 1, limit)


def length_limit(config: Config, limit: int = 1 << 22) -> int:
    """The longest sequence a search may try: `limit`, or the model's learned positions where fewer (a longer one is
    refused: builder.model.serving.LEARNED_POSITIONS)."""
    learned = config.model.learned_positions if config.model is not None else 0
    return min(limit, learned) if learned else limit


def max_seq_len(config: Config, capacity: int, limit: int = 1 << 22) -> int | None:
    """Longest sequence (training, a multiple of cp) or context (serving) that fits, at most the model's learned
    positions (length_limit), or None."""
    limit = length_limit(config, limit)
    if config.mode == "serve":
        return largest(lambda n: need(config.with_changes(context=n)).bytes, capacity, 1, limit)
    step = config.cp
    return largest(lambda n: need(config.with_changes(seq_len=n)).bytes, capacity, step, limit - limit % step, step)


@dataclass(frozen=True)
class GpuPlan:
    """The fewest GPUs for a strategy, and the configuration that achieves it."""

    gpus: int
    config: Config
    how: str  # which degree was raised, in words


def tensor_degrees(arch, limit: int = 64) -> list[int]:
    """The tensor-parallel degrees that split `arch` evenly, up to `limit`: each divides the attention heads, and the
    KV heads split evenly or are replicated whole (vLLM's llama.py: num_kv_heads = max(1, total // tp), which needs
    total % tp == 0 or tp % total == 0)."""
    return [t for t in range(1, min(arch.heads, limit) + 1)
            if arch.heads % t == 0 and (arch.n_kv_heads % t == 0 or t % arch.n_kv_heads == 0)]


def min_gpus(config: Config, capacity: int, limit: int = 4096) -> GpuPlan | None:
    """Fewest GPUs keeping the strategy: raise dp under ZeRO/FSDP (training) or tp then pp (serving)."""
    fixed = config.tp * config.pp * config.cp
    if config.mode == "train":
        if _shard_stage(config) == 0:
            trial = config.with_changes(dp=max(1, config.ep))
            return GpuPlan(fixed * max(1, config.ep), trial,
                           "data parallelism without sharding does not lower per-GPU memory") \
                if fits(trial, capacity) else None
        for dp in range(max(1, config.ep), limit // fixed + 1):
            if dp % max(1, config.ep):
                continue
            trial = config.with_changes(dp=dp)
            if fits(trial, capacity):
                return GpuPlan(dp * fixed, trial, f"data-parallel ranks = {dp}")
        return None
    arch = config.model
    if arch is None:
        return GpuPlan(1, config, "one GPU") if fits(config, capacity) else None
    tensor_sizes = tensor_degrees(arch)
    plans = sorted((tp * pp, pp, tp) for tp in tensor_sizes for pp in range(1, arch.layers + 1) if tp * pp <= limit)
    for gpus, pp, tp in plans:
        trial = config.with_changes(tp=tp, pp=pp)
        if fits(trial, capacity):
            return GpuPlan(gpus, trial, f"tensor parallel {tp} x pipeline {pp}")
    return None
