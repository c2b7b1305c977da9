"""`estimate --mode serve --engine vllm`: the engine's startup accounting, in the engine's own flags and words.

Flags carry vLLM's names (`vllm serve --help`): --gpu-memory-utilization, --max-model-len, --max-num-seqs,
--max-num-batched-tokens, --block-size, --enforce-eager, --kv-cache-memory. The model is
builder.model.engines; this module only parses, checks and prints.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, Callable

from builder.catalog import Gpu
from builder.model.config import Config
from builder.model.engines import (AVAILABLE_LINE, ENGINES, LOG_LINE, VLLM_VERSION, EngineReport, EngineSettings,
                                   engine_report)
from builder.model.units import format_bytes

ENGINE_FLAGS = ("gpu_memory_utilization", "max_model_len", "max_num_seqs", "max_num_batched_tokens", "block_size",
                "enforce_eager", "kv_cache_memory")


def add_engine_arguments(parser: argparse.ArgumentParser, whole: Callable, size: Callable) -> None:
    """The engine group of `estimate` (whole: a count type, size: a byte-size type)."""
    engine = parser.add_argument_group("inference engine (with --mode serve; vLLM's own flag names)")
    engine.add_argument("--engine", choices=ENGINES, default=None,
                        help="size the KV cache as the engine does at startup (needs --gpu)")
    engine.add_argument("--gpu-memory-utilization", type=float, default=None, metavar="F",
                        help="share of the GPU's memory the engine requests, in (0, 1] (vLLM default 0.92)")
    engine.add_argument("--max-model-len", type=whole, default=None, metavar="TOKENS",
                        help="tokens per request (default: --context)")
    engine.add_argument("--max-num-seqs", type=whole, default=None, metavar="N",
                        help="requests per step (vLLM default: 1024 on H100/H200-class GPUs, else 256)")
    engine.add_argument("--max-num-batched-tokens", type=whole, default=None, metavar="N",
                        help="tokens per step (vLLM default: 8192 on H100/H200-class GPUs, else 2048)")
    engine.add_argument("--block-size", type=whole, default=16, metavar="TOKENS", help="tokens per KV-cache block")
    engine.add_argument("--enforce-eager", action="store_true", help="no CUDA graphs")
    engine.add_argument("--kv-cache-memory", type=size, default=None, metavar="SIZE",
                        help="bytes for the KV cache, given instead of profiled (e.g. 6.51GiB)")


def engine_flags_given(args: argparse.Namespace) -> list[str]:
    """The engine flags set away from their defaults (they mean nothing without --engine)."""
    parser = args.estimate_parser
    return ["--" + dest.replace("_", "-") for dest in ENGINE_FLAGS if getattr(args, dest) != parser.get_default(dest)]


def settings_from_args(args: argparse.Namespace) -> EngineSettings:
    return EngineSettings(engine=args.engine, gpu_memory_utilization=args.gpu_memory_utilization,
                          max_model_len=args.max_model_len, max_num_seqs=args.max_num_seqs,
                          max_num_batched_tokens=args.max_num_batched_tokens, block_size=args.block_size,
                          enforce_eager=args.enforce_eager, kv_cache_memory=args.kv_cache_memory)


def report_json(report: EngineReport, gpu: Gpu) -> dict[str, Any]:
    """The engine's numbers as --json gives them."""
    v = report.values
    return {"engine": report.engine, "engine_version": VLLM_VERSION, "gpu": gpu.id, "gpu_total_bytes": v["gpu_total"],
            "gpu_memory_utilization": float(v["gpu_memory_utilization"]), "requested_bytes": int(v["requested"]),
            "max_model_len": v["max_model_len"], "max_num_seqs": v["max_num_seqs"],
            "max_num_batched_tokens": v["max_num_batched_tokens"], "block_size": v["block_size"],
            "stage": report.stage, "kv_cache_bytes": max(0, int(v["available"])), "num_blocks": int(v["num_blocks"]),
            "kv_cache_tokens": int(v["kv_cache_tokens"]), "max_concurrency": round(float(v["max_concurrency"]), 4),
            "needed_bytes": int(v["needed"]), "fits": report.fits, "error": v["error"],
            "parts": {p.name: p.bytes for p in report.parts},
            "sources": {p.name: p.source for p in report.parts}}


def render_report(report: EngineReport, config: Config, gpu: Gpu, unit: str) -> str:
    """The engine's startup breakdown and its own log lines."""
    v = report.values
    name = config.model.extra.get("display", config.model.name) if config.model else "model"
    lines = [f"{name} served by {VLLM_VERSION} on {gpu.display} ({format_bytes(v['gpu_total'], unit, 2)} total): "
             f"requests ceil(total x {float(v['gpu_memory_utilization']):g}) = {format_bytes(v['requested'], unit, 2)}"]
    width = max(len(p.name) for p in report.parts)
    for p in report.parts:
        note = f"  ({p.simplification})" if p.simplification else ""
        lines.append(f"  {p.name:<{width}}  {format_bytes(p.bytes, unit, 2):>12}  {p.per_unit}{note}")
    lines.append(AVAILABLE_LINE.format(v["available_gib"]))
    lines.append(LOG_LINE.format(int(v["kv_cache_tokens"]), v["max_model_len"], float(v["max_concurrency"])))
    if report.stage != "only":
        lines.append(f"(the {report.stage} pipeline stage has the fewest blocks; the engine uses every worker's "
                     "minimum)")
    return "\n".join(lines)


def run_engine(args: argparse.Namespace, config: Config, gpu: Gpu) -> tuple[EngineReport, str]:
    """The report and its text (JSON or table); ValueError names the option at fault."""
    report = engine_report(config, settings_from_args(args), gpu.usable_bytes, gpu.id)
    text = json.dumps(report_json(report, gpu), indent=2) if args.json else render_report(report, config, gpu,
                                                                                          args.unit)
    return report, text
