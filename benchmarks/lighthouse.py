"""Lighthouse benchmark (issue 18): mobile scores for every page of the built site.

The site is built into a temporary folder and served under a sub-path by a small HTTP server that
gzips text responses, as GitHub Pages does (Lighthouse simulates a slow 4G link from the bytes that
cross it, so an uncompressed local server would understate the published site). Lighthouse runs once
per page with its default mobile settings (Moto G Power viewport, simulated 4x CPU slowdown and slow
4G) on Debian's Chromium. Lighthouse itself is a pinned npm package installed under .tools/ on first
use (about 180 MB; `npm` from the package registry), not a test dependency.
Targets (issue 14): 100 in each of the four categories (issue 18 asked at least 95 for performance). The
performance score depends on the machine's load: the result records the 1-minute load averages before and
after beside it. `python -m benchmarks.lighthouse PAGE...` scores only the named pages.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from benchmarks.weight import COMPRESSED, compress

ROOT = Path(__file__).resolve().parent.parent
VERSION = "13.5.0"
INSTALL = ROOT / ".tools" / f"lighthouse-{VERSION}"
BINARY = INSTALL / "node_modules" / ".bin" / "lighthouse"
BASE = "/training-memory/"
CATEGORIES = ("performance", "accessibility", "best-practices", "seo")
TARGETS = {"performance": 100, "accessibility": 100, "best-practices": 100, "seo": 100}
CHROME_FLAGS = ("--headless=new --no-sandbox --disable-gpu --disable-background-networking "
                "--disable-component-update --disable-sync")


def install() -> Path:
    """The pinned Lighthouse CLI, installed under .tools/ with npm when missing."""
    if not BINARY.exists():
        if not shutil.which("npm"):
            raise SystemExit("lighthouse benchmark: npm is missing (apt-get install -y npm)")
        INSTALL.mkdir(parents=True, exist_ok=True)
        command = ["npm", "install", "--prefix", str(INSTALL), "--no-audit", "--no-fund", "--loglevel=error",
                   f"lighthouse@{VERSION}"]
        if subprocess.run(command).returncode != 0 or not BINARY.exists():
            raise SystemExit(f"lighthouse benchmark: `{' '.join(command)}` failed")
    return BINARY


class GzipHandler(SimpleHTTPRequestHandler):
    """Static files under BASE, text gzipped when the client accepts it (as GitHub Pages serves them)."""

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        if not self.path.startswith(BASE):
            self.send_error(404)
            return
        relative = self.path[len(BASE):].split("?")[0] or "index.html"
        path = Path(self.directory) / relative
        if path.is_dir():
            path = path / "index.html"
        if not path.is_file():
            self.send_error(404)
            return
        body = path.read_bytes()
        zipped = path.suffix in COMPRESSED and "gzip" in self.headers.get("Accept-Encoding", "")
        if zipped:
            body = compress(body)  # what benchmarks/weight.py counts
        self.send_response(200)
        self.send_header("Content-Type", self.guess_type(str(path)))
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "max-age=600")  # GitHub Pages' own
        if zipped:
            self.send_header("Content-Encoding", "gzip")
        self.end_headers()
        self.wfile.write(body)


def score_page(binary: Path, url: str, out: Path) -> dict:
    """One Lighthouse mobile run: the four category scores (0-100) and the failing audits' ids."""
    env = dict(os.environ, CHROME_PATH=os.environ.get("CHROME_PATH", "/usr/bin/chromium"))
    command = [str(binary), url, "--quiet", "--output=json", f"--output-path={out}",
               f"--only-categories={','.join(CATEGORIES)}", f"--chrome-flags={CHROME_FLAGS}"]
    if subprocess.run(command, env=env, stdin=subprocess.DEVNULL).returncode != 0:
        raise SystemExit(f"lighthouse benchmark: Lighthouse failed on {url}")
    report = json.loads(out.read_text(encoding="utf-8"))
    scores = {name: round(100 * (report["categories"][name]["score"] or 0)) for name in CATEGORIES}
    failing = sorted(ref["id"] for name in CATEGORIES for ref in report["categories"][name]["auditRefs"]
                     if ref["weight"] and (report["audits"][ref["id"]]["score"] or 0) < 0.9)
    metrics = {key: round(report["audits"][key]["numericValue"])
               for key in ("first-contentful-paint", "largest-contentful-paint", "total-blocking-time")}
    return {"scores": scores, "below_0.9": failing, "metrics_ms": metrics}


def bench_lighthouse(pages: list[str] | None = None) -> dict:
    """Build the site, serve it gzipped under a sub-path, and run Lighthouse mobile on every page."""
    binary = install()
    load_before = round(os.getloadavg()[0], 2)
    with tempfile.TemporaryDirectory(prefix="tm-lighthouse-") as tmp:
        site = Path(tmp) / "site"
        build = [sys.executable, "-m", "builder", "build", "--out", str(site), "--quiet", "--force"]
        if subprocess.run(build, cwd=ROOT).returncode != 0:
            raise SystemExit("lighthouse benchmark: the site does not build (errors above)")
        server = ThreadingHTTPServer(("127.0.0.1", 0), partial(GzipHandler, directory=str(site)))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            names = pages or sorted(p.name for p in site.glob("*.html"))
            rows = {name: score_page(binary, f"http://127.0.0.1:{server.server_port}{BASE}{name}",
                                     Path(tmp) / f"{name}.json") for name in names}
        finally:
            server.shutdown()
    lowest = {name: min(row["scores"][name] for row in rows.values()) for name in CATEGORIES}
    return {"lighthouse": VERSION, "load_average_1min": round(os.getloadavg()[0], 2),
            "load_average_1min_before": load_before, "pages": rows,
            "lowest": lowest, "meets_targets": all(lowest[name] >= TARGETS[name] for name in CATEGORIES),
            "targets": TARGETS}


def print_lighthouse(result: dict) -> None:
    """Table of the Lighthouse benchmark."""
    print(f"lighthouse {result['lighthouse']} mobile (1-minute load average {result.get('load_average_1min_before')}"
          f" before, {result['load_average_1min']} after)")
    print(f"  {'page':<24}" + "".join(f"{name[:13]:>15}" for name in CATEGORIES) + "   FCP/LCP/TBT ms   below 0.9")
    for page, row in result["pages"].items():
        metrics = "/".join(str(row["metrics_ms"][key]) for key in ("first-contentful-paint", "largest-contentful-paint",
                                                                   "total-blocking-time"))
        print(f"  {page:<24}" + "".join(f"{row['scores'][name]:>15}" for name in CATEGORIES)
              + f"   {metrics:<16} " + (", ".join(row["below_0.9"]) or "-"))
    verdict = "ok" if result["meets_targets"] else "BELOW target"
    print(f"  lowest: " + ", ".join(f"{name} {score}" for name, score in result["lowest"].items()) + f"  {verdict}")


if __name__ == "__main__":
    outcome = bench_lighthouse(sys.argv[1:] or None)
    print_lighthouse(outcome)
    sys.exit(0 if outcome["meets_targets"] else 1)
