"""transformers' attention variants in the hf op list (builder.model.oplists _QK_NORMS, _LATENT_ATTENTION): Qwen3's
RMSNorms over each query and key head, and DeepSeek's multi-head latent attention, pinned to whole small layers
measured on CPU with transformers 5.23.0 under torch 2.13.0 (content/validation/activations.json: the dense Qwen3
cases; content/validation/moe.json: Qwen3-MoE, DeepSeek-V2 and DeepSeek-V3). Sources:
models/qwen3/modeling_qwen3.py Qwen3Attention.forward and Qwen3RMSNorm.forward; models/deepseek_v2/modeling_deepseek_v2.py
and models/deepseek_v3/modeling_deepseek_v3.py, DeepseekV2Attention / DeepseekV3Attention forward and expand_kv."""

from __future__ import annotations

import json

import pytest

from builder.catalog import default_models
from builder.model import Config, estimate
from builder.validate.compare import compare_documents
from builder.validate.results import VALIDATION_DIR

MODELS = default_models()
ACTIVATIONS = json.loads((VALIDATION_DIR / "activations.json").read_text())
MOE = json.loads((VALIDATION_DIR / "moe.json").read_text())


def case(document: dict, name: str) -> dict:
    return next(c for c in document["cases"] if c["name"] == name)


def rows(file: str, document: dict, name: str) -> dict:
    return {r.quantity: r for r in compare_documents({file: {**document, "cases": [case(document, name)]}})}


# The measured shapes: T = 2 x 64 tokens, h 64, a 4 query heads of d 16, k KV heads.
T, H, A, D = 128, 64, 4, 16


def qk_norms(k: int, fp32_input: int, cast_back: int) -> int:
    """q_norm and k_norm, bytes: each head's input in fp32 (saved by pow and the multiply), the rsqrt per token and
    head (fp32), the normalised input cast back (saved by the weight's product)."""
    return sum(T * heads * (fp32_input * D + 4 + cast_back * D) for heads in (A, k))


@pytest.mark.parametrize("qwen3, expected", [
    # fp32: the input in fp32 is q_proj's (k_proj's) output itself, the cast back is the normalised tensor.
    ("qwen3-sdpa-fp32-b2-s64-h64-a4-kv2-f176-v256-none-nodrop", qk_norms(2, 4, 4)),
    ("qwen3-eager-fp32-b2-s64-h64-a4-kv2-f176-v256-none-nodrop", qk_norms(2, 4, 4)),
    # bf16: a new fp32 copy of the projection's output, the bf16 cast back.
    ("qwen3-sdpa-bf16-b2-s64-h64-a4-kv2-f176-v256-none-nodrop", qk_norms(2, 4, 2)),
    ("qwen3-eager-bf16-b2-s64-h64-a4-kv2-f176-v256-none-nodrop", qk_norms(2, 4, 2)),
    ("qwen3-sdpa-bf16-b2-s64-h64-a4-kv4-f176-v256-none-nodrop", qk_norms(4, 4, 2)),
    # torch.autocast over fp32 weights: the projections return bf16, so as bf16 (the residual stream's norms, fp32
    # under autocast, are Llama's).
    ("qwen3-sdpa-fp32-b2-s64-h64-a4-kv2-f176-v256-none-nodrop-amp", qk_norms(2, 4, 2)),
    # Full recomputation: a checkpointed layer saves nothing of its own.
    ("qwen3-sdpa-bf16-b2-s64-h64-a4-kv2-f176-v256-full-nodrop", 0),
])
def test_a_qwen3_layer_is_a_llama_layer_and_its_qk_norms(qwen3, expected):
    """A Qwen3 layer saves, measured, what the Llama layer of the same shape saves and the q/k norms' tensors; the op
    list predicts it byte for byte."""
    llama = qwen3.replace("qwen3", "llama", 1)
    measured = case(ACTIVATIONS, qwen3)["per_layer"]["activation_storage_bytes"]
    assert measured - case(ACTIVATIONS, llama)["per_layer"]["activation_storage_bytes"] == expected
    compared = rows("activations.json", ACTIVATIONS, qwen3)
    assert compared["per_layer"].predicted == measured
    assert compared["rest"].predicted == compared["rest"].measured


@pytest.mark.parametrize("name", ["qwen3_moe-sdpa-fp32-b2-s64-h64-a4-kv2-f96-e4k2-v256-none-nodrop",
                                  "qwen3_moe-sdpa-bf16-b2-s64-h64-a4-kv2-f96-e4k2-nonorm-v256-none-nodrop",
                                  "qwen3_moe-eager-bf16-b2-s64-h64-a4-kv2-f96-e4k2-v256-none-nodrop"])
def test_a_qwen3_moe_layer_is_predicted_whole(name):
    """Qwen3-MoE, whole layer: 11-14% above the op lists without the q/k norms, exact with them."""
    compared = rows("moe.json", MOE, name)
    assert compared["per_layer"].predicted == compared["per_layer"].measured
    assert compared["moe_block"].predicted == compared["moe_block"].measured


# Latent attention of the measured DeepSeek layers (builder.validate.cases.hf_config): kv_lora_rank c = 2d, rotary
# part p = d/4 of each query/key head, non-rotary part n = d - p, values v = d.
C, P, N, V = 32, 4, 12, 16


def latent_attention(act: int, fused: bool, q_lora: int = 0) -> int:
    """The attention half of a DeepSeek layer, bytes: the input norm (fp32 input, rsqrt, cast back), the input of
    q_proj (q_a_proj) and kv_a_proj_with_mqa (one tensor), q_a_layernorm and q_b_proj's input with a low-rank query,
    kv_a_layernorm (its fp32 input: in an fp32 model a view of kv_a_proj_with_mqa's output, whose storage holds the
    rotary key too; else a copy of the latent), kv_b_proj's input, the query and key SDPA saves (new tensors, d wide),
    its value (a view of kv_b_proj's output: n + v per head) or eager attention's copy (v) and its fp32 softmax, the
    logsumexp, the kernel's output (heads first) and o_proj's input (its copy), and the post-attention norm."""
    norm = 4 * T * H + 4 * T + act * T * H
    query = (4 * T * q_lora + 4 * T + act * T * q_lora + act * T * q_lora) if q_lora else 0
    latent = 4 * T * (C + (P if act == 4 else 0)) + 4 * T + act * T * C + act * T * C
    heads = act * T * A * D * 2
    if fused:
        core = act * T * A * (N + V) + 4 * T * A + act * T * A * V
    else:
        core = act * T * A * V + 4 * A * T * 64  # the fp32 softmax output, b x a x s x s
    return norm + act * T * H + query + latent + heads + core + act * T * A * V + norm


@pytest.mark.parametrize("name, expected", [
    ("deepseek_v2-sdpa-fp32-b2-s64-h64-a4-kv4-f96-e4k2-sh2-nonorm-v256-none-nodrop", latent_attention(4, True)),
    ("deepseek_v2-sdpa-bf16-b2-s64-h64-a4-kv4-f96-e4k2-sh2-nonorm-v256-none-nodrop", latent_attention(2, True)),
    ("deepseek_v2-sdpa-bf16-b2-s64-h64-a4-kv4-f96-e4k2-sh2-g2-nonorm-v256-none-nodrop", latent_attention(2, True)),
    ("deepseek_v2-eager-fp32-b2-s64-h64-a4-kv4-f96-e4k2-sh2-nonorm-v256-none-nodrop", latent_attention(4, False)),
    ("deepseek_v3-sdpa-fp32-b2-s64-h64-a4-kv4-f96-e4k2-sh1-g2-v256-none-nodrop", latent_attention(4, True)),
    ("deepseek_v3-sdpa-fp32-b2-s64-h64-a4-kv4-f96-e4k2-sh1-g2-q24-v256-none-nodrop", latent_attention(4, True, 24)),
    ("deepseek_v3-sdpa-bf16-b2-s64-h64-a4-kv4-f96-e4k2-sh1-g2-q24-v256-none-nodrop", latent_attention(2, True, 24)),
])
def test_a_deepseek_layer_saves_its_latent_attention_and_moe_block(name, expected):
    """A DeepSeek layer, measured: its latent attention (derived above) and its MoE block's kept tensors, plus what the
    group selection saves on a branch that dies with the forward (builder.validate.compare.compare_moe_case leaves
    it out). Predicted byte for byte (8-10% under before the latent attention's rows)."""
    measured = case(MOE, name)
    block = measured["moe_block"]
    assert measured["per_layer"]["activation_storage_bytes"] == expected + block["saved_bytes"]
    compared = rows("moe.json", MOE, name)
    assert compared["per_layer"].predicted == expected + block["kept_bytes"]
    assert compared["rest"].predicted == compared["rest"].measured


def test_deepseek_v3_attention_in_the_catalog():
    """DeepSeek-V3 (config.json: h 7168, 128 heads of 192 = 128 + 64, v 128, kv_lora_rank 512, q_lora_rank 1536),
    bf16, 4096 tokens, flash attention, per layer: norms (input and post-attention norms, q_a_layernorm,
    kv_a_layernorm: fp32 input, rsqrt, bf16 cast back) and attention (the norm output, q_b_proj's and kv_b_proj's
    inputs, query and key 2 x 2ad, the value's storage 2a(n + v), the logsumexp 4a, the kernel's output and o_proj's
    input 2 x 2av)."""
    arch = MODELS["deepseek-v3"]
    h, a, d, v, c, q, p = 7168, 128, 192, 128, 512, 1536, 64
    assert (arch.hidden, arch.heads, arch.d_head, arch.v_head_dim, arch.kv_lora_rank, arch.q_lora_rank,
            arch.qk_rope_head_dim) == (h, a, d, v, c, q, p)
    tokens = 4096
    breakdown = estimate(Config(model=arch, seq_len=tokens, attention="flash"))
    norms, attention = (breakdown.get(f"activations/{group}") / arch.layers for group in ("norms", "attention"))
    assert norms == tokens * (2 * (4 * h + 4 + 2 * h) + (4 * q + 4 + 2 * q) + (4 * c + 4 + 2 * c))
    assert attention == tokens * (2 * h + 2 * q + 2 * c + 2 * 2 * a * d + 2 * a * (d - p + v) + 4 * a
                                  + 2 * 2 * a * v)


# DeepSeek's first dense layers (first_k_dense_replace 1; builder.validate.cases.FIRST_DENSE_FFN, F = 136): the
# two-layer model is one dense layer (latent attention and a dense SwiGLU MLP) and one MoE layer.
F_DENSE = 136


@pytest.mark.parametrize("name, moe_layer, act, q_lora", [
    ("deepseek_v2-sdpa-fp32-b2-s64-h64-a4-kv4-f96-e4k2-sh2-nonorm-fd1-v256-none-nodrop",
     "deepseek_v2-sdpa-fp32-b2-s64-h64-a4-kv4-f96-e4k2-sh2-nonorm-v256-none-nodrop", 4, 0),
    ("deepseek_v3-sdpa-bf16-b2-s64-h64-a4-kv4-f96-e4k2-sh1-g2-q24-fd1-v256-none-nodrop",
     "deepseek_v3-sdpa-bf16-b2-s64-h64-a4-kv4-f96-e4k2-sh1-g2-q24-v256-none-nodrop", 2, 24),
])
def test_deepseek_first_dense_layer_keeps_a_dense_mlp(name, moe_layer, act, q_lora):
    """The two-layer model with a first dense layer, measured (moe.json): the embedding, final norm and loss and the
    MoE layer as the all-MoE case of the same shape measures them, and a dense layer: its latent attention and a
    LlamaMLP of F (the norm output gate and up read, SiLU's input and output, up's output, the product). Predicted
    byte for byte (20-28% over when the dense layer counted as an MoE layer)."""
    fd, moe = case(MOE, name), case(MOE, moe_layer)
    dense_layer = latent_attention(act, True, q_lora) + act * T * H + 4 * act * T * F_DENSE
    assert (fd["two_layers"]["activation_storage_bytes"] + fd["two_layers"]["input_bytes"]
            == moe["rest"]["activation_storage_bytes"] + moe["rest"]["input_bytes"]
            + moe["per_layer"]["activation_storage_bytes"] + dense_layer)
    compared = rows("moe.json", MOE, name)
    unkept = fd["moe_block"]["saved_bytes"] - fd["moe_block"]["kept_bytes"]
    assert compared["whole_model"].measured == compared["whole_model"].predicted
    assert compared["whole_model"].predicted == (fd["two_layers"]["activation_storage_bytes"]
                                                 + fd["two_layers"]["input_bytes"] - unkept)


def test_deepseek_v3_first_dense_layers_in_the_catalog():
    """DeepSeek-V3 (config.json: 61 layers, first_k_dense_replace 3, intermediate_size 18432), bf16, 4096 tokens: the
    MLP part is 3 dense layers (the norm output 2h, SiLU's input and output, up's output and the product, 4 x 2F) and
    58 MoE layers; the router part the 58 MoE layers' only."""
    arch = MODELS["deepseek-v3"]
    assert (arch.layers, arch.first_dense_layers, arch.ffn) == (61, 3, 18432)
    tokens, h, F = 4096, arch.hidden, arch.ffn
    config = Config(model=arch, seq_len=tokens, attention="flash")
    every_moe = estimate(config.with_changes(model=arch.with_changes(first_dense_layers=0)))
    breakdown = estimate(config)
    dense_mlp = tokens * (2 * h + 4 * 2 * F)
    moe_mlp, moe_router = (every_moe.get(f"activations/{group}") // 61 for group in ("mlp", "router"))
    assert breakdown.get("activations/mlp") == 3 * dense_mlp + 58 * moe_mlp
    assert breakdown.get("activations/router") == 58 * moe_router


@pytest.mark.parametrize("name", ["deepseek-v3", "deepseek-v2-lite", "qwen3-8b", "qwen3-30b-a3b", "llama-3-8b"])
def test_a_layers_weight_gradients_are_its_parameters(name):
    """The weight gradients one layer's backward makes (builder.model.oplists LAYER_GRADS, which the peak inside the
    last layer's backward reads) are its parameters, tensor for tensor: latent attention's q_a_proj, q_a_layernorm,
    q_b_proj (or q_proj), kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj and a v-wide o_proj; Qwen3's q_norm and
    k_norm. fp32 gradients, an MoE layer (DeepSeek's first dense layers set aside); DeepSeek-V3's router bias
    (e_score_correction_bias, E values) is a buffer in transformers 5.23, with no gradient."""
    from builder.model.activations import moment_environment
    from builder.model.architecture import layer_param_groups

    arch = MODELS[name].with_changes(first_dense_layers=0)
    grads = moment_environment(arch, Config(model=arch, seq_len=4096, precision="fp32"))["layer_grads"]
    buffers = arch.experts if arch.router_bias else 0
    assert grads == 4 * (sum(layer_param_groups(arch).values()) - buffers)
