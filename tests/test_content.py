"""Content reading and validation: front matter, charts and grids, presets, references, options, Markdown."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from builder.widgets import WIDGETS
from builder.content import (ContentError, read_page, read_references, split_front_matter, parse_options,
                             read_presets)
from builder.grids import format_amount, make_config
from builder.model.units import parse_count
from builder.catalog import load_models
from builder.model import GiB

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_CONTENT = ROOT / "tests" / "fixtures" / "site-small" / "content"
MODELS = load_models(FIXTURE_CONTENT / "models.toml")
PRESETS, _ = read_presets(FIXTURE_CONTENT / "presets.toml", "presets.toml")


def write_page(tmp_path: Path, text: str):
    """Write and read one page; returns (page, errors)."""
    path = tmp_path / "page.md"
    path.write_text(text, encoding="utf-8")
    return read_page(path, "page.md")


def test_split_front_matter_gives_body_line():
    assert split_front_matter("---\na: 1\nb: 2\n---\nBody\n") == ("a: 1\nb: 2\n", "Body\n", 5)
    assert split_front_matter("No front matter\n") is None
    assert split_front_matter("---\na: 1\n") is None


def test_fixture_page_is_read_with_charts_and_grid():
    page, errors = read_page(FIXTURE_CONTENT / "index.md", "index.md")
    assert errors == []
    assert (page.slug, page.order, page.template, page.body_line) == ("index", 1, "page", 24)
    states, tokens = page.charts["states"], page.charts["tokens"]
    assert [bar.label for bar in states.bars] == ["1 GPU", "ZeRO-3, 8 GPUs"]
    assert states.bars[1].settings == {"zero": 3, "dp": 8} and states.bars[1].preset == "llama-single"
    assert states.gpus == ("a100-80gb", "h100-80gb") and states.gpu_lines == (11, 11)
    assert [bar.label for bar in tokens.bars] == ["b=1", "b=4"]
    assert [bar.settings for bar in tokens.bars] == [{"model": "gpt2", "seq_len": 1024, "micro_batch": 1},
                                                     {"model": "gpt2", "seq_len": 1024, "micro_batch": 4}]
    assert (tokens.unit, tokens.group_by) == ("GB", "part")


def test_unknown_keys_and_missing_keys_are_reported_together(tmp_path):
    page, errors = write_page(tmp_path, "---\ntitle: T\nslug: s\nsumary: typo\n---\n")
    assert [str(e) for e in errors] == [
        "page.md:4: front matter: unknown key 'sumary' (known: title, slug, order, summary, template, nav_title, presets, charts, "
        "exercises, takeaways)",
        "page.md:2: front matter: missing required key 'order'",
        "page.md:2: front matter: missing required key 'summary'",
    ]
    assert page is None


def test_bad_slug_template_and_empty_title(tmp_path):
    _, errors = write_page(tmp_path, "---\ntitle: ' '\nslug: Bad Slug\norder: 1\nsummary: s\ntemplate: blog\n---\n")
    assert [str(e) for e in errors] == [
        "page.md:3: slug 'Bad Slug' must be lowercase words joined by '-'",
        "page.md:6: template must be one of page, references, got 'blog'",
        "page.md:2: title must not be empty",
    ]


def test_chart_needs_exactly_one_of_bars_or_grid(tmp_path):
    text = "---\ntitle: T\nslug: s\norder: 1\nsummary: s\ncharts:\n  c:\n    title: C\n---\n"
    _, errors = write_page(tmp_path, text)
    assert [str(e) for e in errors] == ["page.md:7: chart c: give either bars or grid (exactly one)"]


def test_chart_unit_group_by_and_grid_label_are_checked(tmp_path):
    text = ("---\ntitle: T\nslug: s\norder: 1\nsummary: s\ncharts:\n  c:\n    title: C\n    unit: GiBs\n"
            "    group_by: layer\n    grid: {vary: micro_batch, values: [1], label: no placeholder}\n---\n")
    _, errors = write_page(tmp_path, text)
    assert [str(e) for e in errors] == [
        "page.md:9: chart c: unit must be GiB or GB, got 'GiBs'",
        "page.md:10: chart c: group_by must be bucket or part, got 'layer'",
        "page.md:11: chart c: grid label must contain {value}",
    ]


def test_make_config_resolves_preset_model_and_counts():
    page, _ = read_page(FIXTURE_CONTENT / "index.md", "index.md")
    config, errors = make_config(page.charts["states"].bars[1], PRESETS, MODELS, "index.md")
    assert errors == []
    assert config.model is MODELS["llama-3-8b"]
    assert (config.seq_len, config.micro_batch, config.zero, config.dp) == (4096, 1, 3, 8)


def test_make_config_errors_point_at_the_preset_file_line():
    from builder.content import BarDefinition, Preset

    presets = {"p": Preset("p", {"model": "llama-3-8b", "zero": 7}, {"model": 2, "zero": 3}, "presets.toml", 1)}
    bar = BarDefinition(label="x", preset="p", settings={}, lines={"preset": 9}, line=9)
    config, errors = make_config(bar, presets, MODELS, "page.md")
    assert config is None
    assert [str(e) for e in errors] == ["presets.toml:3: bar 'x': front matter `zero`: must be 0, 1, 2 or 3, got 7"]


def test_make_config_rejects_unknown_options_and_wrong_types():
    from builder.content import BarDefinition

    bar = BarDefinition(label="x", preset=None, settings={"model": "gpt2", "micro_bach": 2, "dropout": "yes"},
                        lines={"model": 3, "micro_bach": 4, "dropout": 5}, line=2)
    _, errors = make_config(bar, {}, MODELS, "page.md")
    assert [e.line for e in errors] == [5, 4]
    assert "front matter `dropout`: must be true or false, got 'yes'" in errors[0].message
    assert "unknown config option 'micro_bach'" in errors[1].message


@pytest.mark.parametrize("text, expected", [
    (8030261248, 8030261248), (7.0e9, 7_000_000_000), ("3.7e9", 3_700_000_000), ("8B", 8_000_000_000),
    ("7b", 7_000_000_000), ("350M", 350_000_000), ("7_000_000_000", 7_000_000_000), ("124,439,808", 124_439_808),
    (" 4K ", 4000), ("6.74B", 6_740_000_000)])
def test_parse_count(text, expected):
    """One reader of counts for the CLI, front matter and widget options (issue 14: '7b', '7B', '7e9' and
    '7_000_000_000' all mean seven billion)."""
    assert parse_count(text) == expected


@pytest.mark.parametrize("value", [0, -1, "0", "-1", "nan", "inf", float("nan"), float("inf"), "1e400", 1e300, "",
                                   "lots", "7.5", 7.5, True, None, "x" * 10_000_000, "80GiB", "1e99999999"])
def test_parse_count_rejects_nonsense(value):
    """Zero, negatives, nan, inf, 1e400, empty, 10 MB of text, a size with a unit: one ValueError, fast."""
    with pytest.raises(ValueError, match="must be"):
        parse_count(value)


def test_parse_options():
    assert parse_options(' model=llama-3-8b gpus=a,b title="two words"') == {
        "model": "llama-3-8b", "gpus": "a,b", "title": "two words"}
    with pytest.raises(ValueError, match="write key=value"):
        parse_options("model")
    with pytest.raises(ValueError, match="given twice"):
        parse_options("a=1 a=2")


def test_widget_registry_has_a_partial_for_each_widget():
    for name in WIDGETS:
        assert (ROOT / "templates" / "partials" / f"widget-{name}.html").is_file(), name


def test_format_amount_units():
    assert format_amount(13 * GiB, "GiB") == "13.0"
    assert format_amount(GiB // 2, "GiB") == "0.50"
    assert format_amount(161_400_000_000, "GB") == "161.4"
    assert format_amount(0, "GB") == "0"


def test_references_cover_every_source_in_the_brief():
    references, errors = read_references(ROOT / "content" / "references.toml", "references.toml")
    assert errors == []
    arxiv = {r.arxiv for r in references.values() if r.arxiv}
    assert arxiv >= {"1910.02054", "2205.05198", "2110.02861", "1710.03740", "1604.06174", "2205.14135",
                     "2309.06180", "2304.11277", "2106.09685", "2305.14314"}
    assert references["anthony2023"].url == "https://blog.eleuther.ai/transformer-math/"
    assert "theoretical_memory_usage.py" in references["megatron-memory"].url
    assert "ultrascale-playbook" in references["tazi2025"].url
    assert [r.number for r in references.values()] == list(range(1, len(references) + 1))
    assert references["rajbhandari2019"].anchor == "ref-rajbhandari2019"


def test_reference_errors_name_key_lines(tmp_path):
    path = tmp_path / "references.toml"
    path.write_text("[a2020]\nauthors = 'A'\nyear = 2020\ntitle = 'T'\nurl = 'u'\nvolume = 3\n", encoding="utf-8")
    _, errors = read_references(path, "references.toml")
    assert [str(e) for e in errors] == [
        "references.toml:2: reference a2020: authors must be a list, got 'A'",
        "references.toml:6: reference a2020: unknown key 'volume' (known: authors, year, title, venue, url, arxiv, note, short)",
    ]


def test_content_error_format():
    assert str(ContentError("content/index.md", 12, "unknown model 'x'")) == "content/index.md:12: unknown model 'x'"


def test_real_pages_all_read_without_errors():
    from builder.content import read_pages

    pages, errors = read_pages(ROOT / "content")
    assert errors == []
    assert pages[0].slug == "index" and re.match(r"^[a-z0-9-]+$", pages[-1].slug)


def test_aligned_environment_becomes_an_mtable():
    # latex2mathml leaves aligned's '&' as a raw character; the builder makes rows and cells.
    from builder.render import latex_to_mathml

    mathml = latex_to_mathml(r"\begin{aligned} a &= b \\ c &= d + 1 \end{aligned}", "block")
    assert mathml.count("<mtr>") == 2 and mathml.count("<mtd") == 4
    assert "<mi>&</mi>" not in mathml and "&=" not in mathml
    with pytest.raises(ValueError, match="aligned"):
        latex_to_mathml("a & b", "block")


def test_citation_locators_and_malformed_citations(tmp_path):
    # '[@key, section 3]' keeps its locator; a '[@...' that is not a citation is an error, not text.
    from builder.render import CITATION, CITE_PART

    match = CITATION.match("[@rajbhandari2019, section 5; @korthikanti2022, Table 2]")
    items = [CITE_PART.match(item) for item in match.group(1).split(";")]
    assert [(m.group(1), m.group(2)) for m in items] == [("rajbhandari2019", "section 5"),
                                                       ("korthikanti2022", "Table 2")]
    assert CITATION.match("[@key section 5]") is None
