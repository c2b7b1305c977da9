"""Render pages: Markdown to HTML (math as MathML, citations, placements) and Jinja templates.

Placement syntax (a line of its own, with blank lines around it):

    {{< chart four-buckets >}}                 chart + data table + formulas and sources
    {{< table four-buckets >}}                 data table + formulas only
    {{< widget bytes-per-param model=llama-3-8b gpus=a100-80gb,h100-80gb >}}
    {{< exercise adam-zero1 >}}                an exercise of this page's front matter, answered by the model

A number the model computes is written inline, in prose or a table cell, as the command line's answer
(builder/prose_numbers.py): `the model gives {{< estimate "--model llama-3-8b --mode serve" need_bytes >}}`.

A page's `takeaways:` become its "Key takeaways" box (render_takeaways). A display formula is followed by
its symbols, each linking to the Notation page when the site has one (builder/symbols.py).

Citations: `[@key]`, `[@key1; @key2]` or with locators `[@key, section 3]`, keys from content/references.toml.
Math: `$...$` inline and `$$...$$` display, LaTeX converted to MathML at build time.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

import jinja2
import latex2mathml.converter
from markdown_it import MarkdownIt
from markdown_it.rules_block import StateBlock
from markdown_it.rules_core import StateCore
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token
from markupsafe import Markup, escape
from mdit_py_plugins.anchors import anchors_plugin
from mdit_py_plugins.dollarmath import dollarmath_plugin
from mdit_py_plugins.footnote import footnote_plugin

from builder.widgets import WIDGETS, to_json, widget_context
from builder.content import (COMMON_WIDGET_OPTIONS, SLUG_PATTERN, WIDGET_ID_MAX, ContentError, Page,
                             Reference, convert_widget_option, parse_options)
from builder.exercises import Exercise
from builder.figures import figure_links, png_available
from builder.page_minify import minify_page
from builder import prose_numbers
from builder.model.cite import Cite, pieces
from builder.sources import bibliography, short_form, source_filter
from builder.symbols import symbols_line
from builder.charts import name_bucket, name_part
from builder.charts.svg import page_hatches
from builder.grids import EvaluatedChart, format_amount, group_amounts

PLACEMENT_LINE = re.compile(r"^\{\{<\s*(?P<kind>[a-z]+)\s+(?P<name>[a-z0-9-]+)(?P<options>[^>]*?)\s*>\}\}$")
PLACEMENT_KINDS = ("chart", "table", "widget", "exercise", "catalog")
CATALOGS = ("gpus",)  # what a {{< catalog name >}} placement can show
# '[@key]', '[@a; @b]', and with locators: '[@key, section 3; @b, eq. 2]'.
CITE_ITEM = r"@[A-Za-z0-9_.:-]+(?:\s*,\s*[^;\]\[]+)?"
CITATION = re.compile(rf"\[({CITE_ITEM}(?:\s*;\s*{CITE_ITEM})*)\]")
CITE_PART = re.compile(r"\s*@([A-Za-z0-9_.:-]+)(?:\s*,\s*(.+?))?\s*$")
UNIT_NOTES = {"GiB": "GiB = 2^30 bytes", "GB": "GB = 10^9 bytes"}


@dataclass
class PageContext:
    """What the Markdown of one page may refer to while it is checked and rendered."""

    page: Page
    charts: dict[str, EvaluatedChart]
    references: dict[str, Reference]
    catalogs: dict[str, Any]  # 'model', 'gpu', 'preset' -> dict of ids
    templates: jinja2.Environment
    errors: list[ContentError] = field(default_factory=list)
    cited: list[str] = field(default_factory=list)
    widgets: list[str] = field(default_factory=list)
    widget_count: int = 0  # widgets rendered so far on this page (their positional ids, '<name>-<n>')
    widget_ids: dict[str, int] = field(default_factory=dict)  # author-given widget id -> its placement's line
    heading_ids: dict[str, int] = field(default_factory=dict)  # heading anchor -> its line (a widget id must differ)
    svgs: dict[str, str] = field(default_factory=dict)  # chart id -> SVG markup
    exercises: dict[str, Exercise] = field(default_factory=dict)  # this page's exercises, answered
    answers: bool = True  # False: the student edition, answers left out of the HTML
    notation_url: str = ""  # the Notation page, when the site has one
    exercise_count: int = 0  # exercises rendered so far on this page (their numbers)
    questions: dict[str, Markup] = field(default_factory=dict)  # exercise id -> its question as HTML
    answered: list[tuple[int, str, Exercise]] = field(default_factory=list)  # (number, anchor, exercise) placed with
    # its answer, in page order: the page's "Answers" section for print (templates/partials/print-answers.html)
    widget_state: Any = None  # (name, options, catalogs) -> the widget's state: a build's memo of widget_context
    estimates: Any = None  # flags -> the command line's JSON answer or its refusal: a build's memo of
    #   prose_numbers.evaluate (BuildMemory.estimates)
    sent_data: dict[tuple[str, str], str] = field(default_factory=dict)  # (data key, its JSON) -> the widget id
    # that first sent it on this page (widget_json: a later widget's same value is sent as a reference)
    noted: dict[tuple[str, ...], tuple[str, str]] = field(default_factory=dict)  # a formula note (part, formula,
    # source, simplification) -> (chart id, title) of the chart whose notes first gave it on this page (later_notes)

    def state_of(self, name: str, values: dict[str, Any]) -> dict[str, Any]:
        """The widget's server-side state (builder.widgets.widget_context), through the build's memo if any."""
        return (self.widget_state or widget_context)(name, values, self.catalogs)

    def estimate(self, flags: str) -> dict[str, Any] | str:
        """The command line's answer for an {{< estimate >}} shortcode's flags, through the build's memo if any."""
        if self.estimates is not None:
            return self.estimates(flags)
        return prose_numbers.evaluate(flags, self.catalogs)

    def error(self, line: int, message: str) -> None:
        """Record a content error on this page."""
        self.errors.append(ContentError(self.page.path, line, message))


# Markdown -----------------------------------------------------------------------------

def render_table_open(self, tokens, index, options, env) -> str:
    """A Markdown table inside a focusable region that scrolls sideways on narrow screens."""
    env["tables"] = env.get("tables", 0) + 1
    return (f'<div class="table-scroll" tabindex="0" role="region" aria-label="Table {env["tables"]} '
            f'(scrolls sideways on narrow screens)">\n<table>\n')


def render_table_close(self, tokens, index, options, env) -> str:
    """Close the table and its scroll region."""
    return "</table>\n</div>\n"


NUMBER_CELL = re.compile(r"[~≈<>+−-]?\d[\d,.]*(?:\s?(?:%|[kMGT]i?B|B|×|x))?(?:\s\(.*\))?")


def mark_number_cells(state: StateCore) -> None:
    """Give body cells that hold a number (optionally with a unit and a note in brackets) class="num", so that
    static/site.css aligns them right and text cells left; an {{< estimate >}} shortcode counts as a number."""
    for index, token in enumerate(state.tokens):
        if token.type == "td_open":
            cell = prose_numbers.SHORTCODE.sub("0", state.tokens[index + 1].content.strip())
            if NUMBER_CELL.fullmatch(cell):
                token.attrJoin("class", "num")


def make_markdown() -> MarkdownIt:
    """CommonMark + tables, footnotes, $math$, heading anchors, citations and placements."""
    md = MarkdownIt("commonmark", {"html": True}).enable("table")
    md.add_render_rule("table_open", render_table_open)
    md.add_render_rule("table_close", render_table_close)
    md.use(footnote_plugin).use(dollarmath_plugin, allow_digits=False, double_inline=True)
    md.use(anchors_plugin, min_level=2, max_level=3)
    md.core.ruler.push("permalinks", add_permalinks)
    md.core.ruler.push("number_cells", mark_number_cells)
    md.block.ruler.before("paragraph", "placement", parse_placement)
    md.inline.ruler.before("link", "citation", parse_citation)
    md.inline.ruler.before("text", "estimate", parse_estimate)
    for name in ("math_inline", "math_inline_double", "math_block", "math_block_label"):
        md.add_render_rule(name, render_math)
    md.add_render_rule("citation", render_citation)
    md.add_render_rule("placement", render_placement)
    md.add_render_rule("estimate", render_estimate)
    return md


def parse_placement(state: StateBlock, start: int, end: int, silent: bool) -> bool:
    """Block rule: a line that is exactly '{{< kind name options >}}' becomes a placement token."""
    if state.sCount[start] - state.blkIndent >= 4:
        return False
    text = state.src[state.bMarks[start] + state.tShift[start]:state.eMarks[start]].strip()
    if not text.startswith("{{<") or prose_numbers.START.match(text):  # an estimate is prose (parse_estimate)
        return False
    if silent:
        return True
    token = state.push("placement", "", 0)
    token.map = [start, start + 1]
    match = PLACEMENT_LINE.match(text)
    token.meta = match.groupdict() if match else {"malformed": text}
    state.line = start + 1
    return True


def parse_citation(state: StateInline, silent: bool) -> bool:
    """Inline rule: '[@key]' or '[@a; @b]' becomes a citation token."""
    if not state.src.startswith("[@", state.pos):
        return False
    match = CITATION.match(state.src, state.pos)
    if not match:
        end = state.src.find("]", state.pos)
        if end == -1:
            return False
        if not silent:  # '[@' that is not a citation: reported by check_citation, never left as text
            state.push("citation", "", 0).meta = {"malformed": state.src[state.pos:end + 1], "keys": [],
                                                  "locators": []}
        state.pos = end + 1
        return True
    if not silent:
        items = [CITE_PART.match(item) for item in match.group(1).split(";")]
        token = state.push("citation", "", 0)
        token.meta = {"keys": [m.group(1) for m in items], "locators": [m.group(2) or "" for m in items]}
    state.pos = match.end()
    return True


def parse_estimate(state: StateInline, silent: bool) -> bool:
    """Inline rule: '{{< estimate "FLAGS" FIELD ... >}}' becomes an estimate token (builder/prose_numbers.py),
    checked and computed by check_estimate; one without its '>}}' is a malformed one, never left as text."""
    if not prose_numbers.START.match(state.src, state.pos):
        return False
    match = prose_numbers.SHORTCODE.match(state.src, state.pos)
    end = match.end() if match else len(state.src)
    if not silent:
        token = state.push("estimate", "", 0)
        token.content = state.src[state.pos:end]
        token.meta = {"body": match.group("body")} if match else {"malformed": True}
    state.pos = end
    return True


def add_permalinks(state: StateCore) -> None:
    """Core rule: append a labelled '#' link to every heading that has an id."""
    for index, token in enumerate(state.tokens):
        heading_id = token.attrGet("id") if token.type == "heading_open" else None
        if not heading_id:
            continue
        inline = state.tokens[index + 1]
        title = "".join(c.content for c in inline.children or [] if c.type in ("text", "code_inline"))
        link = Token("link_open", "a", 1)
        link.attrSet("class", "permalink")
        link.attrSet("href", f"#{heading_id}")
        link.attrSet("aria-label", f"Permalink: {title}")
        inline.children = (inline.children or []) + [Token("text", "", 0, content=" "), link,
                                                      Token("text", "", 0, content="#"), Token("link_close", "a", -1)]


def render_math(self: Any, tokens: list[Token], index: int, options: Any, env: dict) -> str:
    """MathML converted during the check pass (stored in token.meta)."""
    token = tokens[index]
    mathml = token.meta.get("mathml", "")
    if token.type.startswith("math_block"):
        context: PageContext | None = env.get("context")
        symbols = symbols_line(token.content, context.notation_url) if context and context.notation_url else ""
        env["equations"] = env.get("equations", 0) + 1
        return (f'<div class="math-display" tabindex="0" role="region" aria-label="Equation {env["equations"]} '
                f'(scrolls sideways on narrow screens)">{mathml}</div>\n{symbols}')
    return mathml


def render_citation(self: Any, tokens: list[Token], index: int, options: Any, env: dict) -> str:
    """Numbered links to the references page, through the citation partial."""
    context: PageContext = env["context"]
    meta = tokens[index].meta
    references = [context.references[key] for key in meta["keys"]]
    return context.templates.get_template("partials/citation.html").render(
        citations=list(zip(references, meta["locators"]))).strip()


def render_estimate(self: Any, tokens: list[Token], index: int, options: Any, env: dict) -> str:
    """The number check_estimate computed, as text."""
    return str(escape(tokens[index].meta["text"]))


def render_placement(self: Any, tokens: list[Token], index: int, options: Any, env: dict) -> str:
    """A chart, table or widget block through its partial."""
    context: PageContext = env["context"]
    meta = tokens[index].meta
    if meta["kind"] == "widget":
        return render_widget(context, meta["name"], meta["values"], meta.get("state"), meta.get("widget_id", ""))
    if meta["kind"] == "catalog":
        return render_gpu_catalog(context.templates, context.catalogs["gpu"])
    if meta["kind"] == "exercise":
        context.exercise_count += 1
        exercise, anchor = context.exercises[meta["name"]], f"exercise-{meta['name']}"
        if context.answers:
            context.answered.append((context.exercise_count, anchor, exercise))
        return render_exercise(context.templates, exercise, context.exercise_count, context.answers, anchor,
                               question_html(context, meta["name"]))
    chart = context.charts[meta["name"]]
    svg = context.svgs.get(meta["name"]) if meta["kind"] == "chart" else None
    links = figure_links(context.page.slug, meta["name"], png_available()) if svg is not None else None
    return render_chart_block(context.templates, chart, svg, links, context.noted)


# Checking the token stream --------------------------------------------------------------

def walk_tokens(tokens: list[Token], first_line: int) -> Iterator[tuple[Token, int]]:
    """Every token and child with its 1-based source line in the page file."""
    line = first_line
    for token in tokens:
        if token.map:
            line = first_line + token.map[0]
        yield token, line
        child_line = line
        for child in token.children or []:
            yield child, child_line
            if child.type in ("softbreak", "hardbreak"):
                child_line += 1
            elif child.type == "estimate":  # a shortcode may span lines
                child_line += child.content.count("\n")


def check_tokens(tokens: list[Token], context: PageContext, first_line: int | None = None) -> None:
    """Check citations, placements, math and headings (lines counted from `first_line`, default the body's);
    convert math to MathML."""
    for token, line in walk_tokens(tokens, context.page.body_line if first_line is None else first_line):
        if token.type == "citation":
            check_citation(token, line, context)
        elif token.type == "placement":
            check_placement(token, line, context)
        elif token.type == "estimate":
            check_estimate(token, line, context)
        elif token.type.startswith("math_"):
            convert_math(token, line, context)
        elif token.type == "heading_open" and token.tag == "h1":
            context.error(line, "the page title is the only h1: start sections at '##'")
        elif token.type == "heading_open" and token.attrGet("id"):
            heading_id = str(token.attrGet("id"))
            context.heading_ids.setdefault(heading_id, line)
            if heading_id in context.widget_ids:
                context.error(line, f"heading anchor {heading_id!r} is the id of the widget at line "
                                    f"{context.widget_ids[heading_id]}: rename one")
        elif token.type in ("text", "html_inline") and "{{<" in token.content:
            context.error(line, "a placement '{{< ... >}}' must be a line of its own with blank lines around it")


def check_citation(token: Token, line: int, context: PageContext) -> None:
    """Every cited key must exist in references.toml; '[@...' must be a well-formed citation."""
    if "malformed" in token.meta:
        context.error(line, f"malformed citation {token.meta['malformed']!r} (write [@key], [@key, section 3] "
                            "or [@a; @b])")
    for key in token.meta["keys"]:
        if key not in context.references:
            context.error(line, f"unknown citation key {key!r} (see content/references.toml)")
        elif key not in context.cited:
            context.cited.append(key)


def check_estimate(token: Token, line: int, context: PageContext) -> None:
    """Compute an {{< estimate >}} shortcode's number (builder/prose_numbers.py); a problem is a content error."""
    if "malformed" in token.meta:
        context.error(line, f"an estimate shortcode needs its closing '>}}}}': write {prose_numbers.FORM}")
        return
    try:
        token.meta["text"] = prose_numbers.number(token.meta["body"], context.estimate)
    except ValueError as error:
        context.error(line, str(error))


def check_placement(token: Token, line: int, context: PageContext) -> None:
    """A placement names a known kind and a chart of this page or a registered widget."""
    meta = token.meta
    if "malformed" in meta:
        context.error(line, f"malformed placement {meta['malformed']!r} (write {{{{< chart id >}}}}, "
                            f"{{{{< table id >}}}} or {{{{< widget name key=value >}}}})")
    elif meta["kind"] not in PLACEMENT_KINDS:
        context.error(line, f"unknown placement kind {meta['kind']!r} (use chart, table, widget, exercise or catalog)")
    elif meta["kind"] == "catalog":
        if meta["name"] not in CATALOGS:
            context.error(line, f"unknown catalog {meta['name']!r} (use {', '.join(CATALOGS)})")
        elif meta["options"].strip():
            context.error(line, f"catalog placements take no options, got {meta['options'].strip()!r}")
    elif meta["kind"] == "widget":
        check_widget(meta, line, context)
    elif meta["kind"] == "exercise":
        if meta["name"] not in context.page.exercises:
            known = ", ".join(sorted(context.page.exercises)) or "none defined"
            context.error(line, f"unknown exercise {meta['name']!r} (exercises in this page's front matter: {known})")
        elif meta["options"].strip():
            context.error(line, f"exercise placements take no options, got {meta['options'].strip()!r}")
    elif meta["name"] not in context.page.charts:
        known = ", ".join(sorted(context.page.charts)) or "none defined"
        context.error(line, f"unknown chart {meta['name']!r} (charts in this page's front matter: {known})")
    elif meta["options"].strip():
        context.error(line, f"{meta['kind']} placements take no options, got {meta['options'].strip()!r}")


def check_widget(meta: dict[str, Any], line: int, context: PageContext) -> None:
    """The widget must be registered, have a partial, and get only its known options."""
    name = meta["name"]
    spec = WIDGETS.get(name)
    if spec is None or not template_exists(context.templates, spec.partial):
        known = ", ".join(sorted(WIDGETS))
        context.error(line, f"unknown widget {name!r} (known: {known})")
        return
    try:
        options = parse_options(meta["options"])
    except ValueError as error:
        context.error(line, f"widget {name}: {error}")
        return
    values = {}
    if "id" in options:
        meta["widget_id"] = options.pop("id")
        check_widget_id(name, meta["widget_id"], line, context)
    for key, text in options.items():
        if key not in spec.options:
            known = ", ".join([*spec.options, *COMMON_WIDGET_OPTIONS])
            context.error(line, f"widget {name}: unknown option {key!r} (known: {known})")
            continue
        try:
            values[key] = convert_widget_option(spec.options[key], text, context.catalogs)
        except ValueError as error:
            context.error(line, f"widget {name}: option {key} {error}")
    meta["values"] = values
    try:  # the widget's own checks (e.g. a malformed segments= option) name the placement's line
        meta["state"] = context.state_of(name, values)
    except ValueError as error:
        context.error(line, f"widget {name}: {error}")
    if name not in context.widgets:
        context.widgets.append(name)


def check_widget_id(name: str, widget_id: str, line: int, context: PageContext) -> None:
    """An author's widget id: a short slug, unique on the page, not shaped like a positional id."""
    if not SLUG_PATTERN.match(widget_id) or len(widget_id) > WIDGET_ID_MAX:
        context.error(line, f"widget {name}: id {widget_id!r} must be lowercase words joined by '-', "
                            f"at most {WIDGET_ID_MAX} characters")
    elif re.fullmatch("(" + "|".join(map(re.escape, WIDGETS)) + r")-\d+", widget_id):
        context.error(line, f"widget {name}: id {widget_id!r} looks like a positional id (<widget>-<n>); "
                            "choose a name")
    elif widget_id in context.heading_ids:
        context.error(line, f"widget {name}: id {widget_id!r} is the anchor of the heading at line "
                            f"{context.heading_ids[widget_id]}: rename one")
    elif widget_id.startswith("chart-") and widget_id.removeprefix("chart-") in context.page.charts:
        context.error(line, f"widget {name}: id {widget_id!r} is the anchor of chart "
                            f"{widget_id.removeprefix('chart-')}: rename one")
    elif widget_id in context.widget_ids:
        context.error(line, f"widget {name}: id {widget_id!r} is already used on this page "
                            f"(line {context.widget_ids[widget_id]})")
    else:
        context.widget_ids[widget_id] = line


def convert_math(token: Token, line: int, context: PageContext) -> None:
    """LaTeX to MathML; a LaTeX error becomes a content error."""
    display = "block" if token.type.startswith("math_block") or token.type == "math_inline_double" else "inline"
    try:
        token.meta["mathml"] = latex_to_mathml(token.content.strip(), display)
    except Exception as error:  # latex2mathml raises many exception types for bad input
        context.error(line, f"cannot convert LaTeX {token.content.strip()!r}: {type(error).__name__} {error}".strip())


ALIGNED = re.compile(r"^\\begin\{aligned\}(.*)\\end\{aligned\}$", re.S)


@functools.lru_cache(maxsize=1024)
def latex_to_mathml(tex: str, display: str) -> str:
    """MathML for `tex`. latex2mathml leaves the '&' of an aligned environment as a raw
    character, so `aligned` is built here: one <mtr> per row, one <mtd> per '&' cell. Converted once per
    formula and display (a site writes a third of its formulas more than once)."""
    match = ALIGNED.match(tex)
    if not match:
        mathml = latex2mathml.converter.convert(tex, display=display)
        if "<mi>&</mi>" in mathml:
            raise ValueError("'&' is only supported inside \\begin{aligned}...\\end{aligned}")
        return mathml
    rows = []
    for row in re.split(r"\\\\", match.group(1)):
        cells = [math_inner(cell.strip()) for cell in row.split("&")]
        aligns = ["right" if i % 2 == 0 else "left" for i in range(len(cells))]
        rows.append("<mtr>" + "".join(f'<mtd columnalign="{a}">{c}</mtd>' for a, c in zip(aligns, cells)) + "</mtr>")
    return (f'<math xmlns="http://www.w3.org/1998/Math/MathML" display="{display}">'
            f'<mtable displaystyle="true">{"".join(rows)}</mtable></math>')


def math_inner(tex: str) -> str:
    """The MathML inside <math>...</math> for one cell ('' for an empty cell)."""
    if not tex:
        return "<mrow></mrow>"
    mathml = latex2mathml.converter.convert(tex)
    return mathml[mathml.index(">") + 1:mathml.rindex("</math>")]


def template_exists(templates: jinja2.Environment, name: str) -> bool:
    """True when the template loader can find `name`."""
    try:
        templates.get_template(name)
    except jinja2.TemplateNotFound:
        return False
    return True


def render_body(md: MarkdownIt, context: PageContext) -> str:
    """Parse, check and render one page's Markdown (empty string if it has errors)."""
    env = {"context": context}
    tokens = md.parse(context.page.body, env)
    check_tokens(tokens, context)
    if context.errors:
        return ""
    return md.renderer.render(tokens, md.options, env)


def render_inline(md: MarkdownIt, context: PageContext, text: str, line: int) -> str:
    """One line of Markdown (citations and math allowed) checked as part of the page at `line`."""
    env = {"context": context}
    tokens = md.parseInline(text, env)
    check_tokens(tokens, context, line)
    return "" if context.errors else md.renderer.render(tokens, md.options, env)


def render_takeaways(md: MarkdownIt, context: PageContext) -> list[Markup]:
    """The page's "Key takeaways", each line rendered as Markdown."""
    return [Markup(render_inline(md, context, text, line)) for text, line in context.page.takeaways]


def question_html(context: PageContext, exercise_id: str) -> Markup:
    """An exercise's question, rendered when the page was checked (render_questions)."""
    return context.questions[exercise_id]


def render_questions(md: MarkdownIt, context: PageContext) -> None:
    """Render every exercise's question (Markdown, citations and math allowed) before the body is rendered."""
    defined = context.page.exercises
    context.questions = {exercise_id: Markup(render_inline(md, context, exercise.question,
                                                           defined[exercise_id].lines.get("question", exercise.line)))
                         for exercise_id, exercise in context.exercises.items()}


def render_exercise(templates: jinja2.Environment, exercise: Exercise, number: int, answers: bool, anchor: str,
                    question: Markup, origin: dict[str, str] | None = None) -> str:
    """An exercise: its question, its configuration and (unless `answers` is False) its worked answer."""
    return templates.get_template("partials/exercise.html").render(
        exercise=exercise, number=number, answers=answers, anchor=anchor, question=question, origin=origin)


# Charts, tables and widgets --------------------------------------------------------------

def table_rows(chart: EvaluatedChart) -> list[dict[str, Any]]:
    """Rows of a chart's data table: one per bucket or part, values per bar in the chart's unit."""
    unit, group_by = chart.spec.unit, chart.spec.group_by
    per_bar = [group_amounts(bar.breakdown, group_by) for bar in chart.spec.bars]
    names: list[str] = []
    for amounts in per_bar:
        names += [name for name in amounts if name not in names]
    return [{"name": name_bucket(name, chart.spec), "values": [format_amount(amounts.get(name, 0), unit) for amounts in per_bar]}
            for name in names]


def simplification_words(note: str) -> str:
    """A part's note as the formula notes print it after their own "Simplification:" label: a note that already
    opens with the word (the model's notes say so where the command line and the calculator show them bare) is
    not labelled twice."""
    return note[len("simplification: "):] if note.lower().startswith("simplification: ") else note


def formula_notes(chart: EvaluatedChart) -> list[dict[str, str]]:
    """Each distinct part drawn, with its formula, bytes-per-unit rule, source and simplification."""
    seen: dict[str, dict[str, str]] = {}
    for bar in chart.spec.bars:
        for part in bar.breakdown.parts:
            if part.name not in seen:
                seen[part.name] = {"name": name_part(part, chart.spec), "formula": part.formula, "per_unit": part.per_unit,
                                   "source": part.source, "simplification": simplification_words(part.simplification)}
    return list(seen.values())


def later_notes(chart: EvaluatedChart, noted: dict[tuple[str, ...], tuple[str, str]]) -> list[dict[str, Any]]:
    """The chart's formula notes, each marked `earlier` with the (chart id, title) of a chart above it on the page
    whose notes already give the same part, formula, source and simplification (issue 14, page weight: the note
    then names its part and per-unit rule, and links to that chart's notes instead of repeating them); the others
    are recorded in `noted` for the charts below."""
    notes = []
    for note in formula_notes(chart):
        key = tuple(str(note[k] or "") for k in ("name", "formula", "source", "simplification"))
        earlier = noted.get(key)
        if earlier is None:
            noted[key] = (chart.spec.chart_id, chart.spec.title)
        notes.append(note | {"earlier": earlier})
    return notes


def chart_sources(chart: EvaluatedChart, references: Mapping[str, Reference]) -> list[str]:
    """The works a chart's formulas rest on, each once, in the order its notes give them: a cited work by its
    reference alone (the formula notes under the chart give each locator), a source citing none in full. Entries
    with one short form (two files of PyTorch 2.13) are one work: the first stands for them."""
    works: dict[str, str] = {}
    for note in formula_notes(chart):
        cites = [piece for piece in pieces(note["source"] or "") if isinstance(piece, Cite)]
        for cite in cites:
            works.setdefault(short_form(cite.key, references), Cite(cite.key))
        if note["source"] and not cites:
            works.setdefault(note["source"], note["source"])
    return list(works.values())


def render_figure_page(templates: jinja2.Environment, chart: EvaluatedChart, svg: str, page: Page,
                       site: dict[str, str], stylesheet: str) -> str:
    """The embed view of one chart (figures/<slug>-<chart-id>.html): the figure, its caption and its downloads,
    with the page's stylesheet and a CSP of its own; every URL relative to figures/."""
    links = figure_links(page.slug, chart.spec.chart_id, png_available())
    html = templates.get_template("figure.html").render(
        chart=chart.spec, svg=Markup(svg), page=page, site=site, stylesheet=f"../{stylesheet}", csp="__CSP__",
        configuration=chart.definition.description,
        sources=chart_sources(chart, bibliography(templates)),
        links={key: url.split("/", 1)[1] for key, url in links.items() if key != "embed"})
    return finish_page(html, page.path)


def render_chart_block(templates: jinja2.Environment, chart: EvaluatedChart, svg: str | None,
                       links: dict[str, str] | None = None,
                       noted: dict[tuple[str, ...], tuple[str, str]] | None = None) -> str:
    """Figure (if an SVG is given) with its downloads and embed view (`links`), data table and formula notes for
    one chart (`noted`: the notes the page's charts above gave, later_notes)."""
    spec = chart.spec
    table = {
        "id": f"table-{spec.chart_id}",
        "caption": f"{spec.title}: memory per GPU in {spec.unit} ({UNIT_NOTES[spec.unit]})",
        "row_header": "Bucket" if spec.group_by == "bucket" else "Part",
        "bars": [bar.label for bar in spec.bars],
        "rows": table_rows(chart),
        "totals": [format_amount(bar.breakdown.total, spec.unit) for bar in spec.bars],
        "needs": [format_amount(bar.needed, spec.unit) for bar in spec.bars]
        if any(bar.peak_differs for bar in spec.bars) else None,
        "gpus": [{"display": gpu.display, "capacity": format_amount(gpu.usable_bytes, spec.unit),
                  "verdicts": [fit_verdict(bar.needed, gpu.usable_bytes, spec.unit) for bar in spec.bars]}
                 for gpu in spec.gpus],
        "unit": spec.unit,
    }
    return templates.get_template("partials/chart.html").render(
        chart=spec, svg=Markup(svg) if svg is not None else None, table=table,
        notes=later_notes(chart, {} if noted is None else noted),
        links=links, sources=chart_sources(chart, bibliography(templates)),
        configuration=chart.definition.description)


SOURCE_URL = re.compile(r"https://[^\s;,)]+[^\s;,).]")


def link_urls(text: str) -> Markup:
    """Plain text with every https:// address made a link (the rest escaped)."""
    out, last = [], 0
    for match in SOURCE_URL.finditer(text):
        url = match.group(0)
        out += [escape(text[last:match.start()]), Markup('<a href="{0}">{0}</a>').format(url)]
        last = match.end()
    return Markup("").join(out + [escape(text[last:])])


def gpu_catalog_rows(gpus: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per GPU of the catalog: the size in its name, nvidia-smi's total, the CUDA total every verdict uses
    (GiB, two decimals) and what each printout is."""
    return [{"display": gpu.display, "marketing": gpu.marketing,
             "driver": f"{gpu.driver_total_bytes / 2**30:.2f}" if gpu.driver_total_bytes else "",
             "cuda": f"{gpu.usable_bytes / 2**30:.2f}",
             "gap": f"{(gpu.driver_total_bytes - gpu.usable_bytes) / 2**30:.2f}" if gpu.driver_total_bytes
             else "", "source": link_urls(gpu.source), "driver_source": link_urls(gpu.driver_source)}
            for gpu in gpus.values()]


def render_gpu_catalog(templates: jinja2.Environment, gpus: dict[str, Any]) -> str:
    """The GPU catalog as a table: marketing size, nvidia-smi's total, the CUDA total and their sources."""
    return templates.get_template("partials/gpu-catalog.html").render(rows=gpu_catalog_rows(gpus))


def fit_verdict(total: int, capacity: int, unit: str) -> str:
    """'yes, 27.3 left' or 'no, 12.0 over' (in the table's unit), for a bar's need."""
    if total <= capacity:
        return f"yes, {format_amount(capacity - total, unit)} left"
    return f"no, {format_amount(total - capacity, unit)} over"


def render_widget(context: PageContext, name: str, values: dict[str, Any], state: dict[str, Any] | None = None,
                  widget_id: str = "") -> str:
    """A widget's server-side partial, given its options and its state from builder.widgets."""
    state = context.state_of(name, values) if state is None else state
    context.widget_count += 1
    positional = f"{name}-{context.widget_count}"  # the id links were written with before ids were named
    widget_id = widget_id or positional
    return context.templates.get_template(WIDGETS[name].partial).render(
        widget=WIDGETS[name], options=values, options_json=json.dumps(values, sort_keys=True),
        state=state, state_json=widget_json(context, widget_id, state.get("data", {})),
        widget_id=widget_id, legacy_id="" if widget_id == positional else positional,
        renamed=to_json(WIDGETS[name].renamed) if WIDGETS[name].renamed else "")


SAME_AS = "same_as_widget"  # static/widgets/99-boot.js reads the value under this key from that widget's data
SHARED_MIN_CHARS = 1000  # smaller values are sent again: a reference would save next to nothing


def widget_json(context: PageContext, widget_id: str, data: dict[str, Any]) -> str:
    """A widget's data as JSON for its <script type="application/json"> block. A large value (the full model's
    rules, about 20 KB gzipped) that an earlier widget on the same page already sent under the same key is sent
    as {SAME_AS: that widget's id}: two teaching widgets on one page carry it once (issue 14's page weight)."""
    pieces = []  # to_json's own form: keys sorted, each value serialised once
    for key in sorted(data):
        text = to_json(data[key])
        first = context.sent_data.setdefault((key, text), widget_id)
        if first != widget_id and len(text) >= SHARED_MIN_CHARS:
            text = to_json({SAME_AS: first})
        pieces.append(f"{to_json(key)}:{text}")
    return "{" + ",".join(pieces) + "}"


# Templates and pages ----------------------------------------------------------------------

def css_string(value: str) -> Markup:
    """`value` as a quoted CSS string: every character but plain URL ones escaped as CSS hex escapes, so
    nothing in it can end the string or the <style> element."""
    safe = re.compile(r"[A-Za-z0-9:/._~%?#=+,;@!$*()\[\]-]")
    return Markup('"' + "".join(c if safe.fullmatch(c) else f"\\{ord(c):x} " for c in str(value)) + '"')


def make_templates(templates_dir: Path) -> jinja2.Environment:
    """Jinja environment: StrictUndefined, autoescape, templates from one folder; `json` filter."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir)), undefined=jinja2.StrictUndefined,
                             autoescape=jinja2.select_autoescape(["html"]), keep_trailing_newline=True,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters["json"] = lambda value: Markup(to_json(value))  # for <script type="application/json">
    env.filters["css_string"] = css_string  # for a value in a <style> element
    env.filters["source"] = source_filter  # a part's source, its citations linked to the References page
    return env


def make_navigation(pages: list[Page], current: Page) -> dict[str, Any]:
    """Header links plus previous/next pages, all relative URLs."""
    index = pages.index(current)
    items = [{"title": p.nav_title or p.title, "url": p.url, "current": p is current} for p in pages]
    previous = pages[index - 1] if index > 0 else None
    following = pages[index + 1] if index + 1 < len(pages) else None
    return {"items": items,
            "previous": {"title": previous.title, "url": previous.url} if previous else None,
            "next": {"title": following.title, "url": following.url} if following else None}


def hash_source(text: str) -> str:
    """CSP source expression for an inline element: 'sha256-...'."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def make_csp(html: str) -> str:
    """A strict Content-Security-Policy: own origin only, no inline script, inline styles only when needed.

    Inline <style> elements (e.g. inside an SVG) are allowed by hash; style="" attributes
    cannot be allowed by hash in every browser, so a page that has them gets 'unsafe-inline'
    for styles (never for scripts).
    """
    style_sources = ["'self'"]
    if has_style_attribute(html):
        style_sources.append("'unsafe-inline'")
    else:
        style_sources += sorted({hash_source(body) for body in re.findall(r"<style[^>]*>(.*?)</style>", html, re.S)})
    return ("default-src 'none'; script-src 'self'; style-src " + " ".join(style_sources) +
            "; img-src 'self' data:; font-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'")


def has_style_attribute(html: str) -> bool:
    """Whether `html` has a style="" attribute: `re.search(r"\\sstyle=", html)` as a scan for the literal, whose
    preceding character must be white space (str.isspace is re's \\s). The pattern, led by \\s, tries every position
    of a page: most of make_csp's time, on every page."""
    index = html.find("style=", 1)
    while index != -1:
        if html[index - 1].isspace():
            return True
        index = html.find("style=", index + 1)
    return False


def render_page(templates: jinja2.Environment, page: Page, pages: list[Page], site: dict[str, str], body: str,
                extra: dict[str, Any]) -> str:
    """The page's template around its rendered body, with the CSP computed from the result."""
    context = {"site": site, "page": page, "nav": make_navigation(pages, page), "body": Markup(body),
               "csp": "__CSP__"} | extra
    html = templates.get_template(f"{page.template}.html").render(context)
    return finish_page(html, page.path)


MAIN_START = re.compile(r"<main\b[^>]*>")


def finish_page(html: str, path: str) -> str:
    """A rendered page as it is written: the hatch patterns its charts fill overflow with, once each at the top of
    its <main> (charts.svg.page_hatches; the handout takes <main> whole), minified (builder/page_minify.py), then
    its CSP filled in from the minified text, so the hashes of its inline <style> elements match what the browser
    reads."""
    hatches = page_hatches(html)
    if hatches:
        if not MAIN_START.search(html):
            raise ValueError(f"{path}: a page with hatched charts needs a <main> to hold their patterns")
        html = MAIN_START.sub(lambda start: start.group(0) + hatches, html, count=1)
    html = minify_page(html, path)
    return html.replace("__CSP__", make_csp(html), 1)
