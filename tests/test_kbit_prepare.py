"""QLoRA's preparation of the unquantised weights (Config.kbit_prepare) measured against PEFT's own function.

Sources: PEFT 0.21.2 peft/utils/other.py prepare_model_for_kbit_training (every fp16 or bf16 parameter whose class
is not Params4bit is cast to fp32); artidoro/qlora qlora.py 00e5ad2 get_accelerate_model (with --bf16, lm_head and
embed_tokens back to bf16, modules named norm to fp32); TRL 0.25.1 / 0.26.0 trl/trainer/sft_trainer.py.
bitsandbytes does not run on this CPU: its Params4bit is stood in for by a Parameter subclass of that name, which is
all prepare_model_for_kbit_training looks at, so what is measured is the cast, not 4-bit storage.
"""

from __future__ import annotations

import pytest

from tests import validate_extra

from builder.catalog import default_models
from builder.model import Config, estimate

LLAMA3_8B = default_models()["llama-3-8b"]


def _qlora(**rest):
    return Config(model=LLAMA3_8B, lora_rank=16, qlora=True, **rest)


def test_llama3_8b_prepare_casts_embeddings_norms_and_head_to_fp32():
    """Llama 3 8B: embed_tokens and an untied lm_head (2 x 128256 x 4096) and 65 RMSNorm weights of 4096 (two a
    layer, 32 layers, and the final norm) go from 2 to 4 B each: 1,050,939,392 parameters, +1.96 GiB."""
    unquantised = 2 * 128256 * 4096 + 65 * 4096
    assert unquantised == 1_050_939_392
    before, after = estimate(_qlora()), estimate(_qlora(kbit_prepare="prepare"))
    assert before.get("weights/unquantised") == 2 * unquantised
    assert after.get("weights/unquantised_fp32") == 4 * unquantised
    assert after.get("weights/unquantised") == 0


def test_llama3_8b_prepare_bf16_keeps_only_the_norms_in_fp32():
    """qlora.py --bf16 (and TRL's SFTTrainer up to 0.25 with bf16, both under Trainer's bf16 autocast): the norms stay
    fp32, the vocabulary matrices bf16."""
    norms = 65 * 4096
    b = estimate(_qlora(kbit_prepare="prepare-bf16", precision="amp-bf16"))
    assert b.get("weights/unquantised_fp32") == 4 * norms
    assert b.get("weights/unquantised") == 2 * 2 * 128256 * 4096


def test_prepare_needs_qlora():
    with pytest.raises(ValueError, match="kbit_prepare"):
        estimate(Config(model=LLAMA3_8B, lora_rank=16, kbit_prepare="prepare"))


@pytest.mark.validate
def test_prepare_model_for_kbit_training_casts_what_the_model_counts():
    """A small bf16 Llama whose decoder linear weights are Params4bit stand-ins: after PEFT's
    prepare_model_for_kbit_training the fp32 bytes are the model's weights/unquantised_fp32."""
    validate_extra.modules("torch", "transformers", "peft")
    import torch
    from peft import prepare_model_for_kbit_training
    from transformers import LlamaConfig, LlamaForCausalLM

    from builder.model.architecture import from_hf_config

    hf = dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=64, intermediate_size=176,
              num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=500,
              max_position_embeddings=256, tie_word_embeddings=False, rms_norm_eps=1e-5, hidden_act="silu")
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**hf)).to(torch.bfloat16)

    class Params4bit(torch.nn.Parameter):
        pass

    for layer in model.model.layers:
        for module in layer.modules():
            if isinstance(module, torch.nn.Linear):
                module.weight = Params4bit(module.weight.data, requires_grad=False)
    prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
    fp32 = sum(p.numel() * 4 for p in model.parameters() if p.dtype == torch.float32)
    kept = {p.dtype for p in model.parameters() if type(p).__name__ == "Params4bit"}
    assert kept == {torch.bfloat16}
    assert fp32 == 4 * (2 * 500 * 64 + 5 * 64)
    config = Config(model=from_hf_config(hf, "tiny-llama"), lora_rank=8, qlora=True, kbit_prepare="prepare")
    assert estimate(config).get("weights/unquantised_fp32") == fp32
