"""Bad content: each error class names its file and line, exits 2, reports all errors, and keeps the old site."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from builder import build as build_module
from builder import cli_site
from builder.build import hash_tree
from tests.test_build import FIXTURE, TEMPLATES, fake_chart, fake_estimate

GOOD_INDEX = (FIXTURE / "content" / "index.md").read_text(encoding="utf-8")


@pytest.fixture(autouse=True)
def fast_fakes(monkeypatch):
    """Fake chart renderer; the real memory model's validate_config still checks ranges."""
    monkeypatch.setattr(build_module, "load_chart_renderer", lambda: fake_chart)


def line_of(text: str, needle: str) -> int:
    """1-based line of the first line containing `needle`."""
    for number, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in text")


def make_site(tmp_path: Path, index: str | None = None, files: dict[str, str] | None = None) -> list[str]:
    """A copy of the fixture with a changed index.md / other files; returns the build argv."""
    content = tmp_path / "content"
    shutil.copytree(FIXTURE / "content", content)
    if index is not None:
        (content / "index.md").write_text(index, encoding="utf-8")
    for name, text in (files or {}).items():
        (content / name).write_text(text, encoding="utf-8")
    return ["build", "--content", str(content), "--templates", str(TEMPLATES),
            "--static", str(FIXTURE / "static"), "--out", str(tmp_path / "site"), "--quiet"]


def build_errors(argv: list[str], capsys) -> list[str]:
    """Run the CLI, require exit 2 and no traceback, return the error lines."""
    assert cli_site.main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert lines[-1].startswith("build failed: ") and lines[-1].endswith("the previous site was left as it was")
    return lines[:-1]


def replaced(old: str, new: str) -> str:
    """The fixture index.md with one substring replaced (which must be there)."""
    assert old in GOOD_INDEX
    return GOOD_INDEX.replace(old, new, 1)


CASES = {
    "malformed front matter": (replaced("title: Fixture home", "title: [unclosed"), "slug: index",
                               "malformed front matter"),
    "unknown front matter key": (replaced("order: 1", "order: 1\nauthor: me"), "author: me",
                                 "front matter: unknown key 'author'"),
    "wrong type": (replaced("order: 1", "order: first"), "order: first", "order must be an integer"),
    "unknown model": (replaced("{model: gpt2, seq_len: 1024}", "{model: gpt-5, seq_len: 1024}"), "model: gpt-5",
                      "bar 'b=1': front matter `model`: unknown model 'gpt-5'"),
    "unknown gpu": (replaced("gpus: [a100-80gb, h100-80gb]", "gpus:\n      - a100-80gb\n      - h999"), "- h999",
                    "chart states: unknown GPU 'h999'"),
    "unknown preset": (replaced("preset: llama-single", "preset: llama-double"), "preset: llama-double",
                       "unknown preset 'llama-double' (known: llama-single)"),
    "unknown widget": (replaced("{{< widget bytes-per-param", "{{< widget sparkles"), "{{< widget sparkles",
                       "unknown widget 'sparkles'"),
    "unknown widget option": (replaced("model=gpt2 gpus", "colour=red gpus"), "colour=red",
                              "widget bytes-per-param: unknown option 'colour'"),
    "unknown citation key": (replaced("[@korthikanti2022; @rajbhandari2019]", "[@korthikanti2022; @nobody2020]"),
                             "@nobody2020", "unknown citation key 'nobody2020'"),
    "duplicate front matter key": (replaced("order: 1\n", "order: 1\norder: 2\n"), "order: 2",
                                   "malformed front matter: duplicate key 'order'"),
    "malformed citation": (replaced("[@korthikanti2022; @rajbhandari2019]", "[@korthikanti2022 section 4]"),
                           "[@korthikanti2022 section 4]", "malformed citation '[@korthikanti2022 section 4]'"),
    "value out of range": (replaced('{label: "ZeRO-3, 8 GPUs", zero: 3, dp: 8}', '{label: "ZeRO-3, 8 GPUs", zero: 5, dp: 8}'),
                           "zero: 5", "front matter `zero`: must be 0, 1, 2 or 3, got 5"),
    "bad option type": (replaced("{model: gpt2, seq_len: 1024}", "{model: gpt2, seq_len: long}"), "seq_len: long",
                        "front matter `seq_len`: must be a whole number such as 4096, 4K, 7B, 7e9 or 7_000_000_000, got 'long'"),
    "unknown chart": (replaced("{{< table tokens >}}", "{{< table tokenz >}}"), "{{< table tokenz >}}",
                      "unknown chart 'tokenz'"),
    "bad latex": (replaced(r"Inline math $\Psi$", r"Inline math $\frac{a}{$"), r"Inline math $\frac", "cannot convert LaTeX"),
    "unknown arch field": (replaced("{model: gpt2, seq_len: 1024}", "{model: gpt2, seq_len: 1024, arch: {kv_head: 2}}"),
                           "arch: {kv_head: 2}", "arch: unknown architecture field 'kv_head'"),
    "arch the model rejects": (replaced("{model: gpt2, seq_len: 1024}", "{model: gpt2, seq_len: 1024, arch: {kv_heads: 5}}"),
                               "arch: {kv_heads: 5}", "arch: gpt2: kv_heads (5) must divide heads (12)"),
    "phases with two bars": (replaced("    example: \"8.03B parameters x 16 bytes.\"\n",
                                      "    example: \"8.03B parameters x 16 bytes.\"\n    phases: true\n"),
                             "phases: true", "chart states: phases needs exactly one bar"),
    # torchtune trains in one dtype (tests/test_torchtune_precision.py): the default bf16-mixed is refused.
    "combination the model refuses": (replaced("{model: gpt2, seq_len: 1024}",
                                               "{model: gpt2, seq_len: 1024, implementation: torchtune}"),
                                      "grid: {vary: micro_batch",
                                      "bar 'b=1': front matter `precision`: torchtune trains in one dtype"),
    "second h1": (replaced("## Tables only", "# Tables only"), "# Tables only", "the page title is the only h1"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_error_class_names_file_and_line(name, tmp_path, capsys):
    index, marker, message = CASES[name]
    errors = build_errors(make_site(tmp_path, index), capsys)
    expected_prefix = f"{tmp_path / 'content' / 'index.md'}:{line_of(index, marker)}: "
    matching = [e for e in errors if message in e]
    assert matching, f"no error containing {message!r} in {errors}"
    assert matching[0].startswith(expected_prefix), matching[0]


def test_all_errors_are_reported_not_just_the_first(tmp_path, capsys):
    index = (GOOD_INDEX.replace("preset: llama-single", "preset: llama-double")
             .replace("{model: gpt2, seq_len: 1024}", "{model: gpt-5, seq_len: 1024}")
             .replace("{{< widget bytes-per-param", "{{< widget sparkles")
             .replace("[@korthikanti2022;", "[@nobody2020;"))
    second = "---\ntitle: Two\nslug: two\norder: 2\nsummary: s\nextra: 1\n---\nBody.\n"
    errors = build_errors(make_site(tmp_path, index, {"two.md": second}), capsys)
    index_path, two_path = tmp_path / "content" / "index.md", tmp_path / "content" / "two.md"
    assert f"{index_path}:{line_of(index, 'preset: llama-double')}: unknown preset 'llama-double' (known: llama-single)" in errors
    assert any(e.startswith(f"{index_path}:{line_of(index, 'model: gpt-5')}: ") and "unknown model 'gpt-5'" in e
               for e in errors)
    assert any(e.startswith(f"{index_path}:{line_of(index, 'sparkles')}: unknown widget") for e in errors)
    assert f"{index_path}:{line_of(index, '@nobody2020')}: unknown citation key 'nobody2020' (see content/references.toml)" in errors
    assert any(e.startswith(f"{two_path}:6: front matter: unknown key 'extra'") for e in errors)
    assert len(errors) == 6  # the two unknown-model bars b=1 and b=4 are reported separately


def test_catalog_and_reference_errors_name_their_files(tmp_path, capsys):
    broken_gpus = "[h100]\ndisplay = 'H100'\nusable_bytes = -1\nmarketing = '80 GB'\n"
    broken_refs = "[x2020]\nauthors = ['A']\nyear = 2020\ntitle = 'T'\n"
    errors = build_errors(make_site(tmp_path, files={"gpus.toml": broken_gpus, "references.toml": broken_refs}), capsys)
    assert any(e.endswith("gpus.toml:1: [h100] usable_bytes must be a positive integer") for e in errors)
    assert f"{tmp_path / 'content' / 'references.toml'}:1: reference x2020: missing required key 'url'" in errors


def test_missing_front_matter_is_line_one(tmp_path, capsys):
    errors = build_errors(make_site(tmp_path, "# Just markdown\n"), capsys)
    assert errors[0].startswith(f"{tmp_path / 'content' / 'index.md'}:1: malformed front matter")


def test_duplicate_slug_is_an_error(tmp_path, capsys):
    copy = GOOD_INDEX.replace("order: 1", "order: 5")
    errors = build_errors(make_site(tmp_path, files={"copy.md": copy}), capsys)
    assert any("slug 'index' is also used by" in e for e in errors)


def test_unplaced_chart_is_an_error(tmp_path, capsys):
    index = replaced("{{< table tokens >}}", "")
    errors = build_errors(make_site(tmp_path, index), capsys)
    assert errors == [f"{tmp_path / 'content' / 'index.md'}:{line_of(index, '  tokens:')}: chart tokens is defined "
                      "but never placed (add a line {{< chart tokens >}})"]


def test_inline_placement_must_stand_alone(tmp_path, capsys):
    index = replaced("## Tables only\n\n{{< table tokens >}}", "## Tables only\nSee {{< table tokens >}}")
    errors = build_errors(make_site(tmp_path, index), capsys)
    assert any("must be a line of its own" in e for e in errors)


def test_failed_build_leaves_previous_site_untouched(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(build_module, "load_estimate", lambda: fake_estimate)
    argv = make_site(tmp_path)
    assert cli_site.main(argv) == 0
    before = hash_tree(tmp_path / "site")
    (tmp_path / "content" / "index.md").write_text(replaced("preset: llama-single", "preset: nope"), encoding="utf-8")
    build_errors(argv, capsys)
    assert hash_tree(tmp_path / "site") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [".site-cache", "content", "site"]


def test_widget_source_that_does_not_parse_names_its_file_and_line(tmp_path, capsys, monkeypatch):
    """The build minifies each page's script; a source the minifier cannot parse is an error at that
    source's own line (not the bundle's), and the previous site stays."""
    monkeypatch.setattr(build_module, "load_estimate", lambda: fake_estimate)
    static = tmp_path / "static"
    shutil.copytree(FIXTURE / "static", static)
    (static / "widgets.js").unlink()
    shutil.copytree(FIXTURE.parent.parent.parent / "static" / "widgets", static / "widgets")
    argv = make_site(tmp_path)
    argv[argv.index("--static") + 1] = str(static)
    assert cli_site.main(argv) == 0
    served = (tmp_path / "site" / "static" / "widgets-bytes-per-param.js").read_text(encoding="utf-8")
    # Minified: no comment is left (the minifier may write a "\n" string as a template literal holding a newline).
    assert "Shared by the two teaching widgets" not in served and not re.search(r"^\s*//", served, re.M)
    assert served.count("\n") <= 3
    before = hash_tree(tmp_path / "site")
    source = static / "widgets" / "10-bytes-per-param.js"
    lines = source.read_text(encoding="utf-8").splitlines()
    lines.insert(4, "const broken = (;")
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    errors = build_errors(argv, capsys)
    assert errors == [f"{source}:5: the widget script does not parse: unexpected ; in expression"]
    assert hash_tree(tmp_path / "site") == before
