"""Which catalog entries a page reads (issue 17): an edit to content/models.toml or gpus.toml re-renders only the
pages whose output used the entries it changed.

While a page is evaluated and rendered, its model and GPU catalogs are `Watched` mappings: every entry looked up
(by `[]`, `get` or `in`, present or not) is noted, and anything that walks the whole catalog (iteration, keys,
values, items, len, copies) notes the catalog as a whole, written '*'. `reads_key` turns what a page read into one
digest of those entries' current values (their repr: every field of the dataclass, the catalog's order for '*');
the page is reused while that digest stays the same (builder/incremental.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Iterator

WHOLE = "*"  # noted when a page walks a whole catalog
ABSENT = "\0absent"  # the value of an entry looked up but missing


class Reads:
    """What one page read: catalog name -> the entry ids (or WHOLE)."""

    def __init__(self) -> None:
        self.entries: dict[str, set[str]] = {}

    def note(self, catalog: str, entry: str) -> None:
        self.entries.setdefault(catalog, set()).add(entry)

    def add(self, other: "Reads | tuple[tuple[str, str], ...]") -> None:
        """Take in what another page (or a kept result) read."""
        for catalog, entry in (other.frozen() if isinstance(other, Reads) else other):
            self.note(catalog, entry)

    def frozen(self) -> tuple[tuple[str, str], ...]:
        """(catalog, entry) pairs, sorted: kept with the page's outputs."""
        return tuple(sorted((catalog, entry) for catalog, entries in self.entries.items() for entry in entries))


class Watched(Mapping):
    """A read-only view of one catalog that notes every read into `reads` under `name`."""

    def __init__(self, name: str, catalog: Mapping[str, Any], reads: Reads) -> None:
        self._name, self._catalog, self._reads = name, catalog, reads

    def __getitem__(self, key: str) -> Any:
        self._reads.note(self._name, str(key))
        return self._catalog[key]

    def get(self, key: str, default: Any = None) -> Any:
        self._reads.note(self._name, str(key))
        return self._catalog.get(key, default)

    def __contains__(self, key: object) -> bool:
        self._reads.note(self._name, str(key))
        return key in self._catalog

    def __iter__(self) -> Iterator[str]:
        self._reads.note(self._name, WHOLE)
        return iter(self._catalog)

    def __len__(self) -> int:
        self._reads.note(self._name, WHOLE)
        return len(self._catalog)

    def __or__(self, other: Mapping[str, Any]) -> dict[str, Any]:
        return dict(self) | dict(other)

    def __ror__(self, other: Mapping[str, Any]) -> dict[str, Any]:
        return dict(other) | dict(self)

    def copy(self) -> dict[str, Any]:
        return dict(self)

    def __repr__(self) -> str:
        return repr(dict(self))


def watch(catalogs: Mapping[str, Mapping[str, Any]], reads: Reads) -> dict[str, Watched]:
    """Each catalog (name -> its plain mapping) as a view noting every entry read into `reads`."""
    return {name: Watched(name, catalog, reads) for name, catalog in catalogs.items()}


def reads_key(reads: tuple[tuple[str, str], ...], catalogs: Mapping[str, Mapping[str, Any]]) -> str:
    """sha256 of the current value of every entry in `reads` (catalog name -> its plain mapping in `catalogs`)."""
    digest = hashlib.sha256()
    for catalog, entry in reads:
        values = catalogs.get(catalog, {})
        if entry == WHOLE:
            text = repr(list(values.items()))
        else:
            text = repr(values[entry]) if entry in values else ABSENT
        digest.update(f"{catalog}\0{entry}\0{text}\0".encode("utf-8"))
    return digest.hexdigest()
