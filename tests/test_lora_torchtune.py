"""torchtune's LoRA layers measured against the model's LoRA op-list rows (implementation torchtune).

Sources, read at torchtune commit 30b8519 (the commit of the README's memory table; the same in v0.6.1):
- torchtune/modules/peft/lora.py LoRALinear.__init__ (self.dropout = nn.Dropout(p=dropout) if dropout > 0.0 else
  nn.Identity(); lora_a = nn.Linear(in_dim, rank, bias=False), lora_b = nn.Linear(rank, out_dim, bias=False)) and
  LoRALinear.forward, copied below as test_selective_op.py copies torchtitan's policy (torchtune is not installed);
- recipes/lora_finetune_single_device.py _setup_model: the model built under training.set_default_dtype(self._dtype),
  so the adapters are in the model's dtype, then set_trainable_params(model, adapter_params): only the adapters train
  (base weights, norms and embeddings frozen);
- torchtune/training/_compile.py compile_model: each TransformerSelfAttentionLayer compiled with m.compile().
The layer around the adapters is transformers 5.23's LlamaDecoderLayer, whose ops torchtune's layer repeats (RMSNorm,
rotary, SwiGLU: builder.model.activations), with as many KV heads as query heads, where torchtune's
MultiHeadAttention copies nothing (tests/test_torchtune_attention.py). PyTorch 2.13 autograd: a linear layer saves
its input only for a weight that needs a gradient; native_dropout saves a bool mask.

torchao's NF4Tensor.get_original_weight (torchao/dtypes/nf4tensor.py at v0.5.0, the same through torchao's main) is
copied too, on plain tensors (torchao is not installed), to measure what its eager dequantisation holds at once.
"""

from __future__ import annotations

import pytest

from tests import validate_extra

pytestmark = pytest.mark.validate
torch, *_ = validate_extra.modules("torch", "transformers")

from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from builder.catalog import default_models  # noqa: E402
from builder.model import Config, estimate  # noqa: E402
from builder.model.peak import need  # noqa: E402
from builder.validate.cases import DTYPES, LORA_TARGET_MODULES, ActivationCase, hf_config  # noqa: E402
from builder.validate.compare import architecture_for  # noqa: E402
from builder.validate.hf_models import build_model, cuda_style_dropout, default_dtype, make_token_ids  # noqa: E402
from builder.validate.measure import compile_layers  # noqa: E402
from builder.validate.peak import CpuMeter  # noqa: E402
from builder.validate.saved import SavedTensorRecorder, total_saved  # noqa: E402

torch.set_num_threads(1)
ALL = tuple(LORA_TARGET_MODULES)
QVO_MLP = ("q", "v", "o", "gate", "up", "down")  # Llama 3.2 3B's LoRA and QLoRA configs (recipes/configs/llama3_2)


class LoRALinear(nn.Module):
    """torchtune/modules/peft/lora.py LoRALinear (30b8519) without its QLoRA branch, over the frozen weight of the
    transformers projection it replaces (bias-free, as torchtune's Llama projections are)."""

    def __init__(self, base: nn.Linear, rank: int, alpha: float, dropout: float = 0.0):
        super().__init__()
        self.rank, self.alpha = rank, alpha
        self.weight, self.bias = base.weight, None
        self.dropout = nn.Dropout(p=dropout) if dropout > 0.0 else nn.Identity()
        self.lora_a = nn.Linear(in_features=base.in_features, out_features=rank, bias=False)
        self.lora_b = nn.Linear(in_features=rank, out_features=base.out_features, bias=False)

    def forward(self, x):
        out = F.linear(x, self.weight, self.bias)
        lora_out = self.lora_a(self.dropout(x))
        lora_out = (self.alpha / self.rank) * self.lora_b(lora_out)
        return out + lora_out


def adapted(case: ActivationCase, layers: int, rank: int, targets: tuple[str, ...], dropout: float):
    """The case's model with torchtune's adapters (built in the model's dtype, as set_default_dtype makes them),
    only the adapters trainable."""
    model = build_model(hf_config(case, layers), case.dtype)
    with default_dtype(case.dtype):
        for layer in model.model.layers:
            for target in targets:
                parent = layer.self_attn if target in ("q", "k", "v", "o") else layer.mlp
                name = LORA_TARGET_MODULES[target]
                setattr(parent, name, LoRALinear(getattr(parent, name), rank, 2 * rank, dropout))
    for name, parameter in model.named_parameters():
        parameter.requires_grad_("lora_" in name)
    return model.train()


def saved(case: ActivationCase, layers: int, rank: int, targets: tuple[str, ...], dropout: float,
          compiled: bool) -> int:
    """Activation storage bytes one forward with loss saves (each storage once)."""
    model = adapted(case, layers, rank, targets, dropout)
    if compiled:
        compile_layers(model)
    ids = make_token_ids(case.batch, case.seq_len, case.vocab)
    recorder = SavedTensorRecorder(model, inputs=[ids])
    with torch.enable_grad(), cuda_style_dropout(), recorder:
        model(input_ids=ids, labels=ids)
    return total_saved(recorder.records).activation_storage_bytes


def measured(case, rank, targets, dropout=0.0, compiled=False) -> int:
    """Per-layer bytes: the two-layer model's less the one-layer model's (the first layer's input norm saves nothing,
    its input coming from the frozen embedding; the second layer's does)."""
    return saved(case, 2, rank, targets, dropout, compiled) - saved(case, 1, rank, targets, dropout, compiled)


def predicted(case, rank, targets, dropout=0.0, compiled=False) -> int:
    def per(layers: int) -> int:
        config = Config(model=architecture_for(hf_config(case, layers), layers, case.name), precision=DTYPES[case.dtype],
                        micro_batch=case.batch, seq_len=case.seq_len, attention=case.attention, lora_rank=rank,
                        lora_targets=targets, lora_dropout=dropout, implementation="torchtune", compile=compiled)
        return estimate(config).get("activations", default=None, transient=False)

    return per(2) - per(1)


BF16 = ActivationCase(family="llama", attention="sdpa", dtype="bfloat16", kv_heads=4)


def test_one_adapted_bf16_layer_saves_what_loralinear_forward_implies():
    """Llama layer, b=2, s=64 (T=128), h=64, 4 heads of 16 (as many KV heads), f=176, r=8 on q, k, v, o, bf16, SDPA,
    by hand from LoRALinear.forward: both RMSNorms' fp32 input and rsqrt (2 x (T h 4 + T 4)); the norm's bf16 output
    once, saved by the lora_a of q, k and v alike (T h 2), o's lora_a input being the attention kernel's saved output;
    four lora_a outputs (4 x T r 2); the kernel's Q, K, V, output (4 x T a d 2) and logsumexp (b a s 4); SwiGLU's
    three T f bf16 tensors. The frozen projections save nothing. PEFT's fp32 casts would be 4 x T h 4 + 4 x T r 4."""
    T, h, a_d, f, r = 128, 64, 64, 176, 8
    norms = 2 * (T * h * 4 + T * 4)
    adapters = T * h * 2 + 4 * T * r * 2
    attention = 4 * T * a_d * 2 + 2 * 4 * 64 * 4
    mlp = 3 * T * f * 2
    assert norms + adapters + attention + mlp == 293_888
    assert measured(BF16, 8, ("q", "k", "v", "o")) == 293_888
    assert predicted(BF16, 8, ("q", "k", "v", "o")) == 293_888


def test_dropout_gives_each_adapter_its_mask_and_output():
    """lora_dropout 0.1: every adapter's nn.Dropout saves its bool mask (T x width x 1 B) and lora_a its bf16 output
    (T x width x 2 B), and the shared norm output is no adapter's input any more: 4 x (T h 1 + T h 2) - T h 2 more
    than at 0 (o's width a d = h here)."""
    T, h = 128, 64
    more = 4 * (T * h + T * h * 2) - T * h * 2
    assert measured(BF16, 8, ("q", "k", "v", "o"), 0.1) == 293_888 + more == 375_808


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("targets", [("q", "k", "v", "o"), ALL, QVO_MLP], ids=["qkvo", "all", "qvo-mlp"])
@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_eager_layers_match_byte_for_byte(dtype, attention, targets, dropout):
    case = ActivationCase(family="llama", attention=attention, dtype=dtype, kv_heads=4)
    assert predicted(case, 8, targets, dropout) == measured(case, 8, targets, dropout)


@pytest.mark.parametrize("case, targets, bytes_measured", [
    # The compiled layer's list without weight gradients (the layer input and rsqrt kept for each norm, SiLU input and
    # up output for the MLP, o_proj's input the kernel's output) plus the norm output for q/k/v's lora_a and the four
    # lora_a outputs: 216,064 B, against 293,888 B eager.
    (BF16, ("q", "k", "v", "o"), 216_064),
    (BF16, ALL, 283_648),
    (ActivationCase(family="llama", attention="eager", dtype="bfloat16", kv_heads=4), QVO_MLP, 414_720),
], ids=["bf16-sdpa-qkvo", "bf16-sdpa-all", "bf16-eager-qvo-mlp"])
def test_compiled_layers_match_byte_for_byte(case, targets, bytes_measured):
    """Each layer compiled as torchtune's compile_model does (nn.Module.compile, inductor), the saved tensors counted
    as its autograd function packs them."""
    assert measured(case, 8, targets, compiled=True) == bytes_measured
    assert predicted(case, 8, targets, compiled=True) == bytes_measured


def _get_original_weight(quantized_data, quantized_scalers, quantization_factor, scaler_mean, nf4, shape,
                         block_size=64, scaler_block_size=256):
    """torchao/dtypes/nf4tensor.py NF4Tensor.get_original_weight and dequantize_scalers (v0.5.0), on plain tensors."""
    first_elements = (quantized_data >> 4).to(torch.long)
    second_elements = (quantized_data & 0b1111).to(torch.long)
    dequantized_first = nf4[first_elements]
    dequantized_second = nf4[second_elements]
    n_scaler_blocks = quantized_scalers.numel() // scaler_block_size
    scalers = ((quantized_scalers.view(n_scaler_blocks, scaler_block_size) / quantization_factor.unsqueeze(-1))
               .flatten().to(nf4.dtype) + scaler_mean)
    repeated = scalers.unsqueeze(-1).expand(scalers.size(0), block_size // 2)
    scaled_first = dequantized_first * repeated.flatten()
    scaled_second = dequantized_second * repeated.flatten()
    scaled_first = scaled_first.unsqueeze(-1).transpose(0, 1)
    scaled_second = scaled_second.unsqueeze(-1).transpose(0, 1)
    return torch.stack([scaled_first, scaled_second], dim=-1).reshape(shape)


def test_torchaos_eager_dequantisation_holds_fourteen_bytes_a_weight():
    """A 512 x 256 bf16 weight (E = 131,072): at torch.stack the int64 halves (2 x E/2 x 8 B), the looked-up and the
    scaled bf16 halves (4 x E/2 x 2 B), the stacked copy (E x 2 B) and the scalers (E/64 x 2 B) are live at once:
    E x (8 + 3 x 2 + 2/64) = 1,839,104 B, the CPU allocator's peak during the call (torch.profiler's memory events).
    The model counts the same per weight for the largest quantised matrix of Llama 3.1 8B (14,336 x 4,096)."""
    n, k = 512, 256
    e = n * k
    generator = torch.Generator().manual_seed(0)
    tensors = (torch.randint(0, 256, (e // 2,), dtype=torch.uint8, generator=generator),
               torch.randint(-128, 128, (e // 64,), dtype=torch.int8, generator=generator),
               torch.rand(e // 64 // 256, dtype=torch.bfloat16, generator=generator) + 1,
               torch.tensor(0.1, dtype=torch.bfloat16), torch.linspace(-1, 1, 16, dtype=torch.bfloat16))
    meter = CpuMeter()
    with meter:
        with meter.phase("dequantise", True):
            weight = _get_original_weight(*tensors, (n, k))
    assert weight.shape == (n, k) and weight.dtype == torch.bfloat16
    assert meter.peaks["dequantise"] == e * (8 + 3 * 2) + e // 64 * 2 == 1_839_104
    qlora = Config(model=default_models()["llama-3.1-8b"], precision="bf16", implementation="torchtune", lora_rank=8,
                   qlora=True, seq_len=2048, micro_batch=2, attention="flash")
    backward = {phase.name: sum(p.bytes for p in phase.parts if p.name == "weights/dequantised_linear")
                for phase in need(qlora).steps}["layer_backward"]
    assert backward * e == 1_839_104 * 14336 * 4096
