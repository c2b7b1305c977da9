"""QLoRA's dequantised weight (builder.model.dequant), pinned to bitsandbytes' own arithmetic.

bitsandbytes 0.50.2.dev0 (commit 95f9af3): MatMul4Bit.backward dequantises the whole packed weight,
F.dequantize_4bit(B, ctx.state), an N x K tensor in the dtype it was quantised from (bf16 here); with double
quantisation functional.dequantize_4bit first makes the fp32 absmax (one value per block of 64) from the 8-bit one.
The CUDA gemm_4bit's _dequant_linear_fallback, which the forward takes past 1,536 tokens, makes the same copy
(B_dq = torch.empty(shapeB, dtype=A.dtype)) after two fp32 absmax tensors (absmax_dq, absmax_dq + absmax_offset).

Not measured here: bitsandbytes is not installed in this environment and its CPU backend takes another path
(backends/cpu/ops.py), and no GPU is at hand; the tests pin the code's arithmetic on Mistral 7B's largest linear
(the MLP's 14336 x 4096, Mistral-7B-v0.1 config.json: intermediate_size 14336, hidden_size 4096).
"""

from builder.catalog import default_models
from builder.model import Config
from builder.model.peak import need

MODELS = default_models()
NAME = "weights/dequantised_linear"
MISTRAL_MLP = 14336 * 4096
BF16_COPY = MISTRAL_MLP * 2  # 117,440,512 B
ABSMAX_FP32 = MISTRAL_MLP // 64 * 4  # 3,670,016 B: one fp32 absmax per block of 64


def _by_phase(config: Config) -> dict[str, int]:
    return {phase.name: sum(p.bytes for p in phase.parts if p.name == NAME) for phase in need(config).steps}


def test_backward_copy_is_the_largest_linear_in_bf16():
    got = _by_phase(Config(model=MODELS["mistral-7b"], lora_rank=16, qlora=True, qlora_double_quant=False,
                           seq_len=2048))
    assert BF16_COPY == 117_440_512
    assert got["layer_backward"] == got["first_layer_backward"] == BF16_COPY


def test_double_quantisation_adds_the_fp32_absmax():
    got = _by_phase(Config(model=MODELS["mistral-7b"], lora_rank=16, qlora=True, seq_len=2048))
    assert got["layer_backward"] == BF16_COPY + ABSMAX_FP32 == 121_110_528


def test_forward_fallback_holds_two_absmax_tensors():
    # Eager attention gives the layer's forward a moment of its own (its softmax), where the copy is counted.
    got = _by_phase(Config(model=MODELS["mistral-7b"], lora_rank=16, qlora=True, seq_len=2048, attention="eager"))
    assert got["layer_forward"] == BF16_COPY + 2 * ABSMAX_FP32


def test_fused_kernel_at_four_tokens_makes_no_forward_copy():
    # backends/cuda/ops.py _GEMM_4BIT_CUSTOM_FLOOR_M = 4: at most 4 rows always take the fused kernel.
    got = _by_phase(Config(model=MODELS["mistral-7b"], lora_rank=16, qlora=True, seq_len=4, attention="eager"))
    assert got.get("layer_forward", 0) == 0
    assert got["layer_backward"] == BF16_COPY + ABSMAX_FP32


def test_only_quantised_weights_are_dequantised():
    for config in (Config(model=MODELS["mistral-7b"], lora_rank=16, seq_len=2048),
                   Config(model=MODELS["mistral-7b"], seq_len=2048)):
        assert not any(_by_phase(config).values())


def test_tensor_parallel_ranks_dequantise_their_shard():
    got = _by_phase(Config(model=MODELS["mistral-7b"], lora_rank=16, qlora=True, qlora_double_quant=False,
                           seq_len=2048, tp=2))
    assert got["layer_backward"] == BF16_COPY // 2
