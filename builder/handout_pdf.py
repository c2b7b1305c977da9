"""Print the course pack (builder/handout.py) to one PDF with headless Chromium, through Playwright.

Every chapter starts on a new sheet, so the sheets a chapter takes do not depend on what comes before
it: each chapter is printed once on its own to count them, which gives the contents its page numbers;
then the whole pack is printed once, with page numbers in the footer. The PDF's dates are set to the
pack's date, so the same site gives the same file.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from builder.handout import Pack, chapter_documents, front_matter, whole_document

PAPERS = {"A4": (210.0, 297.0), "Letter": (215.9, 279.4)}  # width, height in mm
MARGIN_MM = 15  # static/site.css's @page margin
PX_PER_MM = 96 / 25.4
# What does not fit on one sheet may break after all (else Chromium moves it to a new sheet first,
# leaving the rest of the sheet before it blank).
UNSPLIT = "figure, .table-scroll, .data-table, .math-display, .exercise, .print-answer"
LET_LONG_ONES_BREAK = """(limit) => {
  for (const element of document.querySelectorAll(%r))
    if (element.getBoundingClientRect().height > limit) element.style.breakInside = "auto";
}""" % UNSPLIT
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--no-first-run"]
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FOOTER = ('<div style="font-size:8pt;width:100%;text-align:center;color:#444;font-family:sans-serif">'
          '<span class="pageNumber"></span> / <span class="totalPages"></span></div>')
HEADER = ('<div style="font-size:7pt;width:100%;text-align:right;color:#666;font-family:sans-serif;'
          'padding-right:15mm">{title}</div>')
PAGE_OBJECT = re.compile(rb"/Type\s*/Page\b(?!s)")
PDF_DATE = re.compile(rb"/(CreationDate|ModDate) \(D:(\d{14})([^)]*)\)")
NODE_ID = re.compile(rb"\(node(\d{8})\)")  # a tagged PDF's structure element ids: the DOM nodes' ids


class HandoutError(Exception):
    """Printing failed for a reason the reader can act on (one line)."""


def find_chromium(given: str | None) -> str | None:
    """The Chromium to print with: `given`, else one on PATH; None lets Playwright use its own."""
    if given:
        return given
    return next((found for name in CHROMIUM_NAMES if (found := shutil.which(name))), None)


def count_pages(pdf: bytes) -> int:
    """The number of pages in a PDF Chromium wrote (its page objects are not compressed)."""
    return len(PAGE_OBJECT.findall(pdf))


def reproducible(pdf: bytes, date: str) -> bytes:
    """The same PDF for the same pack: its creation and modification dates set to `date` (YYYY-MM-DD,
    midnight UTC) and its structure elements' ids (which Chromium takes from the DOM nodes' ids, different
    on every run) numbered 1, 2, ... in their own order; every string keeps its length, so the
    cross-reference offsets stay right."""
    ids = sorted(set(NODE_ID.findall(pdf)), key=int)
    renumbered = {old: b"%08d" % number for number, old in enumerate(ids, start=1)}
    pdf = NODE_ID.sub(lambda match: b"(node" + renumbered[match.group(1)] + b")", pdf)
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", date):
        date = "2000-01-01"
    stamp = date.replace("-", "").encode() + b"000000"

    def replace(match: re.Match) -> bytes:
        tail = match.group(3)
        fixed = b"+00'00'"[:len(tail)] if tail else b""
        return b"/" + match.group(1) + b" (D:" + stamp + fixed.ljust(len(tail), b" ") + b")"
    return PDF_DATE.sub(replace, pdf)


class Printer:
    """One Chromium tab printing documents of the pack on one paper size, laid out as they print: print media,
    the viewport the sheet's printable area, and whatever is taller than a sheet allowed to break."""

    def __init__(self, page, folder: Path, paper: str, title: str) -> None:
        self.page, self.folder, self.paper, self.title = page, folder, paper, title
        width, self.height = (PX_PER_MM * (size - 2 * MARGIN_MM) for size in PAPERS[paper])
        page.set_viewport_size({"width": round(width), "height": round(self.height)})
        page.emulate_media(media="print")

    def pdf(self, name: str, markup: str, numbered: bool = False) -> bytes:
        """`markup` printed; `numbered`: with page numbers, the title on every sheet and an outline."""
        path = self.folder / f"{name}.html"
        path.write_text(markup, encoding="utf-8")
        self.page.goto(path.as_uri(), wait_until="load")
        self.page.evaluate(LET_LONG_ONES_BREAK, self.height)
        options = {"format": self.paper, "print_background": True, "prefer_css_page_size": True,
                   "outline": numbered, "tagged": numbered}
        if numbered:
            options |= {"display_header_footer": True, "footer_template": FOOTER,
                        "header_template": HEADER.format(title=escape(self.title))}
        return self.page.pdf(**options)


def first_sheets(pack: Pack, printer: Printer) -> dict[str, int]:
    """The sheet each chapter starts on (chapter anchor -> page number): every chapter starts a new sheet, so
    each is printed alone to count its sheets; the title page and the contents come first."""
    sizes = {anchor: count_pages(printer.pdf(anchor, markup)) for anchor, markup in chapter_documents(pack).items()}
    numbers: dict[str, int] = {anchor: 0 for anchor in sizes}
    front = 0
    for _ in range(3):  # the contents' own length, with its numbers in (settles at once in practice)
        counted = count_pages(printer.pdf("front", front_matter(pack, numbers)))
        if counted == front:
            break
        front, next_page = counted, counted + 1
        for anchor, size in sizes.items():
            numbers[anchor], next_page = next_page, next_page + size
    return numbers


def first_line(error: Exception) -> str:
    """An exception's first line (Playwright's run to many)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def print_pack(pack: Pack, out: Path, paper: str, chromium: str | None, timeout_ms: int = 120_000) -> int:
    """Print `pack` to `out` (replaced only when printing succeeded); returns the number of pages."""
    try:
        from playwright.sync_api import Error as PlaywrightError
        from playwright.sync_api import sync_playwright
    except ImportError:
        raise HandoutError("needs Playwright (pip install playwright) and Chromium") from None
    if chromium and not Path(chromium).is_file():
        raise HandoutError(f"argument --chromium: no such file: {chromium}")
    executable = find_chromium(chromium)
    with tempfile.TemporaryDirectory(prefix="handout-") as folder, sync_playwright() as playwright:
        try:
            browser = playwright.chromium.launch(executable_path=executable, args=LAUNCH_ARGS, headless=True)
        except PlaywrightError as error:
            raise HandoutError(f"cannot start Chromium ({executable or 'Playwright’s own'}): {first_line(error)}; "
                               "install Chromium or name one with --chromium") from None
        try:
            page = browser.new_page()
            page.set_default_timeout(timeout_ms)
            printer = Printer(page, Path(folder), paper, pack.title)
            pdf = printer.pdf("pack", whole_document(pack, first_sheets(pack, printer)), numbered=True)
        except PlaywrightError as error:
            raise HandoutError(f"Chromium failed while printing: {first_line(error)}") from None
        finally:
            browser.close()
    pdf = reproducible(pdf, pack.date)
    write_atomically(out, pdf)
    return count_pages(pdf)


def escape(text: str) -> str:
    """Text for the header template's HTML."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def write_atomically(out: Path, data: bytes) -> None:
    """Write `data` to `out` through a temporary file beside it, so a failure leaves the old file."""
    written = None
    try:
        with tempfile.NamedTemporaryFile(dir=out.parent, prefix=f".{out.name}-", delete=False) as handle:
            written = Path(handle.name)
            handle.write(data)
        umask = os.umask(0)
        os.umask(umask)
        written.chmod(0o666 & ~umask)  # as an ordinary new file (a temporary file is private)
        written.replace(out)
    except OSError as error:
        if written is not None:
            written.unlink(missing_ok=True)
        raise HandoutError(f"argument --out: cannot write {out}: {error.strerror or error}") from None
