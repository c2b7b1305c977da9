"""A padded micro-batch under transformers' SDPA attention (Config.padded): a mask in every layer, K and V at every
query head.

Sources: transformers 5.23 src/transformers/masking_utils.py sdpa_mask and _ignore_causal_mask_sdpa (the causal mask is
skipped for is_causal=True unless a key is masked beyond causality; otherwise one bool mask of b x 1 x s x S per
forward) and integrations/sdpa_attention.py use_gqa_in_sdpa and repeat_kv (with a mask on CUDA, K and V are repeated
to every query head instead of enable_gqa); PyTorch 2.13 aten/src/ATen/native/transformers/attention.cpp
scaled_dot_product_attention (convert_boolean_attn_mask inside every call; the memory-efficient and cuDNN kernels take
the mask, FlashAttention none) and the autograd nodes of the installed 2.13.0 build (cf30153), which save it as
attn_bias; TRL trl/trainer/sft_trainer.py DataCollatorForLanguageModeling at f2cd577 (padding_free=False pads on the
right and returns the attention_mask). Published: PEFT method_comparison/MetaMathQA, results/lora--llama-3.2-3B-rank32
.json at commit 51c2ff6 (torch 2.13.0+cu130, transformers 5.13.1, L40S): accelerator_memory_max 22,292,725,760 bytes.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests import validate_extra

from builder.catalog import default_models
from builder.model import Config, estimate
from builder.model.peak import need

MODELS = default_models()
LLAMA_3B = MODELS["llama-3.2-3b"]  # config.json: 28 layers, 24 query heads, 8 KV heads of 128
# PEFT's MetaMathQA LoRA row: Llama 3.2 3B in bf16 (use_amp false), AdamW on rank-32 adapters on q_proj and v_proj,
# batch_size 4, max_seq_length 768 (the longest a padded batch can be), no gradient checkpointing, the default
# attention (sdpa).
PEFT_METAMATHQA = Config(model=LLAMA_3B, precision="bf16", optimizer="adamw", micro_batch=4, seq_len=768,
                         lora_rank=32, lora_targets=("q", "v"))
PEFT_MAX_RESERVED = 22_292_725_760


def _attention(config: Config) -> int:
    return estimate(config).get("activations/attention")


def test_llama_3b_padded_batch_keeps_k_v_at_24_heads_and_a_mask_per_layer():
    """Per layer: K and V copied from 8 to 24 heads (2 x b s x 16 x 128 x 2 B) and the mask converted to bf16
    (b x s x s x 2 B), for 4 x 768 tokens: 25,165,824 + 4,718,592 bytes, 28 layers: 836,763,648 bytes."""
    assert (LLAMA_3B.layers, LLAMA_3B.heads, LLAMA_3B.kv_heads, LLAMA_3B.head_dim) == (28, 24, 8, 128)
    copies, mask = 2 * 4 * 768 * (24 - 8) * 128 * 2, 4 * 768 * 768 * 2
    assert (copies, mask) == (25_165_824, 4_718_592)
    padded = replace(PEFT_METAMATHQA, padded=True)
    assert _attention(padded) - _attention(PEFT_METAMATHQA) == 28 * (copies + mask) == 836_763_648
    assert need(padded).bytes - need(PEFT_METAMATHQA).bytes == 836_763_648  # all live at the start of backward


def test_peft_metamathqa_max_reserved_bounds_the_padded_need():
    """PEFT's benchmark reports the most memory reserved over the run (max_memory_reserved less the memory reserved
    before it), which bounds what was allocated from above: the padded need, 22,034,565,124 bytes at the longest
    possible batch, stays below 22,292,725,760 (-1.2%; without the mask the model gave 21,197,801,476, -4.9%)."""
    padded = need(replace(PEFT_METAMATHQA, padded=True)).bytes
    assert (need(PEFT_METAMATHQA).bytes, padded) == (21_197_801_476, 22_034_565_124)
    assert padded < PEFT_MAX_RESERVED


def test_one_kv_head_a_gpu_is_repeated_as_a_view():
    """repeat_kv from one KV head: expand then reshape of a size-1 dimension is a stride-0 view, no copy; only the
    mask is added (Llama 3 70B over 8 tensor-parallel ranks: 8 KV heads, one a GPU)."""
    base = Config(model=MODELS["llama-3-70b"], precision="bf16", micro_batch=2, seq_len=1024, tp=8)
    layers = MODELS["llama-3-70b"].layers
    assert _attention(replace(base, padded=True)) - _attention(base) == layers * 2 * 1024 * 1024 * 2


@pytest.mark.parametrize("attention", ["eager", "flash"])
def test_eager_and_flash_attention_do_not_change(attention):
    """Eager attention makes its mask with or without padding; transformers' FlashAttention-2 unpads the batch."""
    config = replace(PEFT_METAMATHQA, attention=attention)
    assert estimate(replace(config, padded=True)).total == estimate(config).total


def test_full_recomputation_keeps_the_bool_mask_once():
    """Under full recomputation every checkpointed layer keeps the bool mask it is given (one storage, b s S bytes)."""
    full = replace(PEFT_METAMATHQA, recompute="full")
    assert estimate(replace(full, padded=True)).get("activations/embedding") \
        - estimate(full).get("activations/embedding") == 4 * 768 * 768


@pytest.mark.parametrize("change, words", [
    ({"mode": "serve"}, "a served model saves none"),
    ({"implementation": "megatron"}, "implementation hf"),
    ({"implementation": "torchtune"}, "implementation hf"),
    ({"activation_formula": "korthikanti"}, "Table 2"),
    ({"compile": True, "lora_rank": 0}, "not measured yet"),
])
def test_what_is_not_modelled_is_refused(change, words):
    with pytest.raises(ValueError, match=words):
        estimate(replace(PEFT_METAMATHQA, padded=True, **change))


def test_the_option_reaches_every_surface():
    from builder.cli import main
    from builder.model.options import CLI, FRONT_MATTER, OPTION_OF, URL

    option = OPTION_OF["padded"]
    assert (option.flag, option.url, option.read("1", URL), option.read(True, FRONT_MATTER)) == \
        ("--padded", "padded", True, True)
    assert CLI in option.surfaces and FRONT_MATTER in option.surfaces
    assert main(["estimate", "--model", "llama-3.2-3b", "--padded", "--json"]) in (0, None)


@pytest.mark.validate
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_a_padded_batch_saves_what_the_rows_say(dtype):
    """transformers 5.23 and PyTorch 2.13 on CPU (CPU flash attention takes the mask and saves it, as CUDA's
    kernels do): a Llama layer, b=2, s=64, 4 heads of 16, 2 KV heads, the second sequence padded from token 32.
    Each layer's attention node saves its own b x 1 x s x s mask in the model's dtype and K, V at 4 heads; the
    difference from the unpadded batch is 2 T (a - k) d + b s s elements a layer, nothing outside the layers."""
    validate_extra.modules("torch", "transformers")
    from builder.validate.cases import LLAMA_BASE
    from builder.validate.compare import compare_activation_case
    from builder.validate.measure import measure_activation_case, run_forward

    size = {"bfloat16": 2, "float32": 4}[dtype]
    case = LLAMA_BASE.with_changes(attention="sdpa", dtype=dtype, padded=True)
    padded, plain = measure_activation_case(case), measure_activation_case(case.with_changes(padded=False))
    grow = padded["per_layer"]["activation_storage_bytes"] - plain["per_layer"]["activation_storage_bytes"]
    assert grow == (2 * 128 * (4 - 2) * 16 + 2 * 64 * 64) * size
    assert padded["rest"] == plain["rest"]
    assert all(row.status == "ok" and row.predicted == row.measured
               for row in compare_activation_case("activations.json", padded))
    masks = [r for r in run_forward(case, 2).records if r.slot == "attn_mask"]
    assert [(r.module, r.shape, r.dtype, r.is_duplicate) for r in masks] == [
        (f"model.layers.{i}.self_attn", (2, 1, 64, 64), dtype, False) for i in range(2)]


@pytest.mark.validate
def test_torch_2_13_kernels_that_take_a_mask_save_it():
    """The installed PyTorch 2.13 build's autograd nodes (meta tensors, so no GPU): the memory-efficient and cuDNN
    attention ops save the bias they are given as attn_bias, the b x 1 x s x S tensor broadcast over the heads
    (stride 0), and the efficient kernel its logsumexp for a multiple of 32 rows."""
    validate_extra.modules("torch")
    import torch

    assert torch.__version__.startswith("2.13.")
    q, k, v = (torch.empty(2, 4, 40, 16, device="meta", dtype=torch.bfloat16, requires_grad=True) for _ in "qkv")
    bias = torch.empty(2, 1, 40, 40, device="meta", dtype=torch.bfloat16).expand(2, 4, 40, 40)
    efficient = torch.ops.aten._scaled_dot_product_efficient_attention(q, k, v, bias, True)[0].grad_fn
    cudnn = torch.ops.aten._scaled_dot_product_cudnn_attention(q, k, v, bias, True)[0].grad_fn
    for node in (efficient, cudnn):
        assert (node._saved_attn_bias.shape, node._saved_attn_bias.stride()) == ((2, 4, 40, 40), (1600, 0, 40, 1))
    assert efficient._saved_log_sumexp.shape == (2, 4, 64)


@pytest.mark.validate
def test_transformers_makes_a_mask_only_for_padding_and_then_repeats_k_and_v():
    """masking_utils.sdpa_mask: None for an all-ones padding mask (is_causal=True instead), a bool b x 1 x s x s mask
    with padding; sdpa_attention.use_gqa_in_sdpa: SDPA's own GQA only without a mask (this CPU build is neither XPU
    nor MPS, the branches that keep it)."""
    validate_extra.modules("torch", "transformers")
    import torch
    from transformers.integrations.sdpa_attention import use_gqa_in_sdpa
    from transformers.masking_utils import sdpa_mask

    ones = torch.ones(2, 8, dtype=torch.bool)  # create_causal_mask hands sdpa_mask the 2-D mask as bool
    padded = ones.clone()
    padded[1, 4:] = 0
    assert sdpa_mask(batch_size=2, q_length=8, kv_length=8, attention_mask=ones) is None
    mask = sdpa_mask(batch_size=2, q_length=8, kv_length=8, attention_mask=padded)
    assert (mask.shape, mask.dtype) == ((2, 1, 8, 8), torch.bool)
    key = torch.empty(2, 2, 8, 16)
    assert use_gqa_in_sdpa(None, key, key) and not use_gqa_in_sdpa(mask, key, key)
