"""Phi-3 and Phi-4 (config.json model_type phi3, Phi3ForCausalLM): the catalog's phi-4 and phi-3-mini-4k, read from
their config.json as transformers 5.23 reads it (configuration_phi3.py Phi3Config), counted to the published totals,
and trained with the activations transformers 5.23's models/phi3/modeling_phi3.py saves under PyTorch 2.13 autograd.

Sources:
- microsoft/phi-4 config.json (huggingface.co; a copy: transformers_version 4.47.0): 40 layers, hidden 5120, 40 heads
  and 10 KV heads, intermediate 17920, vocab_size 100352, max_position_embeddings 16384, rope_theta 250000,
  rope_scaling null, sliding_window null, tie_word_embeddings false; 14,659,507,200 parameters (the GGUF conversion's
  general.parameter_count, ollama show phi4; NVIDIA NeMo Microservices' Helm chart, microsoft/phi-4@1.0).
- microsoft/Phi-3-mini-4k-instruct config.json (as NVIDIA/TensorRT-LLM cb4c622
  tests/unittest/_torch/modeling/test_modeling_phi3.py PHI3_MINI_4K_CONFIG copies it): 32 layers, hidden 3072, 32 heads
  and 32 KV heads, intermediate 8192, vocab_size 32064, sliding_window 2047; 3,821,079,552 parameters (the Hub's
  safetensors metadata, BF16; keras-hub 96b8685 keras_hub/src/models/phi3/phi3_presets.py phi3_mini_4k_instruct_en).
- Phi-4-mini-instruct config.json (huggingface.co): partial_rotary_factor 0.75, rope_scaling longrope,
  tie_word_embeddings true: refused by name (a partial rotary table and vLLM's short and long tables not modelled).
- modeling_phi3.py: Phi3Attention.qkv_proj = nn.Linear(h, (a + 2k) d, bias=False), sliced into q, k and v;
  Phi3MLP.gate_up_proj = nn.Linear(h, 2f, bias=False), chunked into gate and up; Phi3Model takes
  create_sliding_window_causal_mask whenever config.sliding_window is set.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from builder.catalog import default_gpus, default_models
from builder.model import Config, estimate
from builder.model.architecture import from_hf_config, param_count, parameter_tensors
from builder.model.engines import EngineSettings, engine_report

MODELS = default_models()

PHI_4 = {
    "architectures": ["Phi3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 100257,
    "embd_pdrop": 0.0, "eos_token_id": 100257, "hidden_act": "silu", "hidden_size": 5120, "initializer_range": 0.02,
    "intermediate_size": 17920, "max_position_embeddings": 16384, "model_type": "phi3", "num_attention_heads": 40,
    "num_hidden_layers": 40, "num_key_value_heads": 10, "original_max_position_embeddings": 16384,
    "pad_token_id": 100257, "resid_pdrop": 0.0, "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 250000,
    "sliding_window": None, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.47.0",
    "use_cache": True, "vocab_size": 100352}
PHI_3_MINI_4K = {
    "architectures": ["Phi3ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1, "embd_pdrop": 0.0,
    "eos_token_id": 32000, "hidden_act": "silu", "hidden_size": 3072, "initializer_range": 0.02,
    "intermediate_size": 8192, "max_position_embeddings": 4096, "model_type": "phi3", "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 32, "original_max_position_embeddings": 4096, "pad_token_id": 32000,
    "resid_pdrop": 0.0, "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 10000.0, "sliding_window": 2047,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.40.2", "use_cache": True,
    "attention_bias": False, "vocab_size": 32064}


@pytest.mark.parametrize("model_id, config, published", [("phi-4", PHI_4, 14_659_507_200),
                                                         ("phi-3-mini-4k", PHI_3_MINI_4K, 3_821_079_552)])
def test_the_config_json_reads_as_the_catalog_entry_and_counts_the_published_total(model_id, config, published):
    arch = from_hf_config(config, model_id)
    assert arch == MODELS[model_id].with_changes(source="", published_params=None)
    assert param_count(arch) == MODELS[model_id].published_params == published


def test_q_k_v_and_gate_up_are_one_tensor_each():
    """phi-4: qkv_proj (40 + 2 x 10) x 128 = 7,680 rows of 5,120, gate_up_proj 2 x 17,920 rows, 40 of each: the
    tensors FSDP2 shards along their first dimension; the same parameters as Llama's five matrices."""
    tensors = dict(parameter_tensors(MODELS["phi-4"]))
    assert tensors[(7680, 5120)] == 40 and tensors[(35840, 5120)] == 40 and tensors[(5120, 17920)] == 40
    assert tensors[(5120, 5120)] == 40  # o_proj
    llama = MODELS["phi-4"].with_changes(family="llama", fused_projections=False)
    assert param_count(llama) == param_count(MODELS["phi-4"])
    assert (17920, 5120) in dict(parameter_tensors(llama)) and (17920, 5120) not in tensors


@pytest.mark.parametrize("changes, field", [
    ({"partial_rotary_factor": 0.75}, "partial_rotary_factor"),  # Phi-4-mini
    ({"rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.5}},
     "rope_parameters.partial_rotary_factor"),
    ({"rope_scaling": {"type": "longrope", "long_factor": [1.0] * 48, "short_factor": [1.0] * 48}},
     "rope_scaling.type"),
    ({"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, "rope_scaling.rope_type"),
    ({"resid_pdrop": 0.1}, "resid_pdrop"),
    ({"attention_bias": True}, "attention_bias"),
    ({"hidden_act": "gelu"}, "hidden_act"),
])
def test_what_is_not_modelled_is_refused_by_name(changes, field):
    with pytest.raises(ValueError, match=f"config.json \\(phi3\\) field '{field}'"):
        from_hf_config({**PHI_3_MINI_4K, **changes})


def test_phi_4_mini_is_refused_for_its_partial_rotary_factor():
    """Phi-4-mini-instruct: 32 layers, hidden 3072, 24 heads and 8 KV heads, partial_rotary_factor 0.75, longrope,
    tied embeddings. The rotary table of a partial rotary is narrower than the head: refused, naming the field."""
    phi_4_mini = {**PHI_3_MINI_4K, "num_attention_heads": 24, "num_key_value_heads": 8, "vocab_size": 200064,
                  "tie_word_embeddings": True, "partial_rotary_factor": 0.75, "sliding_window": 262144,
                  "max_position_embeddings": 131072,
                  "rope_scaling": {"type": "longrope", "long_factor": [1.0] * 48, "short_factor": [1.0] * 48}}
    with pytest.raises(ValueError, match="field 'partial_rotary_factor' = 0.75"):
        from_hf_config(phi_4_mini)


# One layer of phi-4 per token in bf16 (2 B): a = 40 query heads and k = 10 KV heads of d = 128, h = 5120.
A, K, D, H = 40, 10, 128, 5120


def _attention(config: Config) -> int:
    return estimate(config).get("activations/attention")


def test_phi_4_saves_qkv_projs_whole_output_and_a_copy_of_the_kernels_output():
    """Under SDPA without a mask (FlashAttention; K and V not copied to every head: use_gqa_in_sdpa) V is a view of
    qkv_proj's output, so its Q and K parts stay too: (a + k) d more than Llama's V; and the kernel's output follows the
    query's heads-first layout (CUDA flash_api.cpp mha_fwd: out = empty_like(q)), so o_proj's input is a copy, a d
    more. With eager attention (whose matmul copies V) nothing more; with a padded batch (the memory-efficient kernel,
    whose output is tokens x heads) the copy goes."""
    phi = Config(model=MODELS["phi-4"], precision="bf16", micro_batch=1, seq_len=1024, attention="sdpa")
    llama = replace(phi, model=MODELS["phi-4"].with_changes(family="llama", fused_projections=False))
    tokens = 1024 * 40
    assert _attention(phi) - _attention(llama) == tokens * ((A + K) * D + A * D) * 2 == 943_718_400
    assert _attention(replace(phi, attention="eager")) == _attention(replace(llama, attention="eager"))
    padded = replace(phi, padded=True)
    # padded: K and V copied to every head (no view of qkv kept), no copy of the kernel's output
    assert _attention(padded) == _attention(replace(llama, padded=True))


def test_autocast_casts_one_input_for_q_k_and_v_and_one_for_gate_and_up():
    """torch.autocast over fp32 weights: each nn.Linear casts its input and saves the cast; Phi-3 has one for q, k and
    v (Llama three) and one for gate and up (Llama two): 3 x T x h bf16 fewer a layer, less the view and the copy."""
    phi = Config(model=MODELS["phi-4"], precision="amp-bf16", micro_batch=1, seq_len=1024, attention="eager")
    llama = replace(phi, model=MODELS["phi-4"].with_changes(family="llama", fused_projections=False))
    total = lambda c: estimate(c).get("activations")  # noqa: E731
    assert total(llama) - total(phi) == 3 * 1024 * H * 2 * 40


def test_phi_3_minis_window_makes_a_mask_once_the_sequence_reaches_it():
    """Phi-3-mini-4k's sliding_window 2047 (every layer): transformers 5.23 builds a 4-D mask from 2,047 keys on
    (masking_utils.py _ignore_causal_mask_sdpa), which SDPA saves converted in every layer (2 B a key), and the
    memory-efficient kernel it selects returns tokens x heads (no copy of its output)."""
    arch = MODELS["phi-3-mini-4k"]
    assert arch.sliding_window == 2047 and arch.sliding_window_pattern == 0
    below = Config(model=arch, precision="bf16", micro_batch=1, seq_len=2046, attention="sdpa")
    at = replace(below, seq_len=2047)
    per_layer = lambda c: _attention(c) // 32  # noqa: E731
    mask, copy = 2047 * 2047 * 2, 2047 * 32 * 96 * 2
    assert per_layer(at) - per_layer(below) * 2047 // 2046 == mask - copy
    # Mistral 7B v0.1's window of 4,096 (every layer), the same code: compiled layers with the mask are not measured.
    with pytest.raises(ValueError, match="sliding-window mask \\(mistral-7b's window of 4096"):
        estimate(Config(model=MODELS["mistral-7b"], precision="bf16", seq_len=4096, attention="sdpa", compile=True))
    estimate(Config(model=MODELS["mistral-7b"], precision="bf16", seq_len=4095, attention="sdpa", compile=True))


def test_lora_on_the_fused_layers_is_refused_and_on_the_others_counted():
    phi = Config(model=MODELS["phi-4"], precision="bf16", lora_rank=16, seq_len=1024)
    with pytest.raises(ValueError, match="qkv_proj"):
        estimate(phi)
    adapters = estimate(replace(phi, lora_targets=("o", "down"))).get("weights/lora_adapters")
    assert adapters == 40 * 16 * ((A * D + H) + (17920 + H)) * 4
    assert estimate(replace(phi, implementation="torchtune")).get("weights/lora_adapters") > 0


def test_served_phi_4_caches_204800_bytes_a_token_and_phi_3_mini_its_window():
    """KV cache per token: 40 layers x 2 x 10 KV heads x 128 x 2 B = 204,800 B (phi-4, SGLang's cell); Phi-3-mini
    32 x 2 x 32 x 96 x 2 B = 393,216 B, every layer a sliding window of 2,047 in vLLM (the model-level window:
    CacheConfig.sliding_window = ModelConfig.get_sliding_window()), so a request of 4,096 tokens takes fewer blocks
    than its 256."""
    h100 = default_gpus()["h100-80gb"].usable_bytes
    sglang = engine_report(Config(model=MODELS["phi-4"], mode="serve"), EngineSettings(engine="sglang"), h100,
                           "h100-80gb")
    assert sglang.values["cell"] == 204_800
    vllm = engine_report(Config(model=MODELS["phi-3-mini-4k"], mode="serve"), EngineSettings(max_num_batched_tokens=512),
                         h100, "h100-80gb")
    assert vllm.values["kv_per_token_layer"] * 32 == 393_216
    assert vllm.values["sliding_layers"] == 32 and vllm.values["blocks_per_request"] < 4096 // 16


# Measured on CPU with transformers 5.23.0 under torch 2.13.0 (the validate extra): whole Phi-3 layers of T = 2 x 64
# tokens, h 64, a 4 query heads of d 16, against the op list (builder.validate.compare), and against the Llama layer of
# the same shape. PyTorch's CPU flash kernel takes a mask and its output follows the query's layout then too, where
# CUDA's memory-efficient kernel (the one a mask selects) returns tokens x heads: with a mask the CPU layer keeps one
# copy of T x a x d more than the GPU layer the op list describes, and the test pins that difference to it.
def _phi3_cases():
    from builder.validate.cases import ActivationCase

    cases = []
    for attention in ("sdpa", "eager"):
        for dtype in ("float32", "bfloat16"):
            for kv_heads in (1, 2, 4):
                for extra in ({}, {"recompute": "full"}, {"autocast": True}, {"padded": True},
                              {"sliding_window": 32}, {"sliding_window": 32, "recompute": "full"}):
                    if extra.get("autocast") and dtype == "bfloat16":
                        continue
                    cases.append(ActivationCase(family="phi3", attention=attention, dtype=dtype, kv_heads=kv_heads,
                                                ffn=176, **extra))
    return cases


@pytest.mark.validate
def test_measured_phi3_layers_are_predicted_byte_for_byte():
    from tests import validate_extra

    torch, _ = validate_extra.modules("torch", "transformers")
    from builder.validate.compare import compare_activation_case
    from builder.validate.measure import measure_activation_case

    torch.set_num_threads(1)
    for case in _phi3_cases():
        measured = measure_activation_case(case)
        rows = {row.quantity: row for row in compare_activation_case("phi3", measured)}
        masked = case.attention == "sdpa" and (case.padded or case.sliding_window) and case.recompute == "none"
        cpu_copy = 2 * 64 * 4 * 16 * (4 if case.dtype == "float32" else 2) if masked else 0
        assert rows["per_layer"].measured - rows["per_layer"].predicted == cpu_copy, case.name
        assert rows["rest"].measured == rows["rest"].predicted, case.name


@pytest.mark.validate
def test_a_measured_phi3_layer_saves_qkv_projs_output_whole_beside_a_llama_layer():
    """fp32, SDPA, 2 KV heads: Phi-3 keeps (a + k) d more a token (qkv_proj's output under V's view: 6 x 16 x 4 B x
    128 tokens = 49,152 B) and the copy o_proj reads (4 x 16 x 4 B x 128 = 32,768 B); eager attention nothing more."""
    from tests import validate_extra

    torch, _ = validate_extra.modules("torch", "transformers")
    from builder.validate.cases import ActivationCase
    from builder.validate.measure import measure_activation_case

    torch.set_num_threads(1)
    layer = lambda case: measure_activation_case(case)["per_layer"]["activation_storage_bytes"]  # noqa: E731
    for attention, more in (("sdpa", 49_152 + 32_768), ("eager", 0)):
        phi3 = ActivationCase(family="phi3", attention=attention, kv_heads=2, ffn=176)
        assert layer(phi3) - layer(phi3.with_changes(family="llama")) == more
