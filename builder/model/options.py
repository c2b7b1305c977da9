"""Every input of the memory model, defined once: the option table.

One row per input: its name (the Config field and front-matter key), its type, what it means (the help text),
its command-line flag in the words of the framework it comes from (Megatron-LM's --use-distributed-optimizer,
--recompute-num-layers; DeepSpeed's zero_optimization keys; PyTorch DDP's gradient_as_bucket_view), the
calculator's URL state key where the calculator has a control for it, and which surfaces offer it. The bounds
of every number are builder.model.ranges' (kept there, one table of ranges, which builder.model.checks also
turns into the model's refusals).

From this table come the `estimate` command's flags and their --help (builder.cli.add_model_arguments), the
front-matter conversion (builder.grids.convert_setting), the authoring guide's list of options
(builder.authoring) and the calculator's URL keys (builder.widgets.calculator). There is one reader per type
(`read`): counts through units.parse_count (7b, 7B, 7e9, 7_000_000_000), sizes through units.parse_size (80GiB,
80 GB), fractions as finite numbers in range; a value that cannot be read raises OptionError, which names the
option as the surface knows it (`flag --seq-len`, `front matter seq_len`, `URL state seq_len`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.model.buckets import DEFAULTS as BUCKET_DEFAULTS, MEANINGS as BUCKET_MEANINGS
from builder.model.config import (ACTIVATION_FORMULAS, ATTENTION, CHECKPOINT_SAVES, CUSTOM_SHARDED_LAYERS,
                                  FLOAT8_RECIPES, FSDP_STRATEGIES, IMPLEMENTATIONS, KBIT_PREPARE, LORA_TARGETS, LOSSES,
                                  MODES, OFFLOAD, OPTIMIZER_IMPLS, OPTIMIZERS, PIPELINE_SCHEDULES, PRECISIONS,
                                  RECOMPUTE)
from builder.model.engines import ENGINES
from builder.model.ranges import RANGE_OF, Range
from builder.model.serving import KV_CACHE_DTYPES, KV_CACHE_PER_TOKEN_HEAD, MODEL_DTYPES, QUANTIZATION_DTYPES
from builder.model.units import DTYPE_BYTES, clip, parse_count, parse_size
from builder.model.zero3 import DEFAULTS as ZERO3_DEFAULTS, MEANINGS as ZERO3_MEANINGS

# The types an option may have, each with one reader (`read`) and the words the authoring guide shows.
TYPES = {
    "model": "a model id",
    "count": "a whole number (4096, 4K, 7B, 7e9 or 7_000_000_000)",
    "size": "a size with its unit (1.5GiB, 300MiB, 2GB, 512B), or 0; a bare number is refused",
    "fraction": "a number, or a percentage (5%)",
    "choice": "one of the names listed",
    "stage": "one of the numbers listed",
    "dtype": "a dtype",
    "flag": "true or false",
    "names": "a list of names",
    "text": "text",
    "path": "a file's path",
    "overhead": "a percentage of the rest (10%) or a size with its unit (1.5GiB); a bare number is refused",
}
# Surfaces: the command line, a chart bar / preset / exercise in front matter, the calculator's URL state.
CLI, FRONT_MATTER, URL = "cli", "front matter", "url"
# The command line's groups, in --help order (the engines' groups and the output's follow: builder.cli).
GROUPS = ("model (one of)", "what runs", "dtype overrides", "parallelism and sharding",
          "DeepSpeed ZeRO-3 (zero_optimization's keys, in parameter elements; with --zero 3)",
          "DeepSpeed ZeRO gradient buckets (zero_optimization's keys; with --zero 1 to 3)", "fine-tuning", "serving",
          "overheads (named assumptions)")
GROUP_OF_WORD = {word: group for word, group in zip(
    ("model", "run", "dtypes", "parallel", "zero3", "buckets", "tune", "serve", "overheads"), GROUPS)}
# The runs that read an option (Option.runs): a training step, the plain serving estimate, and each inference engine's
# start-up accounting (--engine, builder.model.engines), which counts its own overheads. An option given for a run
# that does not read it is refused (`unread`), never silently ignored.
TRAIN, SERVE = "train", "serve"
RUNS = (TRAIN, SERVE, *ENGINES)
SERVING_RUNS = (SERVE, *ENGINES)
MODEL_RUNS = (TRAIN, SERVE)


class OptionError(ValueError):
    """A value that an option does not accept, on one surface: the message names the option as that surface
    spells it ("flag `--seq-len`", "front matter `seq_len`", "URL state `seq_len`") and what it accepts."""

    def __init__(self, option: "Option", surface: str, message: str):
        self.option, self.surface, self.reason = option, surface, clip(message)
        super().__init__(f"{option.spelled(surface)}: {self.reason}")


@dataclass(frozen=True)
class Option:
    """One input of the model."""

    name: str  # the Config field (the front-matter key); for a command-line-only input, its argparse dest
    type: str  # one of TYPES
    help: str = ""  # what it means (--help and the authoring guide)
    group: str = ""  # the command line's group (GROUP_OF_WORD's word); "" with no flag
    flag: str | None = None  # the command-line flag, in its framework's words; None: not on the command line
    choices: tuple = ()  # the accepted values of a choice, stage or dtype
    default: Any = None  # the command line's default (Config's own for front matter)
    metavar: str | None = None  # --help's placeholder
    # The calculator's URL state key, full words (the option's name or its flag's): kept stable; a key renamed since
    # a release stays readable through the calculator's renames table (builder.widgets.calculator.RENAMED).
    url: str | None = None
    source: str = ""  # the references.toml key of the framework whose flag or key it is
    surfaces: tuple[str, ...] = (CLI, FRONT_MATTER)
    optional: bool = False  # None (unset) is a value
    negatable: bool = False  # a flag with a --no- form (argparse.BooleanOptionalAction)
    dest: str | None = None  # the argparse dest where it differs from the flag's
    # The same option under the names other frameworks give it (vLLM's --tensor-parallel-size and -tp, SGLang's
    # --tp-size): the command line accepts each, for the same value and meaning.
    aliases: tuple[str, ...] = ()
    runs: tuple[str, ...] = RUNS  # the runs that read it (RUNS' names); given for another run, it is refused

    @property
    def range(self) -> Range | None:
        """Its bounds (builder.model.ranges), for counts, sizes and fractions."""
        return RANGE_OF.get(self.name)

    def spelled(self, surface: str) -> str:
        """The option as a surface names it in messages."""
        if surface == CLI:
            return f"flag `{self.flag}`"
        if surface == URL:
            return f"URL state `{self.url or self.name}`"
        return f"{surface} `{self.name}`"

    def read(self, value: Any, surface: str = FRONT_MATTER) -> Any:
        """The value as the model takes it (raises OptionError naming the option on `surface`). Text from the
        command line or a URL reads as the same type as a YAML value does."""
        if value is None and self.optional:
            return None
        try:
            return READERS[self.type](self, value, surface)
        except (ValueError, OverflowError) as error:
            raise OptionError(self, surface, str(error)) from None


def _bounds(option: Option) -> tuple[int, int]:
    bounds = option.range
    return (0, 10**15) if bounds is None else (bounds.low, int(bounds.high))


def _count(option: Option, value: Any, surface: str) -> int:
    return parse_count(value, *_bounds(option))


def _size(option: Option, value: Any, surface: str) -> int:
    """A size with its unit, on every surface ('500MiB', '1.5GiB', '80GB', '512B'); 0 alone may go without one. A
    bare number is refused: 500 could be bytes or MiB, 80 GiB or GB (units.parse_size)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"must be a size with its unit such as 500MiB or 1.5GiB, got {value!r}")
    size = parse_size(value if isinstance(value, str) else repr(value))
    low, high = _bounds(option)
    if not low <= size <= high:
        raise ValueError(f"must be between {low:,} and {high:,} bytes, got {clip(repr(value))}")
    return size


def _fraction(option: Option, value: Any, surface: str) -> float:
    """A number, or on the command line and in front matter a percentage ('5%' is 0.05). A URL carries the number the
    calculator's control writes."""
    shown = value
    if isinstance(value, str) and len(value) < 64:
        text = value.strip()
        percent = text.endswith("%") and surface != URL
        try:
            if percent or surface != FRONT_MATTER:
                value = float(text[:-1] if percent else text) / (100 if percent else 1)
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"must be a number or a percentage such as 5%, got "
                         f"{value if not isinstance(value, str) else clip(repr(value))}")
    if not math.isfinite(value):
        raise ValueError(f"must be a finite number, got {value}")
    bounds = option.range
    if surface != FRONT_MATTER and bounds is not None and not bounds.low <= value <= bounds.high:
        raise ValueError(f"must be a number between {bounds.text(bounds.low)} and {bounds.text(bounds.high)} (or a "
                         f"percentage, {bounds.low * 100:g}% to {bounds.high * 100:g}%), got {clip(str(shown))}")
    return float(value)


def _choice(option: Option, value: Any, surface: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"must be text, got {value!r}")
    if option.choices and value not in option.choices and surface != FRONT_MATTER:  # front matter: validate_config's
        raise ValueError(f"{clip(repr(value))} is not one of {', '.join(map(str, option.choices))}")
    return value


def _stage(option: Option, value: Any, surface: str) -> int:
    stage = parse_count(value, low=0)
    if stage not in option.choices and surface != FRONT_MATTER:  # front matter: validate_config's words
        raise ValueError(f"must be {', '.join(map(str, option.choices[:-1]))} or {option.choices[-1]}, got {value!r}")
    return stage


def _flag(option: Option, value: Any, surface: str) -> bool:
    if surface == URL and value in ("0", "1"):
        return value == "1"
    if not isinstance(value, bool):
        raise ValueError(f"must be true or false, got {value!r}")
    return value


def _names(option: Option, value: Any, surface: str) -> tuple[str, ...]:
    if isinstance(value, str) and surface != FRONT_MATTER:
        names = [name.strip() for name in value.split(",") if name.strip()]
        if not names:
            raise ValueError(f"give a comma list of {', '.join(option.choices)}, got {clip(repr(value))}")
        value = names
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"must be a list of names, got {value!r}")
    return tuple(value)


def _text(option: Option, value: Any, surface: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"must be text, got {value!r}")
    return value


def _path(option: Option, value: Any, surface: str) -> Path:
    return Path(_text(option, value, surface))


def _overhead(option: Option, value: Any, surface: str) -> tuple[str, float]:
    """'10%' (a percentage of the rest, read as overhead_fraction 0.1) or a size with its unit such as '1.5GiB'. A
    bare number is refused: 10 could be 10 % (what the calculator's overhead field, which is in percent, reads) or
    10 bytes (what a size without a unit is elsewhere), and 0.1 a fraction."""
    text = _text(option, value, surface).strip()
    try:
        float(text)
    except ValueError:
        pass
    else:
        raise ValueError(f"{clip(repr(text))} has no unit: give a percentage of the rest ('10%') or a size "
                         "('1.5GiB', '300MiB')")
    if text.endswith("%"):
        bounds = RANGE_OF["overhead_fraction"]
        try:
            fraction = float(text[:-1]) / 100
        except ValueError:
            raise ValueError(f"{clip(repr(text))} is not a percentage") from None
        if not (math.isfinite(fraction) and bounds.low <= fraction <= bounds.high):
            raise ValueError(f"must be a percentage between {bounds.low * 100:g}% and {bounds.high * 100:g}%, "
                             f"got {clip(repr(text))}")
        return "fraction", fraction
    return "bytes", float(parse_size(text))


# One reader per type. "model" is resolved against the catalog by the surface (builder.grids, builder.cli); the
# dtype and choice names are checked again, with the combinations, by validate_config.
READERS = {"count": _count, "size": _size, "fraction": _fraction, "choice": _choice, "dtype": _text, "stage": _stage,
           "flag": _flag, "names": _names, "text": _text, "model": _text, "path": _path, "overhead": _overhead}


def _o(name: str, type_: str, help_: str = "", group: str = "", flag: str | None = "", **rest: Any) -> Option:
    """A row: the flag defaults to the name in the command line's words (--seq-len); flag=None: none."""
    if flag == "":
        flag = "--" + name.replace("_", "-")
    return Option(name, type_, help_, GROUP_OF_WORD.get(group, ""), flag, **rest)


_DTYPES = tuple(DTYPE_BYTES)
_FRONT = (FRONT_MATTER,)
_CLI = (CLI,)
_TRAIN = (TRAIN,)

# Where a dtype override means more than its name: Megatron-LM's grad buffer is the gradients, in the dtype it reduces
# them in (builder.model.gradbuffers), which FSDP's and DeepSpeed ZeRO-3's reduce_dtype is not.
_DTYPE_HELP = {
    "grad_dtype": "the gradients' dtype; under Megatron-LM its grad buffer's, which it reduces the gradients in (bf16 "
                  "is Megatron's --grad-reduce-in-bf16, and its optimizer step then makes an fp32 copy)",
    "reduce_dtype": "the dtype FSDP reduce-scatters the gradients in (MixedPrecisionPolicy.reduce_dtype; a strategy "
                    "that shards them, over dp x cp above 1) or DeepSpeed's ZeRO-3 reduces them in "
                    "(communication_data_type); refused elsewhere, where nothing counted reads it: Megatron-LM reduces "
                    "in its grad buffer's dtype, which grad_dtype sets, PyTorch DDP in the gradients' own, and "
                    "DeepSpeed's stages 1 and 2 keep their buckets in the parameters' dtype",
}

OPTIONS: tuple[Option, ...] = (
    # What is modelled: a catalog model, a raw count, or a Hugging Face config.json (the command line only).
    _o("model", "model", "catalog id (see `python -m builder models`)", "model", metavar="NAME", url="model",
       optional=True),
    _o("params", "count", "raw parameter count, e.g. 7e9 or 7B", "model", metavar="N", optional=True),
    _o("config", "path", "a Hugging Face config.json on disk", "model", metavar="PATH", surfaces=_CLI),
    # What runs.
    _o("mode", "choice", "", "run", choices=MODES, default="train", url="mode"),
    _o("precision", "choice", f"training: {', '.join(PRECISIONS)} (default bf16-mixed); "
       f"serving: a weight dtype ({', '.join(DTYPE_BYTES)}), default bf16", "run", metavar="POLICY", url="precision",
       choices=tuple(PRECISIONS)),
    _o("optimizer", "choice", "paged-adamw and paged-adamw8bit are bitsandbytes' PagedAdamW and PagedAdamW8bit "
       "(Hugging Face's paged_adamw_32bit and paged_adamw_8bit)", "run", choices=OPTIMIZERS, default="adamw",
       url="optimizer", runs=_TRAIN),
    _o("optimizer_impl", "choice", "how the step runs (torch.optim's words): for-loop, foreach, fused, or in-backward "
       "(stepped from each gradient's hook, gradients freed at once); default: what the framework builds (fused "
       "Adam under Megatron-LM and DeepSpeed's ZeRO), else the optimizer's own (foreach for torch.optim's Adam, "
       "AdamW and SGD on CUDA, for-loop for Adafactor and Lion, fused for 8-bit AdamW)", "run",
       choices=OPTIMIZER_IMPLS, optional=True, url="optimizer_impl", source="pytorch-2-13", runs=_TRAIN),
    _o("micro_batch", "count", "", "run", default=1, metavar="B", url="micro_batch", runs=_TRAIN),
    _o("seq_len", "count", "", "run", default=2048, metavar="S", url="seq_len", runs=_TRAIN),
    _o("grad_accum", "count", "micro-batches per optimizer step (pipeline: micro-batches in flight)", "run",
       default=1, metavar="M", url="grad_accum", runs=_TRAIN),
    _o("recompute", "choice", "selective: Megatron-LM's (the attention core); full: every layer keeps only its input "
       "(Megatron-LM full, Hugging Face gradient_checkpointing, DeepSpeed activation checkpointing, torchtitan full AC); "
       "selective-op: torchtitan's per-op selective activation checkpointing (SelectiveAC; activation_checkpoint.mode "
       "selective with selective_ac_option op in older releases): every layer keeps its input and the outputs of its "
       "1st, 3rd, 5th and 7th matmul and of the attention kernel (dense Llama-style models)",
       "run", choices=RECOMPUTE, default="none", url="recompute", runs=_TRAIN),
    _o("recompute_layers", "count", "with --recompute full: only the first K layers of each pipeline stage "
       "(Megatron-LM --recompute-method block --recompute-num-layers K); 0 = every layer", "run",
       flag="--recompute-num-layers", default=0, metavar="K", url="recompute_layers", source="megatron-d98e8a6",
       runs=_TRAIN),
    _o("attention", "choice", "", "run", choices=ATTENTION, default="sdpa", url="attention", runs=(TRAIN, "hf")),
    _o("padded", "flag", "the micro-batch carries padding marked by an attention mask (TRL's SFTTrainer and HF's "
       "Trainer collators without packing or padding_free, sequences of different lengths), or packed sequences whose "
       "position ids restart: with sdpa attention transformers then passes a 4-D mask, copies K and V to every query "
       "head, and each layer's attention kernel saves the mask in the activation dtype (eager attention counts its "
       "mask already; transformers' flash_attention_2 unpads instead)", "run", default=False, url="padded",
       source="transformers-5-23", runs=_TRAIN),
    _o("loss", "choice", "how the loss is computed: eager (transformers), compiled (torch.compile), chunked "
       "(torchtune, 8 chunks), chunked-compiled (torchtune's chunks, each chunk's upcast and cross-entropy compiled, "
       "as its compile=True does) or fused-linear (Liger Kernel: no logits)", "run", choices=LOSSES, default="eager",
       url="loss", runs=_TRAIN),
    _o("activation_formula", "choice", "'ops': op by op; 'korthikanti': Table 2 of Korthikanti et al. 2022 "
       "(reference)", "run", choices=ACTIVATION_FORMULAS, default="ops", url="implementation", runs=_TRAIN),
    _o("implementation", "choice", "whose op list 'ops' follows: hf (transformers), megatron, or torchtune "
       "(transformers' list, K and V copied to every query head; LoRA adapters in the model's dtype, as torchtune builds "
       "them, where hf has PEFT's fp32 ones; one dtype for everything, precision bf16 or fp32); megatron also names "
       "Megatron-LM's data parallelism (its gradient buffer, kept for the run; zero 1 is its distributed optimizer) for "
       "a precision PyTorch shares, as a Megatron precision does by itself", "run", choices=IMPLEMENTATIONS,
       default="hf", url="implementation", runs=_TRAIN),
    _o("dropout", "flag", "dropout layers active (1-byte masks saved)", "run", default=False, url="dropout",
       runs=_TRAIN),
    _o("offload_activations", "flag", "saved activations go to pinned host memory in the forward and come back in "
       "the backward (torchtune's enable_activation_offloading): one layer's stay on the GPU at a time", "run",
       default=False, url="offload_activations", runs=_TRAIN),
    _o("checkpoint_save", "choice", "how a checkpoint is saved after the optimizer step, a moment of the step of its "
       "own: torch-save (torch.save of the state dicts), FSDP's full-state-dict (FULL_STATE_DICT), "
       "full-state-dict-offload (offload_to_cpu, rank0_only), sharded-state-dict (SHARDED_STATE_DICT), dcp "
       "(torch.distributed.checkpoint of FSDP2's shards), deepspeed (save_checkpoint), deepspeed-16bit "
       "(stage3_gather_16bit_weights_on_model_save); none: no save", "run", choices=CHECKPOINT_SAVES, default="none",
       url="checkpoint_save", runs=_TRAIN),
    _o("compile", "flag", "every transformer layer under torch.compile (inductor): what its partitioner saves for "
       "backward, measured on CPU; the loss is compiled only with --loss compiled or chunked-compiled", "run", default=False,
       url="compile", runs=_TRAIN),
    # torchao's float8 training (builder.model.float8), in torchtitan's and torchao's words.
    _o("float8", "choice", "torchao's float8 training of the linear layers, by its recipe: tensorwise, rowwise or "
       "rowwise_with_gw_hp (torchtitan's --model.converters float8 with --float8.recipe_name; torchtune's "
       "enable_fp8_training with fp8_recipe_name). Every Linear whose sizes divide by 16 becomes a Float8Linear: it "
       "saves its bf16 input as before and casts its operands to float8 for an instant in its forward and backward; "
       "modelled eager, without torch.compile (which fuses the casts)", "run", choices=FLOAT8_RECIPES, optional=True,
       metavar="RECIPE", url="float8", source="torchao-float8-36027d8", runs=_TRAIN),
    _o("float8_filter_output", "flag", "with --float8: leave the output layer a bf16 nn.Linear (torchtitan's "
       "--float8.filter_fqns output, lm_head at b5bcd76, as its Llama 3 configurations of 2025 set it; torchtune "
       "always does); torchtitan's converter converts it otherwise",
       "run", default=False, url="float8_filter_output", source="torchtitan-float8-b5bcd76", runs=_TRAIN),
    # The precision policy's states one by one (each None: the policy's own).
    *(_o(name, "dtype", _DTYPE_HELP.get(name, ""), "dtypes", choices=_DTYPES + (("none",) if name == "master_dtype" else ()),
         optional=True, url=name if name in ("param_dtype", "reduce_dtype", "grad_accum_dtype",
                                             "optimizer_state_dtype", "exp_avg_dtype", "exp_avg_sq_dtype") else None,
         runs=RUNS if name in ("param_dtype", "activation_dtype") else _TRAIN)
      for name in ("param_dtype", "master_dtype", "grad_dtype", "grad_accum_dtype", "reduce_dtype",
                   "optimizer_state_dtype", "exp_avg_dtype", "exp_avg_sq_dtype", "activation_dtype")),
    # Parallelism and sharding.
    _o("dp", "count", "data-parallel ranks (serving: model replicas, except an MoE model's routed experts, which vLLM "
       "spreads over tp x dp ranks; vLLM's --data-parallel-size or -dp, SGLang's --dp-size)", "parallel", default=1,
       url="dp", aliases=("--data-parallel-size", "-dp", "--dp-size")),
    _o("zero", "stage", "ZeRO stage: DeepSpeed's; in a Megatron-LM run (a Megatron precision or --implementation "
       "megatron) stage 1 only, Megatron's distributed optimizer", "parallel", choices=(0, 1, 2, 3), default=0,
       url="sharding",
       source="rajbhandari2019", runs=_TRAIN),
    _o("use_distributed_optimizer", "flag", "Megatron-LM's flag: shard the fp32 main parameters and optimizer states "
       "over the data-parallel ranks, with a Megatron precision or --implementation megatron (the same as --zero 1 "
       "there)", "parallel", default=False,
       surfaces=_CLI, source="megatron-d98e8a6", runs=_TRAIN),
    _o("fsdp", "choice", "FSDP strategy (instead of --zero)", "parallel", choices=FSDP_STRATEGIES, optional=True,
       url="sharding", runs=_TRAIN),
    _o("gradient_as_bucket_view", "flag", "PyTorch DDP's gradient_as_bucket_view=True: each .grad is a view of DDP's "
       "gradient buckets (one copy of the gradients, kept for the run) instead of a separate tensor beside them; a "
       "DDP run only (--dp above 1, no --zero or --fsdp)", "parallel", default=False, url="gradient_as_bucket_view",
       source="pytorch-2-13", runs=_TRAIN),
    _o("enable_fsdp_float8_all_gather", "flag", "with --float8 tensorwise and --fsdp: FSDP gathers the converted "
       "weights in float8, 1 byte a parameter instead of 2 (torchao's Float8LinearConfig field; torchtitan's "
       "--float8.enable_fsdp_float8_all_gather; precompute_float8_dynamic_scale_for_fsdp changes when the scales are "
       "computed, not the bytes)", "parallel", default=False, url="enable_fsdp_float8_all_gather",
       source="torchao-float8-36027d8", runs=_TRAIN),
    _o("fsdp_shard_group", "count", "HYBRID_SHARD group size", "parallel", optional=True, runs=_TRAIN),
    _o("custom_sharded_layers", "names", f"with --fsdp: comma list of {', '.join(CUSTOM_SHARDED_LAYERS)}, the "
       "modules FSDP wraps as units of their own before the blocks and the root (torchtune's custom_sharded_layers; "
       "torchtitan and accelerate wrap both); with --implementation torchtune as torchtune does, the output layer "
       "alone and freed after its forward, otherwise as torchtitan does, the final norm with the output layer and "
       "kept gathered from its forward to its backward; default none: the embeddings, final norm and output layer "
       "stay in the root unit, gathered through the whole step", "parallel", default=(),
       choices=CUSTOM_SHARDED_LAYERS, metavar="NAMES", url="custom_sharded_layers", source="torchtune-shard-model",
       runs=_TRAIN),
    _o("tp", "count", "tensor-parallel ranks (vLLM's --tensor-parallel-size or -tp, SGLang's --tp-size)", "parallel",
       default=1, url="tp", aliases=("--tensor-parallel-size", "-tp", "--tp-size")),
    _o("sequence_parallel", "flag", "Megatron sequence parallelism (with --tp)", "parallel", default=False,
       url="sequence_parallel", runs=_TRAIN),
    _o("pp", "count", "pipeline stages (vLLM's --pipeline-parallel-size or -pp, SGLang's --pp-size)", "parallel",
       default=1, url="pp", aliases=("--pipeline-parallel-size", "-pp", "--pp-size")),
    _o("pp_schedule", "choice", "", "parallel", choices=PIPELINE_SCHEDULES, default="1f1b", runs=_TRAIN),
    _o("pp_virtual_stages", "count", "interleaved: chunks per stage", "parallel", flag="--virtual-stages", default=1,
       url="virtual_stages", dest="virtual_stages", runs=_TRAIN),
    _o("cp", "count", "context-parallel ranks", "parallel", default=1, url="cp", runs=_TRAIN),
    _o("ep", "count", "expert-parallel ranks (MoE)", "parallel", default=1, url="ep"),
    _o("offload", "choice", "CPU offload", "parallel", choices=OFFLOAD, default="none", url="offload", runs=_TRAIN),
    _o("gpus_per_node", "count", "", "parallel", default=8, runs=_TRAIN),
    # DeepSpeed ZeRO-3's parameter coordinator and ZeRO's gradient buckets: zero_optimization's own keys.
    *(_o(name, "count", f"{ZERO3_MEANINGS[name]} (DeepSpeed's default {default:.0e})", "zero3", metavar="N",
         optional=True, url=name, source="deepspeed-zero3-coordinator", runs=_TRAIN)
      for name, default in ZERO3_DEFAULTS.items()),
    *(_o(name, "count", f"{BUCKET_MEANINGS[name]} (DeepSpeed's default {default:.0e})", "buckets", metavar="N",
         optional=True, url=name, source="deepspeed-buckets", runs=_TRAIN)
      for name, default in BUCKET_DEFAULTS.items()),
    _o("overlap_comm", "flag", f"{BUCKET_MEANINGS['overlap_comm']} (DeepSpeed's default: on with --zero 3, off below)",
       "buckets", optional=True, negatable=True, url="overlap_comm", source="deepspeed-buckets", runs=_TRAIN),
    _o("contiguous_gradients", "flag", f"{BUCKET_MEANINGS['contiguous_gradients']} (DeepSpeed's default: on)",
       "buckets", default=True, negatable=True, url="contiguous_gradients", source="deepspeed-buckets", runs=_TRAIN),
    _o("shaped_like", "model", "with --params: the catalog model whose shape the count is assumed to have, for "
       "ZeRO-3's largest layer (default: the catalog model nearest in size)", "zero3", metavar="NAME", optional=True),
    # Fine-tuning.
    _o("lora_rank", "count", "", "tune", default=0, metavar="R", url="lora_rank", runs=_TRAIN),
    _o("lora_targets", "names", f"comma list of {', '.join(LORA_TARGETS)}; default q,k,v,o: the four attention "
       "projections, unlike PEFT's own default for Llama, Qwen and Gemma models, q_proj and v_proj "
       "(TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING, PEFT 0.21.2); give q,v for PEFT's; lm_head is the output "
       "layer (PEFT's target name, torchtune's apply_lora_to_output)", "tune",
       default="q,k,v,o", choices=LORA_TARGETS, runs=_TRAIN, source="peft-lora"),
    _o("lora_dropout", "fraction", "PEFT's or torchtune's lora_dropout: p > 0 saves each adapter's dropout mask and "
       "output (needs --lora-rank)", "tune", default=0.0, metavar="P", url="lora_dropout", source="peft-lora",
       runs=_TRAIN),
    _o("qlora", "flag", "4-bit NF4 base weights (needs --lora-rank)", "tune", default=False, url="qlora", runs=_TRAIN),
    _o("kbit_prepare", "choice", "with --qlora, what is done to the weights bitsandbytes leaves unquantised "
       "(embeddings, norms, output layer): none keeps them 16-bit (get_peft_model alone; TRL's SFTTrainer from "
       "v0.26); prepare is PEFT's prepare_model_for_kbit_training, which casts them all to fp32; prepare-bf16 casts "
       "the embeddings and output layer back to bf16 after it, norms left fp32 (the QLoRA repository's qlora.py "
       "--bf16; TRL's SFTTrainer up to v0.25 with bf16)", "tune", choices=KBIT_PREPARE, default="none",
       url="kbit_prepare", source="peft-kbit", runs=_TRAIN),
    _o("qlora_double_quant", "flag", "QLoRA double quantisation of the quantisation constants", flag=None,
       surfaces=_FRONT, runs=_TRAIN),
    # Serving.
    _o("batch", "count", "concurrent sequences", "serve", default=1, url="batch", runs=(SERVE, "hf")),
    _o("context", "count", "tokens per sequence in the KV cache", "serve", default=4096, url="context",
       runs=SERVING_RUNS),
    _o("kv_dtype", "dtype", "", "serve", choices=_DTYPES, optional=True, url="kv_dtype", runs=SERVING_RUNS),
    _o("weight_scales", "choice", "the scales of fp8 weights quantised at load (vLLM's --quantization "
       "fp8_per_block: an fp32 scale per 128 x 128 block; fp8_per_channel: one per output row); left out, one per "
       "tensor", "serve", flag=None, choices=("block", "channel"), optional=True, surfaces=_FRONT,
       source="vllm-0.33.0", runs=SERVING_RUNS),
    _o("kv_cache_dtype", "text", "the KV cache's dtype in the engines' own words (vLLM and SGLang --kv-cache-dtype: "
       f"{', '.join(KV_CACHE_DTYPES)}; vLLM's {', '.join(KV_CACHE_PER_TOKEN_HEAD)} with --engine vllm); instead of "
       "--kv-dtype", "serve", metavar="DTYPE", surfaces=_CLI, source="vllm-6adad08", runs=SERVING_RUNS),
    _o("quantization", "text", "the weights' quantisation in the engines' own words (vLLM and SGLang --quantization, "
       f"vLLM's -q: {', '.join(QUANTIZATION_DTYPES)}: 4-bit AWQ and GPTQ, fp8 at load (one scale a tensor; vLLM 0.31 "
       "and later load fp8 as fp8_per_tensor), vLLM's fp8_per_block (an fp32 scale per 128 x 128 block) and "
       "fp8_per_channel (one per output row), from vLLM 0.20 and 0.24 and with --engine vllm or none; an 8-bit GPTQ "
       "checkpoint takes --param-dtype int8; mxfp4, gpt-oss's own MXFP4 experts); instead of --param-dtype. A checkpoint published "
       "quantised (DeepSeek-V3's fp8, gpt-oss's mxfp4) is served in its own format without it, as the engines read "
       "it from config.json, and another method is refused as they refuse it; --param-dtype or --precision still "
       "name another weight dtype", "serve",
       metavar="METHOD", surfaces=_CLI, source="vllm-6adad08", runs=SERVING_RUNS, aliases=("-q",)),
    _o("dtype", "text", "the weights' and activations' dtype in the engines' own words (vLLM and SGLang --dtype: "
       f"{', '.join(MODEL_DTYPES)}); instead of --precision", "serve", metavar="DTYPE", surfaces=_CLI,
       source="vllm-6adad08", runs=SERVING_RUNS),
    # Overheads (named assumptions).
    _o("overhead", "overhead", "framework overhead: a percentage of the rest ('10%', as the calculator's overhead "
       "field reads its number) or a size with its unit ('1.5GiB'); a bare number is refused", "overheads", metavar="X",
       surfaces=_CLI, runs=MODEL_RUNS),
    _o("overhead_fraction", "fraction", "framework overhead, a fraction of the rest (the command line's --overhead "
       "10%)", flag=None, url="overhead", surfaces=_FRONT, runs=MODEL_RUNS),
    _o("overhead_bytes", "size", "a fixed overhead (the command line's --overhead 1.5GiB)", flag=None,
       surfaces=_FRONT, runs=MODEL_RUNS),
    _o("cuda_context_bytes", "size", "CUDA context size to add, with its unit, e.g. 500MiB (default: none)",
       "overheads",
       flag="--cuda-context", default=0, metavar="SIZE", dest="cuda_context", runs=(TRAIN, SERVE, "sglang", "hf")),
    _o("allocator_reserve", "fraction", "caching-allocator reserve as a fraction of allocated, 0 to 1 (0.05 or 5%)",
       "overheads", default=0.0, metavar="FRACTION", runs=MODEL_RUNS),
)

OPTION_OF: dict[str, Option] = {option.name: option for option in OPTIONS}
# The options a chart bar, preset or exercise may set in front matter: Config's fields, by name.
FRONT_MATTER_OPTIONS: dict[str, Option] = {o.name: o for o in OPTIONS if FRONT_MATTER in o.surfaces}
# The command-line flag of each option that has one (builder.cli names the flag in its errors).
FLAG_OF: dict[str, str] = {o.name: o.flag for o in OPTIONS if o.flag}
FLAG_OF.update(overhead_fraction="--overhead", overhead_bytes="--overhead")


def run_of(mode: str, engine: str | None = None) -> str:
    """The run a mode (and, when serving, an engine) makes: one of RUNS."""
    return engine if mode == SERVE and engine else mode


def unread(names: Any, mode: str, engine: str | None = None, surface: str = FRONT_MATTER) -> OptionError | None:
    """The error for the first option among `names` (the ones the user gave) that the run does not read, naming the
    option and the mode (or engine) as `surface` spells them; None when the run reads them all."""
    run, dash = run_of(mode, engine), "--" if surface == CLI else ""
    for name in names:
        option = OPTION_OF.get(name)
        if option is None or run in option.runs:
            continue
        if run in ENGINES and SERVE in option.runs:
            return OptionError(option, surface, f"{dash}engine {run} does not read it (the engine's accounting has "
                                                "its own flags and overheads); leave it out")
        engines = [r for r in option.runs if r in ENGINES]
        kind = "a training option" if TRAIN in option.runs else "a serving option"
        also = (f" (in serving, of {dash}engine {' and '.join(engines)} only)" if TRAIN in option.runs and engines
                else "")
        chosen = f"{dash}mode {mode}" + (f" with {dash}engine {run}" if run in ENGINES else "")
        return OptionError(option, surface, f"{kind}{also}, which {chosen} does not read; leave it out")
    return None


def option_named(name: str, surface: str = FRONT_MATTER) -> Option:
    """The option a surface calls `name` (raises OptionError-like ValueError listing the known names)."""
    known = FRONT_MATTER_OPTIONS if surface == FRONT_MATTER else OPTION_OF
    if name not in known:
        raise ValueError(f"unknown config option {name!r} (known: {', '.join(known)})")
    return known[name]
