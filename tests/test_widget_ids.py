"""Widget ids chosen by the author (issue 16 item 7): `id=` names a widget in links and element ids, so a widget
placed above it never breaks a link; the old positional id stays readable through data-legacy-id."""
import re
from pathlib import Path

import pytest

from builder.build import SitePaths, build_site
from builder.content import BuildFailed
from builder.widgets import WIDGETS

ROOT = Path(__file__).resolve().parent.parent
CONTENT = ROOT / "content"
HEAD = "---\ntitle: T\nslug: index\norder: 1\nsummary: S\n---\nText.\n\n"  # the body starts at line 7


def build(tmp_path: Path, body: str, head: str = HEAD) -> Path:
    content = tmp_path / "content"
    content.mkdir(parents=True)
    for name in ("site.toml", "models.toml", "gpus.toml", "presets.toml"):
        if (CONTENT / name).exists():
            (content / name).write_text((CONTENT / name).read_text(encoding="utf-8"), encoding="utf-8")
    (content / "index.md").write_text(head + body, encoding="utf-8")
    out = tmp_path / "site"
    build_site(SitePaths(content, ROOT / "templates", ROOT / "static", out), quiet=True)
    return out


def roots(html: str) -> list[tuple[str, str, str | None]]:
    """(widget name, element id, legacy id) of each scripted widget root, in page order."""
    found = []
    for tag in re.findall(r"<div [^>]*data-widget=[^>]*>", html):
        legacy = re.search(r'data-legacy-id="([^"]+)"', tag)
        found.append((re.search(r'data-widget="([^"]+)"', tag).group(1), re.search(r' id="([^"]+)"', tag).group(1),
                      legacy.group(1) if legacy else None))
    return found


def test_an_author_id_names_the_widget_and_keeps_its_positional_id_as_legacy(tmp_path):
    out = build(tmp_path, "{{< widget bytes-per-param model=gpt2 >}}\n\n{{< widget memory-budget id=budget >}}\n\n"
                          "{{< widget calculator id=calc model=llama-3-8b >}}\n")
    html = (out / "index.html").read_text(encoding="utf-8")
    assert roots(html) == [("bytes-per-param", "bytes-per-param-1", None), ("memory-budget", "budget", "memory-budget-2"),
                           ("calculator", "calc", "calculator-3")]
    assert 'id="budget-sum"' in html and 'id="calc-chart"' in html  # element ids follow the author's id
    assert "memory-budget-2-" not in html and "calculator-3-" not in html


def test_adding_a_widget_above_keeps_an_author_id(tmp_path):
    first = build(tmp_path / "a", "{{< widget memory-budget id=budget >}}\n")
    second = build(tmp_path / "b", "{{< widget bytes-per-param model=gpt2 >}}\n\n{{< widget memory-budget id=budget >}}\n")
    assert [r[1] for r in roots((first / "index.html").read_text())] == ["budget"]
    assert [r[1] for r in roots((second / "index.html").read_text())] == ["bytes-per-param-1", "budget"]


@pytest.mark.parametrize("body, line, message", [
    ("{{< widget memory-budget id=Budget >}}\n", 9, "id 'Budget' must be lowercase words joined by '-'"),
    ("{{< widget memory-budget id=a_b >}}\n", 9, "must be lowercase words joined by '-'"),
    ("{{< widget memory-budget id=" + "a" * 25 + " >}}\n", 9, "at most 24 characters"),
    ("{{< widget memory-budget id=calculator-1 >}}\n", 9, "looks like a positional id"),
    ("{{< widget memory-budget id=x >}}\n\n{{< widget bytes-per-param id=x model=gpt2 >}}\n", 11,
     "id 'x' is already used on this page (line 9)"),
    ("{{< widget memory-budget id=x id=y >}}\n", 9, "option 'id' given twice"),
    ("{{< widget validation id=-x >}}\n", 9, "widget validation: id '-x'"),
    ("## Budget\n\n{{< widget memory-budget id=budget >}}\n", 11,
     "id 'budget' is the anchor of the heading at line 9: rename one"),
    ("{{< widget memory-budget id=budget >}}\n\n## Budget\n", 11,
     "heading anchor 'budget' is the id of the widget at line 9: rename one"),
])
def test_a_bad_widget_id_is_a_content_error_with_its_line(tmp_path, body, line, message):
    with pytest.raises(BuildFailed) as failure:
        build(tmp_path, body)
    assert any(e.line == line and message in e.message and e.path.endswith("index.md")
               for e in failure.value.errors), failure.value.errors


def test_a_widget_id_may_not_take_a_charts_anchor(tmp_path):
    head = ("---\ntitle: T\nslug: index\norder: 1\nsummary: S\ncharts:\n  parts:\n    title: P\n    unit: GiB\n"
            "    config: {model: gpt2, seq_len: 1024}\n    bars:\n      - label: one\n---\n")
    body = "{{< chart parts >}}\n\n{{< widget memory-budget id=chart-parts >}}\n"
    with pytest.raises(BuildFailed) as failure:
        build(tmp_path, body, head)
    assert [e.message for e in failure.value.errors] == [
        "widget memory-budget: id 'chart-parts' is the anchor of chart parts: rename one"]
    build(tmp_path / "ok", body.replace("id=chart-parts", "id=parts"), head)  # the chart's own id is not its anchor


def test_every_scripted_widget_on_the_site_has_an_author_id():
    """The site's own links (courses link to them) use stable names, never positional ids."""
    missing = []
    for path in sorted(CONTENT.glob("*.md")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            match = re.match(r"\{\{< widget ([a-z-]+)(.*)>\}\}", line.strip())
            if match and WIDGETS[match.group(1)].scripted and not re.search(r"\bid=", match.group(2)):
                missing.append(f"{path.name}:{number}")
    assert missing == []
