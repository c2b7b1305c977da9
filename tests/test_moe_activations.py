"""transformers' MoE layers (implementation hf): what their MoE blocks save (builder.model.oplists._HF_MOE) and the
gradients of their last layer's backward, pinned to CPU measurements of transformers 5.23.0 under torch 2.13.0:
content/validation/moe.json (builder/validate/measure.py moe_block_listing: the storages first packed inside
model.layers.0.mlp that the loss's graph still holds) and the MoE cases of content/validation/peak.json."""

from __future__ import annotations

import json

import pytest

from builder.catalog import default_models
from builder.model import Config, estimate
from builder.validate.compare import compare_documents, compare_peak_case
from builder.validate.results import VALIDATION_DIR

MODELS = default_models()
MOE = json.loads((VALIDATION_DIR / "moe.json").read_text())
PEAK = json.loads((VALIDATION_DIR / "peak.json").read_text())


def case(document: dict, name: str) -> dict:
    return next(c for c in document["cases"] if c["name"] == name)


def predicted(name: str) -> int:
    return next(row.predicted for row in compare_documents({"moe.json": MOE})
                if row.case == name and row.quantity == "moe_block")


# Tiny blocks: T = 2 x 64 tokens, h 64, E 4 experts, K 2 per token, expert width f 96 (shared experts of the same
# width). Each expected sum names the tensors saved, in bytes, by the code that saves them (modeling_<family>.py and
# integrations/moe.py grouped_mm_experts_forward, transformers 5.23.0).
T, H, E, K, F = 128, 64, 4, 2, 96
# grouped_mm: three int64 gather indices (T x K each), the int32 offsets (E), the sorted input (T K h), the first
# grouped matmul's gate/up output (T K 2f), SiLU's output and the product (T K f each), the experts' output (T K h).
GROUPED = 3 * 8 * T * K + 4 * E


def experts(act: int) -> int:
    return GROUPED + act * (2 * T * K * H + 4 * T * K * F)


@pytest.mark.parametrize("name, expected", [
    # Mixtral, fp32: norm output (read by the router), softmax T x E, top-k indices, the in-place division's sum
    # and copy, the sorted fp32 routing weights.
    ("mixtral-sdpa-fp32-b2-s64-h64-a4-kv2-f96-e4k2-v256-none-nodrop",
     4 * T * H + 4 * T * E + 8 * T * K + 4 * T + 4 * T * K + experts(4) + 4 * T * K),
    # Qwen2-MoE, bf16, no renormalising (norm_topk_prob False), 2 shared experts (one MLP of 2f), the routing weights
    # cast to bf16, the shared expert gate's sigmoid output (T) and the shared expert's output it scales (T x h).
    ("qwen2_moe-sdpa-bf16-b2-s64-h64-a4-kv2-f96-e4k2-sh2-nonorm-v256-none-nodrop",
     2 * T * H + 4 * T * E + 8 * T * K + experts(2) + 2 * T * K + 2 * 4 * T * 2 * F + 2 * T + 2 * T * H),
    # DeepSeek-V2, bf16, greedy: the fp32 router linear keeps fp32 copies of its input (T x h) and weight (E x h);
    # no renormalising; fp32 routing weights; 2 shared experts; the bf16 norm output the shared experts read.
    ("deepseek_v2-sdpa-bf16-b2-s64-h64-a4-kv4-f96-e4k2-sh2-nonorm-v256-none-nodrop",
     4 * T * H + 4 * E * H + 2 * T * H + 4 * T * E + 8 * T * K + experts(2) + 4 * T * K + 2 * 4 * T * 2 * F),
    # The same, group-limited (topk_method group_limited_greedy): masked_fill's bool mask (T x E) on top; the group
    # maximum's and the group top-k's indices (3,072 B) die with the forward: saved, not kept.
    ("deepseek_v2-sdpa-bf16-b2-s64-h64-a4-kv4-f96-e4k2-sh2-g2-nonorm-v256-none-nodrop",
     4 * T * H + 4 * E * H + 2 * T * H + 4 * T * E + T * E + 8 * T * K + experts(2) + 4 * T * K
     + 2 * 4 * T * 2 * F),
    # DeepSeek-V3, fp32: the sigmoid's output (T x E, also what the gather keeps), the division's sum and copy, one
    # shared expert; in fp32 the router's .type(float32) copies are its input and weight themselves.
    ("deepseek_v3-sdpa-fp32-b2-s64-h64-a4-kv4-f96-e4k2-sh1-g2-v256-none-nodrop",
     4 * T * H + 4 * T * E + 8 * T * K + 4 * T + 4 * T * K + experts(4) + 4 * T * K + 4 * 4 * T * F),
])
def test_an_moe_block_saves_what_was_measured(name, expected):
    """The MoE block's kept bytes, measured (moe.json) and predicted, byte for byte."""
    assert case(MOE, name)["moe_block"]["kept_bytes"] == expected
    assert predicted(name) == expected


def test_deepseek_group_selection_is_saved_but_not_kept():
    """DeepSeek-V3's group selection (DeepseekV3TopkRouter: the group scores' top-2 and top-k groups, the
    masked_fill of the choice scores) saves tensors on a branch that feeds only the top-k indices: packed, but not
    held by the loss's graph once the forward returns (T x 2 groups x 2 + T x 1 int64 indices, a T x E bool mask)."""
    block = case(MOE, "deepseek_v3-sdpa-fp32-b2-s64-h64-a4-kv4-f96-e4k2-sh1-g2-v256-none-nodrop")["moe_block"]
    assert block["saved_bytes"] - block["kept_bytes"] == 8 * T * 2 * 2 + 8 * T + T * E == 5632
    assert {t["op"] for t in block["tensors"] if not t["kept"]} == {None}


def test_every_moe_case_is_exact_whole_layer_and_rest_included():
    """Every MoE block byte-exact, and every family's whole layer (Qwen3's q/k norms and DeepSeek's latent attention
    included: tests/test_attention_variants.py) and the rest outside the layers byte-exact too."""
    rows = compare_documents({"moe.json": MOE})
    blocks = [r for r in rows if r.quantity == "moe_block"]
    assert len(blocks) == len(MOE["cases"]) >= 20
    layers = [r for r in rows if r.quantity == "per_layer"]
    assert {r.case.split("-")[0] for r in layers} == {"mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3",
                                                       "gpt_oss"}
    assert all(r.status == "ok" and r.predicted == r.measured for r in rows), [r for r in rows if r.predicted != r.measured]


@pytest.mark.parametrize("name", [
    "mixtral-eager-fp32-b2-s512-h256-a8-kv4-f256-e4k2-v512-none-nodrop-L2-sgd-momentum-ga1",
    "qwen2_moe-eager-fp32-b2-s512-h256-a8-kv4-f256-e4k2-sh2-nonorm-v512-none-nodrop-L2-sgd-momentum-ga1",
    "qwen2_moe-eager-bf16-b2-s512-h256-a8-kv4-f256-e4k2-sh2-nonorm-v512-none-nodrop-L2-sgd-momentum-ga1",
])
def test_the_last_layers_backward_holds_every_experts_gradient(name):
    """The backward peaks in the last layer's softmax backward (peak.json, CPU allocator), after the MoE block's
    backward: the fused gate_up_proj and down_proj gradients hold every expert (3 x E x h x f, 3.1 MB in fp32, the
    experts no token reached included), the shared expert's three (3 x h x g, 1.6 MB) and its gate's. Predicted to
    within 200 B of 137 MB; leaving out any of these gradients would miss by more than 1%."""
    rows = {r.quantity: r for r in compare_peak_case("peak.json", case(PEAK, name))}
    assert rows["peak_backward"].status == "ok"
    assert abs(rows["peak_backward"].predicted - rows["peak_backward"].measured) < 200


def test_deepseek_v2_lite_shared_experts_in_the_transformers_op_list():
    """DeepSeek-V2-Lite, bf16, 4096 tokens, per layer (h 2048, E 64, K 6, f 1408, 2 shared experts: g 2816):
    mlp: norm output 2h, sorted inputs and experts' outputs 2 x 2Kh, the grouped matmuls' 4 x 2Kf, fp32 routing
    weights 4K, the shared experts' 4 x 2g; router: its fp32 input 4h, softmax 4E, indices 8K, three gather indices
    3 x 8K, and per layer its weight's fp32 copy (4Eh) and the offsets (4E). Of its 27 layers the first
    (first_k_dense_replace 1) is dense: a LlamaMLP of F = 10944 (the norm output 2h, 4 x 2F)."""
    arch = MODELS["deepseek-v2-lite"]
    tokens, h, f, E, K, g = 4096, arch.hidden, arch.n_expert_ffn, arch.experts, arch.top_k, 2 * arch.n_expert_ffn
    assert (arch.layers, arch.first_dense_layers, arch.ffn) == (27, 1, 10944)
    breakdown = estimate(Config(model=arch, seq_len=tokens, attention="flash"))
    mlp, router = (breakdown.get(f"activations/{group}") for group in ("mlp", "router"))
    assert mlp == 26 * tokens * (2 * h + 4 * K * h + 8 * K * f + 4 * K + 8 * g) + tokens * (2 * h + 8 * arch.ffn)
    assert 2 * h + 4 * K * h + 8 * K * f + 4 * K + 8 * g == 143_384
    assert router == 26 * (tokens * (4 * h + 4 * E + 8 * K + 24 * K) + 4 * E * h + 4 * E)
