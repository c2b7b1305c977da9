"""torch.autocast over a model loaded in bf16 (the bf16-autocast policy: Hugging Face Trainer's bf16=True on
from_pretrained(dtype=torch.bfloat16)), measured against the model on CPU: autocast's cast of a bf16 tensor to bf16 is
the tensor itself (PyTorch 2.13 aten/src/ATen/autocast_mode.cpp cached_cast casts only another dtype), so a layer saves
what the plain bf16 layer saves, byte for byte, and no weight copy is made (the LoRA adapters' casts are in
tests/test_lora_peft.py)."""

from __future__ import annotations

import pytest

from tests import validate_extra

pytestmark = pytest.mark.validate
torch, _ = validate_extra.modules("torch", "transformers")

from builder.model import Config, estimate  # noqa: E402
from builder.validate.cases import ActivationCase  # noqa: E402
from builder.validate.compare import compare_activation_case  # noqa: E402
from builder.validate.measure import measure_activation_case  # noqa: E402

torch.set_num_threads(1)
CASES = [ActivationCase(family=family, attention=attention, dtype="bfloat16", kv_heads=2 if family == "llama" else None,
                        autocast=True, recompute=recompute)
         for family in ("llama", "qwen3") for attention in ("sdpa", "eager") for recompute in ("none", "full")]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_a_bf16_layer_under_autocast_saves_what_the_bf16_layer_saves(case):
    measured = measure_activation_case(case)
    plain = measure_activation_case(case.with_changes(autocast=False))
    assert measured["per_layer"]["activation_storage_bytes"] == plain["per_layer"]["activation_storage_bytes"]
    rows = {row.quantity: row for row in compare_activation_case("bf16-autocast", measured)}
    assert rows["per_layer"].predicted == rows["per_layer"].measured
    assert rows["rest"].predicted == rows["rest"].measured


def test_bf16_autocast_keeps_bf16_states_and_no_weight_copies():
    """Llama 3 8B (8,030,261,248 parameters): bf16 weights, gradients and both AdamW moments, 8 B a parameter, and no
    autocast copy of a bf16 weight."""
    from builder.catalog import default_models

    b = estimate(Config(model=default_models()["llama-3-8b"], precision="bf16-autocast"))
    n = 8_030_261_248
    assert b.get("weights") == b.get("gradients") == 2 * n
    assert b.get("optimizer/adam_m") == b.get("optimizer/adam_v") == 2 * n
    assert b.get("activations/autocast_weight_copies", default=0) == 0
