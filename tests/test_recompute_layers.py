"""Partial full recomputation (--recompute full --recompute-num-layers K): Megatron-LM's block method checkpoints
the first K layers of each pipeline stage (megatron/core/transformer/transformer_block.py, _checkpointed_forward),
and the other layers keep everything they save.

Pinned to Korthikanti et al. 2022, Table 2: a checkpointed GPT layer keeps its input, 2sbh bytes, and a layer
without recomputation sbh(34 + 5as/h); with K of L layers checkpointed the layers keep
K x 2sbh + (L - K) x sbh(34 + 5as/h).
"""

from __future__ import annotations

import pytest

from builder.catalog import default_models
from builder.model import Config
from builder.model.activations import LAYER_GROUPS
from builder.model.peak import assess
from tests.test_activations import GPT3
from tests.test_cli import run

MODELS = default_models()


def kept_by_layers(breakdown) -> int:
    """The GPU's saved bytes of the transformer layers: their groups and their checkpoints."""
    names = {f"activations/{g}" for g in LAYER_GROUPS} | {"activations/checkpoint"}
    return sum(p.bytes for p in breakdown.parts if p.name in names)


@pytest.mark.parametrize("k", [1, 24, 95])
def test_block_method_keeps_table_2_per_layer(k):
    s, b, h, a, layers = 2048, 1, 12288, 96, 96
    config = Config(model=GPT3, micro_batch=b, seq_len=s, attention="eager", dropout=True, implementation="megatron",
                    precision="fp16-mixed", recompute="full", recompute_layers=k)
    breakdown, _ = assess(config)
    assert kept_by_layers(breakdown) == k * 2 * s * b * h + (layers - k) * s * b * h * (34 + 5 * a * s // h)
    working = {p.name: p.bytes for p in breakdown.parts}["activations/recompute_working_layer"]
    assert working > 0  # a checkpointed layer's tensors exist again during its backward


def test_more_checkpointed_layers_never_need_more():
    # Llama 3 8B, 2 x 4,096 tokens, ZeRO-3 on 8 GPUs: from no recomputation to every layer, the need falls as K grows.
    base = Config(model=MODELS["llama-3-8b"], micro_batch=2, seq_len=4096, zero=3, dp=8)
    needs = [assess(base)[1].bytes]
    needs += [assess(base.with_changes(recompute="full", recompute_layers=k))[1].bytes for k in (1, 8, 16, 31)]
    needs += [assess(base.with_changes(recompute="full"))[1].bytes]
    assert needs == sorted(needs, reverse=True) and needs[0] > needs[-1]


def test_pipeline_stages_checkpoint_their_first_k_layers():
    # 32 layers on 4 stages of 8: K = 3 checkpoints 3 of each stage's 8 layers (Megatron's block method is per stage).
    config = Config(model=MODELS["llama-3-8b"], micro_batch=1, seq_len=4096, pp=4, grad_accum=4, recompute="full",
                    recompute_layers=3)
    full = Config(model=MODELS["llama-3-8b"], micro_batch=1, seq_len=4096, pp=4, grad_accum=4)
    breakdown, _ = assess(config)
    plain, _ = assess(full)
    checkpoint = {p.name: p.bytes for p in breakdown.parts}["activations/checkpoint"]
    groups = {f"activations/{g}" for g in LAYER_GROUPS}
    layers_saved = sum(p.bytes for p in breakdown.parts if p.name in groups)
    assert layers_saved * 8 == sum(p.bytes for p in plain.parts if p.name in groups) * 5
    assert checkpoint == 3 * 4 * 4096 * 4096 * 2  # 3 layers x 4 micro-batches in flight x s x h x 2 bytes


@pytest.mark.parametrize("args, message", [
    (["--recompute-num-layers", "8"], "it needs recompute full"),
    (["--recompute", "full", "--recompute-num-layers", "32"], "would checkpoint every layer of a stage"),
    (["--recompute", "full", "--recompute-num-layers", "-1"], "must be between 0 and 1,048,576"),
    (["--recompute", "full", "--recompute-num-layers", "2", "--activation-formula", "korthikanti"],
     "no partial recomputation"),
])
def test_bad_recompute_layers_are_refused_by_flag(capsys, args, message):
    code, _, err = run(capsys, "estimate", "--model", "llama-3-8b", *args)
    assert code == 2 and "--recompute-num-layers" in err and message in err
