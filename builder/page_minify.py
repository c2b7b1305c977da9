"""Every built HTML page minified by tdewolff/minify (pinned in pyproject.toml), issue 14's page weight.

The minifier drops comments and the whitespace a browser collapses anyway (never inside <pre> or
<textarea>), and compacts the inline SVG charts (numbers, colours, path data) and the inline <style>.
What it keeps, and why (tdewolff/minify v2.24.12, html/html.go and bindings/py/minify.go):
  - quotes and end tags (html-keep-quotes, html-keep-end-tags): `python -m builder handout` reads the built
    pages with patterns that expect them, and they cost about 0.3 KB gzipped on the heaviest page;
  - <html>, <head> and <body> (html-keep-document-tags): `serve` injects its live-reload script before </head>;
  - default attribute values (html-keep-default-attr-vals): stylesheets and scripts may select on them;
  - the digits of numbers in the widgets' <script type="application/json"> data (json-keep-numbers): that
    data is only stripped of whitespace, never re-encoded.
An inline SVG whose <text> holds other elements (a <tspan> after a space: "full model <tspan>...") is left
as it is: the SVG minifier trims every text node, which would drop that space on screen. So is every SVG that
is not a chart (a widget's bars and axes, which its script redraws exactly as the server wrote them).
Before the minifier, each chart segment's group (svg.shape_element: an id nothing links to, around the segment's
tooltip and its box) becomes the box holding its tooltip: the same hover text and pixels, about 1.2 KB gzipped less
on a page of charts. The downloads keep the groups (builder/figures.py writes them from the chart's own markup).
The options are process-wide in the Python binding (minify.config rebuilds every minifier from these keys);
the keys not given here (JavaScript, CSS) stay at their defaults, so the widget scripts and the stylesheet
(builder/build.py) come out byte for byte as before.
"""

from __future__ import annotations

import re

import minify

from builder.content import BuildFailed, ContentError

OPTIONS = {"html-keep-quotes": True, "html-keep-end-tags": True, "html-keep-document-tags": True,
           "html-keep-default-attr-vals": True, "json-keep-numbers": True}
minify.config(OPTIONS)

INLINE_SVG = re.compile(r"<svg\b.*?</svg>", re.S)
# Only the charts' SVGs are compacted: a widget's own SVG (bars, axes) is written by its script as the server
# wrote it, and the browser tests hold the two equal byte for byte, so it goes as builder.widgets wrote it.
CHART = re.compile(r'<svg\b[^>]*\bclass="tm-chart\b')
MIXED_TEXT = re.compile(r"<text\b[^>]*>[^<]*<(?!/text\b)")  # a <text> holding an element (a <tspan>, a link)
KEEP = "tm-kept-svg-{}"  # a placeholder element: the HTML minifier writes an unknown element as it is
# A segment as svg.shape_element writes it: <g id="..."><title>tooltip</title><path .../></g>.
SEGMENT = re.compile(r'<g id="[^"<>]*"><title>([^<]*)</title>(<path\b[^<>]*?) ?/></g>')


def lean_segments(svg: str) -> str:
    """A chart's segment groups written as their boxes, each holding its tooltip (the module docstring)."""
    return SEGMENT.sub(r"\2><title>\1</title></path>", svg)


def minify_page(html: str, path: str) -> str:
    """`html` minified; `path` (the page's source, for the error) names it if the minifier rejects it."""
    kept: list[str] = []

    def keep(match: re.Match) -> str:
        if CHART.match(match.group(0)) and not MIXED_TEXT.search(match.group(0)):
            return lean_segments(match.group(0))
        kept.append(match.group(0))
        name = KEEP.format(len(kept) - 1)
        return f"<{name}></{name}>"

    try:
        result = minify.string("text/html", INLINE_SVG.sub(keep, html))
    except minify.MinifyError as error:
        raise BuildFailed([ContentError(path, 0, f"the page's HTML does not minify: {str(error).splitlines()[0]}")]) \
            from None
    for number, svg in enumerate(kept):
        name = KEEP.format(number)
        result = result.replace(f"<{name}></{name}>", svg, 1)
    return result
