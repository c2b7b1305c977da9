"""The calculator widget (seeds 002 and 004): every knob of the memory model in one form.

Python computes the default state with builder.model, so the widget is a complete figure
before any script runs (form, chart, parts table, fits-on list, largest batch and sequence).
It also emits, as data, everything the browser needs to evaluate any other state: the model's
rule sets (parameter tensors, placement, states, saved activations and the instants inside a
layer, serving, overheads) and checks, the architectures as the rules read them, dtype sizes,
precision policies, the peak's phase tables and the GPU catalog. static/widgets/30-calculator.js
evaluates them (static/widgets/01-rules.js) and still holds the peak's assembly and the searches,
mirroring builder.model.peak and builder.model.questions; tests/browser/test_widget_calculator.py
compares the two.

The form state is a flat dict of strings (the form's control names, also the URL keys: an option's control takes
its key from the option table, builder.model.options); `config_from_state` turns it into the Config the model reads
by the rules of builder.widgets.calculator_state, which the script evaluates too (the run's inputs). The texts the widget shows
(summary, verdicts, answers) are str.format templates (TEXTS, and the model's own check
messages and verdicts) that the functions here and the script both fill; the figure's markup
is the partial's macros, which the script receives as templates too.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any, Mapping

from builder.catalog import short_gpu_name
from builder.model import Config
from builder.model.architecture import Architecture, shape_inputs
from builder.model.breakdown import Breakdown
from builder.model.architecture import active_param_count, param_count
from builder.model.config import (CHECKPOINT_SAVES, FLOAT8_RECIPES, FSDP_STRATEGIES, OPTIMIZER_IMPLS, PRECISIONS,
                                  RECOMPUTE)
from builder.model.inputs import config_inputs, run_inputs
from builder.model.partrules import RuleSet
from builder.model.partnames import PART_NAMES, reader_name
from builder.model.placement import CUSTOM_LAYOUTS
from builder.model.peak import Need, assess, need
from builder.model.states import SHARDING as STATE_SHARDING
from builder.model.questions import VERDICTS, Fit, max_micro_batch, max_seq_len
from builder.model.units import format_bytes
from builder.model.ranges import RANGE_OF
from builder.model.buckets import DEFAULTS as BUCKET_OPTIONS
from builder.model.zero3 import ASSUMED_NONE, DEFAULTS as ZERO3_OPTIONS
from builder.widgets import calculator_state as form_rules, full_model, link_notice
from builder.widgets.choices import sent as sent_choices
from builder.widgets.calculator_fixes import FIXING, REFUSED, encode as fixes_program
from builder.widgets.calculator_state import CHECKPOINT_WEIGHTS, KEY, OVERLAP, WEIGHTS, typed_values
from builder.widgets.renames import renamed
from builder.model.options import OPTION_OF
from builder.content import Reference
from builder.sources import html_renderer
from builder.widgets.model_data import json_value, model_data

CUSTOM = "custom"
# Recomputation named by its framework (the Activations page's table): Megatron-LM's selective recomputation.
RECOMPUTE_WORDS = {"selective": "selective (Megatron)", "selective-op": "selective per-op (torchtitan)"}
# Training's parameter dtype (Config.param_dtype, overriding the policy's) and the dtype gradients are reduced in
# (Config.reduce_dtype, FSDP MixedPrecision.reduce_dtype); "policy": the precision policy's own.
PARAM_DTYPES = ("fp32", "bf16", "fp16")
REDUCE_DTYPES = ("fp32", "bf16", "fp16")
# The optimizer states' dtypes (Config.optimizer_state_dtype, and Adam's moments one by one, exp_avg_dtype and
# exp_avg_sq_dtype) and DeepSpeed's data_types.grad_accum_dtype (Config.grad_accum_dtype), each "policy" (the precision
# policy's own: no override) or one of the dtypes the sources keep them in: fp32 (ZeRO section 3.1), bf16 (pure bf16,
# Transformer Math 101), fp16 and fp8 (FP8-LM section 2.2, MS-AMP LBAdamW's exp_avg_sq_dtype and exp_avg_dtype); the
# accumulation buffer fp32, bf16 or fp16 (DeepSpeed bf16_optimizer.py, stage3.py). The command line takes any dtype.
STATE_DTYPES = ("fp32", "bf16", "fp16", "fp8")
GRAD_ACCUM_DTYPES = ("fp32", "bf16", "fp16")
DTYPE_CHOICES = {"optimizer_state_dtype": STATE_DTYPES, "exp_avg_dtype": STATE_DTYPES, "exp_avg_sq_dtype": STATE_DTYPES,
                 "grad_accum_dtype": GRAD_ACCUM_DTYPES}
# Each such control (its key is the Config option's name) with the rule inputs it sets (builder.model.inputs'
# config_inputs: the dtype the rules price and the option as chosen, which builder.model.checks reads), found by
# setting the option alone: the script sets the same inputs from the form.
DTYPE_OVERRIDES = {option: sorted(key for key, value in config_inputs(Config(**{option: "fp8"})).items()
                                  if value != config_inputs(Config())[key])
                   for option in DTYPE_CHOICES}
# The units sizes show in: GiB (2^30 bytes) or GB (10^9), each with the other beside it in totals.
UNITS = (("GiB", "GiB (2^30 bytes)"), ("GB", "GB (10^9 bytes)"))
OTHER_UNIT = {"GiB": "GB", "GB": "GiB"}
# Named starting points: [key, label, Config settings, form settings (the unit)]. Choosing one sets the form.
# "classic-8b" is seed 004's worked example: Llama 3 8B on one GPU, bf16 with Adam, one sequence of 4,096
# tokens, selective recomputation counted by Korthikanti's 34sbh, plus a flat 10 % framework overhead: 161.4 GB
# (content/calculator.md, "Overheads are assumptions").
# "3d-70b" is a Megatron-LM run: its --bf16 sets accumulate_allreduce_grads_in_fp32 (megatron/training/arguments.py
# at d98e8a6, unless --grad-reduce-in-bf16), so its gradients are the fp32 main_grad buffer: precision megatron-bf16.
STARTS = (
    ("classic-8b", "Llama 3 8B, one GPU, the classic recipe (sum of parts 161.4 GB)",
     {"model": "llama-3-8b", "precision": "bf16-mixed", "optimizer": "adam", "micro_batch": 1, "seq_len": 4096,
      "recompute": "selective", "activation_formula": "korthikanti", "overhead_fraction": 0.1}, {"unit": "GB"}),
    ("fsdp-8b", "Llama 3 8B, FSDP on 8 GPUs",
     {"model": "llama-3-8b", "precision": "bf16-mixed", "optimizer": "adamw", "seq_len": 4096, "micro_batch": 1,
      "recompute": "selective", "fsdp": "FULL_SHARD", "dp": 8}, {}),
    ("qlora-8b", "Llama 3 8B, QLoRA on one GPU",
     {"model": "llama-3-8b", "seq_len": 4096, "lora_rank": 16, "qlora": True, "recompute": "full"}, {}),
    ("3d-70b", "Llama 3 70B, 3D parallel on 128 GPUs",
     {"model": "llama-3-70b", "seq_len": 4096, "tp": 8, "sequence_parallel": True, "pp": 4, "grad_accum": 16,
      "dp": 4, "zero": 1, "implementation": "megatron", "precision": "megatron-bf16", "attention": "flash",
      "recompute": "selective"}, {}),
    ("serve-70b", "Llama 3 70B, served on 8 GPUs",
     {"model": "llama-3-70b", "mode": "serve", "tp": 8, "batch": 32, "context": 8192}, {}),
)
# The serving weights' dtype: the checkpoint's own (16-bit, or the quantisation it is published in: DeepSeek-V3's
# fp8), or one of the dtypes the model prices.
SERVE_WEIGHTS = ("fp32", "bf16", "fp16", "fp8", "int8", "int4", "nf4")
WEIGHT_CHOICES = ((CHECKPOINT_WEIGHTS, "the checkpoint's own"), *((d, d) for d in SERVE_WEIGHTS))
KV_DTYPES = ("auto", "fp32", "bf16", "fp16", "fp8", "int8", "int4")
FORMULAS = {"hf": "op by op, transformers", "megatron": "op by op, Megatron-LM", "torchtune": "op by op, torchtune",
            "korthikanti": "Korthikanti Table 2 formula"}
SHARDING = {"0": "none (ZeRO-0)", "1": "ZeRO-1", "2": "ZeRO-2", "3": "ZeRO-3",
            **{name: f"FSDP {name}" for name in FSDP_STRATEGIES}}
# The checkpoint saves (builder.model.checkpoint), each with the framework's own words beside its value.
SAVE_WORDS = {"none": "none", "torch-save": "torch-save (torch.save)",
              "full-state-dict": "full-state-dict (FSDP FULL_STATE_DICT)",
              "full-state-dict-offload": "full-state-dict-offload (FULL_STATE_DICT, offload_to_cpu)",
              "sharded-state-dict": "sharded-state-dict (FSDP SHARDED_STATE_DICT)",
              "dcp": "dcp (torch.distributed.checkpoint)", "deepspeed": "deepspeed (save_checkpoint)",
              "deepspeed-16bit": "deepspeed-16bit (16-bit weights gathered)"}
assert tuple(SAVE_WORDS) == CHECKPOINT_SAVES
SEARCH_LIMITS = {"micro_batch": 1 << 16, "seq_len": 1 << 22}
# The questions the result answers, per mode: [the input searched, its limit, the input its step is ("": 1), the
# shape input that lowers the limit where it is set ("": none)], the largest batch then the longest sequence
# (builder.model.questions: a sequence a multiple of the context-parallel ranks, which a served run has none of, and
# at most a learned position table's rows, length_limit).
LENGTH_CAP = "position_embeddings"
SEARCHES = {"train": [["micro_batch", SEARCH_LIMITS["micro_batch"], "", ""],
                      ["seq_len", SEARCH_LIMITS["seq_len"], "cp", LENGTH_CAP]],
            "serve": [["batch", SEARCH_LIMITS["micro_batch"], "", ""],
                      ["context", SEARCH_LIMITS["seq_len"], "cp", LENGTH_CAP]]}
# A changed value of these inputs moves in steps of another's (a sequence: of the context-parallel ranks).
STEPS = {"seq_len": "cp"}
# The parallel ranks the summary names when above 1, and the inputs its run text shows (TEXTS["train"], ["serve"]).
LAYOUT = ("dp", "tp", "pp", "cp", "ep")
RUN_TEXT = {"train": ["optimizer", "lora_rank", "qlora", "micro_batch", "seq_len", "recompute"],
            "serve": ["", "", "", "batch", "context", ""]}
# The texts the widget shows, as str.format templates: the functions below fill them for the
# server-rendered figure, and the script fills the same templates (sent with its data).
TEXTS = {
    "summary": "{0} ({1} parameters), {2}, {3}: needs {4} ({5}) per GPU, {6}; sum of parts {7}; {8}.",
    "invalid": "{0}: not a valid configuration: {1}",
    "custom": "Custom model",
    "train": "training, {0}, {1}{2}, micro-batch {3} x {4} tokens{5}",
    "lora": ", LoRA rank {0}{1}",
    "qlora": " (QLoRA)",
    # The recomputation a training run uses, in the control's words (none: nothing said).
    "recompute": {value: f", recompute {value}" if value != "none" else "" for value in RECOMPUTE},
    "serve": "serving {0} weights, {1} x {2} tokens",
    "verdict": "{0} ({1} usable): {2}",
    "host": "Host memory per node for offloaded states: {0}",
    "total": "{0} = {1}",
    # What the need is: the peak of a training step (at the named moment) or the serving steady state.
    "basis_train": "the peak of a step, at the {0}",
    "basis_serve": "its steady state (the sum of parts)",
    "bar_label": "peak {0}",
    # The answers: [largest batch, longest sequence] for training and serving, and [none fits] for each.
    "train_answers": ["Largest micro-batch that fits on {0}: {1}", "Longest sequence that fits on {0}: {1}"],
    "serve_answers": ["Largest batch that fits on {0}: {1}", "Longest context that fits on {0}: {1}"],
    "none": ["none, even 1 does not fit", "none fits"],
    "tokens": "{0} tokens",
    # The readouts: the architecture as the model counts it, and how many GPUs share each model state.
    "arch": "{0} parameters{1}; {2} layers, hidden {3}, {4} heads, {5} KV heads",
    "active": " ({0} active per token)",
    "shards": "Shard factor ({0}): weights split over {1} GPU{4}, gradients over {2}, optimizer states over {3}",
    # Mixture-of-experts: each expert lives on one expert-parallel rank, then shards within its group.
    "shards_experts": "; the experts' weights over {0} GPU{5} ({4}-way expert parallel), gradients over {1}, optimizer "
                      "states over {2}, each expert's data-parallel group being {3} GPU{6}",
    # The nearest changes that make a run fit (FIXES), as links; the line when none of them does.
    "fixes": "What would fit on {0}:",
    "fixes_none": "None of the usual changes (a smaller batch, recomputation, more GPUs, a shorter sequence) makes "
                  "it fit on {0} on its own.",
}

# When a run does not fit the chosen GPU, the result names the nearest changes that make it fit, as the CLI's
# --max answers do, each a link to that state. The candidates and their order are defined here, once, per mode, and
# tried by one program (builder.widgets.calculator_fixes.FIXING: what each kind of candidate does, and MAX_FIXES),
# which Python runs for the server-rendered state (`fixes`) and the script (30-calculator.js) runs from the same data
# with the browser's model. A candidate's `settings` (form values) apply first, then by kind "set" (nothing more),
# "lower" (the largest value of `key` below the current one that fits, in steps of `step_by`'s value) or "double"
# (the current value of `key`, then twice, four times, ... up to `ceiling`: the first that fits). The text is filled
# with the value found ({0}) and the GPUs the changed run uses ({1}).
FIX_LIMITS = {"dp": 4096, "tp": 64}


def candidate(kind: str, text: str, key: str = "", settings: dict[str, str] | None = None) -> dict[str, Any]:
    """One row of FIXES, as the program reads it."""
    return {"kind": kind, "key": key, "text": text, "step_by": STEPS.get(key, ""), "ceiling": FIX_LIMITS.get(key, 0),
            "settings": [{"control": control, "value": value} for control, value in (settings or {}).items()]}


FIXES = {
    "train": [
        candidate("lower", "fits with micro-batch {0}", "micro_batch"),
        candidate("set", "fits with selective recomputation", settings={"recompute": "selective"}),
        candidate("set", "fits with full recomputation", settings={"recompute": "full"}),
        candidate("double", "fits on {1} GPUs with ZeRO-3", "dp", {KEY["zero"]: "3"}),
        candidate("double", "fits on {1} GPUs with ZeRO-3 and full recomputation", "dp",
                  {KEY["zero"]: "3", "recompute": "full"}),
        candidate("lower", "fits with sequences of {0} tokens", "seq_len"),
    ],
    "serve": [
        candidate("lower", "fits with {0} concurrent sequences", "batch"),
        candidate("set", "fits with an fp8 KV cache", settings={"kv_dtype": "fp8"}),
        candidate("set", "fits with int8 weights", settings={WEIGHTS: "int8"}),
        candidate("double", "fits on {1} GPUs with tensor parallel {0}", "tp"),
        candidate("lower", "fits with a context of {0} tokens", "context"),
    ],
}
# Release 0.1.0's keys (builder.widgets.renames): the controls of these options took their full-word URL keys
# (builder.model.options' `url`) after it.
RENAMED = renamed("0.1.0", shard=KEY["zero"], formula=KEY["implementation"], sp=KEY["sequence_parallel"],
                  vpp=KEY["pp_virtual_stages"], tied="tied_embeddings")


@dataclass(frozen=True)
class Control:
    """One form control: its state key (also its URL key), label, kind and where it shows."""

    key: str
    label: str
    kind: str  # 'select', 'number', 'check' or 'radio'
    choices: tuple[tuple[str, str], ...] = ()  # (value, text) for select and radio
    show: str = ""  # '', 'train', 'serve' or 'custom': shown only in that state
    low: int = 0  # number inputs: min
    high: int = 0  # number inputs: max
    hint: str = ""  # a short note after the label
    step: str = "1"  # number inputs: the step ("1": whole numbers; "0.01" for a probability)


def _pairs(values: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """(value, value) pairs for choices shown as their own name."""
    return tuple((v, v) for v in values)


def of(option: str, label: str, show: str = "", choices: tuple[tuple[str, str], ...] | None = None,
       kind: str = "", **rest: Any) -> Control:
    """The control of an option of the table (builder.model.options): its URL key, and its kind and choices from the
    option's type unless given (a count or a fraction is a number input, a flag a box, the rest a select)."""
    chosen = OPTION_OF[option]
    kind = kind or {"count": "number", "fraction": "number", "flag": "check"}.get(chosen.type, "select")
    if choices is None:
        choices = _pairs(tuple(map(str, chosen.choices))) if kind in ("select", "radio") else ()
    return Control(chosen.url, label, kind, choices, show, **rest)


# The custom architecture's controls: each key is the Architecture field it sets, as front matter's `arch:` names it
# (builder.grids.ARCH_FIELDS), so a bar and a link say the same words.
ARCH_CONTROLS = (
    Control("layers", "Layers", "number", show=CUSTOM, low=1, high=1024),
    Control("hidden", "Hidden size", "number", show=CUSTOM, low=1, high=65536),
    Control("heads", "Attention heads", "number", show=CUSTOM, low=1, high=1024),
    Control("kv_heads", "KV heads", "number", show=CUSTOM, low=1, high=1024),
    Control("head_dim", "Head dim", "number", show=CUSTOM, low=1, high=1024),
    Control("ffn", "FFN size", "number", show=CUSTOM, low=0, high=262144),
    Control("vocab", "Vocabulary", "number", show=CUSTOM, low=1, high=1048576),
    Control("mlp", "MLP", "select", (("swiglu", "SwiGLU (3 matrices)"), ("gelu", "GeLU (2 matrices)")), CUSTOM),
    Control("norm", "Norm", "select", (("rmsnorm", "RMSNorm"), ("layernorm", "LayerNorm")), CUSTOM),
    Control("tied_embeddings", "Tied embeddings", "check", show=CUSTOM),
    Control("experts", "Experts (0 = dense)", "number", show=CUSTOM, low=0, high=1024),
    Control("top_k", "Experts per token", "number", show=CUSTOM, low=0, high=1024),
)
TRAIN_CONTROLS = (
    of("precision", "Precision policy", "train"),
    of("param_dtype", "Parameter dtype", "train", (("policy", "the policy's own"), *_pairs(PARAM_DTYPES))),
    of("reduce_dtype", "Reduce dtype", "train", (("policy", "the gradients' own"), *_pairs(REDUCE_DTYPES))),
    of("optimizer", "Optimizer", "train"),
    of("optimizer_impl", "Optimizer step", "train", (("default", "the optimizer's own"), *_pairs(OPTIMIZER_IMPLS))),
    *(of(option, label, "train", (("policy", unset), *_pairs(DTYPE_CHOICES[option])))
      for option, label, unset in (("optimizer_state_dtype", "Optimizer state dtype", "the policy's own"),
                                   ("exp_avg_dtype", "Adam first moment (exp_avg) dtype", "the policy's own"),
                                   ("exp_avg_sq_dtype", "Adam second moment (exp_avg_sq) dtype", "the policy's own"),
                                   ("grad_accum_dtype", "Gradient accumulation dtype", "the gradients' own"))),
    of("micro_batch", "Micro-batch", "train", low=1, high=65536),
    of("seq_len", "Sequence length", "train", low=1, high=4194304, hint="tokens"),
    of("grad_accum", "Gradient accumulation", "train", low=1, high=4096, hint="micro-batches per step"),
    of("recompute", "Recompute", "train", tuple((value, RECOMPUTE_WORDS.get(value, value)) for value in RECOMPUTE),
       kind="radio"),
    of("recompute_layers", "Recomputed layers per stage", "train", low=0, high=1024, hint="with full: 0 = every layer"),
    of("attention", "Attention", "train"),
    # A padded micro-batch: transformers' SDPA attention gets a mask (builder.model.oplists._PADDING_MASK).
    of("padded", "Padded batches", "train", hint="an attention mask marks the padding"),
    of("loss", "Loss", "train"),
    # One control for two options: whose op list (implementation) or Korthikanti's formula (activation_formula).
    of("implementation", "Activations counted", "train", tuple(FORMULAS.items())),
    of("dropout", "Dropout on", "train"),
    of("offload_activations", "Offload activations", "train", hint="to host memory, torchtune's way"),
    of("compile", "torch.compile layers", "train", hint="what inductor's partitioner saves"),
    # torchao's float8 training (builder.model.float8), by its recipe; the output layer left in bf16 or not.
    of("float8", "float8 training (torchao)", "train", (("none", "off"), *_pairs(FLOAT8_RECIPES)),
       hint="torchtitan's recipe_name"),
    of("float8_filter_output", "float8: output layer in bf16", "train", hint="filter_fqns output"),
    of("lora_rank", "LoRA rank", "train", low=0, high=4096, hint="0 = full fine-tuning"),
    of("lora_dropout", "LoRA dropout", "train", low=0, high=1, hint="PEFT's lora_dropout", step="0.01"),
    of("qlora", "QLoRA (4-bit base)", "train"),
    # PEFT's prepare_model_for_kbit_training and the recipes around it (builder.model.config.KBIT_PREPARE).
    of("kbit_prepare", "QLoRA unquantised weights", "train",
       (("none", "16-bit (TRL SFTTrainer 0.26+)"), ("prepare", "fp32 (prepare_model_for_kbit_training)"),
        ("prepare-bf16", "fp32 norms only (qlora.py --bf16)")), hint="embeddings, norms, output layer"),
)
ARCH_KEYS = {c.key for c in ARCH_CONTROLS}
SERVE_CONTROLS = (
    Control(WEIGHTS, "Weight dtype", "select", WEIGHT_CHOICES, "serve"),
    of("kv_dtype", "KV-cache dtype", "serve", _pairs(KV_DTYPES)),
    of("batch", "Concurrent sequences", "serve", low=1, high=65536),
    of("context", "Context", "serve", low=1, high=4194304, hint="tokens"),
)
# The ZeRO-3 limits show (and count: calculator_state.FORM_RULES) with the form's ZeRO / FSDP set to DeepSpeed's
# stage 3 only (widgets.css hides them otherwise); DeepSpeed ZeRO's gradient buckets (builder.model.buckets) with a
# ZeRO stage and no FSDP strategy (overlap_comm's default depends on the stage); PyTorch DDP's
# gradient_as_bucket_view with none (the model refuses it without data parallelism, builder.model.checks).
ZERO3_SHOWN, BUCKETS_SHOWN, DDP_SHOWN, FSDP_SHOWN = "zero3", "deepspeed", "ddp", "fsdp"
PARALLEL_CONTROLS = (
    of("zero", "ZeRO / FSDP", "train", tuple(SHARDING.items()), kind="select"),
    of("offload", "CPU offload", "train"),
    of("checkpoint_save", "Checkpoint save", "train", tuple(SAVE_WORDS.items())),
    # torchtune's custom_sharded_layers (builder.model.placement): FSDP units of their own, shown with an FSDP strategy.
    of("custom_sharded_layers", "FSDP units of their own", FSDP_SHOWN,
       (("none", "none: the embeddings and head in the root unit"), *_pairs(CUSTOM_LAYOUTS)),
       hint="torchtune's custom_sharded_layers"),
    of("gradient_as_bucket_view", "DDP gradients as bucket views", DDP_SHOWN, hint="gradient_as_bucket_view"),
    of("enable_fsdp_float8_all_gather", "FSDP all-gather in float8", "train", hint="with float8 tensorwise"),
    # DeepSpeed ZeRO-3's own limits (builder.model.zero3), in its config's words, shown with ZeRO stage 3 only.
    *(of(option, label, ZERO3_SHOWN, low=int(RANGE_OF[option].low), high=int(RANGE_OF[option].high), hint=option)
      for option, label in (("stage3_max_live_parameters", "Max live parameters"),
                                                  ("stage3_prefetch_bucket_size", "Prefetch bucket"),
                                                  ("stage3_param_persistence_threshold", "Persistence threshold"),
                                                  ("stage3_max_reuse_distance", "Max reuse distance"))),
    of("reduce_bucket_size", "Reduce bucket", BUCKETS_SHOWN, low=0, high=int(RANGE_OF["reduce_bucket_size"].high),
       hint="reduce_bucket_size"),
    of("overlap_comm", "Overlap comm", BUCKETS_SHOWN, (("default", "DeepSpeed's default"), ("on", "on"), ("off", "off")),
       kind="select"),
    of("contiguous_gradients", "Contiguous gradients", BUCKETS_SHOWN),
    of("dp", "Data parallel", low=1, high=65536),
    of("tp", "Tensor parallel", low=1, high=1024),
    of("sequence_parallel", "Sequence parallel (with TP)", "train"),
    of("pp", "Pipeline stages", low=1, high=1024),
    of("pp_virtual_stages", "Virtual stages", "train", low=1, high=64, hint="above 1: interleaved"),
    of("cp", "Context parallel", "train", low=1, high=1024),
    of("ep", "Expert parallel", low=1, high=1024),
)


def form_groups(gpus: list[tuple[str, str, int]], models: dict[str, Architecture]) -> list[tuple[str, str, tuple]]:
    """The form as (legend, show, controls) groups, in page order."""
    model_choices = tuple((key, arch.extra.get("display", key)) for key, arch in models.items())
    return [
        ("Model", "", (Control("start", "Starting point", "select",
                               (("", "your own settings"), *((key, label) for key, label, _, _ in starts(models)))),
                       Control("model", "Model", "select", model_choices + ((CUSTOM, "Custom architecture"),)),
                       of("mode", "Run", "", (("train", "Training"), ("serve", "Serving")), kind="radio"))),
        ("Custom architecture", CUSTOM, ARCH_CONTROLS),
        ("Training", "train", TRAIN_CONTROLS),
        ("Serving", "serve", SERVE_CONTROLS),
        ("Parallelism and sharding", "", PARALLEL_CONTROLS),
        ("Overheads and GPU", "", (
            # The framework overhead as a percentage of the rest (the option is its fraction: FORM_RULES divide).
            of("overhead_fraction", "Framework overhead", low=0, high=999, hint="% of the rest"),
            Control("unit", "Sizes in", "select", UNITS),
            Control("gpu", "GPU for the questions", "select", tuple((g[0], g[1]) for g in gpus)))),
    ]


def page_choices(groups: list[tuple[str, str, tuple]], state: dict[str, str], models: dict[str, Architecture],
                 gpus: list[tuple[str, str, int]]) -> dict[str, tuple[tuple[str, str], ...]]:
    """Each select's options as the page sends them (builder.widgets.choices): the chosen one and those whose words
    only the page has; the script names a catalog model or GPU from its data. The options widgets.css looks for
    without JavaScript (the model's custom one, the ZeRO / FSDP choices) have words of their own, so they stay."""
    named = {"model": set(models), "gpu": {g[0] for g in gpus}}
    return {c.key: sent_choices(c.choices, state[c.key], named.get(c.key, ()))
            for _, _, controls in groups for c in controls if c.kind == "select"}


# State <-> Config ------------------------------------------------------------------------

def arch_state(arch: Architecture) -> dict[str, str]:
    """The custom-architecture fields filled from a catalog architecture."""
    return {"layers": str(arch.layers), "hidden": str(arch.hidden), "heads": str(arch.heads),
            "kv_heads": str(arch.n_kv_heads), "head_dim": str(arch.d_head), "ffn": str(arch.ffn or arch.n_expert_ffn),
            "vocab": str(arch.vocab), "mlp": arch.mlp, "norm": arch.norm, "tied_embeddings": "1" if arch.tied_embeddings else "0",
            "experts": str(arch.experts), "top_k": str(arch.top_k)}


_PLAIN = Config()
# The form's values for a plain run (Config's defaults), before a preset's settings apply.
PLAIN_STATE = {"start": "", "unit": "GiB", "mode": _PLAIN.mode, "precision": _PLAIN.precision,
               "param_dtype": "policy", "reduce_dtype": "policy", **{option: "policy" for option in DTYPE_OVERRIDES},
               "optimizer": _PLAIN.optimizer,
               "optimizer_impl": _PLAIN.optimizer_impl or "default",
               "micro_batch": str(_PLAIN.micro_batch), "seq_len": str(_PLAIN.seq_len),
               "grad_accum": str(_PLAIN.grad_accum), "recompute": _PLAIN.recompute,
               "recompute_layers": str(_PLAIN.recompute_layers), "attention": _PLAIN.attention, "padded": "0",
               "loss": _PLAIN.loss,
               KEY["implementation"]: "hf", "dropout": "0", "offload_activations": "0", "compile": "0", "lora_rank": "0", "lora_dropout": "0", "qlora": "0", "kbit_prepare": _PLAIN.kbit_prepare, WEIGHTS: CHECKPOINT_WEIGHTS, "kv_dtype": "auto",
               "float8": "none", "float8_filter_output": "0", "enable_fsdp_float8_all_gather": "0",
               **{option: str(default) for option, default in ZERO3_OPTIONS.items()},
               **{option: str(default) for option, default in BUCKET_OPTIONS.items()}, "overlap_comm": "default",
               "contiguous_gradients": "1", "batch": str(_PLAIN.batch), "context": str(_PLAIN.context), KEY["zero"]: "0", "offload": "none",
               "checkpoint_save": _PLAIN.checkpoint_save, "gradient_as_bucket_view": "0", "custom_sharded_layers": "none",
               "dp": "1", "tp": "1", KEY["sequence_parallel"]: "0", "pp": "1", KEY["pp_virtual_stages"]: "1", "cp": "1",
               "ep": "1", KEY["overhead_fraction"]: "0"}
# Controls that mean something in one mode only ('train' or 'serve'): in the other mode they are
# hidden (CSS, by the form's own state) and the model reads their plain value instead (`effective_state`),
# so nothing a reader set while training can change a served model's numbers, or the reverse.
MODE_ONLY = {c.key: c.show for c in TRAIN_CONTROLS + SERVE_CONTROLS + PARALLEL_CONTROLS if c.show in ("train", "serve")}


def effective_state(state: dict[str, str]) -> dict[str, str]:
    """The state the model reads: every control of the other mode at its plain value."""
    return {key: PLAIN_STATE[key] if MODE_ONLY.get(key, state["mode"]) != state["mode"] else value
            for key, value in state.items()}


def default_state(settings: dict[str, Any], models: dict[str, Architecture], gpu: str) -> dict[str, str]:
    """The form state for Config overrides (a preset's settings), each set on its control (the option table's URL
    key, builder.model.options); an option the calculator has no control for is an error."""
    model_id = settings.get("model", "llama-3-8b")
    state = {"model": model_id, **arch_state(models[model_id]), **PLAIN_STATE, "gpu": gpu}
    for option, value in settings.items():
        key = OPTION_OF[option].url if option in OPTION_OF else None
        if option in ("model", "pp_schedule"):  # the model is the form's first choice; the schedule follows vpp
            continue
        if key is None:
            raise ValueError(f"calculator: option {option!r} has no control in the calculator")
        if option == "overlap_comm":
            state[key] = next(word for word, meaning in OVERLAP.items() if meaning is value)
        elif option == "activation_formula":
            state[key] = "korthikanti" if value == "korthikanti" else state[key]
        elif option == "implementation":
            state[key] = value if state[key] != "korthikanti" else "korthikanti"
        elif option == "overhead_fraction":
            state[key] = str(round(float(value) * 100))
        elif option == "param_dtype" and settings.get("mode", "train") == "serve":
            state[WEIGHTS] = value
        elif option in DTYPE_OVERRIDES and value not in DTYPE_CHOICES[option]:
            raise ValueError(f"calculator: option {option!r}: {value!r} is not one of the calculator's choices "
                             f"({', '.join(DTYPE_CHOICES[option])})")
        elif option == "optimizer_impl":
            state[key] = value or "default"
        elif OPTION_OF[option].type == "flag":
            state[key] = "1" if value else "0"
        else:
            state[key] = str(value)
    return state


def starts(models: dict[str, Architecture]) -> list[tuple]:
    """The starting points whose model the widget's catalog has."""
    return [start for start in STARTS if start[2].get("model", "llama-3-8b") in models]


def start_state(key: str, models: dict[str, Architecture], gpu: str) -> dict[str, str]:
    """The form state a named starting point (STARTS) sets."""
    _, _, settings, form = next(start for start in STARTS if start[0] == key)
    return default_state(settings, models, gpu) | form | {"start": key}


def _int(text: str) -> int:
    """A number input's value as an integer (0 when empty or not a whole number)."""
    try:
        return int(text)
    except ValueError:
        return 0


def custom_arch(state: dict[str, str]) -> Architecture:
    """The custom architecture the form describes (raises ValueError as Architecture does)."""
    return Architecture(
        name=CUSTOM, layers=_int(state["layers"]), hidden=_int(state["hidden"]), heads=_int(state["heads"]),
        kv_heads=_int(state["kv_heads"]), head_dim=_int(state["head_dim"]) or None, vocab=_int(state["vocab"]),
        ffn=_int(state["ffn"]), mlp=state["mlp"], norm=state["norm"], tied_embeddings=state["tied_embeddings"] == "1",
        experts=_int(state["experts"]), top_k=_int(state["top_k"]))


# How each control's text is read (calculator_state.typed, and the script's): a whole number, a number with a finer
# step, a box or a choice.
CONTROL_TYPES = {control.key: ("count" if control.step == "1" else "number") if control.kind == "number"
                 else "box" if control.kind == "check" else "choice"
                 for _, _, controls in form_groups([], {}) for control in controls}


def config_from_state(state: dict[str, str], models: dict[str, Architecture]) -> Config:
    """The Config a form state describes (builder.widgets.calculator_state's rules, which the script evaluates
    too); the other mode's controls do not count (`effective_state`)."""
    state = effective_state(state)
    arch = custom_arch(state) if state["model"] == CUSTOM else models[state["model"]]
    return form_rules.make_config(arch, state, CONTROL_TYPES)


# Texts the widget shows (the script builds the same strings) -----------------------------

def model_name(state: dict[str, str], models: dict[str, Architecture]) -> str:
    """The model as the summary names it."""
    if state["model"] == CUSTOM:
        return TEXTS["custom"]
    return models[state["model"]].extra.get("display", state["model"])


def gpu_count(config: Config) -> int:
    """GPUs the run uses: dp x tp x pp x cp (expert parallelism is carved out of dp)."""
    return config.dp * config.tp * config.pp * config.cp


def layout_text(state: dict[str, str], config: Config) -> str:
    """'8 GPUs (dp 8, FSDP FULL_SHARD)' or '1 GPU'."""
    n = gpu_count(config)
    items = [f"{key} {getattr(config, key)}" for key in LAYOUT if getattr(config, key) > 1]
    if config.mode == "train" and state[KEY["zero"]] != "0":
        items.append(SHARDING[state[KEY["zero"]]])
    return f"{n} GPU{'s' if n > 1 else ''}" + (f" ({', '.join(items)})" if items else "")


def run_text(config: Config) -> str:
    """What runs, in words: 'training, bf16-mixed, adamw, micro-batch 1 x 4,096 tokens'."""
    optimizer, rank, qlora, batch, length, recompute = (getattr(config, name) if name else None
                                                         for name in RUN_TEXT[config.mode])
    if config.mode == "train":
        lora = TEXTS["lora"].format(rank, TEXTS["qlora"] if qlora else "") if rank else ""
        return TEXTS["train"].format(config.precision, optimizer, lora, batch, f"{length:,}", TEXTS["recompute"][recompute])
    return TEXTS["serve"].format(config.policy.param, batch, f"{length:,}")


def verdict_text(total: int, gpu: tuple[str, str, int], unit: str = "GiB") -> str:
    """'H100 SXM 80GB (79.6 GiB usable): fits with 54.4 GiB headroom', in `unit`."""
    return TEXTS["verdict"].format(gpu[1], format_bytes(gpu[2], unit), Fit(gpu[2], total).verdict(unit))


def both_units(n_bytes: int, unit: str) -> str:
    """'15.0 GiB = 16.1 GB': the chosen unit first, the other beside it (TEXTS['total'])."""
    return TEXTS["total"].format(format_bytes(n_bytes, unit), format_bytes(n_bytes, OTHER_UNIT[unit]))


def arch_text(config: Config) -> str:
    """The active architecture (TEXTS['arch']): parameters (and active ones for MoE), layers, hidden, heads."""
    arch = config.model
    total, active = param_count(arch), active_param_count(arch)
    return TEXTS["arch"].format(f"{total:,}", TEXTS["active"].format(f"{active:,}") if active != total else "",
                                arch.layers, arch.hidden, arch.heads, arch.n_kv_heads)


# How many GPUs share the weights, gradients and optimizer states (builder.model.states.SHARDING), the script
# evaluates the same rules.
SHARD_RULES = RuleSet(symbols={key: rule for key, rule in STATE_SHARDING.items() if key != "exact_shapes"}, parts=())


def shards_text(config: Config) -> str:
    """The shard factor (TEXTS['shards']): the GPUs each model state is split over."""
    env = SHARD_RULES.environment(run_inputs(config.model, config))
    ranks = [int(env[f"{state}_ranks"]) for state in ("param", "grad", "optimizer")]
    text = TEXTS["shards"].format(env["shard_label"], *ranks, "s" if ranks[0] > 1 else "")
    if not env["experts"]:
        return text
    ep, group = int(env["ep"]), int(env["expert_shard_group"])
    experts = [ep * int(env[f"expert_{state}_ranks"]) for state in ("param", "grad", "optimizer")]
    return text + TEXTS["shards_experts"].format(*experts, group, ep, "s" if experts[0] > 1 else "",
                                                 "s" if group > 1 else "")


def basis_text(needed: Need) -> str:
    """What the need is, in words (TEXTS['basis_train'] or TEXTS['basis_serve'])."""
    return TEXTS["basis_train"].format(needed.peak.title) if needed.peak else TEXTS["basis_serve"]


def summary_text(state: dict[str, str], config: Config, breakdown: Breakdown, needed: Need,
                 gpu: tuple[str, str, int], models: dict[str, Architecture]) -> str:
    """The text summary the figure is labelled by: model, inputs, what the run needs per GPU, verdict."""
    unit = state["unit"]
    return TEXTS["summary"].format(model_name(state, models), f"{breakdown.params:,}", run_text(config),
                                   layout_text(state, config), format_bytes(needed.bytes, unit),
                                   format_bytes(needed.bytes, OTHER_UNIT[unit]), basis_text(needed),
                                   format_bytes(breakdown.total, unit), verdict_text(needed.bytes, gpu, unit))


def answer_texts(config: Config, gpu: tuple[str, str, int]) -> tuple[str, str]:
    """The largest micro-batch (batch) and sequence (context) whose need fits on the chosen GPU, in words."""
    batch = max_micro_batch(config, gpu[2])
    seq = max_seq_len(config, gpu[2])
    largest, longest = TEXTS[config.mode + "_answers"]
    return (largest.format(gpu[1], f"{batch:,}" if batch else TEXTS["none"][0]),
            longest.format(gpu[1], TEXTS["tokens"].format(f"{seq:,}") if seq else TEXTS["none"][1]))


def link_state(state: dict[str, str], defaults: dict[str, str]) -> dict[str, str]:
    """What a link to `state` carries (the script's `linked`): the values that differ from the widget's defaults,
    the custom-architecture fields only for a custom model, by key in sorted order."""
    return {key: value for key, value in sorted(state.items())
            if value != defaults.get(key) and (state["model"] == CUSTOM or key not in ARCH_KEYS)}


def _need_bytes(state: dict[str, str], models: dict[str, Architecture]) -> int | None:
    """What the run of `state` needs per GPU, or None when the model refuses it."""
    try:
        return need(config_from_state(state, models)).bytes
    except ValueError:
        return None


def trial_state(state: dict[str, str], fix: dict[str, Any], value: Any) -> dict[str, str]:
    """The form state a candidate of FIXES leads to: its settings, then its key (if it has one) at `value`."""
    trial = {**state, **{setting["control"]: setting["value"] for setting in fix["settings"]}}
    return {**trial, fix["key"]: str(value)} if fix["key"] else trial


def fixes(state: dict[str, str], models: dict[str, Architecture], capacity: int) -> list[tuple[str, dict[str, str]]]:
    """The nearest changes that make the run of `state` fit `capacity` (FIXES, in order, tried by the program
    calculator_fixes.FIXING, at most MAX_FIXES): each as its text and the state it leads to."""
    candidates = FIXES[state["mode"]]

    def need_at(probe: dict[str, Any]) -> int:
        needed = _need_bytes(trial_state(state, candidates[probe["entry"]], probe["value"]), models)
        return REFUSED if needed is None else needed

    found = []
    for kept in FIXING.run(need_at, {"candidates": candidates, "form": typed_values(state, CONTROL_TYPES),
                                     "capacity": capacity}):
        fix, value = candidates[kept["entry"]], int(kept["value"])
        changed = trial_state(state, fix, value)
        gpus = gpu_count(config_from_state(changed, models))
        found.append((fix["text"].format(f"{value:,}" if fix["key"] else "", gpus), changed))
    return found


# Data for the script ----------------------------------------------------------------------

# The inputs each custom-architecture control sets (its own name unless listed): one FFN width serves a dense
# MLP and each expert, as Architecture's expert_ffn defaults to ffn.
ARCH_INPUTS = {"ffn": ("ffn", "expert_ffn")}


def custom_base() -> dict[str, Any]:
    """The shape inputs of a custom architecture that no control sets (Architecture's defaults)."""
    base = shape_inputs(Architecture(name=CUSTOM, layers=1, hidden=1, heads=1, vocab=1, ffn=0))
    for control in ARCH_CONTROLS:
        for name in ARCH_INPUTS.get(control.key, (control.key,)):
            del base[name]
    return base


# The inputs the form has no control for, at Config's defaults (builder.model.inputs.config_inputs), with the dtype
# table; the form sets the rest (calculator_state.RUN_INPUTS) and the architecture its shape.
FIXED_INPUTS = ("fsdp_shard_group", "gpus_per_node", "lora_targets", "qlora_double_quant", "weight_scales",
                "allocator_reserve",
                "overhead_bytes", "cuda_context_bytes", "dtype_bytes", *ASSUMED_NONE)


def script_data(models: dict[str, Architecture], gpus: list[tuple[str, str, int]], shown: list[str],
                defaults: dict[str, str], references: Mapping[str, Reference] | None = None) -> dict[str, Any]:
    """Everything model-specific the script needs, as compact JSON-ready data; the parts' sources come as HTML,
    their citations linked to the References page as the server-side rows link them."""
    custom = custom_base()
    return {
        # Each catalog architecture as the rules read it, but the inputs it has at the custom architecture's values
        # (`custom`, which the script puts back: most models leave most of them at Architecture's defaults), its name
        # and, where its custom-architecture fields are not its own shape inputs (arch_fields), the fields that differ.
        "models": {key: {name: value for name, value in shape_inputs(arch).items()
                         if name not in custom or custom[name] != value}
                   | {"n": html.escape(arch.extra.get("display", key))}
                   | ({"form": arch_fields(arch)} if arch_fields(arch) else {}) for key, arch in models.items()},
        "model": model_data(source_html=html_renderer(references or {})),
        # What each precision policy sets, as the rules read it (the weights' dtype is the form's where it sets one).
        "policies": {name: full_model.policy_inputs(name) for name in PRECISIONS},
        "fixedInputs": {key: json_value(value) if not isinstance(value, dict)
                        else {k: json_value(v) for k, v in value.items()}
                        for key, value in config_inputs(Config()).items() if key in FIXED_INPUTS},
        "gpus": [[key, html.escape(display), size, html.escape(short_gpu_name(display))] for key, display, size in gpus],
        "shown": shown,
        # What the script cannot read from the form's markup, one row per control (control_table).
        "controls": control_table(gpus, models, defaults),
        # The form state -> the run's inputs (builder.widgets.calculator_state), and the custom architecture's
        # inputs that no control sets.
        "form": form_rules.encode(),
        "custom": custom,
        "searches": SEARCHES, "steps": STEPS, "layout": LAYOUT, "runText": RUN_TEXT, "shardKey": KEY["zero"],
        "t": TEXTS | VERDICTS,
        # Every part's reader-facing name (builder.model.partnames): the script shows these, never the keys.
        "names": PART_NAMES,
        # The suggested fixes: the candidates of each mode and the program that tries them (calculator_fixes).
        "fixes": {"candidates": FIXES, **fixes_program()},
        # The shard factor's rules (builder.model.states.SHARDING) and the other unit for each.
        "sharding": SHARD_RULES.encode(), "otherUnit": OTHER_UNIT,
        # The named starting points: the form state each sets (every control but the GPU), as its differences
        # from the defaults.
        "tags": TAGS, "chart": CHART,
        "starts": {key: {k: v for k, v in start_state(key, models, defaults["gpu"]).items()
                         if k != "gpu" and v != defaults[k]} for key, *_ in starts(models)},
        # The words for what a link could not set (builder.widgets.link_notice; what it may set: control_table).
        "link": {"words": link_notice.WORDS},
    }


def control_table(gpus: list[tuple[str, str, int]], models: dict[str, Architecture],
                  defaults: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Per control, what the script cannot read from the form's markup (issue 14, page weight), as one row where it
    has any: a select's values in the form's order (`values`: the page sends only some of its options; the script's
    fillChoices puts the rest back and a link may give any of them), the plain value a control of one mode counts at
    in the other where it is not the control's default (`plain`: effective_state), and the inputs a
    custom-architecture field sets where they are not its own name (`inputs`: ARCH_INPUTS).

    The rest is the form's own markup, which static/widgets/30-calculator.js reads once (`formTable`;
    tests/test_widgets_calculator.py holds it equal to these tables): a control's type by its input (CONTROL_TYPES:
    a number input stepping by 1 a count, by less a number, a box, else a choice), its default by its served value
    (the page is served in the default state), what a link may give it by a number's min, max and step, a box's 0 or
    1 or a radio group's values (link_keys), the mode it counts in by the data-show of the part of the form that
    shows it, when that is one of the Run choices' values (MODE_ONLY), and a custom-architecture field by the
    custom group it sits in (ARCH_CONTROLS)."""
    table: dict[str, dict[str, Any]] = {}
    for _, _, controls in form_groups(gpus, models):
        for control in controls:
            row: dict[str, Any] = {}
            if control.kind == "select":
                row["values"] = [value for value, _ in control.choices]
            if control.key in MODE_ONLY and PLAIN_STATE[control.key] != defaults[control.key]:
                row["plain"] = PLAIN_STATE[control.key]
            if control.key in ARCH_INPUTS:
                row["inputs"] = list(ARCH_INPUTS[control.key])
            if row:
                table[control.key] = row
    return table


def arch_fields(arch: Architecture) -> dict[str, str]:
    """The custom-architecture fields of a catalog architecture (arch_state) that are not what the script reads from
    its shape inputs (the field's first input, ARCH_INPUTS, as text): a mixture of experts with no dense FFN shows
    its experts' width."""
    shape = shape_inputs(arch)
    return {key: value for key, value in arch_state(arch).items()
            if value != str(shape[ARCH_INPUTS.get(key, (key,))[0]])}


def link_keys(gpus: list[tuple[str, str, int]], models: dict[str, Architecture]) -> dict[str, list]:
    """Each control's key with the values a link may give it: a number's range, a choice's values, a box's 0 or 1."""
    return {control.key: (link_notice.fraction(str(control.low), str(control.high))
                          if control.kind == "number" and control.step != "1"
                          else link_notice.whole(control.low, control.high) if control.kind == "number"
                          else link_notice.choice("0", "1") if control.kind == "check"
                          else link_notice.choice(*(value for value, _ in control.choices)))
            for _, _, controls in form_groups(gpus, models) for control in controls}


# The figure the server renders ------------------------------------------------------------

def results(state: dict[str, str], models: dict[str, Architecture], gpus: list[tuple[str, str, int]],
            shown: list[str], defaults: dict[str, str] | None = None) -> dict[str, Any]:
    """Everything the figure shows for one state: parts, texts, chart geometry, the changes that would make it fit,
    each with what its link carries (link_state against the widget's `defaults`, else `state`), or the error."""
    chosen = next(g for g in gpus if g[0] == state["gpu"])
    try:
        config = config_from_state(state, models)
        breakdown, needed = assess(config)
    except ValueError as error:
        return {"error": str(error), "summary": TEXTS["invalid"].format(model_name(state, models), error)}
    total, required, unit = breakdown.total, needed.bytes, state["unit"]
    answers = answer_texts(config, chosen)
    return {
        "error": "",
        "summary": summary_text(state, config, breakdown, needed, chosen, models),
        "parts": [{"name": p.name, "label": reader_name(p.name), "bytes": p.bytes, "size": format_bytes(p.bytes, unit),
                   "rule": p.per_unit, "source": p.source, "bucket": p.bucket} for p in breakdown.parts],
        "unit": unit, "arch": arch_text(config), "shards": shards_text(config),
        "total": total, "total_text": both_units(total, unit),
        "need": required, "need_text": both_units(required, unit),
        "basis": basis_text(needed),
        "host": TEXTS["host"].format(format_bytes(breakdown.host_total, unit)) if breakdown.host_parts else "",
        "fits": [{"id": g[0], "fits": required <= g[2], "text": verdict_text(required, g, unit)} for g in gpus],
        "verdict": verdict_text(required, chosen, unit), "fits_chosen": required <= chosen[2],
        "fixes": [{"text": text, "link": list(link_state(changed, defaults or state).items())}
                  for text, changed in ([] if required <= chosen[2] else fixes(state, models, chosen[2]))],
        "fixes_head": TEXTS["fixes"].format(chosen[1]), "fixes_none": TEXTS["fixes_none"].format(chosen[1]),
        "max_batch": answers[0], "max_seq": answers[1],
        "chart": chart_geometry(breakdown, needed, [g for g in gpus if g[0] in shown or g[0] == chosen[0]], chosen, unit),
    }


def pct(value: float) -> str:
    """A percentage of the chart width for SVG x/width attributes."""
    return f"{value:.2f}%"


# Direct labels under the bar: one per bucket (a run of parts of one kind), on a leader line from near the left end
# of its segments, in as many rows as it takes for no label to overlap another or a leader line, up to TAGS["rows"];
# a bucket that finds no room is named in the parts table only. The bar's width in pixels is unknown at build time, so
# the labels are laid out twice, for the narrowest column of each of the page's two layouts (static/widgets.css
# shows one below 48 rem, the other above), with a text width estimated per character of the 12 px chart text.
TAGS = {"layouts": [["wide", 640], ["narrow", 248]], "char_px": 7.5, "gap_px": 8, "clear_px": 3, "inset_px": 6,
        "rows": 4, "row_px": 16}


def tag_layout(groups: list[tuple[str, int, int]], scale: float, width_px: int) -> list[tuple[float, float, int, str]]:
    """(leader x, label x, row, text) in percent of the chart width for each (text, start, bytes) group that finds
    room. A leader drops from near the left end of its group (TAGS["inset_px"] in, or the middle of a narrower one);
    labels start at their leader (or end at the chart's edge) and are placed from the right, each in the
    highest row where it overlaps no label and no leader line on its way lower, so the leaders of the groups on the
    left run past the labels of those on their right like a staircase; a text already placed is not repeated (the
    script's tagLayout does the same)."""
    gap, clear = 100 * TAGS["gap_px"] / width_px, 100 * TAGS["clear_px"] / width_px
    placed: list[tuple[float, float, int, str]] = []

    def free(left: float, width: float, middle: float, row: int) -> bool:
        for leader, x, r, text in placed:
            right = x + 100 * len(text) * TAGS["char_px"] / width_px
            if r == row and not (right + gap <= left or left + width + gap <= x):
                return False  # overlaps a label in its row
            if r < row and x - clear <= middle <= right + clear:
                return False  # its leader would cross a label above
            if r > row and left - clear <= leader <= left + width + clear:
                return False  # it would sit on a leader going lower
        return True

    inset = 100 * TAGS["inset_px"] / width_px
    middles = [(100 * start / scale + min(50 * size / scale, inset), text) for text, start, size in groups if size > 0]
    for middle, text in sorted(middles, reverse=True):
        width = 100 * len(text) * TAGS["char_px"] / width_px
        left = min(middle, 100 - width)
        row = next((r for r in range(TAGS["rows"]) if free(left, width, middle, r)), None)
        if row is not None and all(text != other for *_, other in placed):
            placed.append((middle, left, row, text))
    return placed


def bucket_runs(parts: list[tuple[str, int]]) -> list[tuple[str, int, int]]:
    """(bucket, start, bytes) for each run of consecutive parts of one bucket, in stacking order."""
    runs: list[list] = []
    offset = 0
    for name, size in parts:
        bucket = name.split("/")[0]
        if runs and runs[-1][0] == bucket:
            runs[-1][2] += size
        else:
            runs.append([bucket, offset, size])
        offset += size
    return [tuple(run) for run in runs]


# The result chart's layout, in px down the chart (x is in percent of its width): one row per capacity line, then the
# bar, the direct labels' rows and the need's label. Python (chart_geometry) and the script (30-calculator.js chart)
# both place every mark from these numbers.
CHART = {
    "margin": 1.15,  # the scale spans the largest of the sum, the need and the GPUs shown, plus 15%
    "line_step": 18, "line_text": 14, "line_rise": 10,  # capacity rows: label baselines, line tops above them
    "bar_gap": 6, "line_drop": 32, "peak_rise": 4,  # the bar below the rows; lines and the peak mark past it
    "tag_top": 28, "tag_drop": 43, "tag_rise": 11,  # direct labels: leader tops, first row's baseline, leader ends
    "label_drop": 44, "height_extra": 50,  # the need's label and the chart's height below the bar's top
    "end_at": 0.5, "dx": 4,  # a text right of the middle ends at its mark; px between a text and its mark
    "shades": 3,  # a bucket's parts cycle through three shades of its colour (charts.css tm-shade-0 to 2)
}


def text_side(fraction: float) -> tuple[str, int]:
    """(text-anchor, dx) of a text at this fraction of the chart's width."""
    return ("end", -CHART["dx"]) if fraction > CHART["end_at"] else ("start", CHART["dx"])


def chart_geometry(breakdown: Breakdown, needed: Need, lines: list[tuple[str, str, int]],
                   chosen: tuple[str, str, int], unit: str = "GiB") -> dict[str, Any]:
    """Bar segments (the parts), the need's mark, capacity lines and overflow past the chosen GPU (from its
    capacity to the need), in percent of the chart width and px down it (CHART; the script does the same)."""
    total, required = breakdown.total, needed.bytes
    scale = max([total, required] + [g[2] for g in lines]) * CHART["margin"]
    segments, offset, shade = [], 0, {}
    for part in breakdown.parts:
        shade[part.bucket] = shade.get(part.bucket, -1) + 1
        segments.append({"x": pct(100 * offset / scale), "w": pct(100 * part.bytes / scale), "bucket": part.bucket,
                         "shade": shade[part.bucket] % CHART["shades"], "title": f"{reader_name(part.name)}: {format_bytes(part.bytes, unit)}"})
        offset += part.bytes
    bar_y = CHART["line_step"] * len(lines) + CHART["bar_gap"]
    rows = [{"x": pct(100 * g[2] / scale), "side": text_side(g[2] / scale),
             "y": CHART["line_text"] + CHART["line_step"] * i,
             "y1": CHART["line_text"] + CHART["line_step"] * i - CHART["line_rise"], "y2": bar_y + CHART["line_drop"],
             "text": f"{short_gpu_name(g[1])}: {format_bytes(g[2], unit)}"} for i, g in enumerate(lines)]
    overflow = None
    if required > chosen[2]:
        overflow = {"x": pct(100 * chosen[2] / scale), "w": pct(100 * (max(total, required) - chosen[2]) / scale)}
    label = (format_bytes(total, unit) if required == total
             else TEXTS["bar_label"].format(format_bytes(required, unit)))
    runs = [(reader_name(bucket), start, size)
            for bucket, start, size in bucket_runs([(part.name, part.bytes) for part in breakdown.parts])]
    tags, depth = [], 0
    for layout, width_px in TAGS["layouts"]:
        for middle, left, row, text in tag_layout(runs, scale, width_px):
            depth = max(depth, row + 1)
            baseline = bar_y + CHART["tag_drop"] + TAGS["row_px"] * row
            tags.append({"layout": layout, "cx": pct(middle), "x": pct(left), "y": baseline,
                         "y2": baseline - CHART["tag_rise"], "text": text})
    below = TAGS["row_px"] * depth
    return {"segments": segments, "lines": rows, "bar_y": bar_y, "height": bar_y + CHART["height_extra"] + below,
            "tags": tags, "tag_top": bar_y + CHART["tag_top"], "below": below,
            "overflow": overflow, "need_x": pct(100 * required / scale) if required != total else "",
            "peak_y1": bar_y - CHART["peak_rise"], "peak_y2": bar_y + CHART["line_drop"],
            "label_x": pct(100 * required / scale), "label_y": bar_y + CHART["label_drop"] + below,
            "label_side": text_side(required / scale), "label_text": label}


def catalog_gpus(catalog: dict[str, Any]) -> list[tuple[str, str, int]]:
    """(id, display, usable bytes) of every catalog GPU, smallest first."""
    return sorted(((key, gpu.display, gpu.usable_bytes) for key, gpu in catalog.items()), key=lambda g: (g[2], g[0]))


def context(options: dict[str, Any], catalogs: dict[str, Any]) -> dict[str, Any]:
    """The widget's default state: form groups, the figure's contents and the script's data."""
    models: dict[str, Architecture] = catalogs["model"]
    gpus = catalog_gpus(catalogs["gpu"])
    shown = list(options.get("gpus") or ["a100-80gb", "h100-80gb"])
    chosen = options.get("gpu") or ("h100-80gb" if "h100-80gb" in catalogs["gpu"] else gpus[-1][0])
    settings = dict(catalogs["preset"][options["preset"]].settings) if options.get("preset") else {}
    if options.get("model"):
        settings["model"] = options["model"]
    defaults = default_state(settings, models, chosen)
    groups = form_groups(gpus, models)
    return {
        "groups": groups,
        "choices": page_choices(groups, defaults, models, gpus),
        "defaults": defaults,
        "result": results(defaults, models, gpus, shown),
        "data": script_data(models, gpus, shown, defaults, catalogs.get("references")),
    }
