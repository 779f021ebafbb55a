"""The HNSW index file is a cache: detected and rebuilt when truncated, changed, damaged or
stale, never trusted and never a crash; saved atomically under a reader that is searching."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from cortexctl import Cortex, FindQuery
from cortexctl.store import vector_index as semantic
from cortexctl.index import hnsw
from cortexctl.store.interface import Filters
from tests.conftest import assert_store_verifies

N = semantic.EXACT_MAX + 904  # enough memories that an unfiltered find goes through the index
WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
         "quebec romeo sierra tango uniform victor whiskey xray yankee zulu").split()


def _line(i: int) -> bytes:
    words = " ".join(WORDS[(i * p) % len(WORDS)] for p in (1, 3, 7, 11))
    tag = ["rare"] if i % 500 == 0 else []
    vis = "public" if i % 10 == 0 else "private"  # alice owns them all; bob sees a tenth
    return json.dumps({"type": "fact", "text": f"note {i} {words} item{i}", "tags": tag,
                       "visibility": vis}).encode() + b"\n"


def _saved(index, path):
    """``index`` put in place at ``path`` as a writer does (saved beside, renamed over); its fingerprint."""
    tmp = path.with_name(path.name + ".new")
    fp = hnsw.save_beside(index, tmp)
    hnsw.install(tmp, path, fp)
    return fp


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    path = tmp_path_factory.mktemp("template") / "store"
    cx = Cortex(store=path, actor="alice")
    report = cx.import_jsonl(iter([_line(i) for i in range(N)]))
    assert report.imported == N and report.index["action"] == "rebuild"
    return path


@pytest.fixture
def big(template, tmp_path):
    path = tmp_path / "big"
    shutil.copytree(template, path)
    return path


def _state(cx) -> str:
    with cx.store.reading() as tx:
        count, max_key, dim = tx.vector_stats(cx.embedder.model)
        return semantic.index_state(tx, cx.store, cx.embedder.model, dim)[1]


def _all_vectors(tx, filters, model, dim):
    """Every candidate's (ids, float16 rows), the store's chunks put together."""
    chunks = list(tx.vector_chunks(filters, model, dim))
    return [i for ids, _ in chunks for i in ids], np.concatenate([m for _, m in chunks] or [np.zeros((0, dim), "<f2")])


def _exact_best(cx, text: str) -> str:
    return _exact_nearest(cx, text, 1)[0]


def _exact_nearest(cx, text: str, n: int) -> list[str]:
    q = np.frombuffer(cx.embedder.embed_bytes(text), dtype="<f4")
    with cx.store.reading() as tx:
        ids, mat = _all_vectors(tx, Filters(actor=cx.actor), cx.embedder.model, q.shape[0])
    sims = mat @ q
    return [ids[i] for i in np.lexsort((np.asarray(ids), -sims))[:n]]


@pytest.mark.slow
def test_an_unfiltered_find_goes_through_the_index_and_agrees_with_exact_search(big):
    cx = Cortex(store=big, actor="alice")
    assert _state(cx) == "ok"
    hits, warnings = cx.find_with_warnings(FindQuery(near="item1234 kilo", k=5))
    assert warnings == []
    sem = [h for h in hits if h.similarity is not None]
    best = max(sem, key=lambda h: h.similarity)
    assert best.id == _exact_best(cx, "item1234 kilo")


@pytest.mark.slow
def test_a_viewer_who_sees_a_tenth_of_the_store_gets_the_exact_nearest_through_the_index(big, monkeypatch):
    monkeypatch.setattr(semantic, "EXACT_MAX", 100)  # bob's 500 are more than it: the index is searched
    cx = Cortex(store=big, actor="bob")
    with cx.store.reading() as tx:
        assert tx.count_heads(Filters(actor="bob")) * 10 == N
    hits, warnings = cx.find_with_warnings(FindQuery(near="item1230 kilo", k=10))
    assert warnings == [] and hits and all(int(h.text.split()[1]) % 10 == 0 for h in hits)
    with cx.store.reading() as tx:
        count, _max_key, dim = tx.vector_stats(cx.embedder.model)
        q = np.frombuffer(cx.embedder.embed_bytes("item1230 kilo"), dtype="<f4")
        lane, note = semantic.nearest(tx, cx.store, cx.embedder.model, q, Filters(actor="bob"), 20)
    assert note is None  # through the index, not the exact way
    assert [i for i, _ in lane][:5] == _exact_nearest(cx, "item1230 kilo", 5)


@pytest.mark.slow
def test_memories_newer_than_the_index_file_do_not_stand_in_for_nearer_ones_the_search_did_not_reach(big, monkeypatch):
    """The memories written since the index file (the pending tail) are compared exactly beside the
    index's first answer. Many of them passing a filter, far from the query, must not end the search
    as if they were the nearest: the filtered memories the search did not reach are nearer, so the
    index gives up and the answer is the exact one."""
    monkeypatch.setattr(semantic, "EXACT_MAX", 20)  # the rare tag's 10 plus the tail's 40 go through the index
    monkeypatch.setattr(semantic, "WIDEST", 1)  # one search of the index before the exact one
    monkeypatch.setenv("CORTEXCTL_FOLD", "inline")  # no background fold takes the tail into the file
    cx = Cortex(store=big, actor="alice")
    for i in range(40):
        cx.write("fact", f"zz{i} qq{i} unrelated words {i}", tags=["rare"])
    with cx.store.reading() as tx:
        _count, _max_key, dim = tx.vector_stats(cx.embedder.model)
        q = np.frombuffer(cx.embedder.embed_bytes("note item1500 alpha"), dtype="<f4")
        f = Filters(actor="alice", tags=("rare",))
        assert tx.count_heads(f) == 50
        want, _ = semantic.nearest(tx, cx.store, cx.embedder.model, q, f, 20, exact=True)
        got, note = semantic.nearest(tx, cx.store, cx.embedder.model, q, f, 20)
        assert len(tx.vectors_after(cx.embedder.model, semantic.read_record(cx.store).max_key, dim)[0]) == 40
    assert [i for i, _ in got] == [i for i, _ in want]  # the same memories (the index's f16 similarities aside)
    assert {i for i, _ in want} >= {h.id for h in cx.find(FindQuery(tags=["rare"], k=50)) if h.text.startswith("note ")}
    assert note is not None  # the index gave up: exact


def test_only_memories_as_near_as_the_search_reached_count_toward_the_n_found():
    sims = np.array([0.9, 0.7, 0.5], dtype=np.float32)  # what the index search gave, whatever it was asked
    found = {"a": 0.9, "b": 0.7, "pending-far": 0.1, "pending-near": 0.8}
    reach = float(sims.min())
    assert semantic._reached(found, reach, 3)  # a, b and the near pending one
    assert not semantic._reached(found, reach, 4)  # the far pending one may stand behind nearer memories
    assert semantic._reached({"a": 0.5}, reach, 1)  # at the reach itself
    assert not semantic._reached({"pending": 0.99}, float("inf"), 1)  # a search that gave none
    assert semantic._reached({}, float("-inf"), 1)  # every file searched whole: nothing more to find


def test_the_first_search_asks_for_enough_that_the_share_the_filters_pass_keeps_n():
    assert semantic.first_want(10, 1000, 1000) == 64  # nothing filtered out: twice n, at least 64
    assert semantic.first_want(50, 1000, 1000) == 100
    assert semantic.first_want(50, 1_000_000, 100_000) == 2000  # a tenth passes: 2 x 100 over a tenth
    assert semantic.first_want(50, 1_000_000, 3) == semantic.WIDEST * 100  # no wider than before an exact search
    assert semantic.first_want(50, 1_000_000, 0) == 100  # none passes: the search grows as it did
    assert semantic.first_want(50, 1000, 333) == 601  # rounded up


@pytest.mark.slow
def test_a_narrow_filter_is_searched_exactly(big):
    cx = Cortex(store=big, actor="alice")
    hits = cx.find(FindQuery(near="item1500", tags=["rare"], k=20))
    assert {h.text.split()[1] for h in hits} <= {str(i) for i in range(0, N, 500)}
    assert hits[0].text.startswith("note 1500 ")


def _damage_and_find(path, damage) -> tuple[list, list]:
    damage(path / semantic.INDEX_NAME)
    cx = Cortex(store=path, actor="alice")
    assert _state(cx) != "ok"
    hits, warnings = cx.find_with_warnings(FindQuery(near="item77 alpha", k=3))
    assert _state(cx) == "ok"  # rebuilt
    return hits, warnings


def _truncate(p):
    with open(p, "r+b") as fh:
        fh.truncate(os.path.getsize(p) // 2)


def _flip(p):
    size = os.path.getsize(p)
    with open(p, "r+b") as fh:
        for off in (size // 3, size // 2, size - 100):
            fh.seek(off)
            b = fh.read(1)
            fh.seek(off)
            fh.write(bytes([b[0] ^ 0xFF]))


def _garbage(p):
    with open(p, "wb") as fh:
        fh.write(os.urandom(4096))


def _remove(p):
    os.unlink(p)


@pytest.mark.slow
@pytest.mark.parametrize("damage", [_truncate, _flip, _garbage, _remove], ids=["truncated", "flipped", "garbage", "missing"])
def test_a_damaged_index_file_is_detected_and_rebuilt_never_a_crash(big, damage):
    hits, warnings = _damage_and_find(big, damage)
    assert hits and hits[0].text.startswith("note 77 ")
    assert any("rebuilt" in w for w in warnings)
    assert_store_verifies(big)


@pytest.mark.slow
def test_verify_reports_a_damaged_index_file(big, cli):
    _flip(big / semantic.INDEX_NAME)
    run = cli("verify", "--store", str(big))
    assert run.code == 7, run
    assert "index file" in run.out + run.err
    assert cli("reindex", "--rebuild", "--store", str(big)).code == 0
    assert cli("verify", "--store", str(big)).code == 0


@pytest.mark.slow
def test_a_stale_index_file_from_an_earlier_state_is_rebuilt(big):
    cx = Cortex(store=big, actor="alice")
    old_index = (big / semantic.INDEX_NAME).read_bytes()
    old_record = (big / semantic.RECORD_NAME).read_bytes()
    stat = os.stat(big / semantic.INDEX_NAME)
    first = cx.find(FindQuery(near="item10 ", k=1))[0]
    cx.update(first.id, "note 10 rewritten entirely zebra crossing")
    cx.reindex(rebuild=True)
    # put the old file and its record back, with the old times: only the store can tell it is stale
    (big / semantic.INDEX_NAME).write_bytes(old_index)
    os.utime(big / semantic.INDEX_NAME, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    (big / semantic.RECORD_NAME).write_bytes(old_record)
    assert _state(cx) == "out of step with the store"
    hits, warnings = cx.find_with_warnings(FindQuery(near="zebra crossing", k=1))
    assert hits[0].id == first.id and any("rebuilt" in w for w in warnings)


@pytest.mark.slow
def test_an_index_built_by_another_model_is_not_used(big):
    cx = Cortex(store=big, actor="alice")
    record = json.loads((big / semantic.RECORD_NAME).read_text())
    record["model"] = "openai:some-other-model"
    (big / semantic.RECORD_NAME).write_text(json.dumps(record))
    assert _state(cx).startswith("built by model")
    hits, warnings = cx.find_with_warnings(FindQuery(near="item42 ", k=1))
    assert hits[0].text.startswith("note 42 ") and _state(cx) == "ok"


@pytest.mark.slow
def test_writes_go_to_the_delta_and_a_grown_delta_is_folded(big):
    cx = Cortex(store=big, actor="alice")
    before = json.loads((big / semantic.RECORD_NAME).read_text())
    uri = cx.write("fact", "a brand new memory about walruses").id
    assert json.loads((big / semantic.RECORD_NAME).read_text()) == before  # one write never rewrites the file
    hit = cx.find(FindQuery(near="walruses", k=1))[0]
    assert hit.id == uri and "semantic" in hit.lanes  # found through the exact delta
    lines = [json.dumps({"type": "fact", "text": f"extra {i} walrus colony"}).encode() + b"\n"
             for i in range(semantic.FOLD_AT)]
    cx.import_jsonl(iter(lines))
    after = json.loads((big / semantic.RECORD_NAME).read_text())
    assert after["max_key"] > before["max_key"] and after["count"] == before["count"] + 1 + semantic.FOLD_AT
    assert _state(cx) == "ok"


def test_updating_the_last_indexed_memory_never_reuses_its_vector_key(tmp_path):
    # The index file holds the old version's vector under its key; a new vector under the same
    # key would put the index out of step with the store (and match the old text).
    cx = Cortex(store=tmp_path / "s", actor="alice")
    cx.write("fact", "alpha bravo")
    last = cx.write("fact", "zulu yankee").id
    cx.reindex()
    assert _state(cx) == "ok"
    cx.update(last, "charlie delta")
    assert _state(cx) == "ok"
    with cx.store.reading() as tx:
        keys = [k for k, _, _ in tx.vectors_of_keys(range(1, 10), cx.embedder.model)]
        assert len(keys) == len(set(keys)) == 2 and set(keys).isdisjoint(tx.dropped_keys(cx.embedder.model))
    assert_store_verifies(tmp_path / "s")


@pytest.mark.slow
def test_an_atomic_save_under_a_process_that_is_searching(big, tmp_path):
    cx = Cortex(store=big, actor="alice")
    stop = tmp_path / "stop"
    reader = textwrap.dedent(f"""
        import os, sys, numpy as np
        from cortexctl import Cortex, FindQuery
        cx = Cortex(store={str(big)!r}, actor="alice")
        from cortexctl.index import hnsw
        from usearch.index import Index
        n = 0
        q = np.frombuffer(cx.embedder.embed_bytes("item5 alpha"), dtype="<f4")
        while not os.path.exists({str(stop)!r}):  # searching until told to stop
            ix = Index.restore({str(big / semantic.INDEX_NAME)!r}, view=True)
            for _ in range(20):
                ix.search(q, 10)
                n += 1
            cx.find(FindQuery(near="item5 alpha", k=3))
            if n == 20:
                print("searching", flush=True)
        print(n, flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", reader], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout.readline().strip() == b"searching", proc.stderr.read().decode()[-2000:]
        for _ in range(4):  # each save replaces the file under the reader's open views
            cx.reindex(rebuild=True)
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]  # a SIGBUS would end it
    finally:
        stop.touch()
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()[-2000:]  # a SIGBUS would be -7
    assert int(out) > 20


def test_fingerprint_trusts_a_byte_identical_copy_and_notices_changed_bytes(tmp_path):
    index = hnsw.new(8)
    hnsw.add(index, np.arange(1, 51, dtype=np.uint64), np.random.default_rng(1).random((50, 8), dtype=np.float32))
    path = tmp_path / "i.usearch"
    fp = _saved(index, path)
    assert hnsw.trusted(path, fp)
    assert (path.stat().st_mode & 0o777) == 0o600
    data = path.read_bytes()
    path.write_bytes(data)  # same bytes, new modification time: a copy of the store (cp -r, restore)
    assert hnsw.trusted(path, fp)
    path.write_bytes(data[:-1] + bytes([data[-1] ^ 0xFF]))  # same size, the last block changed
    assert not hnsw.trusted(path, fp)


@pytest.mark.slow
def test_a_damaged_index_under_a_busy_writer_is_searched_exactly_without_waiting(big):
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import fcntl, os, sys, time
        fd = os.open({str(big / '.lock')!r}, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        print("held", flush=True)
        sys.stdin.read()  # held until killed
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline().strip() == b"held"
        _garbage(big / semantic.INDEX_NAME)
        cx = Cortex(store=big, actor="alice", wait=20)
        hits, warnings = cx.find_with_warnings(FindQuery(near="item77 alpha", k=3))
        assert hits[0].text.startswith("note 77 ")
        assert any("exact search" in w for w in warnings)
        assert _state(cx) != "ok"  # nothing was rebuilt under another writer's lock
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.slow
def test_a_new_model_with_no_vectors_yet_still_answers_and_says_to_reindex(big, embed_server, monkeypatch):
    for k, v in embed_server.env("fresh-model").items():
        monkeypatch.setenv(k, v)
    cx = Cortex(store=big, actor="alice")
    hits, warnings = cx.find_with_warnings(FindQuery(near="item77 alpha", k=3))
    assert hits[0].text.startswith("note 77 ") and "lexical" in hits[0].lanes
    assert all("semantic" not in h.lanes for h in hits)
    assert any("reindex" in w for w in warnings)


@pytest.mark.slow
@pytest.mark.parametrize("field", ["max_key", "count", "dim"])
def test_a_record_with_absurd_numbers_is_rebuilt_not_a_crash(big, field):
    record = json.loads((big / semantic.RECORD_NAME).read_text())
    record[field] = 1e400 if field != "dim" else -3
    (big / semantic.RECORD_NAME).write_text(json.dumps(record).replace("Infinity", "1" + "0" * 400))
    cx = Cortex(store=big, actor="alice")
    hits, warnings = cx.find_with_warnings(FindQuery(near="item77 alpha", k=3))
    assert hits[0].text.startswith("note 77 ") and any("rebuilt" in w for w in warnings)


def _small_index(seed: int):
    index = hnsw.new(8)
    hnsw.add(index, np.arange(1, 2001, dtype=np.uint64), np.random.default_rng(seed).random((2000, 8), dtype=np.float32))
    return index


def test_flips_outside_the_sampled_blocks_are_found_by_the_whole_file_check_once_per_file(tmp_path):
    path = tmp_path / "i.usearch"
    fp = _saved(_small_index(1), path)
    assert hnsw.check(path, fp) is None and hnsw.stamp_path(path).exists()  # the writer stamped it
    size = path.stat().st_size
    step = size // hnsw.SAMPLES
    off = step + hnsw.SAMPLE_BLOCK + (step - hnsw.SAMPLE_BLOCK) // 2  # between two sampled blocks
    assert step > 2 * hnsw.SAMPLE_BLOCK
    data = bytearray(path.read_bytes())
    data[off] ^= 0xFF
    mtime = path.stat().st_mtime_ns
    with open(path, "r+b") as fh:  # in place, modification time put back: only the change time tells
        fh.write(bytes(data))
    os.utime(path, ns=(mtime, mtime))
    assert hnsw.check(path, fp) == hnsw.DAMAGED and not hnsw.trusted(path, fp)
    data[off] ^= 0xFF
    with open(path, "r+b") as fh:
        fh.write(bytes(data))
    assert hnsw.check(path, fp) is None  # sound again: read whole, and stamped for the next reader
    assert json.loads(hnsw.stamp_path(path).read_text())["file"][1] == path.stat().st_ino


def test_an_index_file_written_to_between_its_save_and_its_install_is_not_stamped(tmp_path):
    """A fold saves the file without the writer lock and installs it later: a byte changed in it
    between the two (outside the sampled blocks) leaves it unstamped, so its first reader reads it
    whole and finds it."""
    path = tmp_path / "i.usearch"
    tmp = path.with_name(path.name + ".new")
    fp = hnsw.save_beside(_small_index(1), tmp)
    step = tmp.stat().st_size // hnsw.SAMPLES
    off = step + hnsw.SAMPLE_BLOCK + (step - hnsw.SAMPLE_BLOCK) // 2  # between two sampled blocks
    data = bytearray(tmp.read_bytes())
    data[off] ^= 0xFF
    with open(tmp, "r+b") as fh:
        fh.write(bytes(data))
    hnsw.install(tmp, path, fp)
    assert not hnsw.stamp_path(path).exists()
    assert hnsw.check(path, fp) == hnsw.DAMAGED and not hnsw.trusted(path, fp)


def test_a_file_saved_after_its_record_is_newer_not_damaged(tmp_path):
    path = tmp_path / "i.usearch"
    old = _saved(_small_index(1), path)
    _saved(_small_index(2), path)  # a writer between saving the file and writing its record
    assert hnsw.check(path, old) == hnsw.NEWER
    hnsw.stamp_path(path).unlink()
    assert hnsw.check(path, old) == hnsw.DAMAGED


def _next_index(cx, path):
    """A new index file of the same vectors saved beside the store, as a fold saves one: (its path,
    its fingerprint, the record that will describe it)."""
    model = cx.embedder.model
    with cx.store.reading() as tx:
        count, _max_key, dim = tx.vector_stats(model)
        index = hnsw.new(dim, count)
        for keys, mat in tx.iter_vectors(model, dim):
            hnsw.add(index, keys, mat)
    old = semantic.read_record(cx.store)
    tmp = path / "next.usearch"
    fp = hnsw.save_beside(index, tmp)
    return tmp, fp, semantic.IndexRecord.of_file(model, old.max_key, index, fp)


def _installed_without_record(cx, path):
    """A new index file of the same vectors put in place as a writer does (``hnsw.install``), and the
    record that describes it, not yet written."""
    tmp, fp, record = _next_index(cx, path)
    hnsw.install(tmp, path / semantic.INDEX_NAME, fp)
    return record


def test_a_reader_that_meets_a_new_index_file_before_its_record_looks_again(big, monkeypatch):
    """Between a writer's rename of the new file and its record, the file is unlike the record a
    reader reads: the reader (find, verify) looks again instead of calling it damaged (verify's
    exit 7 beside a background fold). The writer's next step lands while the reader pauses after its
    first look (its ``time.sleep``), however long anything took: no clock decides the outcome."""
    import time

    cx = Cortex(store=big, actor="alice")
    record = _installed_without_record(cx, big)
    monkeypatch.setattr(semantic, "INSTALL_SETTLE", 3600.0)  # "just installed" however slow the machine
    pauses = []
    real_sleep = time.sleep

    def writer_steps_in(seconds):
        if not pauses:
            semantic._write_record(cx.store, record)  # the record the writer writes after the rename
        pauses.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", writer_steps_in)
    assert _state(cx) == "ok"
    assert pauses  # the first look met the file without its record
    monkeypatch.undo()
    assert_store_verifies(big)


def test_a_new_index_file_whose_record_never_comes_is_not_trusted(big):
    cx = Cortex(store=big, actor="alice")
    _installed_without_record(cx, big)
    assert _state(cx) == hnsw.NEWER


KILLER = textwrap.dedent("""
    import os, signal, sys
    from cortexctl import Cortex
    from cortexctl.index import hnsw
    from cortexctl.store import fold, vector_index as vi

    store, moment, how = sys.argv[1:]

    def dies_after(real):
        def step(*a, **k):
            real(*a, **k)
            os.kill(os.getpid(), signal.SIGKILL)
        return step

    if moment == "its record beside":
        hnsw.install = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
    elif moment == "the file renamed":
        hnsw.stamp_installed = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
    elif moment == "the file in place":
        hnsw.install = dies_after(hnsw.install)
    else:  # "both in place": the dropped keys not yet cleared
        vi.install_parts = dies_after(vi.install_parts)
    cx = Cortex(store=store, actor="alice")
    if how == "reindex":
        cx.reindex(rebuild=True)
    else:
        fold.run(cx.store, cx.embedder.model)
""")


@pytest.mark.parametrize("how", ["reindex", "fold"])
@pytest.mark.parametrize("moment", ["its record beside", "the file renamed", "the file in place", "both in place"])
def test_a_writer_killed_while_it_puts_an_index_file_in_place_leaves_one_trusted_pair(big, moment, how):
    """A new index file and its record are put in place so that a kill at any moment leaves the old
    file with its record or the new one with its own (``vector_index.install``): the index is
    trusted after the kill, verify is green, and the next writer finishes or removes what was left."""
    cx = Cortex(store=big, actor="alice")
    ids = [cx.write("fact", f"walrus colony {i} kilo lima").id for i in range(3)]  # the pending tail
    cx.update(ids[0], text="walrus colony updated")  # a dropped key: the new file leaves it out
    cx.forget(ids[1], reason="wrong")
    before = semantic.read_record(cx.store)
    run = subprocess.run([sys.executable, "-c", KILLER, str(big), moment, how], capture_output=True, text=True)
    assert run.returncode == -9, run.stderr
    cx = Cortex(store=big, actor="alice")
    assert _state(cx) == "ok"
    after = semantic.read_record(cx.store)
    assert (after == before) == (moment in ("its record beside",)), (before, after)
    # the new file in place, its record not moved over the old one yet: taken from beside it
    assert semantic.next_record_path(cx.store).exists() == (moment != "both in place")
    assert_store_verifies(big)
    best = cx.find(FindQuery(near="walrus colony updated", k=1))[0]
    assert best.id == ids[0]
    reading = big / f".{semantic.INDEX_NAME}{hnsw.STAMP_SUFFIX}.x1y2z3.tmp"  # a reader stamping meanwhile
    reading.write_bytes(b"{}")
    cx.write("fact", "after the kill")
    # the next writer settles what the killed one left, and folds into the file in place
    assert cx.reindex()["index"]["action"] == "fold"
    assert not semantic.next_record_path(cx.store).exists()
    assert semantic.read_record(cx.store).max_key > after.max_key
    assert list(big.glob(".cortex.usearch*.tmp")) == [reading]  # the writers' leftovers gone, the reader's not
    assert _state(cx) == "ok"
    assert_store_verifies(big)


def test_the_float16_shortlist_keeps_every_exact_nearest_neighbour():
    """An exact search over an f16 index file picks candidates by their rounded vectors and scores
    only those exactly: whatever the spread (near-ties that rounding reorders among them), the
    exact n nearest are always kept, and with spread vectors most candidates are not."""
    import numpy as np

    from cortexctl.store import vector_index as vi

    rng = np.random.default_rng(20261127)
    pruned = 0
    for trial in range(300):
        d = int(rng.choice([8, 64, 384]))
        m = int(rng.integers(2, 300))
        spread = float(rng.choice([1e-5, 1e-4, 1e-3, 1e-2, 1.0]))
        base = rng.standard_normal(d).astype(np.float32)
        x = (base + spread * rng.standard_normal((m, d))).astype(np.float32)
        if trial % 3:
            x /= np.linalg.norm(x, axis=1, keepdims=True)
        q = (base + 0.1 * rng.standard_normal(d)).astype(np.float32)
        q /= np.linalg.norm(q)
        rounded = x.astype(np.float16).astype(np.float32)
        ids = [f"m{i:05d}" for i in rng.permutation(m)]
        keys = np.arange(m, dtype=np.uint64)
        n = int(rng.integers(1, 12))
        kept_ids, kept_keys = vi._shortlist(ids, keys, rounded, q, n)
        assert [ids[int(k)] for k in kept_keys] == kept_ids
        exact = vi._similarities(x, q)
        top = np.lexsort((np.asarray(ids), -exact))[:n]
        assert {ids[i] for i in top} <= set(kept_ids), (trial, d, m, spread, n)
        pruned += len(kept_ids) < m
    assert pruned > 50


@pytest.mark.parametrize("dtype", ["f16", "f32"])
def test_an_exact_search_by_keys_answers_as_the_store_alone_with_writes_after_the_index_file(big, monkeypatch, dtype):
    """The candidates' vectors by their keys (the index file's, shortlisted when it rounds them; the
    pending tail's from the store) give the very answer the store gives reading every candidate's
    vector through the filter, with the index already open or not, and past ``BY_KEYS_MAX``."""
    monkeypatch.setattr(hnsw, "DTYPE", dtype)
    cx = Cortex(store=big, actor="alice")
    cx.reindex(rebuild=dtype == "f32")  # the copy's snapshot follows its own database file
    for i in range(6):  # after the index file: the pending tail, among the candidates
        cx.write("fact", f"note tail{i} alpha kilo item{1500 + i}", tags=["rare"])
    model, filters = cx.embedder.model, Filters(actor="alice", tags=("rare",))
    with cx.store.searching() as tx:
        count, max_key, dim = tx.vector_stats(model)
        rec, why = semantic.index_state(tx, cx.store, model, dim)
        assert why == "ok" and max_key > rec.max_key
        ids, keys = tx.vector_keys_for(filters, model)  # the snapshot knows the candidates' keys
        assert len(ids) == len(range(0, N, 500)) + 6 and int(keys.max()) > rec.max_key
        index = hnsw.open_view(semantic.index_path(cx.store), semantic.fingerprint_of(rec), by_key=True)
        searching = hnsw.open_view(semantic.index_path(cx.store), semantic.fingerprint_of(rec))
        for text in ("item1500 alpha", "tail3 kilo", "note 2000 item2000", "quebec romeo"):
            q = np.frombuffer(cx.embedder.embed_bytes(text), dtype="<f4")
            want = semantic._exact(tx, filters, model, dim, q, 5)  # every candidate's vector from the store
            assert len(want) == 5
            picked = semantic._by_keys(tx, index, ids, keys, rec.max_key, model, dim, q, 5)
            assert picked is not None and {i for i, _ in want} <= set(picked[0])
            assert semantic._exact(tx, filters, model, dim, q, 5, store=cx.store) == want
            assert semantic._exact(tx, filters, model, dim, q, 5, store=cx.store, opened=rec) == want
            assert len(searching) == len(index)
            # past BY_KEYS_MAX the candidates' rows are found among the file's own (an f16 file's)
            slotted = semantic._by_slots(tx, cx.store, rec, rec.parts, ids, keys, model, dim, q, 5, None)
            assert (slotted is None) == (dtype == "f32")
            if slotted is not None:
                assert {i for i, _ in want} <= set(slotted[0]) and len(slotted[0]) == len(slotted[1])
            with monkeypatch.context() as m:
                m.setattr(semantic, "BY_KEYS_MAX", 3)
                assert semantic._exact(tx, filters, model, dim, q, 5, store=cx.store) == want
                assert semantic._exact(tx, filters, model, dim, q, 5, store=cx.store, opened=rec) == want


def test_similarities_are_the_same_for_a_row_whatever_rows_come_with_it():
    import numpy as np

    from cortexctl.store import vector_index as vi

    rng = np.random.default_rng(5)
    x = rng.standard_normal((37, 384)).astype(np.float32)
    q = rng.standard_normal(384).astype(np.float32)
    whole = vi._similarities(x, q)
    for lo, hi in ((0, 1), (5, 6), (3, 10), (30, 37), (0, 37)):
        assert vi._similarities(x[lo:hi], q).tobytes() == whole[lo:hi].tobytes()


def test_vectors_of_keys_the_index_file_lacks_are_none_not_a_crash():
    import numpy as np
    from usearch.index import Index

    from cortexctl.index import hnsw

    for dtype in ("f16", "f32"):
        index = Index(ndim=4, metric="cos", dtype=dtype)
        index.add(np.array([1, 2, 3], dtype=np.uint64), np.eye(3, 4, dtype=np.float32))
        assert hnsw.vectors(index, [1, 5, 3]) is None
        assert hnsw.vectors(index, [9]) is None
        got = hnsw.vectors(index, [3, 1])
        assert got.dtype == np.float32 and got.shape == (2, 4) and got[0, 2] == 1.0 and got[1, 0] == 1.0


@pytest.mark.parametrize("scan_max", [0, 100_000], ids=["walked", "scanned"])
def test_a_view_for_searching_answers_as_one_that_takes_vectors_by_key_and_refuses_to_take_them(
        tmp_path, monkeypatch, scan_max):
    """A view opened for searching only (usearch builds no key-to-slot table) finds the same keys
    at the same distances as a view with the table, removed vectors included, holds the same count,
    and ``vectors`` refuses it loudly rather than answering every key as missing; searched by a
    walk of the graph or by comparing each vector."""
    import numpy as np
    from usearch.index import Index

    from cortexctl.index import hnsw

    monkeypatch.setattr(hnsw, "SCAN_MAX", scan_max)

    rng = np.random.default_rng(3)
    x = rng.standard_normal((3000, 24)).astype(np.float32)
    built = Index(ndim=24, metric="cos", dtype="f16")
    built.add(np.arange(1, 3001, dtype=np.uint64), x)
    built.remove(np.arange(1, 3001, 7, dtype=np.uint64))
    fp = hnsw.save_beside(built, tmp_path / "ix.tmp")
    hnsw.install(tmp_path / "ix.tmp", tmp_path / "ix", fp)
    searching = hnsw.open_view(tmp_path / "ix", fp)
    keyed = hnsw.open_view(tmp_path / "ix", fp, by_key=True)
    assert not hnsw.by_key(searching) and hnsw.by_key(keyed)
    assert len(searching) == len(keyed) == 3000 - len(range(1, 3001, 7))
    for q in x[:40]:
        got, want = hnsw.search(searching, q, 25), hnsw.search(keyed, q, 25)
        assert got[0].tolist() == want[0].tolist() and got[1].tobytes() == want[1].tobytes()
        assert not set(got[0].tolist()) & set(range(1, 3001, 7))
    assert hnsw.vectors(keyed, [2, 3]).shape == (2, 24)
    with pytest.raises(ValueError):
        hnsw.vectors(searching, [2, 3])
    cache: dict = {}
    assert hnsw.open_view(tmp_path / "ix", fp, cache) is hnsw.open_view(tmp_path / "ix", fp, cache)
    kept = hnsw.open_view(tmp_path / "ix", fp, cache, by_key=True)
    assert hnsw.by_key(kept) and kept is hnsw.open_view(tmp_path / "ix", fp, cache, by_key=True)
    assert not hnsw.by_key(hnsw.open_view(tmp_path / "ix", fp, cache))
    built.add(np.arange(5001, 5011, dtype=np.uint64), x[:10])  # the file replaced (a fold): a kept
    fp2 = hnsw.save_beside(built, tmp_path / "ix.tmp")  # view of either kind is let go, not left
    hnsw.install(tmp_path / "ix.tmp", tmp_path / "ix", fp2)  # holding the old file's disk space
    fresh = hnsw.open_view(tmp_path / "ix", fp2, cache)
    assert len(fresh) == len(searching) + 10 and ("index_view_by_key", str(tmp_path / "ix")) not in cache
    assert [kept[1] for kept in cache.values()] == [fresh]


def test_verify_meets_a_fold_that_puts_a_new_index_file_in_place_while_it_looks(big, monkeypatch):
    """A background fold may install a new file and its record between verify's first reading of
    the record and its whole-file check: verify checks the file the record it trusted describes,
    not a record read before (exit 7 beside a background fold in the kill tests). The fold's step
    lands inside verify's own read of the vector counts, however long anything took."""
    from cortexctl.store.duck import DuckTx

    cx = Cortex(store=big, actor="alice")
    model = cx.embedder.model
    tmp, fp, record = _next_index(cx, big)
    assert record != semantic.read_record(cx.store)
    real = DuckTx.vector_stats
    steps = []

    def a_fold_steps_in(self, model):
        if not steps:  # the fold's step 3: the new file renamed into place, then its record
            hnsw.install(tmp, big / semantic.INDEX_NAME, fp)
            semantic._write_record(cx.store, record)
            steps.append(True)
        return real(self, model)

    monkeypatch.setattr(DuckTx, "vector_stats", a_fold_steps_in)
    with cx.store.reading() as tx:
        assert semantic.verify_index(tx, cx.store, model) == []
    assert steps and semantic.read_record(cx.store) == record
    monkeypatch.undo()
    assert_store_verifies(big)


@pytest.mark.parametrize("name", [semantic.RECORD_NAME, semantic.RECORD_NAME + semantic.NEXT_SUFFIX])
def test_a_directory_where_the_index_record_goes_is_one_line_naming_it(cli, store, name):
    """A directory in the place of the index record (or of the record beside it) makes a build fail
    with one line naming it, exit 1, not an internal error; the store stays sound, and once it is
    gone the build goes through."""
    for i in range(3):
        assert cli("write", "fact", f"walrus colony {i}").code == 0
    (store / name).mkdir(parents=True)
    r = cli("reindex", "--rebuild")
    assert r.code == 1 and "Traceback" not in r.err, r
    assert r.err.strip().splitlines() == [f"cortexctl: {store / name}: Is a directory"], r
    assert cli("verify").code == 0
    assert cli("find", "--near", "walrus colony 1", "-k", "1").code == 0
    (store / name).rmdir()
    assert cli("reindex", "--rebuild").code == 0
    assert_store_verifies(store)


def test_the_rough_float16_comparison_keeps_every_exact_nearest_neighbour():
    """``_rough`` judges float16 rows by usearch's similarities (the query rounded to float16 too)
    and keeps those that can be among the exact n nearest: whatever the spread (near-ties that
    rounding reorders), the rows' scale (unit, large, below float16's normal range) or ties, the
    exact n nearest are always kept, with spread rows most are not, and a value float16 cannot
    bound (infinite, NaN) gives no judgement."""
    import numpy as np

    from cortexctl.store import vector_index as vi

    rng = np.random.default_rng(20261128)
    pruned = 0
    for trial in range(300):
        d = int(rng.choice([8, 64, 384]))
        m = int(rng.integers(2, 3000))
        spread = float(rng.choice([0.0, 1e-5, 1e-4, 1e-3, 1e-2, 1.0]))
        base = rng.standard_normal(d).astype(np.float32)
        x = base + spread * rng.standard_normal((m, d))
        if trial % 3:
            x /= np.linalg.norm(x, axis=1, keepdims=True)
        x *= float(rng.choice([1.0, 1.0, 300.0, 1e-5]))
        rows = x.astype(np.float16)
        q = (base + 0.1 * rng.standard_normal(d)).astype(np.float32)
        q /= np.linalg.norm(q)
        n = int(rng.integers(1, 12))
        kept = vi._rough(rows, q, n)
        assert kept is not None and np.all(np.diff(kept) > 0)
        exact = vi._similarities(rows.astype(np.float32), q)
        ids = np.asarray([f"m{i:05d}" for i in rng.permutation(m)])
        top = np.lexsort((ids, -exact))[:n]
        assert set(top.tolist()) <= set(kept.tolist()), (trial, d, m, spread, n)
        pruned += len(kept) < m
    assert pruned > 40
    rows = rng.standard_normal((50, 8)).astype(np.float16)
    for bad in (np.inf, -np.inf, np.nan):
        spoilt = rows.copy()
        spoilt[7, 3] = bad
        assert vi._rough(spoilt, np.ones(8, dtype=np.float32), 3) is None
    assert vi._rough(rows, np.full(8, 1e6, dtype=np.float32), 3) is None


@pytest.mark.parametrize("viewer", ["alice", "bob"])
def test_an_exact_search_reading_the_vectors_a_span_at_a_time_answers_as_reading_them_all(
        big, monkeypatch, viewer):
    """The store hands the candidates' vectors a span of them at a time in key order (a whole store's
    would be 0.8 GB of rows at a million), and the nearest of each span's give the very answer of
    all the rows ranked at once: ids, order (ties by ID) and similarities; with a viewer who sees a
    tenth."""
    from cortexctl.store import search

    cx = Cortex(store=big, actor="alice")
    model, filters = cx.embedder.model, Filters(actor=viewer)
    with cx.store.reading() as tx:
        dim = tx.vector_stats(model)[2]
        monkeypatch.setattr(search, "CHUNK_KEYS", 97)
        ids, mat = _all_vectors(tx, filters, model, dim)
        assert len(ids) == len(set(ids)) == (N if viewer == "alice" else len(range(0, N, 10)))
        assert [len(c) for c, _ in tx.vector_chunks(filters, model, dim)] == [97] * (len(ids) // 97) + [len(ids) % 97]
        for text in ("item1500 alpha", "note 2000 item2000", "quebec romeo", "zulu"):
            q = np.frombuffer(cx.embedder.embed_bytes(text), dtype="<f4")
            for n in (1, 10, 150):
                want = semantic._ranked(ids, mat, q, n)
                assert want  # those of positive similarity, n at most
                assert semantic._exact(tx, filters, model, dim, q, n) == want
                monkeypatch.setattr(search, "CHUNK_KEYS", 1 << 30)
                assert semantic._exact(tx, filters, model, dim, q, n) == want
                monkeypatch.setattr(search, "CHUNK_KEYS", 97)


def test_ranking_many_float16_rows_roughly_first_gives_the_exact_answer(monkeypatch):
    """``_ranked`` over many float16 rows (compared roughly first) gives the same ids and the same
    similarities, bit for bit, as over the rows widened to float32 (compared one by one)."""
    import numpy as np

    from cortexctl.store import vector_index as vi

    rng = np.random.default_rng(11)
    x = rng.standard_normal((6000, 64)).astype(np.float32)
    x[100:200] = x[5]  # ties, broken by id
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    rows = x.astype(np.float16)
    ids = [f"m{i:05d}" for i in rng.permutation(len(rows))]
    for q in (x[5], x[17] + 0.3 * x[99], rng.standard_normal(64).astype(np.float32)):
        q = (q / np.linalg.norm(q)).astype(np.float32)
        for n in (1, 10, 150):
            assert vi._ranked(ids, rows, q, n) == vi._ranked(ids, rows.astype(np.float32), q, n)


def test_slot_rows_are_the_keys_and_vectors_usearch_holds_in_each_slot(tmp_path):
    """``slot_rows`` reads an f16 file's own bytes: each slot's key (``FREE_KEY`` where a vector was
    removed) with the very float16 row usearch hands for that key, whatever order a threaded build
    gave the slots and after removals and a later add; a resident cache keeps it while the file is
    the same. It refuses (None, no crash) a damaged file, an f32 file, and a layout that does not
    account for the file's bytes."""
    import numpy as np
    from usearch.index import Index

    from cortexctl.index import hnsw

    rng = np.random.default_rng(4)
    x = rng.standard_normal((5000, 32)).astype(np.float32)
    built = Index(ndim=32, metric="cos", dtype="f16", connectivity=16)
    built.add(np.arange(1, 5001, dtype=np.uint64), x, threads=2)
    built.remove(np.arange(1, 5001, 9, dtype=np.uint64))
    built.add(np.arange(9001, 9004, dtype=np.uint64), x[:3])
    path = tmp_path / "ix"
    fp = _saved(built, path)
    cache: dict = {}
    keys, rows = hnsw.slot_rows(path, fp, cache)
    present = keys != hnsw.FREE_KEY
    assert int(present.sum()) == len(built) == fp.count and rows.shape == (len(keys), 32)
    want = set(range(1, 5001)) - set(range(1, 5001, 9)) | {9001, 9002, 9003}
    assert set(keys[present].tolist()) == want
    for slot in np.flatnonzero(present).tolist():
        assert rows[slot].tobytes() == built.get(int(keys[slot]), dtype="f16").tobytes()
    assert hnsw.slot_rows(path, fp, cache)[0] is keys  # kept while the file is the same

    raw = np.frombuffer(bytearray(path.read_bytes()), dtype=np.uint8)
    assert hnsw._slot_layout(raw, fp) is not None
    rows_n = int(raw[:4].view("<u4")[0])
    head = 8 + rows_n * 64
    levels_at = head + 64 + 40
    for spoil in ("level", "tail", "magic", "scalar", "multi", "connectivity", "base", "rows", "short"):
        bad = raw.copy()
        if spoil == "level":  # one node's level in the levels block, not in the node
            first = int(np.flatnonzero(bad[levels_at:levels_at + 2 * rows_n].view("<i2") == 0)[0])
            bad[levels_at + 2 * first] = 1
        elif spoil == "magic":
            bad[head] ^= 0xFF
        elif spoil == "scalar":  # bf16: rows as wide as f16's
            bad[head + 14] = 4
        elif spoil == "multi":
            bad[head + 41] = 1
        elif spoil in ("connectivity", "base"):  # beyond what numpy's integers hold
            at = head + 64 + (8 if spoil == "connectivity" else 16)
            bad[at:at + 8] = np.frombuffer((2 ** 64 - 3).to_bytes(8, "little"), dtype=np.uint8)
        elif spoil == "rows":
            bad[:4] = 0xFF
        elif spoil == "short":
            bad = bad[:5]
        else:
            bad = np.concatenate((bad, np.zeros(16, dtype=np.uint8)))
        assert hnsw._slot_layout(bad, fp) is None, spoil

    fresh = Index(ndim=32, metric="cos", dtype="f16", connectivity=16)
    fresh.add(np.arange(1, 101, dtype=np.uint64), x[:100])
    fp2 = _saved(fresh, path)
    assert hnsw.slot_rows(path, fp, cache) is None  # the file the store recorded is gone
    assert len(hnsw.slot_rows(path, fp2, cache)[0]) == 100
    with open(path, "r+b") as fh:  # a byte flipped in place
        fh.seek(8 + 50 * 64)
        b = fh.read(1)
        fh.seek(-1, os.SEEK_CUR)
        fh.write(bytes([b[0] ^ 0x55]))
    assert hnsw.slot_rows(path, fp2) is None
    for dtype, multi in (("f32", False), ("bf16", False), ("f16", True)):
        other = Index(ndim=32, metric="cos", dtype=dtype, multi=multi)
        other.add(np.arange(1, 101, dtype=np.uint64) % (97 if multi else 101), x[:100])  # multi: keys 1-3 twice
        assert hnsw.slot_rows(path, _saved(other, path)) is None, (dtype, multi)
    fp3 = _saved(fresh, path)
    assert hnsw.slot_rows(path, fp3, cache) is not None and (hnsw._SLOT_ROWS, str(path)) in cache
    path.unlink()
    assert hnsw.slot_rows(path, fp3, cache) is None and not cache  # the mapping let go


def test_rows_read_from_slots_that_are_not_the_store_s_are_not_used(big):
    """``_by_slots`` checks each row it keeps against the store's row for the same key: a file read
    with its keys in the wrong slots (a cache handing a misread table) gives None, and find reads
    the store instead."""
    import numpy as np

    cx = Cortex(store=big, actor="alice")
    cx.reindex()
    model, filters = cx.embedder.model, Filters(actor="alice")
    cache: dict = {}
    with cx.store.searching() as tx:
        count, max_key, dim = tx.vector_stats(model)
        rec, why = semantic.index_state(tx, cx.store, model, dim)
        assert why == "ok"
        ids, keys = tx.vector_keys_for(filters, model)
        q = np.frombuffer(cx.embedder.embed_bytes("note 2000 item2000 alpha"), dtype="<f4")
        want = semantic._exact(tx, filters, model, dim, q, 5)
        got = semantic._by_slots(tx, cx.store, rec, rec.parts, ids, keys, model, dim, q, 5, cache)
        assert got is not None and {i for i, _ in want} <= set(got[0])
        slot = (hnsw._SLOT_ROWS, str(semantic.index_path(cx.store)))
        kept = cache[slot]
        slot_keys, rows = kept[1]
        cache[slot] = (kept[0], (np.roll(slot_keys, 1), rows))
        assert semantic._by_slots(tx, cx.store, rec, rec.parts, ids, keys, model, dim, q, 5, cache) is None
        twice = slot_keys.copy()  # one key in two slots, another in none: as many found as wanted
        twice[1] = twice[0]
        cache[slot] = (kept[0], (twice, rows))
        assert semantic._by_slots(tx, cx.store, rec, rec.parts, ids, keys, model, dim, q, 5, cache) is None
        assert semantic._exact(tx, filters, model, dim, q, 5, store=cx.store, cache=cache) == want


_FRESH_READER = """
import json, sys
from pathlib import Path
import numpy as np
from cortexctl.index import hnsw
if sys.argv[2] == "package":  # the compiled module loaded by usearch's own package instead
    hnsw._load_compiled = lambda: None
fp = hnsw.Fingerprint(**{k: tuple(v) if isinstance(v, list) else v for k, v in json.loads(sys.argv[3]).items()})
x = np.load(sys.argv[4])
searching = hnsw.open_view(Path(sys.argv[1]), fp)
keyed = hnsw.open_view(Path(sys.argv[1]), fp, by_key=True)
found = [hnsw.search(searching, q, 7) for q in x[:20]]
rows = hnsw.vectors(keyed, [3, 11, 40])
near = hnsw.nearest_rows(x[:300].astype(np.float16), x[7], 9)
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("usearch", "tqdm") or m == "urllib.request")
from usearch.index import Index  # the package imported after the compiled module was: still usable
later = Index(ndim=x.shape[1], metric="cos", dtype="f16")
later.add(np.arange(50, dtype=np.uint64), x[:50])
print(json.dumps({"found": [[k.tolist(), s.tolist()] for k, s in found], "rows": rows.tolist(),
                  "near": [near[0].tolist(), near[1].tolist()], "loaded": loaded,
                  "later": later.search(x[3], 1).keys.tolist()}))
"""


@pytest.mark.parametrize("how", ["alone", "package"])
def test_a_view_searches_without_usearchs_package_start_up_and_answers_as_its_wrapper(tmp_path, how):
    """A fresh process viewing, searching and comparing exactly loads usearch's compiled module on its
    own (not the package, whose start-up imports urllib.request, nor ``usearch.index``, which imports
    tqdm) and gets the keys, similarities and rows usearch's own wrapper gives; should that load not
    be possible, the package's own import serves the same answers; and the package imported later in
    the same process works beside it."""
    from usearch.index import Index
    from usearch.index import search as exact_search

    rng = np.random.default_rng(11)
    x = rng.standard_normal((3000, 24)).astype(np.float32)
    built = hnsw.new(24, len(x))
    hnsw.add(built, np.arange(1, 3001), x)
    built.remove(np.arange(1, 3001, 9, dtype=np.uint64))
    fp = _saved(built, tmp_path / "ix")
    np.save(tmp_path / "x.npy", x)
    fields = {k: list(v) if isinstance(v, tuple) else v for k, v in vars(fp).items()}
    run = subprocess.run([sys.executable, "-c", _FRESH_READER, str(tmp_path / "ix"), how, json.dumps(fields),
                          str(tmp_path / "x.npy")], capture_output=True, text=True, check=True)
    got = json.loads(run.stdout)

    wrapper = Index.restore(str(tmp_path / "ix"), view=True)
    wrapper.expansion_search = hnsw.expansion_for(len(wrapper), int(wrapper.connectivity))
    for q, (keys, sims) in zip(x[:20], got["found"]):
        m = wrapper.search(q, 7)
        assert keys == m.keys.tolist() and sims == (1.0 - m.distances.astype(np.float32)).tolist()
        assert not set(keys) & set(range(1, 3001, 9))
    want_rows = np.vstack(wrapper.get(np.array([3, 11, 40], dtype=np.uint64))).astype(np.float32)
    assert np.asarray(got["rows"], dtype=np.float32).tobytes() == want_rows.tobytes()
    m = exact_search(x[:300].astype(np.float16), x[7].astype(np.float16), 9, "ip", exact=True)
    assert got["near"] == [m.keys.astype(np.int64).tolist(), (1.0 - m.distances.astype(np.float64)).tolist()]
    assert got["later"] == [3]
    if how == "alone":
        assert got["loaded"] == ["usearch.compiled"]
    else:
        assert "usearch.index" not in got["loaded"] and "usearch" in got["loaded"]
