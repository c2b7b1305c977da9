"""Saving a checkpoint after the step (--checkpoint-save; builder/model/checkpoint.py), pinned to the frameworks' code.

Llama 3 8B's shapes are Meta's config.json (hidden 4096, 32 layers, 8 KV heads of 128, MLP 14336, vocabulary
128256, untied head): one block is 2 x 4096^2 + 2 x 1024 x 4096 + 3 x 4096 x 14336 + 2 x 4096 = 218,112,000
parameters, the root unit (embeddings, final norm, head) 2 x 128256 x 4096 + 4096 = 1,050,677,248, the whole model
8,030,261,248 (the published count).
"""

from __future__ import annotations

import json

import pytest

from builder.catalog import default_models
from builder.cli import main
from builder.model import Config
from builder.model.peak import need

LLAMA = default_models()["llama-3-8b"]
N = 8_030_261_248
BLOCK = 2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 4096 * 14336 + 2 * 4096
ROOT = 2 * 128256 * 4096 + 4096
EMBEDDING = 128256 * 4096


def save_parts(**options) -> dict[str, int]:
    """The parts live at the checkpoint save moment of Llama 3 8B, by name."""
    needed = need(Config(model=LLAMA, seq_len=4096, dp=8, **options))
    phase = next(p for p in needed.steps if p.name == "checkpoint_save")
    return {p.name: p.bytes for p in phase.parts}


def test_the_shapes_add_up_to_the_published_count():
    assert 32 * BLOCK + ROOT == N


def test_deepspeed_16bit_gathers_one_module_at_a_time():
    """DeepSpeed 0.19.6 engine.py _zero3_consolidated_16bit_state_dict: GatheredParameters over one module's own
    parameters (recurse=False), copied to host memory on rank 0 (param.detach().cpu()) and released: the GPU holds
    the largest module, the embedding (128256 x 4096) in bf16, not the whole 2 B x N state dict (host memory)."""
    parts = save_parts(zero=3, checkpoint_save="deepspeed-16bit")
    assert parts["checkpoint/gathered_units"] == 2 * EMBEDDING == 1_050_673_152
    assert "checkpoint/state_dict_copies" not in parts


def test_full_state_dict_clones_the_whole_model_on_the_gpu():
    """PyTorch 2.13 _state_dict_utils.py _full_post_state_dict_hook: every parameter cloned inside the unshard
    context, in full precision (_flat_param.py _force_full_precision): the fp32 master's 4 B x N under bf16-mixed,
    and 2 B x N under pure bf16; the root unit, gathered through the whole call, beside them."""
    parts = save_parts(fsdp="FULL_SHARD", checkpoint_save="full-state-dict")
    assert parts["checkpoint/state_dict_copies"] == 4 * N
    assert parts["checkpoint/gathered_units"] == 4 * ROOT
    bf16 = save_parts(fsdp="FULL_SHARD", precision="bf16", checkpoint_save="full-state-dict")
    assert bf16["checkpoint/state_dict_copies"] == 2 * N == 16_060_522_496


def test_full_state_dict_offloaded_holds_one_unit():
    """_unshard_param_utils.py: with offload_to_cpu and a sharded strategy each gathered unit moves to host memory
    (handle.to_cpu) before it is cloned: one unit, the larger of a block and the root unit, on the GPU; under
    NO_SHARD there is nothing to gather, offloading does not apply and the clones stay on the GPU."""
    parts = save_parts(fsdp="FULL_SHARD", checkpoint_save="full-state-dict-offload")
    assert parts["checkpoint/gathered_units"] == 4 * max(BLOCK, ROOT)
    assert "checkpoint/state_dict_copies" not in parts
    whole = save_parts(fsdp="NO_SHARD", checkpoint_save="full-state-dict-offload")
    assert whole["checkpoint/state_dict_copies"] == 4 * N and "checkpoint/gathered_units" not in whole


def test_sharded_state_dict_clones_this_ranks_chunk():
    """_shard_utils.py _create_chunk_sharded_tensor: chunks[rank].clone() of each gathered parameter: N / 8 in fp32
    over 8 ranks, with the root unit and one block gathered."""
    parts = save_parts(fsdp="FULL_SHARD", checkpoint_save="sharded-state-dict")
    assert parts["checkpoint/state_dict_copies"] == 4 * N // 8
    assert parts["checkpoint/gathered_units"] == 4 * (ROOT + BLOCK)


@pytest.mark.parametrize("options", [{"checkpoint_save": "torch-save", "dp": 1},
                                     {"checkpoint_save": "dcp", "fsdp": "FULL_SHARD"},
                                     {"checkpoint_save": "deepspeed", "zero": 3}])
def test_saves_that_copy_to_host_add_nothing_on_the_gpu(options):
    """torch.save copies each storage to host memory (serialization.py _save: storage.cpu()), DCP each tensor as it
    is written (filesystem.py), DeepSpeed's save_checkpoint writes the partitions as they are: the save moment holds
    the model states and gradients only, no activation and no temporaries, and the need does not move."""
    config = Config(model=LLAMA, seq_len=4096, **({"dp": 8} | options))
    saved, plain = need(config), need(config.with_changes(checkpoint_save="none"))
    phase = next(p for p in saved.steps if p.name == "checkpoint_save")
    # DeepSpeed ZeRO-3's reduce bucket is allocated at the optimizer's start and kept (DeepSpeed commit edaa722,
    # deepspeed/runtime/zero/stage3.py:731-735): live at the save too.
    held = {"comm/reduce_bucket"} if options.get("zero") == 3 else set()
    assert {p.bucket for p in phase.parts if p.name not in held} == {"weights", "optimizer", "gradients"}
    assert {p.name for p in phase.parts if p.bucket == "comm"} == held
    step = next(p for p in saved.steps if p.name == "optimizer_step")
    # The step's own tensors are gone by the save: the optimizer's temporaries and DeepSpeed ZeRO's flat gradient
    # partition with its fp32 cast (stage_1_and_2.py step frees it before returning).
    assert phase.total == step.total - sum(p.bytes for p in step.parts if p.name in (
        "optimizer/step_temporaries", "optimizer/grad_partition_fp32"))
    assert saved.bytes == plain.bytes and saved.peak.name == plain.peak.name


def test_the_save_moment_exists_only_when_asked():
    """With no save (the default) the step has no save moment and the need is the one before this option."""
    plain = need(Config(model=LLAMA, seq_len=4096, dp=8, fsdp="FULL_SHARD"))
    assert "checkpoint_save" not in {p.name for p in plain.steps}
    saved = need(Config(model=LLAMA, seq_len=4096, dp=8, fsdp="FULL_SHARD", checkpoint_save="full-state-dict"))
    assert saved.peak.name == "checkpoint_save" and saved.bytes > plain.bytes
    weights_and_states = sum(p.bytes for p in saved.peak.parts if p.bucket in ("weights", "optimizer", "gradients"))
    assert saved.bytes == weights_and_states + 4 * N + 4 * ROOT


def run(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_json_names_the_save_as_the_peak(capsys):
    code, out, _ = run(capsys, "estimate", "--model", "llama-3-8b", "--fsdp", "FULL_SHARD", "--dp", "8",
                       "--checkpoint-save", "full-state-dict", "--json", "--phases")
    data = json.loads(out)
    assert code == 0 and data["peak_phase"] == "checkpoint_save"
    assert data["phases"]["checkpoint_save"]["parts"]["checkpoint/state_dict_copies"] == 4 * N


@pytest.mark.parametrize("args, words", [
    (["--checkpoint-save", "full-state-dict", "--zero", "3", "--dp", "8"], "fsdp"),
    (["--checkpoint-save", "sharded-state-dict", "--fsdp", "NO_SHARD", "--dp", "8"], "NO_SHARD"),
    (["--checkpoint-save", "deepspeed-16bit", "--zero", "2", "--dp", "8"], "zero 3"),
    (["--checkpoint-save", "deepspeed", "--fsdp", "FULL_SHARD", "--dp", "8"], "fsdp FULL_SHARD"),
    (["--checkpoint-save", "torch-save", "--fsdp", "FULL_SHARD", "--dp", "8"], "fsdp FULL_SHARD"),
    (["--checkpoint-save", "dcp", "--zero", "1", "--dp", "8"], "zero 1"),
    (["--checkpoint-save", "torch-save", "--mode", "serve"], "mode serve"),
])
def test_a_save_the_setup_cannot_run_is_refused_naming_both_options(capsys, args, words):
    code, out, err = run(capsys, "estimate", "--model", "llama-3-8b", *args)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "--checkpoint-save" in err and words in err and "Traceback" not in err
