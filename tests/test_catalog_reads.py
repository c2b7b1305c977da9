"""What a page reads of the catalogs (builder/catalog_reads.py): every lookup is noted, a walk over a catalog notes
all of it, and the digest of what was read moves only when one of those entries (or, for a walk, the catalog) does."""

from __future__ import annotations

from builder.catalog_reads import WHOLE, Reads, Watched, reads_key


def test_lookups_note_their_entries_present_or_not():
    reads = Reads()
    gpus = Watched("gpu", {"a100-80gb": 1, "h100-80gb": 2}, reads)
    assert gpus["a100-80gb"] == 1 and gpus.get("t4") is None and "h100-80gb" in gpus
    assert reads.frozen() == (("gpu", "a100-80gb"), ("gpu", "h100-80gb"), ("gpu", "t4"))


def test_walking_a_catalog_notes_all_of_it():
    for walk in (list, len, lambda c: list(c.items()), lambda c: list(c.values()), lambda c: dict(c), lambda c: {**c}, lambda c: c | {}):
        reads = Reads()
        walk(Watched("model", {"gpt2": 1}, reads))
        assert ("model", WHOLE) in reads.frozen(), walk


def test_the_digest_follows_only_the_entries_read():
    before = {"model": {"gpt2": "small", "llama-3-8b": "8B"}}
    read = (("model", "gpt2"), ("model", "mistral-7b"))
    assert reads_key(read, before) == reads_key(read, {"model": {**before["model"], "llama-3-8b": "8.0B"}})
    assert reads_key(read, before) != reads_key(read, {"model": {**before["model"], "gpt2": "124M"}})
    assert reads_key(read, before) != reads_key(read, {"model": {**before["model"], "mistral-7b": "7B"}})
    whole = (("model", WHOLE),)
    reordered = {"model": {"llama-3-8b": "8B", "gpt2": "small"}}
    assert reads_key(whole, before) != reads_key(whole, reordered)  # a walk sees the catalog's order
