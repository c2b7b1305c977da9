"""Build benchmarks: cold and warm build time, bytes and requests per page.

Each benchmark is a function `bench_<name>() -> dict` registered in BENCHMARKS; `main`
runs them, prints a table per benchmark and writes .bench/<name>.json. A browser-widget
benchmark can be added as another function (e.g. bench_widgets) without touching the rest.
Targets (issue 3): cold build <= 2 s, warm rebuild <= 0.5 s on 2 cores, <= 60 KB gzipped per page.
Issue 14: the heaviest page's total with everything it loads (benchmarks/weight.py), target 60 KB gzipped; the
`weight` benchmark measures it alone (one build, no timings).
Issue 17: a one-page incremental rebuild (serve's: imports done, the last build's memory kept) and the
cold build in CPU seconds, against the floor of rendering the same pages' Markdown alone (benchmarks/floor.py,
a fresh process too); target: within 2x of the floor.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from benchmarks import weight

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / ".bench"
TARGETS = {"cold_build_s": 2.0, "warm_build_s": 0.5, "page_gzip_bytes": 60_000, "cold_over_floor": 2.0}
INCREMENTAL_EDITS = 5


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
        pages = weight.measure_pages(out)
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
            **page_weight(pages), "targets": TARGETS}


def page_weight(pages: list[dict]) -> dict:
    """The page table's entries in a result: every page, and the heaviest one's name and served bytes."""
    top = weight.heaviest(pages)
    return {"pages": pages, "heaviest_page": top["page"], "max_page_gzip_bytes": top["gzip_bytes"]}


def bench_weight() -> dict:
    """Every page's served bytes with everything it loads (benchmarks/weight.py), from one fresh build."""
    workdir = Path(tempfile.mkdtemp(prefix="bench-weight-", dir=ROOT / ".bench"))
    try:
        out = workdir / "site"
        time_build(out, ["--force"])
        pages = weight.measure_pages(out)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return {**page_weight(pages), "targets": {"page_gzip_bytes": TARGETS["page_gzip_bytes"]}}


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


BENCHMARKS: dict[str, Callable[[], dict]] = {"build": bench_build, "weight": bench_weight, "widgets": bench_widgets,
                                             "reload": bench_reload, "lighthouse": bench_lighthouse}


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
    print_weight(result)


PARTS = ("html_text", "inline_svg", "inline_data", "css", "js", "other")


def print_weight(result: dict) -> None:
    """Table of page weight: per page, raw and served KB (1 KB = 1,000 bytes), requests, and served KB by part."""
    limit = TARGETS["page_gzip_bytes"]
    print(f"  page weight, everything each page loads (KB = 1,000 bytes; served = gzipped as GitHub Pages sends text;"
          f" parts gzipped alone)")
    print(f"  {'page':<52} {'raw KB':>7} {'served':>7} {'req':>4} " + " ".join(f"{p:>11}" for p in PARTS))
    for row in result["pages"]:
        flag = "" if row["gzip_bytes"] <= limit else f"  OVER {limit / 1000:.0f} KB"
        split = " ".join(f"{row['parts'][p] / 1000:11.1f}" for p in PARTS)
        print(f"  {row['page']:<52} {row['raw_bytes'] / 1000:7.1f} {row['gzip_bytes'] / 1000:7.1f} "
              f"{row['requests']:4d} {split}{flag}")
    verdict = "ok" if result["max_page_gzip_bytes"] <= limit else f"OVER target {limit / 1000:.0f} KB"
    over = sum(row["gzip_bytes"] > limit for row in result["pages"])
    print(f"  heaviest page: {result['heaviest_page']}, {result['max_page_gzip_bytes'] / 1000:.1f} KB served: {verdict}"
          f" ({over} of {len(result['pages'])} pages over)")


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


# What `make bench` runs (no names given): `weight` is left out, the build benchmark's page table is the same measure.
DEFAULT = [name for name in BENCHMARKS if name != "weight"]

PRINTERS: dict[str, Callable[[dict], None]] = {"build": print_build, "weight": print_weight, "widgets": print_widgets,
                                               "reload": print_reload, "lighthouse": print_lighthouse}


def main(argv: list[str] | None = None) -> int:
    """Run every benchmark (or those named in argv), print tables, write .bench/<name>.json. A benchmark that cannot
    run here (a tool missing, the site not building) says why in one line and the others still run; the exit status
    is then 1. An unknown name: one line, exit 2."""
    names = argv if argv else DEFAULT
    unknown = [name for name in names if name not in BENCHMARKS]
    if unknown:
        print(f"benchmarks: unknown benchmark {unknown[0]!r} (choose from {', '.join(BENCHMARKS)})", file=sys.stderr)
        return 2
    RESULTS.mkdir(exist_ok=True)
    failed = []
    for name in names:
        try:
            result = BENCHMARKS[name]()
        except (SystemExit, Exception) as error:  # noqa: BLE001 -- one line per benchmark that cannot run
            reason = str(error) if isinstance(error, SystemExit) else f"{type(error).__name__}: {error}"
            print(f"{name}: not run: {reason.splitlines()[0] if reason else 'no reason given'}")
            failed.append(name)
            continue
        (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        PRINTERS.get(name, lambda r: print(json.dumps(r, indent=2)))(result)
        print(f"  wrote {RESULTS / f'{name}.json'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
