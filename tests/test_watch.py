"""The watcher: one callback per editor save, none for editor temporaries, file events or polling."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from builder.watch import STEP_MS, is_input_path, watch_folders

QUIET_S = 0.6  # longer than a burst's quiet time plus a poll


class Watching:
    """watch_folders on one folder in a thread, recording each callback's changed paths."""

    def __init__(self, folder: Path, poll: bool):
        self.folder, self.calls, self.stop = folder, [], threading.Event()
        self.arrived = threading.Condition()
        self.thread = threading.Thread(target=watch_folders, args=([folder], self.record, self.stop, poll), daemon=True)
        self.thread.start()
        self.wait_until_watching()

    def record(self, changed: set[str]) -> None:
        with self.arrived:
            self.calls.append({Path(path).name for path in changed})
            self.arrived.notify_all()

    def wait_until_watching(self) -> None:
        """Touch a probe until the watcher reports it (it has started), then forget it."""
        probe = self.folder / "probe.md"
        deadline = time.monotonic() + 10
        while not self.calls:
            assert time.monotonic() < deadline, "the watcher never reported a change"
            probe.write_text(str(time.monotonic()))
            with self.arrived:
                self.arrived.wait(0.3)
        self.quiet()

    def settle(self, expected: bool = True) -> list[set[str]]:
        """The callbacks since the last settle: waits (up to 10 s) for the first when one is
        expected, then until none has come for QUIET_S (a machine under load is slow to report)."""
        if expected:
            with self.arrived:
                self.arrived.wait_for(lambda: self.calls, timeout=10)
        else:
            time.sleep(2 * QUIET_S)
        return self.quiet()

    def quiet(self) -> list[set[str]]:
        """The callbacks so far, once none has come for QUIET_S; forgets them."""
        while True:
            count = len(self.calls)
            time.sleep(QUIET_S)
            if len(self.calls) == count:
                calls, self.calls = self.calls, []
                return calls

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)


@pytest.fixture(params=[False, True], ids=["events", "polling"])
def watching(request, tmp_path):
    (tmp_path / "index.md").write_text("first\n")
    watcher = Watching(tmp_path, poll=request.param)
    yield watcher
    watcher.close()
    assert not watcher.thread.is_alive()


def test_an_atomic_rename_save_gives_one_callback(watching):
    temporary = watching.folder / ".index.md.tmp-1234"
    temporary.write_text("second\n")
    os.replace(temporary, watching.folder / "index.md")
    assert watching.settle() == [{"index.md"}]


class Stalls:
    """Counts the moments this process's threads were kept off the CPU for longer than half the watcher's quiet
    time: a thread sleeping 2 ms at a time notes each wake-up that came that much late. The watcher's own thread is
    scheduled like this one, so a stall in it can split a burst just as a late write can."""

    def __init__(self) -> None:
        self.count, self.stop = 0, threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stop.is_set():
            started = time.monotonic()
            time.sleep(0.002)
            self.count += time.monotonic() - started - 0.002 > STEP_MS / 2000

    def close(self) -> int:
        self.stop.set()
        self.thread.join()
        return self.count


def test_several_writes_in_a_row_give_one_callback(watching):
    page = watching.folder / "index.md"
    written, stalls = [], Stalls()
    for number in range(5):
        page.write_text(f"draft {number}\n")
        written.append(time.monotonic())
        time.sleep(0.005)
    with page.open("a") as file:
        file.write("more\n")
    written.append(time.monotonic())
    time.sleep(4 * STEP_MS / 1000)  # the events' delivery to the watcher, watched for stalls too
    stalled = stalls.close()
    # Writes 5 ms apart are one burst. On a loaded machine a write can come later than the watcher's quiet time
    # (STEP_MS) after the one before, or the watcher's thread can be kept off the CPU that long between two events:
    # either is a new save as far as any watcher can tell. Only such gaps (counted from half the quiet time, for the
    # events' own delay) and such stalls may split the burst.
    gaps = sum(later - earlier > STEP_MS / 2000 for earlier, later in zip(written, written[1:]))
    calls = watching.settle()
    assert 1 <= len(calls) <= 1 + gaps + stalled and all(call == {"index.md"} for call in calls), (calls, gaps, stalled)


def test_vim_style_save_gives_one_callback(watching):
    # vim: probe the folder with 4913, write a swap file, rename the page to a backup, write it anew
    folder = watching.folder
    (folder / "4913").write_text("")
    (folder / "4913").unlink()
    (folder / ".index.md.swp").write_bytes(b"\0" * 64)
    os.replace(folder / "index.md", folder / "index.md~")
    (folder / "index.md").write_text("third\n")
    (folder / "index.md~").unlink()
    assert watching.settle() == [{"index.md"}]


def test_editor_temporaries_alone_give_no_callback(watching):
    folder = watching.folder
    for name in (".index.md.swp", "index.md~", ".#index.md", "#index.md#", "4913", "x.pyc"):
        (folder / name).write_text("scratch")
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "m.cpython-311.pyc").write_bytes(b"x")
    assert watching.settle(expected=False) == []


def test_two_saves_apart_give_two_callbacks(watching):
    page = watching.folder / "index.md"
    page.write_text("one\n")
    assert watching.settle() == [{"index.md"}]
    page.write_text("two\n")
    assert watching.settle() == [{"index.md"}]


@pytest.mark.parametrize("relative, kept", [
    ("index.md", True), ("validation/peak.json", True), (".index.md.swp", False), ("index.md~", False),
    ("drafts/.hidden/x.md", False), ("4913", False), ("__pycache__/x.pyc", False), ("#index.md#", False),
])
def test_is_input_path(relative, kept):
    assert is_input_path(relative) is kept
