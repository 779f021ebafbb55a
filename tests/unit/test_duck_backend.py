"""The DuckDB backend's own reads, beside the storage protocols: the postings ``store/lexical.py``
ranks over, the vector keys ``store/vector_index.py`` keeps its HNSW file by, the search
snapshot's answers (``store/snapshot/``), its lock and its directory. The backend-neutral
contract is ``tests/contract``; these pin what the DuckDB backend builds it from."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from cortexctl.errors import UsageError
from cortexctl.store import open_storage
from cortexctl.store.interface import Filters, Scoring
from tests.contract.conftest import (GOAL, MIXED_FILTERS, T0, as_stored, grant, grant_id, ident, journaled, memory, mixed_memories,
                                     put, unit_rows)


@pytest.fixture
def storage(tmp_path):
    return open_storage(tmp_path / "store", wait=5.0)


def test_check_location_refuses_a_file_where_the_store_directory_belongs(storage):
    storage.path.parent.mkdir(parents=True, exist_ok=True)
    storage.path.write_text("not a store")
    with pytest.raises(UsageError):
        storage.check_location()


def test_the_exclusive_lock_can_be_taken_again_by_its_holder_for_a_transaction(storage):
    with storage.exclusive(wait=0):
        with storage.transaction() as tx:
            head, versions = memory(1)
            tx.insert_memories([head], versions)
    with storage.reading() as tx:
        assert tx.count_heads() == 1


def test_a_bulk_loads_transactions_hold_duckdb_to_a_memory_limit_spilling_into_the_scratch_area(storage):
    """``transaction(bulk=True)``: DuckDB held to ``LOAD_MEMORY`` with its spill in a scratch
    directory (swept should the load be killed), gone with the transaction; other transactions as
    DuckDB sets them; tidy or not, what is stored is the same."""
    import duckdb

    from cortexctl.store import db, scratch

    probe = duckdb.connect()
    probe.execute(f"SET memory_limit = '{db.LOAD_MEMORY}'")
    load_limit = probe.execute("SELECT current_setting('memory_limit')").fetchone()[0]
    area = scratch.areas(storage)[0]
    seen = {}
    for n, (bulk, tidy) in enumerate(((False, True), (True, False), (True, True)), start=1):
        with storage.transaction(bulk=bulk, tidy=tidy) as tx:
            tx.insert_memories(*(lambda h, vs: ([h], vs))(*memory(n)))
            seen[bulk, tidy] = tx.con.execute(
                "SELECT current_setting('memory_limit'), current_setting('temp_directory')").fetchone()
    assert seen[False, True][0] != load_limit and not seen[False, True][1].startswith(str(area))
    for key in ((True, False), (True, True)):
        limit, spill = seen[key]
        assert limit == load_limit and spill.startswith(str(area) + "/load-")
    assert seen[True, False][1] != seen[True, True][1]  # a directory for each transaction
    assert not area.exists() or not any(area.iterdir())
    with storage.reading() as tx:
        assert tx.existing_ids([ident(n) for n in range(1, 4)]) == {ident(n) for n in range(1, 4)}


def test_a_bulk_load_and_a_snapshot_build_spill_wherever_a_scratch_area_can_be_made_else_go_unbounded(storage):
    """The scratch area beside the store cannot be made (its parent not writable; here a file where it
    belongs): a bulk transaction and a snapshot build spill into the one inside the store; with neither,
    they run unbounded rather than fail."""
    from cortexctl.store import scratch, snapshot

    put(storage, memory(1))
    beside, inside = scratch.areas(storage)
    beside.write_text("not a directory")
    settings = "SELECT current_setting('memory_limit'), current_setting('temp_directory')"
    with storage.transaction(bulk=True) as tx:
        tx.insert_memories(*(lambda h, vs: ([h], vs))(*memory(2)))
        spilled = tx.con.execute(settings).fetchone()[1]
    assert spilled.startswith(str(inside) + "/load-")
    assert snapshot.build(storage)["action"] == "build"
    assert not inside.exists()  # each spill removed, and the area with its last one
    inside.write_text("not a directory")
    with storage.transaction(bulk=True) as tx:
        tx.insert_memories(*(lambda h, vs: ([h], vs))(*memory(3)))
        limit, spill_dir = tx.con.execute(settings).fetchone()
    assert not spill_dir.startswith((str(beside), str(inside)))
    (storage.path / snapshot.SNAPSHOT_NAME).unlink()
    assert snapshot.build(storage)["action"] == "build"
    with storage.reading() as tx:
        assert tx.count_heads() == 3
    assert beside.read_text() == inside.read_text() == "not a directory"


def test_a_bulk_transaction_that_does_not_fit_its_budget_is_over_budget_and_writes_nothing(storage, monkeypatch):
    """Out of memory under ``LOAD_MEMORY``: ``OverBudget`` (the caller runs it again unbounded), the
    transaction rolled back and its spill gone; the same rows then commit in an ordinary one."""
    from cortexctl.store import db, scratch
    from cortexctl.store.interface import OverBudget

    with storage.transaction() as tx:  # the store made, and its schema, before the budget is small
        tx.insert_memories(*(lambda h, vs: ([h], vs))(*memory(1)))
    monkeypatch.setattr(db, "LOAD_MEMORY", "4MB")
    rows = [memory(n) for n in range(2, 3002)]
    vectors = unit_rows(3000, dim=384, seed=7)  # 4.6 MB of vectors

    def load(tx) -> None:
        tx.insert_memories([h for h, _ in rows], [v for _, vs in rows for v in vs])
        tx.insert_vectors([h["id"] for h, _ in rows], [1] * len(rows), "m", vectors)

    with pytest.raises(OverBudget):
        with storage.transaction(bulk=True) as tx:
            load(tx)
    with storage.reading() as tx:
        assert tx.count_heads() == 1
    area = scratch.areas(storage)[0]
    assert not area.exists() or not any(area.iterdir())
    with storage.transaction() as tx:
        load(tx)
    with storage.reading() as tx:
        assert tx.count_heads() == 3001


def test_a_bounded_reading_view_is_held_to_its_budget_and_spills_into_a_scratch_directory_of_its_own(storage):
    """``reading(bounded=True)``: DuckDB held to ``READ_MEMORY``, its spill in a ``read-`` scratch
    directory gone with the view, and what a killed reader left swept first (a store only ever
    verified has no writer to sweep it); a plain reading view is left as DuckDB sets it."""
    import subprocess
    import sys

    import duckdb

    from cortexctl.store import db, scratch

    put(storage, memory(1))
    area = scratch.areas(storage)[0]
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = area / scratch.name("read", int(done.stdout), 1)
    dead.mkdir(parents=True)
    (dead / "duckdb_temp_storage_DEFAULT-0.tmp").write_bytes(b"spilled rows")
    # a reader holds no lock: a dead writer's work, and a staged store's own area, are the writers' to sweep
    others = [area / scratch.name("restore", int(done.stdout), 1), area / f".{scratch.name('restore', 1, 1)}.scratch"]
    for other in others:
        other.mkdir()
    probe = duckdb.connect()
    default = probe.execute("SELECT current_setting('memory_limit')").fetchone()[0]
    probe.execute(f"SET memory_limit = '{db.READ_MEMORY}'")
    read_limit = probe.execute("SELECT current_setting('memory_limit')").fetchone()[0]
    settings = "SELECT current_setting('memory_limit'), current_setting('temp_directory')"
    seen = {}
    with storage.reading() as plain:  # another view of the same file in this process: it shares the settings
        before = plain.con.execute(settings).fetchone()
        for bounded in (False, True):
            with storage.reading(bounded=bounded) as tx:
                seen[bounded] = tx.con.execute(settings).fetchone()
                assert tx.existing_ids([ident(1)]) == {ident(1)}
                if bounded:
                    assert sorted(p.name.split("-")[0] for p in area.iterdir() if not p.name.startswith(".")) == [
                        "read", "restore"]
        assert plain.con.execute(settings).fetchone() == before  # put back as the bounded view closed
    assert seen[True][0] == read_limit and seen[True][1].startswith(str(area) + "/read-")
    assert seen[False] == before and before[0] == default and not before[1].startswith(str(area))
    assert sorted(area.iterdir()) == sorted(others)


def test_a_bounded_read_that_does_not_fit_is_over_budget_and_one_without_a_scratch_area_is_not_bounded(
        storage, monkeypatch):
    """Out of memory under ``READ_MEMORY``: ``OverBudget`` out of the view, its spill gone; where no
    scratch directory can be made (a read-only place) the view reads unbounded rather than fail; of no
    store, NoStore and nothing made."""
    from cortexctl.store import db, scratch
    from cortexctl.store.interface import NoStore, OverBudget

    put(storage, *mixed_memories(200))
    monkeypatch.setattr(db, "READ_MEMORY", "1MB")
    query = "SELECT string_agg(data::VARCHAR, ',' ORDER BY id DESC) FROM versions, range(40)"
    with pytest.raises(OverBudget, match="a read did not fit"):
        with storage.reading(bounded=True) as tx:
            tx.con.execute(query).fetchone()
    area = scratch.areas(storage)[0]
    assert not area.exists() or not any(area.iterdir())

    missing = open_storage(storage.path.parent / "no" / "such" / "store")
    with pytest.raises(NoStore):
        with missing.reading(bounded=True):
            pass
    assert not (storage.path.parent / "no").exists()  # a bounded view of no store makes no scratch area
    for place in scratch.areas(storage):  # files where the scratch areas would be: none can be made
        place.write_text("not a directory")
    with storage.reading(bounded=True) as tx:
        assert tx.con.execute("SELECT current_setting('memory_limit')").fetchone()[0] != "976.5 KiB"
        assert len(tx.con.execute(query).fetchone()[0]) > 0
    assert all(place.read_text() == "not a directory" for place in scratch.areas(storage))


def test_postings_hold_each_memorys_term_frequencies_and_length(storage):
    put(storage, memory(1), memory(2))
    with storage.transaction() as tx:
        tx.add_terms([(ident(1), [5, 6, 5]), (ident(2), [6])])
    with storage.reading() as tx:
        assert tx.doc_count() == 2
        got = tx.postings_of([5, 6])
        docs = tx.doc_ids([int(d) for d in got["doc"]])
        rows = sorted((int(t), docs[int(d)], int(f)) for t, d, f in zip(got["term"], got["doc"], got["tf"]))
        assert rows == [(5, ident(1), 2), (6, ident(1), 1), (6, ident(2), 1)]
        doc_of = {v: k for k, v in docs.items()}
        assert tx.doc_terms([doc_of[ident(1)]]) == {doc_of[ident(1)]: ({5: 2, 6: 1}, 3)}
        assert len(tx.postings_of([99])["doc"]) == 0


def test_replaced_postings_drop_the_old_terms(storage):
    put(storage, memory(1))
    with storage.transaction() as tx:
        tx.add_terms([(ident(1), [5, 6])])
    with storage.transaction() as tx:
        tx.replace_terms(ident(1), [7])
    with storage.reading() as tx:
        assert tx.doc_count() == 1
        assert len(tx.postings_of([5, 6])["doc"]) == 0
        assert list(tx.doc_ids(list(tx.postings_of([7])["doc"])).values()) == [ident(1)]


def test_document_frequencies_leave_out_what_the_actor_may_not_see(storage):
    put(storage, memory(1), memory(2, actor="bob"), memory(3, actor="bob", visibility="public"))
    with storage.transaction() as tx:
        tx.add_terms([(ident(1), [5]), (ident(2), [5]), (ident(3), [5, 6])])
    with storage.reading() as tx:
        hidden = tx.hidden_docs("alice")
        assert list(tx.doc_ids([int(d) for d in hidden]).values()) == [ident(2)]
        assert tx.term_df([5, 6], hidden) == {5: 2, 6: 1}
        assert tx.term_df([5], tx.hidden_docs("bob")) == {5: 2}  # alice's private one is hidden from bob


def test_the_snapshots_hidden_docs_are_duckdbs_also_where_a_memory_holds_two_docs(storage):
    """The snapshot finds a viewer's hidden docs by each head's doc; a damaged store where a memory
    holds two docs (``verify`` names it) still gets both from it, as from DuckDB."""
    put(storage, memory(1), memory(2, actor="bob"), memory(3, actor="bob", visibility="public"))
    with storage.transaction() as tx:
        tx.add_terms([(ident(1), [5]), (ident(2), [5]), (ident(3), [6])])
    for damaged in (False, True):
        if damaged:
            with storage.transaction() as tx:
                tx.add_terms([(ident(2), [6])])  # a second doc of bob's private memory
        with storage.reading() as tx:
            want = {who: sorted(tx.hidden_docs(who).tolist()) for who in ("alice", "bob", "carol")}
        assert len(want["alice"]) == 1 + damaged
        assert storage.refresh_snapshot()["action"] == "build"
        assert storage.snapshot_state() == "current"
        with storage.searching() as tx:
            assert {who: sorted(tx.hidden_docs(who).tolist()) for who in want} == want


def test_vectors_get_increasing_keys_and_come_back_by_key(storage):
    put(storage, memory(1), memory(2), memory(3))
    mat = unit_rows(3)
    with storage.transaction() as tx:
        assert tx.insert_vectors([ident(1), ident(2)], [1, 1], "m", mat[:2]) == 2
        assert tx.insert_vectors([ident(3)], [1], "m", [mat[2].astype("<f4").tobytes()]) == 3  # a few as bytes
        assert tx.insert_vectors([], [], "m", mat[:0]) == 0
    with storage.reading() as tx:
        assert tx.model_dim("m") == 4 and tx.model_dim("other") is None
        assert tx.vector_stats("m") == (3, 3, 4)
        assert tx.count_vectors("m") == 3 and tx.count_vectors("m", after=2) == 1
        ((keys, got),) = list(tx.iter_vectors("m", 4))
        assert keys.tolist() == [1, 2, 3] and np.array_equal(got, as_stored(storage, mat))
        assert [k.tolist() for k, _ in tx.iter_vectors("m", 4, after=1, batch=1)] == [[2], [3]]
        assert sorted(tx.vectors_of_keys([1, 3, 9], "m")) == [(1, ident(1), 1), (3, ident(3), 1)]
        assert tx.vectors_between("m", 2, 3) == {2: (ident(2), 1), 3: (ident(3), 1)}
        ids, versions, after = tx.vectors_after("m", 1, 4)
        assert sorted(zip(ids, versions)) == [(ident(2), 1), (ident(3), 1)] and after.shape == (2, 4)


def test_dropped_vectors_leave_service_but_stay_counted_until_cleared(storage):
    put(storage, memory(1), memory(2))
    with storage.transaction() as tx:
        tx.insert_vectors([ident(1), ident(2)], [1, 1], "m", unit_rows(2))
        tx.insert_vectors([ident(1)], [1], "n", unit_rows(1))
    with storage.transaction() as tx:
        tx.drop_vectors(ident(1), model="m")
    with storage.reading() as tx:
        assert tx.vector_stats("m")[0] == 1 and tx.vector_stats("n")[0] == 1
        assert tx.dropped_keys("m") == [1]
        assert tx.covered("m", 2) == 2  # live or dropped since
    with storage.transaction() as tx:
        tx.drop_vectors(ident(1))  # every model's
        tx.clear_dropped("m")
    with storage.reading() as tx:
        assert tx.dropped_keys("m") == [] and tx.dropped_keys("n") == [3]
        assert tx.covered("m", 2) == 1
    with storage.transaction() as tx:
        tx.clear_dropped()
        assert tx.dropped_keys("n") == []


def test_vector_chunks_are_the_current_version_vectors_of_memories_passing_the_filters(storage):
    put(storage, memory(1, tags=["a"], versions=2), memory(2), memory(3, actor="bob", tags=["a"]))
    mat = unit_rows(4)
    with storage.transaction() as tx:
        tx.insert_vectors([ident(1), ident(1), ident(2), ident(3)], [1, 2, 1, 1], "m", mat)
    with storage.reading() as tx:
        [(ids, got)] = tx.vector_chunks(Filters("alice", tags=("a",)), "m", 4)
        assert ids == [ident(1)] and np.array_equal(got, as_stored(storage, mat[1:2]))
        assert list(tx.vector_chunks(Filters("carol"), "m", 4)) == []
        assert list(tx.vector_chunks(Filters("alice"), "no such model", 4)) == []


def test_searching_answers_as_reading_does_from_a_current_snapshot_and_after_a_change(storage):
    """``searching()`` may answer from the search snapshot: the same answers as ``reading()``,
    whether the snapshot is current, missing or out of date."""
    put(storage, *mixed_memories())
    mat = unit_rows(20, dim=4, seed=3)
    with storage.transaction() as tx:
        tx.add_terms([(ident(i), [i % 4, 10 + i % 3, i % 4]) for i in range(1, 21)])
        tx.insert_vectors([ident(i) for i in range(1, 21)], [1 + i % 2 for i in range(1, 21)], "m", mat)
        tx.set_weights("alice", (0.3, 0.2, 0.2, 0.2, 0.1), seq=1, at=T0)
        tx.bump([ident(2), ident(3)], access=2, citations=1, at=T0 + timedelta(hours=3))
        tx.insert_grant(grant(1, "alice", "carol", tags=("a",), expires=T0 + timedelta(days=3)))
        tx.insert_grant(grant(2, "bob", "carol", types=(GOAL,)))
        tx.insert_grant(grant(3, "alice", "bob", expires=T0 + timedelta(days=1)))  # expired at the query's now
        tx.insert_grant(grant(4, "alice", "dave"))
        tx.revoke_grant(grant_id(4), at=T0 + timedelta(hours=1), by="alice")
    ids = [ident(i) for i in range(0, 23)]  # 0, 21 and 22 do not exist
    now = T0 + timedelta(days=2, microseconds=7)
    score = Scoring(now, 86400.0 * 7, (0.3, 0.2, 0.2, 0.2, 0.1))
    filters = [*MIXED_FILTERS, Filters(actor="dave", scopes=(("alice", (), ()),), tags=("a",))]

    def answers(view) -> list:
        with view() as tx:
            out: list = [tx.doc_count(), tx.count_heads(), tx.weights("alice"), tx.weights("bob"),
                         tx.model_dim("m"), tx.vector_stats("m"), tx.covered("m", 20), tx.covered("m", 5),
                         sorted(tx.vectors_of_keys([1, 5, 19, 20, 99], "m")), tx.search_data(ids),
                         tx.result_rows(ids, "short"), tx.result_rows(ids, "medium"),
                         *(tx.live_grants(a, now) for a in ("alice", "bob", "carol", "dave"))]
            for f in filters:
                hidden = tx.hidden_docs(f.viewer)
                post = tx.postings_of([0, 1, 2, 3, 10, 11, 12, 99])
                out += [tx.count_heads(f), tx.passing(ids, f), tx.candidates(ids, f, score),
                        tx.top_salience(f, score, 7), sorted(hidden.tolist()),
                        sorted(zip(post["term"].tolist(), post["doc"].tolist(), post["tf"].tolist())),
                        tx.doc_ids(list(range(0, 25))), tx.term_df([0, 1, 10, 99], hidden),
                        tx.doc_terms([1, 2, 5, 99])]
            return out

    want = answers(storage.reading)
    assert answers(storage.searching) == want  # no snapshot yet
    assert storage.refresh_snapshot()["action"] == "build"
    assert storage.snapshot_state() == "current"
    assert answers(storage.searching) == want
    # vector_keys_for may be None (the backend hands the vectors with vector_chunks instead)
    with storage.searching() as tx:
        got = tx.vector_keys_for(Filters(actor="alice"), "m")
    ids_, keys = got if got is not None else ([], np.zeros(0, np.uint64))
    with storage.reading() as tx:
        ids2 = [i for ids, _ in tx.vector_chunks(Filters(actor="alice"), "m", 4) for i in ids]
        key_of = {i: k for k, i, v in tx.vectors_of_keys(list(range(1, 21)), "m")}
    if got is not None:
        assert sorted(ids_) == sorted(ids2) and all(key_of[i] == k for i, k in zip(ids_, keys.tolist()))
    # a change: searching reads the store, or (a backend that keeps a delta of what changed since the
    # snapshot, as DuckDB's does) the snapshot and its delta, with the same answers
    # changes made as the engine makes them, each with the journal entry naming the memory: the delta
    # follows the journal (store/snapshot/)
    head, versions = memory(30, tags=("a",))
    with storage.transaction() as tx:
        tx.insert_memories([head], versions)
        journaled(tx, "write", 30)
    assert storage.snapshot_state() in ("current", "stale")
    assert answers(storage.searching) == answers(storage.reading)
    with storage.transaction() as tx:  # an update, a bump and a forgotten memory, on top of the delta
        tx.update_head(ident(4), {"tags": ["b"], "importance": 9})
        tx.bump([ident(5), ident(30)], access=3, citations=2, at=T0 + timedelta(hours=5))
        tx.update_head(ident(6), {"tombstoned_at": T0 + timedelta(hours=6)})
        journaled(tx, "update_head", 4, 5, 30)
        journaled(tx, "tombstone", 6)
    assert answers(storage.searching) == answers(storage.reading)
    with storage.transaction() as tx:  # grants given and revoked on top of the delta, and a head made scoped
        tx.insert_grant(grant(5, "bob", "dave", tags=("b",)))
        tx.revoke_grant(grant_id(1), at=T0 + timedelta(hours=7), by="alice")
        tx.update_head(ident(8), {"visibility": "scoped", "tags": ["a"]})
        journaled(tx, "update_head", 8)
    assert answers(storage.searching) == answers(storage.reading)


def test_threads_sharing_one_storage_take_turns_at_the_writer_lock(tmp_path):
    """A thread holding the writer lock makes another thread of the same storage wait (and, past
    its --wait, be told the store is busy), as another process would; its own nested writes go on."""
    import threading

    from cortexctl.errors import StoreBusy

    shared = open_storage(tmp_path / "store", wait=0.2)
    put(shared, memory(1))  # the store exists
    holding, done = threading.Event(), threading.Event()
    errors: list = []

    def holder():
        with shared.exclusive():
            put(shared, memory(2))  # nested in its own lock: no second wait
            holding.set()
            done.wait(30)

    t = threading.Thread(target=holder)
    t.start()
    try:
        assert holding.wait(30)
        try:
            put(shared, memory(3))
        except StoreBusy as exc:
            errors.append(exc)
    finally:
        done.set()
        t.join(30)
    assert len(errors) == 1
    with shared.reading() as tx:
        assert set(tx.heads_of([ident(1), ident(2), ident(3)])) == {ident(1), ident(2)}


def test_writers_creating_the_same_new_store_at_once_all_write(tmp_path):
    """Eight threads (each its own storage, as separate processes would be) make the same new store at
    the same moment: none is refused because another created the directory first."""
    import threading

    from cortexctl.store import open_storage
    from tests.contract.conftest import memory

    for round_ in range(3):
        path = tmp_path / f"store{round_}"
        start, errors = threading.Barrier(8), []

        def write(n: int) -> None:
            storage = open_storage(path, wait=30.0)
            start.wait()
            try:
                with storage.transaction() as tx:
                    tx.insert_memories(*(lambda h, vs: ([h], vs))(*memory(n)))
            except Exception as exc:  # noqa: BLE001 - collected, asserted below
                errors.append(str(exc))

        threads = [threading.Thread(target=write, args=(n,)) for n in range(1, 9)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == [], errors
        with open_storage(path).reading() as tx:
            assert tx.count_heads() == 8


def test_a_damaged_database_file_is_an_integrity_error_naming_it_and_a_bad_query_is_not(storage):
    """What DuckDB says of a damaged file becomes exit 7 naming cortex.duckdb; a query it cannot
    bind (a bug of ours) stays an internal error."""
    import duckdb

    from cortexctl.errors import IntegrityError

    put(storage, *mixed_memories(200))
    with pytest.raises(duckdb.BinderException):
        with storage.read() as con:
            con.execute("SELECT no_such_column FROM heads")
    size = storage.db_path.stat().st_size
    with open(storage.db_path, "r+b") as fh:
        fh.truncate(size // 2)
    with pytest.raises(IntegrityError) as err:
        with storage.reading() as tx:
            tx.health_counts()
    assert err.value.exit_code == 7 and err.value.path == str(storage.db_path)
    assert str(storage.db_path) in err.value.message


def _holder(path):
    """Another open file of ``path`` holding its exclusive flock (as another process's would)."""
    import fcntl
    import os

    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def _free(path) -> bool:
    import fcntl
    import os

    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def test_a_waiting_writer_takes_the_lock_once_its_holder_lets_go_and_holds_it(tmp_path):
    import os
    import threading
    import time

    from cortexctl.store.db import _flock_until

    path = tmp_path / ".lock"
    holder = _holder(path)
    mine = os.open(path, os.O_RDWR)
    got: list = []
    waiter = threading.Thread(target=lambda: got.append(_flock_until(mine, time.monotonic() + 600)))
    waiter.start()
    os.close(holder)  # lets go
    waiter.join()
    assert got == [True]
    assert not _free(path)  # ``mine`` holds it
    os.close(mine)
    assert _free(path)


def test_a_writer_that_gives_up_at_its_deadline_leaves_the_lock_free_once_the_holder_lets_go(tmp_path):
    import os
    import time

    from cortexctl.store.db import _flock_until

    path = tmp_path / ".lock"
    holder = _holder(path)
    mine = os.open(path, os.O_RDWR)
    assert _flock_until(mine, time.monotonic() + 0.05) is False
    assert _flock_until(mine, time.monotonic()) is False  # no time left: one attempt
    os.close(mine)
    os.close(holder)
    for _ in range(6000):  # the given-up waiter may take it for a moment, and lets it go at once
        if _free(path):
            break
        time.sleep(0.01)
    else:
        pytest.fail("the lock stayed taken after every holder let go")


def test_a_snapshots_result_rows_are_the_databases_with_frames_links_valid_times_and_tombstones(storage):
    """A snapshot's result row keeps only what no column holds (the forms, and frames, tombstone time
    and links when set): every field of the row is the database's all the same."""
    plain, framed = memory(1, tags=["b", "a"]), memory(2, frames=["build:repo:acme/api"], tombstoned=True, versions=2)
    linked = memory(3, actor="bob", visibility="public")
    linked[0].update(valid_from=T0 - timedelta(days=3), valid_to=T0 + timedelta(days=1), supersedes=ident(1))
    plain[0].update(superseded_by=ident(3), valid_to=T0 - timedelta(days=3))
    put(storage, plain, framed, linked)
    ids = [ident(i) for i in range(0, 5)]
    with storage.reading() as tx:
        want = [tx.result_rows(ids, "short"), tx.result_rows(ids, "medium")]
    assert storage.refresh_snapshot()["action"] == "build"
    with storage.searching() as tx:
        assert [tx.result_rows(ids, "short"), tx.result_rows(ids, "medium")] == want
    assert want[0][ident(2)]["frames"] == ["build:repo:acme/api"] and want[0][ident(2)]["tombstoned_at"]
    assert want[0][ident(3)]["valid_from"] == T0 - timedelta(days=3) and want[1][ident(1)]["superseded_by"] == ident(3)
