"""Local preview: serve site/ (optionally under a sub-path), rebuild when an input changes, and tell
open pages (live reload, build errors) through builder.preview_events.

The pieces: builder.watch notices changes, builder.build builds, builder.preview_http answers
requests. The built site is never changed by serving: the reload script is added to responses only.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
import threading
import traceback
from pathlib import Path
from typing import Callable

from builder.build import PACKAGE_DIR, SitePaths, build_site, hash_tree
from builder.content import BuildFailed, display_name
from builder.incremental import BuildMemory
from builder.preview_events import BuildEvents
from builder.preview_http import PreviewServer, make_handler
from builder.watch import watch_folders

LOOPBACK = "127.0.0.1"


def normalise_base(base: str) -> str:
    """'/sub' or 'sub/' -> '/sub/'; '' -> '/'."""
    stripped = base.strip("/")
    return f"/{stripped}/" if stripped else "/"


def make_server(out: Path, port: int, base: str = "/", host: str = LOOPBACK,
                events: BuildEvents | None = None) -> PreviewServer:
    """An HTTP server on host:port serving `out` under `base`; with `events`, pages live-reload."""
    server_class = PreviewServer
    if ":" in host:  # an IPv6 address
        server_class = type("PreviewServer6", (PreviewServer,), {"address_family": socket.AF_INET6})
    return server_class((host, port), make_handler(Path(out).absolute(), normalise_base(base), events))


def changed_files(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Site paths added, removed or changed between two hash_tree()s."""
    return sorted(path for path in before.keys() | after.keys() if before.get(path) != after.get(path))


def syntax_errors(files: list[Path]) -> list[str]:
    """'path:line: message' for each Python file that does not compile."""
    errors = []
    for path in files:
        try:
            compile(path.read_bytes(), str(path), "exec")
        except SyntaxError as error:
            errors.append(f"{display_name(path)}:{error.lineno or 0}: {error.msg}")
        except OSError:
            continue  # removed: the restarted process will say so if it matters
    return errors


class Preview:
    """Builds into paths.out and publishes each outcome to `events`; one build at a time. Builds are
    incremental: the memory of the last build lets an edit re-render only the pages it reaches.
    A change to the builder's own code calls `on_code_change` (serve restarts) instead of building
    with the code already imported."""

    def __init__(self, paths: SitePaths, quiet: bool = False, events: BuildEvents | None = None,
                 on_code_change: Callable[[list[Path]], None] | None = None) -> None:
        self.paths, self.quiet = paths, quiet
        self.events = events or BuildEvents()
        self.on_code_change = on_code_change
        self.lock = threading.Lock()
        self.builds = 0
        self.memory = BuildMemory()

    def build(self) -> bool:
        """Build once; print errors instead of raising, and tell the open pages. True on success."""
        with self.lock:
            self.builds += 1
            # The first build compares with what is on disk; later ones know what they changed.
            before = hash_tree(self.paths.out) if self.paths.out.is_dir() and not self.memory.outputs else {}
            try:
                report = build_site(self.paths, quiet=self.quiet, memory=self.memory)
            except BuildFailed as failure:
                self.fail([str(error) for error in failure.errors])
                return False
            except Exception as error:  # a bug in the builder: keep serving, say so in the page too
                traceback.print_exc()
                self.memory = BuildMemory()  # start the next build afresh
                self.events.publish(errors=[f"the builder stopped: {type(error).__name__}: {error}"])
                return False
            changed = getattr(report, "changed", None)
            if changed is None or before:
                changed = changed_files(before, hash_tree(self.paths.out))
            self.events.publish(changed=changed)
            return True

    def fail(self, lines: list[str]) -> None:
        """Print errors where the author runs serve, and show them in the open pages."""
        for line in lines:
            print(line, file=sys.stderr)
        print(f"build failed: {len(lines)} error(s); still serving the previous site", file=sys.stderr)
        self.events.publish(errors=lines)

    def on_change(self, changed: set[str]) -> None:
        """A burst of input changes: rebuild once (or restart, for the builder's code)."""
        code = sorted(Path(path) for path in changed if path.endswith(".py") and Path(path).is_relative_to(PACKAGE_DIR))
        if code and self.on_code_change is not None:
            problems = syntax_errors(code)
            if problems:
                self.fail(problems)
            else:
                self.on_code_change(code)
            return
        if not self.quiet:
            names = sorted(Path(path).name for path in changed if Path(path).exists()) or ["(files removed)"]
            print(f"changed: {', '.join(names[:5])}{' ...' if len(names) > 5 else ''}; rebuilding", file=sys.stderr)
        self.build()

    def watched(self) -> list[Path]:
        """The folders whose changes trigger a rebuild."""
        return [self.paths.content, self.paths.templates, self.paths.static, PACKAGE_DIR]


def restart_command(port: int) -> list[str]:
    """This process's command line, listening on the same port (the one picked for --port 0)."""
    return [*sys.orig_argv, "--port", str(port)]


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and 'localhost'."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve_site(paths: SitePaths, port: int = 8000, base: str = "/", quiet: bool = False, host: str = LOOPBACK,
               poll: bool = False, live: bool = True) -> int:
    """Serve, build, then rebuild on change (and reload open pages) until Ctrl-C. A change to the
    builder's code restarts the process (open pages reconnect and reload)."""
    restart = threading.Event()
    preview = Preview(paths, quiet)
    try:
        server = make_server(paths.out, port, base, host, preview.events if live else None)
    except OSError as error:
        print(f"error: --host {host} --port {port}: cannot listen ({error.strerror or error})", file=sys.stderr)
        return 2

    def on_code_change(files: list[Path]) -> None:
        print(f"the builder's code changed ({', '.join(f.name for f in files)}): restarting", file=sys.stderr)
        restart.set()
        server.shutdown()

    preview.on_code_change = on_code_change
    preview.build()
    stop = threading.Event()
    watcher = threading.Thread(target=watch_folders, args=(preview.watched(), preview.on_change, stop, poll),
                               name="watch", daemon=True)
    watcher.start()
    url_host = f"[{host}]" if ":" in host else host
    print(f"serving {paths.out} at http://{url_host}:{server.server_address[1]}{normalise_base(base)}"
          f"{' with live reload' if live else ''} (Ctrl-C to stop)", file=sys.stderr)
    if not is_loopback(host):
        print(f"warning: --host {host} makes the preview reachable from other machines", file=sys.stderr)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        preview.events.close()
        server.server_close()
        watcher.join(timeout=2)
    if restart.is_set():
        sys.stderr.flush()
        os.execv(sys.executable, restart_command(server.server_address[1]))
    return 0
