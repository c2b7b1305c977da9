"""The course pack (`python -m builder handout`) without a browser: composing the built pages into one
document (builder/handout.py), making the PDF reproducible (builder/handout_pdf.py), the page head's
published address for printed links, and the command's one-line errors. tests/browser/test_handout.py
prints real PDFs."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from builder import cli
from builder.cli_handout import pack_date
from builder.handout import LinkRewriter, Pack, chapter_documents, read_site, whole_document
from builder.handout_pdf import count_pages, first_sheets, reproducible
from builder.render import make_csp, make_templates
from tests.test_build import build_fixture

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def fixture_site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("handout") / "site"
    build_fixture(out)
    return out


def make_pack(chapters, url: str = "") -> Pack:
    return Pack(title="Site", description="About it", version="1.2.3", date="2026-01-02", url=url,
                stylesheet="file:///site/static/site.css", footer="<p>Licence</p>", chapters=chapters)


def test_chapters_follow_the_navigation(fixture_site):
    title, footer, chapters = read_site(fixture_site)
    assert title == "Fixture Site"
    assert [c.slug for c in chapters] == ["index", "references"]
    assert [c.title for c in chapters] == ["Fixture home", "References"]
    assert "CC BY 4.0" in footer


def test_one_document_with_unique_ids_and_links_inside_it(fixture_site):
    _, _, chapters = read_site(fixture_site)
    document = whole_document(make_pack(chapters), {"chapter-index": 3, "chapter-references": 5})
    ids = re.findall(r'\sid="([^"]+)"', document)
    assert len(ids) == len(set(ids)) and len(ids) > 20
    targets = re.findall(r'\shref="#([^"]+)"', document)
    assert targets and set(targets) <= set(ids)
    # A citation on the home page now points at the reference in the References chapter.
    assert any(t.startswith("references--ref-") for t in targets)
    assert "<script" not in document and 'class="permalink"' not in document
    assert not re.search(r'\shref="[^"#:]+\.html', document)  # no link to a page outside the pack
    # The contents: each chapter with its first sheet.
    assert re.search(r'href="#chapter-index">Fixture home</a><span class="handout-leader"></span>'
                     r'<span class="handout-page">3</span>', document)
    assert "Course pack, version 1.2.3, 2026-01-02" in document
    assert list(chapter_documents(make_pack(chapters))) == ["chapter-index", "chapter-references"]


def test_links_and_ids_rewritten():
    markup = ('<a href="calculator.html#calc" class="x">c</a> <a href="references.html">r</a> <a href="#top">t</a> '
              '<a href="?calc.mode=serve">fix</a> <a href="figures/a.svg" download>svg</a> '
              '<a href="https://example.com/a?b=1&amp;c=2">ext</a> <a href="#elsewhere">gone</a> '
              '<h2 id="top">T</h2><rect fill="url(#hatch)"/><label for="f">F</label>'
              '<p aria-labelledby="top hatch">x</p>')
    rewriter = LinkRewriter("serving", {"top", "hatch", "f"}, {"calculator.html", "references.html"}, "")
    assert rewriter.rewrite(markup) == (
        '<a href="#calculator--calc" class="x print-no-url">c</a> <a href="#chapter-references" class="print-no-url">r</a> '
        '<a href="#serving--top" class="print-no-url">t</a> <a>fix</a> <a download>svg</a> '
        '<a href="https://example.com/a?b=1&amp;c=2">ext</a> <a class="print-no-url">gone</a> '
        '<h2 id="serving--top">T</h2><rect fill="url(#serving--hatch)" /><label for="serving--f">F</label>'
        '<p aria-labelledby="serving--top serving--hatch">x</p>')
    published = LinkRewriter("serving", set(), {"calculator.html"}, "https://example.org/tm/")
    assert published.rewrite('<a href="?calc.mode=serve">fix</a><a href="figures/a.svg">svg</a>') == (
        '<a href="https://example.org/tm/serving.html?calc.mode=serve">fix</a>'
        '<a href="https://example.org/tm/figures/a.svg">svg</a>')


def site_page(slug: str, body: str) -> str:
    nav = ('<nav class="site-nav" aria-label="Pages">\n<ul>\n<li><a href="index.html">Home</a></li>\n'
           '<li><a href="topic.html">Topic</a></li>\n<li><a href="exercises.html">Exercises</a></li>\n</ul>\n</nav>')
    return (f'<html><body><header class="site-header"><p class="site-title"><a href="index.html">Site</a></p>{nav}'
            f'</header><main id="main" tabindex="-1">\n<article class="page">\n<h1>{slug.title()}</h1>\n{body}'
            '</article>\n</main><footer class="site-footer"><p>Foot</p></footer></body></html>')


ANSWERS = ('<section class="print-answers" aria-labelledby="print-answers">\n<h2 id="print-answers">Answers</h2>\n'
           '<div class="print-answer">\n<p class="print-answer-title"><a class="print-no-url" href="#exercise-a">'
           'Exercise 1</a></p>\n<p class="exercise-result"><strong>{answer}</strong></p>\n</div>\n</section>\n')


def test_answers_go_to_the_last_chapter(tmp_path):
    """A page's print-only answers leave its chapter for the pack's last one, under the page's title; the
    Exercises page's (the same answers again) are left out."""
    exercise = '<section class="exercise" id="exercise-a"><h3>Exercise 1</h3></section>\n'
    (tmp_path / "index.html").write_text(site_page("index", "<p>Hello</p>\n"), encoding="utf-8")
    (tmp_path / "topic.html").write_text(site_page("topic", exercise + ANSWERS.format(answer="12 GiB")), encoding="utf-8")
    (tmp_path / "exercises.html").write_text(site_page("exercises", '<div class="exercise-collection">\n' + exercise
                                                       + ANSWERS.format(answer="again") + "</div>\n"), encoding="utf-8")
    _, footer, chapters = read_site(tmp_path)
    assert footer == "<p>Foot</p>"
    assert [c.answers != "" for c in chapters] == [False, True, False]
    document = whole_document(make_pack(chapters))
    last = document[document.index('id="chapter-answers"'):]
    assert "<h1>Answers to the exercises</h1>\n<h2>Topic</h2>" in last and "12 GiB" in last
    assert '<a class="print-no-url" href="#topic--exercise-a">Exercise 1</a>' in last
    assert "again" not in document and "print-answers" not in document
    assert document.index('id="chapter-exercises"') < document.index('id="chapter-answers"')
    assert "Answers to the exercises" in document[:document.index('id="chapter-index"')]  # in the contents


def test_pdf_made_reproducible():
    pdf = (b"%PDF-1.4\n1 0 obj <</Type /Page>> endobj 2 0 obj <</Type /Pages /Kids [1 0 R]>> endobj\n"
           b"<</S /P /ID (node00000412)>> <</S /P /ID (node00000398)>> <</Names [(node00000398) 1 (node00000412) 2]>>"
           b"/CreationDate (D:20991231235959+00'00') /ModDate (D:20991231235959+00'00')")
    fixed = reproducible(pdf, "2026-01-02")
    assert len(fixed) == len(pdf)
    assert b"/CreationDate (D:20260102000000+00'00')" in fixed and b"/ModDate (D:20260102000000+00'00')" in fixed
    assert b"(node00000002)>> <</S /P /ID (node00000001)" in fixed and b"[(node00000001) 1 (node00000002) 2]" in fixed
    assert count_pages(fixed) == 1


class CountingPrinter:
    """Prints each document as so many sheets: the front matter 2, a chapter as many as its name says."""

    def __init__(self):
        self.printed = []

    def pdf(self, name: str, markup: str, numbered: bool = False) -> bytes:
        self.printed.append(name)
        sheets = {"front": 2, "chapter-index": 3, "chapter-references": 1, "chapter-answers": 4}[name]
        return b"%PDF-1.4 <</Type /Pages>>" + b" <</Type /Page>>" * sheets


def test_contents_numbers_count_each_chapters_sheets(fixture_site):
    _, _, chapters = read_site(fixture_site)
    printer = CountingPrinter()
    assert first_sheets(make_pack(chapters), printer) == {"chapter-index": 3, "chapter-references": 6}
    assert printer.printed == ["chapter-index", "chapter-references", "front", "front"]


def test_pack_date_is_never_the_clock(tmp_path, monkeypatch):
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    assert pack_date({"released": "2026-11-24"}, ROOT / "content") == "2026-11-24"
    newest = subprocess.run(["git", "log", "-1", "--format=%cs", "--", "content"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    if newest:  # a git checkout: the newest commit that changed content/
        assert pack_date({}, ROOT / "content") == newest
    assert pack_date({}, tmp_path / "nowhere") == ""
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767312000")
    assert pack_date({}, ROOT / "content") == "2026-01-02"


def test_page_head_gives_print_the_published_address():
    """site.toml's url (when the site has one) is what printed page links start with: a <style> in the head sets
    --site-url, as a CSS string nothing can break out of, allowed by the page's CSP by its hash."""
    templates = make_templates(ROOT / "templates")
    head = templates.get_template("partials/head.html")
    context = {"head_title": "T", "head_description": "D", "csp": "x", "stylesheet": "static/site.css"}
    assert "<style>" not in head.render(site={"title": "S"}, **context)
    html = head.render(site={"url": 'https://example.org/tm/"</style>'}, **context)
    style = re.search(r"<style>(.*?)</style>", html, re.S).group(1)
    assert style == ':root { --site-url: "https://example.org/tm/\\22 \\3c /style\\3e "; }'
    assert "'sha256-" in make_csp(html)


def run(argv, capsys) -> tuple[int, str]:
    code = cli.main(["handout", *argv])
    return code, capsys.readouterr().err


def test_bad_flags_are_one_line_errors_and_keep_the_previous_pdf(tmp_path, capsys, fixture_site):
    previous = tmp_path / "pack.pdf"
    previous.write_bytes(b"previous")
    cases = [
        (["--out", str(tmp_path / "missing" / "pack.pdf")], "argument --out: no such folder"),
        (["--out", str(tmp_path)], "argument --out: " + str(tmp_path) + " is a folder"),
        (["--site", str(tmp_path / "nothing"), "--out", str(previous)], "argument --site: "),
        (["--site", str(fixture_site), "--chromium", str(tmp_path / "no-chromium"), "--out", str(previous)],
         "argument --chromium: no such file"),
        (["--content", str(tmp_path / "no-content"), "--out", str(previous)], "argument --content: no such folder"),
    ]
    for argv, message in cases:
        code, err = run(argv, capsys)
        assert code == 2 and err.count("\n") == 1 and message in err and "Traceback" not in err, (argv, err)
        assert err.startswith("python -m builder handout: error: ")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["handout", "--paper", "A5"])
    assert exit_info.value.code == 2
    assert "argument --paper: invalid choice: 'A5'" in capsys.readouterr().err
    assert previous.read_bytes() == b"previous"
