"""Printing a page (issue 16 item 5): Chromium with print media emulated, at the printable width of A4 and
US Letter (static/site.css's 15 mm margins: 180 mm and 185.9 mm).

Charts, tables and display equations stay within the printable width and are never split (charts in their
wide layout, no taller than a sheet); widgets print their current result without their controls; the
navigation is hidden; the exercises' answers print on a last sheet and only there; links print their address.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser

PX_PER_MM = 96 / 25.4
PAPERS = {"A4": (210.0, 297.0), "Letter": (215.9, 279.4)}
MARGIN_MM = 15


def printable(paper: str) -> tuple[int, int]:
    """The printable width and height of a sheet in CSS px."""
    width, height = PAPERS[paper]
    return int((width - 2 * MARGIN_MM) * PX_PER_MM), int((height - 2 * MARGIN_MM) * PX_PER_MM)


A4_WIDTH, A4_HEIGHT = printable("A4")
TOP_PAGES = ["index.html", "model-states.html", "activations.html", "sharding.html", "parallelism.html",
             "serving.html", "fine-tuning.html", "calculator.html", "validation.html", "exercises.html",
             "notation.html", "references.html"]

# Every chart, table, equation, widget and code block that is rendered, with its box and whether its content
# is wider than its box while it does not show its overflow (clipped).
MEASURE = """() => [...document.querySelectorAll(
    'figure.chart, .chart-svg svg, table, .table-scroll, .math-display, math, .widget, .calc-chart svg, pre, main p, main li')]
  .filter(e => e.checkVisibility() && !e.closest('.visually-hidden'))
  .map(e => { const r = e.getBoundingClientRect(), style = getComputedStyle(e);
    return {what: e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + '.' + (e.getAttribute('class') || '').split(' ')[0],
            left: r.left, right: r.right, width: r.width,
            clipped: style.overflowX !== 'visible' && e.scrollWidth > e.clientWidth + 1}; })"""
VISIBLE = "(selector) => [...document.querySelectorAll(selector)].filter(e => e.checkVisibility()).length"


def open_for_print(site_browser, path: str, paper: str = "A4", js: bool = True):
    """A page laid out as Chromium prints it on `paper`: print media, the viewport the sheet's printable area."""
    width, height = printable(paper)
    visit = site_browser.open_page(path, js=js, viewport=(width, height))
    visit.page.emulate_media(media="print")
    return visit


@pytest.mark.parametrize("paper", ["A4", "Letter"])
@pytest.mark.parametrize("path", TOP_PAGES)
def test_nothing_is_wider_than_the_printable_width(site_browser, path, paper):
    width, _ = printable(paper)
    with open_for_print(site_browser, path, paper) as visit:
        boxes = visit.page.evaluate(MEASURE)
        assert visit.problems() == []
    assert boxes, f"{path}: nothing measured"
    too_wide = [box for box in boxes if box["right"] > width + 0.5 or box["left"] < -0.5 or box["clipped"]]
    assert too_wide == [], f"{path} on {paper} ({width} px printable): {too_wide[:5]}"


def test_charts_print_whole_in_their_wide_layout(site_browser):
    """Every page chart: break-inside: avoid, the wide drawing shown (scaled to the width), the narrow one not,
    and the figure with its caption no taller than a Letter sheet's printable height (the shorter one)."""
    _, letter_height = printable("Letter")
    seen = 0
    for path in TOP_PAGES:
        with open_for_print(site_browser, path) as visit:
            charts = visit.page.evaluate("""() => [...document.querySelectorAll('figure.chart')].map(f => ({
                id: f.closest('[id]')?.id, breakInside: getComputedStyle(f).breakInside,
                wide: f.querySelector('.tm-chart-wide').checkVisibility(),
                narrow: Boolean(f.querySelector('.tm-chart-narrow')?.checkVisibility()),
                drawing: f.querySelector('.tm-chart-wide').getBoundingClientRect().width,
                natural: Number(f.querySelector('.tm-chart-wide').getAttribute('width')),
                height: f.getBoundingClientRect().height}))""")
        for chart in charts:
            where = f"{path} {chart['id']}"
            assert chart["breakInside"] == "avoid", where
            assert chart["wide"] and not chart["narrow"], where
            assert 0 < chart["drawing"] <= min(chart["natural"], A4_WIDTH) + 0.5, where
            assert chart["height"] <= letter_height, f"{where}: {chart['height']:.0f} px"
        seen += len(charts)
    assert seen >= 20  # the site's charts, not a page that lost them


def test_tables_and_equations_are_not_split(site_browser):
    with open_for_print(site_browser, "serving.html") as visit:
        rules = visit.page.evaluate("""() => ({
            equations: [...document.querySelectorAll('.math-display')].map(e => getComputedStyle(e).breakInside),
            tables: [...document.querySelectorAll('.page > .table-scroll, .chart-block .table-scroll')]
                .map(e => getComputedStyle(e).breakInside),
            rows: getComputedStyle(document.querySelector('tr')).breakInside})""")
    assert len(rules["equations"]) >= 5 and set(rules["equations"]) == {"avoid"}
    assert len(rules["tables"]) >= 3 and set(rules["tables"]) == {"avoid"}
    assert rules["rows"] == "avoid"


def test_navigation_and_controls_are_hidden_in_print_only(site_browser):
    hidden = ".site-nav, .pager, .skip-link, .figure-links, .permalink"
    with site_browser.open_page("index.html", viewport=(A4_WIDTH, A4_HEIGHT)) as visit:
        assert visit.page.evaluate(VISIBLE, ".site-nav, .pager, .figure-links") >= 3
    with open_for_print(site_browser, "index.html") as visit:
        assert visit.page.evaluate(VISIBLE, hidden) == 0
        # The site's title stays, as the sheet's heading.
        assert visit.page.evaluate(VISIBLE, ".site-title") == 1


def test_calculator_prints_the_result_on_screen_without_its_form(site_browser):
    """Today's bug: the calculator vanished from print. Change the micro-batch on the screen, then print: the
    form is gone; the summary, the bar, the parts table and the fits-on list are the ones the change drew."""
    with site_browser.open_page("calculator.html", viewport=(1280, 900)) as visit:
        page = visit.page
        before = page.locator("#calc [data-out=summary]").text_content()
        page.locator("#calc [name=micro_batch]").fill("2")
        page.locator("#calc [name=micro_batch]").dispatch_event("change")
        page.wait_for_function("(old) => document.querySelector('#calc [data-out=summary]').textContent !== old",
                               arg=before)
        screen = page.evaluate("""() => ({summary: document.querySelector('#calc [data-out=summary]').textContent,
            need: document.querySelector('#calc [data-need]').textContent,
            parts: [...document.querySelectorAll('#calc [data-part]')].map(tr => tr.textContent)})""")
        assert "micro-batch 2 x" in screen["summary"] and "micro-batch 1 x" in before
        page.set_viewport_size({"width": A4_WIDTH, "height": A4_HEIGHT})
        page.emulate_media(media="print")
        printed = page.evaluate("""() => {
            const shown = s => [...document.querySelectorAll(s)].filter(e => e.checkVisibility());
            const drawn = s => [...document.querySelectorAll(s)].filter(e => getComputedStyle(e).display !== 'none').length;
            const chart = document.querySelector('#calc-chart').getBoundingClientRect();
            return {form: shown('#calc form, #calc select, #calc input, #calc button').length,
                    summary: shown('#calc [data-out=summary]').map(e => e.textContent),
                    need: shown('#calc [data-need]').map(e => e.textContent),
                    parts: shown('#calc [data-part]').map(tr => tr.textContent),
                    fits: shown('#calc .calc-fits li').length,
                    chart: [chart.width, chart.height, document.querySelector('#calc-chart').checkVisibility()],
                    // (checkVisibility() does not see an SVG group's display: none)
                    wideTags: drawn('#calc .calc-tag-wide'), narrowTags: drawn('#calc .calc-tag-narrow')};
        }""")
        assert visit.problems() == []
    assert printed["form"] == 0
    assert printed["summary"] == [screen["summary"]]
    assert printed["need"] == [screen["need"]]
    assert printed["parts"] == screen["parts"] and len(printed["parts"]) >= 10
    assert printed["fits"] >= 10
    width, height, visible = printed["chart"]
    assert visible and 0 < width <= A4_WIDTH and height > 100
    assert printed["wideTags"] >= 3 and printed["narrowTags"] == 0


@pytest.mark.parametrize("widget", ["bytes", "budget"])
def test_teaching_widgets_print_their_state_without_controls(site_browser, widget):
    with site_browser.open_page("index.html", viewport=(1280, 900)) as visit:
        page = visit.page
        summary = f"#{widget} .wdg-summary"
        before = page.locator(summary).text_content()
        page.locator(f"#{widget} input[type=range]").first.focus()
        page.keyboard.press("ArrowRight")
        page.wait_for_function("([s, old]) => document.querySelector(s).textContent !== old", arg=[summary, before])
        after = page.locator(summary).text_content()
        assert page.evaluate(VISIBLE, f"#{widget} .wdg-controls") == 1
        page.set_viewport_size({"width": A4_WIDTH, "height": A4_HEIGHT})
        page.emulate_media(media="print")
        assert page.evaluate(VISIBLE, f"#{widget} .wdg-controls, #{widget} input, #{widget} button") == 0
        assert page.locator(summary).text_content() == after and page.evaluate(VISIBLE, summary) == 1
        assert page.evaluate(VISIBLE, f"#{widget} .wdg-bar svg") >= 1
        assert page.evaluate(VISIBLE, f"#{widget} table") == 1
        assert visit.problems() == []


def test_widgets_print_their_built_state_without_javascript(site_browser):
    with open_for_print(site_browser, "calculator.html", js=False) as visit:
        assert visit.page.evaluate(VISIBLE, "#calc form") == 0
        assert visit.page.evaluate(VISIBLE, "#calc [data-out=summary], #calc-chart, #calc .calc-table") == 3


def test_answers_print_on_a_last_sheet_and_only_in_print(site_browser):
    read = """() => ({
        inPlace: [...document.querySelectorAll('details.exercise-answer')].filter(e => e.checkVisibility()).length,
        section: [...document.querySelectorAll('.print-answers')].filter(e => e.checkVisibility()).length,
        breakBefore: getComputedStyle(document.querySelector('.print-answers')).breakBefore,
        last: document.querySelector('article.page').lastElementChild.className,
        answers: [...document.querySelectorAll('.print-answers .exercise-result')].map(e => e.textContent),
        questions: [...document.querySelectorAll('.exercise .exercise-result')].map(e => e.textContent),
        titles: [...document.querySelectorAll('.print-answer-title a')].map(a => [a.textContent, a.getAttribute('href')]),
        ids: [...document.querySelectorAll('.exercise')].map(e => e.id),
        pointers: [...document.querySelectorAll('.exercise-answer-pointer')].filter(e => e.checkVisibility()).length})"""
    with site_browser.open_page("model-states.html", viewport=(A4_WIDTH, A4_HEIGHT)) as visit:
        screen = visit.page.evaluate(read)
    with open_for_print(site_browser, "model-states.html") as visit:
        printed = visit.page.evaluate(read)
    assert screen["inPlace"] == 3 and screen["section"] == 0 and screen["pointers"] == 0
    assert printed["inPlace"] == 0 and printed["section"] == 1 and printed["pointers"] == 3
    assert printed["breakBefore"] == "page" and printed["last"] == "print-answers"
    # The same worked answers, in the order the exercises come, each pointing back to its question.
    assert printed["answers"] == printed["questions"] and len(printed["answers"]) == 3
    assert printed["answers"][1].startswith("112.00 GB")  # the 7B fp32 Adam exercise: 7e9 x 16 B
    assert printed["titles"] == [[f"Exercise {n}", f"#{anchor}"] for n, anchor in enumerate(printed["ids"], 1)]


def test_exercises_page_prints_every_answer_by_topic(site_browser):
    with open_for_print(site_browser, "exercises.html") as visit:
        got = visit.page.evaluate("""() => ({
            topics: [...document.querySelectorAll('.print-answers-topic')].map(e => e.textContent),
            pages: [...document.querySelectorAll('.exercise-topic > h2')].map(e => e.textContent),
            answers: document.querySelectorAll('.print-answers .print-answer').length,
            exercises: document.querySelectorAll('.exercise').length})""")
    assert got["topics"] == got["pages"] and len(got["topics"]) == 6
    assert got["answers"] == got["exercises"] == 17


def test_links_print_their_address(site_browser):
    """Another site's link prints its URL; a link to another page of this site its path (the build knows no
    published address here, content/site.toml has none); citations and in-page links print nothing."""
    with open_for_print(site_browser, "references.html") as visit:
        external = visit.page.evaluate("""() => [...document.querySelectorAll('.bibliography cite a')]
            .map(a => [a.getAttribute('href'), getComputedStyle(a, '::after').content])""")
    assert len(external) >= 20
    assert all(after == f'" ({href})"' and href.startswith("https://") for href, after in external), external[:3]
    with open_for_print(site_browser, "index.html") as visit:
        links = dict(visit.page.evaluate("""() => [...document.querySelectorAll('main a[href]')]
            .map(a => [a.getAttribute('href'), getComputedStyle(a, '::after').content])"""))
    assert links["model-states.html"] == '" (model-states.html)"'
    assert links["calculator.html"] == '" (calculator.html)"'
    citations = {href: after for href, after in links.items() if href.startswith("references.html#")}
    assert citations and set(citations.values()) == {"none"}
    in_page = {href: after for href, after in links.items() if href.startswith("#")}
    assert in_page and set(in_page.values()) == {"none"}


def test_formula_notes_print_open(site_browser):
    with open_for_print(site_browser, "index.html") as visit:
        shown = visit.page.evaluate("""() => [...document.querySelectorAll('details.formulas')]
            .map(d => [d.open, d.querySelector('dl').checkVisibility()])""")
    assert shown and all(not is_open and visible for is_open, visible in shown)


def test_site_address_prints_before_page_links(site_browser):
    """With the published address known (site.toml's url), the page head sets --site-url (tests/test_handout.py
    checks that), and a page link prints as that address followed by its path."""
    with open_for_print(site_browser, "index.html") as visit:
        after = visit.page.evaluate("""() => {
            document.documentElement.style.setProperty('--site-url', '"https://example.org/training-memory/"');
            return getComputedStyle(document.querySelector('main a[href="model-states.html"]'), '::after').content;
        }""")
    assert after == '" (https://example.org/training-memory/model-states.html)"'
