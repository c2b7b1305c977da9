"""Answer the authors' exercises with the memory model: the number asked for and its worked steps.

An exercise (builder.content.ExerciseDefinition) names a configuration, read exactly as a chart's bar
(builder.grids.make_config: presets, config keys, ranges), and what it asks for (`ask`):

    a part or a bucket         'optimizer/adam_m', 'optimizer', 'kv_cache', ...: those parts' bytes per GPU
    several, joined by '+'     'activations/attention + activations/attention_scores': their parts' bytes added
    model-states               weights + master copy + gradients + optimizer states per GPU
    sum                        every part per GPU added up
    need                       what the run needs per GPU (the peak of a step, reserved parts included)
    max-micro-batch            the largest micro-batch (serving: batch) whose need fits `gpu`
    max-seq-len                the longest sequence (serving: context) whose need fits `gpu`

The steps are the parts' own formulas, per-unit rules and sources, so a model fix changes every answer.
Nothing here renders HTML (templates/partials/exercise.html does).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from builder.catalog import Gpu
from builder.content import ContentError, ExerciseDefinition, Page, Preset
from builder.grids import make_config
from builder.model import Breakdown, Config, GB, GiB
from builder.model.architecture import Architecture
from builder.model.breakdown import Part
from builder.model.partnames import reader_name
from builder.model.peak import assess, need
from builder.model.questions import Fit, max_micro_batch, max_seq_len

MODEL_STATE_BUCKETS = ("weights", "master", "gradients", "optimizer")
ASKS = {
    "model-states": "model states per GPU (weights, master copy, gradients and optimizer states)",
    "sum": "memory per GPU, every part added up",
    "need": "what the run needs per GPU (the peak of a step with the reserved parts)",
    "max-micro-batch": "the largest micro-batch that fits",
    "max-seq-len": "the longest sequence that fits",
}
FIT_ASKS = ("max-micro-batch", "max-seq-len")
# Reader's words for the configuration keys an exercise sets (a key not listed is shown with spaces for '_').
SETTING_WORDS = {"model": "model", "params": "parameters", "precision": "precision", "optimizer": "optimizer",
                 "zero": "ZeRO stage", "fsdp": "FSDP strategy", "dp": "data-parallel GPUs",
                 "tp": "tensor-parallel GPUs", "pp": "pipeline stages", "cp": "context-parallel GPUs",
                 "ep": "expert-parallel GPUs", "micro_batch": "micro-batch", "seq_len": "sequence length",
                 "recompute": "recomputation", "attention": "attention", "mode": "mode", "batch": "batch",
                 "context": "context", "kv_dtype": "KV-cache dtype", "lora_rank": "LoRA rank",
                 "grad_accum": "gradient accumulation", "offload": "offload", "loss": "loss",
                 "optimizer_impl": "optimizer step", "qlora": "QLoRA", "sequence_parallel": "sequence parallel",
                 "checkpoint_save": "checkpoint save"}


@dataclass(frozen=True)
class Step:
    """One line of a worked answer: what is computed, and its value."""

    text: str
    source: str = ""


@dataclass(frozen=True)
class Exercise:
    """An exercise with its answer worked out by the model."""

    exercise_id: str
    question: str  # Markdown, as the author wrote it
    settings: tuple[tuple[str, str], ...]  # the configuration in a reader's words
    value: int | None  # the number asked for: bytes, or a micro-batch, batch or length (None: nothing fits)
    answer: str  # the number asked for, with its unit (GiB and GB both named)
    steps: tuple[Step, ...]
    line: int


def amount(n_bytes: int, unit: str) -> str:
    """'3.74 GiB (4.02 GB, 4,015,130,624 bytes)': the exercise's unit first, the other named beside it."""
    gib, gb = f"{n_bytes / GiB:,.2f} GiB", f"{n_bytes / GB:,.2f} GB"
    first, second = (gib, gb) if unit == "GiB" else (gb, gib)
    return f"{first} ({second}, {n_bytes:,} bytes)"


def short(n_bytes: int, unit: str) -> str:
    """'3.74 GiB': a step's amount in the exercise's unit."""
    return f"{n_bytes / (GiB if unit == 'GiB' else GB):,.2f} {unit}"


def describe_settings(settings: dict[str, Any], config: Config) -> tuple[tuple[str, str], ...]:
    """The exercise's own settings (preset and overrides), in order, with reader's words and values."""
    described = []
    for key, value in settings.items():
        if key == "model" and isinstance(config.model, Architecture):
            value = config.model.extra.get("display", config.model.name)
        elif key == "params":
            value = f"{int(config.params or 0):,}"
        elif isinstance(value, bool):
            value = "yes" if value else "no"
        described.append((SETTING_WORDS.get(key, key.replace("_", " ")), str(value)))
    return tuple(described)


def part_step(part: Part, unit: str) -> Step:
    """A part's own formula, per-unit rule and sharding, with its bytes."""
    shared = f", split over {part.sharded_by} GPUs" if part.sharded_by > 1 else ""
    per_unit = f" at {part.per_unit}" if part.per_unit else ""
    return Step(f"{reader_name(part.name)}: {part.formula}{per_unit}{shared} = {short(part.bytes, unit)}", part.source)


def where_step(breakdown: Breakdown, parts: list[Part]) -> Step:
    """The parameter count, and the symbols the parts' formulas use with this configuration's values."""
    formulas = " ".join(p.formula for p in parts)
    used = [f"{name}: {meaning}" for name, meaning in breakdown.where.items()
            if re.search(rf"(?<![\w(]){re.escape(name)}(?![\w(])", formulas)]
    return Step(f"The model has {breakdown.params:,} parameters." + (f" Symbols: {'; '.join(used)}." if used else ""))


def parts_answer(parts: list[Part], breakdown: Breakdown, unit: str, what: str) -> tuple[int, str, list[Step]]:
    """The sum of some parts, one step per part."""
    total = sum(p.bytes for p in parts)
    steps = [where_step(breakdown, parts)] + [part_step(p, unit) for p in parts]
    if len(parts) > 1:
        steps.append(Step(f"{what}: " + " + ".join(short(p.bytes, unit) for p in parts) + f" = {short(total, unit)}"))
    return total, amount(total, unit), steps


def answer(ask: str, config: Config, gpu: Gpu | None, unit: str) -> tuple[int | None, str, list[Step]]:
    """The answer to `ask` for `config`: its value, in words, and its worked steps (raises ValueError with a
    reason)."""
    if ask in FIT_ASKS:
        return fit_answer(ask, config, gpu, unit)
    breakdown, needed = assess(config)
    if ask == "sum":
        return parts_answer(list(breakdown.parts), breakdown, unit, "Sum of parts")
    if ask == "model-states":
        parts = [p for p in breakdown.parts if p.bucket in MODEL_STATE_BUCKETS]
        return parts_answer(parts, breakdown, unit, "Model states")
    if ask == "need":
        _, _, steps = parts_answer(list(breakdown.parts), breakdown, unit, "Sum of parts")
        for phase in needed.steps:
            steps.append(Step(f"Live at the {phase.title}: {short(phase.total, unit)}"))
        steps.append(Step(f"Need: {needed.basis}, reserved parts included = {short(needed.bytes, unit)}"))
        if gpu is not None:
            steps.append(Step(f"{gpu.display} has {short(gpu.usable_bytes, unit)} usable: the run "
                              f"{Fit(gpu.usable_bytes, needed.bytes).verdict(unit)}"))
        return needed.bytes, amount(needed.bytes, unit), steps
    names = [name.strip() for name in ask.split("+")]
    parts: list[Part] = []
    for name in names:
        matched = [p for p in breakdown.parts if p.name == name or p.name.startswith(name + "/")]
        if not matched:
            known = ", ".join(sorted({p.name for p in breakdown.parts} | {p.bucket for p in breakdown.parts}))
            raise ValueError(f"this configuration has no memory under {name!r} (it has: {known}; or ask for "
                             f"{', '.join(ASKS)})")
        parts += [p for p in matched if all(p is not q for q in parts)]
    return parts_answer(parts, breakdown, unit, f"Together ({' and '.join(reader_name(n) for n in names)})")


def fit_answer(ask: str, config: Config, gpu: Gpu | None, unit: str) -> tuple[int | None, str, list[Step]]:
    """The largest micro-batch or longest sequence whose need fits the GPU, with the needs on either side."""
    if gpu is None:
        raise ValueError(f"ask: {ask} needs a gpu (e.g. gpu: h100-80gb)")
    serving = config.mode == "serve"
    field = {"max-micro-batch": "batch" if serving else "micro_batch",
             "max-seq-len": "context" if serving else "seq_len"}[ask]
    words = {"micro_batch": "micro-batch", "batch": "batch", "seq_len": "sequence length", "context": "context"}[field]
    search = max_micro_batch if ask == "max-micro-batch" else max_seq_len
    best = search(config, gpu.usable_bytes)
    capacity = f"{gpu.display} has {short(gpu.usable_bytes, unit)} usable"
    if best is None:
        first = need(config.with_changes(**{field: config.cp if field == "seq_len" else 1}))
        return None, "none: even the smallest does not fit", [Step(f"{capacity}; the smallest {words} needs "
                                                            f"{short(first.bytes, unit)} ({first.basis})")]
    step = config.cp if field == "seq_len" else 1
    at_best = need(config.with_changes(**{field: best}))
    above = need(config.with_changes(**{field: best + step}))
    steps = [Step(capacity + "."),
             Step(f"{words.capitalize()} {best:,}: the run needs {short(at_best.bytes, unit)} ({at_best.basis}), "
                  "which fits."),
             Step(f"{words.capitalize()} {best + step:,}: it needs {short(above.bytes, unit)}, which does not."),
             Step(f"The need only grows with the {words}, so every larger one does not fit either.")]
    return best, f"{words} {best:,}", steps


def evaluate_exercise(exercise: ExerciseDefinition, page: Page, presets: dict[str, Preset],
                      models: dict[str, Architecture], gpus: dict[str, Gpu]) -> tuple[Exercise | None,
                                                                                   list[ContentError]]:
    """The exercise answered, or the errors (each 'path:line: message') that stop it."""
    what = f"exercise {exercise.exercise_id}"
    config, errors = make_config(exercise.bar, presets, models, page.path, what)
    gpu = None
    if exercise.gpu is not None:
        gpu = gpus.get(exercise.gpu)
        if gpu is None:
            errors.append(ContentError(page.path, exercise.lines.get("gpu", exercise.line),
                                       f"{what}: unknown GPU {exercise.gpu!r} (see content/gpus.toml)"))
    if config is None or errors:
        return None, errors
    try:
        value, answer_text, steps = answer(exercise.ask, config, gpu, exercise.unit)
    except ValueError as error:
        return None, [ContentError(page.path, exercise.lines.get("ask", exercise.line), f"{what}: {error}")]
    settings = dict(presets[exercise.bar.preset].settings) if exercise.bar.preset in presets else {}
    settings.update(exercise.bar.settings)
    return Exercise(exercise_id=exercise.exercise_id, question=exercise.question,
                    settings=describe_settings(settings, config), value=value, answer=answer_text,
                    steps=tuple(steps), line=exercise.line), []


def evaluate_page_exercises(page: Page, presets: dict[str, Preset], models: dict[str, Architecture],
                            gpus: dict[str, Gpu]) -> tuple[dict[str, Exercise], list[ContentError]]:
    """Every exercise of a page answered (in front-matter order), and all errors."""
    answered, errors = {}, []
    for exercise_id, exercise in page.exercises.items():
        result, exercise_errors = evaluate_exercise(exercise, page, presets, models, gpus)
        errors += exercise_errors
        if result is not None:
            answered[exercise_id] = result
    return answered, errors
