"""The authoring guide (docs/AUTHORING.md) and `python -m builder new PAGE-SLUG`.

The guide's reference tables are generated from the code's registries; the committed guide must be what
`python -m builder authoring-guide` writes. A new page's skeleton must build as it is, and `new` refuses
what it cannot write with one line and exit status 2, touching nothing.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from builder import authoring, content
from builder.build import BuildFailed, SitePaths, build_site
from builder.cli import main
from builder.content import read_page
from builder.widgets import WIDGETS
from tests.test_build import FIXTURE, TEMPLATES, fake_chart

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "AUTHORING.md"


@pytest.fixture
def content_dir(tmp_path: Path) -> Path:
    """A writable copy of the fixture site's content."""
    target = tmp_path / "content"
    shutil.copytree(FIXTURE / "content", target)
    return target


def build(content_dir: Path, out: Path) -> Path:
    """The fixture site with the real model (charts drawn by the test stand-in)."""
    build_site(SitePaths(content=content_dir, templates=TEMPLATES, static=FIXTURE / "static", out=out),
               quiet=True, render_chart=fake_chart)
    return out


# The guide ---------------------------------------------------------------------------------------

def test_committed_guide_is_what_the_command_generates():
    text = GUIDE.read_text(encoding="utf-8")
    assert authoring.generate_guide(text, "docs/AUTHORING.md") == text, \
        "docs/AUTHORING.md is out of date: run `python -m builder authoring-guide`"


def test_guide_covers_every_key_option_widget_and_ask():
    from builder.exercises import ASKS
    from builder.grids import ARCH_FIELDS, FIELD_KINDS
    from builder.render import PLACEMENT_KINDS

    text = GUIDE.read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `([^`]+)` \|", text, re.M))
    expected = (set(content.PAGE_KEYS) | set(content.CHART_KEYS) | set(content.GRID_KEYS) | set(content.EXERCISE_KEYS)
                | set(content.REFERENCE_KEYS) | set(content.SITE_KEYS) | set(ASKS) | set(PLACEMENT_KINDS)
                | {name for name, kind in FIELD_KINDS.items() if kind != "unsupported"} | set(ARCH_FIELDS)
                | {option for spec in WIDGETS.values() for option in spec.options} | set(content.COMMON_WIDGET_OPTIONS)
                | {"display", "usable_bytes", "marketing", "vendor", "published_params", "published_active_params"})
    assert expected - rows == set()
    for spec in WIDGETS.values():
        assert f"#### `{spec.name}`" in text
        assert "{{< widget " + " ".join(filter(None, (spec.name, spec.example))) + " >}}" in text


def test_check_reports_an_out_of_date_guide_and_rewrites_it(tmp_path, capsys):
    stale = tmp_path / "AUTHORING.md"
    stale.write_text(GUIDE.read_text(encoding="utf-8").replace("| `slug` |", "| `slug-old` |"), encoding="utf-8")
    before = stale.read_text(encoding="utf-8")
    assert main(["authoring-guide", "--guide", str(stale), "--check"]) == 1
    assert "out of date" in capsys.readouterr().err
    assert stale.read_text(encoding="utf-8") == before
    assert main(["authoring-guide", "--guide", str(stale)]) == 0
    assert stale.read_text(encoding="utf-8") == GUIDE.read_text(encoding="utf-8")


def test_a_schema_key_without_words_fails_the_guide(monkeypatch):
    monkeypatch.setattr(content, "PAGE_KEYS", content.PAGE_KEYS | {"draft": bool})
    with pytest.raises(authoring.GuideError, match=r"front matter: no words for draft"):
        authoring.generate_guide(GUIDE.read_text(encoding="utf-8"), "docs/AUTHORING.md")


def test_a_widget_option_without_help_fails_the_guide(monkeypatch):
    spec = WIDGETS["calculator"]
    monkeypatch.setitem(WIDGETS, "calculator", replace(spec, options=spec.options | {"compact": "bool"}))
    with pytest.raises(authoring.GuideError, match=r"widget calculator options: no words for compact"):
        authoring.generate_guide(GUIDE.read_text(encoding="utf-8"), "docs/AUTHORING.md")


@pytest.mark.parametrize("text, line, message", [
    ("# G\n\n<!-- BEGIN GENERATED: nope (python -m builder authoring-guide) -->\n<!-- END GENERATED -->\n", 3,
     "unknown generated block 'nope'"),
    ("# G\n<!-- BEGIN GENERATED: site (python -m builder authoring-guide) -->\ntext\n", 2, "has no"),
    ("# G\n<!-- BEGIN GENERATED: site -->\n", 2, "malformed marker"),
])
def test_a_malformed_guide_is_a_path_line_error(tmp_path, capsys, text, line, message):
    guide = tmp_path / "AUTHORING.md"
    guide.write_text(text, encoding="utf-8")
    assert main(["authoring-guide", "--guide", str(guide)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"{guide}:{line}: ") and message in err and "\n" not in err
    assert guide.read_text(encoding="utf-8") == text


def test_every_widget_example_and_placement_builds(content_dir, tmp_path):
    """A page placing each widget as the guide shows it builds (the validation widget needs the real site's
    measurements, which the fixture lacks; the published numbers need the real catalogs' models and GPUs)."""
    for catalog in ("models.toml", "gpus.toml"):
        shutil.copyfile(ROOT / "content" / catalog, content_dir / catalog)
    placements = ["{{< widget " + " ".join(filter(None, (spec.name, spec.example))) + " >}}"
                  for spec in WIDGETS.values() if spec.name != "validation"]
    (content_dir / "widgets.md").write_text("---\ntitle: Widgets\nslug: widgets\norder: 50\nsummary: Each one.\n---\n"
                                            + "\n\n".join(placements) + "\n", encoding="utf-8")
    site = build(content_dir, tmp_path / "site")
    page = (site / "widgets.html").read_text(encoding="utf-8")
    for spec in WIDGETS.values():
        if spec.scripted:
            assert f'data-widget="{spec.name}"' in page, spec.name
    assert 'class="exercise-collection"' in page and 'class="notation-group"' in page


# `new` -------------------------------------------------------------------------------------------

def test_new_writes_a_page_that_builds(content_dir, tmp_path, capsys):
    assert main(["new", "kv-cache", "--content", str(content_dir), "--title", "The KV cache: what grows"]) == 0
    assert "kv-cache.md" in capsys.readouterr().out
    path = content_dir / "kv-cache.md"
    page, errors = read_page(path, "content/kv-cache.md")
    assert errors == []
    assert page.title == "The KV cache: what grows" and page.slug == "kv-cache"
    assert page.order == 10  # after the fixture's pages (orders 1 and 9)
    assert len(page.charts) == 1 and len(page.exercises) == 1
    (chart,) = page.charts.values()
    assert chart.bars[0].settings["model"] == "gpt2" and chart.gpus == ("a100-80gb",)  # the catalogs' first ids
    site = build(content_dir, tmp_path / "site")
    html = (site / "kv-cache.html").read_text(encoding="utf-8")
    assert "<h1>The KV cache: what grows</h1>" in html or "The KV cache: what grows</h1>" in html
    assert 'id="chart-kv-cache-states"' in html and 'id="table-kv-cache-states"' in html
    assert "GPT-2 (124M) with mixed-precision AdamW" in html  # the model's display name, not its id
    assert 'id="exercise-kv-cache-model-states"' in html and "<summary>Answer" in html
    assert "kv-cache.html" in (site / "index.html").read_text(encoding="utf-8")  # in the navigation


def test_the_guides_skeleton_is_news_output():
    assert authoring.page_skeleton("kv-cache", order=9, model="llama-3-8b", gpu="h100-80gb",
                                   model_name="Llama 3 8B") in \
        GUIDE.read_text(encoding="utf-8")


@pytest.mark.parametrize("slug", ["KV-cache", "kv_cache", "kv-", "kv--cache", "../kv", "kv cache", ""])
def test_new_refuses_a_bad_slug(content_dir, capsys, slug):
    before = sorted(p.name for p in content_dir.iterdir())
    with pytest.raises(SystemExit) as stop:
        main(["new", slug, "--content", str(content_dir)])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "PAGE-SLUG" in err and "is not a page slug" in err and "\n" not in err
    assert sorted(p.name for p in content_dir.iterdir()) == before


def test_new_refuses_an_existing_file_or_slug(content_dir, capsys):
    index = (content_dir / "index.md").read_text(encoding="utf-8")
    assert main(["new", "index", "--content", str(content_dir)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "index.md already exists" in err and "\n" not in err
    assert (content_dir / "index.md").read_text(encoding="utf-8") == index
    (content_dir / "home.md").write_text(index.replace("slug: index", "slug: home-page"), encoding="utf-8")
    assert main(["new", "home-page", "--content", str(content_dir)]) == 2
    assert "already has slug: home-page" in capsys.readouterr().err
    assert not (content_dir / "home-page.md").exists()


def test_new_names_a_missing_content_folder_and_a_broken_catalog(content_dir, tmp_path, capsys):
    assert main(["new", "kv-cache", "--content", str(tmp_path / "nope")]) == 2
    assert "--content" in capsys.readouterr().err
    (content_dir / "gpus.toml").write_text("[a100\n", encoding="utf-8")
    assert main(["new", "kv-cache", "--content", str(content_dir)]) == 2
    err = capsys.readouterr().err.strip()
    assert re.search(r"gpus\.toml:1: invalid TOML", err) and "\n" not in err
    assert not (content_dir / "kv-cache.md").exists()


def test_new_from_the_command_line(content_dir):
    result = subprocess.run([sys.executable, "-m", "builder", "new", "Bad Slug", "--content", str(content_dir)],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1
