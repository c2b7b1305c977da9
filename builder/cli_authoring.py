"""The `new` and `authoring-guide` subcommands (registered on the root CLI by builder/cli.py).

`python -m builder new PAGE-SLUG` writes content/PAGE-SLUG.md, a page that builds as it is (one chart,
one exercise); `python -m builder authoring-guide` rewrites docs/AUTHORING.md's generated blocks from
the code's registries (builder/authoring.py), and `--check` only says whether it is up to date.
Errors are one line, 'path:line: message' or naming the flag, with exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXIT_ERROR = 2
EXIT_OUT_OF_DATE = 1


def page_slug(text: str) -> str:
    """argparse type: a page slug, lowercase words joined by '-'."""
    from builder.content import SLUG_PATTERN

    if not SLUG_PATTERN.match(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a page slug: use lowercase letters and digits in words "
                                         "joined by '-', e.g. kv-cache")
    return text


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `new` and `authoring-guide` to a root parser's subcommands."""
    new = subparsers.add_parser("new", help="write a new page's skeleton (one chart, one exercise) into content/",
                                description="Write content/PAGE-SLUG.md: front matter with one chart and one "
                                            "exercise (the first model and GPU of the catalogs), placed in a body "
                                            "that builds as it is. See docs/AUTHORING.md.")
    new.add_argument("slug", type=page_slug, metavar="PAGE-SLUG", help="the page's slug and file name, e.g. kv-cache")
    new.add_argument("--title", default=None, help="the page's title (default: from the slug)")
    new.add_argument("--content", type=Path, default=Path("content"), help="the content folder (default: content)")
    new.set_defaults(handler=run_new)
    guide = subparsers.add_parser("authoring-guide", help="regenerate docs/AUTHORING.md's reference from the code",
                                  description="Rewrite the generated blocks of the authoring guide from the code's "
                                              "registries (front matter, charts, widgets, exercises, catalogs).")
    guide.add_argument("--guide", type=Path, default=Path("docs/AUTHORING.md"),
                       help="the guide to update (default: docs/AUTHORING.md)")
    guide.add_argument("--check", action="store_true",
                       help="change nothing; exit 1 when the guide differs from what would be generated")
    guide.set_defaults(handler=run_guide)


def fail(message: str) -> int:
    """Print one error line and return the error status."""
    print(f"error: {message}", file=sys.stderr)
    return EXIT_ERROR


def run_new(args: argparse.Namespace) -> int:
    """Write content/SLUG.md, refusing an existing file or slug, with the next free navigation order."""
    from builder.authoring import page_skeleton
    from builder.catalog import CatalogError, load_gpus, load_models
    from builder.content import display_name, read_pages

    content: Path = args.content
    if not content.is_dir():
        return fail(f"--content {content}: no such folder")
    target = content / f"{args.slug}.md"
    if target.exists():
        return fail(f"{display_name(target)} already exists; edit it, or pick another PAGE-SLUG")
    pages, _ = read_pages(content)  # a broken page is the build's to report; here only slugs and orders count
    taken = next((page for page in pages if page.slug == args.slug), None)
    if taken is not None:
        return fail(f"{taken.path}: already has slug: {args.slug}; pick another PAGE-SLUG")
    if args.title is not None and not args.title.strip():
        return fail("argument --title: must not be empty")
    try:
        models, gpus = load_models(content / "models.toml"), load_gpus(content / "gpus.toml")
    except CatalogError as error:
        return fail(str(error))
    if not models or not gpus:
        empty = "models.toml" if not models else "gpus.toml"
        return fail(f"{display_name(content / empty)}:1: the catalog is empty; a new page's chart needs a model and a GPU")
    order = max((page.order for page in pages), default=0) + 1
    model_id, model = next(iter(models.items()))
    text = page_skeleton(args.slug, order=order, model=model_id, gpu=next(iter(gpus)),
                         title=args.title.strip() if args.title else None,
                         model_name=model.extra.get("display", model_id),
                         seq_len=min(2048, model.learned_positions or 2048))  # GPT-2 takes 1,024 tokens
    try:
        with target.open("x", encoding="utf-8") as handle:  # 'x': never overwrite, even a file made just now
            handle.write(text)
    except FileExistsError:
        return fail(f"{display_name(target)} already exists; edit it, or pick another PAGE-SLUG")
    except OSError as error:
        return fail(f"{display_name(target)}: cannot write ({error.strerror})")
    print(f"wrote {display_name(target)} (order {order} in the navigation); preview it with `python -m builder serve`. A topic page needs at least two exercises "
          "and 3-5 takeaways (tests/test_exercises.py); see docs/AUTHORING.md")
    return 0


def run_guide(args: argparse.Namespace) -> int:
    """Regenerate the guide's blocks in place (or, with --check, compare only)."""
    from builder.authoring import GuideError, generate_guide

    path: Path = args.guide
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        return fail(f"argument --guide: {path}: cannot read ({error.strerror})")
    try:
        generated = generate_guide(text, str(path))
    except GuideError as error:
        print(error, file=sys.stderr)
        return EXIT_ERROR
    if generated == text:
        print(f"{path} is up to date")
        return 0
    if args.check:
        print(f"{path} is out of date: run `python -m builder authoring-guide`", file=sys.stderr)
        return EXIT_OUT_OF_DATE
    path.write_text(generated, encoding="utf-8")
    print(f"wrote {path}")
    return 0
