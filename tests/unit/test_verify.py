"""verify catches a change made to the tables behind the journal's back, whatever the column."""

from __future__ import annotations

import shutil

import pytest

from cortexctl import Cortex
from cortexctl.memory import codec
from cortexctl.memory.ids import memory_uri
from tests import tamper
from tests.conftest import assert_clean_error, clean_environment


@pytest.fixture(scope="module")
def built_once(tmp_path_factory):
    base = tmp_path_factory.mktemp("built")
    with clean_environment(base):
        cx = Cortex(store=base / "store", actor="alice")
        a = cx.write("fact", "alpha", tags=["x"], frames=["build:repo:acme/api"]).id
        cx.update(a, "alpha two")
        b = cx.write("goal", "beta", importance=3).id
        c = cx.write("fact", "gamma").id
        cx.forget(c, reason="old")
        assert cx.verify().ok
    return base / "store", {"a": a, "b": b, "c": c}


@pytest.fixture
def built(store, built_once):
    """A small sound store (an update, a forget, a frame), built once per module and copied."""
    template, ids = built_once
    shutil.copytree(template, store)
    return Cortex(store=store, actor="alice"), dict(ids)


def _forged(id_: str) -> tuple[bytes, bytes]:
    data = codec.encode({"schema_version": 1, "statement": "forged", "subject": "", "predicate": "",
                         "confidence": 1.0, "source": "stated", "observed_at": None})
    return data, codec.version_hash(2, data)


TAMPERING = {
    "forms changed on head and version together": (
        "UPDATE heads SET short = 'x' WHERE id = $a; UPDATE versions SET short = 'x' WHERE id = $a AND version = 2"),
    "version confidence": "UPDATE versions SET confidence = 0.1 WHERE id = $a",
    "version author": "UPDATE versions SET created_by = 'mallory' WHERE id = $b",
    "version provenance": "UPDATE versions SET provenance = '{\"via\":\"x\"}' WHERE id = $b",
    "version time": "UPDATE versions SET created_at = created_at - INTERVAL 1 DAY WHERE id = $b",
    "private made public": "UPDATE heads SET visibility = 'public' WHERE id = $a",
    "owner changed": "UPDATE heads SET actor = 'mallory' WHERE id = $b",
    "forget undone": "UPDATE heads SET tombstone_reason = NULL, tombstoned_at = NULL, tombstoned_by = NULL WHERE id = $c",
    "tags changed": "UPDATE heads SET tags = ['y'] WHERE id = $a",
    "importance changed": "UPDATE heads SET importance = 10 WHERE id = $b",
    "frame row duplicated": "INSERT INTO frames SELECT * FROM frames WHERE id = $a",
    "last journal entries deleted": "DELETE FROM journal WHERE seq >= (SELECT max(seq) - 1 FROM journal)",
    "a journal entry in the middle deleted": "DELETE FROM journal WHERE seq = 2",
    "memory deleted, its journal kept": "DELETE FROM versions WHERE id = $b; DELETE FROM heads WHERE id = $b",
    "journal payload overwritten": "UPDATE journal SET payload = 'junk'::BLOB WHERE seq = 1",
    "a memory added behind the journal": (
        "INSERT INTO heads SELECT * REPLACE ('01ZZZZZZZZZZZZZZZZZZZZZZZZ' AS id) FROM heads WHERE id = $b;"
        "INSERT INTO versions SELECT * REPLACE ('01ZZZZZZZZZZZZZZZZZZZZZZZZ' AS id) FROM versions WHERE id = $b"),
}


@pytest.mark.parametrize("what", list(TAMPERING))
def test_verify_reports_tampering(built, store, cli, what):
    cx, ids = built
    statement = TAMPERING[what]
    for key, value in ids.items():
        statement = statement.replace(f"${key}", f"'{value}'")
    tamper.sql(store, statement)
    report = cx.verify()
    assert not report.ok, what
    r = cli("verify")
    assert r.code == 7 and "failed verification" in r.err


def test_rewritten_data_with_a_recomputed_hash_is_caught_by_the_replay(built, store):
    cx, ids = built
    data, digest = _forged(ids["a"])
    tamper.set_version_field(store, ids["a"], 2, "data", data)
    tamper.set_version_field(store, ids["a"], 2, "hash", digest)
    problems = cx.verify().problems
    assert [(p.check, p.message) for p in problems] == [
        ("replay", "version 2 field data differs from the journal"),
        ("replay", "version 2 field hash differs from the journal"),
        ("lexical", "lexical postings do not match the current text"),
    ]


@pytest.mark.parametrize("table,field", [("heads", "updated_at"), ("heads", "last_used"), ("versions", "created_at")])
def test_a_time_moved_by_one_microsecond_is_found_and_shown_as_a_time(built, store, table, field):
    """The replay compares times exactly as the journal holds them (integer microseconds): one
    microsecond off is a finding, and the report shows both times, not raw numbers."""
    cx, ids = built
    cx.attest("ship-it", "success", [ids["b"]])  # a memory used: last_used is a time, not NULL
    assert cx.verify().ok
    tamper.sql(store, f"UPDATE {table} SET {field} = {field} + INTERVAL 1 MICROSECOND WHERE id = ?", [ids["b"]])
    found = [(p.check, p.message) for p in cx.verify().problems]
    if table == "heads":
        (check, message), = found
        assert check == "replay" and message.startswith(f"head field {field} is '20"), message
        shown = message.split("'")
        assert shown[1] != shown[3] and shown[1][:19] == shown[3][:19], message  # the same second, 1 us apart
    else:
        assert found == [("replay", f"version 1 field {field} differs from the journal")]


@pytest.mark.parametrize("field,value", [("tombstoned_at", "infinity"), ("last_used", "infinity"),
                                         ("valid_to", "-infinity"), ("valid_from", "infinity")])
def test_an_infinite_time_no_journal_can_hold_is_found(built, store, field, value):
    cx, ids = built
    tamper.sql(store, f"UPDATE heads SET {field} = '{value}'::TIMESTAMP WHERE id = ?", [ids["b"]])
    found = [(p.check, p.message) for p in cx.verify().problems if p.check == "replay"]
    assert found == [("replay", f"head field {field} is '{value}' but the journal says None")], found


def test_corrupt_rows_are_integrity_errors_not_crashes(built, store, cli):
    _cx, ids = built
    tamper.set_version_field(store, ids["b"], 1, "provenance", "{")
    assert_clean_error(cli("show", ids["b"]), 7)
    tamper.set_field(store, ids["a"], "type", 99)
    assert_clean_error(cli("find"), 7)
    tamper.sql(store, "DELETE FROM meta")
    r = cli("find")
    assert_clean_error(r, 7)
    assert "schema version" in r.err


# -- the search tables ---------------------------------------------------------------------
SEARCH_TAMPERING = {
    "postings deleted": ("DELETE FROM lex_postings WHERE doc = (SELECT doc FROM lex_docs WHERE id = ?)",
                         "lexical", "lexical postings do not match the current text"),
    "postings doc deleted": ("DELETE FROM lex_docs WHERE id = ?", "lexical", "no lexical postings"),
    "term frequency changed": (
        "UPDATE lex_postings SET tf = tf + 1 WHERE doc = (SELECT doc FROM lex_docs WHERE id = ?)",
        "lexical", "lexical postings do not match the current text"),
    "vector cut short": ("UPDATE vectors SET vec = vec[1:100] WHERE id = ?", "vectors", "wrong length"),
    "vector of an old version": ("UPDATE vectors SET version = 1 WHERE id = ?", "vectors", "not of the memory's current version"),
}


@pytest.mark.parametrize("case", SEARCH_TAMPERING, ids=list(SEARCH_TAMPERING))
def test_verify_catches_damage_to_the_search_tables(built, store, case):
    cx, ids = built
    statement, check, message = SEARCH_TAMPERING[case]
    tamper.sql(store, statement, [ids["a"]])  # memory a is at version 2
    problems = [p for p in cx.verify().problems if p.check == check]
    assert problems and message in problems[0].message, cx.verify().problems
    assert problems[0].ref.startswith(f"cortex://m/{ids['a']}")


# -- the per-memory checks split across worker processes -----------------------------------------
@pytest.fixture(scope="module")
def many_once(tmp_path_factory):
    base = tmp_path_factory.mktemp("many")
    with clean_environment(base):
        cx = Cortex(store=base / "store", actor="alice")
        ids = [cx.write("fact", f"memory number {i} about painting walls", tags=[f"t{i % 3}"]).id for i in range(14)]
        for i in (3, 7, 11):
            cx.update(ids[i], f"memory number {i} about painted rooms, second version")
        cx.forget(ids[12], reason="old")
        cx.attest("decorate", "success", [f"cortex://m/{i}" for i in ids[2:9]])
        cx.attest("decorate", "failure", [f"cortex://m/{i}" for i in ids[5:11]], reason="factual_error")
    return base / "store", ids


@pytest.fixture
def many(store, monkeypatch, many_once):
    """A store of 14 memories (updates, a forget, attests across them; built once per module and
    copied) checked in runs of 2, so that every worker's range holds several runs."""
    from cortexctl.engine import verify as v

    template, ids = many_once
    shutil.copytree(template, store)
    cx = Cortex(store=store, actor="alice")
    ids = list(ids)
    monkeypatch.setattr(v, "BATCH", 2)
    monkeypatch.setattr(v, "PARALLEL_FROM", 0)
    started = []
    from cortexctl import parallel

    class Counting(parallel.ordered_map):
        def __init__(self, fn, tasks, *, workers, **kw):
            started.append(workers)
            super().__init__(fn, tasks, workers=workers, **kw)

    monkeypatch.setattr(parallel, "ordered_map", Counting)
    return cx, ids, started


def _found(report):
    return [(p.check, p.message, p.ref) for p in report.problems]


def test_a_sound_store_verifies_the_same_with_workers(many):
    cx, _ids, started = many
    one, two = cx.verify(jobs=1), cx.verify(jobs=2)
    assert one.ok and two.ok, (_found(one), _found(two))
    assert (one.memories, one.versions, one.journal) == (two.memories, two.versions, two.journal) == (14, 17, 22)
    assert started == [2]  # jobs=1 checks in this process; jobs=2 started two workers


def test_damage_in_the_middle_is_reported_by_a_worker_exactly_as_in_one_process(many, store, monkeypatch):
    cx, ids, started = many
    mid = ids[7]
    data, digest = _forged(mid)
    tamper.set_version_field(store, ids[6], 1, "hash", b"\x00")
    tamper.set_field(store, mid, "importance", 9)
    tamper.set_version_field(store, mid, 2, "data", data)
    tamper.set_version_field(store, mid, 2, "hash", digest)
    tamper.set_field(store, ids[8], "access_count", 40)
    tamper.sql(store, "DELETE FROM lex_postings WHERE doc = (SELECT doc FROM lex_docs WHERE id = ?)", [ids[9]])
    tamper.sql(store, "UPDATE vectors SET vec = vec[1:10] WHERE id = ?", [ids[10]])
    one = _found(cx.verify(jobs=1))
    assert one == [
        ("hash", "hash does not match the stored data (corrupt or tampered)", memory_uri(ids[6], 1)),
        ("replay", "version 1 field hash differs from the journal", memory_uri(ids[6])),
        ("replay", "head field importance is 9 but the journal says 5", memory_uri(mid)),
        ("replay", "version 2 field data differs from the journal", memory_uri(mid)),
        ("replay", "version 2 field hash differs from the journal", memory_uri(mid)),
        ("replay", "head field access_count is 40 but the journal says 1", memory_uri(ids[8])),
        ("lexical", "lexical postings do not match the current text", memory_uri(mid)),
        ("lexical", "lexical postings do not match the current text", memory_uri(ids[9])),
        ("vectors", "vector of model hash-v1/384 has the wrong length", memory_uri(ids[10], 1)),
    ]
    for jobs in (2, 3):
        assert _found(cx.verify(jobs=jobs)) == one
    assert started == [2, 3]
    from cortexctl.engine import verify as v

    monkeypatch.setattr(v, "RANGE_RUNS", 2)  # one process going through several ID ranges
    assert _found(cx.verify(jobs=1)) == one
    assert started == [2, 3]


def test_whole_store_findings_come_in_id_order_whatever_order_the_database_gives(many, store):
    """Heads that disagree with their versions, versions without a head and frame mismatches are
    listed by memory ID: the database's grouping gives them in an order of its own, which varied
    from run to run."""
    cx, ids, _started = many
    tamper.sql(store, "UPDATE heads SET current_version = current_version + 5")
    tamper.sql(store, "UPDATE heads SET frames = ['about:x:' || id]")
    tamper.sql(store, "DELETE FROM heads WHERE id IN (?, ?, ?)", [ids[2], ids[5], ids[11]])
    for _ in range(3):
        found = [(c, ref) for c, _m, ref in _found(cx.verify(jobs=1)) if c in ("heads", "frames")]
        heads = [ref for c, ref in found if c == "heads"]
        frames = [ref for c, ref in found if c == "frames"]
        assert len(heads) == len(ids) and len(frames) >= len(ids) - 3
        mismatched, orphans = heads[:len(ids) - 3], heads[len(ids) - 3:]
        assert mismatched == sorted(mismatched) and orphans == sorted(orphans) and frames == sorted(frames)


def test_findings_do_not_depend_on_the_number_of_workers_when_the_journal_is_damaged(many, store, cli):
    cx, ids, _started = many
    tamper.delete_journal(store, seq=5)  # a gap, and memory 4 never written
    tamper.sql(store, "UPDATE journal SET payload = 'junk'::BLOB WHERE seq = 9")
    tamper.sql(store, "INSERT INTO heads SELECT * REPLACE ('01ZZZZZZZZZZZZZZZZZZZZZZZZ' AS id) FROM heads WHERE id = ?",
            [ids[1]])
    one = cx.verify(jobs=1)
    assert not one.ok and {p.check for p in one.problems} >= {"journal", "replay"}
    assert _found(cx.verify(jobs=2)) == _found(one)
    r = cli("verify", "--jobs", "2")
    assert r.code == 7 and "failed verification" in r.err


def _damaged(store, ids) -> None:
    tamper.set_field(store, ids[8], "access_count", 40)
    tamper.sql(store, "DELETE FROM lex_postings WHERE doc = (SELECT doc FROM lex_docs WHERE id = ?)", [ids[9]])
    tamper.sql(store, "UPDATE vectors SET vec = vec[1:10] WHERE id = ?", [ids[10]])


def _range_found(r) -> tuple:
    return (r.versions, [(p.check, p.message, p.ref) for part in (r.hashes, r.replay, r.lexical) for p in part.close()],
            r.factors, r.unwritten)


def test_a_workers_range_that_does_not_fit_its_budget_is_checked_again_unbounded_and_so_are_its_next(
        many, store, monkeypatch):
    """A worker's bounded view out of memory: the range is checked again, and the worker's next ranges,
    through a view that is not bounded; the findings are those of an unbounded check, and nothing of the
    bounded view's spill is left."""
    from cortexctl.engine import verify as v
    from cortexctl.store import db, scratch

    cx, ids, _started = many
    _damaged(store, ids)
    address = cx.store.address
    try:
        monkeypatch.setattr(v, "_BOUNDED", False)
        want = [_range_found(v.check_range(address, None, ids[6], {}, 2, 5.0)),
                _range_found(v.check_range(address, ids[6], None, {}, 2, 5.0))]
        v._let_go()
        monkeypatch.setattr(v, "_BOUNDED", True)
        monkeypatch.setattr(db, "READ_MEMORY", "4MB")
        got = [_range_found(v.check_range(address, None, ids[6], {}, 2, 5.0))]
        assert v._BOUNDED is False and v._KEPT[0][2] is False  # the view kept is the unbounded one
        kept = v._KEPT
        got.append(_range_found(v.check_range(address, ids[6], None, {}, 2, 5.0)))
        assert v._KEPT is kept
    finally:
        v._let_go()
    assert got == want and any(found for _n, found, _f, _u in want)
    area = scratch.areas(cx.store)[0]
    assert not area.exists() or not any(area.iterdir())


def test_a_verify_whose_whole_store_checks_do_not_fit_the_budget_is_verified_again_unbounded(many, store, monkeypatch):
    from cortexctl.store import db, scratch

    cx, ids, _started = many
    _damaged(store, ids)
    want = {jobs: _found(cx.verify(jobs=jobs)) for jobs in (1, 2)}
    assert want[1] == want[2] and {check for check, _m, _r in want[1]} == {"replay", "lexical", "vectors"}
    monkeypatch.setattr(db, "READ_MEMORY", "4MB")  # this process's views; the workers keep theirs
    from cortexctl.engine import verify as v
    from cortexctl.store.interface import OverBudget

    with pytest.raises(OverBudget):  # the whole-store checks do not fit: what follows is the fall-back
        with cx.store.reading(bounded=True) as tx:
            v._verify(tx, cx.store, cx.embedder.model, 1)
    for jobs in (1, 2):
        assert _found(cx.verify(jobs=jobs)) == want[jobs]
    area = scratch.areas(cx.store)[0]
    assert not area.exists() or not any(area.iterdir())


def test_a_workers_error_is_what_its_view_makes_of_it_in_one_line(many):
    """An error met through a worker's kept view is closed into it: DuckDB saying the file is damaged
    is exit 7 naming the file (as in one process), anything else one line naming the worker."""
    import duckdb

    from cortexctl.engine import verify as v
    from cortexctl.errors import CortexError, IntegrityError

    cx, ids, _started = many
    address = cx.store.address

    class Unordered:  # an attest event's sequence number that cannot be sorted, in two lines
        def __lt__(self, other):
            raise ValueError("first line\ncould not allocate block")

        __gt__ = __lt__

    try:
        v.check_range(address, None, None, {}, 2, 5.0)
        with pytest.raises(IntegrityError) as err:
            v._let_go(duckdb.SerializationException("Failed to deserialize: field id mismatch"))
        assert err.value.exit_code == 7 and str(tamper.db_file(cx.store.location)) in err.value.message
        assert v._KEPT is None
        with pytest.raises(CortexError) as err:
            v.check_range(address, None, None, {ids[0]: [(Unordered(), 0, None)]}, 2, 5.0)
        assert err.value.message == "verify worker: ValueError: first line"
        assert v._KEPT is None and v._BOUNDED is True  # not taken for DuckDB out of memory
    finally:
        v._let_go()


def test_problems_merged_from_ranges_are_summarized_as_if_found_in_one_pass(monkeypatch):
    from cortexctl.engine import verify as v

    monkeypatch.setattr(v, "MAX_PER_CHECK", 3)
    found = [("hash", f"h{i}") for i in range(5)] + [("replay", f"r{i}") for i in range(2)]
    whole = v._Problems()
    for check, message in found + found:
        whole.add(check, message)
    merged = v._Problems()
    for part in (found[:4], found[4:] + found[:1], found[1:]):
        p = v._Problems()
        for check, message in part:
            p.add(check, message)
        merged.extend(p)
    assert merged.close() == whole.close()



# -- the postings check: one read per range, the same findings as the per-run walk ---------------------
_DOC = "(SELECT doc FROM lex_docs WHERE id = $id)"
_TERM = f"(SELECT min(term) FROM lex_postings WHERE doc = {_DOC})"
POSTINGS_DAMAGE = {
    "a posting missing": (f"DELETE FROM lex_postings WHERE doc = {_DOC} AND term = {_TERM}",
                          "lexical postings do not match the current text"),
    "a posting extra": ("INSERT INTO lex_postings SELECT 12345, doc, 1 FROM lex_docs WHERE id = $id",
                        "lexical postings do not match the current text"),
    "a posting repeated": (f"INSERT INTO lex_postings SELECT * FROM lex_postings WHERE doc = {_DOC} AND term = {_TERM}",
                           "lexical postings do not match the current text"),
    "a wrong term frequency": (f"UPDATE lex_postings SET tf = tf + 1 WHERE doc = {_DOC} AND term = {_TERM}",
                               "lexical postings do not match the current text"),
    "a wrong document length": ("UPDATE lex_docs SET len = len + 1 WHERE id = $id",
                                "lexical postings do not match the current text"),
    "the document missing": ("DELETE FROM lex_docs WHERE id = $id", "no lexical postings"),
    # damage that makes the check walk the range run by run, as it always did
    "a second document": ("INSERT INTO lex_docs SELECT doc + 1000, id, len FROM lex_docs WHERE id = $id",
                          "more than one postings document"),
}


def _range_edges(store, ids) -> list[str]:
    """The memories at either end of the ID ranges two workers get (runs of 2), sorted."""
    from cortexctl.engine import verify as v
    from cortexctl.store.db import DuckStorage

    with DuckStorage(store).reading() as tx:
        ranges = v._ranges(tx.memory_batch_ends(2), 2)
    order = sorted(ids)
    (_, cut), _second = ranges
    edges = {order[0], order[-1], cut, order[order.index(cut) + 1]}
    return sorted(edges)


@pytest.mark.parametrize("case", POSTINGS_DAMAGE, ids=list(POSTINGS_DAMAGE))
def test_postings_damage_at_a_range_edge_is_found_as_by_the_per_run_walk(many, store, monkeypatch, case):
    from cortexctl.engine import verify as v
    from cortexctl.store import search

    cx, ids, _started = many
    statement, message = POSTINGS_DAMAGE[case]
    edges = _range_edges(store, ids)
    for id_ in edges:
        tamper.sql(store, statement.replace("$id", f"'{id_}'"))
    lexical = [(m, r) for c, m, r in _found(cx.verify(jobs=1)) if c == "lexical"]
    assert {r for _m, r in lexical} == {memory_uri(i) for i in edges}, lexical
    assert message in {m for m, _r in lexical}
    one = _found(cx.verify(jobs=1))
    # A second document sends the check back to the per-run walk, which names repeated documents
    # ahead of the other findings of their run: where ranges start moves them (as it always did).
    same = sorted if case == "a second document" else list
    assert same(_found(cx.verify(jobs=2))) == same(one)
    with monkeypatch.context() as m:
        m.setattr(v, "RANGE_RUNS", 2)  # several ranges in one process
        assert same(_found(cx.verify(jobs=1))) == same(one)
    with monkeypatch.context() as m:
        m.setattr(search, "_lexical_range", search._lexical_runs)  # the walk of a query pair per run
        assert _found(cx.verify(jobs=1)) == one


@pytest.mark.parametrize("args, env, says", [
    (("--jobs", "-1"), None, "--jobs must be a whole number from 0"),
    (("--jobs", "257"), None, "--jobs must be a whole number from 0"),
    (("--jobs", "abc"), None, "--jobs"),
    ((), {"CORTEXCTL_VERIFY_JOBS": "x"}, "CORTEXCTL_VERIFY_JOBS"),
    ((), {"CORTEXCTL_VERIFY_JOBS": "100000"}, "CORTEXCTL_VERIFY_JOBS"),
])
def test_a_bad_worker_count_is_one_usage_line_and_nothing_is_checked(cli, store, args, env, says):
    Cortex(store=store, actor="alice").write("fact", "alpha")
    r = cli("verify", *args, env=env)
    assert_clean_error(r, 2)
    assert says in r.err, r


@pytest.mark.parametrize("statement, message", [
    ("UPDATE journal SET payload = ? WHERE kind = 'revoke'", "was never granted"),
    ("UPDATE journal SET payload = 'junk'::BLOB WHERE kind = 'grant'", "does not decode"),
    ("UPDATE grants SET subagent = 'mallory'", "differs from the journal (subagent)"),
])
def test_grants_replay_from_the_journal_and_a_disagreement_is_found(store, statement, message):
    cx = Cortex(store=store, actor="alice")
    cx.write("fact", "orchid", visibility="scoped")
    g = cx.grant("bob", types=["fact"], tags=["ops"], expires="1d")
    cx.revoke(g.id)
    cx.grant("carol")
    assert cx.verify().ok
    params = [codec.encode({"id": "01M85AWENDS9KJ2ARCZC6N5RNP", "revoked_at": 0, "revoked_by": "x"})] \
        if "?" in statement else []
    tamper.sql(store, statement, params)
    report = cx.verify()
    assert not report.ok
    assert any(message in p.message for p in report.problems), report.problems


def test_a_worker_reads_its_ranges_through_one_view_and_lets_it_go_after_an_error(many):
    from cortexctl.engine import verify as v
    from cortexctl.errors import CortexError

    cx, ids, _started = many
    address = cx.store.address
    try:
        first = v.check_range(address, None, ids[6], {}, 2, 5.0)
        kept = v._KEPT
        assert kept is not None
        second = v.check_range(address, ids[6], None, {}, 2, 5.0)
        assert v._KEPT is kept  # the second range read through the first one's view
        assert first.versions + second.versions == 17
        with pytest.raises(CortexError, match="verify worker"):
            v.check_range(address, None, None, {ids[0]: [("not an event",)]}, 2, 5.0)
        assert v._KEPT is None  # let go after the error
        again = v.check_range(address, None, ids[6], {}, 2, 5.0)
        assert v._KEPT is not kept and again.versions == first.versions
    finally:
        v._let_go()
    assert v._KEPT is None
