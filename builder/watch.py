"""Watch the build's input folders and call back once per burst of changes.

File events come from watchfiles (inotify, FSEvents, ...); where events are unavailable it polls,
and `poll=True` forces polling (network and container file systems). An editor's save (write a
hidden temporary file, rename it over the page; or several writes in a row) arrives as one burst:
changes are grouped until STEP_MS pass with no new one, so it gives one callback.

watchfiles checks for new changes once per STEP_MS and ends a burst at the first check that finds no new
(change, path) pair (watchfiles 1.x src/lib.rs, RustNotify.watch): a save is reported STEP_MS to 2 x STEP_MS
after its first event, 1.5 x STEP_MS on average, which is the part of save-to-paint the watcher adds. Writes
of one file less than STEP_MS apart stay one burst; an editor's save takes well under a millisecond.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Callable, Iterable

STEP_MS = 30  # quiet time that ends a burst of changes (was 60: 45 ms less save-to-paint on average)
MAX_BURST_MS = 1600  # a burst that never goes quiet is still reported after this long
POLL_DELAY_MS = 200

# Files editors and tools write beside the real ones; none of them is an input of the build.
IGNORED_SUFFIXES = ("~", ".swp", ".swx", ".swo", ".tmp", ".pyc", ".pyo", ".orig", ".rej")
IGNORED_NAMES = {"4913", "__pycache__", ".DS_Store"}  # 4913: the file vim writes to test a folder


def is_input_path(relative: str | Path) -> bool:
    """False for editor temporaries, hidden files and caches (they never change the site);
    `relative` is the path inside a watched folder."""
    parts = Path(relative).parts
    if not parts:
        return False
    name = parts[-1]
    if any(part.startswith(".") or part in IGNORED_NAMES for part in parts):
        return False
    return not (name.endswith(IGNORED_SUFFIXES) or name.startswith("#") or name.startswith("flycheck_"))


def watch_folders(folders: Iterable[Path], on_change: Callable[[set[str]], None], stop: threading.Event,
                  poll: bool = False) -> None:
    """Call on_change(changed paths) after each burst of changes to the folders, until `stop` is set.
    Runs in the calling thread."""
    import watchfiles

    folders = [Path(folder).resolve() for folder in folders if Path(folder).is_dir()]
    if not folders:
        stop.wait()
        return

    def keep(change, path: str) -> bool:
        changed = Path(path)
        inside = next((folder for folder in folders if changed.is_relative_to(folder)), None)
        if inside is None or changed.is_dir():  # a folder's own change: its files report theirs
            return False
        return is_input_path(changed.relative_to(inside))

    force_polling = poll
    while not stop.is_set():
        # Polling sees a burst one poll at a time: its quiet time must outlast a poll.
        step = STEP_MS + (POLL_DELAY_MS if force_polling else 0)
        try:
            for changes in watchfiles.watch(*folders, watch_filter=keep, debounce=MAX_BURST_MS, step=step,
                                            stop_event=stop, rust_timeout=500, force_polling=force_polling,
                                            poll_delay_ms=POLL_DELAY_MS, raise_interrupt=False):
                on_change({path for _, path in changes})
            return
        except OSError as error:  # no file events here (e.g. inotify limit reached): poll instead
            if force_polling:
                raise
            print(f"file events unavailable ({error}); polling for changes instead", file=sys.stderr)
            force_polling = True
