"""The fold off the write path (``store/fold.py``): a write that finds the index's tail or the
snapshot's delta grown starts a background fold and returns; the fold builds without the writer
lock, puts its files in place under it, and follows the writes made meanwhile. Every state it leaves
answers ``find`` as DuckDB alone does."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cortexctl import Cortex, files
from cortexctl.engine.results import FindQuery
from cortexctl.store import fold, snapshot, vector_index
from cortexctl.store.db import DuckStorage
from tests.unit.test_snapshot import _answer, _cx, _fill, _filled_stores, _flip, _from_duckdb  # noqa: F401 (a fixture)

GATE_DIR = Path(__file__).parent / "fold_gate"
QUERIES = ({"near": "deploy key rotation", "k": 10}, {"k": 20}, {"near": "walrus colony", "k": 5},
           {"tags": ["t1"], "k": 10})


def _record(store: Path) -> dict:
    return json.loads((store / vector_index.RECORD_NAME).read_text())


def _index_ok(cx: Cortex) -> bool:
    block = cx.store.index_health(cx.embedder.model)
    assert block["state"] == "ok", block
    return True


def _same_answers(cx: Cortex) -> None:
    for q in QUERIES:
        assert _answer(cx, **q) == _from_duckdb(cx, **q), q


def _delta_ids(store: Path) -> list[str]:
    """The memories the current delta holds ([] when the snapshot is current without one; the
    dropped keys a fold clears after putting its snapshot in place leave a delta of no memories)."""
    got = snapshot.open_current(store)
    assert got is not None
    got[0].close()
    return [] if got[1] is None else got[1]["ids"]


def _fold_running(store: Path) -> bool:
    with fold._fold_lock(store) as fd:
        return fd is None


@pytest.fixture
def gated(monkeypatch, tmp_path):
    """Background folds from here on, each held at its start until the returned file exists (made
    at the end of the test whatever happens, so that no fold is left waiting)."""
    gate = tmp_path / "gate"
    monkeypatch.delenv("CORTEXCTL_FOLD")
    monkeypatch.setenv("PYTHONPATH", str(GATE_DIR))
    monkeypatch.setenv("CORTEXCTL_TEST_FOLD_GATE", str(gate))
    yield gate
    gate.touch()


@pytest.fixture
def folded(store):
    """A store of 40 memories with its index file and snapshot current."""
    cx = _cx(store)
    _fill(cx, 40)
    cx.reindex()
    assert snapshot.state(store) == "current" and _index_ok(cx)
    return cx


def test_a_write_that_grows_the_tail_starts_a_background_fold_and_returns(folded, store, gated, monkeypatch):
    cx = folded
    gate = gated
    monkeypatch.setattr(vector_index, "FOLD_AT", 3)
    before = _record(store)
    for i in range(3):
        cx.write("fact", f"walrus colony number {i} on the ice", tags=["t1"])
    # the third write started the fold and returned; the fold is held at its start by the gate
    assert _fold_running(store)
    assert _record(store) == before
    cx.write("fact", "walrus colony written while the fold waits")  # writers go on
    cx.update(cx.find(FindQuery(near="walrus colony number 0", k=1))[0].id, text="walrus colony renamed")
    assert not fold.start(store, None)  # one fold at a time
    _same_answers(cx)
    gate.touch()
    fold.wait_idle(store)
    after = _record(store)
    assert after["max_key"] > before["max_key"] and after["count"] == before["count"] + 4
    assert _index_ok(cx)
    assert snapshot.state(store) == "current" and _delta_ids(store) == []
    _same_answers(cx)
    assert cx.find(FindQuery(near="walrus colony renamed", k=1))[0].text == "walrus colony renamed"


def _steps(cx: Cortex, meanwhile=None):
    """The fold's first step taken (under the lock), and the rest to run after what the test does
    between them (a write meanwhile is what a background fold meets); ``meanwhile(built)`` runs
    between the build and the install."""
    st = cx.store
    model = cx.embedder.model
    from cortexctl.store import scratch

    work = scratch.make(scratch.areas(st), "fold")
    with st.exclusive():
        taken = fold._take(st, model, work)

    def rest() -> dict:
        try:
            built = fold._build(st, taken, work)
            if meanwhile is not None:
                meanwhile(built)
            with st.exclusive():
                return fold._install(st, model, taken, built)
        finally:
            fold.release(taken)
            scratch.remove(work)
    return rest


def _data_byte(path: Path) -> int:
    header, start = snapshot._header_of(path)
    assert header["arrays"]["data_blob"]["nbytes"] > 3
    return start + header["arrays"]["data_blob"]["offset"] + 3


def test_a_snapshot_written_to_between_the_folds_build_and_its_install_is_not_stamped(folded, store):
    """The fold writes the next snapshot in its work directory without the lock and puts it in place
    later: a write to that file in between (its CRCs made before it) leaves it unstamped, so find
    checks its blocks as it reads them and answers from DuckDB where one fails."""
    cx = folded
    cx.write("fact", "walrus colony written before the fold")
    done = _steps(cx, meanwhile=lambda built: _flip(built["snapshot"], _data_byte(built["snapshot"])))()
    assert done["snapshot"] == "merged"
    path = store / snapshot.SNAPSHOT_NAME
    assert files.checked_value(path, path.stat()) is None
    assert "damaged" in cx.store.snapshot_problem()
    _same_answers(cx)


def test_a_fold_does_not_carry_a_damaged_block_its_stamp_hides_into_the_next_snapshot(folded, store):
    """Damage below the file system changes no time: the checked stamp still names the file. A fold
    reads every block of the snapshot it merges whatever the stamp says, so the damage ends there
    (the snapshot is built whole from DuckDB) rather than going on under fresh CRCs and a new stamp.
    The damage is made by flipping a byte and stamping the file as it is then."""
    cx = folded
    path = store / snapshot.SNAPSHOT_NAME
    crc = snapshot._header_of(path)[0]["_crc"]
    _flip(path, _data_byte(path))
    files.stamp_checked(path, path.stat(), crc)
    cx.write("fact", "walrus colony written after the damage")
    assert fold.run(cx.store, cx.embedder.model)["snapshot"] != "merged"
    assert cx.store.snapshot_problem() is None
    assert files.checked_value(path, path.stat()) == snapshot._header_of(path)[0]["_crc"]
    _same_answers(cx)
    assert cx.find(FindQuery(near="walrus colony written after the damage", k=1))[0].text == \
        "walrus colony written after the damage"


def test_writes_made_while_the_fold_builds_are_followed_by_a_delta_on_the_new_snapshot(folded, store):
    cx = folded
    first = [cx.write("fact", f"walrus colony before the fold {i}", tags=["t1"]).id for i in range(5)]
    cx.update(first[0], text="walrus colony updated before the fold")  # a dropped key for the fold
    rest = _steps(cx)
    # meanwhile: a new memory, an update (new vector, old key dropped), a forget, an attest, a grant
    late = cx.write("fact", "walrus colony written during the fold", tags=["t2"]).id
    cx.update(first[1], text="walrus colony updated during the fold")
    cx.forget(first[2], reason="wrong")
    cx.attest("ship-it", "success", [first[3]])
    done = rest()
    assert done == {"index": "fold", "snapshot": "merged"}
    assert snapshot.state(store) == "current" and (store / snapshot.DELTA_NAME).exists()
    assert _index_ok(cx)
    _same_answers(cx)
    assert cx.find(FindQuery(near="walrus colony written during the fold", k=1))[0].id == late
    # the next fold takes the delta in
    assert fold.run(cx.store, cx.embedder.model)["snapshot"] == "merged"
    assert _delta_ids(store) == []
    _same_answers(cx)


def test_a_fold_that_meets_a_reindex_made_meanwhile_leaves_it_in_place(folded, store):
    cx = folded
    for i in range(4):
        cx.write("fact", f"walrus colony {i}")
    rest = _steps(cx)
    cx.reindex(rebuild=True)
    record = _record(store)
    assert rest() == {"index": "abandoned", "snapshot": "abandoned"}
    assert _record(store) == record and _index_ok(cx)
    _same_answers(cx)


def test_a_fold_that_meets_a_restore_made_meanwhile_leaves_the_restored_store_alone(folded, store, tmp_path):
    cx = folded
    bundle = cx.backup(dest=tmp_path / "bundles").path
    for i in range(4):
        cx.write("fact", f"walrus colony {i}")
    rest = _steps(cx)
    cx.restore(bundle, mode="replace", force=True)
    files = {n: (store / n).read_bytes() for n in (snapshot.SNAPSHOT_NAME, vector_index.RECORD_NAME)}
    assert rest() == {"index": "abandoned", "snapshot": "abandoned"}
    assert {n: (store / n).read_bytes() for n in files} == files
    assert all(not h.text.startswith("walrus colony") for h in cx.find(FindQuery(near="walrus colony", k=5)))
    _same_answers(cx)


def _drop_index(store: Path) -> None:
    for name in (vector_index.INDEX_NAME, vector_index.RECORD_NAME):
        (store / name).unlink()


def test_a_fold_with_no_index_file_to_trust_builds_a_whole_one_while_writers_go_on(folded, store, monkeypatch):
    cx = folded
    monkeypatch.setattr(vector_index, "EXACT_MAX", 0)  # find asks the index even of this small store
    first = [cx.write("fact", f"walrus colony before the build {i}", tags=["t1"]).id for i in range(5)]
    cx.update(first[0], text="walrus colony updated before the build")  # a dropped key when the fold starts
    _drop_index(store)
    rest = _steps(cx)
    # the vectors are taken; the writer lock is free while the file is built
    late = cx.write("fact", "walrus colony written during the build", tags=["t2"]).id
    cx.update(first[1], text="walrus colony updated during the build")  # a key the new file holds is dropped
    cx.forget(first[2], reason="wrong")
    assert rest()["index"] == "rebuild"
    assert _index_ok(cx) and snapshot.state(store) == "current"
    _same_answers(cx)
    hits, warnings = cx.find_with_warnings(FindQuery(near="walrus colony written during the build", k=1))
    assert hits[0].id == late and not warnings
    # answer for answer what a whole rebuild under the lock gives, once the tail written meanwhile
    # (compared exactly, not rounded as the file's vectors are) is folded in too
    assert fold.run(cx.store, cx.embedder.model)["index"] == "fold"
    answers = [_answer(cx, **q) for q in QUERIES]
    cx.reindex(rebuild=True)
    assert [_answer(cx, **q) for q in QUERIES] == answers
    assert cx.verify().ok


def test_a_whole_build_whose_spooled_vectors_change_under_it_fails_and_installs_nothing(folded, store):
    from cortexctl.errors import CortexError
    from cortexctl.store import scratch

    cx = folded
    _drop_index(store)
    st, model = cx.store, cx.embedder.model
    work = scratch.make(scratch.areas(st), "fold")
    try:
        with st.exclusive():
            taken = fold._take(st, model, work)
        spool = taken["rebuild"]["spool"]["path"]
        with open(spool, "r+b") as fh:  # one byte of one vector flipped
            fh.seek(1000)
            byte = fh.read(1)
            fh.seek(1000)
            fh.write(bytes([byte[0] ^ 0x40]))
        with pytest.raises(CortexError, match="changed while the index was built"):
            fold._build(st, taken, work)
    finally:
        fold.release(taken)
        scratch.remove(work)
    assert not (store / vector_index.RECORD_NAME).exists()
    assert fold.run(st, model)["index"] == "rebuild"  # the next fold builds it from the store again
    assert _index_ok(cx)
    _same_answers(cx)


def test_a_restore_leaves_the_index_to_a_background_fold_and_find_searches_exactly_meanwhile(
        folded, store, tmp_path, monkeypatch, request):
    cx = folded
    bundle = cx.backup(dest=tmp_path / "bundles").path
    exact = [_answer(cx, **q) for q in QUERIES]  # a store this small is searched exactly
    monkeypatch.setattr(vector_index, "EXACT_MAX", 0)  # find asks the index from here on
    gate = request.getfixturevalue("gated")  # from here on
    result = cx.restore(bundle, mode="replace", force=True)
    assert result.verified and any("being built in the background" in n for n in result.notes)
    assert _fold_running(store) and not (store / vector_index.RECORD_NAME).exists()
    assert snapshot.state(store) == "current"  # the snapshot was built by the restore itself
    block = cx.store.index_health(cx.embedder.model)
    assert block["building"] and block["consistent"] and "being built in the background" in block["state"]
    for q, want in zip(QUERIES, exact):
        hits, warnings = cx.find_with_warnings(FindQuery(**q))
        assert [h.to_json() for h in hits] == want, q
        if "near" in q:
            assert any("being built in the background: exact search" in w for w in warnings), warnings
    assert not (store / vector_index.RECORD_NAME).exists()  # find left the build to the fold
    late = cx.write("fact", "walrus colony written while the index is built").id  # writers go on
    gate.touch()
    fold.wait_idle(store)
    assert _index_ok(cx) and not cx.store.index_health(cx.embedder.model)["building"]
    assert not (store / fold.FOLD_LOG).exists()
    hits, warnings = cx.find_with_warnings(FindQuery(near="walrus colony written while the index is built", k=1))
    assert hits[0].id == late and not warnings
    _same_answers(cx)
    answers = [_answer(cx, **q) for q in QUERIES]
    cx.reindex(rebuild=True)
    assert [_answer(cx, **q) for q in QUERIES] == answers  # what a whole rebuild under the lock gives
    assert cx.verify().ok


def test_a_whole_build_that_meets_another_restore_leaves_the_restored_store_alone(folded, store, tmp_path,
                                                                                  request):
    cx = folded
    bundle = cx.backup(dest=tmp_path / "bundles").path
    cx.write("fact", "walrus colony after the backup")
    _drop_index(store)
    (store / snapshot.SNAPSHOT_NAME).unlink()  # no snapshot's stamp to tell the stores apart either
    rest = _steps(cx)
    gate = request.getfixturevalue("gated")  # from here on
    cx.restore(bundle, mode="replace", force=True)  # no index record either, but another database file
    assert rest() == {"index": "abandoned", "snapshot": "abandoned"}
    assert not (store / vector_index.RECORD_NAME).exists()
    gate.touch()
    fold.wait_idle(store)
    assert _index_ok(cx)
    assert all(h.text != "walrus colony after the backup" for h in cx.find(FindQuery(near="walrus colony", k=5)))
    _same_answers(cx)


def test_a_fold_without_a_snapshot_to_build_on_builds_it_whole(folded, store):
    cx = folded
    cx.write("fact", "walrus colony one")
    (store / snapshot.SNAPSHOT_NAME).unlink()
    done = fold.run(cx.store, cx.embedder.model)
    assert done == {"index": "fold", "snapshot": "build"}
    assert snapshot.state(store) == "current" and _index_ok(cx)
    _same_answers(cx)


def test_a_grown_delta_is_folded_inline_when_asked(folded, store, monkeypatch):
    cx = folded
    monkeypatch.setattr(fold, "FOLD_DELTA", 3)
    ids = [h.id for h in cx.find(FindQuery(k=3))]
    for ref in ids[:2]:
        cx.attest("ship-it", "success", [ref])
    assert (store / snapshot.DELTA_NAME).exists()
    cx.attest("ship-it", "success", [ids[2]])  # three memories in the delta: folded in the writing process
    assert _delta_ids(store) == [] and snapshot.state(store) == "current"
    _same_answers(cx)


@pytest.mark.slow
@pytest.mark.parametrize("whole", [False, True], ids=["tail", "whole-index"])
def test_a_background_fold_killed_at_any_moment_leaves_a_store_that_answers_alike(folded, store, whole):
    """kill -9 of the fold process at later and later moments until kills have landed while its work
    was under way: the old files or the new ones, never a mix; the next fold completes; what a
    killed fold left is swept by the next writer. ``whole``: the fold builds the index from nothing
    (its file gone, as after a restore)."""
    import time

    cx = folded
    area = store.parent / f".{store.name}.scratch"
    mid_fold = 0
    for attempt in range(100):
        for _ in range(3):
            cx.write("fact", f"walrus colony kill round {attempt}", tags=["t1"])
        if whole and (store / vector_index.RECORD_NAME).exists():
            _drop_index(store)
        model = cx.embedder.model if whole else ""
        proc = subprocess.Popen([sys.executable, "-m", "cortexctl.store.fold_process", str(store), model, "-1"])
        while proc.poll() is None and not (area.exists() and any(area.glob("fold-*"))):
            time.sleep(0.001)  # until its work is under way (or it is done)
        time.sleep((attempt % 8) * 0.002)  # then a later moment of it each round
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if area.exists() and any(area.glob("fold-*")):
            mid_fold += 1  # killed with its work under way (made in step 1, removed at its end)
        assert snapshot.check_whole(store) is None
        assert _answer(cx, **QUERIES[0]) == _from_duckdb(cx, **QUERIES[0])
        if mid_fold >= 8:
            break
    assert mid_fold >= 8
    done = fold.run(cx.store, cx.embedder.model)
    assert done["index"] in ("fold", "none", "rebuild" if whole else "fold")
    assert _index_ok(cx) and snapshot.state(store) == "current"
    cx.write("fact", "walrus colony after the kills")  # the writer's sweep takes the killed folds' work
    assert not (area.exists() and any(area.glob("fold-*")))
    _same_answers(cx)


def test_the_fold_process_needs_no_arguments_but_the_store(folded, store):
    cx = folded
    cx.write("fact", "walrus colony one")
    out = subprocess.run([sys.executable, "-m", "cortexctl.store.fold_process", str(store), "", "-1"], capture_output=True)
    assert out.returncode == 0 and not out.stdout and not out.stderr
    assert _record(store)["count"] == 41 and _index_ok(cx)
    _same_answers(cx)


def test_a_store_opened_with_a_short_wait_still_folds(folded, store):
    st = DuckStorage(store, wait=0)
    assert fold.run(st, None)["index"] in ("fold", "none")


def test_between_the_new_record_and_the_clearing_of_its_dropped_keys_the_index_is_in_step(folded, store):
    """The fold writes the record, then takes the dropped keys it left out of the file out of the store:
    a reader (verify, find) or a kill between the two meets a record that names them, not a rebuild."""
    from cortexctl.index import hnsw
    from cortexctl.store import scratch

    cx = folded
    ids = [cx.write("fact", f"walrus colony {i}").id for i in range(3)]
    cx.update(ids[0], text="walrus colony renamed")  # a key given since the file, then dropped
    cx.update(cx.find(FindQuery(k=1))[0].id, text="an older memory renamed")  # a key in the file, dropped
    st, model = cx.store, cx.embedder.model
    work = scratch.make(scratch.areas(st), "fold")
    with st.exclusive():
        taken = fold._take(st, model, work)
    try:
        built = fold._build(st, taken, work)
        files, rec = built["index"]
        assert len(rec.cleared) == 2 and list(files) == [vector_index.INDEX_NAME]
        tmp, fp = files[vector_index.INDEX_NAME]
        with st.exclusive():  # step 3 cut short after the record: the store still lists the keys
            hnsw.install(tmp, vector_index.index_path(st), fp)
            vector_index._write_record(st, rec)
    finally:
        fold.release(taken)
        scratch.remove(work)
    assert _index_ok(cx)
    assert cx.verify().ok
    _same_answers(cx)


def _failed_fold(store: Path, monkeypatch) -> int:
    """A background fold run while another holds the writer lock and the fold waits for it no time:
    the fold fails as one that waited its 120 s would."""
    from cortexctl.store import fold_process

    monkeypatch.setattr(fold, "LOCK_WAIT", 0)
    monkeypatch.setattr(fold._folding, "on", False, raising=False)  # the fold process's own mark, undone after
    with DuckStorage(store).exclusive():
        return fold_process.main([str(store), "", "-1"])


def test_a_fold_that_fails_leaves_its_error_for_healthcheck_until_a_fold_completes(folded, store, monkeypatch):
    cx = folded
    cx.write("fact", "walrus colony one")
    assert cx.healthcheck(probe=False)["snapshot"]["fold_failed"] is None
    assert _failed_fold(store, monkeypatch) == 1
    failure = fold.last_failure(store)
    assert failure is not None and failure["at"].endswith("Z") and "is busy" in failure["error"], failure
    doc = cx.healthcheck(probe=False)
    assert doc["status"] == "degraded" and doc["snapshot"]["fold_failed"] == failure
    assert any(d.startswith("the last fold of the index file and search snapshot failed at ") and "is busy" in d
               for d in doc["details"]), doc["details"]
    monkeypatch.setattr(fold, "LOCK_WAIT", 5)
    from cortexctl.store import fold_process

    assert fold_process.main([str(store), "", "-1"]) == 0
    assert not (store / fold.FOLD_LOG).exists()
    doc = cx.healthcheck(probe=False)
    assert doc["status"] == "healthy" and doc["snapshot"]["fold_failed"] is None, doc["details"]
    _same_answers(cx)


def test_a_reindex_clears_the_failure_a_fold_left(folded, store, monkeypatch):
    cx = folded
    cx.write("fact", "walrus colony one")
    assert _failed_fold(store, monkeypatch) == 1 and fold.last_failure(store) is not None
    cx.reindex()
    assert fold.last_failure(store) is None and cx.healthcheck(probe=False)["status"] == "healthy"


def test_an_inline_fold_that_fails_leaves_the_same_log(folded, store, monkeypatch):
    """A write's inline fold that cannot take the writer lock (another holds it past the writer's
    wait) leaves the log, and never fails the write that asked for it."""
    cx = folded
    cx.write("fact", "walrus colony one")
    monkeypatch.setenv("CORTEXCTL_FOLD", "inline")
    with DuckStorage(store).exclusive():
        fold.request(DuckStorage(store, wait=0), cx.embedder.model)  # returns: the write is not failed
    failure = fold.last_failure(store)
    assert failure is not None and "is busy" in failure["error"], failure
    fold.request(DuckStorage(store, wait=5), cx.embedder.model)
    assert fold.last_failure(store) is None and snapshot.state(store) == "current"


@pytest.mark.parametrize("content", [b"", b"\xff\xfe not json", b'{"at": 5, "error": []}', b"[1, 2]",
                                     b'{"at": null, "error": "' + b"x" * 100_000 + b'"}'])
def test_a_fold_log_that_is_not_one_is_reported_not_trusted(folded, store, content):
    (store / fold.FOLD_LOG).write_bytes(content)
    failure = fold.last_failure(store)
    assert failure == {"at": None, "error": f"{fold.FOLD_LOG} holds no fold's failure (a fold failed, or the file "
                                            "was edited)"}
    doc = folded.healthcheck(probe=False)
    assert doc["status"] == "degraded" and doc["snapshot"]["fold_failed"] == failure


def test_a_find_that_meets_no_index_file_starts_a_background_build_and_searches_exactly(folded, store, gated,
                                                                                      monkeypatch):
    cx = folded
    exact = [_answer(cx, **q) for q in QUERIES]  # a store this small is searched exactly
    monkeypatch.setattr(vector_index, "EXACT_MAX", 0)  # find asks the index from here on
    _drop_index(store)
    hits, warnings = cx.find_with_warnings(FindQuery(**QUERIES[0]))
    assert [h.to_json() for h in hits] == exact[0]
    assert any("missing; being built in the background: exact search" in w for w in warnings), warnings
    assert _fold_running(store) and not (store / vector_index.RECORD_NAME).exists()
    hits, warnings = cx.find_with_warnings(FindQuery(**QUERIES[2]))  # the build under way is not started again
    assert [h.to_json() for h in hits] == exact[2] and not (store / vector_index.RECORD_NAME).exists()
    gated.touch()
    fold.wait_idle(store)
    assert _index_ok(cx)
    hits, warnings = cx.find_with_warnings(FindQuery(**QUERIES[0]))
    assert not warnings
    _same_answers(cx)


def test_a_whole_build_is_abandoned_however_many_restores_come_between(folded, store, tmp_path, monkeypatch):
    """The database file the fold read is held open until it installs: a file a restore puts in its
    place cannot be given its inode (a filesystem reuses a freed one), so it is never taken for it."""
    cx = folded
    bundle = cx.backup(dest=tmp_path / "bundles").path
    cx.update(cx.find(FindQuery(k=1))[0].id, text="an update after the backup")  # rows the bundle lacks
    _drop_index(store)
    (store / snapshot.SNAPSHOT_NAME).unlink()
    rest = _steps(cx)
    monkeypatch.setenv("CORTEXCTL_FOLD", "inline")
    for _ in range(4):
        cx.restore(bundle, mode="replace", force=True)
        _drop_index(store)  # as before the fold's install: no record either way
    assert rest() == {"index": "abandoned", "snapshot": "abandoned"}
    assert not (store / vector_index.RECORD_NAME).exists()
    assert fold.run(cx.store, cx.embedder.model)["index"] == "rebuild"
    assert _index_ok(cx) and cx.verify().ok
    _same_answers(cx)


def test_a_fold_with_no_record_builds_the_index_of_the_one_model_the_store_has(folded, store, monkeypatch):
    cx = folded
    _drop_index(store)
    # as a write's grown delta starts it: a store too small for an index file is left without one
    assert fold.run(cx.store, None)["index"] == "none"
    assert not (store / vector_index.RECORD_NAME).exists()
    monkeypatch.setattr(vector_index, "FOLD_AT", 10)  # one large enough for it gets it
    assert fold.run(cx.store, None)["index"] == "rebuild"
    assert _index_ok(cx)


def test_a_find_after_a_failed_fold_builds_the_index_itself(folded, store, gated, monkeypatch):
    cx = folded
    monkeypatch.setattr(vector_index, "EXACT_MAX", 0)
    _drop_index(store)
    fold.failed(store, OSError(28, "No space left on device"))
    hits, warnings = cx.find_with_warnings(FindQuery(**QUERIES[0]))
    assert not _fold_running(store)  # one more fold would fail the same way, and say nothing
    assert any(w.endswith("missing: rebuilt") for w in warnings), warnings
    assert _index_ok(cx) and fold.last_failure(store) is None


def test_a_fold_is_started_even_while_another_process_looks_whether_one_runs(folded, store, gated, monkeypatch):
    """``fold.under_way`` (healthcheck, find) holds the fold lock shared for an instant; a find that
    starts a fold then tries again rather than say one is under way when none is."""
    import fcntl
    import os
    import threading

    from cortexctl.store import db

    cx = folded
    monkeypatch.setattr(vector_index, "EXACT_MAX", 0)
    _drop_index(store)
    fd = os.open(store / fold.FOLD_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_SH)  # the look, held through every try: no fold, so none is said to run
    monkeypatch.setattr(db, "START_TRIES", 3)
    try:
        hits, warnings = cx.find_with_warnings(FindQuery(**QUERIES[0]))
    finally:
        os.close(fd)
    assert any(w.endswith("missing: rebuilt") for w in warnings), warnings  # built here instead
    assert not _fold_running(store)
    _drop_index(store)
    fd = os.open(store / fold.FOLD_LOCK, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_SH)  # the look, let go while the find tries again
    monkeypatch.setattr(db, "START_TRIES", 100_000)  # tries for as long as the look lasts, however slow the machine
    timer = threading.Timer(0.03, os.close, (fd,))
    timer.start()
    try:
        hits, warnings = cx.find_with_warnings(FindQuery(**QUERIES[0]))
    finally:
        timer.join()
    assert any("being built in the background" in w for w in warnings), warnings
    assert _fold_running(store)
    gated.touch()
    fold.wait_idle(store)
    assert _index_ok(cx)
