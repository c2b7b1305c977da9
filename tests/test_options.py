"""The option table (builder/model/options.py): every model input defined once, and every surface built from it."""

from __future__ import annotations

import argparse
from dataclasses import fields

import pytest

from builder.cli import MEGATRON_PRECISIONS, make_parser
from builder.grids import convert_setting
from builder.model.config import Config
from builder.model.options import CLI, FRONT_MATTER, OPTION_OF, OPTIONS, URL, OptionError
from builder.model.ranges import RANGE_OF
from builder.model.units import GB, GiB


def estimate_actions() -> dict[str, argparse.Action]:
    parser = make_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {flag: action for action in sub.choices["estimate"]._actions for flag in action.option_strings}


def test_front_matter_offers_every_config_field_and_nothing_else():
    assert {o.name for o in OPTIONS if FRONT_MATTER in o.surfaces} == {f.name for f in fields(Config)} - {"extra"}


def test_every_command_line_option_is_a_flag_of_estimate_with_its_default():
    actions = estimate_actions()
    for option in OPTIONS:
        if CLI in option.surfaces:
            action = actions[option.flag]
            assert action.dest == (option.dest or option.name)
            assert action.default == option.default or option.type in ("names",), option.name


def test_ecosystem_words_are_the_flags():
    # Megatron-LM arguments.py (commit d98e8a6): --recompute-num-layers and --use-distributed-optimizer; DeepSpeed's
    # zero_optimization keys (runtime/zero/config.py, commit edaa722); PyTorch DDP's gradient_as_bucket_view.
    assert OPTION_OF["recompute_layers"].flag == "--recompute-num-layers"
    assert OPTION_OF["use_distributed_optimizer"].flag == "--use-distributed-optimizer"
    assert OPTION_OF["stage3_prefetch_bucket_size"].flag == "--stage3-prefetch-bucket-size"
    assert OPTION_OF["gradient_as_bucket_view"].flag == "--gradient-as-bucket-view"


@pytest.mark.parametrize("surface", [CLI, FRONT_MATTER, URL])
@pytest.mark.parametrize("text", ["7b", "7B", "7e9", "7_000_000_000", "7000000000"])
def test_one_count_reader_takes_every_spelling_on_every_surface(surface, text):
    # Issue 14: "counts: 7b, 7B, 7e9, 7_000_000_000" are one count, seven billion parameters (Llama 2 7B's name).
    assert OPTION_OF["params"].read(text, surface) == 7 * 10**9


@pytest.mark.parametrize("text, size", [("80GiB", 80 * GiB), ("80 GB", 80 * GB), ("500MiB", 500 * 2**20)])
def test_one_size_reader(text, size):
    # Issue 14: sizes "80GiB" (2**30 bytes each) and "80 GB" (10**9 bytes each) are different sizes.
    assert OPTION_OF["cuda_context_bytes"].read(text, FRONT_MATTER) == size
    assert OPTION_OF["cuda_context_bytes"].read(text, CLI) == size


@pytest.mark.parametrize("surface, spelled", [(CLI, "flag `--seq-len`"), (FRONT_MATTER, "front matter `seq_len`"),
                                              (URL, "URL state `seq_len`")])
def test_one_error_names_the_option_as_the_surface_spells_it(surface, spelled):
    with pytest.raises(OptionError) as error:
        OPTION_OF["seq_len"].read("1e400", surface)
    assert str(error.value).startswith(spelled + ": ") and "16,777,216" in str(error.value)  # ranges.TOKENS = 2**24


def test_ranges_are_the_one_table_of_bounds():
    for option in OPTIONS:
        if option.type in ("count", "size", "fraction") and option.name in RANGE_OF:
            assert option.range is RANGE_OF[option.name]
    with pytest.raises(OptionError, match="between 1 and 1,048,576"):
        OPTION_OF["micro_batch"].read("1e9", CLI)  # issue 14: `--micro-batch 1e9` was accepted


def test_front_matter_reads_through_the_table():
    assert convert_setting("params", "8B", {}) == 8 * 10**9
    assert convert_setting("lora_targets", ["q", "v"], {}) == ("q", "v")


def test_megatron_precisions_are_the_policies_with_megatrons_gradient_buffer():
    # Megatron-LM's own precisions (--bf16 and --fp16 with the main_grad buffer, param_and_grad_buffer.py; Transformer
    # Engine's --fp8-format / --fp8-recipe / --fp4-format through it), commit d98e8a6: only Megatron-LM runs them, so
    # --use-distributed-optimizer takes them alone. fp32, which PyTorch shares, names no Megatron-LM run by itself.
    assert set(MEGATRON_PRECISIONS) == {"megatron-bf16", "megatron-fp16", "te-fp8", "te-fp8-params", "te-mxfp8",
                                        "te-nvfp4"}


def test_every_option_source_is_a_reference_key():
    from builder.sources import default_references

    references = default_references()
    sources = {option.source for option in OPTIONS if option.source}
    assert sources and sources <= set(references), sources - set(references)
