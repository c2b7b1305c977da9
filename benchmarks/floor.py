"""The floor a build is compared with (issue 17): the same pages' Markdown rendered alone, in a fresh process.

`python -m benchmarks.floor CONTENT` reads every page of CONTENT (front matter included) and renders its
body with markdown-it-py (CommonMark, tables, footnotes, $math$ left as TeX): no model, no charts, no
widgets, no templates. What a build costs beyond this is the site's own work.
"""

from __future__ import annotations

import sys
from pathlib import Path


def render_markdown_only(content: Path) -> int:
    """Characters of HTML from every page's Markdown body."""
    from markdown_it import MarkdownIt
    from mdit_py_plugins.dollarmath import dollarmath_plugin
    from mdit_py_plugins.footnote import footnote_plugin

    from builder.content import read_pages

    md = MarkdownIt("commonmark", {"html": True}).enable("table").use(footnote_plugin).use(dollarmath_plugin)
    pages, _ = read_pages(content)
    return sum(len(md.render(page.body)) for page in pages)


if __name__ == "__main__":
    print(render_markdown_only(Path(sys.argv[1])))
