"""Activation bytes of PEFT's LoRA layers, measured: what one adapted layer saves for backward.

A small Llama-family model (builder.validate.hf_models) gets PEFT adapters (peft 0.21.2, get_peft_model with a
LoraConfig: rank, target modules, lora_dropout) and runs one training forward with loss under the saved-tensor
recorder (builder.validate.saved: each storage once). As in builder.validate.measure, the per-layer bytes are the
2-layer model's less the 1-layer model's. PEFT's adapters take fp32 whatever the model's dtype (autocast_adapter_dtype
=True, peft/tuners/tuners_utils.py cast_adapter_dtype), which `adapter_dtypes` reports.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from builder.validate.cases import DTYPES, LORA_TARGET_MODULES, ActivationCase, hf_config

PEFT_VERSION = "0.21.2"


@dataclass(frozen=True)
class LoraCase:
    """One adapted forward: the base case, the adapters' rank, targets and dropout probability."""

    base: ActivationCase
    rank: int = 8
    targets: tuple[str, ...] = ("q", "k", "v", "o")
    dropout: float = 0.0
    autocast: bool = False  # the forward under torch.autocast(bfloat16): Trainer's bf16=True

    @property
    def name(self) -> str:
        targets = "all" if set(self.targets) == set(LORA_TARGET_MODULES) else "".join(self.targets)
        return f"{self.base.name}-lora{self.rank}-{targets}-p{self.dropout:g}" + ("-amp" if self.autocast else "")

    @property
    def precision(self) -> str:
        """The policy the case runs: the model's dtype, or under autocast amp-bf16 (fp32 weights) or bf16-autocast."""
        if not self.autocast:
            return DTYPES[self.base.dtype]
        return "amp-bf16" if self.base.dtype == "float32" else "bf16-autocast"


def lora_cases() -> list[LoraCase]:
    """fp32 and bf16, SDPA and eager attention, the attention projections or all seven, with and without dropout,
    with and without autocast."""
    return [LoraCase(ActivationCase(family="llama", attention=attention, dtype=dtype, kv_heads=2), 8, targets, p, amp)
            for dtype in ("float32", "bfloat16") for attention in ("sdpa", "eager")
            for targets in (("q", "k", "v", "o"), tuple(LORA_TARGET_MODULES)) for p in (0.0, 0.1)
            for amp in (False, True)]


def adapted_model(case: LoraCase, layers: int):
    """The case's model with PEFT adapters, in train mode."""
    from peft import LoraConfig, get_peft_model

    from builder.validate.hf_models import build_model

    model = build_model(hf_config(case.base, layers), case.base.dtype)
    config = LoraConfig(r=case.rank, target_modules=[LORA_TARGET_MODULES[t] for t in case.targets],
                        lora_dropout=case.dropout)
    return get_peft_model(model, config).train()


def saved_bytes(case: LoraCase, layers: int) -> int:
    """Activation storage bytes one forward with loss saves (each storage once)."""
    import torch

    from builder.validate.hf_models import cuda_style_dropout, make_token_ids
    from builder.validate.saved import SavedTensorRecorder, total_saved

    model = adapted_model(case, layers)
    ids = make_token_ids(case.base.batch, case.base.seq_len, case.base.vocab)
    recorder = SavedTensorRecorder(model, inputs=[ids])
    amp = torch.autocast("cpu", dtype=torch.bfloat16) if case.autocast else contextlib.nullcontext()
    with torch.enable_grad(), cuda_style_dropout(), recorder, amp:
        model(input_ids=ids, labels=ids)
    return total_saved(recorder.records).activation_storage_bytes


def measure_lora_case(case: LoraCase) -> dict[str, Any]:
    """Per-layer saved bytes of one case."""
    return {"name": case.name, "per_layer": saved_bytes(case, 2) - saved_bytes(case, 1)}


def adapter_dtypes(case: LoraCase) -> dict[str, set[str]]:
    """The dtypes PEFT gives the adapters' weights and, after one backward, their gradients."""
    from builder.validate.hf_models import make_token_ids

    model = adapted_model(case, 1)
    ids = make_token_ids(case.base.batch, case.base.seq_len, case.base.vocab)
    model(input_ids=ids, labels=ids).loss.backward()
    adapters = [p for name, p in model.named_parameters() if "lora_" in name]
    return {"weights": {str(p.dtype) for p in adapters}, "grads": {str(p.grad.dtype) for p in adapters},
            "frozen_grads": {str(p.grad) for name, p in model.named_parameters() if "lora_" not in name}}


def predicted_per_layer(case: LoraCase) -> int:
    """The per-layer activation bytes the model predicts for the case."""
    from builder.model import Config, estimate
    from builder.validate.compare import architecture_for

    def saved(layers: int) -> int:
        config = Config(model=architecture_for(hf_config(case.base, layers), layers, case.name), mode="train",
                        precision=case.precision, micro_batch=case.base.batch,
                        seq_len=case.base.seq_len, attention=case.base.attention, lora_rank=case.rank,
                        lora_targets=case.targets, lora_dropout=case.dropout)
        return estimate(config).get("activations", default=None, transient=False)

    return saved(2) - saved(1)
