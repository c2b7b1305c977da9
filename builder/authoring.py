"""The authoring guide's reference, generated from the code's own registries, and a new page's skeleton.

docs/AUTHORING.md is prose written by hand with generated blocks between

    <!-- BEGIN GENERATED: name (python -m builder authoring-guide) -->
    <!-- END GENERATED -->

`python -m builder authoring-guide` rewrites each block from the registries it documents: the
front-matter, chart, grid, exercise, reference and site schemas (builder/content.py), the
placement kinds (builder/render.py), the {{< estimate >}} shortcode's unit rule and options
(builder/prose_numbers.py), the widgets and their options (builder/widgets WIDGETS), the Config
options a bar or exercise may set (builder/grids.py, with builder/model/config.py's own
comments), the questions an exercise may ask (builder/exercises.py) and the catalog fields
(builder/catalog.py, builder/model/architecture.py). A schema key or option without words
here, or words for a key that no longer exists, is an error: the guide cannot fall behind the
code, and tests/test_authoring.py fails when the committed guide differs from the generated one.

`page_skeleton` is what `python -m builder new PAGE-SLUG` writes: valid front matter, one chart
and one exercise, each placed.
"""

from __future__ import annotations

import inspect
import io
import re
import tokenize
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any, Callable

from builder import content as schema
from builder.catalog import GPU_REQUIRED, MODEL_META, Gpu
from builder.model.architecture import Architecture
from builder.model.config import Config
from builder.widgets import WIDGETS

GUIDE = Path("docs/AUTHORING.md")
BEGIN = re.compile(r"^<!-- BEGIN GENERATED: (?P<name>[a-z-]+) \(python -m builder authoring-guide\) -->$")
END = "<!-- END GENERATED -->"


class GuideError(Exception):
    """The guide or a registry cannot be turned into the guide; the message is 'path:line: message'."""


# Words for each schema key: (what it is, a minimal example). Kept beside nothing else on purpose:
# check_words() refuses a key the schema has and these lack, and words for a key it no longer has.
PAGE_WORDS = {
    "title": ("the page's only `<h1>` and its `<title>`", "title: Where training memory goes"),
    "slug": ("the output file's name without `.html`: lowercase words joined by `-`, unique; keep it stable "
             "(links use it)", "slug: model-states"),
    "order": ("position in the navigation, ascending, unique", "order: 2"),
    "summary": ("one sentence under the title, also the `<meta name=\"description\">`",
                "summary: Weights, gradients and optimizer states, byte by byte."),
    "template": (f"one of {', '.join(f'`{t}`' for t in schema.TEMPLATES)} (default `page`)", "template: page"),
    "nav_title": ("a short name for the site navigation (default: the title)", "nav_title: Model states"),
    "presets": ("page-local presets: name -> Config options (see [Presets](#presets))",
                "presets: {small: {model: gpt2, seq_len: 1024}}"),
    "charts": ("chart id -> chart (see [Charts](#charts-and-tables))",
               "charts: {states: {title: Model states, bars: [{label: one GPU}]}}"),
    "exercises": ("exercise id -> exercise (see [Exercises](#exercises))",
                  "exercises: {adam: {question: How much do Adam's states take?, ask: optimizer}}"),
    "takeaways": ("the \"Key takeaways\" box under the summary: 3-5 Markdown lines in the author's words",
                  "takeaways: [\"Mixed-precision Adam needs 16 bytes per parameter, not 8.\"]"),
}
CHART_WORDS = {
    "title": ("the chart's caption and the SVG's `<title>`", "title: Llama 3 8B on one GPU and on eight"),
    "description": ("text before the numbers in the SVG's `<desc>`", "description: Model states shrink under ZeRO-3."),
    "unit": (f"one of {', '.join(f'`{u}`' for u in schema.UNITS)} (default `GiB`, 2^30 bytes; GB is 10^9)",
             "unit: GB"),
    "gpus": ("capacity lines: GPU ids from `content/gpus.toml`", "gpus: [a100-80gb, h100-80gb]"),
    "group_by": (f"one of {', '.join(f'`{g}`' for g in schema.GROUP_BY)} (default `bucket`: weights, gradients, "
                 "...; `part`: every part)", "group_by: part"),
    "example": ("a worked-example box under the chart; `{sum}` is replaced by the first bar's sum of parts as the "
                "model works it out (`{sum:GiB}`, `{sum:GB}` in that unit)",
                "example: \"8.03B parameters x 16 bytes = {sum}\""),
    "also_unit": ("the other of `GiB` and `GB`: every amount is also given in it, e.g. `112.0 GB (104.3 GiB)`",
                  "also_unit: GiB"),
    "aside": ("a part the chart does not quantify (activations of a bare parameter count): an empty dashed box, "
              "of no size, on each bar, with this note", "aside: \"Activations: not counted here.\""),
    "preset": ("a preset every bar starts from", "preset: llama-3-8b-single"),
    "config": ("Config options every bar shares (see [Config options](#config-options))",
               "config: {model: llama-3-8b, seq_len: 4096}"),
    "bars": ("the bars: each a `label`, an optional `preset`, and Config options on top of the chart's "
             "(`arch:` changes the model's shape)", "bars: [{label: 1 GPU}, {label: ZeRO-3, zero: 3, dp: 8}]"),
    "grid": ("instead of `bars`: one bar per value of one Config option (see the grid keys below)",
             "grid: {vary: micro_batch, values: [1, 2, 4]}"),
    "phases": ("true: one training bar drawn as its sum of parts and the bytes live at each phase of a step "
               "(builder/model/peak.py)", "phases: true"),
    "engine": ("one serving bar drawn as an inference engine allocates the GPU at start-up (weights, profile peak, "
               "non-torch memory, CUDA graphs, KV cache, the rest): `engine` (`vllm` or `sglang`), `gpu` (an id or "
               "a size, as `--gpu`) and the engine's own options with the command line's names in snake case; "
               "`{engine}` in `example` is the engine's own log lines",
               "engine: {engine: vllm, gpu: h100-80gb, max_model_len: 32768}"),
}
GRID_WORDS = {
    "vary": ("the Config option that varies", "vary: micro_batch"),
    "values": ("its values, one bar each", "values: [1, 2, 4, 8]"),
    "label": ("each bar's label, with `{value}` (default `<vary> = {value}`)", "label: \"b = {value}\""),
}
EXERCISE_WORDS = {
    "question": ("the question, Markdown", "question: How much do Adam's states take under ZeRO-1 on 8 GPUs?"),
    "ask": ("what is asked (see the table of asks below)", "ask: model-states"),
    "preset": ("a preset the configuration starts from, as a chart's", "preset: llama-3-8b-single"),
    "config": ("Config options, read exactly as a chart bar's", "config: {model: llama-3-8b, zero: 1, dp: 8}"),
    "gpu": ("a GPU id: needed by `max-micro-batch` and `max-seq-len`, optional for `need`", "gpu: h100-80gb"),
    "unit": (f"one of {', '.join(f'`{u}`' for u in schema.UNITS)} (default `GiB`); the answer names the other "
             "too", "unit: GB"),
}
REFERENCE_WORDS = {
    "authors": ("the authors, in the paper's order", "authors = [\"Samyam Rajbhandari\", \"Jeff Rasley\"]"),
    "year": ("the year of publication", "year = 2020"),
    "title": ("the title", "title = \"ZeRO: Memory Optimizations Toward Training Trillion Parameter Models\""),
    "venue": ("where it appeared", "venue = \"SC 2020\""),
    "url": ("a link to it", "url = \"https://arxiv.org/abs/1910.02054\""),
    "arxiv": ("the arXiv id", "arxiv = \"1910.02054\""),
    "note": ("a note shown with the entry", "note = \"Section 3.1: 2 + 2 + 12 bytes per parameter.\""),
    "short": ("how a part's source names the entry (default: 'Surname year', 'A & B year' or 'A et al. year'); "
              "give one for a project's code", "short = \"vLLM 0.27 (6adad08)\""),
}
SITE_WORDS = {
    "title": ("the site's name, in every `<title>` and the header", "title = \"Training Memory, Explained\""),
    "description": ("the home page's `<meta name=\"description\">`", "description = \"Where GPU memory goes.\""),
    "repository": ("a link to the source repository in the footer", "repository = \"https://example.org/repo\""),
    "language": ("the pages' `lang`", "language = \"en\""),
    "footer": ("a line of Markdown in every page's footer", "footer = \"Course staff, 2025.\""),
    "author": ("who citations credit (default: the site's title)",
               "author = \"Training Memory, Explained contributors\""),
    "url": ("the site's public address, ending in `/`: citations pin to `<url>v/<version>/<page>.html` (`build "
            "--url` wins over it; empty: citations give no address)", "url = \"https://example.org/training-memory/\""),
    "released": ("this version's release date, YYYY-MM-DD (the version is pyproject.toml's): in citations, the "
                 "footer and the snapshot banner", "released = \"2026-11-24\""),
}
PLACEMENT_WORDS = {
    "chart": ("a chart of this page's front matter: the SVG, its data table (same numbers, unit stated) and "
              "the formulas with their sources", "{{< chart states >}}"),
    "table": ("the same chart's data table and formulas only, no figure", "{{< table states >}}"),
    "widget": ("an interactive widget (see [Widgets](#widgets)); options are `key=value`, quote values with "
               "spaces", "{{< widget bytes-per-param model=gpt2 >}}"),
    "exercise": ("an exercise of this page's front matter, answered by the model", "{{< exercise adam >}}"),
    "catalog": ("the GPU catalog as a table: the size in each name, nvidia-smi's total, the total a CUDA process "
                "sees (what every verdict uses) and the printouts they come from", "{{< catalog gpus >}}"),
}
OPTION_KIND_WORDS = {"model": "a model id (content/models.toml)", "gpu": "a GPU id (content/gpus.toml)",
                     "gpus": "GPU ids, comma-separated", "preset": "a preset name", "int": "an integer",
                     "number": "a number", "str": "text", "bool": "`true` or `false`"}


# The words for the value of an architecture field (builder.grids.ARCH_FIELDS' kinds).
ARCH_KIND_WORDS = {"optional_int": "an integer, or null", "int": "an integer", "bool": "true or false", "str": "text"}


def check_words(what: str, keys: Any, words: dict[str, Any]) -> None:
    """Every key of a schema has words here, and no words describe a key it lacks."""
    missing = [key for key in keys if key not in words]
    stale = [key for key in words if key not in keys]
    if missing or stale:
        problems = ([f"no words for {', '.join(missing)} (add them to builder/authoring.py)"] if missing else []) + \
            ([f"words for {', '.join(stale)}, which no longer exist"] if stale else [])
        raise GuideError(f"builder/authoring.py:1: {what}: {'; '.join(problems)}")


def cell(text: Any) -> str:
    """Text safe inside a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def code(text: Any) -> str:
    """A code span that holds any text (backticks inside get a longer fence)."""
    text = str(text)
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def table(header: tuple[str, ...], rows: list[tuple[Any, ...]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines)


def schema_table(what: str, keys: dict[str, type], required: tuple[str, ...], words: dict[str, tuple[str, str]]) -> str:
    """Key, value type, required or not, meaning and a minimal example, for one schema of builder/content.py."""
    check_words(what, keys, words)
    return table(("key", "value", "required", "what it is", "example"),
                 [(code(key), schema.type_name(kind), "yes" if key in required else "no", words[key][0],
                   code(words[key][1])) for key, kind in keys.items()])


def field_comments(cls: type) -> dict[str, str]:
    """The comment at the end of each field's line in a dataclass's source: its documentation."""
    source = inspect.getsource(cls)
    comments = {token.start[0]: token.string.lstrip("#").strip()
                for token in tokenize.generate_tokens(io.StringIO(source).readline) if token.type == tokenize.COMMENT}
    found = {}
    for number, line in enumerate(source.splitlines(), start=1):
        match = re.match(r"^    (\w+)\s*:", line)
        if match and number in comments:
            found[match.group(1)] = comments[number]
    return found


def default_of(f: Any) -> str:
    """A field's default, as an author would write it ('' when it has none)."""
    if f.default is not MISSING:
        value = f.default
    elif f.default_factory is not MISSING:  # type: ignore[misc]
        value = f.default_factory()  # type: ignore[misc]
    else:
        return ""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)


def documented_fields(cls: type, names: list[str], where: str) -> list[tuple[Any, str]]:
    """(field, its comment) for the named fields of a dataclass; a field without a comment is an error."""
    comments = field_comments(cls)
    by_name = {f.name: f for f in fields(cls)}
    missing = [name for name in names if not comments.get(name)]
    if missing:
        raise GuideError(f"{where}:1: {cls.__name__}: no comment after field(s) {', '.join(missing)}; "
                         "the authoring guide reads each field's words from its line")
    return [(by_name[name], comments[name]) for name in names]


# The generated blocks --------------------------------------------------------------------

def front_matter_block() -> str:
    """Every front-matter key."""
    return schema_table("front matter", schema.PAGE_KEYS, schema.REQUIRED_PAGE_KEYS, PAGE_WORDS)


def placements_block() -> str:
    """Every placement kind a page body may use."""
    from builder.render import PLACEMENT_KINDS

    check_words("placements", PLACEMENT_KINDS, PLACEMENT_WORDS)
    return table(("placement", "what it shows", "example"),
                 [(code(kind), PLACEMENT_WORDS[kind][0], code(PLACEMENT_WORDS[kind][1])) for kind in PLACEMENT_KINDS])


def estimate_block() -> str:
    """The {{< estimate >}} shortcode: how its value is written and its options (builder/prose_numbers.py)."""
    from builder import prose_numbers

    return "\n\n".join([
        prose_numbers.UNIT_RULE,
        table(("option", "what it does", "example"),
              [(code(key), words, code(example)) for key, (words, example) in prose_numbers.OPTION_WORDS.items()])])


def chart_block() -> str:
    """Every chart key, the grid's keys and the keys of one bar."""
    bar_words = {"label": "the bar's label (required)", "preset": "a preset this bar starts from instead of the chart's"}
    check_words("chart bar", schema.BAR_META_KEYS, bar_words)
    return "\n\n".join([
        schema_table("chart", schema.CHART_KEYS, schema.REQUIRED_CHART_KEYS, CHART_WORDS),
        "A chart has `bars` or `grid`, exactly one. The keys of a `grid`:",
        schema_table("chart grid", schema.GRID_KEYS, ("vary", "values"), GRID_WORDS),
        "Each of `bars` is a mapping of " + ", ".join(f"{code(key)} ({words})" for key, words in bar_words.items())
        + ", and any [Config option](#config-options) or `arch:`."])


def exercise_block() -> str:
    """Every exercise key and every question an exercise may ask."""
    from builder.exercises import ASKS

    return "\n\n".join([
        schema_table("exercise", schema.EXERCISE_KEYS, schema.REQUIRED_EXERCISE_KEYS, EXERCISE_WORDS),
        "What `ask:` may be:",
        table(("ask", "the answer"), [(code(ask), words) for ask, words in ASKS.items()]
              + [("a part or bucket name", "those parts' bytes per GPU, e.g. `optimizer`, `optimizer/adam_m`, "
                                           "`gradients`, `kv_cache`, `activations/attention`"),
                 ("several, joined by `+`", "their parts' bytes added, e.g. "
                                            "`activations/attention + activations/attention_scores`")])])


def option_choices() -> dict[str, str]:
    """Config option -> its allowed values, from the option table (builder.model.options), the precision policies
    and the dtypes a served model's weights may take."""
    from builder.model.config import PRECISIONS
    from builder.model.options import FRONT_MATTER_OPTIONS
    from builder.model.units import DTYPE_BYTES

    choices = {name: ", ".join(map(str, option.choices)) for name, option in FRONT_MATTER_OPTIONS.items()
               if option.choices}
    choices["precision"] = f"training: {', '.join(PRECISIONS)}; serving: {', '.join(DTYPE_BYTES)}"
    return choices


def config_block() -> str:
    """Every Config option a bar, preset or exercise may set (the option table, builder.model.options), with its
    type, allowed values, default, the command line's flag and its words."""
    from builder.model.options import FLAG_OF, FRONT_MATTER_OPTIONS, TYPES

    names = [f.name for f in fields(Config) if f.name in FRONT_MATTER_OPTIONS]
    choices = option_choices()
    rows = []
    for f, words in documented_fields(Config, names, "builder/model/config.py"):
        default = default_of(f)
        kind = FRONT_MATTER_OPTIONS[f.name].type
        value = TYPES[kind] + (", or null" if FRONT_MATTER_OPTIONS[f.name].optional and kind != "model" else "") \
            + (f": {choices[f.name]}" if f.name in choices else "")
        rows.append((code(f.name), value, code(default) if default else "",
                     ", ".join(code(flag) for flag in (FLAG_OF[f.name], *FRONT_MATTER_OPTIONS[f.name].aliases))
                     if f.name in FLAG_OF else "", words))
    return table(("option", "value", "default", "command line", "what it sets"), rows)


def arch_block() -> str:
    """The Architecture fields a bar may change with `arch:`."""
    from builder.grids import ARCH_FIELDS

    return table(("field", "value", "what it is"),
                 [(code(f.name), ARCH_KIND_WORDS[ARCH_FIELDS[f.name]], words)
                  for f, words in documented_fields(Architecture, list(ARCH_FIELDS), "builder/model/architecture.py")])


def widgets_block() -> str:
    """Every widget: what it shows, a minimal placement, and each option with its value and words."""
    check_words("common widget options", schema.COMMON_WIDGET_OPTIONS, schema.COMMON_WIDGET_HELP)
    parts = ["Every widget also takes these options:\n\n" +
             table(("option", "value", "what it sets"),
                   [(code(option), OPTION_KIND_WORDS[kind], schema.COMMON_WIDGET_HELP[option])
                    for option, kind in schema.COMMON_WIDGET_OPTIONS.items()])]
    for spec in WIDGETS.values():
        check_words(f"widget {spec.name} options", spec.options, spec.help)
        if not spec.summary:
            raise GuideError(f"builder/widgets/__init__.py:1: widget {spec.name}: no summary in WIDGETS")
        placement = "{{< widget " + " ".join(filter(None, (spec.name, spec.example))) + " >}}"
        text = [f"#### `{spec.name}`: {spec.title}", "",
                spec.summary + ("" if spec.scripted else " Rendered by the build alone (no script)."), "",
                "```markdown", placement, "```"]
        if spec.options:
            text += ["", table(("option", "value", "what it sets"),
                               [(code(option), OPTION_KIND_WORDS[kind], spec.help[option])
                                for option, kind in spec.options.items()])]
        else:
            text += ["", "No options."]
        if spec.renamed:
            text += ["", "URL keys renamed since a release (a link with the old key still opens the same state, and the "
                     "address is rewritten to the new key): " + ", ".join(f"{code(old)} → {code(new)} (after {release})"
                                                                        for old, (new, release) in spec.renamed.items())
                     + "."]
        parts.append("\n".join(text))
    return "\n\n".join(parts)


def references_block() -> str:
    """Every key of a references.toml entry."""
    return schema_table("reference", schema.REFERENCE_KEYS, schema.REQUIRED_REFERENCE_KEYS, REFERENCE_WORDS)


def site_block() -> str:
    """Every key of site.toml."""
    return schema_table("site", schema.SITE_KEYS, (), SITE_WORDS)


def models_block() -> str:
    """Every field of a models.toml table."""
    names = [f.name for f in fields(Architecture) if f.name not in ("name", "extra")]
    rows = [(code(f.name), "yes" if f.default is MISSING else "no", code(default_of(f)) if default_of(f) else "", words)
            for f, words in documented_fields(Architecture, names, "builder/model/architecture.py")]
    rows += [(code(name), "no", "", words) for name, words in MODEL_META.items()]
    return table(("field", "required", "default", "what it is"), rows)


def gpus_block() -> str:
    """Every field of a gpus.toml table."""
    names = [f.name for f in fields(Gpu) if f.name != "id"]
    return table(("field", "required", "what it is"),
                 [(code(f.name), "yes" if f.name in GPU_REQUIRED else "no", words)
                  for f, words in documented_fields(Gpu, names, "builder/catalog.py")])


def skeleton_block() -> str:
    """What `python -m builder new kv-cache` writes (it picks the first model and GPU of the catalogs; the guide
    shows llama-3-8b and h100-80gb so that it does not change with the catalogs' order)."""
    return "```markdown\n" + page_skeleton("kv-cache", order=9, model="llama-3-8b", gpu="h100-80gb",
                                             model_name="Llama 3 8B") + "```"


BLOCKS: dict[str, Callable[[], str]] = {
    "front-matter": front_matter_block, "placements": placements_block, "estimate": estimate_block,
    "charts": chart_block,
    "config": config_block, "arch": arch_block, "exercises": exercise_block, "widgets": widgets_block,
    "references": references_block, "site": site_block, "models": models_block, "gpus": gpus_block,
    "skeleton": skeleton_block,
}


def generate_guide(text: str, path: str) -> str:
    """The guide with every generated block rewritten; raises GuideError ('path:line: message')."""
    lines = text.splitlines()
    out: list[str] = []
    seen: set[str] = set()
    index = 0
    while index < len(lines):
        line = lines[index]
        out.append(line)
        index += 1
        if not line.startswith("<!-- BEGIN GENERATED"):
            continue
        match = BEGIN.match(line)
        if match is None:
            raise GuideError(f"{path}:{index}: malformed marker; write "
                             "'<!-- BEGIN GENERATED: name (python -m builder authoring-guide) -->'")
        name = match.group("name")
        if name not in BLOCKS:
            raise GuideError(f"{path}:{index}: unknown generated block {name!r} (known: {', '.join(BLOCKS)})")
        if name in seen:
            raise GuideError(f"{path}:{index}: generated block {name!r} appears twice")
        seen.add(name)
        start = index
        while index < len(lines) and lines[index] != END:
            if lines[index].startswith("<!-- BEGIN GENERATED"):
                break
            index += 1
        if index == len(lines) or lines[index] != END:
            raise GuideError(f"{path}:{start}: generated block {name!r} has no '{END}' line")
        out += ["", BLOCKS[name](), ""]
    missing = [name for name in BLOCKS if name not in seen]
    if missing:
        raise GuideError(f"{path}:1: the guide lacks the generated block(s) {', '.join(missing)}")
    return "\n".join(out) + "\n"


# A new page ------------------------------------------------------------------------------

def page_skeleton(slug: str, order: int, model: str, gpu: str, title: str | None = None,
                  model_name: str | None = None, seq_len: int = 2048) -> str:
    """A page that builds as it is: front matter with one chart and one exercise, both placed, and the
    body's sections. `model` and `gpu` are catalog ids; `model_name` is the model as readers know it; `seq_len` a
    sequence the model takes (within a learned position table's rows)."""
    title = title or slug.replace("-", " ").capitalize()
    model_name = model_name or model
    return f"""---
title: {yaml_text(title)}
slug: {slug}
order: {order}
summary: One sentence on what this page explains (it also becomes the page's description).
takeaways:
  - "The first thing a reader should remember, in your words."
  - "The second."
  - "The third."
charts:
  {slug}-states:
    title: {yaml_text(f"{model_name} with mixed-precision AdamW, on one GPU and under ZeRO-3 on eight")}
    unit: GiB
    gpus: [{gpu}]
    config: {{model: {model}, precision: bf16-mixed, optimizer: adamw, seq_len: {seq_len}}}
    bars:
      - {{label: "1 GPU"}}
      - {{label: "ZeRO-3, 8 GPUs", zero: 3, dp: 8}}
exercises:
  {slug}-model-states:
    question: {yaml_text(f"How much memory do the model states of {model_name} take per GPU under ZeRO-1 on 8 GPUs?")}
    ask: model-states
    config: {{model: {model}, precision: bf16-mixed, optimizer: adamw, seq_len: {seq_len}, zero: 1, dp: 8}}
---
Start with the question this page answers. Cite sources by their key in content/references.toml,
write math as LaTeX, and let charts and exercises carry the numbers: the model computes them.

## The idea

{{{{< chart {slug}-states >}}}}

## Exercises

{{{{< exercise {slug}-model-states >}}}}
"""


def yaml_text(text: str) -> str:
    """A YAML scalar for `text`: as it is when plain YAML reads it back unchanged, else double-quoted."""
    import yaml

    try:
        if yaml.safe_load(f"k: {text}") == {"k": text} and "#" not in text:
            return text
    except yaml.YAMLError:
        pass
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
