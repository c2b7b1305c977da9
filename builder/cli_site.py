"""The `build` and `serve` subcommands (registered on the root CLI by builder/cli.py)."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

EXIT_CONTENT_ERROR = 2


def add_source_options(parser: argparse.ArgumentParser) -> None:
    """--content, --templates and --static: the site's sources, shared by build, serve and handout."""
    parser.add_argument("--content", type=Path, default=Path("content"), help="Markdown pages and data (default: content)")
    parser.add_argument("--templates", type=Path, default=Path("templates"), help="Jinja templates (default: templates)")
    parser.add_argument("--static", type=Path, default=Path("static"), help="CSS, scripts (default: static)")


def add_path_options(parser: argparse.ArgumentParser) -> None:
    """The sources (add_source_options), --out and --quiet, shared by build and serve."""
    add_source_options(parser)
    parser.add_argument("--out", type=Path, default=Path("site"), help="output folder, replaced at the end (default: site)")
    parser.add_argument("--quiet", action="store_true", help="print errors only")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `build` and `serve` to a root parser's subcommands."""
    build = subparsers.add_parser("build", help="build the site into site/",
                                  description="Build the static site. Errors: one 'path:line: message' per line, exit 2.")
    add_path_options(build)
    build.add_argument("--force", action="store_true", help="rebuild even when no input changed")
    build.add_argument("--no-answers", dest="answers", action="store_false",
                       help="the student edition: exercises without their answers (left out of the HTML)")
    build.add_argument("--url", type=site_url, default=None,
                       help="the site's public address, e.g. https://example.org/training-memory/: citations pin "
                            "to <url>v/<version>/<page>.html (default: site.toml's `url`)")
    build.set_defaults(handler=run_build)
    serve = subparsers.add_parser("serve", help="preview the site on 127.0.0.1, rebuild on change, reload open pages",
                                  description="Serve the site locally; rebuild when content, templates or static "
                                              "files change; open pages reload themselves after a build that "
                                              "changed them, and show build errors over the page.")
    add_path_options(serve)
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to listen on (default: 127.0.0.1, this machine only)")
    serve.add_argument("--port", type=port_number, default=8000, help="port to listen on, 0 for any free one (default: 8000)")
    serve.add_argument("--base", type=base_path, default="/",
                       help="URL sub-path to serve under, e.g. /training-memory/ (default: /)")
    serve.add_argument("--poll", action="store_true", help="poll for changes instead of file events (network drives)")
    serve.add_argument("--no-reload", dest="live", action="store_false",
                       help="serve the pages exactly as built: no live reload, no error overlay")
    serve.set_defaults(handler=run_serve)


BASE_SEGMENT = re.compile(r"[A-Za-z0-9._~-]+")


def base_path(text: str) -> str:
    """argparse type: a URL sub-path of plain segments ('/training-memory/', 'docs/v1')."""
    segments = [segment for segment in text.strip("/").split("/")] if text.strip("/") else []
    if any(not BASE_SEGMENT.fullmatch(s) or s in (".", "..") for s in segments):
        raise argparse.ArgumentTypeError(f"{text!r} is not a URL sub-path: use segments of letters, digits, "
                                         "'-', '_', '.' and '~', e.g. /training-memory/")
    return "/" + "".join(f"{segment}/" for segment in segments)


def site_url(text: str) -> str:
    """argparse type: the site's public http(s) address, ending in '/' (added when missing)."""
    from builder.content import check_site_url

    address = text if text.endswith("/") else text + "/"
    problem = check_site_url(address)
    if problem:
        raise argparse.ArgumentTypeError(f"{text!r} is not an http(s) address such as "
                                         "https://example.org/training-memory/")
    return address


def port_number(text: str) -> int:
    """argparse type: a TCP port, 0 to 65535."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (0 to 65535)")
    return port


def site_paths(args: argparse.Namespace):
    """SitePaths from parsed options."""
    from builder.build import SitePaths

    return SitePaths(content=args.content, templates=args.templates, static=args.static, out=args.out)


def check_folders(args: argparse.Namespace) -> list[str]:
    """Errors for input folders that do not exist, naming the flag."""
    return [f"--{name} {getattr(args, name)}: no such folder" for name in ("content", "templates", "static")
            if not getattr(args, name).is_dir()]


def run_build(args: argparse.Namespace) -> int:
    """Build once; print errors as 'path:line: message' and return 2 on content errors."""
    from builder.build import build_site
    from builder.content import BuildFailed
    from builder.gcpolicy import one_build

    problems = check_folders(args)
    if problems:
        print("\n".join(f"error: {p}" for p in problems), file=sys.stderr)
        return EXIT_CONTENT_ERROR
    try:
        with one_build():  # the build's imports done: collect less (builder.gcpolicy)
            build_site(site_paths(args), quiet=args.quiet, force=getattr(args, "force", False),
                       answers=getattr(args, "answers", True), url=getattr(args, "url", None))
    except BuildFailed as failure:
        print_errors(failure)
        return EXIT_CONTENT_ERROR
    return 0


def print_errors(failure) -> None:
    """One line per error on stderr, then a count."""
    for error in failure.errors:
        print(error, file=sys.stderr)
    print(f"build failed: {len(failure.errors)} error(s); the previous site was left as it was", file=sys.stderr)


def run_serve(args: argparse.Namespace) -> int:
    """Build, serve on 127.0.0.1 and rebuild on change until interrupted."""
    from builder.serve import serve_site

    problems = check_folders(args)
    if problems:
        print("\n".join(f"error: {p}" for p in problems), file=sys.stderr)
        return EXIT_CONTENT_ERROR
    return serve_site(site_paths(args), port=args.port, base=args.base, quiet=args.quiet, host=args.host,
                      poll=args.poll, live=args.live)


def make_parser() -> argparse.ArgumentParser:
    """A root parser with only the site subcommands (for tests and `python -m builder.cli_site`)."""
    parser = argparse.ArgumentParser(prog="python -m builder", description="Build and preview the site.")
    register(parser.add_subparsers(dest="command", required=True))
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run `build` or `serve` with `argv`; returns the exit code."""
    args = make_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
