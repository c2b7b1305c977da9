"""Measurements as data: versions, machine, and every case's inputs and bytes, in deterministic JSON."""

from __future__ import annotations

import json
import platform
from pathlib import Path
from typing import Any

VALIDATION_DIR = Path(__file__).resolve().parents[2] / "content" / "validation"
SCHEMA_VERSION = 1


def environment() -> dict[str, str]:
    """torch, transformers and Python versions, and the machine the numbers come from."""
    import torch
    import transformers

    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": cpu_name(),
    }


def cpu_name() -> str:
    """The CPU model from /proc/cpuinfo, else platform.processor()."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def document(kind: str, description: str, cases: list[dict[str, Any]], env: dict[str, str]) -> dict[str, Any]:
    """One results file: what it holds, how it was measured, where, and the cases sorted by name."""
    return {
        "schema": SCHEMA_VERSION,
        "kind": kind,
        "description": description,
        "environment": env,
        "cases": sorted(cases, key=lambda case: case["name"]),
    }


def write_json(path: Path, data: Any) -> None:
    """Write `data` as sorted, indented JSON with a trailing newline (byte-identical on rerun)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def read_json(path: Path) -> Any:
    """Read one results file."""
    return json.loads(path.read_text(encoding="utf-8"))
