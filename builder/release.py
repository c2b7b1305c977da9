"""The release a build publishes: its version ([project] version in pyproject.toml), its date, public address
and author (content/site.toml: released, url, author), and where a page's pinned twin lives (v/<version>/).

One place for these: the footer's version line, the snapshot banner, "Cite this page" and CITATION.cff's test
all read them from here.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
DISTRIBUTION = "training-memory-explained"
SNAPSHOTS = "v"  # the folder of pinned versions: <out>/v/<version>/
# A version is one URL path segment: digits and dots, then an optional pre-release or local tail (0.2.0rc1).
VERSION = re.compile(r"\d+(\.\d+)*([.+-]?[A-Za-z0-9]+)*")


class VersionError(ValueError):
    """pyproject.toml has no usable [project] version; the message names the file and field."""


def project_version(pyproject: Path = PYPROJECT) -> str:
    """[project] version from pyproject.toml (the installed distribution's when the file is not beside the
    package); raises VersionError naming the file and field."""
    if not pyproject.is_file():
        try:
            return metadata.version(DISTRIBUTION)
        except metadata.PackageNotFoundError:
            raise VersionError(f"{pyproject.name}:1: [project] version: no pyproject.toml and no installed "
                               f"{DISTRIBUTION}") from None
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise VersionError(f"{pyproject.name}:1: cannot read it: {error}") from None
    version = data.get("project", {}).get("version")
    if not isinstance(version, str) or not VERSION.fullmatch(version):
        raise VersionError(f"{pyproject.name}:{version_line(pyproject)}: [project] version: must be a version such "
                           f"as \"0.1.0\", got {version!r}")
    return version


def version_line(pyproject: Path) -> int:
    """Line of `version =` in pyproject.toml (1 when absent)."""
    for number, line in enumerate(pyproject.read_text(encoding="utf-8").splitlines(), start=1):
        if re.match(r"^\s*version\s*=", line):
            return number
    return 1


@dataclass(frozen=True)
class Release:
    """What a built page says about the release it belongs to."""

    version: str
    date: str  # YYYY-MM-DD, or '' when site.toml gives no `released`
    url: str  # the site's public address ending in '/', or '' when unknown
    title: str  # the site's name
    author: str  # who to credit ('' : the site's name)

    @property
    def folder(self) -> str:
        """The pinned snapshot's folder inside the site: 'v/0.1.0'."""
        return f"{SNAPSHOTS}/{self.version}"

    def pinned_path(self, page_url: str) -> str:
        """A page's pinned twin, relative to the site root: 'v/0.1.0/activations.html'."""
        return f"{self.folder}/{page_url}"

    def pinned_address(self, page_url: str) -> str:
        """The pinned twin's public address ('' when the site's address is unknown)."""
        return self.url + self.pinned_path(page_url) if self.url else ""

    @property
    def credit(self) -> str:
        """The author named in citations."""
        return self.author or self.title

    @property
    def year(self) -> str:
        """The release year ('' without a date)."""
        return self.date[:4]

    def describe(self) -> str:
        """'version 0.1.0 of 2026-11-24' (no date part when there is none)."""
        return f"version {self.version}" + (f" of {self.date}" if self.date else "")


def make_release(site: dict[str, str], version: str, url: str | None = None) -> Release:
    """The release from site.toml's settings and the project version; `url` (the build's --url) wins over
    site.toml's."""
    return Release(version=version, date=site.get("released", ""), url=url or site.get("url", ""),
                   title=site.get("title", ""), author=site.get("author", ""))
