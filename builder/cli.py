"""Command line: `python -m builder estimate|models|gpus|build|serve|new|authoring-guide|release|handout|validate`.

Bad flags or values print one line naming the flag and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from builder.sources import default_references, source_text
from builder.catalog import CatalogError, Gpu, default_gpus, default_models, load_hf_config
from builder.cli_engine import (add_engine_arguments, engine_flags_given, question_of, refusal_of, run_engine,
                                 run_question)
from builder.model.engine_questions import QUESTIONS as ENGINE_QUESTIONS
from builder.model.peak import Need, assess, unmodelled
from builder.model import Config
from builder.model.architecture import active_param_count, param_count
from builder.model.config import (ATTENTION, CHECKPOINT_SAVES, FSDP_STRATEGIES, IMPLEMENTATIONS, LORA_TARGETS, LOSSES, MODES, OFFLOAD,
                                  OPTIMIZER_IMPLS, OPTIMIZERS, PIPELINE_SCHEDULES, PRECISIONS, RECOMPUTE)
from builder.model.ranges import RANGE_OF
from builder.model.serving import KV_CACHE_DTYPES, KV_CACHE_PER_TOKEN_HEAD, KV_CACHE_UNMODELLED
from builder.model.questions import Fit, max_micro_batch, max_seq_len, min_gpus
from builder.model.units import DTYPE_BYTES, GB, GiB, clip, format_bytes, parse_count, parse_size
from builder.model.assumed import assumed_shape
from builder.model.buckets import DEFAULTS as BUCKET_DEFAULTS, MEANINGS as BUCKET_MEANINGS
from builder.model.zero3 import DEFAULTS as ZERO3_DEFAULTS, MEANINGS as ZERO3_MEANINGS

# Training and plain serving (micro-batch: the serving batch; seq-len: the context), then each engine's own questions.
MAX_CHOICES = ("micro-batch", "seq-len", "gpus", *ENGINE_QUESTIONS)


class UsageError(Exception):
    """A flag or value the user gave is wrong; the message names the flag."""


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports errors on one line and exits with status 2."""

    def error(self, message: str) -> None:  # noqa: D401 - argparse API
        """Print 'prog: error: message' and exit 2."""
        self.exit(2, f"{self.prog}: error: {clip(message)}\n")


def positive_int(text: str) -> int:
    """argparse type: a whole number of at least 1 (units.parse_count: 1e9, 4K, 7_000_000_000)."""
    try:
        return parse_count(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def count_of(option: str):
    """argparse type for a Config option's count: units.parse_count's spellings within the option's range
    (builder.model.ranges), so the error names the same limit as every other surface."""
    bounds = RANGE_OF[option]

    def count(text: str) -> int:
        try:
            return parse_count(text, low=bounds.low, high=int(bounds.high))
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
    count.__name__ = option  # argparse names the type in some messages
    return count


def overhead_value(text: str) -> tuple[str, float]:
    """argparse type: '10%' (a fraction of the rest) or a size like '1.5GiB'."""
    if text.strip().endswith("%"):
        try:
            return "fraction", float(text.strip()[:-1]) / 100
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a percentage") from None
    try:
        return "bytes", float(parse_size(text))
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def size_value(text: str) -> int:
    """argparse type: a size like 512MiB or 1.5GiB."""
    try:
        return parse_size(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


# ---------------------------------------------------------------------------------------
# Parsers
# ---------------------------------------------------------------------------------------

def add_estimate_parser(subparsers: argparse._SubParsersAction) -> None:
    """The `estimate` subcommand and its flags."""
    p = subparsers.add_parser(
        "estimate", help="per-GPU memory for a training or serving configuration",
        description="Per-GPU memory for training or serving a transformer, as named parts with sources. "
                    "Sizes are GiB (2**30 bytes) unless --unit GB (10**9 bytes).",
        epilog="examples:\n  python -m builder estimate --model llama-3-8b --seq-len 4096 --gpu h100-80gb\n"
               "  python -m builder estimate --model llama-3-70b --zero 3 --dp 64 --max micro-batch --gpu h100-80gb\n"
               "  python -m builder estimate --params 7e9 --precision fp32 --unit GB\n"
               "  python -m builder estimate --model llama-3-8b --mode serve --batch 16 --context 8192 --kv-dtype fp8",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    what = p.add_argument_group("model (one of)").add_mutually_exclusive_group(required=True)
    what.add_argument("--model", metavar="NAME", help="catalog id (see `python -m builder models`)")
    what.add_argument("--params", type=count_of("params"), metavar="N", help="raw parameter count, e.g. 7e9 or 7B")
    what.add_argument("--config", type=Path, metavar="PATH", help="a Hugging Face config.json on disk")

    run = p.add_argument_group("what runs")
    run.add_argument("--mode", choices=MODES, default="train")
    run.add_argument("--precision", default=None, metavar="POLICY",
                     help=f"training: {', '.join(PRECISIONS)} (default bf16-mixed); "
                          f"serving: a weight dtype ({', '.join(DTYPE_BYTES)}), default bf16")
    run.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw",
                     help="paged-adamw and paged-adamw8bit are bitsandbytes' PagedAdamW and PagedAdamW8bit "
                          "(Hugging Face's paged_adamw_32bit and paged_adamw_8bit)")
    run.add_argument("--optimizer-impl", choices=OPTIMIZER_IMPLS, default=None,
                     help="how the step runs (torch.optim's words): for-loop, foreach, fused, or in-backward (stepped "
                          "from each gradient's hook, gradients freed at once); default: the optimizer's own (foreach "
                          "for torch.optim's Adam, AdamW and SGD on CUDA, for-loop for Adafactor and Lion, fused for "
                          "8-bit AdamW)")
    run.add_argument("--micro-batch", type=count_of("micro_batch"), default=1, metavar="B")
    run.add_argument("--seq-len", type=count_of("seq_len"), default=2048, metavar="S")
    run.add_argument("--grad-accum", type=count_of("grad_accum"), default=1, metavar="M",
                     help="micro-batches per optimizer step (pipeline: micro-batches in flight)")
    run.add_argument("--recompute", choices=RECOMPUTE, default="none",
                     help="selective: Megatron-LM's (the attention core); full: every layer keeps only its input "
                          "(Megatron-LM full, Hugging Face gradient_checkpointing, DeepSpeed activation checkpointing, "
                          "torchtitan full AC)")
    run.add_argument("--recompute-num-layers", type=count_of("recompute_layers"), default=0, metavar="K", dest="recompute_layers",
                     help="with --recompute full: only the first K layers of each pipeline stage (Megatron-LM "
                          "--recompute-method block --recompute-num-layers K); 0 = every layer")
    run.add_argument("--attention", choices=ATTENTION, default="sdpa")
    run.add_argument("--loss", choices=LOSSES, default="eager",
                     help="how the loss is computed: eager (transformers), compiled (torch.compile), chunked "
                          "(torchtune, 8 chunks) or fused-linear (Liger Kernel: no logits)")
    run.add_argument("--activation-formula", choices=("ops", "korthikanti"), default="ops",
                     help="'ops': op by op; 'korthikanti': Table 2 of Korthikanti et al. 2022 (reference)")
    run.add_argument("--implementation", choices=IMPLEMENTATIONS, default="hf",
                     help="whose op list 'ops' follows: hf (transformers), megatron, or torchtune (transformers' list, K and V "
                          "copied to every query head); megatron also names Megatron-LM's data parallelism (its "
                          "gradient buffer, kept for the run) for a precision PyTorch shares")
    run.add_argument("--dropout", action="store_true", help="dropout layers active (1-byte masks saved)")
    run.add_argument("--offload-activations", action="store_true",
                     help="saved activations go to pinned host memory in the forward and come back in the backward "
                          "(torchtune's enable_activation_offloading): one layer's stay on the GPU at a time")
    run.add_argument("--checkpoint-save", choices=CHECKPOINT_SAVES, default="none",
                     help="how a checkpoint is saved after the optimizer step, a moment of the step of its own: "
                          "torch-save (torch.save of the state dicts), FSDP's full-state-dict (FULL_STATE_DICT), "
                          "full-state-dict-offload (offload_to_cpu, rank0_only), sharded-state-dict "
                          "(SHARDED_STATE_DICT), dcp (torch.distributed.checkpoint of FSDP2's shards), deepspeed "
                          "(save_checkpoint), deepspeed-16bit (stage3_gather_16bit_weights_on_model_save); none: "
                          "no save")
    run.add_argument("--compile", action="store_true",
                     help="every transformer layer under torch.compile (inductor): what its partitioner saves for "
                          "backward, measured on CPU; the loss is compiled only with --loss compiled")

    dtypes = p.add_argument_group("dtype overrides")
    for flag in ("param-dtype", "master-dtype", "grad-dtype", "grad-accum-dtype", "reduce-dtype",
                 "optimizer-state-dtype", "exp-avg-dtype", "exp-avg-sq-dtype", "activation-dtype"):
        choices = tuple(DTYPE_BYTES) + (("none",) if flag == "master-dtype" else ())
        dtypes.add_argument(f"--{flag}", choices=choices, default=None)

    par = p.add_argument_group("parallelism and sharding")
    par.add_argument("--dp", type=count_of("dp"), default=1, help="data-parallel ranks")
    par.add_argument("--zero", type=int, choices=(0, 1, 2, 3), default=0, help="ZeRO stage")
    par.add_argument("--use-distributed-optimizer", action="store_true",
                     help="Megatron-LM's flag: shard the fp32 main parameters and optimizer states over the "
                          "data-parallel ranks (the same as --zero 1; front matter: zero: 1)")
    par.add_argument("--fsdp", choices=FSDP_STRATEGIES, default=None, help="FSDP strategy (instead of --zero)")
    par.add_argument("--gradient-as-bucket-view", action="store_true",
                     help="PyTorch DDP's gradient_as_bucket_view=True: each .grad is a view of DDP's gradient buckets "
                          "(one copy of the gradients, kept for the run) instead of a separate tensor beside them; "
                          "a DDP run only (--dp above 1, no --zero or --fsdp)")
    par.add_argument("--fsdp-shard-group", type=count_of("fsdp_shard_group"), default=None, help="HYBRID_SHARD group size")
    par.add_argument("--tp", type=count_of("tp"), default=1, help="tensor-parallel ranks")
    par.add_argument("--sequence-parallel", action="store_true", help="Megatron sequence parallelism (with --tp)")
    par.add_argument("--pp", type=count_of("pp"), default=1, help="pipeline stages")
    par.add_argument("--pp-schedule", choices=PIPELINE_SCHEDULES, default="1f1b")
    par.add_argument("--virtual-stages", type=count_of("pp_virtual_stages"), default=1, help="interleaved: chunks per stage")
    par.add_argument("--cp", type=count_of("cp"), default=1, help="context-parallel ranks")
    par.add_argument("--ep", type=count_of("ep"), default=1, help="expert-parallel ranks (MoE)")
    par.add_argument("--offload", choices=OFFLOAD, default="none", help="CPU offload")
    par.add_argument("--gpus-per-node", type=count_of("gpus_per_node"), default=8)

    ds = p.add_argument_group("DeepSpeed ZeRO-3 (zero_optimization's keys, in parameter elements; with --zero 3)")
    for option, default in ZERO3_DEFAULTS.items():
        ds.add_argument("--" + option.replace("_", "-"), type=count_of(option), default=None, metavar="N",
                        help=f"{ZERO3_MEANINGS[option]} (DeepSpeed's default {default:.0e})")
    buckets = p.add_argument_group("DeepSpeed ZeRO gradient buckets (zero_optimization's keys; with --zero 1 to 3)")
    for option, default in BUCKET_DEFAULTS.items():
        buckets.add_argument("--" + option.replace("_", "-"), type=count_of(option), default=None, metavar="N",
                             help=f"{BUCKET_MEANINGS[option]} (DeepSpeed's default {default:.0e})")
    buckets.add_argument("--overlap-comm", action=argparse.BooleanOptionalAction, default=None,
                         help=f"{BUCKET_MEANINGS['overlap_comm']} (DeepSpeed's default: on with --zero 3, off below)")
    buckets.add_argument("--contiguous-gradients", action=argparse.BooleanOptionalAction, default=True,
                         help=f"{BUCKET_MEANINGS['contiguous_gradients']} (DeepSpeed's default: on)")
    ds.add_argument("--shaped-like", metavar="NAME", default=None,
                    help="with --params: the catalog model whose shape the count is assumed to have, for ZeRO-3's "
                         "largest layer (default: the catalog model nearest in size)")

    tune = p.add_argument_group("fine-tuning")
    tune.add_argument("--lora-rank", type=count_of("lora_rank"), default=0, metavar="R")
    tune.add_argument("--lora-targets", default="q,k,v,o", help=f"comma list of {', '.join(LORA_TARGETS)}")
    tune.add_argument("--lora-dropout", type=float, default=0.0, metavar="P",
                      help="PEFT's lora_dropout: p > 0 saves each adapter's dropout mask and output (needs --lora-rank)")
    tune.add_argument("--qlora", action="store_true", help="4-bit NF4 base weights (needs --lora-rank)")

    serve = p.add_argument_group("serving")
    serve.add_argument("--batch", type=count_of("batch"), default=1, help="concurrent sequences")
    serve.add_argument("--context", type=count_of("context"), default=4096, help="tokens per sequence in the KV cache")
    serve.add_argument("--kv-dtype", choices=tuple(DTYPE_BYTES), default=None)
    serve.add_argument("--kv-cache-dtype", default=None, metavar="DTYPE",
                       help="the KV cache's dtype in the engines' own words (vLLM and SGLang --kv-cache-dtype: "
                            f"{', '.join(KV_CACHE_DTYPES)}; vLLM's {', '.join(KV_CACHE_PER_TOKEN_HEAD)} with "
                            "--engine vllm); instead of --kv-dtype")

    over = p.add_argument_group("overheads (named assumptions)")
    over.add_argument("--overhead", type=overhead_value, default=None, metavar="X",
                      help="framework overhead: a percentage of the rest ('10%%') or a size ('1.5GiB')")
    over.add_argument("--cuda-context", type=size_value, default=0, metavar="SIZE",
                      help="CUDA context size to add, e.g. 500MiB (default: none)")
    over.add_argument("--allocator-reserve", type=float, default=0.0, metavar="FRACTION",
                      help="caching-allocator reserve as a fraction of allocated (e.g. 0.05)")

    add_engine_arguments(p, positive_int, size_value)

    out = p.add_argument_group("output")
    out.add_argument("--gpu", metavar="ID", help="GPU to check against (see `python -m builder gpus`)")
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


def make_parser() -> argparse.ArgumentParser:
    """The root parser with every subcommand."""
    parser = OneLineParser(prog="python -m builder",
                           description="Training Memory, Explained: the memory model, its CLI and the site builder.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                       parser_class=OneLineParser)
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


def config_from_args(args: argparse.Namespace) -> Config:
    """Turn parsed flags into a Config, raising UsageError naming the flag."""
    arch = None
    models = default_models()
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
    targets = tuple(t.strip() for t in args.lora_targets.split(",") if t.strip())
    if not targets:
        raise UsageError(f"argument --lora-targets: give a comma list of {', '.join(LORA_TARGETS)}, got "
                         f"{args.lora_targets!r}")
    overhead_fraction = overhead_bytes = 0
    if args.overhead:
        kind, value = args.overhead
        overhead_fraction, overhead_bytes = (value, 0) if kind == "fraction" else (0, int(value))
    return Config(
        model=arch, params=args.params, mode=args.mode, precision=precision,
        param_dtype=args.param_dtype or param_dtype, master_dtype=args.master_dtype, grad_dtype=args.grad_dtype,
        grad_accum_dtype=args.grad_accum_dtype, reduce_dtype=args.reduce_dtype,
        optimizer_state_dtype=args.optimizer_state_dtype, exp_avg_dtype=args.exp_avg_dtype,
        exp_avg_sq_dtype=args.exp_avg_sq_dtype, activation_dtype=args.activation_dtype,
        optimizer=args.optimizer, optimizer_impl=args.optimizer_impl, micro_batch=args.micro_batch, seq_len=args.seq_len, grad_accum=args.grad_accum,
        recompute=args.recompute, recompute_layers=args.recompute_layers, attention=args.attention, loss=args.loss, activation_formula=args.activation_formula,
        implementation=args.implementation, dropout=args.dropout,
        offload_activations=args.offload_activations, checkpoint_save=args.checkpoint_save, compile=args.compile, dp=args.dp, zero=zero, fsdp=args.fsdp,
        gradient_as_bucket_view=args.gradient_as_bucket_view,
        fsdp_shard_group=args.fsdp_shard_group, tp=args.tp, sequence_parallel=args.sequence_parallel,
        pp=args.pp, pp_schedule=args.pp_schedule, pp_virtual_stages=args.virtual_stages, cp=args.cp, ep=args.ep,
        offload=args.offload, gpus_per_node=args.gpus_per_node, lora_rank=args.lora_rank, lora_targets=targets,
        lora_dropout=args.lora_dropout, qlora=args.qlora, batch=args.batch, context=args.context, kv_dtype=resolve_kv_dtype(args),
        cuda_context_bytes=args.cuda_context, allocator_reserve=args.allocator_reserve,
        overhead_fraction=overhead_fraction, overhead_bytes=overhead_bytes,
        **{option: getattr(args, option) for option in ZERO3_DEFAULTS}, shaped_like=shaped_like,
        **{option: getattr(args, option) for option in BUCKET_DEFAULTS}, overlap_comm=args.overlap_comm,
        contiguous_gradients=args.contiguous_gradients,
    )


def shaped_like_of(args: argparse.Namespace, models: dict) -> object:
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
# ZeRO stage 1 in the model. It runs with Megatron's own precisions.
MEGATRON_PRECISIONS = ("megatron-bf16", "megatron-fp16", "te-fp8", "te-fp8-params", "te-mxfp8", "te-nvfp4", "fp32")


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
    if args.mode != "train":
        raise UsageError(f"{flag}: shards optimizer states, which only training has (--mode {args.mode})")
    if precision not in MEGATRON_PRECISIONS:
        raise UsageError(f"{flag}: Megatron-LM's distributed optimizer runs with a Megatron precision "
                         f"({', '.join(MEGATRON_PRECISIONS)}), not --precision {precision}; for DeepSpeed's "
                         "equivalent use --zero 1")
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


def resolve_precision(args: argparse.Namespace) -> tuple[str, str | None]:
    """(policy name, weight dtype override) from --precision, which accepts a dtype when serving."""
    value = args.precision
    if value is None:
        return ("bf16-mixed", None) if args.mode == "train" else ("bf16", None)
    if value in PRECISIONS and not (args.mode == "serve" and value in DTYPE_BYTES):
        return value, None
    if args.mode == "serve" and value in DTYPE_BYTES:
        return "bf16", value
    allowed = ", ".join(PRECISIONS) if args.mode == "train" else ", ".join(DTYPE_BYTES)
    raise UsageError(f"argument --precision: {value!r} is not one of {allowed}")


FLAG_OF_OPTION = {"overhead_fraction": "--overhead", "overhead_bytes": "--overhead",
                  "cuda_context_bytes": "--cuda-context", "pp_virtual_stages": "--virtual-stages",
                  "model": "--model", "params": "--params", "recompute_layers": "--recompute-num-layers"}


def flag_for(option: str) -> str:
    """The command-line flag that sets a Config option."""
    return FLAG_OF_OPTION.get(option, "--" + option.replace("_", "-"))


def plain_capacity(text: str) -> Gpu:
    """--gpu given as a size ('80GiB', '24 GB'): a GPU with that much usable memory."""
    try:
        size = parse_size(text)
    except ValueError:
        raise UsageError(f"argument --gpu: {text!r} is neither a catalog GPU (see `python -m builder gpus`) "
                         "nor a size such as 80GiB or 24GB") from None
    if not 0 < size <= 2**50:
        raise UsageError(f"argument --gpu: {text!r} must be a size between 1 byte and 1 PiB")
    return Gpu(text, "The given capacity", size, text, source="given on the command line")


def run_estimate(args: argparse.Namespace) -> int:
    """Print the breakdown (table or JSON), the verdict and any --max answer."""
    config = config_from_args(args)
    gpus = default_gpus()
    if args.gpu is not None and args.gpu not in gpus:
        gpus[args.gpu] = plain_capacity(args.gpu)
    if args.max and not args.gpu:
        raise UsageError("argument --max: needs --gpu to know the capacity")
    if args.phases and config.mode != "train":
        raise UsageError("argument --phases: phases of a step are for training (--mode train)")
    if args.engine:
        return print_engine(args, config, gpus)
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
        raise UsageError(f"argument {flag_for(option)}: {message or option}") from None
    if args.json:
        data = breakdown_json(breakdown, needed, gpus, args.gpu, answer)
        if args.phases:
            data["phases"] = {phase.name: {"bytes": phase.total, "parts": {p.name: p.bytes for p in phase.parts}}
                              for phase in needed.steps}
        print(json.dumps(data, indent=2))
    else:
        print(render_table(breakdown, needed, config, gpus, args.gpu, args.unit, answer))
        if args.phases:
            print(render_phases(needed, config, args.unit))
    return 0


def print_engine(args: argparse.Namespace, config: Config, gpus: dict[str, Gpu]) -> int:
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
            print(run_question(args, config, gpus[args.gpu]))
            return 0
        report, text = run_engine(args, config, gpus[args.gpu])
    except ValueError as error:
        option, _, message = str(error).partition(": ")
        raise UsageError(f"argument {flag_for(option)}: {message or option}") from None
    refused = refusal_of(report)
    if refused:
        raise UsageError(refused)
    print(text)
    return 0


def render_phases(needed: Need, config: Config, unit: str) -> str:
    """The candidate peaks of a step, the one that sets the need marked, with what changes between them."""
    divisor = GiB if unit == "GiB" else GB
    stage = f", pipeline stage: {needed.stage}" if needed.stage != "only" else ""
    lines = ["", f"Peak by phase of a training step ({unit} per GPU{stage}; builder/model/peak.py):"]
    for phase in needed.steps:
        extra = ", ".join(f"{p.name} {p.bytes / divisor:.2f}" for p in phase.parts if p.transient)
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
        return {"question": "seq_len" if config.mode == "train" else "context", "gpu": gpu.id, "value": value}
    plan = min_gpus(config, capacity)
    return {"question": "gpus", "gpu": gpu.id, "value": plan.gpus if plan else None,
            "how": plan.how if plan else "no plan up to 4096 GPUs keeps this strategy within capacity"}


def breakdown_json(breakdown, needed: Need, gpus: dict[str, Gpu], gpu_id: str | None, answer: dict | None) -> dict:
    """The JSON contract: params, per_gpu_bytes (= sum of parts), need_bytes (what `fits` compares), parts,
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


def render_table(breakdown, needed: Need, config: Config, gpus: dict[str, Gpu], gpu_id: str | None, unit: str,
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
    if breakdown.host_parts:
        lines.append(f"  host memory per node: {format_bytes(breakdown.host_total, unit, 2)}")
    targets = [gpus[gpu_id]] if gpu_id else list(gpus.values())
    lines.append("")
    lines.append("  Verdicts compare the need with each GPU's usable capacity"
                 + (" (see --phases)." if needed.peak else "."))
    for gpu in targets:
        fit = Fit(gpu.usable_bytes, needed.bytes)
        lines.append(f"  {gpu.display} ({format_bytes(gpu.usable_bytes, unit, 1)} usable): {fit.verdict(unit)}")
    if answer is not None:
        lines.append("")
        lines.append(f"  {describe_answer(answer)}")
    notes = list(breakdown.notes) + [f"{p.name}: {p.simplification}" for p in breakdown.parts if p.simplification]
    if notes:
        lines.append("")
        lines.extend(f"  note: {n}" for n in notes)
    return "\n".join(lines)


def describe_answer(answer: dict) -> str:
    """--max answer in words."""
    gpu = answer["gpu"]
    if answer["value"] is None:
        what = "GPU count" if answer["question"] == "gpus" else answer["question"].replace("_", " ")
        return f"no {what} fits on {gpu}" + (f" ({answer['how']})" if "how" in answer else "")
    if answer["question"] == "gpus":
        return f"fewest GPUs on {gpu}: {answer['value']} ({answer['how']})"
    return f"largest {answer['question'].replace('_', ' ')} that fits on {gpu}: {answer['value']}"


# ---------------------------------------------------------------------------------------
# catalogs
# ---------------------------------------------------------------------------------------

def run_models(args: argparse.Namespace) -> int:
    """List catalog models with their parameter counts."""
    models = default_models()
    if args.json:
        rows = {k: {"display": a.extra.get("display", k), "params": param_count(a),
                    "active_params": active_param_count(a), "layers": a.layers, "hidden": a.hidden,
                    "heads": a.heads, "kv_heads": a.n_kv_heads, "vocab": a.vocab, "source": a.source}
                for k, a in models.items()}
        print(json.dumps(rows, indent=2))
        return 0
    for model_id, arch in models.items():
        active = f" ({active_param_count(arch):,} active)" if arch.is_moe else ""
        print(f"{model_id:<16} {param_count(arch):>17,} params{active}  L={arch.layers} h={arch.hidden} "
              f"a={arch.heads} kv={arch.n_kv_heads} V={arch.vocab}")
    return 0


def run_gpus(args: argparse.Namespace) -> int:
    """List catalog GPUs with usable capacity in GiB and GB."""
    gpus = default_gpus()
    if args.json:
        print(json.dumps({k: {"display": g.display, "usable_bytes": g.usable_bytes, "marketing": g.marketing,
                              "source": g.source} for k, g in gpus.items()}, indent=2))
        return 0
    for gpu_id, gpu in gpus.items():
        print(f"{gpu_id:<10} {gpu.display:<22} usable {format_bytes(gpu.usable_bytes, 'GiB', 2):>11} "
              f"= {format_bytes(gpu.usable_bytes, 'GB', 2):>10}  (sold as {gpu.marketing})")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments and run the subcommand; usage errors exit 2 with one line."""
    parser = make_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except (UsageError, CatalogError) as error:
        print(f"python -m builder {args.command}: error: {clip(str(error))}", file=sys.stderr)
        return 2
