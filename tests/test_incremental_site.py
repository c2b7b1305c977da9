"""Incremental rebuilds of the real site (issue 17): a copy of content/, templates/ and static/ is built once with
serve's memory, then edited one kind of change at a time (a page's prose, a navigation title, an exercise, a
catalog entry few pages read, a static file); after each edit the incremental build writes the same site, byte
for byte, as a clean build of the same inputs, and renders no more pages than the edit reaches.

Charts are drawn by the tests' stand-in renderer (an SVG naming each bar's total): the bars are still evaluated by
the model, and the drawing itself is tests/test_charts.py's business. About 30 s on 2 cores.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from builder.build import SitePaths, build_site, hash_tree
from builder.catalog_reads import WHOLE
from builder.incremental import BuildMemory
from tests.test_build import fake_chart

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.site


def copy_site(folder: Path) -> SitePaths:
    for name in ("content", "templates", "static"):
        shutil.copytree(ROOT / name, folder / name, ignore=shutil.ignore_patterns(".*", "__pycache__"))
    return SitePaths(folder / "content", folder / "templates", folder / "static", folder / "site")


def build(paths: SitePaths, memory: BuildMemory | None = None):
    return build_site(paths, quiet=True, force=memory is None, render_chart=fake_chart, memory=memory)


def clean_tree(paths: SitePaths, folder: Path) -> dict[str, str]:
    """hash_tree of a build of the same inputs into a fresh folder, with no memory."""
    out = folder / "site"
    build(SitePaths(paths.content, paths.templates, paths.static, out))
    tree = hash_tree(out)
    shutil.rmtree(folder)
    return tree


def replace_once(path: Path, pattern: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    changed, count = re.subn(pattern, new, text, count=1, flags=re.M)
    assert count == 1, f"{path.name}: nothing matches {pattern!r}"
    path.write_text(changed, encoding="utf-8")


def names(paths: list[str]) -> list[str]:
    return sorted(Path(path).name for path in paths)


def readers(memory: BuildMemory, catalog: str, entry: str) -> list[str]:
    """The pages whose last rendering read the entry (or walked its whole catalog)."""
    return names([path for path, output in memory.pages.items()
                  if (catalog, entry) in output.reads or (catalog, WHOLE) in output.reads])


def test_every_kind_of_edit_to_the_real_site_builds_what_a_clean_build_does(tmp_path):
    paths = copy_site(tmp_path / "inputs")
    memory = BuildMemory()
    build(paths, memory)
    content = paths.content
    pages = names([str(path) for path in content.glob("*.md")])
    with_exercises = [path for path, output in memory.pages.items() if output.exercises is not None]
    assert with_exercises, "the site has no exercises to edit"
    exercise_page = Path(sorted(with_exercises)[0])
    # The GPU read by the fewest pages (the catalog's order breaks ties): its edit must not render every page.
    gpus = re.findall(r"^\[([\w.-]+)\]", (content / "gpus.toml").read_text(encoding="utf-8"), re.M)
    gpu = min(gpus, key=lambda name: len(readers(memory, "gpu", name)))
    gpu_readers = readers(memory, "gpu", gpu)
    collector = next(Path(path).name for path in memory.pages if "widget exercises" in Path(path).read_text())
    # Prose of a page with exercises: the Exercises page shows only their questions and answers.
    prose = exercise_page.name

    edits = [
        ("a page's prose", lambda: replace_once(content / prose, r"\Z", "\nOne more paragraph.\n"), [prose]),
        ("a navigation title", lambda: replace_once(content / "sharding.md", r'^title: ("?)', r"title: \1Again, "),
         pages),
        ("an exercise", lambda: replace_once(exercise_page, r"^(    question: .*?)\?$", r"\1, roughly?"),
         sorted({exercise_page.name, collector})),
        (f"the GPU {gpu}", lambda: replace_once(content / "gpus.toml", rf'^(\[{re.escape(gpu)}\]\ndisplay = ")',
                                                r"\1Edited "),
         gpu_readers),
        ("a static file", lambda: replace_once(paths.static / "site.css", r"\Z", "\n.edited { color: red; }\n"), []),
    ]
    for number, (what, change, expected) in enumerate(edits):
        change()
        report = build(paths, memory)
        assert hash_tree(paths.out) == clean_tree(paths, tmp_path / f"clean-{number}"), f"after editing {what}"
        assert names(report.rendered) == expected, f"pages rendered after editing {what}"
    assert len(gpu_readers) < len(pages) / 2, f"the GPU {gpu} is read by {gpu_readers}"
