"""Serving as an inference engine allocates it: vLLM's startup accounting, as rules (SGLang's is in
builder.model.engine_sglang; both are registered in ENGINES below).

vLLM (V1 engine; source read at release v0.33.0, the newest on PyPI, with v0.28.0 to v0.32.0 read to date each
change) takes a share of the GPU and gives what is left after the weights, the profile run's peak, non-torch memory
and CUDA graphs to a paged KV cache:

- requested = ceil(total x gpu_memory_utilization)       vllm/v1/worker/utils.py request_memory
  (total is cudaMemGetInfo's; default utilization 0.92 since v0.20.0, 0.9 before: vllm/config/cache.py)
- available = requested - weights - non-torch - profile peak - CUDA-graph estimate
                                                          vllm/v1/worker/gpu_worker.py determine_available_memory
  or exactly --kv-cache-memory when given (profiling is then skipped for the budget). The log's "N GiB for peak
  activation" is the profile peak plus the CUDA-graph estimate (peak_activation_memory), and its "N GiB for CUDAGraph
  memory" the graphs captured afterwards, not the estimate subtracted.
- profile run: max_num_batched_tokens tokens split over min(tokens, max_num_seqs) requests, eager, with
  attention skipped, then one logits row per request through the sampler. Two model runners do it differently
  (VLLM_USE_V2_MODEL_RUNNER unset: vllm/config/vllm.py VllmConfig.use_v2_model_runner): the V1 runner
  (vllm/v1/worker/gpu_model_runner.py) warms the sampler with top-k and top-p on; the V2 runner
  (vllm/v1/worker/gpu/model_runner.py, every model's default since v0.29.0, a dense model's since v0.26.0) samples
  the logits as they come, and from v0.33.0 a second time with every sampling parameter on.
- blocks: num_blocks = floor(available / (page x layers)), page = block_size x kv_heads_per_rank x
  (head_dim + head_dim) x dtype bytes; the minimum over workers  vllm/v1/core/kv_cache_planning.py
  get_kv_cache_config_from_groups, _get_kv_cache_bytes_per_block, vllm/v1/kv_cache_interface.py
  AttentionSpec.page_size_bytes (the same blocks as v0.28.0's floor(floor(available / page) / layers), get_num_blocks)
  (--kv-cache-dtype fp8_per_token_head / int8_per_token_head: + block_size x kv_heads_per_rank x 8 bytes of fp32
  scales, AttentionSpec.page_size_bytes at commit 001cabc)
- sliding-window groups: ceil(min(window - 1 + in-flight tokens, max_model_len) / block_size) + 1 blocks a request,
  the extra block whether or not max_model_len caps the window (SlidingWindowSpec.max_admission_blocks_per_request);
  the in-flight tokens are max_num_batched_tokens for each batch in flight, two with asynchronous scheduling (on by
  default) from v0.26.0 (vllm/config/vllm.py max_in_flight_tokens, max_concurrent_batches), one batch before
- the log: max concurrency = num_blocks / blocks per request (ceil(max_model_len / block_size) for full
  attention), KV cache size = int(concurrency x max_model_len) tokens
                                                          kv_cache_utils.py get_max_concurrency_for_kv_cache_config,
                                                          get_kv_cache_capacity, update_kv_cache_capacity
- too little for one request of max_model_len: kv_cache_planning.py _check_enough_kv_cache_memory's error.

Three terms are assumptions, named as such: non-torch memory, the CUDA-graph estimate and the profile peak
(an op-level estimate of the profile run, not a measurement).

--vllm-version sizes a run for an older release (the release constants below: BUDGET_CHANGE, V2_RUNNER_DENSE_FROM,
V2_RUNNER_ALL_FROM, V2_GRAPHS_FROM, V2_SAMPLER_WARMUP_FROM, IN_FLIGHT_FROM, LARGE_TIER_FROM, ONE_LINE_LOG_FROM and the
sampler tables V1_SAMPLER, V2_SAMPLER), read from each release's own Python sources: the default utilization and
whether the CUDA graphs come out of the budget, the model runner, the sampler warm-up of the profile run, whose tensors
differ by release and by VLLM_USE_FLASHINFER_SAMPLER (--vllm-use-flashinfer-sampler), the sliding-window blocks, the
batch defaults and the log lines. Left at its default, the rules are v0.33.0's. Upstream main 6adad08 (2026-08-14,
read before), which these rules modelled until v0.33.0, shipped in v0.28.0 with the same rules (the 160 GiB batch tier
and the one-line log): --vllm-version 0.28 stands for it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable

from builder.model import allocator
from builder.model import engine_hf as hf
from builder.model import engine_sglang as sglang
from builder.model import rotary
from builder.model.cite import Cite
from builder.model.collectives import (NON_TORCH, NON_TORCH_SOURCE, NON_TORCH_TP, NON_TORCH_TP_SOURCE,
                                       NVLINK_SWITCH_GPUS, TP_OVER_SWITCH)
from builder.model.expr import both, ceil, derive, eq, floor, fmt, maximum, minimum, negate, real, sym, when
from builder.model.partrules import PartRule, RuleSet, bytes_of
from builder.model.serving import (KV_CACHE_PER_TOKEN_HEAD, KV_SYMBOLS, LENGTH_KEY, MODEL_LENGTH, PER_TOKEN_HEAD,
                                   PER_TOKEN_HEAD_SCALE_BYTES, beyond_model)
from builder.model.units import GiB as GIB

VLLM_VERSION = "vLLM 0.33.0"
REQUEST = Cite("vllm-0.33.0", "vllm/v1/worker/utils.py request_memory") + ": ceil(total x gpu_memory_utilization)"
AVAILABLE = Cite("vllm-0.33.0", "vllm/v1/worker/gpu_worker.py determine_available_memory")
PROFILE_V1 = (Cite("vllm-0.19.0", "vllm/v1/worker/gpu_model_runner.py profile_run, _dummy_sampler_run")
              + " and vllm/v1/sample/sampler.py Sampler.forward (the logits in fp32) of the release, V1 model runner; "
                "its top-k/top-p path: ")
PROFILE_V2 = (Cite("vllm-0.33.0", "vllm/v1/worker/gpu/model_runner.py profile_run, _dummy_sampler_run")
              + " and vllm/v1/worker/gpu/sample/sampler.py Sampler.sample of the release, V2 model runner: ")
PROFILE_NOTE = ("estimate: the profile run's peak from its tensors (attention skipped, as vLLM's profile run does); "
                "vLLM measures it")
TRITON_BUFFER_NOTE = ("; simplification: the Triton kernel's cached buffer is counted as min(requests, SMs) fp32 rows "
                      "of the vocabulary (vLLM rounds the rows up to a power of two, at most the SMs: the same from "
                      "as many requests as SMs), none on a GPU the catalog gives no SM count")
SMALL_BATCH_NOTE = "; under 8 requests the V1 runner sorts with PyTorch instead, not modelled"
BLOCKS = (Cite("vllm-0.33.0", "vllm/v1/core/kv_cache_planning.py get_kv_cache_config_from_groups") + ": floor("
          "available / (page x layers)); " + Cite("vllm-0.33.0", "vllm/v1/kv_cache_interface.py "
                                                                 "AttentionSpec.page_size_bytes"))
MLA_PAGE = (Cite("vllm-001cabc", "vllm/v1/kv_cache_interface.py MLAAttentionSpec.real_page_size_bytes")
            + ": block_size x 1 x (kv_lora_rank + qk_rope_head_dim) x dtype bytes on every TP rank")
GROUPS = (Cite("vllm-001cabc", "vllm/v1/core/kv_cache_utils.py _get_kv_cache_groups_uniform_page_size, "
                               "get_kv_cache_config_from_groups") + " (one pool, blocks of group_size layers); "
          + Cite("vllm-0.33.0", "vllm/v1/kv_cache_interface.py SlidingWindowSpec.max_admission_blocks_per_request")
          + ": ceil(min(window - 1 + in-flight tokens, max_model_len) / block_size) + 1 blocks a sliding group, the "
            "in-flight tokens max_num_batched_tokens for each batch in flight ("
          + Cite("vllm-0.33.0", "vllm/config/vllm.py max_in_flight_tokens, max_concurrent_batches")
          + ": 2 with one pipeline stage and asynchronous scheduling, from v0.26.0)")
# vLLM's expert layers span every GPU of its data-parallel ranks (each rank one engine core with its own batch and KV
# cache): by default they form one tensor-parallel group of tp x dp ranks, each holding a slice of every expert, and
# with --enable-expert-parallel an expert-parallel group of the same ranks, each holding whole experts
# (vllm/model_executor/layers/fused_moe/config.py:1106-1114 flatten_tp_across_dp_and_pcp and :1198-1244
# FusedMoEParallelConfig.make at v0.33.0, the same code at v0.27.1 to v0.32.0; vLLM's data_parallel_deployment page,
# v0.12.0 and latest: "By default, expert layers form a tensor parallel group of size DP x TP"; releases before v0.27
# not read, taken alike). Either way a rank holds 1/(tp x dp) of the routed experts' bytes, what the model's experts
# over tp x ep hold with ep = dp (expert_layout). The two differ only where tp x dp divides the experts' intermediate
# size but not their count: whole experts then give the first ranks one more (fused_moe/expert_map_manager.py:22-67
# determine_expert_map), slices assert the division (fused_moe/config.py:1352). Attention, dense layers and shared
# experts stay over tp, one copy a data-parallel rank.
VLLM_EXPERT_SOURCE = Cite("vllm-0.33.0", "vllm/model_executor/layers/fused_moe/config.py:1106-1244 "
                                         "FusedMoEParallelConfig.make, flatten_tp_across_dp_and_pcp")
# Named assumptions, each from a published vLLM startup log (non-torch memory: builder.model.collectives).
# The CUDA-graph estimate is a measurement of each run, not a formula of the model's shape. From v0.29.0 the V2 model
# runner captures every piecewise graph (P) and the two largest full graphs (F1, F2) against a minimal KV cache, and
# counts each other full graph at F2's cost: estimate = P + F1 + (N_full - 1) x max(F2, 1 MiB)
# (vllm/v1/worker/gpu/cudagraph_utils.py:922-1039 at v0.33.0, profile_cudagraph_memory and
# _extrapolate_full_graph_memory, _FULL_GRAPH_PROFILING_SAMPLES = 2, _MIN_PER_GRAPH_BYTES = 1 << 20; the same at
# v0.29.0, lines 712-831), subtracted by gpu_worker.py:707-757 determine_available_memory. N_full is the number of
# capture sizes up to max_num_seqs (vllm/config/vllm.py:2448-2605 _set_cudagraph_sizes: 1, 2, 4, 8 to 248 by 8, 256 to
# min(2 x max_num_seqs, 512, or 1024 on data-center Blackwell) by 16; cudagraph_utils.py:256-394 _init_candidates: a
# full decode graph for each size up to max_num_seqs): 35 at 256 requests (the log below, a 48 GB GPU), 51 at an
# H100's 1,024, 83 on a B200. One log's value is assumed for every run; the graph counts are not modelled.
CUDA_GRAPHS = Fraction(42, 100) * GIB
CUDA_GRAPHS_SOURCE = (
    "assumed 0.42 GiB: vLLM's own estimate in a published log (vllm PR #57047, Sep 2026: 'CUDA graph pool memory: "
    "0.22 GiB (actual), 0.42 GiB (estimated)', Qwen3-4B with 4-bit weights on a 48 GB GPU, whose default 256 requests"
    " give 51 piecewise and 35 full graphs); 0 with --enforce-eager. vLLM measures it per run (subtracted by default "
    "since v0.20.0 with the V1 model runner, since v0.29.0 with the V2) and it grows with the graphs captured: 0.52 "
    "GiB for Qwen3-8B with 51 piecewise and 35 full graphs (LMCache issue #3430, v0.21.0), 0.13 to 0.36 GiB with 5 to"
    " 16 graphs (a small --max-num-seqs). The V2 runner measures its piecewise graphs P and its two largest full "
    "graphs F1, F2 and counts each other full graph at F2's cost, P + F1 + (N - 1) x max(F2, 1 MiB) ("
    + Cite("vllm-0.33.0", "vllm/v1/worker/gpu/cudagraph_utils.py:922-1039 profile_cudagraph_memory, "
                          "_extrapolate_full_graph_memory")
    + "), N the capture sizes up to --max-num-seqs: 35 at 256 requests, 51 at 1,024 (an H100's default), 83 on a B200 ("
    + Cite("vllm-0.33.0", "vllm/config/vllm.py:2448-2605 _set_cudagraph_sizes")
    + "); this can give several times the graphs it then captures, and the graph count is not modelled")
CUDA_GRAPHS_OUTSIDE = ("assumed 0.42 GiB, as from v0.20.0, but not taken out of the KV budget: before v0.20.0 "
                       "vLLM captures the graphs after allocating the KV cache, in the memory above the share "
                       "requested (" + Cite("vllm-0.19.0", "vllm/v1/worker/gpu_worker.py determine_available_memory")
                       + ": the estimate applied only with VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1, default 0; "
                       + Cite("vllm-0.20.0", "vllm/envs.py") + ": default 1)")
CUDA_GRAPHS_V2_OUTSIDE = ("assumed 0.42 GiB, as from v0.29.0, but not taken out of the KV budget: the V2 model runner "
                          "estimates nothing before v0.29.0 ("
                          + Cite("vllm-0.28.0", "vllm/v1/worker/gpu/model_runner.py profile_cudagraph_memory")
                          + ": return 0), so the graphs are captured after the KV cache is allocated, in the memory "
                            "above the share requested")

# vLLM's own defaults (vllm/config/cache.py, vllm/engine/arg_utils.py get_batch_defaults for `vllm serve`).
DEFAULT_UTILIZATION = Fraction(92, 100)
DEFAULT_BLOCK_SIZE = 16
# `vllm serve --block-size` takes any whole number from 1 (vllm/config/cache.py CacheConfig.block_size: Field(gt=0)
# from v0.24.0 to v0.33.0; an unvalidated int in v0.20.0 and v0.22.0): the older BlockSize = Literal[1, 8, ..., 256]
# list is gone, and each attention backend checks its own kernel block sizes (not modelled).

# --- vLLM releases (--vllm-version) --------------------------------------------------------------------------------
# A release as the rules read it: minor x 100 + patch (vLLM's major is 0), e.g. 0.19.0 -> 1900, 0.11.1 -> 1101. The
# default, DEFAULT_RELEASE, is v0.33.0, the newest release on PyPI (2026-11-29).
DEFAULT_RELEASE = 3300
OLDEST, NEWEST = (0, 10, 0), (0, 33, 99)  # the releases --vllm-version takes (sources read: 0.10.1.1 to 0.33.0)
# From v0.20.0 the default utilization is 0.92 (vllm/config/cache.py: Field(default=0.92); 0.9 in v0.19.0 and
# before) and the V1 runner's CUDA-graph estimate comes out of the KV budget (vllm/envs.py
# VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to "1"; "0" in v0.18.0 and v0.19.0, which measured it without
# subtracting it; no estimate before v0.18).
BUDGET_CHANGE = 2000
UTILIZATION_BEFORE = Fraction(9, 10)
# The model runner (vllm/config/vllm.py VllmConfig.use_v2_model_runner, VLLM_USE_V2_MODEL_RUNNER unset): V1 for every
# model up to v0.21.0; from v0.26.0 (read at v0.26.0, v0.27.1 and v0.28.0: `is_default_v2_architecture or not
# model_config.is_moe`) V2 for a model without experts; from v0.29.0 (read at v0.29.0 to v0.33.0) V2 for every model
# on CUDA. Simplifications: v0.22 to v0.25 took V2 for listed architectures only (v0.22.0: Qwen3ForCausalLM; v0.24.0:
# Llama, Mistral, Qwen3, DeepSeek-V2, Qwen2-MoE, GraniteMoE; v0.25 not read), modelled as V1; from v0.26.0 to v0.28.0
# the MoE architectures DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES lists (DeepSeek-V2's, Qwen2-MoE's, GraniteMoE's) take V2
# too, modelled as V1; ROCm's V1 list of v0.29.0 to v0.31.0 is not modelled.
V2_RUNNER_DENSE_FROM = 2600
V2_RUNNER_ALL_FROM = 2900
# The V2 runner's CUDA-graph estimate: 0 up to v0.28.0 (gpu/model_runner.py profile_cudagraph_memory: return 0),
# measured and extrapolated from v0.29.0 (gpu/cudagraph_utils.py profile_cudagraph_memory).
V2_GRAPHS_FROM = 2900
# The V2 runner's second sampler warm-up, every sampling parameter on (SamplingParams.for_sampler_warmup: top-k 50,
# top-p 0.9, min-p, penalties, logit bias, logprobs): v0.33.0's gpu/model_runner.py _dummy_sampler_run; one pass with
# none of them in v0.32.0 and before.
V2_SAMPLER_WARMUP_FROM = 3300
# Sliding-window blocks hold max_num_batched_tokens for each batch in flight from v0.26.0 (vllm/config/vllm.py
# max_in_flight_tokens; v0.24.0's SlidingWindowSpec.max_memory_usage_bytes: one batch, as at commit 001cabc; v0.25 not
# read).
IN_FLIGHT_FROM = 2600
# The 160 GiB tier of `vllm serve`'s batch defaults (batch_defaults) from v0.28.0: v0.27.1's get_batch_defaults has the
# 70 GiB tier alone, as every release back to v0.10.1.1 does.
LARGE_TIER_FROM = 2800
# One log line for the KV cache size and the concurrency from v0.28.0 (kv_cache_utils.py update_kv_cache_capacity;
# two lines in v0.27.1 and before).
ONE_LINE_LOG_FROM = 2800
# VLLM_USE_FLASHINFER_SAMPLER's default with FlashInfer installed, as vLLM's images install it: on up to v0.11.0, opt-in
# from v0.11.1 (vllm/envs.py: None, FlashInfer only when set to 1), on again from v0.21.0 (vllm/envs.py: default True,
# read at v0.21.0, v0.22.0, v0.28.0 and v0.33.0).
FLASHINFER_OPT_IN_FROM, FLASHINFER_ON_AGAIN_FROM = 1101, 2100


@dataclass(frozen=True)
class SamplerPath:
    """What the profile run's sampler warm-up holds at its peak for a runner, a range of releases and a top-k/top-p
    path: the bytes per logit beyond the logits in the model's dtype, the fp32 copy of the logits ('model': unless the
    model's dtype is fp32, as V1's Sampler.forward logits.to(torch.float32); 'always': V2's torch.empty_like(logits,
    dtype=torch.float32).copy_(logits); 'none'), the hidden-state rows per request still held beside the profile run's
    all-token hidden states (V1: the last ones and _dummy_sampler_run's torch.rand_like of them; V2: the last ones),
    which tensors those are, and the source."""

    extra: int  # bytes per logit at the peak beyond the model-dtype logits and their fp32 copy
    copy: str  # 'model', 'always' or 'none'
    hidden_rows: int
    words: str
    source: str
    sm_buffer: bool = False  # a cached fp32 buffer of one vocabulary row a program, min(requests, SMs) programs


FLASHINFER = Cite("flashinfer-sampling", "top_k_top_p_sampling_from_logits, top_k_mask_logits")
V1_FLASHINFER = SamplerPath(
    8, "model", 2, "FlashInfer's top_k_top_p_sampling_from_logits: the masked logits and their softmax, fp32",
    Cite("vllm-0.10.1.1", "vllm/v1/sample/ops/topk_topp_sampler.py TopKTopPSampler, flashinfer_sample") + "; "
    + FLASHINFER)
V1_SORT = SamplerPath(
    32, "model", 2, "PyTorch's sort: sorted values (fp32) and indices (int64), the sort's reverse indices (int64) and "
                    "CUB's third keys and values buffers (fp32 + int64)",
    Cite("vllm-0.11.1", "vllm/v1/sample/ops/topk_topp_sampler.py apply_top_k_top_p") + "; "
    + Cite("pytorch-sort-stable", "segmented_sort_pairs") + "; "
    + Cite("cub-segmented-radix-sort", "DispatchSegmentedRadixSort allocation_sizes"))
TRITON_SOURCE = (Cite("vllm-0.19.0", "vllm/v1/sample/ops/topk_topp_triton.py apply_top_k_top_p_triton "
                                     "(_TRITON_BUFFER_CACHE: logits.new_empty((min(next_power_of_2(NUM_PROGRAMS), "
                                     "num_sm), vocab_size)), NUM_PROGRAMS = min(num_sm, batch_size)), "
                                     "topk_topp_sampler.py forward_native, random_sample"))
TRITON_WORDS = ("a Triton top-k/top-p kernel in place, then the probabilities and random_sample's exponential draw, "
                "fp32, beside the kernel's cached buffer: one fp32 row of the vocabulary for each of min(requests, "
                "SMs) programs")
V1_TRITON = SamplerPath(8, "model", 2, TRITON_WORDS,
                        Cite("vllm-0.17.0", "vllm/v1/sample/ops/topk_topp_sampler.py apply_top_k_top_p") + "; "
                        + TRITON_SOURCE, sm_buffer=True)
V1_TRITON_WARMED = SamplerPath(
    8, "model", 2, "FlashInfer's sampler where it is on (the masked logits and their softmax, fp32), then, on or off, "
                   + TRITON_WORDS,
    Cite("vllm-0.21.0", "vllm/v1/worker/gpu_model_runner.py _dummy_sampler_run") + " ('Also warm forward_native': a "
    "second call with a generator, which takes forward_native whatever VLLM_USE_FLASHINFER_SAMPLER says); "
    + TRITON_SOURCE + "; " + FLASHINFER, sm_buffer=True)
V2_LOGITS = SamplerPath(
    0, "none", 1, "the logits as they come (no sampling parameter set, so no fp32 copy and no top-k/top-p) into "
                  "gumbel_sample's Triton kernel",
    Cite("vllm-0.28.0", "vllm/v1/worker/gpu/sample/sampler.py Sampler.apply_sampling_params, Sampler.sample") + "; "
    + Cite("vllm-0.28.0", "vllm/v1/worker/gpu/sample/states.py SamplingStates.get_top_k_top_p"))
V2_WARMUP = (Cite("vllm-0.33.0", "vllm/v1/worker/gpu/model_runner.py _dummy_sampler_run") + " (a second pass with "
             "SamplingParams.for_sampler_warmup: top-k 50, top-p 0.9, min-p, penalties, logprobs); "
             + Cite("vllm-0.33.0", "vllm/v1/worker/gpu/sample/sampler.py Sampler.apply_sampling_params, "
                                   "Sampler._sample_random"))
V2_FLASHINFER = SamplerPath(
    8, "always", 1, "the second pass's fp32 copy of the logits, then FlashInfer's top_k_top_p_sampling_from_logits: "
                    "the masked logits and their softmax, fp32",
    V2_WARMUP + "; " + Cite("vllm-0.33.0", "vllm/v1/sample/ops/topk_topp_sampler.py flashinfer_sample") + "; "
    + FLASHINFER)
V2_TRITON = SamplerPath(
    0, "always", 1, "the second pass's fp32 copy of the logits, masked in place by the Triton top-k/top-p kernel, "
                    "beside its cached buffer (one fp32 row of the vocabulary for each of min(requests, SMs) "
                    "programs), then gumbel_sample's Triton kernel",
    V2_WARMUP + "; " + Cite("vllm-0.33.0", "vllm/v1/sample/ops/topk_topp_triton.py apply_top_k_top_p_triton"),
    sm_buffer=True)


@dataclass(frozen=True)
class SamplerRelease:
    """The sampler path a range of releases takes from `first` (minor x 100 + patch) on, with FlashInfer's sampler on
    and off (VLLM_USE_FLASHINFER_SAMPLER)."""

    first: int
    on: SamplerPath
    off: SamplerPath


# The V1 runner's top-k/top-p path by release, read from vllm/v1/sample/ops/topk_topp_sampler.py and
# gpu_model_runner.py _dummy_sampler_run of each: the oldest first. Off before v0.17.0: PyTorch's sort (forward_native,
# as a v0.10.2 log without FlashInfer installed shows); from v0.21.0 the warm-up also calls forward_native, so both
# take the Triton path's peak.
V1_SAMPLER = (SamplerRelease(1000, V1_FLASHINFER, V1_SORT),
              SamplerRelease(1700, V1_FLASHINFER, V1_TRITON),
              SamplerRelease(2100, V1_TRITON_WARMED, V1_TRITON_WARMED))
# The V2 runner's (from V2_RUNNER_DENSE_FROM): one pass without top-k/top-p, then from v0.33.0 the second pass, whose
# top-k/top-p is FlashInfer's fused sampler where it is on (Sampler.use_flashinfer) and the Triton kernel otherwise.
V2_SAMPLER = (SamplerRelease(V2_RUNNER_DENSE_FROM, V2_LOGITS, V2_LOGITS),
              SamplerRelease(V2_SAMPLER_WARMUP_FROM, V2_FLASHINFER, V2_TRITON))
VERSION_SYMBOL = sym("vllm_version")
V2_RUNNER, FLASHINFER_ON = sym("v2_runner"), sym("flashinfer_sampler")
# VLLM_USE_FLASHINFER_SAMPLER's default for the release (FLASHINFER_OPT_IN_FROM, FLASHINFER_ON_AGAIN_FROM): 1 or 0.
FLASHINFER_BY_RELEASE = when(both(VERSION_SYMBOL >= FLASHINFER_OPT_IN_FROM, VERSION_SYMBOL < FLASHINFER_ON_AGAIN_FROM),
                             0, 1)
# The Triton top-k/top-p kernel's cached buffer (SamplerPath.sm_buffer): one fp32 vocabulary row for each of
# min(requests, SMs) programs, kept for the process (the SMs from the GPU catalog; 0 where it gives none).
SM_BUFFER = minimum(sym("profile_requests"), sym("multiprocessors")) * sym("vocab") * 4


def by_release(rows: tuple, value: Callable[[Any], Any]) -> Any:
    """The rule that picks, for the release in VERSION_SYMBOL, `value(row)` of the last row it reaches (the first
    row's below them all): rows oldest first."""
    rule = value(rows[0])
    for row in rows[1:]:
        rule = when(VERSION_SYMBOL >= row.first, value(row), rule)
    return rule


def sampler_rule(value: Callable[[SamplerPath], Any]) -> Any:
    """The rule that picks `value(path)` of the path the release, its runner and VLLM_USE_FLASHINFER_SAMPLER take."""
    def pick(rows: tuple) -> Any:
        return by_release(rows, lambda row: when(FLASHINFER_ON, value(row.on), value(row.off)))
    return when(V2_RUNNER, pick(V2_SAMPLER), pick(V1_SAMPLER))


# The release's sampler path as the rules read it: its bytes per logit beyond the logits and their fp32 copy, the fp32
# copy's bytes per logit, the hidden-state rows per request held beside it, and its cached Triton buffer (SM_BUFFER)
# where the path keeps one.
SAMPLER_EXTRA = sampler_rule(lambda path: path.extra)
SAMPLER_COPY = sampler_rule(lambda path: {"model": when(eq(bytes_of(sym("activation_dtype")), 4), 0, 4),
                                          "always": 4, "none": 0}[path.copy])
SAMPLER_HIDDEN_ROWS = sampler_rule(lambda path: path.hidden_rows)
SAMPLER_BUFFER = sampler_rule(lambda path: SM_BUFFER if path.sm_buffer else 0)


def release_code(text: Any) -> int:
    """A release as --vllm-version takes it ('0.19', '0.19.0', 'v0.11.1') as the rules read it (minor x 100 + patch);
    ValueError naming the option otherwise."""
    if not isinstance(text, str):  # YAML reads 0.10 as the number 0.1
        raise ValueError(f"vllm_version: give the release as text, such as '0.19' or '0.19.0', not the number {text!r}")
    words = text.strip().removeprefix("v")
    parts = words.split(".")
    if not (2 <= len(parts) <= 4 and all(p.isdigit() for p in parts)):
        raise ValueError(f"vllm_version: {text!r} is not a vLLM release such as 0.19 or 0.19.0")
    release = tuple(int(p) for p in parts[:3]) + (0,) * (3 - len(parts[:3]))
    if not OLDEST <= release <= NEWEST:
        raise ValueError(f"vllm_version: {text!r} is not modelled: give a release from 0.10 to 0.33")
    return release[1] * 100 + min(release[2], 99)


def release_words(code: int) -> str:
    """The engine as a report names it for a release code."""
    return f"vLLM 0.{code // 100}.{code % 100}"


def flashinfer_given(value: Any) -> int | None:
    """--vllm-use-flashinfer-sampler as given (0 or 1: the command line's '0' and '1', front matter's numbers), None
    when not given; ValueError naming the option otherwise."""
    if value is None:
        return None
    if str(value) not in ("0", "1") or isinstance(value, bool):
        raise ValueError(f"vllm_use_flashinfer_sampler: give 0 or 1 (VLLM_USE_FLASHINFER_SAMPLER), not {value!r}")
    return int(value)


@dataclass(frozen=True)
class EngineSettings:
    """The engine's own options, under the engine's own names (None: the engine's default)."""

    engine: str = "vllm"
    gpu_memory_utilization: float | None = None  # share of the GPU's total the engine requests (default 0.92)
    max_model_len: int | None = None  # tokens per request (default: default_length, the model's own)
    max_num_seqs: int | None = None  # requests per step (default: 1024 on H100/H200-class GPUs, else 256)
    max_num_batched_tokens: int | None = None  # tokens per step (default: 8192 on H100/H200-class GPUs, else 2048)
    block_size: int = DEFAULT_BLOCK_SIZE  # tokens per KV-cache block
    enforce_eager: bool = False  # no CUDA graphs
    kv_cache_memory: int | None = None  # bytes for the KV cache, given instead of measured (--kv-cache-memory)
    # --kv-cache-dtype in the engine's own word, where it says more than the dtype (vLLM's per-token-head modes keep
    # fp32 scales in the pages); the dtype itself is the Config's kv_dtype.
    kv_cache_dtype: str | None = None
    vllm_version: str | None = None  # the vLLM release to size the run for, e.g. "0.19" (default: 0.33.0)
    # VLLM_USE_FLASHINFER_SAMPLER, 0 or 1 (the command line's "0" or "1"); None: the release's default with FlashInfer
    # installed (the rules' FLASHINFER_BY_RELEASE).
    vllm_use_flashinfer_sampler: int | str | None = None
    # SGLang's (`python -m sglang.launch_server --help`):
    mem_fraction_static: float | None = None  # share of the free memory for weights + KV cache (default by GPU)
    page_size: int | None = None  # tokens per KV page (default 1; 64 on Blackwell, whose default backend needs it)
    chunked_prefill_size: int | None = None  # tokens per prefill chunk (default by GPU: 2048 to 16384)
    cuda_graph_max_bs: int | None = None  # largest decode batch captured in a CUDA graph (default by GPU and TP)
    max_running_requests: int | None = None  # requests at once (default from the pool, 2048 to 4096)
    context_length: int | None = None  # tokens per request (default: default_length, the model's own)
    swa_full_tokens_ratio: float | None = None  # sliding-window pool / full pool tokens, hybrid models (default 0.8)
    sglang_version: str | None = None  # the SGLang release to size the run for, e.g. "0.5.19" (default: 0.5.23)
    # Hugging Face generate's (GenerationConfig, from_pretrained; builder.model.engine_hf):
    cache_implementation: str | None = None  # "dynamic" (transformers' default) or "static"
    attn_implementation: str | None = None  # "eager", "sdpa" or "flash_attention_2" (default: the run's --attention)
    max_new_tokens: int | None = None  # tokens generate adds (default 20)
    max_cache_len: int | None = None  # a static cache's length when above prompt + max_new_tokens - 1
    logits_to_keep: int | None = None  # logits rows of the prefill (default 1; 0 keeps them all)


def batch_defaults(gpu_total: int, gpu_id: str, release: int = DEFAULT_RELEASE) -> tuple[int, int]:
    """(max_num_seqs, max_num_batched_tokens) `vllm serve` picks for a GPU before its clamps (BATCH_SYMBOLS):
    vllm/engine/arg_utils.py get_batch_defaults (OPENAI_API_SERVER): 1024 and 16384 from 160 GiB up, 1024 and 8192
    from 70 GiB up except A100s, 256 and 2048 below.

    The 160 GiB tier (B200/B300, MI300X here) is v0.28.0's and after (arg_utils.py of v0.28.0 to v0.33.0 read: "for
    GPUs like B200/B300 with >= 160GB memory, use the largest defaults"), so it holds from LARGE_TIER_FROM: v0.10.1.1
    to v0.27.1 have the 70 GiB tier alone (arg_utils.py of v0.10.1.1, v0.11.0, v0.19.0 and v0.27.1 read) and give
    those GPUs 8192 tokens a step. v0.33.0 also keeps a GB10 (DGX Spark, compute capability 12.1) on the small tier,
    a GPU the catalog does not list."""
    if gpu_total >= 160 * GIB and release >= LARGE_TIER_FROM:
        return 1024, 16384
    if gpu_total >= 70 * GIB and "a100" not in gpu_id.lower():
        return 1024, 8192
    return 256, 2048


def default_length(config: Any, engine: str) -> int:
    """The tokens a request may hold when --max-model-len (vLLM) or --context-length (SGLang) is not given: the
    model's own limit, as `engine` derives it from config.json (vllm/config/model.py _get_and_verify_max_len;
    SGLang srt/utils/hf_transformers_utils.py get_context_length: Architecture.engine_positions), else the run's
    context for a model that does not give one."""
    return (config.model.engine_positions(engine) if config.model is not None else 0) or config.context


def engine_inputs(settings: EngineSettings, gpu_total: int, gpu_id: str, length: int,
                  gpu: Any = None) -> dict[str, Any]:
    """The engine's settings as the rules read them, its defaults filled in (`length`: a request's tokens when the
    engine's flag for it is not given, default_length). `gpu`, the catalog entry (builder.catalog.Gpu) where there
    is one, gives its CUDA total and the threads it holds at once (SGLang's memory before the weights); without
    one, the CUDA total is `gpu_total` and the threads engine_sglang's stand-in."""
    release = DEFAULT_RELEASE if settings.vllm_version is None else release_code(settings.vllm_version)
    sglang_release = (sglang.DEFAULT_RELEASE if settings.sglang_version is None
                      else sglang.release_code(settings.sglang_version))
    flashinfer = flashinfer_given(settings.vllm_use_flashinfer_sampler)
    seqs, tokens = batch_defaults(gpu_total, gpu_id, release)
    utilization, fraction = settings.gpu_memory_utilization, settings.mem_fraction_static
    blackwell = gpu_id.lower().startswith(("b100", "b200", "b300", "gb200", "gb300"))
    return {"gpu_total": gpu_total,
            "cuda_total": gpu.usable_bytes if gpu is not None else gpu_total,
            "resident_threads": sglang.resident_threads(gpu),
            "multiprocessors": getattr(gpu, "multiprocessors", 0),
            # SGLang's; 0 where the engine picks (server_args.py; trtllm_mha, Blackwell's default, needs 64).
            "mem_fraction_static": Fraction(str(fraction)) if fraction is not None else 0,
            "page": settings.page_size or (64 if blackwell else 1),
            "chunked_prefill_size": settings.chunked_prefill_size or 0,
            "cuda_graph_max_bs": settings.cuda_graph_max_bs or 0,
            "running_requests": settings.max_running_requests or 0,
            "context_len": settings.context_length or length,
            "swa_full_tokens_ratio": Fraction(str(settings.swa_full_tokens_ratio))
            if settings.swa_full_tokens_ratio is not None else 0,
            "sglang_version": sglang_release,  # SGLang's release (engine_sglang.release_code)
            # vLLM's share as given (0: the release's default, the rules' "utilization") and the release.
            "gpu_memory_utilization": 0 if utilization is None else Fraction(str(utilization)),
            "vllm_version": release,
            # VLLM_USE_FLASHINFER_SAMPLER as given (0 or 1), or -1: the release's default (FLASHINFER_BY_RELEASE).
            "flashinfer_sampler_value": flashinfer if flashinfer is not None else -1,
            "max_model_len": settings.max_model_len or length,
            # vLLM's batch limits as given (0: the engine's default) and its defaults for this GPU; the rules clamp
            # the defaults as arg_utils.py _set_default_max_num_seqs_and_batched_tokens_args does (BATCH_SYMBOLS).
            "max_num_seqs_given": settings.max_num_seqs or 0,
            "max_num_batched_tokens_given": settings.max_num_batched_tokens or 0,
            "default_max_num_seqs": seqs, "default_max_num_batched_tokens": tokens,
            "block_size": settings.block_size, "enforce_eager": int(settings.enforce_eager),
            "nvlink_switch": int(gpu_id in NVLINK_SWITCH_GPUS),
            "rocm": int(gpu_id.lower().startswith(("mi2", "mi3"))),  # AMD Instinct: ROCm, not CUDA
            "kv_scale_bytes": PER_TOKEN_HEAD_SCALE_BYTES if settings.kv_cache_dtype in KV_CACHE_PER_TOKEN_HEAD else 0,
            "kv_cache_memory": settings.kv_cache_memory or 0}


def gib_text(x: Any) -> Any:
    """vllm/utils/mem_utils.py format_gib: str(round(bytes / 2**30, 2)), e.g. '62.0', '6.51'."""
    return real(floor(x * 100 / GIB + Fraction(1, 2)) / 100)


T, R = sym("max_num_batched_tokens"), sym("profile_requests")
SEQS_GIVEN, TOKENS_GIVEN = sym("max_num_seqs_given"), sym("max_num_batched_tokens_given")
# The batch limits as vLLM settles them (vllm/engine/arg_utils.py _set_default_max_num_seqs_and_batched_tokens_args,
# v0.27.1; with chunked prefill, vLLM's default for generating models): a value given is kept; a default
# max_num_batched_tokens is at most max_num_seqs x max_model_len ("Ensure max_num_batched_tokens does not exceed model
# limit"), then a default max_num_seqs at most max_num_batched_tokens. Only a max_num_seqs given above the tokens per
# step is refused (engine_report, as SchedulerConfig._verify_args refuses it).
BATCH_SYMBOLS = {
    "max_num_batched_tokens": when(TOKENS_GIVEN, TOKENS_GIVEN, minimum(
        when(SEQS_GIVEN, SEQS_GIVEN, sym("default_max_num_seqs")) * sym("max_model_len"),
        sym("default_max_num_batched_tokens"))),
    "max_num_seqs": when(SEQS_GIVEN, SEQS_GIVEN, minimum(sym("default_max_num_seqs"), T)),
}
VLLM = RuleSet(
    symbols={
        **BATCH_SYMBOLS,
        **KV_SYMBOLS,
        # The share requested: as given, else the release's default (BUDGET_CHANGE).
        "utilization": when(sym("gpu_memory_utilization"), sym("gpu_memory_utilization"),
                            when(VERSION_SYMBOL >= BUDGET_CHANGE, DEFAULT_UTILIZATION, UTILIZATION_BEFORE)),
        "requested": ceil(sym("gpu_total") * sym("utilization")),
        "profile_requests": minimum(T, sym("max_num_seqs")),
        # The model runner (V2_RUNNER_DENSE_FROM, V2_RUNNER_ALL_FROM) and VLLM_USE_FLASHINFER_SAMPLER (given, else the
        # release's default with FlashInfer installed, which engine_inputs fills in).
        "v2_runner": when(VERSION_SYMBOL >= V2_RUNNER_ALL_FROM, 1,
                          when(VERSION_SYMBOL >= V2_RUNNER_DENSE_FROM, negate(sym("experts")), 0)),
        "flashinfer_sampler": when(sym("flashinfer_sampler_value") >= 0, sym("flashinfer_sampler_value"),
                                   FLASHINFER_BY_RELEASE),
        # The profile forward, eager and without attention: the residual stream, the MLP's input, its
        # gate-and-up output, the activation and the output at the MLP's down projection, per rank (an MoE
        # layer's fused kernel keeps top_k rows of each token: vllm fused_moe intermediate caches).
        "profile_forward": T * bytes_of(sym("activation_dtype"))
        * (3 * sym("hidden") + when(sym("experts"),
                                    sym("top_k") * (3 * sym("expert_ffn") // sym("tp") + sym("hidden")),
                                    3 * sym("ffn") // sym("tp"))),
        # The sampler warm-up at its peak (sampler_rule: the release, its runner and VLLM_USE_FLASHINFER_SAMPLER):
        # one logits row per request in the model's dtype, their fp32 copy (SamplerPath.copy), the path's tensors
        # (SamplerPath.extra) and the profile run's hidden states in the model's dtype (profile_run: all tokens' and
        # the last ones' still referenced, and the V1 runner's torch.rand_like of the last ones), with the Triton
        # kernel's cached buffer where the path runs it.
        "sampler_copy": SAMPLER_COPY,
        "sampler_extra": SAMPLER_EXTRA,
        "sampler_hidden_rows": SAMPLER_HIDDEN_ROWS,
        "profile_sampler": R * sym("vocab") * (bytes_of(sym("activation_dtype")) + sym("sampler_copy")
                                               + sym("sampler_extra"))
        + (T + sym("sampler_hidden_rows") * R) * sym("hidden") * bytes_of(sym("activation_dtype")) + SAMPLER_BUFFER,
        "profile_peak": maximum(sym("profile_forward"), sym("profile_sampler")),
        "non_torch": when(TP_OVER_SWITCH, NON_TORCH_TP, NON_TORCH),
        "cuda_graphs": when(sym("enforce_eager"), 0, CUDA_GRAPHS),
        # The graphs come out of the budget from v0.20.0 with the V1 runner (BUDGET_CHANGE), from v0.29.0 with the V2
        # (V2_GRAPHS_FROM); before, they are captured after the KV cache is allocated, in the memory above the share
        # requested.
        "graphs_estimated": VERSION_SYMBOL >= when(V2_RUNNER, V2_GRAPHS_FROM, BUDGET_CHANGE),
        "graphs_in_budget": when(sym("graphs_estimated"), sym("cuda_graphs"), 0),
        # The weights as "Model loading took" reports them: the parameters, the rotary cos/sin table and the
        # allocator's unsplit blocks (allocated bytes).
        **allocator.loaded_symbols(bytes_of(sym("activation_dtype")), free_memory=False),
        "available": when(sym("kv_cache_memory"), sym("kv_cache_memory"),
                          sym("requested") - sym("loaded_weights") - sym("non_torch") - sym("profile_peak")
                          - sym("graphs_in_budget")),
        # One block of one layer: block_size tokens of K and V for this rank's KV heads (or of the latent, MLA), and
        # with a per-token-head mode an fp32 k and v scale per token and KV head (AttentionSpec.page_size_bytes).
        "page": sym("block_size") * (sym("kv_per_token_layer") + sym("kv_heads_per_gpu") * sym("kv_scale_bytes")),
        # KV cache groups (kv_cache_utils.py _get_kv_cache_groups_uniform_page_size): a model mixing full and
        # sliding-window layers gets groups of the same number of layers, min(F, S), or max(F, S) when that is
        # under 1.5 x min(F, S); each group has its own block table, and all draw from one pool of blocks, each
        # block spanning one layer of every group. A model of one kind is one group of all its layers.
        "hybrid": both(sym("full_layers") > 0, sym("sliding_layers") > 0),
        "group_layers": when(sym("hybrid"), when(
            2 * maximum(sym("full_layers"), sym("sliding_layers")) < 3 * minimum(sym("full_layers"),
                                                                                 sym("sliding_layers")),
            maximum(sym("full_layers"), sym("sliding_layers")), minimum(sym("full_layers"), sym("sliding_layers"))),
            sym("stage_layers")),
        "full_groups": when(sym("full_layers"), ceil(sym("full_layers") / sym("group_layers")), 0),
        "sliding_groups": when(sym("sliding_layers"), ceil(sym("sliding_layers") / sym("group_layers")), 0),
        "num_blocks": maximum(0, floor(floor(sym("available") / sym("page")) / sym("group_layers"))),
        # Blocks one request takes in each group: all of max_model_len for full attention; for sliding-window
        # layers the window plus a step's tokens, at most max_model_len, and one more block, capped or not
        # (kv_cache_interface.py SlidingWindowSpec.max_memory_usage_bytes at commit 001cabc: "+1 here because the
        # sliding window may not start from the beginning of the block"). The request's blocks are the sum over
        # groups (get_max_concurrency_for_kv_cache_config).
        # The tokens in flight (IN_FLIGHT_FROM): max_num_batched_tokens for each concurrent batch, with asynchronous
        # scheduling (vLLM's default) pp + 1 on the V2 runner, 2 on the V1 with one stage and pp with more
        # (vllm/config/vllm.py max_concurrent_batches); one batch before v0.26.0.
        "in_flight": T * when(VERSION_SYMBOL >= IN_FLIGHT_FROM,
                              when(V2_RUNNER, sym("pp") + 1, maximum(sym("pp"), 2)), 1),
        "window_blocks": ceil((sym("sliding_window") - 1 + sym("in_flight")) / sym("block_size")) + 1,
        "sliding_blocks": ceil(minimum(sym("sliding_window") - 1 + sym("in_flight"), sym("max_model_len"))
                               / sym("block_size")) + 1,
        "blocks_per_request": sym("full_groups") * ceil(sym("max_model_len") / sym("block_size"))
        + sym("sliding_groups") * sym("sliding_blocks"),
        "max_concurrency": sym("num_blocks") / sym("blocks_per_request"),
        "kv_cache_tokens": floor(sym("max_concurrency") * sym("max_model_len")),
        # Whole requests of max_model_len tokens the blocks hold at once: the whole part of the log's concurrency.
        "concurrent_requests": floor(sym("max_concurrency")),
        "available_gib": gib_text(sym("available")),  # as the "Available KV cache memory" line prints it
        "needed": sym("group_layers") * sym("page") * sym("blocks_per_request"),
        # A max_model_len above the model's own limit is refused before any memory is measured
        # (vllm/config/model.py _get_and_verify_max_len, unless VLLM_ALLOW_LONG_MAX_MODEL_LEN is set).
        "too_long": beyond_model(sym("max_model_len")),
        # Weights that alone pass the GPU's CUDA total never finish loading: PyTorch raises torch.OutOfMemoryError
        # in the load (vLLM's "Model loading took" is never printed), whatever the budget.
        # A --kv-cache-memory given stands for a measured run: its weights are not the model's to judge.
        "weights_exceed": both(negate(sym("kv_cache_memory")), sym("loaded_weights") > sym("cuda_total")),
        "fits": both(negate(sym("too_long")), negate(sym("weights_exceed")), sym("available") > 0,
                     sym("needed") <= sym("available")),
        # The largest max_model_len whose blocks fit: vLLM's binary search lands on it (with sliding groups, where
        # their windows are already capped: the simplification an estimate in an error message allows).
        "estimated_max_model_len": minimum(sym("max_model_len"), maximum(0, sym("block_size") * floor(
            (sym("available") / (sym("group_layers") * sym("page"))
             - when(sym("hybrid"), sym("sliding_groups") * sym("window_blocks"), 0))
            / maximum(sym("full_groups"), 1)))),
        "error": when(sym("too_long"), fmt(
            "User-specified max_model_len ({0}) is greater than the derived max_model_len ({1}={2} or "
            "model_max_length=None in model's config.json). To allow overriding this maximum, set the env var "
            "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme caution.",
            sym("max_model_len"), LENGTH_KEY, MODEL_LENGTH), when(sym("weights_exceed"), fmt(
            "CUDA out of memory while loading the weights: they take {0} GiB on each GPU, more than its {1} GiB "
            "(PyTorch raises torch.OutOfMemoryError in the load). Spread them over more GPUs with "
            "tensor_parallel_size or pipeline_parallel_size.", gib_text(sym("loaded_weights")),
            gib_text(sym("cuda_total"))), when(sym("fits"), "", when(
            sym("available") > 0,
            fmt("To serve at least one request with the model's max seq len ({0}), ({1} GiB KV cache is needed, "
                "which is larger than the available KV cache memory ({2} GiB). {3}Try increasing "
                "`gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or decreasing "
                "`max_model_len` when initializing the engine.", sym("max_model_len"), gib_text(sym("needed")),
                sym("available_gib"),
                when(sym("estimated_max_model_len") > 0,
                     fmt("Based on the available memory, the estimated maximum model length is {0}. ",
                         sym("estimated_max_model_len")), "")),
            "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing "
            "the engine.")))),
    },
    parts=(
        PartRule("weights", sym("weights_bytes"), "the weights as loaded (torch-allocated)",
                 when(both(sym("experts") > 0, sym("dp") > 1),
                      AVAILABLE + "; the routed experts over tp x dp ranks: " + VLLM_EXPERT_SOURCE, AVAILABLE),
                 "as loaded"),
        rotary.table_part(rotary.VLLM_SOURCE),
        allocator.rounding_part(allocator.VLLM_SOURCE, free_memory=False),
        PartRule("activations/profile_peak", sym("profile_peak"),
                 fmt("max(tokens x (3h + 3f/t) x bytes, requests x V x (bytes + {0} + {1}) + (tokens + {2} x "
                     "requests) x h x bytes{3})", sym("sampler_copy"), sym("sampler_extra"),
                     sym("sampler_hidden_rows"),
                     sampler_rule(lambda path: " + min(requests, SMs) x V x 4" if path.sm_buffer else "")),
                 fmt("{0}{1}", when(V2_RUNNER, PROFILE_V2, PROFILE_V1),
                     sampler_rule(lambda path: path.words + ": " + path.source)),
                 fmt("{0} tokens, {1} logits rows, {2} model runner, FlashInfer's sampler {3}",
                     sym("max_num_batched_tokens"), sym("profile_requests"), when(V2_RUNNER, "V2", "V1"),
                     when(FLASHINFER_ON, "on", "off")),
                 fmt("{0}{1}{2}", PROFILE_NOTE,
                     sampler_rule(lambda path: TRITON_BUFFER_NOTE if path.sm_buffer else ""),
                     when(V2_RUNNER, "", sampler_rule(lambda path: SMALL_BATCH_NOTE if path.sm_buffer else "")))),
        PartRule("overhead/non_torch", sym("non_torch"), "fixed",
                 when(TP_OVER_SWITCH, NON_TORCH_TP_SOURCE, NON_TORCH_SOURCE), "fixed", "assumed"),
        PartRule("overhead/cuda_graphs", sym("cuda_graphs"), "fixed",
                 when(sym("graphs_estimated"), CUDA_GRAPHS_SOURCE,
                      when(V2_RUNNER, CUDA_GRAPHS_V2_OUTSIDE, CUDA_GRAPHS_OUTSIDE)), "fixed",
                 when(sym("graphs_estimated"), "assumed", "assumed; outside the KV budget in this release"),
                 when=sym("cuda_graphs")),
        PartRule("kv_cache", maximum(0, sym("available")), "what is left of the request",
                 fmt("{0}{1}", when(sym("kv_lora_rank") > 0, BLOCKS + "; " + MLA_PAGE,
                                    when(sym("sliding_layers"), BLOCKS + "; " + GROUPS, BLOCKS)),
                     when(sym("kv_scale_bytes"), "; " + PER_TOKEN_HEAD, "")),
                 fmt("{0} blocks of {1} tokens", sym("num_blocks"), sym("block_size")),
                 when(sym("hybrid"), fmt("{0} groups of {1} layers ({2} full, {3} sliding-window)",
                                         sym("full_groups") + sym("sliding_groups"), sym("group_layers"),
                                         sym("full_groups"), sym("sliding_groups")), "")),
        PartRule("unrequested", maximum(0, sym("gpu_total") - sym("loaded_weights") - sym("profile_peak")
                                        - sym("non_torch") - sym("cuda_graphs") - maximum(0, sym("available"))),
                 "total - the parts above", REQUEST, "not requested",
                 "outside the engine's budget: the CUDA context and NCCL set-up come out of it"),
    ),
)
# vLLM's startup log line (kv_cache_utils.py update_kv_cache_capacity, one line from v0.28.0: ONE_LINE_LOG_FROM; "GPU"
# is v0.30.0's and later's device name for CUDA, _kv_cache_device_name in v0.33.0).
LOG_LINE = "GPU KV cache size: {0:,} tokens, Maximum concurrency for {1:,} tokens per request: {2:.2f}x"
AVAILABLE_LINE = "Available KV cache memory: {0} GiB"  # gpu_worker.py determine_available_memory


# v0.27.1 and before print the two on lines of their own (kv_cache_utils.py of v0.19.0 and v0.27.1).
RELEASE_LOG_LINES = ("GPU KV cache size: {0:,} tokens", "Maximum concurrency for {1:,} tokens per request: {2:.2f}x")


def vllm_lines(values: dict[str, Any]) -> list[str]:
    """vLLM's own startup lines, as the release prints them."""
    numbers = (int(values["kv_cache_tokens"]), values["max_model_len"], float(values["max_concurrency"]))
    lines = (LOG_LINE,) if values["vllm_version"] >= ONE_LINE_LOG_FROM else RELEASE_LOG_LINES
    return [AVAILABLE_LINE.format(values["available_gib"])] + [line.format(*numbers) for line in lines]


def vllm_refused_by(values: dict[str, Any]) -> tuple[str, ...]:
    """The option a refusal names: weights past the GPU's total, the parallel sizes that spread them; the KV memory
    given (--kv-cache-memory), else the share of the GPU requested
    (kv_cache_utils.py _check_enough_kv_cache_memory: "Try increasing `gpu_memory_utilization` ... or decreasing
    `max_model_len`"), with --max-model-len, which also moves it; a length above the model's own, --max-model-len
    alone."""
    if values["too_long"]:
        return ("max_model_len",)
    if values["weights_exceed"]:
        return ("tp", "pp")
    return ("kv_cache_memory" if values["kv_cache_memory"] else "gpu_memory_utilization", "max_model_len")


def vllm_summary(values: dict[str, Any]) -> dict[str, Any]:
    """vLLM's numbers as --json gives them."""
    return {"gpu_memory_utilization": float(values["utilization"]),
            "requested_bytes": int(values["requested"]), "max_model_len": values["max_model_len"],
            "max_num_seqs": values["max_num_seqs"], "max_num_batched_tokens": values["max_num_batched_tokens"],
            "block_size": values["block_size"], "kv_cache_bytes": max(0, int(values["available"])),
            "num_blocks": int(values["num_blocks"]), "kv_cache_tokens": int(values["kv_cache_tokens"]),
            "max_concurrency": round(float(values["max_concurrency"]), 4), "needed_bytes": int(values["needed"])}


# vLLM's options (`vllm serve --help`) as the command line offers them: (EngineSettings field, kind: 'float',
# 'whole', 'size', 'switch', 'text' or 'choice' (its words in VLLM_CHOICES), metavar, help); the flag is the field with
# dashes.
VLLM_FLAGS = (
    ("gpu_memory_utilization", "float", "F",
     "share of the GPU's memory the engine requests, in (0, 1] (vLLM default 0.92)"),
    ("max_model_len", "whole", "TOKENS",
     "tokens per request (default: --context where given, else vLLM's: the model's max_position_embeddings)"),
    ("max_num_seqs", "whole", "N", "requests per step (vLLM default: 1024 on H100/H200-class GPUs, else 256)"),
    ("max_num_batched_tokens", "whole", "N",
     "tokens per step (vLLM default: 16384 from 160 GiB (B200, MI300X; 0.28 on), 8192 on H100/H200-class GPUs, else "
     "2048)"),
    ("block_size", "whole", "TOKENS", "tokens per KV-cache block"),
    ("enforce_eager", "switch", "", "no CUDA graphs"),
    ("kv_cache_memory", "size", "SIZE", "bytes for the KV cache, given instead of profiled (e.g. 6.51GiB)"),
    ("vllm_version", "text", "X.Y", "the vLLM release whose start-up to model, 0.10 to 0.33 (e.g. 0.19 or 0.19.0): its "
     "default utilization, model runner, whether CUDA graphs come out of the budget, its sampler warm-up, batch "
     "defaults and log lines (default: 0.33.0, the newest)"),
    ("vllm_use_flashinfer_sampler", "choice", "{0,1}",
     "VLLM_USE_FLASHINFER_SAMPLER, vLLM's environment variable (vllm/envs.py): 1 samples top-k/top-p with "
     "FlashInfer's kernel, 0 with vLLM's own (PyTorch's sort before 0.17, a Triton kernel from 0.17); it moves the "
     "profile run's sampler warm-up where a release runs top-k/top-p in it (the V1 model runner up to 0.20, the V2 "
     "from 0.33). Default: what the release does with FlashInfer installed, as vLLM's images have it: 1 up to 0.11.0 "
     "and from 0.21, 0 from 0.11.1 to 0.20"),
)
VLLM_CHOICES = {"vllm_use_flashinfer_sampler": ("0", "1")}


@dataclass(frozen=True)
class Engine:
    """An inference engine: its rules, the symbol its pipeline stages are compared by (the engine takes every
    worker's minimum), its own flags, log lines and JSON fields."""

    name: str
    title: str  # the engine as the command line's help names it
    version: str
    rules: RuleSet
    fewest: str
    flags: tuple[tuple[str, str, str, str], ...]  # its options: (EngineSettings field, kind, metavar, help)
    lines: Callable[[dict[str, Any]], list[str]]
    summary: Callable[[dict[str, Any]], dict[str, Any]]
    # Which of the catalog's totals the rules start from: "cuda" (cudaMemGetInfo's, what a process sees) or
    # "driver" (nvidia-smi's), with the reason in total_source.
    total: str = "cuda"
    total_source: str = ""
    choices: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)  # a 'choice' flag's words
    # The EngineSettings fields a refusal at start-up names, the one at fault first (() where it never refuses).
    refused_by: Callable[[dict[str, Any]], tuple[str, ...]] = lambda values: ()
    # The engine's version as a report names it, from its values (None: `version`, the one the rules model).
    version_of: Callable[[dict[str, Any]], str] | None = None

    def version_in(self, values: dict[str, Any]) -> str:
        """The version the report's values are for."""
        return self.version if self.version_of is None else self.version_of(values)

    @property
    def options(self) -> tuple[str, ...]:
        """The EngineSettings fields that are this engine's options."""
        return tuple(flag[0] for flag in self.flags)


def _engines() -> dict[str, Engine]:
    return {"vllm": Engine("vllm", "vLLM", VLLM_VERSION, VLLM, "num_blocks", VLLM_FLAGS, vllm_lines, vllm_summary,
                           "cuda", "vllm/v1/worker/utils.py request_memory: total is cudaMemGetInfo's", VLLM_CHOICES,
                           refused_by=vllm_refused_by, version_of=lambda values: release_words(values["vllm_version"])),
            "sglang": Engine("sglang", "SGLang", sglang.SGLANG_VERSION, sglang.SGLANG, "max_total_num_tokens",
                             sglang.FLAGS, sglang.log_lines, sglang.summary, "driver", sglang.TOTAL_SOURCE,
                             refused_by=sglang.refused_by,
                             version_of=lambda values: sglang.release_words(values["sglang_version"])),
            "hf": Engine("hf", "Hugging Face generate", hf.HF_VERSION, hf.HF, "headroom", hf.FLAGS, hf.lines,
                         hf.summary, "cuda", "torch's out-of-memory error is against what the CUDA process sees "
                         "(cudaMemGetInfo's total)", hf.CHOICES, refused_by=hf.refused_by)}


def engine_total(engine: str, cuda_total: int, driver_total: int) -> int:
    """The GPU total `engine`'s rules start from: cudaMemGetInfo's total for vLLM; nvidia-smi's for SGLang, whose
    defaults are chosen by nvidia-smi's MiB and whose memory gone before the weights was measured from it
    (driver_total 0, not in the catalog: the CUDA total)."""
    return driver_total or cuda_total if ENGINES[engine].total == "driver" else cuda_total


def engine_gpu_total(engine: str, gpu: Any) -> int:
    """engine_total of a catalog GPU: its CUDA total (usable_bytes) and its nvidia-smi total (driver_total_bytes)."""
    return engine_total(engine, gpu.usable_bytes, gpu.driver_total_bytes)


ENGINES = _engines()


@dataclass(frozen=True)
class EngineReport:
    """What the engine reports at startup for the worker with the fewest blocks (its minimum is the engine's)."""

    engine: str
    stage: str
    parts: tuple
    values: dict[str, Any]

    @property
    def fits(self) -> bool:
        return bool(self.values["fits"])


def _checked(settings: EngineSettings, config: Any) -> None:
    """ValueError naming the option, as validate_config does."""
    if settings.engine not in ENGINES:
        raise ValueError(f"engine: {settings.engine!r} is not one of {', '.join(ENGINES)}")
    fraction = settings.mem_fraction_static
    if fraction is not None and not 0 < fraction < 1:
        raise ValueError(f"mem_fraction_static: must be in (0, 1), got {fraction}")
    if config.mode != "serve":
        raise ValueError("engine: an inference engine serves (--mode serve)")
    if config.model is None:
        raise ValueError("engine: needs an architecture (--model or --config), not a raw parameter count")
    word = settings.kv_cache_dtype
    if word in KV_CACHE_PER_TOKEN_HEAD:
        if settings.engine != "vllm":
            raise ValueError(f"kv_cache_dtype: {word!r} is vLLM's per-token-head mode (vllm/v1/kv_cache_interface.py "
                             f"KVQuantMode), not {ENGINES[settings.engine].title}'s")
        if config.kv_dtype != KV_CACHE_PER_TOKEN_HEAD[word]:
            raise ValueError(f"kv_cache_dtype: {word!r} stores {KV_CACHE_PER_TOKEN_HEAD[word]} values, but kv_dtype is "
                             f"{config.kv_dtype}")
    ratio = settings.swa_full_tokens_ratio
    if ratio is not None and not 0 < ratio <= 1:
        raise ValueError(f"swa_full_tokens_ratio: must be in (0, 1], got {ratio}")
    if settings.engine == "vllm" and config.ep not in (1, config.dp):
        raise ValueError(f"ep: vLLM has no expert-parallel size of its own: its expert layers span all tp x dp ranks, "
                         f"slices of every expert by default, whole experts with --enable-expert-parallel, the same "
                         f"bytes a rank (vLLM 0.33.0 vllm/model_executor/layers/fused_moe/config.py "
                         f"FusedMoEParallelConfig.make); leave --ep out (here {config.ep} of --dp {config.dp})")
    if settings.vllm_version is not None:
        if settings.engine != "vllm":
            raise ValueError(f"vllm_version: a vLLM release, not an option of {ENGINES[settings.engine].title}")
        release_code(settings.vllm_version)
    if settings.sglang_version is not None:
        if settings.engine != "sglang":
            raise ValueError(f"sglang_version: an SGLang release, not an option of {ENGINES[settings.engine].title}")
        sglang.release_code(settings.sglang_version)
    if settings.vllm_use_flashinfer_sampler is not None:
        if settings.engine != "vllm":
            raise ValueError(f"vllm_use_flashinfer_sampler: vLLM's VLLM_USE_FLASHINFER_SAMPLER, not an option of "
                             f"{ENGINES[settings.engine].title}")
        flashinfer_given(settings.vllm_use_flashinfer_sampler)
    utilization = settings.gpu_memory_utilization
    if utilization is not None and not 0 < utilization <= 1:
        raise ValueError(f"gpu_memory_utilization: must be in (0, 1], got {utilization}")
    for name in ("max_model_len", "max_num_seqs", "max_num_batched_tokens", "block_size", "page_size",
                 "chunked_prefill_size", "cuda_graph_max_bs", "max_running_requests", "context_length"):
        value = getattr(settings, name)
        if value is not None and value < 1:
            raise ValueError(f"{name}: must be at least 1, got {value}")


# The experts as vLLM places them with --dp (VLLM_EXPERT_SOURCE).
def expert_layout(config: Any, engine: str) -> Any:
    """The run as `engine` places an MoE model's experts: vLLM over tp x dp ranks (ep = dp), the others as given."""
    return config.with_changes(ep=config.dp) if engine == "vllm" else config


def engine_report(config: Any, settings: EngineSettings, gpu_total: int, gpu_id: str,
                  gpu: Any = None) -> EngineReport:
    """The engine's startup numbers for `config` on a GPU of `gpu_total` bytes (config validated); `gpu`: the
    catalog entry, where there is one (engine_inputs)."""
    from builder.model.config import validate_config
    from builder.model.inputs import rule_inputs, stages
    from builder.model.states import MODEL_STATES

    _checked(settings, config)
    # vLLM's and SGLang's requests hold their own length (default_length, or their length flags, which their own
    # too_long rule holds to the model's), not the run's context, which generate's prompt is (engine_hf).
    validate_config(config if settings.engine == "hf" else
                    config.with_changes(context=default_length(config, settings.engine)))
    arch, worst = config.model, None
    engine = engine_inputs(settings, gpu_total, gpu_id, default_length(config, settings.engine), gpu)
    if settings.engine == "vllm":
        limits = derive(BATCH_SYMBOLS, engine)
        if limits["max_num_batched_tokens"] < limits["max_num_seqs"]:
            # vLLM's own refusal (vllm/config/scheduler.py SchedulerConfig._verify_args): only with max_num_seqs given,
            # since a default one is clamped to the tokens (BATCH_SYMBOLS).
            raise ValueError(f"max_num_seqs: max_num_batched_tokens ({limits['max_num_batched_tokens']}) must be "
                             f"greater than or equal to max_num_seqs ({limits['max_num_seqs']}).")
    if settings.engine == "hf":
        hf.checked(settings, config)
        engine.update(hf.inputs_of(settings, config))
    chosen = ENGINES[settings.engine]
    placed = expert_layout(config, settings.engine)
    for stage in stages(arch, placed):
        inputs = rule_inputs(arch, placed, stage)
        inputs.update(engine, weights_bytes=sum(p.bytes for p in MODEL_STATES.evaluate(inputs)))
        values = chosen.rules.environment(inputs)
        if worst is None or values[chosen.fewest] < worst[1][chosen.fewest]:
            worst = (stage.name, values, chosen.rules.parts_of(values))
    stage, values, parts = worst
    return EngineReport(settings.engine, stage, tuple(parts), values)

