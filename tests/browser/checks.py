"""Site checks shared by the browser tests: axe-core, the Nu HTML checker, links, layout and chart text.

Each check returns a list of readable problem lines (empty when all is well) so a test can
collect them over every page and fail once with the whole list.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

LINK_ATTRIBUTES = {"href", "src", "xlink:href", "poster", "action", "data"}
SITE_ORIGIN = "http://site.invalid"
OVERLAP_MIN_FRACTION = 0.2  # of the smaller line height: adjacent lines' line boxes touch, labels on top of each other do not
MIN_CHART_TEXT_PX = 12.0  # effective font size on screen below which a chart label is not legible (issue 18)
EDGE_TOLERANCE_PX = 1.0
# The checker's schema needs a deep stack (it overflows now and then with the default); C1 only starts faster.
VNU_JAVA_OPTIONS = ["-Xss8m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]

AXE_RUN = """async () => {
  const result = await axe.run(document, {resultTypes: ['violations']});
  return {passes: result.passes.length, violations: result.violations.map(v => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map(n => ({target: n.target.join(' '), html: n.html, summary: n.failureSummary || ''})),
  }))};
}"""

CHART_TEXT_BOXES = """() => {
  const box = r => ({left: r.left, top: r.top, right: r.right, bottom: r.bottom, width: r.width, height: r.height});
  const scrolls = el => /(auto|scroll)/.test(getComputedStyle(el).overflowX);
  const clips = el => /(hidden|clip)/.test(getComputedStyle(el).overflowX);
  // Shown: not hidden itself, and no ancestor is display: none (a chart's other layout, a calculator label row).
  // (checkVisibility alone says true for SVG text under a display: none group; its empty box says otherwise.)
  const shownText = t => t.checkVisibility({visibilityProperty: true}) && t.getBoundingClientRect().width > 0;
  const screenPx = t => {
    const m = t.getScreenCTM();
    const scale = m ? Math.sqrt(Math.abs(m.a * m.d - m.b * m.c)) : 1;
    return parseFloat(getComputedStyle(t).fontSize) * scale;
  };
  const screenBox = t => {
    // getBBox in the text's own user space, mapped to the screen: exact floats at any zoom.
    const b = t.getBBox(), m = t.getScreenCTM();
    if (!m) return box(t.getBoundingClientRect());
    const xs = [], ys = [];
    for (const [x, y] of [[b.x, b.y], [b.x + b.width, b.y], [b.x, b.y + b.height], [b.x + b.width, b.y + b.height]]) {
      xs.push(m.a * x + m.c * y + m.e); ys.push(m.b * x + m.d * y + m.f);
    }
    const left = Math.min(...xs), top = Math.min(...ys), right = Math.max(...xs), bottom = Math.max(...ys);
    return {left, top, right, bottom, width: right - left, height: bottom - top};
  };
  const svgs = [...document.querySelectorAll('svg')].filter(s => !s.parentElement.closest('svg'));
  return svgs.map((svg, index) => {
    const title = svg.querySelector(':scope > title');
    const holder = svg.parentElement.closest('[id]');
    const name = svg.id || (title && title.textContent.trim()) || svg.getAttribute('aria-label') ||
      `svg #${index + 1}` + (holder ? ` in #${holder.id}` : '');
    let scroller = null, clipper = null;
    for (let el = svg.parentElement; el && el !== document.body; el = el.parentElement) {
      if (!scroller && scrolls(el)) scroller = el;
      if (!scroller && !clipper && clips(el)) clipper = el;
    }
    const texts = [...svg.querySelectorAll('text')]
      .map(t => ({text: t.textContent.trim(), box: screenBox(t), px: screenPx(t), shown: shownText(t)}))
      .filter(t => t.text && t.shown && t.box.width > 0 && t.box.height > 0);
    return {name, box: box(svg.getBoundingClientRect()), texts, scrolls: !!scroller,
            clip: clipper ? box(clipper.getBoundingClientRect()) : null};
  }).filter(chart => chart.box.width > 0 && chart.box.height > 0);
}"""

FIGURE_INVENTORY = """() => {
  const shown = el => {
    const r = el.getBoundingClientRect();
    const style = getComputedStyle(el);
    return r.width > 0 && r.height > 0 && style.visibility !== 'hidden' && style.display !== 'none';
  };
  // A chart is a figure's SVGs: a page chart has a wide and a narrow layout, one shown at any width.
  const charts = [...document.querySelectorAll('figure')].filter(f => f.querySelector('svg'));
  const tables = [...document.querySelectorAll('table')];
  const describe = el => (el.id ? '#' + el.id : '') + (el.querySelector('title, caption')
      ? ' "' + el.querySelector('title, caption').textContent.trim().slice(0, 60) + '"' : '');
  return {
    charts: charts.map(el => ({name: describe(el.querySelector('svg')),
                               shown: [...el.querySelectorAll('svg')].some(s => !s.parentElement.closest('svg') && shown(s))})),
    tables: tables.map(el => ({name: describe(el), shown: shown(el)})),
  };
}"""


def run_axe(page, axe_source: str) -> list[str]:
    """Run axe-core (injected from the local file, bypassing page CSP) and describe every violation."""
    page.evaluate(axe_source + "\n;undefined")
    result = page.evaluate(AXE_RUN)
    lines = [] if result["passes"] else ["axe-core ran no passing rule: it did not really check the page"]
    for violation in result["violations"]:
        for node in violation["nodes"]:
            lines.append(
                f"{violation['id']} ({violation['impact']}): {violation['help']} | node {node['target']} | "
                f"{shorten(node['html'])} | {shorten(node['summary'], 200)}"
            )
    return lines


def shorten(text: str, limit: int = 160) -> str:
    """Squash whitespace and cut long text for a one-line report."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def run_vnu(java: str, jar: Path, files: list[Path], root: Path) -> list[str]:
    """Run the Nu HTML checker over files and describe every error."""
    command = [java, *VNU_JAVA_OPTIONS, "-jar", str(jar), "--errors-only", "--format", "json", *map(str, files)]
    result = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300)
    try:
        report = json.loads(result.stderr or result.stdout)
    except json.JSONDecodeError:
        return [f"vnu did not produce JSON (exit {result.returncode}): {shorten(result.stderr + result.stdout, 400)}"]
    lines = []
    for message in report.get("messages", []):
        if message.get("type") not in {"error", "non-document-error"}:
            continue
        where = relative_page(message.get("url", ""), root)
        line = message.get("lastLine", "?")
        lines.append(f"{where}:{line}: {message.get('message', '')} | {shorten(message.get('extract', ''))}")
    if result.returncode != 0 and not lines:
        lines.append(f"vnu exited {result.returncode} without messages: {shorten(result.stderr, 400)}")
    return lines


def relative_page(url: str, root: Path) -> str:
    """Turn a file: URL from vnu into a path relative to the site root."""
    path = Path(unquote(urlsplit(url).path))
    try:
        return str(path.relative_to(root))
    except ValueError:
        return url


@dataclass
class PageLinks:
    """The ids a page defines and the URLs it refers to (with source line numbers)."""

    ids: set[str] = field(default_factory=set)
    refs: list[tuple[int, str, str]] = field(default_factory=list)


class LinkParser(HTMLParser):
    """Collects ids and referenced URLs from one HTML document."""

    def __init__(self):
        """Start with nothing collected."""
        super().__init__(convert_charrefs=True)
        self.links = PageLinks()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        """Record ids, anchor names and URL-valued attributes."""
        for name, value in attrs:
            if value is None:
                continue
            if name == "id" or (tag == "a" and name == "name"):
                self.links.ids.add(value)
            elif name in LINK_ATTRIBUTES:
                self.links.refs.append((self.getpos()[0], name, value.strip()))
            elif name == "srcset":
                for candidate in value.split(","):
                    if candidate.strip():
                        self.links.refs.append((self.getpos()[0], name, candidate.split()[0]))

    handle_startendtag = handle_starttag


def parse_links(path: Path) -> PageLinks:
    """Parse one HTML file for its ids and references."""
    parser = LinkParser()
    parser.feed(path.read_text(encoding="utf-8"))
    parser.close()
    return parser.links


def is_state_fragment(fragment: str) -> bool:
    """Tell whether a fragment carries widget state (key=value) rather than naming an element."""
    return "=" in fragment


def find_broken_links(site_dir: Path) -> list[str]:
    """Check every internal href/src of every page: the file exists inside the site and the #id exists."""
    pages = sorted(site_dir.rglob("*.html"))
    parsed = {page: parse_links(page) for page in pages}
    site_base = f"{SITE_ORIGIN}/site/"
    problems = []
    for page, links in parsed.items():
        page_rel = page.relative_to(site_dir).as_posix()
        page_url = site_base + page_rel
        for line, attribute, ref in links.refs:
            problem = check_reference(site_dir, parsed, page_url, site_base, ref)
            if problem:
                problems.append(f"{page_rel}:{line}: {attribute}={ref!r}: {problem}")
    return problems


def check_reference(site_dir: Path, parsed: dict, page_url: str, site_base: str, ref: str) -> str | None:
    """Return why one reference is broken, or None when it resolves."""
    if not ref:
        return "empty URL"
    scheme = urlsplit(ref).scheme
    if scheme in {"http", "https", "mailto", "tel", "data"}:
        return None
    if scheme:
        return f"unexpected URL scheme {scheme!r}"
    if ref.startswith("//"):
        return None
    if ref.startswith("/"):
        return "root-relative URL breaks under a sub-path and from file://"
    target = urlsplit(urljoin(page_url, ref))
    if not target.path.startswith(urlsplit(site_base).path):
        return "points outside the site"
    rel = unquote(target.path[len(urlsplit(site_base).path):])
    file = site_dir / rel
    if rel == "" or rel.endswith("/") or file.is_dir():
        file = file / "index.html"
    if not file.is_file():
        return f"no such file {file.relative_to(site_dir).as_posix()}"
    fragment = unquote(target.fragment)
    if not fragment or is_state_fragment(fragment) or file.suffix != ".html":
        return None
    if fragment not in parsed[file].ids:
        return f"no element with id {fragment!r} in {file.relative_to(site_dir).as_posix()}"
    return None


def find_horizontal_overflow(page) -> list[str]:
    """Report when the document is wider than the viewport."""
    widths = page.evaluate("() => [document.scrollingElement.scrollWidth, window.innerWidth]")
    if widths[0] > widths[1]:
        return [f"document scrollWidth {widths[0]} px > viewport {widths[1]} px ({widest_elements(page)})"]
    return []


def widest_elements(page) -> str:
    """Name the outermost elements that stick out past the viewport's right edge (not those inside scrollers)."""
    culprits = page.evaluate(
        """() => {
          const edge = window.innerWidth + 0.5;
          const contained = el => {
            for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
              if (getComputedStyle(a).overflowX !== 'visible') return true;
            }
            return false;
          };
          const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
            (el.classList.length ? '.' + [...el.classList].join('.') : '');
          return [...document.body.querySelectorAll('*')]
            .filter(el => el.getBoundingClientRect().right > edge && !contained(el))
            .filter(el => el.parentElement === document.body || el.parentElement.getBoundingClientRect().right <= edge)
            .slice(0, 5)
            .map(el => `${name(el)} in ${name(el.parentElement)} right=${Math.round(el.getBoundingClientRect().right)}`);
        }"""
    )
    return "sticking out: " + ", ".join(culprits) if culprits else "no single element found"


def find_chart_text_problems(page) -> list[str]:
    """Report chart text that is too small to read, overlaps other text, or is clipped."""
    width = page.evaluate("window.innerWidth")
    problems = []
    for chart in page.evaluate(CHART_TEXT_BOXES):
        name = shorten(chart["name"], 60)
        problems += chart_cut_problems(chart, name, width)
        small = [text for text in chart["texts"] if text["px"] < MIN_CHART_TEXT_PX - 0.01]
        if small:
            smallest = min(small, key=lambda text: text["px"])
            problems.append(
                f"chart {name!r}: {len(small)} of {len(chart['texts'])} labels render below {MIN_CHART_TEXT_PX} px "
                f"(smallest {smallest['px']:.1f} px: {shorten(smallest['text'], 40)!r})"
            )
        for text in chart["texts"]:
            if not contains(chart["box"], text["box"]):
                problems.append(f"chart {name!r}: text {shorten(text['text'], 40)!r} is clipped by the chart's edge")
        problems += [
            f"chart {name!r}: text {shorten(a['text'], 40)!r} overlaps {shorten(b['text'], 40)!r}"
            for a, b in overlapping_pairs(chart["texts"])
        ]
    return problems


def chart_cut_problems(chart: dict, name: str, width: int) -> list[str]:
    """Report a chart cut off by the viewport or by a clipping ancestor (a scrolling container is fine)."""
    box = chart["box"]
    if chart["clip"] and not contains(chart["clip"], box):
        return [f"chart {name!r} is cut off by a container with overflow hidden"]
    if not chart["scrolls"] and (box["right"] > width + EDGE_TOLERANCE_PX or box["left"] < -EDGE_TOLERANCE_PX):
        return [f"chart {name!r} is cut by the viewport: spans {box['left']:.0f}..{box['right']:.0f} px of {width}"]
    return []


def contains(outer: dict, inner: dict) -> bool:
    """Tell whether inner lies within outer, give or take a pixel."""
    tol = EDGE_TOLERANCE_PX
    return (
        inner["left"] >= outer["left"] - tol
        and inner["top"] >= outer["top"] - tol
        and inner["right"] <= outer["right"] + tol
        and inner["bottom"] <= outer["bottom"] + tol
    )


def overlapping_pairs(texts: list[dict]) -> list[tuple[dict, dict]]:
    """Return the pairs of text boxes that overlap by more than line-box slack."""
    pairs = []
    for i, a in enumerate(texts):
        for b in texts[i + 1 :]:
            if boxes_overlap(a["box"], b["box"]):
                pairs.append((a, b))
    return pairs


def boxes_overlap(a: dict, b: dict) -> bool:
    """Tell whether two text boxes overlap both ways by more than a fraction of the smaller line height."""
    across = min(a["right"], b["right"]) - max(a["left"], b["left"])
    down = min(a["bottom"], b["bottom"]) - max(a["top"], b["top"])
    slack = OVERLAP_MIN_FRACTION * min(a["height"], b["height"])
    return across > slack and down > slack


FIT_PROBLEMS = """() => {
  const edge = window.innerWidth + 0.5;
  const main = document.querySelector('main');
  const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
    (el.classList.length ? '.' + [...el.classList].join('.') : '');
  const scrolls = el => /(auto|scroll)/.test(getComputedStyle(el).overflowX);
  const region = el => el.tabIndex >= 0 && el.getAttribute('role') === 'region' &&
    !!(el.getAttribute('aria-label') || el.getAttribute('aria-labelledby'));
  const problems = [];
  // A scroll container that does scroll must be a focusable, labelled region.
  for (const el of main.querySelectorAll('*')) {
    if (scrolls(el) && el.scrollWidth > el.clientWidth + 1 && !region(el))
      problems.push(`${name(el)} scrolls sideways but is not a focusable labelled region`);
  }
  // Nothing wider than the viewport, unless it is inside a scroll region.
  const inRegion = el => {
    for (let a = el.parentElement; a && a !== main; a = a.parentElement) if (scrolls(a) && region(a)) return true;
    return false;
  };
  // The content of a closed <details> is not laid out: Chromium keeps its last geometry, which is stale.
  const folded = el => { const d = el.closest('details'); return !!d && !d.open && !el.closest('summary'); };
  const out = [...main.querySelectorAll('*')].filter(el => {
    const r = el.getBoundingClientRect();
    return r.width > 0 && (r.right > edge || r.left < -0.5) && !inRegion(el) && !folded(el);
  });
  for (const el of out.filter(el => !out.includes(el.parentElement)).slice(0, 5))
    problems.push(`${name(el)} in ${name(el.parentElement)} spans ${Math.round(el.getBoundingClientRect().left)}..` +
                  `${Math.round(el.getBoundingClientRect().right)} px of ${window.innerWidth}`);
  // Charts never scroll: no shown chart has a scroll container around it.
  const charts = [...main.querySelectorAll('svg')].filter(s => !s.parentElement.closest('svg'))
    .filter(s => s.getBoundingClientRect().width > 0 && getComputedStyle(s).display !== 'none');
  for (const svg of charts) {
    for (let a = svg.parentElement; a && a !== main; a = a.parentElement) {
      if (scrolls(a)) { problems.push(`chart ${name(svg)} sits in ${name(a)}, which scrolls`); break; }
    }
  }
  if (document.scrollingElement.scrollWidth > window.innerWidth)
    problems.push(`document scrollWidth ${document.scrollingElement.scrollWidth} px > viewport ${window.innerWidth} px`);
  return problems;
}"""


def find_fit_problems(page) -> list[str]:
    """Report what does not fit the viewport: anything inside main wider than the viewport outside a focusable
    labelled scroll region, a scroll container that scrolls without being one, a chart inside a scroll container."""
    return page.evaluate(FIT_PROBLEMS)


def figure_inventory(page) -> dict:
    """List the charts (svg in a figure) and tables on the page and whether each is shown."""
    return page.evaluate(FIGURE_INVENTORY)
