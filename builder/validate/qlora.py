"""Activation bytes of QLoRA layers, measured: bitsandbytes' 4-bit linear layers under PEFT's LoRA adapters.

A small Llama-family model (builder.validate.hf_models) is built in bf16, its layers' linear weights quantised to NF4
with double quantisation (bitsandbytes 0.50.2 Linear4bit and Params4bit, compute dtype bf16; the output layer stays
16-bit, as transformers' bitsandbytes integration leaves it), then, as a QLoRA script does:
- kbit_prepare "prepare": PEFT's prepare_model_for_kbit_training (every fp16/bf16 parameter that is not Params4bit
  cast to fp32), with its gradient checkpointing when the case recomputes;
- "prepare-bf16": that, then the embeddings and the output layer cast back to bf16 (artidoro/qlora qlora.py);
- "none": the model as loaded;
then get_peft_model with a LoraConfig (peft 0.21.2). One training forward with loss runs under the saved-tensor
recorder (builder.validate.saved), with torch.autocast(bfloat16) for the amp cases. As in builder.validate.lora, the
per-layer bytes are the 2-layer model's less the 1-layer model's.

One device difference is bridged: PEFT's bitsandbytes layer asks `torch.is_autocast_enabled()` (no device: CUDA's
autocast) whether to cast its input to the adapters' fp32 (peft/tuners/lora/bnb.py Linear4bit.forward); on CPU that
would say no under CPU autocast, so the measurement answers for the CPU autocast, the path a GPU run takes (as
hf_models.cuda_style_dropout makes dropout take CUDA's path).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Iterator

from builder.validate.cases import LORA_TARGET_MODULES, ActivationCase, hf_config

BITSANDBYTES_VERSION = "0.50.2"
KBIT_PREPARES = ("none", "prepare", "prepare-bf16")


@dataclass(frozen=True)
class QLoraCase:
    """One QLoRA forward: the base case (a bf16 Llama), what is done to the unquantised weights, autocast or not,
    full recomputation or none, and the adapters' targets."""

    base: ActivationCase
    kbit_prepare: str = "none"
    autocast: bool = False
    targets: tuple[str, ...] = ("q", "k", "v", "o")
    rank: int = 8

    @property
    def name(self) -> str:
        targets = "all" if set(self.targets) == set(LORA_TARGET_MODULES) else "".join(self.targets)
        return (f"{self.base.name}-qlora{self.rank}-{targets}-{self.kbit_prepare}"
                + ("-amp" if self.autocast else ""))


def qlora_cases() -> list[QLoraCase]:
    """Every kbit_prepare with and without autocast (prepare-bf16 runs only under autocast: builder.model.checks),
    SDPA and eager attention, no recomputation and full, the attention projections or all seven."""
    cases = []
    for attention in ("sdpa", "eager"):
        for recompute in ("none", "full"):
            base = ActivationCase(family="llama", attention=attention, dtype="bfloat16", kv_heads=2,
                                  recompute=recompute)
            for prepare in KBIT_PREPARES:
                for autocast in ((True,) if prepare == "prepare-bf16" else (False, True)):
                    for targets in (("q", "k", "v", "o"), tuple(LORA_TARGET_MODULES)):
                        cases.append(QLoraCase(base, prepare, autocast, targets))
    return cases


def quantise(model, torch, bnb) -> None:
    """Replace every linear layer but the output layer with an NF4 Linear4bit of the same weight (in place)."""
    for module in list(model.modules()):
        for child_name, child in list(module.named_children()):
            if isinstance(child, torch.nn.Linear) and child_name != "lm_head":
                layer = bnb.nn.Linear4bit(child.in_features, child.out_features, bias=child.bias is not None,
                                          compute_dtype=torch.bfloat16, quant_type="nf4", compress_statistics=True)
                layer.weight = bnb.nn.Params4bit(child.weight.data.to(torch.bfloat16), requires_grad=False,
                                                 quant_type="nf4", compress_statistics=True)
                setattr(module, child_name, layer.to("cpu"))  # .to(device) quantises
    model.is_loaded_in_4bit = True  # what prepare_model_for_kbit_training reads


def qlora_model(case: QLoraCase, layers: int):
    """The case's quantised model with PEFT adapters, in train mode."""
    import bitsandbytes as bnb
    import torch
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

    from builder.validate.hf_models import build_model

    model = build_model(hf_config(case.base, layers), "bfloat16")
    quantise(model, torch, bnb)
    full = case.base.recompute == "full"
    if case.kbit_prepare == "none":
        if full:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    else:
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=full,
                                                gradient_checkpointing_kwargs={"use_reentrant": False})
        if case.kbit_prepare == "prepare-bf16":
            for name, module in model.named_modules():
                if name.endswith(("lm_head", "embed_tokens")):
                    module.to(torch.bfloat16)
    config = LoraConfig(r=case.rank, target_modules=[LORA_TARGET_MODULES[t] for t in case.targets], lora_dropout=0.0)
    return get_peft_model(model, config).train()


@contextlib.contextmanager
def cuda_style_autocast_query() -> Iterator[None]:
    """torch.is_autocast_enabled() without a device answers for the CPU autocast (the module docstring says why)."""
    import torch

    original = torch.is_autocast_enabled

    def enabled(*device: Any) -> bool:
        return original(*device) if device else original("cpu")

    torch.is_autocast_enabled = enabled
    try:
        yield
    finally:
        torch.is_autocast_enabled = original


def saved_bytes(case: QLoraCase, layers: int) -> int:
    """Activation storage bytes one forward with loss saves (each storage once)."""
    import torch

    from builder.validate.hf_models import cuda_style_dropout, make_token_ids
    from builder.validate.saved import CheckpointProbe, SavedTensorRecorder, total_saved

    model = qlora_model(case, layers)
    ids = make_token_ids(case.base.batch, case.base.seq_len, case.base.vocab)
    recorder = SavedTensorRecorder(model, inputs=[ids])
    amp = torch.autocast("cpu", dtype=torch.bfloat16) if case.autocast else contextlib.nullcontext()
    with (torch.enable_grad(), cuda_style_dropout(), cuda_style_autocast_query(), recorder,
          CheckpointProbe(model, recorder), amp):
        model(input_ids=ids, labels=ids)
    return total_saved(recorder.records).activation_storage_bytes


def measure_qlora_case(case: QLoraCase) -> dict[str, Any]:
    """Per-layer saved bytes of one case."""
    return {"name": case.name, "per_layer": saved_bytes(case, 2) - saved_bytes(case, 1)}


def predicted_per_layer(case: QLoraCase) -> int:
    """The per-layer activation bytes the model predicts for the case (precision amp-bf16 for autocast: Trainer's
    bf16=True; bf16 otherwise)."""
    from builder.model import Config, estimate
    from builder.validate.compare import architecture_for

    def saved(layers: int) -> int:
        config = Config(model=architecture_for(hf_config(case.base, layers), layers, case.name), mode="train",
                        precision="amp-bf16" if case.autocast else "bf16", micro_batch=case.base.batch,
                        seq_len=case.base.seq_len, attention=case.base.attention, recompute=case.base.recompute,
                        lora_rank=case.rank, lora_targets=case.targets, qlora=True, kbit_prepare=case.kbit_prepare)
        return estimate(config).get("activations", default=None, transient=False)

    return saved(2) - saved(1)
