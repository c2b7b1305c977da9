"""Seed 002, "LLM Training Memory Visualizer": each feature it describes (presets, model architecture, training
config with precision, parameter and reduce dtypes, FSDP strategy, 5D parallelism, the breakdown by category), as
a reader of the calculator page (widget id "calc") sees it. Expected numbers are the Python model's
(builder.widgets.calculator.results for the same form state)."""

from __future__ import annotations

import pytest

from builder.model.partnames import reader_name
from builder.widgets import calculator as calc
from tests.seeds.calculator_page import (  # noqa: F401 - PAGE is the module's page, form a fixture
    DEFAULTS, MODELS, PAGE, W, config, expected, form, read, rows, set_form, want_rows)


def assert_like_python(shown: dict, state: dict[str, str]) -> None:
    """The summary, every part (name, bytes) and the readouts equal Python's for this state."""
    want = expected(state)
    assert shown["summary"] == want["summary"]
    assert [(p[0], p[1]) for p in shown["parts"]] == [(p["name"], p["bytes"]) for p in want["parts"]]
    assert (shown["arch"], shown["shards"]) == (want["arch"], want["shards"])


# Presets and the model --------------------------------------------------------------------------------------------

def test_presets_set_the_whole_form(form):
    form.locator(W).get_by_label("Starting point").select_option(label="Llama 3 70B, 3D parallel on 128 GPUs")
    shown = read(form)
    state = calc.start_state("3d-70b", MODELS, DEFAULTS["gpu"])
    assert shown["state"] == state
    assert_like_python(shown, state)
    assert "128 GPUs (dp 4, tp 8, pp 4, ZeRO-1)" in shown["summary"]


def test_model_architecture_presets_pick_a_catalog_model(form):
    form.locator(W).get_by_label("Model", exact=True).select_option(label="Qwen3 8B")
    shown = read(form)
    state = DEFAULTS | {"model": "qwen3-8b"} | calc.arch_state(MODELS["qwen3-8b"])
    assert shown["arch"] == calc.arch_text(config(state))
    assert_like_python(shown, state)


def test_arbitrary_model_configuration(form):
    custom = {"model": "custom", "layers": "24", "hidden": "2048", "heads": "16", "kv_heads": "4", "head_dim": "128",
              "ffn": "5632", "vocab": "32000", "mlp": "swiglu", "norm": "rmsnorm", "tied_embeddings": "0", "experts": "0",
              "top_k": "0"}
    shown = set_form(form, custom)
    assert form.locator(W).get_by_label("Layers", exact=True).is_visible()
    assert shown["arch"].endswith("; 24 layers, hidden 2048, 16 heads, 4 KV heads")
    assert_like_python(shown, DEFAULTS | custom)


# Training config --------------------------------------------------------------------------------------------------

def test_precision_select(form):
    select = form.locator(W).get_by_label("Precision policy")
    assert select.locator("option").all_inner_texts()[:2] == ["bf16-mixed", "fp16-mixed"]
    select.select_option("fp16-mixed")
    shown = read(form)
    assert "training, fp16-mixed, adamw" in shown["summary"]
    assert_like_python(shown, DEFAULTS | {"precision": "fp16-mixed"})


def test_parameter_dtype_select(form):
    form.locator(W).get_by_label("Parameter dtype").select_option("fp32")
    shown = read(form)
    assert rows(shown)["weights"][1] == "4 B/param (fp32)"
    assert rows(shown) == want_rows(DEFAULTS | {"param_dtype": "fp32"})


def test_reduce_dtype_select(form):
    before = rows(read(form))
    form.locator(W).get_by_label("Reduce dtype").select_option("fp32")
    shown = rows(read(form))
    assert shown == want_rows(DEFAULTS | {"reduce_dtype": "fp32"})
    assert shown["comm/unsharded_grads"] != before["comm/unsharded_grads"]  # gradients reduced in fp32


def test_mixed_precision_keeps_a_master_weights_copy(form):
    # Without sharding: FSDP's mixed precision keeps one fp32 shard, which is the master (the Sharding page).
    shown = rows(set_form(form, {"sharding": "0", "dp": "1"}))
    assert shown["optimizer/master"][1] == "4 B/param (fp32 master copy)"
    assert [reader_name(n) for n in ("optimizer/master", "optimizer/adam_m", "optimizer/adam_v")] == [
        "Master weights", "Adam first moment", "Adam second moment"]
    assert {"optimizer/adam_m", "optimizer/adam_v"} <= set(shown)  # the seed's Adam optimizer


# FSDP and 5D parallelism --------------------------------------------------------------------------------------------

def test_fsdp_strategy_select(form):
    select = form.locator(W).get_by_label("ZeRO / FSDP")
    options = select.locator("option").all_inner_texts()
    assert [o for o in options if o.startswith("FSDP")] == [f"FSDP {name}" for name in
                                                            ("FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD")]
    select.select_option("SHARD_GRAD_OP")
    shown = read(form)
    state = DEFAULTS | {"sharding": "SHARD_GRAD_OP"}
    assert shown["shards"] == calc.shards_text(config(state))
    assert shown["shards"].startswith("Shard factor (FSDP SHARD_GRAD_OP): weights split over 1 GPU, gradients over 8")
    assert_like_python(shown, state)


@pytest.mark.parametrize("label, changes", [
    ("Data parallel", {"dp": "16"}),
    ("Tensor parallel", {"tp": "2"}),
    ("Pipeline stages", {"pp": "4"}),
    ("Context parallel", {"cp": "2"}),
    ("Expert parallel", {"model": "mixtral-8x7b", "ep": "2"}),
], ids=["data", "tensor", "pipeline", "context", "expert"])
def test_5d_parallelism_controls(form, label, changes):
    state = DEFAULTS | changes
    if "model" in changes:
        state |= calc.arch_state(MODELS[changes["model"]])
        form.locator(W).get_by_label("Model", exact=True).select_option(changes["model"])
    field = form.locator(W).get_by_label(label, exact=True)
    key = next(k for k in changes if k != "model")
    field.fill(changes[key])
    shown = read(form)
    assert shown["state"] == state
    assert_like_python(shown, state)
    assert f"{key} {changes[key]}" in shown["summary"]


def test_sequence_parallel_with_tensor_parallel(form):
    # Seed 002 assumes tensor parallelism always includes sequence parallelism; ours makes it a choice beside TP.
    form.locator(W).get_by_label("Tensor parallel", exact=True).fill("2")
    without = rows(read(form))
    form.locator(W).get_by_label("Sequence parallel (with TP)").check()
    shown = read(form)
    assert_like_python(shown, DEFAULTS | {"tp": "2", "sequence_parallel": "1"})
    assert rows(shown)["activations/norms"] != without["activations/norms"]
    assert "Sequence parallelism is its own checkbox" in form.locator("main").inner_text()


# The breakdown ------------------------------------------------------------------------------------------------------

def test_memory_breakdown_by_category(form):
    shown = read(form)
    want = expected(DEFAULTS)
    assert shown["labels"] == [p["label"] for p in want["parts"]]
    assert [(p[0], p[2]) for p in shown["parts"]] == [(p["name"], p["size"]) for p in want["parts"]]
    titles = form.locator(f"{W} .calc-chart rect.tm-segment title").all_text_contents()
    assert titles == [s["title"] for s in want["chart"]["segments"]]


def test_results_update_without_a_calculate_button(form):
    # Seed 002 recomputes on a Calculate press; ours recomputes as each setting changes, and has no such button.
    assert form.locator(W).get_by_role("button", name="Calculate").count() == 0
    form.locator(W).get_by_label("Micro-batch", exact=True).fill("2")
    assert read(form)["summary"] == expected(DEFAULTS | {"micro_batch": "2"})["summary"]
    assert "No Calculate button. Every change recomputes at once" in form.locator("main").inner_text()


def test_peak_of_a_step_instead_of_an_upper_bound_without_intermediates(form):
    # Seed 002 sums the parts "excluding intermediates"; ours judges the peak of a step, and the page says why.
    shown = read(form)
    assert shown["basis"] == expected(DEFAULTS)["basis"]
    body = form.locator("main").inner_text()
    assert ("So the calculator, the command line and every chart on this site judge a run by what it needs: the "
            "highest moment of a step") in " ".join(body.split())


def test_pipeline_schedule_keeps_activation_memory_constant(form):
    # Seed 002: "Pipeline parallelism maintains consistent activation memory due to schedule". Ours models 1F1B: the
    # first stage holds L/p layers for p micro-batches in flight, L layers' worth whatever p is.
    layer_parts = ("activations/attention", "activations/mlp")
    seen = []
    for stages in ("1", "2", "4"):
        shown = set_form(form, {"pp": stages, "grad_accum": "8"})
        state = DEFAULTS | {"pp": stages, "grad_accum": "8"}
        assert [(p[0], p[1]) for p in shown["parts"]] == [(p["name"], p["bytes"]) for p in expected(state)["parts"]]
        seen.append([dict((p[0], p[1]) for p in shown["parts"])[name] for name in layer_parts])
    assert seen[0] == seen[1] == seen[2]
