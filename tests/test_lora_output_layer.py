"""LoRA on the output layer: lora_targets lm_head (builder.model.adapters.HEAD).

Sources read:
- PEFT 0.21.2: the output layer is named in target_modules as transformers names it, "lm_head" (its "all-linear"
  shorthand leaves it out: peft/tuners/tuners_utils.py _maybe_include_all_linear_layers excludes
  get_output_embeddings()); lora.Linear wraps it as any projection (peft/tuners/lora/layer.py: lora_A
  nn.Linear(in_features, r), lora_B nn.Linear(r, out_features), the input cast to the adapter's fp32 for lora_A).
  Over tied embeddings PEFT warns and goes on (tuners_utils.py _check_tied_modules), the adapter its own beside the
  tied weight.
- torchtune at 30b8519: apply_lora_to_output=True makes output_proj a LoRALinear(embed_dim, vocab_size)
  (torchtune/models/llama3/_component_builders.py lora_llama3), not quantised under QLoRA ("TODO: quantize_base is
  not applied to final output_proj currently"); LoRALinear.forward runs lora_a on the layer's own input, no cast.
  lora_llama3_2 (torchtune/models/llama3_2/_component_builders.py at v0.6.1) raises for tied embeddings:
  "apply_lora_to_output is currently not supporting in llama3.2 1b and 3b, as the projection layer weights are tied
  to the embeddings".
"""

from __future__ import annotations

import json

import pytest

from builder.catalog import default_models
from builder.grids import convert_setting
from builder.model import Config, estimate
from builder.model.config import validate_config
from builder.model.estimator import stage_estimates
from builder.model.peak import assess
from tests.test_cli import run

MODELS = default_models()
LLAMA_8B = MODELS["llama-3.1-8b"]
H, V, KV = 4096, 128_256, 1024
R, T = 16, 1024
HEAD_ADAPTER = R * (H + V)  # lora_A 16 x 4,096 and lora_B 128,256 x 16: 2,117,632
QV = 32 * R * ((H + H) + (H + KV))  # q and v in 32 layers: 6,815,744
BASE = Config(model=LLAMA_8B, precision="bf16", lora_rank=R, lora_targets=("q", "v", "lm_head"), micro_batch=1,
              seq_len=T, attention="flash")


def test_the_output_layers_adapter_is_r_times_hidden_plus_vocab():
    """2,117,632 adapter parameters beside q's and v's 6,815,744; PEFT keeps them, their gradients and both AdamW
    moments in fp32, torchtune in bf16."""
    assert (HEAD_ADAPTER, QV) == (2_117_632, 6_815_744)
    for implementation, size in (("hf", 4), ("torchtune", 2)):
        b = estimate(BASE.with_changes(implementation=implementation))
        assert b.trainable_params == QV + HEAD_ADAPTER
        for part in ("weights/lora_adapters", "gradients", "optimizer/adam_m", "optimizer/adam_v"):
            assert b.get(part) == size * (QV + HEAD_ADAPTER), (implementation, part)


def test_its_adapter_saves_the_final_norm_output_and_r_values_per_token():
    """The frozen output layer saves no input; lora_A saves the final norm's output (T h: PEFT's fp32 cast, 4 B;
    torchtune's bf16 tensor itself, 2 B) and lora_B lora_A's T x r output."""
    peft = estimate(BASE.with_changes(implementation="hf")).get("activations/head_lora")
    torchtune = estimate(BASE.with_changes(implementation="torchtune")).get("activations/head_lora")
    assert peft == T * H * 4 + T * R * 4 == 16_842_752
    assert torchtune == T * H * 2 + T * R * 2 == 8_421_376
    assert estimate(BASE.with_changes(lora_targets=("q", "v"))).get("activations/head_lora", default=0) == 0
    # It is outside the checkpointed layers: full recomputation keeps it.
    assert estimate(BASE.with_changes(recompute="full")).get("activations/head_lora") == peft


def test_only_the_stage_with_the_head_holds_it():
    """Pipeline parallelism over 2 stages: the first stage's 16 layers hold q's and v's adapters only, the last its 16
    layers' and the output layer's."""
    adapters = {stage.name: next(p.bytes for p in gpu if p.name == "weights/lora_adapters")
                for stage, gpu, _ in stage_estimates(BASE.with_changes(pp=2, grad_accum=2))}
    assert adapters == {"first": 4 * QV // 2, "last": 4 * (QV // 2 + HEAD_ADAPTER)}


def test_paged_states_page_the_vocabulary_sized_lora_b():
    """bitsandbytes pages a state from 1e5 elements: lora_B of the output layer (2,052,096) is paged and paged in at
    the step; lora_A (65,536) and the projections' adapters stay plain GPU tensors."""
    breakdown, needed = assess(BASE.with_changes(optimizer="paged-adamw"))
    step = {p.name: p.bytes for p in next(s for s in needed.steps if s.name == "optimizer_step").parts}
    assert step["optimizer/paged_in"] == 2 * 4 * V * R
    assert step["optimizer/adam_m"] == 4 * (QV + R * H)


@pytest.mark.parametrize("changes, message", [
    (dict(model=MODELS["llama-3.2-3b"], implementation="torchtune"), "tied to the token embedding"),
    (dict(loss="fused-linear"), "never runs the layer"),
])
def test_what_cannot_run_is_refused(changes, message):
    with pytest.raises(ValueError, match=message):
        validate_config(BASE.with_changes(**changes))


def test_peft_adapts_a_tied_output_layer():
    """Llama 3.2 3B ties its output layer to the embedding; PEFT adapts it all the same (h 3,072, 28 layers)."""
    b = estimate(BASE.with_changes(model=MODELS["llama-3.2-3b"], lora_targets=("lm_head",)))
    assert b.trainable_params == R * (3072 + V)


def test_every_surface_takes_the_target(capsys):
    """The option table's choices reach the command line and front matter."""
    assert convert_setting("lora_targets", ["q", "v", "lm_head"], {}) == ("q", "v", "lm_head")
    code, out, _ = run(capsys, "estimate", "--model", "llama-3.1-8b", "--lora-rank", "16", "--lora-targets",
                       "q,v,lm_head", "--seq-len", "1024", "--precision", "bf16", "--json")
    assert code == 0 and json.loads(out)["parts"]["weights/lora_adapters"] == 4 * (QV + HEAD_ADAPTER)
    code, out, _ = run(capsys, "estimate", "--help")
    assert "lm_head" in out


def test_the_page_says_what_the_model_counts():
    """content/fine-tuning.md: the 8B adapter's size, and that it outweighs nine layers' q and v adapters, not ten."""
    from tests.page_text import page_text

    page = page_text("fine-tuning.md")
    per_layer = QV // 32
    assert 9 * per_layer < HEAD_ADAPTER < 10 * per_layer
    assert f"at $r = 16$, {HEAD_ADAPTER:,}, almost all of them in the vocabulary-wide `lora_B`, more than the q and v " \
           "adapters of nine layers" in page
