"""`python -m builder estimate|models|gpus`: the JSON contract and one-line usage errors (exit 2)."""

import json
import subprocess
import sys

import pytest

from builder.cli import main

ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent


def run(capsys, *argv):
    """Run the CLI in-process; return (exit code, stdout, stderr)."""
    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


def test_json_contract(capsys):
    code, out, _ = run(capsys, "estimate", "--model", "llama-3-8b", "--seq-len", "4096", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["params"] == 8_030_261_248
    assert data["per_gpu_bytes"] == sum(data["parts"].values())
    assert set(data) >= {"params", "per_gpu_bytes", "need_bytes", "parts", "host_bytes", "fits"}
    # The verdict compares the need (the peak of a step), never the sum of parts alone (issue 13).
    assert data["need_bytes"] == data["peak_bytes"] and data["need_basis"].startswith("peak of a step")
    # H100's capacity: what a CUDA process sees, deviceQuery "81090 MBytes (85028896768 bytes)" (content/gpus.toml).
    assert data["fits"]["h100-80gb"] == {"capacity_bytes": 85028896768,
                                         "headroom_bytes": 85028896768 - data["need_bytes"], "fits": False}
    assert data["parts"]["weights"] == 2 * 8_030_261_248


def test_seed_004_from_the_command_line(capsys):
    code, out, _ = run(capsys, "estimate", "--model", "llama-3-8b", "--seq-len", "4096", "--recompute", "selective",
                       "--activation-formula", "korthikanti", "--optimizer", "adam", "--overhead", "10%", "--json")
    assert code == 0
    assert round(json.loads(out)["per_gpu_bytes"] / 1e9, 1) == 161.4


def test_table_output_states_the_unit_and_verdict(capsys):
    code, out, _ = run(capsys, "estimate", "--params", "3.7B", "--gpu", "a100-80gb")
    assert code == 0
    assert "sizes in GiB (2**30 bytes)" in out
    assert "fits with" in out and "headroom" in out
    code, out, _ = run(capsys, "estimate", "--params", "7e9", "--precision", "fp32", "--optimizer", "adam",
                       "--unit", "GB", "--gpu", "a100-40gb")
    assert "112.00" in out and "exceeds by" in out and "(10**9 bytes)" in out


def test_max_answers(capsys):
    code, out, _ = run(capsys, "estimate", "--model", "llama-3-8b", "--zero", "3", "--dp", "8", "--attention",
                       "flash", "--gpu", "h100-80gb", "--max", "micro-batch", "--json")
    answer = json.loads(out)["max"]
    assert code == 0 and answer["question"] == "micro_batch" and answer["value"] >= 1
    code, out, _ = run(capsys, "estimate", "--model", "llama-3-70b", "--mode", "serve", "--batch", "8",
                       "--gpu", "h100-80gb", "--max", "gpus")
    assert code == 0 and "fewest GPUs on h100-80gb:" in out


def test_serve_accepts_weight_dtypes_and_kv_dtype(capsys):
    code, out, _ = run(capsys, "estimate", "--model", "llama-3-8b", "--mode", "serve", "--precision", "int4",
                       "--kv-dtype", "fp8", "--context", "8192", "--json")
    data = json.loads(out)
    assert code == 0
    assert data["parts"]["kv_cache"] == 2 * 32 * 8 * 128 * 8192 * 1


def test_hf_config_flag(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12,
                                "vocab_size": 50257, "n_positions": 1024}))
    code, out, _ = run(capsys, "estimate", "--config", str(path), "--json")
    assert code == 0 and json.loads(out)["params"] == 124_439_808


@pytest.mark.parametrize("argv, flag", [
    (["estimate", "--model", "nope"], "--model"),
    (["estimate", "--model", "llama-3-8b", "--tp", "3"], "--tp"),
    (["estimate", "--model", "llama-3-8b", "--micro-batch", "0"], "--micro-batch"),
    (["estimate", "--model", "llama-3-8b", "--seq-len", "abc"], "--seq-len"),
    (["estimate", "--model", "llama-3-8b", "--zero", "5"], "--zero"),
    (["estimate", "--model", "llama-3-8b", "--gpu", "h900"], "--gpu"),
    (["estimate", "--model", "llama-3-8b", "--max", "micro-batch"], "--max"),
    (["estimate", "--model", "llama-3-8b", "--overhead", "ten%"], "--overhead"),
    (["estimate", "--model", "llama-3-8b", "--precision", "fp12"], "--precision"),
    (["estimate", "--params", "-3"], "--params"),
    (["estimate", "--model", "llama-3-8b", "--ep", "2"], "--ep"),
    (["estimate", "--model", "llama-3-8b", "--qlora"], "--qlora"),
    (["estimate", "--config", "/nonexistent/config.json"], "--config"),
])
def test_bad_flags_give_one_line_naming_the_flag(capsys, argv, flag):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert flag in lines[0]
    assert "Traceback" not in err


def test_catalog_listings(capsys):
    code, out, _ = run(capsys, "models", "--json")
    models = json.loads(out)
    assert code == 0 and models["mixtral-8x7b"]["active_params"] == 12_879_925_248
    code, out, _ = run(capsys, "gpus")
    assert code == 0 and "h100-80gb" in out and "GiB" in out and "GB" in out


def test_module_entry_point_runs():
    result = subprocess.run([sys.executable, "-m", "builder", "estimate", "--params", "1B", "--json"],
                            capture_output=True, text=True, cwd=ROOT, stdin=subprocess.DEVNULL)
    assert result.returncode == 0 and json.loads(result.stdout)["per_gpu_bytes"] == 16 * 10**9


def test_phases_list_the_peak_of_a_step(capsys):
    """--phases: the four moments of a step, the largest marked; Llama 3 8B at 8,192 tokens peaks when
    backward starts (loss gradients 2 x 8192 x 128256 x 4 B = 7.83 GiB, builder/model/peak.py)."""
    code, out, _ = run(capsys, "estimate", "--model", "llama-3-8b", "--seq-len", "8192", "--zero", "3", "--dp", "8",
                       "--phases")
    assert code == 0
    assert "start of backward (loss gradients)" in out and "<- peak" in out
    assert "activations/loss_grads 7.83" in out
    code, out, _ = run(capsys, "estimate", "--model", "llama-3-8b", "--seq-len", "8192", "--zero", "3", "--dp", "8",
                       "--phases", "--json")
    data = json.loads(out)
    assert data["peak_phase"] == "backward_start"
    assert data["phases"]["backward_start"]["parts"]["activations/loss_grads"] == 2 * 8192 * 128256 * 4
    assert data["phases"]["backward_start"]["bytes"] > data["per_gpu_bytes"]


def test_the_peak_is_reported_when_it_exceeds_the_sum(capsys):
    """Without --phases: JSON always carries peak_bytes/peak_phase for training, and the table shows the sum of
    parts and the need, named, when the peak of a step is more than the sum (Llama 3 8B, 8,192 tokens, ZeRO-3, with
    DeepSpeed's reduce bucket of 5e8 elements held and one bucket's flat copy in the backward)."""
    args = ("estimate", "--model", "llama-3-8b", "--seq-len", "8192", "--zero", "3", "--dp", "8")
    code, out, _ = run(capsys, *args, "--json")
    data = json.loads(out)
    assert data["peak_phase"] == "backward_start" and data["peak_bytes"] > data["per_gpu_bytes"]
    assert "phases" not in data
    code, out, _ = run(capsys, *args)
    assert "sum of parts                 73.05" in out
    assert "need                         77.05  peak of a step, at the start of backward (loss gradients)" in out
    assert "Verdicts compare the need with each GPU's usable capacity" in out
    code, out, _ = run(capsys, "estimate", "--model", "llama-3-8b", "--mode", "serve", "--json")
    data = json.loads(out)
    assert "peak_bytes" not in data and data["need_bytes"] == data["per_gpu_bytes"]


def test_the_need_says_how_its_moment_differs_from_the_sum(capsys):
    """Beside a need that is not the sum of parts, one line says what the moment does not hold (freed by then) and
    what exists only then, and they add up: Llama 3.1 70B under FSDP on 8 GPUs peaks at the optimizer step, where
    torch.optim's foreach AdamW makes one temporary the size of the second moment (torch/optim/adamw.py
    _multi_tensor_adam: torch._foreach_sqrt(exp_avg_sqs), torch 2.13) while the activations are gone."""
    code, out, _ = run(capsys, "estimate", "--model", "llama-3.1-70b", "--fsdp", "FULL_SHARD", "--dp", "8",
                       "--recompute", "full", "--gpu", "h100-80gb", "--json")
    data = json.loads(out)
    code, out, _ = run(capsys, "estimate", "--model", "llama-3.1-70b", "--fsdp", "FULL_SHARD", "--dp", "8",
                       "--recompute", "full", "--gpu", "h100-80gb")
    line = next(line for line in out.splitlines() if "= sum of parts" in line).split()
    freed, made = float(line[line.index("-") + 1]), float(line[line.index("+") + 1])
    assert line[line.index("+") + 2] == "optimizer/step_temporaries"
    assert made == round(data["parts"]["optimizer/adam_v"] / 2**30, 2)
    assert abs(data["per_gpu_bytes"] / 2**30 - freed + made - data["need_bytes"] / 2**30) <= 0.01  # two roundings
    code, out, _ = run(capsys, "estimate", "--model", "llama-3-8b", "--mode", "serve")
    assert "= sum of parts" not in out


def test_phases_are_for_training(capsys):
    code, _, err = run(capsys, "estimate", "--model", "llama-3-8b", "--mode", "serve", "--phases")
    assert code == 2 and "argument --phases" in err and "Traceback" not in err


HOSTILE = ["0", "-1", "nan", "inf", "1e400", "", "7.5", "12GiB", "x" * 1_000_000]


@pytest.mark.parametrize("flag", ["--params", "--micro-batch", "--seq-len", "--dp", "--tp", "--batch", "--context"])
@pytest.mark.parametrize("value", HOSTILE, ids=lambda v: v[:12] or "empty")
def test_hostile_counts_get_one_line(capsys, flag, value):
    """Issue 14: 0, -1, nan, inf, 1e400, an empty string, a fraction, a size and 1 MB of text each get one line
    naming the flag, exit 2, no traceback."""
    model = ["--params", "7b"] if flag != "--params" else []
    if flag in ("--batch", "--context"):
        model = ["--model", "gpt2", "--mode", "serve"]
    elif flag != "--params":
        model = ["--model", "gpt2"]
    code, out, err = run(capsys, "estimate", *model, flag, value)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"argument {flag}" in err and "Traceback" not in err


def test_meaningless_or_out_of_range_options_are_refused(capsys, tmp_path):
    """Issue 14's reports: each was accepted (or hung, or crashed) and is now one line naming the option."""
    cases = {
        ("--params", "7b", "--micro-batch", "8"): "argument --micro-batch: changes nothing with --params alone",
        ("--params", "7b", "--micro-batch", "1e9"): "argument --micro-batch: must be between 1 and 1,048,576",
        ("--model", "llama-3-8b", "--seq-len", "1e8"): "argument --seq-len: must be between 1 and 16,777,216",
        ("--model", "llama-3-8b", "--lora-rank", "100000"): "argument --lora-rank: 100000 exceeds the hidden size 4096",
        ("--model", "llama-3-8b", "--optimizer", "adam8bit", "--optimizer-state-dtype", "int4"):
            "argument --optimizer-state-dtype: adam8bit has no state dtype to choose",
        ("--config", "/dev/zero"): "larger than 1,048,576 bytes",
        ("--model", "gpt2", "--gpu", "80 parsecs"): "argument --gpu: '80 parsecs' is neither a catalog GPU",
    }
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    cases[("--config", str(listed))] = "a config.json is a JSON object of fields, not list"
    for argv, message in cases.items():
        code, _, err = run(capsys, "estimate", *argv)
        assert code == 2 and message in err and err.count("\n") == 1, (argv, err)


def test_gpu_may_be_a_plain_size(capsys):
    """--gpu takes a size as well as a catalog id; GiB and GB are told apart."""
    data = json.loads(run(capsys, "estimate", "--model", "gpt2", "--gpu", "24GB", "--json")[1])
    assert data["fits"]["24GB"]["capacity_bytes"] == 24 * 10**9
    data = json.loads(run(capsys, "estimate", "--model", "gpt2", "--gpu", "24GiB", "--json")[1])
    assert data["fits"]["24GiB"]["capacity_bytes"] == 24 * 2**30


def test_config_dropout_follows_the_file(capsys, tmp_path):
    # GPT-2's released config.json: attn_pdrop, resid_pdrop, embd_pdrop 0.1, so training saves dropout masks.
    gpt2 = {"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 50257, "n_positions": 1024,
            "attn_pdrop": 0.1, "resid_pdrop": 0.1, "embd_pdrop": 0.1}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(gpt2))
    code, out, _ = run(capsys, "estimate", "--config", str(path), "--json")
    assert code == 0 and json.loads(out)["parts"]["activations/dropout"] > 0
    path.write_text(json.dumps({**gpt2, "attn_pdrop": 0, "resid_pdrop": 0, "embd_pdrop": 0}))
    code, _, err = run(capsys, "estimate", "--config", str(path), "--dropout")
    assert code == 2 and "argument --dropout" in err and "runs no dropout" in err
    path.write_text(json.dumps({**gpt2, "reorder_and_upcast_attn": True}))
    code, _, err = run(capsys, "estimate", "--config", str(path))
    assert code == 2 and "argument --config" in err and "'reorder_and_upcast_attn'" in err


def test_config_attention_dropout_apart_is_refused_under_eager(capsys, tmp_path):
    gpt2 = {"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 50257, "n_positions": 1024,
            "attn_pdrop": 0.0, "resid_pdrop": 0.1, "embd_pdrop": 0.1}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(gpt2))
    assert run(capsys, "estimate", "--config", str(path), "--attention", "sdpa")[0] == 0
    code, _, err = run(capsys, "estimate", "--config", str(path), "--attention", "eager")
    assert code == 2 and "argument --attention" in err and "attn_pdrop" in err
