"""Live-reload benchmark (issue 17): from saving a content file to the open page showing the change.

`python -m builder serve` runs on a copy of content/, templates/ and static/ under a sub-path; a
headless Chromium page is open on the home page. Each edit saves index.md as editors do (a
temporary file renamed over it) with a new last line; the time is from the save to the first
contentful paint of the reloaded page (both on this machine's clock). Also reported: the serve
process's peak resident memory after the first edit, after the 20, and after REBUILDS more saves (no browser:
each waits until the served page shows it); it should not grow with rebuilds.
Target: median <= 300 ms on 2 cores (stretch 100 ms).
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASE = "/training-memory/"
EDITS = 20
REBUILDS = int(os.environ.get("BENCH_REBUILDS", "1000"))
TARGETS = {"edit_to_paint_median_ms": 300.0}
FIRST_PAINT = ("performance.timeOrigin + (performance.getEntriesByName('first-contentful-paint')[0] || "
               "{startTime: performance.now()}).startTime")


def start_serve(workdir: Path) -> tuple[subprocess.Popen, str]:
    """`serve` on a copy of the inputs, on a free port; returns the process and the site's URL."""
    flags = []
    for name in ("content", "templates", "static"):
        shutil.copytree(ROOT / name, workdir / name)
        flags += [f"--{name}", str(workdir / name)]
    command = [sys.executable, "-m", "builder", "serve", *flags, "--out", str(workdir / "site"), "--port", "0",
               "--base", BASE, "--quiet"]
    process = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    for line in process.stderr:
        found = re.search(r"at (http://\S+)", line)
        if found:  # keep reading what it prints, so it never blocks on a full pipe
            threading.Thread(target=lambda: [None for _ in process.stderr], daemon=True).start()
            return process, found.group(1)
        print(line, end="", file=sys.stderr)
    raise SystemExit("benchmark: `serve` stopped before serving (errors above)")


def peak_rss_kib(pid: int) -> int:
    """VmHWM of a process (Linux), in KiB; 0 where unknown."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    found = re.search(r"VmHWM:\s+(\d+) kB", status)
    return int(found.group(1)) if found else 0


def save(path: Path, text: str) -> None:
    """Save as editors do: a temporary file renamed over the page."""
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def rebuild_many(index: Path, original: str, url: str, count: int) -> float:
    """Save index.md `count` times, each time waiting until the served page shows the save; seconds per rebuild."""
    import urllib.request

    started = time.perf_counter()
    for number in range(count):
        marker = f"Rebuild {number} of {count}."
        save(index, original.rstrip("\n") + f"\n\n{marker}\n")
        deadline = time.perf_counter() + 60
        while marker not in urllib.request.urlopen(url + "index.html", timeout=30).read().decode("utf-8"):
            if time.perf_counter() > deadline:
                raise SystemExit(f"benchmark: rebuild {number} never showed up")
            time.sleep(0.01)
    return (time.perf_counter() - started) / max(count, 1)


def bench_reload(edits: int = EDITS, rebuilds: int = REBUILDS) -> dict:
    """Median and spread of edit-to-paint over `edits` saves of the home page."""
    from playwright.sync_api import sync_playwright

    from tests.browser.helpers import LAUNCH_ARGS
    from tests.browser_setup import find_chromium

    chromium = find_chromium()
    if not chromium:
        raise SystemExit("benchmark: Chromium is missing: run `make browser`")
    (ROOT / ".bench").mkdir(exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="bench-reload-", dir=ROOT / ".bench"))
    process, url = start_serve(workdir)
    times, rss_after_first = [], 0
    try:
        index = workdir / "content" / "index.md"
        original = index.read_text(encoding="utf-8")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, args=LAUNCH_ARGS, headless=True)
            page = browser.new_page()
            page.goto(url + "index.html", wait_until="load")
            page.wait_for_selector("html[data-preview=live]", state="attached")
            for number in range(edits):
                marker = f"Benchmark edit {number}."
                with page.expect_navigation(wait_until="load", timeout=120_000):
                    saved = time.time() * 1000
                    save(index, original.rstrip("\n") + f"\n\n{marker}\n")
                painted = page.evaluate(FIRST_PAINT)
                if marker not in page.inner_text("main"):
                    raise SystemExit(f"benchmark: the page reloaded without edit {number}")
                times.append(painted - saved)
                page.wait_for_selector("html[data-preview=live]", state="attached")
                if number == 0:
                    rss_after_first = peak_rss_kib(process.pid)
            browser.close()
        rss = peak_rss_kib(process.pid)
        per_rebuild = rebuild_many(index, original, url, rebuilds)
        rss_after_many = peak_rss_kib(process.pid)
    finally:
        process.terminate()
        process.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)
    return {"cores": os.cpu_count(), "load_average_1min": round(os.getloadavg()[0], 2), "edits": edits,
            "edit_to_paint_median_ms": round(statistics.median(times), 1),
            "edit_to_paint_min_ms": round(min(times), 1), "edit_to_paint_max_ms": round(max(times), 1),
            "serve_peak_rss_after_first_edit_mib": round(rss_after_first / 1024, 1),
            "serve_peak_rss_mib": round(rss / 1024, 1), "rebuilds": rebuilds,
            "save_to_served_s_per_rebuild": round(per_rebuild, 3),
            "serve_peak_rss_after_rebuilds_mib": round(rss_after_many / 1024, 1), "targets": TARGETS}


def print_reload(result: dict) -> None:
    """Table of the reload benchmark."""
    print(f"edit to paint over {result['edits']} edits on {result['cores']} cores "
          f"(1-minute load average {result['load_average_1min']})")
    target = TARGETS["edit_to_paint_median_ms"]
    for key in ("edit_to_paint_median_ms", "edit_to_paint_min_ms", "edit_to_paint_max_ms"):
        verdict = ("  ok" if result[key] <= target else f"  OVER target {target:.0f} ms") if "median" in key else ""
        print(f"  {key:<36} {result[key]:9.1f} ms{verdict}")
    for key in ("serve_peak_rss_after_first_edit_mib", "serve_peak_rss_mib", "serve_peak_rss_after_rebuilds_mib"):
        if key in result:
            print(f"  {key:<36} {result[key]:9.1f} MiB")
    if "rebuilds" in result:
        print(f"  {'rebuilds after the edits':<36} {result['rebuilds']:9d} "
              f"({result['save_to_served_s_per_rebuild'] * 1000:.0f} ms each, save to served)")
