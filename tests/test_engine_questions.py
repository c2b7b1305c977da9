"""The reverse serving questions (builder.model.engine_questions) hold exactly under the engines' own accounting.

At every answer the engine's own numbers hold (vLLM's block count over the blocks a request takes, the whole part
of its "Maximum concurrency"; SGLang's token pool over a request's whole pages) and one past it they do not: one
more token, one more request, or the next tensor-parallel degree down. Pinned where a published log gives every
input: vLLM prints the largest max_model_len one request may have (its "estimated maximum model length"), and its
"GPU KV cache size: N tokens" is exactly what one request of the largest length takes.
"""

from __future__ import annotations

import dataclasses
import json
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from builder.catalog import default_gpus, default_models
from builder.cli import main
from builder.model import Config
from builder.model.engine_questions import LENGTH_LIMIT, QUESTIONS, answer
from builder.model.engines import EngineSettings, engine_report
from builder.model.questions import tensor_degrees
from tests.page_text import page_text
from tests.test_engines import QWEN3_CODER_480B

MODELS = default_models()
GPUS = default_gpus()
GIB = 2**30
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SERVED = [m for m in MODELS.values() if m.layers <= 96 and m.heads > 0]


@st.composite
def runs(draw, engine: str):
    """A random served configuration on a random catalog GPU, under `engine`'s settings."""
    arch = draw(st.sampled_from(SERVED))
    gpu = draw(st.sampled_from(list(GPUS.values())))
    tp = draw(st.sampled_from(tensor_degrees(arch, 8)))
    # A checkpoint quantised as it ships (gpt-oss's MXFP4 experts) serves in bf16 alone (builder.model.checks).
    dtypes = ["bf16"] if arch.checkpoint_quantization else ["bf16", "fp8", "int4"]
    config = Config(model=arch, mode="serve", tp=tp, kv_dtype=draw(st.sampled_from([None, "fp8", "bf16"])),
                    param_dtype=draw(st.sampled_from(dtypes)))
    share = draw(st.sampled_from([0.5, 0.8, 0.9, 0.92, 0.95]))
    if engine == "vllm":
        settings_ = EngineSettings(gpu_memory_utilization=share, enforce_eager=draw(st.booleans()),
                                   block_size=draw(st.sampled_from([16, 32])))
    else:
        settings_ = EngineSettings(engine="sglang", mem_fraction_static=share, page_size=draw(st.sampled_from([1, 16, 64])))
    return config, settings_, gpu


def values_at(config, settings_, gpu, **changes):
    """The engine's numbers with some settings (or tp) changed."""
    tp = changes.pop("tp", config.tp)
    return engine_report(config.with_changes(tp=tp), dataclasses.replace(settings_, **changes), gpu.usable_bytes,
                         gpu.id).values


@SETTINGS
@given(runs("vllm"), st.integers(1, 64))
def test_vllm_max_model_len_holds_its_target_and_one_more_token_does_not(run, seqs):
    config, engine, gpu = run
    engine = dataclasses.replace(engine, max_num_seqs=seqs)
    assume(values_at(config, engine, gpu)["max_num_batched_tokens"] >= seqs)
    found = answer("max-model-len", config, engine, gpu.usable_bytes, gpu.id)
    below = values_at(config, engine, gpu, max_model_len=1)
    if found.value is None:
        assert not (below["fits"] and below["concurrent_requests"] >= seqs)
        return
    at = values_at(config, engine, gpu, max_model_len=found.value)
    assert at["fits"] and at["num_blocks"] // at["blocks_per_request"] >= seqs
    assert at["max_concurrency"] >= seqs  # the log's own "Maximum concurrency" reads at least the target
    if found.value < 2**24:
        past = values_at(config, engine, gpu, max_model_len=found.value + 1)
        assert not (past["fits"] and past["max_concurrency"] >= seqs)


@SETTINGS
@given(runs("vllm"), st.sampled_from([512, 4096, 32768, 131072]))
def test_vllm_max_num_seqs_fit_at_once_and_one_more_does_not(run, length):
    config, engine, gpu = run
    engine = dataclasses.replace(engine, max_model_len=length)
    found = answer("max-num-seqs", config, engine, gpu.usable_bytes, gpu.id)
    if found.value is None:  # not even one sequence, or a length the engine refuses above the model's own
        one = values_at(config, engine, gpu, max_num_seqs=1)
        assert not (one["fits"] and one["max_concurrency"] >= 1)
        return
    at = values_at(config, engine, gpu, max_num_seqs=found.value)
    assert at["fits"] and at["max_concurrency"] >= found.value
    if found.value < at["max_num_batched_tokens"]:  # vLLM refuses more sequences than tokens per step
        past = values_at(config, engine, gpu, max_num_seqs=found.value + 1)
        assert past["max_concurrency"] < found.value + 1


@SETTINGS
@given(runs("vllm"), st.sampled_from([4096, 32768, 131072, 1_048_576]))
def test_vllm_fewest_tensor_parallel_gpus_start_and_the_next_degree_down_does_not(run, length):
    config, engine, gpu = run
    engine = dataclasses.replace(engine, max_model_len=length)
    found = answer("tensor-parallel-size", config.with_changes(tp=1), engine, gpu.usable_bytes, gpu.id)
    degrees = tensor_degrees(config.model)
    if found.value is not None:
        assert values_at(config, engine, gpu, tp=found.value)["fits"]
    smaller = [t for t in degrees if found.value is None or t < found.value]
    if smaller:
        assert not values_at(config, engine, gpu, tp=smaller[-1])["fits"]


@SETTINGS
@given(runs("sglang"), st.integers(1, 256))
def test_sglang_context_length_holds_its_target_and_one_more_token_does_not(run, requests):
    config, engine, gpu = run
    engine = dataclasses.replace(engine, max_running_requests=requests)
    found = answer("context-length", config, engine, gpu.usable_bytes, gpu.id)
    if found.value is None:
        return
    at = values_at(config, engine, gpu, context_length=found.value)
    page = at["page"]

    def overflows(values, length):
        """Requests of `length` tokens overflow the full pool, or a hybrid model's sliding pool, where each holds
        min(length, window - 1 + a page) (pool_configurator.py HybridSWAPoolConfigurator, commit 003fca8)."""
        paged = -(-length // page) * page
        swa = values["hybrid_swa"] and requests * min(paged, config.model.sliding_window - 1 + page) > values[
            "swa_max_total_num_tokens"]
        return requests * paged > values["max_total_num_tokens"] or swa

    # Every request holds whole pages of the token pool (mem_cache/allocator.py PagedTokenToKVPoolAllocator).
    assert at["fits"] and not overflows(at, found.value)
    if found.value < 2**24:  # one more token overflows a pool, or passes the model's own length (refused)
        past = values_at(config, engine, gpu, context_length=found.value + 1)
        assert past["too_long"] or overflows(past, found.value + 1)


@SETTINGS
@given(runs("sglang"), st.sampled_from([512, 4096, 32768, 131072]))
def test_sglang_max_running_requests_fit_and_one_more_does_not(run, length):
    config, engine, gpu = run
    engine = dataclasses.replace(engine, context_length=length)
    found = answer("max-running-requests", config, engine, gpu.usable_bytes, gpu.id)
    if found.value is None:
        return
    at = values_at(config, engine, gpu, max_running_requests=found.value)
    page, tokens = at["page"], at["max_total_num_tokens"]
    per_request = -(-length // page) * page
    assert found.value * per_request <= tokens and at["max_running_requests"] == found.value
    # A model mixing full and sliding-window layers also needs min(length, window - 1 + a page) tokens a request in
    # its sliding pool (pool_configurator.py HybridSWAPoolConfigurator's admission floor, commit 003fca8).
    swa, swa_per_request = at["swa_max_total_num_tokens"], min(per_request, config.model.sliding_window - 1 + page) \
        if at["hybrid_swa"] else 1
    assert not at["hybrid_swa"] or found.value * swa_per_request <= swa
    # One more either overflows a pool or passes SGLang's cap of half its tokens.
    assert ((found.value + 1) * per_request > tokens or found.value + 1 > tokens // 2
            or (at["hybrid_swa"] and (found.value + 1) * swa_per_request > swa))


@SETTINGS
@given(runs("sglang"), st.sampled_from([4096, 32768, 131072]))
def test_sglang_fewest_tp_size_starts_and_the_next_degree_down_does_not(run, length):
    config, engine, gpu = run
    engine = dataclasses.replace(engine, context_length=length)
    found = answer("tp-size", config.with_changes(tp=1), engine, gpu.usable_bytes, gpu.id)
    if found.value is not None:
        assert values_at(config, engine, gpu, tp=found.value)["fits"]
    smaller = [t for t in tensor_degrees(config.model) if found.value is None or t < found.value]
    if smaller:
        assert not values_at(config, engine, gpu, tp=smaller[-1])["fits"]


@st.composite
def hf_runs(draw):
    """A random served configuration under Hugging Face generate (one GPU, the model's dtype for the cache): any
    catalog model, cache and attention transformers takes (Gemma 2 takes no sdpa: modeling_gemma2.py line 352), but
    gpt-oss's MXFP4 checkpoint, which generate is not modelled for (engine_hf.checked)."""
    arch = draw(st.sampled_from([m for m in SERVED if not m.checkpoint_quantization]))
    gpu = draw(st.sampled_from(list(GPUS.values())))
    # A prompt within the model's learned positions, where it has them (GPT-2's 1,024: a longer one is refused).
    contexts = [n for n in (128, 2048, 8192, 65536) if n <= (arch.learned_positions or n)]
    config = Config(model=arch, mode="serve", param_dtype=draw(st.sampled_from(["bf16", "fp16", "fp8", "int4"])),
                    batch=draw(st.sampled_from([1, 3, 16])), context=draw(st.sampled_from(contexts)))
    attn = draw(st.sampled_from([None, "eager", "flash_attention_2"]))
    cache = draw(st.sampled_from([None, "static"]))
    engine = EngineSettings(engine="hf", attn_implementation=attn, cache_implementation=cache,
                            max_new_tokens=draw(st.sampled_from([1, 2, 20, 512, 4096])),
                            max_cache_len=draw(st.sampled_from([None, 9000])) if cache else None,
                            logits_to_keep=draw(st.sampled_from([None, 0])))
    return config, engine, gpu


def hf_values(config, engine, gpu, batch=None, **changes):
    return engine_report(config.with_changes(batch=batch or config.batch), dataclasses.replace(engine, **changes),
                         gpu.usable_bytes, gpu.id).values


@SETTINGS
@given(hf_runs())
def test_hf_largest_batch_size_fits_and_one_more_prompt_does_not(run):
    """generate's peak (weights, cache, the larger moment's working set) within the CUDA process's total at the
    answer; one more row of input_ids runs out of memory."""
    config, engine, gpu = run
    found = answer("batch-size", config, engine, gpu.usable_bytes, gpu.id)
    if found.value is None:
        assert not hf_values(config, engine, gpu, batch=1)["fits"]
        return
    at = hf_values(config, engine, gpu, batch=found.value)
    assert at["fits"] and at["peak"] <= gpu.usable_bytes and found.report.values["batch"] == found.value
    assert not hf_values(config, engine, gpu, batch=found.value + 1)["fits"]


@SETTINGS
@given(hf_runs())
def test_hf_largest_max_new_tokens_fits_and_one_more_token_does_not(run):
    config, engine, gpu = run
    engine = dataclasses.replace(engine, max_new_tokens=None)
    found = answer("max-new-tokens", config, engine, gpu.usable_bytes, gpu.id)
    if found.value is None:
        assert not hf_values(config, engine, gpu, max_new_tokens=1)["fits"]
        return
    assert hf_values(config, engine, gpu, max_new_tokens=found.value)["fits"]
    if found.value < LENGTH_LIMIT:
        assert not hf_values(config, engine, gpu, max_new_tokens=found.value + 1)["fits"]


@SETTINGS
@given(hf_runs(), st.integers(1, 64), st.integers(1, 5000))
def test_hf_peak_never_falls_as_the_batch_or_the_new_tokens_grow(run, more, tokens):
    """The searches' premise: generate's modelled peak is monotone in the batch and in max_new_tokens."""
    config, engine, gpu = run
    base = hf_values(config, engine, gpu)["peak"]
    assert hf_values(config, engine, gpu, batch=config.batch + more)["peak"] >= base
    assert hf_values(config, engine, gpu, max_new_tokens=engine.max_new_tokens + tokens)["peak"] >= base


def test_one_request_of_the_largest_length_takes_the_logged_kv_cache_size():
    """LMCache issue #1739 (vLLM ~0.10.2, Qwen3-14B): 'Available KV cache memory: 6.51 GiB', 'GPU KV cache size:
    42,656 tokens'. For one sequence the largest --max-model-len is every block: 2,666 blocks x 16 = 42,656."""
    engine = EngineSettings(kv_cache_memory=int(Fraction("6.51") * GIB), max_num_seqs=1)

    def largest(arch) -> int:
        return answer("max-model-len", Config(model=arch, mode="serve"), engine, GPUS["h100-80gb"].usable_bytes,
                      "h100-80gb").value

    # With Qwen3's YaRN enabled (factor 4: 131,072 positions, its model card) the blocks set the limit; the stock
    # config.json's 40,960 positions cap it first (vLLM refuses a longer --max-model-len).
    assert largest(MODELS["qwen3-14b"].with_changes(max_position_embeddings=131_072)) == 42_656
    assert largest(MODELS["qwen3-14b"]) == 40_960


@pytest.mark.parametrize("available, estimated", [("48.66", 205_728), ("55.65", 235_296)])
def test_largest_length_for_one_request_is_vllms_estimated_maximum_model_length(available, estimated):
    """vllm-project/recipes PR #12 (Qwen3-Coder-480B-A35B, 8 x H20): 'the estimated maximum model length is 205728'
    at 48.66 GiB of KV cache (235296 at 55.65 GiB). vLLM's own binary search over max_model_len lands where ours
    does, within the 0.01 GiB rounding of the printed memory (at most 4 blocks of 16 tokens)."""
    def largest(gib: Fraction) -> int:
        engine = EngineSettings(kv_cache_memory=int(gib * GIB), max_num_seqs=1)
        return answer("max-model-len", Config(model=QWEN3_CODER_480B, mode="serve"), engine,
                      GPUS["h100-80gb"].usable_bytes, "h100-80gb").value

    low, high = (largest(Fraction(available) + d) for d in (Fraction(-5, 1000), Fraction(5, 1000)))
    assert low <= estimated <= high and high - low <= 64


@pytest.mark.parametrize("engine, question, target, share", [
    ("vllm", "max-model-len", "--max-num-seqs", []),
    # SGLang 0.5.20 on keeps 7.1 GiB of an L4 back by default (a share of 0.684), where Llama 3.1 8B's weights leave
    # no KV cache (tests/test_engine_sglang.py); 0.85 is SGLang 0.4.3's default, the L4 log's.
    ("sglang", "context-length", "--max-running-requests", ["--mem-fraction-static", "0.85"])])
def test_a_length_asked_without_a_target_is_the_one_the_engine_starts_with(capsys, engine, question, target, share):
    """Without the concurrency target, the largest length is the one the engine starts with: one request of it fits
    (vLLM's kv_cache_utils.py check_enough_kv_cache_memory, SGLang's context_len against max_total_num_tokens), not
    the engine's default batch of 256 requests held at once (128 tokens for Llama 3.1 8B on an L4 in vLLM)."""
    base = ["estimate", "--model", "llama-3.1-8b", "--mode", "serve", "--engine", engine, "--gpu", "l4", "--json",
            *share]
    assert main(base + ["--max", question]) == 0
    alone = json.loads(capsys.readouterr().out)
    assert "starts (its KV" in alone["max"]["asks"]
    tokens = alone["kv_cache_tokens"] if engine == "vllm" else alone["max_total_num_tokens"]
    # One request takes the whole cache, to a block (vLLM: 16 tokens) or a page.
    assert tokens - 16 < alone["max"]["value"] <= tokens
    assert main(base + ["--max", question, target, "4"]) == 0
    four = json.loads(capsys.readouterr().out)
    assert "holds" in four["max"]["asks"] and "4 requests" in four["max"]["asks"]
    # Four requests of the length asked fit in the cache of that run (--max-num-seqs 4 also shrinks vLLM's sampler
    # warm-up, which holds a row of logits per request, so the cache is larger than without it).
    assert 4 * four["max"]["value"] <= (four["kv_cache_tokens"] if engine == "vllm" else four["max_total_num_tokens"])


def test_the_serving_page_quotes_its_example_answer(capsys):
    """content/serving.md's example of --max max-model-len with --max-num-seqs 16 quotes what the command answers
    (an {{< estimate >}} of the same flags: tests/page_text.py)."""
    page = page_text("serving.md")
    assert main(["estimate", "--model", "qwen3-14b", "--mode", "serve", "--engine", "vllm", "--gpu", "h100-80gb",
                 "--max-num-seqs", "16", "--max", "max-model-len", "--json"]) == 0
    value = json.loads(capsys.readouterr().out)["max"]["value"]
    assert f"--max-num-seqs 16 --max max-model-len` gives {value:,} tokens." in page


def test_cli_answers_in_the_engines_words_and_json(capsys):
    base = ["estimate", "--model", "qwen3-14b", "--mode", "serve", "--engine", "vllm", "--gpu", "h100-80gb",
            "--kv-cache-memory", "6.51GiB", "--max-num-seqs", "1"]
    assert main(base + ["--max", "max-model-len"]) == 0
    out = capsys.readouterr().out
    # The blocks would hold one request of 42,656 tokens, but Qwen3-14B's config.json allows 40,960 positions.
    assert "GPU KV cache size: 42,656 tokens, Maximum concurrency for 40,960 tokens per request: 1.04x" in out
    assert out.rstrip().endswith(": 40,960 (the model's own limit: the engine refuses a longer one)")
    assert main(base[:-2] + ["--max", "max-num-seqs", "--max-model-len", "32768", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    # 2,666 blocks over 2,048 blocks per request: the log's 1.30x, one whole request.
    assert data["max"] == {"question": "max_num_seqs", "flag": "--max-num-seqs", "gpu": "h100-80gb", "value": 1,
                           "asks": data["max"]["asks"]} and data["num_blocks"] == 2666


@pytest.mark.parametrize("argv, message", [
    (["--engine", "sglang", "--max", "max-model-len"],
     "argument --max: max-model-len is not a question under --engine sglang; ask context-length, "
     "max-running-requests, tp-size"),
    (["--max", "max-num-seqs"], "argument --max: max-num-seqs is asked under an engine's accounting; add --engine vllm"),
    (["--engine", "vllm", "--max", "seq-len"], "argument --max: seq-len is not a question under --engine vllm"),
    (["--engine", "vllm", "--max", "max-model-len", "--max-model-len", "4096"],
     "argument --max-model-len: --max max-model-len searches it; leave --max-model-len out"),
    (["--engine", "vllm", "--max", "tensor-parallel-size", "--tp", "2"],
     "argument --tp: --max tensor-parallel-size searches it; leave --tp out"),
    (["--engine", "hf", "--max", "batch-size", "--batch", "4"],
     "argument --batch: --max batch-size searches it; leave --batch out"),
    (["--engine", "hf", "--max", "max-new-tokens", "--max-new-tokens", "64"],
     "argument --max-new-tokens: --max max-new-tokens searches it; leave --max-new-tokens out"),
    (["--engine", "hf", "--max", "max-model-len"],
     "argument --max: max-model-len is not a question under --engine hf; ask batch-size, max-new-tokens"),
    (["--max", "batch-size"], "argument --max: batch-size is asked under an engine's accounting; add --engine hf"),
    (["--engine", "vllm", "--max-num-seqs", "9000"],
     "argument --max-num-seqs: max_num_batched_tokens (8192) must be greater than or equal to max_num_seqs (9000)."),
])
def test_a_question_the_engine_does_not_ask_is_one_line_naming_both_options(capsys, argv, message):
    assert main(["estimate", "--model", "qwen3-14b", "--mode", "serve", "--gpu", "h100-80gb"] + argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_every_question_belongs_to_one_engine_and_names_its_flag():
    assert {q.engine for q in QUESTIONS.values()} == {"vllm", "sglang", "hf"}
    assert [q.flag for q in QUESTIONS.values()] == ["--max-model-len", "--max-num-seqs", "--tensor-parallel-size",
                                                    "--context-length", "--max-running-requests", "--tp-size",
                                                    "--batch", "--max-new-tokens"]


def test_cli_answers_generates_questions_in_transformers_words(capsys):
    base = ["estimate", "--model", "llama-3-8b", "--mode", "serve", "--engine", "hf", "--gpu", "h100-80gb",
            "--context", "8192"]
    assert main(base + ["--max-new-tokens", "512", "--max", "batch-size"]) == 0
    out = capsys.readouterr().out
    found = answer("batch-size", Config(model=MODELS["llama-3-8b"], mode="serve", context=8192),
                   EngineSettings(engine="hf", max_new_tokens=512), GPUS["h100-80gb"].usable_bytes, "h100-80gb")
    assert "input_ids rows" in out and "max_new_tokens=512" in out and out.rstrip().endswith(f": {found.value:,}")
    assert main(base + ["--batch", "4", "--max", "max-new-tokens", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["max"]["question"] == "max_new_tokens" and data["max"]["flag"] == "--max-new-tokens"
    assert data["max_new_tokens"] == data["max"]["value"] and data["fits"] and data["batch"] == 4
