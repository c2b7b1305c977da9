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
    code, out, _ = run(capsys, "estimate", "--config", str(path), "--seq-len", "1024", "--json")
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
    DeepSpeed's reduce bucket of 5e8 elements held, its flat gradient partitions held from the optimizer's construction
    (stage3.py:742-751 at edaa722: 1.87 GiB here, in the forward too) and one bucket's flat copy in the backward)."""
    args = ("estimate", "--model", "llama-3-8b", "--seq-len", "8192", "--zero", "3", "--dp", "8")
    code, out, _ = run(capsys, *args, "--json")
    data = json.loads(out)
    assert data["peak_phase"] == "backward_start" and data["peak_bytes"] > data["per_gpu_bytes"]
    assert "phases" not in data
    code, out, _ = run(capsys, *args)
    assert "sum of parts                 73.05" in out
    assert "need                         78.92  peak of a step, at the start of backward (loss gradients)" in out
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
        # The CLI-hygiene QA pass: a bare --overhead (10 was read as 10 bytes, 0.1 as 0), a length past GPT-2's 1,024
        # learned positions (wpe has n_positions rows), an option the run does not read (silently ignored before),
        # and ZeRO-3 with FSDP (FSDP silently won).
        ("--model", "llama-3-8b", "--overhead", "10"): "argument --overhead: '10' has no unit: give a percentage",
        ("--model", "llama-3-8b", "--overhead", "0.1"): "argument --overhead: '0.1' has no unit",
        ("--model", "llama-3-8b", "--overhead=-5%"): "argument --overhead: must be a percentage between 0% and 1000%",
        ("--model", "gpt2", "--seq-len", "2048"): "argument --seq-len: gpt2 has 1024 learned positions",
        ("--model", "gpt2", "--mode", "serve", "--context", "1025"): "argument --context: gpt2 has 1024 learned",
        ("--model", "llama-3-8b", "--mode", "serve", "--micro-batch", "4"):
            "argument --micro-batch: a training option, which --mode serve does not read",
        ("--model", "llama-3-8b", "--kv-dtype", "fp8"): "argument --kv-dtype: a serving option, which --mode train",
        ("--model", "llama-3-8b", "--zero", "3", "--fsdp", "FULL_SHARD", "--dp", "8"):
            "argument --fsdp: FSDP FULL_SHARD and ZeRO stage 3 are two ways to shard",
    }
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    cases[("--config", str(listed))] = "a config.json is a JSON object of fields, not list"
    for argv, message in cases.items():
        code, _, err = run(capsys, "estimate", *argv)
        assert code == 2 and message in err and err.count("\n") == 1, (argv, err)


def test_gpu_may_be_a_plain_size(capsys):
    """--gpu takes a size as well as a catalog id; GiB and GB are told apart."""
    data = json.loads(run(capsys, "estimate", "--model", "gpt2", "--seq-len", "1024", "--gpu", "24GB", "--json")[1])
    assert data["fits"]["24GB"]["capacity_bytes"] == 24 * 10**9
    data = json.loads(run(capsys, "estimate", "--model", "gpt2", "--seq-len", "1024", "--gpu", "24GiB", "--json")[1])
    assert data["fits"]["24GiB"]["capacity_bytes"] == 24 * 2**30


def test_config_dropout_follows_the_file(capsys, tmp_path):
    # GPT-2's released config.json: attn_pdrop, resid_pdrop, embd_pdrop 0.1, so training saves dropout masks.
    gpt2 = {"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 50257, "n_positions": 1024,
            "attn_pdrop": 0.1, "resid_pdrop": 0.1, "embd_pdrop": 0.1}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(gpt2))
    code, out, _ = run(capsys, "estimate", "--config", str(path), "--seq-len", "1024", "--json")
    assert code == 0 and json.loads(out)["parts"]["activations/dropout"] > 0
    path.write_text(json.dumps({**gpt2, "attn_pdrop": 0, "resid_pdrop": 0, "embd_pdrop": 0}))
    code, _, err = run(capsys, "estimate", "--config", str(path), "--seq-len", "1024", "--dropout")
    assert code == 2 and "argument --dropout" in err and "runs no dropout" in err
    path.write_text(json.dumps({**gpt2, "reorder_and_upcast_attn": True}))
    code, _, err = run(capsys, "estimate", "--config", str(path))
    assert code == 2 and "argument --config" in err and "'reorder_and_upcast_attn'" in err


def test_config_attention_dropout_apart_is_refused_under_eager(capsys, tmp_path):
    gpt2 = {"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 50257, "n_positions": 1024,
            "attn_pdrop": 0.0, "resid_pdrop": 0.1, "embd_pdrop": 0.1}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(gpt2))
    assert run(capsys, "estimate", "--config", str(path), "--seq-len", "1024", "--attention", "sdpa")[0] == 0
    code, _, err = run(capsys, "estimate", "--config", str(path), "--attention", "eager")
    assert code == 2 and "argument --attention" in err and "attn_pdrop" in err


@pytest.mark.parametrize("argv, flag, run_words", [
    (["--mode", "serve", "--micro-batch", "4"], "--micro-batch", "--mode serve"),
    (["--mode", "serve", "--lora-rank", "8"], "--lora-rank", "--mode serve"),
    (["--mode", "serve", "--recompute", "full"], "--recompute", "--mode serve"),
    (["--mode", "serve", "--compile"], "--compile", "--mode serve"),
    (["--mode", "serve", "--zero", "1"], "--zero", "--mode serve"),
    (["--mode", "serve", "--contiguous-gradients"], "--contiguous-gradients", "--mode serve"),  # its default, given
    (["--mode", "serve", "--attention", "eager"], "--attention", "--mode serve"),
    (["--kv-dtype", "fp8"], "--kv-dtype", "--mode train"),
    (["--batch", "8"], "--batch", "--mode train"),
    (["--quantization", "awq"], "--quantization", "--mode train"),
    (["--mode", "serve", "--engine", "vllm", "--gpu", "h100-80gb", "--dropout"], "--dropout",
     "--mode serve with --engine vllm"),
    (["--mode", "serve", "--engine", "vllm", "--gpu", "h100-80gb", "--overhead", "10%"], "--overhead", "--engine vllm"),
    (["--mode", "serve", "--engine", "sglang", "--gpu", "h100-80gb", "--batch", "8"], "--batch", "--engine sglang"),
    (["--mode", "serve", "--engine", "vllm", "--gpu", "h100-80gb", "--cuda-context", "1GiB"], "--cuda-context",
     "--engine vllm"),
])
def test_an_option_the_run_does_not_read_is_refused_naming_it_and_the_run(capsys, argv, flag, run_words):
    """One rule (the option table's runs, builder.model.options.unread): an option given that the mode, or under
    --engine the engine, does not read is refused, never silently ignored."""
    code, out, err = run(capsys, "estimate", "--model", "llama-3-8b", *argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert f"argument {flag}: " in err and run_words in err and "leave it out" in err


def test_options_the_run_reads_are_taken():
    """The same options where the run reads them: --attention under --engine hf (generate's attn_implementation),
    --batch and --kv-dtype serving, --cuda-context under SGLang."""
    for argv in (["--mode", "serve", "--engine", "hf", "--gpu", "h100-80gb", "--attention", "eager"],
                 ["--mode", "serve", "--batch", "8", "--kv-dtype", "fp8"],
                 ["--mode", "serve", "--engine", "sglang", "--gpu", "h100-80gb", "--cuda-context", "1GiB"],
                 ["--micro-batch", "4", "--lora-rank", "8", "--overhead", "10%"]):
        assert main(["estimate", "--model", "llama-3-8b", *argv]) == 0, argv


def test_overhead_is_a_percentage_or_a_size_as_the_calculators_field_is_a_percentage(capsys):
    """--overhead 10% and the calculator's overhead field at 10 (its number is a percentage, FORM_RULES divide by
    100) are one run: the same need; 1.5GiB is a fixed size; the help says which units it takes."""
    from builder.catalog import default_models
    from builder.model.peak import need
    from builder.widgets import calculator

    models = default_models()
    state = calculator.default_state({"model": "llama-3-8b"}, models, "h100-80gb")
    state[calculator.KEY["overhead_fraction"]] = "10"
    code, out, _ = run(capsys, "estimate", "--model", "llama-3-8b", "--overhead", "10%", "--json")
    assert code == 0 and json.loads(out)["need_bytes"] == need(calculator.config_from_state(state, models)).bytes
    code, out, _ = run(capsys, "estimate", "--model", "llama-3-8b", "--overhead", "1.5GiB", "--json")
    assert code == 0 and json.loads(out)["parts"]["overhead/fixed"] == 3 * 2**29
    code, out, _ = run(capsys, "estimate", "--help")
    assert "a bare number is refused" in " ".join(out.split()) and "'10%'" in out


def test_max_seq_len_stops_at_gpt2s_learned_positions(capsys):
    """GPT-2 has 1,024 learned positions (huggingface.co/openai-community/gpt2 config.json n_positions): --max seq-len
    on a B200 answered 303,800 (QA report) where the memory allows far more than the table holds; the answer is the
    table's rows, and says the limit is what binds. A rotary model is not capped (Llama 3 8B trains past its
    max_position_embeddings, 8,192)."""
    code, out, _ = run(capsys, "estimate", "--model", "gpt2", "--seq-len", "512", "--gpu", "b200", "--max", "seq-len")
    assert code == 0 and ("largest seq len that fits on b200: 1024 (the model's learned positions: a longer sequence "
                          "is refused)") in out
    code, out, _ = run(capsys, "estimate", "--model", "gpt2", "--mode", "serve", "--context", "512", "--gpu", "b200",
                       "--max", "seq-len", "--json")
    assert code == 0 and json.loads(out)["max"] == {"question": "context", "gpu": "b200", "value": 1024,
                                                    "limit": "learned positions"}
    code, out, _ = run(capsys, "estimate", "--model", "llama-3-8b", "--seq-len", "16384", "--gpu", "b200", "--max",
                       "seq-len", "--json")
    assert code == 0 and json.loads(out)["max"]["value"] > 8192 and "limit" not in json.loads(out)["max"]


@pytest.mark.parametrize("argv", [
    ["estimate", "--model", "llama-3-8b", "--mode", "serve", "--engine", "sglang", "--gpu", "l40s"],
    ["estimate", "--model", "llama-3-8b", "--gpu", "l40s"],
    ["estimate", "--model", "llama-3-8b", "--gpu", "l40s", "--json"],
    ["models"],
])
def test_a_closed_stdout_ends_quietly_on_every_output_path(argv):
    """`... | head -3` ended in a BrokenPipeError traceback from print_engine (QA report): a reader gone before the
    output is written ends every command the same way, with a pipe's exit status (128 + SIGPIPE) and no traceback."""
    import os

    read, write = os.pipe()
    os.close(read)  # the reader is gone before anything is written
    try:
        result = subprocess.run([sys.executable, "-m", "builder", *argv], stdout=write, stderr=subprocess.PIPE,
                                text=True, cwd=ROOT, stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(ROOT)})
    finally:
        os.close(write)
    assert result.returncode == 141 and result.stderr == "", result.stderr[-2000:]


def test_lora_targets_help_states_the_default_and_peft_s_own(capsys):
    """The default targets stay q,k,v,o (links depend on it); --help says so and that PEFT's own default for Llama
    and Qwen is q_proj and v_proj (PEFT 0.21.2 peft/utils/constants.py TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_
    MAPPING)."""
    from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as PEFT_TARGETS

    assert PEFT_TARGETS["llama"] == PEFT_TARGETS["qwen2"] == PEFT_TARGETS["gemma3_text"] == ["q_proj", "v_proj"]
    code, out, _ = run(capsys, "estimate", "--help")
    words = " ".join(out.split())
    assert code == 0 and "default q,k,v,o" in words and "q_proj and v_proj" in words
    adapters = {}
    for targets in ([], ["--lora-targets", "q,k,v,o"], ["--lora-targets", "q,v"]):
        code, out, _ = run(capsys, "estimate", "--model", "llama-3-8b", "--lora-rank", "8", *targets, "--json")
        adapters[tuple(targets)] = json.loads(out)["parts"]["weights/lora_adapters"]
    # Rank 8 on q, k, v and o of Llama 3 8B's 32 layers: 8 x (4096 + 4096 + 2 x (4096 + 1024) + 4096 + 4096) x 32.
    assert adapters[()] == adapters[("--lora-targets", "q,k,v,o")] > adapters[("--lora-targets", "q,v")]
    assert adapters[()] % (8 * 26_624 * 32) == 0


def test_a_length_left_out_stops_at_learned_positions(capsys):
    """GPT-2 has 1,024 learned positions (transformers' GPT2Model indexes wpe with the position ids): a length left
    out takes the run's default up to them, as the engines default to the model's own limit; one given past them is
    refused, naming the flag."""
    code, out, _ = run(capsys, "estimate", "--model", "gpt2", "--json")
    default = json.loads(out)
    code, out, _ = run(capsys, "estimate", "--model", "gpt2", "--seq-len", "1024", "--json")
    assert code == 0 and json.loads(out)["need_bytes"] == default["need_bytes"]
    code, _, err = run(capsys, "estimate", "--model", "gpt2", "--seq-len", "2048")
    assert code == 2 and err.strip().endswith("so a sequence of 2048 tokens would index past them; at most 1024")
    assert "argument --seq-len" in err
