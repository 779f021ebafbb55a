"""The search snapshot (store/snapshot/): find answers from it only when it is current, and the
same as from DuckDB; stale, truncated, foreign or damaged snapshots are bypassed; every kind of
change is visible to the next find; a writer killed after COMMIT leaves nothing to trust wrongly."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cortexctl import Cortex, files
from cortexctl.engine.results import FindQuery
from cortexctl.store import snapshot

NOW = datetime(2026, 11, 23, 12, 0, 0, 123456)
WORDS = ("deploy key rotation friday latency budget payments owner oncall bastion credentials "
         "database lock merge approvals coverage roadmap").split()


def _cx(store: Path, actor: str = "alice") -> Cortex:
    cx = Cortex(store=store, actor=actor)
    cx.context.clock = lambda: NOW
    return cx


_FILLED: dict[tuple[str, int], tuple[Path, list[str]]] = {}  # (actor, n) -> a filled store and its URIs
_TEMPLATES: list[Path] = []  # where this module's filled stores are kept


@pytest.fixture(scope="module", autouse=True)
def _filled_stores(tmp_path_factory):
    """Each (actor, n) store is filled once per module and copied into each test's empty store."""
    _TEMPLATES[:] = [tmp_path_factory.mktemp("filled")]
    yield
    _FILLED.clear()


def _fill(cx: Cortex, n: int = 40) -> list[str]:
    """``n`` memories of every type, tag and visibility, written at NOW (the same ones every time)."""
    path, key = cx.store.path, (cx.actor, n)
    if path.exists():
        return _write_fill(cx, n)
    if key not in _FILLED:
        template = _TEMPLATES[0] / f"{cx.actor}-{n}"
        _FILLED[key] = (template, _write_fill(_cx(template, cx.actor), n))
    template, uris = _FILLED[key]
    shutil.copytree(template, path)
    return list(uris)


def _write_fill(cx: Cortex, n: int) -> list[str]:
    import random

    r = random.Random(5)
    uris = []
    for i in range(n):
        text = " ".join(r.choices(WORDS, k=5)) + f" number {i}"
        # some with forms of their own or frames: their result rows hold them (the others' are empty)
        forms = {"short": f"own short form {i}"} if i % 7 == 3 else None
        frames = [f"deliver:task:T-{i}"] if i % 6 == 1 else ()
        uris.append(cx.write(["fact", "event", "preference"][i % 3], text, tags=[f"t{i % 4}"],
                             importance=1 + i % 9, visibility="public" if i % 5 == 0 else "private",
                             forms=forms, frames=frames).uri)
    return uris


def _ready(cx: Cortex) -> None:
    cx.reindex()
    assert snapshot.state(cx.store.path) == "current"


def _answer(cx: Cortex, **q) -> list[dict]:
    hits, _ = cx.find_with_warnings(FindQuery(**q))
    return [h.to_json() for h in hits]


def _from_duckdb(cx: Cortex, **q) -> list[dict]:
    """The same query with the snapshot moved aside (find then reads DuckDB alone)."""
    path = cx.store.path / snapshot.SNAPSHOT_NAME
    aside = cx.store.path.parent / "snapshot.aside"
    os.rename(path, aside)
    try:
        return _answer(cx, **q)
    finally:
        os.rename(aside, path)


QUERIES = [
    {"near": "deploy key rotation"},
    {"near": "latency budget", "k": 3},
    {"near": "database lock", "tags": ["t1"]},
    {"near": "owner oncall", "types": ["event"]},
    {"near": "payments", "include_tombstoned": True},
    {},
    {"tags": ["t2"], "k": 5},
    {"near": "merge approvals", "form": "medium"},
    {"near": "credentials", "frames": ["deliver"]},
    {"near": "roadmap", "form": "full"},
]


@pytest.mark.parametrize("q", QUERIES)
def test_answers_match_duckdb(store, q):
    cx = _cx(store)
    _fill(cx)
    _ready(cx)
    got = _answer(cx, **q)
    assert snapshot.state(store) == "current"  # find writes nothing
    assert got == _from_duckdb(cx, **q)


@pytest.mark.slow
def test_current_snapshot_spares_duckdb(store, tmp_path):
    # Past EXACT_MAX, so the semantic lane searches the index: an exact search of a small store
    # reads the store's own f32 vectors from DuckDB (an f16 index file only holds them rounded).
    import io
    import json

    from cortexctl.store.vector_index import EXACT_MAX

    cx = _cx(store)
    lines = "".join(json.dumps({"type": "fact", "text": f"deploy key note {i} of {WORDS[i % len(WORDS)]}"}) + "\n"
                    for i in range(EXACT_MAX + 100))
    cx.import_jsonl(io.BytesIO(lines.encode()))
    _ready(cx)
    script = textwrap.dedent(f"""
        import sys, traceback

        class Tell:  # names whoever imports duckdb, for the assertion message
            def find_spec(self, name, path=None, target=None):
                if name == "duckdb":
                    traceback.print_stack()
                return None

        sys.meta_path.insert(0, Tell())
        from cortexctl.cli.app import main
        code = main(["find", "--near", sys.argv[1], "--store", {str(store)!r}, "--json"])
        assert "duckdb" not in sys.modules, "duckdb was imported"
        sys.exit(code)
    """)
    assert snapshot.state(store) == "current"
    proc = subprocess.run([sys.executable, "-c", script, "deploy key"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, (snapshot.state(store), proc.stderr)
    assert '"results"' in proc.stdout
    # after writes of every kind, the delta answers for the memories they changed: still no DuckDB
    new = cx.write("fact", "deploy key of the walrus colony").id
    cx.update(new, "deploy key of the walrus colony, rotated")
    hits = cx.find(FindQuery(near="deploy key", k=3))
    cx.attest("rotate", "success", [h.uri for h in hits[:2]])
    cx.tag(hits[2].id, add=["walrus"])
    assert (store / snapshot.DELTA_NAME).exists() and snapshot.state(store) == "current"
    proc = subprocess.run([sys.executable, "-c", script, "walrus colony rotated"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, (snapshot.state(store), proc.stderr)
    assert json.loads(proc.stdout)["results"][0]["id"] == new


# -- never trusted blindly ---------------------------------------------------------------------------
def test_stale_snapshot_is_bypassed_and_refreshed_by_the_next_fold(store):
    cx = _cx(store)
    _fill(cx, 20)
    _ready(cx)
    uri = cx.write("fact", "zanzibar quokka migration plan").uri
    assert snapshot.state(store) == "current"  # through the delta the write left
    os.unlink(store / snapshot.DELTA_NAME)
    assert snapshot.state(store) == "stale"
    assert [h["id"] for h in _answer(cx, near="zanzibar quokka")][:1] == [uri.rsplit("/", 1)[1]]
    _ready(cx)
    assert [h["id"] for h in _answer(cx, near="zanzibar quokka")][:1] == [uri.rsplit("/", 1)[1]]


def test_a_reindex_with_nothing_to_do_commits_nothing_and_leaves_the_snapshot_as_it_is(store):
    """No other model's vectors to drop: no transaction, so the generation stays and the snapshot
    is not built again (a whole build of it takes 30 s at a million memories)."""
    cx = _cx(store)
    _fill(cx, 20)
    _ready(cx)
    gen = (store / snapshot.GEN_NAME).read_bytes()
    built = os.stat(store / snapshot.SNAPSHOT_NAME)
    assert cx.reindex()["index"]["action"] == "none"
    assert (store / snapshot.GEN_NAME).read_bytes() == gen and snapshot.state(store) == "current"
    after = os.stat(store / snapshot.SNAPSHOT_NAME)
    assert (after.st_ino, after.st_mtime_ns) == (built.st_ino, built.st_mtime_ns)


def test_truncated_snapshot_is_bypassed(store):
    cx = _cx(store)
    _fill(cx, 20)
    _ready(cx)
    want = _from_duckdb(cx, near="deploy key")
    path = store / snapshot.SNAPSHOT_NAME
    for size in (path.stat().st_size - 1, 4096, 10, 0):
        with open(path, "r+b") as fh:
            fh.truncate(size)
        assert snapshot.state(store) == "damaged"
        assert _answer(cx, near="deploy key") == want
    cx.reindex()  # rebuilt
    assert snapshot.state(store) == "current"
    assert _answer(cx, near="deploy key") == want


def test_snapshot_of_another_store_is_bypassed(tmp_path):
    a, b = _cx(tmp_path / "a"), _cx(tmp_path / "b")
    _fill(a, 20)
    b.write("fact", "the only memory of store b about deploy keys")
    _ready(a)
    _ready(b)
    shutil.copy(a.store.path / snapshot.SNAPSHOT_NAME, b.store.path / snapshot.SNAPSHOT_NAME)
    assert snapshot.state(b.store.path) == "stale"
    hits = _answer(b, near="deploy key")
    assert [h["text"] for h in hits] == ["the only memory of store b about deploy keys"]
    # and with store a's generation file too: the database file is not the one it was built from
    shutil.copy(a.store.path / snapshot.GEN_NAME, b.store.path / snapshot.GEN_NAME)
    assert snapshot.state(b.store.path) == "stale"
    assert [h["text"] for h in _answer(b, near="deploy key")] == ["the only memory of store b about deploy keys"]


def _flip(path: Path, offset: int) -> None:
    with open(path, "r+b") as fh:
        fh.seek(offset)
        byte = fh.read(1)
        fh.seek(offset)
        fh.write(bytes([byte[0] ^ 0x40]))


def _built(tmp_path: Path):
    """A store of 30 memories with a current snapshot: (cortex, its answer to a find, the snapshot's
    path, its header, where its data starts)."""
    cx = _cx(tmp_path / "store")
    _fill(cx, 30)
    _ready(cx)
    want = _answer(cx, near="deploy key rotation")
    path = cx.store.path / snapshot.SNAPSHOT_NAME
    return (cx, want, path, *snapshot._header_of(path))


@pytest.mark.parametrize("array", ["head_importance", "head_visibility_code", "by_term_doc", "doc_head_row",
                                   "result_json", "data_blob", "HEADER"])
def test_byte_flipped_snapshot_is_detected(tmp_path, array):
    cx, want, path, header, start = _built(tmp_path)
    assert array == "HEADER" or header["arrays"][array]["nbytes"] > 3
    offset = 100 if array == "HEADER" else start + header["arrays"][array]["offset"] + 3
    _flip(path, offset)
    assert cx.store.snapshot_problem() is not None
    assert _answer(cx, near="deploy key rotation") == want
    assert cx.healthcheck(probe=False)["snapshot"]["state"] != "current"
    cx.reindex()  # the next fold replaces it
    assert cx.store.snapshot_problem() is None and snapshot.state(cx.store.path) == "current"
    assert _answer(cx, near="deploy key rotation") == want


def _stamp(path: Path) -> dict | None:
    import json

    stamp = files.checked_path(path)
    return json.loads(stamp.read_text()) if stamp.exists() else None


def _blocks_known(cx: Cortex) -> tuple[bool, bool]:
    """(every block, any block) of the current snapshot known sound as it is opened."""
    snap, _delta = snapshot.open_current(cx.store.path)
    try:
        return bool(snap._ok[:-1].all()), bool(snap._ok[:-1].any())
    finally:
        snap.close()


def test_a_written_snapshot_is_stamped_checked_and_a_byte_flipped_since_is_still_found(tmp_path):
    """The writer read every block back to make its CRCs: its checked stamp spares a reader the
    block checks of that very file; a byte flipped in place afterwards (its modification time put
    back) changes the file's change time, so the next reader checks blocks as it reads them and
    finds the flip; healthcheck reads every block whatever the stamp says, and stamps a sound file."""
    cx, want, path, header, start = _built(tmp_path)
    assert _stamp(path) == {"file": files.identity(path.stat()), "crc": header["_crc"]}
    assert _blocks_known(cx) == (True, True)
    assert _answer(cx, near="deploy key rotation") == want

    offset = start + header["arrays"]["doc_head_row"]["offset"] + 3
    mtime = path.stat().st_mtime_ns
    _flip(path, offset)
    os.utime(path, ns=(mtime, mtime))
    assert _blocks_known(cx) == (False, False)
    snap, _delta = snapshot.open_current(cx.store.path)
    with pytest.raises(snapshot.SnapshotUnusable):
        snap.whole("doc_head_row")
    snap.close()
    assert _answer(cx, near="deploy key rotation") == want  # from DuckDB
    assert "damaged" in cx.store.snapshot_problem()
    assert _stamp(path)["file"] != files.identity(path.stat())  # a damaged file is not stamped

    _flip(path, offset)  # sound again: healthcheck reads it whole and stamps it for the next reader
    assert cx.store.snapshot_problem() is None
    assert _stamp(path) == {"file": files.identity(path.stat()), "crc": header["_crc"]}
    assert _blocks_known(cx) == (True, True)
    assert _answer(cx, near="deploy key rotation") == want


def test_a_stamp_naming_another_file_spares_no_block_check_and_healthcheck_stamps_the_file_it_read(tmp_path):
    a, b = _cx(tmp_path / "a"), _cx(tmp_path / "b")
    for cx in (a, b):
        _fill(cx, 20)
        _ready(cx)
    path = b.store.path / snapshot.SNAPSHOT_NAME
    shutil.copy(files.checked_path(a.store.path / snapshot.SNAPSHOT_NAME), files.checked_path(path))
    assert _blocks_known(b) == (False, False)
    assert b.store.snapshot_problem() is None
    assert _stamp(path)["file"] == files.identity(path.stat())
    assert _blocks_known(b) == (True, True)


def test_a_folds_merged_snapshot_is_stamped_and_the_delta_gone_with_the_old_one(tmp_path):
    from cortexctl.store import fold

    cx = _cx(tmp_path / "store")
    _fill(cx, 20)
    _ready(cx)
    before = _stamp(cx.store.path / snapshot.SNAPSHOT_NAME)
    cx.write("fact", "the okapi written after the build")
    assert (cx.store.path / snapshot.DELTA_NAME).exists()
    assert fold.run(cx.store, cx.embedder.model) == {"index": "fold", "snapshot": "merged"}
    path = cx.store.path / snapshot.SNAPSHOT_NAME
    assert _stamp(path) != before and _stamp(path)["file"] == files.identity(path.stat())
    index = cx.store.path / "cortex.usearch"  # the fold's index file is stamped too (read whole by no one)
    record = json.loads((cx.store.path / "cortex.usearch.json").read_text())
    assert files.checked_value(index, index.stat()) == record["crc_all"]
    assert _blocks_known(cx) == (True, True)
    assert _answer(cx, near="okapi")[0]["text"] == "the okapi written after the build"


def test_a_readers_stamp_being_written_is_left_to_it_and_one_a_killed_reader_left_is_cleared(tmp_path):
    from cortexctl.store.snapshot import format as sf

    cx = _cx(tmp_path / "store")
    _fill(cx, 10)
    _ready(cx)
    theirs = cx.store.path / ".cortex.snapshot.checked.abc123.tmp"
    left = cx.store.path / ".cortex.snapshot.checked.def456.tmp"
    killed = cx.store.path / ".cortex.snapshot.abc123.tmp"
    for path in (theirs, left, killed):
        path.write_bytes(b"{}")
    old = left.stat().st_mtime - 2 * files.STAMP_TEMP_AGE
    os.utime(left, (old, old))
    sf._clear_temps(cx.store.path)
    assert theirs.exists() and not left.exists() and not killed.exists()


def test_a_resident_process_maps_the_snapshot_again_after_a_write_in_place(tmp_path):
    """``cortexctl mcp`` keeps the mapping while the file is the same: a byte flipped in place with
    its modification time put back is a new change time, so the file is mapped again and its
    blocks are checked as they are read."""
    cx, _want, path, header, start = _built(tmp_path)
    cache: dict = {}
    kept, _delta = snapshot.open_current(cx.store.path, cache)
    assert snapshot.open_current(cx.store.path, cache)[0] is kept
    offset = start + header["arrays"]["doc_head_row"]["offset"] + 3
    mtime = path.stat().st_mtime_ns
    _flip(path, offset)
    os.utime(path, ns=(mtime, mtime))
    again, _delta = snapshot.open_current(cx.store.path, cache)
    assert again is not kept
    with pytest.raises(snapshot.SnapshotUnusable):
        again.whole("doc_head_row")


def test_a_stamped_snapshot_damaged_in_a_sampled_block_is_not_opened(tmp_path):
    """Damage below the file system (a byte flipped, the stamp made to name the file as it is then):
    the blocks checked on opening a stamped file find it where they look; find then reads DuckDB."""
    cx, want, path, header, start = _built(tmp_path)
    _flip(path, start + 5)  # block 0 is always among those checked
    files.stamp_checked(path, path.stat(), header["_crc"])
    assert snapshot.open_current(cx.store.path) is None
    assert _answer(cx, near="deploy key rotation") == want
    assert "damaged" in cx.store.snapshot_problem()


def test_a_snapshot_leaves_out_the_forms_its_data_renders_and_keeps_a_memorys_own(tmp_path):
    """A result row holds a form only where it is not the one rendered from the memory's data (a form
    given by the writer): a plain memory's row is empty, and find shows the same forms either way."""
    from cortexctl.store.snapshot.builder import rendered
    from cortexctl.store.snapshot.format import unpack_data

    cx = _cx(tmp_path / "store")
    plain = cx.write("fact", "the staging database is refreshed every night").uri
    own = cx.write("fact", "the deploy key rotates every month",
                   forms={"short": "deploy key: monthly", "medium": "deploy key rotation: every month"}).uri
    half = cx.write("event", "the deploy key was rotated by hand", forms={"medium": "deploy key rotated by hand"}).uri
    _ready(cx)
    snap, _ = snapshot.open_current(cx.store.path)
    try:
        ids = [i.decode() for i in snap.whole("head_id").tolist()]
        starts = snap.whole("result_start").tolist()
        rows = {i: snap.whole("result_json")[starts[k]:starts[k + 1]].tobytes() for k, i in enumerate(ids)}
        data = {i: (int(snap.whole("data_type")[k]), unpack_data(
                    snap.whole("data_blob")[snap.whole("data_start")[k]:snap.whole("data_start")[k + 1]].tobytes()))
                for k, i in enumerate(ids)}
    finally:
        snap.close()
    by_uri = {u: u.rsplit("/", 1)[1] for u in (plain, own, half)}
    assert rows[by_uri[plain]] == b""
    assert json.loads(rows[by_uri[own]]) == ["deploy key: monthly", "deploy key rotation: every month"]
    assert json.loads(rows[by_uri[half]]) == [None, "deploy key rotated by hand"]
    assert rendered(*data[by_uri[half]])[0] == cx.show(half).short
    for form in ("short", "medium"):
        want = _from_duckdb(cx, near="deploy key staging database", form=form)
        assert {h["uri"] for h in want} == {plain, own, half}
        assert _answer(cx, near="deploy key staging database", form=form) == want


def test_a_builds_posting_lists_hold_every_stored_posting_once_by_term_and_by_doc(tmp_path):
    """A full build's lexical arrays: each term's postings in doc order, each doc's in term order,
    every posting the store holds exactly once in each, a run starting where its key changes."""
    cx = _cx(tmp_path / "store")
    uris = _fill(cx, 30)
    for uri in uris[::5]:  # edited: their old docs go, new ones come
        cx.update(uri, f"rotation of the bastion credentials after {uri[-4:]}")
    with cx.context.storage.reading() as tx:
        stored = [tuple(int(v) for v in r) for r in tx.con.execute("SELECT term, doc, tf FROM lex_postings").fetchall()]
        a, _ = snapshot.collect(tx.con)
    terms, term_start = a["by_term_term"].tolist(), a["by_term_start"].tolist()
    by_term = [(terms[i], int(d), int(f)) for i in range(len(terms))
               for d, f in zip(a["by_term_doc"][term_start[i]:term_start[i + 1]],
                               a["by_term_tf"][term_start[i]:term_start[i + 1]])]
    assert len(set(terms)) == len(terms) and by_term == sorted(stored)
    docs, doc_start = a["by_doc_doc"].tolist(), a["by_doc_start"].tolist()
    by_doc = [(docs[i], terms[int(at)], int(f)) for i in range(len(docs))
              for at, f in zip(a["by_doc_term_at"][doc_start[i]:doc_start[i + 1]],
                               a["by_doc_tf"][doc_start[i]:doc_start[i + 1]])]
    assert len(set(docs)) == len(docs) and by_doc == sorted((d, t, f) for t, d, f in stored)
    assert len(stored) > 100


def _rebuilt(cx: Cortex) -> bytes:
    """The snapshot file a full build of ``cx``'s store writes now."""
    path = cx.store.path / snapshot.SNAPSHOT_NAME
    for name in (snapshot.SNAPSHOT_NAME, snapshot.DELTA_NAME):
        (cx.store.path / name).unlink(missing_ok=True)
    cx.context.storage.refresh_snapshot()
    return path.read_bytes()


def test_a_big_builds_helper_process_writes_the_very_snapshot_a_build_alone_writes(tmp_path, monkeypatch):
    """From ``SLIM_HELPER_FROM`` heads on more than one core, a full build hands the rendering and
    deflating of its rows to a helper process (a fresh interpreter): the file is byte for byte the
    one the build writes alone, a memory with forms of its own included."""
    from cortexctl import parallel
    from cortexctl.parallel import ordered_map
    from cortexctl.store.snapshot import builder

    cx = _cx(tmp_path / "store")
    _fill(cx, 30)
    cx.write("fact", "the deploy key rotates every month", forms={"short": "deploy key: monthly"})
    alone = _rebuilt(cx)
    monkeypatch.setattr(builder, "SLIM_HELPER_FROM", 0)
    monkeypatch.setattr(builder, "BUILD_BATCH", 7)  # several batches for the helper
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    assert _rebuilt(cx) == alone
    # and the helper's work itself, done in a fresh interpreter, is what this process makes of it
    con = cx.context.storage  # the rows the build reads
    with con.reading() as tx:
        rows = tx.con.execute(builder.HEADS_WITH_DATA).fetchall()
    batches = [builder._items(rows[i:i + 7]) for i in range(0, len(rows), 7)]
    with ordered_map(builder.slim_rows, [(b,) for b in batches], workers=1, fresh=True) as pool:
        assert list(pool) == [builder.slim_rows(b) for b in batches]


def test_a_build_reading_its_docs_postings_and_vectors_in_pieces_writes_the_snapshot_one_read_writes(tmp_path,
                                                                                                      monkeypatch):
    """A full build reads the docs and vectors in pieces between quantiles of their keys and the
    postings a range of terms (then of docs) at a time, into arrays as narrow as their values: the
    file is byte for byte the one a build reading each table whole writes."""
    from cortexctl.store.snapshot import builder

    cx = _cx(tmp_path / "store")
    uris = _fill(cx, 30)
    for uri in uris[::4]:  # edited: docs and vectors with gaps in their keys
        cx.update(uri, f"rotation of the bastion credentials after {uri[-4:]}")
    cx.forget(uris[1], reason="no longer true")
    whole = _rebuilt(cx)
    with cx.context.storage.reading() as tx:
        counts = [tx.con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in ("lex_docs", "vectors", "lex_postings")]
    assert counts[0] > 20 and counts[1] > 20 and counts[2] > 100
    monkeypatch.setattr(builder, "ROWS_PIECE", 3)
    monkeypatch.setattr(builder, "POSTINGS_PIECE", 7)  # smaller than some terms' runs: such a run is a piece
    assert _rebuilt(cx) == whole


def test_a_store_without_postings_stores_its_empty_postings_arrays_wide(tmp_path):
    """Memories whose text leaves no terms: the postings arrays are empty, and stored in their wide
    types as a build reading the postings whole stored them (a narrow type is chosen from values)."""
    cx = _cx(tmp_path / "store")
    cx.write("fact", "!!! ... ???")
    with cx.context.storage.read() as con:
        assert con.execute("SELECT count(*) FROM lex_postings").fetchall()[0][0] == 0
    _rebuilt(cx)
    arrays = snapshot.format._header_of(cx.store.path / snapshot.SNAPSHOT_NAME)[0]["arrays"]
    assert (arrays["by_term_doc"]["dtype"], arrays["by_doc_term_at"]["dtype"]) == ("<u8", "<i8")


def test_a_doc_naming_an_id_longer_than_any_memorys_has_no_head_row(tmp_path):
    """A damaged lex_docs row whose ID is a memory's with a character more: its doc names no head
    (as DuckDB's own join finds none), though the snapshot's IDs are cut to 26 bytes."""
    cx = _cx(tmp_path / "store")
    _fill(cx, 6)
    with cx.context.storage.write() as con:
        doc, = con.execute("UPDATE lex_docs SET id = id || 'X' WHERE doc = (SELECT min(doc) FROM lex_docs)"
                           " RETURNING doc").fetchall()[0]
    with cx.context.storage.reading() as tx:
        a, _ = snapshot.collect(tx.con)
    rows = dict(zip(a["doc_number"].tolist(), a["doc_head_row"].tolist()))
    assert rows[doc] == -1 and sum(r >= 0 for r in rows.values()) == len(rows) - 1


def test_ids_are_found_in_the_heads_in_order_or_not():
    """``_rows_in``: each ID's head row (its last, were an ID there twice), -1 where it has none,
    whether the heads are in ID order (a full build's) or not."""
    import numpy as np

    from cortexctl.store.snapshot.builder import _rows_in

    ids = np.array([b"01B", b"01D", b"01A", b"01Z"], dtype="S26")
    in_order = np.array([b"01A", b"01B", b"01C", b"01D"], dtype="S26")
    assert _rows_in(in_order)(ids).tolist() == [1, 3, 0, -1]
    shuffled = np.array([b"01D", b"01A", b"01C", b"01B", b"01A"], dtype="S26")
    assert _rows_in(shuffled)(ids).tolist() == [3, 0, 4, -1]
    assert _rows_in(np.zeros(0, "S26"))(ids).tolist() == [-1] * 4
    assert _rows_in(in_order)(np.zeros(0, "S26")).tolist() == []


def test_a_build_that_does_not_fit_its_memory_budget_is_built_again_without_it(tmp_path, monkeypatch):
    """A full build holds DuckDB to ``BUILD_MEMORY``; a store whose build runs out of it (3,000
    memories in 4 MB) is built again unbounded: the very file an unbounded build writes, and nothing
    left in the scratch area."""
    import io

    import orjson

    from cortexctl.store import scratch
    from cortexctl.store.snapshot import builder

    cx = _cx(tmp_path / "store")
    cx.import_jsonl(io.BytesIO(b"".join(orjson.dumps({"type": "fact", "text": f"note {i} on service s{i % 31}"}) + b"\n"
                                        for i in range(3000))))
    unbounded = _rebuilt(cx)
    monkeypatch.setattr(builder, "BUILD_MEMORY", "4MB")
    assert _rebuilt(cx) == unbounded
    area = scratch.areas(cx.context.storage)[0]
    assert not area.exists() or not any(area.iterdir())


def test_a_helper_process_killed_mid_build_leaves_its_batches_to_the_build(tmp_path, monkeypatch):
    """kill -9 the helper after its first batch came back: the build slims the rest itself and
    writes the same file."""
    from cortexctl import parallel
    from cortexctl.store.snapshot import builder

    cx = _cx(tmp_path / "store")
    _fill(cx, 30)
    alone = _rebuilt(cx)
    monkeypatch.setattr(builder, "BUILD_BATCH", 4)
    monkeypatch.setattr(builder, "SLIM_HELPER_FROM", 0)
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    with cx.context.storage.reading() as tx:
        src = builder._StoreRows(tx.con)
        made = builder._slimmed(src, True)
        got = [next(made)]
        helpers = _spawned_children()
        assert len(helpers) == 1
        os.kill(helpers[0], signal.SIGKILL)
        got.extend(made)
        rows = tx.con.execute(builder.HEADS_WITH_DATA).fetchall()
    assert [r for batch, _ in got for r in batch] == rows
    assert [s for _, s in got] == [builder.slim_rows(builder._items(rows[i:i + 4])) for i in range(0, len(rows), 4)]
    monkeypatch.setattr(builder, "BUILD_BATCH", 10_000)
    assert _rebuilt(cx) == alone


@pytest.mark.parametrize("helper", [False, True])
def test_a_build_whose_rows_cannot_be_read_fails_with_or_without_its_helper(tmp_path, monkeypatch, helper):
    """Reading the store's rows failing mid-build (DuckDB out of memory, an I/O error) fails the
    build, helper or not: it is not taken for the helper's failure, and no short snapshot is written."""
    import duckdb

    from cortexctl import parallel
    from cortexctl.store.snapshot import builder

    cx = _cx(tmp_path / "store")
    _fill(cx, 30)
    _ready(cx)
    monkeypatch.setattr(builder, "BUILD_BATCH", 4)
    monkeypatch.setattr(builder, "SLIM_HELPER_FROM", 0 if helper else 10**9)
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    read = builder._StoreRows._batches

    def failing(self, sql):
        for i, rows in enumerate(read(self, sql)):
            if i == 3:
                raise duckdb.OutOfMemoryException("injected: out of memory reading the heads")
            yield rows

    monkeypatch.setattr(builder._StoreRows, "_batches", failing)
    for name in (snapshot.SNAPSHOT_NAME, snapshot.DELTA_NAME):
        (cx.store.path / name).unlink(missing_ok=True)
    with pytest.raises(duckdb.OutOfMemoryException):
        cx.context.storage.refresh_snapshot()
    assert not (cx.store.path / snapshot.SNAPSHOT_NAME).exists()


def _spawned_children() -> list[int]:
    """The PIDs of the processes below this one that are fresh interpreters of ``multiprocessing``'s."""
    from tests.reliability.test_kills import _descendants

    out = []
    for pid in sorted(_descendants(os.getpid())):
        try:
            if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes():
                out.append(pid)
        except OSError:
            continue
    return out


def test_data_deflated_against_the_dictionary_inflates_back_and_a_broken_blob_is_unusable():
    from cortexctl.memory import codec
    from cortexctl.memory.record import build_version
    from cortexctl.store.snapshot.format import SnapshotUnusable, pack_data, unpack_data

    body = build_version("fact", {"subject": "payments", "predicate": "owner", "statement": "the payments owner is bob",
                                  "source": "stated"})
    for data in (body.data_bytes, codec.encode({"x": "not a memory's"}), b"\x00\xff" * 300, b""):
        packed = pack_data(data)
        assert unpack_data(packed) == data
    assert len(pack_data(body.data_bytes)) < len(body.data_bytes)
    packed = pack_data(body.data_bytes)
    for broken in (packed[:-2], packed + b"\x00", bytes([packed[0] ^ 0xFF]) + packed[1:]):
        with pytest.raises(SnapshotUnusable):
            unpack_data(broken)


@pytest.mark.parametrize("key", ["format", "forms", "data_dictionary"])
def test_a_snapshot_of_another_format_is_stale_not_damaged(tmp_path, key):
    """A snapshot written by another version of cortexctl (another format, forms rendered by other
    templates, data deflated against another dictionary) is out of date, like a stale one: find reads
    DuckDB, verify and healthcheck find nothing wrong, and the next fold rebuilds it."""
    import json
    import zlib

    cx = _cx(tmp_path / "store")
    _fill(cx, 20)
    _ready(cx)
    want = _answer(cx, near="deploy key rotation")
    path = cx.store.path / snapshot.SNAPSHOT_NAME
    raw = path.read_bytes()
    hlen = int.from_bytes(raw[8:16], "little")
    header = json.loads(raw[24:24 + hlen])
    header[key] += 1
    body = json.dumps(header, separators=(",", ":")).encode()
    assert len(body) == hlen
    path.write_bytes(raw[:8] + raw[8:16] + zlib.crc32(body).to_bytes(8, "little") + body + raw[24 + hlen:])
    assert snapshot.state(cx.store.path) == "stale" and cx.store.snapshot_problem() is None
    assert cx.verify().ok
    assert _answer(cx, near="deploy key rotation") == want
    cx.reindex()
    assert snapshot.state(cx.store.path) == "current"


def test_a_copied_store_bypasses_its_snapshot_until_the_next_fold(tmp_path):
    """A copy has another database file (inode): its snapshot is not trusted until rebuilt there."""
    cx = _cx(tmp_path / "orig")
    _fill(cx, 20)
    _ready(cx)
    want = _answer(cx, near="deploy key rotation")
    shutil.copytree(tmp_path / "orig", tmp_path / "copy")
    copy = _cx(tmp_path / "copy")
    _flip(copy.store.path / snapshot.SNAPSHOT_NAME, 5000)
    assert snapshot.state(copy.store.path) == "stale"
    assert _answer(copy, near="deploy key rotation") == want
    copy.reindex()
    assert snapshot.state(copy.store.path) == "current"
    assert _answer(copy, near="deploy key rotation") == want


def test_replaced_database_is_detected(tmp_path):
    """A database file swapped in by something that does not bump the generation (a copy by hand)."""
    a, b = _cx(tmp_path / "a"), _cx(tmp_path / "b")
    _fill(a, 20)
    b.write("fact", "store b holds one memory about deploy keys")
    _ready(a)
    os.replace(b.store.path / "cortex.duckdb", a.store.path / "cortex.duckdb")
    assert snapshot.state(a.store.path) == "stale"
    assert [h["text"] for h in _answer(a, near="deploy key")] == ["store b holds one memory about deploy keys"]


# -- every change is seen by the next find -------------------------------------------------------------
def _ids(hits):
    return [h["id"] for h in hits]


def test_every_kind_of_change_is_visible_to_the_next_find(tmp_path):
    store = tmp_path / "store"
    cx = _cx(store)
    uris = _fill(cx, 30)
    ids = [u.rsplit("/", 1)[1] for u in uris]
    _ready(cx)

    asked = []

    def check(**q):
        # answered through the delta, which grows with every change since the build ...
        assert snapshot.state(store) == "current" and (store / snapshot.DELTA_NAME).exists()
        got = _answer(cx, **q)
        assert got == _from_duckdb(cx, **q)
        asked.append(q)
        return got

    new = cx.write("fact", "xylophone tuning schedule").uri.rsplit("/", 1)[1]
    assert _ids(check(near="xylophone tuning"))[0] == new

    cx.update(new, "marimba tuning schedule")
    assert _ids(check(near="marimba"))[0] == new
    assert all(h["text"] != "xylophone tuning schedule" for h in check(near="xylophone"))

    cx.forget(new, reason="wrong")
    assert new not in _ids(check(near="marimba tuning"))
    cx.unforget(new)
    assert new in _ids(check(near="marimba tuning"))

    cx.tag(ids[3], add=["rare-tag"])
    assert _ids(check(near="deploy", tags=["rare-tag"])) == [ids[3]]
    cx.tag(ids[3], remove=["rare-tag"])
    assert _ids(check(near="deploy", tags=["rare-tag"])) == []

    bob = _cx(store, "bob")
    assert ids[4] not in _ids(_answer(bob, k=50))
    cx.head(ids[4], importance=10, visibility="public")
    check()
    assert ids[4] in _ids(_answer(bob, k=50))

    cx.attest("ship-it", "success", [uris[5], uris[6]])
    check()
    check(near="deploy key")

    # ... and once a build holds them all, the same answers from the snapshot alone
    for q in asked:
        want = _from_duckdb(cx, **q)
        cx.reindex()
        assert snapshot.state(store) == "current" and not (store / snapshot.DELTA_NAME).exists()
        assert _answer(cx, **q) == want

    import io
    import orjson

    lines = b"".join(orjson.dumps({"type": "fact", "text": f"imported okapi fact {i}"}) + b"\n" for i in range(5))
    cx.import_jsonl(io.BytesIO(lines))
    assert snapshot.state(store) == "current"  # an import ends with a fold, which rebuilds
    assert len([h for h in _answer(cx, near="okapi") if "okapi" in h["text"]]) == 5


def test_restore_replace_and_merge_are_visible_to_the_next_find(tmp_path):
    store = tmp_path / "store"
    cx = _cx(store)
    _fill(cx, 20)
    _ready(cx)
    bundle = cx.backup(dest=tmp_path / "bundles").path
    later = cx.write("fact", "written after the backup: narwhal").uri.rsplit("/", 1)[1]
    _ready(cx)
    assert _ids(_answer(cx, near="narwhal"))[0] == later
    cx.restore(bundle, mode="replace", force=True)
    assert later not in _ids(_answer(cx, near="narwhal"))
    assert snapshot.state(store) == "current"  # the restore ends with a fold, which rebuilds
    assert _answer(cx, near="narwhal") == _from_duckdb(cx, near="narwhal")

    other = _cx(tmp_path / "other")
    other.write("fact", "a memory from the other store: pangolin", visibility="public")
    other_bundle = other.backup(dest=tmp_path / "other-bundles").path
    _ready(cx)
    cx.restore(other_bundle, mode="merge")
    hits = _answer(cx, near="pangolin")
    assert hits and hits[0]["text"] == "a memory from the other store: pangolin"


def test_backup_leaves_the_snapshot_out(tmp_path):
    cx = _cx(tmp_path / "store")
    _fill(cx, 5)
    _ready(cx)
    result = cx.backup(dest=tmp_path / "bundles")
    names = [p.name for p in Path(result.path).rglob("*")] if Path(result.path).is_dir() else []
    assert not any("snapshot" in n or n == snapshot.GEN_NAME for n in names)
    raw = Path(result.path).read_bytes() if Path(result.path).is_file() else b""
    assert snapshot.MAGIC not in raw


# -- killed writers -------------------------------------------------------------------------------------
@pytest.mark.slow
def test_sigkill_between_commit_and_clean_mark(store):
    """The writer dies right after its COMMIT, before marking the generation clean: the generation
    stays dirty, and the next find reads DuckDB and sees the write."""
    cx = _cx(store)
    _fill(cx, 20)
    _ready(cx)
    script = textwrap.dedent(f"""
        import os, signal
        from cortexctl import Cortex
        from cortexctl.store import snapshot
        snapshot.mark_clean = lambda *a: os.kill(os.getpid(), signal.SIGKILL)
        Cortex(store={str(store)!r}, actor="alice").write("fact", "the wombat survived the kill")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL
    assert snapshot.read_gen(store)[2] is False  # dirty
    assert snapshot.state(store) == "stale"
    hits = _answer(cx, near="wombat survived")
    assert hits and hits[0]["text"] == "the wombat survived the kill"
    _ready(cx)  # the next fold makes a clean generation and a current snapshot holding the write
    assert _answer(cx, near="wombat survived")[0]["text"] == "the wombat survived the kill"


@pytest.mark.slow
def test_sigkill_at_random_moments_of_writes_and_folds(store):
    """Writers (with folds) killed at varying moments: every time, find answers as DuckDB does."""
    import time

    cx = _cx(store)
    _fill(cx, 10)
    _ready(cx)
    script = textwrap.dedent(f"""
        import sys
        from cortexctl import Cortex
        cx = Cortex(store={str(store)!r}, actor="alice")
        i = int(sys.argv[1])
        while True:
            cx.write("fact", f"kill round memory {{i}} deploy key")
            if i % 3 == 0:
                cx.reindex()
            i += 1
            print(i, flush=True)
    """)
    for round_, delay in enumerate((0.05, 0.17, 0.31, 0.6)):
        proc = subprocess.Popen([sys.executable, "-c", script, str(round_ * 1000)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        assert proc.stdout.readline(), proc.stderr.read()
        time.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
        assert (store / snapshot.SNAPSHOT_NAME).exists()  # a fold replaces it whole, never removes it
        for q in ({"near": "kill round memory deploy key", "k": 20}, {"k": 20}):
            assert _answer(cx, **q) == _from_duckdb(cx, **q)


@pytest.mark.slow
def test_a_writer_killed_before_its_delta_leaves_nothing_to_trust_wrongly(store):
    """The writer dies after its COMMIT and clean mark, before writing the delta: the delta on disk
    is an earlier generation's, so find reads DuckDB (and sees the write) until the next fold."""
    cx = _cx(store)
    _fill(cx, 20)
    _ready(cx)
    cx.write("fact", "an earlier write, held by the delta")
    assert snapshot.state(store) == "current"
    script = textwrap.dedent(f"""
        import os, signal
        from cortexctl import Cortex
        from cortexctl.store import snapshot
        snapshot.write_delta = lambda *a: os.kill(os.getpid(), signal.SIGKILL)
        Cortex(store={str(store)!r}, actor="alice").write("fact", "the numbat survived the kill")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL
    assert snapshot.read_gen(store)[2] is True and snapshot.state(store) == "stale"
    hits = _answer(cx, near="numbat survived")
    assert hits and hits[0]["text"] == "the numbat survived the kill"
    cx.write("fact", "a later write")  # a writer builds no delta on a stale one
    assert snapshot.state(store) == "stale"
    assert _answer(cx, near="numbat survived") == _from_duckdb(cx, near="numbat survived")
    _ready(cx)
    assert _answer(cx, near="numbat survived")[0]["text"] == "the numbat survived the kill"


@pytest.mark.parametrize("where", ["magic", "length", "crc", "ids", "heads", "vectors", "end", "truncated"])
def test_a_damaged_delta_is_detected_and_bypassed(tmp_path, where):
    cx = _cx(tmp_path / "store")
    uris = _fill(cx, 30)
    _ready(cx)
    cx.update(uris[2], "deploy key rotation moved to the vault")
    cx.write("fact", "deploy key rotation checklist")
    want = _answer(cx, near="deploy key rotation")
    path = cx.store.path / snapshot.DELTA_NAME
    raw = path.read_bytes()
    if where == "truncated":
        path.write_bytes(raw[:-7])
    else:
        offset = {"magic": 3, "length": 9, "crc": 17, "end": len(raw) - 2}.get(where)
        _flip(path, offset if offset is not None else raw.index(b'"' + where.encode() + b'"') + 4)
    assert snapshot.state(cx.store.path) == "stale"  # bypassed: find reads DuckDB
    assert cx.store.snapshot_problem() is not None
    assert _answer(cx, near="deploy key rotation") == want
    cx.write("fact", "a later write")  # a writer builds no delta on a damaged one
    assert cx.store.snapshot_problem() is None
    cx.reindex()
    assert cx.store.snapshot_problem() is None and snapshot.state(cx.store.path) == "current"
    assert _answer(cx, near="deploy key rotation") == _from_duckdb(cx, near="deploy key rotation")


def test_a_delta_of_an_earlier_snapshot_is_bypassed(store):
    """A delta names the snapshot it completes: put back beside a rebuilt one, it is not used."""
    cx = _cx(store)
    _fill(cx, 20)
    _ready(cx)
    cx.write("fact", "the quokka census")
    old = (store / snapshot.DELTA_NAME).read_bytes()
    _ready(cx)
    assert not (store / snapshot.DELTA_NAME).exists()
    cx.write("fact", "the okapi census")
    (store / snapshot.DELTA_NAME).write_bytes(old)
    assert snapshot.state(store) == "stale"
    assert [h["text"] for h in _answer(cx, near="okapi census")][:1] == ["the okapi census"]


@pytest.mark.slow
def test_more_than_a_deltas_worth_of_changes_waits_for_the_next_fold(store, monkeypatch):
    monkeypatch.setattr(snapshot.delta, "DELTA_MAX", 3)
    cx = _cx(store)
    uris = _fill(cx, 20)
    _ready(cx)
    cx.attest("ship-it", "success", uris[:3])
    assert snapshot.state(store) == "current"
    cx.attest("ship-it", "success", uris[3:5])  # five memories since the build
    assert snapshot.state(store) == "stale" and not (store / snapshot.DELTA_NAME).exists()
    assert _answer(cx, k=5) == _from_duckdb(cx, k=5)
    _ready(cx)
    assert _answer(cx, k=5) == _from_duckdb(cx, k=5)


# -- a randomized corpus ------------------------------------------------------------------------------
memory = st.tuples(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=6),
    st.sampled_from(["fact", "event", "preference", "goal"]),
    st.lists(st.sampled_from(["a", "b", "c"]), max_size=2, unique=True),
    st.sampled_from(["alice", "bob"]),
    st.sampled_from(["private", "public", "scoped"]),
    st.integers(1, 10),
)
# (granter, sub-agent, types, tags, state): a grant given as the memories are written
grant_spec = st.tuples(
    st.sampled_from(["alice", "bob"]),
    st.sampled_from(["bob", "carol"]),
    st.sampled_from([(), ("fact",), ("event", "goal")]),
    st.sampled_from([(), ("a",), ("b", "c")]),
    st.sampled_from(["live", "expired", "revoked"]),
)


def _give(cx: Cortex, subagent: str, types, tags, state: str) -> None:
    """A grant that is live, expired or revoked at NOW (the clock every find reads)."""
    if state == "expired":
        cx.context.clock = lambda: NOW - timedelta(hours=2)
        try:
            cx.grant(subagent, types=types, tags=tags, expires="30m")
        finally:
            cx.context.clock = lambda: NOW
        return
    g = cx.grant(subagent, types=types, tags=tags, expires="1h" if state == "live" else None)
    if state == "revoked":
        cx.revoke(g.id)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    memories=st.lists(memory, min_size=1, max_size=25),
    forget=st.sets(st.integers(0, 24), max_size=4),
    queries=st.lists(st.tuples(st.lists(st.sampled_from(WORDS), min_size=0, max_size=3),
                               st.sampled_from([(), ("fact",), ("event", "goal")]),
                               st.sampled_from([(), ("a",), ("a", "b")]),
                               st.integers(1, 12), st.booleans()), min_size=1, max_size=4),
    built=st.integers(1, 25),
    updates=st.lists(st.tuples(st.integers(0, 24), st.lists(st.sampled_from(WORDS), min_size=1, max_size=3)),
                     max_size=3),
    grants=st.lists(st.tuples(st.integers(0, 25), grant_spec), max_size=4),
)
@pytest.mark.slow
def test_property_same_answers_with_and_without_the_snapshot(tmp_path_factory, memories, forget, queries, built,
                                                              updates, grants):
    # the snapshot is built after the first ``built`` memories; what follows is answered by its delta;
    # grants (live, expired and revoked; before and after the build) let bob and carol see scoped ones
    store = tmp_path_factory.mktemp("prop") / "store"
    by = {"alice": _cx(store, "alice"), "bob": _cx(store, "bob"), "carol": _cx(store, "carol")}
    uris = []
    for n, (words, type_, tags, actor, vis, imp) in enumerate(memories):
        if n == built:
            by["alice"].reindex()
        for at, (granter, subagent, g_types, g_tags, state) in grants:
            if at == n and granter != subagent:
                _give(by[granter], subagent, g_types, g_tags, state)
        uris.append(by[actor].write(type_, " ".join(words), tags=tags, visibility=vis, importance=imp).uri)
    if built >= len(memories):
        by["alice"].reindex()
    for i, words in updates:
        if i < len(uris):
            by[memories[i][3]].update(uris[i], " ".join(words))
    for i in forget:
        if i < len(uris):
            actor = memories[i][3]
            by[actor].forget(uris[i], reason="test")
    assert snapshot.state(store) == "current"
    for words, types, tags, k, tomb in queries:
        q = {"types": list(types), "tags": list(tags), "k": k, "include_tombstoned": tomb}
        if words:
            q["near"] = " ".join(words)
        for cx in by.values():
            assert _answer(cx, **q) == _from_duckdb(cx, **q)


def test_verify_is_not_confused_by_the_snapshot(store):
    """The snapshot is a cache: verify checks the store, whatever state the snapshot is in."""
    cx = _cx(store)
    _fill(cx, 10)
    _ready(cx)
    assert cx.verify().ok
    cx.write("fact", "one more")
    assert snapshot.state(store) == "current" and cx.verify().ok  # through a delta
    os.unlink(store / snapshot.DELTA_NAME)
    assert snapshot.state(store) == "stale" and cx.verify().ok
    _ready(cx)
    path = store / snapshot.SNAPSHOT_NAME
    header, start = snapshot._header_of(path)
    _flip(path, start + header["arrays"]["head_confidence"]["offset"])
    assert cx.store.snapshot_problem() is not None
    assert cx.verify().ok


@pytest.mark.slow
def test_a_builder_killed_midway_leaves_the_old_snapshot_and_its_temp_file_is_cleared(store):
    cx = _cx(store)
    _fill(cx, 10)
    _ready(cx)
    cx.write("fact", "the okapi written before the killed fold")
    script = textwrap.dedent(f"""
        import os, signal
        from cortexctl import Cortex
        from cortexctl.store import snapshot
        def die(path, *a):
            open(str(path.parent / ".cortex.snapshot.killed.tmp"), "wb").write(b"partial")
            os.kill(os.getpid(), signal.SIGKILL)
        snapshot.builder.write = die
        Cortex(store={str(store)!r}, actor="alice").reindex()
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL
    assert snapshot.state(store) == "stale"
    assert _answer(cx, near="okapi")[0]["text"] == "the okapi written before the killed fold"
    _ready(cx)
    assert not list(store.glob(".cortex.snapshot.*.tmp"))
    assert _answer(cx, near="okapi")[0]["text"] == "the okapi written before the killed fold"


def test_a_write_to_a_store_without_a_snapshot_syncs_no_generation_file_and_a_later_build_sees_it(tmp_path,
                                                                                                  monkeypatch):
    synced: list[str] = []
    real = os.fdatasync

    def counting(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real(fd)

    monkeypatch.setattr(os, "fdatasync", counting)
    store = tmp_path / "store"
    cx = _cx(store)
    cx.write("fact", "written before any snapshot: the quokka")
    assert not (store / snapshot.SNAPSHOT_NAME).exists()
    assert not [p for p in synced if p.endswith(snapshot.GEN_NAME)]
    gen = snapshot.read_gen(store)
    assert gen is not None and gen[2]  # the generation still moves on, marked clean
    _ready(cx)  # a snapshot built after the unsynced writes holds them
    assert _answer(cx, near="quokka")[0]["text"] == "written before any snapshot: the quokka"
    cx.write("fact", "written after the snapshot: the numbat")
    assert [p for p in synced if p.endswith(snapshot.GEN_NAME)]  # a snapshot to protect: synced
    assert snapshot.state(store) == "current"
    assert _answer(cx, near="numbat")[0]["text"] == "written after the snapshot: the numbat"


def test_the_snapshot_and_its_delta_record_the_journal_position_they_cover(store):
    """What a delta holds follows the journal: the build records the journal's last position, each
    delta the position it covers, and a write's journal entries name what it changed."""
    import orjson

    cx = _cx(store)
    uris = _fill(cx, 6)
    _ready(cx)
    header, _ = snapshot._header_of(store / snapshot.SNAPSHOT_NAME)
    with cx.store.reading() as tx:
        last = tx.journal_bounds()[2]
    assert header["journal_seq"] == last
    cx.attest("ship-it", "success", uris[:2])  # an attest: its payload names the memories it bumped
    body = (store / snapshot.DELTA_NAME).read_bytes()[24:]
    doc = orjson.loads(body)
    with cx.store.reading() as tx:
        now_last = tx.journal_bounds()[2]
    assert doc["journal_seq"] == now_last > last
    assert sorted(doc["ids"]) == sorted(u.rsplit("/", 1)[1] for u in uris[:2])
    assert _answer(cx, k=6) == _from_duckdb(cx, k=6)


def test_the_lexical_lane_counts_its_slices_on_the_snapshot_and_gets_the_walked_answer(store):
    """``lexical.filtered_top`` on the snapshot knows which docs pass for all of them at once and
    counts the slices of the ranking it would walk: the same (id, doc, score) list as walking them
    memory by memory, for filters that keep few of hundreds of matching docs (several slices),
    none, or all, with equal scores among them (identical texts), and with a delta beside."""
    import io
    import json
    import random

    from cortexctl.store import lexical
    from cortexctl.store.interface import Filters

    cx = _cx(store)
    r = random.Random(11)
    lines = []
    for i in range(600):
        words = " ".join(r.choices(WORDS, k=4))
        text = "walrus colony " + ("on the ice" if i % 7 == 0 else f"{words} {i}")  # every 7th the same text
        tags = ["rare"] if i % 97 == 0 else ["few"] if i % 13 == 0 else ["common"]
        lines.append(json.dumps({"type": ["fact", "event"][i % 2], "text": text, "tags": tags}))
    cx.import_jsonl(io.BytesIO("\n".join(lines).encode()))
    _ready(cx)
    for i in range(5):  # a delta beside the snapshot: some memories answered from it
        cx.write("fact", f"walrus colony written after the build {i}", tags=["rare"])
    cases = [Filters("alice", tags=("rare",)), Filters("alice", tags=("few",)), Filters("alice", tags=("none",)),
             Filters("alice"), Filters("alice", types=(1,), tags=("few",)), Filters("bob")]
    with cx.store.searching() as tx:
        assert type(tx).__name__ == "SnapshotTx" and tx.delta is not None
        for qw in ({lexical_term("walrus"): 1.0}, {lexical_term("colony"): 1.0, lexical_term("ice"): 0.5}):
            n_docs = tx.doc_count()
            docs, scores = lexical.bm25_scores(tx, qw, n_docs, None)  # none hidden
            assert len(docs) > 300
            for f in cases:
                for n in (1, 3, 10, 40):
                    walked = lexical.filtered_top(tx, docs, scores, f, n, {})
                    counted = lexical.filtered_top(tx, docs, scores, f, n, {}, tx.docs_passing)
                    assert counted == walked, (f, n)


def lexical_term(word: str) -> int:
    from cortexctl.memory.terms import text_terms

    return text_terms(word)[0]


def test_session_neighbours_from_the_snapshot_are_duckdbs_asked_once_asked_again_and_for_many_sessions(tmp_path, monkeypatch):
    """A first ask finds a few sessions' memories by a pass over the session column each; asked again
    (a resident process) or for many sessions at once, by the column sorted once: the same answers
    as DuckDB's in every case."""
    from cortexctl.store.interface import Filters
    from cortexctl.store.snapshot import query

    cx = Cortex(store=tmp_path / "s", actor="alice")
    bob = Cortex(store=tmp_path / "s", actor="bob")
    ids = []
    for i in range(60):
        who = bob if i % 7 == 3 else cx
        ids.append(who.write("fact", f"turn {i} of the walrus talk", session=f"s{i % 12}",
                             visibility="public" if i % 5 == 0 else "private").id)
    cx.forget(ids[13], reason="a test")
    cx.store.refresh_snapshot()
    monkeypatch.setattr(query, "SESSION_PASSES", 8)  # so that 12 sessions at once are many
    asks = [ids[:5], ids[20:27], ids, ids[40:]]  # 5 to 12 sessions
    with cx.store.reading() as tx:
        want = [tx.session_neighbours(a, Filters("alice"), 2) for a in asks]
    assert sum(len(w) for w in want) > 60
    for order in (asks, asks[::-1]):
        with cx.store.searching() as tx:
            parts = tx.parts
            assert all(p._sessions is None for p in parts)
            got = {tuple(a): tx.session_neighbours(a, Filters("alice"), 2) for a in order}
        assert [got[tuple(a)] for a in asks] == want
