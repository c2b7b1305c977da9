"""QLoRA layers measured against the model's op-list rows: bitsandbytes' 4-bit linear layers under PEFT's adapters,
with and without PEFT's prepare_model_for_kbit_training, with and without torch.autocast (builder/validate/qlora.py).

Sources: bitsandbytes 0.50.2 bitsandbytes/nn/modules.py Linear4bit.forward (the input cast to the compute dtype, the
output cast back to the input's dtype) and bitsandbytes/autograd/_functions.py MatMul4Bit.forward (ctx.tensors =
(None, B): the packed weight only); PEFT 0.21.2 peft/utils/other.py prepare_model_for_kbit_training (fp16/bf16
parameters that are not Params4bit cast to fp32) and peft/tuners/lora/bnb.py Linear4bit.forward (requires_conversion
= not torch.is_autocast_enabled()); PyTorch 2.13 aten/src/ATen/autocast_mode.cpp (a linear layer under autocast casts
its input and its weight, and autograd saves the casts).
"""

from __future__ import annotations

import pytest

from tests import validate_extra

pytestmark = pytest.mark.validate
torch, *_ = validate_extra.modules("torch", "transformers", "peft", "bitsandbytes")

from builder.model import Config, estimate  # noqa: E402
from builder.validate.cases import ActivationCase  # noqa: E402
from builder.validate.qlora import (  # noqa: E402
    BITSANDBYTES_VERSION, QLoraCase, measure_qlora_case, predicted_per_layer, qlora_cases, qlora_model)

torch.set_num_threads(1)
SDPA = ActivationCase(family="llama", attention="sdpa", dtype="bfloat16", kv_heads=2)


def test_the_pinned_bitsandbytes_is_installed():
    import bitsandbytes

    assert bitsandbytes.__version__ == BITSANDBYTES_VERSION


def test_prepare_makes_every_saved_activation_fp32():
    """prepare_model_for_kbit_training without autocast: the layer saves what an fp32 model's layer saves. Tiny
    layer: T = 2 x 64 tokens, h 64, 4 heads of 16, 2 KV heads, f 176, LoRA rank 8 on q, k, v, o. Without prepare the
    bf16 layer saves 400,384 B (the bf16 LoRA figure of tests/test_lora_peft.py); with it 486,400 B: the two norms'
    fp32 inputs as before (T h 4 B each, with their T x 4 B rsqrt), SDPA's q, k, v and output in fp32 (T a d + 2 T k
    d + T a d, x 4 B) and its fp32 logsumexp, the three MLP tensors in fp32 (3 T f x 4 B), and the adapters' fp32
    inputs, one shared by q, k and v (the fp32 stream is its own cast), o's the kernel's output, and lora_A outputs."""
    T, h, f, r, a_d, k_d = 128, 64, 176, 8, 64, 32
    norms = 2 * (4 * T * h + 4 * T)
    attention = 4 * (T * a_d + 2 * T * k_d + T * a_d) + 4 * 2 * 4 * 64
    mlp = 3 * 4 * T * f
    lora = 4 * T * h + 4 * 4 * T * r
    case = QLoraCase(SDPA, "prepare")
    assert measure_qlora_case(case)["per_layer"] == norms + attention + mlp + lora == 486_400


def test_prepare_bf16_needs_autocast():
    """prepare-bf16 (the output layer cast back to bf16, the norms left fp32) fails without autocast, and the model
    refuses it."""
    model = qlora_model(QLoraCase(SDPA, "prepare-bf16"), 1)
    ids = torch.zeros(1, 8, dtype=torch.long)
    with pytest.raises(RuntimeError, match="same dtype"):
        model(input_ids=ids, labels=ids)
    with pytest.raises(ValueError, match="prepare-bf16"):
        estimate(Config(params=7_000_000_000, lora_rank=8, qlora=True, kbit_prepare="prepare-bf16"))


@pytest.mark.parametrize("case", qlora_cases(), ids=lambda c: c.name)
def test_qlora_rows_match_the_measurement(case):
    """Every QLoRA case: the model's per-layer bytes equal the measured ones, byte for byte."""
    assert predicted_per_layer(case) == measure_qlora_case(case)["per_layer"]
