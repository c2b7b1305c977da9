"""Build small Hugging Face transformers models from a config: random weights, nothing downloaded."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

MODEL_CLASSES = {
    "gpt2": ("GPT2Config", "GPT2LMHeadModel"),
    "llama": ("LlamaConfig", "LlamaForCausalLM"),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM"),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM"),
    "mistral": ("MistralConfig", "MistralForCausalLM"),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM"),
    "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM"),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM"),
    "deepseek_v2": ("DeepseekV2Config", "DeepseekV2ForCausalLM"),
    "deepseek_v3": ("DeepseekV3Config", "DeepseekV3ForCausalLM"),
    "gpt_oss": ("GptOssConfig", "GptOssForCausalLM"),
    "phi3": ("Phi3Config", "Phi3ForCausalLM"),
}


def torch_dtype(name: str):
    """torch.float32 / torch.bfloat16 from 'float32' / 'bfloat16'."""
    import torch

    return getattr(torch, name)


@contextlib.contextmanager
def default_dtype(name: str) -> Iterator[None]:
    """Build tensors in `name` by default (as `from_pretrained(dtype=...)` does), then restore."""
    import torch

    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch_dtype(name))
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def build_model(config: dict[str, Any], dtype: str, seed: int = 0):
    """A causal-LM model in train mode, built from a config.json dictionary in `dtype`.

    Weights are created in `dtype` directly (default dtype during construction), like
    `from_pretrained(dtype=...)`; buffers computed explicitly in fp32 (rotary inv_freq)
    stay fp32. Works inside FakeTensorMode (then nothing is allocated).
    """
    import torch
    import transformers

    config_class_name, model_class_name = MODEL_CLASSES[config["model_type"]]
    settings = {k: v for k, v in config.items() if k not in ("model_type", "attn_implementation")}
    hf_config = getattr(transformers, config_class_name)(**settings)
    hf_config._attn_implementation = config["attn_implementation"]
    torch.manual_seed(seed)
    with default_dtype(dtype):
        model = getattr(transformers, model_class_name)(hf_config)
    model.config.use_cache = False
    return model.train()


def make_token_ids(batch: int, seq_len: int, vocab: int, seed: int = 0):
    """Random token ids of shape (batch, seq_len), reproducible."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (batch, seq_len), generator=generator)


@contextlib.contextmanager
def cuda_style_dropout() -> Iterator[None]:
    """Make F.dropout take the path CUDA takes: `native_dropout`, which saves a 1-byte bool mask.

    On CPU, `torch.nn.functional.dropout` multiplies by a noise tensor in the input's dtype
    and autograd saves that (4 bytes per element in fp32); on CUDA `_dropout_impl` uses the
    fused `native_dropout` kernel and saves a bool mask (aten/src/ATen/native/Dropout.cpp,
    `is_fused_kernel_acceptable`). The measurement follows the CUDA path so it describes a
    GPU run; same values in expectation, same output dtype.
    """
    import torch
    import torch.nn.functional as functional

    original = functional.dropout

    def dropout(input, p: float = 0.5, training: bool = True, inplace: bool = False):
        if not training or p == 0:
            return input
        return torch.native_dropout(input, p, True)[0]

    functional.dropout = dropout
    try:
        yield
    finally:
        functional.dropout = original
