"""Release records: the key configurations' published numbers, as each release recorded them.

The model of an earlier release is gone by the time a later one builds, so each release writes down what it
published (content/releases/<version>.toml, by `python -m builder release --write`): for every key
configuration, its label, the per-GPU sum of parts and the need (the peak of a training step, or the serving
steady state), in bytes, with the date and a one-line note saying why numbers moved. The What changed page
compares consecutive records, and the current model against the latest one.

Key configurations: the calculator's named starting points and every preset in content (presets.toml and
each page's front matter).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.content import ContentError, Page, Preset, check_release_date, display_name, table_line
from builder.release import VERSION, Release

RECORD_KEYS = {"version": str, "date": str, "note": str, "configurations": dict}
NUMBER_KEYS = {"label": str, "per_gpu_bytes": int, "need_bytes": int}


@dataclass(frozen=True)
class Numbers:
    """One key configuration's published numbers."""

    label: str
    per_gpu_bytes: int  # the sum of parts, per GPU
    need_bytes: int  # what the run needs: a training step's peak, or serving's steady state


@dataclass(frozen=True)
class ReleaseRecord:
    """One release's record: its version, date, note and the key configurations' numbers."""

    version: str
    date: str
    note: str
    numbers: dict[str, Numbers]
    path: str = ""


# Key configurations -----------------------------------------------------------------------

def key_configurations(models: dict[str, Any], presets: dict[str, Preset], pages: list[Page]
                       ) -> tuple[list[tuple[str, str, Any]], list[ContentError]]:
    """(key, label, Config) of every key configuration, in a stable order: the calculator's starting points,
    then the site-wide presets, then each page's presets in page order."""
    from builder.content import BarDefinition
    from builder.exercises import describe_settings
    from builder.grids import make_config
    from builder.widgets.calculator import config_from_state, start_state, starts

    found, errors = [], []
    for key, label, _, _ in starts(models):
        found.append((f"calculator/{key}", f"Calculator start: {label}", config_from_state(
            start_state(key, models, ""), models)))
    sources = [("", "", presets)] + [(page.slug, page.nav_title or page.title, page.presets)
                                     for page in sorted(pages, key=lambda p: (p.order, p.slug))]
    for slug, title, group in sources:
        for name, preset in sorted(group.items()):
            bar = BarDefinition(label=name, preset=name, settings={}, lines={}, line=preset.line)
            config, config_errors = make_config(bar, presets | group, models, preset.path, f"preset {name!r}")
            errors += config_errors
            if config is None:
                continue
            words = ", ".join(f"{word} {value}" for word, value in describe_settings(preset.settings, config))
            where = f"{title} page" if title else "Site-wide"
            found.append((f"preset/{slug + '/' if slug else ''}{name}", f"{where} preset: {words}", config))
    return found, errors


def evaluate(configurations: list[tuple[str, str, Any]]) -> dict[str, Numbers]:
    """Each key configuration's numbers under the current model."""
    from builder.model.peak import assess

    numbers = {}
    for key, label, config in configurations:
        breakdown, needed = assess(config)
        numbers[key] = Numbers(label=label, per_gpu_bytes=breakdown.total, need_bytes=needed.bytes)
    return numbers


# Records ------------------------------------------------------------------------------------

def version_key(version: str) -> tuple:
    """Sort key: numeric parts as numbers; a pre-release ('0.2.0rc1') before its release ('0.2.0')."""
    match = re.match(r"\d+(?:\.\d+)*", version)
    head = match.group(0) if match else ""
    tail = version[len(head):]
    return tuple(int(part) for part in head.split(".") if part), tail == "", tail


def line_of(text: str, pattern: str) -> int:
    """First line of `text` matching `pattern` (1 when none)."""
    for number, line in enumerate(text.splitlines(), start=1):
        if re.search(pattern, line):
            return number
    return 1


def key_line(text: str, key: str, field: str | None = None) -> int:
    """Line of `[configurations."key"]` (or of `field =` inside it)."""
    return table_line(text, re.compile(r'^\[\s*configurations\s*\.\s*"?' + re.escape(key) + r'"?\s*\]'), field)


def read_record(path: Path, release: Release | None = None) -> tuple[ReleaseRecord | None, list[ContentError]]:
    """One release record, validated: every problem names the file, the line and the field."""
    display = display_name(path)
    try:
        text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text)
    except OSError as error:
        return None, [ContentError(display, 1, f"cannot read file: {error.strerror}")]
    except tomllib.TOMLDecodeError as error:
        match = re.search(r"line (\d+)", str(error))
        return None, [ContentError(display, int(match.group(1)) if match else 1, f"invalid TOML: {error}")]
    errors = []

    def error(line: int, message: str) -> None:
        errors.append(ContentError(display, line, f"release record: {message}"))

    for key in data:
        if key not in RECORD_KEYS:
            error(line_of(text, rf"^\s*\[?\s*{re.escape(key)}\b"), f"unknown field {key!r} (known: "
                  f"{', '.join(RECORD_KEYS)})")
    for key, kind in RECORD_KEYS.items():
        if key not in data:
            error(1, f"missing field {key!r}")
        elif not isinstance(data[key], kind):
            error(line_of(text, rf"^\s*\[?\s*{re.escape(key)}\b"), f"{key}: must be "
                  f"{'a table' if kind is dict else 'text'}, got {data[key]!r}")
    if errors:
        return None, errors
    version, date, note = data["version"], data["date"], data["note"]
    if version != path.stem or not VERSION.fullmatch(version):
        error(line_of(text, r"^\s*version\s*="), f"version: must be the file's name, {path.stem!r}, and a version "
                                                  f"such as \"0.1.0\", got {version!r}")
    problem = check_release_date(date)
    if problem:
        error(line_of(text, r"^\s*date\s*="), f"date: {problem}")
    elif release is not None and version == release.version and release.date and date != release.date:
        error(line_of(text, r"^\s*date\s*="), f"date: {date} is not site.toml's `released` ({release.date}) "
                                               f"for this version")
    if not note.strip():
        error(line_of(text, r"^\s*note\s*="), "note: give one line saying why numbers moved (or that it is the "
                                               "first release)")
    numbers = {}
    for key, entry in data["configurations"].items():
        if not isinstance(entry, dict):
            error(key_line(text, key), f"configurations.{key}: must be a table")
            continue
        entry_errors = len(errors)
        for field in entry:
            if field not in NUMBER_KEYS:
                error(key_line(text, key, field), f"configurations.{key}: unknown field {field!r} (known: "
                                                  f"{', '.join(NUMBER_KEYS)})")
        for field, kind in NUMBER_KEYS.items():
            value = entry.get(field)
            if value is None:
                error(key_line(text, key), f"configurations.{key}: missing field {field!r}")
            elif kind is int and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                error(key_line(text, key, field), f"configurations.{key}.{field}: must be a whole number of "
                                                  f"bytes, 0 or more, got {value!r}")
            elif kind is str and (not isinstance(value, str) or not value.strip()):
                error(key_line(text, key, field), f"configurations.{key}.{field}: must be text, got {value!r}")
        if len(errors) == entry_errors:
            numbers[key] = Numbers(entry["label"], entry["per_gpu_bytes"], entry["need_bytes"])
    if errors:
        return None, errors
    return ReleaseRecord(version, date, note.strip(), numbers, display), []


def read_records(folder: Path, release: Release | None = None) -> tuple[list[ReleaseRecord], list[ContentError]]:
    """Every content/releases/*.toml, oldest version first (an absent folder: none)."""
    if not folder.is_dir():
        return [], []
    records, errors = [], []
    for path in sorted(folder.glob("*.toml")):
        record, record_errors = read_record(path, release)
        errors += record_errors
        if record is not None:
            records.append(record)
    return sorted(records, key=lambda record: version_key(record.version)), errors


def toml_string(text: str) -> str:
    """A TOML basic string."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def record_text(record: ReleaseRecord) -> str:
    """The record as the TOML `release --write` commits (keys in a stable order)."""
    lines = ["# The key configurations' numbers as this release published them, written by",
             "# `python -m builder release --write`; the What changed page compares these records.",
             f"version = {toml_string(record.version)}", f"date = {toml_string(record.date)}",
             f"note = {toml_string(record.note)}"]
    for key, numbers in record.numbers.items():
        lines += ["", f"[configurations.{toml_string(key)}]", f"label = {toml_string(numbers.label)}",
                  f"per_gpu_bytes = {numbers.per_gpu_bytes}", f"need_bytes = {numbers.need_bytes}"]
    return "\n".join(lines) + "\n"


# Comparison ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Row:
    """One key configuration between two sets of numbers (None: absent on that side)."""

    key: str
    label: str
    before: Numbers | None
    after: Numbers | None

    @property
    def moved(self) -> bool:
        """True when a number changed, or the configuration was added or removed."""
        if self.before is None or self.after is None:
            return True
        return (self.before.per_gpu_bytes, self.before.need_bytes) != (self.after.per_gpu_bytes, self.after.need_bytes)


def compare(before: dict[str, Numbers], after: dict[str, Numbers]) -> list[Row]:
    """Every key configuration of either side: the later side's order, then the ones it no longer has."""
    keys = list(after) + [key for key in before if key not in after]
    return [Row(key, (after.get(key) or before[key]).label, before.get(key), after.get(key)) for key in keys]
