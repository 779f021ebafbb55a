"""Storage: the backend itself. Opening and transactions, the read-only views (``reading`` and
find's ``searching``), and the upkeep of its search structures (``update_index``,
``index_loader``, ``after_vectors``) with the healthcheck's blocks on them."""

from __future__ import annotations

from datetime import timedelta

import pytest

from cortexctl.memory.terms import text_terms
from cortexctl.store.interface import CAPABILITIES, Filters, Holding, NoStore, Scoring, Storage, Tx
from tests.contract.conftest import (GOAL, MIXED_FILTERS, T0, WEIGHTS, embedded, entry, grant, grant_id, ident,
                                     journaled, memory, methods, mixed_memories, put, unit_rows)

INDEX_KEYS = {"path", "exists", "count", "model", "dimension", "consistent", "state",
              "connectivity", "files", "denser_on_rebuild", "split_on_rebuild", "building"}
ACTIONS = {"fold", "rebuild", "none"}
# More memories than any backend may compare one by one (DuckDB's EXACT_MAX is 4096): nearest goes
# through the backend's index.
MANY = 4200


# -- the protocols ------------------------------------------------------------------------------
def test_tx_is_the_union_of_small_capabilities():
    assert methods(Tx) == set().union(*(methods(c) for c in CAPABILITIES))
    assert all(len(methods(c)) <= 15 for c in (*CAPABILITIES, Storage))


def test_the_backend_has_every_method_of_the_protocols(storage):
    assert all(callable(getattr(storage, m, None)) for m in methods(Storage) | methods(Holding)), methods(Storage)
    assert isinstance(storage.location, str) and storage.location
    with storage.transaction() as tx:
        missing = {m for m in methods(Tx) if not callable(getattr(tx, m, None))}
    assert not missing


def test_the_search_view_has_every_method_of_tx_and_no_other_falls_through(storage):
    """``searching()`` may answer from a cache (the DuckDB backend's snapshot): its view still has
    every ``Tx`` method, and a name that is none of them does not reach the database behind it."""
    head, versions = memory(1)
    model, mat = embedded(["memory 1"])
    with storage.transaction() as tx:
        tx.insert_memories([head], versions)
        tx.insert_vectors([ident(1)], [1], model, mat)
    storage.update_index(model)
    with storage.searching() as tx:
        missing = {m for m in methods(Tx) if not callable(getattr(tx, m, None))}
        assert not missing
        assert getattr(tx, "heads_by_idz", None) is None and getattr(tx, "con", None) is None
        assert tx.heads_by_ids([ident(1)], "alice")[0]["id"] == ident(1)


# -- opening and transactions -------------------------------------------------------------------
def test_the_address_reopens_the_store_and_local_dir_is_where_it_lives(storage):
    """``address`` is what ``open_storage`` takes to reach the same store again (verify's
    workers do, in other processes); ``local_dir`` is its directory on this machine, None for
    a store on a server."""
    from pathlib import Path

    from cortexctl.store import open_storage

    head, versions = memory(1)
    with storage.transaction() as tx:
        tx.insert_memories([head], versions)
    again = open_storage(storage.address, wait=5.0)
    assert again.location == storage.location
    with again.reading() as tx:
        assert tx.heads_by_ids([ident(1)], "alice")[0]["id"] == ident(1)
    where = storage.local_dir()
    assert where is None or (isinstance(where, Path) and where.is_dir() and any(where.iterdir()))


def test_a_writer_removes_what_a_dead_process_left_in_the_scratch_area_and_keeps_a_live_ones(storage):
    """Decrypted bundles, staged stores and spilled batches of a killed command (``store/scratch.py``)
    go with the next transaction that writes, on every backend; a running command's stay."""
    import subprocess
    import sys

    from cortexctl.store import scratch

    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    area = scratch.areas(storage)[0]
    dead = area / scratch.name("bundle", int(done.stdout), 1)
    dead.mkdir(parents=True)
    (dead / "heads.parquet").write_bytes(b"plaintext")
    live = scratch.make([area], "restore")
    head, versions = memory(1)
    with storage.transaction() as tx:
        tx.insert_memories([head], versions)
    assert not dead.exists() and live.is_dir()
    scratch.remove(live)
    assert not area.exists()


def test_a_worker_address_reads_exactly_what_the_view_it_came_from_reads(storage):
    """verify's workers open ``worker_address(tx)`` in other processes: they see the store as
    ``tx`` sees it, whatever a writer commits meanwhile (a backend may instead keep writers out)."""
    import subprocess
    import sys

    from cortexctl.store import open_storage

    put(storage, memory(1))
    writer = ("import sys; from cortexctl.store import open_storage; from tests.contract.conftest import put, memory\n"
              "from cortexctl.errors import StoreBusy\n"
              "try:\n    put(open_storage(sys.argv[1], wait=0.2), memory(2))\nexcept StoreBusy:\n    sys.exit(4)\n")
    with storage.reading() as tx:
        address = storage.worker_address(tx)
        wrote = subprocess.run([sys.executable, "-c", writer, storage.address], capture_output=True, text=True)
        assert wrote.returncode in (0, 4), wrote.stderr  # 4: writers wait while the view is open
        with open_storage(address, wait=5.0).reading() as worker:
            assert worker.existing_ids([ident(1), ident(2)]) == tx.existing_ids([ident(1), ident(2)]) == {ident(1)}
    with storage.reading() as tx:  # the write that went on meanwhile is there for a new view
        assert tx.existing_ids([ident(2)]) == ({ident(2)} if wrote.returncode == 0 else set())


def test_a_store_does_not_exist_until_the_first_transaction(storage):
    assert not storage.exists()
    storage.check_location()  # an empty location can hold a store
    with pytest.raises(NoStore):
        with storage.reading():
            pass
    with pytest.raises(NoStore):
        with storage.searching():
            pass
    with storage.transaction():
        pass
    assert storage.exists()
    with storage.reading() as tx:
        assert tx.count_heads() == 0


def test_a_committed_transaction_is_seen_by_later_readers(storage):
    put(storage, memory(1))
    with storage.reading() as tx:
        assert [h["id"] for h in tx.heads_by_ids([ident(1)], "alice")] == [ident(1)]


def test_an_exception_in_a_transaction_leaves_nothing_written(storage):
    put(storage, memory(1))
    model, mat = embedded(["a new memory"])
    with pytest.raises(RuntimeError):
        with storage.transaction() as tx:
            h, vs = memory(2)
            tx.insert_memories([h], vs)
            tx.append_journal([entry("write", ident(2))])
            tx.add_terms([(ident(2), text_terms("a new memory"))])
            tx.insert_vectors([ident(2)], [1], model, mat)
            tx.set_weights("alice", WEIGHTS, seq=1, at=T0)
            tx.insert_grant(grant(1, "alice", "bob"))
            tx.update_head(ident(1), {"importance": 9})
            raise RuntimeError("boom")
    with storage.reading() as tx:
        assert tx.existing_ids([ident(1), ident(2)]) == {ident(1)}
        assert tx.heads_by_ids([ident(1)], "alice")[0]["importance"] == 5
        assert tx.journal_bounds() == (0, None, None)
        assert tx.search_terms(dict.fromkeys(text_terms("a new memory"), 1.0), Filters("alice"), 5) == []
        assert tx.model_dim(model) is None
        assert tx.weights("alice") is None and tx.all_grants() == {}
        assert list(tx.stray_terms()) == []


def test_transactions_inside_holding_each_commit_on_their_own(storage):
    """The store kept open for several transactions (``holding``, which makes it when needed): each
    commits or rolls back by itself, and a reader after the block sees the committed ones."""
    with storage.holding():
        for n in (1, 2):
            with storage.transaction() as tx:
                h, vs = memory(n)
                tx.insert_memories([h], vs)
                tx.append_journal([entry("write", ident(n))])
        with pytest.raises(RuntimeError):
            with storage.transaction() as tx:
                h, vs = memory(3)
                tx.insert_memories([h], vs)
                raise RuntimeError("boom")
        with storage.transaction() as tx:  # what the ones before committed, seen through a later one
            assert tx.existing_ids([ident(1), ident(2), ident(3)]) == {ident(1), ident(2)}
    with storage.reading() as tx:
        assert tx.existing_ids([ident(1), ident(2), ident(3)]) == {ident(1), ident(2)}
        assert tx.journal_bounds()[0] == 2


def test_writers_take_turns(storage, backend, tmp_path):
    """A second writer (another handle on the same store) starts only after the first committed:
    it sees what the first wrote. Synchronised on events: correct code passes however slow."""
    import threading

    from tests.contract.conftest import _open

    put(storage, memory(1))
    second = _open(backend, tmp_path)  # the same store, as another process would open it
    holding, release = threading.Event(), threading.Event()
    seen: list = []

    def first_writer() -> None:
        with storage.transaction() as tx:
            tx.update_head(ident(1), {"importance": 9})
            holding.set()
            release.wait(30)

    def second_writer() -> None:
        with second.transaction() as tx:
            seen.append(tx.heads_of([ident(1)])[ident(1)]["importance"])
            tx.update_head(ident(1), {"importance": 3})

    one = threading.Thread(target=first_writer)
    one.start()
    assert holding.wait(30)
    two = threading.Thread(target=second_writer)
    two.start()
    two.join(0.5)  # time for a writer that does not wait its turn to get in first (and fail the test)
    release.set()
    one.join(30)
    two.join(30)
    assert seen == [9]
    with storage.reading() as tx:
        assert tx.heads_of([ident(1)])[ident(1)]["importance"] == 3


def test_bulk_transactions_change_nothing_that_is_stored_and_bounded_views_read_it(storage):
    for n in range(1, 4):
        with storage.transaction(bulk=True, tidy=n == 3) as tx:
            tx.insert_memories(*(lambda h, vs: ([h], vs))(*memory(n)))
    with storage.transaction() as tx:
        tx.insert_memories(*(lambda h, vs: ([h], vs))(*memory(4)))
    for bounded in (False, True):  # a bounded view reads what any view does
        with storage.reading(bounded=bounded) as tx:
            assert tx.existing_ids([ident(n) for n in range(1, 6)]) == {ident(n) for n in range(1, 5)}
            assert sorted(h["id"] for h in tx.heads_by_ids([ident(n) for n in range(1, 5)], "alice")) == [
                ident(n) for n in range(1, 5)]


def test_reclaim_space_after_many_transactions_changes_nothing_that_is_stored(storage):
    # Ten transactions, each closing with its housekeeping: on DuckDB they leave a third of the file
    # free, and the file is rewritten.
    for start in range(1, 400, 40):
        with storage.transaction() as tx:
            batch = [memory(n) for n in range(start, start + 40)]
            tx.insert_memories([h for h, _ in batch], [v for _, vs in batch for v in vs])
            tx.append_journal([entry("write", ident(n), payload=bytes([n % 251]) * 2000)
                               for n in range(start, start + 40)])
    ids = [ident(n) for n in range(1, 401)]

    def stored():
        with storage.reading() as tx:
            return (tx.heads_of(ids), [tx.versions(i) for i in ids[::37]],
                    list(tx.journal_entries(["write"])))

    before = stored()
    report = storage.reclaim_space()
    assert report["action"] in ("rewrite", "none") and report["bytes"] <= report["bytes_before"]
    assert stored() == before
    put(storage, memory(401))  # and the store takes writes as before
    with storage.reading() as tx:
        assert tx.existing_ids([ident(401)]) == {ident(401)}


def test_size_bytes_is_a_count_of_bytes_before_and_after_the_store_is_made(storage):
    assert storage.size_bytes() == 0  # nothing there yet
    put(storage, memory(1))
    size = storage.size_bytes()
    assert isinstance(size, int) and size >= 0


# -- searching: find's view -------------------------------------------------------------------------
def test_searching_answers_as_reading_does_before_and_after_the_index_is_brought_up_to_date(storage):
    """``searching()`` may answer from a cache of the backend's: the same answers as ``reading()``,
    whether the cache is missing, current, or behind the writes made since; and so does a resident
    storage of the same store (what ``cortexctl mcp`` keeps), asked twice each time (the second from
    what it kept)."""
    from cortexctl.store import open_storage

    resident = open_storage(storage.location, wait=5.0, resident=True)
    texts = [f"memory {i} about {'rivers' if i % 2 else 'mountains'} and {'boats' if i % 3 else 'trains'}"
             for i in range(1, 21)]
    mixed = mixed_memories()
    for i, (head, _) in enumerate(mixed):  # three sessions, and memories of none
        head["session"] = f"s{i % 3}" if i % 4 else None
    put(storage, *mixed)
    model, mat = embedded(texts)
    with storage.transaction() as tx:
        tx.add_terms([(ident(i), text_terms(texts[i - 1])) for i in range(1, 21)])
        tx.insert_vectors([ident(i) for i in range(1, 21)], [1 + i % 2 for i in range(1, 21)], model, mat)
        tx.set_weights("alice", (0.3, 0.2, 0.2, 0.2, 0.1), seq=1, at=T0)
        tx.bump([ident(2), ident(3)], access=2, citations=1, at=T0 + timedelta(hours=3))
        tx.insert_grant(grant(1, "alice", "carol", tags=("a",), expires=T0 + timedelta(days=3)))
        tx.insert_grant(grant(2, "bob", "carol", types=(GOAL,)))
        tx.insert_grant(grant(3, "alice", "dave"))
        tx.revoke_grant(grant_id(3), at=T0 + timedelta(hours=1), by="alice")
    ids = [ident(i) for i in range(0, 32)]  # 0 and 21..31 do not exist (yet)
    now = T0 + timedelta(days=2, microseconds=7)
    score = Scoring(now, 86400.0 * 7, (0.3, 0.2, 0.2, 0.2, 0.1))
    filters = MIXED_FILTERS
    queries = [dict.fromkeys(text_terms(q), 1.0) for q in ("rivers", "mountains trains", "boats memory")]
    vectors = embedded(["rivers and boats", "mountains", "memory 4"])[1]

    def answers(view) -> list:
        with view() as tx:
            out: list = [tx.count_heads(), tx.weights("alice"), tx.weights("bob"), tx.model_dim(model),
                         tx.search_data(ids), tx.result_rows(ids, "short"), tx.result_rows(ids, "medium"),
                         *(tx.live_grants(a, now) for a in ("alice", "bob", "carol", "dave"))]
            for f in filters:
                out += [tx.count_heads(f), tx.passing(ids, f), tx.candidates(ids, f, score),
                        tx.session_neighbours(ids, f, 2),
                        tx.top_salience(f, score, 7),
                        *(rounded(tx.search_terms(q, f, 5)) for q in queries),
                        *(rounded(tx.nearest(v, model, f, 5)[0]) for v in vectors)]
            return out

    def same() -> None:
        want = answers(storage.reading)
        assert answers(storage.searching) == want
        assert answers(resident.searching) == want
        assert answers(resident.searching) == want

    try:
        _searching_steps(storage, model, same)
    finally:
        getattr(resident, "close", lambda: None)()


def _searching_steps(storage, model: str, same) -> None:
    same()  # no cache yet
    assert storage.update_index(model)["action"] in ACTIONS
    same()
    # changes made as the engine makes every change to a memory, with a journal entry naming it (a
    # backend's cache may follow the journal to know what changed: the DuckDB snapshot's delta does)
    head, versions = memory(30, tags=("a",))
    head["session"] = "s1"
    with storage.transaction() as tx:
        tx.insert_memories([head], versions)
        tx.add_terms([(ident(30), text_terms("rivers rivers"))])
        journaled(tx, "write", 30)
    same()
    with storage.transaction() as tx:  # an update, a bump and a forgotten memory
        tx.update_head(ident(4), {"tags": ["b"], "importance": 9})
        tx.bump([ident(5), ident(30)], access=3, citations=2, at=T0 + timedelta(hours=5))
        tx.update_head(ident(6), {"tombstoned_at": T0 + timedelta(hours=6)})
        tx.drop_vectors(ident(9))
        journaled(tx, "update_head", 4, 5, 30)
        journaled(tx, "tombstone", 6)
        journaled(tx, "update", 9)
    same()
    with storage.transaction() as tx:  # grants given and revoked, and a head made scoped
        tx.insert_grant(grant(5, "bob", "dave", tags=("b",)))
        tx.revoke_grant(grant_id(1), at=T0 + timedelta(hours=7), by="alice")
        tx.update_head(ident(8), {"visibility": "scoped", "tags": ["a"]})
        journaled(tx, "update_head", 8)
    same()
    assert storage.cache_health()["problem"] is None


def rounded(ranked: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """Scores to 6 places: the two views may sum in another order, or hold vectors at another precision."""
    return [(i, round(s, 6)) for i, s in ranked]


# -- the search structures: update_index, index_loader, after_vectors ------------------------------------
def _many(storage, n: int = MANY, dim: int = 16):
    put(storage, *(memory(i, actor="alice" if i % 2 else "bob") for i in range(1, n + 1)))
    return unit_rows(n, dim=dim, seed=1)


def _agrees_with_exact(storage, model: str, queries, filters: Filters) -> None:
    """The top 10 found through the backend's index: the exact top 10, give or take its approximation."""
    with storage.reading() as tx:
        for q in queries:
            got, note = tx.nearest(q, model, filters, 10)
            want, _ = tx.nearest(q, model, filters, 10, exact=True)
            assert len(got) == 10 and got == sorted(got, key=lambda kv: (-kv[1], kv[0]))
            assert len({i for i, _ in got} & {i for i, _ in want}) >= 8, (got, want)
            assert tx.passing([i for i, _ in got], filters).keys() == {i for i, _ in got}


def test_update_index_reports_what_it_did_and_nearest_then_answers_through_it(storage):
    model = "m"
    with storage.transaction():
        pass
    done = storage.update_index(model)
    assert done["action"] == "none" and done["vectors"] == 0  # nothing to index yet
    mat = _many(storage)
    with storage.transaction() as tx:
        tx.insert_vectors([ident(i) for i in range(1, MANY + 1)], [1] * MANY, model, mat)
    calls = []
    done = storage.update_index(model, progress=lambda d, t: calls.append((d, t)), wait=0)
    assert done["action"] in ACTIONS and done["vectors"] == MANY
    assert all(0 <= d <= t for d, t in calls)
    assert storage.update_index(model)["vectors"] == MANY  # again: nothing new, nothing lost
    assert storage.update_index(model, rebuild=True)["vectors"] == MANY
    with storage.reading() as tx:
        assert tx.index_problems(model) == []
        ((first, _),), note = tx.nearest(mat[0], model, Filters("alice"), 1)
        assert first == ident(1)  # its own vector is the nearest
    _agrees_with_exact(storage, model, unit_rows(5, dim=16, seed=2), Filters("alice"))
    _agrees_with_exact(storage, model, unit_rows(3, dim=16, seed=3), Filters("bob", include_tombstoned=True))
    health = storage.index_health(model)
    assert set(health) == INDEX_KEYS
    assert (health["count"], health["model"], health["dimension"], health["consistent"]) == (MANY, model, 16, True)


def test_an_index_loader_fed_by_a_bulk_load_gives_the_same_answers(storage):
    """import hands each committed batch's vectors to the loader, then ``update_index(loader=...)``."""
    model = "m"
    mat = _many(storage)
    loader = storage.index_loader(model, threads=1, expected=MANY)
    step = 1500
    for start in range(0, MANY, step):
        ids = [ident(i) for i in range(start + 1, min(start + step, MANY) + 1)]
        with storage.transaction(bulk=True) as tx:
            last = tx.insert_vectors(ids, [1] * len(ids), model, mat[start:start + len(ids)])
        loader.add(last, ids, [1] * len(ids), mat[start:start + len(ids)])
    with storage.transaction() as tx:  # a change after the loader saw the vector: the answers still follow the store
        tx.drop_vectors(ident(3), model=model)
    done = storage.update_index(model, loader=loader)
    assert done["action"] in ACTIONS and done["vectors"] == MANY - 1
    _agrees_with_exact(storage, model, [mat[2], *unit_rows(4, dim=16, seed=4)], Filters("alice"))
    with storage.reading() as tx:
        assert ident(3) not in {i for i, _ in tx.nearest(mat[2], model, Filters("alice"), 10)[0]}
        assert tx.index_problems(model) == []
    assert storage.index_health(model)["consistent"] is True
    unused = storage.index_loader(model)
    unused.close()  # handed nothing: closing it changes nothing
    assert storage.update_index(model)["vectors"] == MANY - 1


def test_after_vectors_never_fails_and_new_vectors_are_found_at_once(storage):
    model = "m"
    storage.after_vectors(model, 1)  # no store yet
    mat = _many(storage)
    with storage.transaction() as tx:
        tx.insert_vectors([ident(i) for i in range(1, MANY)], [1] * (MANY - 1), model, mat[:-1])
    storage.update_index(model)
    with storage.transaction() as tx:  # one more vector, written after the index was brought up to date
        last = tx.insert_vectors([ident(MANY)], [1], model, mat[-1:])
    storage.after_vectors(model, last)
    storage.after_vectors(model, last + 10_000)  # a number far ahead: upkeep, never a failure
    storage.after_vectors("another-model", last)
    with storage.reading() as tx:
        ((first, _),), _ = tx.nearest(mat[-1], model, Filters("bob"), 1)
        assert first == ident(MANY)
        assert tx.index_problems(model) == []


def test_index_and_cache_health_describe_a_sound_store_as_sound(storage):
    assert set(storage.index_health(None)) == INDEX_KEYS  # no store yet
    assert set(storage.cache_health()) == {"state", "problem", "fold_failed"}
    put(storage, memory(1), memory(2))
    model, mat = embedded(["one", "two"])
    with storage.transaction() as tx:
        tx.insert_vectors([ident(1), ident(2)], [1, 1], model, mat)
    for _ in range(2):  # before and after the search structures are brought up to date
        health = storage.index_health(model)
        assert set(health) == INDEX_KEYS and health["consistent"] is not False
        cache = storage.cache_health()
        assert set(cache) == {"state", "problem", "fold_failed"} and cache["problem"] is None
        assert isinstance(cache["state"], str) and cache["fold_failed"] is None
        storage.update_index(model)
    assert set(storage.index_health(None)) == INDEX_KEYS
