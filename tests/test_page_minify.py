"""Built pages are minified (builder/page_minify.py, issue 14's page weight) without changing what a reader sees or
what the tools that read pages rely on. The behaviours pinned here are tdewolff/minify v2.24.12's (html/html.go,
svg/svg.go, json/json.go) with the options page_minify chooses."""

from __future__ import annotations

import base64
import hashlib
import json
import re

import pytest

from builder.content import BuildFailed
from builder.page_minify import minify_page
from builder.render import finish_page
from tests.html_tags import attributes, document, texts

PAGE = """<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta http-equiv="Content-Security-Policy" content="__CSP__">
  <title>A   page</title>
  <style>:root {  --site-url: "https://example.org/";  }</style>
</head>
<body>
  <!-- a comment -->
  <p class="lead">Two   words,
     then  more.</p>
  <ul>
    <li><a href="x.html">one</a></li>
  </ul>
  <pre>keep   these
    spaces</pre>
  <input type="text" value="">
  <script type="application/json" id="data">{"a": 1.50, "b": 0.5, "c": [1e3, "x  y"]}</script>
  <svg class="tm-chart" viewBox="0 0 100 10"><path d="M10 2L10 8"/><text x="1.000" y="5">total</text></svg>
  <svg class="wdg" viewBox="0 0 100 10"><text x="1" y="5">full model <tspan data-t="need">1.0 GiB</tspan></text></svg>
</body>
</html>
"""


@pytest.fixture(scope="module")
def minified() -> str:
    return minify_page(PAGE, "content/x.md")


def test_whitespace_a_browser_collapses_goes_and_comments_go(minified):
    assert len(minified) < len(PAGE)
    assert "a comment" not in minified and "\n  <" not in minified
    assert texts(minified, "p") == ["Two words,\nthen more."]  # a run with a newline becomes one newline
    assert texts(minified, "title") == ["A page"]


def test_pre_keeps_its_whitespace(minified):
    assert texts(minified, "pre") == ["keep   these\n    spaces"]


def test_quotes_end_tags_document_tags_and_default_values_stay(minified):
    # builder/handout.py reads pages with patterns that expect quoted values and end tags; `serve` injects its
    # live-reload script before </head>; stylesheets and scripts may select on a default value (type="text").
    assert '<p class="lead">' in minified and "</p>" in minified and "</li>" in minified
    assert "<head>" in minified and "</head>" in minified and "<body>" in minified
    assert {"type": "text"} in attributes(minified, "input")


def test_json_data_loses_whitespace_only(minified):
    data = texts(minified, "script")[0]
    assert data == '{"a":1.50,"b":0.5,"c":[1e3,"x  y"]}'  # 1.50 and 1e3 kept as written, the string untouched
    assert json.loads(data) == {"a": 1.5, "b": 0.5, "c": [1000.0, "x  y"]}


def test_a_chart_svg_is_compacted(minified):
    chart = re.search(r'<svg class="tm-chart".*?</svg>', minified).group(0)
    assert 'd="M10 2V8"' in chart and 'x="1"' in chart  # path data and numbers shortened (svg/svg.go)


def test_an_svg_with_a_space_before_a_tspan_is_kept_as_written(minified):
    # The SVG minifier trims every text node: "full model <tspan>" would lose its space on screen.
    assert '<text x="1" y="5">full model <tspan data-t="need">1.0 GiB</tspan></text>' in minified


def test_the_csp_hashes_the_minified_inline_style():
    page = finish_page(PAGE, "content/x.md")
    style = texts(page, "style")[0]
    assert style != ':root {  --site-url: "https://example.org/";  }'  # minified, so the hash must be of this
    digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
    csp = next(attrs["content"] for attrs in attributes(page, "meta") if attrs.get("http-equiv"))
    assert f"'sha256-{digest}'" in csp and "__CSP__" not in page


def test_the_same_page_minifies_to_the_same_bytes():
    assert minify_page(PAGE, "content/x.md") == minify_page(PAGE, "content/x.md")


def test_markup_the_minifier_rejects_names_the_page():
    with pytest.raises(BuildFailed) as failure:
        minify_page('<p>x</p><script type="application/json">{"a" 1}</script>', "content/broken.md")
    assert [str(error) for error in failure.value.errors][0].startswith("content/broken.md:0: the page's HTML does not")


def test_document_reads_the_tree_in_order(minified):
    tags = [tag for tag, _, _ in document(minified)]
    assert tags[:3] == ["html", "head", "meta"]


def test_a_chart_segment_keeps_its_tooltip_in_its_box_without_the_group():
    """A page's chart writes each segment as its box holding its tooltip (page_minify.lean_segments); the chart's
    own markup (the downloads are made from it) keeps the group and its id."""
    from builder.charts import render_figure
    from tests.test_charts import make_spec

    figure = render_figure(make_spec())
    page = minify_page(f"<!doctype html><html><head><title>t</title></head><body>{figure}</body></html>", "p.md")
    tooltips = re.findall(r"<title>([^<]*)</title>", figure)
    assert '<g id="train-7b-bar0-weights">' in figure and "<g" not in page
    assert re.findall(r"<title>([^<]*)</title>", page) == ["t", *tooltips]
    assert len(re.findall(r'<path d="[^"]*"[^>]*class="[^"]*tm-segment"><title>', page)) == figure.count("<g id=")
