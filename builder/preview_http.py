"""The preview's HTTP side: map a request to a file of the built site, or refuse it.

- Only files inside the site folder, under the base path: '..' or '.' segments (however encoded),
  backslashes, NUL and other control characters, and bytes that are not UTF-8 get 400; a path
  outside the base, a missing file or a folder without index.html get a 404 page; symbolic links
  that lead outside the site get 404 too. No directory listings.
- Every response says `Cache-Control: no-store` and has an explicit content type.
- With build events (live reload), HTML responses load the reload script, and
  `<base>__preview__/` serves that script, its stylesheet and the event stream. The files on
  disk are never changed.
"""

from __future__ import annotations

import html
import http.server
import mimetypes
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

from builder.preview_events import BuildEvents

PREVIEW_DIR = "__preview__"  # URL folder of the preview's own files, under the base
CLIENT_DIR = Path(__file__).resolve().parent / "preview"
CLIENT_FILES = {"reload.js": "text/javascript; charset=utf-8", "overlay.css": "text/css; charset=utf-8"}

CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8", ".htm": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8", ".json": "application/json", ".svg": "image/svg+xml",
    ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp",
    ".ico": "image/x-icon", ".woff": "font/woff", ".woff2": "font/woff2", ".txt": "text/plain; charset=utf-8",
    ".xml": "application/xml", ".csv": "text/csv; charset=utf-8", ".pdf": "application/pdf",
}
CONNECTION_ERRORS = (ConnectionError, TimeoutError)
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def content_type(path: str) -> str:
    """The Content-Type of a site file, by its extension."""
    suffix = os.path.splitext(path)[1].lower()
    return CONTENT_TYPES.get(suffix) or mimetypes.guess_type(path)[0] or "application/octet-stream"


class BadPath(ValueError):
    """A request path that cannot name a file (400)."""


@dataclass(frozen=True)
class Target:
    """Where a request path points: a redirect, something outside the base, or a path inside the site."""

    redirect: str | None = None
    outside: bool = False
    relative: str = ""  # inside the base, decoded, '/'-separated, no '.' or '..' segments
    folder: bool = False  # the URL ends with '/'


def parse_target(raw: str, base: str) -> Target:
    """Decode and check a request target against the base; raises BadPath for a malformed one."""
    if CONTROL.search(raw):
        raise BadPath("control character in the path")
    parts = urlsplit(raw)
    if not parts.path.startswith("/"):
        raise BadPath("the path must start with '/'")
    try:
        decoded = unquote(parts.path, errors="strict")
    except UnicodeDecodeError:
        raise BadPath("the path is not UTF-8") from None
    if CONTROL.search(decoded):
        raise BadPath("control character in the path")
    if "\\" in decoded:
        raise BadPath("backslash in the path")
    if any(segment in (".", "..") for segment in decoded.split("/")):
        raise BadPath("'.' or '..' in the path")
    query = f"?{parts.query}" if parts.query else ""
    if base != "/" and decoded in ("/", base.rstrip("/")):
        return Target(redirect=base + query)
    if not decoded.startswith(base):
        return Target(outside=True)
    relative = "/".join(segment for segment in decoded[len(base):].split("/") if segment)
    return Target(relative=relative, folder=decoded.endswith("/"))


def inside(path: str, root: str) -> bool:
    """True when `path` (resolved) is `root` or below it."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def inject_reload(page: bytes, base: str) -> bytes:
    """The page with the reload script loaded from the preview (before </head>, else at the end)."""
    tag = f'<script src="{html.escape(base + PREVIEW_DIR)}/reload.js" defer></script>\n'.encode()
    match = re.search(rb"</head\s*>", page, re.I)
    at = match.start() if match else len(page)
    return page[:at] + tag + page[at:]


def not_found_page(path: str, base: str) -> bytes:
    """A small 404 page that names the missing path and links to the home page."""
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f'<title>Not found</title>\n</head>\n<body>\n<main>\n<h1>Not found</h1>\n'
            f'<p>There is no page at <code>{html.escape(path)}</code>.</p>\n'
            f'<p><a href="{html.escape(base)}">Go to the home page</a></p>\n</main>\n</body>\n</html>\n').encode()


class PreviewHandler(http.server.BaseHTTPRequestHandler):
    """Serves the site folder `root` under `base`; `events` turns on live reload."""

    root: str = "site"
    base: str = "/"
    events: BuildEvents | None = None
    server_version = "preview"

    def version_string(self) -> str:
        """The Server header: no Python version."""
        return self.server_version

    def do_GET(self) -> None:
        """Send a site file, a redirect, a preview file or the event stream."""
        self.respond(send_body=True)

    def do_HEAD(self) -> None:
        """Like GET, without the body."""
        self.respond(send_body=False)

    def respond(self, send_body: bool) -> None:
        """Answer one GET or HEAD."""
        try:
            target = parse_target(self.path, self.base)
        except BadPath as problem:
            self.send_body(400, f"Bad request: {problem}.\n".encode(), "text/plain; charset=utf-8", send_body)
            return
        if target.redirect is not None:
            self.send_redirect(target.redirect)
        elif target.outside:
            self.send_not_found(send_body)
        elif self.events is not None and target.relative.startswith(PREVIEW_DIR + "/"):
            self.send_preview_file(target.relative[len(PREVIEW_DIR) + 1:], send_body)
        else:
            self.send_site_file(target, send_body)

    def send_site_file(self, target: Target, send_body: bool) -> None:
        """A file of the site; a folder's index.html; a 404 for anything else."""
        root = os.path.realpath(self.root)
        path = os.path.realpath(os.path.join(root, *target.relative.split("/")) if target.relative else root)
        if not inside(path, root):
            self.send_not_found(send_body)
            return
        if os.path.isdir(path):
            if not target.folder and target.relative:
                self.send_redirect(quote(self.base + target.relative) + "/" + self.query(), permanent=True)
                return
            path = os.path.join(path, "index.html")
        try:
            with open(path, "rb") as file:  # once open, a rebuild's swap cannot take it away
                data = file.read()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
            self.send_not_found(send_body)
            return
        kind = content_type(path)
        if self.events is not None and kind.startswith("text/html"):
            data = inject_reload(data, self.base)
        self.send_body(200, data, kind, send_body)

    def send_preview_file(self, name: str, send_body: bool) -> None:
        """The reload script, its stylesheet, or the event stream."""
        if name == "events":
            self.send_events()
        elif name in CLIENT_FILES:
            self.send_body(200, (CLIENT_DIR / name).read_bytes(), CLIENT_FILES[name], send_body)
        else:
            self.send_not_found(send_body)

    def send_events(self) -> None:
        """The build events as a Server-Sent Events stream, until the client or the server goes."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        first, number = self.events.hello(self.headers.get("Last-Event-ID"))
        try:
            self.wfile.write(first.encode())
            self.wfile.flush()
            for message in self.events.stream(number):
                self.wfile.write(message.encode())
                self.wfile.flush()
        except CONNECTION_ERRORS:
            pass
        self.close_connection = True

    def send_not_found(self, send_body: bool) -> None:
        """The 404 page (with live reload, so it turns into the page once that page is built)."""
        page = not_found_page(urlsplit(self.path).path, self.base)
        if self.events is not None:
            page = inject_reload(page, self.base)
        self.send_body(404, page, "text/html; charset=utf-8", send_body)

    def send_redirect(self, location: str, permanent: bool = False) -> None:
        """A redirect with no body."""
        self.send_response(301 if permanent else 302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()

    def send_body(self, status: int, data: bytes, kind: str, send_body: bool) -> None:
        """A complete response."""
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        if send_body:
            self.wfile.write(data)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The standard library's own refusals (a malformed request line, an unknown method): plain
        text with the same headers as every other response."""
        self.close_connection = True
        reason = message or self.responses.get(code, ("Error",))[0]
        self.log_error("code %d, message %s", code, reason)
        self.send_body(code, f"{code} {reason}\n".encode(), "text/plain; charset=utf-8",
                       getattr(self, "command", None) != "HEAD")

    def query(self) -> str:
        """The request's query string with its '?', or ''."""
        query = urlsplit(self.path).query
        return f"?{query}" if query else ""

    def handle(self) -> None:
        """Serve the connection; a client that goes away is not an error."""
        try:
            super().handle()
        except CONNECTION_ERRORS:
            pass

    def log_message(self, format: str, *args) -> None:
        """Log only failed requests, one line each."""
        if format.startswith('"%s" %s') and len(args) > 1 and not str(args[1]).startswith(("4", "5")):
            return
        sys.stderr.write(f"{self.address_string()} - {format % args}\n")


class PreviewServer(http.server.ThreadingHTTPServer):
    """A threaded HTTP server whose handler errors are one line, never a traceback."""

    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        """One line for an unexpected handler error; nothing for a client that went away."""
        error = sys.exc_info()[1]
        if not isinstance(error, CONNECTION_ERRORS):
            print(f"preview: request from {client_address[0]} failed: {type(error).__name__}: {error}", file=sys.stderr)


def make_handler(root: Path, base: str, events: BuildEvents | None) -> type[PreviewHandler]:
    """A handler class bound to one site folder, base and (optional) build events."""
    return type("Handler", (PreviewHandler,), {"root": str(root), "base": base, "events": events})
