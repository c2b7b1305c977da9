"""Read the site's content: pages (YAML front matter + Markdown), references, presets, site config.

Everything here is validated strictly and every problem becomes a ContentError that names
the file and line. Nothing here evaluates the memory model or renders HTML (see
builder/grids.py and builder/render.py).

Front matter schema (documented for authors in README.md, "Authoring guide"):

    title: str           required, becomes the page's <h1> and <title>
    slug: str            required, output file name without .html ([a-z0-9-]+), unique
    order: int           required, position in the navigation (ascending), unique
    summary: str         required, one sentence under the title and in <meta description>
    template: str        optional, 'page' (default) or 'references'
    presets: mapping     optional, page-local presets: name -> config overrides
    charts: mapping      optional, chart id -> chart definition (see CHART_KEYS)
    exercises: mapping   optional, exercise id -> exercise (see EXERCISE_KEYS; builder/exercises.py answers it)
    takeaways: list      optional, the "Key takeaways" box: 3-5 short Markdown lines in the author's words
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

SLUG_PATTERN = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
PAGE_KEYS = {"title": str, "slug": str, "order": int, "summary": str, "template": str,
             "nav_title": str, "presets": dict, "charts": dict, "exercises": dict, "takeaways": list}
REQUIRED_PAGE_KEYS = ("title", "slug", "order", "summary")
TEMPLATES = ("page", "references")
CHART_KEYS = {"title": str, "description": str, "unit": str, "gpus": list, "group_by": str,
              "example": str, "preset": str, "config": dict, "bars": list, "grid": dict, "phases": bool}
REQUIRED_CHART_KEYS = ("title",)
UNITS = ("GiB", "GB")
GROUP_BY = ("bucket", "part")
GRID_KEYS = {"vary": str, "values": list, "label": str}
BAR_META_KEYS = ("label", "preset")
# An exercise: the question (Markdown), what it asks for (builder.exercises.ASKS or a part/bucket name), the
# configuration it is about (a preset and/or config overrides, as a chart's), the GPU a fit question needs, the unit.
EXERCISE_KEYS = {"question": str, "ask": str, "preset": str, "config": dict, "gpu": str, "unit": str}
REQUIRED_EXERCISE_KEYS = ("question", "ask")
REFERENCE_KEYS = {"authors": list, "year": int, "title": str, "venue": str, "url": str,
                  "arxiv": str, "note": str}
REQUIRED_REFERENCE_KEYS = ("authors", "year", "title", "url")


@dataclass(frozen=True)
class WidgetSpec:
    """One interactive widget a page may place, and the options it accepts."""

    name: str
    title: str
    options: dict[str, str]  # option -> kind: 'model', 'gpu', 'gpus', 'preset', 'int', 'number', 'str', 'bool'
    scripted: bool = True  # False: server-rendered only, the page loads no widget script for it


# The one registry of widgets (issue 4 implements them; a placement renders the partial
# templates/partials/widget-<name>.html). Add a widget here and give it a partial.
WIDGETS: dict[str, WidgetSpec] = {
    spec.name: spec
    for spec in (
        # Options of the two teaching widgets: see builder/widgets/bytes_per_param.py and memory_budget.py.
        WidgetSpec("bytes-per-param", "Bytes per parameter",
                   {"model": "model", "params": "str", "precision": "str", "optimizer": "str",
                    "zero": "int", "dp": "int", "gpus": "gpus", "presets": "str", "segments": "str",
                    "min_params": "str", "max_params": "str", "title": "str"}),
        WidgetSpec("memory-budget", "Memory budget",
                   {"preset": "preset", "model": "model", "params": "str", "micro_batch": "int", "seq_len": "int",
                    "precision": "str", "gpu": "gpu", "budget": "str", "breakdown": "bool", "title": "str",
                    "min_params": "str", "max_params": "str", "max_batch": "int", "min_seq_len": "int",
                    "max_seq_len": "int"}),
        WidgetSpec("validation", "Validation report", {}, scripted=False),
        WidgetSpec("exercises", "Every page's exercises", {}, scripted=False),
        WidgetSpec("notation", "Notation", {}, scripted=False),
        WidgetSpec("calculator", "Memory calculator", {"preset": "preset", "model": "model", "gpus": "gpus",
                                                        "gpu": "gpu"}),
    )
}


@dataclass(frozen=True)
class ContentError:
    """One problem in the content, reported as 'path:line: message'."""

    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


class BuildFailed(Exception):
    """The build found content errors; nothing was written."""

    def __init__(self, errors: list[ContentError]):
        super().__init__(f"{len(errors)} error(s)")
        self.errors = sorted(set(errors), key=lambda e: (e.path, e.line, e.message))


@dataclass(frozen=True)
class Located:
    """A YAML value together with the line of its key (1-based, in the source file)."""

    value: Any
    line: int
    children: dict[Any, "Located"] = field(default_factory=dict)

    def line_of(self, *keys: Any) -> int:
        """Line of a nested key, falling back to the deepest known parent."""
        node = self
        for key in keys:
            if key not in node.children:
                break
            node = node.children[key]
        return node.line


@dataclass(frozen=True)
class BarDefinition:
    """One bar of a chart: a label and the config overrides it evaluates."""

    label: str
    preset: str | None
    settings: dict[str, Any]  # Config field -> raw value from front matter
    lines: dict[str, int]  # Config field (or 'preset', 'label') -> source line
    line: int


@dataclass(frozen=True)
class ChartDefinition:
    """A chart as the author wrote it in front matter, validated but not evaluated."""

    chart_id: str
    title: str
    description: str
    unit: str
    gpus: tuple[str, ...]
    group_by: str
    example: str
    bars: tuple[BarDefinition, ...]
    line: int
    gpu_lines: tuple[int, ...] = ()
    phases: bool = False  # one training bar, drawn as its sum of parts and the peak of each phase


@dataclass(frozen=True)
class ExerciseDefinition:
    """An exercise as the author wrote it in front matter: validated, not yet answered."""

    exercise_id: str
    question: str
    ask: str
    unit: str
    gpu: str | None
    bar: BarDefinition  # the configuration, read exactly as a chart's bar (preset + config overrides)
    line: int
    lines: dict[str, int] = field(default_factory=dict)  # key ('ask', 'gpu', 'question') -> source line


@dataclass(frozen=True)
class Preset:
    """A named configuration: Config field overrides shared by charts and widgets."""

    name: str
    settings: dict[str, Any]
    lines: dict[str, int]
    path: str
    line: int


@dataclass(frozen=True)
class Reference:
    """One bibliography entry, numbered in file order."""

    key: str
    number: int
    authors: tuple[str, ...]
    year: int
    title: str
    url: str
    venue: str = ""
    arxiv: str = ""
    note: str = ""

    @property
    def anchor(self) -> str:
        """Fragment id on the references page."""
        return f"ref-{self.key}"


@dataclass
class Page:
    """One content/*.md file after front matter validation."""

    path: str
    slug: str
    title: str
    order: int
    summary: str
    template: str
    body: str
    body_line: int  # line of the first body line in the file
    charts: dict[str, ChartDefinition]
    presets: dict[str, Preset]
    nav_title: str = ""  # short name for the site navigation (default: the title)
    exercises: dict[str, ExerciseDefinition] = field(default_factory=dict)
    takeaways: tuple[tuple[str, int], ...] = ()  # (Markdown line, source line), the "Key takeaways" box

    @property
    def url(self) -> str:
        """Relative URL of the page's output file."""
        return f"{self.slug}.html"


# Front matter -------------------------------------------------------------------------

def split_front_matter(text: str) -> tuple[str, str, int] | None:
    """Split '---\\nYAML\\n---\\nbody' into (yaml, body, body_line); None if there is none."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip() != "---":
        return None
    for index in range(1, len(lines)):
        if lines[index].rstrip() in ("---", "..."):
            return "".join(lines[1:index]), "".join(lines[index + 1:]), index + 2
    return None


def locate_node(node: yaml.Node, line: int, offset: int) -> Located:
    """Turn a composed YAML node into Located values with source lines."""
    if isinstance(node, yaml.MappingNode):
        children = {}
        for key_node, value_node in node.value:
            key = yaml.safe_load(yaml.serialize(key_node)) if not isinstance(key_node, yaml.ScalarNode) \
                else construct_scalar(key_node)
            if key in children:  # YAML keeps the last of two equal keys silently; an author means one
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            children[key] = locate_node(value_node, key_node.start_mark.line + 1 + offset, offset)
        return Located({k: v.value for k, v in children.items()}, line, children)
    if isinstance(node, yaml.SequenceNode):
        children = {i: locate_node(item, item.start_mark.line + 1 + offset, offset)
                    for i, item in enumerate(node.value)}
        return Located([c.value for c in children.values()], line, children)
    return Located(construct_scalar(node), line)


def construct_scalar(node: yaml.Node) -> Any:
    """The Python value of one YAML scalar node (safe types only)."""
    return yaml.SafeLoader("").construct_object(node, deep=True)


def parse_yaml(text: str, path: str, offset: int) -> tuple[Located | None, list[ContentError]]:
    """Parse YAML into Located values; syntax errors name the line."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = mark.line + 1 + offset if mark else offset + 1
        problem = getattr(error, "problem", None) or str(error)
        return None, [ContentError(path, line, f"malformed front matter: {problem}")]
    if node is None:
        return Located({}, offset + 1), []
    try:
        return locate_node(node, offset + 1, offset), []
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
        line = mark.line + 1 + offset if mark else offset + 1
        problem = getattr(error, "problem", None) or str(error)
        return None, [ContentError(path, line, f"malformed front matter: {problem}")]


def check_keys(located: Located, schema: dict[str, type], required: tuple[str, ...], what: str,
               path: str) -> list[ContentError]:
    """Errors for unknown, missing and wrongly typed keys of a mapping."""
    errors = []
    if not isinstance(located.value, dict):
        return [ContentError(path, located.line, f"{what} must be a mapping")]
    for key in located.value:
        if key not in schema:
            known = ", ".join(schema)
            errors.append(ContentError(path, located.line_of(key), f"{what}: unknown key {key!r} (known: {known})"))
        elif not type_matches(located.value[key], schema[key]):
            errors.append(ContentError(path, located.line_of(key),
                                       f"{what}: {key} must be {type_name(schema[key])}, "
                                       f"got {located.value[key]!r}"))
    for key in required:
        if key not in located.value:
            errors.append(ContentError(path, located.line, f"{what}: missing required key {key!r}"))
    return errors


def type_matches(value: Any, expected: type) -> bool:
    """isinstance that does not count booleans as integers."""
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, expected)


def type_name(expected: type) -> str:
    """A reader's name for a type."""
    return {str: "text", int: "an integer", dict: "a mapping", list: "a list"}.get(expected, expected.__name__)


# Pages --------------------------------------------------------------------------------

def read_page(path: Path, display_path: str) -> tuple[Page | None, list[ContentError]]:
    """Read and validate one Markdown page; returns the page (None if unusable) and errors."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        return None, [ContentError(display_path, 1, f"cannot read page: {error}")]
    parts = split_front_matter(text)
    if parts is None:
        return None, [ContentError(display_path, 1, "malformed front matter: a page starts with a '---' line, "
                                                    "YAML, and a closing '---' line")]
    front, body, body_line = parts
    located, errors = parse_yaml(front, display_path, offset=1)
    if located is None:
        return None, errors
    if not isinstance(located.value, dict):
        return None, [ContentError(display_path, 2, "malformed front matter: expected key: value lines")]
    errors = check_keys(located, PAGE_KEYS, REQUIRED_PAGE_KEYS, "front matter", display_path)
    if errors:
        return None, errors
    meta = located.value
    errors += check_page_fields(meta, located, display_path)
    presets, preset_errors = read_presets_mapping(located.children.get("presets"), display_path)
    charts, chart_errors = read_charts(located.children.get("charts"), display_path)
    exercises, exercise_errors = read_exercises(located.children.get("exercises"), display_path)
    takeaways, takeaway_errors = read_takeaways(located.children.get("takeaways"), display_path)
    errors += preset_errors + chart_errors + exercise_errors + takeaway_errors
    page = Page(path=display_path, slug=meta["slug"], title=meta["title"].strip(), order=meta["order"],
                summary=meta["summary"].strip(), template=meta.get("template", "page"), body=body,
                body_line=body_line, charts=charts, presets=presets,
                nav_title=str(meta.get("nav_title", "")).strip(), exercises=exercises, takeaways=takeaways)
    return page, errors


def check_page_fields(meta: dict[str, Any], located: Located, path: str) -> list[ContentError]:
    """Value checks on the simple page fields."""
    errors = []
    if not SLUG_PATTERN.match(meta["slug"]):
        errors.append(ContentError(path, located.line_of("slug"),
                                   f"slug {meta['slug']!r} must be lowercase words joined by '-'"))
    if meta.get("template", "page") not in TEMPLATES:
        errors.append(ContentError(path, located.line_of("template"),
                                   f"template must be one of {', '.join(TEMPLATES)}, got {meta['template']!r}"))
    for key in ("title", "summary"):
        if not meta[key].strip():
            errors.append(ContentError(path, located.line_of(key), f"{key} must not be empty"))
    return errors


def read_pages(content_dir: Path, display_root: Path | None = None) -> tuple[list[Page], list[ContentError]]:
    """Read every content/*.md in name order, then check slugs and orders are unique."""
    pages, errors = [], []
    for path in sorted(content_dir.glob("*.md")):
        page, page_errors = read_page(path, display_name(path, display_root))
        errors += page_errors
        if page is not None:
            pages.append(page)
    errors += check_unique(pages, "slug") + check_unique(pages, "order")
    pages.sort(key=lambda p: (p.order, p.slug))
    return pages, errors


def check_unique(pages: list[Page], attribute: str) -> list[ContentError]:
    """Errors for pages that share a slug or an order."""
    seen: dict[Any, Page] = {}
    errors = []
    for page in pages:
        value = getattr(page, attribute)
        if value in seen:
            errors.append(ContentError(page.path, 1, f"{attribute} {value!r} is also used by {seen[value].path}"))
        else:
            seen[value] = page
    return errors


def display_name(path: Path, root: Path | None = None) -> str:
    """Path as shown in error messages: relative to the working directory when possible."""
    for base in (root, Path.cwd()):
        if base is None:
            continue
        try:
            return str(path.resolve().relative_to(base.resolve()))
        except ValueError:
            continue
    return str(path)


# Charts -------------------------------------------------------------------------------

def read_charts(located: Located | None, path: str) -> tuple[dict[str, ChartDefinition], list[ContentError]]:
    """Validate the `charts:` mapping of a page."""
    if located is None:
        return {}, []
    if not isinstance(located.value, dict):
        return {}, [ContentError(path, located.line, "charts must be a mapping of chart id -> definition")]
    charts, errors = {}, []
    for chart_id, node in located.children.items():
        if not isinstance(chart_id, str) or not SLUG_PATTERN.match(chart_id):
            errors.append(ContentError(path, node.line, f"chart id {chart_id!r} must be lowercase words joined by '-'"))
            continue
        chart, chart_errors = read_chart(chart_id, node, path)
        errors += chart_errors
        if chart is not None:
            charts[chart_id] = chart
    return charts, errors


def read_chart(chart_id: str, node: Located, path: str) -> tuple[ChartDefinition | None, list[ContentError]]:
    """Validate one chart definition and expand its bars or grid."""
    what = f"chart {chart_id}"
    errors = check_keys(node, CHART_KEYS, REQUIRED_CHART_KEYS, what, path)
    if errors:
        return None, errors
    spec = node.value
    unit = spec.get("unit", "GiB")
    if unit not in UNITS:
        errors.append(ContentError(path, node.line_of("unit"), f"{what}: unit must be GiB or GB, got {unit!r}"))
    group_by = spec.get("group_by", "bucket")
    if group_by not in GROUP_BY:
        errors.append(ContentError(path, node.line_of("group_by"),
                                   f"{what}: group_by must be bucket or part, got {group_by!r}"))
    gpus = spec.get("gpus", [])
    if not all(isinstance(g, str) for g in gpus):
        errors.append(ContentError(path, node.line_of("gpus"), f"{what}: gpus must be a list of GPU ids"))
    if ("bars" in spec) == ("grid" in spec):
        errors.append(ContentError(path, node.line, f"{what}: give either bars or grid (exactly one)"))
        return None, errors
    base = base_bar(node, path)
    bars, bar_errors = read_bars(node, base, what, path) if "bars" in spec else read_grid(node, base, what, path)
    errors += bar_errors
    phases = spec.get("phases", False)
    if phases and len(bars) != 1:
        errors.append(ContentError(path, node.line_of("phases"), f"{what}: phases needs exactly one bar (the training "
                                   f"configuration whose step is split into phases), got {len(bars)}"))
    if errors:
        return None, errors
    gpu_lines = tuple(node.children["gpus"].children[i].line for i in range(len(gpus))) if gpus else ()
    return ChartDefinition(chart_id=chart_id, title=spec["title"].strip(), description=spec.get("description", "").strip(),
                           unit=unit, gpus=tuple(gpus), group_by=group_by, example=spec.get("example", "").strip(),
                           bars=tuple(bars), line=node.line, gpu_lines=gpu_lines, phases=phases), errors


def base_bar(node: Located, path: str) -> BarDefinition:
    """The chart-level preset and config every bar starts from."""
    config = node.children.get("config", Located({}, node.line))
    settings = dict(config.value) if isinstance(config.value, dict) else {}
    lines = {key: config.line_of(key) for key in settings}
    preset = node.value.get("preset")
    if preset is not None:
        lines["preset"] = node.line_of("preset")
    return BarDefinition(label="", preset=preset, settings=settings, lines=lines, line=node.line)


def read_bars(node: Located, base: BarDefinition, what: str, path: str) -> tuple[list[BarDefinition], list[ContentError]]:
    """Each bar: `label`, optional `preset`, and Config field overrides on top of the chart's."""
    bars_node = node.children["bars"]
    bars, errors = [], []
    if not bars_node.value:
        return [], [ContentError(path, bars_node.line, f"{what}: bars must not be empty")]
    for index, bar_node in bars_node.children.items():
        if not isinstance(bar_node.value, dict) or not isinstance(bar_node.value.get("label"), str):
            errors.append(ContentError(path, bar_node.line, f"{what}: bar {index + 1} needs a text label"))
            continue
        values = dict(bar_node.value)
        label = values.pop("label")
        preset = values.pop("preset", base.preset)
        lines = dict(base.lines) | {key: bar_node.line_of(key) for key in bar_node.value}
        bars.append(BarDefinition(label=label, preset=preset, settings=base.settings | values, lines=lines,
                                  line=bar_node.line))
    return bars, errors


def read_grid(node: Located, base: BarDefinition, what: str, path: str) -> tuple[list[BarDefinition], list[ContentError]]:
    """A grid varies one Config field over a list of values: one bar per value."""
    grid = node.children["grid"]
    errors = check_keys(grid, GRID_KEYS, ("vary", "values"), f"{what} grid", path)
    if errors:
        return [], errors
    vary, values = grid.value["vary"], grid.value["values"]
    if not values:
        return [], [ContentError(path, grid.line_of("values"), f"{what}: grid values must not be empty")]
    template = grid.value.get("label", vary + " = {value}")
    if "{value}" not in template:
        return [], [ContentError(path, grid.line_of("label"), f"{what}: grid label must contain {{value}}")]
    bars = []
    for index, value in enumerate(values):
        lines = dict(base.lines) | {vary: grid.children["values"].line_of(index)}
        bars.append(BarDefinition(label=template.replace("{value}", str(value)), preset=base.preset,
                                  settings=base.settings | {vary: value}, lines=lines,
                                  line=grid.children["values"].line_of(index)))
    return bars, errors


# Exercises and takeaways --------------------------------------------------------------

def read_exercises(located: Located | None, path: str) -> tuple[dict[str, ExerciseDefinition], list[ContentError]]:
    """Validate the `exercises:` mapping of a page (the answers are worked out by builder/exercises.py)."""
    if located is None:
        return {}, []
    if not isinstance(located.value, dict):
        return {}, [ContentError(path, located.line, "exercises must be a mapping of exercise id -> exercise")]
    exercises, errors = {}, []
    for exercise_id, node in located.children.items():
        if not isinstance(exercise_id, str) or not SLUG_PATTERN.match(exercise_id):
            errors.append(ContentError(path, node.line,
                                       f"exercise id {exercise_id!r} must be lowercase words joined by '-'"))
            continue
        what = f"exercise {exercise_id}"
        node_errors = check_keys(node, EXERCISE_KEYS, REQUIRED_EXERCISE_KEYS, what, path)
        if not node_errors:
            spec = node.value
            unit = spec.get("unit", "GiB")
            if unit not in UNITS:
                node_errors.append(ContentError(path, node.line_of("unit"),
                                                f"{what}: unit must be GiB or GB, got {unit!r}"))
            for key in ("question", "ask"):
                if not spec[key].strip():
                    node_errors.append(ContentError(path, node.line_of(key), f"{what}: {key} must not be empty"))
        errors += node_errors
        if not node_errors:
            exercises[exercise_id] = ExerciseDefinition(
                exercise_id=exercise_id, question=spec["question"].strip(), ask=spec["ask"].strip(), unit=unit,
                gpu=spec.get("gpu"), bar=base_bar(node, path), line=node.line,
                lines={key: node.line_of(key) for key in spec})
    return exercises, errors


def read_takeaways(located: Located | None, path: str) -> tuple[tuple[tuple[str, int], ...], list[ContentError]]:
    """The `takeaways:` list: non-empty Markdown lines, each with its source line."""
    if located is None:
        return (), []
    items = [(node.value, node.line) for node in located.children.values()]
    errors = [ContentError(path, line, f"takeaways: each item must be non-empty text, got {value!r}")
              for value, line in items if not isinstance(value, str) or not value.strip()]
    if not items:
        errors.append(ContentError(path, located.line, "takeaways must not be empty"))
    return (() if errors else tuple((value.strip(), line) for value, line in items)), errors


# Presets ------------------------------------------------------------------------------

def read_presets_mapping(located: Located | None, path: str) -> tuple[dict[str, Preset], list[ContentError]]:
    """Page-local presets: name -> mapping of Config field overrides."""
    if located is None:
        return {}, []
    if not isinstance(located.value, dict):
        return {}, [ContentError(path, located.line, "presets must be a mapping of name -> config overrides")]
    presets, errors = {}, []
    for name, node in located.children.items():
        if not isinstance(node.value, dict):
            errors.append(ContentError(path, node.line, f"preset {name!r} must be a mapping of config overrides"))
            continue
        lines = {key: node.line_of(key) for key in node.value}
        presets[name] = Preset(name=name, settings=dict(node.value), lines=lines, path=path, line=node.line)
    return presets, errors


def read_toml(path: Path, display: str) -> tuple[dict[str, Any] | None, str, list[ContentError]]:
    """Parse a TOML file; a syntax error names its line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        return None, "", [ContentError(display, 1, f"cannot read file: {error.strerror}")]
    try:
        return tomllib.loads(text), text, []
    except tomllib.TOMLDecodeError as error:
        match = re.search(r"line (\d+)", str(error))
        return None, text, [ContentError(display, int(match.group(1)) if match else 1, f"invalid TOML: {error}")]


def toml_line(text: str, table: str, key: str | None = None) -> int:
    """Line of `[table]` (or of `key = ` inside it) in TOML text; 1 if not found."""
    header = re.compile(r'^\[\s*"?' + re.escape(table) + r'"?\s*\]\s*$')
    lines = text.splitlines()
    for number, line in enumerate(lines, start=1):
        if header.match(line.strip()):
            if key is None:
                return number
            for offset, inner in enumerate(lines[number:], start=number + 1):
                if inner.strip().startswith("["):
                    break
                if re.match(r"^\s*" + re.escape(key) + r"\s*=", inner):
                    return offset
            return number
    return 1


def read_presets(path: Path, display: str) -> tuple[dict[str, Preset], list[ContentError]]:
    """Site-wide presets from content/presets.toml (optional file): [name] tables of overrides."""
    if not path.exists():
        return {}, []
    data, text, errors = read_toml(path, display)
    if data is None:
        return {}, errors
    presets = {}
    for name, entry in data.items():
        if not isinstance(entry, dict):
            errors.append(ContentError(display, toml_line(text, name), f"preset {name!r} must be a table"))
            continue
        lines = {key: toml_line(text, name, key) for key in entry}
        presets[name] = Preset(name=name, settings=dict(entry), lines=lines, path=display, line=toml_line(text, name))
    return presets, errors


# References ---------------------------------------------------------------------------

def read_references(path: Path, display: str) -> tuple[dict[str, Reference], list[ContentError]]:
    """Bibliography from content/references.toml: [key] tables, numbered in file order."""
    data, text, errors = read_toml(path, display)
    if data is None:
        return {}, errors
    references = {}
    for key, entry in data.items():
        line = toml_line(text, key)
        if not isinstance(entry, dict):
            errors.append(ContentError(display, line, f"reference {key!r} must be a table"))
            continue
        located = Located(entry, line, {k: Located(v, toml_line(text, key, k)) for k, v in entry.items()})
        entry_errors = check_keys(located, REFERENCE_KEYS, REQUIRED_REFERENCE_KEYS, f"reference {key}", display)
        if not SLUG_PATTERN.match(key.replace(".", "-").replace("_", "-")):
            entry_errors.append(ContentError(display, line, f"reference key {key!r} must be letters, digits, '-'"))
        errors += entry_errors
        if not entry_errors:
            references[key] = Reference(key=key, number=len(references) + 1, authors=tuple(entry["authors"]),
                                        year=entry["year"], title=entry["title"], url=entry["url"],
                                        venue=entry.get("venue", ""), arxiv=entry.get("arxiv", ""),
                                        note=entry.get("note", ""))
    return references, errors


# Site configuration -------------------------------------------------------------------

SITE_KEYS = {"title": str, "description": str, "repository": str, "language": str, "footer": str}
SITE_DEFAULTS = {"title": "Training Memory, Explained", "description": "", "repository": "", "language": "en",
                 "footer": ""}


def read_site_config(path: Path, display: str) -> tuple[dict[str, str], list[ContentError]]:
    """Site-wide settings from content/site.toml (optional): title, description, repository, language."""
    if not path.exists():
        return dict(SITE_DEFAULTS), []
    data, text, errors = read_toml(path, display)
    if data is None:
        return dict(SITE_DEFAULTS), errors
    located = Located(data, 1, {k: Located(v, toml_line_of_key(text, k)) for k, v in data.items()})
    errors += check_keys(located, SITE_KEYS, (), "site config", display)
    return SITE_DEFAULTS | {k: v for k, v in data.items() if k in SITE_KEYS}, errors


def toml_line_of_key(text: str, key: str) -> int:
    """Line of a top-level `key =` in TOML text; 1 if not found."""
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip().startswith("["):
            break
        if re.match(r"^\s*" + re.escape(key) + r"\s*=", line):
            return number
    return 1


# Widget placements --------------------------------------------------------------------

def parse_options(text: str) -> dict[str, str]:
    """Parse 'key=value key2="two words"' into a dict of strings (raises ValueError)."""
    options: dict[str, str] = {}
    for match in re.finditer(r'\s*([a-z_][a-z0-9_]*)=("([^"]*)"|[^\s"]+)|\s*(\S+)', text):
        if match.group(4):
            raise ValueError(f"cannot read option {match.group(4)!r} (write key=value)")
        key = match.group(1)
        if key in options:
            raise ValueError(f"option {key!r} given twice")
        options[key] = match.group(3) if match.group(3) is not None else match.group(2)
    return options


def convert_widget_option(kind: str, value: str, catalogs: dict[str, Any]) -> Any:
    """One widget option from text to its value; raises ValueError naming the problem."""
    if kind == "int":
        if not re.fullmatch(r"-?\d+", value):
            raise ValueError(f"must be an integer, got {value!r}")
        return int(value)
    if kind == "number":
        try:
            return float(value)
        except ValueError:
            raise ValueError(f"must be a number, got {value!r}") from None
    if kind == "bool":
        if value not in ("true", "false"):
            raise ValueError(f"must be true or false, got {value!r}")
        return value == "true"
    if kind in ("model", "gpu", "preset"):
        catalog = catalogs[kind]
        if value not in catalog:
            raise ValueError(f"unknown {kind} {value!r}")
        return value
    if kind == "gpus":
        ids = [item for item in value.split(",") if item]
        unknown = [item for item in ids if item not in catalogs["gpu"]]
        if unknown:
            raise ValueError(f"unknown gpu {unknown[0]!r}")
        return ids
    return value
