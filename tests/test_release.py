"""Citable, versioned pages (issue 16 item 4): release metadata, 'Cite this page', the pinned snapshot
v/<version>/ with earlier snapshots kept, release records and the What changed page."""

from __future__ import annotations

import re
import shutil
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from builder import build as build_module
from builder import cli_site
from builder.build import SitePaths, build_site, gather_content, hash_tree
from builder.citation import bibtex, plain_citation
from builder.model.units import GiB
from builder.release import Release, project_version
from builder.releases import (Numbers, ReleaseRecord, evaluate, key_configurations, read_record, read_records,
                              record_text)
from builder.widgets import what_changed
from tests.test_bad_content import build_errors, make_site
from tests.test_build import FIXTURE, FIXTURE_VERSION, TEMPLATES, build_fixture, fake_chart, fake_estimate

ROOT = Path(__file__).resolve().parent.parent
CONTENT = ROOT / "content"


@pytest.fixture(autouse=True)
def fast_fakes(monkeypatch):
    """The CLI builds with the fake model and chart renderer."""
    monkeypatch.setattr(build_module, "load_estimate", lambda: fake_estimate)
    monkeypatch.setattr(build_module, "load_chart_renderer", lambda: fake_chart)


@pytest.fixture(scope="module")
def real_gathered():
    """The real content/, read and validated (no rendering)."""
    gathered, errors = gather_content(SitePaths(CONTENT, ROOT / "templates", ROOT / "static", ROOT / "unused"))
    assert errors == []
    return gathered


def fixture_with_release(tmp_path: Path, site_toml: str) -> SitePaths:
    """A copy of the fixture whose site.toml is `site_toml`."""
    content = tmp_path / "content"
    shutil.copytree(FIXTURE / "content", content)
    (content / "site.toml").write_text(site_toml, encoding="utf-8")
    return SitePaths(content, TEMPLATES, FIXTURE / "static", tmp_path / "site")


DATED = 'title = "Fixture Site"\nauthor = "Ada & Co"\nreleased = "2026-03-05"\nurl = "https://example.org/tm/"\n'


# Release metadata in one place ---------------------------------------------------------------

def test_citation_cff_agrees_with_pyproject_and_site_toml():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    site = tomllib.loads((CONTENT / "site.toml").read_text(encoding="utf-8"))
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0"
    assert cff["version"] == pyproject["project"]["version"] == project_version() == "0.3.0"
    assert cff["date-released"] == site["released"] == "2026-11-29"
    assert cff["title"] == site["title"] == "Training Memory, Explained"
    assert cff["authors"] == [{"name": site["author"]}] and site["author"] == "Training Memory, Explained contributors"
    assert cff["license"] == ["CC-BY-4.0", "MIT"] and pyproject["project"]["license"] == "MIT"


def test_the_current_version_is_recorded_with_the_release_date(real_gathered):
    record = next(r for r in real_gathered.releases if r.version == project_version())
    assert record.date == real_gathered.release.date == "2026-11-29"
    assert record.path == "content/releases/0.3.0.toml"


@pytest.mark.parametrize("line, message", [
    ('released = "2026-02-30"', 'site config: released: must be a date written YYYY-MM-DD, e.g. "2026-11-24", '
                                "got '2026-02-30'"),
    ('released = "24/11/2026"', "site config: released: must be a date written YYYY-MM-DD"),
    ("released = 2026-11-24", "site config: released must be text, got datetime.date(2026, 11, 24)"),
    ('url = "example.org/tm"', "site config: url: must be the site's public address, http(s)://... ending in '/'"),
    ('url = "https://example.org/tm"', "site config: url: must be the site's public address"),
])
def test_bad_release_settings_are_one_line_errors_naming_site_toml(tmp_path, capsys, line, message):
    argv = make_site(tmp_path, files={"site.toml": f'title = "Fixture Site"\n{line}\n'})
    errors = build_errors(argv, capsys)
    assert len(errors) == 1 and errors[0].startswith(f"{tmp_path / 'content' / 'site.toml'}:2: {message}"), errors
    assert not (tmp_path / "site").exists()


def test_bad_url_flag_is_a_usage_error(tmp_path, capsys):
    from builder.cli import main

    argv = make_site(tmp_path) + ["--url", "ftp://example.org/"]
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("argument --url: 'ftp://example.org/' is not an http(s) address such as "
                        "https://example.org/training-memory/") and "\n" not in err


# Cite this page -------------------------------------------------------------------------------

def test_bibtex_and_plain_citation_pin_the_version():
    release = Release(version="0.3.0", date="2027-01-15", url="https://example.org/tm/", title="Site & Co",
                      author="A_B contributors")
    entry = bibtex(release, "serving", "serving.html", "KV cache: 100% of {the} rest #1")
    assert entry == (
        "@misc{site-co-0.3.0-serving,\n"
        "  title        = {{KV cache: 100\\% of \\{the\\} rest \\#1}},\n"
        "  author       = {{A\\_B contributors}},\n"
        "  howpublished = {{Site \\& Co, version 0.3.0 of 2027-01-15}},\n"
        "  version      = {0.3.0},\n"
        "  year         = {2027},\n"
        "  date         = {2027-01-15},\n"
        "  url          = {https://example.org/tm/v/0.3.0/serving.html},\n"
        "  note         = {Accessed: YYYY-MM-DD}\n"
        "}")
    assert plain_citation(release, "serving.html", "Serving") == (
        "A_B contributors (2027). “Serving”. Site & Co, version 0.3.0 of 2027-01-15. "
        "https://example.org/tm/v/0.3.0/serving.html (accessed YYYY-MM-DD).")
    # No address and no date known: the citation names the version only, and credits the site.
    bare = replace(release, url="", date="", author="")
    assert plain_citation(bare, "serving.html", "Serving") == \
        "Site & Co. “Serving”. Site & Co, version 0.3.0 (accessed YYYY-MM-DD)."
    assert "url" not in bibtex(bare, "serving", "serving.html", "Serving")


def test_every_page_has_cite_this_page_pinned_to_its_twin(tmp_path):
    paths = fixture_with_release(tmp_path, DATED)
    build_site(paths, quiet=True, estimate=fake_estimate, render_chart=fake_chart, version="2.1.0")
    for name in ("index.html", "references.html"):
        page = (paths.out / name).read_text(encoding="utf-8")
        cite = re.search(r'<details class="cite" id="cite">(.*?)</details>', page, re.S).group(1)
        assert f'<a href="v/2.1.0/{name}">this page at version 2.1.0</a>' in cite
        assert f"  url          = {{https://example.org/tm/v/2.1.0/{name}}},\n" in cite
        assert "  author       = {{Ada \\&amp; Co}},\n" in cite  # BibTeX-escaped, then HTML-escaped
        assert f"Fixture Site, version 2.1.0 of 2026-03-05. https://example.org/tm/v/2.1.0/{name} (accessed" in cite
        footer = page[page.index('<footer class="site-footer">'):]
        assert (f'<p class="version">Version 2.1.0 of 2026-03-05. <a href="v/2.1.0/{name}">This page at version '
                f'2.1.0</a>: a link that never changes.</p>') in footer


def test_url_flag_wins_over_site_toml(tmp_path):
    paths = fixture_with_release(tmp_path, DATED)
    build_site(paths, quiet=True, estimate=fake_estimate, render_chart=fake_chart, version="2.1.0",
               url="https://mirror.example.net/")
    page = (paths.out / "index.html").read_text(encoding="utf-8")
    assert "https://mirror.example.net/v/2.1.0/index.html" in page and "https://example.org/tm/" not in page


# The pinned snapshot ----------------------------------------------------------------------------

def test_snapshot_holds_every_file_with_pages_pointing_back_to_the_latest(tmp_path):
    out = tmp_path / "site"
    build_fixture(out)
    tree = hash_tree(out)
    latest = sorted(name for name in tree if not name.startswith("v/"))
    snapshot = f"v/{FIXTURE_VERSION}/"
    assert sorted(name[len(snapshot):] for name in tree if name.startswith("v/")) == latest
    for name in latest:
        if name in ("index.html", "references.html"):
            continue
        assert tree[snapshot + name] == tree[name], name  # figures, scripts, styles: the same bytes
    page = (out / snapshot / "index.html").read_text(encoding="utf-8")
    assert '<link rel="canonical" href="../../index.html">' in page
    assert ('<p class="snapshot-banner" role="note">Version 1.0.0: this page as it was published then. '
            '<a href="../../index.html">The latest version is here</a>.</p>') in page
    assert '<link rel="stylesheet" href="static/site.css">' in page  # relative links work inside the snapshot
    assert 'href="v/' not in page and "canonical" not in (out / "index.html").read_text(encoding="utf-8")


def test_rebuild_keeps_earlier_snapshots_byte_identical(tmp_path):
    out = tmp_path / "site"
    build_fixture(out)
    old = out / "v" / "0.0.9"
    (old / "figures").mkdir(parents=True)
    (old / "index.html").write_bytes(b"<!DOCTYPE html><title>0.0.9</title>\n")
    (old / "figures" / "a.svg").write_bytes(b"<svg/>")
    stale = out / "v" / FIXTURE_VERSION / "gone.html"  # the current version's snapshot is the build's own
    stale.write_text("stale", encoding="utf-8")
    before = {name: digest for name, digest in hash_tree(out).items() if name.startswith("v/0.0.9/")}
    build_site(SitePaths(FIXTURE / "content", TEMPLATES, FIXTURE / "static", out), quiet=True, force=True,
               estimate=fake_estimate, render_chart=fake_chart, version=FIXTURE_VERSION)
    after = hash_tree(out)
    assert {name: digest for name, digest in after.items() if name.startswith("v/0.0.9/")} == before
    assert sorted(before) == ["v/0.0.9/figures/a.svg", "v/0.0.9/index.html"]
    assert not stale.exists() and f"v/{FIXTURE_VERSION}/index.html" in after


def test_two_builds_with_snapshots_are_byte_identical(tmp_path):
    first, second = tmp_path / "one" / "site", tmp_path / "two" / "site"
    build_fixture(first)
    build_fixture(second)
    assert hash_tree(first) == hash_tree(second)


# Release records ----------------------------------------------------------------------------------

GOOD_RECORD = '''version = "0.2.0"
date = "2026-12-01"
note = "Counted the loss buffers."

[configurations."calculator/fsdp-8b"]
label = "Llama 3 8B, FSDP on 8 GPUs"
per_gpu_bytes = 100
need_bytes = 120
'''


def test_record_round_trips_through_its_text(tmp_path):
    path = tmp_path / "0.2.0.toml"
    path.write_text(GOOD_RECORD, encoding="utf-8")
    record, errors = read_record(path)
    assert errors == []
    assert record == ReleaseRecord("0.2.0", "2026-12-01", "Counted the loss buffers.",
                                   {"calculator/fsdp-8b": Numbers("Llama 3 8B, FSDP on 8 GPUs", 100, 120)},
                                   record.path)
    path.write_text(record_text(record), encoding="utf-8")
    assert read_record(path)[0].numbers == record.numbers


@pytest.mark.parametrize("old, new, line, message", [
    ('version = "0.2.0"', 'version = "0.3.0"', 1, "version: must be the file's name, '0.2.0'"),
    ('date = "2026-12-01"', 'date = "2026-13-01"', 2, "date: must be a date written YYYY-MM-DD"),
    ('note = "Counted the loss buffers."', 'note = " "', 3, "note: give one line saying why numbers moved"),
    ("per_gpu_bytes = 100", "per_gpu_bytes = -5", 7,
     "configurations.calculator/fsdp-8b.per_gpu_bytes: must be a whole number of bytes, 0 or more, got -5"),
    ("need_bytes = 120", "need_bytes = 1.5", 8, "configurations.calculator/fsdp-8b.need_bytes: must be a whole number"),
    ("need_bytes = 120", "need = 120", 8, "configurations.calculator/fsdp-8b: unknown field 'need'"),
    ('label = "Llama 3 8B, FSDP on 8 GPUs"\n', "", 5, "configurations.calculator/fsdp-8b: missing field 'label'"),
    ('note = "Counted the loss buffers."\n', "", 1, "missing field 'note'"),
    ('note = "Counted', 'notes = "Counted', 3, "unknown field 'notes'"),
    ("need_bytes = 120", "need_bytes = ", 8, "invalid TOML"),
])
def test_malformed_record_names_its_file_line_and_field(tmp_path, old, new, line, message):
    assert old in GOOD_RECORD
    path = tmp_path / "0.2.0.toml"
    path.write_text(GOOD_RECORD.replace(old, new, 1), encoding="utf-8")
    record, errors = read_record(path)
    assert record is None and len(errors) >= 1
    assert str(errors[0]).startswith(f"{path}:{line}: "), errors[0]
    assert message in str(errors[0]) and "\n" not in str(errors[0])


def test_record_of_the_current_version_must_carry_the_release_date(tmp_path):
    path = tmp_path / "0.2.0.toml"
    path.write_text(GOOD_RECORD, encoding="utf-8")
    release = Release("0.2.0", "2026-12-02", "", "Site", "")
    records, errors = read_records(tmp_path, release)
    assert records == [] and [str(e) for e in errors] == [
        f"{path}:2: release record: date: 2026-12-01 is not site.toml's `released` (2026-12-02) for this version"]


def test_malformed_record_stops_the_build_and_keeps_the_site(tmp_path, capsys):
    argv = make_site(tmp_path)
    assert cli_site.main(argv) == 0
    before = hash_tree(tmp_path / "site")
    releases = tmp_path / "content" / "releases"
    releases.mkdir()
    (releases / "0.2.0.toml").write_text(GOOD_RECORD.replace("need_bytes = 120", 'need_bytes = "lots"'),
                                         encoding="utf-8")
    errors = build_errors(argv, capsys)
    assert errors == [f"{releases / '0.2.0.toml'}:8: release record: configurations.calculator/fsdp-8b.need_bytes: "
                      "must be a whole number of bytes, 0 or more, got 'lots'"]
    assert hash_tree(tmp_path / "site") == before


def test_records_sort_by_version_number(tmp_path):
    for version in ("0.10.0", "0.9.0", "0.10.0rc1"):
        (tmp_path / f"{version}.toml").write_text(GOOD_RECORD.replace("0.2.0", version), encoding="utf-8")
    records, errors = read_records(tmp_path)
    assert errors == [] and [r.version for r in records] == ["0.9.0", "0.10.0rc1", "0.10.0"]


# Key configurations and What changed ---------------------------------------------------------------

def test_key_configurations_are_the_calculator_starts_and_every_preset(real_gathered):
    configurations, errors = key_configurations(real_gathered.models, real_gathered.presets, real_gathered.pages)
    assert errors == []
    assert [key for key, _, _ in configurations] == [
        "calculator/classic-8b", "calculator/fsdp-8b", "calculator/qlora-8b", "calculator/3d-70b",
        "calculator/serve-70b", "preset/calculator/llama-3-8b-fsdp"]
    numbers = evaluate(configurations)
    # The classic recipe's sum of parts is the calculator's 161.4 GB; the FSDP start is the calculator page's preset.
    assert round(numbers["calculator/classic-8b"].per_gpu_bytes / 1e9, 1) == 161.4
    assert numbers["calculator/fsdp-8b"] == replace(numbers["preset/calculator/llama-3-8b-fsdp"],
                                                    label="Calculator start: Llama 3 8B, FSDP on 8 GPUs")


def test_the_recorded_release_matches_the_model_it_was_recorded_with(real_gathered):
    """content/releases/0.1.0.toml holds what `release --write` evaluated: every key configuration, in bytes."""
    record = real_gathered.releases[0]
    assert record.version == "0.1.0" and record.note.startswith("First release")
    assert list(record.numbers) == [key for key, _, _ in key_configurations(
        real_gathered.models, real_gathered.presets, real_gathered.pages)[0]]
    assert record.numbers["calculator/serve-70b"].per_gpu_bytes == record.numbers["calculator/serve-70b"].need_bytes


def widget_state(gathered, records):
    catalogs = {"model": gathered.models, "site_presets": gathered.presets, "pages": gathered.pages,
                "releases": records}
    return what_changed.context({}, catalogs)


def test_a_model_change_shows_as_moved_numbers_since_the_latest_release(real_gathered):
    """Doctor the latest record (as if the model had changed since): the unreleased section names exactly the
    configuration that moved, by how much, and leaves the others unchanged."""
    current = evaluate(key_configurations(real_gathered.models, real_gathered.presets, real_gathered.pages)[0])
    doctored = dict(current)
    qlora = current["calculator/qlora-8b"]
    doctored["calculator/qlora-8b"] = replace(qlora, need_bytes=qlora.need_bytes - GiB)  # now 1 GiB more
    records = [ReleaseRecord("0.1.0", "2026-11-24", "First release.", current),
               ReleaseRecord("0.2.0", "2026-12-01", "Counted the loss buffers.", doctored)]
    state = widget_state(real_gathered, records)
    unreleased, pair = state["sections"]
    assert unreleased["title"] == "Since version 0.2.0: changes in no release yet"
    assert (unreleased["moved"], unreleased["total"]) == (1, 6)
    rows = {row["label"]: row for row in unreleased["rows"]}
    assert len(rows) == 6
    moved = rows["Calculator start: Llama 3 8B, QLoRA on one GPU"]
    percent = GiB / (qlora.need_bytes - GiB) * 100
    assert moved["moved"] and moved["need_bytes"] == {
        "before": f"{(qlora.need_bytes - GiB) / GiB:,.2f} GiB", "after": f"{qlora.need_bytes / GiB:,.2f} GiB",
        "change": f"+1.00 GiB (+{percent:.1f} %)", "moved": True}
    assert moved["per_gpu_bytes"]["change"] == "unchanged"
    assert [row["moved"] for label, row in rows.items() if label != moved["label"]] == [False] * 5
    # Between the two releases the same number moved the other way, with the release's reason.
    assert pair["title"] == "Version 0.1.0 to 0.2.0 (2026-12-01)" and pair["note"] == "Counted the loss buffers."
    back = f"−1.00 GiB ({-GiB / qlora.need_bytes * 100:.1f} %)"
    assert [row["need_bytes"]["change"] for row in pair["rows"] if row["moved"]] == [back]
    assert state["first"]["version"] == "0.1.0" and len(state["first"]["rows"]) == 6


def test_the_unreleased_section_says_which_version_number_the_build_carries(real_gathered):
    """Numbers that moved since the latest record are this build's. A build that still carries the record's version
    number writes them into its pages and their pinned copy too, and the page says so; a build with a newer number
    names it. Nothing moved: nothing to explain."""
    current = evaluate(key_configurations(real_gathered.models, real_gathered.presets, real_gathered.pages)[0])
    older = dict(current)
    qlora = current["calculator/qlora-8b"]
    older["calculator/qlora-8b"] = replace(qlora, need_bytes=qlora.need_bytes - GiB)
    record = ReleaseRecord("0.1.0", "2026-11-24", "First release.", older)

    def detail(version: str | None, record: ReleaseRecord = record) -> str:
        catalogs = {"model": real_gathered.models, "site_presets": real_gathered.presets,
                    "pages": real_gathered.pages, "releases": [record]}
        if version is not None:
            catalogs["release"] = Release(version, "2026-11-24", "", "Site", "")
        section = what_changed.context({}, catalogs)["sections"][0]
        assert section["title"] == "Since version 0.1.0: changes in no release yet"
        return section["detail"]

    assert "still carry the number 0.1.0, so they, and their copy under v/0.1.0/, show these numbers rather than " \
           "the ones version 0.1.0 recorded on 2026-11-24" in detail("0.1.0")
    assert detail("0.2.0") == ("The Now column is what this build computes (this build is version 0.2.0); its record "
                               "will give the reason they moved.")
    assert detail("0.1.0", replace(record, numbers=current)) == ""


def test_added_and_removed_configurations_are_named(real_gathered):
    current = evaluate(key_configurations(real_gathered.models, real_gathered.presets, real_gathered.pages)[0])
    old = {key: numbers for key, numbers in current.items() if key != "calculator/3d-70b"}
    old["calculator/retired"] = Numbers("A start no longer offered", 5 * GiB, 6 * GiB)
    state = widget_state(real_gathered, [ReleaseRecord("0.1.0", "2026-11-24", "First release.", old)])
    rows = {row["label"]: row for row in state["sections"][0]["rows"]}
    assert rows["Calculator start: Llama 3 70B, 3D parallel on 128 GPUs"]["need_bytes"]["change"] == "new"
    assert rows["A start no longer offered"]["per_gpu_bytes"] == {"before": "5.00 GiB", "after": "–",
                                                                   "change": "removed", "moved": True}
    assert state["sections"][0]["moved"] == 2


def test_release_command_records_and_refuses_to_overwrite(tmp_path, capsys):
    from builder.cli import main

    version = project_version()
    content = tmp_path / "content"
    shutil.copytree(CONTENT, content, ignore=shutil.ignore_patterns("releases"))
    assert main(["release", "--content", str(content), "--write"]) == 2
    assert "argument --note: --write needs one line" in capsys.readouterr().err
    assert main(["release", "--content", str(content), "--write", "--note", "First  release."]) == 0
    record, errors = read_record(content / "releases" / f"{version}.toml")
    assert errors == [] and record.note == "First release." and record.date == "2026-11-29"
    # The committed record of this version is what the current model gives, number for number and label for label.
    expected, _ = read_record(CONTENT / "releases" / f"{version}.toml")
    assert record.numbers == expected.numbers
    # 0.1.0 published the classic start's 161.4 GB under a label that did not yet name it the sum of parts; its
    # numbers are as released.
    first, _ = read_record(CONTENT / "releases" / "0.1.0.toml")
    classic = (first.numbers["calculator/classic-8b"], record.numbers["calculator/classic-8b"])
    assert [(n.per_gpu_bytes, n.need_bytes) for n in classic] == [(161411570074, 176665747456)] * 2
    assert classic[1].label == classic[0].label.replace("(161.4 GB)", "(sum of parts 161.4 GB)") != classic[0].label
    capsys.readouterr()
    assert main(["release", "--content", str(content), "--write", "--note", "again"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and f"{version}.toml:1: version {version} is already recorded" in err and "\n" not in err
    assert main(["release", "--content", str(content)]) == 0
    out = capsys.readouterr().out
    assert f"against version {version}:" in out and out.count("sum unchanged, need unchanged") == 6


def test_release_check_guards_a_published_versions_pinned_pages(tmp_path, capsys):
    """The deploy's guard (.github/workflows/pages.yml): a version with no record passes; so does one whose record
    holds what the model gives; a record the model has moved away from fails with exit 1, naming what moved."""
    from builder.cli import main

    version = project_version()
    content = tmp_path / "content"
    shutil.copytree(CONTENT, content, ignore=shutil.ignore_patterns("releases"))
    assert main(["release", "--content", str(content), "--check"]) == 0
    assert "has no record yet" in capsys.readouterr().out
    assert main(["release", "--content", str(content), "--write", "--note", "First release."]) == 0
    capsys.readouterr()
    assert main(["release", "--content", str(content), "--check"]) == 0
    assert "gives the numbers it recorded" in capsys.readouterr().out
    target = content / "releases" / f"{version}.toml"
    text = target.read_text(encoding="utf-8")
    recorded = re.search(r'configurations."calculator/qlora-8b"]\n.*?need_bytes = (\d+)', text, re.S).group(1)
    target.write_text(text.replace(f"need_bytes = {recorded}", f"need_bytes = {int(recorded) - GiB}", 1),
                      encoding="utf-8")
    assert main(["release", "--content", str(content), "--check"]) == 1
    err = capsys.readouterr().err
    assert f"version {version} is recorded" in err and "calculator/qlora-8b" in err and "Raise [project] version" in err
    assert main(["release", "--content", str(content), "--check", "--write"]) == 2


@pytest.mark.parametrize("text, message", [
    ('[project]\nname = "x"\nversion = "one"\n', "pyproject.toml:3: [project] version: must be a version such as "
                                                 "\"0.1.0\", got 'one'"),
    ('[project]\nname = "x"\n', "pyproject.toml:1: [project] version: must be a version such as \"0.1.0\", got None"),
    ('[project\n', "pyproject.toml:1: cannot read it: "),
])
def test_bad_project_version_names_pyproject_and_the_field(tmp_path, text, message):
    from builder.release import VersionError

    path = tmp_path / "pyproject.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(VersionError) as error:
        project_version(path)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)
