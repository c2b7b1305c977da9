"""Incremental rebuilds (issue 17): after any sequence of edits, a build with the last build's memory writes the
same site, byte for byte, as a clean build of the same inputs, and an edit re-renders only what it reaches."""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from builder.build import BuildFailed, SitePaths, build_site, hash_tree
from builder.incremental import BuildMemory
from builder.release import project_version
from tests.test_build import FIXTURE, TEMPLATES, fake_chart

TOPIC = """---
title: Optimizer states
nav_title: Optimizer
slug: topic
order: 2
summary: A page with exercises, collected by the Exercises page.
exercises:
  states:
    question: How much memory do the model states of GPT-2 take in fp32 with Adam?
    ask: model-states
    unit: GB
    config: {model: gpt2, seq_len: 1024, precision: fp32, optimizer: adam}
---
Adam keeps two moments per parameter.

{{< exercise states >}}
"""
EXERCISE = """  extra-{n}:
    question: How much memory do the model states of a {n}-billion-parameter model take in bf16 mixed precision?
    ask: model-states
    unit: GB
    config: {{params: {n}e9, precision: bf16-mixed, optimizer: adamw}}
"""
COLLECTOR = """---
title: Exercises, by topic
nav_title: Exercises
slug: exercises
order: 5
summary: Every exercise of the site.
---
Collected from every page.

{{< widget exercises >}}
"""
EXTRA = """---
title: An extra page
slug: extra
order: 3
summary: A page added and removed by the edits.
---
Plain text.
"""


def make_inputs(folder: Path) -> SitePaths:
    """The fixture site plus a page with an exercise and the Exercises page, with its own copy of the templates."""
    shutil.copytree(FIXTURE / "content", folder / "content")
    shutil.copytree(FIXTURE / "static", folder / "static")
    shutil.copytree(TEMPLATES, folder / "templates")
    (folder / "content" / "topic.md").write_text(TOPIC, encoding="utf-8")
    (folder / "content" / "exercises.md").write_text(COLLECTOR, encoding="utf-8")
    return SitePaths(folder / "content", folder / "templates", folder / "static", folder / "site")


def build(paths: SitePaths, memory: BuildMemory | None = None):
    """One build with the real model and the fake chart renderer."""
    return build_site(paths, quiet=True, force=memory is None, render_chart=fake_chart, memory=memory)


def clean_build(paths: SitePaths) -> dict[str, str]:
    """hash_tree of a build of the same inputs into a fresh folder, with an empty cache."""
    out = Path(tempfile.mkdtemp(prefix="clean-", dir=paths.out.parent)) / "site"
    build(SitePaths(paths.content, paths.templates, paths.static, out))
    tree = hash_tree(out)
    shutil.rmtree(out.parent)
    return tree


# Edits: each changes the inputs in place (n: a number to vary what it writes) ----------------

def edit(path: Path, old: str, new: str, count: int = 1) -> None:
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace(old, new, count), encoding="utf-8")


def edit_body(paths: SitePaths, n: int) -> None:
    page = sorted(paths.content.glob("*.md"))[n % len(list(paths.content.glob("*.md")))]
    with page.open("a", encoding="utf-8") as handle:
        handle.write(f"\nEdit number {n}, with $x^{n % 7}$ in it.\n")


def retitle(paths: SitePaths, n: int) -> None:
    """A new navigation title: every page's navigation changes."""
    text = (paths.content / "topic.md").read_text(encoding="utf-8")
    (paths.content / "topic.md").write_text(re.sub(r"^nav_title: .*$", f"nav_title: Optimizer {n}", text, flags=re.M),
                                            encoding="utf-8")


def add_exercise(paths: SitePaths, n: int) -> None:
    n += 1  # a model of n billion parameters
    page = paths.content / "topic.md"
    if f"extra-{n}:" not in page.read_text(encoding="utf-8"):
        edit(page, "---\nAdam", EXERCISE.format(n=n) + "---\nAdam")
        with page.open("a", encoding="utf-8") as handle:
            handle.write(f"\n{{{{< exercise extra-{n} >}}}}\n")


def remove_exercise(paths: SitePaths, n: int) -> None:
    page = paths.content / "topic.md"
    text = page.read_text(encoding="utf-8")
    found = re.findall(r"^  (extra-\d+):$", text, re.M)
    if found:
        name = found[n % len(found)]
        number = name.split("-")[1]
        text = text.replace(EXERCISE.format(n=number), "").replace(f"\n{{{{< exercise {name} >}}}}\n", "")
        page.write_text(text, encoding="utf-8")


def edit_catalog(paths: SitePaths, n: int) -> None:
    """A GPU's name and memory (what charts and exercises read), or a reference's title."""
    if n % 2:
        gpus = paths.content / "gpus.toml"
        text = re.sub(r'display = "A100 SXM 80GB[^"]*"', f'display = "A100 SXM 80GB rev {n}"',
                      gpus.read_text(encoding="utf-8"), count=1)
        gpus.write_text(re.sub(r"usable_bytes = [\d_]+", f"usable_bytes = {85_899_345_920 - n * 2**20}", text, count=1),
                        encoding="utf-8")
    else:
        references = paths.content / "references.toml"
        references.write_text(re.sub(r'^title = "(.*?)"', rf'title = "\1 ({n})"', references.read_text(encoding="utf-8"),
                                     count=1, flags=re.M), encoding="utf-8")


def edit_model(paths: SitePaths, n: int) -> None:
    """A model's name (what widgets show) or its published count: one entry of models.toml."""
    models = paths.content / "models.toml"
    name = ("gpt2", "llama-3-8b")[n % 2]
    text = models.read_text(encoding="utf-8")
    if n % 4 < 2:
        text = re.sub(rf'(\[{re.escape(name)}\]\ndisplay = ")[^"]*"', rf'\g<1>{name} rev {n}"', text)
    else:
        text = re.sub(r"^# .*$", f"# Edit {n}: a comment, read by no page.", text, count=1, flags=re.M)
    models.write_text(text, encoding="utf-8")


def edit_template(paths: SitePaths, n: int) -> None:
    name = ("page.html", "partials/nav.html", "figure.html")[n % 3]
    with (paths.templates / name).open("a", encoding="utf-8") as handle:
        handle.write(f"<!-- template edit {n} -->\n")


def edit_static(paths: SitePaths, n: int) -> None:
    """Touch a static file, or change the stylesheet."""
    css = paths.static / "site.css"
    if n % 2:
        css.touch()
    else:
        with css.open("a", encoding="utf-8") as handle:
            handle.write(f".edit-{n} {{ color: red; }}\n")  # a rule: the minified stylesheet drops comments


def toggle_page(paths: SitePaths, n: int) -> None:
    """Add a page (the navigation of every page gains it) or remove it."""
    page = paths.content / "extra.md"
    if page.exists():
        page.unlink()
    else:
        page.write_text(EXTRA + f"\nVersion {n}.\n", encoding="utf-8")


EDITS = [edit_body, retitle, add_exercise, remove_exercise, edit_catalog, edit_model, edit_template, edit_static, toggle_page,
         "error"]


def break_and_fix(paths: SitePaths, memory: BuildMemory, n: int) -> None:
    """A content error: the build fails, naming the file and line, and the site stays as it was; then fixed."""
    page = paths.content / "topic.md"
    good = page.read_text(encoding="utf-8")
    before = hash_tree(paths.out)
    page.write_text(good.replace("order: 2", "order: two"), encoding="utf-8")
    with pytest.raises(BuildFailed) as failure:
        build(paths, memory)
    assert [str(error) for error in failure.value.errors] == [
        f"{page}:5: front matter: order must be an integer, got 'two'"]
    assert hash_tree(paths.out) == before
    page.write_text(good, encoding="utf-8")


# A handful of examples keeps it under a minute; a failure prints its sequence unshrunk (shrinking rebuilds for minutes).
@settings(max_examples=8, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(EDITS), st.integers(0, 50)), min_size=2, max_size=6))
def test_random_edit_sequences_build_the_same_site_as_a_clean_build(tmp_path, sequence):
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    paths = make_inputs(folder)
    memory = BuildMemory()
    build(paths, memory)
    assert hash_tree(paths.out) == clean_build(paths)
    for change, n in sequence:
        if change == "error":
            break_and_fix(paths, memory, n)
        else:
            change(paths, n)
        build(paths, memory)
        assert hash_tree(paths.out) == clean_build(paths), f"after {change if change == 'error' else change.__name__}"


# What an edit re-renders ----------------------------------------------------------------------

@pytest.fixture()
def built(tmp_path):
    paths = make_inputs(tmp_path)
    memory = BuildMemory()
    assert len(build(paths, memory).rendered) == 4
    return paths, memory


def rendered(report) -> list[str]:
    """The file names of the pages a build rendered."""
    return sorted(Path(path).name for path in report.rendered)


def test_an_edit_to_one_page_body_renders_that_page_only(built):
    paths, memory = built
    before = hash_tree(paths.out)
    with (paths.content / "index.md").open("a", encoding="utf-8") as handle:
        handle.write("\nOne more paragraph.\n")
    report = build(paths, memory)
    assert rendered(report) == ["index.md"]
    pinned = f"v/{project_version()}/index.html"  # the page's pinned copy is the same rendering, bannered
    assert report.changed == ["index.html", pinned]
    after = hash_tree(paths.out)
    assert {path for path in after if after[path] != before.get(path)} == {"index.html", pinned}


def test_an_edit_to_an_exercise_renders_its_page_and_the_exercises_page(built):
    paths, memory = built
    edit(paths.content / "topic.md", "with Adam?", "with Adam, in GB?")
    assert rendered(build(paths, memory)) == ["exercises.md", "topic.md"]


def test_a_new_navigation_title_renders_every_page(built):
    paths, memory = built
    retitle(paths, 7)
    assert rendered(build(paths, memory)) == ["exercises.md", "index.md", "references.md", "topic.md"]


def test_a_catalog_entry_edit_renders_only_the_pages_that_read_it_and_a_stylesheet_edit_none(built):
    paths, memory = built
    edit_catalog(paths, 1)  # the A100's name and memory: only the home page's chart and widget show a GPU
    assert rendered(build(paths, memory)) == ["index.md"]
    # Llama 3 8B: the home page's widget lists every model; the exercises ask about GPT-2 only.
    edit(paths.content / "models.toml", 'display = "Llama 3 8B"', 'display = "Llama 3 8B (Meta)"')
    assert rendered(build(paths, memory)) == ["index.md"]
    # GPT-2: the exercise of topic.md reads it, and so does the Exercises page that shows that exercise.
    edit(paths.content / "models.toml", 'display = "GPT-2 (124M)"', 'display = "GPT-2 small"')
    assert rendered(build(paths, memory)) == ["exercises.md", "index.md", "topic.md"]
    assert hash_tree(paths.out) == clean_build(paths)
    edit_catalog(paths, 2)  # a reference's title: every page may cite it
    assert len(rendered(build(paths, memory))) == 4
    edit_static(paths, 0)
    report = build(paths, memory)
    assert rendered(report) == [] and report.changed == ["static/site.css", f"v/{project_version()}/static/site.css"]


def test_an_unchanged_page_is_not_written_again(built):
    # Files a build leaves unchanged are hard links to the previous build's (same inode): nothing is rewritten.
    paths, memory = built
    before = {path: (paths.out / path).stat().st_ino for path in hash_tree(paths.out)}
    with (paths.content / "index.md").open("a", encoding="utf-8") as handle:
        handle.write("\nOne more paragraph.\n")
    build(paths, memory)
    after = {path: (paths.out / path).stat().st_ino for path in hash_tree(paths.out)}
    assert {path for path in after if after[path] != before[path]} == {"index.html", f"v/{project_version()}/index.html"}


def test_a_site_changed_behind_the_builds_back_is_written_afresh(built):
    paths, memory = built
    (paths.out / "references.html").write_text("changed by hand", encoding="utf-8")
    with (paths.content / "index.md").open("a", encoding="utf-8") as handle:
        handle.write("\nOne more paragraph.\n")
    build(paths, memory)
    assert hash_tree(paths.out) == clean_build(paths)


def test_what_changed_depends_on_every_pages_presets():
    """What changed evaluates every page's presets, so its key follows every page's presets (an edit to another
    page's presets must render it again, an edit to its prose need not), while an ordinary page's key follows
    only its own file."""
    from types import SimpleNamespace

    from builder.build import compares_releases
    from builder.incremental import page_keys

    def pages(presets: dict) -> list:
        return [SimpleNamespace(path="content/a.md", exercises={}, body="text", presets=presets),
                SimpleNamespace(path="content/what-changed.md", exercises={}, body="{{< widget what-changed >}}",
                                presets={})]

    digests = {"content/a.md": "1", "content/what-changed.md": "2"}
    before = page_keys(digests, pages({"p": "fp32"}), "shared", lambda page: False, compares_releases)
    prose = page_keys(digests | {"content/a.md": "3"}, pages({"p": "fp32"}), "shared", lambda page: False,
                      compares_releases)
    assert before["content/what-changed.md"] == prose["content/what-changed.md"]
    assert before["content/a.md"] != prose["content/a.md"]
    preset = page_keys(digests | {"content/a.md": "3"}, pages({"p": "bf16"}), "shared", lambda page: False,
                       compares_releases)
    assert before["content/what-changed.md"] != preset["content/what-changed.md"]
    unrelated = page_keys(digests | {"content/what-changed.md": "4"}, pages({"p": "fp32"}), "shared",
                          lambda page: False, compares_releases)
    assert before["content/a.md"] == unrelated["content/a.md"]
