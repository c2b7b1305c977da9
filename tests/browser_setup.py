"""Make sure the browser tests have what they need: Chromium, Java, axe-core and the Nu HTML checker.

Run as `python -m tests.browser_setup` (the Makefile's `browser` target). Idempotent: when
everything is already in place it only checks paths and returns in well under a second.

- Chromium: Debian's /usr/bin/chromium; installed with apt-get when running as root, else
  Playwright's own download (which fails on machines that reach only package registries).
- Java: needed by the Nu HTML checker; a headless JRE from apt-get when `java` is missing.
- axe-core and vnu-jar: pinned npm packages fetched with `npm pack`, checked against their
  pinned sha512 integrity, unpacked under `.tools/`.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOLS_DIR = ROOT / ".tools"
DEBIAN_CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_APT_PACKAGES = ["chromium", "fonts-dejavu-core", "fonts-dejavu-extra", "fonts-liberation"]
JAVA_APT_PACKAGES = ["default-jre-headless"]


@dataclass(frozen=True)
class NpmTool:
    """One file taken out of a pinned npm package."""

    name: str
    version: str
    integrity: str
    member: str

    @property
    def path(self) -> Path:
        """Where the extracted file lives under .tools/."""
        return TOOLS_DIR / f"{self.name}-{self.version}" / Path(self.member).name


AXE = NpmTool(
    name="axe-core",
    version="4.14.1",
    integrity="sha512-FHfa+lmNjQZfJz1q8wKqIDwC6DExcHt/pkjNQb09a3NPjCKg2rhu5qb2S4r76ASyFNNtuFooJpZe37OgudVGtQ==",
    member="package/axe.min.js",
)
VNU = NpmTool(
    name="vnu-jar",
    version="26.9.27",
    integrity="sha512-TkQd5DFfOaWC9ebtvozTsrH2Vaod3jYg+vrOeREzIXxBexLz9+rS2DNtjn7+RPUiZhgli0SghgBX6RJRNea0KA==",
    member="package/build/dist/vnu.jar",
)


class SetupError(RuntimeError):
    """A required tool could not be made available."""


def say(message: str) -> None:
    """Print one progress line."""
    print(f"browser_setup: {message}", flush=True)


def find_chromium() -> str | None:
    """Return the Chromium executable the tests should use, or None when there is none."""
    if DEBIAN_CHROMIUM.exists():
        return str(DEBIAN_CHROMIUM)
    return find_playwright_chromium()


def find_playwright_chromium() -> str | None:
    """Return the Chromium Playwright downloaded itself, if it exists."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    with sync_playwright() as playwright:
        path = playwright.chromium.executable_path
    return path if path and Path(path).exists() else None


def find_java() -> str | None:
    """Return the java executable, or None."""
    return shutil.which("java")


def is_root() -> bool:
    """Tell whether this process may install Debian packages."""
    return hasattr(os, "geteuid") and os.geteuid() == 0


def can_apt() -> bool:
    """Tell whether apt-get is usable here."""
    return is_root() and shutil.which("apt-get") is not None


def run_command(command: list[str], **kwargs) -> None:
    """Run a command, raising SetupError with its output when it fails."""
    say("$ " + " ".join(command))
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    result = subprocess.run(command, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-20:])
        raise SetupError(f"command failed ({result.returncode}): {' '.join(command)}\n{tail}")


def apt_install(packages: list[str]) -> None:
    """Install Debian packages non-interactively."""
    run_command(["apt-get", "update", "-q"])
    run_command(["apt-get", "install", "-y", "-q", *packages])


def ensure_system_packages() -> None:
    """Install Chromium and Java when missing, with one apt-get run where possible."""
    wanted: list[str] = []
    if find_chromium() is None:
        wanted += CHROMIUM_APT_PACKAGES
    if find_java() is None:
        wanted += JAVA_APT_PACKAGES
    if wanted and can_apt():
        apt_install(wanted)
    if find_chromium() is None:
        say("no Debian Chromium; trying Playwright's own download")
        try:
            run_command([sys.executable, "-m", "playwright", "install", "chromium"])
        except SetupError as error:
            raise SetupError(f"{error}\nPlaywright's download failed; as root, `apt-get install chromium` instead") from None
    chromium = find_chromium()
    if chromium is None:
        raise SetupError("Chromium is not available (install Debian's 'chromium' package as root)")
    if find_java() is None:
        raise SetupError("java is not available (install Debian's 'default-jre-headless' as root)")
    say(f"chromium: {chromium}")
    say(f"java: {find_java()}")


def integrity_of(path: Path) -> str:
    """Return the npm-style sha512 integrity string of a file."""
    digest = hashlib.sha512(path.read_bytes()).digest()
    return "sha512-" + base64.b64encode(digest).decode()


def npm_pack(tool: NpmTool, workdir: Path) -> Path:
    """Download a pinned npm package tarball into workdir and return its path."""
    npm = shutil.which("npm")
    if npm is None:
        raise SetupError(f"npm is needed to fetch {tool.name}@{tool.version} (install Node.js and npm)")
    run_command([npm, "pack", f"{tool.name}@{tool.version}", "--pack-destination", str(workdir), "--silent"])
    tarballs = sorted(workdir.glob("*.tgz"))
    if len(tarballs) != 1:
        raise SetupError(f"npm pack {tool.name}@{tool.version} produced {len(tarballs)} tarballs")
    return tarballs[0]


def extract_member(tarball: Path, member: str, target: Path) -> None:
    """Copy one file out of a tarball to target, atomically."""
    with tarfile.open(tarball, "r:gz") as archive:
        source = archive.extractfile(member)
        if source is None:
            raise SetupError(f"{tarball.name} has no file {member}")
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".part")
        with source, open(partial, "wb") as out:
            shutil.copyfileobj(source, out)
    partial.replace(target)


def ensure_npm_tool(tool: NpmTool) -> Path:
    """Fetch, verify and unpack one pinned npm tool unless it is already there."""
    if tool.path.exists():
        return tool.path
    with tempfile.TemporaryDirectory(prefix="npm-pack-") as tmp:
        tarball = npm_pack(tool, Path(tmp))
        actual = integrity_of(tarball)
        if actual != tool.integrity:
            raise SetupError(f"{tool.name}@{tool.version}: integrity {actual} does not match pinned {tool.integrity}")
        extract_member(tarball, tool.member, tool.path)
    return tool.path


def ensure_tools() -> None:
    """Fetch axe-core and the Nu HTML checker into .tools/."""
    for tool in (AXE, VNU):
        path = ensure_npm_tool(tool)
        say(f"{tool.name} {tool.version}: {path.relative_to(ROOT)}")


def main() -> int:
    """Make every browser-test prerequisite available; exit non-zero with a reason when not."""
    try:
        ensure_system_packages()
        ensure_tools()
    except SetupError as error:
        print(f"browser_setup: FAILED: {error}", file=sys.stderr, flush=True)
        return 1
    say("ready")
    return 0


if __name__ == "__main__":
    sys.exit(main())
