"""OpenAI's gpt-oss (transformers 5.23 models/gpt_oss): its parameter counts, its config.json, and its MXFP4
checkpoint as vLLM and SGLang serve it, pinned to named published sources.

Sources: the model card (OpenAI 2025, arXiv:2508.10925, Table 1: gpt-oss-20b 20.91B total, 3.61B active; gpt-oss-120b
116.83B total, 5.13B active); the Hugging Face Hub's safetensors counts as huggingface.js 00d37b2 pins them
(packages/hub/src/lib/parse-safetensors-metadata.spec.ts: gpt-oss-20b BF16 1,804,459,584 and U8 19,110,297,600 =
20,914,757,184, its 597,196,800 block scales left out; gpt-oss-120b BF16 2,167,371,072 and U8 114,661,785,600 =
116,829,156,672, 3,583,180,800 scales left out; U8 counts the packed MXFP4 bytes twice, two values a byte); the
config.json of openai/gpt-oss-120b (as tests of public repositories copy it, below).
"""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from builder.catalog import default_gpus, default_models
from builder.cli import main
from builder.model import Config, estimate
from builder.model.architecture import active_param_count, from_hf_config, param_count, param_groups, shape_inputs
from builder.model.engines import EngineSettings, engine_report
from builder.model.expr import evaluate
from tests.test_cli import run
from builder.model.inputs import architecture_inputs, config_inputs
from builder.model.placement import HOLDING, stages_of
from builder.model.states import mxfp4_expert_elements

MODELS = default_models()
GIB = 2**30

# huggingface.co/openai/gpt-oss-120b config.json (transformers_version 4.55.0.dev0).
CONFIG_120B = {
    "architectures": ["GptOssForCausalLM"], "attention_bias": True, "attention_dropout": 0.0, "eos_token_id": 200002,
    "experts_per_token": 4, "head_dim": 64, "hidden_act": "silu", "hidden_size": 2880,
    "initial_context_length": 4096, "initializer_range": 0.02, "intermediate_size": 2880,
    "layer_types": ["sliding_attention", "full_attention"] * 18, "max_position_embeddings": 131072,
    "model_type": "gpt_oss", "num_attention_heads": 64, "num_experts_per_tok": 4, "num_hidden_layers": 36,
    "num_key_value_heads": 8, "num_local_experts": 128, "output_router_logits": False, "pad_token_id": 199999,
    "quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                       "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"},
    "rms_norm_eps": 1e-05,
    "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0, "original_max_position_embeddings": 4096,
                     "rope_type": "yarn", "truncate": False},
    "rope_theta": 150000, "router_aux_loss_coef": 0.9, "sliding_window": 128, "swiglu_limit": 7.0,
    "tie_word_embeddings": False, "transformers_version": "4.55.0.dev0", "use_cache": True, "vocab_size": 201088,
}
# huggingface.co/openai/gpt-oss-20b config.json: the same fields at 24 layers and 32 experts.
CONFIG_20B = {**CONFIG_120B, "num_hidden_layers": 24, "num_local_experts": 32,
              "layer_types": ["sliding_attention", "full_attention"] * 12}

# The Hub's safetensors (huggingface.js 00d37b2): bf16 parameters, packed MXFP4 values counted two a byte, scales.
SAFETENSORS = {"gpt-oss-20b": (1_804_459_584, 19_110_297_600, 597_196_800),
               "gpt-oss-120b": (2_167_371_072, 114_661_785_600, 3_583_180_800)}


@pytest.mark.parametrize("model_id, total", [("gpt-oss-20b", 20_914_757_184), ("gpt-oss-120b", 116_829_156_672)])
def test_parameter_count_is_the_published_one(model_id, total):
    arch = MODELS[model_id]
    assert param_count(arch) == arch.published_params == total == sum(SAFETENSORS[model_id][:2])
    # The MXFP4 values are the routed experts' weight matrices: gate_up_proj (E, h, 2f) and down_proj (E, f, h).
    assert SAFETENSORS[model_id][1] == arch.layers * arch.experts * 3 * arch.hidden * arch.expert_ffn
    assert SAFETENSORS[model_id][2] == SAFETENSORS[model_id][1] // 32  # one E8M0 scale per 32 values


@pytest.mark.parametrize("model_id, active, mlp, attention, embeddings", [
    # Model card Table 1: active, MLP, attention, embed + unembed parameters (billions, two decimals).
    ("gpt-oss-20b", "3.61", "19.12", "0.64", "1.16"),
    ("gpt-oss-120b", "5.13", "114.71", "0.96", "1.16"),
])
def test_the_model_cards_breakdown(model_id, active, mlp, attention, embeddings):
    arch = MODELS[model_id]
    groups = param_groups(arch)
    billions = lambda n: f"{n / 1e9:.2f}"  # noqa: E731
    # The card's active count leaves out the token embedding (a lookup), not the unembedding.
    assert billions(active_param_count(arch) - arch.vocab * arch.hidden) == active
    assert billions(groups["layers/mlp/experts"] + groups["layers/mlp/router"]) == mlp
    assert billions(sum(v for k, v in groups.items() if k.startswith("layers/attention/"))) == attention
    assert billions(groups["embedding/tokens"] + groups["lm_head"]) == embeddings
    # Each layer's attention sinks are one learned logit per query head (GptOssAttention.sinks).
    assert groups["layers/attention/sinks"] == arch.layers * arch.heads


@pytest.mark.parametrize("config, model_id", [(CONFIG_20B, "gpt-oss-20b"), (CONFIG_120B, "gpt-oss-120b")])
def test_the_config_json_reads_to_the_catalog_entry(config, model_id):
    arch = from_hf_config(config, model_id)
    read, entry = shape_inputs(arch), shape_inputs(MODELS[model_id])
    read["activation_function"] = entry["activation_function"]  # SwiGLU entries leave it at its default
    assert read == entry
    assert arch.family == "gpt_oss" and read["model_family"] == "gpt_oss"
    # layer_types alternate from a sliding first layer: every 2nd layer full, window 128; YaRN 32 x 4,096 positions.
    assert (arch.sliding_window, arch.sliding_window_pattern, arch.max_position_embeddings) == (128, 2, 131_072)
    assert arch.checkpoint_quantization == "mxfp4"


def test_transformers_defaults_fill_what_the_config_json_leaves_out():
    """configuration_gpt_oss.py GptOssConfig.__post_init__: layer_types alternating from sliding_attention, the YaRN
    rope (factor 32 over 4,096), sliding_window 128, attention_bias True; no quantization_config is a bf16
    checkpoint (unsloth's BF16 uploads)."""
    bare = {k: v for k, v in CONFIG_20B.items()
            if k not in ("layer_types", "rope_scaling", "sliding_window", "attention_bias", "quantization_config")}
    arch = from_hf_config(bare)
    assert (arch.sliding_window, arch.sliding_window_pattern, arch.max_position_embeddings) == (128, 2, 131_072)
    assert arch.qkv_bias and arch.out_bias and arch.checkpoint_quantization == ""
    assert param_count(arch) == 20_914_757_184


@pytest.mark.parametrize("fields, named", [
    ({"quantization_config": {"quant_method": "awq", "bits": 4}}, "quantization_config.quant_method"),
    ({"quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.mlp.experts"]}},
     "quantization_config.modules_to_not_convert"),
    ({"quantization_config": 4}, "quantization_config: must be an object"),
    ({"output_router_logits": True}, "'output_router_logits'"),
    ({"layer_types": ["full_attention", "sliding_attention"] * 18}, "'layer_types' mixes"),
    ({"sliding_window": 0}, "sliding_window"),
])
def test_config_fields_not_modelled_are_refused_by_name(fields, named):
    with pytest.raises(ValueError, match=named):
        from_hf_config({**CONFIG_120B, **fields})


def weight_bytes(model_id: str, tp: int = 1) -> int:
    parts = estimate(Config(model=MODELS[model_id], mode="serve", tp=tp)).parts
    return sum(p.bytes for p in parts if p.name.startswith("weights"))


@pytest.mark.parametrize("model_id", ["gpt-oss-20b", "gpt-oss-120b"])
def test_served_weights_are_the_mxfp4_checkpoint(model_id):
    """On one GPU the served weights are the checkpoint's bytes: bf16 parameters, the packed values (two a byte) and
    a uint8 scale per 32 values (vLLM 0.33.0 GptOssMxfp4MoEMethod.create_weights; OCP MX v1.0's MXFP4)."""
    bf16, packed, scales = SAFETENSORS[model_id]
    assert weight_bytes(model_id) == 2 * bf16 + packed // 2 + scales
    parts = {p.name: p for p in estimate(Config(model=MODELS[model_id], mode="serve")).parts}
    assert parts["weights/quantised_linear"].bytes == packed // 2
    assert parts["weights/quantisation_constants"].bytes == scales
    assert parts["weights/unquantised"].bytes == 2 * bf16


def test_tensor_parallel_ranks_pad_the_expert_width_to_64():
    """Hopper's Triton MoE kernels: each rank's expert width I / tp rounded up to 64 (vLLM 0.33.0
    mxfp4_round_up_hidden_size_and_intermediate_size; SGLang 0.5.23 Mxfp4MoEMethod.create_weights): 1,440 -> 1,472
    at tp 2, 720 -> 768 at tp 4, 360 -> 384 at tp 8."""
    arch = MODELS["gpt-oss-120b"]
    for tp, width in ((1, 2880), (2, 1472), (4, 768), (8, 384)):
        elements = arch.layers * arch.experts * 3 * arch.hidden * width
        parts = {p.name: p.bytes for p in estimate(Config(model=arch, mode="serve", tp=tp)).parts}
        assert parts["weights/quantised_linear"] == elements // 2, tp
        assert parts["weights/quantisation_constants"] == elements // 32, tp
        # The bf16 rest (attention, router, norms, biases, embeddings) is split as the tensor table splits it: the
        # norms and the router replicated.
        assert parts["weights/unquantised"] == pytest.approx(2 * SAFETENSORS["gpt-oss-120b"][0] / tp, rel=0.05), tp


def test_vllms_marlin_layout_reproduces_a_published_log():
    """vLLM 0.10.1 on one H100 (vllm-project/vllm issue #23278, 2025-08-20): without Triton's kernels it took the
    Marlin backend ("Weight-only FP4 compression will be used leveraging the Marlin kernel"), which pads the hidden
    size to 256 and the expert width to 128 (fused_moe/oracle/mxfp4.py mxfp4_round_up_hidden_size_and_intermediate_size):
    "Model loading took 65.9651 GiB". The same layout rule at those alignments, with the bf16 parameters and the
    rotary table vLLM builds (131,072 x 64 in bf16), gives it within 0.1%."""
    arch = MODELS["gpt-oss-120b"]
    config = Config(model=arch, mode="serve")
    values = {**architecture_inputs(arch), **config_inputs(config)}
    values.update(stages_of(values)[0].inputs())
    values = HOLDING.environment(values)
    marlin = evaluate(mxfp4_expert_elements(128, 256), values)
    assert marlin == 36 * 128 * 3 * 3072 * 2944
    loaded = marlin * Fraction(17, 32) + 2 * SAFETENSORS["gpt-oss-120b"][0] + 131_072 * 64 * 2
    assert float(loaded / GIB) == pytest.approx(65.9651, rel=1e-3)


def test_vllm_groups_the_sliding_and_full_layers():
    """vLLM's hybrid KV cache manager (kv_cache_utils.py _get_kv_cache_groups_uniform_page_size): 18 full and 18
    sliding layers (window 128) make two groups of 18."""
    h100 = default_gpus()["h100-80gb"]
    r = engine_report(Config(model=MODELS["gpt-oss-120b"], mode="serve"), EngineSettings(max_model_len=8192),
                      h100.usable_bytes, "h100-80gb", h100)
    v = r.values
    assert (v["full_layers"], v["sliding_layers"], v["group_layers"]) == (18, 18, 18)
    assert (v["full_groups"], v["sliding_groups"]) == (1, 1)


def test_the_engines_quantization_words(capsys):
    """--quantization mxfp4 is gpt-oss's own layout (vLLM's GptOssMxfp4Config takes the checkpoint's quant_method and
    an explicit mxfp4 alike); another method for it is vLLM's mismatch error, and mxfp4 for a 16-bit checkpoint is
    refused."""
    code, out, _ = run(capsys, *["estimate", "--model", "gpt-oss-20b", "--mode", "serve", "-q", "mxfp4", "--json"])
    assert code == 0
    assert sum(v for k, v in json.loads(out)["parts"].items() if k.startswith("weights")) == weight_bytes("gpt-oss-20b")
    code, _, err = run(capsys, *["estimate", "--model", "gpt-oss-20b", "--mode", "serve", "-q", "awq"])
    assert code == 2 and "does not match the quantization method" in err
    code, _, err = run(capsys, *["estimate", "--model", "llama-3-8b", "--mode", "serve", "-q", "mxfp4"])
    assert code == 2 and "16-bit checkpoint" in err
    code, _, err = run(capsys, *["estimate", "--model", "gpt-oss-20b", "--mode", "serve", "--dtype", "float16"])
    # vLLM's own refusal (vllm/config/vllm.py VllmConfig._get_quantization_config, get_supported_act_dtypes).
    assert code == 2 and "torch.float16 is not supported for quantization method mxfp4" in err


# Training -----------------------------------------------------------------------------------------------------------

def test_gpt_oss_layers_save_what_was_measured():
    """gpt-oss's layers under transformers 5.23 on CPU (content/validation/moe.json, eager attention, fp32 and bf16, a
    KV head and the expert counts varied): its MoE block byte for byte, the whole layer and the rest exactly. What
    differs from the other MoE layers: the sinks' softmax over S + 1 columns in the scores' dtype and its max's int64
    indices (no fp32 softmax), the router's softmax over the top-k logits alone, the bias gathers' expert ids, the
    clamped SwiGLU's five f-wide tensors, the RMSNorm's fp32 product, half-width rotary tables."""
    from builder.validate.compare import compare_documents
    from builder.validate.results import VALIDATION_DIR

    moe = json.loads((VALIDATION_DIR / "moe.json").read_text())
    rows = [row for row in compare_documents({"moe.json": moe}) if row.case.startswith("gpt_oss-")]
    assert len(rows) == 9
    assert all(row.predicted == row.measured for row in rows), [r for r in rows if r.predicted != r.measured]


def test_eager_attention_with_sinks_keeps_one_softmax_in_the_activation_dtype():
    """Per token and layer at 2,048 tokens in bf16: gpt-oss's scores x V reads a view of the softmax over 2,049
    columns (2 B each, a head) and max keeps one int64 index a row; Llama's eager attention keeps an fp32 softmax and
    its bf16 copy (6 B a score)."""
    arch = MODELS["gpt-oss-20b"]
    config = Config(model=arch, seq_len=2048, attention="eager", lora_rank=8)
    parts = {p.name: p.bytes for p in estimate(config).parts}
    assert parts["activations/attention_scores"] == arch.layers * 2048 * arch.heads * (2049 * 2 + 8)
    llama_like = estimate(Config(model=MODELS["llama-3-8b"], seq_len=2048, attention="eager", lora_rank=8))
    assert {p.name: p.bytes for p in llama_like.parts}["activations/attention_scores"] == \
        32 * 2048 * 32 * 2048 * 6


def test_training_refusals(capsys):
    """transformers' gpt-oss takes no SDPA (left out, --attention falls back to eager as from_pretrained does);
    bitsandbytes' 4-bit layers and PEFT's target_modules do not reach its 3-D experts."""
    code, out, _ = run(capsys, *["estimate", "--model", "gpt-oss-20b", "--seq-len", "1024", "--lora-rank", "8",
                                "--json"])
    assert code == 0 and json.loads(out)["parts"]["activations/attention_scores"] > 0
    for extra, named in ((["--attention", "sdpa"], "_supports_sdpa"), (["--lora-rank", "8", "--qlora"], "nn.Linear"),
                         (["--lora-rank", "8", "--lora-targets", "q,gate"], "target_parameters")):
        code, _, err = run(capsys, *["estimate", "--model", "gpt-oss-20b", *extra])
        assert code == 2 and named in err, err
