"""PEFT's LoRA layers measured against the model's LoRA op-list rows and adapter states.

Sources: PEFT 0.21.2 peft/tuners/lora/layer.py Linear.forward (x = self._cast_input_dtype(x, lora_A.weight.dtype);
result + lora_B(lora_A(dropout(x))) * scaling) and LoraLayer.update_layer (nn.Dropout(p=lora_dropout) when p > 0,
else nn.Identity); peft/tuners/tuners_utils.py cast_adapter_dtype (autocast_adapter_dtype=True, the default, upcasts
bf16/fp16 adapters to fp32); PyTorch 2.13 autograd (nn.Linear saves its input only for a weight that needs a
gradient; native_dropout saves its bool mask).
"""

from __future__ import annotations

import pytest

from tests import validate_extra

pytestmark = pytest.mark.validate
torch, *_ = validate_extra.modules("torch", "transformers", "peft")

from builder.catalog import default_models  # noqa: E402
from builder.model import Config, estimate  # noqa: E402
from builder.validate.cases import ActivationCase  # noqa: E402
from builder.validate.lora import (PEFT_VERSION, LoraCase, adapted_model, adapter_dtypes, lora_cases,  # noqa: E402
                                   measure_lora_case, predicted_per_layer)

torch.set_num_threads(1)
BF16_QKVO = LoraCase(ActivationCase(family="llama", attention="sdpa", dtype="bfloat16", kv_heads=2), 8)


def test_the_pinned_peft_is_installed():
    """The measurements below are of the version the op list cites."""
    import peft as installed

    assert installed.__version__ == PEFT_VERSION


def test_one_adapted_bf16_layer_saves_what_peft_forward_implies():
    """Llama layer, b=2, s=64 (T=128), h=64, 4 heads of 16, 2 KV heads, f=176, r=8 on q, k, v, o, bf16, SDPA, by hand
    from PEFT's Linear.forward: both RMSNorms' fp32 input and rsqrt (2 x (T h 4 + T 4)); per adapter the fp32 cast
    of its input (T h 4, o's T a d 4: a new tensor below fp32) and lora_A's output (T r 4); the attention kernel's
    Q, K, V, logsumexp and output (T a d 2 + 2 T k d 2 + b a s 4 + T a d 2: o_proj is frozen but the kernel keeps
    its output); SwiGLU's three T f bf16 tensors. The frozen projections save nothing."""
    T, h, a_d, k_d, f, r = 128, 64, 64, 32, 176, 8
    norms = 2 * (T * h * 4 + T * 4)
    adapters = 4 * (T * h * 4 + T * r * 4)
    attention = T * a_d * 2 + 2 * T * k_d * 2 + 2 * 4 * 64 * 4 + T * a_d * 2
    mlp = 3 * T * f * 2
    assert norms + adapters + attention + mlp == 400_384
    assert measure_lora_case(BF16_QKVO)["per_layer"] == 400_384
    assert predicted_per_layer(BF16_QKVO) == 400_384


def test_dropout_at_zero_is_an_identity():
    """LoraLayer.update_layer: lora_dropout=0.0 (LoraConfig's default) makes nn.Identity, p > 0 nn.Dropout."""
    def layer(p):
        model = adapted_model(LoraCase(BF16_QKVO.base, 8, ("q",), p), 1)
        return type(model.base_model.model.model.layers[0].self_attn.q_proj.lora_dropout["default"]).__name__

    assert (layer(0.0), layer(0.05)) == ("Identity", "Dropout")


@pytest.mark.parametrize("case", lora_cases(), ids=lambda c: c.name)
def test_lora_rows_within_two_percent_of_peft(case):
    """Every LoRA op-list row against PEFT 0.21.2 (fp32 and bf16, SDPA and eager, q/k/v/o or all seven projections,
    lora_dropout 0 and 0.1): the model's per-layer bytes within 2% of the measured ones."""
    measured = measure_lora_case(case)["per_layer"]
    assert abs(predicted_per_layer(case) - measured) <= 0.02 * measured


def test_adapters_take_fp32_in_a_bf16_model():
    """PEFT's cast_adapter_dtype (autocast_adapter_dtype=True) upcasts bf16 adapters to fp32, so their gradients are
    fp32 too, and the frozen base gets none: the model counts adapters and their gradients at 4 B each."""
    dtypes = adapter_dtypes(BF16_QKVO)
    assert dtypes == {"weights": {"torch.float32"}, "grads": {"torch.float32"}, "frozen_grads": {"None"}}
    b = estimate(Config(model=default_models()["llama-3-8b"], lora_rank=16))
    adapters = 16 * 32 * ((4096 + 4096) + 2 * (4096 + 1024) + (4096 + 4096))
    assert b.get("weights/lora_adapters") == 4 * adapters and b.get("gradients") == 4 * adapters
