"""Per-rank model-state bytes under FSDP2 (`fully_shard`) with a fake process group, on CPU.

`dist.init_process_group('fake', store=FakeStore(), rank=r, world_size=N)` makes every
collective a no-op that returns correctly shaped tensors, so one process plays rank r of
N. Each transformer block and then the root are wrapped with `fully_shard` (FULL_SHARD,
reshard after forward). After one real AdamW step we count rank r's local shards: the
storages behind `p.to_local()`, `p.grad.to_local()` and the optimizer states, each once.
FSDP2 splits every parameter along dim 0 with `torch.chunk` semantics and pads each
rank's piece to ceil(dim0 / N) rows, so rank 0 holds the padded maximum and the last
ranks can hold less (even nothing) for small dim 0.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from builder.validate.cases import DTYPES, ActivationCase, SmallModel, hf_config
from builder.validate.states import make_optimizer, train_one_step, unique_storage_bytes

WORLD_SIZES = (2, 4, 8, 16, 64)


@dataclass(frozen=True)
class ShardCase(SmallModel):
    """One rank of an FSDP2 FULL_SHARD run."""

    world_size: int = field(kw_only=True)
    rank: int = field(kw_only=True)

    @property
    def name(self) -> str:
        """Deterministic id."""
        return f"{self.family}-fsdp2-full_shard-{self.optimizer}-{DTYPES[self.dtype]}-L{self.layers}-h{self.hidden}-n{self.world_size}-rank{self.rank}"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready inputs."""
        return asdict(self)


def shard_cases(small: bool = False) -> list[ShardCase]:
    """Rank 0 and the last rank for each world size, both families."""
    sizes = (2, 64) if small else WORLD_SIZES
    cases = []
    for family, kv in (("gpt2", None), ("llama", 2)):
        for world_size in sizes:
            for rank in sorted({0, world_size - 1}):
                cases.append(ShardCase(family=family, world_size=world_size, rank=rank, kv_heads=kv))
    return sorted(cases, key=lambda c: (c.family, c.world_size, c.rank))


def measure_shard_case(case: ShardCase) -> dict[str, Any]:
    """Local shard bytes of params, grads and optimizer states for one rank."""
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from builder.validate.hf_models import build_model

    config = hf_config(ActivationCase(family=case.family, hidden=case.hidden, heads=case.heads,
                                      kv_heads=case.kv_heads, vocab=case.vocab), case.layers)
    dist.init_process_group("fake", store=FakeStore(), rank=case.rank, world_size=case.world_size)
    try:
        model = build_model(config, case.dtype)
        unsharded_params = sum(p.numel() for p in model.parameters())
        for layer in layer_modules(model):
            fully_shard(layer)
        fully_shard(model)
        optimizer = make_optimizer(case.optimizer, list(model.parameters()))
        train_one_step(model, optimizer, case.vocab)
        local_params = [p.to_local() for p in model.parameters()]
        local_grads = [p.grad.to_local() for p in model.parameters() if p.grad is not None]
        states = [v.to_local() if hasattr(v, "to_local") else v
                  for state in optimizer.state.values() for k, v in state.items() if k != "step"]
        measured = {
            "params": unsharded_params,
            "local_param_elements": sum(t.numel() for t in local_params),
            "parameter_bytes": unique_storage_bytes(local_params),
            "gradient_bytes": unique_storage_bytes(local_grads),
            "optimizer_state_total_bytes": unique_storage_bytes(states),
        }
    finally:
        dist.destroy_process_group()
    return {"name": case.name, "inputs": case.as_dict(), "hf_config": config, "measured": measured}


def layer_modules(model) -> list:
    """The repeated transformer blocks of a GPT-2 or Llama-style model."""
    inner = getattr(model, "transformer", None) or getattr(model, "model")
    return list(getattr(inner, "h", None) or getattr(inner, "layers"))
