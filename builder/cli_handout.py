"""The `handout` subcommand: the whole site as one PDF for a course pack (registered by builder/cli.py).

It builds the site into a temporary folder (or takes one already built, --site), composes every page into
one document (builder/handout.py) and prints it with headless Chromium (builder/handout_pdf.py). Bad
flags, a missing Chromium or an --out that cannot be written give one line and exit status 2; the previous
--out file is left as it was.
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from builder.cli_site import add_source_options

EXIT_ERROR = 2


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `handout` to a root parser's subcommands."""
    handout = subparsers.add_parser(
        "handout", help="print the whole site into one PDF for a course pack (needs Chromium)",
        description="Print every page, in the site's navigation order, into one PDF: a title page, the "
                    "contents with page numbers, each page as printed from a browser (charts whole, widgets "
                    "in their built state, links with their addresses) and the exercises' answers at the end.")
    handout.add_argument("--out", type=Path, default=Path("handout.pdf"), help="the PDF to write (default: handout.pdf)")
    handout.add_argument("--site", type=Path, default=None,
                         help="a site already built with `build` (default: build one into a temporary folder)")
    handout.add_argument("--paper", choices=("A4", "Letter"), default="A4", help="paper size (default: A4)")
    add_source_options(handout)
    handout.add_argument("--chromium", default=None, metavar="PATH",
                         help="the Chromium to print with (default: chromium on PATH, else Playwright's own)")
    handout.set_defaults(handler=run_handout)


def fail(message: str) -> int:
    """Print one error line; the exit status for it."""
    print(f"python -m builder handout: error: {message}", file=sys.stderr)
    return EXIT_ERROR


def check_out(out: Path) -> str:
    """Why `out` cannot be written ('' when it can)."""
    folder = out.parent if str(out.parent) else Path(".")
    if out.is_dir():
        return f"argument --out: {out} is a folder; give a file name, e.g. {out / 'handout.pdf'}"
    if not folder.is_dir():
        return f"argument --out: no such folder: {folder}"
    if not os.access(folder, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        return f"argument --out: cannot write {out} (permission denied)"
    return ""


def pack_date(site: dict[str, str], content: Path) -> str:
    """The pack's date, never the clock: site.toml's `released`, else SOURCE_DATE_EPOCH, else the date of
    the newest commit that changed the content folder ('' when there is none of these)."""
    if site.get("released"):
        return site["released"]
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "")
    if epoch.isdigit():
        return datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc).date().isoformat()
    if content.is_dir():
        try:
            found = subprocess.run(["git", "log", "-1", "--format=%cs", "--", "."], cwd=content, capture_output=True,
                                   text=True, timeout=30, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError):
            return ""
        if found.returncode == 0:
            return found.stdout.strip()
    return ""


def build_into(args: argparse.Namespace, folder: Path) -> str:
    """Build the site into `folder`; '' or the error (the build's own lines go to stderr first)."""
    from builder.build import SitePaths, build_site
    from builder.content import BuildFailed

    for name in ("content", "templates", "static"):
        if not getattr(args, name).is_dir():
            return f"argument --{name}: no such folder: {getattr(args, name)}"
    try:
        build_site(SitePaths(args.content, args.templates, args.static, folder), quiet=True, force=True)
    except BuildFailed as failure:
        for error in failure.errors:
            print(error, file=sys.stderr)
        return f"the site does not build: {len(failure.errors)} error(s) above"
    return ""


def run_handout(args: argparse.Namespace) -> int:
    """Build (or take) the site, compose it and print it to --out."""
    from builder.content import display_name, read_site_config
    from builder.handout import Pack, read_site
    from builder.handout_pdf import HandoutError, print_pack
    from builder.release import VersionError, project_version

    problem = check_out(args.out)
    if problem:
        return fail(problem)
    if args.site is not None and not (args.site / "index.html").is_file():
        return fail(f"argument --site: {args.site} holds no built site (no index.html); build one with "
                    "`python -m builder build`")
    settings_file = args.content / "site.toml"
    site_config, _ = read_site_config(settings_file, display_name(settings_file))
    with tempfile.TemporaryDirectory(prefix="handout-site-") as folder:
        site = args.site
        if site is None:
            site = Path(folder) / "site"
            problem = build_into(args, site)
            if problem:
                return fail(problem)
        url = site_config.get("url", "")
        url = url if not url or url.endswith("/") else url + "/"
        title, footer, chapters = read_site(site.resolve(), url)
        try:
            version = project_version()
        except VersionError as error:
            return fail(str(error))
        pack = Pack(title=title or site_config.get("title", ""), description=site_config.get("description", ""),
                    version=version, date=pack_date(site_config, args.content), url=url,
                    stylesheet=(site.resolve() / "static" / "site.css").as_uri(), footer=footer, chapters=chapters)
        try:
            pages = print_pack(pack, args.out, args.paper, args.chromium)
        except HandoutError as error:
            return fail(str(error))
    print(f"wrote {args.out}: {pages} pages, {len(chapters)} site pages ({args.paper})", file=sys.stderr)
    return 0
