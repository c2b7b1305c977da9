"""The pinned snapshot: every file of the latest site again under v/<version>/, and earlier snapshots kept.

Links inside the site are relative, so the same tree one folder pair deeper works unchanged; only the
pages differ (rendered with the snapshot banner and a canonical link to the latest page). Earlier
versions cannot be rebuilt (their model is gone), so a rebuild carries over whatever
<out>/v/<other version>/ already holds, byte for byte.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from builder.release import SNAPSHOTS, Release


def snapshot_outputs(outputs: dict[str, bytes], pages: dict[str, bytes], release: Release) -> dict[str, bytes]:
    """The snapshot's files: each page's snapshot rendering, every other file as it is in the latest site."""
    return {f"{release.folder}/{name}": pages.get(name, data) for name, data in sorted(outputs.items())}


def earlier_snapshots(out: Path, release: Release) -> list[str]:
    """The snapshot folders already in the output other than this release's: ['v/0.0.9', ...]."""
    folder = out / SNAPSHOTS
    if not folder.is_dir():
        return []
    return sorted(f"{SNAPSHOTS}/{child.name}" for child in folder.iterdir()
                  if child.is_dir() and not child.name.startswith(".") and child.name != release.version)


def carry_over(out: Path, staging: Path, folders: list[str]) -> None:
    """Copy `folders` (relative paths) from the current output into the new one, file times and bytes kept."""
    for relative in folders:
        shutil.copytree(out / relative, staging / relative, copy_function=shutil.copy2, symlinks=True)
