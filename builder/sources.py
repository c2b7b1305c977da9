"""Model sources rendered with the bibliography: each `Cite(key, locator)` (builder.model.cite) in a part's
source becomes the reference's short form and the locator, as text (the CLI) or as HTML linked to the
References page's entry (pages, and the browser, which gets the HTML from `source_html` through
RuleSet.encode). One renderer for all of them, so every place shows the same words and the same link."""

from __future__ import annotations

import functools
import html
from pathlib import Path
from typing import Callable, Mapping

import jinja2
from markupsafe import Markup

from builder.content import Reference
from builder.model.cite import Cite, cited_keys, pieces

REFERENCES_PAGE = "references.html"  # relative: every page and the calculator sit at the site's root


def short_form(key: str, references: Mapping[str, Reference]) -> str:
    """The reference's short form ('Korthikanti et al. 2022', 'vLLM 0.27 (6adad08)'); the bare key where the
    bibliography has no such entry (reported by tests/test_source_citations.py, never silently shipped)."""
    reference = references.get(key)
    return reference.short if reference else key


def cite_text(cite: Cite, references: Mapping[str, Reference]) -> str:
    """'Short form, locator'."""
    short = short_form(cite.key, references)
    return f"{short}, {cite.locator}" if cite.locator else short


def source_text(text: str, references: Mapping[str, Reference]) -> str:
    """A source as plain text: each citation as its short form and locator."""
    return "".join(piece if not isinstance(piece, Cite) else cite_text(piece, references) for piece in pieces(text))


def cite_html(cite: Cite, references: Mapping[str, Reference], base: str = "") -> str:
    """A citation as HTML: the short form linked to the entry on the References page, then the locator."""
    reference = references.get(cite.key)
    if reference is None:
        return html.escape(cite_text(cite, references))
    link = f'<a href="{html.escape(base + REFERENCES_PAGE)}#{html.escape(reference.anchor)}">{html.escape(reference.short)}</a>'
    return link + (f", {html.escape(cite.locator)}" if cite.locator else "")


def source_html(text: str, references: Mapping[str, Reference], base: str = "") -> str:
    """A source as HTML (text escaped, citations linked); `base` is the way from the page to the site's root."""
    return "".join(html.escape(piece) if not isinstance(piece, Cite) else cite_html(piece, references, base)
                   for piece in pieces(text))


def html_renderer(references: Mapping[str, Reference], base: str = "") -> Callable[[str], str]:
    """`source_html` bound to a bibliography: what RuleSet.encode applies to the text constants of sources."""
    return lambda text: source_html(text, references, base)


def unknown_keys(text: str, references: Mapping[str, Reference]) -> list[str]:
    """The keys `text` cites that the bibliography lacks."""
    return [key for key in cited_keys(text) if key not in references]


def default_references() -> dict[str, Reference]:
    """The shipped bibliography (content/references.toml), for the command line: read again only when the file
    changed (a build asks for it once per distinct {{< estimate >}} command; do not modify the result)."""
    from builder.catalog import CONTENT_DIR
    path = CONTENT_DIR / "references.toml"
    try:
        data = path.read_bytes()
    except OSError:
        data = b""
    return references_of(path, data)


@functools.lru_cache(maxsize=2)
def references_of(path: Path, data: bytes) -> dict[str, Reference]:
    """The bibliography at `path`, whose bytes are `data` (the cache key of default_references)."""
    from builder.content import read_references
    references, _ = read_references(path, "content/references.toml")
    return references


@jinja2.pass_environment
def source_filter(env: jinja2.Environment, text: str, base: str = "") -> Markup:
    """Jinja filter `source`: a part's source as HTML with the bibliography the build set on the environment
    (`use_references`); `base` is the way from the page to the site's root ('../' for figures/)."""
    return Markup(source_html(str(text), bibliography(env), base))


def bibliography(env: jinja2.Environment) -> Mapping[str, Reference]:
    """The site's bibliography, as the build gave it to the templates (`use_references`)."""
    return env.globals.get("bibliography", {})


def use_references(env: jinja2.Environment, references: Mapping[str, Reference]) -> None:
    """Give the templates' `source` filter the site's bibliography."""
    env.globals["bibliography"] = references
