"""Golden test (staticjinja style): build the fixture site and diff it file by file with tests/golden/site-small.

The fixture uses the real templates with a fake memory model and chart renderer (see
tests/test_build.py), so the expected tree changes only when the pipeline or templates do.
Regenerate after an intended change with:  UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_golden.py
"""

from __future__ import annotations

import difflib
import os
import shutil
from pathlib import Path

from builder.build import list_files
from tests.test_build import build_fixture

GOLDEN = Path(__file__).resolve().parent / "golden" / "site-small"


def relative_files(folder: Path) -> list[str]:
    """Sorted relative paths of every file under `folder`."""
    return [p.relative_to(folder).as_posix() for p in list_files(folder)]


def diff_file(name: str, expected: Path, actual: Path) -> str:
    """Unified diff of one file ('' when identical). A PNG (a figure's raster) is compared by its header, size
    included: its pixels depend on the system's cairo and fonts, and tests/test_build.py checks the build is
    byte-identical on one machine."""
    if name.endswith(".png"):
        same = expected.read_bytes()[:24] == actual.read_bytes()[:24]
        return "" if same else f"{name}: PNG header or size differs\n"
    before, after = expected.read_text(encoding="utf-8"), actual.read_text(encoding="utf-8")
    if before == after:
        return ""
    if name.endswith(".html"):  # a minified page is nearly one line: the diff shows it a tag a line
        before, after = before.replace(">", ">\n"), after.replace(">", ">\n")
    return "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                        fromfile=f"golden/{name}", tofile=f"built/{name}")) or f"{name} differs\n"


def test_fixture_site_matches_golden_tree(tmp_path):
    built = tmp_path / "site"
    build_fixture(built)
    if os.environ.get("UPDATE_GOLDEN"):
        shutil.rmtree(GOLDEN, ignore_errors=True)
        shutil.copytree(built, GOLDEN)
    assert relative_files(built) == relative_files(GOLDEN), "file lists differ"
    diffs = [diff_file(name, GOLDEN / name, built / name) for name in relative_files(GOLDEN)]
    diffs = [d for d in diffs if d]
    assert not diffs, "built site differs from golden (UPDATE_GOLDEN=1 to accept):\n" + "\n".join(diffs)
