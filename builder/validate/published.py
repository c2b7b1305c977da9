"""Published numbers against the model: one registry, evaluated on every build and in tests/test_published.py.

Each case names its source (paper + table, or document/log URL + version), the configuration in the model's own
terms (a Config, or a Config served by an engine's settings on a catalog GPU), the quantity compared, the value as
published with its unit as published (GiB and GB stated), and the tolerance: exact, a share, or the published
rounding. `cases(models, gpus)` makes the cases from the catalogs it is given (the site's, so a build or `serve
--content` of another content folder reads that folder's), `evaluate()` computes the model's prediction of each. Pure
data plus those two functions: it imports builder.model, never torch.

Kinds of quantity (the Validation page says which is which):
  peak       the peak of a whole training step as a run measured it (torch.cuda's peak allocated or active bytes),
             against the highest moment of the step with the reserved parts left out (builder.model.peak.need)
  need       a part live at one moment of a training step (builder.model.peak.phases)
  part       one part of a breakdown (what the model counts for one term)
  sum        a sum of parts (no moment of a step; named as a sum)
  per-param  model-state bytes per parameter (weights + gradients + optimizer states, summed, over the parameters)
  budget     an inference engine's own start-up accounting (KV cache memory, tokens, what it needs)
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any, Callable

from builder.model import Config, estimate
from builder.model.activations import LAYER_GROUPS
from builder.model.architecture import Architecture
from builder.model.peak import assess, need, phases

UNITS = {"B": 1, "MiB": 2**20, "GiB": 2**30, "GB": 10**9, "tokens": 1, "B/param": 1, "x": 1}
KINDS = {"peak": "peak of a step", "need": "part of a step's peak", "part": "part", "sum": "sum of parts", "per-param": "bytes per parameter",
         "budget": "engine budget"}


@dataclass(frozen=True)
class Served:
    """A served configuration: the engine's settings on a catalog GPU (the engine's own total of it)."""

    gpu: str
    settings: dict = field(default_factory=dict)
    gpu_total: int | None = None  # bytes; None: the catalog GPU's total as the engine reads it (filled in by cases())
    device: Any = None  # the catalog entry (builder.catalog.Gpu) the case runs on (filled in by cases())


@dataclass(frozen=True)
class Case:
    name: str  # stable id, the test's parameter id
    table: str  # "training" or "serving"
    kind: str  # a key of KINDS
    compared: str  # what is compared, in words
    setup: str  # the configuration, in words
    source: str  # where the number is published, with its version
    url: str
    published: Fraction  # in `unit`, as published
    unit: str  # a key of UNITS ("GiB" where the source prints GB but means 2**30: said in `unit_note`)
    quantity: Callable[[Config, Served | None], Fraction]  # the model's prediction, in `unit`
    config: Config
    served: Served | None = None
    rel: Fraction = Fraction(0)  # relative tolerance
    abs: Fraction = Fraction(0)  # absolute tolerance, in `unit` (a published rounding)
    tolerance: str = "exact"  # the tolerance, in words
    unit_note: str = ""


@dataclass(frozen=True)
class Result:
    case: Case
    predicted: Fraction
    error: Fraction  # (predicted - published) / published

    @property
    def ok(self) -> bool:
        difference = abs(self.predicted - self.case.published)
        return difference <= max(self.case.abs, self.case.rel * abs(self.case.published))


def evaluate(cases: tuple[Case, ...]) -> list[Result]:
    """The model's prediction of every case, with its relative error."""
    results = []
    for case in cases:
        predicted = Fraction(case.quantity(case.config, case.served))
        results.append(Result(case, predicted, (predicted - case.published) / case.published))
    return results


# --- quantities: read the model, in the published unit -------------------------------------------------------------

def _in(unit: str, value) -> Fraction:
    return Fraction(value) / UNITS[unit]


def at_moment(phase: str, part: str, unit: str) -> Callable:
    """A part live at one moment of the step (builder.model.peak.phases)."""
    def quantity(config: Config, _served) -> Fraction:
        moment = next(p for p in phases(config) if p.name == phase)
        return _in(unit, next(p.bytes for p in moment.parts if p.name == part))
    return quantity


def step_peak(unit: str) -> Callable:
    """The highest moment of a training step, allocated bytes only: the reserved parts (allocator reserve, framework
    percentage, CUDA context) are left out, as torch.cuda's peak allocated (or active) bytes leave them out."""
    def quantity(config: Config, _served) -> Fraction:
        top = need(config).peak
        return _in(unit, sum(p.bytes for p in top.parts if p.name.split("/")[0] != "overhead"))
    return quantity


def part(name: str, unit: str) -> Callable:
    """One part (or bucket) of the breakdown."""
    return lambda config, _served: _in(unit, estimate(config, words=False).get(name))


def layer_activations(config: Config, _served) -> Fraction:
    """The saved activations of one transformer layer (the op list's layer groups over the layers)."""
    breakdown = estimate(config, words=False)
    groups = (*LAYER_GROUPS, "checkpoint")  # under full recomputation a layer keeps only its input, its checkpoint
    return Fraction(sum(breakdown.get(f"activations/{g}") for g in groups), config.model.layers)


def total(unit: str) -> Callable:
    """The sum of every part."""
    return lambda config, _served: _in(unit, estimate(config, words=False).total)


def states_per_param(config: Config, _served) -> Fraction:
    """Weights, gradients and optimizer states on one GPU over the parameters (Megatron's table: per GPU)."""
    breakdown, _ = assess(config)
    states = sum(p.bytes for p in breakdown.parts if p.name.split("/")[0] in ("weights", "gradients", "optimizer"))
    return Fraction(states, config.params)


def states_per_param_all_gpus(config: Config, served) -> Fraction:
    """The same summed over the data-parallel GPUs (DeepSpeed's 18 x params / gpus is per GPU, so 18 over all)."""
    return states_per_param(config, served) * config.dp


def engine_values(config: Config, served: Served) -> dict[str, Any]:
    """The engine's start-up numbers for a served configuration (builder.model.engines.engine_report's values)."""
    from builder.model.engines import EngineSettings, engine_report
    return engine_report(config, EngineSettings(**served.settings), served.gpu_total, served.gpu,
                         served.device).values


def engine(value: str, unit: str) -> Callable:
    """One of the engine's start-up numbers (engine_values)."""
    return lambda config, served: _in(unit, engine_values(config, served)[value])


def kv_tokens(config: Config, served: Served) -> Fraction:
    """vLLM's "GPU KV cache size" in tokens as releases before PR #50462 (2026-08-04) print it: num_blocks //
    len(kv_cache_groups) x block size (vllm/v1/core/kv_cache_utils.py _report_kv_cache_config in releases
    v0.13.0 and v0.17.1 among them).
    With one group it is blocks x block size, which the later print, int(concurrency x max_model_len), equals when
    max_model_len is a multiple of the block size; with a hybrid model's groups the two differ."""
    values = engine_values(config, served)  # one accounting for the three numbers
    blocks = _in("tokens", values["num_blocks"])
    groups = _in("tokens", values["full_groups"]) + _in("tokens", values["sliding_groups"])
    return (blocks // groups) * served.settings.get("block_size", 16)


def max_concurrency(config: Config, served: Served) -> Fraction:
    """vLLM's "Maximum concurrency for T tokens per request": blocks over the blocks one request of max_model_len
    takes, summed over the KV cache groups (kv_cache_utils.py get_max_concurrency_for_kv_cache_config)."""
    return engine("max_concurrency", "x")(config, served)


# --- the cases ---------------------------------------------------------------------------------------------------

GIB = 2**30

# Gemma 2 2B's shape (config.json: 26 layers, hidden 2304, 8 heads of 256, 4 KV heads, intermediate 9216,
# vocabulary 256,000, tied embeddings); its logit soft-capping is not modelled.
GEMMA2_2B = Architecture(name="gemma-2-2b-shape", layers=26, hidden=2304, heads=8, kv_heads=4, head_dim=256,
                         ffn=9216, vocab=256000, tied_embeddings=True)
# A GPT-3 175B block (Brown et al. 2020, Table 2.1: h=12288, a=96, L=96), GeLU 4h MLP, LayerNorm, dropout: the block
# Korthikanti et al. 2022 analyse.
GPT3 = Architecture(name="gpt3-175b", family="gpt2", layers=96, hidden=12288, heads=96, vocab=51200,
                    ffn=4 * 12288, mlp="gelu", norm="layernorm", qkv_bias=True, out_bias=True, mlp_bias=True,
                    tied_embeddings=True, positions="learned", max_positions=2048, activation="gelu_fused")
# Qwen3-Coder-480B-A35B (config.json): 62 layers, 96 query heads, 8 KV heads of 128, hidden 6144.
QWEN3_CODER_480B = Architecture(name="qwen3-coder-480b-a35b", layers=62, hidden=6144, heads=96, kv_heads=8,
                                head_dim=128, vocab=151936, ffn=0, experts=160, top_k=8, expert_ffn=2560,
                                qk_norm=True, family="qwen3", max_position_embeddings=262_144)

# QwQ-32B (config.json: 64 layers, hidden 5120, 40 query heads and 8 KV heads of 128, intermediate 27648,
# vocabulary 152064, q/k/v biases, untied head): 131,072 positions, the context_len SGLang 0.4.3 prints for it with no
# --context-length (get_context_length reads max_position_embeddings).
QWQ_32B = Architecture(name="qwq-32b", family="qwen2", layers=64, hidden=5120, heads=40, kv_heads=8, head_dim=128,
                       ffn=27648, vocab=152064, qkv_bias=True, max_position_embeddings=131_072)
# The Qwen2 and Qwen2.5 Instruct models' config.json holds 32,768 positions ("The current config.json is set for
# context length up to 32,768 tokens", huggingface.co/Qwen/Qwen2.5-7B-Instruct model card); Qwen2-7B-Instruct has
# Qwen2.5 7B's sizes.
QWEN_INSTRUCT_POSITIONS = 32_768
ROUNDING_TOLERANCE = "±0.005 GiB (the log's two decimals)"
FOUR_DECIMALS = ("±0.0005 GiB: the log's four decimals and the engine's small buffers the model leaves out "
                 "(the attention layers' scale scalars, 512 B each, 0.05 MiB)")
DENNISLEE = ("vLLM 0.10.1.1 start-up log, Qwen2-7B-Instruct on A100 80GB, --gpu-memory-utilization 0.25, "
             "--max-model-len 16384 (dennislee22/vLLM-benchmarking, commit b474d1e): {0}")
DENNISLEE_URL = "https://github.com/dennislee22/vLLM-benchmarking/blob/b474d1e053c35c9aef8c02aae4efbc0d8675f033/log/{0}"
LLMS_IN_CLOUDS = ("SGLang 0.4.3.post4 start-up log, QwQ-32B at --tensor-parallel-size 4 on four L4s "
                  "(didier-durand/llms-in-clouds docs/sglang.md, commit b001c86, 2025-03-08)")
LLMS_IN_CLOUDS_URL = ("https://github.com/didier-durand/llms-in-clouds/blob/b001c8690e894d234cf3a2e2345d259173acf293/"
                      "docs/sglang.md")

CCE = ("Cut Cross-Entropy README, Gemma 2 2B benchmark table (Wijmans et al. 2024, arXiv:2411.09009; "
       "apple/ml-cross-entropy, PyTorch 2.4.1)")
CCE_URL = "https://github.com/apple/ml-cross-entropy#readme"
CCE_SETUP = "Gemma 2 2B's shape, bf16, one sequence of 8,192 tokens, vocabulary 256,000"
CCE_UNIT = "the README prints MB; 8,192 x 256,000 x 2 B is exactly 4,000 of them, so they are MiB"
KORTHIKANTI = "Korthikanti et al. 2022 (arXiv:2205.05198), Table 2"
KORTHIKANTI_URL = "https://arxiv.org/abs/2205.05198"
GPT3_SETUP = "GPT-3 175B layer (h 12,288, 96 heads), fp16, s = 2,048, b = 1, eager attention with dropout"
MEGATRON = "Megatron-LM docs/user-guide/features/dist_optimizer.md, bytes-per-parameter table (commit d98e8a6)"
MEGATRON_URL = ("https://github.com/NVIDIA/Megatron-LM/blob/d98e8a64ddf34856e74b24714e3bedb2f5a39553/"
                "docs/user-guide/features/dist_optimizer.md")
LMCACHE = "vLLM ~0.10.2 start-up log in LMCache issue #1739"
SGLANG_GB = "SGLang prints GB; mem_cache/memory_pool.py defines GB = 1024 x 1024 x 1024, so they are GiB"
VLLM_GIB = "as vLLM prints it"
EOLE = ("vLLM 0.13.0 log (google/gemma-3-1b-it, bf16, max_model_len 2048, gpu_memory_utilization 0.95, "
        "max_num_batched_tokens 8192) in eole-nlp/eole benchmarks/genai/results.md, commit 6633d06 (2026-01-16)")
EOLE_URL = ("https://github.com/eole-nlp/eole/blob/6633d065dba3b01eea1d2152016464b1e242ac33/benchmarks/genai/"
            "results.md")
# llm-d-planner's accuracy sweep: vLLM 0.19.0 (the banner and "Initializing a V1 LLM engine (v0.19.0)") on one H100
# 80GB ("total_memory=79.19GiB"), --gpu-memory-utilization 0.95, --no-enable-prefix-caching, --max-model-len 8192, the
# rest vLLM's defaults; one log a run, its file name under the commit below.
LLMD = ("vLLM 0.19.0 start-up log, H100 80GB, --gpu-memory-utilization 0.95, --max-model-len 8192, prefix caching "
        "off (llm-d-incubation/llm-d-planner accuracy/results/v0.19.0/logs, commit d3121e0, 2026-04-22): {0}")
LLMD_URL = ("https://github.com/llm-d-incubation/llm-d-planner/blob/d3121e059da88662db39a926a3ead964be97359b/accuracy/"
            "results/v0.19.0/logs/{0}")
LLMD_BENCHMARK = ("llm-d/llm-d-benchmark config_explorer/empirical-vllm-memory-results.md (commit 4f4d449, "
                  "2026-02-26): vLLM start-up logs on one H100 (79.18 GiB), the doc's \"vLLM version: 0.11.0\"")
LLMD_BENCHMARK_URL = ("https://github.com/llm-d/llm-d-benchmark/blob/4f4d44943c39b76b28e30dfa1fb0dfaf1ee894b5/"
                      "config_explorer/empirical-vllm-memory-results.md")
VERSION_TOLERANCE = ("0.5%: the assumed non-torch memory (0.25 GiB against the logs' 0.13 to 0.26) and the sampler's "
                     "small buffers")
# The Triton top-k/top-p kernel's cached buffer, one fp32 row of the vocabulary for each of the H100's 132 streaming
# multiprocessors (0.06 GiB for Llama, 0.13 GiB for Gemma), is not modelled (builder.model.engines TRITON_BUFFER_NOTE).
WEIGHTS_TOLERANCE = ("0.1%: the log's 0.01 GiB rounding (up to 0.06% at 8.49 GiB) and the per-channel quantisation "
                     "scales loaded beside quantised weights")
# A vLLM v0.11.2 log of DeepSeek-R1-0528 (DeepSeek-V3's shapes and fp8 checkpoint) on 8 H200s, in a validation set
# of start-up logs (record 88e492a0): "Model loading took 79.7390 GiB memory".
VLLM_ESTIMATOR = ("vLLM v0.11.2 start-up log, H200s, --max-model-len 8192, --gpu-memory-utilization 0.92 "
                  "(ashishkamra/vllm-memory-estimator test_data/validation_db.json record 88e492a0, commit 8b0e21d)")
VLLM_ESTIMATOR_URL = ("https://github.com/ashishkamra/vllm-memory-estimator/blob/"
                      "8b0e21d1ec49357383758a164129515209b37e7f/test_data/validation_db.json")
FP8_CHECKPOINT_TOLERANCE = ("1%: the model is 0.5% under this log; vLLM's MLA dequantises each rank's fp8 kv_b_proj "
                            "to bf16 to split W_UK and W_UV from it (mla_attention.py split_kv_b_proj), a copy of "
                            "0.24 GiB here that the model does not count")
MLA_WEIGHTS_TOLERANCE = ("1%: the model is 0.4% under this log, a gap not yet traced (vLLM's MLA splits W_UK and W_UV "
                         "from kv_b_proj after loading, as views in the upstream code read, so they add nothing)")


TORCHTUNE = ("torchtune README, \"Optimization flags\" table, Llama 3.2 3B rows (PR #2003, commit 1814feb, "
             "2024-11-18)")
TORCHTUNE_URL = ("https://github.com/pytorch/torchtune/blob/1814feb17a9038e1a8053ce93111bd26774a8db6/"
                 "README.md#optimization-flags")
TORCHTUNE_COMPARED = ("peak memory active of a training step (torch.cuda.memory_stats' active_bytes.all.peak, logged by "
                      "torchtune's log_peak_memory_stats), against the step's highest moment without reserved parts")
TORCHTUNE_SETUP = ("Llama 3.2 3B, full fine-tuning on one A100 (full_finetune_single_device), bf16 weights, gradients "
                   "and AdamW moments (torch.optim.AdamW, fused: torchtune's AdamW configs set fused: True, "
                   "recipes/configs/llama3_2/3B_full.yaml at 1814feb; the README does not print the rows' commands, and "
                   "a foreach step's sqrt of the second moment, one more 6 GiB tensor, would put the step at 29.9 GiB, "
                   "above the 24.9 GiB published with activation checkpointing), batch 2 packed to 4,096 tokens, "
                   "and where the row does not add them, torch.nn.CrossEntropyLoss, no activation checkpointing, "
                   "optimizer step after backward{0}. "
                   "Assumed, not published: the packed batch's flex attention saves what a flash kernel saves (Q, K, "
                   "V, output, logsumexp); active bytes equal allocated bytes (one stream)")
TORCHTUNE_UNIT = "torchtune's get_memory_stats divides by 1024**3: GiB"
TORCHTITAN_LOSS = "torchtitan docs/chunked_loss.md, the 8,192-token row's peak active memory (commit 94609ad)"
TORCHTITAN_LOSS_URL = ("https://github.com/pytorch/torchtitan/blob/94609ad7f862c04b0c79434c8e98e410b23948c3/docs/"
                       "chunked_loss.md")
TORCHTITAN_LOSS_SETUP = (
    "Qwen3-14B on 8 H100s, tensor parallel 4, data parallel 2, 327,680 tokens per data-parallel rank, variable-length "
    "attention, full activation checkpointing, a maximum context of 8,192, the LM head and loss in chunks of 8,192 "
    "tokens. Assumed, not published (torchtitan's defaults and plan at b5bcd76): sequence parallelism with the tensor "
    "parallelism; FSDP2 over the 2 data-parallel ranks with bf16 parameters and fp32 reductions "
    "(mixed_precision_param, mixed_precision_reduce); the tokens as 40 sequences of 8,192, one micro-batch; AdamW, "
    "fused; the token embedding and the output layer FSDP units of their own, as torchtitan's apply_fsdp_to_decoder "
    "wraps them (torchtitan/distributed/fsdp.py); the chunked head and loss stand as a fused linear cross-entropy (the "
    "doc's 1,024- and 8,192-token chunks "
    "give the same 83.56 GiB, so the peak is not at the loss); variable-length attention saves what flash attention "
    "saves; active bytes equal allocated bytes")


def _torchtune(models: dict[str, Architecture], name: str, published: str, words: str, **changes) -> Case:
    settings = dict(model=models["llama-3.2-3b"], precision="bf16", optimizer="adamw", optimizer_impl="fused",
                    micro_batch=2, seq_len=4096, attention="flash", loss="eager", implementation="torchtune")
    config = Config(**{**settings, **changes})
    return Case(name, "training", "peak", TORCHTUNE_COMPARED, TORCHTUNE_SETUP.format(words), TORCHTUNE, TORCHTUNE_URL,
                Fraction(published), "GiB", step_peak("GiB"), config, rel=Fraction(3, 100), tolerance="3%",
                unit_note=TORCHTUNE_UNIT)


def _korthikanti(name: str, words: str, published: int, **changes) -> Case:
    config = Config(model=GPT3, micro_batch=1, seq_len=2048, attention="eager", dropout=True,
                    implementation="megatron", precision="fp16-mixed", **changes)
    return Case(name, "training", "part", f"activations saved per layer, {words}", GPT3_SETUP, KORTHIKANTI,
                KORTHIKANTI_URL, Fraction(published), "B", layer_activations, config,
                unit_note="Table 2 gives the formula; its value for this shape, in bytes")


SBH = 2048 * 1 * 12288  # s x b x h of the GPT-3 layer above


def training(models: dict[str, Architecture]) -> tuple[Case, ...]:
    """The training cases, the catalog models read from `models`."""
    return (
        _torchtune(models, "torchtune-llama-3.2-3b-packed", "60.0", ", eager (the \"+ Packed Dataset\" row)"),
        # The recipe calls training.compile_loss(self._loss_fn) and drops what it returns, so only the chunked loss
        # (which compile_loss changes in place) is compiled (recipes/full_finetune_single_device.py line 292 at
        # 1814feb).
        _torchtune(models, "torchtune-llama-3.2-3b-packed-compiled", "51.0",
                   ", every layer under torch.compile, the loss left eager: the recipe drops the module compile_loss "
                   "returns (the \"+ Compile\" row)", compile=True),
        # From "+ Chunked Cross Entropy" on, compile_loss compiles the chunked loss's compute_cross_entropy in place
        # (torchtune/training/_compile.py at 1814feb): loss chunked-compiled. Each row adds its flag to the previous
        # one. The "+ 8-bit AdamW" row (17.6 GiB) is not pinned: the README does not say which 8-bit AdamW it ran
        # (bitsandbytes' AdamW8bit or PagedAdamW8bit, torchao's AdamW8bit), and a paged optimizer's states are not
        # all on the GPU; with torchao's AdamW8bit stepping inside backward the model gives 17.20 GiB (-2.3%).
        *(_torchtune(models, f"torchtune-llama-3.2-3b-packed-compiled-{name}", published, words, compile=True,
                     loss="chunked-compiled", **flags)
          for name, published, words, flags in (
              ("chunked-loss", "42.9", ", every layer and each chunk's upcast and cross-entropy under torch.compile, "
               "CEWithChunkedOutputLoss in 8 chunks (the \"+ Chunked Cross Entropy\" row)", {}),
              ("checkpointing", "24.9", ", as that row, every layer checkpointed (the \"+ Activation Checkpointing\" "
               "row)", dict(recompute="full")),
              ("in-backward", "23.1", ", as that row, the optimizer step fused into backward (optimizer_in_bwd: one "
               "AdamW per parameter stepped from its gradient hook; the \"+ Fuse optimizer step into backward\" row)",
               dict(recompute="full", optimizer_impl="in-backward")),
              ("offloading", "21.8", ", as that row, activations offloaded to the CPU (the \"+ Activation "
               "Offloading\" row)", dict(recompute="full", optimizer_impl="in-backward", offload_activations=True)))),
        Case("torchtitan-qwen3-14b-tp4-fsdp2", "training", "peak",
             "peak active memory of a training step (torch.cuda.memory_stats' active_bytes.all.peak)",
             TORCHTITAN_LOSS_SETUP, TORCHTITAN_LOSS, TORCHTITAN_LOSS_URL, Fraction("83.56"), "GiB", step_peak("GiB"),
             Config(model=models["qwen3-14b"], dp=2, fsdp="FULL_SHARD", tp=4, sequence_parallel=True,
                    micro_batch=40, seq_len=8192, recompute="full", attention="flash", loss="fused-linear",
                    reduce_dtype="fp32", optimizer="adamw", optimizer_impl="fused",
                    custom_sharded_layers=("tok_embeddings", "output")),
             rel=Fraction(3, 100), tolerance="3%", unit_note="torchtitan prints GiB (bytes / 2**30)"),
        Case("cce-gemma-2-2b-eager-loss-gradients", "training", "need",
             "loss gradients live at the start of backward (the README's baseline \"Gradient\" column)", CCE_SETUP, CCE,
             CCE_URL, Fraction(16000), "MiB", at_moment("backward_start", "activations/loss_grads", "MiB"),
             Config(model=GEMMA2_2B, precision="bf16", micro_batch=1, seq_len=8192, loss="eager"), unit_note=CCE_UNIT),
        Case("cce-gemma-2-2b-compiled-loss-gradients", "training", "need",
             "loss gradients live at the start of backward, loss under torch.compile (\"Gradient\" column)", CCE_SETUP,
             CCE, CCE_URL, Fraction(12000), "MiB", at_moment("backward_start", "activations/loss_grads", "MiB"),
             Config(model=GEMMA2_2B, precision="bf16", micro_batch=1, seq_len=8192, loss="compiled"), unit_note=CCE_UNIT),
        Case("cce-gemma-2-2b-compiled-loss-saved", "training", "part",
             "what a compiled loss keeps for backward (\"Loss\" column)", CCE_SETUP, CCE, CCE_URL, Fraction("4000.1"),
             "MiB", part("activations/loss", "MiB"),
             Config(model=GEMMA2_2B, precision="bf16", micro_batch=1, seq_len=8192, loss="compiled"),
             abs=Fraction(5, 100), tolerance="the printed rounding (±0.05 MiB)", unit_note=CCE_UNIT),
        _korthikanti("korthikanti-gpt3-no-parallelism", "no parallelism: sbh(34 + 5as/h)", SBH * 114),
        _korthikanti("korthikanti-gpt3-selective", "selective recomputation: 34sbh", SBH * 34, recompute="selective"),
        _korthikanti("korthikanti-gpt3-full", "full recomputation: 2sbh", SBH * 2, recompute="full"),
        _korthikanti("korthikanti-gpt3-tp8", "tensor parallel 8: sbh(10 + 24/t + 5as/(ht))", SBH * 23, tp=8),
        _korthikanti("korthikanti-gpt3-tp8-sp", "tensor and sequence parallel 8: sbh(34/t + 5as/(ht))",
                     SBH * Fraction(57, 4), tp=8, sequence_parallel=True),
        Case("transformer-math-7b-fp32-adam", "training", "sum",
             "weights, gradients and Adam's two moments, summed: 7B x (4 + 4 + 4 + 4) bytes",
             "7B parameters, fp32 weights and gradients, Adam", "Transformer Math 101 (Anthony et al. 2023, EleutherAI)",
             "https://blog.eleuther.ai/transformer-math/", Fraction(112), "GB", total("GB"),
             Config(params=7_000_000_000, precision="fp32", optimizer="adam"), unit_note="decimal GB (10^9 bytes)"),
        Case("deepspeed-zero3-18-bytes", "training", "per-param",
             "model states per parameter, summed over the GPUs (estimate_zero3_model_states_mem_needs: 18 x params / gpus)",
             "2,851M parameters, fp16 mixed precision with Adam, ZeRO-3 on 8 GPUs, fp32 gradient partitions",
             "DeepSpeed docs/code-docs/source/memory.rst and runtime/zero/stage3.py (commit edaa722)",
             "https://github.com/deepspeedai/DeepSpeed/blob/edaa7221267243c7be7fb49c5d5f5c4fb97b4641/docs/code-docs/"
             "source/memory.rst", Fraction(18), "B/param", states_per_param_all_gpus,
             Config(params=2_851_000_000, zero=3, dp=8, optimizer="adam", precision="fp16-mixed",
                    grad_accum_dtype="fp32")),
        *(Case(f"megatron-{precision.removeprefix('megatron-')}-{'distributed' if zero else 'replicated'}", "training",
               "per-param",
               f"model states per parameter, {'distributed optimizer' if zero else 'optimizer replicated'}",
               f"{words}, data parallel 8", MEGATRON, MEGATRON_URL, Fraction(value), "B/param", states_per_param,
               Config(params=1_000_000_000, precision=precision, dp=8, zero=zero, implementation="megatron"))
          for precision, words, alone, constant, sharded in (
              ("megatron-fp16", "fp16 parameters and gradients", 20, 4, 16),
              ("megatron-bf16", "bf16 parameters, fp32 gradients", 18, 6, 12),
              ("fp32", "fp32 parameters and gradients", 16, 8, 8))
          for zero, value in ((0, alone), (1, constant + Fraction(sharded, 8)))),
    )


def _vllm_given(models: dict[str, Architecture], name: str, model: str, printed: str, max_len: int,
                tokens: int | str, source: str, url: str, kv_dtype: str | None = None, gpu: str = "h100-80gb",
                figure: str = "tokens", **settings) -> Case:
    """A vLLM log's token count (figure "tokens") or its maximum concurrency (figure "concurrency", `tokens` then
    the printed "Nx"), given the KV memory it printed: the block count within that print's rounding."""
    config = Config(model=models[model], mode="serve", kv_dtype=kv_dtype, tp=settings.pop("tp", 1),
                    pp=settings.pop("pp", 1))
    memory = Fraction(printed)
    rel, tolerance = Fraction(5, 1000) / memory, f"the log's 0.01 GiB rounding (±{0.5 / float(memory):.2f}%)"
    compared, unit, quantity, published = ("KV cache tokens (\"GPU KV cache size\"), given the logged KV memory",
                                           "tokens", kv_tokens, Fraction(tokens))
    note = ""
    if figure == "concurrency":  # the blocks' share of the memory's rounding, and the print's own 0.005
        published = Fraction(str(tokens))
        compared, unit, quantity = ("requests of --max-model-len at once (\"Maximum concurrency\"), given the "
                                    "logged KV memory", "x", max_concurrency)
        rel, tolerance = rel + Fraction(5, 1000) / published, (f"the log's 0.01 GiB and 0.01x roundings "
                                                                f"(±{float(rel + Fraction(5, 1000) / published):.3%})")
        note = f"x: requests of --max-model-len at once, as vLLM's \"Maximum concurrency\" line prints them ({tokens}x)"
    return Case(name, "serving", "budget", compared,
                f"{config.model.name}, --kv-cache-memory {printed} GiB, --max-model-len {max_len:,}"
                + (f", --kv-cache-dtype {kv_dtype}" if kv_dtype else "")
                + "".join(f", --{k.replace('_', '-')} {v}" for k, v in settings.items() if k != "enforce_eager")
                + (", --enforce-eager" if settings.get("enforce_eager") else ""),
                source, url, published, unit, quantity, config,
                Served(gpu, {"kv_cache_memory": int(memory * GIB), "max_model_len": max_len, **settings}),
                rel=rel, tolerance=tolerance, unit_note=note)


def _vllm_weights(models: dict[str, Architecture], name: str, model: str | Architecture, printed: str, log: str,
                  words: str, tp: int = 1, rel: Fraction = Fraction(1, 1000), tolerance: str = WEIGHTS_TOLERANCE,
                  abs: Fraction = Fraction(0), **dtypes) -> Case:
    """A vLLM log's "Model loading took X GiB": the weights as loaded on one rank, against the model's parameters,
    rotary cos/sin table and the allocator's rounding (loaded_weights). `model`: a catalog id or an architecture."""
    config = Config(model=models[model] if isinstance(model, str) else model, mode="serve", tp=tp, **dtypes)
    return Case(name, "serving", "budget", "weights as loaded on one rank (\"Model loading took\")",
                f"{config.model.name} ({words}), --tensor-parallel-size {tp}", LLMD.format(log), LLMD_URL.format(log),
                Fraction(printed), "GiB", engine("loaded_weights", "GiB"), config,
                Served("h100-80gb", {"kv_cache_memory": GIB, "max_model_len": 8192}), rel=rel, abs=abs,
                tolerance=tolerance, unit_note=VLLM_GIB)


def _sglang(name: str, run: tuple, compared: str, value: str, published: str, unit: str, **tolerance) -> Case:
    source, url, setup, config, served = run
    return Case(name, "serving", "budget", compared, setup, source, url, Fraction(published), unit,
                engine(value, unit), config, served, unit_note=SGLANG_GB if unit == "GiB" else "", **tolerance)


def _serving(models: dict[str, Architecture]) -> tuple[Case, ...]:
    """The serving cases, the catalog models read from `models` (the GPU totals not yet filled in)."""
    serving = (
        _vllm_given(models, "vllm-qwen3-14b-kv-tokens", "qwen3-14b", "6.51", 32768, 42_656, LMCACHE,
                    "https://github.com/LMCache/LMCache/issues/1739"),
        _vllm_given(models, "vllm-qwen3-4b-kv-tokens", "qwen3-4b", "36.88", 2048, 268_560, "vLLM PR #57047 log (Sep 2026)",
                    "https://github.com/vllm-project/vllm/pull/57047"),
        _vllm_given(models, "vllm-qwen3-30b-a3b-fp8-kv-tokens", "qwen3-30b-a3b", "10.55", 100_000, 230_528,
                    "vLLM issue #25350 log", "https://github.com/vllm-project/vllm/issues/25350", kv_dtype="fp8"),
        _vllm_given(models, "vllm-deepseek-v2-lite-kv-tokens", "deepseek-v2-lite", "12.13", 1024, 807_792,
                    "vLLM 0.9.2 dev log in PR #20665 (L4s, first pipeline stage)",
                    "https://github.com/vllm-project/vllm/pull/20665", gpu="l4", tp=2, pp=2, enforce_eager=True),
        # Sliding-window layers: Gemma 3 1B's 22 sliding layers (window 512) and 4 full ones make one full group and six
        # sliding groups of 4 layers (the log's "Add 2 padding layers"), 902 blocks a request at 2,048 tokens.
        _vllm_given(models, "vllm-gemma-3-1b-kv-tokens", "gemma-3-1b", "25.39", 2048, 950_864, EOLE, EOLE_URL,
                    max_num_batched_tokens=8192),
        _vllm_given(models, "vllm-gemma-3-1b-max-concurrency", "gemma-3-1b", "25.39", 2048, "461.21", EOLE, EOLE_URL,
                    figure="concurrency", max_num_batched_tokens=8192),
        Case("vllm-qwen3-4b-awq-available-kv", "serving", "budget",
             "KV cache memory the engine keeps after profiling (\"kv cache memory in use\")",
             "Qwen3-4B, 4-bit weights (AWQ), --gpu-memory-utilization 0.85, --max-model-len 2,048, a 48 GB GPU whose CUDA "
             "total is 47.37 GiB, --vllm-version 0.29 (the log's 'CUDA graph pool memory: 0.22 GiB (actual), 0.42 GiB "
             "(estimated)' for a dense model is the V2 model runner's estimate, which v0.29.0 added; its one-pass "
             "sampler warm-up lasted to v0.32.0)", "vLLM PR #57047 log (Sep 2026)",
             "https://github.com/vllm-project/vllm/pull/57047",
             Fraction("36.88"), "GiB", engine("available", "GiB"),
             Config(model=models["qwen3-4b"], mode="serve", param_dtype="int4"),
             Served("rtx-6000-ada", {"gpu_memory_utilization": 0.85, "max_model_len": 2048, "vllm_version": "0.29"},
                    int(Fraction("47.37") * GIB)),
             rel=Fraction(3, 100), tolerance="3%", unit_note=VLLM_GIB),
        # The same log's CUDA-graph estimate, the one vLLM subtracts before sizing the KV cache (gpu_worker.py:707-757
        # determine_available_memory at v0.33.0, from v0.29.0 with the V2 model runner): the model's named
        # assumption is this figure, for every run (builder.model.engines CUDA_GRAPHS).
        Case("vllm-qwen3-4b-awq-cuda-graph-estimate", "serving", "budget",
             "CUDA-graph memory subtracted before the KV cache is sized (\"CUDA graph pool memory: ... GiB "
             "(estimated)\"; an assumption the model takes from this log)",
             "Qwen3-4B, 4-bit weights (AWQ), --gpu-memory-utilization 0.85, --max-model-len 2,048, a 48 GB GPU whose "
             "CUDA total is 47.37 GiB, --vllm-version 0.29 (vLLM's default 256 requests: 51 piecewise and 35 full "
             "graphs, vllm/config/vllm.py _set_cudagraph_sizes)", "vLLM PR #57047 log (Sep 2026)",
             "https://github.com/vllm-project/vllm/pull/57047",
             Fraction("0.42"), "GiB", engine("graphs_in_budget", "GiB"),
             Config(model=models["qwen3-4b"], mode="serve", param_dtype="int4"),
             Served("rtx-6000-ada", {"gpu_memory_utilization": 0.85, "max_model_len": 2048, "vllm_version": "0.29"},
                    int(Fraction("47.37") * GIB)),
             abs=Fraction(5, 1000), tolerance="the log's 0.01 GiB rounding", unit_note=VLLM_GIB),
        Case("vllm-qwen3-coder-480b-kv-needed", "serving", "budget",
             "KV cache one request of the maximum length needs (\"KV cache is needed\")",
             "Qwen3-Coder-480B-A35B, --max-model-len 262,144, data parallel 8 on H20s",
             "vllm-project/recipes PR #12 log", "https://github.com/vllm-project/recipes/pull/12", Fraction(62), "GiB",
             engine("needed", "GiB"), Config(model=QWEN3_CODER_480B, mode="serve"),
             Served("h100-80gb", {"kv_cache_memory": int(Fraction("48.66") * GIB), "max_model_len": 262_144}),
             unit_note=VLLM_GIB),
        Case("vllm-qwen3-30b-a3b-kv-needed", "serving", "budget",
             "KV cache one request of the maximum length needs (\"KV cache is needed\")",
             "Qwen3-Coder-30B-A3B (Qwen3-30B-A3B's attention, 262,144 positions), bf16, --max-model-len 262,144",
             "vLLM issue #34076 log", "https://github.com/vllm-project/vllm/issues/34076", Fraction(24), "GiB",
             engine("needed", "GiB"),
             Config(model=models["qwen3-30b-a3b"].with_changes(max_position_embeddings=262_144), mode="serve"),
             Served("h100-80gb", {"kv_cache_memory": int(Fraction("3.18") * GIB), "max_model_len": 262_144}),
             unit_note=VLLM_GIB),
    )

    # vLLM 0.19.0 on one H100 (llm-d-planner's sweep, LLMD): the tokens a logged KV memory holds, over the page sizes of
    # full attention at bf16, fp8 and fp32, tensor parallelism, MLA, Gemma 2's sliding-window groups and an MoE.
    logs = {"8b": "meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192.log",
            "8b-kv-fp8": "meta-llama---h100-80gb--tp1pp1dp1--8192-dtbf16-kvfp8.log",
            "8b-fp32": "meta-llama-llama-3--h100-80gb--tp1pp1dp1--8192-dtf32.log",
            "8b-fp8": "meta-llama-llama-3---h100-80gb--tp1pp1dp1--8192-qfp8.log",
            "8b-tp2": "meta-llama-llama-3-1-8b---h100-80gb--tp2pp1dp1--8192.log",
            "dsv2": "deepseek-ai-deepseek-v2---h100-80gb--tp1pp1dp1--8192.log",
            "gemma2": "google-gemma-2-9b-it--h100-80gb--tp1pp1dp1--8192.log",
            "mixtral": "mistralai-mixtral-8x7b-i--h100-80gb--tp2pp1dp1--8192.log",
            "qwen3-moe": "qwen-qwen3-30b-a3b--h100-80gb--tp1pp1dp1--8192.log",
            "70b-w8a8": "redhatai-llama-3-3-70b-i--h100-80gb--tp2pp1dp1--8192.log",
            "70b-fp8": "fp8dyn-llama-3-3-70b--h100-80gb--tp4pp1dp1--8192.log"}
    given = (("llama-3.1-8b", "llama-3.1-8b", "58.11", 476_016, "8b", {}),
             ("llama-3.1-8b-fp8-cache", "llama-3.1-8b", "58.11", 952_032, "8b-kv-fp8", {"kv_dtype": "fp8"}),
             # --dtype float32 with --kv-cache-dtype auto: the cache takes the weights' fp32.
             ("llama-3.1-8b-fp32", "llama-3.1-8b", "42.8", 175_296, "8b-fp32", {"kv_dtype": "fp32"}),
             ("llama-3.1-8b-tp2", "llama-3.1-8b", "63.76", 1_044_688, "8b-tp2", {"tp": 2}),
             ("deepseek-v2-lite-tp1", "deepseek-v2-lite", "43.61", 1_505_552, "dsv2", {}),
             ("gemma-2-9b", "gemma-2-9b", "54.12", 168_880, "gemma2", {}),
             ("mixtral-8x7b-tp2", "mixtral-8x7b", "28.44", 465_936, "mixtral", {"tp": 2}),
             ("llama-3.3-70b-tp4", "llama-3.3-70b", "54.09", 708_992, "70b-fp8", {"tp": 4}))
    serving += tuple(_vllm_given(models, f"vllm-0.19-{name}-kv-tokens", model, printed, 8192, tokens,
                                 LLMD.format(logs[log]), LLMD_URL.format(logs[log]), **settings)
                     for name, model, printed, tokens, log, settings in given)
    # The same logs' non-torch memory ("Actual usage is ... N for non-torch memory"): about 2.1 GiB a rank with tensor
    # parallelism over the H100s' NVLink switch, against 0.24-0.27 GiB on one GPU (builder.model.engines NON_TORCH_TP).
    # (The tensor parallel size 4 logs print 2.13 and 2.21 GiB, up to 5% above the assumption: not pinned.)
    non_torch = (("llama-3.1-8b-tp2", "llama-3.1-8b", "2.07", "8b-tp2", 2),
                 ("mixtral-8x7b-tp2", "mixtral-8x7b", "2.07", "mixtral", 2))
    serving += tuple(
        Case(f"vllm-0.19-{name}-non-torch", "serving", "budget", "non-torch memory a rank (\"N for non-torch memory\")",
             f"{model}, bf16, --max-model-len 8192, tensor parallel size {tp}", LLMD.format(logs[log]),
             LLMD_URL.format(logs[log]), Fraction(printed), "GiB", engine("non_torch", "GiB"),
             Config(model=models[model], mode="serve", tp=tp), Served("h100-80gb", {"max_model_len": 8192}),
             rel=Fraction(3, 100), tolerance="3%: one assumed figure for the logs' 2.06 to 2.10 GiB at size 2",
             unit_note=VLLM_GIB)
        for name, model, printed, log, tp in non_torch)
    # The same logs' budget from the GPU's total under --vllm-version 0.19 (builder.model.engines: the CUDA graphs
    # measured and not subtracted, the sampler warm-up of 1,024 requests through the Triton top-k/top-p path):
    # "Available KV cache memory".
    release = "0.19"
    run19 = {"gpu_memory_utilization": 0.95, "max_model_len": 8192, "vllm_version": release}
    qwen7_19 = models["qwen2.5-7b"].with_changes(max_position_embeddings=QWEN_INSTRUCT_POSITIONS)
    # And their "peak activation" (1.89 GiB for Llama, 3.65 for Gemma 2 9B, 2.21 for Qwen2.5 7B): the sampler
    # warm-up through the Triton top-k/top-p path, its cached buffer of 132 vocabulary rows (an H100's SMs) with it.
    for name, model, log, available, peak in (
            ("llama-3.1-8b", models["llama-3.1-8b"], "8b", "58.11", "1.89"),
            ("gemma-2-9b", models["gemma-2-9b"], "gemma2", "54.12", "3.65"),
            ("qwen2.5-7b", qwen7_19, "qwen-qwen2-5-7b-instruct--h100-80gb--tp1pp1dp1--8192.log", "58.53", "2.21"),
            ("qwen3-8b", models["qwen3-8b"], "qwen-qwen3-8b--h100-80gb--tp1pp1dp1--8192.log", "57.50", None)):
        file = logs.get(log, log)
        setup = (f"{model.name}, bf16, --gpu-memory-utilization 0.95, --max-model-len 8192, the GPU's total (79.19 "
                 f"GiB), vLLM's defaults for an H100 (1,024 requests, 8,192 tokens a step), --vllm-version {release}")
        config = Config(model=model, mode="serve")
        serving += (Case(f"vllm-0.19-{name}-available-kv", "serving", "budget",
                         "KV cache memory from the GPU's total (\"Available KV cache memory\")", setup,
                         LLMD.format(file), LLMD_URL.format(file), Fraction(available), "GiB",
                         engine("available", "GiB"), config, Served("h100-80gb", dict(run19)), rel=Fraction(5, 1000),
                         tolerance=VERSION_TOLERANCE, unit_note=VLLM_GIB),)
        if peak is not None:
            serving += (Case(f"vllm-0.19-{name}-peak-activation", "serving", "budget",
                             "the profile run's peak (\"N for peak activation\"): the sampler warm-up", setup,
                             LLMD.format(file), LLMD_URL.format(file), Fraction(peak), "GiB",
                             engine("profile_peak", "GiB"), config, Served("h100-80gb", dict(run19)),
                             rel=Fraction(3, 100), tolerance="3%", unit_note=VLLM_GIB),)
    # llm-d-benchmark's analysis of vLLM "0.11.0" logs on one H100 (util 0.9, --max-model-len 16000, block size 128):
    # its peaks are PyTorch's sort (38 B a logit), the path from v0.11.1 (FlashInfer's sampler opt-in; 0.11.0 sorts
    # there too when FlashInfer is not installed), so the cases are at --vllm-version 0.11.1.
    run11 = {"max_model_len": 16_000, "block_size": 128, "vllm_version": "0.11.1"}
    qwen3_32b = models["qwen3-14b"].with_changes(name="qwen3-32b", layers=64, heads=64, ffn=25600)
    for name, model, tp, available, peak, absolute in (
            ("llama-3.1-8b", models["llama-3.1-8b"], 1, "51.38", "4.76", None),
            ("qwen3-32b", qwen3_32b, 1, "4.45", "5.64", Fraction(1, 10))):
        setup = (f"{model.name}, bf16, vLLM's default --gpu-memory-utilization 0.9, --max-model-len 16000, "
                 f"--block-size 128, --tensor-parallel-size {tp}, vLLM's defaults for an H100 (1,024 requests, 8,192 "
                 "tokens a step), --vllm-version 0.11.1")
        config = Config(model=model, mode="serve", tp=tp)
        serving += (
            Case(f"vllm-0.11-{name}-available-kv", "serving", "budget",
                 "KV cache memory from the GPU's total (\"Available KV cache memory\")", setup, LLMD_BENCHMARK,
                 LLMD_BENCHMARK_URL, Fraction(available), "GiB", engine("available", "GiB"), config,
                 Served("h100-80gb", dict(run11)), rel=Fraction(0) if absolute else Fraction(5, 1000),
                 abs=absolute or Fraction(0),
                 tolerance="±0.1 GiB: what is left of 71.26 GiB after 61 GiB of weights" if absolute
                 else VERSION_TOLERANCE, unit_note=VLLM_GIB),
            Case(f"vllm-0.11-{name}-peak-activation", "serving", "budget",
                 "the profile run's peak (the doc's \"Peak Activation\"): the sampler warm-up", setup, LLMD_BENCHMARK,
                 LLMD_BENCHMARK_URL, Fraction(peak), "GiB", engine("profile_peak", "GiB"), config,
                 Served("h100-80gb", dict(run11)), rel=Fraction(2, 100), tolerance="2%", unit_note=VLLM_GIB))
    # Gemma 2 9B: 21 full and 21 sliding layers (window 4,096) make two groups of 21; a request of 8,192 tokens takes
    # 512 blocks in the full group and ceil(min(4,095 + 8,192, 8,192) / 16) + 1 = 513 in the sliding one.
    serving += (_vllm_given(models, "vllm-0.19-gemma-2-9b-max-concurrency", "gemma-2-9b", "54.12", 8192, "20.60",
                            LLMD.format(logs["gemma2"]), LLMD_URL.format(logs["gemma2"]), figure="concurrency"),)
    serving += (
        _vllm_weights(models, "vllm-0.19-llama-3.1-8b-weights", "llama-3.1-8b", "14.99", logs["8b"], "bf16"),
        _vllm_weights(models, "vllm-0.19-llama-3.1-8b-fp32-weights", "llama-3.1-8b", "29.98", logs["8b-fp32"],
                      "--dtype float32", precision="fp32"),
        # --quantization fp8: vLLM quantises the linear weights to fp8 at load; embeddings and lm_head stay bf16.
        _vllm_weights(models, "vllm-0.19-llama-3.1-8b-fp8-weights", "llama-3.1-8b", "8.49", logs["8b-fp8"],
                      "--quantization fp8", param_dtype="fp8"),
        _vllm_weights(models, "vllm-0.19-llama-3.3-70b-w8a8-tp2-weights", "llama-3.3-70b", "33.88", logs["70b-w8a8"],
                      "RedHatAI's w8a8 checkpoint: int8 linear weights", tp=2, param_dtype="int8"),
        _vllm_weights(models, "vllm-0.19-qwen3-30b-a3b-weights", "qwen3-30b-a3b", "56.88", logs["qwen3-moe"], "bf16"),
        _vllm_weights(models, "vllm-0.19-mixtral-8x7b-tp2-weights", "mixtral-8x7b", "43.51", logs["mixtral"], "bf16",
                      tp=2),
        _vllm_weights(models, "vllm-0.19-gemma-2-9b-weights", "gemma-2-9b", "17.22", logs["gemma2"], "bf16"),
        # An older log with four decimals: vLLM 0.6 printed "Loading model weights took %.4f GB" of
        # model_memory_usage / float(2**30) (vllm/worker/model_runner.py load_model): 14.9575 GiB of parameters and
        # the 0.0313 GiB rotary table of 131,072 positions x 128 in bf16.
        Case("vllm-llama-3.1-8b-rtx-3090-weights", "serving", "budget",
             "weights as loaded (\"Loading model weights took\")", "Llama 3.1 8B Instruct, bf16, one RTX 3090",
             "vLLM log (v0.6, Dec 2024) in vllm-project/vllm issue #10517",
             "https://github.com/vllm-project/vllm/issues/10517", Fraction("14.9888"), "GiB",
             engine("loaded_weights", "GiB"), Config(model=models["llama-3.1-8b"], mode="serve"),
             Served("rtx-3090", {"kv_cache_memory": GIB, "max_model_len": 20_000}), abs=Fraction(5, 100_000),
             tolerance="±0.00005 GiB (the log's four decimals)",
             unit_note="vLLM 0.6 printed GB for bytes / 2**30: GiB"),
        # 0.44% under (its YaRN cos/sin table and the allocator's rounding counted): MLA_WEIGHTS_TOLERANCE.
        _vllm_weights(models, "vllm-0.19-deepseek-v2-lite-weights", "deepseek-v2-lite", "29.43", logs["dsv2"],
                      "bf16", rel=Fraction(1, 100), tolerance=MLA_WEIGHTS_TOLERANCE),
        # The checkpoint's own fp8 (quantization_config, 128 x 128 block scales), which vLLM reads with no flag.
        Case("vllm-0.11-deepseek-v3-fp8-weights", "serving", "budget",
             "weights as loaded on one rank (\"Model loading took\")",
             "DeepSeek-R1-0528 (DeepSeek-V3's shapes), its fp8 checkpoint with no --quantization flag, "
             "--tensor-parallel-size 8", VLLM_ESTIMATOR, VLLM_ESTIMATOR_URL, Fraction("79.7390"), "GiB",
             engine("loaded_weights", "GiB"), Config(model=models["deepseek-v3"], mode="serve", tp=8),
             Served("h200", {"max_model_len": 8192, "gpu_memory_utilization": 0.92, "vllm_version": "0.11"}),
             rel=Fraction(1, 100), tolerance=FP8_CHECKPOINT_TOLERANCE, unit_note=VLLM_GIB),
    )
    # Qwen2's widths (hidden 3,584, MLP 18,944 and 29,568) leave most of its weight tensors 0.5 or 1 MiB short of the
    # allocator's 2 MiB segments, blocks vLLM counts whole (builder.model.allocator): 57 MiB above the parameters and
    # the 8 MiB rotary table at size 1, which the logs show to their last decimal.
    qwen7 = models["qwen2.5-7b"].with_changes(max_position_embeddings=QWEN_INSTRUCT_POSITIONS)
    qwen72 = models["qwen2.5-72b"].with_changes(max_position_embeddings=QWEN_INSTRUCT_POSITIONS)
    instruct = "Instruct, bf16, 32,768 positions"
    serving += tuple(
        _vllm_weights(models, f"vllm-0.19-qwen2.5-{size}{'-tp' + str(tp) if tp > 1 else ''}-weights", model, printed,
                      log, instruct, tp=tp, rel=Fraction(0), abs=Fraction(5, 1000), tolerance=ROUNDING_TOLERANCE)
        for size, model, printed, log, tp in (
            ("7b", qwen7, "14.25", "qwen-qwen2-5-7b-instruct--h100-80gb--tp1pp1dp1--8192.log", 1),
            ("7b", qwen7, "7.12", "qwen-qwen2-5-7b-instruct--h100-80gb--tp2pp1dp1--8192.log", 2),
            ("7b", qwen7, "3.55", "qwen-qwen2-5-7b-instruct--h100-80gb--tp4pp1dp1--8192.log", 4),
            ("72b", qwen72, "67.8", "qwen-qwen2-5-72b-instruc--h100-80gb--tp2pp1dp1--8192.log", 2)))
    serving += tuple(
        Case(f"vllm-0.10-qwen2-7b{'-tp' + str(tp) if tp > 1 else ''}-weights", "serving", "budget",
             "weights as loaded on one rank (\"Model loading took\")",
             f"Qwen2-7B-Instruct (Qwen2.5 7B's sizes, bf16, 32,768 positions), --tensor-parallel-size {tp}",
             DENNISLEE.format(log), DENNISLEE_URL.format(log), Fraction(printed), "GiB",
             engine("loaded_weights", "GiB"), Config(model=qwen7, mode="serve", tp=tp),
             Served("a100-80gb", {"gpu_memory_utilization": 0.25, "max_model_len": 16_384}), abs=Fraction(5, 10_000),
             tolerance=FOUR_DECIMALS, unit_note=VLLM_GIB)
        for printed, log, tp in (("14.2488", "vllm-7B-1gpuA10080GB-0.25GRAM.log", 1),
                                 ("7.1217", "vllm-7B-2gpuA10080GB-0.25GRAM-same-node.log", 2)))

    sglang_qwen = ("SGLang PR #23669 log (upstream main, 2026-04-27)",
                   "https://github.com/sgl-project/sglang/pull/23669", "Qwen3-8B, SGLang defaults, one B200",
                   Config(model=models["qwen3-8b"], mode="serve"),
                   Served("b200", {"engine": "sglang"}))
    sglang_llama = ("SGLang PR #11716 log (2025-10-16, v0.5.3's default fraction 0.897)",
                    "https://github.com/sgl-project/sglang/pull/11716",
                    "Llama 3.3 70B, --tp 8 on H200s, --mem-fraction-static 0.897",
                    Config(model=models["llama-3.3-70b"], mode="serve", tp=8),
                    Served("h200", {"engine": "sglang", "mem_fraction_static": 0.897}))
    # The run's own server_args: mem_fraction_static=0.85, SGLang 0.4.3's default then (the 0.5.23 rule the model
    # applies by default picks 0.658 for four L4s, 0.801 under --sglang-version 0.5.18: 0.5.20 reserves more on GPUs of
    # 20 to 35 GiB). Given, the share and every pinned number below hold in each release modelled.
    sglang_qwq = (LLMS_IN_CLOUDS, LLMS_IN_CLOUDS_URL,
                  "QwQ-32B, bf16, --tensor-parallel-size 4 on four L4s, --mem-fraction-static 0.85",
                  Config(model=QWQ_32B, mode="serve", tp=4),
                  Served("l4", {"engine": "sglang", "mem_fraction_static": 0.85}))
    serving += (
        _sglang("sglang-qwen3-8b-b200-tokens", sglang_qwen, "KV pool tokens (max_total_num_tokens)",
                "max_total_num_tokens", "992896", "tokens", rel=Fraction(5, 10000), tolerance="0.05% (3 pages of 64)"),
        _sglang("sglang-qwen3-8b-b200-k-size", sglang_qwen, "K cache size (\"K size\")", "k_size", "68.18", "GiB",
                abs=Fraction(15, 1000), tolerance="±0.015 GiB"),
        _sglang("sglang-qwen3-8b-b200-weights", sglang_qwen, "weights as loaded (\"Load weight end. ... mem usage\")",
                "loaded_weights", "15.28", "GiB", abs=Fraction(5, 1000), tolerance="±0.005 GiB (the log's two decimals)"),
        _sglang("sglang-qwen3-8b-b200-avail-mem", sglang_qwen,
                "free memory before the weights (\"Load weight begin. avail mem\")", "pre", "177.57", "GiB",
                abs=Fraction(1, 100), tolerance="±0.01 GiB"),
        _sglang("sglang-llama-3-70b-tp8-h200-tokens", sglang_llama, "KV pool tokens (\"#tokens\")",
                "max_total_num_tokens", "2795207", "tokens", rel=Fraction(2, 1000), tolerance="0.2%"),
        _sglang("sglang-llama-3-70b-tp8-h200-k-size", sglang_llama, "K cache size (\"K size\")", "k_size", "53.31", "GiB",
                abs=Fraction(1, 10), tolerance="±0.1 GiB"),
        # SGLang counts free memory: every segment the weights hold, whole (2 MiB-rounded), 225.5 MiB for QwQ-32B at
        # size 4, beside the 64 MiB fp32 rotary table of 131,072 positions.
        _sglang("sglang-qwq-32b-tp4-l4-weights", sglang_qwq,
                "weights as loaded on one rank (\"Load weight end. ... mem usage\")", "loaded_weights", "15.54", "GiB",
                abs=Fraction(5, 1000), tolerance="±0.005 GiB (the log's two decimals)"),
        # Four L4s over PCIe, custom all-reduce off: nvidia-smi's 22.49 GiB less CUDA's 21.95 (the catalog's L4), 58
        # SMs x 1,536 threads of context and the log's own 0.13 GiB of torch.distributed (engine_sglang).
        _sglang("sglang-qwq-32b-tp4-l4-avail-mem", sglang_qwq,
                "free memory before the weights (\"Load weight begin. avail mem\")", "pre", "21.63", "GiB",
                abs=Fraction(3, 100), tolerance="±0.03 GiB, as for the H200s: totals from other L4s"),
        _sglang("sglang-qwq-32b-tp4-l4-tokens", sglang_qwq, "KV pool tokens (\"#tokens\")", "max_total_num_tokens",
                "46611", "tokens", rel=Fraction(1, 100),
                tolerance="1%: the ±0.03 GiB of free memory it rests on, x 0.85 over 64 KiB a token, is 418 tokens"),
        _sglang("sglang-llama-3-70b-tp8-h200-avail-mem", sglang_llama,
                "free memory before the weights (\"Load weight begin. avail mem\")", "pre", "137.34", "GiB",
                abs=Fraction(3, 100), tolerance="±0.03 GiB"),
    )
    return serving


def cases(models: dict[str, Architecture], gpus: dict[str, Any]) -> tuple[Case, ...]:
    """Every case, with the catalog models and GPUs read from `models` and `gpus` (the site's catalogs); ValueError
    names an entry they lack."""
    try:
        return training(models) + tuple(_on_gpu(case, gpus) for case in _serving(models))
    except KeyError as missing:
        raise ValueError(f"the published numbers need the catalog entry {missing.args[0]!r}, which this site's "
                         "models.toml or gpus.toml lacks") from None


def _on_gpu(case: Case, gpus: dict[str, Any]) -> Case:
    """A served case on a catalog GPU, starting from that GPU's total as its engine reads it (engine_gpu_total)."""
    from builder.model.engines import EngineSettings, engine_gpu_total
    if case.served.gpu_total is not None:
        return case
    gpu = gpus[case.served.gpu]
    total = engine_gpu_total(EngineSettings(**case.served.settings).engine, gpu)
    return replace(case, served=replace(case.served, gpu_total=total, device=gpu))
