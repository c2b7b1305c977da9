"""The course pack: every page of a built site composed into one HTML document for Chromium to print.

Chromium prints one document at a time, so the pack is one document: a title page, the contents, each
page's <main> in the site's navigation order (each a chapter starting on a new sheet), and a last
chapter with every exercise's answer. Ids are made unique by prefixing each chapter's with its page's
name; links between pages become links inside the document; scripts are left out (every widget prints
the state the build gave it). builder/handout_pdf.py prints the result; nothing here starts a browser.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from pathlib import Path

NAV = re.compile(r'<nav class="site-nav"[^>]*>(.*?)</nav>', re.S)
NAV_LINK = re.compile(r'<a href="([^"#?]+\.html)"[^>]*>(.*?)</a>', re.S)
MAIN = re.compile(r'<main\b[^>]*>(.*?)</main>', re.S)
FOOTER = re.compile(r'<footer class="site-footer">(.*?)</footer>', re.S)
SITE_TITLE = re.compile(r'<p class="site-title"><a [^>]*>(.*?)</a></p>', re.S)
H1 = re.compile(r"<h1\b[^>]*>(.*?)</h1>", re.S)
SCRIPT = re.compile(r"<script\b[^>]*>.*?</script>\s*", re.S)
PERMALINK = re.compile(r'\s*<a class="permalink"[^>]*>.*?</a>', re.S)  # hidden in print, but in the PDF's outline
PRINT_ANSWERS = re.compile(r'<section class="print-answers"[^>]*>\s*<h2 id="print-answers">.*?</h2>(.*?)</section>\s*',
                           re.S)
# A start tag and its attributes (quoted values may hold '>').
TAG = re.compile(r"<([a-zA-Z][\w:-]*)((?:\s+[^\s=>/]+(?:=\"[^\"]*\"|='[^']*'|=[^\s>\"']+)?)*)\s*(/?)>")
ATTRIBUTE = re.compile(r"([^\s=>/]+)(?:=(\"[^\"]*\"|'[^']*'|[^\s>\"']+))?")
ID_LISTS = ("id", "for", "aria-labelledby", "aria-describedby", "aria-controls", "aria-owns", "headers", "list")
URL_REF = re.compile(r"url\(#([^)]+)\)")
TAGS = re.compile(r"<[^>]+>")


@dataclass
class Chapter:
    """One page of the site, ready to go into the pack."""

    slug: str  # 'model-states' for model-states.html
    title: str  # its <h1>, as text
    body: str  # its <main>'s content, ids prefixed, links rewritten, answers taken out
    answers: str = ""  # its exercises' answers (the page's print-only "Answers" section), ids prefixed


@dataclass
class Pack:
    """Everything the title page and the chapters need."""

    title: str
    description: str
    version: str
    date: str  # YYYY-MM-DD, or '' when no date could be found
    url: str  # the published site's address ('' when unknown)
    stylesheet: str  # the site's stylesheet, as a URL the document can load
    footer: str  # the site footer's paragraphs (units, licence)
    chapters: list[Chapter] = field(default_factory=list)


def text_of(markup: str) -> str:
    """The text of some HTML, whitespace collapsed."""
    return " ".join(html.unescape(TAGS.sub("", markup)).split())


def nav_order(index_html: str) -> list[tuple[str, str]]:
    """(file, navigation title) of every page, in the site's navigation order."""
    nav = NAV.search(index_html)
    if nav is None:
        return []
    return [(href, text_of(title)) for href, title in NAV_LINK.findall(nav.group(1))]


def format_attributes(attributes: list[tuple[str, str | None]]) -> str:
    """Attributes back into markup (values keep the quoting the build gave them)."""
    return "".join(f" {name}" if value is None else f" {name}={value}" for name, value in attributes)


class LinkRewriter:
    """Rewrites one page's ids and links for the pack."""

    def __init__(self, slug: str, ids: set[str], pages: set[str], url: str) -> None:
        self.slug, self.ids, self.pages, self.url = slug, ids, pages, url

    def local(self, target: str, slug: str | None = None) -> str:
        """The id in the pack of `target`, an id on page `slug` (this one by default)."""
        return f"{slug or self.slug}--{target}"

    def href(self, value: str) -> tuple[str | None, bool]:
        """The link's target in the pack (None: drop the link) and whether it now points inside the pack."""
        if re.match(r"^[a-z][a-z0-9+.-]*:", value):  # https:, mailto:, data: ...
            return value, False
        if value.startswith("#"):
            target = value[1:]
            return (f"#{self.local(target)}" if target in self.ids else None), True
        path, _, fragment = value.partition("#")
        if path in self.pages and "?" not in path:
            slug = path[:-len(".html")]
            return (f"#{self.local(fragment, slug)}" if fragment else f"#chapter-{slug}"), True
        # Another file of the site (a figure, a configuration link): its published address, if known.
        if self.url:
            return self.url + (f"{self.slug}.html{value}" if value.startswith("?") else value), False
        return None, False

    def tag(self, match: re.Match) -> str:
        """One start tag with its ids prefixed and its link rewritten."""
        name, attributes, closing = match.group(1), ATTRIBUTE.findall(match.group(2)), match.group(3)
        result: list[tuple[str, str | None]] = []
        internal = False
        for key, value in ((k, v if v else None) for k, v in attributes):
            bare = value.strip("\"'") if value is not None else None
            if bare is not None and key.lower() in ID_LISTS:
                value = '"' + " ".join(self.local(token) for token in bare.split()) + '"'
            elif bare is not None and key.lower() in ("href", "xlink:href") and name.lower() == "a":
                target, internal = self.href(html.unescape(bare))
                if target is None:
                    continue
                value = '"' + html.escape(target) + '"'
            elif bare is not None and key.lower() in ("href", "xlink:href") and bare.startswith("#"):
                value = f'"#{self.local(bare[1:])}"'
            if value is not None and "url(#" in value:
                value = URL_REF.sub(lambda m: f"url(#{self.local(m.group(1))})", value)
            result.append((key, value))
        if internal and name.lower() == "a":
            classes = next((i for i, (k, _) in enumerate(result) if k == "class"), None)
            if classes is None:
                result.append(("class", '"print-no-url"'))
            elif "print-no-url" not in result[classes][1]:
                result[classes] = ("class", result[classes][1][:-1] + ' print-no-url"')
        return f"<{name}{format_attributes(result)}{' /' if closing else ''}>"

    def rewrite(self, markup: str) -> str:
        """Every start tag of `markup` rewritten."""
        return TAG.sub(self.tag, markup)


def read_chapter(path: Path, pages: set[str], url: str, keep_answers: bool) -> Chapter:
    """One built page as a chapter: its <main> without scripts, ids prefixed, links rewritten, and its
    exercises' answers apart (left out with `keep_answers` False: they repeat another chapter's)."""
    text = path.read_text(encoding="utf-8")
    main = MAIN.search(text)
    body = PERMALINK.sub("", SCRIPT.sub("", main.group(1) if main else ""))
    answers = ""
    found = PRINT_ANSWERS.search(body)
    if found:
        body = body[:found.start()] + body[found.end():]
        answers = found.group(1) if keep_answers else ""
    slug = path.stem
    ids = set(re.findall(r'\sid="([^"]+)"', body + answers))
    rewriter = LinkRewriter(slug, ids, pages, url)
    heading = H1.search(body)
    return Chapter(slug=slug, title=text_of(heading.group(1)) if heading else slug, body=rewriter.rewrite(body),
                   answers=rewriter.rewrite(answers))


def read_site(site: Path, url: str = "") -> tuple[str, str, list[Chapter]]:
    """The site's title, its footer and every page as a chapter, in navigation order. The Exercises page,
    which repeats every page's exercises, keeps its questions but not its answers (the pack's last chapter
    holds them, page by page)."""
    index = (site / "index.html").read_text(encoding="utf-8")
    order = [href for href, _ in nav_order(index)] or ["index.html"]
    pages = set(order)
    chapters = []
    for href in order:
        path = site / href
        if path.is_file():
            collection = 'class="exercise-collection"' in path.read_text(encoding="utf-8")
            chapters.append(read_chapter(path, pages, url, keep_answers=not collection))
    title = SITE_TITLE.search(index)
    footer = FOOTER.search(index)
    # The footer goes on the title page: without the home page's version line (its link to the home page's
    # pinned copy means nothing in the pack; the title page gives the version), its links rewritten like a page's.
    footer_html = VERSION_LINE.sub("", SCRIPT.sub("", footer.group(1))).strip() if footer else ""
    return (text_of(title.group(1)) if title else "", LinkRewriter("index", set(), pages, url).rewrite(footer_html),
            chapters)


VERSION_LINE = re.compile(r'<p class="version">.*?</p>', re.S)


HANDOUT_CSS = """
.handout-title-page { min-height: 240mm; display: flex; flex-direction: column; justify-content: center; }
.handout-title-page h1 { font-size: 30pt; margin: 0 0 1rem; }
.handout-title-page .handout-edition { font-size: 13pt; margin: 2rem 0 0; }
.handout-title-page .handout-footer { margin-top: auto; font-size: 9pt; color: #333; }
.handout-toc { break-before: page; }
.handout-toc ol { list-style: none; padding: 0; }
.handout-toc li { display: flex; gap: 0.5rem; margin: 0.3rem 0; }
.handout-toc li a { color: #000; text-decoration: none; }
.handout-toc .handout-leader { flex: 1; border-bottom: 1px dotted #666; margin-bottom: 0.35em; }
.handout-chapter { break-before: page; }
.handout-answers h2 { margin-top: 1.5rem; }
.print-answer { break-inside: avoid; }
"""


def toc(pack: Pack, numbers: dict[str, int] | None) -> str:
    """The contents: each chapter with the sheet it starts on (blank until the numbers are known)."""
    entries = [(f"chapter-{c.slug}", c.title) for c in pack.chapters]
    if any(c.answers for c in pack.chapters):
        entries.append(("chapter-answers", "Answers to the exercises"))
    rows = "".join(f'<li><a class="print-no-url" href="#{anchor}">{html.escape(title)}</a>'
                   f'<span class="handout-leader"></span><span class="handout-page">'
                   f'{(numbers or {}).get(anchor, "")}</span></li>\n' for anchor, title in entries)
    return f'<nav class="handout-toc" aria-labelledby="handout-contents">\n<h2 id="handout-contents">Contents</h2>\n<ol>\n{rows}</ol>\n</nav>\n'


def title_page(pack: Pack) -> str:
    """The site's title, description, version and date, where it is published, and its licence."""
    edition = f"Course pack, version {html.escape(pack.version)}" if pack.version else "Course pack"
    if pack.date:
        edition += f", {html.escape(pack.date)}"
    parts = [f"<h1>{html.escape(pack.title)}</h1>"]
    if pack.description:
        parts.append(f'<p class="summary">{html.escape(pack.description)}</p>')
    parts.append(f'<p class="handout-edition">{edition}</p>')
    if pack.url:
        parts.append(f'<p>Online, with every widget interactive: <a href="{html.escape(pack.url)}">'
                     f"{html.escape(pack.url)}</a></p>")
    parts.append(f'<div class="handout-footer">{pack.footer}</div>')
    return '<section class="handout-title-page">\n' + "\n".join(parts) + "\n</section>\n"


def answers_chapter(pack: Pack) -> str:
    """The last chapter: every page's answers under the page's title."""
    groups = "".join(f'<h2>{html.escape(c.title)}</h2>\n{c.answers}' for c in pack.chapters if c.answers)
    if not groups:
        return ""
    return (f'<section class="handout-chapter handout-answers" id="chapter-answers">\n'
            f"<h1>Answers to the exercises</h1>\n{groups}</section>\n")


def chapter_html(chapter: Chapter) -> str:
    """One chapter, starting on a new sheet."""
    return f'<section class="handout-chapter" id="chapter-{chapter.slug}">\n{chapter.body}</section>\n'


def document(pack: Pack, parts: str, language: str = "en") -> str:
    """A whole HTML document around `parts`, with the site's stylesheet and the pack's own rules."""
    return (f'<!DOCTYPE html>\n<html lang="{language}">\n<head>\n<meta charset="utf-8">\n'
            f"<title>{html.escape(pack.title)}</title>\n"
            f'<link rel="stylesheet" href="{html.escape(pack.stylesheet)}">\n<style>{HANDOUT_CSS}</style>\n'
            f'</head>\n<body class="handout">\n<main>\n{parts}</main>\n</body>\n</html>\n')


def front_matter(pack: Pack, numbers: dict[str, int] | None = None) -> str:
    """The title page and the contents."""
    return document(pack, title_page(pack) + toc(pack, numbers))


def chapter_documents(pack: Pack) -> dict[str, str]:
    """Each chapter as a document of its own (anchor -> HTML), to count the sheets it takes."""
    documents = {f"chapter-{c.slug}": document(pack, chapter_html(c)) for c in pack.chapters}
    answers = answers_chapter(pack)
    if answers:
        documents["chapter-answers"] = document(pack, answers)
    return documents


def whole_document(pack: Pack, numbers: dict[str, int] | None = None) -> str:
    """The course pack: title page, contents, every chapter, the answers."""
    return document(pack, title_page(pack) + toc(pack, numbers)
                    + "".join(chapter_html(c) for c in pack.chapters) + answers_chapter(pack))
