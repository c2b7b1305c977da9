"""Build the site: gather content, evaluate the model, render, then write everything at once.

One readable pass (makesite/mkdocs style):
  1. fingerprint the inputs; if site/ already holds exactly this build, stop (warm rebuild);
  2. gather: site config, catalogs, presets, references, pages;
  3. evaluate every chart's bars with the memory model and render its SVG;
  4. render every page (Markdown, citations, placements, templates);
  5. bundle static files, and copy the whole site as the pinned snapshot v/<version>/;
  6. write the whole site into a temporary folder beside the output and swap it in (earlier
     snapshots, v/<other version>/, carried over as they are).
Any content error is collected (all of them, as 'path:line: message'); if there is one,
BuildFailed is raised before anything is written, so the previous site/ survives.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TextIO

import minify

from builder.catalog import CatalogError, load_gpus, load_models
from builder.content import (BuildFailed, ContentError, Page, display_name, read_pages, read_presets,
                             read_references, read_site_config)
from builder.exercises import evaluate_page_exercises
from builder.grids import EvaluatedChart, evaluate_chart
from builder.figures import FOLDER as FIGURES, figure_files, figure_name
from builder.citation import bibtex, plain_citation
from builder.release import Release, VersionError, make_release, project_version
from builder.releases import ReleaseRecord, read_records
from builder.snapshot import carry_over, earlier_snapshots, snapshot_outputs
from builder.incremental import BuildMemory, PageOutput, page_keys, shared_key
from builder.catalog_reads import Reads, reads_key, watch
from builder.palette import CHARTS_CSS
from builder.sources import use_references
from builder.widgets import WIDGETS, script_widget
from builder.render import (PageContext, make_markdown, make_templates, render_body, render_figure_page, render_page,
                            render_questions, render_takeaways)

PACKAGE_DIR = Path(__file__).resolve().parent
STYLESHEET = "static/site.css"
PREBUILT_SCRIPT = "static/widgets.js"  # a ready-made script in static/, used when there are no sources
STAMP_NAME = "stamp.json"


@dataclass(frozen=True)
class SitePaths:
    """Where the build reads from and writes to."""

    content: Path
    templates: Path
    static: Path
    out: Path

    @property
    def cache(self) -> Path:
        """Build cache beside the output: '.site-cache' for 'site' (ignored by git)."""
        return self.out.parent / f".{self.out.name}-cache"


@dataclass
class BuildReport:
    """What a build did: files written, time taken, whether it was skipped as unchanged."""

    files: dict[str, int] = field(default_factory=dict)  # relative path -> bytes
    seconds: float = 0.0
    unchanged: bool = False
    warnings: list[str] = field(default_factory=list)
    rendered: list[str] = field(default_factory=list)  # the pages rendered (the others were reused), by path
    changed: list[str] | None = None  # site paths written, changed or removed since the last build (with memory)


@dataclass
class Gathered:
    """Everything read from content/, validated."""

    site: dict[str, str]
    models: dict[str, Any]
    gpus: dict[str, Any]
    presets: dict[str, Any]
    references: dict[str, Any]
    pages: list[Page]
    release: Release
    releases: list[ReleaseRecord]  # content/releases/*.toml, oldest first


def load_estimate() -> Callable:
    """The memory model's estimate function (imported when first needed)."""
    return importlib.import_module("builder.model").estimate


def load_chart_renderer() -> Callable:
    """builder.charts.render_figure."""
    return importlib.import_module("builder.charts").render_figure


# 1. Fingerprint ---------------------------------------------------------------------------

def list_files(folder: Path) -> list[Path]:
    """Every non-hidden file under `folder`, sorted by relative path."""
    if not folder.is_dir():
        return []
    return sorted((p for p in folder.rglob("*") if p.is_file() and not any(
        part.startswith(".") or part == "__pycache__" for part in p.relative_to(folder).parts)),
        key=lambda p: p.relative_to(folder).as_posix())


def input_digests(paths: SitePaths) -> dict[str, str]:
    """'content/index.md', 'builder/build.py', ... -> sha256 of every input file (content, templates, static,
    builder code), in that order."""
    digests = {}
    for label, folder in (("content", paths.content), ("templates", paths.templates), ("static", paths.static),
                          ("builder", PACKAGE_DIR)):
        for path in list_files(folder):
            if label == "builder" and path.suffix != ".py":
                continue
            digests[f"{label}/{path.relative_to(folder).as_posix()}"] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digests


def release_of(url: str | None = None, version: str | None = None) -> str:
    """The release a build makes, in words for fingerprints and keys: the version (pyproject.toml's unless
    given, or the error reading it) and the site address given to the build."""
    try:
        version = version or project_version()
    except VersionError as error:
        version = str(error)
    return f"version {version}\0url {url or ''}"


def fingerprint_inputs(paths: SitePaths, answers: bool = True, digests: dict[str, str] | None = None,
                       release: str = "") -> str:
    """sha256 over every input file (content, templates, static, builder code), the edition built and the
    release (release_of)."""
    digest = hashlib.sha256(b"answers\0" if answers else b"student edition\0")
    digest.update(f"{release}\0".encode())
    for label, value in (input_digests(paths) if digests is None else digests).items():
        digest.update(f"{label}\0".encode())
        digest.update(bytes.fromhex(value))
    return digest.hexdigest()


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes ('' when it is missing)."""
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""


def hash_tree(folder: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file in a built site. A file under several paths (one inode: write_site
    hard-links the snapshot's copies of the latest files, about half of the bytes) is read and hashed once."""
    digests: dict[tuple[int, int], str] = {}  # (device, inode) -> sha256
    hashes = {}
    for path in list_files(folder):
        status = path.stat()
        file = (status.st_dev, status.st_ino)
        if file not in digests:
            digests[file] = hashlib.sha256(path.read_bytes()).hexdigest()
        hashes[path.relative_to(folder).as_posix()] = digests[file]
    return hashes


def is_up_to_date(paths: SitePaths, fingerprint: str) -> bool:
    """True when the output holds exactly the files the last build with these inputs wrote."""
    stamp = paths.cache / STAMP_NAME
    if not stamp.is_file() or not paths.out.is_dir():
        return False
    try:
        recorded = json.loads(stamp.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return False
    return recorded.get("fingerprint") == fingerprint and recorded.get("files") == hash_tree(paths.out)


def write_stamp(paths: SitePaths, fingerprint: str, hashes: dict[str, str] | None = None) -> None:
    """Remember which inputs produced the current output (`hashes`: its hash_tree, when known)."""
    paths.cache.mkdir(parents=True, exist_ok=True)
    stamp = {"fingerprint": fingerprint, "files": hash_tree(paths.out) if hashes is None else hashes}
    (paths.cache / STAMP_NAME).write_text(json.dumps(stamp, indent=1, sort_keys=True), encoding="utf-8")


# 2. Gather --------------------------------------------------------------------------------

def split_catalog_error(error: CatalogError) -> ContentError:
    """A CatalogError's 'path:line: message' as a ContentError."""
    match = re.match(r"^(.*?):(\d+): (.*)$", str(error), re.S)
    if match:
        return ContentError(match.group(1), int(match.group(2)), match.group(3))
    path, _, message = str(error).partition(": ")
    return ContentError(path, 1, message)


def load_catalog(loader: Callable[[Path], dict], path: Path) -> tuple[dict, list[ContentError]]:
    """Run a catalog loader; its error becomes a ContentError."""
    try:
        return loader(Path(display_name(path))), []
    except CatalogError as error:
        return {}, [split_catalog_error(error)]


def load_file(path: Path, function: Callable[..., Any], *args: Any) -> Any:
    """function(*args), which reads the file at `path` (BuildMemory.file_loader reuses unchanged ones)."""
    return function(*args)


def gather_content(paths: SitePaths, reader: Callable | None = None, load: Callable[..., Any] = load_file,
                   url: str | None = None, version: str | None = None) -> tuple[Gathered, list[ContentError]]:
    """Read and validate every content file (each page with `reader`, default read_page; each data file
    through `load`); collect all errors. `url`: the site's address (over site.toml's); `version`: the
    release's version (default: pyproject.toml's)."""
    content = paths.content
    site_toml, models_toml, gpus_toml = content / "site.toml", content / "models.toml", content / "gpus.toml"
    presets_toml, references_toml = content / "presets.toml", content / "references.toml"
    site, errors = load(site_toml, read_site_config, site_toml, display_name(site_toml))
    models, model_errors = load(models_toml, load_catalog, load_models, models_toml)
    gpus, gpu_errors = load(gpus_toml, load_catalog, load_gpus, gpus_toml)
    presets, preset_errors = load(presets_toml, read_presets, presets_toml, display_name(presets_toml))
    references, reference_errors = ({}, []) if not references_toml.exists() else \
        load(references_toml, read_references, references_toml, display_name(references_toml))
    errors = list(errors)
    if url:
        site = {**site, "url": url}  # the printed links' addresses follow the citations'
    try:
        version = version or project_version()
    except VersionError as error:
        version = "0"
        errors.append(split_catalog_error(CatalogError(str(error))))
    release = make_release(site, version, url)
    releases, release_errors = read_records(content / "releases", release)
    errors += release_errors
    pages, page_errors = read_pages(content, reader=reader)
    errors += model_errors + gpu_errors + preset_errors + reference_errors + page_errors
    if not pages and not page_errors:
        errors.append(ContentError(display_name(content), 1, "no pages: add at least one content/*.md"))
    return Gathered(site, models, gpus, presets, references, pages, release, releases), errors


# 3. Evaluate and draw ---------------------------------------------------------------------

def evaluate_page_charts(page: Page, gathered: Gathered, estimate: Callable, catalogs: dict[str, Any] | None = None,
                         evaluate: Callable = evaluate_chart) -> tuple[dict[str, EvaluatedChart], list[ContentError]]:
    """Evaluate every chart defined in a page's front matter (`catalogs`: the model and GPU catalogs the page
    sees, default gathered's; `evaluate`: evaluate_chart or a memo of it)."""
    presets = gathered.presets | page.presets
    catalogs = catalogs or {"model": gathered.models, "gpu": gathered.gpus}
    charts, errors = {}, []
    for chart_id, chart in sorted(page.charts.items()):
        evaluated, chart_errors = evaluate(chart, page, presets, catalogs["model"], catalogs["gpu"], estimate)
        errors += chart_errors
        if evaluated is not None:
            charts[chart_id] = evaluated
    return charts, errors


class ChartQueue:
    """Charts to draw: from the disk cache, else drawn when the page asks for them. Drawing is pure Python (builder/
    charts/svg.py writes the planned drawing out; no matplotlib), a few milliseconds a chart, so it runs in the build
    process: a worker process would cost more CPU to start and to send specs to than it saves. Every request returns
    a function that gives the SVG."""

    def __init__(self, render_chart: Callable, cache: Path | None) -> None:
        self.render_chart, self.cache = render_chart, cache
        self.drawing_code: bytes | None = None  # what every chart's cache key holds besides its spec (drawing_key)

    def request(self, chart: EvaluatedChart) -> Callable[[], str]:
        """The chart from the cache, else a function that draws it (and stores it in the cache)."""
        path = self.cache_path(chart)
        if path is not None and path.is_file():
            return lambda: path.read_text(encoding="utf-8")
        return lambda: self.store(path, self.render_chart(chart.spec))

    def cache_path(self, chart: EvaluatedChart) -> Path | None:
        """Where the chart is memoised: a hash of the spec, the charts code and the renderer."""
        if self.cache is None:
            return None
        key = hashlib.sha256(repr(chart.spec).encode() + self.drawing_key()).hexdigest()
        return self.cache / "charts" / f"{key}.svg"

    def drawing_key(self) -> bytes:
        """The charts code, the palette it writes into every SVG (static/charts.css, through builder/palette.py) and
        the renderer's name: read once a build, not once a chart."""
        if self.drawing_code is None:
            code = sorted((PACKAGE_DIR / "charts").glob("*.py")) + [PACKAGE_DIR / "palette.py", CHARTS_CSS]
            charts_code = b"".join(path.read_bytes() for path in code if path.exists())
            renderer = f"{self.render_chart.__module__}.{self.render_chart.__qualname__}".encode()
            self.drawing_code = charts_code + renderer
        return self.drawing_code

    @staticmethod
    def store(path: Path | None, svg: str) -> str:
        """Write a freshly drawn SVG to the cache and return it."""
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(svg, encoding="utf-8")
        return svg

    def close(self) -> None:
        """Nothing to stop: charts are drawn in this process."""


def request_charts(charts: dict[str, EvaluatedChart], queue: ChartQueue) -> dict[str, Callable[[], str]]:
    """Ask the queue for every chart of a page, in a stable order."""
    return {chart_id: queue.request(chart) for chart_id, chart in sorted(charts.items())}


def draw_charts(page: Page, charts: dict[str, EvaluatedChart], pending: dict[str, Callable[[], str]],
                warnings: list[str]) -> tuple[dict[str, str], list[ContentError]]:
    """SVG for every chart of a page; a renderer failure names the chart that triggered it."""
    svgs, errors = {}, []
    for chart_id, get_svg in pending.items():
        try:
            svgs[chart_id] = get_svg()
        except NotImplementedError:
            warnings.append(f"{page.path}: chart {chart_id}: charts are not implemented yet; "
                                   "the data table is shown without a figure")
        except Exception as error:  # a renderer bug must still name the chart that triggered it
            errors.append(ContentError(page.path, charts[chart_id].definition.line,
                                       f"chart {chart_id}: cannot draw: {type(error).__name__}: {error}"))
    return svgs, errors


# 4. Render --------------------------------------------------------------------------------

def check_charts_placed(page: Page, context: PageContext, body_text: str) -> None:
    """Every chart and exercise defined in front matter must be placed in the body."""
    for chart_id, chart in sorted(page.charts.items()):
        if not re.search(r"\{\{<\s*(chart|table)\s+" + re.escape(chart_id) + r"\s*>\}\}", body_text):
            context.error(chart.line, f"chart {chart_id} is defined but never placed "
                                      f"(add a line {{{{< chart {chart_id} >}}}})")
    for exercise_id, exercise in sorted(page.exercises.items()):
        if not re.search(r"\{\{<\s*exercise\s+" + re.escape(exercise_id) + r"\s*>\}\}", body_text):
            context.error(exercise.line, f"exercise {exercise_id} is defined but never placed "
                                         f"(add a line {{{{< exercise {exercise_id} >}}}})")


@dataclass
class RenderSetup:
    """What every page's rendering shares."""

    gathered: Gathered
    templates: Any
    md: Any
    catalogs: dict[str, Any]
    has_references_page: bool
    has_widget_script: str  # 'sources' (static/widgets/*.js), 'prebuilt' (static/widgets.js) or ''
    report: BuildReport
    log: Callable[[str], None]
    scripts: dict[str, tuple[str, ...]] = field(default_factory=dict)  # script path -> the widgets it holds
    answers: bool = True  # False: the student edition (no answers in the HTML)
    notation_url: str = ""  # the Notation page's URL, when the site has one
    figures: dict[str, bytes] = field(default_factory=dict)  # figures/...: each chart's downloads and embed view
    cache: Path | None = None  # the build cache (rasterised charts)
    memory: BuildMemory | None = None  # the last build's, for chart downloads whose SVG did not change
    what_changed_url: str = ""  # the What changed page's URL, when the site has one
    shared: str = ""  # the key of what every page shares (incremental.shared_key; '' without memory)
    estimates: BuildMemory | None = None  # where the {{< estimate >}} answers are memoised: `memory`, or this build's

    def add(self, output: PageOutput, outputs: dict[str, bytes]) -> None:
        """Take one page's outputs, fresh or reused, into the site."""
        outputs[output.url] = output.html
        self.figures |= output.figures
        self.scripts |= output.scripts
        self.report.warnings += output.warnings
        if output.exercises is not None:
            self.catalogs["exercises"].append(output.exercises)


def collects_exercises(page: Page) -> bool:
    """True for a page that lists every page's exercises (it is rendered after them)."""
    return re.search(r"\{\{<\s*widget\s+exercises\b", page.body) is not None


def compares_releases(page: Page) -> bool:
    """True for a page that compares the key configurations between releases (it reads every page's presets)."""
    return re.search(r"\{\{<\s*widget\s+what-changed\b", page.body) is not None


def render_pages(gathered: Gathered, paths: SitePaths, estimate: Callable, queue: ChartQueue,
                 report: BuildReport, log: Callable[[str], None], skip: set[str] = frozenset(),
                 answers: bool = True, keys: dict[str, str] | None = None, memory: BuildMemory | None = None,
                 templates: Any = None, shared: str = "") -> tuple[dict[str, bytes], dict[str, PageOutput],
                                                                   list[ContentError]]:
    """Every page's HTML, keyed by output path, each page's outputs and all errors. Pages in `skip` are not
    rendered; a page whose key (`keys`) is the one it had in `memory` is reused, not rendered again."""
    notation = next((p for p in gathered.pages if p.slug == "notation"), None)
    what_changed = next((p for p in gathered.pages if p.slug == "what-changed"), None)
    setup = RenderSetup(
        gathered=gathered, templates=templates or make_templates(paths.templates), md=make_markdown(),
        catalogs={"model": gathered.models, "gpu": gathered.gpus, "preset": gathered.presets,
                  "validation_dir": paths.content / "validation", "exercises": [], "answers": answers,
                  "releases": gathered.releases, "pages": gathered.pages, "site_presets": gathered.presets,
                  "references": gathered.references, "release": gathered.release},
        has_references_page=any(p.slug == "references" for p in gathered.pages),
        has_widget_script=widget_script_mode(paths.static),
        report=report, log=log, answers=answers, notation_url=notation.url if notation else "", cache=paths.cache,
        memory=memory, what_changed_url=what_changed.url if what_changed else "", shared=shared)
    use_references(setup.templates, gathered.references)
    keys = keys or {}
    pages = [page for page in gathered.pages if page.path not in skip]
    remembered = memory.pages if memory is not None else {}
    plain = {"model": gathered.models, "gpu": gathered.gpus}
    reused = {page.path: remembered[page.path] for page in pages
              if page.path in remembered and keys.get(page.path) == remembered[page.path].key
              and reads_key(remembered[page.path].reads, plain) == remembered[page.path].reads_key}
    fresh = [page for page in pages if page.path not in reused]
    outputs, results, errors = {}, {}, []
    # Each page to render sees the catalogs through views that note the entries it reads (builder/catalog_reads.py).
    reads = {page.path: Reads() for page in fresh}
    # Evaluate the charts of every page to render and start drawing them, then render the pages (a page that
    # collects the exercises after the others, and reading what their exercises read).
    memo = memory is not None and bool(shared)
    if memo:
        memory.prune(shared)
    setup.estimates = memory if memo else BuildMemory()  # identical command lines are evaluated once a build
    evaluated = {page.path: evaluate_page_charts(
        page, gathered, estimate, watch(plain, reads[page.path]),
        memory.chart_evaluator(shared, plain, reads[page.path]) if memo else evaluate_chart) for page in fresh}
    pending = {path: request_charts(charts, queue) for path, (charts, _) in evaluated.items()}
    for page in sorted(pages, key=collects_exercises):
        if page.path in reused:
            result = reused[page.path]
        else:
            if collects_exercises(page):
                for other in results.values():
                    reads[page.path].add(other.exercise_reads)
            result, page_errors = render_one_page(page, evaluated[page.path], pending[page.path], setup,
                                                  keys.get(page.path, ""), reads[page.path])
            if result is not None:
                read = reads[page.path].frozen()
                result = dataclasses.replace(result, reads=read, reads_key=reads_key(read, plain))
            errors += page_errors
            report.rendered.append(page.path)
        if result is not None:
            results[page.path] = result
            setup.add(result, outputs)
    scripts, script_errors = bundle_scripts(paths.static, setup.scripts, memory.scripts if memory is not None else None)
    outputs |= scripts | setup.figures
    return outputs, results, errors + script_errors


def render_one_page(page: Page, evaluated: tuple[dict[str, EvaluatedChart], list[ContentError]],
                    pending: dict[str, Callable[[], str]], setup: RenderSetup,
                    key: str = "", reads: Reads | None = None) -> tuple[PageOutput | None, list[ContentError]]:
    """One page's outputs (None when it has errors) and its errors; the catalog entries it reads are noted in
    `reads` (those its exercises read, in the output's exercise_reads too)."""
    started = time.perf_counter()
    gathered = setup.gathered
    plain = {"model": gathered.models, "gpu": gathered.gpus}
    reads, exercise_reads = reads or Reads(), Reads()
    watched = watch(plain, reads)
    charts, chart_errors = evaluated
    warnings: list[str] = []
    svgs, draw_errors = draw_charts(page, charts, pending, warnings)
    presets = gathered.presets | page.presets
    exercise_catalogs = watch(plain, exercise_reads)
    exercises, exercise_errors = evaluate_page_exercises(page, presets, exercise_catalogs["model"],
                                                         exercise_catalogs["gpu"])
    reads.add(exercise_reads)
    context = PageContext(page=page, charts=charts, references=gathered.references,
                          catalogs=setup.catalogs | watched | {"preset": presets}, templates=setup.templates, svgs=svgs,
                          exercises=exercises, answers=setup.answers, notation_url=setup.notation_url)
    if setup.memory is not None and setup.shared:
        context.widget_state = setup.memory.widget_states(setup.shared, page, plain, reads)
    if setup.estimates is not None:
        context.estimates = setup.estimates.estimates(setup.shared, plain, reads)
    context.errors += chart_errors + draw_errors + exercise_errors  # the body is still checked, but not rendered
    check_charts_placed(page, context, page.body)
    render_questions(setup.md, context)
    takeaways = render_takeaways(setup.md, context)
    body = render_body(setup.md, context)
    if context.cited and not setup.has_references_page:
        context.error(page.body_line, "citations need a references page (a page with slug: references)")
    if context.errors:
        return None, context.errors
    scripted = sorted({name for name in context.widgets if WIDGETS[name].scripted})
    scripts = {}
    if scripted and setup.has_widget_script:
        script = script_path(scripted) if setup.has_widget_script == "sources" else PREBUILT_SCRIPT
        scripts[script] = tuple(scripted)
    collected = None
    if exercises:
        collected = {"page": page, "exercises": [
            (exercises[exercise_id], context.questions[exercise_id]) for exercise_id in page.exercises]}
    extra = {"stylesheet": STYLESHEET, "scripts": list(scripts), "takeaways": takeaways, "answered": context.answered,
             "references": sorted(gathered.references.values(), key=lambda r: r.number)}
    # The page twice: the latest (linking to its pinned twin) and its snapshot for v/<version>/ (bannered).
    html, snapshot = (
        render_page(setup.templates, page, gathered.pages, gathered.site, body,
                    extra | {"release": release_context(page, gathered.release, setup, pinned)}).encode("utf-8")
        for pinned in (False, True))
    figures = {}
    for chart_id, svg in sorted(svgs.items()):
        figures |= (setup.memory.figure_files(figure_files, page.slug, chart_id, svg, setup.cache)
                    if setup.memory is not None else figure_files(page.slug, chart_id, svg, setup.cache))
        embed = render_figure_page(setup.templates, charts[chart_id], svg, page, gathered.site, STYLESHEET)
        figures[f"{FIGURES}/{figure_name(page.slug, chart_id)}.html"] = embed.encode("utf-8")
    setup.log(f"  {page.url:<22} {len(html) / 1024:7.1f} KiB  {time.perf_counter() - started:6.3f} s")
    return PageOutput(key=key, url=page.url, html=html, figures=figures, scripts=scripts, exercises=collected,
                      warnings=tuple(warnings), snapshot=snapshot, exercise_reads=exercise_reads.frozen()), []



def release_context(page: Page, release: Release, setup: RenderSetup, snapshot: bool) -> dict[str, Any]:
    """What the templates say about the release: the version line, the pinned twin (latest pages) or the
    banner and canonical link back (snapshot pages), and the page's citations."""
    up = "../" * release.folder.count("/") + "../"  # from v/<version>/ back to the site root
    return {"version": release.version, "date": release.date, "snapshot": snapshot,
            "pinned": "" if snapshot else release.pinned_path(page.url),
            "latest": up + page.url if snapshot else "",
            "here": page.url if snapshot else release.pinned_path(page.url),  # the pinned twin, from this page
            "what_changed": (up if snapshot else "") + setup.what_changed_url if setup.what_changed_url else "",
            "bibtex": bibtex(release, page.slug, page.url, page.title),
            "citation": plain_citation(release, page.url, page.title)}


# 5. Static files --------------------------------------------------------------------------

def widget_script_mode(static_dir: Path) -> str:
    """'sources' (static/widgets/*.js), 'prebuilt' (static/widgets.js) or '' (no widget script)."""
    return "sources" if widget_sources(static_dir) else "prebuilt" if (static_dir / "widgets.js").is_file() else ""


def widget_sources(static_dir: Path) -> list[Path]:
    """The widget scripts' sources: static/widgets/*.js in name order (00-core.js first)."""
    folder = static_dir / "widgets"
    return sorted(folder.glob("*.js")) if folder.is_dir() else []


def source_widget(path: Path) -> str | None:
    """The widget a source belongs to ('10-bytes-per-param.js' -> 'bytes-per-param'); None: shared by all."""
    return script_widget(path.name)


def script_path(widgets: list[str]) -> str:
    """Where the script for a page using `widgets` goes: one per set, e.g. static/widgets-calculator.js."""
    return "static/widgets-" + "-and-".join(sorted(widgets)) + ".js"


def bundle_scripts(static_dir: Path, wanted: dict[str, tuple[str, ...]], memo: dict[tuple, bytes] | None = None
                   ) -> tuple[dict[str, bytes], list[ContentError]]:
    """Each page's one script: the shared sources plus those of the widgets it uses, nothing else,
    minified; a source that does not parse is an error naming its file and line. `memo` (the last build's, kept
    by BuildMemory; replaced by this build's) gives back a script whose widgets and sources are unchanged."""
    sources = widget_sources(static_dir)
    outputs, errors, fresh = {}, [], {}
    version = hashlib.sha256(b"".join(f"{path}\0".encode() + path.read_bytes() + b"\0" for path in sources)).hexdigest() \
        if memo is not None else ""
    for script, widgets in wanted.items():
        if script == PREBUILT_SCRIPT:
            continue
        key = (script, widgets, version)
        try:
            outputs[script] = fresh[key] = memo[key] if memo and key in memo else \
                minify_script(*bundle_script(page_sources(sources, widgets)))
        except ScriptError as error:
            errors.append(error.error)
    if memo is not None:
        memo.clear()
        memo.update(fresh)
    return outputs, sorted(set(errors), key=str)


def page_sources(sources: list[Path], widgets: tuple[str, ...]) -> list[Path]:
    """The sources of one page's script, in name order: its widgets' own files, plus each shared
    file that defines no top-level name (99-boot.js) or defines a name the chosen files use."""
    # Full-line comments left out: a word in a comment ("written") is not a use of a shared name.
    texts = {path: FULL_LINE_COMMENT.sub("", path.read_text(encoding="utf-8")) for path in sources}
    chosen = {path for path in sources if source_widget(path) in widgets}
    # Each shared file's top-level names, as one pattern matching a use of any of them (None: no names).
    defines = {path: TOP_LEVEL_NAME.findall(texts[path]) for path in sources if source_widget(path) is None}
    uses = {path: names and re.compile(r"(?<![\w$.])(?:" + "|".join(map(re.escape, names)) + r")(?![\w$])")
            for path, names in defines.items()}
    changed = True
    while changed:
        changed = False
        used = "\n".join(texts[path] for path in chosen)
        for path, pattern in uses.items():
            if path not in chosen and (not pattern or pattern.search(used)):
                chosen.add(path)
                changed = True
    return [path for path in sources if path in chosen]


TOP_LEVEL_NAME = re.compile(r"^(?:const|let|function\*?)\s+([\w$]+)", re.M)
FULL_LINE_COMMENT = re.compile(r"^[ \t]*//.*$", re.M)
BUNDLE_HEAD = ['(() => {', '"use strict";']  # the sources share one strict-mode function scope


def bundle_script(sources: list[Path]) -> tuple[str, list[tuple[int, Path]]]:
    """One widget script, readable: the sources in one strict-mode function scope, and where each
    source starts (bundle line, 1-based) so an error in the bundle can name its source's line."""
    lines, starts = list(BUNDLE_HEAD), []
    for path in sources:
        starts.append((len(lines) + 1, path))
        lines += path.read_text(encoding="utf-8").splitlines()
    lines.append("})();")
    return "\n".join(lines) + "\n", starts


class ScriptError(Exception):
    """A widget source does not parse."""

    def __init__(self, error: ContentError):
        super().__init__(str(error))
        self.error = error


def minify_script(text: str, starts: list[tuple[int, Path]]) -> bytes:
    """The bundle minified by tdewolff/minify (pinned; drops comments and whitespace, shortens local
    names): what pages load, about a sixth smaller gzipped; the sources stay readable."""
    try:
        return minify.string("application/javascript", text).encode("utf-8") + b"\n"
    except minify.MinifyError as error:
        message = str(error).splitlines()[0]
        found = re.search(r"on line (\d+)", message)
        line = int(found.group(1)) if found else 0
        # The source holding that bundle line (none: the wrapper's own lines, reported at line 0).
        start, path = next(((s, p) for s, p in reversed(starts) if s <= line), (0, Path("static/widgets")))
        source_line = line - start + 1 if start else 0
        message = re.sub(r" on line \d+ and column \d+", "", message)
        raise ScriptError(ContentError(str(path), source_line, f"the widget script does not parse: {message}")) from None


def minify_stylesheet(path: Path) -> bytes:
    """One stylesheet minified by tdewolff/minify (as the scripts are: comments and whitespace dropped, colours
    and numbers shortened), what every page loads, about 3.6 KB less gzipped (issue 14's page weight); the
    sources keep their comments. A stylesheet it cannot read is an error naming the file."""
    try:
        return minify.string("text/css", path.read_text(encoding="utf-8")).encode("utf-8") + b"\n"
    except minify.MinifyError as error:
        message = str(error).splitlines()[0]
        raise BuildFailed([ContentError(str(path), 0, f"the stylesheet does not parse: {message}")]) from None


def bundle_static(static_dir: Path) -> dict[str, bytes]:
    """static/*.css minified and concatenated into static/site.css (site.css first); other files copied, except
    the widget sources (static/widgets/*.js), which bundle_scripts joins into one script per page."""
    files = list_files(static_dir)
    stylesheets = sorted((p for p in files if p.suffix == ".css" and p.parent == static_dir),
                         key=lambda p: (p.name != "site.css", p.name))
    scripts = widget_sources(static_dir)
    outputs = {}
    if stylesheets:
        outputs[STYLESHEET] = b"".join(minify_stylesheet(p) for p in stylesheets)
    for path in files:
        if path not in stylesheets and path not in scripts:
            outputs["static/" + path.relative_to(static_dir).as_posix()] = path.read_bytes()
    return outputs


# 6. Write ---------------------------------------------------------------------------------

def write_site(outputs: dict[str, bytes], out: Path, linkable: dict[str, tuple[int, int, int]] | None = None,
               keep: list[str] = ()) -> dict[str, tuple[int, int, int]]:
    """Write every file into a temporary folder beside `out`, then swap it in for `out`. A file in `linkable`
    (path -> its signature when last written) whose copy in `out` still has that signature holds these very
    bytes: it is hard-linked instead of written again. So is a file whose bytes are the very object another file
    was written with (the pinned snapshot's copy of a figure, script or stylesheet: about half the files, each a new
    file the file system would otherwise create and fill, ~0.2 ms of CPU apiece). The folders in `keep` (relative
    paths, e.g. earlier snapshots) are copied over from the current `out` as they are. Returns every written file's
    signature (file_signature)."""
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-new-", dir=out.parent))
    linkable = linkable or {}
    signatures = {}
    first: dict[int, Path] = {}  # id of a file's bytes (alive in `outputs` throughout) -> the file made with them
    try:
        carry_over(out, staging, list(keep))
        for relative, data in sorted(outputs.items()):
            target = staging / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            if not (relative in linkable and link_unchanged(out / relative, target, linkable[relative])
                    or id(data) in first and hard_link(first[id(data)], target)):
                target.write_bytes(data)
            first.setdefault(id(data), target)
            signatures[relative] = file_signature(target)
        os.chmod(staging, 0o755)
        swap_folder(staging, out)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return signatures


def file_signature(path: Path) -> tuple[int, int, int]:
    """(inode, size, modification time in ns): changes whenever the file is replaced or written."""
    status = path.stat()
    return status.st_ino, status.st_size, status.st_mtime_ns


def link_unchanged(old: Path, new: Path, signature: tuple[int, int, int]) -> bool:
    """Hard-link `old` as `new` if it is still the file last written (same signature); False otherwise."""
    try:
        if file_signature(old) != signature:
            return False
    except OSError:
        return False
    return hard_link(old, new)


def hard_link(old: Path, new: Path) -> bool:
    """Hard-link `old` as `new`; False where the file system refuses (then the caller writes the bytes)."""
    try:
        os.link(old, new)
    except OSError:
        return False
    return True


def exchange_folders(first: Path, second: Path) -> bool:
    """Swap two folders' names in one step (Linux renameat2 RENAME_EXCHANGE): at no instant is either
    name missing, so a server reading `out` during a rebuild sees the old site or the new one. False
    where the system or the file system cannot (the caller then falls back to two renames)."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    result = renameat2(at_fdcwd, os.fsencode(first), at_fdcwd, os.fsencode(second), rename_exchange)
    return result == 0


def swap_folder(staging: Path, out: Path) -> None:
    """Replace `out` by `staging` in one atomic exchange where the system allows it, else two renames;
    the old tree is removed afterwards."""
    if not out.exists():
        staging.rename(out)
        return
    if exchange_folders(staging, out):
        shutil.rmtree(staging, ignore_errors=True)  # `staging` now holds the old site
        return
    retired = Path(tempfile.mkdtemp(prefix=f".{out.name}-old-", dir=out.parent))
    retired.rmdir()
    out.rename(retired)
    try:
        staging.rename(out)
    except OSError:
        retired.rename(out)
        raise
    shutil.rmtree(retired, ignore_errors=True)


# The orchestrator -------------------------------------------------------------------------

def build_site(paths: SitePaths, *, quiet: bool = False, force: bool = False, stream: TextIO | None = None,
               estimate: Callable | None = None, render_chart: Callable | None = None,
               answers: bool = True, memory: BuildMemory | None = None, url: str | None = None,
               version: str | None = None) -> BuildReport:
    """Build the site into paths.out; raises BuildFailed (all errors) and leaves the old output alone.
    answers=False builds the student edition: exercises without their answers. With `memory` (kept by the
    caller between builds of the same output), only the pages whose inputs changed are rendered again.
    `url`: the site's public address for citations (over site.toml's `url`); `version`: the release built
    (default: pyproject.toml's [project] version)."""
    stream = stream or sys.stderr
    started = time.perf_counter()
    report = BuildReport()
    log = (lambda message: None) if quiet else (lambda message: print(message, file=stream))

    # 1. Unchanged inputs and intact output: nothing to do.
    digests = input_digests(paths)
    release = release_of(url, version)
    fingerprint = fingerprint_inputs(paths, answers, digests, release)
    stamped = estimate is None and render_chart is None
    if stamped and not force and (memory.holds(paths.out, fingerprint) if memory is not None and memory.outputs
                                  else is_up_to_date(paths, fingerprint)):
        report.unchanged, report.changed = True, []
        report.seconds = time.perf_counter() - started
        log(f"site unchanged: {display_name(paths.out)} is up to date ({report.seconds:.3f} s)")
        return report

    # 2. Gather and validate everything; broken data files stop here, broken pages do not.
    estimate, render_chart = estimate or load_estimate(), render_chart or load_chart_renderer()
    queue = ChartQueue(render_chart, paths.cache)
    reader, parsed = memory.page_reader() if memory is not None else (None, {})
    load, loaded = memory.file_loader() if memory is not None else (load_file, {})
    try:
        gathered, errors = gather_content(paths, reader, load, url, version)
        if any(not error.path.endswith(".md") for error in errors):
            raise BuildFailed(errors)

        # 3-4. Evaluate, draw and render every page whose inputs changed (pages whose front matter failed
        #      are skipped; with no memory, that is every page).
        log(f"building {len(gathered.pages)} pages into {display_name(paths.out)}")
        failed = {error.path for error in errors}
        shared = shared_key(digests, gathered.pages, answers, widget_script_mode(paths.static),
                            file_digest(CHARTS_CSS), (estimate, render_chart), release)
        keys = page_keys(digests, gathered.pages, shared, collects_exercises, compares_releases)
        templates = memory.jinja(paths.templates, digests, make_templates) if memory is not None else None
        outputs, results, render_errors = render_pages(gathered, paths, estimate, queue, report, log, skip=failed,
                                                       answers=answers, keys=keys, memory=memory,
                                                       templates=templates, shared=shared)
    finally:
        queue.close()
        if memory is not None:
            memory.parsed, memory.loaded = parsed, loaded
    if memory is not None:  # a page rendered without errors is reusable even when another page failed
        current = {page.path for page in gathered.pages}
        memory.pages = {path: output for path, output in (memory.pages | results).items() if path in current}
    if errors or render_errors:
        raise BuildFailed(errors + render_errors)

    # 5-6. Static files and the pinned snapshot, then one swap (earlier snapshots carried over).
    outputs |= bundle_static(paths.static)
    latest = len(outputs)
    outputs |= snapshot_outputs(outputs, {result.url: result.snapshot for result in results.values()},
                                gathered.release)
    keep = earlier_snapshots(paths.out, gathered.release)
    if memory is None:
        write_site(outputs, paths.out, keep=keep)
        hashes = None
    else:
        hashes = memory.hash_outputs(outputs)
        report.changed = sorted(path for path in memory.hashes.keys() | hashes.keys()
                                if memory.hashes.get(path) != hashes.get(path))
        stats = write_site(outputs, paths.out, memory.linkable(hashes), keep=keep)
        memory.remember(outputs, hashes, stats, fingerprint if stamped else "")
    if stamped:
        write_stamp(paths, fingerprint, hashes)
    report.files = {name: len(data) for name, data in sorted(outputs.items())}
    report.seconds = time.perf_counter() - started
    for warning in report.warnings:
        print(f"warning: {warning}", file=stream)
    reused = len(gathered.pages) - len(report.rendered)
    log(f"built {len(gathered.pages)} pages{f' ({reused} unchanged, reused)' if reused else ''}, {latest} files "
        f"(and their pinned copy in {gathered.release.folder}/) in {report.seconds:.2f} s")
    return report
