"""The What changed page: version to version, which key configurations' numbers moved, by how much and why.

Each release's numbers come from its record (content/releases/<version>.toml, builder/releases.py); the first
section evaluates the key configurations with the current model and compares them with the latest record, so a
model change shows up here before it is released, and says which version number the build's pages carry
(catalogs["release"], builder.release.Release).
"""

from __future__ import annotations

import re
from typing import Any

from builder.model.units import GiB
from builder.release import Release
from builder.releases import Numbers, ReleaseRecord, Row, compare, evaluate, key_configurations


def gib(n_bytes: int) -> str:
    """'45.70 GiB'."""
    return f"{n_bytes / GiB:,.2f} GiB"


def change(before: int | None, after: int | None) -> str:
    """How one number moved: 'unchanged', '+1.25 GiB (+2.7 %)', 'new' or 'removed'."""
    if before is None:
        return "new"
    if after is None:
        return "removed"
    if before == after:
        return "unchanged"
    delta = after - before
    percent = f" ({delta / before * 100:+.1f} %)" if before else ""
    sign = "+" if delta > 0 else "−"
    return f"{sign}{abs(delta) / GiB:,.2f} GiB{percent}"


def anchor(version: str) -> str:
    """A release's section id: 'v0-1-0' (no dots, so that it is also a plain CSS identifier)."""
    return "v" + re.sub(r"[^A-Za-z0-9]+", "-", version)


def table_rows(rows: list[Row]) -> list[dict[str, Any]]:
    """Each row's numbers in GiB and their changes, for the template."""
    shown = []
    for row in rows:
        cells = {}
        for name in ("per_gpu_bytes", "need_bytes"):
            before = getattr(row.before, name) if row.before else None
            after = getattr(row.after, name) if row.after else None
            cells[name] = {"before": gib(before) if before is not None else "–",
                           "after": gib(after) if after is not None else "–",
                           "change": change(before, after), "moved": before != after}
        shown.append({"label": row.label, "moved": row.moved, **cells})
    return shown


def section(title: str, slug: str, note: str, before: dict[str, Numbers], after: dict[str, Numbers],
            labels: tuple[str, str]) -> dict[str, Any]:
    """One comparison: its heading, why, and every key configuration's two sets of numbers."""
    rows = compare(before, after)
    return {"title": title, "slug": slug, "note": note, "labels": labels, "rows": table_rows(rows),
            "moved": sum(row.moved for row in rows), "total": len(rows), "detail": ""}


def unreleased_detail(latest: ReleaseRecord, release: Release | None) -> str:
    """What the Now column is, beside the latest record: this build's numbers, and which version number they carry
    (a build that still carries the latest record's number writes its pages, and its pinned copy, with numbers
    that record does not hold)."""
    if release is not None and release.version == latest.version:
        return (f"The Now column is what this build computes. Its pages still carry the number {latest.version}, "
                f"so they, and their copy under v/{latest.version}/, show these numbers rather than the ones version "
                f"{latest.version} recorded on {latest.date}. The next version will record them, with the "
                "reason they moved.")
    built = f" (this build is version {release.version})" if release is not None else ""
    return f"The Now column is what this build computes{built}; its record will give the reason they moved."


def context(options: dict[str, Any], catalogs: dict[str, Any]) -> dict[str, Any]:
    """The unreleased section (current model against the latest record), then every recorded release, newest
    first, against the one before it; the first release against nothing."""
    records = catalogs.get("releases", [])
    configurations, errors = key_configurations(catalogs["model"], catalogs.get("site_presets", {}),
                                                catalogs.get("pages", []))
    if errors:
        raise ValueError(f"a key configuration cannot be evaluated: {errors[0]}")
    current = evaluate(configurations)
    sections = []
    if records:
        latest = records[-1]
        since = section(f"Since version {latest.version}: changes in no release yet", "unreleased",
                        "", latest.numbers, current, (f"Version {latest.version}", "Now"))
        since["detail"] = unreleased_detail(latest, catalogs.get("release")) if since["moved"] else ""
        sections.append(since)
    for previous, record in reversed(list(zip([None] + records[:-1], records))):
        if previous is None:
            continue
        sections.append(section(f"Version {previous.version} to {record.version} ({record.date})",
                                anchor(record.version), record.note, previous.numbers, record.numbers,
                                (f"Version {previous.version}", f"Version {record.version}")))
    first = records[0] if records else None
    return {"sections": sections,
            "first": {"version": first.version, "slug": anchor(first.version), "date": first.date,
                      "note": first.note,
                      "rows": [{"label": n.label, "per_gpu": gib(n.per_gpu_bytes), "need": gib(n.need_bytes)}
                               for n in first.numbers.values()]} if first else None}
