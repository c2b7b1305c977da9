"""Incremental rebuilds (issue 17): what the last build rendered, and the keys that say what of it is reusable.

A page's HTML (with its chart files, its widget script and the exercises it hands the Exercises page)
depends on its own file and on what every page shares:
- the entries of the model and GPU catalogs it read (content/models.toml, gpus.toml: builder/catalog_reads.py;
  the page collecting the exercises reads what every page with exercises read);
- every other content file but the pages: presets, references, site.toml, validation data;
- the templates, the builder's code (the memory model's too, which computes its charts, widgets, exercises and the
  numbers its {{< estimate >}} shortcodes write) and the chart palette (static/charts.css);
- whether widget scripts exist in static/ (which script a page links);
- every page's navigation entry (slug, title, short title, in order) and the edition (answers or not);
- for the page that collects the exercises, the exercises and presets of every page that defines exercises;
- for the page that compares the key configurations (What changed), every page's presets.
A page whose key is the last build's is not rendered again: its outputs come from the BuildMemory.
Other static files reach no page's HTML (they are bundled afresh each build), so editing site.css
re-renders nothing. The result is byte-identical to a clean build (tests/test_incremental.py).

The memory lives in the process that builds again and again (serve): it is replaced, not extended,
after every build, so it holds one site's worth of outputs however many rebuilds there are.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from builder.catalog_reads import Reads, reads_key, watch
from builder.content import ContentError, Page, read_page

READS_PAGES = ("exercises", "what-changed")  # widgets whose state comes from other pages (never memoised)


@dataclass(frozen=True)
class PageOutput:
    """Everything rendering one page produced, kept to be reused while its key holds."""

    key: str
    url: str
    html: bytes
    figures: dict[str, bytes]  # figures/...: its charts' downloads and embed views
    scripts: dict[str, tuple[str, ...]]  # the widget script it links -> the widgets in it
    exercises: dict[str, Any] | None  # its entry in the Exercises page's catalog
    warnings: tuple[str, ...]
    snapshot: bytes = b""  # its rendering for the pinned copy, v/<version>/
    reads: tuple[tuple[str, str], ...] = ()  # the catalog entries it read (builder/catalog_reads.py)
    reads_key: str = ""  # their values' digest when it was rendered (catalog_reads.reads_key)
    exercise_reads: tuple[tuple[str, str], ...] = ()  # those its exercises read (the Exercises page reads them too)


@dataclass
class BuildMemory:
    """What the last build of one output folder produced (kept between builds by serve)."""

    pages: dict[str, PageOutput] = field(default_factory=dict)  # page path -> its outputs
    parsed: dict[tuple[str, str], tuple[Page | None, list[ContentError]]] = field(default_factory=dict)
    templates: tuple[str, Any] | None = None  # (the templates' key, their Jinja environment)
    loaded: dict[tuple, Any] = field(default_factory=dict)  # (loader, its arguments, file bytes) -> its result
    figures: dict[tuple[str, str], tuple[str, dict[str, bytes]]] = field(default_factory=dict)  # (slug, chart) ->
    #   (its SVG, its downloads)
    outputs: dict[str, bytes] = field(default_factory=dict)  # the site last written
    hashes: dict[str, str] = field(default_factory=dict)  # sha256 of each of those files
    signatures: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # each file's (inode, size, mtime)
    fingerprint: str = ""  # the inputs it was built from ('' when built with a stand-in model or renderer)
    scripts: dict[tuple, bytes] = field(default_factory=dict)  # (script, widgets, sources' digest) -> it minified
    memo: dict[tuple, tuple[Any, tuple, str]] = field(default_factory=dict)  # (shared key, what, ...) -> (a widget's
    #   state or a chart's evaluation, the catalog entries it read, their digest): see recall

    def file_loader(self) -> tuple[Callable[..., Any], dict]:
        """load(path, function, *args) -> function(*args), reusing the last build's result while the file at
        `path` (which function reads) is unchanged; and the memo it fills (it replaces `loaded`)."""
        fresh: dict[tuple, Any] = {}

        def load(path: Path, function: Callable[..., Any], *args: Any) -> Any:
            try:
                data = path.read_bytes()
            except OSError:
                return function(*args)
            key = (function, args, data)
            if key not in fresh:
                fresh[key] = self.loaded[key] if key in self.loaded else function(*args)
            return fresh[key]

        return load, fresh

    def figure_files(self, make: Callable[..., dict[str, bytes]], slug: str, chart_id: str, svg: str,
                     *args: Any) -> dict[str, bytes]:
        """make(slug, chart_id, svg, *args): a chart's downloads, reused while its SVG is unchanged."""
        kept = self.figures.get((slug, chart_id))
        if kept is None or kept[0] != svg:
            kept = self.figures[(slug, chart_id)] = (svg, make(slug, chart_id, svg, *args))
        return kept[1]

    def recall(self, key: tuple, catalogs: dict[str, Any], reads: Reads, compute: Callable[[dict[str, Any]], Any]
               ) -> Any:
        """compute(catalogs, as views that note what it reads), or the result an earlier build (or page) computed
        under the same key while the model and GPU entries it read (in `catalogs`, the plain ones) hold; those
        entries are noted in `reads` either way. key[0] is the shared key (prune drops the others)."""
        kept = self.memo.get(key)
        if kept is None or reads_key(kept[1], catalogs) != kept[2]:
            fresh = Reads()
            result = compute(watch(catalogs, fresh))
            read = fresh.frozen()
            kept = self.memo[key] = (result, read, reads_key(read, catalogs))
        reads.add(kept[1])
        return kept[0]

    def prune(self, shared: str) -> None:
        """Forget results computed under another shared key (an edit to the code, templates, presets...)."""
        self.memo = {key: kept for key, kept in self.memo.items() if key[0] == shared}

    def widget_states(self, shared: str, page: Page, catalogs: dict[str, Any], reads: Reads
                      ) -> Callable[[str, dict[str, Any], dict[str, Any]], Any]:
        """widget_context for one page, reusing the state computed for the same widget and options while what it
        reads holds: everything in the shared key, the page's presets and the catalog entries it read (`recall`).
        The widgets that read other pages (Exercises, What changed) are computed afresh."""
        from builder.widgets import widget_context

        presets = repr(sorted(page.presets.items()))

        def state(name: str, values: dict[str, Any], page_catalogs: dict[str, Any]) -> Any:
            if name in READS_PAGES:
                return widget_context(name, values, page_catalogs)
            return self.recall((shared, "widget", presets, name, repr(sorted(values.items()))), catalogs, reads,
                               lambda watched: widget_context(name, values, page_catalogs | watched))

        return state

    def estimates(self, shared: str, catalogs: dict[str, Any], reads: Reads) -> Callable[[str], Any]:
        """prose_numbers.evaluate for one page's {{< estimate >}} shortcodes: each command line's answer (or its
        refusal) computed once, for every page that gives the same flags and for later builds while what it reads
        holds: the shared key (which holds the builder's code, the model's included) and the catalog entries the
        command read (`recall`)."""
        from builder.prose_numbers import evaluate

        def answer(flags: str) -> Any:
            return self.recall((shared, "estimate", flags), catalogs, reads, lambda watched: evaluate(flags, watched))

        return answer

    def chart_evaluator(self, shared: str, catalogs: dict[str, Any], reads: Reads) -> Callable[..., Any]:
        """grids.evaluate_chart for one page's charts, reusing the evaluation of the same chart definition on the
        same page with the same presets while what it reads holds (`recall`)."""
        from builder.grids import evaluate_chart

        def evaluate(chart: Any, page: Page, presets: dict[str, Any], models: Any, gpus: Any, estimate: Callable
                     ) -> Any:
            key = (shared, "chart", page.path, repr(chart), repr(sorted(presets.items())))
            return self.recall(key, catalogs, reads, lambda watched: evaluate_chart(
                chart, page, presets, watched["model"], watched["gpu"], estimate))

        return evaluate

    def holds(self, out: Path, fingerprint: str) -> bool:
        """True when `out` is still exactly the site last written, built from inputs with this fingerprint."""
        from builder.build import file_signature, list_files

        if not fingerprint or fingerprint != self.fingerprint or not out.is_dir():
            return False
        try:
            found = {path.relative_to(out).as_posix(): file_signature(path) for path in list_files(out)}
        except OSError:
            return False
        return found == self.signatures

    def jinja(self, folder: Path, digests: dict[str, str], make: Callable[[Path], Any]) -> Any:
        """The Jinja environment for `folder`, made again only when a template changed (compiled templates
        are kept with it)."""
        key = digest(str(folder), *(f"{label}={value}" for label, value in digests.items()
                                    if label.startswith("templates/")))
        if self.templates is None or self.templates[0] != key:
            self.templates = (key, make(folder))
        return self.templates[1]

    def hash_outputs(self, outputs: dict[str, bytes]) -> dict[str, str]:
        """sha256 of every output file; a file reused from the last build (the same bytes object) is not
        hashed again."""
        return {path: self.hashes[path] if self.outputs.get(path) is data else hashlib.sha256(data).hexdigest()
                for path, data in sorted(outputs.items())}

    def linkable(self, hashes: dict[str, str]) -> dict[str, tuple[int, int, int]]:
        """Output files whose bytes are those last written: path -> the signature they were written with."""
        return {path: self.signatures[path] for path, value in hashes.items()
                if self.hashes.get(path) == value and path in self.signatures}

    def remember(self, outputs: dict[str, bytes], hashes: dict[str, str],
                 signatures: dict[str, tuple[int, int, int]], fingerprint: str) -> None:
        """The site just written replaces the last one (chart downloads of charts no longer built are dropped)."""
        self.outputs, self.hashes, self.signatures, self.fingerprint = outputs, hashes, signatures, fingerprint
        self.figures = {key: kept for key, kept in self.figures.items()
                        if any(path in outputs for path in kept[1])}

    def page_reader(self) -> tuple[Callable[[Path, str], tuple[Page | None, list[ContentError]]], dict]:
        """A read_page that reuses the last build's parse of an unchanged file, and the memo it fills
        (which replaces `parsed` after the build, so removed and edited versions are dropped)."""
        fresh: dict[tuple[str, str], tuple[Page | None, list[ContentError]]] = {}

        def read(path: Path, display_path: str) -> tuple[Page | None, list[ContentError]]:
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                return read_page(path, display_path)
            key = (display_path, text)
            if key not in fresh:
                fresh[key] = self.parsed[key] if key in self.parsed else read_page(path, display_path, text)
            return fresh[key]

        return read, fresh


CATALOG_INPUTS = ("content/models.toml", "content/gpus.toml")  # pages depend on the entries they read, not the files


def is_page_input(label: str) -> bool:
    """True for a page's own file in input_digests' labels ('content/index.md')."""
    folder, _, name = label.partition("/")
    return folder == "content" and "/" not in name and name.endswith(".md")


def digest(*parts: str) -> str:
    """sha256 of the parts, each ended by a NUL."""
    return hashlib.sha256("".join(f"{part}\0" for part in parts).encode("utf-8")).hexdigest()


def shared_key(digests: dict[str, str], pages: list[Page], answers: bool, static_mode: str, palette: str,
               renderers: tuple[Callable, ...], release: str = "") -> str:
    """The key of what every page's HTML depends on (the module docstring's list), and the release built
    (version and address: the version line and citations on every page)."""
    shared = [f"{label}={value}" for label, value in sorted(digests.items())
              if not is_page_input(label) and not label.startswith("static/") and label not in CATALOG_INPUTS]
    nav = [f"{page.slug}|{page.title}|{page.nav_title}|{page.order}|{page.template}" for page in pages]
    names = [f"{getattr(f, '__module__', '')}.{getattr(f, '__qualname__', '')}#{id(f)}" for f in renderers]
    return digest(f"answers={answers}", f"static={static_mode}", f"palette={palette}", f"release={release}", *names,
                  *shared, *nav)


def page_keys(digests: dict[str, str], pages: list[Page], shared: str,
              collects: Callable[[Page], bool], compares: Callable[[Page], bool] = lambda page: False
              ) -> dict[str, str]:
    """Page path -> its key: the shared key, its own file and, for a page collecting the exercises, the
    exercises and presets of every page that defines exercises (what the exercises are evaluated from); for a page
    comparing the key configurations (What changed, which evaluates every page's presets), every page's presets
    (the pages' titles and order are in the shared key)."""
    def own(page: Page) -> str:
        return digests.get(f"content/{Path(page.path).name}", "")

    with_exercises = [f"{page.path}={sorted(page.exercises.items())!r}|{sorted(page.presets.items())!r}"
                      for page in pages if page.exercises]
    every = [f"{page.path}={sorted(page.presets.items())!r}" for page in pages]
    return {page.path: digest(shared, page.path, own(page), *(with_exercises if collects(page) else ()),
                              *(every if compares(page) else ())) for page in pages}
