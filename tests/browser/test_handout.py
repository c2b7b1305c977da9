"""`python -m builder handout` prints a real PDF with Chromium: the whole built site (the session's), and the
small fixture site twice (the same bytes both times, on either paper size)."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from builder.handout_pdf import count_pages
from tests.test_build import build_fixture

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
# PDF page sizes in points: Chromium's A4 (210 x 297 mm, rounded to its pixel grid) and US Letter.
MEDIA_BOX = {"A4": b"/MediaBox [0 0 595.91998 842.88]", "Letter": b"/MediaBox [0 0 612 792]"}


def handout(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "builder", "handout", *argv], cwd=ROOT, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=300)


def outline(pdf: bytes) -> list[str]:
    """The PDF's outline entries and its document title (plain ASCII strings only)."""
    return [title.decode() for title in re.findall(rb"/Title \(([\x20-\x7e]*?)\)", pdf)]


def test_whole_site_in_one_pdf(site_dir, site_pages, chromium_path, tmp_path):
    out = tmp_path / "course-pack.pdf"
    started = time.perf_counter()
    result = handout("--site", str(site_dir), "--out", str(out), "--chromium", chromium_path)
    seconds = time.perf_counter() - started
    assert result.returncode == 0, result.stderr
    pdf = out.read_bytes()
    assert pdf.startswith(b"%PDF-") and pdf.rstrip().endswith(b"%%EOF")
    pages = [p for p in site_pages if "/" not in p]  # the site's pages, not the figures' embed views
    sheets = count_pages(pdf)
    assert sheets > len(pages) + 2  # a title page, the contents and at least a sheet per page
    assert f"{sheets} pages, {len(pages)} site pages (A4)" in result.stderr
    titles = outline(pdf)
    assert titles.count("Training Memory, Explained") >= 1  # the document's title and the title page's heading
    for heading in ("Contents", "Where training memory goes", "References", "Answers to the exercises",
                    "The calculator", "Fits on"):
        assert heading in titles, heading
    # Every chapter after the contents, in the site's order; the answers last.
    order = [titles.index(t) for t in ("Contents", "Where training memory goes", "References",
                                        "Answers to the exercises")]
    assert order == sorted(order)
    assert pdf.count(MEDIA_BOX["A4"]) == sheets
    assert seconds < 60, f"took {seconds:.0f} s"


@pytest.mark.parametrize("paper", ["A4", "Letter"])
def test_same_site_gives_the_same_pdf(tmp_path, chromium_path, paper):
    site = tmp_path / "site"
    build_fixture(site)
    first, second = tmp_path / "first.pdf", tmp_path / "second.pdf"
    for out in (first, second):
        result = handout("--site", str(site), "--out", str(out), "--paper", paper, "--chromium", chromium_path)
        assert result.returncode == 0, result.stderr
    pdf = first.read_bytes()
    assert pdf == second.read_bytes()
    assert count_pages(pdf) >= 4 and pdf.count(MEDIA_BOX[paper]) == count_pages(pdf)
    assert "Fixture Site" in outline(pdf) and "Fixture home" in outline(pdf)
    assert re.search(rb"/CreationDate \(D:\d{8}000000", pdf)  # the pack's date, not the clock's time
