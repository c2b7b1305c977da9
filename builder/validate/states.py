"""Model-state bytes after one real optimizer step: parameters, gradients, optimizer states.

Counted from the live tensors (`model.parameters()`, `p.grad`, `optimizer.state`), each
storage once with its whole `nbytes()` (a tied embedding counts once). Adam's per-tensor
`step` counters (0-dim fp32 tensors on CPU) are reported apart as `optimizer_step_bytes`:
they are per parameter TENSOR, not per parameter.
"""

from __future__ import annotations

from typing import Any, Iterable

from builder.validate.cases import LORA_TARGET_MODULES, StateCase, hf_config

STEP_KEYS = ("step",)
# The batch the measured step trains on (sequences, tokens each): model states do not depend on it, but the
# prediction's run must be one the model takes (a tiny GPT-2's learned positions hold 16 tokens).
STEP_SHAPE = (2, 16)


def unique_storage_bytes(tensors: Iterable) -> int:
    """Sum of nbytes over distinct storages."""
    sizes: dict[int, int] = {}
    for tensor in tensors:
        storage = tensor.untyped_storage()
        sizes[storage._cdata] = int(storage.nbytes())
    return sum(sizes.values())


def make_optimizer(name: str, parameters: list, foreach: bool | None = None, fused: bool | None = None):
    """torch.optim.Adam / AdamW / SGD(momentum=0.9) / Adafactor over `parameters`.

    foreach=None keeps torch's default (foreach on CUDA, a per-tensor loop on CPU); True
    asks for the foreach implementation, which a GPU run gets by default; fused=True for the
    fused kernel (Adam, AdamW, SGD; on CPU too since torch 2.4)."""
    import torch

    if name == "adam":
        return torch.optim.Adam(parameters, lr=1e-3, foreach=foreach, fused=fused)
    if name == "adamw":
        return torch.optim.AdamW(parameters, lr=1e-3, foreach=foreach, fused=fused)
    if name == "sgd-momentum":
        return torch.optim.SGD(parameters, lr=1e-3, momentum=0.9, foreach=foreach, fused=fused)
    if name == "adafactor":
        return torch.optim.Adafactor(parameters, lr=1e-2, foreach=foreach)
    raise ValueError(f"unknown optimizer {name!r}")


def make_lora_linear(base, rank: int, alpha: float = 16.0):
    """Minimal LoRA (Hu et al. 2021, arXiv:2106.09685): y = base(x) + (alpha/r) * x A^T B^T, base frozen.

    Adapters are kept in fp32 whatever the base dtype, as PEFT does by default
    (`autocast_adapter_dtype=True` upcasts bf16/fp16 adapter weights to float32); the input
    is cast to fp32 for the adapter path and the update cast back.
    """
    import math

    import torch
    from torch import nn

    class LoRALinear(nn.Module):
        """A frozen Linear plus a trainable rank-r update (A: r x in, B: out x r, B starts at 0)."""

        def __init__(self) -> None:
            super().__init__()
            self.base = base
            dtype = torch.float32
            self.lora_a = nn.Parameter(torch.empty(rank, base.in_features, dtype=dtype))
            self.lora_b = nn.Parameter(torch.zeros(base.out_features, rank, dtype=dtype))
            nn.init.kaiming_uniform_(self.lora_a, a=math.sqrt(5))
            self.scaling = alpha / rank

        def forward(self, x):
            update = (x.to(self.lora_a.dtype) @ self.lora_a.t() @ self.lora_b.t()) * self.scaling
            return self.base(x) + update.to(x.dtype)

    return LoRALinear()


def add_lora(model, rank: int, targets: tuple[str, ...]) -> int:
    """Freeze every weight, wrap the target projections with LoRA; return how many were wrapped."""
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    wanted = {LORA_TARGET_MODULES[t] for t in targets}
    wrapped = 0
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if child_name in wanted:
                setattr(module, child_name, make_lora_linear(child, rank))
                wrapped += 1
    return wrapped


def count_model_states(model, optimizer) -> dict[str, Any]:
    """Bytes of parameters, gradients and optimizer states (by state name), each storage once."""
    parameters = list(model.parameters())
    trainable = [p for p in parameters if p.requires_grad]
    state_tensors: dict[str, list] = {}
    for state in optimizer.state.values():
        for key, value in state.items():
            if hasattr(value, "untyped_storage"):
                state_tensors.setdefault(key, []).append(value)
    states = {key: unique_storage_bytes(values) for key, values in sorted(state_tensors.items()) if key not in STEP_KEYS}
    return {
        "params": sum(p.numel() for p in parameters),
        "trainable_params": sum(p.numel() for p in trainable),
        "parameter_tensors": len(parameters),
        "parameter_bytes": unique_storage_bytes(parameters),
        "gradient_bytes": unique_storage_bytes(p.grad for p in parameters if p.grad is not None),
        "frozen_with_gradient": sum(1 for p in parameters if not p.requires_grad and p.grad is not None),
        "optimizer_state_bytes": states,
        "optimizer_state_total_bytes": sum(states.values()),
        "optimizer_step_bytes": unique_storage_bytes(v for k, vs in state_tensors.items() if k in STEP_KEYS for v in vs),
    }


def train_one_step(model, optimizer, vocab: int) -> None:
    """One forward with loss, backward and optimizer step."""
    from builder.validate.hf_models import make_token_ids

    token_ids = make_token_ids(*STEP_SHAPE, vocab)
    loss = model(input_ids=token_ids, labels=token_ids).loss
    loss.backward()
    optimizer.step()


def measure_state_case(case: StateCase) -> dict[str, Any]:
    """Model-state bytes of `case` after one real step."""
    from builder.validate.hf_models import build_model

    config = hf_config(case.activation_case(), case.layers)
    model = build_model(config, case.dtype)
    if case.lora_rank:
        add_lora(model, case.lora_rank, case.lora_targets)
    optimizer = make_optimizer(case.optimizer, [p for p in model.parameters() if p.requires_grad])
    train_one_step(model, optimizer, case.vocab)
    return {"name": case.name, "inputs": case.as_dict(), "hf_config": config, "measured": count_model_states(model, optimizer)}
