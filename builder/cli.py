"""Command line: `python -m builder estimate|models|gpus|build|serve|new|authoring-guide|release|handout|validate`.

Bad flags or values print one line naming the flag and exit with status 2.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import signal
import sys
from typing import Any, Mapping, Sequence

from builder.sources import default_references, source_text
from builder.catalog import CatalogError, Gpu, default_gpus, default_models, load_hf_config
from builder.cli_engine import (BooleanOptionalGiven, StoreGiven, StoreTrueGiven, add_engine_arguments,
                                 engine_flags_given, question_of, refusal_of, run_engine, run_question)
from builder.model.engine_questions import QUESTIONS as ENGINE_QUESTIONS
from builder.model.peak import Need, assess, unmodelled
from builder.model import Config
from builder.model.architecture import active_param_count, param_count
from builder.model.config import MEGATRON_PRECISIONS, OPTION_NAMES as CONFIG_FIELDS, PRECISIONS
from builder.model.options import CLI, FLAG_OF, GROUPS, OPTIONS, Option, OptionError, unread
from builder.model.engine_sglang import KV_TORCH_DTYPES as TORCH_DTYPES
from builder.model.serving import (CHECKPOINT_MISMATCH, CHECKPOINT_QUANTIZATIONS, KV_CACHE_DTYPES,
                                   KV_CACHE_PER_TOKEN_HEAD, KV_CACHE_UNMODELLED, MODEL_DTYPES, QUANTIZATION_ACT_DTYPES,
                                   ONLINE_FP8_FROM, ONLINE_FP8_SCALES, QUANTIZATION_CHECKPOINT, QUANTIZATION_DTYPES,
                                   QUANTIZATION_UNMODELLED)
from builder.model.engines import DEFAULT_RELEASE, ENGINES, NEWEST, release_code, release_words
from builder.model.questions import Fit, max_micro_batch, max_seq_len, min_gpus
from builder.model.units import DTYPE_BYTES, GB, GiB, clip, format_bytes, parse_count, parse_size
from builder.model.assumed import assumed_shape

# Training and plain serving (micro-batch: the serving batch; seq-len: the context), then each engine's own questions.
MAX_CHOICES = ("micro-batch", "seq-len", "gpus", *ENGINE_QUESTIONS)


class UsageError(Exception):
    """A flag or value the user gave is wrong; the message names the flag."""


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports errors on one line and exits with status 2."""

    def error(self, message: str) -> None:  # noqa: D401 - argparse API
        """Print 'prog: error: message' and exit 2."""
        self.exit(2, f"{self.prog}: error: {clip(message)}\n")


class RaisingParser(OneLineParser):
    """argparse that raises UsageError with the message instead of printing it and exiting (estimate_json)."""

    def error(self, message: str) -> None:  # noqa: D401 - argparse API
        """Raise UsageError('argument --flag: ...')."""
        raise UsageError(message)


def positive_int(text: str) -> int:
    """argparse type: a whole number of at least 1 (units.parse_count: 1e9, 4K, 7_000_000_000)."""
    try:
        return parse_count(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def size_value(text: str) -> int:
    """argparse type: a size like 512MiB or 1.5GiB (a bare number other than 0 is refused: units.parse_size)."""
    try:
        return parse_size(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


# ---------------------------------------------------------------------------------------
# Parsers
# ---------------------------------------------------------------------------------------

def cli_type(option: Option):
    """argparse type for an option that takes a value: the table's reader for its type (builder.model.options), so
    the command line accepts the spellings and the range every other surface does."""
    def read(text: str) -> Any:
        try:
            return option.read(text, CLI)
        except OptionError as error:
            raise argparse.ArgumentTypeError(error.reason) from None
    read.__name__ = option.name  # argparse names the type in some messages
    return read


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of every model input on the command line, from the option table (builder.model.options): its
    groups in order, each flag with its default, choices, placeholder and help."""
    groups: dict[str, Any] = {}
    for option in OPTIONS:
        if CLI not in option.surfaces:
            continue
        if option.group not in groups:
            group = p.add_argument_group(option.group)
            groups[option.group] = (group.add_mutually_exclusive_group(required=True) if option.group == GROUPS[0]
                                    else group)
        keywords: dict[str, Any] = {"dest": option.dest or option.name}
        if option.help:
            keywords["help"] = option.help.replace("%", "%%")
        if option.type != "flag" or option.negatable:
            keywords["default"] = option.default
        if option.type == "flag":
            keywords["action"] = BooleanOptionalGiven if option.negatable else StoreTrueGiven
        else:
            keywords["action"] = StoreGiven
            if option.metavar:
                keywords["metavar"] = option.metavar
            if option.type in ("choice", "stage", "dtype") and not option.metavar:
                keywords["choices"] = option.choices
            if option.type not in ("choice", "dtype", "text", "model"):
                keywords["type"] = cli_type(option)
        groups[option.group].add_argument(option.flag, *option.aliases, **keywords)


def add_estimate_parser(subparsers: argparse._SubParsersAction) -> None:
    """The `estimate` subcommand and its flags."""
    p = subparsers.add_parser(
        "estimate", help="per-GPU memory for a training or serving configuration",
        description="Per-GPU memory for training or serving a transformer, as named parts with sources. "
                    "Sizes are GiB (2**30 bytes) unless --unit GB (10**9 bytes).",
        epilog="examples:\n  python -m builder estimate --model llama-3-8b --seq-len 4096 --gpu h100-80gb\n"
               "  python -m builder estimate --model llama-3-70b --zero 3 --dp 64 --max micro-batch --gpu h100-80gb\n"
               "  python -m builder estimate --params 7e9 --precision fp32 --unit GB\n"
               "  python -m builder estimate --model llama-3-8b --mode serve --batch 16 --context 8192 --kv-dtype fp8\n"
               "\n"
               "--json keys: parts (bytes per GPU, part by part); sum_of_parts_bytes, the parts added up (also under\n"
               "its older name per_gpu_bytes); need_bytes, what the verdicts compare with each GPU's capacity: a\n"
               "training step's peak moment (peak_phase; what is live then, not every part at once, with the\n"
               "reserved overheads worked out on it), or serving's steady state; fits, per GPU, the capacity,\n"
               "the headroom and the verdict.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_arguments(p)
    add_engine_arguments(p, positive_int, size_value)

    out = p.add_argument_group("output")
    out.add_argument("--gpu", metavar="ID", help="GPU to check against: a catalog id (see `python -m builder gpus`; "
                                                 "a card's usable capacity) or a size with its unit (80GiB, 80GB)")
    out.add_argument("--max", choices=MAX_CHOICES,
                     help="search the largest micro-batch or sequence, or the fewest GPUs; under --engine vllm the "
                          "largest max-model-len (for --max-num-seqs requests at once) or max-num-seqs, or the fewest "
                          "GPUs (tensor-parallel-size); under --engine sglang context-length (for "
                          "--max-running-requests), max-running-requests or tp-size; under --engine hf batch-size (for "
                          "--context and --max-new-tokens) or max-new-tokens (for --batch and --context)")
    out.add_argument("--phases", action="store_true",
                     help="also list the peak of each phase of a training step (forward, backward, optimizer step)")
    out.add_argument("--unit", choices=("GiB", "GB"), default="GiB")
    out.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=run_estimate, estimate_parser=p)


def add_catalog_parsers(subparsers: argparse._SubParsersAction) -> None:
    """The `models` and `gpus` subcommands."""
    models = subparsers.add_parser("models", help="list the model catalog")
    models.add_argument("--json", action="store_true")
    models.set_defaults(handler=run_models)
    gpus = subparsers.add_parser("gpus", help="list the GPU catalog (usable capacity)")
    gpus.add_argument("--json", action="store_true")
    gpus.set_defaults(handler=run_gpus)


def make_parser(parser_class: type[OneLineParser] = OneLineParser) -> argparse.ArgumentParser:
    """The root parser with every subcommand (`parser_class` RaisingParser: errors raise UsageError)."""
    parser = parser_class(prog="python -m builder",
                          description="Training Memory, Explained: the memory model, its CLI and the site builder.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                       parser_class=parser_class)
    add_estimate_parser(subparsers)
    add_catalog_parsers(subparsers)
    for module in ("builder.cli_site", "builder.cli_authoring", "builder.cli_release", "builder.cli_handout",
                   "builder.validate.cli"):
        try:
            register = __import__(module, fromlist=["register"]).register
        except (ImportError, AttributeError):
            continue
        register(subparsers)
    return parser


# ---------------------------------------------------------------------------------------
# estimate
# ---------------------------------------------------------------------------------------

# Flags whose effect needs an architecture: with --params alone the model counts model states only, so a value
# given for one of them would change nothing. Given anyway, it is an error rather than silently ignored.
SHAPE_FLAGS = ("micro_batch", "seq_len", "recompute", "attention", "loss", "activation_formula",
               "dropout", "offload_activations", "compile", "recompute_layers", "batch", "context", "kv_dtype", "lora_rank",
               "lora_dropout")


def refuse_shape_flags(args: argparse.Namespace) -> None:
    """UsageError when --params comes with a flag that only an architecture gives a meaning."""
    for dest in SHAPE_FLAGS:
        if getattr(args, dest) != args.estimate_parser.get_default(dest):
            flag = flag_for(dest)
            raise UsageError(f"argument {flag}: changes nothing with --params alone, which counts model states only "
                             "(activations, KV cache and adapters need --model or --config)")


def refuse_unread(args: argparse.Namespace) -> None:
    """UsageError naming the first option flag given that the run (--mode, and --engine when serving) does not read
    (the option table's rule, builder.model.options.unread, which front matter follows too)."""
    given = getattr(args, "given", frozenset())
    error = unread([o.name for o in OPTIONS if CLI in o.surfaces and (o.dest or o.name) in given], args.mode,
                   args.engine, CLI)
    if error is not None:
        raise UsageError(f"argument {error.option.flag}: {error.reason}")


def config_from_args(args: argparse.Namespace, models: Mapping[str, Any] | None = None) -> Config:
    """Turn parsed flags into a Config, raising UsageError naming the flag (`models`: the model catalog, by default
    the shipped one)."""
    refuse_unread(args)
    arch = None
    models = default_models() if models is None else models
    if args.model is not None:
        if args.model not in models:
            raise UsageError(f"argument --model: unknown model {args.model!r} (see `python -m builder models`)")
        arch = models[args.model]
    elif args.config:
        try:
            arch = load_hf_config(args.config)
        except CatalogError as error:
            raise UsageError(f"argument --config: {error}") from None
        # The config's dropout probabilities decide whether training runs dropout (architecture.dropout_of).
        if args.dropout and not arch.extra["dropout"]:
            raise UsageError(f"argument --dropout: {args.config} sets every dropout probability to 0, so "
                             "transformers runs no dropout; leave --dropout out")
        args.dropout = arch.extra["dropout"]
        if arch.extra["attention_dropout_differs"] and args.attention == "eager":
            raise UsageError(f"argument --attention: {args.config} sets the attention dropout (attn_pdrop) apart from "
                             "the other dropouts; under eager attention its s x s mask is not modelled on its own "
                             "(SDPA and flash keep only a random seed)")
    if arch is None:
        refuse_shape_flags(args)
    shaped_like = shaped_like_of(args, models)
    precision, param_dtype = resolve_precision(args)
    zero = distributed_optimizer_stage(args, precision)
    overhead_fraction = overhead_bytes = 0
    if args.overhead:
        kind, value = args.overhead
        overhead_fraction, overhead_bytes = (value, 0) if kind == "fraction" else (0, int(value))
    # Every option both the command line and Config have, read by its flag; then the ones resolved above.
    given = {option.name: getattr(args, option.dest or option.name) for option in OPTIONS
             if CLI in option.surfaces and option.name in CONFIG_FIELDS}
    # A length left out takes the run's default, but no more than a learned position table's rows (GPT-2: 1,024),
    # as the engines default to the model's own limit: only a length given past them is refused.
    learned = arch.learned_positions if arch is not None else 0
    for length in ("seq_len", "context"):
        if learned and length not in getattr(args, "given", frozenset()) and given[length] > learned:
            given[length] = learned
    # --attention left out is transformers' default, SDPA, which a model without it replaces by eager attention
    # (modeling_utils.py get_correct_attn_implementation: "Sdpa is the default, so we try it and fallback to eager
    # otherwise"): gpt-oss's GptOssPreTrainedModel has _supports_sdpa = False. Given, sdpa is refused (checks).
    if arch is not None and arch.family == "gpt_oss" and "attention" not in getattr(args, "given", frozenset()):
        given["attention"] = "eager"
    # The engines' --dtype float16, or a --quantization whose kernels run in fp16 alone (AWQ, GPTQ: vLLM casts a bf16
    # model to fp16 for them), runs activations, the 16-bit weights and the "auto" KV cache in fp16.
    fp16_only = args.quantization is not None and QUANTIZATION_ACT_DTYPES.get(args.quantization) == ("fp16",)
    if (param_dtype == "fp16" or fp16_only) and given.get("activation_dtype") is None:
        given["activation_dtype"] = "fp16"
    return Config(**given | dict(
        model=arch, precision=precision, param_dtype=resolve_quantization(args, arch) or param_dtype, zero=zero,
        kv_dtype=resolve_kv_dtype(args), weight_scales=ONLINE_FP8_SCALES.get(args.quantization or "") or None,
        shaped_like=shaped_like, overhead_fraction=overhead_fraction,
        overhead_bytes=overhead_bytes))


def shaped_like_of(args: argparse.Namespace, models: Mapping[str, Any]) -> object:
    """The shape a bare --params count is assumed to have: --shaped-like's model, else the catalog model nearest in
    size (builder.model.assumed); None with --model or --config (UsageError if --shaped-like came with one)."""
    if args.shaped_like is None:
        return assumed_shape(models, args.params) if args.params else None
    if not args.params:
        raise UsageError("argument --shaped-like: the shape assumed for a bare count; give it with --params, not "
                         f"with {'--model' if args.model else '--config'}")
    if args.shaped_like not in models:
        raise UsageError(f"argument --shaped-like: unknown model {args.shaped_like!r} (see `python -m builder models`)")
    return models[args.shaped_like]


# Megatron-LM's --use-distributed-optimizer (megatron/core/optimizer/distrib_optimizer.py, commit d98e8a6) shards
# the fp32 main parameters and the optimizer states over the data-parallel ranks and keeps the gradient buffer whole:
# ZeRO stage 1 in the model, which counts it as Megatron's in a Megatron-LM run (builder.model.buckets). It runs with
# Megatron's own precisions, those that keep Megatron-LM DDP's gradient buffer (PrecisionPolicy.grad_buffer:
# megatron-bf16, megatron-fp16 and the Transformer Engine recipes), or with any precision under --implementation
# megatron, which names Megatron-LM (bf16-mixed there is Megatron's --bf16 --grad-reduce-in-bf16, fp32 Megatron's
# default: builder.model.gradbuffers). A precision PyTorch shares (fp32, bf16-mixed) alone names no Megatron-LM run:
# its zero 1 would be DeepSpeed's, so the flag is refused there. MEGATRON_PRECISIONS: builder.model.config's.


def distributed_optimizer_stage(args: argparse.Namespace, precision: str) -> int:
    """The ZeRO stage, with Megatron-LM's --use-distributed-optimizer read as stage 1 (UsageError naming both flags
    where they disagree)."""
    if not args.use_distributed_optimizer:
        return args.zero
    flag = "argument --use-distributed-optimizer"
    if args.fsdp:
        raise UsageError(f"{flag}: Megatron-LM's distributed optimizer and --fsdp {args.fsdp} are two ways to shard; "
                         "give one")
    if args.zero not in (0, 1):
        raise UsageError(f"{flag}: shards what ZeRO stage 1 shards, not stage {args.zero} (--zero {args.zero}); "
                         "give one of the two")
    if precision not in MEGATRON_PRECISIONS and args.implementation != "megatron":
        raise UsageError(f"{flag}: Megatron-LM's distributed optimizer runs with a Megatron precision "
                         f"({', '.join(MEGATRON_PRECISIONS)}) or --implementation megatron, not --precision "
                         f"{precision} alone; for DeepSpeed's equivalent use --zero 1")
    return 1


def resolve_kv_dtype(args: argparse.Namespace) -> str | None:
    """--kv-dtype, or --kv-cache-dtype in the engines' words mapped to a dtype (UsageError naming the flag)."""
    value = args.kv_cache_dtype
    if value is None:
        return args.kv_dtype
    if args.kv_dtype is not None:
        raise UsageError("argument --kv-cache-dtype: give the KV cache's dtype once, with --kv-cache-dtype or "
                         "--kv-dtype, not both")
    if value in KV_CACHE_UNMODELLED:
        raise UsageError(f"argument --kv-cache-dtype: {value!r} is not modelled ({KV_CACHE_UNMODELLED[value]})")
    if value in KV_CACHE_PER_TOKEN_HEAD:
        if getattr(args, "engine", None) != "vllm":
            raise UsageError(f"argument --kv-cache-dtype: {value!r} is vLLM's per-token-head mode, whose fp32 scales "
                             "live in vLLM's KV pages: it needs --engine vllm")
        return KV_CACHE_PER_TOKEN_HEAD[value]
    if value not in KV_CACHE_DTYPES:
        raise UsageError(f"argument --kv-cache-dtype: {value!r} is not one of {', '.join(KV_CACHE_DTYPES)}")
    return KV_CACHE_DTYPES[value]


def engine_word(args: argparse.Namespace, flag: str, value: str, words: dict, unmodelled: dict, instead: str) -> Any:
    """What an engine's word for a serving option (--quantization, --dtype) stands for; UsageError naming the flag
    when the option is also given in the model's own word (`instead`), or the word is not one the model follows
    (given in training, refuse_unread has refused it already)."""
    if getattr(args, instead.removeprefix("--").replace("-", "_")) is not None:
        raise UsageError(f"argument {flag}: give it once, with {flag} or {instead}, not both")
    if value in unmodelled:
        raise UsageError(f"argument {flag}: {value!r} is not modelled ({unmodelled[value]})")
    if value not in words:
        raise UsageError(f"argument {flag}: {value!r} is not one of {', '.join(words)}")
    return words[value]


def resolve_quantization(args: argparse.Namespace, arch: Any = None) -> str | None:
    """--param-dtype, or --quantization in the engines' words mapped to a weight dtype, or, serving a checkpoint
    published quantised (`arch`'s checkpoint_quantization), its own format, which vLLM and SGLang read from
    config.json with no flag (builder.model.serving CHECKPOINT_QUANTIZATIONS: DeepSeek-V3's fp8 weights; gpt-oss's
    MXFP4 experts beside 16-bit weights) unless the model's own words (--param-dtype, --precision) name the weights'
    dtype. A --quantization naming another method is refused, as the engines refuse it (CHECKPOINT_MISMATCH), and so
    is a checkpoint's own layout (QUANTIZATION_CHECKPOINT: mxfp4) for a model that does not ship in it."""
    checkpoint = arch.checkpoint_quantization if arch is not None and args.mode == "serve" else ""
    if args.quantization is not None:
        if checkpoint and args.quantization != checkpoint:
            raise UsageError("argument --quantization: the engine would refuse this run: "
                             + CHECKPOINT_MISMATCH.format(checkpoint, args.quantization))
        if args.quantization in QUANTIZATION_CHECKPOINT and checkpoint != QUANTIZATION_CHECKPOINT[args.quantization]:
            shown = arch.name if arch is not None else "a model given by its parameter count"
            raise UsageError(f"argument --quantization: {args.quantization!r} names the layout a checkpoint ships in "
                             f"(gpt-oss's MXFP4 experts); {shown} has a 16-bit checkpoint, which the engines do not "
                             "quantise to it")
        if args.quantization in ONLINE_FP8_SCALES:
            refuse_online_word(args)
        words = QUANTIZATION_DTYPES | {word: args.param_dtype for word in QUANTIZATION_CHECKPOINT}
        dtype = engine_word(args, "--quantization", args.quantization, words, QUANTIZATION_UNMODELLED,
                            "--param-dtype")
    elif checkpoint and args.param_dtype is None and args.precision is None:
        dtype = CHECKPOINT_QUANTIZATIONS[checkpoint] or args.param_dtype
    else:
        return args.param_dtype
    method = args.quantization or checkpoint
    runs_in = QUANTIZATION_ACT_DTYPES[method]
    asked = MODEL_DTYPES.get(args.dtype)
    if asked not in (None, *runs_in):  # vLLM's own refusal (vllm/config/vllm.py VllmConfig._get_quantization_config)
        raise UsageError(f"argument --dtype: {TORCH_DTYPES[asked]} is not supported for quantization method "
                         f"{method}. Supported dtypes: [{', '.join(TORCH_DTYPES[d] for d in runs_in)}]")
    return dtype


def refuse_online_word(args: argparse.Namespace) -> None:
    """UsageError for vLLM's online fp8 words (builder.model.serving ONLINE_FP8_SCALES) under an engine that lacks
    them: SGLang and Hugging Face generate, and a vLLM release older than the word (ONLINE_FP8_FROM)."""
    word, engine = args.quantization, getattr(args, "engine", None)
    first = ONLINE_FP8_FROM[word]
    if engine not in (None, "vllm"):
        raise UsageError(f"argument --quantization: {word!r} is vLLM's online fp8 word (vllm/config/quantization.py "
                         f"_ONLINE_SHORTHANDS, {release_words(first)} and later), not one of "
                         f"{ENGINES[engine].title}'s; give --engine vllm, or fp8")
    if engine == "vllm":
        try:
            release = release_code(args.vllm_version) if args.vllm_version is not None else DEFAULT_RELEASE
        except ValueError:
            return  # the engine's own check names the release (builder.model.engines._checked)
        if release < first:
            raise UsageError(f"argument --quantization: the engine would refuse this run: {release_words(release)} "
                             f"has no --quantization {word!r}, vLLM's online fp8 word from {release_words(first)} "
                             f"on (--vllm-version 0.{first // 100} to 0.{NEWEST[1]}); fp8 quantises at load per "
                             "tensor in every release")


def resolve_precision(args: argparse.Namespace) -> tuple[str, str | None]:
    """(policy name, weight dtype override) from --precision, which accepts a dtype when serving, or from the
    engines' --dtype."""
    value = args.precision
    if args.dtype is not None:
        dtype = engine_word(args, "--dtype", args.dtype, MODEL_DTYPES, {}, "--precision")
        # fp32 is a policy of its own (activations and the "auto" KV cache in fp32 too); fp16 is bf16's bytes.
        return ("fp32", None) if dtype == "fp32" else ("bf16", None if dtype in (None, "bf16") else dtype)
    if value is None:
        return ("bf16-mixed", None) if args.mode == "train" else ("bf16", None)
    if value in PRECISIONS and not (args.mode == "serve" and value in DTYPE_BYTES):
        return value, None
    if args.mode == "serve" and value in DTYPE_BYTES:
        return "bf16", value
    allowed = ", ".join(PRECISIONS) if args.mode == "train" else ", ".join(DTYPE_BYTES)
    raise UsageError(f"argument --precision: {value!r} is not one of {allowed}")


def usage_error(args: argparse.Namespace, option: str, message: str) -> UsageError:
    """The usage error for a model error on `option` (its message after 'option: '): named after the option's flag,
    or, for the parameter count of an architecture (not a --params given), after the flag that gave the model."""
    if option == "params" and message and args.params is None:
        flag = "--config" if args.config else "--model"
        return UsageError(f"argument {flag}: the architecture's parameter count {message}")
    return UsageError(f"argument {flag_for(option)}: {message or option}")


def flag_for(option: str) -> str:
    """The command-line flag that sets a Config option (the option table's, builder.model.options)."""
    return FLAG_OF.get(option, "--" + option.replace("_", "-"))


GIVEN_CAPACITY = "given on the command line"


def plain_capacity(text: str) -> Gpu:
    """--gpu given as a size with its unit ('80GiB', '24 GB'): a GPU with that much usable memory. A bare number is
    refused (80 could be GiB or GB, and was once read as 80 bytes)."""
    try:
        size = parse_size(text)
    except ValueError:
        raise UsageError(f"argument --gpu: {text!r} is neither a catalog GPU (see `python -m builder gpus`) nor a "
                         "size with its unit such as 80GiB or 80GB (a bare number is refused)") from None
    if not 0 < size <= 2**50:
        raise UsageError(f"argument --gpu: {text!r} must be a size between 1 byte and 1 PiB")
    return Gpu(text, "The given capacity", size, text, source=GIVEN_CAPACITY)


def capacity_read_as(gpu: Gpu) -> str:
    """How a --gpu size was read, in both units, and what a catalog id gives instead ('' for a catalog GPU)."""
    if gpu.source != GIVEN_CAPACITY:
        return ""
    return (f"--gpu {gpu.id} was read as {gpu.usable_bytes / GB:,.2f} GB = {gpu.usable_bytes / GiB:,.2f} GiB (GB is "
            "10**9 bytes, GiB 2**30); a catalog id such as h100-80gb gives a card's usable capacity, what a CUDA "
            "process sees, below the size in its name (`python -m builder gpus`)")


def run_estimate(args: argparse.Namespace) -> int:
    """Print the breakdown (table or JSON), the verdict and any --max answer."""
    print(estimate_output(args))
    return 0


def estimate_json(argv: Sequence[str], models: Mapping[str, Any] | None = None,
                  gpus: Mapping[str, Gpu] | None = None) -> dict[str, Any]:
    """What `python -m builder estimate ARGV --json` prints, read back as data: the command line's own parser, model
    and JSON contract, for a page's {{< estimate >}} numbers (builder/prose_numbers.py). `models` and `gpus` are the
    catalogs to read (by default the shipped ones). UsageError (or CatalogError) for whatever the command would
    refuse with exit status 2, in the command's words."""
    for arg in argv:  # -h, --help or an abbreviation of it (argparse's allow_abbrev) prints the help and exits
        if arg == "-h" or (arg.startswith("--h") and "--help".startswith(arg)):
            raise UsageError(f"argument {arg}: prints the help, not an estimate")
    args = raising_parser().parse_args(["estimate", *argv, "--json"])
    return json.loads(estimate_output(args, models, gpus))


@functools.lru_cache(maxsize=1)
def raising_parser() -> argparse.ArgumentParser:
    """The command line's parser, raising UsageError instead of exiting (made once: parsing changes it not)."""
    return make_parser(RaisingParser)


def estimate_output(args: argparse.Namespace, models: Mapping[str, Any] | None = None,
                    gpus: Mapping[str, Gpu] | None = None) -> str:
    """The text `estimate` prints (a table, or JSON with --json); UsageError naming the flag at fault."""
    config = config_from_args(args, models)
    gpus = default_gpus() if gpus is None else gpus
    if args.gpu is not None:  # the one GPU asked about: a catalog entry or a given size
        gpus = {args.gpu: gpus[args.gpu] if args.gpu in gpus else plain_capacity(args.gpu)}
    if args.max and not args.gpu:
        raise UsageError("argument --max: needs --gpu to know the capacity")
    if args.phases and config.mode != "train":
        raise UsageError("argument --phases: phases of a step are for training (--mode train)")
    if args.engine:
        return engine_output(args, config, gpus)
    if args.max in ENGINE_QUESTIONS:
        raise UsageError(f"argument --max: {args.max} is asked under an engine's accounting; add --engine "
                         f"{ENGINE_QUESTIONS[args.max].engine}")
    stray = engine_flags_given(args)
    if stray:
        raise UsageError(f"argument {stray[0]}: an engine option; choose the engine with --engine")
    try:
        breakdown, needed = assess(config)
        answer = answer_max(args.max, config, gpus[args.gpu]) if args.max else None
    except ValueError as error:
        option, _, message = str(error).partition(": ")
        raise usage_error(args, option, message) from None
    if args.json:
        data = breakdown_json(breakdown, needed, gpus, args.gpu, answer)
        if args.phases:
            data["phases"] = {phase.name: {"bytes": phase.total, "parts": {p.name: p.bytes for p in phase.parts}}
                              for phase in needed.steps}
        return json.dumps(data, indent=2)
    text = render_table(breakdown, needed, config, gpus, args.gpu, args.unit, answer)
    return text + "\n" + render_phases(needed, config, args.unit) if args.phases else text


def engine_output(args: argparse.Namespace, config: Config, gpus: Mapping[str, Gpu]) -> str:
    """--engine: the engine's startup accounting; a run the engine would refuse is a usage error (exit 2) in
    the engine's own words (its other checks are engines.engine_report's)."""
    if not args.gpu:
        raise UsageError("argument --engine: needs --gpu (the engine takes a share of one GPU's memory)")
    other = engine_flags_given(args, args.engine)
    if other:
        raise UsageError(f"argument {other[0]}: not an option of --engine {args.engine}")
    wrong = question_of(args) if args.max else None
    if wrong:
        raise UsageError(wrong)
    try:
        if args.max:
            return run_question(args, config, gpus[args.gpu])
        report, text = run_engine(args, config, gpus[args.gpu])
    except ValueError as error:
        option, _, message = str(error).partition(": ")
        raise usage_error(args, option, message) from None
    refused = refusal_of(report, getattr(args, "given", frozenset()))
    if refused:
        raise UsageError(refused)
    read_as = capacity_read_as(gpus[args.gpu])
    return text + f"\n{read_as}" if read_as and not args.json else text


# A moment's tensors inside a layer are its rows up to the op running (counted in the layer's saved or recomputed
# part) plus what the op makes, less those rows already freed by then (builder.model.oplists' freed rows): where more
# has been freed than made, layer_temporaries is that net change, below 0, and the moment's total is still right.
NET_CHANGE = " (net: more of the layer's tensors freed by then than made)"


def render_phases(needed: Need, config: Config, unit: str) -> str:
    """The candidate peaks of a step, the one that sets the need marked, with what changes between them."""
    divisor = GiB if unit == "GiB" else GB
    stage = f", pipeline stage: {needed.stage}" if needed.stage != "only" else ""
    lines = ["", f"Peak by phase of a training step ({unit} per GPU{stage}: the parts live at each moment):"]
    for phase in needed.steps:
        extra = ", ".join(f"{p.name} {p.bytes / divisor:.2f}" + (NET_CHANGE if p.bytes < 0 else "")
                          for p in phase.parts if p.transient)
        mark = "  <- peak" if phase.name == needed.peak.name else ""
        lines.append(f"  {phase.title:<38}  {phase.total / divisor:10.2f}{mark}")
        if phase.detail:
            lines.append(f"    at {phase.detail}")
        if extra:
            lines.append(f"    incl. transient: {extra}")
    lines.extend(f"  not modelled: {note}" for note in unmodelled(config))
    return "\n".join(lines)


def answer_max(question: str, config: Config, gpu: Gpu) -> dict:
    """Answer --max for one GPU, as a dictionary for JSON and text."""
    capacity = gpu.usable_bytes
    if question == "micro-batch":
        value = max_micro_batch(config, capacity)
        name = "micro_batch" if config.mode == "train" else "batch"
        return {"question": name, "gpu": gpu.id, "value": value}
    if question == "seq-len":
        value = max_seq_len(config, capacity)
        answer = {"question": "seq_len" if config.mode == "train" else "context", "gpu": gpu.id, "value": value}
        # At the model's learned positions the answer is that limit, not the memory's (a longer one is refused).
        learned = config.model.learned_positions if config.model is not None else 0
        return answer | ({"limit": "learned positions"} if value and value == learned else {})
    plan = min_gpus(config, capacity)
    return {"question": "gpus", "gpu": gpu.id, "value": plan.gpus if plan else None,
            "how": plan.how if plan else "no plan up to 4096 GPUs keeps this strategy within capacity"}


def breakdown_json(breakdown, needed: Need, gpus: Mapping[str, Gpu], gpu_id: str | None, answer: dict | None) -> dict:
    """The JSON contract: params, sum_of_parts_bytes (the parts added up; per_gpu_bytes, its older name, kept),
    need_bytes (what `fits` compares), parts,
    host_bytes, fits; for training also peak_bytes and peak_phase (the moment that sets need_bytes)."""
    references = default_references()  # each citation printed as its short form and locator
    chosen = [gpus[gpu_id]] if gpu_id else list(gpus.values())
    fits = {}
    for gpu in chosen:
        fit = Fit(gpu.usable_bytes, needed.bytes)
        fits[gpu.id] = {"capacity_bytes": gpu.usable_bytes, "headroom_bytes": fit.headroom, "fits": fit.fits}
    data = {
        "params": breakdown.params,
        "per_gpu_bytes": breakdown.total,
        "sum_of_parts_bytes": breakdown.total,
        "need_bytes": needed.bytes,
        "need_basis": needed.basis,
        "parts": breakdown.as_dict(),
        "host_bytes": breakdown.host_total,
        "host_parts": {p.name: p.bytes for p in breakdown.host_parts},
        "fits": fits,
        "sources": {p.name: source_text(p.source, references) for p in breakdown.parts},
        "notes": list(breakdown.notes) + [f"{p.name}: {p.simplification}" for p in breakdown.parts if p.simplification],
    }
    if needed.peak is not None:
        data["peak_bytes"], data["peak_phase"] = needed.bytes, needed.peak.name
        if needed.stage != "only":
            data["peak_stage"] = needed.stage
    if answer is not None:
        data["max"] = answer
    return data


def render_table(breakdown, needed: Need, config: Config, gpus: Mapping[str, Gpu], gpu_id: str | None, unit: str,
                 answer: dict | None) -> str:
    """A readable table of parts, their sum, what the run needs, the verdict and notes."""
    divisor = GiB if unit == "GiB" else GB
    arch = config.model
    title = f"{arch.extra.get('display', arch.name)} · {config.mode} · {breakdown.params:,} parameters" if arch \
        else f"A raw count of {breakdown.params:,} parameters · {config.mode}"
    lines = [f"{title} · sizes in {unit} "
             f"({'2**30' if unit == 'GiB' else '10**9'} bytes) per GPU"]
    # The CLI table keeps the part keys (the model's stable API, as in --json); pages show partnames' names.
    width = max([len(p.name) for p in breakdown.parts] + [12])
    for part in breakdown.parts:
        lines.append(f"  {part.name:<{width}}  {part.bytes / divisor:10.2f}  {part.per_unit}")
    lines.append(f"  {'sum of parts':<{width}}  {breakdown.total / divisor:10.2f}")
    lines.append(f"  {'need':<{width}}  {needed.bytes / divisor:10.2f}  {needed.basis}")
    between = need_against_sum(breakdown, needed, divisor)
    if between:
        lines.append(f"  {'':<{width}}  {between}")
    if breakdown.host_parts:
        lines.append(f"  host memory per node: {format_bytes(breakdown.host_total, unit, 2)}")
    targets = [gpus[gpu_id]] if gpu_id else list(gpus.values())
    lines.append("")
    lines.append("  Verdicts compare the need with each GPU's usable capacity"
                 + (" (see --phases)." if needed.peak else "."))
    for gpu in targets:
        fit = Fit(gpu.usable_bytes, needed.bytes)
        lines.append(f"  {gpu.display} ({format_bytes(gpu.usable_bytes, unit, 1)} usable): {fit.verdict(unit)}")
        read_as = capacity_read_as(gpu)
        if read_as:
            lines.append(f"    {read_as}")
    if answer is not None:
        lines.append("")
        lines.append(f"  {describe_answer(answer)}")
    notes = list(breakdown.notes) + [f"{p.name}: {p.simplification}" for p in breakdown.parts if p.simplification]
    if notes:
        lines.append("")
        lines.extend(f"  note: {n}" for n in notes)
    return "\n".join(lines)


def need_against_sum(breakdown, needed: Need, divisor: int) -> str:
    """How the peak moment differs from the sum of parts, part by part (training; '' when they agree or the moment is
    not the reported stage's): what was freed by then and what exists only then, such as the optimizer step's
    temporaries, so that a need above or below the sum has its reason on show."""
    if needed.peak is None or needed.peak.total != needed.bytes:
        return ""
    held, live = {}, {}
    for part in breakdown.parts:
        held[part.name] = held.get(part.name, 0) + part.bytes
    for part in needed.peak.parts:
        live[part.name] = live.get(part.name, 0) + part.bytes
    change = {name: live.get(name, 0) - held.get(name, 0) for name in held.keys() | live.keys()}
    made = sorted(((delta, name) for name, delta in change.items() if delta > 0), reverse=True)
    freed = -sum(delta for delta in change.values() if delta < 0)
    if breakdown.total + sum(delta for delta, _ in made) - freed != needed.bytes or not (made or freed):
        return ""
    words = [f"- {freed / divisor:.2f} not held then"] if freed else []
    words += [f"+ {delta / divisor:.2f} {name}" for delta, name in made[:3]]
    if len(made) > 3:
        words.append(f"+ {sum(delta for delta, _ in made[3:]) / divisor:.2f} in {len(made) - 3} more")
    return "= sum of parts " + " ".join(words) + " (--phases lists every moment)"


def describe_answer(answer: dict) -> str:
    """--max answer in words."""
    gpu = answer["gpu"]
    if answer["value"] is None:
        what = "GPU count" if answer["question"] == "gpus" else answer["question"].replace("_", " ")
        return f"no {what} fits on {gpu}" + (f" ({answer['how']})" if "how" in answer else "")
    if answer["question"] == "gpus":
        return f"fewest GPUs on {gpu}: {answer['value']} ({answer['how']})"
    capped = " (the model's learned positions: a longer sequence is refused)" if "limit" in answer else ""
    return f"largest {answer['question'].replace('_', ' ')} that fits on {gpu}: {answer['value']}{capped}"


# ---------------------------------------------------------------------------------------
# catalogs
# ---------------------------------------------------------------------------------------

def run_models(args: argparse.Namespace) -> int:
    """List catalog models with their parameter counts."""
    models = default_models()
    if args.json:
        rows = {k: {"display": a.extra.get("display", k), "params": param_count(a),
                    "active_params": active_param_count(a), "layers": a.layers, "hidden": a.hidden,
                    "heads": a.heads, "kv_heads": a.n_kv_heads, "vocab": a.vocab,
                    "positions": a.served_positions, "source": a.source}
                for k, a in models.items()}
        print(json.dumps(rows, indent=2))
        return 0
    for model_id, arch in models.items():
        active = f" ({active_param_count(arch):,} active)" if arch.is_moe else ""
        print(f"{model_id:<16} {param_count(arch):>17,} params{active}  L={arch.layers} h={arch.hidden} "
              f"a={arch.heads} kv={arch.n_kv_heads} V={arch.vocab}"
              + (f" positions={arch.served_positions}" if arch.served_positions else ""))
    return 0


def run_gpus(args: argparse.Namespace) -> int:
    """List catalog GPUs with usable capacity in GiB and GB."""
    gpus = default_gpus()
    if args.json:
        print(json.dumps({k: {"display": g.display, "usable_bytes": g.usable_bytes, "marketing": g.marketing,
                              "source": g.source} for k, g in gpus.items()}, indent=2))
        return 0
    # The name's size is nominal: vendors write GB, but the boards carry about that many GiB of raw memory, of which
    # the driver and CUDA keep some (content/gpus.toml), so the usable GB can be above the name's and the GiB below.
    print("Usable: the total a CUDA process can allocate (cudaMemGetInfo), which every verdict uses. The size in a\n"
          "GPU's name is nominal: vendors write GB, but the boards carry about that many GiB of raw memory, less\n"
          "what the driver and CUDA keep, so the usable GB can exceed the name's number while the GiB stay below it.")
    width = max(map(len, gpus))
    for gpu_id, gpu in gpus.items():
        print(f"{gpu_id:<{width}} {gpu.display:<22} usable {format_bytes(gpu.usable_bytes, 'GiB', 2):>11} "
              f"= {format_bytes(gpu.usable_bytes, 'GB', 2):>10}  (name: {gpu.marketing}, nominal)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments and run the subcommand; usage errors exit 2 with one line."""
    parser = make_parser()
    args = parser.parse_args(argv)
    try:
        code = args.handler(args)
        sys.stdout.flush()  # a closed pipe shows here, not at the interpreter's exit
        return code
    except (UsageError, CatalogError) as error:
        print(f"python -m builder {args.command}: error: {clip(str(error))}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (`| head`): every output path ends here. What is still buffered goes to /dev/null
        # so that the interpreter's own flush at exit finds nowhere to fail (Python's signal docs, "Note on
        # SIGPIPE"), and the exit status is a pipe's: 128 + SIGPIPE.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
