"""Offloaded activations (--offload-activations; torchtune 0.6 torchtune/training/_activation_offloading.py).

torchtune's OffloadActivations copies every saved tensor of 1,024 bytes or more to pinned host memory in the
forward and brings it back node by node in the backward; get_act_offloading_ctx_manager keeps the output
layer's tensors on the GPU. The model keeps one layer's saved tensors on the GPU (an upper bound, named) and
every layer's in host memory. Pinned to Korthikanti et al. 2022, Table 2: one Megatron GPT layer without
parallelism saves sbh(34 + 5as/h) bytes, so that is what the GPU keeps of the layers, and L times it goes to
the host.
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


def layer_bytes(breakdown) -> int:
    """The GPU's saved bytes of the transformer layers (the op-list groups of a block)."""
    return sum(p.bytes for p in breakdown.parts if p.name.removeprefix("activations/") in LAYER_GROUPS)


def test_gpu_keeps_one_layer_of_korthikanti_table_2_and_the_host_all_of_them():
    # GPT-3 175B's shape as Korthikanti et al. analyse it (GeLU 4h MLP, LayerNorm, dropout, 16-bit activations).
    s, b, h, a, layers = 2048, 1, 12288, 96, 96
    config = Config(model=GPT3, micro_batch=b, seq_len=s, implementation="megatron", dropout=True, attention="eager", precision="fp16-mixed",
                    offload_activations=True)
    breakdown, _ = assess(config)
    one_layer = s * b * h * (34 + 5 * a * s // h)  # Table 2, no parallelism: 25,165,824 x 114 bytes
    assert one_layer == 25_165_824 * 114
    assert layer_bytes(breakdown) == one_layer
    host = {p.name: p.bytes for p in breakdown.host_parts}
    assert host == {"host/activations/offloaded": layers * one_layer}
    # Without offloading the GPU holds all of them: the offloaded host part is exactly that sum.
    kept, _ = assess(config.with_changes(offload_activations=False))
    assert layer_bytes(kept) == layers * one_layer and not kept.host_parts


def test_full_recompute_offloads_the_checkpoints():
    # Each checkpointed layer keeps its input, 2sbh (Korthikanti et al. 2022, Table 2); offloaded, the GPU keeps one.
    config = Config(model=MODELS["llama-3-8b"], seq_len=4096, recompute="full", offload_activations=True)
    breakdown, _ = assess(config)
    parts = {p.name: p.bytes for p in breakdown.parts}
    assert parts["activations/checkpoint"] == 2 * 4096 * 4096
    assert breakdown.host_parts[0].bytes == 32 * 2 * 4096 * 4096


def test_offloading_lowers_the_peak_when_activations_set_it_and_never_raises_it():
    # Llama 3 8B, 4 x 8,192 tokens, full fine-tuning with ZeRO-3 on 8 GPUs: saved activations (about 32 x 6 GiB)
    # dominate; offloaded, the peak moves to what model states and the loss need.
    base = Config(model=MODELS["llama-3-8b"], micro_batch=4, seq_len=8192, zero=3, dp=8)
    _, kept = assess(base)
    _, offloaded = assess(base.with_changes(offload_activations=True))
    assert offloaded.bytes < kept.bytes / 3
    for recompute in ("none", "selective", "full"):
        for model in ("gpt2", "llama-3-8b", "mixtral-8x7b"):
            config = Config(model=MODELS[model], micro_batch=2, seq_len=1024, recompute=recompute)  # GPT-2's 1,024
            assert assess(config.with_changes(offload_activations=True))[1].bytes <= assess(config)[1].bytes


@pytest.mark.parametrize("args, message", [
    (["--model", "llama-3-8b", "--mode", "serve"], "a training option, which --mode serve does not read"),
    (["--model", "llama-3-8b", "--activation-formula", "korthikanti"], "count activations op by op"),
    (["--params", "7b"], "changes nothing with --params alone"),
])
def test_offload_activations_refused_where_it_means_nothing(capsys, args, message):
    code, _, err = run(capsys, "estimate", *args, "--offload-activations")
    assert code == 2 and "--offload-activations" in err and message in err
