"""DeepSpeed ZeRO's gradient buckets (builder.model.buckets), pinned to DeepSpeed's code and docs.

DeepSpeed (commit edaa722): deepspeed/runtime/zero/config.py: reduce_bucket_size pp_int(5e8), contiguous_gradients
True, overlap_comm None made True for stage 3 only (overlap_comm_valid); stage_1_and_2.py setup_buckets:
torch.empty(reduce_bucket_size, dtype=self.dtype), and a second one with overlap_comm; stage3.py:731-735: one
buffer of reduce_bucket_size in the communication dtype, allocated at the optimizer's start;
comm/coalesced_collectives.py reduce_scatter_coalesced: torch.cat of a bucket's gradients before the reduce-scatter.

Hugging Face transformers' DeepSpeed guide (docs/source/en/deepspeed.md, ZeRO-2; the older main_classes/deepspeed.md
spells it "5e8 x 2Bytes x 2 x 4.5") says overlap_comm "uses 4.5x the allgather_bucket_size and reduce_bucket_size
values": 9 GB at 5e8. The sentence is not in DeepSpeed's own docs/_pages/config-json.md at edaa722, and the code there
allocates two reduce buffers (and, through all_gather_into_tensor, no all-gather bucket), 2 GB at 5e8 in bf16.
"""

import json

import pytest

from builder.catalog import default_models
from builder.cli import main
from builder.grids import SettingError, convert_setting
from builder.model import Config, estimate, validate_config
from builder.model.peak import need

LLAMA = default_models()["llama-3-8b"]
DEFAULT_BUCKET = 500_000_000  # config.py: reduce_bucket_size pp_int(5e8)
HF_GUIDE_OVERLAP_BYTES = 9_000_000_000  # "this requires a 9GB footprint (5e8 x 2Bytes x 2 x 4.5)"


def comm(config: Config) -> dict[str, int]:
    return {p.name: p.bytes for p in estimate(config).parts if p.bucket == "comm"}


def test_zero2_default_is_one_bucket_of_5e8_in_bf16():
    assert comm(Config(model=LLAMA, zero=2, dp=8)) == {"comm/unsharded_grads": DEFAULT_BUCKET * 2}


def test_overlap_comm_doubles_the_buffers_not_the_guides_four_and_a_half():
    """The guide's 9 GB at 5e8 against setup_buckets' two buffers: 2 x 5e8 x 2 B = 2 GB (1.86 GiB)."""
    got = comm(Config(model=LLAMA, zero=2, dp=8, overlap_comm=True))["comm/unsharded_grads"]
    assert got == 2 * DEFAULT_BUCKET * 2 == 2_000_000_000
    assert HF_GUIDE_OVERLAP_BYTES == 5 * 10**8 * 2 * 2 * 4.5  # the guide's own arithmetic
    assert got < HF_GUIDE_OVERLAP_BYTES


def test_guides_smaller_buckets_shrink_the_buffers():
    """The guide's advice for an 8 GB GPU, 2e8 (its 3.6 GB), is 2 x 2e8 x 2 B = 0.8 GB of buffers in the code."""
    got = comm(Config(model=LLAMA, zero=2, dp=8, overlap_comm=True, reduce_bucket_size=2 * 10**8))
    assert got["comm/unsharded_grads"] == 800_000_000


def test_zero3_holds_its_bucket_at_every_moment_and_copies_one_to_reduce():
    config = Config(model=LLAMA, zero=3, dp=8, seq_len=2048)
    parts = comm(config)
    assert parts["comm/reduce_bucket"] == DEFAULT_BUCKET * 2
    assert parts["comm/unsharded_grads"] == DEFAULT_BUCKET * 2  # reduce_scatter_coalesced's torch.cat
    for phase in need(config).steps:
        assert "comm/reduce_bucket" in {p.name for p in phase.parts}, phase.name


def test_a_small_model_still_allocates_the_whole_zero2_bucket():
    """setup_buckets allocates reduce_bucket_size elements whatever the model: GPT-2's 124M parameters get 1 GB."""
    gpt2 = default_models()["gpt2"]
    assert comm(Config(model=gpt2, seq_len=1024, zero=2, dp=8))["comm/unsharded_grads"] == DEFAULT_BUCKET * 2


def test_zero2_buckets_live_in_the_backward_only():
    steps = {p.name: {q.name for q in p.parts} for p in need(Config(model=LLAMA, zero=2, dp=8, seq_len=2048)).steps}
    assert "comm/unsharded_grads" in steps["backward_end"]
    assert "comm/unsharded_grads" not in steps["forward"] and "comm/unsharded_grads" not in steps["optimizer_step"]


def test_fsdp_keeps_its_own_rule():
    assert "comm/reduce_bucket" not in comm(Config(model=LLAMA, fsdp="FULL_SHARD", dp=8))


@pytest.mark.parametrize("options, option", [({"reduce_bucket_size": 10**8}, "reduce_bucket_size"),
                                             ({"overlap_comm": True, "fsdp": "FULL_SHARD", "dp": 8}, "overlap_comm"),
                                             ({"contiguous_gradients": False}, "contiguous_gradients")])
def test_options_need_deepspeed_zero(options, option):
    with pytest.raises(ValueError, match=f"^{option}: a DeepSpeed ZeRO option"):
        validate_config(Config(model=LLAMA, **options))


def test_cli_takes_deepspeeds_words(capsys):
    assert main(["estimate", "--model", "llama-3-8b", "--zero", "2", "--dp", "8", "--overlap-comm",
                 "--reduce-bucket-size", "2e8", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["parts"]["comm/unsharded_grads"] == 800_000_000
    assert main(["estimate", "--model", "llama-3-8b", "--reduce-bucket-size", "1e8"]) == 2
    assert "argument --reduce-bucket-size: a DeepSpeed ZeRO option" in capsys.readouterr().err


def test_front_matter_takes_deepspeeds_keys():
    assert convert_setting("overlap_comm", None, {}) is None
    assert convert_setting("overlap_comm", True, {}) is True
    assert convert_setting("reduce_bucket_size", "2e8", {}) == 200_000_000
    with pytest.raises(SettingError, match="^front matter `overlap_comm`: must be true or false"):
        convert_setting("overlap_comm", "yes", {})


def test_a_lora_run_fills_its_bucket_with_the_adapters_gradients_alone():
    """DeepSpeed edaa722 stage3.py create_reduce_and_remove_grad_hooks and stage_1_and_2.py
    create_gradient_handling_hooks hook only the parameters that require a gradient: under LoRA the frozen base gets no
    hook, so a bucket fills with the adapters' gradients at most. LoRA rank 16 on Llama 3 8B's q, k, v and o in each
    of 32 blocks: r x (d_in + d_out) a projection (Hu et al. 2021, section 4.1), k and v 1,024 wide. The buffers of a contiguous run stay whole: torch.empty(
    reduce_bucket_size) whatever is trainable (stage3.py:731-735)."""
    config = Config(model=LLAMA, zero=3, dp=8, seq_len=2048, lora_rank=16, lora_targets=("q", "k", "v", "o"))
    adapters = 32 * 16 * ((4096 + 4096) + (4096 + 1024) + (4096 + 1024) + (4096 + 4096))
    parts = comm(config)
    assert parts["comm/unsharded_grads"] == adapters * 2 < DEFAULT_BUCKET * 2  # the flat copy of the adapters' grads
    assert parts["comm/reduce_bucket"] == DEFAULT_BUCKET * 2
    loose = comm(Config(model=LLAMA, zero=2, dp=8, lora_rank=16, lora_targets=("q", "k", "v", "o"),
                        contiguous_gradients=False))
    # Without contiguous gradients: the gradients waiting in the one bucket, and allreduce_bucket's flat copy of them
    # (stage_1_and_2.py:1841 tensor = self.flatten(bucket)).
    assert loose["comm/unsharded_grads"] == 2 * adapters * 2
