"""The command line in the ecosystem's words and units (a review of `estimate`): vLLM's and SGLang's flag names for the
options the model has, sizes and fractions read in one documented way (a bare number is refused, 5% is 0.05),
vLLM's block sizes, and output that names concepts, not the project's files."""

from __future__ import annotations

import json

import pytest

from builder.model.options import OPTION_OF
from tests.test_cli import run

SERVE = ["estimate", "--model", "llama-3-8b", "--mode", "serve"]


def refused(capsys, *argv: str) -> str:
    """The one line of a refusal (exit 2, nothing on stdout)."""
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, (argv, code, err)
    return err


# vLLM's `vllm serve` (vllm/engine/arg_utils.py: --tensor-parallel-size/-tp, --pipeline-parallel-size/-pp,
# --data-parallel-size/-dp, --quantization/-q) and SGLang's server_args.py (--tp-size, --pp-size, --dp-size).
ALIASES = {"tp": ("--tensor-parallel-size", "-tp", "--tp-size"), "pp": ("--pipeline-parallel-size", "-pp", "--pp-size"),
           "dp": ("--data-parallel-size", "-dp", "--dp-size"), "quantization": ("-q",)}


def test_the_option_table_carries_the_engines_flag_names():
    for name, aliases in ALIASES.items():
        assert OPTION_OF[name].aliases == aliases, name


@pytest.mark.parametrize("name, value", [("tp", "2"), ("pp", "2"), ("dp", "2"), ("quantization", "awq")])
def test_each_ecosystem_name_gives_the_same_estimate(capsys, name, value):
    """`estimate --tensor-parallel-size 2` was 'unrecognized arguments' though --help promised vLLM's flag names."""
    code, out, _ = run(capsys, *SERVE, OPTION_OF[name].flag, value, "--json")
    assert code == 0
    for alias in ALIASES[name]:
        assert run(capsys, *SERVE, alias, value, "--json") == (0, out, ""), alias


def test_the_engine_question_names_a_flag_the_command_line_takes(capsys):
    """`--max tensor-parallel-size` prints '(--tensor-parallel-size)': that flag is accepted and gives the answer."""
    argv = [*SERVE, "--engine", "vllm", "--gpu", "h100-80gb"]
    code, out, _ = run(capsys, *argv, "--model", "llama-3-70b", "--max", "tensor-parallel-size", "--json")
    answer = json.loads(out)["max"]
    assert code == 0 and answer["flag"] == "--tensor-parallel-size"
    code, out, _ = run(capsys, *argv, "--model", "llama-3-70b", "--tensor-parallel-size", str(answer["value"]),
                       "--json")
    assert code == 0 and json.loads(out)["fits"]


# Units ------------------------------------------------------------------------------------------------------------

def test_a_bare_gpu_size_is_refused_naming_the_forms(capsys):
    """--gpu 80 was read as 80 bytes ('0.0 GiB usable')."""
    err = refused(capsys, "estimate", "--model", "gpt2", "--seq-len", "1024", "--gpu", "80")
    assert "argument --gpu: '80'" in err and "catalog GPU" in err and "80GiB or 80GB" in err


def test_a_decimal_gpu_size_says_how_it_was_read(capsys):
    """--gpu 80GB is 80e9 bytes = 74.51 GiB: the table says so, and that a catalog id gives a card's usable memory."""
    code, out, _ = run(capsys, "estimate", "--model", "gpt2", "--seq-len", "1024", "--gpu", "80GB")
    assert code == 0 and "--gpu 80GB was read as 80.00 GB = 74.51 GiB" in out and "catalog id" in out
    code, out, _ = run(capsys, "estimate", "--model", "gpt2", "--seq-len", "1024", "--gpu", "h100-80gb")
    assert code == 0 and "was read as" not in out


@pytest.mark.parametrize("argv", [
    ["--cuda-context", "500"],
    ["--mode", "serve", "--engine", "vllm", "--gpu", "h100-80gb", "--kv-cache-memory", "6"],
])
def test_a_size_without_a_unit_is_refused(capsys, argv):
    """--cuda-context 500 was read as 500 bytes while --overhead 10 was refused for lacking a unit."""
    err = refused(capsys, "estimate", "--model", "llama-3-8b", *argv)
    assert f"argument {argv[-2]}" in err and "has no unit" in err and "GiB" in err and "GB" in err


def test_sizes_with_a_unit_and_zero_are_read(capsys):
    code, out, _ = run(capsys, "estimate", "--model", "llama-3-8b", "--cuda-context", "500MiB", "--json")
    assert code == 0 and json.loads(out)["parts"]["overhead/cuda_context"] == 500 * 2**20
    code, out, _ = run(capsys, "estimate", "--model", "llama-3-8b", "--cuda-context", "0", "--json")
    assert code == 0 and "overhead/cuda_context" not in json.loads(out)["parts"]


def test_allocator_reserve_takes_a_percentage_and_stops_at_one(capsys):
    """--allocator-reserve 5 was taken as 500% while 5% was refused."""
    err = refused(capsys, "estimate", "--model", "llama-3-8b", "--allocator-reserve", "5")
    assert "argument --allocator-reserve: must be a number between 0 and 1 (or a percentage, 0% to 100%)" in err
    code, percent, _ = run(capsys, "estimate", "--model", "llama-3-8b", "--allocator-reserve", "5%", "--json")
    assert code == 0
    assert run(capsys, "estimate", "--model", "llama-3-8b", "--allocator-reserve", "0.05", "--json") == (0, percent, "")
    assert OPTION_OF["allocator_reserve"].read("5%") == 0.05  # front matter too


@pytest.mark.parametrize("size, ok", [(0, False), (-16, False), (1, True), (48, True), (128, True)])
def test_block_size_is_a_whole_number_from_one(capsys, size, ok):
    """vllm/config/cache.py (v0.24.0 to v0.33.0) CacheConfig.block_size = Field(default=None, gt=0): any whole number
    from 1; the older fixed BlockSize list is gone."""
    argv = [*SERVE, "--engine", "vllm", "--gpu", "h100-80gb", "--block-size", str(size)]
    if ok:
        assert run(capsys, *argv)[0] == 0
    else:
        err = refused(capsys, *argv)
        assert "argument --block-size" in err and "must be" in err


# Output ------------------------------------------------------------------------------------------------------------

def test_phases_show_no_unlabelled_negative_amount_and_no_module_path(capsys):
    """A checkpointed layer's forward frees more of the layer's tensors than it makes at the MLP product: its
    layer_temporaries is a net change below 0, labelled as one; the heading names no file of the project."""
    code, out, _ = run(capsys, "estimate", "--model", "llama-3-8b", "--recompute", "full", "--phases")
    assert code == 0 and "builder/" not in out and ".py" not in out
    negatives = [word for line in out.splitlines() if "incl. transient" in line
                 for word in line.split(": ", 1)[1].split(", ") if " -" in word]
    assert negatives and all("(net: " in word for word in negatives), negatives


def test_help_names_no_module_path_or_front_matter(capsys):
    code, out, _ = run(capsys, "estimate", "--help")
    out = " ".join(out.split())  # argparse wraps to the terminal's width
    assert code == 0 and "builder/" not in out and "front matter" not in out


def test_json_names_the_sum_of_parts_and_the_need(capsys):
    """per_gpu_bytes (the sum of parts) stays; sum_of_parts_bytes says what it is, and --help says what each key is."""
    data = json.loads(run(capsys, "estimate", "--model", "llama-3-8b", "--json")[1])
    assert data["sum_of_parts_bytes"] == data["per_gpu_bytes"] == sum(data["parts"].values())
    assert data["need_bytes"] == data["peak_bytes"] != data["sum_of_parts_bytes"]
    out = " ".join(run(capsys, "estimate", "--help")[1].split())
    assert "sum_of_parts_bytes, the parts added up (also under its older name per_gpu_bytes); need_bytes" in out


def test_an_architecture_past_the_parameter_limit_names_config(capsys, tmp_path):
    """A config.json of 2**20 layers of width 2**24 (each within its field's range) named --params, not given."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama", "hidden_size": 2**24, "num_attention_heads": 1024,
                                "num_hidden_layers": 2**20, "vocab_size": 32000, "intermediate_size": 2**24}))
    err = refused(capsys, "estimate", "--config", str(path))
    assert "argument --config: the architecture's parameter count must be at most" in err
