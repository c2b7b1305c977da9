"""DeepSpeed ZeRO-3's gathered parameters (builder.model.zero3), pinned to DeepSpeed's own numbers.

Sources (DeepSpeed commit edaa722): deepspeed/runtime/zero/config.py (the stage3_* defaults),
deepspeed/runtime/zero/stage3.py estimate_zero3_model_states_mem_needs (largest_layer_memory = 4 x
largest_layer_params; case 1: + int(18 x total_params / total_gpus)), docs/code-docs/source/memory.rst (its printed
tables), partitioned_param_coordinator.py (prefetch and reuse). Architectures: the published config.json of each
catalog model (content/models.toml, counts pinned in tests/test_architecture.py).
"""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from builder.catalog import default_models
from builder.cli import main
from builder.model import Config, estimate, param_count
from builder.model.assumed import assumed_shape
from builder.model.inputs import rule_inputs, stages
from builder.model.peak import phases
from builder.model.states import COMM
from builder.model.zero3 import DEFAULTS

MODELS = default_models()
LLAMA3_8B_LARGEST = 128256 * 4096  # vocab x hidden: the embedding (and the untied lm_head), Llama 3 8B config.json
LLAMA3_70B_LARGEST = 128256 * 8192


def comm(config: Config) -> dict[str, int]:
    """The comm parts of the run's only stage, by name."""
    inputs = rule_inputs(config.model, config, stages(config.model, config)[0])
    return {part.name: part.bytes for part in COMM.evaluate(inputs)}


def gathered(config: Config) -> int:
    """What DeepSpeed keeps gathered at the forward/backward turn (both parts)."""
    parts = comm(config)
    return parts.get("comm/gathered_params", 0) + parts.get("comm/reused_params", 0)


def test_defaults_are_deepspeeds():
    """config.py (DeepSpeedZeroConfig): prefetch_bucket_size pp_int(5e7), param_persistence_threshold pp_int(1e5),
    max_live_parameters pp_int(1e9), max_reuse_distance pp_int(1e9)."""
    assert DEFAULTS == {"stage3_prefetch_bucket_size": 50_000_000, "stage3_param_persistence_threshold": 100_000,
                        "stage3_max_live_parameters": 1_000_000_000, "stage3_max_reuse_distance": 1_000_000_000}
    plain = Config(model=MODELS["llama-3-8b"], zero=3, dp=8)
    assert gathered(plain) == gathered(plain.with_changes(**DEFAULTS))


def deepspeed_case1(total_params: float, largest_layer_params: float, total_gpus: int) -> int:
    """stage3.py estimate_zero3_model_states_mem_needs without offload: largest_layer_memory + int(18 x params /
    gpus), as DeepSpeed writes it."""
    return int(4 * largest_layer_params + int(18 * total_params / total_gpus))


def test_the_estimator_formula_prints_memory_rst_tables():
    """memory.rst: estimate_zero3_model_states_mem_needs_all_cold(total_params=2851e6, largest_layer_params=32e6,
    num_gpus_per_node=8) prints 6.09GB per GPU without offload (GiB: the print divides by 2**30) and 0.12GB with
    both offloaded (largest_layer_memory alone); its t5-large discussion (737.67M params, 32.90M largest layer,
    4 GPUs) prints 125MB and 3291MB (>> 20)."""
    assert f"{deepspeed_case1(2851e6, 32e6, 8) / 2**30:6.2f}" == "  6.09"
    assert f"{4 * 32e6 / 2**30:6.2f}" == "  0.12"
    t5_large, largest = 737_668_096, 32128 * 1024  # t5-large: its parameters; vocab 32128 x d_model 1024
    assert (4 * largest) >> 20 == 125
    assert deepspeed_case1(t5_large, largest, 4) >> 20 == 3291


def test_model_states_are_the_estimators_18_bytes():
    """DeepSpeed's case 1 counts 18 bytes per parameter over the GPUs (fp16 weights 2, fp32 gradients 4, fp32 master
    copy and Adam's moments 12): ZeRO-3 with an fp32 grad_accum_dtype keeps its gradient partitions in fp32, so the
    model states of memory.rst's 2851M model on 8 GPUs are int(18 x 2851e6 / 8), its 6.09 GiB less the largest layer."""
    run = estimate(Config(params=2_851_000_000, zero=3, dp=8, optimizer="adam", precision="fp16-mixed",
                          grad_accum_dtype="fp32"))
    states = sum(run.get(bucket) for bucket in ("weights", "gradients", "optimizer"))
    assert states == deepspeed_case1(2851e6, 0, 8) == 6_414_750_000


def test_largest_layer_term_is_the_estimators():
    """With nothing prefetched, kept for reuse or persistent, ZeRO-3 gathers the module being computed: at the turn
    the output layer, DeepSpeed's largest_layer_params (model_to_params: the largest module's own parameters; for
    Llama 3 8B the 128256 x 4096 lm_head), in 2 bytes: half of largest_layer_memory, whose other half is the
    gradients."""
    run = Config(model=MODELS["llama-3-8b"], zero=3, dp=8, stage3_prefetch_bucket_size=0,
                 stage3_param_persistence_threshold=0, stage3_max_reuse_distance=0)
    assert comm(run)["comm/gathered_params"] == 4 * LLAMA3_8B_LARGEST // 2
    assert "comm/reused_params" not in comm(run)


def test_default_llama_3_8b_gathers_the_head_and_a_prefetch_bucket():
    """Defaults: the lm_head (525M elements) is under stage3_max_live_parameters (1e9), so a 5e7 prefetch bucket joins
    it; the 65 RMSNorm weights (2 per layer x 32 + the final one, 4096 elements each) are under the persistence
    threshold (1e5) and never partitioned; the last block's reuse lies 2 x 525M elements ahead, past 1e9: released."""
    run = Config(model=MODELS["llama-3-8b"], zero=3, dp=8)
    assert comm(run)["comm/gathered_params"] == 2 * (LLAMA3_8B_LARGEST + 50_000_000 + 65 * 4096)
    assert "comm/reused_params" not in comm(run)


def test_a_model_under_half_the_reuse_distance_stays_gathered():
    """GPT-2 (124,439,808 parameters, published): every module is used again in backward within 1e9 elements, so at
    the turn all of it is gathered, in bf16."""
    run = Config(model=MODELS["gpt2"], zero=3, dp=8)
    assert gathered(run) == 2 * 124_439_808
    assert comm(run)["comm/reused_params"] > 0


def test_fsdp_keeps_its_rule():
    """FSDP FULL_SHARD: the block computed and the root unit, and one block's all-gather buffer (PyTorch 2.13's FSDP2,
    builder.model.states' FSDP2_GATHERED), not ZeRO-3's modules."""
    parts = comm(Config(model=MODELS["llama-3-8b"], fsdp="FULL_SHARD", dp=8))
    root = 2 * LLAMA3_8B_LARGEST + 4096
    block = (param_count(MODELS["llama-3-8b"]) - root) // 32
    assert parts["comm/gathered_params"] == 2 * (block + root) and parts["comm/all_gather_output"] == 2 * block
    assert "comm/reused_params" not in parts


def test_a_bare_count_is_shaped_like_the_nearest_catalog_model(capsys):
    """--params 70e9 --zero 3 --dp 64: shaped like Llama 3 70B (70.55B, the nearest), whose lm_head (128256 x 8192)
    is past stage3_max_live_parameters, so nothing is prefetched beside it; its 161 RMSNorm weights (8192 each) stay
    whole. The note says the shape is assumed."""
    assert main(["estimate", "--params", "70e9", "--zero", "3", "--dp", "64", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["parts"]["comm/gathered_params"] == 2 * (LLAMA3_70B_LARGEST + 161 * 8192)
    run = estimate(Config(params=70 * 10**9, zero=3, dp=64, shaped_like=assumed_shape(MODELS, 70 * 10**9)))
    assert run.part("comm/gathered_params").simplification.startswith(
        "assumed: shaped like Llama 3 70B, the catalog model nearest in size")
    assert main(["estimate", "--params", "70e9", "--zero", "3", "--dp", "64", "--shaped-like", "llama-3-8b",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["parts"]["comm/gathered_params"] == 2 * (LLAMA3_8B_LARGEST + 50_000_000 + 65 * 4096)


def test_options_are_refused_without_zero_3(capsys):
    """A stage3_* option means nothing to ZeRO-2 or FSDP: one line naming both, exit 2."""
    assert main(["estimate", "--model", "llama-3-8b", "--zero", "2", "--dp", "8",
                 "--stage3-max-live-parameters", "1e8"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--stage3-max-live-parameters" in err and "zero 2" in err
    assert main(["estimate", "--model", "llama-3-8b", "--fsdp", "FULL_SHARD", "--dp", "8",
                 "--stage3-prefetch-bucket-size", "0"]) == 2
    assert "fsdp FULL_SHARD" in capsys.readouterr().err
    assert main(["estimate", "--model", "llama-3-8b", "--shaped-like", "gpt2"]) == 2
    assert "--shaped-like" in capsys.readouterr().err


def test_kept_parameters_are_live_around_the_turn_only():
    """The reused modules are gathered from their forward to their backward: in the phases from the last layer's
    forward to its backward, not when the backward reaches the first layer."""
    run = Config(model=MODELS["llama-3.2-1b"], zero=3, dp=8, seq_len=1024)
    live = {p.name: {part.name for part in p.parts} for p in phases(run)}
    assert "comm/reused_params" in live["backward_start"] and "comm/reused_params" in live["forward"]
    assert "comm/reused_params" not in live["backward_end"]
    assert "comm/gathered_params" in live["backward_end"]


DENSE = [m for m in MODELS.values() if not m.is_moe and m.layers <= 80]
LIMITS = st.integers(0, 3 * 10**9)
KNOBS = tuple(DEFAULTS)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(DENSE), LIMITS, LIMITS, st.integers(0, 10**7), LIMITS)
def test_gathered_is_at_most_the_whole_model(arch, live, bucket, persistence, reuse):
    run = Config(model=arch, zero=3, dp=8, stage3_max_live_parameters=live, stage3_prefetch_bucket_size=bucket,
                 stage3_param_persistence_threshold=persistence, stage3_max_reuse_distance=reuse)
    assert 0 < gathered(run) <= 2 * param_count(arch)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(DENSE), st.sampled_from(KNOBS), st.integers(0, 2 * 10**9), st.integers(1, 2 * 10**9),
       st.sampled_from([None, 0, 10**5, 10**9]))
def test_gathered_grows_with_each_limit(arch, knob, value, more, others):
    base = {} if others is None else {k: others for k in KNOBS}
    low = Config(model=arch, zero=3, dp=8, **{**base, knob: value})
    high = low.with_changes(**{knob: value + more})
    assert gathered(high) >= gathered(low)


def test_rule_inputs_of_an_assumed_shape_name_its_own_display_name():
    """rule_inputs keeps the last few stages' inputs; two assumed shapes equal but for their display name (an
    Architecture's equality leaves `extra` out) still name their own model in the note (Llama 3 70B, the catalog's)."""
    from dataclasses import replace

    llama = assumed_shape(MODELS, 70 * 10**9)
    renamed = replace(llama, extra={**llama.extra, "display": "Renamed 70B"})
    assert renamed == llama
    for shape, name in ((llama, "Llama 3 70B"), (renamed, "Renamed 70B"), (llama, "Llama 3 70B")):
        config = Config(params=70 * 10**9, zero=3, dp=64, shaped_like=shape)
        inputs = rule_inputs(None, config, stages(None, config)[0])
        assert inputs["assumed_model"] == name
        inputs["assumed_model"] = "changed by a caller"  # a fresh dict each call: the next call is unaffected
