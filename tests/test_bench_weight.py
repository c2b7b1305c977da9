"""benchmarks/weight.py counts what a page makes the browser fetch (the HTML standard's fetching elements: stylesheet
and icon links, scripts, img src and srcset, <source>, CSS @import and url()), and benchmarks/run.py keeps running
the other benchmarks when one cannot run. No timings here."""

from __future__ import annotations

import gzip

import pytest

from benchmarks import run, weight

PAGE = """<!DOCTYPE html><html><head>
<link rel="icon" href="data:,"><link href="static/a.css" rel="stylesheet"><link rel="canonical" href="other.html">
<script defer src="static/w.js"></script><script type="application/json">{"full":{"model":[1,2,3]}}</script>
</head><body><a href="other.html">a link is not fetched</a>
<picture><source media="(max-width: 40rem)" srcset="img/narrow.png 1x, img/narrow@2x.png 2x"><img src="img/wide.png"
alt=""></picture><svg viewBox="0 0 1 1"><rect width="1" height="1"/></svg></body></html>"""


@pytest.fixture
def site(tmp_path):
    (tmp_path / "static").mkdir()
    (tmp_path / "img").mkdir()
    (tmp_path / "index.html").write_text(PAGE)
    (tmp_path / "other.html").write_text("<p>other</p>")
    (tmp_path / "static" / "a.css").write_text('@import "b.css";\nbody { background: url("../img/bg.png"); }\n' * 20)
    (tmp_path / "static" / "b.css").write_text("p { color: red; }\n")
    (tmp_path / "static" / "w.js").write_text("console.log(1);\n" * 50)
    for name in ("narrow.png", "narrow@2x.png", "wide.png", "bg.png"):
        (tmp_path / "img" / name).write_bytes(bytes(range(256)) * 4)
    return tmp_path


def test_a_page_counts_everything_it_fetches_and_nothing_it_only_links(site):
    files = weight.page_files(site / "index.html", site)
    assert sorted(f.relative_to(site).as_posix() for f in files) == [
        "img/bg.png", "img/narrow.png", "img/narrow@2x.png", "img/wide.png", "index.html", "static/a.css",
        "static/b.css", "static/w.js"]


def test_text_is_counted_gzipped_and_images_as_stored(site):
    css, png = site / "static" / "a.css", site / "img" / "wide.png"
    assert weight.served(css) == len(gzip.compress(css.read_bytes(), compresslevel=9, mtime=0)) < css.stat().st_size
    assert weight.served(png) == png.stat().st_size == 1024


def test_page_rows_name_the_heaviest_and_split_it_by_part(site):
    rows = {row["page"]: row for row in weight.measure_pages(site)}
    index = rows["index.html"]
    assert index["requests"] == 8 and index["svgs"] == 1
    assert index["gzip_bytes"] == sum(weight.served(f) for f in weight.page_files(site / "index.html", site))
    assert index["parts"]["other"] == 4 * 1024
    assert index["parts"]["inline_svg"] > 0 and index["parts"]["inline_data"] > 0
    assert weight.heaviest(list(rows.values()))["page"] == "index.html"


def test_another_origin_or_a_missing_file_is_an_error(site):
    (site / "index.html").write_text('<script src="https://cdn.example/x.js"></script>')
    with pytest.raises(ValueError, match="another origin"):
        weight.page_files(site / "index.html", site)
    (site / "index.html").write_text('<img src="img/none.png" alt="">')
    with pytest.raises(ValueError, match="does not have"):
        weight.page_files(site / "index.html", site)


def test_a_benchmark_that_cannot_run_says_why_in_one_line_and_the_others_run(monkeypatch, tmp_path, capsys):
    def missing() -> dict:
        raise SystemExit("lighthouse benchmark: npm is missing (apt-get install -y npm)")

    monkeypatch.setattr(run, "RESULTS", tmp_path)
    monkeypatch.setattr(run, "BENCHMARKS", {"first": missing, "second": lambda: {"ok": 1}})
    assert run.main(["first", "second"]) == 1
    out = capsys.readouterr().out
    assert "first: not run: lighthouse benchmark: npm is missing (apt-get install -y npm)\n" in out
    assert (tmp_path / "second.json").exists() and not (tmp_path / "first.json").exists()
    assert run.main(["third"]) == 2
