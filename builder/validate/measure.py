"""Activation bytes of one training forward pass, per layer and outside the layers.

For a case, the same model is built with 1 and with 2 layers, one forward pass WITH loss
(labels = input_ids) runs in train mode under a SavedTensorRecorder, and the saved
tensors are counted by storage (builder/validate/saved.py has the rule).
per_layer = m2 - m1; rest = m1 - per_layer (embeddings, final norm, logits, loss, and
anything shared by all layers such as rotary cos/sin).
"""

from __future__ import annotations

import contextlib
from typing import Any

from builder.validate.cases import ActivationCase, hf_config
from builder.validate.saved import CheckpointProbe, SavedRecord, SavedTensorRecorder, total_saved

TOTAL_FIELDS = ("activation_storage_bytes", "activation_tensor_bytes", "buffer_bytes", "input_bytes")


def run_forward(case: ActivationCase, layers: int, fake: bool = False, name_ops: bool = True):
    """Build the `layers`-block model for `case`, run one forward with loss, return the recorder."""
    import torch

    from builder.validate.hf_models import build_model, cuda_style_dropout, make_token_ids

    fake_mode = contextlib.nullcontext()
    if fake:
        from torch._subclasses.fake_tensor import FakeTensorMode

        fake_mode = FakeTensorMode()
    with fake_mode, masks_as_in_eager_runs(fake):
        model = build_model(hf_config(case, layers), case.dtype)
        if case.recompute == "full":
            enable_checkpointing(model)
        if case.compile:
            compile_layers(model)
        token_ids = make_token_ids(case.batch, case.seq_len, case.vocab)
        padding = {"attention_mask": padding_mask(case)} if case.padded else {}
        recorder = SavedTensorRecorder(model, inputs=[token_ids, *padding.values()])
        amp = torch.autocast("cpu", dtype=torch.bfloat16) if case.autocast else contextlib.nullcontext()
        with torch.enable_grad(), cuda_style_dropout(), recorder, CheckpointProbe(model, recorder), amp:
            output = model(input_ids=token_ids, labels=token_ids, **padding)
        if name_ops and case.recompute == "none" and not case.compile:  # a compiled layer's node names no op
            recorder.name_ops(output.loss.grad_fn)
    return recorder


def padding_mask(case: ActivationCase):
    """A padded micro-batch's attention_mask, as TRL's DataCollatorForLanguageModeling makes it (padding on the
    right, 0 on the padding): the first sequence fills seq_len, every other one stops at seq_len // 2."""
    import torch

    if case.batch < 2:
        raise ValueError(f"{case.name}: a padded case needs two sequences or more (one is padded to no length)")
    mask = torch.ones(case.batch, case.seq_len, dtype=torch.long)
    mask[1:, case.seq_len // 2:] = 0
    return mask


def compile_layers(model) -> None:
    """torch.compile every transformer layer in place (nn.Module.compile, the default inductor backend), as
    torchtune's training.compile_model does; the embedding, final norm, output layer and loss stay eager. Dynamo's
    caches are cleared first, so each model is traced afresh (its saved tensors are packed by the compiled
    region's autograd function, which the recorder's hooks see)."""
    import torch

    torch._dynamo.reset()
    blocks = model.transformer.h if hasattr(model, "transformer") else model.model.layers
    for block in blocks:
        block.compile()


def observed_sdpa_kernel(records: list[SavedRecord]) -> str | None:
    """Which SDPA kernel autograd saved for ('flash_cpu', 'math'), None when no attention op was named."""
    ops = {record.op or "" for record in records}
    if any(op.startswith("ScaledDotProductFlashAttention") for op in ops):
        return "flash_cpu"
    if any(op.startswith(("ScaledDotProductEfficientAttention", "ScaledDotProductCudnnAttention")) for op in ops):
        return "efficient"
    if any("Softmax" in op for op in ops):
        return "math"
    return None


def measure_activation_case(case: ActivationCase, fake: bool = False) -> dict[str, Any]:
    """Measured bytes for one case: per layer, rest, and the raw 1- and 2-layer totals."""
    one_layer = run_forward(case, 1, fake=fake)
    two_layers = run_forward(case, 2, fake=fake)
    totals_one = total_saved(one_layer.records).as_dict()
    totals_two = total_saved(two_layers.records).as_dict()
    per_layer = {field: totals_two[field] - totals_one[field] for field in TOTAL_FIELDS}
    rest = {field: totals_one[field] - per_layer[field] for field in TOTAL_FIELDS}
    result = {
        "name": case.name,
        "inputs": case.as_dict(),
        "hf_config": hf_config(case, 1),
        "per_layer": per_layer,
        "rest": rest,
        "one_layer": totals_one,
        "two_layers": totals_two,
    }
    if case.attention == "sdpa" and case.recompute == "none" and not case.compile:
        result["sdpa_kernel"] = observed_sdpa_kernel(one_layer.records)
    if case.compile:
        result["saved_in_layer"] = layer_listing(case, one_layer.records)
    if case.experts and case.recompute == "none" and not case.compile:
        # DeepSeek's first dense layers (first_dense): the first MoE block is the two-layer model's second layer's.
        result["moe_block"] = moe_block_listing((two_layers if case.first_dense else one_layer).records,
                                                f"model.layers.{case.first_dense}.mlp")
    return result


MOE_BLOCK_MODULE = "model.layers.0.mlp"  # the one-layer model's MoE block (its router, experts and shared experts)


def moe_block_listing(records: list[SavedRecord], module: str = MOE_BLOCK_MODULE) -> dict[str, Any]:
    """What the one-layer model's MoE block saves, storage by storage (the storages first packed inside it: the
    norm output its router reads is one), and how much of it the loss's graph still holds when the forward returns
    (kept_bytes). A storage is kept when a node reachable from the loss names it (SavedTensorRecorder.name_ops); the
    others belong to branches whose outputs died with the forward's locals (DeepSeek's group selection), so autograd
    has freed them by the backward. Needs named ops: a case without recomputation or compilation."""
    named = {r.storage_key for r in records if r.op is not None}
    tensors, seen = [], set()
    for r in records:
        if r.kind != "activation" or not r.module.startswith(module) or r.is_duplicate:
            continue
        seen.add(r.storage_key)
        tensors.append({"module": r.module.removeprefix(module).lstrip("."), "op": r.op, "slot": r.slot,
                        "shape": list(r.shape), "dtype": r.dtype, "storage_bytes": r.storage_bytes,
                        "kept": r.storage_key in named})
    return {"saved_bytes": sum(t["storage_bytes"] for t in tensors),
            "kept_bytes": sum(t["storage_bytes"] for t in tensors if t["kept"]), "tensors": tensors}


def layer_listing(case: ActivationCase, records: list[SavedRecord]) -> list[dict[str, Any]]:
    """What a compiled layer saves, tensor by tensor (its autograd function names no op): each distinct activation
    storage packed inside the layer, with its shape in symbols, dtype and bytes."""
    from builder.validate.cases import symbol_values
    from builder.validate.oplist import shape_in_symbols

    symbols = symbol_values(case)
    return [{"shape": list(r.shape), "elements": shape_in_symbols(r.shape, symbols), "dtype": r.dtype,
             "storage_bytes": r.storage_bytes}
            for r in records if r.kind == "activation" and not r.is_duplicate and ".0" in r.module]


def enable_checkpointing(model) -> None:
    """Checkpoint every layer the transformers way (non-reentrant, its default)."""
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable()
    else:
        model.gradient_checkpointing_enable()


@contextlib.contextmanager
def masks_as_in_eager_runs(fake: bool):
    """Under fake tensors, let transformers skip the causal mask as it does in a real run.

    transformers 5.23 treats a FakeTensor as "tracing" (`utils.import_utils.is_tracing`) and
    then materialises an s x s attention mask for SDPA instead of passing `is_causal=True`;
    a real run with no padding skips the mask. Inside fake-tensor measurements the check
    looks only at the global tracing state (dynamo, jit, stream capture), not at the tensor,
    and packed-sequence detection (which reads position_ids' values) reports no packing,
    which is what it finds for our arange positions.
    """
    if not fake:
        yield
        return
    from transformers import masking_utils

    original_tracing, original_packed = masking_utils.is_tracing, masking_utils.find_packed_sequence_indices
    masking_utils.is_tracing = lambda tensor=None: original_tracing(None)
    masking_utils.find_packed_sequence_indices = lambda position_ids: None
    try:
        yield
    finally:
        masking_utils.is_tracing, masking_utils.find_packed_sequence_indices = original_tracing, original_packed
