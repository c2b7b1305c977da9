"""torchtune's LoRA and QLoRA in the model (implementation torchtune), derived by hand from torchtune's code.

Read at torchtune commit 30b8519 (the README's memory table; the same in v0.6.1):
- recipes/lora_finetune_single_device.py _setup_model: `with training.set_default_dtype(self._dtype)` builds the
  model, adapters included, then training.validate_expected_param_dtype(self.adapter_params.items(),
  dtype=self._dtype); cfg.dtype is bf16 in every LoRA and QLoRA config; _setup_optimizer: torch.optim.AdamW (fused:
  True in the configs), whose _init_group makes exp_avg and exp_avg_sq zeros_like the parameter;
- torchtune/modules/peft/lora.py LoRALinear.forward: F.linear(x, self.weight) (linear_nf4 under QLoRA), then
  self.lora_b(self.lora_a(self.dropout(x))) scaled, no cast; lora_dropout 0.0 in every config (nn.Identity);
- torchtune/training/_compile.py compile_model (each layer compiled) before set_activation_checkpointing in
  _setup_model.
torchao/dtypes/nf4tensor.py at v0.5.0: LinearNF4 saves only the weight; to_nf4(block 64, scaler block 256) keeps int8
scalers and a quantization_factor per scaler block in the weight's dtype; get_original_weight (measured in
tests/test_lora_torchtune.py) holds 8 + 3 x 2 + 2/64 bytes per weight in bf16.
PEFT's rules (implementation hf) stay as tests/test_lora_peft.py and tests/test_qlora_peft.py pin them.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from builder.catalog import default_models
from builder.model import Config, estimate
from builder.model.config import validate_config
from builder.model.peak import assess, need

MODELS = default_models()
GIB = 2**30
LLAMA_8B = MODELS["llama-3.1-8b"]
LLAMA_3B = MODELS["llama-3.2-3b"]
QVO_MLP = ("q", "v", "o", "gate", "up", "down")
ALL = ("q", "k", "v", "o", "gate", "up", "down")
# Llama 3.1 8B LoRA as recipes/configs/llama3_1/8B_lora_single_device.yaml at 30b8519 (rank 8 on q_proj and v_proj),
# batch 2 of 2,048 tokens.
LORA_8B = Config(model=LLAMA_8B, precision="bf16", implementation="torchtune", lora_rank=8, lora_targets=("q", "v"),
                 micro_batch=2, seq_len=2048, attention="flash", optimizer="adamw", optimizer_impl="fused")
# h 4096, 32 heads and 8 KV heads of 128: q is 4096 -> 4096, v 4096 -> 1024; 32 layers.
ADAPTERS_8B = 32 * 8 * ((4096 + 4096) + (4096 + 1024))


def test_adapters_their_gradients_and_adams_moments_are_bf16():
    """3,407,872 adapter parameters: 2 B each for the adapter, its gradient and both AdamW moments (PEFT's fp32
    upcast, implementation hf, keeps 4 B each)."""
    assert ADAPTERS_8B == 3_407_872
    for implementation, size in (("torchtune", 2), ("hf", 4)):
        b = estimate(LORA_8B.with_changes(implementation=implementation))
        for part in ("weights/lora_adapters", "gradients", "optimizer/adam_m", "optimizer/adam_v"):
            assert b.get(part) == size * ADAPTERS_8B, (implementation, part)


def test_an_adapted_8b_layer_saves_the_norm_output_once():
    """T = 4,096 tokens, h 4,096, r 8, adapters on q and v, no recomputation. torchtune: lora_a of q and v both save the
    input_layernorm's bf16 output, one tensor (T h 2), and lora_b each lora_a's bf16 output (2 x T r 2): 33,685,504 B
    a layer. PEFT casts the input to fp32 for each adapter: 2 x (T h 4 + T r 4) = 134,479,872 B."""
    T, h, r = 4096, 4096, 8
    torchtune, peft = T * h * 2 + 2 * T * r * 2, 2 * (T * h * 4 + T * r * 4)
    assert (torchtune, peft) == (33_685_504, 134_479_872)
    assert estimate(LORA_8B).get("activations/lora") == 32 * torchtune
    assert estimate(LORA_8B.with_changes(implementation="hf")).get("activations/lora") == 32 * peft


def test_the_down_adapters_input_is_its_own():
    """The SwiGLU product is saved by nothing else once down_proj is frozen: an adapter on down alone saves it (T f 2,
    f 14,336) and lora_a's output (T r 2)."""
    T = 4096
    got = estimate(LORA_8B.with_changes(lora_targets=("down",))).get("activations/lora")
    assert got == 32 * (T * 14336 * 2 + T * 8 * 2)


def test_torchaos_nf4_constants():
    """to_nf4: an int8 scaler per 64 weights and a bf16 quantization_factor per 256 scalers, 1/64 + 2/16,384 B per
    weight, against bitsandbytes' fp32 constant per 256 blocks (1/64 + 4/16,384) under PEFT."""
    for implementation, per_weight in (("torchtune", Fraction(1, 64) + Fraction(2, 64 * 256)),
                                       ("hf", Fraction(1, 64) + Fraction(4, 64 * 256))):
        b = estimate(LORA_8B.with_changes(implementation=implementation, qlora=True))
        assert Fraction(b.get("weights/quantisation_constants")) == b.get("weights/quantised_linear") * 2 * per_weight


def _dequantised(config: Config) -> dict[str, int]:
    return {phase.name: sum(p.bytes for p in phase.parts if p.name == "weights/dequantised_linear")
            for phase in need(config).steps}


def test_torchao_dequantises_the_largest_weight_in_forward_and_backward():
    """Llama 3.1 8B's largest quantised matrix is the MLP's 14,336 x 4,096 = 58,720,256 weights. Eager
    get_original_weight: 14.03125 B a weight (tests/test_lora_torchtune.py measures it), 823,918,592 B, in the
    backward and, with eager attention giving the forward a moment of its own, in the forward. LinearNF4 dequantises
    at every token count (no fused kernel as bitsandbytes' at 4 rows). A compiled layer has no moments of its own
    (its instants are named as not modelled), so none is counted there."""
    e = 14336 * 4096
    qlora = LORA_8B.with_changes(qlora=True, lora_targets=ALL, attention="eager")
    eager = _dequantised(qlora)
    assert eager["layer_backward"] == eager["layer_forward"] == e * Fraction(449, 32) == 823_918_592
    assert not any(_dequantised(qlora.with_changes(attention="flash", compile=True)).values())
    assert _dequantised(qlora.with_changes(seq_len=2, micro_batch=1))["layer_forward"] == 823_918_592


@pytest.mark.parametrize("changes, message", [
    (dict(precision="bf16-autocast"), "bf16 activations under torch.autocast$"),
    # recipes/lora_finetune_single_device.py: "fp16 precision is not supported in this recipe. Please use fp32 or bf16."
    (dict(precision="fp16-mixed"), "not fp16 weights"),
    # No mixed precision: the adapters, their gradients and AdamW's moments all in the one dtype
    # (tests/test_torchtune_precision.py has the sources).
    (dict(precision="bf16-mixed"), "fp32 optimizer states and bf16 activations plus a master copy \\(fp32\\)$"),
    (dict(qlora=True, qlora_double_quant=False), "always double-quantises"),
    (dict(qlora=True, kbit_prepare="prepare"), "PEFT's prepare_model_for_kbit_training"),
])
def test_what_torchtune_does_not_do_is_refused(changes, message):
    with pytest.raises(ValueError, match=message):
        validate_config(LORA_8B.with_changes(**changes))


def test_compile_with_full_recompute_changes_only_the_layer_being_recomputed():
    """torchtune compiles each layer, then wraps it in a checkpoint: every layer keeps its input alone (T h 2 =
    33,554,432 B) compiled or not, and the layer recomputed in the backward keeps the compiled layer's tensors."""
    full = LORA_8B.with_changes(recompute="full")
    eager, compiled = estimate(full), estimate(full.with_changes(compile=True))
    assert eager.get("activations/checkpoint") == compiled.get("activations/checkpoint") == 32 * 33_554_432
    plain = estimate(LORA_8B.with_changes(compile=True))
    layers = sum(p.bytes for p in plain.parts if p.name.split("/")[-1] in ("norms", "attention", "mlp", "lora")
                 and p.name.startswith("activations/"))
    assert compiled.get("activations/recompute_working_layer") * 32 == layers
    assert compiled.get("activations/recompute_working_layer") < eager.get("activations/recompute_working_layer")


def _readme_run(model, seq_len, rank, targets, **changes) -> Config:
    """A torchtune README row as the model reads it: batch 2, bf16, fused AdamW, activation checkpointing, the
    chunked loss compiled, torch.compile on, the packed batch's attention as a flash kernel."""
    return Config(model=model, precision="bf16", implementation="torchtune", micro_batch=2, seq_len=seq_len,
                  attention="flash", loss="chunked-compiled", optimizer="adamw", optimizer_impl="fused",
                  recompute="full", compile=True, lora_rank=rank, lora_targets=targets, **changes)


README_RUNS = {
    # torchtune README "Memory and training speed" (30b8519), RTX 4090 rows, and "Optimization flags" (1814feb).
    "8b-lora": (_readme_run(LLAMA_8B, 2048, 8, ("q", "v")), Fraction("16.2")),
    "8b-qlora": (_readme_run(LLAMA_8B, 2048, 8, ALL, qlora=True), Fraction("7.4")),
    "3b-lora": (_readme_run(LLAMA_3B, 4096, 64, QVO_MLP, offload_activations=True), Fraction("8.5")),
    "3b-qlora": (_readme_run(LLAMA_3B, 4096, 64, QVO_MLP, offload_activations=True, qlora=True), Fraction("4.6")),
}


def _need(config: Config) -> float:
    return assess(config)[1].bytes / GIB


def test_the_page_quotes_the_model():
    """content/fine-tuning.md's torchtune section: every figure it gives is the model's."""
    page = " ".join(Path(__file__).resolve().parents[1].joinpath("content", "fine-tuning.md").read_text().split())
    for name, (config, published) in README_RUNS.items():
        got = _need(config)
        assert f"{float(published):.1f} GiB | {got:.2f} GiB ({got / float(published) - 1:+.1%})" in page, name
    lora, qlora = _need(README_RUNS["3b-lora"][0]), _need(README_RUNS["3b-qlora"][0])
    assert f"{lora - qlora:.2f} GiB apart" in page
    assert f"would need {_need(README_RUNS['8b-qlora'][0].with_changes(compile=False)):.2f} GiB" in page
    three_b = Config(model=LLAMA_3B, precision="bf16", lora_rank=64, lora_targets=QVO_MLP, micro_batch=2, seq_len=4096,
                     attention="flash")
    states = {impl: sum(estimate(three_b.with_changes(implementation=impl)).get(p) for p in
                        ("weights/lora_adapters", "gradients", "optimizer/adam_m", "optimizer/adam_v")) / GIB
              for impl in ("torchtune", "hf")}
    assert f"{states['torchtune']:.2f} GiB instead of PEFT's {states['hf']:.2f} GiB" in page
    saved = {impl: estimate(three_b.with_changes(implementation=impl)).get("activations/lora") / GIB
             for impl in ("torchtune", "hf")}
    assert f"{saved['torchtune']:.2f} GiB against {saved['hf']:.2f} GiB without recomputation" in page
    per_layer = {impl: estimate(LORA_8B.with_changes(implementation=impl)).get("activations/lora") / 32 / 2**20
                 for impl in ("torchtune", "hf")}
    assert f"keeps {per_layer['torchtune']:.1f} MiB for its adapters, against {per_layer['hf']:.1f} MiB" in page
    assert f"({32 * per_layer['torchtune'] / 1024:.2f} GiB against {32 * per_layer['hf'] / 1024:.2f} GiB" in page
    assert "0.77 GiB for Llama 3.1 8B's 14,336 × 4,096 MLP matrix" in page and 14336 * 4096 * 14.03125 / GIB < 0.775
