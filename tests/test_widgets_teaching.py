"""The two teaching widgets' server-side state (builder/widgets/bytes_per_param.py, memory_budget.py).

Published numbers come from the seeds: seed 000 (3.7B parameters x 18 B = 62 GiB) and seed 001
(7B, batch 1, sequence 2K, bf16: 52.7 GiB of 80.0 GiB, 27.3 GiB headroom).
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from builder.catalog import load_gpus, load_models
from builder.model import Config
from builder.model.architecture import param_count
from builder.model.peak import assess
from builder.model.teaching import ADAM_SEGMENTS, bytes_per_param, budget_allocator
from builder.model.units import GiB
from builder.widgets import bytes_per_param as bpp
from builder.widgets import full_model
from builder.widgets import memory_budget as mb

CONTENT = Path(__file__).resolve().parent.parent / "content"


@pytest.fixture(scope="module")
def catalogs():
    """The shipped model and GPU catalogs, and one preset."""
    from builder.content import Preset

    preset = Preset("p", {"model": "llama-2-7b", "micro_batch": 2, "seq_len": 4096, "precision": "bf16-mixed"},
                    {}, "presets.toml", 1)
    return {"model": load_models(CONTENT / "models.toml"), "gpu": load_gpus(CONTENT / "gpus.toml"), "preset": {"p": preset}}


@pytest.mark.parametrize("params, text", [
    (124_439_808, "124M"), (3_700_000_000, "3.7B"), (6_738_415_616, "6.74B"), (70_000_000_000, "70.0B"),
    (7_000_000_000, "7.0B"), (13_015_864_320, "13.0B"), (1_125_000_000, "1.13B"), (100_000_000, "100M"),
    (999, "999"), (1_500, "1.5K"), (405_000_000_000, "405B"), (9_996_000_000, "10.0B"),
])
def test_format_params_three_significant_digits_half_up(params, text):
    """Parameter counts print with three significant digits, exact ties rounded up (as the script does)."""
    assert bpp.format_params(params) == text


def test_params_words_is_the_slider_value_text():
    """aria-valuetext names the unit in words, as issue 4 asks ('7.0 billion parameters')."""
    assert bpp.params_words(7 * 10**9) == "7.0 billion parameters"
    assert bpp.params_words(124_439_808) == "124 million parameters"


def test_seed_000_example_total(catalogs):
    """Seed 000's figure: 3.7B parameters x 18 B = 62 GiB."""
    state = bpp.context({"params": "3.7B"}, catalogs)
    assert state["texts"]["ftot"] == "Total = 3.7B × 18 B = 62.0 GiB"
    assert state["texts"]["f1"] == "Master = 3.7B × 4 B = 13.8 GiB"


def test_default_state_uses_the_teaching_model(catalogs):
    """Readouts are teaching.bytes_per_param's parts, per GPU under the chosen ZeRO stage."""
    state = bpp.context({"model": "llama-3-8b", "zero": 2, "dp": 4}, catalogs)
    params = state["params"]
    full = bytes_per_param(params, ADAM_SEGMENTS)
    per = bytes_per_param(params, ADAM_SEGMENTS, "stage2", 4)
    assert state["bytes"] == ",".join(str(p.bytes) for p in full.parts) + ";" + ",".join(str(p.bytes) for p in per.parts)
    assert state["texts"]["c4"] == "Gradients / 4 (sharded)" and state["texts"]["c0"] == "Weights (full)"
    assert state["texts"]["per"] == f"{per.total / GiB:.1f} GiB"


def test_data_carries_exact_fractions_and_shard_stages(catalogs):
    """The script gets bytes per parameter as num/den and the stage that shards each segment (4: never)."""
    data = bpp.context({}, catalogs)["data"]
    assert [(s["num"], s["den"], s["shard"]) for s in data["segments"]] == [
        (2, 1, 3), (4, 1, 1), (4, 1, 1), (4, 1, 1), (2, 1, 2), (2, 1, 4)]
    # Issue 19: a chip names the real model and its count (Touvron et al. 2023, Table 1 sizes; GPT-2 small 124M).
    assert [p["label"] for p in data["presets"]] == ["GPT-2 · 124M", "Llama 2 7B · 6.74B", "Llama 2 13B · 13.0B",
                                                     "Llama 2 70B · 69.0B"]
    assert data["presets"][0]["params"] == 124_439_808  # from the model catalog


def test_custom_segments_presets_bounds_and_gpus(catalogs):
    """Author options: INT4 weights + FP16 KV cache (seed 000's example), own presets, bounds and GPUs."""
    state = bpp.context({"segments": "INT4 weights:0.5:3,FP16 KV cache:1.5:3", "presets": "7B:7B,Llama 3 70B:llama-3-70b",
                         "min_params": "1B", "max_params": "100B", "gpus": ["rtx-4090"], "params": "7B",
                         "zero": 3, "dp": 8}, catalogs)
    data = state["data"]
    assert [(s["label"], s["num"], s["den"], s["shard"]) for s in data["segments"]] == [
        ("INT4 weights", 1, 2, 3), ("FP16 KV cache", 3, 2, 3)]
    assert data["sum"] == "2" and (data["ticks"][0]["value"], data["ticks"][-1]["value"]) == (10**9, 10**11)
    assert state["texts"]["f0"] == "INT4 weights = 7.0B × 0.5 B / 8 = 0.4 GiB"
    assert state["bytes"] == "3500000000,10500000000;437500000,1312500000"
    assert data["presets"][1]["params"] == catalogs["model"]["llama-3-70b"].published_params
    assert state["notes"] == []  # no placeholder segment in a custom table


def test_activations_placeholder_is_stated(catalogs):
    """The default table's 2 B/param activations carry teaching.py's simplification, shown under the figure."""
    notes = bpp.context({}, catalogs)["notes"]
    assert [n["id"] for n in notes] == ["activations"] and "batch x sequence" in notes[0]["note"]


def test_overflow_hatching_starts_at_the_smallest_gpu_the_need_exceeds(catalogs):
    """Issue 13 section 1: the verdicts, the badge and the hatching follow the full model's need (the peak of a
    step for the nearest catalog model, Llama 3 8B for 8B), not the 18 B/param sum; the sum stays on show.
    Scale: max(sum, both needs, largest GPU) x 1.15; hatching from the smallest capacity the need exceeds.
    The state is ZeRO none on the default 8 GPUs: the verdicts and the summary use that run's need (DDP's gradient
    buckets on top of one GPU's), the first bar marks the one-GPU need, and the table gives both, named."""
    state = bpp.context({"params": "8B", "gpus": ["rtx-4090", "h200"]}, catalogs)
    arch = catalogs["model"]["llama-3-8b"]
    need = assess(Config(model=arch, seq_len=bpp.RUN_TOKENS))[1].bytes  # one GPU
    ddp = assess(Config(model=arch, dp=8, seq_len=bpp.RUN_TOKENS))[1].bytes  # the state's run
    total = 8 * 10**9 * 18
    assert total < catalogs["gpu"]["h200"].usable_bytes < need < ddp  # the sum fits an H200; the run does not
    row = state["bars"]["rows"][0]
    scale = Fraction(ddp) * Fraction(115, 100)
    assert row["over"]["x"] == f"{float(100 * catalogs['gpu']['rtx-4090'].usable_bytes / scale):.3f}"
    assert row["need"] == f"{float(100 * need / scale):.3f}"
    assert state["bars"]["rows"][1]["need"] == f"{float(100 * ddp / scale):.3f}"
    assert row["rects"][-1]["x"] == f"{float(100 * (total - 16 * 10**9) / scale):.3f}"
    assert not row["fits"]
    verdict = (f"The full model needs {ddp / GiB:.1f} GiB per GPU: exceeds GeForce RTX 4090 "
               f"24GB by {(ddp - catalogs['gpu']['rtx-4090'].usable_bytes) / GiB:.1f} GiB; "
               f"exceeds H200 SXM 141GB by {(ddp - catalogs['gpu']['h200'].usable_bytes) / GiB:.1f} GiB.")
    texts = state["texts"]
    assert texts["verdict"] == verdict and texts["sum"].endswith(verdict)
    assert (texts["need1"], texts["needn"]) == (f"{need / GiB:.1f} GiB", f"{ddp / GiB:.1f} GiB")
    assert texts["w1"] == f"no, {(ddp - catalogs['gpu']['h200'].usable_bytes) / GiB:.1f} GiB over"
    assert "no ZeRO (DDP) on 8 GPUs: needs" in texts["model"]
    assert texts["tot"] == "134.1 GiB"  # the sum, 8e9 x 18 B, still shown


def test_zero_3_need_per_gpu_is_the_models(catalogs):
    """Per GPU under ZeRO-3 on 8 GPUs the verdict is the full model's need for that run, sharded as the model
    shards it (Rajbhandari et al. 2019: 16 B/param of model states / 8), with its activations and peak."""
    state = bpp.context({"model": "llama-3-8b", "zero": 3, "dp": 8, "gpus": ["a100-80gb"]}, catalogs)
    _, needed = assess(Config(model=catalogs["model"]["llama-3-8b"], zero=3, dp=8, seq_len=bpp.RUN_TOKENS))
    assert state["texts"]["needn"] == f"{needed.bytes / GiB:.1f} GiB"
    assert state["texts"]["w0"] == f"yes, {(catalogs['gpu']['a100-80gb'].usable_bytes - needed.bytes) / GiB:.1f} GiB left"
    assert state["bars"]["rows"][1]["fits"] and not state["bars"]["rows"][0]["fits"]


@pytest.mark.parametrize("params, model", [(7 * 10**9, "mistral-7b"), (8 * 10**9, "llama-3-8b"),
                                           (124 * 10**6, "gpt2"), (500 * 10**6, "qwen2.5-0.5b"),
                                           (175 * 10**9, "mixtral-8x22b"), (400 * 10**9, "llama-3.1-405b")])
def test_nearest_catalog_model_by_ratio(catalogs, params, model):
    """The full model prices the catalog model nearest in size by ratio: 7B is 3.5% below Mistral 7B's 7.24B
    and 3.9% above Llama 2 7B's 6.74B; 175B is 1.24x above Mixtral 8x22B's 140.6B and 1.34x below Qwen3
    235B-A22B's 235.1B; 400B is 1.5% below Llama 3.1 405B's."""
    assert full_model.nearest_model(catalogs["model"], params) == model


@pytest.mark.parametrize("tokens, model", [(1024, "gpt2-xl"), (2048, "llama-3.2-1b"), (0, "gpt2-xl")])
def test_nearest_catalog_model_takes_the_sequence(catalogs, tokens, model):
    """GPT-2 XL (1.56B) has 1,024 learned positions (its config.json n_positions; transformers modeling_gpt2.py
    indexes wpe with the position ids), so from 2,048 tokens a 1.5B count is priced as Llama 3.2 1B (1.24B, ratio
    1.21), the nearest rotary model, not refused; 0 tokens (a bare count's shape) takes any model."""
    assert full_model.nearest_model(catalogs["model"], 15 * 10**8, tokens) == model


def test_memory_budget_prices_every_sequence_near_gpt2_xl(catalogs):
    """The memory budget at 1.5B and 2.0B with 2,048 and 32,768 tokens names a model that takes the sequence and
    shows its need (at 2.0B and 2K: Llama 3.2 1B at 1.24B is a ratio of 1.618, Llama 3.2 3B at 3.21B 1.606)."""
    for halves, exponent, name in ((3, 11, "Llama 3.2 1B"), (4, 11, "Llama 3.2 3B"), (4, 15, "Llama 3.2 3B")):
        state = mb.context({"params": f"{halves / 2}B", "seq_len": 2 ** exponent}, catalogs)
        assert state["texts"]["mname"] == name, (halves, exponent)
        arch = next(a for a in catalogs["model"].values() if a.extra.get("display") == name)
        _, needed = assess(Config(model=arch, micro_batch=1, seq_len=2 ** exponent))
        assert state["need"] == needed.bytes


@pytest.mark.parametrize("options, message", [
    ({"segments": "weights:2"}, "label:bytes per param:stage"),
    ({"segments": "weights:x:3"}, "not a number"),
    ({"segments": "weights:2:4"}, "stage 1, 2, 3 or never"),
    ({"precision": "fp32"}, "seed-000 table"),
    ({"zero": 4}, "zero must be 0-3"),
    ({"min_params": "10B", "max_params": "1B"}, "min_params must be below"),
    ({"params": "seven"}, "must be a whole number"),
])
def test_bad_options_raise_value_errors(catalogs, options, message):
    """A bad option is a ValueError naming the problem (the build reports it at the placement's line)."""
    with pytest.raises(ValueError, match=message):
        bpp.context(options, catalogs)


def test_memory_budget_reproduces_seed_001(catalogs):
    """Seed 001's default: 7B, batch 1, 2K, bf16 -> 52.7 GiB of 80.0 GiB, 27.3 GiB headroom."""
    state = mb.context({}, catalogs)
    texts = state["texts"]
    assert (texts["k0"], texts["k1"], texts["k2"], texts["k3"]) == ("13.0 GiB", "13.0 GiB", "26.1 GiB", "0.5 GiB")
    assert texts["tot"] == "52.7 GiB" and texts["verdict"] == "27.3 GiB headroom"
    # The verdict is the full model's: Mistral 7B (nearest to 7.0B) in bf16 mixed precision with AdamW.
    _, needed = assess(Config(model=catalogs["model"]["mistral-7b"], micro_batch=1, seq_len=2048))
    assert texts["need"] == f"{needed.bytes / GiB:.1f} GiB" and needed.bytes > 80 * GiB
    assert texts["sum"] == ("Training memory budget. 7.0B parameters, batch 1, sequence 2K, BF16. Four-bucket sum "
                            "52.7 GiB of 80.0 GiB: 27.3 GiB headroom. The full model (Mistral 7B (v0.1)) needs "
                            f"{texts['need']}: exceeds 80.0 GiB budget by {(needed.bytes - 80 * GiB) / GiB:.1f} GiB.")
    assert not state["bar"]["fits"]
    assert state["bytes"] == ",".join(str(p.bytes) for p in budget_allocator(7 * 10**9, 1, 2048, "bf16").parts)


def test_memory_budget_overflow_words_and_options(catalogs):
    """'exceeds by' when over; a preset, a GPU budget and single-total mode."""
    state = mb.context({"preset": "p", "gpu": "h100-80gb", "breakdown": False, "params": "30B"}, catalogs)
    assert state["start"] == {"params_half_billions": 60, "micro_batch": 2, "seq_len_exponent": 12, "precision": "bf16"}
    total = sum(p.bytes for p in budget_allocator(30 * 10**9, 2, 4096, "bf16").parts)
    capacity = catalogs["gpu"]["h100-80gb"].usable_bytes
    assert state["texts"]["verdict"] == f"exceeds by {(total - capacity) / GiB:.1f} GiB"
    _, needed = assess(Config(model=catalogs["model"]["qwen3-30b-a3b"], micro_batch=2, seq_len=4096))
    assert state["texts"]["mname"] == "Qwen3 30B-A3B" and state["need"] == needed.bytes  # nearest to 30B by ratio
    scale = max(total, needed.bytes)
    assert len(state["bar"]["rects"]) == 1 and state["bar"]["line"] == f"{100 * capacity / scale:.3f}"
    assert state["bar"]["fits"] == (needed.bytes <= capacity)
    assert state["capacity_name"] == "H100 SXM 80GB"


def test_memory_budget_snaps_model_size_to_half_billions(catalogs):
    """The slider moves in 0.5B steps; a catalog model starts at the nearest step."""
    assert mb.context({"model": "llama-3-8b"}, catalogs)["start"]["params_half_billions"] == 16
    assert mb.context({"budget": "24GiB"}, catalogs)["data"]["capacity"] == 24 * GiB


@pytest.mark.parametrize("options, message", [
    ({"seq_len": 3000}, "power of two"), ({"micro_batch": 65}, "micro_batch"), ({"precision": "int4"}, "precision"),
])
def test_memory_budget_bad_options(catalogs, options, message):
    """Values outside the seed's controls are errors naming the option."""
    with pytest.raises(ValueError, match=message):
        mb.context(options, catalogs)


def test_a_bad_widget_option_is_a_content_error_with_its_line(tmp_path):
    """The build reports a widget's own option errors as path:line, like other content errors."""
    from builder.build import SitePaths, build_site
    from builder.content import BuildFailed

    content = tmp_path / "content"
    content.mkdir()
    for name in ("site.toml", "models.toml", "gpus.toml"):
        (content / name).write_text((CONTENT / name).read_text(encoding="utf-8"), encoding="utf-8")
    (content / "index.md").write_text("---\ntitle: T\nslug: index\norder: 1\nsummary: S\n---\nText.\n\n"
                                      "{{< widget bytes-per-param segments=weights:2 >}}\n", encoding="utf-8")
    root = Path(__file__).resolve().parent.parent
    with pytest.raises(BuildFailed) as failure:
        build_site(SitePaths(content, root / "templates", root / "static", tmp_path / "site"), quiet=True)
    assert any(e.line == 9 and "label:bytes per param:stage" in e.message for e in failure.value.errors)


def test_memory_budget_slider_bounds_are_author_options(catalogs):
    """Seed 001's modelSizeBnMin/Max and batchSizeMin/Max props (issue 19): bounds come from the placement."""
    state = mb.context({"min_params": "1B", "max_params": "70B", "max_batch": 16, "min_seq_len": 256,
                        "max_seq_len": 8192, "params": "200B"}, catalogs)
    assert state["bounds"] == {"params_half_billions": (2, 140), "micro_batch": (1, 16), "seq_len_exponent": (8, 13)}
    assert state["start"]["params_half_billions"] == 140  # a start outside the bounds snaps to the nearest end


@pytest.mark.parametrize("options, message", [
    ({"min_params": "0.7B"}, "multiples of 0.5B"),
    ({"min_params": "70B", "max_params": "7B"}, "min below max"),
    ({"max_batch": 1}, "max_batch must be 2-65536"),
    ({"max_seq_len": 3000}, "powers of two"),
    ({"max_batch": 8, "micro_batch": 9}, "micro_batch must be 1-8"),
])
def test_memory_budget_bad_bounds_are_errors(catalogs, options, message):
    """A bad bound is a ValueError naming the option (the build reports it at the placement's line)."""
    with pytest.raises(ValueError, match=message):
        mb.context(options, catalogs)


def test_slider_positions_are_round_counts(catalogs):
    """Issue 19: the parameter slider reaches round values (1, 1.2, 1.5, 2, 2.5, 3, 4, ... 9 per decade), and a
    catalog model starts at the nearest position by ratio (Llama 3 8B's 8.03B -> 8B)."""
    state = bpp.context({"model": "llama-3-8b"}, catalogs)
    values = [t["value"] for t in state["data"]["ticks"]]
    assert values[:8] == [10**8, 12 * 10**7, 15 * 10**7, 2 * 10**8, 25 * 10**7, 3 * 10**8, 4 * 10**8, 5 * 10**8]
    assert values[-1] == 70 * 10**9 and 7 * 10**9 in values and len(values) == 34
    assert values[state["step"]] == 8 * 10**9



def test_gpt_oss_stands_in_for_no_bare_count():
    """gpt-oss trains only with eager attention under transformers (GptOssPreTrainedModel._supports_sdpa is False,
    transformers 5.23), so a bare count priced with the defaults (SDPA, any framework) takes the nearest other model:
    21e9 is nearest gpt-oss-20b's 20,914,757,184 (its model card's count) by ratio, yet is priced as another model."""
    from builder.catalog import default_models
    models = default_models()
    ratio = {key: max(param_count(arch) / 21e9, 21e9 / param_count(arch)) for key, arch in models.items()}
    assert min(ratio, key=ratio.get) == "gpt-oss-20b"
    picked = full_model.nearest_model(models, 21 * 10**9)
    others = {key: arch for key, arch in models.items() if arch.family != "gpt_oss"}
    assert models[picked].family != "gpt_oss" and picked == full_model.nearest_model(others, 21 * 10**9)
