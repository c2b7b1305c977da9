"""The build pipeline end to end: fixture site with fakes, the real site with the real model and charts."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

import pytest

from builder import build as build_module
from builder import cli_site
from builder.build import SitePaths, build_site, bundle_static, hash_tree
from builder.content import BuildFailed
from builder.catalog import load_models
from builder.grids import format_amount
from builder.model import Breakdown, Config, Part, param_count
from builder.release import project_version
from builder.serve import make_server
from tests.html_tags import attributes, children, descendants, document, nodes, texts

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "site-small"
TEMPLATES = ROOT / "templates"


# Fakes: a tiny deterministic memory model and chart renderer -----------------------------

def fake_estimate(config: Config) -> Breakdown:
    """2 + 2 + 12 bytes per parameter (ZeRO-3 divides by dp) plus 2 bytes per token per hidden unit per layer."""
    params = param_count(config.model) if config.model is not None else config.params
    shard = config.dp if config.zero == 3 else 1
    layers, hidden = (config.model.layers, config.model.hidden) if config.model is not None else (1, 1)
    tokens = config.micro_batch * config.seq_len
    return Breakdown(params=params, parts=(
        Part("weights", 2 * params // shard, "N x 2 / N_d", "fake source A", per_unit="2 B/param"),
        Part("gradients", 2 * params // shard, "N x 2 / N_d", "fake source A", per_unit="2 B/param"),
        Part("optimizer/adam_m", 12 * params // shard, "N x 12 / N_d", "fake source B", per_unit="12 B/param",
             simplification="fake simplification"),
        Part("activations/layers", 2 * tokens * hidden * layers, "2 b s h L", "fake source C",
             per_unit="2 B per token per hidden unit per layer"),
    ))


def fake_chart(spec) -> str:
    """A small SVG that names the chart and each bar's total in bytes."""
    totals = " ".join(f"{bar.label}={bar.breakdown.total}" for bar in spec.bars)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" viewBox="0 0 100 10" '
            f'aria-labelledby="{spec.chart_id}-title {spec.chart_id}-desc">'
            f'<title id="{spec.chart_id}-title">{html.escape(spec.title)}</title>'
            f'<desc id="{spec.chart_id}-desc">{html.escape(spec.description)}</desc>'
            f'<text x="0" y="8">{html.escape(totals)}</text></svg>')


def fixture_paths(out: Path, content: Path = FIXTURE / "content") -> SitePaths:
    """SitePaths for the fixture site (real templates, fixture static files)."""
    return SitePaths(content=content, templates=TEMPLATES, static=FIXTURE / "static", out=out)


FIXTURE_VERSION = "1.0.0"  # the fixture's release, fixed so that raising the project's version leaves it alone


def build_fixture(out: Path, content: Path = FIXTURE / "content") -> dict[str, int]:
    """Build the fixture site with the fakes; returns the files written."""
    return build_site(fixture_paths(out, content), quiet=True, estimate=fake_estimate, render_chart=fake_chart,
                      version=FIXTURE_VERSION).files


def table_cells(page: str, table_id: str) -> dict[str, list[str]]:
    """Row header -> cell texts of one data table in a built page."""
    table = re.search(rf'<table class="data-table" id="{table_id}">(.*?)</table>', page, re.S).group(1)
    rows = {}
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.S):
        header = re.search(r"<th[^>]*>(.*?)</th>", row, re.S).group(1)
        rows[html.unescape(header)] = [html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", row)]
    return rows


@pytest.fixture(scope="module")
def fixture_site(tmp_path_factory) -> Path:
    """The fixture site built once with the fakes."""
    out = tmp_path_factory.mktemp("fixture") / "site"
    build_fixture(out)
    return out


def real_paths(folder: Path, out: Path) -> SitePaths:
    """SitePaths for a snapshot of the real content/, templates/ and static/ (others may edit them meanwhile)."""
    if not (folder / "content").exists():
        for name in ("content", "templates", "static"):
            shutil.copytree(ROOT / name, folder / name)
    return SitePaths(folder / "content", folder / "templates", folder / "static", out)


@pytest.fixture(scope="module")
def real_inputs(tmp_path_factory) -> Path:
    """A snapshot of the real inputs."""
    folder = tmp_path_factory.mktemp("real-inputs")
    real_paths(folder, folder / "unused")
    return folder


@pytest.fixture(scope="module")
def real_site(real_inputs) -> Path:
    """The real content/ built with the real memory model and chart renderer."""
    out = real_inputs / "site"
    build_site(real_paths(real_inputs, out), quiet=True, force=True)
    return out


# Fixture site -------------------------------------------------------------------------

def test_fixture_site_has_every_page_and_static_file(fixture_site):
    figures = [f"figures/index-{chart}{suffix}" for chart in ("states", "tokens")
               for suffix in ("-dark.svg", ".html", ".png", ".svg")]
    latest = figures + ["index.html", "references.html", "static/site.css", "static/widgets.js"]
    # The pinned snapshot repeats every file under v/<version>/ (tests/test_release.py checks its pages).
    assert sorted(hash_tree(fixture_site)) == latest + [f"v/{FIXTURE_VERSION}/{name}" for name in latest]


def test_stylesheets_are_minified_and_concatenated_site_css_first(fixture_site):
    css = (fixture_site / "static" / "site.css").read_text()
    # tdewolff/minify's CSS output drops the spaces and the last semicolon of a block.
    assert css == "body{margin:0}\n.bucket-weights{fill:blue}\n"
    assert "static/charts.css" not in hash_tree(fixture_site)


def test_table_numbers_come_from_the_model(fixture_site):
    llama = load_models(FIXTURE / "content" / "models.toml")["llama-3-8b"]
    single = fake_estimate(Config(model=llama, micro_batch=1, seq_len=4096))
    sharded = fake_estimate(Config(model=llama, micro_batch=1, seq_len=4096, zero=3, dp=8))
    rows = table_cells((fixture_site / "index.html").read_text(), "table-states")
    assert rows["Sum of parts (GiB)"] == [format_amount(single.total, "GiB"), format_amount(sharded.total, "GiB")]
    # 8,030,261,248 params x 16 B = 119.66 GiB, + 2 x 4096 x 4096 x 32 B = 1 GiB of activations; ZeRO-3 / 8
    assert rows["Sum of parts (GiB)"] == ["120.7", "16.0"]
    assert rows["Optimizer"] == ["89.7", "11.2"]  # rows are named for readers (builder.model.partnames)
    assert rows["Fits on A100 SXM 80GB (80.0 GiB)?"] == ["no, 40.7 over", "yes, 64.0 left"]


def test_grid_makes_one_bar_per_value_in_the_chosen_unit(fixture_site):
    rows = table_cells((fixture_site / "index.html").read_text(), "table-tokens")
    gpt2 = load_models(FIXTURE / "content" / "models.toml")["gpt2"]
    expected = [format_amount(fake_estimate(Config(model=gpt2, micro_batch=b, seq_len=1024)).total, "GB") for b in (1, 4)]
    # 124,439,808 x 16 B = 1.99 GB, + 2 x b x 1024 x 768 x 12 B of activations
    assert rows["Sum of parts (GB)"] == expected == ["2.0", "2.1"]
    assert "Adam first moment" in rows  # group_by: part lists every part, by its reader-facing name
    assert "GB = 10^9 bytes" in (fixture_site / "index.html").read_text()


def test_table_placement_has_no_figure_and_chart_placement_has_one(fixture_site):
    page = (fixture_site / "index.html").read_text()
    assert page.count("<figure") == 1
    assert [svg.get("role") for svg in attributes(page, "svg")].count("img") == 1
    assert "states-title" in page and "tokens-title" not in page


def test_citations_are_numbered_links_to_the_references_page(fixture_site):
    page = (fixture_site / "index.html").read_text()
    assert '[<a href="references.html#ref-rajbhandari2019"' in page
    assert re.search(r'#ref-korthikanti2022"[^>]*>2</a>, <a href="references.html#ref-rajbhandari2019"[^>]*>1</a>\]', page)
    references = (fixture_site / "references.html").read_text()
    assert '<li id="ref-rajbhandari2019" value="1">' in references
    assert '<li id="ref-korthikanti2022" value="2">' in references


def test_math_is_mathml_without_math_javascript(fixture_site):
    page = (fixture_site / "index.html").read_text()
    assert page.count("<math ") == 2
    # A display equation scrolls sideways inside its own focusable, labelled region (issue 18).
    tags = [(name, attrs) for name, attrs, _ in document(page)]
    at = tags.index(("div", {"class": "math-display", "tabindex": "0", "role": "region",
                             "aria-label": "Equation 1 (scrolls sideways on narrow screens)"}))
    assert tags[at + 1] == ("math", {"xmlns": "http://www.w3.org/1998/Math/MathML", "display": "block"})
    assert "\N{GREEK CAPITAL LETTER PSI}" in texts(page, "mi")  # \Psi in the fixture's index.md
    assert not re.search(r"mathjax|katex", page, re.I)


def test_widget_placeholder_and_script_only_where_placed(fixture_site):
    page = (fixture_site / "index.html").read_text()
    widget = next(attrs for _, attrs, _ in document(page) if attrs.get("data-widget") == "bytes-per-param")
    assert widget["data-options"] == '{"gpus": ["a100-80gb"], "model": "gpt2"}'
    assert {"src": "static/widgets.js", "defer": ""} in attributes(page, "script")
    assert "<script" not in (fixture_site / "references.html").read_text()


def test_navigation_previous_next_and_skip_link(fixture_site):
    page = (fixture_site / "index.html").read_text()
    assert '<a class="skip-link" href="#main">' in page and '<main id="main"' in page
    assert '<a class="pager-next" href="references.html" rel="next">' in page
    assert "pager-previous" not in page
    assert '<a class="pager-previous" href="index.html" rel="prev">' in (fixture_site / "references.html").read_text()
    assert page.count("<h1>") == 1


def test_headings_get_permalink_anchors(fixture_site):
    page = (fixture_site / "index.html").read_text()
    assert ('<h2 id="model-states">Model states <a class="permalink" href="#model-states" '
            'aria-label="Permalink: Model states">#</a></h2>') in page


def test_formula_notes_name_every_source(fixture_site):
    page = (fixture_site / "index.html").read_text()
    for source in ("fake source A", "fake source B", "fake source C"):
        assert f"Source: {source}" in page
    assert "Simplification: fake simplification" in page


def test_csp_is_strict(fixture_site):
    for name in ("index.html", "references.html"):
        page = (fixture_site / name).read_text()
        csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page).group(1)
        assert "default-src 'none'" in csp and "script-src 'self';" in csp and "unsafe-inline" not in csp
        assert "http" not in csp


def test_build_is_deterministic(tmp_path):
    build_fixture(tmp_path / "one")
    build_fixture(tmp_path / "two")
    assert hash_tree(tmp_path / "one") == hash_tree(tmp_path / "two")


def test_bundle_static_copies_nested_files(tmp_path):
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "a.svg").write_text("<svg/>")
    (tmp_path / "z.css").write_text("/* the last sheet */\nz { color: #ff0000; }\n")
    (tmp_path / "site.css").write_text("s {\n  margin: 0px;\n}\n")
    bundle = bundle_static(tmp_path)
    # Comments and whitespace go; tdewolff/minify writes #ff0000 as red and 0px as 0.
    assert bundle == {"static/site.css": b"s{margin:0}\nz{color:red}\n", "static/img/a.svg": b"<svg/>"}


def test_a_stylesheet_that_does_not_parse_is_an_error_naming_it(tmp_path):
    (tmp_path / "site.css").write_text("a{color:red")  # the block never closes: tdewolff/minify stops at EOF
    with pytest.raises(BuildFailed) as failed:
        bundle_static(tmp_path)
    assert [(e.path, e.message) for e in failed.value.errors] == [
        (str(tmp_path / "site.css"), "the stylesheet does not parse: EOF")]


# Real site ----------------------------------------------------------------------------

def test_each_page_loads_one_script_with_only_its_widgets(real_site):
    """A page loads at most one script: the shared helpers (00-core, 99-boot) plus the sources of the
    scripted widgets it embeds, nothing else; pages that embed none load no script (issue 4)."""
    from builder.build import bundle_script, minify_script, page_sources, widget_sources
    from builder.widgets import WIDGETS

    sources = widget_sources(ROOT / "static")
    served = {path.name for path in (real_site / "static").glob("*.js")}
    loaded = set()
    for page in sorted(real_site.glob("*.html")):
        text = page.read_text(encoding="utf-8")
        scripts = re.findall(r'<script src="static/([^"]+)"', text)
        used = sorted({name for name in re.findall(r'data-widget="([^"]+)"', text) if WIDGETS[name].scripted})
        if not used:
            assert scripts == [], page.name
            continue
        assert scripts == ["widgets-" + "-and-".join(used) + ".js"], page.name
        expected = minify_script(*bundle_script(page_sources(sources, tuple(used))))
        assert (real_site / "static" / scripts[0]).read_bytes() == expected, page.name
        loaded.add(scripts[0])
    assert served == loaded and "widgets-calculator.js" in served  # no script nobody loads
    # Shared helper files come only with the widgets that use them (tree shaking by file).
    names = lambda *widgets: [p.name for p in page_sources(sources, widgets)]  # noqa: E731
    assert names("calculator") == ["00-core.js", "01-rules.js", "02-model.js", "04-link-notice.js", "06-choices.js",
                                   "07-live-templates.js",
                                   "30-calculator.js", "99-boot.js"]
    assert names("bytes-per-param") == ["00-core.js", "01-rules.js", "02-model.js", "03-teaching.js", "04-link-notice.js",
                                        "05-radio-group.js",
                                        "10-bytes-per-param.js", "99-boot.js"]
    calculator = (real_site / "static" / "widgets-calculator.js").read_text()
    assert ".calculator=" in calculator and '["bytes-per-param"]=' not in calculator


LICENCE_LINK = '<a href="https://creativecommons.org/licenses/by/4.0/" rel="license">CC BY 4.0</a>'


def test_every_page_and_figure_states_the_content_licence(real_site):
    """Issue 16 item 7: an instructor sees on every page, and on every embeddable figure, that they may reuse it."""
    pages = sorted(real_site.rglob("*.html"))
    assert len(pages) > 10
    assert [str(p.relative_to(real_site)) for p in pages if LICENCE_LINK not in p.read_text(encoding="utf-8")] == []
    index = (real_site / "index.html").read_text(encoding="utf-8")
    footer = index[index.index('<footer class="site-footer">'):]
    assert "Text and figures: " + LICENCE_LINK in footer and "Code: MIT licence." in footer


def test_the_code_licence_is_the_mit_licence_pyproject_names():
    import tomllib

    root = Path(__file__).resolve().parent.parent
    assert tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["license"] == "MIT"
    text = (root / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License\n\nCopyright (c) 2026 Training Memory, Explained contributors\n")
    assert "CC BY 4.0" in (root / "README.md").read_text(encoding="utf-8")


def test_real_site_numbers_equal_the_memory_model(real_site):
    from builder.model.estimator import estimate

    llama = load_models(ROOT / "content" / "models.toml")["llama-3-8b"]
    base = dict(model=llama, precision="bf16-mixed", optimizer="adamw", micro_batch=1, seq_len=4096)
    single, sharded = estimate(Config(**base)), estimate(Config(**base, zero=3, dp=8))
    rows = table_cells((real_site / "index.html").read_text(), "table-four-buckets")
    assert rows["Sum of parts (GiB)"] == [format_amount(single.total, "GiB"), format_amount(sharded.total, "GiB")]
    assert rows["Weights"] == [format_amount(single.buckets()["weights"], "GiB"),
                               format_amount(sharded.buckets()["weights"], "GiB")]
    assert rows["Weights"] == ["15.0", "1.9"]  # 8,030,261,248 x 2 B = 14.96 GiB; / 8 = 1.87 GiB


def test_real_site_fits_on_table_judges_the_need(real_site):
    """Issue 13: the calculator page's fits-on table shows the sum of parts and the need, and its verdicts use the
    need. Llama 3 8B, FSDP on 8 GPUs, 8,192 tokens, full recomputation: the need (the start of backward, with the
    loss gradients) differs from the sum of parts, which counts FSDP's fp32 sharded gradients that do not exist yet."""
    from builder.model.peak import assess
    from builder.render import fit_verdict

    llama = load_models(ROOT / "content" / "models.toml")["llama-3-8b"]
    config = Config(model=llama, precision="bf16-mixed", optimizer="adamw", micro_batch=1, seq_len=8192,
                    fsdp="FULL_SHARD", dp=8, recompute="full")
    breakdown, needed = assess(config)
    assert needed.bytes < breakdown.total and needed.peak.name == "backward_start"
    rows = table_cells((real_site / "calculator.html").read_text(), "table-fits-on")
    assert rows["Sum of parts (GiB)"][1] == format_amount(breakdown.total, "GiB")
    assert rows["Needs: peak of a step, or a served model's steady state (GiB)"][1] == format_amount(needed.bytes, "GiB")
    # GeForce RTX 4090 24GB: what a CUDA process sees, deviceQuery 25386352640 bytes (thamada/nvidia-smi
    # gls/RTX4090_deviceQuery.py, content/gpus.toml); the need exceeds it by 3.9 GiB (at the start of backward FSDP2
    # holds the root unit and the last block, prefetched: one block, not two; and no block has made gradients yet).
    rtx = 25386352640
    verdict = rows["Fits on GeForce RTX 4090 24GB (23.6 GiB)?"][1]
    assert verdict == fit_verdict(needed.bytes, rtx, "GiB") == "no, 3.9 over"
    assert fit_verdict(breakdown.total, rtx, "GiB") != verdict  # judged by the sum it would read otherwise


def test_real_site_gpu_catalog_shows_the_name_nvidia_smi_and_cuda_totals(real_site):
    """The calculator's catalog table ({{< catalog gpus >}}): H100 SXM, nvidia-smi 81559MiB = 79.65 GiB and
    deviceQuery 85028896768 bytes = 79.19 GiB on one machine (driver 570.133.20, orimanabu/zenndocs); MI300X, HIP's
    total equals rocminfo's 201310208 KB pool = 191.98 GiB (thamada/nvidia-smi)."""
    page = (real_site / "calculator.html").read_text()
    rows = table_cells(page, "gpu-catalog")
    assert rows["H100 SXM 80GB"] == ["80 GB", "79.65", "79.19", "0.46"]
    assert rows["MI300X 192GB"] == ["192 GB", "191.98", "191.98", "0.00"]
    assert 'href="https://github.com/orimanabu/zenndocs/blob/' in page


def test_real_site_has_charts_with_title_and_desc(real_site):
    page = (real_site / "index.html").read_text()
    assert page.count("<figure") == 2
    assert page.count("<svg") >= 2 and "<title" in page and "<desc" in page


def test_real_site_urls_are_relative_and_same_origin(real_site):
    for path in sorted(real_site.glob("*.html")):
        page = path.read_text()
        for attribute, url in re.findall(r'\s(href|src)="([^"]*)"', page):
            assert not url.startswith("/"), f"{path.name}: absolute URL {url}"
            if url.startswith(("http:", "https:")):
                # other origins only as plain links in prose and the bibliography, never loaded
                assert attribute == "href", f"{path.name}: loads {url}"
            if attribute == "src":
                assert (path.parent / url).is_file(), f"{path.name}: loads {url}, which the site does not have"
        for tag in re.findall(r"<(?:link|script|img)\b[^>]*>", page):
            assert "http" not in tag, f"{path.name}: {tag}"
        # The CSP allows no inline script; JSON data blocks are not executed.
        assert not re.search(r"<script(?![^>]*\s(?:src=|type=\"application/json\"))", page), \
            f"{path.name}: inline script"
        assert not re.search(r"mathjax|katex", page, re.I)


def test_real_site_has_mathml(real_site):
    assert "<math " in (real_site / "index.html").read_text()


def test_real_site_build_is_deterministic(real_site, real_inputs):
    again = real_inputs / "again"
    shutil.rmtree(real_inputs / ".site-cache")  # draw every chart again too
    build_site(real_paths(real_inputs, again), quiet=True, force=True)
    assert hash_tree(again) == hash_tree(real_site)


# Warm rebuilds, atomic swap, CLI and serve --------------------------------------------------

def copy_fixture(tmp_path: Path) -> SitePaths:
    """A writable copy of the fixture content with the repo templates."""
    content = tmp_path / "content"
    shutil.copytree(FIXTURE / "content", content)
    static = tmp_path / "static"
    shutil.copytree(FIXTURE / "static", static)
    return SitePaths(content=content, templates=TEMPLATES, static=static, out=tmp_path / "site")


def test_warm_rebuild_skips_when_nothing_changed(tmp_path, monkeypatch):
    monkeypatch.setattr(build_module, "load_estimate", lambda: fake_estimate)
    monkeypatch.setattr(build_module, "load_chart_renderer", lambda: fake_chart)
    paths = copy_fixture(tmp_path)
    assert not build_site(paths, quiet=True).unchanged
    started = time.perf_counter()
    assert build_site(paths, quiet=True).unchanged
    assert time.perf_counter() - started < 0.5
    page = paths.content / "index.md"
    page.write_text(page.read_text().replace("Intro paragraph", "Changed paragraph"))
    assert not build_site(paths, quiet=True).unchanged
    assert "Changed paragraph" in (paths.out / "index.html").read_text()
    (paths.out / "index.html").unlink()  # a damaged output is rebuilt even if inputs did not change
    assert not build_site(paths, quiet=True).unchanged
    assert (paths.out / "index.html").is_file()


def test_chart_cache_reuses_svgs(tmp_path, monkeypatch):
    calls = []

    def counting_chart(spec):
        calls.append(spec.chart_id)
        return fake_chart(spec)

    monkeypatch.setattr(build_module, "load_estimate", lambda: fake_estimate)
    monkeypatch.setattr(build_module, "load_chart_renderer", lambda: counting_chart)
    paths = copy_fixture(tmp_path)
    build_site(paths, quiet=True)
    build_site(paths, quiet=True, force=True)
    assert calls == ["states", "tokens"]


def test_swap_leaves_no_temporary_folders(tmp_path):
    build_fixture(tmp_path / "site")
    build_fixture(tmp_path / "site")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".site-cache", "site"]  # no .site-new-*/.site-old-*


def test_cli_build_prints_progress_and_exits_zero(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(build_module, "load_estimate", lambda: fake_estimate)
    monkeypatch.setattr(build_module, "load_chart_renderer", lambda: fake_chart)
    paths = copy_fixture(tmp_path)
    argv = ["build", "--content", str(paths.content), "--templates", str(TEMPLATES), "--static", str(paths.static),
            "--out", str(paths.out)]
    assert cli_site.main(argv) == 0
    err = capsys.readouterr().err
    version = re.escape(project_version())
    assert re.search(r"index\.html +[\d.]+ KiB", err)
    assert re.search(rf"built 2 pages, 12 files \(and their pinned copy in v/{version}/\) in [\d.]+ s", err)
    assert cli_site.main(argv + ["--quiet", "--force"]) == 0
    assert capsys.readouterr().err == ""


def test_cli_build_names_a_missing_folder_flag(tmp_path, capsys):
    assert cli_site.main(["build", "--content", str(tmp_path / "nope"), "--out", str(tmp_path / "site")]) == 2
    assert f"--content {tmp_path / 'nope'}: no such folder" in capsys.readouterr().err


def test_serve_under_a_sub_path(fixture_site):
    server = make_server(fixture_site, 0, "/training-memory/")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with urllib.request.urlopen(f"{base}/training-memory/index.html") as response:
            assert response.status == 200 and b"<h1>Fixture home</h1>" in response.read()
        with urllib.request.urlopen(f"{base}/training-memory/static/site.css") as response:
            assert response.status == 200
        with pytest.raises(urllib.error.HTTPError) as outside:
            urllib.request.urlopen(f"{base}/index.html")
        assert outside.value.code == 404
    finally:
        server.shutdown()
        server.server_close()


def test_fingerprint_changes_with_any_input(tmp_path):
    paths = copy_fixture(tmp_path)
    before = build_module.fingerprint_inputs(paths)
    (paths.static / "extra.css").write_text("a{}")
    assert build_module.fingerprint_inputs(paths) != before
    assert len(before) == 64


def test_site_builds_without_torch(tmp_path):
    # GitHub Pages installs only the site's dependencies: the Validation page must render from the
    # committed measurements with torch and transformers not importable.
    code = ("import sys; sys.modules['torch'] = None; sys.modules['transformers'] = None\n"
            "from builder.cli import main\n"
            f"raise SystemExit(main(['build', '--out', {str(tmp_path / 'site')!r}, '--quiet', '--force']))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "compared quantities are within their tolerance" in (tmp_path / "site" / "validation.html").read_text()


def test_charts_are_drawn_without_matplotlib_and_a_warm_build_takes_them_from_the_cache(tmp_path):
    # Charts are written straight from their planned drawing (builder/charts/svg.py): no build imports matplotlib.
    # The preview rebuilds on every save: charts whose inputs did not change come from the cache, not redrawn.
    paths = copy_fixture(tmp_path)
    argv = ["build", "--content", str(paths.content), "--templates", str(TEMPLATES), "--static", str(paths.static),
            "--out", str(paths.out), "--quiet"]
    code = ("import sys\nimport builder.charts.figure as figure\n"
            "if '--force' in sys.argv:\n"
            "    def refuse(*args, **kwargs):\n        raise AssertionError('a chart was drawn again')\n"
            "    figure.plan_chart = refuse\n"
            "from builder.cli import main\n"
            "code = main(sys.argv[1:])\n"
            "print(code, 'matplotlib' in sys.modules)\n")
    cold = subprocess.run([sys.executable, "-c", code, *argv], cwd=ROOT, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=300)
    assert cold.stdout.split() == ["0", "False"], cold.stderr
    drawn = hash_tree(paths.out)
    assert any(name.endswith(".svg") for name in (p.name for p in (paths.cache / "charts").iterdir()))
    warm = subprocess.run([sys.executable, "-c", code, *argv, "--force"], cwd=ROOT, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=300)
    assert warm.stdout.split() == ["0", "False"], warm.stderr
    assert hash_tree(paths.out) == drawn


class ReaderText(HTMLParser):
    """What a reader sees or hears of a page: text outside <script> and <style> (SVG <title> and <desc>, which
    screen readers read, included) and the values of aria-label, aria-description, title, alt and placeholder.
    The one exception, by rule: a <code> or <pre> whose text starts with "python -m builder" is a command for the
    reader to type (the CLI is a documented interface), so it is not scanned."""

    ATTRIBUTES = ("aria-label", "aria-description", "aria-roledescription", "title", "alt", "placeholder")
    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}

    def __init__(self) -> None:
        super().__init__()
        self.open: list[str] = []
        self.pieces: list[str] = []
        self.code: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag not in self.VOID:
            self.open.append(tag)
        if tag in ("code", "pre") and self.code is None:
            self.code = []
        self.pieces += [value for key, value in attrs if key in self.ATTRIBUTES and value]

    def handle_startendtag(self, tag, attrs):
        self.pieces += [value for key, value in attrs if key in self.ATTRIBUTES and value]

    def handle_endtag(self, tag):
        if tag in self.open:
            while self.open.pop() != tag:
                pass
        if tag in ("code", "pre") and self.code is not None and not any(t in ("code", "pre") for t in self.open):
            text = "".join(self.code)
            if not text.lstrip().startswith("python -m builder"):
                self.pieces.append(text)
            self.code = None

    def handle_data(self, data):
        if "script" in self.open or "style" in self.open:
            return
        (self.code if self.code is not None else self.pieces).append(data)


def internal_wording(html: str) -> list[str]:
    """Module paths, repository paths and raw part keys (builder.model.partnames' keys with a path) in what a
    reader sees or hears of `html`, each with its context."""
    from builder.model.partnames import PART_NAMES

    keys = sorted((key for key in PART_NAMES if "/" in key), key=len, reverse=True)
    pattern = re.compile(r"\bbuilder[./]|\bcontent/|static/widgets|(?<![\w/.-])(?:host/)?(?:"
                         + "|".join(map(re.escape, keys)) + r")(?![\w/])")
    parser = ReaderText()
    parser.feed(html)
    return [piece[max(0, m.start() - 40):m.end() + 40] for piece in parser.pieces for m in pattern.finditer(piece)]


def test_internal_wording_is_found_where_readers_meet_it():
    assert internal_wording('<p>the optimizer/adam_m part</p>')
    assert internal_wording('<svg><desc>weights/lora_adapters 0.05</desc></svg>')
    assert internal_wording('<div aria-label="see builder.model.peak"></div>')
    assert internal_wording('<p>measured: <code>content/validation/peak.json</code></p>')
    assert internal_wording('<img alt="static/widgets/30-calculator.js">')
    assert not internal_wording('<script>{"k": "optimizer/adam_m"}</script><tr data-part="optimizer/adam_m">')
    assert not internal_wording('<pre><code>python -m builder estimate --model llama-3-8b</code></pre>')
    assert not internal_wording('<p>torch/optim/adam.py, 2 B/param, key/value heads</p>')


def test_real_site_pages_show_no_internal_wording(real_site):
    """Public pages speak to readers: no module path or dotted name of this project's code, no repository path,
    no part key ('optimizer/adam_m': readers see 'Adam first moment') in the visible text, chart descriptions
    and aria attributes of any page (a source is a paper, a document or an upstream file), and no "seed N", in
    the text or in the data a widget shows."""
    pages = sorted(real_site.rglob("*.html"))
    assert len(pages) >= 12
    found = {page.relative_to(real_site).as_posix(): internal_wording(page.read_text()) for page in pages}
    assert not {page: hits for page, hits in found.items() if hits}
    for page in pages:
        assert not re.findall(r"(?i)\bseed 0\d\d", page.read_text()), page.name


JINJA_MARKS = ("{#", "#}", "{%", "%}")


def test_no_page_shows_template_syntax_to_a_reader(real_site):
    """A template comment that holds a Jinja delimiter ends early and prints the rest of itself on the page (the
    calculator once showed '): the built page is minified, ... -#}' under its heading). No page, pinned copy or
    figure page shows {# #} or {% %} in the text a reader sees."""
    leaks = {}
    for page in sorted(real_site.rglob("*.html")):
        reader = ReaderText()
        reader.feed(page.read_text(encoding="utf-8"))
        text = " ".join(reader.pieces)
        found = [mark for mark in JINJA_MARKS if mark in text]
        if found:
            leaks[str(page.relative_to(real_site))] = found
    assert leaks == {}


def test_real_site_pages_link_to_their_pinned_twins(real_site):
    """Issue 16 item 4: every latest page's footer links to its twin under v/<version>/, which is there, carries
    the banner and points back; the What changed page lists every key configuration."""
    version = project_version()
    pages = sorted(path.name for path in real_site.glob("*.html"))
    assert len(pages) >= 13 and "what-changed.html" in pages
    for name in pages:
        latest = (real_site / name).read_text(encoding="utf-8")
        assert f'<a href="v/{version}/{name}">This page at version {version}</a>' in latest, name
        twin = (real_site / "v" / version / name).read_text(encoding="utf-8")
        assert f'<link rel="canonical" href="../../{name}">' in twin, name
        assert f'<a href="../../{name}">The latest version is here</a>' in twin, name
    changes = (real_site / "what-changed.html").read_text(encoding="utf-8")
    # Four tables: since 0.3.0 (the labels now), 0.2.0 to 0.3.0 (0.3.0's labels), 0.1.0 to 0.2.0 (0.2.0's labels) and
    # 0.1.0's own (its labels). The classic start's label names its 161.4 GB as the sum of parts since 0.2.0; the
    # others kept their words.
    classic = "Calculator start: Llama 3 8B, one GPU, the classic recipe ({}161.4 GB)"
    for now, then in ((classic.format("sum of parts "), classic.format("")),
                      *((label, label) for label in ("Calculator start: Llama 3 70B, served on 8 GPUs",
                                                     "Calculator page preset: model Llama 3 8B"))):
        counts = (changes.count(f'<th scope="row">{now}'), changes.count(f'<th scope="row">{then}'))
        assert counts == ((4, 4) if now == then else (3, 1)), (now, counts)
    # Either nothing moved since 0.3.0 or the page says how many did; between 0.1.0 and 0.2.0 four did (the FSDP
    # starts, the QLoRA start's +0.03 GiB and the 3D-parallel 70B start: content/releases/0.2.0.toml's note).
    assert re.search(r"No number moved: all 6 key configurations are as version 0\.3\.0 published them\.|"
                     r"[1-6] of 6 key configurations moved\.", changes)
    assert "4 of 6 key configurations moved." in changes


def test_a_formula_note_given_above_on_the_page_links_to_it(real_site):
    """Issue 14 (page weight): a chart's formula note that a chart above it on the same page already gives (the same
    part, formula, source and simplification) keeps its part and per-unit rule and links to those notes instead of
    repeating them; the notes it links to hold that part's formula and source. On the calculator page the five
    common runs and the fits-on table draw the same runs, so the fits-on notes all link."""
    found = nodes((real_site / "calculator.html").read_text(encoding="utf-8"))
    blocks = {node.attrs["id"].removeprefix("formulas-"): at for at, node in enumerate(found)
              if node.tag == "details" and node.attrs.get("class") == "formulas"}
    is_span = lambda at, css: found[at].tag == "span" and found[at].attrs.get("class") == css  # noqa: E731

    def notes(block: int) -> dict[str, int]:
        """A formulas block's notes: part name (its <dt>'s <strong>) -> the <dd> that follows."""
        pairs = {}
        for dl in (at for at in children(found, block) if found[at].tag == "dl"):
            items = children(found, dl)
            for dt, dd in zip(items, items[1:]):
                if found[dt].tag == "dt" and found[dd].tag == "dd":
                    pairs[next(found[at].text for at in children(found, dt) if found[at].tag == "strong")] = dd
        return pairs

    lead = "Formula and source as in the notes of "
    linked = [(name, found[children(found, dd)[0]].attrs["href"].removeprefix("#formulas-"))
              for name, dd in notes(blocks["fits-on"]).items() if found[dd].text.startswith(lead)]
    assert linked and set(blocks) == {"step-phases", "representative", "fits-on", "assumptions"}
    for name, target in linked:
        dd = notes(blocks[target])[name]
        inside = descendants(found, dd)
        assert is_span(inside[0], "formula"), (name, target)  # the note opens with the formula
        assert any(is_span(at, "source") and found[at].text.startswith("Source: ") for at in inside), (name, target)
    # every note is one of the five common runs' above; the first chart on the page gives its own
    assert not any(is_span(at, "formula") for at in descendants(found, blocks["fits-on"]))
    assert any(is_span(at, "formula") for at in descendants(found, blocks["step-phases"]))


def test_a_note_that_names_itself_a_simplification_is_labelled_once(real_site):
    """The formula notes label a part's simplification "Simplification:"; the model's notes that already open with the
    word (e.g. FSDP's unsharded gradients, Zhao et al. 2023, section 3: "simplification: one unit's full gradients
    before its reduce-scatter") are not labelled twice ("Simplification: simplification: ..." was on the activations
    page)."""
    pages = {p.name: p.read_text(encoding="utf-8") for p in real_site.glob("*.html")}
    assert not [name for name, text in pages.items() if re.search(r"Simplification: simplification", text, re.I)]
    assert "Simplification: one unit's full gradients before its reduce-scatter" in pages["activations.html"]
