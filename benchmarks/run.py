"""Build benchmarks: cold and warm build time, bytes and requests per page.

Each benchmark is a function `bench_<name>() -> dict` registered in BENCHMARKS; `main`
runs them, prints a table per benchmark and writes .bench/<name>.json. A browser-widget
benchmark can be added as another function (e.g. bench_widgets) without touching the rest.
Targets (issue 3): cold build <= 2 s, warm rebuild <= 0.5 s on 2 cores, <= 60 KB gzipped per page.
Issue 17: a one-page incremental rebuild (serve's: imports done, the last build's memory kept) and the
cold build in CPU seconds, against the floor of rendering the same pages' Markdown alone (benchmarks/floor.py,
a fresh process too); target: within 2x of the floor.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / ".bench"
TARGETS = {"cold_build_s": 2.0, "warm_build_s": 0.5, "page_gzip_bytes": 60_000, "cold_over_floor": 2.0}
INCREMENTAL_EDITS = 5
RESOURCE = re.compile(r'<(?:link\b[^>]*\brel="stylesheet"[^>]*\bhref|script\b[^>]*\bsrc|img\b[^>]*\bsrc)="([^"]+)"')


def child_cpu_seconds() -> float:
    """User + system CPU seconds used so far by finished child processes."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def snapshot_inputs(workdir: Path) -> list[str]:
    """Copy content/, templates/ and static/ so edits made during the run do not disturb it; returns CLI flags."""
    flags = []
    for name in ("content", "templates", "static"):
        shutil.copytree(ROOT / name, workdir / name)
        flags += [f"--{name}", str(workdir / name)]
    return flags


def time_build(out: Path, extra: list[str] | None = None) -> tuple[float, float]:
    """(wall, CPU) seconds for one `python -m builder build` in a fresh process (imports included).

    CPU time is reported too because wall time on a shared, loaded machine overstates the cost.
    """
    command = [sys.executable, "-m", "builder", "build", "--out", str(out), "--quiet"] + (extra or [])
    cpu, started = child_cpu_seconds(), time.perf_counter()
    if subprocess.run(command, cwd=ROOT).returncode != 0:
        raise SystemExit("benchmark: the site does not build (errors above); fix them first")
    return time.perf_counter() - started, child_cpu_seconds() - cpu


def time_build_in_process(out: Path) -> float:
    """Seconds for build_site with everything already imported (no process start-up)."""
    from builder.build import SitePaths, build_site

    inputs = out.parent
    started = time.perf_counter()
    build_site(SitePaths(inputs / "content", inputs / "templates", inputs / "static", out), quiet=True)
    return time.perf_counter() - started


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and its finished children."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def time_incremental(out: Path, edits: int = INCREMENTAL_EDITS) -> tuple[float, float, int]:
    """Median (wall, CPU) seconds of rebuilding after an edit to one page's body (index.md), as serve does:
    everything imported, the previous build's memory kept; and how many pages each rebuild rendered."""
    from builder.build import SitePaths, build_site
    from builder.incremental import BuildMemory

    inputs = out.parent
    paths = SitePaths(inputs / "content", inputs / "templates", inputs / "static", out)
    memory = BuildMemory()
    build_site(paths, quiet=True, force=True, memory=memory)
    page = paths.content / "index.md"
    original = page.read_text(encoding="utf-8")
    walls, cpus, rendered = [], [], set()
    try:
        for number in range(edits):
            page.write_text(original.rstrip("\n") + f"\n\nBenchmark edit {number}.\n", encoding="utf-8")
            cpu, started = cpu_seconds(), time.perf_counter()
            report = build_site(paths, quiet=True, memory=memory)
            walls.append(time.perf_counter() - started)
            cpus.append(cpu_seconds() - cpu)
            rendered.add(len(report.rendered))
    finally:
        page.write_text(original, encoding="utf-8")
    return statistics.median(walls), statistics.median(cpus), max(rendered)


def time_markdown_floor(content: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of rendering the pages' Markdown alone in a fresh process (benchmarks/floor.py)."""
    cpu, started = child_cpu_seconds(), time.perf_counter()
    subprocess.run([sys.executable, "-m", "benchmarks.floor", str(content)], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - started, child_cpu_seconds() - cpu


def page_resources(page: Path) -> list[str]:
    """Same-site files a page loads (stylesheets, scripts, images); data: URIs excluded."""
    return [url for url in RESOURCE.findall(page.read_text(encoding="utf-8")) if not url.startswith("data:")]


def measure_pages(site: Path) -> list[dict]:
    """Per page: bytes raw and gzipped of the HTML (inline SVG included) plus everything it loads."""
    rows = []
    for page in sorted(site.glob("*.html")):
        files = [page] + [site / url for url in page_resources(page)]
        raw = sum(f.stat().st_size for f in files)
        gzipped = sum(len(gzip.compress(f.read_bytes(), compresslevel=9, mtime=0)) for f in files)
        rows.append({"page": page.name, "raw_bytes": raw, "gzip_bytes": gzipped, "requests": len(files),
                     "html_bytes": page.stat().st_size, "svgs": page.read_text(encoding="utf-8").count("<svg")})
    return rows


def bench_build() -> dict:
    """Cold build (fresh process, no cache), warm rebuild (nothing changed), and page weight."""
    workdir = Path(tempfile.mkdtemp(prefix="bench-", dir=ROOT / ".bench"))
    try:
        out = workdir / "site"
        flags = snapshot_inputs(workdir)
        cold = time_build(out, flags)
        warm = time_build(out, flags)
        warm_in_process = time_build_in_process(out)
        forced = time_build(out, flags + ["--force"])  # inputs unchanged but re-rendered (charts from the cache)
        floor = time_markdown_floor(workdir / "content")
        incremental = time_incremental(out)
        pages = measure_pages(out)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return {"cores": os.cpu_count(), "load_average_1min": round(os.getloadavg()[0], 2),
            "cold_build_s": round(cold[0], 3), "cold_build_cpu_s": round(cold[1], 3),
            "warm_build_s": round(warm[0], 3), "warm_build_cpu_s": round(warm[1], 3),
            "warm_build_in_process_s": round(warm_in_process, 3),
            "forced_rebuild_s": round(forced[0], 3), "forced_rebuild_cpu_s": round(forced[1], 3),
            "markdown_floor_s": round(floor[0], 3), "markdown_floor_cpu_s": round(floor[1], 3),
            "cold_over_floor": round(cold[1] / floor[1], 2), "forced_over_floor": round(forced[1] / floor[1], 2),
            "one_page_rebuild_s": round(incremental[0], 3), "one_page_rebuild_cpu_s": round(incremental[1], 3),
            "one_page_rebuild_pages_rendered": incremental[2],
            "pages": pages, "max_page_gzip_bytes": max(p["gzip_bytes"] for p in pages), "targets": TARGETS}


def bench_widgets() -> dict:
    """Slider input to updated DOM (p95) and the widget script's gzipped size (benchmarks/widgets.py)."""
    from benchmarks.widgets import bench_widgets as run

    return run()


def bench_reload() -> dict:
    """Saving a content file to the open page showing it, through `serve` (benchmarks/reload.py)."""
    from benchmarks.reload import bench_reload as run

    return run()


def bench_lighthouse() -> dict:
    """Lighthouse mobile scores for every page, served gzipped (benchmarks/lighthouse.py)."""
    from benchmarks.lighthouse import bench_lighthouse as run

    return run()


BENCHMARKS: dict[str, Callable[[], dict]] = {"build": bench_build, "widgets": bench_widgets, "reload": bench_reload,
                                             "lighthouse": bench_lighthouse}


def print_build(result: dict) -> None:
    """Table of the build benchmark."""
    print(f"build on {result['cores']} cores (1-minute load average {result['load_average_1min']})")
    for key in ("cold_build_s", "cold_build_cpu_s", "warm_build_s", "warm_build_cpu_s", "warm_build_in_process_s",
                "forced_rebuild_s", "forced_rebuild_cpu_s", "one_page_rebuild_s", "one_page_rebuild_cpu_s",
                "markdown_floor_s", "markdown_floor_cpu_s"):
        if key not in result:
            continue
        target = TARGETS.get(key.replace("_cpu", ""))
        verdict = "" if target is None else ("  ok" if result[key] <= target else f"  OVER target {target} s")
        print(f"  {key:<26} {result[key]:8.3f} s{verdict}")
    for key in ("cold_over_floor", "forced_over_floor"):
        if key in result:
            target = TARGETS["cold_over_floor"]
            verdict = "  ok" if result[key] <= target else f"  OVER target {target}x"
            print(f"  {key:<26} {result[key]:8.2f} x (CPU){verdict}")
    if "one_page_rebuild_pages_rendered" in result:
        print(f"  {'one_page_rebuild_pages_rendered':<26} {result['one_page_rebuild_pages_rendered']:8d}")
    print(f"  {'page':<22} {'raw KB':>9} {'gzip KB':>9} {'requests':>9} {'svgs':>5}")
    for row in result["pages"]:
        flag = "" if row["gzip_bytes"] <= TARGETS["page_gzip_bytes"] else "  OVER 60 KB"
        print(f"  {row['page']:<22} {row['raw_bytes'] / 1000:9.1f} {row['gzip_bytes'] / 1000:9.1f} "
              f"{row['requests']:9d} {row['svgs']:5d}{flag}")


def print_widgets(result: dict) -> None:
    """Table of the widget benchmark."""
    from benchmarks.widgets import print_widgets as show

    show(result)


def print_reload(result: dict) -> None:
    """Table of the reload benchmark."""
    from benchmarks.reload import print_reload as show

    show(result)


def print_lighthouse(result: dict) -> None:
    """Table of the Lighthouse benchmark."""
    from benchmarks.lighthouse import print_lighthouse as show

    show(result)


PRINTERS: dict[str, Callable[[dict], None]] = {"build": print_build, "widgets": print_widgets, "reload": print_reload,
                                               "lighthouse": print_lighthouse}


def main(argv: list[str] | None = None) -> int:
    """Run every benchmark (or those named in argv), print tables, write .bench/<name>.json."""
    names = argv if argv else list(BENCHMARKS)
    RESULTS.mkdir(exist_ok=True)
    for name in names:
        result = BENCHMARKS[name]()
        (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        PRINTERS.get(name, lambda r: print(json.dumps(r, indent=2)))(result)
        print(f"  wrote {RESULTS / f'{name}.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
