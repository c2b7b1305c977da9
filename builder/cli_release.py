"""The `release` subcommand (registered on the root CLI by builder/cli.py).

`python -m builder release` evaluates the key configurations with the current model and prints their
numbers beside the latest release record's; `--write --note "why"` records them as this version's release
(content/releases/<version>.toml, the version from pyproject.toml, the date from content/site.toml's
`released`), which the What changed page compares. `--check` is the deploy's guard: it fails (exit 1) where this
version is already recorded with other numbers, since building would then rewrite the pinned copy under
site/v/<version>/ that course material links to. Errors are one line naming the file and field or the flag, with
exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from builder.cli_authoring import EXIT_ERROR, fail  # the subcommands' one-line error

FOLDER = "releases"


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `release` to a root parser's subcommands."""
    release = subparsers.add_parser(
        "release", help="show, or record, the key configurations' numbers for this version",
        description="Evaluate the key configurations (the calculator's starting points and every preset) with the "
                    "current model and show them beside the latest release record; with --write, record them as "
                    "this version's release in content/releases/<version>.toml.")
    release.add_argument("--content", type=Path, default=Path("content"), help="the content folder (default: content)")
    release.add_argument("--write", action="store_true",
                         help="write content/releases/<version>.toml (version: pyproject.toml; date: site.toml's "
                              "`released`)")
    release.add_argument("--note", default=None, help="with --write: one line saying why numbers moved")
    release.add_argument("--replace", action="store_true", help="with --write: replace this version's existing record")
    release.add_argument("--check", action="store_true",
                         help="exit 1 where this version is recorded with numbers the current model no longer gives "
                              "(a build would change its pinned pages): raise the version and record it first")
    release.set_defaults(handler=run_release)


def run_release(args: argparse.Namespace) -> int:
    """Print the current numbers and their change since the latest record; write this version's record."""
    from builder.build import SitePaths, gather_content
    from builder.content import display_name
    from builder.releases import ReleaseRecord, compare, evaluate, key_configurations, record_text
    from builder.widgets.what_changed import change, gib

    if not args.content.is_dir():
        return fail(f"--content {args.content}: no such folder")
    if args.check and args.write:
        return fail("argument --check: not with --write")
    if (args.note is not None or args.replace) and not args.write:
        return fail(f"argument {'--note' if args.note is not None else '--replace'}: only with --write")
    if args.write and not (args.note or "").strip():
        return fail("argument --note: --write needs one line saying why numbers moved, e.g. --note \"First release\"")
    gathered, errors = gather_content(SitePaths(args.content, Path("templates"), Path("static"), Path("site")))
    if errors:
        for error in errors:
            print(error, file=sys.stderr)
        return EXIT_ERROR
    configurations, errors = key_configurations(gathered.models, gathered.presets, gathered.pages)
    if errors:
        return fail(str(errors[0]))
    numbers = evaluate(configurations)
    release = gathered.release
    latest = gathered.releases[-1] if gathered.releases else None
    base = f"version {latest.version}" if latest else "no earlier record"
    print(f"Key configurations under the current model (version {release.version}), against {base}:")
    for row in compare(latest.numbers if latest else {}, numbers):
        after = row.after
        sums = f"sum {gib(after.per_gpu_bytes):>12}  need {gib(after.need_bytes):>12}" if after else "removed"
        value = lambda numbers, field: getattr(numbers, field) if numbers else None  # noqa: E731
        moved = "" if latest is None else "  " + ", ".join(
            f"{name} {change(value(row.before, field), value(after, field))}"
            for name, field in (("sum", "per_gpu_bytes"), ("need", "need_bytes")))
        print(f"  {row.key:<36} {sums}{moved}")
    if args.check:
        return check_pinned(release.version, gathered.releases, numbers)
    if not args.write:
        return 0
    site_toml = args.content / "site.toml"
    if not release.date:
        return fail(f"{display_name(site_toml)}:1: released: give this version's release date (YYYY-MM-DD) "
                    "before recording it")
    target = args.content / FOLDER / f"{release.version}.toml"
    if target.exists() and not args.replace:
        return fail(f"{display_name(target)}:1: version {release.version} is already recorded: raise [project] "
                    "version in pyproject.toml for a new release, or pass --replace")
    record = ReleaseRecord(release.version, release.date, " ".join(args.note.split()), numbers)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(record_text(record), encoding="utf-8")
    print(f"wrote {display_name(target)}")
    return 0


def check_pinned(version: str, records: list, numbers: dict) -> int:
    """0 where `version` has no record yet, or its record holds `numbers`; else 1, naming what moved."""
    from builder.releases import compare

    record = next((r for r in records if r.version == version), None)
    if record is None:
        print(f"version {version} has no record yet: its pinned pages will be written as the model gives them now")
        return 0
    moved = [row.key for row in compare(record.numbers, numbers) if row.moved]
    if not moved:
        print(f"version {version}: the current model gives the numbers it recorded")
        return 0
    print(f"release --check: version {version} is recorded (content/{FOLDER}/{version}.toml) and the model now moves "
          f"{len(moved)} of its numbers ({', '.join(moved[:3])}{', ...' if len(moved) > 3 else ''}); a build would "
          "rewrite its pinned pages. Raise [project] version in pyproject.toml and run `python -m builder release "
          "--write --note \"why\"`", file=sys.stderr)
    return 1
