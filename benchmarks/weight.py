"""Page weight (issue 14): every page's total with everything it loads, as GitHub Pages serves it.

A page loads its HTML, then what the HTML names for the browser to fetch without a click: stylesheets (and
what they @import or url()), scripts, icons, preloads, images (src, srcset, <source>, poster), frames and
objects. Text files (COMPRESSED) cross the wire gzipped, as GitHub Pages sends them (gzip level 9 here:
Pages does not document its level, so this may undercount a little); images such as PNG cross as they are.
Inline parts of the HTML are counted with it: the charts' inline SVG, the widgets' inline JSON data.
`parts` splits a page's gzipped bytes by kind (each part gzipped alone, so parts sum to a little more than
the whole): what to trim first when a page misses the target (60 KB gzipped, issue 14).
"""

from __future__ import annotations

import gzip
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

# What GitHub Pages sends gzipped (text types); everything else crosses as stored.
COMPRESSED = (".html", ".css", ".js", ".svg", ".json", ".txt", ".xml")
# <link rel=...> values whose target the browser fetches while loading the page.
FETCHED_LINKS = {"stylesheet", "icon", "shortcut", "apple-touch-icon", "preload", "modulepreload", "manifest"}
CSS_URL = re.compile(r"""@import\s+(?:url\()?\s*["']?([^"')\s;]+)|url\(\s*["']?([^"')]+?)["']?\s*\)""")
INLINE_SVG = re.compile(r"<svg\b.*?</svg>", re.S)
INLINE_JSON = re.compile(r"<script type=\"application/json\"[^>]*>.*?</script>", re.S)
# Pages that are not the current site: an archived release keeps its own bytes (builder.releases).
ARCHIVE = "v"


def compress(data: bytes) -> bytes:
    """`data` gzipped at level 9 with a fixed header (deterministic), as the benchmarks count a served file."""
    return gzip.compress(data, compresslevel=9, mtime=0)


def gzipped(data: bytes) -> int:
    """Bytes of `data` gzipped (compress)."""
    return len(compress(data))


def served(path: Path) -> int:
    """Bytes that cross the wire for one file: gzipped when GitHub Pages compresses its type."""
    data = path.read_bytes()
    return gzipped(data) if path.suffix in COMPRESSED else len(data)


class Fetches(HTMLParser):
    """The URLs a page's HTML makes the browser fetch on load (no links a reader must click)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {key: value or "" for key, value in attrs}
        if tag == "link" and FETCHED_LINKS & set(a.get("rel", "").lower().split()):
            self.urls.append(a.get("href", ""))
        elif tag in ("script", "img", "iframe", "embed", "audio", "video", "source", "track"):
            self.urls.append(a.get("src", ""))
        if tag in ("img", "source"):
            self.urls += [candidate.split()[0] for candidate in a.get("srcset", "").split(",") if candidate.strip()]
        if tag == "video":
            self.urls.append(a.get("poster", ""))
        if tag == "object":
            self.urls.append(a.get("data", ""))


def local(base: Path, site: Path, url: str) -> Path | None:
    """The site file a URL found in `base` names; None for data: URIs and empty URLs. Another origin's URL is an
    error: the site must load nothing from elsewhere."""
    if not url or url.startswith("data:"):
        return None
    parts = urlsplit(url)
    if parts.scheme or parts.netloc:
        raise ValueError(f"{base.relative_to(site)} loads {url} from another origin")
    relative = urljoin(base.relative_to(site).as_posix(), unquote(parts.path))
    return site / relative


def page_files(page: Path, site: Path) -> list[Path]:
    """The page and every site file it loads (each once), CSS imports and url()s followed."""
    parser = Fetches()
    parser.feed(page.read_text(encoding="utf-8"))
    files, queue = [page], [(page, url) for url in parser.urls]
    while queue:
        base, url = queue.pop(0)
        path = local(base, site, url)
        if path is None or path in files:
            continue
        if not path.is_file():
            raise ValueError(f"{page.relative_to(site)} loads {url}, which the site does not have")
        files.append(path)
        if path.suffix == ".css":
            queue += [(path, a or b) for a, b in CSS_URL.findall(path.read_text(encoding="utf-8"))]
    return files


def parts(page: Path, files: list[Path], sizes: dict[Path, int]) -> dict[str, int]:
    """A page's weight by kind, gzipped alone each: HTML text, inline SVG, inline widget data, CSS, JS, images
    (`sizes`: each loaded file's served bytes)."""
    text = page.read_text(encoding="utf-8")
    svg, data = INLINE_SVG.findall(text), INLINE_JSON.findall(text)
    rest = INLINE_JSON.sub("", INLINE_SVG.sub("", text))
    split = {"html_text": gzipped(rest.encode()), "inline_svg": gzipped("".join(svg).encode()) if svg else 0,
             "inline_data": gzipped("".join(data).encode()) if data else 0, "css": 0, "js": 0, "other": 0}
    for path in files[1:]:
        kind = {".css": "css", ".js": "js"}.get(path.suffix, "other")
        split[kind] += sizes[path]
    return split


def measure_pages(site: Path) -> list[dict]:
    """Per page of the site (figure pages included, archived releases not): bytes raw and served (gzipped where
    Pages gzips) of the HTML plus everything it loads, requests, inline SVGs, and the served bytes by part."""
    rows = []
    pages = sorted(p for p in site.rglob("*.html") if p.relative_to(site).parts[0] != ARCHIVE)
    sizes: dict[Path, int] = {}  # served bytes of each file, gzipped once: many pages load the same CSS and scripts
    for page in pages:
        files = page_files(page, site)
        for f in files:
            if f not in sizes:
                sizes[f] = served(f)
        rows.append({"page": page.relative_to(site).as_posix(), "raw_bytes": sum(f.stat().st_size for f in files),
                     "gzip_bytes": sum(sizes[f] for f in files), "requests": len(files),
                     "html_bytes": page.stat().st_size, "svgs": page.read_text(encoding="utf-8").count("<svg"),
                     "parts": parts(page, files, sizes)})
    return rows


def heaviest(rows: list[dict]) -> dict:
    """The page with the most served bytes."""
    return max(rows, key=lambda row: row["gzip_bytes"])
