"""`python -m builder validate`: measure what PyTorch stores, compare with the model.

  --small   the quick CI set (a few dozen small cases; under 5 minutes on 2 cores)
  --write   measure the full set and write content/validation/*.json
  --committed  compare the committed content/validation/*.json without measuring
  --only KIND  measure only these kinds (comma-separated: activations, model_states,
            large_shapes, sharding, peak, op_lists, compiled, moe); with --write, only their files
            change (compiled: every layer under torch.compile, not in --small)
  --gpu     measure the peak cases on the CUDA GPU (needs torch with CUDA and a GPU);
            with --write, writes content/validation/peak_gpu.json
  --json    print the comparison as JSON
  --strict  exit 1 when any case leaves its tolerance or is unsupported by the model
Exit codes: 0 done, 1 strict and a case failed, 2 cannot run (e.g. torch missing).
"""

from __future__ import annotations

import argparse
import json
import sys

from builder.validate import MissingExtra, require_torch
from builder.validate.suite import KINDS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The validate subcommand's flags."""
    parser.add_argument("--small", action="store_true", help="only the quick CI set")
    parser.add_argument("--write", action="store_true", help="measure the full set and write content/validation/")
    parser.add_argument("--committed", action="store_true", help="compare the committed data, measure nothing")
    parser.add_argument("--only", metavar="KIND[,KIND]", default="",
                        help="measure only these kinds: " + ", ".join(KINDS))
    parser.add_argument("--gpu", action="store_true", help="measure the peak cases on the CUDA GPU")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a case leaves its tolerance")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")


def register(subparsers) -> None:
    """Add the `validate` subcommand to builder's CLI (call from builder/cli.py)."""
    parser = subparsers.add_parser("validate", help="measure real PyTorch memory on CPU and compare with the model",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    parser.set_defaults(handler=run_validate)


def load_committed() -> dict[str, dict]:
    """The committed result documents, by file name."""
    from builder.validate.results import VALIDATION_DIR, read_json

    return {path.name: read_json(path) for path in sorted(VALIDATION_DIR.glob("*.json"))}


def run_validate(args: argparse.Namespace) -> int:
    """Measure (or load), optionally write, compare and report; return the exit code."""
    if args.write and args.small:
        print("error: --write measures the full set; drop --small", file=sys.stderr)
        return 2
    only = tuple(kind for kind in args.only.split(",") if kind) or KINDS
    unknown = [kind for kind in only if kind not in KINDS]
    if unknown:
        print(f"error: --only: unknown kind {unknown[0]!r}; choose from {', '.join(KINDS)}", file=sys.stderr)
        return 2
    if args.gpu and (args.small or args.committed or args.only):
        print("error: --gpu measures the peak cases on the GPU; drop --small, --committed and --only", file=sys.stderr)
        return 2
    if args.committed:
        documents = load_committed()
        if not documents:
            print("error: no content/validation/*.json yet; run with --write first", file=sys.stderr)
            return 2
    else:
        try:
            torch = require_torch()
        except MissingExtra as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        torch.set_num_threads(max(1, args.threads))
        from builder.validate.suite import measure_gpu, measure_suite

        progress = (lambda message: print(message, file=sys.stderr)) if not args.json else None
        if args.gpu:
            if not torch.cuda.is_available():
                print(f"error: --gpu: no CUDA device visible to torch {torch.__version__} "
                      f"(built with CUDA {torch.version.cuda})", file=sys.stderr)
                return 2
            documents = measure_gpu(progress=progress)
        else:
            documents = measure_suite(small=args.small, progress=progress, only=only)
        if args.write:
            from builder.validate.results import VALIDATION_DIR, write_json

            for name, data in documents.items():
                write_json(VALIDATION_DIR / name, data)
            if progress:
                progress(f"wrote {len(documents)} files to {VALIDATION_DIR}")
    from builder.validate.compare import compare_documents, format_rows, summarise

    rows = compare_documents(documents)
    if args.json:
        print(json.dumps({"summary": summarise(rows), "rows": [row.as_dict() for row in rows]}, indent=1, sort_keys=True))
    else:
        print(format_rows(rows))
    failing = summarise(rows)["fail"] + summarise(rows)["unsupported"]
    return 1 if args.strict and failing else 0


def main(argv: list[str] | None = None) -> int:
    """Standalone entry point (tests, or `python -m builder.validate.cli`)."""
    parser = argparse.ArgumentParser(prog="builder validate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return run_validate(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
