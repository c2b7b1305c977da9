"""Every part the model can emit has a reader-facing name (builder.model.partnames, the one registry)."""

from __future__ import annotations

import gc
import itertools

import pytest

import builder.model.engine_sglang  # noqa: F401  (its rule set's parts are enumerated below)
from builder.catalog import default_gpus, default_models
from builder.model import Config, estimate, validate_config
from builder.model.engines import EngineSettings, engine_report
from builder.model.partnames import PART_NAMES, is_registered, reader_name
from builder.model.partrules import PartRule
from builder.model.peak import phases
from builder.model.teaching import budget_allocator

MODELS = default_models()
H100 = default_gpus()["h100-80gb"]


def training_configs():
    """Training runs over the knobs that add, remove or rename parts."""
    dense, moe = MODELS["llama-3-8b"], next(m for m in MODELS.values() if m.is_moe)
    tied = next(m for m in MODELS.values() if m.tied_embeddings and not m.is_moe)
    for arch, optimizer, recompute, loss in itertools.product(
            (dense, tied), ("adamw", "adam8bit", "sgd", "sgd-momentum", "adafactor", "lion"),
            ("none", "selective", "full"), ("eager", "compiled", "chunked", "fused-linear")):
        yield Config(model=arch, optimizer=optimizer, recompute=recompute, loss=loss, micro_batch=2, seq_len=256)
    for impl, precision in itertools.product(("for-loop", "foreach", "fused", "in-backward"),
                                             ("bf16-mixed", "fp32", "bf16", "megatron-bf16", "fp16-mixed", "amp-bf16")):
        yield Config(model=dense, optimizer_impl=impl, precision=precision, seq_len=256,
                     grad_accum=1 if impl == "in-backward" else 4)
    for shard in ({"zero": 1}, {"zero": 2}, {"zero": 3}, {"fsdp": "FULL_SHARD"}, {"fsdp": "HYBRID_SHARD"}):
        for offload in ("none", "optimizer", "params", "both"):
            yield Config(model=dense, dp=8, offload=offload, seq_len=256, **shard)
    yield Config(model=dense, tp=2, pp=4, grad_accum=8, sequence_parallel=True, seq_len=256)
    yield Config(model=dense, pp=2, pp_schedule="interleaved", pp_virtual_stages=2, grad_accum=4, seq_len=256)
    yield Config(model=moe, ep=2, dp=2, seq_len=256, dropout=True, attention="eager")
    yield Config(model=dense, lora_rank=16, seq_len=256)
    yield Config(model=dense, lora_rank=16, qlora=True, seq_len=256)
    yield Config(model=dense, offload_activations=True, seq_len=256)
    yield Config(model=dense, offload_activations=True, recompute="full", seq_len=256)
    yield Config(model=dense, implementation="megatron", dropout=True, seq_len=256)
    yield Config(model=dense, activation_formula="korthikanti", seq_len=256)
    yield Config(model=dense, overhead_bytes=2**30, overhead_fraction=0.1, seq_len=256)
    yield Config(model=dense, allocator_reserve=0.05, cuda_context_bytes=2**29, seq_len=256)
    yield Config(model=dense, grad_accum=4, grad_accum_dtype="fp32", precision="bf16", seq_len=256)
    yield Config(params=7_000_000_000)
    # The low-precision recipes: a quantised copy beside the weights, or the weights stored quantised.
    for precision in ("te-fp8", "te-fp8-params", "te-mxfp8", "te-nvfp4"):
        yield Config(model=dense, precision=precision, seq_len=256)
        yield Config(model=moe, precision=precision, fsdp="FULL_SHARD", dp=8, seq_len=256)


def emitted_parts():
    """(where, key) of every part the estimates, steps' moments and engines of many configurations emit."""
    configs = list(training_configs())
    valid = []
    for config in configs:
        try:
            validate_config(config)
        except ValueError:  # a combination the model refuses (e.g. offloading parameters under ZeRO-1)
            continue
        valid.append(config)
    assert len(valid) >= 0.9 * len(configs) - 10
    for config in valid:
        breakdown = estimate(config)
        for part in breakdown.parts + breakdown.host_parts:
            yield config, part.name
        if config.model is not None:
            for phase in phases(config, breakdown):
                for part in phase.parts:
                    yield (config, phase.name), part.name
    for arch in (MODELS["llama-3-8b"], next(m for m in MODELS.values() if m.is_moe)):
        for kv in (None, "fp8"):
            config = Config(model=arch, mode="serve", kv_dtype=kv, batch=4, context=2048)
            for part in estimate(config).parts:
                yield config, part.name
            report = engine_report(config, EngineSettings(), H100.usable_bytes, "h100-80gb")
            for part in report.parts:
                yield ("vllm", config), part.name if hasattr(part, "name") else part[0]
    for part in budget_allocator(7_000_000_000, 1, 2048).parts:
        yield "budget", part.name


def test_every_part_of_many_configurations_has_a_reader_facing_name():
    seen = set()
    missing = set()
    for where, key in emitted_parts():
        seen.add(key)
        if not is_registered(key):
            missing.add((key, repr(where)[:200]))
    assert not missing, f"parts without a name in builder.model.partnames.PART_NAMES: {sorted(missing)}"
    # The enumeration is wide: it meets at least these keys, moved-to-host ones and moments included.
    assert {"optimizer/adam_m", "optimizer/adafactor_factors", "activations/checkpoint", "host/activations/offloaded",
            "comm/gathered_params", "host/optimizer/adam_m", "gradients/made_so_far", "kv_cache",
            "activations/loss_grads", "weights/quantisation_constants"} <= seen, sorted(seen)


def test_every_part_rule_is_registered_and_a_missing_one_is_refused():
    rules = {o.name for o in gc.get_objects() if type(o) is PartRule}  # type(): isinstance would touch every module
    assert len(rules) >= 45
    assert all(is_registered(name) for name in rules)
    with pytest.raises(ValueError, match="no reader-facing name"):
        PartRule("optimizer/not_a_part", 1, "", "", "")


def test_names_are_readers_words():
    assert reader_name("optimizer/adam_m") == "Adam first moment"
    assert reader_name("host/optimizer/adam_v") == "Adam second moment (host memory)"
    assert reader_name("comm/gathered_params") == "Gathered parameters"
    for key, name in PART_NAMES.items():
        assert "/" not in name and "_" not in name and name[0].isupper(), (key, name)
    assert len(set(PART_NAMES.values())) >= len(PART_NAMES) - 2  # 'Master weights': bucket and optimizer part
