"""SGLang's startup accounting (builder.model.engine_sglang) pinned to published SGLang logs.

SGLang gives the KV pool what is left of `--mem-fraction-static` x the free memory before the weights once the
weights are in (mem_cache/kv_cache_configurator.py _profile_available_bytes), in tokens of one page
(pool_configurator.py). The logs' "GB" are GiB (mem_cache/memory_pool.py: GB = 1024 * 1024 * 1024).
"""

from __future__ import annotations

import json

import pytest

from builder.catalog import default_gpus, default_models
from builder.cli import main
from builder.model import Config
from builder.model.engines import EngineSettings, engine_report

MODELS = default_models()
GPUS = default_gpus()


def report(model_id, gpu_id, *, tp=1, pp=1, cuda_context_bytes=0, **settings):
    model = MODELS[model_id] if isinstance(model_id, str) else model_id
    config = Config(model=model, mode="serve", tp=tp, pp=pp, cuda_context_bytes=cuda_context_bytes)
    gpu = GPUS[gpu_id]
    return engine_report(config, EngineSettings(engine="sglang", **settings), gpu.driver_total_bytes, gpu.id, gpu)


GIB = 2**30


def before_weights(values):
    """(driver's reserve, CUDA context, torch.distributed) in GiB."""
    return tuple(float(values[k]) / GIB for k in ("driver_reserve", "cuda_context", "distributed"))


def test_memory_before_the_weights_on_one_b200_is_the_logs_three_terms():
    """sglang PR #23669 (one B200): nvidia-smi's 183,359 MiB (179.06 GiB) less 'Load weight begin. avail mem=177.57
    GB' is 1.49 GiB: CUDA's 178.35 GiB total 0.71 GiB below nvidia-smi's (the catalog's two B200 printouts), 'Init
    torch distributed ends. ... mem usage=0.09 GB' (the log's own), and 0.69 GiB of CUDA context, 2.4 KiB for each of
    148 SMs x 2,048 threads."""
    v = report("qwen3-8b", "b200").values
    driver, context, distributed = before_weights(v)
    assert v["resident_threads"] == 148 * 2048
    assert round(driver, 2) == 0.71 and round(context, 2) == 0.69 and distributed == 0.09
    assert abs(driver + context + distributed - (179.06 - 177.57)) < 0.01


def test_memory_before_the_weights_at_tp8_over_the_h200s_switch():
    """sglang PR #11716 (H200s, TP 8): 140.40 - 137.34 = 3.06 GiB, of which the log prints 1.96 GiB for
    torch.distributed ('Init torch distributed ends. mem usage=1.96 GB'). The model's NVLink-switch step is vLLM's,
    2.1 - 0.25 GiB (builder.model.collectives), with 0.62 GiB of context for 132 x 2,048 threads where this older
    log leaves 0.50: the same sum within 0.01 GiB."""
    v = report("llama-3.3-70b", "h200", tp=8, mem_fraction_static=0.897).values
    driver, context, distributed = before_weights(v)
    assert round(driver, 2) == 0.60 and round(context, 2) == 0.62 and distributed == 1.85
    assert abs(distributed - 1.96) < 0.12 and abs(driver + context + distributed - (140.40 - 137.34)) < 0.01


def test_memory_before_the_weights_at_tp4_over_pcie_l4s():
    """llms-in-clouds docs/sglang.md (commit b001c86), QwQ-32B on four L4s (PCIe, 'Custom allreduce is disabled'):
    nvidia-smi's 23,034 MiB (22.49 GiB) less 'avail mem=21.63 GB' is 0.86 GiB, of which the log prints 'Init torch
    distributed ends. mem usage=0.13 GB'. The model: 0.54 GiB of driver's reserve (the catalog's L4 totals), 0.20 GiB
    of context for 58 SMs x 1,536 threads, and those 0.13 GiB, 0.88 GiB in all (2.16 GiB before the three terms);
    'KV Cache is allocated. #tokens: 46611' against the model's, 0.4% fewer (tests/test_published.py)."""
    from builder.validate.published import QWQ_32B
    v = report(QWQ_32B, "l4", tp=4, mem_fraction_static=0.85).values
    driver, context, distributed = before_weights(v)
    assert round(driver, 2) == 0.54 and round(context, 2) == 0.20 and distributed == 0.13
    assert abs(driver + context + distributed - (22.49 - 21.63)) < 0.02
    assert 46_611 * 0.99 <= v["max_total_num_tokens"] < 46_611


def test_cuda_context_replaces_the_memory_before_the_weights():
    """--cuda-context gives the measured whole (nvidia-smi's total less 'avail mem'): the L4 log's 0.86 GiB leaves
    the log's 21.63 GiB free, in one part, the driver's reserve and torch.distributed's then left out."""
    from builder.validate.published import QWQ_32B
    r = report(QWQ_32B, "l4", tp=4, mem_fraction_static=0.85, cuda_context_bytes=int(0.86 * GIB))
    parts = {p.name: p.bytes for p in r.parts}
    assert "overhead/driver_reserve" not in parts and "overhead/distributed" not in parts
    assert parts["overhead/cuda_context"] == int(0.86 * GIB)
    assert round(float(r.values["pre"]) / GIB, 2) == 21.63


@pytest.mark.parametrize("gpu_id, tp, fraction", [
    # arg_groups/memory_hook.py handle_gpu_memory_settings (SGLang 0.5.23; the same for these GPUs in 0.5.18's
    # server_args.py _handle_gpu_memory_settings), no MLA, no speculative decoding:
    # H100 (nvidia-smi 81559 MiB): 512 + 8192 x 1.5 + 128 + 256 x 2 + 58 prefill graphs x 8 = 13,904 MiB reserved.
    ("h100-80gb", 1, 0.830),
    # H200 (143771 MiB): the same 13,904 MiB.
    ("h200", 1, 0.903),
    # B200 (183359 MiB): 512 + 16384 x 1.5 + 128 + 512 x 2 + 74 x 8 = 26,832 MiB.
    ("b200", 1, 0.854),
    # H200 at TP 8: 512 + 12,288 + 1,024 + 512 x 2 + 464 = 15,312 MiB -> 128,459 / 143,771.
    ("h200", 8, 0.893),
])
def test_default_mem_fraction_static_follows_sglangs_reserve(gpu_id, tp, fraction):
    model = "llama-3-70b" if tp > 1 else "qwen3-8b"
    assert float(report(model, gpu_id, tp=tp).values["fraction"]) == fraction


@pytest.mark.parametrize("release, chunk, graph_batch, fraction", [
    # An L4 (nvidia-smi 23,034 MiB) from 0.5.20: 512 + 4096 x 1.5 + 128 + 48 x 2 + 50 prefill graphs x 8 = 7,280 MiB.
    ("0.5.23", 4096, 48, 0.684), ("0.5.20", 4096, 48, 0.684),
    # 0.5.18 and 0.5.19: 512 + 2048 x 1.5 + 128 + 24 x 2 + 42 x 8 = 4,096 MiB.
    ("0.5.19", 2048, 24, 0.822), ("0.5.18", 2048, 24, 0.822),
])
def test_gpus_of_20_to_35_gib_reserve_more_from_0_5_20(release, chunk, graph_batch, fraction):
    """memory_hook.py handle_gpu_memory_settings of 0.5.20 (read in each release's wheel): GPUs of 20 to 35 GiB take
    chunked_prefill_size 4096 and a decode CUDA-graph batch of 48 (TP < 4), 2048 and 24 before."""
    v = report("qwen3-8b", "l4", sglang_version=release).values
    assert (v["chunked_prefill"], v["decode_graph_batch"], float(v["fraction"])) == (chunk, graph_batch, fraction)


def test_llama_3_1_8b_on_one_l4_leaves_no_kv_cache_at_0_5_23_defaults():
    # 0.684 of the 21.6 GiB free before the weights is less than Llama 3.1 8B's 15 GiB of bf16 weights: SGLang's own
    # error, naming the fraction; 0.5.19's default of 0.822 starts.
    assert not report("llama-3.1-8b", "l4").fits
    assert report("llama-3.1-8b", "l4", sglang_version="0.5.19").fits


@pytest.mark.parametrize("model_id, pp, running, release, graph_batch, prefill_graphs_mib, fraction", [
    # Pipeline stages turn the prefill CUDA graph off from 0.5.19 (cuda_graph_hook.py apply_cuda_graph_compatibility):
    # on an H100 at PP 2, 512 + 12,288 + 256 + 512 = 13,568 MiB; 0.5.18 adds its 58 sizes x 8 = 464 MiB.
    ("qwen3-8b", 2, None, "0.5.23", 256, 0, 0.834), ("qwen3-8b", 2, None, "0.5.18", 256, 464, 0.828),
    # A default decode batch above --max-running-requests is lowered to it from 0.5.22: 512 + 12,288 + 128 + 64 x 2
    # + 464 = 13,520 MiB; 0.5.21 keeps 256.
    ("qwen3-8b", 1, 64, "0.5.22", 64, 464, 0.834), ("qwen3-8b", 1, 64, "0.5.21", 256, 464, 0.830),
    # Latent attention's prefill graphs reserve 1.5 GiB in every release read (reserve_for_graph_mb): 512 + 12,288 +
    # 128 + 512 + 1,536 = 14,976 MiB.
    ("deepseek-v2-lite", 1, None, "0.5.23", 256, 1536, 0.816),
    ("deepseek-v2-lite", 1, None, "0.5.18", 256, 1536, 0.816),
])
def test_the_cuda_graph_reserve_by_release(model_id, pp, running, release, graph_batch, prefill_graphs_mib, fraction):
    v = report(model_id, "h100-80gb", pp=pp, max_running_requests=running, sglang_version=release).values
    assert (v["decode_graph_batch"], v["prefill_graph_mib"], float(v["fraction"])) == (
        graph_batch, prefill_graphs_mib, fraction)


def test_the_rotary_table_stays_fp32_on_rocm_from_0_5_22():
    # layers/rotary_embedding/base.py RotaryEmbedding.__init__ of 0.5.22: "Keep fp32 on HIP, matching CUDA behavior";
    # 0.5.21 cast it to the model's dtype on ROCm. Qwen3-8B's 40,960 positions x 128 on an MI300X.
    assert report("qwen3-8b", "mi300x").values["rotary_table"] == 40_960 * 128 * 4
    assert report("qwen3-8b", "mi300x", sglang_version="0.5.21").values["rotary_table"] == 40_960 * 128 * 2


def test_the_release_is_named_and_checked(capsys):
    assert main(["estimate", "--model", "qwen3-8b", "--mode", "serve", "--engine", "sglang", "--gpu", "h100-80gb",
                 "--sglang-version", "0.5.19", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["engine_version"] == "SGLang 0.5.19"
    assert main(["estimate", "--model", "qwen3-8b", "--mode", "serve", "--engine", "sglang", "--gpu", "h100-80gb",
                 "--sglang-version", "0.5.17"]) == 2
    assert "argument --sglang-version: '0.5.17' is not modelled: give a release from 0.5.18 to 0.5.23" in \
        capsys.readouterr().err


def test_qwen3_8b_on_one_b200_reproduces_the_published_pool():
    """sglang PR #23669 (upstream main, 2026-04-27), Qwen/Qwen3-8B, default settings, one B200:
    'Load weight begin. avail mem=177.57 GB', 'Load weight end. ... mem usage=15.28 GB.',
    'KV Cache is allocated. #tokens: 992896, K size: 68.18 GB, V size: 68.18 GB',
    'max_total_num_tokens=992896, chunked_prefill_size=16384, ...'. Blackwell's default attention backend
    (trtllm_mha) sets a 64-token page."""
    r = report("qwen3-8b", "b200")
    v = r.values
    assert v["page"] == 64 and v["chunked_prefill"] == 16384
    assert v["cell"] == 2 * 8 * 128 * 36 * 2  # 147,456 B per token
    # avail mem (±0.01 GiB), #tokens (0.05%) and K size (±0.015 GiB) against the log: tests/test_published.py.
    assert v["max_total_num_tokens"] % 64 == 0
    assert v["max_running_requests"] == 4096
    # No --context-length: SGLang's own, from config.json (configs/model_config.py get_context_length), 40,960.
    assert v["context_len"] == 40_960
    # 'mem usage=15.28 GB' is the parameters' 15.26 GiB and the fp32 rotary table, 40,960 x 128 x 4 B (tested against
    # the log in tests/test_published.py).
    assert v["rotary_table"] == 40_960 * 128 * 4


def test_llama_3_3_70b_at_tp8_on_h200s_reproduces_the_published_pool():
    """sglang PR #11716 (2025-10-16), meta-llama/Llama-3.3-70B-Instruct, --tp 8 on H200s,
    the default fraction of that release (0.897, the v0.5.3 rule: no prefill-graph term), page 1:
    'KV Cache is allocated. #tokens: 2795207, K size: 53.31 GB, V size: 53.31 GB'; 'Load weight begin.
    avail mem=137.34 GB'."""
    v = report("llama-3.3-70b", "h200", tp=8, mem_fraction_static=0.897).values
    assert v["kv_heads_per_gpu"] == 1 and v["cell"] == 2 * 128 * 80 * 2
    # avail mem (±0.03 GiB), #tokens (0.2%) and K size (±0.1 GiB) against the log: tests/test_published.py.


def test_weights_that_leave_nothing_raise_sglangs_own_error():
    # Llama 3 70B's 131 GiB of bf16 weights on one H100: nothing is left, and SGLang names the fraction to ask for.
    r = report("llama-3-70b", "h100-80gb")
    assert not r.fits
    minimum = 1 - r.values["after_weights"] / r.values["pre"]
    assert r.values["error"] == (
        "Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.83. Raise "
        f"--mem-fraction-static above {-(-float(minimum) * 1000 // 1) / 1000:.3f} (minimum viable = 1 - "
        f"available/pre = {float(minimum):.4f}). If using speculative decoding, draft weights are now counted.")


def test_pipeline_stages_take_the_fewest_tokens_and_tp_replicates_kv_heads():
    # Llama 3 8B over 3 stages: 11, 11 and 10 layers; the first holds the embedding, the last the head. The pool is
    # the minimum over workers (pool_configurator.py _apply_token_constraints).
    r = report("llama-3-8b", "h100-80gb", pp=3)
    assert r.stage in ("first", "last")
    # TP 16 with 8 KV heads: one head per rank, as get_num_kv_heads' max(1, 8 // 16) keeps.
    assert report("llama-3-8b", "h100-80gb", tp=16).values["kv_heads_per_gpu"] == 1


def test_cli_speaks_sglangs_flags(capsys):
    code = main(["estimate", "--model", "qwen3-8b", "--mode", "serve", "--engine", "sglang", "--gpu", "b200",
                 "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["engine"] == "sglang" and data["mem_fraction_static"] == 0.854
    assert data["max_total_num_tokens"] == data["kv_cache_tokens"] and data["page_size"] == 64
    assert main(["estimate", "--model", "qwen3-8b", "--mode", "serve", "--engine", "sglang", "--gpu", "b200"]) == 0
    text = capsys.readouterr().out
    assert "KV Cache is allocated. dtype: torch.bfloat16, #tokens: " in text and "max_total_num_tokens=" in text


@pytest.mark.parametrize("flags, message", [
    (["--block-size", "32"], "argument --block-size: not an option of --engine sglang"),
    (["--mem-fraction-static", "1.2"], "argument --mem-fraction-static: must be in (0, 1), got 1.2"),
    (["--page-size", "0"], "argument --page-size"),
])
def test_cli_refuses_what_sglang_would_not_take(capsys, flags, message):
    args = ["estimate", "--model", "qwen3-8b", "--mode", "serve", "--engine", "sglang", "--gpu", "h100-80gb", *flags]
    assert exit_code(args) == 2 and message in capsys.readouterr().err


def test_vllm_refuses_sglangs_flags(capsys):
    assert exit_code(["estimate", "--model", "qwen3-8b", "--mode", "serve", "--engine", "vllm", "--gpu", "h100-80gb",
                      "--mem-fraction-static", "0.8"]) == 2
    assert "argument --mem-fraction-static: not an option of --engine vllm" in capsys.readouterr().err


def exit_code(args: list[str]) -> int:
    """The command line's exit status, whether it returns it or argparse exits."""
    try:
        return main(args)
    except SystemExit as stop:
        return stop.code
