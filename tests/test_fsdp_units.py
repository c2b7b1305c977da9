"""FSDP units of their own for the token embedding and the output layer (torchtune's custom_sharded_layers;
builder.model.placement, builder.model.states' CUSTOM_UNITS, builder.model.step's AT_PHASE).

torchtune's full fine-tuning recipe wraps every module named in custom_sharded_layers with fully_shard before the
layers, with the same reshard_after_forward, then the whole model (torchtune/training/_distributed.py shard_model and
recipes/full_finetune_distributed.py _setup_model at 30b8519; recipes/configs/llama3_1/70B_full.yaml lists
tok_embeddings and output). torchtitan wraps the token embedding, then the final norm with the output layer, that unit
with reshard_after_forward=False under its default policy, then the blocks, then the model with fully_shard's default
(torchtitan/distributed/fsdp.py apply_fsdp_to_decoder at b5bcd76), and computes the loss on the logits the model
returns (torchtitan/trainer.py Trainer._forward_backward_body); accelerate 1.15's fsdp2_prepare_model cuts the same
units. The model takes implementation torchtune for torchtune's layout and any other for torchtitan's
(builder.model.placement.SHARD_MODEL). What each unit holds when is read in PyTorch 2.13
(torch/distributed/fsdp/_fully_shard: _fsdp_state.py and _fsdp_param_group.py) and measured here on CPU with a fake
process group (builder.validate.fsdp_units)."""

from __future__ import annotations

import functools

import pytest

from builder.catalog import default_models
from builder.model import Config, validate_config
from builder.model.architecture import from_hf_config
from builder.model.peak import assess, phases
from tests.test_selective_op import TABLE_1

MODELS = default_models()
GIB = 2**30
# Llama 3.1 70B as torchtune builds it (torchtune/models/llama3_1/_model_builders.py llama3_1_70b at 30b8519):
# vocab_size 128_256, embed_dim 8192, 64 heads and 8 KV heads of 128, intermediate_dim 28672, untied output layer; the
# recipe's dtype bf16 (70B_full.yaml) loads it in bf16 and FSDP gathers bf16 (no mixed precision policy).
V, H, KV, F = 128_256, 8192, 8 * 128, 28672
VOCAB_UNIT = V * H * 2  # nn.Embedding(V, H), or nn.Linear(H, V, bias=False), in bf16
BLOCK = (2 * H * H + 2 * H * KV + 3 * H * F + 2 * H) * 2  # q, o; k, v; w1, w2, w3; two RMSNorm scales
NORM = H * 2  # the final RMSNorm's scale
# The torchtune README's "Memory and training speed" row (commit 30b8519): Llama 3.1 70B full fine-tuning on 8 A100s,
# 13.9 GiB peak memory per GPU, "Uses CPU offload with fused optimizer", batch size 2 packed to 2,048 tokens, torch
# compile on; its recipe llama3_1/70B_full.yaml at that commit: AdamW fused, CEWithChunkedOutputLoss (compiled in place
# by training.compile_loss under compile), activation checkpointing, custom_sharded_layers tok_embeddings and output,
# fsdp_cpu_offload (parameters, gradients and optimizer states on the host), dtype bf16.
README_70B = 13.9 * GIB
TORCHTUNE_70B = Config(model=MODELS["llama-3.1-70b"], precision="bf16", implementation="torchtune", attention="flash",
                       micro_batch=2, seq_len=2048, loss="chunked-compiled", optimizer="adamw", optimizer_impl="fused",
                       fsdp="FULL_SHARD", dp=8, recompute="full", offload="both", compile=True,
                       custom_sharded_layers=("tok_embeddings", "output"))
ROOT_ONLY = TORCHTUNE_70B.with_changes(custom_sharded_layers=())


def parts_of(config: Config) -> dict[str, int]:
    return {p.name: p.bytes for p in assess(config)[0].parts}


def moment(config: Config, name: str):
    return next(phase for phase in phases(config) if phase.name == name)


def test_the_units_of_llama_3_1_70b_by_hand():
    assert BLOCK == 1_711_308_800 and VOCAB_UNIT == 2_101_346_304
    units = parts_of(TORCHTUNE_70B)
    # The block computed and the root unit, which keeps only the final norm once the token embedding and the output
    # layer are units of their own, unsharded; one block's flat all-gather buffer beside them (its own in the forward,
    # the one prefetched in the backward).
    assert units["comm/gathered_params"] == BLOCK + NORM and units["comm/all_gather_output"] == BLOCK
    assert units["comm/gathered_output"] == units["comm/gathered_embeddings"] == VOCAB_UNIT
    # The output layer's gradient, reduce-scattered when its backward ends, in the reduce dtype (the gradients', bf16).
    assert units["comm/output_reduce_scatter_input"] == VOCAB_UNIT
    assert "comm/root_grads" not in units
    # Without them the root unit is the token embedding, the final norm and the output layer, its gradients reduced at
    # the end of backward.
    root = parts_of(ROOT_ONLY)
    assert root["comm/gathered_params"] == BLOCK + 2 * VOCAB_UNIT + NORM and root["comm/all_gather_output"] == BLOCK
    assert root["comm/root_grads"] == VOCAB_UNIT
    assert not {"comm/gathered_output", "comm/gathered_embeddings", "comm/output_reduce_scatter_input"} & set(root)


def test_the_output_layers_backward_holds_the_units_gathered_then():
    """torchtune's chunked loss: autograd sums the chunks' output-layer weight gradients in the AccumulateGrad node's
    input buffer (three V x h tensors at once: gradients/head_sum) and sets .grad once every chunk's has come, so the
    root unit's gradient is that sum (no comm/root_grads yet) and no block has made one (no comm/unsharded_grads). The
    output layer in the root unit: the root's pre-backward has prefetched the last block. The output layer a unit of its
    own: it is gathered for its own backward, and the last block is prefetched only for the last chunk's, when one
    chunk's gradient is added to the sum, not two."""
    root = {p.name: p.bytes for p in moment(ROOT_ONLY, "head_backward").parts}
    assert root["comm/gathered_params"] == 2 * VOCAB_UNIT + NORM and root["comm/all_gather_output"] == BLOCK
    assert root["gradients/head_sum"] == 3 * VOCAB_UNIT
    assert not {"comm/root_grads", "comm/unsharded_grads"} & set(root)
    units = {p.name: p.bytes for p in moment(TORCHTUNE_70B, "head_backward").parts}
    assert units["comm/gathered_params"] == NORM and units["comm/gathered_output"] == VOCAB_UNIT
    assert units["gradients/head_sum"] == 3 * VOCAB_UNIT
    assert root.keys() - units.keys() == {"comm/all_gather_output"}
    assert sum(root.values()) - sum(units.values()) == BLOCK + VOCAB_UNIT
    # Inside the last layer's backward the output unit's reduce-scatter input stands where the root's output-layer
    # gradient stood; the token embedding's unit is gathered from the first block's backward on, and its gradient,
    # made last, is reduced in the final callback as the root's would be.
    assert {p.name for p in moment(TORCHTUNE_70B, "backward_end").parts} >= {"comm/gathered_embeddings",
                                                                               "comm/embedding_grads"}


def test_torchtunes_readme_row_for_llama_3_1_70b():
    """The README row (13.9 GiB) against the recipe's own layout, and the same run with the embeddings and the output
    layer left in the root unit. Not fitted: the units are read from the sources above. The README does not say which
    of torchtune's counters (training/memory.py get_memory_stats: peak active, allocated or reserved) it prints."""
    units, root = assess(TORCHTUNE_70B)[1], assess(ROOT_ONLY)[1]
    assert units.peak.name == root.peak.name == "head_backward"
    assert round(units.bytes / GIB, 2) == 13.81 and round(root.bytes / GIB, 2) == 17.36
    assert abs(units.bytes - README_70B) / README_70B < 0.01
    # The Sharding page's table: end of forward, start of backward, the output layer's backward, end of backward. At
    # the loss nothing is gathered (shard_model reshards the root unit after the forward too, and the chunked loss's
    # gradients are made before the root's hook gathers it again), and no block has made gradients; at the end of backward the root unit, or the
    # token embedding's unit and the final norm, and no block.
    for config, table in ((ROOT_ONLY, (6.23, 6.35, 17.36, 10.58)), (TORCHTUNE_70B, (6.23, 6.35, 13.81, 6.67))):
        got = {phase.name: round(phase.total / GIB, 2) for phase in phases(config)}
        assert tuple(got[name] for name in ("forward", "backward_start", "head_backward", "backward_end")) == table


def test_a_sharded_state_dict_gathers_the_root_unit_beside_the_largest_other_unit():
    """FSDP's SHARDED_STATE_DICT keeps the root unit gathered through the call while each other unit is gathered in
    turn (builder.model.checkpoint): with units of their own the root is the final norm, and the largest other unit
    Llama 3.1 70B's output layer or token embedding (1.05 billion parameters against a block's 0.86 billion), in bf16
    (no master copy)."""
    save = dict(checkpoint_save="sharded-state-dict", offload="none", compile=False)
    root = parts_of(ROOT_ONLY.with_changes(**save))["checkpoint/gathered_units"]
    units = parts_of(TORCHTUNE_70B.with_changes(**save))["checkpoint/gathered_units"]
    assert root == 2 * VOCAB_UNIT + NORM + BLOCK and units == NORM + VOCAB_UNIT


@pytest.mark.parametrize("changes, message", [
    (dict(fsdp=None, zero=3), "it needs training with fsdp"),
    (dict(model=MODELS["llama-3.2-1b"]), "ties its output layer to the token embedding"),
    (dict(custom_sharded_layers=("tok_embeddings", "lm_head")), "'lm_head' is not one of tok_embeddings, output"),
])
def test_units_of_their_own_are_refused_where_they_mean_nothing(changes, message):
    with pytest.raises(ValueError, match=message):
        validate_config(TORCHTUNE_70B.with_changes(**changes))


def test_the_option_reads_the_same_on_every_surface():
    from builder.cli import config_from_args, make_parser
    from builder.model.options import CLI, FRONT_MATTER, URL, OPTION_OF
    from builder.widgets import calculator as calc

    option = OPTION_OF["custom_sharded_layers"]
    assert option.flag == "--custom-sharded-layers" and option.url == "custom_sharded_layers"
    assert option.read("tok_embeddings,output", CLI) == option.read("tok_embeddings,output", URL) \
        == option.read(["tok_embeddings", "output"], FRONT_MATTER) == ("tok_embeddings", "output")
    args = make_parser().parse_args(["estimate", "--model", "llama-3.1-70b", "--fsdp", "FULL_SHARD", "--dp", "8",
                                      "--custom-sharded-layers", "tok_embeddings,output"])
    assert config_from_args(args).custom_sharded_layers == ("tok_embeddings", "output")
    form = calc.default_state({"model": "llama-3.1-70b", "fsdp": "FULL_SHARD", "dp": 8,
                               "custom_sharded_layers": "tok_embeddings,output"}, MODELS, "a100-80gb")
    assert calc.config_from_state(form, MODELS).custom_sharded_layers == ("tok_embeddings", "output")
    # Counted with an FSDP strategy only (the control shows with one).
    assert calc.config_from_state(form | {"sharding": "3"}, MODELS).custom_sharded_layers == ()


GATHERED = ("comm/gathered_params", "comm/all_gather_output", "comm/gathered_output", "comm/gathered_embeddings")
LAYOUTS = {"default": (), "custom": ("tok_embeddings", "output")}


def harness_layout(layout: str, implementation: str) -> str:
    """The measurement's layout for the model's: units of their own cut as torchtune's shard_model cuts them
    ('custom'), or as torchtitan and accelerate 1.15 do ('titan') outside torchtune (builder.model.placement's
    SHARD_MODEL)."""
    return "titan" if layout == "custom" and implementation != "torchtune" else layout


@functools.lru_cache(maxsize=None)
def measured(layout: str, run: tuple[str, str], **changes) -> dict:
    """builder.validate.fsdp_units' measurement of the small Llama below (rank 0 of 2, batch 2 of 128 tokens), wrapped
    and its loss computed as RUNS has it for `run` (with `changes` to that)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from builder.validate.fsdp_units import llama_config, measure
    return measure(harness_layout(layout, run[0]), llama_config(), batch=2, seq_len=128, world_size=2,
                   **(RUNS[run] | changes))


# The runs measured, as the model takes them: (implementation, loss) -> how the measurement wraps and computes it
# (fully_shard's reshard_after_forward passed to the root, as torchtune's shard_model does, or left to its default, as
# accelerate 1.15 and torchtitan leave it; the loss in the model's forward, as transformers' causal LMs compute it
# given labels, calling the output layer once; torchtune's chunked loss on the 8 chunks its decoder returns).
RUNS = {("torchtune", "chunked"): dict(reshard_root=True, loss_inside=False),
        ("hf", "eager"): dict(reshard_root=False, loss_inside=True, chunks=1),
        ("hf", "chunked"): dict(reshard_root=False, loss_inside=False)}


def small_llama(layout: str, implementation: str = "torchtune", loss: str = "chunked", **changes) -> Config:
    """The measured run as the model takes it."""
    from builder.validate.fsdp_units import llama_config
    return Config(model=from_hf_config(llama_config(), "small-llama"), precision="fp32", optimizer="adamw",
                  optimizer_impl="for-loop", fsdp="FULL_SHARD", dp=2, micro_batch=2, seq_len=128, attention="eager",
                  loss=loss, implementation=implementation,
                  custom_sharded_layers=LAYOUTS[layout]).with_changes(**changes)


def gathered_at(config: Config) -> dict[str, int]:
    """The model's gathered parameters at each moment of the step: the unsharded units and the all-gather buffer."""
    return {phase.name: sum(p.bytes for p in phase.parts if p.name in GATHERED) for phase in phases(config)}


@pytest.mark.validate
def test_fsdp2_units_measured_on_cpu():
    """A small Llama under FSDP2 (fake process group, rank 0 of 2) with torchtune's chunked output and loss, both
    layouts: what the hooks gather and reduce at the output layer's backward, and the live bytes there against the
    model's moment for the same architecture (builder.validate.fsdp_units)."""
    from builder.validate.fsdp_units import CHUNKS, llama_config

    config = llama_config()
    runs = {layout: measured(layout, ("torchtune", "chunked")) for layout in LAYOUTS}
    # The output layer's unit: a post-backward after every chunk's backward, a gradient only at the last (the sum).
    posts = [mark for mark in runs["custom"]["hooks"] if mark["hook"] == "post" and mark["unit"] == "lm.lm_head"]
    assert len(posts) == CHUNKS and [mark["grads"] for mark in posts] == [()] * (CHUNKS - 1) + [("lm.lm_head.weight",)]
    last_block = f"lm.model.layers.{config['num_hidden_layers'] - 1}"
    heads = [mark for mark in runs["custom"]["hooks"] if mark["hook"] == "pre" and mark["unit"] == "lm.lm_head"]
    assert [last_block in mark["gathered"] for mark in heads] == [False] * CHUNKS  # before each chunk's own prefetch
    assert last_block in posts[-1]["gathered"] and last_block not in posts[-2]["gathered"]
    # The output layer in the root unit: the root's first pre-backward gathers it again and prefetches the last block.
    roots = [mark for mark in runs["default"]["hooks"] if mark["hook"] == "pre" and mark["unit"] == "root"]
    assert [mark["gathered"] for mark in roots] == [()] + [(last_block, "root")] * (CHUNKS - 1)
    # Live bytes at the output layer's backward: the model's moment within 1 KiB (small tensors the model leaves out:
    # AdamW's step counters, the loss scalars, FSDP's own), and so the difference between the layouts.
    model = {layout: moment(small_llama(layout), "head_backward").total for layout in LAYOUTS}
    for layout in model:
        assert abs(runs[layout]["head_backward_peak"] - model[layout]) <= 1024
    hidden, vocab, ffn, kv = config["hidden_size"], config["vocab_size"], config["intermediate_size"], 2 * 16
    block = (2 * hidden * hidden + 2 * hidden * kv + 3 * hidden * ffn + 2 * hidden) * 4
    embedding = vocab * hidden * 4
    assert model["default"] - model["custom"] == embedding + block
    assert abs(runs["default"]["head_backward_peak"] - runs["custom"]["head_backward_peak"]
               - (embedding + block)) <= 64
    # At the start of backward neither layout holds a unit gathered (shard_model reshards the root after the forward
    # too); with the root left to fully_shard's default (reshard_after_forward=None, as accelerate 1.15 and torchtitan
    # leave it) the root unit holds the token embedding and the output layer there, and torchtitan's units of their
    # own the final norm and output layer's unit (reshard_after_forward=False), not the token embedding's.
    assert abs(runs["default"]["start_of_backward"] - runs["custom"]["start_of_backward"]) <= 64
    kept = {layout: measured(layout, ("hf", "chunked"))["start_of_backward"] for layout in LAYOUTS}
    assert abs(kept["default"] - kept["custom"] - embedding) <= 64


@pytest.mark.validate
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("run", RUNS, ids=["-".join(run) for run in RUNS])
def test_what_fsdp2_holds_gathered_at_every_moment_measured_on_cpu(layout, run):
    """The bytes FSDP2 holds gathered (the units' unsharded parameters, an all-gather output prefetched or kept for the
    next copy-out: builder.validate.fsdp_units.gathered_bytes) at each moment of the measured step, against the
    model's comm parts there, to the byte: inside the last layer's forward a block twice (its parameters and its
    all-gather output) and the root unit; at the loss and its gradients no block where the loss is outside the model's
    forward (and the root unit only where fully_shard keeps it), the root and one all-gather buffer where it is
    inside; one block from the root's pre-backward to the last layer's, two there, one at the first layer's (plus the
    token embedding's unit where it is one of its own), none after. With torchtitan's units of their own (any
    implementation but torchtune) the root holds nothing, and the final norm and output layer's unit is gathered from
    its forward through the loss and its gradients to the final norm's backward."""
    implementation, loss = run
    measured_run = measured(layout, run)["moments"]
    model = gathered_at(small_llama(layout, implementation, loss))
    assert set(model) - {"optimizer_step"} <= set(measured_run)
    assert model["optimizer_step"] == measured_run["optimizer_step"] == 0
    assert {name: measured_run[name] for name in model} == model
    hidden, vocab, ffn, kv = 64, 2048, 176, 2 * 16
    block = (2 * hidden * hidden + 2 * hidden * kv + 3 * hidden * ffn + 2 * hidden) * 4
    vocab_unit, norm = vocab * hidden * 4, hidden * 4
    titan = harness_layout(layout, implementation) == "titan"
    root = 0 if titan else norm + (0 if layout == "custom" else 2 * vocab_unit)
    output = vocab_unit + (norm if titan else 0)  # the output layer's unit, the final norm in it with torchtitan
    assert measured_run["layer_forward"] == measured_run["layer_backward"] == 2 * block + root
    kept = (0 if RUNS[run]["reshard_root"] else root) + (output if titan else 0)
    assert measured_run["before_first_pre_backward"] == kept
    if titan:  # no root unit; the loss gradients come with the output unit kept and nothing prefetched
        assert "after_roots_pre_backward" not in measured_run
        assert measured_run["forward"] == output * (2 if RUNS[run]["loss_inside"] else 1)
        assert measured_run["backward_start"] == measured_run["final_norm_backward"] - block == output
    else:
        assert measured_run["after_roots_pre_backward"] == root + (vocab_unit if layout == "custom" else block)
        assert measured_run["backward_start"] == (measured_run["after_roots_pre_backward"]
                                                  if RUNS[run]["loss_inside"] else kept)
    # The output layer's forward (a moment with torchao's float8 output layer, in bf16 with the eager loss: half the
    # fp32 bytes measured): the last block's all-gather output beside the root, or the output layer's unit twice.
    float8 = small_llama(layout, implementation, "eager", precision="bf16", float8="tensorwise")
    assert 2 * gathered_at(float8)["head_forward"] == measured_run["head_forward"] \
        == root + (2 * output if layout == "custom" else block)


@pytest.mark.validate
def test_torchtitans_loop_measured_on_cpu():
    """torchtitan's own loop: its units (the 'titan' layout), the output layer called once, the loss on the logits the
    model returns (torchtitan/trainer.py Trainer._forward_backward_body at b5bcd76). As PyTorch 2.13 reads
    (_fsdp_param_group.py): the final norm and output layer's unit, reshard_after_forward=False, is not freed by its
    post_forward (reshard returns where _reshard_after_forward is False); its pre_backward finds it gathered (unshard:
    "if self.is_unsharded: return") and prefetches the last block; its post_backward runs once the final norm's input
    has its gradient (RegisterPostBackwardFunction on the group's first module's inputs), with both gradients, and
    frees it (reshard_after_backward)."""
    from builder.validate.fsdp_units import llama_config

    run = measured("custom", ("hf", "eager"), loss_inside=False)
    hooks, got = run["hooks"], run["moments"]
    tail, last_block = "lm.model.norm, lm.lm_head", "lm.model.layers.1"
    hidden, vocab, ffn, kv = 64, 2048, 176, 2 * 16
    block = (2 * hidden * hidden + 2 * hidden * kv + 3 * hidden * ffn + 2 * hidden) * 4
    output = (vocab * hidden + hidden) * 4  # the final norm and the output layer, fp32

    def at(hook: str, unit: str = "") -> dict:
        return next(mark for mark in hooks if mark["hook"] == hook and mark["unit"] == unit)

    # Kept at the loss and its gradients; the root's post-forward has freed its all-gather output before the loss.
    for mark in (at("loss"), at("loss_grad")):
        assert mark["gathered"] == (tail,) and mark["bytes"] == {"unsharded": output, "prefetched": 0, "held": 0}
    # The pre-backward gathers nothing: the unit is already unsharded; it prefetches the last block.
    assert at("pre", tail)["bytes"]["unsharded"] == at("pre_done", tail)["bytes"]["unsharded"] == output
    done = at("pre_done", tail)
    assert done["gathered"] == (last_block, tail) and done["bytes"]["prefetched"] == block
    # Freed once, after the final norm's backward, by the post-backward that reduces both gradients.
    posts = [mark for mark in hooks if mark["hook"] == "post" and mark["unit"] == tail]
    assert [mark["grads"] for mark in posts] == [("lm.model.norm.weight", "lm.lm_head.weight")]
    assert tail in at("final_norm_grad", "lm.model.norm")["gathered"]
    assert hooks.index(at("final_norm_grad", "lm.model.norm")) < hooks.index(posts[0])
    assert tail not in at("pre", last_block)["gathered"]
    # The model's run for it is transformers' (implementation hf), which computes the loss in the forward: every moment
    # to the byte but the end of forward, where the model keeps the unit's all-gather output until the root's
    # post-forward, after the loss (the named simplification); torchtitan's root post-forward frees it before.
    assert llama_config()["num_hidden_layers"] == 2
    model = gathered_at(small_llama("custom", "hf", "eager"))
    same = set(model) - {"forward"}
    assert {name: got[name] for name in same} == {name: model[name] for name in same}
    assert model["forward"] - got["forward"] == output and got["forward"] == got["backward_start"] == output


# torchtitan's benchmark setting (tests/test_selective_op.TABLE_1: Llama 3.1 8B, FSDP over 8 GPUs, 2 x 8,192 tokens,
# per-op selective checkpointing, sdpa, bf16 mixed precision) with its units of their own, as the model takes a
# torchtitan run (implementation hf, the default): the token embedding, and the final norm with the output layer
# (vocab 128,256 x hidden 4,096 and 4,096 norm values, gathered in bf16: 1,050,681,344 bytes, 0.98 GiB).
TITAN_8B = TABLE_1.with_changes(custom_sharded_layers=("tok_embeddings", "output"))
TAIL_8B = (128_256 * 4096 + 4096) * 2


def test_torchtitans_output_unit_is_counted_from_the_loss_to_the_final_norms_backward():
    """Before torchtitan's layout was modelled the same need (67.25 GiB, at the loss gradients) held the output
    layer's all-gather output where torchtitan holds its kept unit (the root's pre-backward prefetch it stood for
    finds the unit gathered), and left the unit out at the end of forward (63.33 GiB) and the final norm's backward
    (45.17)."""
    assert TAIL_8B == 1_050_681_344
    moments = {phase.name: phase for phase in phases(TITAN_8B)}
    parts = {name: {p.name: p.bytes for p in phase.parts} for name, phase in moments.items()}
    for name in ("forward", "backward_start", "final_norm_backward"):
        assert parts[name]["comm/gathered_output"] == TAIL_8B
        assert "comm/gathered_params" not in parts[name]  # the root unit holds nothing of Llama's
    # transformers' loss in the forward: the unit's all-gather output until the root's post-forward; none after.
    assert parts["forward"]["comm/all_gather_output"] == TAIL_8B
    assert "comm/all_gather_output" not in parts["backward_start"]
    need = assess(TITAN_8B)[1]
    assert need.peak.name == "backward_start" and need.bytes == 72_206_727_172 and round(need.bytes / GIB, 2) == 67.25
    assert {name: round(moments[name].total / GIB, 2) for name in ("forward", "final_norm_backward")} \
        == {"forward": 64.31, "final_norm_backward": 46.15}
    # With torchtune's chunked loss (outside the forward) the kept unit is all there is at the loss: the peak, at the
    # end of forward, 55.51 GiB before, 56.48 now.
    chunked = assess(TITAN_8B.with_changes(loss="chunked"))[1]
    assert chunked.peak.name == "forward" and round(chunked.bytes / GIB, 2) == 56.48
    # torchtune's layout for the same shape (its one dtype, bf16) reshards the output layer after its forward.
    torchtune = {phase.name: {p.name for p in phase.parts}
                 for phase in phases(TITAN_8B.with_changes(implementation="torchtune", precision="bf16"))}
    assert not any("comm/gathered_output" in torchtune[name] for name in ("forward", "backward_start",
                                                                        "final_norm_backward"))
