"""vLLM's startup accounting (builder.model.engines) pinned to published vLLM logs.

A log prints "Available KV cache memory: X GiB" rounded to 0.01 GiB; given that memory (vLLM's own
--kv-cache-memory), the block count must land inside the range the rounding allows, and the logged token count
and concurrency must follow from it exactly as vllm/v1/core/kv_cache_utils.py computes them. Error texts are
vLLM's own.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import pytest

from builder.catalog import default_gpus, default_models
from builder.cli import main
from builder.model import Config
from builder.model.architecture import Architecture
from builder.model.engines import LOG_LINE, EngineSettings, engine_report
from tests.page_text import page_text

MODELS = default_models()
GIB = 2**30
H100 = default_gpus()["h100-80gb"]


def report(arch, gpu_total=H100.usable_bytes, gpu_id="h100-80gb", *, kv_dtype=None, tp=1, pp=1, **settings):
    config = Config(model=arch, mode="serve", kv_dtype=kv_dtype, tp=tp, pp=pp)
    return engine_report(config, EngineSettings(**settings), gpu_total, gpu_id)


def given_memory(arch, printed_gib: str, max_model_len: int, **kwargs):
    """The report for the log's KV memory, and the block counts its 0.01 GiB rounding allows."""
    r = report(arch, kv_cache_memory=int(Fraction(printed_gib) * GIB), max_model_len=max_model_len, **kwargs)
    page_all_layers = r.values["page"] * r.values["stage_layers"]
    low, high = ((Fraction(printed_gib) + d) * GIB // page_all_layers for d in (Fraction(-5, 1000), Fraction(5, 1000)))
    return r, low, high


@pytest.mark.parametrize("model_id, printed, max_len, kv_dtype, tokens, concurrency", [
    # LMCache issue #1739 (vLLM ~0.10.2, Qwen3-14B, one GPU): "Available KV cache memory: 6.51 GiB",
    # "GPU KV cache size: 42,656 tokens", "Maximum concurrency for 32,768 tokens per request: 1.30x".
    ("qwen3-14b", "6.51", 32768, None, 42_656, "1.30"),
    # vllm PR #57047 (Sep 2026, AWQ Qwen3-4B, 48 GB GPU): "Current kv cache memory in use is 36.88 GiB",
    # "GPU KV cache size: 268,560 tokens, Maximum concurrency for 2,048 tokens per request: 131.13x".
    ("qwen3-4b", "36.88", 2048, None, 268_560, "131.13"),
    # vllm issue #25350 (fp8 KV cache, a Qwen3-30B-A3B shape: 48 layers x 4 KV heads x 128, 1 byte, no scales):
    # "Available KV cache memory: 10.55 GiB", "GPU KV cache size: 230,528 tokens",
    # "Maximum concurrency for 100,000 tokens per request: 2.31x".
    ("qwen3-30b-a3b", "10.55", 100_000, "fp8", 230_528, "2.31"),
])
def test_blocks_tokens_and_concurrency_follow_the_logged_kv_memory(model_id, printed, max_len, kv_dtype, tokens,
                                                                   concurrency):
    r, low, high = given_memory(MODELS[model_id], printed, max_len, kv_dtype=kv_dtype)
    blocks = r.values["num_blocks"]
    assert low <= blocks <= high
    # The log's own numbers come from the log's block count (tokens / 16) exactly as vLLM derives them.
    logged_blocks = math.ceil(tokens / 16)
    assert low <= logged_blocks <= high
    assert r.values["blocks_per_request"] == math.ceil(max_len / 16)
    assert f"{logged_blocks / r.values['blocks_per_request']:.2f}" == concurrency
    # kv_cache_utils.py get_kv_cache_capacity: tokens = int(blocks / blocks per request x max_model_len).
    assert int(Fraction(logged_blocks, r.values["blocks_per_request"]) * max_len) == tokens


def test_qwen3_14b_block_count_is_the_logged_one():
    # LMCache #1739: 6.51 GiB / (16 tokens x 40 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes) = 2,666 blocks.
    r, _, _ = given_memory(MODELS["qwen3-14b"], "6.51", 32768)
    assert r.values["num_blocks"] == 2666 and r.values["kv_cache_tokens"] == 42_656
    assert LOG_LINE.format(42_656, 32768, float(r.values["max_concurrency"])) == \
        "GPU KV cache size: 42,656 tokens, Maximum concurrency for 32,768 tokens per request: 1.30x"


# Qwen3-Coder-480B-A35B (config.json): 62 layers, 96 query heads, 8 KV heads of 128, hidden 6144.
QWEN3_CODER_480B = Architecture(name="qwen3-coder-480b-a35b", layers=62, hidden=6144, heads=96, kv_heads=8,
                                head_dim=128, vocab=151936, ffn=0, experts=160, top_k=8, expert_ffn=2560,
                                qk_norm=True, family="qwen3")


@pytest.mark.parametrize("available, estimated", [("48.66", 205_728), ("55.65", 235_296)])
def test_a_request_that_does_not_fit_gets_vllms_own_error(available, estimated):
    # vllm-project/recipes PR #12 (8 x H20, DP 8): "To serve at least one request with the models's max seq len
    # (262144), (62.00 GiB KV cache is needed, which is larger than the available KV cache memory (48.66 GiB).
    # Based on the available memory, the estimated maximum model length is 205728." (55.65 GiB: 235296).
    # vLLM since 2026-01 prints GiB with format_gib (62.0) and since 2026-05 says "model's".
    def at(gib: Fraction):
        return report(QWEN3_CODER_480B, kv_cache_memory=int(gib * GIB), max_model_len=262_144)

    r = at(Fraction(available))
    assert not r.fits
    assert r.values["needed"] == 62 * GIB  # 253,952 B/token x 262,144 tokens
    # The log's estimate lies within what the printed memory's 0.01 GiB rounding allows.
    low, high = (at(Fraction(available) + d).values["estimated_max_model_len"] for d in (Fraction(-5, 1000),
                                                                                        Fraction(5, 1000)))
    assert low <= estimated <= high and high - low <= 64
    assert r.values["error"].startswith(
        f"To serve at least one request with the model's max seq len (262144), (62.0 GiB KV cache is needed, which "
        f"is larger than the available KV cache memory ({available} GiB). Based on the available memory, the "
        f"estimated maximum model length is ")


def test_needed_memory_prints_as_vllm_prints_it():
    # vllm issue #34076 (Qwen3-Coder-30B-A3B, the Qwen3-30B-A3B attention: 48 layers x 4 KV heads x 128, bf16):
    # "(24.0 GiB KV cache is needed, ..." at max seq len 262144: 98,304 B/token x 262,144 = 24 GiB exactly.
    coder = MODELS["qwen3-30b-a3b"].with_changes(max_position_embeddings=262_144)  # Qwen3-Coder's config.json
    r = report(coder, kv_cache_memory=int(Fraction("3.18") * GIB), max_model_len=262_144)
    assert r.values["needed"] == 24 * GIB
    assert "(24.0 GiB KV cache is needed, which is larger than the available KV cache memory (3.18 GiB)" \
        in r.values["error"]


def test_the_request_is_a_share_of_the_gpus_total_and_the_rest_goes_to_blocks():
    # vllm/v1/worker/utils.py request_memory: ceil(total x utilization); vllm/config/cache.py default 0.92.
    r = report(MODELS["qwen3-14b"], max_model_len=32768)
    v = r.values
    assert v["requested"] == math.ceil(H100.usable_bytes * Fraction(92, 100))
    parts = {p.name: p.bytes for p in r.parts}
    assert parts["weights"] == 14_768_307_200 * 2  # bf16 weights as loaded
    # Everything the engine requested is accounted for, and the rest of the GPU is outside its budget.
    assert sum(parts.values()) - parts["unrequested"] == pytest.approx(v["requested"], abs=8)
    assert sum(parts.values()) == pytest.approx(H100.usable_bytes, abs=8)
    # `vllm serve` on an H100 profiles 8192 tokens over 1024 requests (vllm/engine/arg_utils.py get_batch_defaults).
    assert (v["max_num_batched_tokens"], v["profile_requests"]) == (8192, 1024)
    # --enforce-eager drops the CUDA-graph estimate and gives it to the KV cache.
    eager = report(MODELS["qwen3-14b"], max_model_len=32768, enforce_eager=True)
    assert eager.values["available"] - v["available"] == v["cuda_graphs"] > 0


def test_default_batch_limits_are_clamped_as_vllm_settles_them():
    # vllm/engine/arg_utils.py _set_default_max_num_seqs_and_batched_tokens_args (v0.27.1): a default
    # max_num_batched_tokens is at most max_num_seqs x max_model_len, then a default max_num_seqs at most the tokens.
    short = report(MODELS["qwen3-14b"], max_model_len=1024, max_num_seqs=4).values
    assert (short["max_num_batched_tokens"], short["max_num_seqs"], short["profile_requests"]) == (4096, 4, 4)
    few = report(MODELS["qwen3-14b"], max_model_len=32768, max_num_batched_tokens=512).values
    assert (few["max_num_batched_tokens"], few["max_num_seqs"]) == (512, 512)  # no refusal: max_num_seqs defaulted
    given = report(MODELS["qwen3-14b"], max_model_len=1024, max_num_seqs=4, max_num_batched_tokens=8192).values
    assert given["max_num_batched_tokens"] == 8192  # a value given is kept
    with pytest.raises(ValueError, match=r"max_num_batched_tokens \(512\) must be greater than or equal to "
                                         r"max_num_seqs \(1024\)"):
        report(MODELS["qwen3-14b"], max_model_len=32768, max_num_batched_tokens=512, max_num_seqs=1024)


# End to end, vllm PR #57047's "Current kv cache memory in use is 36.88 GiB" (AWQ Qwen3-4B, 47.37 GiB, utilization
# 0.85) within 3%, and each log's token count given its KV memory: builder/validate/published.py, tests/test_published.py.


def test_tensor_parallel_ranks_hold_their_kv_heads_and_pipeline_stages_their_layers():
    # TP 16 > 8 KV heads: each rank keeps one KV head (vllm llama.py: num_kv_heads = max(1, total // tp)).
    arch = MODELS["llama-3-70b"]
    one = report(arch, tp=8, kv_cache_memory=GIB, max_model_len=4096).values
    assert one["page"] == 16 * 2 * 1 * 128 * 2
    # Two pipeline stages of 40 layers each: each worker's blocks of one layer are the same size; the engine takes
    # the worker with the fewest blocks (kv_cache_utils.py get_kv_cache_configs).
    staged = report(arch, tp=4, pp=2, kv_cache_memory=4 * GIB, max_model_len=4096)
    assert staged.values["stage_layers"] == 40
    assert staged.values["num_blocks"] == 4 * GIB // (16 * 2 * 2 * 128 * 2) // 40


def test_cli_speaks_vllms_flags_and_words(capsys):
    assert main(["estimate", "--model", "qwen3-14b", "--mode", "serve", "--engine", "vllm", "--gpu", "h100-80gb",
                 "--max-model-len", "32768", "--kv-cache-memory", "6.51GiB"]) == 0
    out = capsys.readouterr().out
    assert "Available KV cache memory: 6.51 GiB" in out
    assert "GPU KV cache size: 42,656 tokens, Maximum concurrency for 32,768 tokens per request: 1.30x" in out
    assert main(["estimate", "--model", "qwen3-14b", "--mode", "serve", "--engine", "vllm", "--gpu", "h100-80gb",
                 "--max-model-len", "32768", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kv_cache_tokens"] == data["num_blocks"] * 16 and data["fits"]
    assert set(data["parts"]) >= {"weights", "activations/profile_peak", "overhead/non_torch", "kv_cache"}


def test_the_serving_page_quotes_what_its_command_prints(capsys):
    """content/serving.md quotes the numbers of the command's own two lines for the Qwen3-14B example (a whole H100
    at vLLM's default utilisation), beside the published log's, which need the log's --kv-cache-memory."""
    page = page_text("serving.md")
    assert main(["estimate", "--model", "qwen3-14b", "--mode", "serve", "--engine", "vllm", "--gpu", "h100-80gb",
                 "--max-model-len", "32768"]) == 0
    out = capsys.readouterr().out
    memory = out.split("Available KV cache memory: ")[1].split(" GiB")[0]
    tokens, times = out.split("GPU KV cache size: ")[1].split(" tokens")[0], out.split("per request: ")[1].split()[0]
    assert f"gives {memory} GiB of available KV cache memory and {tokens} tokens ({times})" in page


# --vllm-version: the releases' own sources (PyPI wheels of each release), pinned to published logs.
LLMD_019 = dict(gpu_memory_utilization=0.95, max_model_len=8192)  # llm-d-planner accuracy/results/v0.19.0, d3121e0


@pytest.mark.parametrize("model_id, logged", [
    # llm-d-planner accuracy/results/v0.19.0/logs (commit d3121e0), vLLM 0.19.0 on one H100, 0.95, 8192, 1,024
    # sequences: "Available KV cache memory: 58.11 GiB" (Llama 3.1 8B), "54.12 GiB" (Gemma 2 9B), "57.50" (Qwen3-8B).
    ("llama-3.1-8b", "58.11"), ("gemma-2-9b", "54.12"), ("qwen3-8b", "57.50"),
])
def test_a_vllm_0_19_log_is_met_at_its_release_and_missed_at_0_28(model_id, logged):
    """At 0.28 the same dense models take the V2 model runner (vllm/config/vllm.py use_v2_model_runner at v0.28.0),
    which estimates no CUDA graphs (gpu/model_runner.py profile_cudagraph_memory: return 0) and warms the sampler on
    the logits alone: 1.7 to 5.3% more than the 0.19 logs. The default, 0.33.0, takes the graphs out again and warms
    top-k/top-p through FlashInfer: within 1% under them."""
    at_release = report(MODELS[model_id], vllm_version="0.19", **LLMD_019).values["available"] / GIB
    at_028 = report(MODELS[model_id], vllm_version="0.28", **LLMD_019).values["available"] / GIB
    newest = report(MODELS[model_id], **LLMD_019).values["available"] / GIB
    assert abs(at_release / Fraction(logged) - 1) < Fraction(5, 1000)
    assert at_028 / Fraction(logged) - 1 > Fraction(15, 1000)
    assert -Fraction(1, 100) < newest / Fraction(logged) - 1 < 0


def test_vllm_0_11_logs_are_the_pytorch_sort_of_0_11_1():
    """llm-d/llm-d-benchmark config_explorer/empirical-vllm-memory-results.md (commit 4f4d449, "vLLM version: 0.11.0"):
    Llama-3.1-8B on one H100 at 0.9, --max-model-len 16000, --block-size 128: 4.76 GiB of peak activation and 51.38
    GiB available. PyTorch's sort (38 B a logit, v0.11.1 on) meets both; FlashInfer's sampler, 0.11.0's default
    where FlashInfer is installed (14 B), would leave 2.9 GiB more."""
    settings = dict(max_model_len=16_000, block_size=128)
    sort = report(MODELS["llama-3.1-8b"], vllm_version="0.11.1", **settings).values
    flashinfer = report(MODELS["llama-3.1-8b"], vllm_version="0.11.0", **settings).values
    assert abs(sort["profile_peak"] / GIB / Fraction("4.76") - 1) < Fraction(2, 100)
    assert abs(sort["available"] / GIB / Fraction("51.38") - 1) < Fraction(5, 1000)
    assert flashinfer["available"] / GIB - Fraction("51.38") > Fraction(28, 10)


def test_each_release_selects_its_default_share_graphs_and_sampler_tensors():
    arch, r = MODELS["llama-3.1-8b"], 1024 * 128256  # 1,024 logits rows of Llama's vocabulary on an H100
    hidden = (8192 + 2 * 1024) * 4096 * 2  # the profile run's hidden states (all tokens, the last ones, rand_like)
    buffer = 132 * 128256 * 4  # the Triton kernel's cached rows, one an SM of the H100 (catalog: 132)
    versions = ("0.10", "0.11.1", "0.19", "0.20", "0.21")
    values = {v: engine_report(Config(model=arch, mode="serve"), EngineSettings(vllm_version=v, max_model_len=8192),
                               H100.usable_bytes, "h100-80gb", H100).values for v in versions}
    # vllm/config/cache.py: 0.9 up to v0.19.0, 0.92 from v0.20.0.
    assert [values[v]["utilization"] for v in ("0.19", "0.20")] == [Fraction(9, 10), Fraction(92, 100)]
    # gpu_worker.py: the CUDA-graph estimate comes out of the budget from v0.20.0 (VLLM_MEMORY_PROFILER_ESTIMATE_
    # CUDAGRAPHS defaults to 1), and is measured but left out before.
    graphs = values["0.20"]["cuda_graphs"]
    assert (values["0.19"]["graphs_in_budget"], values["0.20"]["graphs_in_budget"]) == (0, graphs)
    # Bytes per logit at the sampler's peak (the V1 model runner, Llama's default up to v0.25): bf16 logits 2 + fp32
    # copy 4 + FlashInfer's masked logits and softmax 8 (v0.10), PyTorch's sort 32 (v0.11.1), Triton's probabilities
    # and exponential draw 8 with its buffer (v0.19; from v0.21.0 gpu_model_runner.py _dummy_sampler_run also warms
    # forward_native after FlashInfer's sampler, so the Triton path's peak holds with FlashInfer on).
    assert [values[v]["profile_sampler"] - hidden for v in versions] == [
        r * 14, r * 38, r * 14 + buffer, r * 14 + buffer, r * 14 + buffer]
    # An fp32 model's logits are the fp32 ones: Sampler.forward's .to(torch.float32) copies nothing.
    fp32 = engine_report(Config(model=arch, mode="serve", precision="fp32"),
                         EngineSettings(vllm_version="0.11.1", max_model_len=8192), H100.usable_bytes, "h100-80gb")
    assert fp32.values["profile_sampler"] == r * (4 + 32) + (8192 + 2 * 1024) * 4096 * 4
    # Left out, v0.33.0's rules: 0.92, graphs subtracted, the V2 runner's second warm-up pass with FlashInfer.
    newest = report(arch, max_model_len=8192).values
    assert (newest["utilization"], newest["v2_runner"], newest["graphs_in_budget"]) == (Fraction(92, 100), 1, graphs)
    assert newest["profile_sampler"] == r * (2 + 4 + 8) + (8192 + 1024) * 4096 * 2


@pytest.mark.parametrize("version, dense, moe", [
    # vllm/config/vllm.py VllmConfig.use_v2_model_runner (VLLM_USE_V2_MODEL_RUNNER unset): v0.21.0 has no default
    # (V1); v0.26.0 to v0.28.0 `is_default_v2_architecture or not model_config.is_moe`; v0.29.0 on, V2 on CUDA unless
    # a feature is unsupported.
    ("0.21", 0, 0), ("0.26", 1, 0), ("0.28", 1, 0), ("0.29", 1, 1), ("0.33", 1, 1),
])
def test_the_model_runner_by_release(version, dense, moe):
    assert report(MODELS["llama-3.1-8b"], vllm_version=version, max_model_len=8192).values["v2_runner"] == dense
    assert report(MODELS["qwen3-30b-a3b"], vllm_version=version, max_model_len=8192).values["v2_runner"] == moe


def test_the_v2_runner_estimates_its_graphs_from_0_29():
    """vllm/v1/worker/gpu/model_runner.py profile_cudagraph_memory returns 0 in v0.26.0 to v0.28.0 ("It is TBD whether
    we keep this API"): the graphs are captured after the KV cache, outside the budget. From v0.29.0 it captures and
    extrapolates (gpu/cudagraph_utils.py profile_cudagraph_memory), and gpu_worker.py subtracts the estimate. The V1
    runner, an MoE model's at 0.28, subtracts it from v0.20.0."""
    def graphs(model, version):
        return report(MODELS[model], vllm_version=version, max_model_len=8192).values["graphs_in_budget"]

    assert graphs("llama-3.1-8b", "0.28") == 0 and graphs("llama-3.1-8b", "0.29") > 0
    assert graphs("qwen3-30b-a3b", "0.28") == graphs("llama-3.1-8b", "0.29") > 0
    parts = {p.name: p for p in report(MODELS["llama-3.1-8b"], vllm_version="0.28", max_model_len=8192).parts}
    assert "outside the KV budget" in parts["overhead/cuda_graphs"].simplification
    assert "return 0" in parts["overhead/cuda_graphs"].source


@pytest.mark.parametrize("version, flashinfer, extra, copy, hidden_rows, buffer", [
    # The V2 runner's warm-up (gpu/model_runner.py _dummy_sampler_run, gpu/sample/sampler.py): up to v0.32.0 one
    # pass with no sampling parameter set, so the bf16 logits alone, whatever VLLM_USE_FLASHINFER_SAMPLER says.
    ("0.29", "1", 0, 0, 1, False), ("0.32", "0", 0, 0, 1, False),
    # v0.33.0's second pass (SamplingParams.for_sampler_warmup): an fp32 copy of the logits, then FlashInfer's
    # top_k_top_p_sampling_from_logits (masked logits and softmax, 8 B) or, with it off, the Triton kernel in place
    # beside its buffer and gumbel_sample.
    ("0.33", "1", 8, 4, 1, False), ("0.33", "0", 0, 4, 1, True),
    # The V1 runner (Llama up to v0.25), with FlashInfer's sampler given: 0.10's default (on) or the sort (off, as
    # forward_native sorts); from 0.17 the Triton kernel (off); from 0.21 both take the Triton path's peak.
    ("0.10", "0", 32, 4, 2, False), ("0.11.1", "1", 8, 4, 2, False), ("0.19", "1", 8, 4, 2, False),
    ("0.19", "0", 8, 4, 2, True), ("0.21", "0", 8, 4, 2, True), ("0.21", "1", 8, 4, 2, True),
])
def test_the_sampler_warm_up_by_release_runner_and_flashinfer(version, flashinfer, extra, copy, hidden_rows, buffer):
    v = engine_report(Config(model=MODELS["llama-3.1-8b"], mode="serve"),
                      EngineSettings(vllm_version=version, vllm_use_flashinfer_sampler=flashinfer, max_model_len=8192),
                      H100.usable_bytes, "h100-80gb", H100).values
    assert (v["sampler_extra"], v["sampler_copy"], v["sampler_hidden_rows"]) == (extra, copy, hidden_rows)
    assert v["profile_sampler"] == (1024 * 128256 * (2 + copy + extra) + (8192 + hidden_rows * 1024) * 4096 * 2
                                    + (132 * 128256 * 4 if buffer else 0))


def test_flashinfers_sampler_default_by_release():
    """vllm/envs.py VLLM_USE_FLASHINFER_SAMPLER with FlashInfer installed: on in v0.10.1.1 (TopKTopPSampler takes it
    when FlashInfer imports), opt-in from v0.11.1 (default None), on again from v0.21.0 (default True, read at v0.21.0,
    v0.22.0, v0.28.0 and v0.33.0)."""
    def default(version):
        return report(MODELS["llama-3.1-8b"], vllm_version=version, max_model_len=8192).values["flashinfer_sampler"]
    assert [default(v) for v in ("0.10.0", "0.11.0", "0.11.1", "0.19", "0.20", "0.21", "0.28", "0.33")] == [
        1, 1, 0, 0, 0, 1, 1, 1]
    # Given, the variable wins over the release's default.
    assert report(MODELS["llama-3.1-8b"], vllm_version="0.19", vllm_use_flashinfer_sampler="1",
                  max_model_len=8192).values["flashinfer_sampler"] == 1
    values = report(MODELS["llama-3.1-8b"], vllm_version="0.19", max_model_len=8192).values
    assert (values["flashinfer_sampler"], report(MODELS["llama-3.1-8b"], max_model_len=8192).values[
        "flashinfer_sampler"]) == (0, 1)


def test_the_sliding_window_holds_the_tokens_in_flight():
    """vllm/v1/kv_cache_interface.py SlidingWindowSpec.max_admission_blocks_per_request (v0.26.0 on): the window, the
    tokens in flight (vllm/config/vllm.py max_in_flight_tokens: max_num_batched_tokens for each of
    max_concurrent_batches, 2 with one stage and asynchronous scheduling, vLLM's default), at most max_model_len, and
    one block; v0.24.0's max_memory_usage_bytes: one batch. Gemma 2 9B (window 4,096), 1,024 tokens a step:
    ceil(6,143 / 16) + 1 = 385 blocks at 0.33 against ceil(5,119 / 16) + 1 = 321 at 0.24."""
    def blocks(version):
        return report(MODELS["gemma-2-9b"], vllm_version=version, max_model_len=8192,
                      max_num_batched_tokens=1024).values["sliding_blocks"]

    assert (blocks("0.24"), blocks("0.33")) == (321, 385)


def test_the_160_gib_batch_tier_is_0_28s_and_after():
    # vllm/engine/arg_utils.py get_batch_defaults: v0.27.1 has the 70 GiB tier alone, so a B200 profiles 8192 tokens;
    # v0.28.0 to v0.33.0 give it 16384.
    b200 = default_gpus()["b200"]
    for version, tokens in ((None, 16384), ("0.28", 16384), ("0.27.1", 8192)):
        values = report(MODELS["qwen3-8b"], b200.usable_bytes, "b200", vllm_version=version, max_model_len=8192).values
        assert values["max_num_batched_tokens"] == tokens


def test_a_release_prints_its_two_log_lines(capsys):
    assert main(["estimate", "--model", "llama-3.1-8b", "--mode", "serve", "--engine", "vllm", "--gpu", "h100-80gb",
                 "--gpu-memory-utilization", "0.95", "--max-model-len", "8192", "--vllm-version", "0.19.0"]) == 0
    out = capsys.readouterr().out
    assert "served by vLLM 0.19.0 on" in out
    assert "\nGPU KV cache size: " in out and " tokens\nMaximum concurrency for 8,192 tokens per request: " in out
    # kv_cache_utils.py update_kv_cache_capacity: one line from v0.28.0 (v0.27.1: two).
    for version, lines in (("0.27.1", 2), ("0.28", 1)):
        assert main(["estimate", "--model", "llama-3.1-8b", "--mode", "serve", "--engine", "vllm", "--gpu",
                     "h100-80gb", "--max-model-len", "8192", "--vllm-version", version]) == 0
        out = capsys.readouterr().out
        assert out.count("GPU KV cache size: ") == 1 and out.count("Maximum concurrency for ") == 1
        assert ("tokens, Maximum concurrency" in out) == (lines == 1)
    assert main(["estimate", "--model", "llama-3.1-8b", "--mode", "serve", "--engine", "vllm", "--gpu", "h100-80gb",
                 "--max-model-len", "8192"]) == 0
    assert "served by vLLM 0.33.0 on" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--vllm-version", "0.9"], "argument --vllm-version: '0.9' is not modelled: give a release from 0.10 to 0.33"),
    (["--vllm-version", "0.34"], "argument --vllm-version: '0.34' is not modelled: give a release from 0.10 to 0.33"),
    (["--vllm-version", "latest"], "argument --vllm-version: 'latest' is not a vLLM release such as 0.19 or 0.19.0"),
    (["--gpu-memory-utilization", "1.5"], "argument --gpu-memory-utilization: must be in (0, 1], got 1.5"),
    (["--tp", "3"], "argument --tp: 3 does not divide the 40 attention heads"),
    (["--kv-cache-memory", "1GiB"], "argument --kv-cache-memory: the engine would refuse this run (--max-model-len "
                                    "also moves it): To serve at least one request with the model's max seq len "
                                    "(32768), (5.0 GiB KV cache"),
])
def test_bad_engine_input_gets_one_line_naming_the_flag(capsys, argv, message):
    base = ["estimate", "--model", "qwen3-14b", "--mode", "serve", "--engine", "vllm", "--gpu", "h100-80gb",
            "--max-model-len", "32768"]
    assert main(base + argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_flashinfers_sampler_is_a_vllm_flag_of_0_or_1(capsys):
    base = ["estimate", "--model", "llama-3.1-8b", "--mode", "serve", "--gpu", "h100-80gb"]
    with pytest.raises(SystemExit):
        main(base + ["--engine", "vllm", "--vllm-use-flashinfer-sampler", "2"])
    assert "argument --vllm-use-flashinfer-sampler: invalid choice: '2'" in capsys.readouterr().err
    assert main(base + ["--engine", "sglang", "--vllm-use-flashinfer-sampler", "0"]) == 2
    assert "--vllm-use-flashinfer-sampler" in capsys.readouterr().err
    assert main(base + ["--engine", "vllm", "--max-model-len", "8192", "--vllm-use-flashinfer-sampler", "0",
                        "--json"]) == 0
    off = json.loads(capsys.readouterr().out)
    assert main(base + ["--engine", "vllm", "--max-model-len", "8192", "--json"]) == 0
    on = json.loads(capsys.readouterr().out)
    # v0.33.0 with FlashInfer's sampler off: the Triton kernel in place and its 132-row buffer instead of FlashInfer's
    # 8 bytes a logit (1,024 x 128,256 logits on an H100).
    assert on["parts"]["activations/profile_peak"] - off["parts"]["activations/profile_peak"] == (
        1024 * 128256 * 8 - 132 * 128256 * 4)


def test_a_request_holds_the_models_own_length_when_no_flag_gives_one(capsys):
    """vLLM derives max_model_len from config.json when --max-model-len is not given (vllm/config/model.py
    _get_and_verify_max_len): Llama 3.1 8B's max_position_embeddings, 131,072 (huggingface.co/meta-llama/Llama-3.1-8B
    config.json). One such request's KV cache is 131,072 x 128 KiB = 16 GiB, more than a 24 GB card leaves, so vLLM
    refuses at start-up: the failure the RTX 3090 user of vllm-project/vllm issue #10517 avoided with a shorter
    --max-model-len."""
    base = ["estimate", "--model", "llama-3.1-8b", "--mode", "serve", "--engine", "vllm", "--gpu", "rtx-3090"]
    assert main(base) == 2
    err = capsys.readouterr().err
    # Neither flag was given: the error names --engine and what would change it, the length first (QA: it named
    # --gpu-memory-utilization, which the user never typed).
    assert ("argument --engine: the engine would refuse this run at its defaults (change --max-model-len (or "
            "--context) or --gpu-memory-utilization)") in err and "argument --gpu-memory-utilization" not in err
    assert "the model's max seq len (131072), (16.0 GiB KV cache is needed" in err
    # Given, a flag that moves it is named, the other listed.
    assert main(base + ["--gpu-memory-utilization", "0.9"]) == 2
    assert ("argument --gpu-memory-utilization: the engine would refuse this run (--max-model-len also moves it)"
            in capsys.readouterr().err)
    # A --context given stands for the engine's length flag; a model without its own limit takes the run's context.
    assert main(base + ["--context", "8192"]) == 0
    assert "Maximum concurrency for 8,192 tokens per request" in capsys.readouterr().out
    assert main(base + ["--context", "4096"]) == 0  # typed out, the default value is given all the same
    assert "Maximum concurrency for 4,096 tokens per request" in capsys.readouterr().out
    assert report(MODELS["llama-3.1-8b"]).values["max_model_len"] == 131_072
    assert report(MODELS["llama-3.1-8b"].with_changes(max_position_embeddings=0)).values["max_model_len"] == 4096


@pytest.mark.parametrize("words, loaded", [
    # llm-d-planner's vLLM 0.19.0 H100 logs (builder/validate/published.py LLMD): "Model loading took 8.49 GiB" with
    # --quantization fp8 (linear weights quantised at load, embeddings and output layer kept bf16), "29.98 GiB" with
    # --dtype float32 (weights and the rotary table in fp32).
    (["--quantization", "fp8"], "8.49"),
    (["--dtype", "float32"], "29.98"),
])
def test_the_engines_words_for_weight_formats(capsys, words, loaded):
    base = ["estimate", "--model", "llama-3.1-8b", "--mode", "serve", "--engine", "vllm", "--gpu", "h100-80gb",
            "--max-model-len", "8192", "--json"]
    assert main(base + words) == 0
    parts = json.loads(capsys.readouterr().out)["parts"]
    assert (parts["weights"] + parts["weights/rotary_table"]) / GIB == pytest.approx(float(loaded), rel=0.001)


@pytest.mark.parametrize("words, message", [
    (["--quantization", "gptq", "--param-dtype", "int4"], "argument --quantization: give it once, with "
                                                          "--quantization or --param-dtype, not both"),
    (["--quantization", "compressed-tensors"], "argument --quantization: 'compressed-tensors' is not modelled"),
    (["--quantization", "int3"], "argument --quantization: 'int3' is not one of awq, awq_marlin, gptq"),
    (["--dtype", "bf16"], "argument --dtype: 'bf16' is not one of auto, bfloat16, float16, half, float32, float"),
    (["--dtype", "half", "--precision", "fp16"], "argument --dtype: give it once, with --dtype or --precision"),
    # vLLM's get_supported_act_dtypes: AWQ's own kernel runs float16 only, fp8 float16 and bfloat16.
    (["--quantization", "awq", "--dtype", "bfloat16"],
     "argument --dtype: torch.bfloat16 is not supported for quantization method awq. Supported dtypes: "
     "[torch.float16]"),
    (["--quantization", "fp8", "--dtype", "float32"],
     "argument --dtype: torch.float32 is not supported for quantization method fp8. Supported dtypes: "
     "[torch.float16, torch.bfloat16]"),
])
def test_the_engines_words_refuse_what_they_do_not_name(capsys, words, message):
    base = ["estimate", "--model", "llama-3.1-8b", "--mode", "serve", "--engine", "vllm", "--gpu", "h100-80gb"]
    assert main(base + words) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


@pytest.mark.parametrize("argv, message", [
    # vllm/config/model.py _get_and_verify_max_len: a length above config.json's max_position_embeddings is refused
    # unless VLLM_ALLOW_LONG_MAX_MODEL_LEN is set (the message as published logs print it, e.g. a Qwen2.5-72B run:
    # "User-specified max_model_len (131072) is greater than the derived max_model_len (max_position_embeddings=32768
    # or model_max_length=None in model's config.json)").
    (["--model", "llama-3-8b", "--engine", "vllm", "--max-model-len", "16384"],
     "argument --max-model-len: the engine would refuse this run: User-specified max_model_len (16384) is greater "
     "than the derived max_model_len (max_position_embeddings=8192 or model_max_length=None in model's "
     "config.json)."),
    # GPT-2's learned positions: n_positions 1,024, which is also vLLM's default length for it.
    (["--model", "gpt2", "--engine", "vllm", "--max-model-len", "2048"],
     "(n_positions=1024 or model_max_length=None"),
    # SGLang configs/model_config.py, unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN is set.
    (["--model", "llama-3-8b", "--engine", "sglang", "--context-length", "16384"],
     "argument --context-length: the engine would refuse this run: User-specified context_length (16384) is greater "
     "than the derived context_length (8192)."),
    # A --context given stands for the length flag, and the refusal names it.
    (["--model", "llama-3-8b", "--engine", "vllm", "--context", "16384"],
     "argument --context: the engine would refuse this run: User-specified max_model_len (16384)"),
])
def test_a_length_above_the_models_own_is_refused_as_the_engine_refuses_it(capsys, argv, message):
    assert main(["estimate", "--mode", "serve", "--gpu", "h100-80gb"] + argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_gpt2_serves_its_own_1024_positions_by_default():
    """vLLM's derived max_model_len for GPT-2 is config.json's n_positions (1,024)."""
    assert report(MODELS["gpt2"]).values["max_model_len"] == 1024


def test_a_refusal_at_the_engines_defaults_names_what_the_user_can_change(capsys):
    """The QA report: Llama 3.1 8B under vLLM on an L4 with no flag but the GPU was refused as "argument
    --gpu-memory-utilization", a flag never given; the fix is a shorter --max-model-len (or --context), which vLLM's
    own message estimates. Both ways out are named, the length first, and the run starts with the length vLLM
    suggests."""
    base = ["estimate", "--model", "llama-3.1-8b", "--mode", "serve", "--engine", "vllm", "--gpu", "l4"]
    assert main(base) == 2
    (err,) = capsys.readouterr().err.splitlines()
    assert err.startswith("python -m builder estimate: error: argument --engine: the engine would refuse this run at "
                          "its defaults (change --max-model-len (or --context) or --gpu-memory-utilization): ")
    suggested = int(err.split("the estimated maximum model length is ")[1].split(".")[0])
    assert main(base + ["--max-model-len", str(suggested)]) == 0
    capsys.readouterr()


def test_the_triton_sampler_keeps_a_vocabulary_row_a_multiprocessor():
    """vLLM 0.19.0 vllm/v1/sample/ops/topk_topp_triton.py apply_top_k_top_p_triton: a buffer of
    min(next_power_of_2(NUM_PROGRAMS), num_sm) fp32 rows of the vocabulary, NUM_PROGRAMS = min(num_sm, batch_size),
    cached for the process (_TRITON_BUFFER_CACHE). An H100 has 132 SMs (the GPU catalog): at 1,024 requests the buffer
    is 132 rows, and the llm-d-planner v0.19.0 log's "1.89 GiB for peak activation" (Llama 3.1 8B, d3121e0) is met
    within 2%; without it the model was 5% under. The FlashInfer and sort paths keep no such buffer, nor the V2 model
    runner's warm-up up to 0.32 (the logits alone); the V1 runner's from 0.21 does (it always warms forward_native)."""
    arch = MODELS["llama-3.1-8b"]

    def sampler(version, gpu):
        return engine_report(Config(model=arch, mode="serve"), EngineSettings(vllm_version=version, **LLMD_019),
                             H100.usable_bytes, "h100-80gb", gpu).values

    with_sms, without = sampler("0.19", H100), sampler("0.19", None)
    assert H100.multiprocessors == 132
    assert with_sms["profile_sampler"] - without["profile_sampler"] == 132 * 128256 * 4
    assert abs(with_sms["profile_peak"] / GIB / Fraction("1.89") - 1) < Fraction(2, 100)
    assert without["profile_peak"] / GIB / Fraction("1.89") - 1 < -Fraction(4, 100)
    for version in ("0.10", "0.11.1", "0.32"):
        assert sampler(version, H100)["profile_sampler"] == sampler(version, None)["profile_sampler"]
    assert sampler("0.21", H100)["profile_sampler"] - sampler("0.21", None)["profile_sampler"] == 132 * 128256 * 4


def test_vllm_spreads_an_moe_models_experts_over_its_data_parallel_ranks():
    """vLLM's docs (data_parallel_deployment, v0.12.0 and latest): "By default, expert layers form a tensor parallel
    group of size DP x TP"; vllm/model_executor/layers/fused_moe/config.py:1106-1114 flatten_tp_across_dp_and_pcp at
    v0.33.0. --enable-expert-parallel only turns those slices into whole experts on the same ranks
    (FusedMoEParallelConfig.make, :1198-1244; expert_map_manager.py determine_expert_map): 128 experts over 4 ranks
    are 32 whole experts or a quarter of each, the same bytes. So -dp 2 halves a rank's routed experts and nothing
    else; SGLang's --dp-size without DP attention stays a replica."""
    arch = MODELS["qwen3-30b-a3b"]
    routed = arch.experts * 3 * arch.expert_ffn * arch.hidden * 2 * arch.layers  # bf16 gate, up and down, per layer

    def weights(engine="vllm", **parallel):
        config = Config(model=arch, mode="serve", **parallel)
        r = engine_report(config, EngineSettings(engine=engine, max_model_len=8192), H100.usable_bytes, "h100-80gb")
        return next(p for p in r.parts if p.name == "weights")

    one, two, four = weights(), weights(dp=2), weights(tp=2, dp=2)
    assert one.bytes - two.bytes == routed // 2
    assert weights(dp=2, ep=2).bytes == two.bytes  # training's --ep = dp: the same layout
    assert weights(tp=2).bytes - four.bytes == routed // 4  # experts over 4 ranks, the rest over tp 2
    assert "fused_moe/config.py" in two.source and "fused_moe/config.py" not in one.source
    assert weights("sglang", dp=2).bytes == weights("sglang").bytes
    # A dense model's data-parallel ranks are replicas.
    dense = [engine_report(Config(model=MODELS["llama-3.1-8b"], mode="serve", dp=dp),
                           EngineSettings(max_model_len=8192), H100.usable_bytes, "h100-80gb").values["weights_bytes"]
             for dp in (1, 2)]
    assert dense[0] == dense[1]
    # --ep other than the data-parallel size is no vLLM layout.
    with pytest.raises(ValueError, match="ep: vLLM has no expert-parallel size of its own"):
        weights(dp=4, ep=2)


def test_weights_past_the_gpus_total_are_refused_naming_the_parallel_sizes(capsys):
    """Weights that alone pass a GPU's CUDA total never finish loading (PyTorch raises torch.OutOfMemoryError in
    vLLM's load_model, before "Model loading took" is printed), so no --gpu-memory-utilization or --max-model-len
    helps: DeepSeek-V3's fp8 checkpoint (README_WEIGHTS.md: about 1 byte a parameter) at tensor parallel size 4 puts
    about 158 GiB on each 141 GB H200."""
    assert main(["estimate", "--model", "deepseek-v3", "--mode", "serve", "--engine", "vllm", "--gpu", "h200",
                 "--tp", "4"]) == 2
    err = capsys.readouterr().err
    assert "argument --tp: the engine would refuse this run (--pp also moves it): CUDA out of memory while loading " \
           "the weights" in err and err.count("\n") == 1
    assert main(["estimate", "--model", "deepseek-v3", "--mode", "serve", "--engine", "vllm", "--gpu", "h200",
                 "--tp", "8"]) == 0
