"""Local preview: serve site/ on 127.0.0.1 (optionally under a sub-path) and rebuild on change."""

from __future__ import annotations

import functools
import http.server
import sys
import threading
import time
from pathlib import Path

from builder.build import PACKAGE_DIR, SitePaths, build_site, list_files
from builder.content import BuildFailed

POLL_SECONDS = 0.5


def snapshot_inputs(paths: SitePaths) -> dict[str, tuple[float, int]]:
    """Modification time and size of every watched file."""
    watched = {}
    for folder in (paths.content, paths.templates, paths.static, PACKAGE_DIR):
        for path in list_files(folder):
            stat = path.stat()
            watched[str(path)] = (stat.st_mtime, stat.st_size)
    return watched


def rebuild(paths: SitePaths, quiet: bool) -> bool:
    """Build once; print errors instead of raising. True when the build succeeded."""
    try:
        build_site(paths, quiet=quiet)
    except BuildFailed as failure:
        for error in failure.errors:
            print(error, file=sys.stderr)
        print(f"build failed: {len(failure.errors)} error(s); still serving the previous site", file=sys.stderr)
        return False
    return True


def watch_inputs(paths: SitePaths, quiet: bool, stop: threading.Event) -> None:
    """Poll the inputs and rebuild whenever one changes."""
    previous = snapshot_inputs(paths)
    while not stop.wait(POLL_SECONDS):
        current = snapshot_inputs(paths)
        if current != previous:
            previous = current
            print("change detected, rebuilding", file=sys.stderr)
            rebuild(paths, quiet)


def normalise_base(base: str) -> str:
    """'/sub' or 'sub/' -> '/sub/'; '' -> '/'."""
    stripped = base.strip("/")
    return f"/{stripped}/" if stripped else "/"


class SubPathHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the site folder under a URL prefix; everything else is 404."""

    base = "/"

    def translate_path(self, path: str) -> str:
        """Strip the base prefix before mapping the URL to a file."""
        if not path.startswith(self.base):
            return str(Path(self.directory) / "__outside_base__")
        return super().translate_path("/" + path[len(self.base):])

    def do_GET(self) -> None:
        """Redirect '/' to the base when serving under a sub-path."""
        if self.base != "/" and self.path in ("/", self.base.rstrip("/")):
            self.send_response(302)
            self.send_header("Location", self.base)
            self.end_headers()
            return
        super().do_GET()

    def log_message(self, format: str, *args) -> None:
        """Quiet request log (errors only)."""
        if args and str(args[1]).startswith(("4", "5")):
            super().log_message(format, *args)


def make_server(out: Path, port: int, base: str = "/") -> http.server.ThreadingHTTPServer:
    """An HTTP server on 127.0.0.1 serving `out` under `base`."""
    handler = type("Handler", (SubPathHandler,), {"base": normalise_base(base)})
    return http.server.ThreadingHTTPServer(("127.0.0.1", port), functools.partial(handler, directory=str(out)))


def serve_site(paths: SitePaths, port: int = 8000, base: str = "/", quiet: bool = False) -> int:
    """Build, then serve and rebuild on change until Ctrl-C."""
    rebuild(paths, quiet)
    try:
        server = make_server(paths.out.resolve(), port, base)
    except OSError as error:
        print(f"error: --port {port}: cannot listen on 127.0.0.1 ({error.strerror})", file=sys.stderr)
        return 2
    stop = threading.Event()
    threading.Thread(target=watch_inputs, args=(paths, quiet, stop), daemon=True).start()
    print(f"serving {paths.out} at http://127.0.0.1:{port}{normalise_base(base)} (Ctrl-C to stop)", file=sys.stderr)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        server.server_close()
        time.sleep(0)
    return 0
