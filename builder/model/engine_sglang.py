"""Serving as SGLang allocates it: the KV-cache pool under `--mem-fraction-static`, as rules.

Read from the Python sources of SGLang's releases as published on PyPI (the wheels' python/sglang/srt), 0.5.18
(2026-08-21, the same lines as upstream main d315eb7, read before) to 0.5.23 (2026-10-30, the newest on 2026-11-29).
The rules are 0.5.23's unless --sglang-version names an older release (the release constants below). Paths are under
python/sglang/srt/; from 0.5.19 the server-argument rules live in arg_groups/ (memory_hook.py, cuda_graph_hook.py),
in server_args.py before.

- pre = free memory once torch.distributed is up, before the weights (cudaMemGetInfo, minimum over ranks)
                                              distributed/bootstrap.py measure_pre_model_load_memory (0.5.21 on;
                                              init_torch_distributed before)
- rest = free after the weights - pre x (1 - mem_fraction_static)
                                              mem_cache/kv_cache_configurator.py _profile_available_bytes
  (equivalently mem_fraction_static x pre - the weights); rest <= 0 is SGLang's own ValueError. From 0.5.19 it runs
  gc.collect() before measuring, so loader garbage no longer referenced is freed first
- cell = KV heads on this rank (max(1, kv_heads // tp)) x (head_dim + v_head_dim) x the stage's layers x bytes
                                              model_executor/pool_configurator.py _compute_cell_size
- max_total_num_tokens = floor(rest / cell) rounded down to a page; the minimum over pipeline stages
                                              pool_configurator.py calculate_pool_sizes, _apply_token_constraints
- the default mem_fraction_static = round((gpu_mem - reserved) / gpu_mem, 3), gpu_mem nvidia-smi's MiB, reserved
  = 512 + 1.5 x max(chunked_prefill_size, 2048) + tp x pp / 8 x 1024 + 2 x decode CUDA-graph batch + the prefill
  CUDA graphs' (8 per captured size; 1.5 GiB flat with latent attention, MLA; none with pipeline stages from 0.5.19,
  where the prefill graph is off by default), at least 10 GiB on GPUs above 60 GiB
                                              arg_groups/memory_hook.py handle_gpu_memory_settings,
                                              reserve_for_graph_mb; arg_groups/cuda_graph_hook.py
                                              apply_cuda_graph_compatibility
- the defaults by nvidia-smi's capacity: chunked_prefill_size 2048 below 20 GiB, 4096 below 60 GiB (2048 below 35 GiB
  up to 0.5.19), 8192 below 160 GiB, 16384 above; the decode CUDA-graph batch 8, then 48 (TP < 4) or 160 below 35
  GiB (24 or 80 up to 0.5.19), 32 or 160 below 60 GiB, 256 or 512 below 160 GiB, 512 above; from 0.5.22 a default
  batch above a given --max-running-requests is lowered to it                      memory_hook.py
- requests of context_len tokens at once: floor(tokens / (context_len rounded up to a page)), each request holding
  whole pages                                 mem_cache/allocator PagedTokenToKVPoolAllocator
  with full and sliding-window layers, the fewer of that and floor(swa tokens / min(context_len, window - 1 + page)):
  a request keeps at most SGLang's window (the model's sliding_window - 1, models/gemma2.py) and a page in the
  sliding pool, the admission floor of pool_configurator.py HybridSWAPoolConfigurator (commit 003fca8;
  MemoryPoolConfigurator.validate_swa_pool_size from 0.5.20)
- max_running_requests: int(tokens / context_len x 512) within [2048, 4096], at most tokens // 2
                                              mem_cache/kv_cache_configurator.py resolve_max_num_reqs
- the log: "KV Cache is allocated. dtype: ..., #tokens: N, K size: X GB, V size: X GB" (latent attention: one "KV
  size") with buffers one page longer than N (mem_cache/memory_pool.py _kv_buffer_shapes,
  KVCache._finalize_allocation_log); SGLang's "GB" are GiB (memory_pool.py: GB = 1024**3).

Unchanged from 0.5.18 to 0.5.23 (read in each): the budget, the cell (MHA, MLA and fp8), the page rounding, the
buffers' extra page, the request limit, the default page (1; 64 with Blackwell's trtllm_mha), the 10 GiB floor, the
1.5 MiB a token of prefill chunk, the prefill CUDA-graph sizes and the log lines above. 0.5.23 captures latent
attention's prefill graphs up to min(8192, chunked_prefill_size) tokens (2048 before), which leaves the reserve as it
was: MLA's prefill graphs reserve 1.5 GiB whatever their sizes. The rotary cos/sin table, fp32 on CUDA, is fp32 on
ROCm too from 0.5.22 (the model's dtype before). From 0.5.21 the log has no "Init torch distributed ends. mem usage":
"Memory baseline taken. mem usage" is measured once torch.distributed is up, so it leaves the set-up out.

The memory gone before the weights is three terms, each placed in published logs (the table below): CUDA's total
below nvidia-smi's (the GPU catalog's two totals), the CUDA context (assumed: 2.4 KiB for every thread the GPU holds
at once) and torch.distributed's set-up (assumed: by interconnect, builder.model.collectives' NVLink-switch rule);
`--cuda-context` replaces all three with a measured amount. Latent attention (MLA) caches kv_lora_rank +
qk_rope_head_dim per token and layer on every rank (pool_configurator.py _compute_cell_size, MLATokenToKVPool); a
model mixing full and sliding-window layers gets SGLang's two pools (HybridSWAPoolConfigurator,
--swa-full-tokens-ratio) only where SGLang lists its architecture (configs/model_config.py is_hybrid_swa_model: of
the model's families, gpt-oss; Gemma 2 and 3 keep every layer's tokens in one pool). Left out, and named: loader
temporaries still referenced when the free memory is measured, speculative decoding, the SWA request-cap sizing (an explicit --max-running-requests with the radix cache off:
SWAChunkCapPoolConfigurator, SWARequestCapPoolConfigurator from 0.5.22), a model whose every layer slides (counted
full), multimodal and Mamba pools.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from builder.model import allocator, rotary
from builder.model.cite import Cite
from builder.model.collectives import SWITCH_STEP, SWITCH_STEP_SOURCE, TP_OVER_SWITCH
from builder.model.expr import both, ceil, eq, fixed, floor, fmt, isin, maximum, minimum, negate, real, sym, when
from builder.model.partrules import PartRule, RuleSet, bytes_of
from builder.model.serving import CONTEXT_LENGTH, KV_SYMBOLS, beyond_model
from builder.model.units import GiB as GIB
from builder.model.units import KiB as KIB
from builder.model.units import MiB as MIB

SGLANG_VERSION = "SGLang 0.5.23"
# --- SGLang releases (--sglang-version) ----------------------------------------------------------------------------
# A release as the rules read it: its patch number (SGLang 0.5.x), e.g. 0.5.23 -> 23. Each release's wheel on PyPI was
# read (python/sglang/srt): 0.5.18 (2026-08-21) to 0.5.23 (2026-10-30), the newest on 2026-11-29.
DEFAULT_RELEASE = 23
OLDEST_RELEASE, NEWEST_RELEASE = 18, 23
RELEASE = sym("sglang_version")
# From 0.5.19, pipeline parallelism turns the (breakable) prefill CUDA graph off unless its backend is given
# (arg_groups/cuda_graph_hook.py apply_cuda_graph_compatibility: "PP prefill graph replay is opt-in"), before the
# memory settings read it, so reserve_for_graph_mb counts no prefill graphs; 0.5.18 kept them (server_args.py
# _disable_breakable_cudagraph_if_incompatible has no pipeline rule).
PP_PREFILL_GRAPH_OFF_FROM = 19
# From 0.5.20, GPUs of 20 to 35 GiB (A10, L4, RTX 4090, 5090) get chunked_prefill_size 4096 and a decode CUDA-graph
# batch of 48 below TP 4, else 160 (arg_groups/memory_hook.py handle_gpu_memory_settings: "32GB Blackwell (RTX 5090)
# can hold decode cuda graphs well past bs=24"); 2048 and 24 or 80 in 0.5.18 and 0.5.19.
SMALL_TIER_FROM = 20
# From 0.5.22, a default decode CUDA-graph batch above a given --max-running-requests is lowered to it
# (memory_hook.py handle_gpu_memory_settings, decode_max_bs_is_default).
GRAPH_BATCH_CAPPED_FROM = 22
# From 0.5.22 the rotary cos/sin table stays fp32 on ROCm too (layers/rotary_embedding/base.py RotaryEmbedding.__init__:
# "Keep fp32 on HIP, matching CUDA behavior"); the model's dtype on ROCm in 0.5.18 to 0.5.21.
ROCM_FP32_ROTARY_FROM = 22
SOURCE_RELEASE = "sglang-0.5.23"
BUDGET = Cite(SOURCE_RELEASE, "python/sglang/srt/mem_cache/kv_cache_configurator.py _profile_available_bytes")
CELL = Cite(SOURCE_RELEASE, "python/sglang/srt/model_executor/pool_configurator.py _compute_cell_size and "
                            "calculate_pool_sizes")
RESERVE = (Cite(SOURCE_RELEASE, "python/sglang/srt/arg_groups/memory_hook.py handle_gpu_memory_settings and "
                                "reserve_for_graph_mb") + " (server_args.py in "
           + Cite("sglang-d315eb7", "0.5.18") + ")")
# Latent attention (MLA): SGLang's use_mla_backend (the model's attention_arch), read from the architecture.
LATENT = sym("kv_lora_rank") > 0
# The prefill CUDA graphs of latent attention reserve 1.5 GiB whatever their sizes (reserve_for_graph_mb: "MLA backend
# overhead is much higher than expected with fa3"), 8 MiB a captured size otherwise.
MLA_PREFILL_GRAPHS_MIB = 1536


def release_code(text: Any) -> int:
    """A release as --sglang-version takes it ('0.5.23', 'v0.5.20', '0.5.21.post1') as the rules read it (its patch);
    ValueError naming the option otherwise."""
    if not isinstance(text, str):  # YAML reads 0.5 as a number
        raise ValueError(f"sglang_version: give the release as text, such as '0.5.20', not the number {text!r}")
    parts = text.strip().removeprefix("v").split(".")
    if len(parts) == 4 and parts[3].startswith("post") and parts[3][4:].isdigit():
        parts = parts[:3]
    if not (len(parts) == 3 and all(p.isdigit() for p in parts)):
        raise ValueError(f"sglang_version: {text!r} is not an SGLang release such as 0.5.20")
    major, minor, patch = (int(p) for p in parts)
    if (major, minor) != (0, 5) or not OLDEST_RELEASE <= patch <= NEWEST_RELEASE:
        raise ValueError(f"sglang_version: {text!r} is not modelled: give a release from 0.5.{OLDEST_RELEASE} to "
                         f"0.5.{NEWEST_RELEASE}")
    return patch


def release_words(code: int) -> str:
    """The engine as a report names it for a release code."""
    return f"SGLang 0.5.{code}"
# The memory gone before the weights load (nvidia-smi's total - "Load weight begin. avail mem"), in three terms, each
# placed in the published logs by what they print: CUDA's total is the catalog's (the GPU's deviceQuery or
# PyTorch printout), the distributed set-up is SGLang's own "Init torch distributed ends. mem usage" (a line of the
# releases up to 0.5.20: memory free before model_runner's init_torch_distributed, less after it:
# distributed/bootstrap.py), and the CUDA context is what is left. SGLang's "GB" are GiB.
#   log (SGLang)                           nvidia-smi  CUDA    driver  context  distributed  avail mem
#   one B200, 2026-04 (PR #23669)          179.06      178.35  0.71    0.69     0.09         177.57
#   H200s at TP 8, v0.5.3 (PR #11716)      140.40      139.80  0.60    0.50     1.96         137.34
#   four L4s at TP 4, 0.4.3 (PCIe,         22.49       21.95   0.54    0.19     0.13         21.63
#     custom all-reduce off; llms-in-clouds)
# (1) CUDA's total below nvidia-smi's: the catalog's two totals (content/gpus.toml), a reserve the driver keeps.
# (2) The CUDA context and what PyTorch and SGLang put on the GPU before torch.distributed: most of a context is the
# local memory CUDA keeps for the stack of every thread the GPU can hold at once (cuCtxSetLimit: CU_LIMIT_STACK_SIZE
# is "the stack size in bytes of each GPU thread", grown as kernels need and not reset), so it grows with SMs x
# threads per SM. Assumed 2.4 KiB a thread, from the B200 log (0.69 GiB over 148 x 2,048 threads: the version this
# module reads); the others give 1.9 (H200, v0.5.3) to 2.2 KiB (L4, 0.4.3), older releases with smaller contexts.
# A simplification: a whole context as a multiple of its threads (its fixed part and the kernels loaded folded in).
CONTEXT_PER_THREAD = Fraction(12, 5) * KIB
CONTEXT_SOURCE = (Cite("cuda-driver-api", "cuCtxSetLimit, CU_LIMIT_STACK_SIZE") + ": a stack for every thread the GPU "
                  "holds at once (SMs x threads per SM, the catalog's); assumed 2.4 KiB a thread, from "
                  + Cite("sglang-pr-23669", "one B200: 0.69 GiB of 148 x 2,048 threads")
                  + "; older logs give 1.9 to 2.2 KiB (" + Cite("sglang-pr-11716", "H200s") + ", "
                  + Cite("llms-in-clouds-sglang", "L4s") + ")")
# A GPU given only as a size has no SM count: an H100's 132 SMs x 2,048 threads stand in.
DEFAULT_RESIDENT_THREADS = 132 * 2048


def resident_threads(gpu: Any) -> int:
    """The threads `gpu` holds at once: its SMs (AMD: compute units) x threads per SM, from the GPU catalog
    (builder.catalog.Gpu); DEFAULT_RESIDENT_THREADS where the catalog gives none, or for no catalog entry (None)."""
    threads = getattr(gpu, "multiprocessors", 0) * getattr(gpu, "threads_per_multiprocessor", 0)
    return threads or DEFAULT_RESIDENT_THREADS


# (3) torch.distributed and NCCL, a rank (SGLang's "Init torch distributed ends. mem usage"): 0.09 GiB on one GPU
# (the B200 log's own print); 0.13 GiB a rank at TP 4 on four L4s, where NCCL crosses PCIe (that log's own print);
# over an NVLink switch, the 1.85 GiB step vLLM's logs show for the same buffers (builder.model.collectives, the
# rule both engines read): SGLang's own H200 log prints 1.96 GiB at TP 8, with 0.50 GiB of context against the 0.62
# GiB assumed here, the same sum. NVLink SHARP stays off unless --enable-nccl-nvls (entrypoints/engine.py
# _set_envs_and_config sets NCCL_NVLS_ENABLE from it, read at 001067f).
DISTRIBUTED_ONE = Fraction(9, 100) * GIB
DISTRIBUTED_PCIE = Fraction(13, 100) * GIB
DISTRIBUTED_SOURCE = ("assumed: 0.09 GiB on one GPU (" + Cite("sglang-pr-23669", "'Init torch distributed ends. mem "
                      "usage=0.09 GB'") + "), 0.13 GiB a rank on more GPUs, tensor parallelism over an NVLink "
                      "switch aside (" + Cite("llms-in-clouds-sglang", "four L4s: 'mem usage=0.13 GB'") + ")")
DRIVER_SOURCE = ("nvidia-smi's total (" + Cite(SOURCE_RELEASE, "python/sglang/srt/utils/common.py "
                                                  "get_nvgpu_memory_capacity")
                 + ") less CUDA's, the most the free memory SGLang measures can be (cudaMemGetInfo: "
                 + Cite(SOURCE_RELEASE, "python/sglang/srt/distributed/bootstrap.py measure_pre_model_load_memory")
                 + "): the GPU catalog's two totals, memory the driver keeps before any process starts")
GIVEN_SOURCE = "given with --cuda-context: the whole memory gone before the weights, as measured"
# The GPU total the rules start from is nvidia-smi's, not cudaMemGetInfo's: SGLang picks its defaults by
# nvidia-smi's MiB (utils/common.py get_nvgpu_memory_capacity runs nvidia-smi --query-gpu=memory.total), and the memory
# gone before the weights is counted from it, CUDA's own shortfall (the driver's reserve) first.
TOTAL_SOURCE = (Cite(SOURCE_RELEASE, "python/sglang/srt/utils/common.py get_nvgpu_memory_capacity")
                + " (nvidia-smi --query-gpu=memory.total); the memory gone before the weights is counted from "
                "nvidia-smi's total")
# The prefill CUDA-graph token sizes (arg_groups/cuda_graph_hook.py generate_prefill_cuda_graph_batch_sizes;
# server_args.py _generate_prefill_cuda_graph_batch_sizes in 0.5.18): (start, stop, step) ranges, each up to the
# graph's largest size, chunked_prefill_size for a model without MLA (whose reserve is flat: MLA_PREFILL_GRAPHS_MIB).
PREFILL_GRAPH_RANGES = ((4, 33, 4), (48, 257, 16), (288, 513, 32), (576, 1025, 64), (1280, 4097, 256))
LAST_PREFILL_RANGE = (4608, 512)  # 4608, 5120, ... up to the largest size
# SGLang's options (`python -m sglang.launch_server --help`) as the command line offers them, in the form of
# builder.model.engines' VLLM_FLAGS.
FLAGS = (
    ("mem_fraction_static", "float", "F",
     "share of the free memory for weights and KV cache, in (0, 1) (SGLang default: by GPU)"),
    ("page_size", "whole", "TOKENS", "tokens per KV page (SGLang default 1; 64 on Blackwell)"),
    ("chunked_prefill_size", "whole", "TOKENS",
     "tokens per prefill chunk (SGLang default: 2048 to 16384 by GPU memory)"),
    ("cuda_graph_max_bs", "whole", "N",
     "largest decode batch captured in a CUDA graph (SGLang default: by GPU and TP, at most --max-running-requests "
     "from 0.5.22)"),
    ("max_running_requests", "whole", "N", "requests at once (SGLang default: from the pool, 2048 to 4096)"),
    ("context_length", "whole", "TOKENS",
     "tokens per request (default: --context where given, else SGLang's: the model's max_position_embeddings)"),
    ("swa_full_tokens_ratio", "float", "R",
     "sliding-window pool size as a share of the full-attention pool, for models mixing both (SGLang default 0.8)"),
    ("sglang_version", "text", "X.Y.Z", "the SGLang release whose start-up to model, 0.5.18 to 0.5.23 (e.g. 0.5.19): "
     "its defaults for 20-35 GiB GPUs, its prefill CUDA graphs under pipeline stages, its decode CUDA-graph batch "
     "under --max-running-requests and its rotary table on ROCm (default: 0.5.23, the newest)"),
)
# arg_groups/fields/schedule.py swa_full_tokens_ratio (fallback=0.8; server_args.py ServerArgs in 0.5.18)
DEFAULT_SWA_RATIO = Fraction(8, 10)
# The families SGLang gives two pools: configs/model_config.py is_hybrid_swa_model lists architectures (0.5.18 to
# 0.5.23: Llama 4, Gemma 4, DeepSeek V4, MiMo V2, Step 3.5, SWA_SINK_ARCHS' GptOssForCausalLM and others), of which
# the model reads gpt-oss. Gemma 2 and Gemma 3 are not listed: SGLang keeps every one of their layers' tokens in one
# pool, the sliding layers' included (their attention masks the window; the memory is not freed).
HYBRID_SWA_FAMILIES = ("gpt_oss",)
# A model with sliding-window layers: whether SGLang gives it two pools, and how it sizes them.
SWA = (Cite(SOURCE_RELEASE, "python/sglang/srt/configs/model_config.py is_hybrid_swa_model")
       + ": two pools only for the architectures it lists (gpt-oss, Llama 4, Gemma 4 and others; not Gemma 2 or "
       "Gemma 3, whose sliding layers keep every token in the one pool); "
       + Cite("sglang-003fca8", "python/sglang/srt/model_executor/pool_configurator.py HybridSWAPoolConfigurator")
       + ": cell = full layers x per-token + swa_full_tokens_ratio x sliding layers x per-token; swa tokens = full "
       "tokens x ratio")
KV_TORCH_DTYPES = {"bf16": "torch.bfloat16", "fp16": "torch.float16", "fp32": "torch.float32",
                   "fp8": "torch.float8_e4m3fn", "int8": "torch.int8"}


def _by_capacity(*steps: tuple[int, Any], otherwise: Any) -> Any:
    """A value chosen by nvidia-smi's capacity in MiB: the first (below GiB, value) that holds, else `otherwise`."""
    (limit, value), *rest = steps
    return when(sym("gpu_mib") < limit * 1024, value, _by_capacity(*rest, otherwise=otherwise) if rest else otherwise)


def _count(start: int, stop: int, step: int, largest: Any) -> Any:
    """How many of range(start, stop, step) are at most `largest`."""
    return when(largest >= start, (minimum(stop - 1, largest) - start) // step + 1, 0)


def _torch_dtype(names: dict[str, str]) -> Any:
    """The KV cache's dtype as torch names it in the log ('torch.bfloat16')."""
    (ours, torch), *rest = names.items()
    return when(eq(sym("kv_cache_dtype"), ours), torch, _torch_dtype(dict(rest)) if rest else sym("kv_cache_dtype"))


tp_small = sym("tp") < 4
small_tier = RELEASE >= SMALL_TIER_FROM
CHUNK = sym("chunked_prefill")
SGLANG = RuleSet(
    symbols={
        **KV_SYMBOLS,
        "gpu_mib": sym("gpu_total") / MIB,
        # Defaults by capacity (memory_hook.py handle_gpu_memory_settings, its first step; the 20-35 GiB tier by
        # release: SMALL_TIER_FROM).
        "chunked_prefill": when(sym("chunked_prefill_size"), sym("chunked_prefill_size"),
                                _by_capacity((20, 2048), (35, when(small_tier, 4096, 2048)), (60, 4096), (160, 8192),
                                             otherwise=16384)),
        "default_graph_batch": _by_capacity((20, 8), (35, when(tp_small, when(small_tier, 48, 24),
                                                                when(small_tier, 160, 80))),
                                            (60, when(tp_small, 32, 160)), (160, when(tp_small, 256, 512)),
                                            otherwise=512),
        "decode_graph_batch": when(sym("cuda_graph_max_bs"), sym("cuda_graph_max_bs"), when(
            both(RELEASE >= GRAPH_BATCH_CAPPED_FROM, sym("running_requests") > 0),
            minimum(sym("default_graph_batch"), sym("running_requests")), sym("default_graph_batch"))),
        "prefill_graphs": sum((_count(a, b, s, CHUNK) for a, b, s in PREFILL_GRAPH_RANGES), start=0)
        + when(CHUNK >= LAST_PREFILL_RANGE[0], (CHUNK - LAST_PREFILL_RANGE[0]) // LAST_PREFILL_RANGE[1] + 1, 0),
        # The prefill CUDA graphs' reserve (reserve_for_graph_mb): none where pipeline stages turn the graph off
        # (PP_PREFILL_GRAPH_OFF_FROM), 1.5 GiB with latent attention, else 8 MiB a captured size.
        "prefill_graph_mib": when(both(sym("pp") > 1, RELEASE >= PP_PREFILL_GRAPH_OFF_FROM), 0,
                                  when(LATENT, MLA_PREFILL_GRAPHS_MIB, 8 * sym("prefill_graphs"))),
        "reserved_mib": 512 + maximum(CHUNK, 2048) * Fraction(3, 2) + sym("tp") * sym("pp") * 128
        + 2 * sym("decode_graph_batch") + sym("prefill_graph_mib"),
        "reserve_mib": when(sym("gpu_mib") > 60 * 1024, maximum(sym("reserved_mib"), 10 * 1024), sym("reserved_mib")),
        "default_fraction": floor((sym("gpu_mib") - sym("reserve_mib")) * 1000 / sym("gpu_mib") + Fraction(1, 2))
        / 1000,
        "fraction": when(sym("mem_fraction_static"), sym("mem_fraction_static"), sym("default_fraction")),
        # The memory gone before the weights: the driver's reserve, the CUDA context and torch.distributed's
        # set-up, or the amount --cuda-context gives instead (a measured "total - avail mem").
        "driver_reserve": when(sym("cuda_context_bytes"), 0, sym("gpu_total") - sym("cuda_total")),
        "cuda_context": when(sym("cuda_context_bytes"), sym("cuda_context_bytes"),
                             CONTEXT_PER_THREAD * sym("resident_threads")),
        "distributed": when(sym("cuda_context_bytes"), 0, when(TP_OVER_SWITCH, SWITCH_STEP, when(
            sym("tp") * sym("pp") > 1, DISTRIBUTED_PCIE, DISTRIBUTED_ONE))),
        "before_weights": sym("driver_reserve") + sym("cuda_context") + sym("distributed"),
        "pre": sym("gpu_total") - sym("before_weights"),
        # The weight load's memory: the parameters, the rotary cos/sin table (fp32 on CUDA, and on ROCm from 0.5.22:
        # ROCM_FP32_ROTARY_FROM; the model's dtype on ROCm before) and the allocator's segments in use, whole (free
        # memory).
        **allocator.loaded_symbols(when(both(sym("rocm"), RELEASE < ROCM_FP32_ROTARY_FROM),
                                        bytes_of(sym("activation_dtype")), 4), free_memory=True),
        "after_weights": sym("pre") - sym("loaded_weights"),
        "slack": sym("pre") * (1 - sym("fraction")),
        "rest": floor(sym("after_weights") - sym("slack")),
        # A model of a family SGLang lists (HYBRID_SWA_FAMILIES) mixing full and sliding-window layers gets two
        # pools (HybridSWAPoolConfigurator): the sliding layers' holds swa_full_tokens_ratio of the full pool's
        # tokens. Otherwise one pool of every layer, each keeping the whole context.
        "hybrid_swa": both(isin(sym("model_family"), *HYBRID_SWA_FAMILIES), sym("full_layers") > 0,
                           sym("sliding_layers") > 0),
        "swa_ratio": when(sym("swa_full_tokens_ratio"), sym("swa_full_tokens_ratio"), DEFAULT_SWA_RATIO),
        "cell": when(sym("hybrid_swa"), sym("kv_per_token_layer") * (sym("full_layers")
                                                                    + sym("swa_ratio") * sym("sliding_layers")),
                     sym("kv_per_token")),
        "max_total_num_tokens": maximum(0, floor(floor(sym("rest") / sym("cell")) / sym("page")) * sym("page")),
        "swa_max_total_num_tokens": when(sym("hybrid_swa"), floor(floor(sym("max_total_num_tokens") * sym("swa_ratio"))
                                                                  / sym("page")) * sym("page"), 0),
        "estimated_requests": minimum(maximum(floor(sym("max_total_num_tokens") * 512 / sym("context_len")), 2048),
                                      4096),
        "max_running_requests": minimum(when(sym("running_requests"), sym("running_requests"),
                                             sym("estimated_requests")), sym("max_total_num_tokens") // 2),
        # A request of context_len tokens holds whole pages (mem_cache/allocator.py PagedTokenToKVPoolAllocator);
        # requests that share no prefix, so the radix cache saves nothing.
        "request_tokens": ceil(sym("context_len") / sym("page")) * sym("page"),
        "full_requests": floor(sym("max_total_num_tokens") / sym("request_tokens")),
        # A hybrid model's request needs its whole length in the full pool and, in the sliding pool, at most SGLang's
        # window (the model's sliding_window - 1: models/gemma2.py, gpt_oss.py get_attention_sliding_window_size)
        # plus a page: the admission floor pool_configurator.py HybridSWAPoolConfigurator names (commit 003fca8);
        # the tokens behind the window are freed as the request decodes (mem_cache/swa_radix_cache.py). Requests
        # at once are the fewer of the two pools'.
        "swa_window": maximum(sym("sliding_window") - 1, 0),
        "swa_request_tokens": minimum(sym("request_tokens"), sym("swa_window") + sym("page")),
        "swa_requests": when(sym("hybrid_swa"),
                             floor(sym("swa_max_total_num_tokens") / maximum(sym("swa_request_tokens"), 1)), 0),
        "concurrent_requests": when(sym("hybrid_swa"), minimum(sym("full_requests"), sym("swa_requests")),
                                    sym("full_requests")),
        "swa_too_small": both(sym("hybrid_swa"), sym("swa_window") + sym("page") >= sym("swa_max_total_num_tokens")),
        # The buffers hold one page more than the pool's tokens (memory_pool.py): K and V halves, or one latent buffer.
        "kv_size": (sym("max_total_num_tokens") + sym("page")) * sym("cell"),
        "k_size": sym("kv_size") / 2,
        "latent": LATENT,
        "kv_dtype_name": _torch_dtype(KV_TORCH_DTYPES),
        "minimum_fraction": 1 - sym("after_weights") / sym("pre"),
        # A context_length above the model's own is refused at start-up (configs/model_config.py, unless
        # SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN is set).
        "too_long": beyond_model(sym("context_len"), CONTEXT_LENGTH),
        "fits": both(negate(sym("too_long")), sym("rest") > 0, sym("max_total_num_tokens") > 0,
                     negate(sym("swa_too_small"))),
        "error": when(sym("too_long"), fmt(
            "User-specified context_length ({0}) is greater than the derived context_length ({1}). This may lead to "
            "incorrect model outputs or CUDA errors. Note that the derived context_length may differ from "
            "max_position_embeddings in the model's config. To allow overriding this maximum, set the env var "
            "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1", sym("context_len"), CONTEXT_LENGTH), when(sym("rest") <= 0, fmt(
            "Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static={0}. Raise "
            "--mem-fraction-static above {1} (minimum viable = 1 - available/pre = {2}). If using speculative "
            "decoding, draft weights are now counted.", real(sym("fraction")),
            fixed(ceil(sym("minimum_fraction") * 1000) / 1000, 3), fixed(sym("minimum_fraction"), 4)),
            when(sym("max_total_num_tokens") <= 0, fmt(
                "Not enough memory. Please try to increase --mem-fraction-static. Current value: "
                "mem_fraction_static={0}", real(sym("fraction"))),
                # pool_configurator.py HybridSWAPoolConfigurator._solve_pool_sizes (commit 003fca8)
                when(sym("swa_too_small"), fmt(
                    "SWA pool ({0} tokens) cannot hold even one request: the prefill admission floor is "
                    "sliding_window_size ({1}) + page_size ({2}). Increase --swa-full-tokens-ratio or the total KV "
                    "budget.", sym("swa_max_total_num_tokens"), sym("swa_window"), sym("page")), "")))),
    },
    parts=(
        PartRule("weights", sym("weights_bytes"), "the weights as loaded", BUDGET, "as loaded"),
        rotary.table_part(rotary.SGLANG_SOURCE),
        allocator.rounding_part(allocator.SGLANG_SOURCE, free_memory=True),
        PartRule("kv_cache", maximum(0, sym("rest")), "free after the weights - pre x (1 - mem_fraction_static)",
                 when(sym("sliding_layers"), BUDGET + "; tokens: " + CELL + "; " + SWA, BUDGET + "; tokens: " + CELL),
                 fmt("{0} tokens of {1} B", sym("max_total_num_tokens"),
                     when(eq(floor(sym("cell")), sym("cell")), sym("cell"), fixed(sym("cell"), 1)))),
        PartRule("overhead/runtime_slack", sym("slack"), "pre x (1 - mem_fraction_static)", RESERVE,
                 fmt("{0} of the memory free before the weights", fixed(1 - sym("fraction"), 3)),
                 "kept free for activations, CUDA graphs and the request-to-token table"),
        PartRule("overhead/driver_reserve", sym("driver_reserve"), "nvidia-smi's total - CUDA's", DRIVER_SOURCE,
                 "the GPU's two totals", when=sym("driver_reserve")),
        PartRule("overhead/cuda_context", sym("cuda_context"),
                 when(sym("cuda_context_bytes"), "given", "threads the GPU holds at once x 2.4 KiB"),
                 when(sym("cuda_context_bytes"), GIVEN_SOURCE, CONTEXT_SOURCE),
                 when(sym("cuda_context_bytes"), "given", fmt("{0} threads", sym("resident_threads"))),
                 when(sym("cuda_context_bytes"), "", "assumed unless --cuda-context gives it")),
        PartRule("overhead/distributed", sym("distributed"), "a rank, by interconnect",
                 when(TP_OVER_SWITCH, SWITCH_STEP_SOURCE, DISTRIBUTED_SOURCE),
                 when(TP_OVER_SWITCH, "a rank, over an NVLink switch", "a rank"), "assumed", when=sym("distributed")),
    ),
)
# SGLang's own log lines (memory_pool.py KVCache._finalize_allocation_log; managers/scheduler.py), "GB" being GiB.
KV_LINE = "KV Cache is allocated. dtype: {0}, #tokens: {1}, K size: {2:.2f} GB, V size: {2:.2f} GB"
# Latent attention's pool (MLATokenToKVPool) logs one size through the same KVCache._finalize_allocation_log.
MLA_LINE = "KV Cache is allocated. dtype: {0}, #tokens: {1}, KV size: {2:.2f} GB"
SWA_LINE = "Use sliding window memory pool. full_layer_tokens={0}, swa_layer_tokens={1}"  # pool_configurator.py
# From 0.5.23 the worker warns when the pool cannot hold one request of the full length (managers/tp_worker.py
# TpModelWorker.get_worker_info; 0.5.22 and before start without a word).
SHORT_POOL_LINE = ("KV pool holds {0} tokens, fewer than --context-length {1}. One full-length request cannot fit, so "
                   "long requests will be refused or truncated at serving time. Lower --context-length, raise "
                   "--mem-fraction-static, or free memory taken before the pool is sized.")
SHORT_POOL_WARNED_FROM = 23
SUMMARY_LINE = ("max_total_num_tokens={0}, chunked_prefill_size={1}, max_prefill_tokens=16384, "
                "max_running_requests={2}, context_len={3}")


def log_lines(values: dict[str, Any]) -> list[str]:
    """The engine's own startup lines for the worker with the fewest tokens."""
    tokens = int(values["max_total_num_tokens"])
    first = ([SWA_LINE.format(tokens, int(values["swa_max_total_num_tokens"]))] if values["hybrid_swa"] else
             [MLA_LINE.format(values["kv_dtype_name"], tokens, float(values["kv_size"]) / GIB)] if values["latent"] else
             [KV_LINE.format(values["kv_dtype_name"], tokens, float(values["k_size"]) / GIB)])
    short = (values["sglang_version"] >= SHORT_POOL_WARNED_FROM and 0 < tokens < values["context_len"])
    return [*first, *([SHORT_POOL_LINE.format(tokens, values["context_len"])] if short else []),
            SUMMARY_LINE.format(int(values["max_total_num_tokens"]), values["chunked_prefill"],
                                int(values["max_running_requests"]), values["context_len"])]


def refused_by(values: dict[str, Any]) -> tuple[str, ...]:
    """The options a refusal names, the one at fault first: a sliding pool under the admission floor is
    --swa-full-tokens-ratio's (pool_configurator.py HybridSWAPoolConfigurator._solve_pool_sizes, commit 003fca8:
    "Increase --swa-full-tokens-ratio or the total KV budget", the budget being --mem-fraction-static's); no room
    for the pool at all is --mem-fraction-static's (the two errors above name it: "Raise --mem-fraction-static",
    "Please try to increase --mem-fraction-static")."""
    if values["too_long"]:
        return ("context_length",)
    if values["rest"] > 0 and values["max_total_num_tokens"] > 0 and values["swa_too_small"]:
        return ("swa_full_tokens_ratio", "mem_fraction_static")
    return ("mem_fraction_static",)


def summary(values: dict[str, Any]) -> dict[str, Any]:
    """SGLang's numbers as --json gives them."""
    return {"mem_fraction_static": float(values["fraction"]), "pre_load_free_bytes": int(values["pre"]),
            "page_size": values["page"], "chunked_prefill_size": values["chunked_prefill"],
            "cuda_graph_max_bs": values["decode_graph_batch"], "context_len": values["context_len"],
            "kv_cache_bytes": max(0, int(values["rest"])), "kv_cache_tokens": int(values["max_total_num_tokens"]),
            "max_total_num_tokens": int(values["max_total_num_tokens"]),
            "swa_max_total_num_tokens": int(values["swa_max_total_num_tokens"]),
            "max_running_requests": int(values["max_running_requests"]),
            "concurrent_requests": int(values["concurrent_requests"])}
