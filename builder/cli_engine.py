"""`estimate --mode serve --engine vllm|sglang|hf`: the engine's startup accounting, in the engine's own flags and words.

Flags carry each engine's names. vLLM (`vllm serve --help`): --gpu-memory-utilization, --max-model-len,
--max-num-seqs, --max-num-batched-tokens, --block-size, --enforce-eager, --kv-cache-memory,
--vllm-version (the release to model, not a `vllm serve` flag) and --vllm-use-flashinfer-sampler (vLLM's
VLLM_USE_FLASHINFER_SAMPLER environment variable). SGLang
(`python -m sglang.launch_server --help`): --mem-fraction-static, --page-size, --chunked-prefill-size,
--cuda-graph-max-bs, --max-running-requests, --context-length, --swa-full-tokens-ratio and --sglang-version (the
release to model, not a launch_server flag). Hugging Face generate (GenerationConfig and
from_pretrained's words): --cache-implementation, --attn-implementation, --max-new-tokens, --max-cache-len,
--logits-to-keep; its prompt is --batch x --context. The model is builder.model.engines (and engine_sglang,
engine_hf), and their reverse questions (`--max max-model-len`, `--max batch-size`, ...) are
builder.model.engine_questions; this module only parses, checks and prints.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any, Callable

from builder.sources import default_references, source_text
from builder.catalog import Gpu
from builder.model.config import Config
from builder.model.engine_questions import QUESTIONS, EngineAnswer, answer
from builder.model.engines import ENGINES, EngineReport, EngineSettings, engine_gpu_total, engine_report
from builder.model.units import format_bytes

ENGINE_FLAGS = tuple(option for engine in ENGINES.values() for option in engine.options)


class Given(argparse.Action):
    """Record the flag in args.given once its action has run, so that a value typed out equal to its default is told
    apart from no value (--context 4096 given stands for an engine's length flag; left out, the engine's own
    default holds; an option given for a run that does not read it is refused). Every model option uses one of the
    actions below (builder.cli add_model_arguments), and the engines' flags with a value StoreGiven."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        super().__call__(parser, namespace, values, option_string)
        namespace.given = getattr(namespace, "given", frozenset()) | {self.dest}


class StoreGiven(Given, argparse._StoreAction):
    """A flag with a value."""


class StoreTrueGiven(Given, argparse._StoreTrueAction):
    """A switch."""


class BooleanOptionalGiven(Given, argparse.BooleanOptionalAction):
    """A switch with a --no- form."""


def add_engine_arguments(parser: argparse.ArgumentParser, whole: Callable, size: Callable) -> None:
    """--engine, then one group per engine of its own flags, built from the engine's table (whole: a count type,
    size: a byte-size type); a flag's default is EngineSettings' default."""
    engine = parser.add_argument_group("inference engine (with --mode serve)")
    engine.add_argument("--engine", choices=tuple(ENGINES), default=None,
                        help="size the KV cache as the engine does at startup (needs --gpu)")
    types = {"float": float, "whole": whole, "size": size, "count": count, "text": str}
    defaults = {field.name: field.default for field in dataclasses.fields(EngineSettings)}
    for chosen in ENGINES.values():
        group = parser.add_argument_group(f"{chosen.title} (with --engine {chosen.name}; {chosen.title}'s own flag "
                                          "names)")
        for option, kind, metavar, text in chosen.flags:
            flag = "--" + option.replace("_", "-")
            if kind == "switch":
                group.add_argument(flag, action="store_true", help=text)
            elif kind == "choice":
                group.add_argument(flag, choices=chosen.choices[option], default=defaults[option], help=text,
                                   action=StoreGiven)
            else:
                group.add_argument(flag, type=types[kind], default=defaults[option], metavar=metavar, help=text,
                                   action=StoreGiven)


def count(text: str) -> int:
    """A whole number that may be 0 (--logits-to-keep 0 keeps every row)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def engine_flags_given(args: argparse.Namespace, engine: str | None = None) -> list[str]:
    """The engine flags set away from their defaults that `engine` does not take (all of them without one)."""
    parser, own = args.estimate_parser, ENGINES[engine].options if engine else ()
    return ["--" + dest.replace("_", "-") for dest in ENGINE_FLAGS
            if dest not in own and getattr(args, dest) != parser.get_default(dest)]


# The engines' flags for a request's tokens: a --context given stands for them where they are not given; neither
# given, the engine takes the model's own limit (engines.default_length), as vLLM and SGLang do.
LENGTH_FLAGS = ("max_model_len", "context_length")


def settings_from_args(args: argparse.Namespace) -> EngineSettings:
    flags = {flag: getattr(args, flag) for flag in ENGINE_FLAGS}
    if "context" in getattr(args, "given", ()):
        flags |= {flag: flags[flag] or args.context for flag in LENGTH_FLAGS}
    return EngineSettings(engine=args.engine, kv_cache_dtype=args.kv_cache_dtype, **flags)


def report_json(report: EngineReport, gpu: Gpu) -> dict[str, Any]:
    """The engine's numbers as --json gives them."""
    references = default_references()  # each citation printed as its short form and locator
    v, engine = report.values, ENGINES[report.engine]
    return {"engine": report.engine, "engine_version": engine.version_in(v), "gpu": gpu.id,
            "gpu_total_bytes": v["gpu_total"],
            "stage": report.stage, **engine.summary(v), "fits": report.fits, "error": v["error"],
            "parts": {p.name: p.bytes for p in report.parts},
            "sources": {p.name: source_text(p.source, references) for p in report.parts}}


def render_report(report: EngineReport, config: Config, gpu: Gpu, unit: str) -> str:
    """The engine's startup breakdown and its own log lines."""
    v, engine = report.values, ENGINES[report.engine]
    name = config.model.extra.get("display", config.model.name) if config.model else "model"
    total = format_bytes(v["gpu_total"], unit, 2)
    lines = [f"{name} served by {engine.version_in(v)} on {gpu.display} ({total} total):"]
    width = max(len(p.name) for p in report.parts)
    for p in report.parts:
        note = f"  ({p.simplification})" if p.simplification else ""
        lines.append(f"  {p.name:<{width}}  {format_bytes(p.bytes, unit, 2):>12}  {p.per_unit}{note}")
    lines += engine.lines(v)
    if report.stage != "only":
        lines.append(f"(the {report.stage} pipeline stage has the smallest KV cache; the engine uses every worker's "
                     "minimum)")
    return "\n".join(lines)


def run_engine(args: argparse.Namespace, config: Config, gpu: Gpu) -> tuple[EngineReport, str]:
    """The report and its text (JSON or table); ValueError names the option at fault."""
    settings = settings_from_args(args)
    total = engine_gpu_total(settings.engine, gpu)
    report = engine_report(config, settings, total, gpu.id, gpu)
    text = json.dumps(report_json(report, gpu), indent=2) if args.json else render_report(report, config, gpu,
                                                                                          args.unit)
    return report, text


def refusal_of(report: EngineReport, given: frozenset = frozenset()) -> str | None:
    """The usage error of a run the engine would refuse at start-up, naming the flag at fault and any other that
    also moves it (the engine's refused_by), in the engine's own words; None when it starts, or where the engine
    never refuses at start-up (generate runs out of memory mid-call: its report says so)."""
    options = ENGINES[report.engine].refused_by(report.values)
    if report.fits or not options:
        return None
    # A --context given stood in for the engine's length flag (settings_from_args): name the flag typed.
    typed = {option: "context" for option in LENGTH_FLAGS if "context" in given and option not in given}
    flags = ["--" + typed.get(option, option).replace("_", "-") for option in options]
    # The error is named after a flag the user gave; with none of them given, after --engine, listing the flags
    # that would change it (a length flag's stand-in, --context, with it).
    named = [flag for flag, option in zip(flags, options) if typed.get(option, option) in given]
    if not named:  # the length first: left out, it is the model's own limit, the longest an engine takes
        change = " or ".join(flag + (" (or --context)" if option in LENGTH_FLAGS else "")
                             for flag, option in sorted(zip(flags, options), key=lambda p: p[1] not in LENGTH_FLAGS))
        return (f"argument --engine: the engine would refuse this run at its defaults (change {change}): "
                f"{report.values['error']}")
    others = [flag for flag in flags if flag != named[0]]
    also = f" ({', '.join(others)} also moves it)" if others else ""
    return f"argument {named[0]}: the engine would refuse this run{also}: {report.values['error']}"


def question_of(args: argparse.Namespace) -> str | None:
    """What is wrong with `--max` under `--engine` (one line for the usage error), or None: the question must be
    the engine's own and the setting it searches left out."""
    own = [q.name for q in QUESTIONS.values() if q.engine == args.engine]
    question = QUESTIONS.get(args.max)
    if not own:
        return f"argument --max: --engine {args.engine} answers no reverse question; leave --max out"
    if question is None or question.engine != args.engine:
        return f"argument --max: {args.max} is not a question under --engine {args.engine}; ask {', '.join(own)}"
    if getattr(args, question.setting) != args.estimate_parser.get_default(question.setting):
        flag = "--tp" if question.setting == "tp" else question.flag
        return f"argument {flag}: --max {args.max} searches it; leave {flag} out"
    return None


def answer_json(found: EngineAnswer, gpu: Gpu) -> dict[str, Any]:
    """The answer as --json gives it under "max"."""
    q = found.question
    return {"question": q.setting, "flag": q.flag, "gpu": gpu.id, "value": found.value, "asks": found.text}


def run_question(args: argparse.Namespace, config: Config, gpu: Gpu) -> str:
    """The answer to --max under the engine: the engine's report at the answer, then the answer in words (JSON: the
    report's fields with "max"). ValueError names the option at fault."""
    settings = settings_from_args(args)
    found = answer(args.max, config, settings, engine_gpu_total(settings.engine, gpu), gpu.id, gpu)
    if args.json:
        return json.dumps(report_json(found.report, gpu) | {"max": answer_json(found, gpu)}, indent=2)
    asks = found.text[0].upper() + found.text[1:]
    if found.value is None:
        return f"{asks} on {gpu.display}: none (not even 1)"
    at = config.with_changes(tp=found.value) if found.question.setting == "tp" else config
    return (render_report(found.report, at, gpu, args.unit) + f"\n\n{asks} on {gpu.display}: {found.value:,}"
            + (" (the model's own limit: the engine refuses a longer one)" if found.capped else ""))
