"""'Cite this page': a page's BibTeX entry and plain-text citation, pinned to its release's snapshot."""

from __future__ import annotations

import re

from builder.release import Release

# Characters BibTeX/LaTeX reads as commands, and how to write them literally.
BIBTEX_ESCAPES = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                  "_": r"\_", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def bibtex_text(text: str) -> str:
    """Text safe inside a BibTeX field's braces."""
    return "".join(BIBTEX_ESCAPES.get(char, char) for char in text)


def bibtex_key(release: Release, slug: str) -> str:
    """A citation key: the site's name, the version and the page, e.g. 'training-memory-explained-0.1.0-activations'."""
    name = re.sub(r"[^a-z0-9]+", "-", release.title.lower()).strip("-") or "site"
    return f"{name}-{release.version}-{slug}"


def bibtex(release: Release, slug: str, url: str, title: str) -> str:
    """The page's @misc entry: title, author, year, version, date, pinned URL; the reader adds the date they read it."""
    fields = [("title", f"{{{bibtex_text(title)}}}"),
              ("author", f"{{{bibtex_text(release.credit)}}}"),
              ("howpublished", f"{{{bibtex_text(release.title)}, {bibtex_text(release.describe())}}}"),
              ("version", bibtex_text(release.version))]
    if release.date:
        fields += [("year", release.year), ("date", release.date)]
    address = release.pinned_address(url)
    if address:
        fields.append(("url", address))
    fields.append(("note", "Accessed: YYYY-MM-DD"))
    width = max(len(name) for name, _ in fields)
    lines = [f"  {name:<{width}} = {{{value}}}" for name, value in fields]
    return f"@misc{{{bibtex_key(release, slug)},\n" + ",\n".join(lines) + "\n}"


def plain_citation(release: Release, url: str, title: str) -> str:
    """The page's citation as one line of text: author (year). "Title". Site, version of date. Address."""
    year = f" ({release.year})" if release.year else ""
    address = release.pinned_address(url)
    where = f". {address}" if address else ""
    return f"{release.credit}{year}. “{title}”. {release.title}, {release.describe()}{where} (accessed YYYY-MM-DD)."
