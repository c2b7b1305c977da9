"""Turn chart definitions (presets, bars, grids) into model Configs and evaluate them.

A bar's settings are Config field overrides written in front matter or presets.toml:
`model:` is a catalog id (resolved to an Architecture), `params:` a raw count ('8B',
'3.7e9' or an integer), sizes such as `overhead_bytes:` accept '1.5GiB'. Every value is
type-checked against builder.model.Config and range-checked by validate_config; problems
come back as ContentErrors naming the line of the offending option.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Any, Callable

from builder.catalog import Gpu
from builder.charts import ChartBar, ChartSpec
from builder.charts import format_amount as format_chart_amount
from builder.content import BarDefinition, ChartDefinition, ContentError, Page, Preset
from builder.model import Breakdown, Config, validate_config
from builder.model.architecture import Architecture
from builder.model.assumed import assumed_shape
from builder.model.config import MODES
from builder.model.engines import ENGINES, EngineSettings, engine_report, engine_total
from builder.model.estimator import estimate as model_estimate
from builder.model.partnames import reader_name
from builder.model.peak import assess, phases
from builder.model.options import FRONT_MATTER, FRONT_MATTER_OPTIONS, OptionError, option_named, unread
from builder.model.units import clip, parse_count, parse_size

# Config field -> the type of value an author writes for it (builder.model.options: the option table).
FIELD_KINDS: dict[str, str] = {name: option.type for name, option in FRONT_MATTER_OPTIONS.items()}
# Architecture fields a bar may change with `arch: {kv_heads: 32}` (the model's shape, not its identity).
ARCH_FIELDS: dict[str, str] = {
    f.name: {"int": "int", "int | None": "optional_int", "bool": "bool", "str": "str"}[str(f.type)]
    for f in fields(Architecture)
    if f.name not in ("name", "source", "published_params", "extra", "family", "checkpoint_block")
}


class SettingError(ValueError):
    """A setting that cannot become a Config value; `option` names it."""

    def __init__(self, option: str, message: str):
        super().__init__(message)
        self.option = option


@dataclass(frozen=True)
class EvaluatedChart:
    """A chart definition with every bar evaluated by the memory model."""

    definition: ChartDefinition
    spec: ChartSpec
    configs: tuple[Config, ...]


def convert_setting(option: str, value: Any, models: dict[str, Architecture]) -> Any:
    """One front-matter value to the Config field's type, by the option table's reader for its type
    (builder.model.options; raises SettingError naming the option)."""
    try:
        chosen = option_named(option)
    except ValueError as error:
        raise SettingError(option, str(error)) from None
    try:
        if chosen.type == "model" and value is not None:
            if not isinstance(value, str) or value not in models:
                raise ValueError(f"unknown model {clip(repr(value))} (see content/models.toml)")
            return models[value]
        return chosen.read(value)
    except OptionError as error:
        raise SettingError(option, str(error)) from None
    except ValueError as error:
        raise SettingError(option, f"{chosen.spelled(FRONT_MATTER)}: {error}") from None


def convert_kind(kind: str, value: Any) -> Any:
    """An architecture field's value (`arch:` changes): kind is ARCH_FIELDS' (raises ValueError)."""
    if value is None and kind.startswith("optional_"):
        return None
    if kind in ("int", "optional_int"):
        return parse_count(value, low=0)
    if kind == "bool":
        if not isinstance(value, bool):
            raise ValueError(f"must be true or false, got {value!r}")
        return value
    if not isinstance(value, str):
        raise ValueError(f"must be text, got {value!r}")
    return value


def change_architecture(model: Architecture | None, changes: Any) -> Architecture:
    """The model with some shape fields changed, e.g. {kv_heads: 32} (raises ValueError with the reason)."""
    if model is None:
        raise ValueError("needs a catalog model to change (set model: ...)")
    if not isinstance(changes, dict) or not changes:
        raise ValueError(f"must map architecture fields to values, e.g. {{kv_heads: 32}}, got {changes!r}")
    converted = {}
    for key, value in changes.items():
        if key not in ARCH_FIELDS:
            raise ValueError(f"unknown architecture field {key!r} (known: {', '.join(ARCH_FIELDS)})")
        try:
            converted[key] = convert_kind(ARCH_FIELDS[key], value)
        except ValueError as error:
            raise ValueError(f"{key}: {error}") from None
    # A checkpoint quantisation taken away takes its block size with it (checkpoint_block is not a field to change).
    if converted.get("checkpoint_quantization") == "":
        converted["checkpoint_block"] = (0, 0)
    # A changed shape is no longer the published model: drop its published count.
    return model.with_changes(**converted, published_params=None)


def resolve_settings(bar: BarDefinition, presets: dict[str, Preset], path: str
                     ) -> tuple[dict[str, Any], dict[str, tuple[str, int]], list[ContentError]]:
    """Merge the bar's preset under its own settings; each option keeps the file:line it came from."""
    settings: dict[str, Any] = {}
    origins: dict[str, tuple[str, int]] = {}
    if bar.preset is not None:
        preset = presets.get(bar.preset)
        if preset is None:
            known = ", ".join(sorted(presets)) or "none defined"
            line = bar.lines.get("preset", bar.line)
            return {}, {}, [ContentError(path, line, f"unknown preset {bar.preset!r} (known: {known})")]
        settings.update(preset.settings)
        origins.update({key: (preset.path, preset.lines.get(key, preset.line)) for key in preset.settings})
    settings.update(bar.settings)
    origins.update({key: (path, bar.lines.get(key, bar.line)) for key in bar.settings})
    return settings, origins, []


def make_config(bar: BarDefinition, presets: dict[str, Preset], models: dict[str, Architecture], path: str,
                what: str = "", engine: str | None = None) -> tuple[Config | None, list[ContentError]]:
    """The validated Config of one bar, or the errors that stop it (every bad option reported); `what` names
    the bar in them (default "bar 'label'"); `engine`: the engine that serves it (a chart's `engine:`)."""
    what = what or f"bar {bar.label!r}"
    settings, origins, errors = resolve_settings(bar, presets, path)
    if errors:
        return None, errors
    # An option the bar sets itself that its run does not read (the option table's rule, as the command line's).
    mode = settings.get("mode", Config.mode)
    refused = unread(sorted(bar.own & set(settings)), mode, engine if engine in ENGINES else None) \
        if mode in MODES else None  # a mode that is none is refused below
    if refused is not None:
        where = origins.get(refused.option.name, (path, bar.line))
        return None, [ContentError(where[0], where[1], f"{what}: {refused}")]
    arch_changes = settings.pop("arch", None)
    values = {}
    for option, raw in sorted(settings.items()):
        try:
            values[option] = convert_setting(option, raw, models)
        except SettingError as error:
            where = origins.get(option, (path, bar.line))
            errors.append(ContentError(where[0], where[1], f"{what}: {error}"))
    if arch_changes is not None and not errors:
        where = origins.get("arch", (path, bar.line))
        try:
            values["model"] = change_architecture(values.get("model"), arch_changes)
        except ValueError as error:
            errors.append(ContentError(where[0], where[1], f"{what}: arch: {error}"))
    if errors:
        return None, errors
    if values.get("model") is None and values.get("params") and "shaped_like" not in values:
        # the catalog model nearest in size that can take the sequence
        values["shaped_like"] = assumed_shape(models, values["params"], values.get("seq_len", Config.seq_len))
    config = Config(**values)
    try:
        validate_config(config)
    except ValueError as error:
        option, _, reason = str(error).partition(": ")
        where = origins.get(option, (path, bar.line))
        named = FRONT_MATTER_OPTIONS[option].spelled(FRONT_MATTER) if option in FRONT_MATTER_OPTIONS and reason \
            else "value out of range"
        return None, [ContentError(where[0], where[1], f"{what}: {named}: {reason or error}")]
    return config, []


def evaluate_chart(chart: ChartDefinition, page: Page, presets: dict[str, Preset],
                   models: dict[str, Architecture], gpus: dict[str, Gpu],
                   estimate: Callable[[Config], Breakdown]) -> tuple[EvaluatedChart | None, list[ContentError]]:
    """Evaluate every bar of a chart (once per distinct config) and build its ChartSpec."""
    errors = [ContentError(page.path, line, f"chart {chart.chart_id}: unknown GPU {gpu_id!r} (see content/gpus.toml)")
              for gpu_id, line in zip(chart.gpus, chart.gpu_lines or (chart.line,) * len(chart.gpus))
              if gpu_id not in gpus]
    configs, bars = [], []
    for index, bar in enumerate(chart.bars):
        # An engine chart's first bar is served by the engine (engine_kind).
        engine = chart.engine.get("engine", "vllm") if chart.engine and index == 0 else None
        config, bar_errors = make_config(bar, presets, models, page.path, engine=engine)
        errors += bar_errors
        if config is None:
            continue
        try:
            # The model's own estimate has step phases, so its bars carry their need (both from one evaluation); a
            # stand-in estimate (the build tests') has none, and its bars are judged by their sum.
            breakdown, needed = assess(config) if estimate is model_estimate else (estimate(config), None)
        except ValueError as error:
            errors.append(ContentError(page.path, bar.line, f"bar {bar.label!r}: the model rejects it: {error}"))
            continue
        configs.append(config)
        bars.append(ChartBar(label=bar.label, breakdown=breakdown, need=needed.bytes if needed else None))
    log = ""
    for key, make_bars in CHART_KINDS.items():
        if getattr(chart, key) and bars:
            try:
                bars, lines = make_bars(chart, configs, bars, gpus)
                log = " ".join(f"“{line}”" for line in lines) or log
            except ValueError as error:
                errors.append(ContentError(page.path, chart.line, f"chart {chart.chart_id}: {key}: {error}"))
    if errors:
        return None, errors
    chart_gpus = tuple(gpus[g] for g in chart.gpus)
    example = fill_example(chart.example, bars, chart.unit).replace("{engine}", log)
    spec = ChartSpec(chart_id=chart.chart_id, title=chart.title,
                     description=describe_chart(chart, bars, chart_gpus) + (" The engine's lines: " + log if log else ""),
                     bars=tuple(bars), gpus=chart_gpus, unit=chart.unit, example=example, group_by=chart.group_by,
                     also_unit=chart.also_unit, aside=chart.aside)
    return EvaluatedChart(definition=chart, spec=spec, configs=tuple(configs)), []


EXAMPLE_SUM = re.compile(r"\{sum(?::(GiB|GB))?\}")


def fill_example(example: str, bars: list[ChartBar], unit: str) -> str:
    """The worked example with `{sum}` (the first bar's sum of parts in the chart's unit) and `{sum:GiB}` or
    `{sum:GB}` (in that unit) replaced by the amounts the model worked out, so the box is never typed by hand."""
    if not bars:
        return example
    total = bars[0].breakdown.total
    return EXAMPLE_SUM.sub(lambda m: format_chart_amount(total, m.group(1) or unit), example)


def group_amounts(breakdown: Breakdown, group_by: str) -> dict[str, int]:
    """Bytes per row of a chart: per bucket or per part, in stacking order."""
    if group_by == "part":
        return breakdown.as_dict()
    return breakdown.buckets()


def format_amount(n_bytes: int, unit: str) -> str:
    """Bytes in GiB or GB as a plain number: one decimal, two below 1, no unit."""
    value = n_bytes / (2**30 if unit == "GiB" else 10**9)
    if value == 0:
        return "0"
    return f"{value:.2f}" if abs(value) < 1 else f"{value:.1f}"


def phase_bars(config: Config, bar: ChartBar) -> list[ChartBar]:
    """The bar's sum of parts (with its need), then the bytes live at each phase of its training step
    (builder.model.peak); each moment is its own need."""
    whole = bar.breakdown
    bars = [ChartBar(label=bar.label or "sum of all parts", breakdown=whole, need=bar.need)]
    for phase in phases(config, whole):
        bars.append(ChartBar(label=phase.title, breakdown=Breakdown(params=whole.params, parts=phase.parts,
                                                                     trainable_params=whole.trainable_params),
                             total_words="live then"))
    return bars


def phases_kind(chart: ChartDefinition, configs: list[Config], bars: list[ChartBar],
                gpus: dict[str, Gpu]) -> tuple[list[ChartBar], list[str]]:
    """`phases: true`: the first bar, then the bytes live at each phase of its training step."""
    return phase_bars(configs[0], bars[0]), []


def engine_kind(chart: ChartDefinition, configs: list[Config], bars: list[ChartBar],
                gpus: dict[str, Gpu]) -> tuple[list[ChartBar], list[str]]:
    """`engine:`: the first bar as the serving engine accounts for it at start-up, and the log lines it prints."""
    bar, lines = engine_bar(chart.engine, configs[0], bars[0].label, gpus)
    return [bar] + bars[1:], lines


# Chart kinds, the one place they are listed: a chart definition's front-matter key -> how its bars are remade from
# the model's estimate of its bars (returning the bars and the engine's log lines, if any), in this order. A chart
# with none of these keys draws one stacked bar per `bars` entry. How bars are laid out (columns or rows) is
# builder.charts.figure.LAYOUTS.
CHART_KINDS: dict[str, Callable[[ChartDefinition, list[Config], list[ChartBar], dict[str, Gpu]],
                                tuple[list[ChartBar], list[str]]]] = {"phases": phases_kind, "engine": engine_kind}


def engine_gpu_of(gpu: Any, gpus: dict[str, Gpu]) -> Gpu:
    """A chart engine's GPU: a catalog id, or a size as `--gpu` takes it (a GPU with that total)."""
    if isinstance(gpu, str) and gpu in gpus:
        return gpus[gpu]
    try:
        size = parse_size(str(gpu))
    except ValueError:
        raise ValueError(f"gpu: {gpu!r} is neither a catalog GPU (content/gpus.toml) nor a size such as 47.37GiB") \
            from None
    return Gpu(str(gpu), f"a GPU of {gpu}", size, str(gpu), source="given in the chart")


def engine_bar(options: dict[str, Any], config: Config, label: str, gpus: dict[str, Gpu]) -> tuple[ChartBar, list[str]]:
    """One served configuration as the engine allocates the GPU at start-up (builder.model.engines): the bar of
    its parts and the engine's own log lines. The parts divide the GPU's total (each rounded up to a whole byte), so
    the bar is the GPU and needs no capacity line. ValueError names the option."""
    options = dict(options)
    gpu, name = engine_gpu_of(options.pop("gpu"), gpus), options.pop("engine", "vllm")
    if name not in ENGINES:
        raise ValueError(f"engine: {name!r} is not one of {', '.join(ENGINES)}")
    own = ENGINES[name].options
    for key, value in options.items():
        if key not in own:
            raise ValueError(f"{key}: not an option of {ENGINES[name].title} (its options: {', '.join(own)})")
        if key == "kv_cache_memory" and isinstance(value, str):
            options[key] = parse_size(value)
    report = engine_report(config, EngineSettings(engine=name, **options),
                           engine_total(name, gpu.usable_bytes, gpu.driver_total_bytes), gpu.id, gpu)
    if not report.fits:
        raise ValueError(f"the engine would refuse this run: {report.values['error']}")
    breakdown = Breakdown(params=report.values["parameters"], parts=report.parts)
    return ChartBar(label=label, breakdown=breakdown), ENGINES[name].lines(report.values)


def describe_chart(chart: ChartDefinition, bars: list[ChartBar], gpus: tuple[Gpu, ...]) -> str:
    """The chart's text summary (its <desc>): the author's description plus every number drawn."""
    sentences = [chart.description] if chart.description else []
    for bar in bars:
        amounts = group_amounts(bar.breakdown, chart.group_by)
        listed = ", ".join(f"{reader_name(name)} {format_amount(amount, chart.unit)}" for name, amount in amounts.items())
        peak = f"; peak of a step {format_amount(bar.needed, chart.unit)} {chart.unit}" if bar.peak_differs else ""
        also = (f" ({format_amount(bar.breakdown.total, chart.also_unit)} {chart.also_unit})"
                if chart.also_unit else "")
        sentences.append(f"{bar.label}: sum of parts {format_amount(bar.breakdown.total, chart.unit)} {chart.unit}{also} "
                         f"per GPU ({listed}){peak}.")
    if chart.aside:
        sentences.append(chart.aside)
    for gpu in gpus:
        sentences.append(f"{gpu.display} holds {format_amount(gpu.usable_bytes, chart.unit)} {chart.unit}.")
    return " ".join(sentences)
