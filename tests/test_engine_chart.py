"""The Serving page's start-up charts (a chart's `engine:`) mirror the engines' own accounting, pinned to the
published logs whose settings they use, and the page's prose states the model's numbers.

vllm PR #57047 (Sep 2026): AWQ 4-bit Qwen3-4B on a 48 GB GPU whose cudaMemGetInfo total is 47.37 GiB,
--gpu-memory-utilization 0.85, --max-model-len 2048: "Current kv cache memory in use is 36.88 GiB",
"GPU KV cache size: 268,560 tokens, Maximum concurrency for 2,048 tokens per request: 131.13x"; its "CUDA graph pool
memory: 0.22 GiB (actual), 0.42 GiB (estimated)" for a dense model is the V2 model runner's estimate, v0.29.0's and
later's, so the chart sizes it with --vllm-version 0.29 (vLLM 0.29.0 to 0.32.0 share these rules).
sglang PR #23669: Qwen3-8B, default settings, one B200: "KV Cache is allocated. #tokens: 992896, K size: 68.18 GB".
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import pytest

from builder.catalog import default_gpus, default_models
from builder.content import read_page
from builder.grids import evaluate_chart
from builder.model.estimator import estimate
from tests.page_text import page_text

ROOT = Path(__file__).resolve().parent.parent
SERVING = ROOT / "content" / "serving.md"
GIB = 2**30


@pytest.fixture(scope="module")
def page():
    page, errors = read_page(SERVING, "content/serving.md")
    assert errors == []
    return page


def chart(page, chart_id):
    evaluated, errors = evaluate_chart(page.charts[chart_id], page, page.presets, default_models(), default_gpus(),
                                       estimate)
    assert errors == []
    return evaluated.spec


def test_vllm_startup_chart_is_the_gpu_as_vllm_divides_it(page):
    spec = chart(page, "vllm-startup")
    (bar,) = spec.bars
    parts = {p.name: p.bytes for p in bar.breakdown.parts}
    assert set(parts) == {"weights", "weights/rotary_table", "weights/allocator_rounding", "activations/profile_peak",
                          "overhead/non_torch", "overhead/cuda_graphs", "kv_cache", "unrequested"}
    # The rotary cos/sin table: Qwen3-4B's config.json max_position_embeddings 40,960 x head_dim 128, 2 bytes (vLLM
    # rotary_embedding/base.py keeps it in the model's 16-bit dtype).
    assert parts["weights/rotary_table"] == 40_960 * 128 * 2
    # The allocator's unsplit blocks (builder.model.allocator): at 4 bits each layer's gate_up_proj is 19,456 x 2,560
    # x 0.5 B = 23.75 MiB in a 24 MiB segment and its down_proj 11.875 MiB in a 12 MiB one (0.375 MiB a layer, 36
    # layers), the tied 16-bit embedding 741.875 MiB in 742 MiB.
    assert parts["weights/allocator_rounding"] == 36 * 3 * 2**17 + 2**17
    # The parts divide the GPU's total (each rounded up to a whole byte).
    assert 0 <= bar.breakdown.total - int(Fraction("47.37") * GIB) <= len(parts)
    # The published log's KV cache memory, within the 3 %.
    assert parts["kv_cache"] / GIB == pytest.approx(36.88, rel=0.03)
    # The requested share: 0.85 of the total, the rest outside the engine's budget.
    assert parts["unrequested"] == pytest.approx(Fraction(15, 100) * Fraction("47.37") * GIB, abs=1)
    # The engine's own lines are in the worked example, and the whole concurrency is the log's (131.13x -> 131).
    assert "Maximum concurrency for 2,048 tokens per request: 131." in spec.example
    tokens = int(spec.example.split("GPU KV cache size: ")[1].split(" ")[0].replace(",", ""))
    assert tokens == pytest.approx(268_560, rel=0.003)  # the log's 268,560 tokens


def test_sglang_startup_chart_is_the_published_pool(page):
    spec = chart(page, "sglang-startup")
    parts = {p.name: p.bytes for p in spec.bars[0].breakdown.parts}
    assert set(parts) == {"weights", "weights/rotary_table", "weights/allocator_rounding", "kv_cache",
                          "overhead/runtime_slack", "overhead/driver_reserve", "overhead/cuda_context",
                          "overhead/distributed"}
    # The memory gone before the weights, in its three terms: nvidia-smi's 183,359 MiB less CUDA's 178.35 GiB (the
    # catalog's B200 printouts), 148 SMs x 2,048 threads x 2.4 KiB, and the log's own "Init torch distributed ends.
    # ... mem usage=0.09 GB" (sglang PR #23669), whose sum the log shows as 179.06 - 177.57 = 1.49 GiB.
    assert parts["overhead/driver_reserve"] == 183_359 * 2**20 - int(Fraction("178.35") * GIB)
    assert parts["overhead/cuda_context"] == math.ceil(148 * 2048 * Fraction(12, 5) * 1024)
    assert parts["overhead/distributed"] == math.ceil(Fraction(9, 100) * GIB)
    # Qwen3-8B's 40,960 positions x head_dim 128 in fp32 (SGLang layers/rotary_embedding.py keeps it fp32 on CUDA).
    assert parts["weights/rotary_table"] == 40_960 * 128 * 4
    # The embedding and the head, 151,936 x 4,096 x 2 B = 1,187 MiB each, take 1,188 MiB segments; every other
    # tensor is a whole number of 2 MiB.
    assert parts["weights/allocator_rounding"] == 2 * 2**20
    tokens = int(spec.example.split("#tokens: ")[1].split(",")[0])
    assert abs(tokens - 992_896) <= 0.0005 * 992_896


def test_prose_gives_the_naive_sum_and_the_engines_number(page):
    """The page's "about 159 requests" (what the weights leave, over one request's KV cache) and "131" (vLLM's
    blocks over a request's blocks; the log's 131.13x) are the model's."""
    from builder.model import Config
    from builder.model.engines import EngineSettings, engine_report

    total = int(Fraction("47.37") * GIB)
    v = engine_report(Config(model=default_models()["qwen3-4b"], mode="serve", param_dtype="int4"),
                      EngineSettings(gpu_memory_utilization=0.85, max_model_len=2048, vllm_version="0.29"), total,
                      "47.37GiB").values
    naive = math.floor((total - v["weights_bytes"]) / (v["kv_per_token"] * 2048))
    text = page_text("serving.md")
    assert naive == 159 and "about **159 requests**" in text
    assert v["concurrent_requests"] == 131 and "vLLM reports **131** (its log: 131.13x)" in text
    assert v["kv_per_token"] == 144 * 1024 and f"(47.37 GiB − {v['weights_bytes'] / GIB:.2f} GiB) / (144 KiB × 2,048)" in text


def test_an_engine_chart_takes_one_bar_and_a_gpu(tmp_path):
    text = """---
title: T
slug: t
order: 1
summary: s
charts:
  c:
    title: C
    config: {mode: serve, model: qwen3-4b}
    engine: {engine: vllm}
    bars:
      - {label: a}
      - {label: b}
---
{{< chart c >}}
"""
    path = tmp_path / "t.md"
    path.write_text(text)
    _, errors = read_page(path, "t.md")
    messages = " ".join(e.message for e in errors)
    assert "engine needs exactly one bar" in messages and "engine needs gpu:" in messages
