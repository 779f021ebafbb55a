"""Integrity: what verify and healthcheck read to prove the store whole."""

from __future__ import annotations

from datetime import datetime

from cortexctl.engine import replay
from cortexctl.memory import codec
from cortexctl.store.interface import HEAD_FIELDS, TIME_FIELDS
from tests.contract.conftest import FACT, GOAL, embedded, entry, ident, memory, put, unit_rows


def test_a_sound_store_gives_the_integrity_queries_nothing_to_report(storage):
    put(storage, memory(1, frames=["about:project:x"], versions=2), memory(2))
    with storage.transaction() as tx:
        tx.append_journal([entry("write", ident(1)), entry("write", ident(2))])
        tx.add_terms([(ident(1), [5]), (ident(2), [6])])
        tx.insert_vectors([ident(1)], [2], "m", unit_rows(1))
    with storage.reading() as tx:
        assert tx.head_version_mismatches() == [] and tx.orphan_versions() == []
        assert tx.frame_mismatches() == [] and tx.journal_gaps() == []
        assert list(tx.vector_problems()) == [] and list(tx.stray_terms()) == []
        assert tx.index_problems("m") == [] and tx.index_problems("other") == []
        terms = {b"data 1 v2": [5], b"data 2 v1": [6]}  # each memory's current data
        assert list(tx.lexical_mismatches(lambda t, d: terms[d])) == []


def test_integrity_queries_name_heads_versions_postings_and_vectors_that_disagree(storage):
    bad_head, versions = memory(1)
    bad_head["current_version"] = 2  # says 2, has only 1
    put(storage, (bad_head, versions), memory(2), memory(3))
    with storage.transaction() as tx:
        tx.insert_version(memory(9)[1][0])  # a version without a head
        tx.add_terms([(ident(2), [5])])
        tx.insert_vectors([ident(2)], [7], "m", unit_rows(1))  # not the current version
    with storage.reading() as tx:
        assert [(r[0], r[4]) for r in tx.head_version_mismatches()] == [(ident(1), "current version is not the latest")]
        assert tx.orphan_versions() == [ident(9)]
        problems = dict(tx.lexical_mismatches(lambda t, d: [6]))
        assert problems[ident(2)] == "lexical postings do not match the current text"
        assert problems[ident(3)] == "no lexical postings"
        assert [(i, v) for i, v, _ in tx.vector_problems()] == [(ident(2), 7)]


def test_postings_of_a_memory_that_does_not_exist_are_strays(storage):
    put(storage, memory(1))
    with storage.transaction() as tx:
        tx.add_terms([(ident(1), [5]), (ident(8), [5, 6])])
    with storage.reading() as tx:
        assert [i for i, _ in tx.stray_terms()] == [ident(8)]
        assert all(isinstance(p, str) and p for _, p in tx.stray_terms())
        # lexical_mismatches adds the strays at the end, unless told not to
        assert [i for i, _ in tx.lexical_mismatches(lambda t, d: [5])] == [ident(8)]
        assert list(tx.lexical_mismatches(lambda t, d: [5], strays=False)) == []


def test_lexical_mismatches_name_only_the_memories_of_the_range_asked_for(storage):
    put(storage, memory(1), memory(2), memory(3), memory(4))
    with storage.transaction() as tx:
        tx.add_terms([(ident(1), [5]), (ident(2), [5, 5]), (ident(3), [6]), (ident(4), [5])])
    with storage.reading() as tx:
        # every memory's text should give [5]: 2 has the wrong frequency, 3 the wrong term
        assert list(tx.lexical_mismatches(lambda t, d: [5], strays=False)) == [
            (ident(2), "lexical postings do not match the current text"),
            (ident(3), "lexical postings do not match the current text")]
        assert [i for i, _ in tx.lexical_mismatches(lambda t, d: [5], after=ident(2), strays=False)] == [ident(3)]
        assert [i for i, _ in tx.lexical_mismatches(lambda t, d: [5], upto=ident(2), strays=False)] == [ident(2)]
        assert list(tx.lexical_mismatches(lambda t, d: [5], after=ident(3), upto=ident(4), strays=False)) == []


def hashed(mem, *, tamper: int | None = None):
    """``mem`` with every version's true hash (``codec.version_hash``), but version ``tamper``'s."""
    head, versions = mem
    for v in versions:
        v["hash"] = codec.version_hash(v["type"], v["data"])
        if v["version"] == tamper:
            v["hash"] = bytes(32)
    return head, versions


def test_hash_mismatches_name_each_version_whose_hash_is_not_of_its_type_and_data(storage):
    put(storage, hashed(memory(1, versions=2), tamper=2), hashed(memory(2)), hashed(memory(3, versions=3), tamper=1),
        hashed(memory(4, type_=GOAL)))
    with storage.transaction() as tx:
        tx.insert_version(dict(hashed(memory(5))[1][0], data=b"changed after hashing"))  # no head: still hashed
    with storage.reading() as tx:
        assert tx.hash_mismatches(codec.HASH_DOMAIN) == (8, [(ident(1), 2), (ident(3), 1), (ident(5), 1)])
        # another domain: nothing hashes the same
        assert tx.hash_mismatches(b"other")[1] == [(ident(n), v) for n, v in ((1, 1), (1, 2), (2, 1), (3, 1), (3, 2),
                                                                              (3, 3), (4, 1), (5, 1))]


def test_hash_mismatches_keep_the_ids_of_the_range_asked_for(storage):
    put(storage, hashed(memory(1, versions=2), tamper=1), hashed(memory(2), tamper=1), hashed(memory(3), tamper=1))
    with storage.reading() as tx:
        def found(**kw):
            return tx.hash_mismatches(codec.HASH_DOMAIN, **kw)

        assert found() == (4, [(ident(1), 1), (ident(2), 1), (ident(3), 1)])
        assert found(after=ident(1)) == (2, [(ident(2), 1), (ident(3), 1)])
        assert found(upto=ident(2)) == (3, [(ident(1), 1), (ident(2), 1)])
        assert found(after=ident(1), upto=ident(2)) == (1, [(ident(2), 1)])
        assert found(after=ident(3)) == (0, [])


def test_unknown_kinds_and_unpaired_attests_are_reported(storage):
    with storage.transaction() as tx:
        tx.append_journal([entry("attest", "i"), entry("learn_weights", "alice"), entry("attest", "i"),
                           entry("mystery"), entry("learn_weights", "alice")])
    with storage.reading() as tx:
        assert tx.unknown_kinds(["attest", "learn_weights"]) == [(4, "mystery")]
        assert [(s, k) for s, k, _ in tx.unpaired_attests()] == [(3, "attest"), (5, "learn_weights")]


def test_by_memory_gives_each_memorys_journal_head_and_versions_together(storage):
    first = memory(1, versions=2, at=datetime(1969, 12, 31, 23, 59, 59, 500001))  # before the epoch
    second = memory(2, at=datetime(2150, 6, 1, 12, 0, 0, 999999))  # past 2**52 microseconds
    second[0].update(last_used=datetime(2150, 6, 2, 0, 0, 0, 1), valid_to=datetime(9999, 12, 31, 23, 59, 59, 999999))
    put(storage, first, second)
    with storage.transaction() as tx:
        tx.append_journal([entry("write", ident(1), b"w1"), entry("write", ident(3), b"w3"),
                           entry("attest", "intent"), entry("update", ident(1), b"u1")])
    with storage.reading() as tx:
        runs = list(tx.by_memory(batch=2))
        as_rows = list(tx.by_memory(batch=2, rows=True))
    journal = [row for j, _, _ in runs for row in j]
    heads = [h["id"] for _, hs, _ in runs for h in hs]
    versions = [(v["id"], v["version"]) for _, _, vs in runs for v in vs]
    assert journal == [(ident(1), 1, "write", b"w1"), (ident(1), 4, "update", b"u1"), (ident(3), 2, "write", b"w3")]
    assert heads == [ident(1), ident(2)]
    assert versions == [(ident(1), 1), (ident(1), 2), (ident(2), 1)]
    # as rows: the same values in column order, times as integer microseconds (as payloads hold them)
    def micros(row: dict) -> list:
        return [replay.micros(v) if k in TIME_FIELDS and v is not None else v for k, v in row.items()]

    assert [micros(h) for _, hs, _ in runs for h in hs] == [list(h) for _, hs, _ in as_rows for h in hs]
    assert [micros(v) for _, _, vs in runs for v in vs] == [list(v) for _, _, vs in as_rows for v in vs]
    assert all(type(h[HEAD_FIELDS.index("created_at")]) is int for _, hs, _ in as_rows for h in hs)


def test_memory_batch_ends_split_the_walk_by_memory_into_the_very_same_runs(storage):
    """verify splits its walk into ranges at these ends, and the ranges give the whole walk."""
    put(storage, *(memory(n) for n in (1, 2, 4, 5, 7, 8, 9)))
    with storage.transaction() as tx:  # a journal entry whose memory has no head is a memory of the walk too
        tx.append_journal([entry("write", ident(n)) for n in (1, 2, 3, 4, 5, 7, 8, 9)] + [entry("attest", "i")])
    with storage.reading() as tx:
        ends = tx.memory_batch_ends(3)
        assert ends == [ident(3), ident(7)]  # runs 1 2 3 | 4 5 7 | 8 9
        assert tx.memory_batch_ends(10) == []
        whole = list(tx.by_memory(batch=3))
        bounds = [None, *ends, None]
        pieces = [run for after, upto in zip(bounds, bounds[1:]) for run in tx.by_memory(3, after, upto)]
    assert pieces == whole
    assert [[h["id"] for h in hs] for _, hs, _ in whole] == [[ident(1), ident(2)], [ident(4), ident(5), ident(7)],
                                                             [ident(8), ident(9)]]


def test_health_counts_count_memories_by_type_the_forgotten_and_every_version(storage):
    with storage.transaction() as tx:
        empty = tx.health_counts()
    assert (empty["by_type"], empty["tombstoned"], empty["versions"]) == ({}, 0, 0)
    assert isinstance(empty["schema_version"], int) and empty["schema_version"] >= 1
    put(storage, memory(1, versions=3), memory(2, actor="bob"), memory(3, type_=GOAL, tombstoned=True))
    with storage.reading() as tx:
        got = tx.health_counts()
    isolation = got.pop("isolation")
    assert got == {"by_type": {FACT: 2, GOAL: 1}, "tombstoned": 1, "versions": 5,
                   "schema_version": empty["schema_version"]}
    # a store this test's user made: the database holds finds on PostgreSQL; DuckDB never can
    assert isolation == ("database" if storage.local_dir() is None else "engine")


def test_index_problems_find_nothing_wrong_with_search_structures_the_backend_keeps_itself(storage):
    put(storage, *(memory(n) for n in range(1, 5)))
    model, mat = embedded(["one", "two", "three", "four"])
    with storage.transaction() as tx:
        assert tx.index_problems(model) == []
        tx.insert_vectors([ident(n) for n in range(1, 5)], [1] * 4, model, mat)
    storage.update_index(model, rebuild=True)
    with storage.transaction() as tx:
        assert tx.index_problems(model) == []
        tx.drop_vectors(ident(1))
    with storage.reading() as tx:
        assert tx.index_problems(model) == [] and tx.index_problems("other") == []


def test_valid_links_lists_the_heads_with_a_valid_time_or_a_supersede_link_in_id_order(storage):
    from datetime import datetime

    a, b, plain = memory(1), memory(2), memory(3)
    t0, t1 = datetime(2026, 1, 1), datetime(2026, 2, 1, 0, 0, 0, 5)
    a[0].update(valid_to=t1, superseded_by=ident(2))
    b[0].update(valid_from=t1, supersedes=ident(1))
    put(storage, b, plain, a)
    with storage.transaction() as tx:
        tx.update_head(ident(3), {"valid_from": t0})
    with storage.reading() as tx:
        assert tx.valid_links() == [(ident(1), None, t1, None, ident(2)), (ident(2), t1, None, ident(1), None),
                                    (ident(3), t0, None, None, None)]

