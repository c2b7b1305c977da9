"""torch.compile over every layer (--compile): what inductor's partitioner saves (torch 2.13
torch/_functorch/partitioners.py min_cut_rematerialization_partition), pinned to the CPU measurements in
content/validation/compiled.json (builder/validate/measure.py compiles each transformers 5.23 layer with
nn.Module.compile, the default inductor backend, and counts the tensors its autograd function packs)."""

from __future__ import annotations

import json

import pytest

from builder.catalog import default_models
from builder.model import Config, estimate
from builder.validate.compare import compare_documents
from builder.validate.results import VALIDATION_DIR
from tests.test_cli import run

MODELS = default_models()
DOCUMENT = json.loads((VALIDATION_DIR / "compiled.json").read_text())


def measured(name: str) -> int:
    return next(case["per_layer"]["activation_storage_bytes"] for case in DOCUMENT["cases"] if case["name"] == name)


def predicted(name: str) -> int:
    return next(row.predicted for row in compare_documents({"compiled.json": DOCUMENT})
                if row.case == name and row.quantity == "per_layer")


@pytest.mark.parametrize("name, bytes_measured", [
    # Llama, eager attention, bf16: the bf16 scores, the softmax's fp32 row max and sum and its bf16 copy.
    ("llama-eager-bf16-b5-s12-h64-a4-kv2-f176-v211-none-nodrop-compiled", 138720),
    # Llama under autocast: the fp32 residual stream recomputed from o_proj's bf16 output.
    ("llama-eager-fp32-b5-s12-h64-a4-kv2-f176-v211-none-nodrop-amp-compiled", 238560),
    # GPT-2, its Python GeLU fused: input and output kept, the tanh and the factors recomputed.
    ("gpt2-eager-bf16-b5-s12-h64-a4-v211-none-nodrop-compiled", 129120),
    ("gpt2-sdpa-bf16-b5-s12-h64-a4-v211-none-nodrop-compiled", 124320),
    ("gpt2-eager-bf16-b5-s12-h64-a4-v211-none-drop-compiled", 145440),
])
def test_a_compiled_layer_saves_what_was_measured(name, bytes_measured):
    """Per layer, measured on CPU (compiled.json) and predicted by the compiled op lists, within 2%."""
    assert measured(name) == bytes_measured
    assert predicted(name) == pytest.approx(bytes_measured, rel=0.02)


def test_every_measured_compiled_case_is_within_two_percent():
    """Every case of compiled.json: activations per layer within 2%, outside the layers within 5%."""
    rows = compare_documents({"compiled.json": DOCUMENT})
    assert len(rows) == 2 * len(DOCUMENT["cases"]) >= 40
    assert all(row.status == "ok" for row in rows), [r for r in rows if r.status != "ok"]


def test_compiling_saves_less_than_eager_code():
    """The eager op lists against the compiled ones on the measured GPT-2 shape (b5 s12 h64 a4, bf16, SDPA):
    transformers' eager layer (activations.json's op list, measured 2% close) keeps the GeLU's four Python-op
    tensors, the compiled one its input and output only."""
    config = dict(model=MODELS["gpt2"], precision="bf16", micro_batch=5, seq_len=12, attention="sdpa")
    eager, compiled = estimate(Config(**config)), estimate(Config(**config, compile=True))
    assert compiled.get("activations/mlp") < eager.get("activations/mlp")
    assert compiled.get("activations") < eager.get("activations")


def test_compile_leaves_the_loss_alone_and_the_compiled_loss_leaves_the_layers_alone():
    """torchtune compiles the layers (compile_model) and the loss (compile_loss) in separate calls, so the two options
    are independent: --compile changes no loss part, --loss compiled no layer part."""
    base = Config(model=MODELS["llama-3-8b"], seq_len=4096)
    plain, layers, loss = estimate(base), estimate(base.with_changes(compile=True)), estimate(
        base.with_changes(loss="compiled"))
    for part in ("activations/loss", "activations/logits", "activations/final_norm"):
        assert layers.get(part, default=0) == plain.get(part, default=0)
    for part in ("activations/norms", "activations/attention", "activations/mlp"):
        assert loss.get(part) == plain.get(part)


@pytest.mark.parametrize("args, message", [
    (["--model", "llama-3-8b", "--mode", "serve"], "a training option, which --mode serve does not read"),
    (["--model", "llama-3-8b", "--activation-formula", "korthikanti"], "count activations op by op"),
    (["--model", "llama-3-8b", "--implementation", "megatron"], "implementation hf"),
    (["--model", "mixtral-8x7b"], "mixture-of-experts"),
    (["--model", "llama-3-8b", "--lora-rank", "8"], "PEFT's LoRA adapters"),
    (["--model", "gpt2", "--lora-rank", "8", "--implementation", "torchtune", "--precision", "bf16"],
     "Llama-family layers"),
    (["--model", "llama-3-8b", "--lora-rank", "8", "--implementation", "torchtune", "--precision", "bf16",
      "--lora-dropout", "0.05"], "lora_dropout 0.05"),
    (["--params", "7b"], "changes nothing with --params alone"),
])
def test_compile_refused_where_it_was_not_measured(capsys, args, message):
    code, _, err = run(capsys, "estimate", *args, "--compile")
    assert code == 2 and "--compile" in err and message in err and len(err.strip().splitlines()) == 1
