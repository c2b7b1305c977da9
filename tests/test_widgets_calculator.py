"""The calculator widget's server side (builder/widgets/calculator.py): default state, form state to
Config, texts, and the data the script evaluates (which must say what builder.model computes)."""

from __future__ import annotations

import json
from html.parser import HTMLParser

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builder.catalog import default_gpus, default_models
from builder.content import Preset
from builder.model import Config, estimate, oplists
from builder.model.architecture import shape_inputs
from builder.model.config import PRECISIONS
from builder.model.units import format_bytes
from builder.sources import default_references, html_renderer
from builder.widgets import calculator as calc
from builder.widgets.model_data import RULE_SETS
from builder.widgets.packed import unpack
from builder.widgets import to_json

ROOT = Path(__file__).resolve().parent.parent
MODELS = default_models()
REFERENCES = default_references()
LINKED = html_renderer(REFERENCES)  # the parts' sources as the page renders them: citations linked
GPUS = calc.catalog_gpus(default_gpus())
PRESET = {"model": "llama-3-8b", "precision": "bf16-mixed", "optimizer": "adamw", "seq_len": 4096,
          "micro_batch": 1, "recompute": "selective", "fsdp": "FULL_SHARD", "dp": 8}


def make_context(**options):
    """context() for the calculator page's placement, with the preset above."""
    catalogs = {"model": MODELS, "gpu": default_gpus(), "preset": {"p": Preset("p", PRESET, {}, "x", 1)},
                "references": REFERENCES}
    return calc.context({"preset": "p", "gpus": ["rtx-4090", "h200"], "gpu": "h100-80gb"} | options, catalogs)


def state(**changes) -> dict[str, str]:
    """The preset's form state with some controls changed."""
    return calc.default_state(PRESET, MODELS, "h100-80gb") | changes


def test_default_state_follows_the_preset():
    defaults = make_context()["defaults"]
    assert defaults["model"] == "llama-3-8b" and defaults["sharding"] == "FULL_SHARD" and defaults["dp"] == "8"
    assert defaults["seq_len"] == "4096" and defaults["recompute"] == "selective" and defaults["gpu"] == "h100-80gb"
    assert defaults["layers"] == "32" and defaults["kv_heads"] == "8"  # custom fields start from the model


def test_default_figure_is_the_models_estimate():
    result = make_context()["result"]
    config = Config(model=MODELS["llama-3-8b"], seq_len=4096, recompute="selective", fsdp="FULL_SHARD", dp=8)
    breakdown = estimate(config)
    assert [(p["name"], p["bytes"]) for p in result["parts"]] == list(breakdown.as_dict().items())
    assert result["total"] == breakdown.total
    # Issue 13: the figure states what the run needs (the peak of a step) and judges every GPU by it.
    from builder.model.peak import need

    needed = need(config)
    # Below the sum of parts, which also counts FSDP2's buffers made later in the backward (the next test).
    assert result["need"] == needed.bytes < breakdown.total and needed.peak.name == "backward_start"
    assert result["summary"].startswith("Llama 3 8B (8,030,261,248 parameters), training, bf16-mixed, adamw")
    assert (f"needs {format_bytes(needed.bytes)} ({format_bytes(needed.bytes, 'GB')}) per GPU, the peak of a step, "
            f"at the start of backward (loss gradients); sum of parts {format_bytes(breakdown.total)}") in result["summary"]
    assert all(f["fits"] == (needed.bytes <= g[2]) for f, g in zip(result["fits"], GPUS))
    assert result["max_batch"].startswith("Largest micro-batch that fits on H100 SXM 80GB: ")
    assert [f["id"] for f in result["fits"]] == [g[0] for g in GPUS]


def test_the_calculator_page_shows_the_peak_of_its_starting_run():
    """The widget's total is the sum of parts; the page's step-phases chart shows builder.model.peak's phases
    for the widget's starting state, and its prose says the peak is the start of backward, below the sum:
    Llama 3 8B, 4,096 tokens, FSDP on 8 GPUs, where the loss gradients (2 x 4096 x 128256 x 4 B = 3.9 GiB)
    are live with every saved activation, and the sum also counts the sharded gradients (fp32 under FSDP's mixed
    precision), FSDP2's output-layer gradient (128256 x 4096 x 2 B) and previous block's reduce-scatter input, made
    only later in the backward (PyTorch fully_shard)."""
    from builder.content import read_page
    from builder.model.peak import peak

    page, errors = read_page(ROOT / "content" / "calculator.md", "content/calculator.md")
    assert not errors
    chart = page.charts["step-phases"]
    assert chart.phases and [bar.preset for bar in chart.bars] == ["llama-3-8b-fsdp"]
    assert page.presets["llama-3-8b-fsdp"].settings == PRESET  # the widget's preset, which this file's tests use
    config = Config(model=MODELS["llama-3-8b"], seq_len=4096, recompute="selective", fsdp="FULL_SHARD", dp=8)
    assert calc.config_from_state(state(), MODELS) == config
    top = peak(config)
    parts = {part.name: part.bytes for part in estimate(config).parts}
    assert parts["comm/root_grads"] == 128256 * 4096 * 2
    assert top.name == "backward_start"
    assert parts["gradients"] == 4 * 8030261248 // 8  # FSDP's fp32 sharded gradients (builder.model.states)
    assert (estimate(config).total - parts["gradients"] - parts["comm/root_grads"] - parts["comm/reduce_scatter_input"]
            < top.total < estimate(config).total)
    assert "peak comes at the start of the backward pass, where the loss gradients are live with every saved " \
           "activation. It lies a little below the sum of parts" in " ".join(page.body.split())


def test_gpus_are_sorted_by_capacity_and_the_chart_draws_the_chosen_ones():
    assert [g[2] for g in GPUS] == sorted(g[2] for g in GPUS)
    chart = make_context()["result"]["chart"]
    # short names fit beside their line on a 320 px screen; the amount tells A100 40GB from A100 80GB
    assert [line["text"].split(":")[0] for line in chart["lines"]] == ["RTX 4090", "H100", "H200"]
    assert len(chart["segments"]) == len(make_context()["result"]["parts"]) and chart["overflow"] is None


def test_unknown_preset_option_is_an_error():
    with pytest.raises(ValueError, match="activation_dtype"):
        calc.default_state({"model": "gpt2", "activation_dtype": "fp32"}, MODELS, "h100-80gb")


def test_serving_ignores_training_only_controls():
    config = calc.config_from_state(state(mode="serve", weights="int4", kv_dtype="fp8"), MODELS)
    assert config.mode == "serve" and config.fsdp is None and config.zero == 0 and config.offload == "none"
    assert config.param_dtype == "int4" and config.kv_dtype == "fp8" and config.lora_rank == 0


def test_custom_architecture_and_its_errors():
    config = calc.config_from_state(state(model="custom", layers="4", hidden="512", heads="8", kv_heads="2",
                                          head_dim="64", experts="4", top_k="2"), MODELS)
    assert config.model.name == "custom" and config.model.n_kv_heads == 2 and config.model.is_moe
    bad = calc.results(state(model="custom", kv_heads="5"), MODELS, GPUS, [])
    assert bad["error"] == "custom: kv_heads (5) must divide heads (32)"
    assert bad["summary"] == "Custom model: not a valid configuration: custom: kv_heads (5) must divide heads (32)"


def test_invalid_state_reports_validate_config_message():
    result = calc.results(state(tp="3"), MODELS, GPUS, [])
    assert result["error"] == "tp: 3 does not divide the 32 attention heads / 8 KV heads of llama-3-8b"


def test_the_op_lists_reach_the_script_as_the_models_rules():
    # The op lists travel as builder.model.activations' rule sets, compiled once from oplists: every row of every
    # block is a table row (so the script has no op list, condition or symbol of its own).
    from builder.model.activations import ACTIVATIONS, MOMENTS

    data = make_context()["data"]
    model = unpack(data["model"])  # the rules as encode wrote them (sent packed: builder/widgets/packed.py)
    assert model["ruleSets"]["activations"] == ACTIVATIONS.encode(LINKED)
    assert model["ruleSets"]["moments"] == MOMENTS.encode(LINKED)
    layer_rows = dict(ACTIVATIONS.encode()["symbols"])["layer_rows"]
    assert sum(json.dumps(layer_rows).count('["row"') for _ in (1,)) == sum(map(len, oplists.BLOCKS.values()))
    # Shapes travel as the rules read them: full input names, no one-letter keys.
    assert data["models"]["llama-3-8b"]["kv_heads"] == 8 and "k" not in data["models"]["llama-3-8b"]
    assert data["custom"]["activation_function"] == "gelu_tanh_python" and "layers" not in data["custom"]
    # A model leaves out the inputs it has at the custom architecture's values (`custom`), which the script puts back:
    # Llama 3 8B has no QK norm (the default), Qwen3 8B has one (transformers' Qwen3Attention: q_norm and k_norm).
    for key, arch in MODELS.items():
        sent = {name: value for name, value in data["models"][key].items() if name not in ("n", "form")}
        assert data["custom"] | sent == shape_inputs(arch), key
    assert "qk_norm" not in data["models"]["llama-3-8b"] and data["models"]["qwen3-8b"]["qk_norm"] == 1


def test_the_script_evaluates_the_models_own_rules():
    # One definition: the script receives builder.model's rule sets as they are, and the inputs the form has no
    # control for at Config's defaults, so it has no optimizer, quantisation or sharding table of its own.
    from builder.model.inputs import config_inputs
    from builder.model.states import MODEL_STATES

    data = make_context()["data"]
    model = unpack(data["model"])
    assert model["ruleSets"]["states"] == MODEL_STATES.encode(LINKED)
    assert set(model["ruleSets"]) == set(RULE_SETS)
    defaults = config_inputs(Config())
    assert data["fixedInputs"]["gpus_per_node"] == defaults["gpus_per_node"] == 8
    assert data["fixedInputs"]["lora_targets"] == ["q", "k", "v", "o"]


@pytest.mark.parametrize("dtype, linear, constants", [
    # LLM.int8 (Dettmers et al. 2022, section 3): an fp32 scale per output row of 4096: 4/4096 B/param.
    ("int8", "1 B/param (int8)", "0.0010 B/param (fp32 scale per output row)"),
    # fp8 (Micikevicius et al. 2022): one scale per tensor, negligible.
    ("fp8", "1 B/param (fp8)", "0.0000 B/param (per-tensor scales)"),
    # GPTQ (Frantar et al. 2022) group size 128: an fp16 scale and a 4-bit zero per 128 weights (vLLM awq.py and
    # gptq.py create_weights: qzeros packed eight to an int32): 2.5/128 B/param.
    ("int4", "0.5 B/param (int4)", "0.0195 B/param (fp16 scale + 4-bit zero per 128 weights)"),
    # QLoRA (Dettmers et al. 2023, section 3): double quantisation brings the constants to 0.127 bits/param.
    ("nf4", "0.5 B/param (nf4)", "0.0159 B/param (NF4 constants (block 64, double quantised))"),
])
def test_quantised_weights_state_their_format(dtype, linear, constants):
    breakdown = estimate(Config(model=MODELS["llama-3-8b"], mode="serve", precision="bf16", param_dtype=dtype))
    assert breakdown.part("weights/quantised_linear").per_unit == linear
    if dtype != "fp8":
        assert breakdown.part("weights/quantisation_constants").per_unit == constants
    # The embeddings, norms and output layer stay in the 16-bit dtype the model runs in (vLLM's --dtype; bf16 here).
    assert breakdown.part("weights/unquantised").per_unit == "2 B/param (bf16)"


def test_data_is_compact_and_safe_to_embed():
    data = make_context()["data"]
    text = to_json(data)
    # Catalog shapes with each model's custom-form fields, the rule sets (the op lists compiled into table rules are
    # the largest), the range checks, part names, starting points, texts and check messages (252 KB with the
    # optimizer-state and accumulation dtype controls and their checks, about 258 KB with DeepSpeed's bucket parts),
    # the parts' sources with their citations linked to the References page (+12 KB). Page weight is judged whole by
    # `make bench`; this bound only catches an accidental blow-up (a catalog embedded twice, say).
    assert "<" not in text and len(text) < 300_000
    # The words come from the model's own tables, so the script cannot say anything else.
    from builder.model.checks import encode_checks

    model = unpack(data["model"])
    assert model["checks"] == encode_checks() and "does not divide the" in json.dumps(model["checks"])
    assert "sbh(34 + 5as/h)" in json.dumps(model["ruleSets"]["activations"])
    # A model's custom-architecture fields are its shape inputs, but for a mixture of experts with no dense FFN.
    assert "form" not in data["models"]["llama-3-8b"] and data["models"]["qwen3-30b-a3b"]["form"] == {"ffn": "768"}
    # The whole-number controls read as whole numbers (builder.widgets.calculator_state.typed), vpp among them.
    assert {key for key, kind in calc.CONTROL_TYPES.items() if kind == "count"} >= {
        "micro_batch", "seq_len", "grad_accum", "dp", "tp", "pp", "cp", "ep", "virtual_stages", "batch", "context"}
    assert set(data["models"]) == set(MODELS) and data["models"]["llama-3-8b"]["kv_heads"] == 8
    assert data["model"]["dtypes"]["nf4"] == 0.5
    assert data["policies"]["bf16-mixed"] == {  # Rajbhandari et al. 2019, section 3.1: 2 + 2 + 12 bytes
        "param_dtype": "bf16", "master_dtype": "fp32", "grad_dtype": "bf16", "optimizer_state_dtype": "fp32",
        "activation_dtype": "bf16", "autocast": 0, "recipe": "", "quantised_params": 0, "exp_avg_dtype": "",
        "exp_avg_sq_dtype": "", "msamp": 0, "grad_buffer": 0}
    assert data["policies"]["megatron-bf16"]["grad_buffer"] == 1  # Megatron-LM: main_grad buffer kept for the run
    assert data["policies"]["amp-bf16"]["autocast"] == 1  # torch.autocast: linear layers save weight copies
    msamp = data["policies"]["msamp-o2"]  # MS-AMP O2: exp_avg fp8, exp_avg_sq fp16
    assert (msamp["exp_avg_dtype"], msamp["exp_avg_sq_dtype"], msamp["msamp"]) == ("fp8", "fp16", 1)


MODE_VALUES = {"precision": list(PRECISIONS), "param_dtype": ["policy", "fp32", "fp16"],
               "optimizer_state_dtype": ["policy", "bf16", "fp8"], "exp_avg_dtype": ["policy", "fp8"],
               "exp_avg_sq_dtype": ["policy", "fp16"], "grad_accum_dtype": ["policy", "fp32"],
               "reduce_dtype": ["policy", "fp32", "bf16"], "optimizer": ["adamw", "sgd", "adafactor"],
               "optimizer_impl": ["default", "fused", "in-backward"], "micro_batch": ["0", "7"],
               "seq_len": ["0", "65536"], "grad_accum": ["0", "4"], "recompute": ["none", "full"],
               "recompute_layers": ["0", "3", "-1"],
               "attention": ["eager", "flash"], "padded": ["0", "1"], "loss": ["compiled", "fused-linear"], "implementation": ["hf", "megatron", "korthikanti"], "dropout": ["0", "1"], "offload_activations": ["0", "1"],
               "compile": ["0", "1"], "float8": ["none", "tensorwise", "rowwise_with_gw_hp"],
               "float8_filter_output": ["0", "1"], "enable_fsdp_float8_all_gather": ["0", "1"],
               "lora_rank": ["0", "-3", "64"], "lora_dropout": ["0", "0.1", "7"], "qlora": ["0", "1"], "kbit_prepare": ["none", "prepare", "prepare-bf16"], "sharding": ["0", "3", "FULL_SHARD", "HYBRID_SHARD"],
               "offload": ["none", "both"], "checkpoint_save": ["none", "full-state-dict", "deepspeed-16bit"], "sequence_parallel": ["0", "1"], "virtual_stages": ["1", "5"], "cp": ["1", "3"],
               "weights": ["bf16", "int4", "fp8"], "kv_dtype": ["auto", "fp8"], "batch": ["0", "64"],
               "context": ["0", "8192"]}


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_controls_of_the_other_mode_never_count(data):
    """Issue 19: a control shown only in training (ZeRO stage, precision, LoRA, ...) changes no serving number, even
    out of range, and a serving control none in training: the Config is the one of the plain state."""
    models = default_models()
    mode = data.draw(st.sampled_from(["train", "serve"]))
    plain = calc.default_state({"model": data.draw(st.sampled_from(["llama-3-8b", "mixtral-8x7b", "gpt2"]))},
                               models, "h100-80gb") | {"mode": mode}
    assert set(MODE_VALUES) == set(calc.MODE_ONLY)
    others = [key for key, shown in calc.MODE_ONLY.items() if shown != mode]
    changed = plain | {key: data.draw(st.sampled_from(MODE_VALUES[key])) for key in
                       data.draw(st.lists(st.sampled_from(others), min_size=1, unique=True))}
    assert calc.config_from_state(changed, models) == calc.config_from_state(plain, models)
    assert calc.results(changed, models, GPUS, ["h100-80gb"]) == calc.results(plain, models, GPUS, ["h100-80gb"])


# Issue 18: when a run does not fit, the nearest changes that make it fit, each a link --------------------------

def need_of(form: dict[str, str]) -> int:
    from builder.model.peak import need

    return need(calc.config_from_state(form, MODELS)).bytes


def test_a_run_that_fits_suggests_nothing():
    result = calc.results(state(), MODELS, GPUS, [])
    assert result["fits_chosen"] and result["fixes"] == []


def test_the_nearest_changes_that_fit_are_named_in_the_defined_order():
    h100 = next(g for g in GPUS if g[0] == "h100-80gb")
    form = state(micro_batch="4", seq_len="8192")
    assert need_of(form) > h100[2]
    found = calc.fixes(form, MODELS, h100[2])
    assert [text for text, _ in found] == ["fits with micro-batch 1", "fits with full recomputation",
                                          "fits on 8 GPUs with ZeRO-3 and full recomputation",
                                          "fits with sequences of 2,202 tokens"]
    for _, changed in found:
        assert need_of(changed) <= h100[2]
    # "Nearest": the largest micro-batch and sequence that fit, one step more does not (questions' search).
    assert need_of(form | {"micro_batch": "2"}) > h100[2]
    assert need_of(form | {"seq_len": "2203"}) > h100[2]
    # The order is FIXES' order, and each suggestion changes only what it names.
    assert found[1][1] == form | {"recompute": "full"}
    assert found[2][1] == form | {"recompute": "full", "sharding": "3", "dp": "8"}
    assert found[0][1] == form | {"micro_batch": "1"}


def test_gpu_suggestions_double_until_it_fits_and_serving_has_its_own():
    h100 = next(g for g in GPUS if g[0] == "h100-80gb")
    seventy = state(model="llama-3-70b")
    found = dict(calc.fixes(seventy, MODELS, h100[2]))
    # 32 GPUs: on 16, ZeRO-3 holds 16 B/param / 16 of model states at every moment (its flat gradient partitions are
    # allocated with the optimizer and kept: DeepSpeed edaa722 stage3.py:742-751), 65.7 GiB, and the activations of
    # 4,096 tokens with the loss's fp32 gradients take it past an H100 (80.7 GiB at the start of backward).
    assert list(found) == ["fits on 32 GPUs with ZeRO-3 and full recomputation"]
    assert need_of(seventy | {"sharding": "3", "recompute": "full", "dp": "16"}) > h100[2]  # half as many do not fit
    served = calc.fixes(state(model="llama-3-70b", mode="serve"), MODELS, h100[2])
    assert [text for text, _ in served] == ["fits with int8 weights", "fits on 16 GPUs with tensor parallel 2"]


def test_suggestions_are_links_that_carry_their_state():
    result = calc.results(state(model="llama-3-70b", mode="serve"), MODELS, GPUS, [], state())
    assert not result["fits_chosen"]
    assert result["fixes"][0] == {"text": "fits with int8 weights",
                                  "link": [("mode", "serve"), ("model", "llama-3-70b"), ("weights", "int8")]}
    assert result["fixes_head"] == "What would fit on H100 SXM 80GB:"
    # The data the script evaluates is the same list, in the same order.
    data = make_context()["data"]
    assert data["fixes"] == {"candidates": calc.FIXES, "program": calc.FIXING.encode(), "refused": calc.REFUSED}


def test_the_server_renders_the_suggestions_as_links(tmp_path):
    """A calculator placed with a run that does not fit shows, without JavaScript, the links to what would."""
    from builder.render import make_templates

    context = make_context(model="llama-3-70b")
    assert not context["result"]["fits_chosen"]
    html = make_templates(Path("templates")).get_template("partials/widget-calculator.html").render(
        state=context, widget_id="calc", legacy_id="", renamed="", widget=None)
    assert ('<a href="?calc.dp=32&amp;calc.recompute=full&amp;calc.sharding=3" data-fix>'
            "fits on 32 GPUs with ZeRO-3 and full recomputation</a>") in html


# Issue 19 section 2 (seeds 002 and 004): starting points, the unit switch, readouts, parameter and reduce dtypes ---

def test_the_classic_start_is_seed_004s_161_4_gb():
    """Seed 004's worked example as a named starting point: its form state is the Config of tests/test_seeds.py,
    and the figure's sum of parts reads 161.4 GB, in GB as the seed has it."""
    form = calc.start_state("classic-8b", MODELS, "h100-80gb")
    config = calc.config_from_state(form, MODELS)
    assert config == Config(model=MODELS["llama-3-8b"], precision="bf16-mixed", optimizer="adam", micro_batch=1,
                            seq_len=4096, recompute="selective", activation_formula="korthikanti",
                            overhead_fraction=0.1)
    result = calc.results(form, MODELS, GPUS, [])
    assert form["unit"] == "GB" and result["total_text"].startswith("161.4 GB = ")
    assert [p["size"] for p in result["parts"] if p["name"] == "weights"] == ["16.1 GB"]
    assert all(p["size"].endswith(" GB") for p in result["parts"])
    assert calc.start_state("classic-8b", MODELS, "h100-80gb")["start"] == "classic-8b"


def test_every_start_is_a_valid_run_and_in_the_form():
    choices = [value for value, _ in calc.form_groups(GPUS, MODELS)[0][2][0].choices]
    assert choices == ["", *(key for key, *_ in calc.STARTS)]
    for key, *_ in calc.STARTS:
        assert not calc.results(calc.start_state(key, MODELS, "h100-80gb"), MODELS, GPUS, [])["error"], key


def test_the_unit_switch_shows_every_size_in_the_chosen_unit():
    for unit, other in (("GiB", "GB"), ("GB", "GiB")):
        result = calc.results(state(unit=unit), MODELS, GPUS, ["h100-80gb"])
        assert result["unit"] == unit
        assert all(p["size"].endswith(" " + unit) for p in result["parts"])
        assert result["need_text"] == f"{format_bytes(result['need'], unit)} = {format_bytes(result['need'], other)}"
        assert result["total_text"].startswith(format_bytes(result["total"], unit))
        assert all(f["text"].endswith(" " + unit + (" headroom" if f["fits"] else "")) for f in result["fits"])
        assert all(line["text"].endswith(" " + unit) for line in result["chart"]["lines"])
        assert f"needs {format_bytes(result['need'], unit)} ({format_bytes(result['need'], other)})" in result["summary"]


def test_readouts_name_the_architecture_and_the_shard_factor():
    from builder.model.architecture import active_param_count, param_count

    dense = calc.results(state(), MODELS, GPUS, [])
    assert dense["arch"] == "8,030,261,248 parameters; 32 layers, hidden 4096, 32 heads, 8 KV heads"
    assert dense["shards"] == ("Shard factor (FSDP FULL_SHARD): weights split over 8 GPUs, gradients over 8, "
                               "optimizer states over 8")
    moe = calc.results(state(model="mixtral-8x7b", sharding="1", dp="4"), MODELS, GPUS, [])
    mixtral = MODELS["mixtral-8x7b"]
    assert f"{param_count(mixtral):,} parameters ({active_param_count(mixtral):,} active per token)" in moe["arch"]
    assert moe["shards"].startswith("Shard factor (ZeRO-1): weights split over 1 GPU, gradients over 1, "
                                    "optimizer states over 4")
    assert moe["shards"].endswith("; the experts' weights over 1 GPU (1-way expert parallel), gradients over 1, "
                                  "optimizer states over 4, each expert's data-parallel group being 4 GPUs")
    # Expert parallelism is carved out of data parallelism: each expert's data-parallel group is dp / ep ranks
    # (Megatron-LM core/parallel_state.py, expert_data_parallel_size = dp // ep; DeepSpeed MoE the same). ZeRO-3
    # over dp = 8 with ep = 4: an expert's weights shard over 2 GPUs, all experts over 4 x 2 = 8.
    sharded = calc.results(state(model="mixtral-8x7b", sharding="3", dp="8", ep="4"), MODELS, GPUS, [])
    assert sharded["shards"] == ("Shard factor (ZeRO-3): weights split over 8 GPUs, gradients over 8, optimizer "
                                 "states over 8; the experts' weights over 8 GPUs (4-way expert parallel), gradients "
                                 "over 8, optimizer states over 8, each expert's data-parallel group being 2 GPUs")
    # Serving replicas hold the whole model: no sharding, whatever training chose.
    served = calc.results(state(model="mixtral-8x7b", mode="serve"), MODELS, GPUS, [])
    assert "experts' weights over 1 GPU (1-way expert parallel)" in served["shards"]
    served = calc.results(state(mode="serve"), MODELS, GPUS, [])
    assert "weights split over 1 GPU," in served["shards"]


def test_parameter_and_reduce_dtypes_reach_the_config():
    config = calc.config_from_state(state(param_dtype="fp32", reduce_dtype="fp32"), MODELS)
    assert config.param_dtype == "fp32" and config.reduce_dtype == "fp32" and config.policy.param == "fp32"
    plain = calc.config_from_state(state(), MODELS)
    assert plain.param_dtype is None and plain.reduce_dtype is None
    # A preset's param_dtype is the training control in training and the weights' dtype in serving.
    assert calc.default_state({"param_dtype": "fp32"}, MODELS, "h100-80gb")["param_dtype"] == "fp32"
    assert calc.default_state({"mode": "serve", "param_dtype": "int8"}, MODELS, "h100-80gb")["weights"] == "int8"
    assert calc.default_state({"reduce_dtype": "fp32"}, MODELS, "h100-80gb")["reduce_dtype"] == "fp32"
    assert calc.results(state(param_dtype="fp32"), MODELS, GPUS, [])["total"] > calc.results(state(), MODELS, GPUS, [])["total"]


def _tag_boxes(placed, width_px):
    """(leader, left, right, row) of each placed label, in percent of the chart, by the layout's own text width."""
    return [(leader, left, left + 100 * len(text) * calc.TAGS["char_px"] / width_px, row)
            for leader, left, row, text in placed]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=10**11), min_size=1, max_size=9), st.sampled_from([248, 640]))
def test_direct_labels_never_overlap_a_label_or_a_leader(sizes, width_px):
    """The calculator's direct labels (issue #18: a labelled bar): in each layout no two labels in a row overlap,
    no leader line crosses a label on its way to a lower row, every label stays inside the chart, and each text
    appears once."""
    names = ["Weights", "Optimizer", "Gradients", "Optimizer", "Activations", "Comm buffers", "KV cache",
             "Overhead", "Activations"]
    groups, at = [], 0
    for name, size in zip(names, sizes):
        groups.append((name, at, size))
        at += size
    scale = max(at, 1) * 1.15
    placed = calc.tag_layout(groups, scale, width_px)
    boxes = _tag_boxes(placed, width_px)
    assert len({text for *_, text in placed}) == len(placed)
    assert all(0 <= left and right <= 100 + 1e-9 and row < calc.TAGS["rows"] for _, left, right, row in boxes)
    for i, (leader, left, right, row) in enumerate(boxes):
        for j, (other_leader, other_left, other_right, other_row) in enumerate(boxes):
            if i != j and row == other_row:
                assert right <= other_left or other_right <= left
            if other_row < row:
                assert not other_left < leader < other_right
    # Every group that holds bytes and whose name is not yet shown gets a label when there is room: one group alone.
    assert calc.tag_layout([("Weights", 0, 10)], 11.5, width_px) == [(100 * 6 / width_px, 100 * 6 / width_px, 0,
                                                                      "Weights")]


def test_the_default_bar_labels_its_groups():
    """The calculator's starting run (Llama 3 8B, FSDP over 8 GPUs) names its weights, gradients, optimizer states,
    activations and comm buffers directly under the bar in the wide layout."""
    result = calc.results(state(), MODELS, GPUS, ["rtx-4090", "a100-80gb", "h200"])
    wide = {tag["text"] for tag in result["chart"]["tags"] if tag["layout"] == "wide"}
    assert wide == {"Weights", "Gradients", "Optimizer", "Activations", "Comm buffers"}


def test_the_page_sends_the_options_the_stylesheet_tests():
    """Issue 14 (page weight): a select sends its chosen option and those whose words only the page has; the script
    adds the rest. Without JavaScript, widgets.css hides a group while an option is *not* chosen
    (`option[value=custom]:not(:checked)`), so each option it names that way must be sent whatever is chosen, or the
    group would show on a page read without the script."""
    import re
    css = (ROOT / "static" / "widgets.css").read_text(encoding="utf-8")
    tested = re.findall(r'\[name=(\w+)\] option\[value="?([\w-]+)"?\]:not\(:checked\)', css)
    assert ("model", "custom") in tested and ("sharding", "3") in tested
    groups = calc.form_groups(GPUS, MODELS)
    values = {c.key: [v for v, _ in c.choices] for _, _, controls in groups for c in controls}
    for key, wanted in tested:
        for chosen in values[key]:
            sent = calc.page_choices(groups, state(**{key: chosen}), MODELS, GPUS)
            assert wanted in dict(sent[key]), (key, chosen, wanted)


def test_a_select_sends_its_choice_and_the_words_only_the_page_has():
    """The chosen option is always sent; a catalog model or GPU, and an option that reads as its value, are left to
    the script (its data names them); the others keep their words in the page, in the form's order."""
    groups = calc.form_groups(GPUS, MODELS)
    sent = calc.page_choices(groups, state(gpu="t4", optimizer="lion"), MODELS, GPUS)
    assert sent["gpu"] == (("t4", "T4 16GB"),) and sent["optimizer"] == (("lion", "lion"),)
    assert sent["model"] == (("llama-3-8b", "Llama 3 8B"), ("custom", "Custom architecture"))
    assert sent["param_dtype"] == (("policy", "the policy's own"),)
    choices = {c.key: c.choices for _, _, controls in groups for c in controls}
    assert sent["checkpoint_save"] == choices["checkpoint_save"]  # "none" is chosen; the others have their own words
    assert sent["precision"] == (("bf16-mixed", "bf16-mixed"),)


class FormMarkup(HTMLParser):
    """The named controls of a rendered calculator form: each one's input (tag, type, attributes, the data-show of
    the nearest element that has one), in order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.shows: list[tuple[str, str | None]] = []  # (tag, its data-show) of each open element that can hold others
        self.controls: list[dict] = []
        self.select: dict | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {key: value or "" for key, value in attrs}
        show = a.get("data-show", next((s for _, s in reversed(self.shows) if s is not None), None))
        if tag in ("input", "select"):
            self.controls.append({"tag": tag, "show": show, "options": [], **a})
            self.select = self.controls[-1] if tag == "select" else None
        elif tag == "option" and self.select is not None:
            self.select["options"].append(a)
        elif tag in ("div", "fieldset", "form"):
            self.shows.append((tag, a.get("data-show")))

    def handle_endtag(self, tag: str) -> None:
        if tag in ("div", "fieldset", "form"):
            self.shows.pop()


def test_the_form_markup_holds_what_the_script_reads_from_it():
    """Issue 14 (page weight): the script reads each control's type, default, link values, mode and custom field from
    the form's own markup (30-calculator.js, the table after `form`); the data sends only the rest
    (calc.control_table). Read here the same way from the rendered form, they are Python's tables."""
    from builder.render import make_templates

    context = make_context()
    parser = FormMarkup()
    parser.feed(make_templates(Path("templates")).get_template("partials/widget-calculator.html").render(
        state=context, widget_id="calc", legacy_id="", renamed="", widget=None))
    table = context["data"]["controls"]
    modes = [c["value"] for c in parser.controls if c.get("name") == "mode"]
    types, defaults, keys, mode_only, arch = {}, {}, {}, {}, {}
    for c in parser.controls:
        k, kind, row = c["name"], c.get("type", "select"), table.get(c["name"], {})
        whole = c.get("step") == "1"
        types[k] = ("count" if whole else "number") if kind == "number" else "box" if kind == "checkbox" else "choice"
        if kind == "radio":
            keys.setdefault(k, ["choice"]).append(c["value"])
            if "checked" in c:
                defaults[k] = c["value"]
        elif kind == "checkbox":
            keys[k], defaults[k] = ["choice", "0", "1"], "1" if "checked" in c else "0"
        elif kind == "number":
            keys[k] = ["whole", int(c["min"]), int(c["max"])] if whole else ["fraction", c["min"], c["max"]]
            defaults[k] = c["value"]
        else:
            keys[k] = ["choice", *row["values"]]
            defaults[k] = next(o["value"] for o in c["options"] if "selected" in o)
        if c["show"] in modes:
            mode_only[k] = c["show"]
        if c["show"] == calc.CUSTOM:
            arch[k] = row.get("inputs", [k])
    assert types == calc.CONTROL_TYPES and defaults == context["defaults"] and mode_only == calc.MODE_ONLY
    assert keys == calc.link_keys(GPUS, MODELS)
    assert {k: table.get(k, {}).get("plain", defaults[k]) for k in mode_only} == {k: calc.PLAIN_STATE[k] for k in mode_only}
    assert arch == {c.key: list(calc.ARCH_INPUTS.get(c.key, (c.key,))) for c in calc.ARCH_CONTROLS}
    # A row says only what the markup cannot: a select's values, a plain value not the default, a field's inputs.
    assert all(row for row in table.values()) and {k for k, row in table.items() if "plain" in row} == {
        k for k in calc.MODE_ONLY if calc.PLAIN_STATE[k] != context["defaults"][k]}
    # Each catalog model's custom fields: its shape inputs (each field's first input), unless the data says otherwise.
    data = context["data"]["models"]
    for key, arch_model in MODELS.items():
        shown = {k: data[key].get("form", {}).get(k, str(data[key][inputs[0]])) for k, inputs in arch.items()}
        assert shown == calc.arch_state(arch_model), key


def test_the_forms_mode_only_controls_agree_with_the_option_tables_runs():
    """The option table says which runs read an option (builder.model.options, Option.runs; the command line and
    front matter refuse one given for a run that does not read it); the form hides the other mode's controls
    instead (MODE_ONLY, effective_state), which keeps both modes' values in links and presets. Every control of an
    option only training reads is hidden when serving (shown in training, or with a ZeRO or FSDP setting that serving
    resets), and every control of an option only serving reads is shown when serving only."""
    from builder.model.options import OPTIONS, SERVE, TRAIN

    shown = {c.key: c.show for _, _, controls in calc.form_groups(GPUS, MODELS) for c in controls}
    hidden_in_serving = {"train", calc.ZERO3_SHOWN, calc.BUCKETS_SHOWN, calc.DDP_SHOWN, calc.FSDP_SHOWN}
    checked = 0
    for option in OPTIONS:
        if option.url not in shown:
            continue
        if option.runs == (TRAIN,):
            assert shown[option.url] in hidden_in_serving, option.name
            checked += 1
        elif TRAIN not in option.runs:
            assert shown[option.url] == SERVE, option.name
            checked += 1
    assert checked >= 30
