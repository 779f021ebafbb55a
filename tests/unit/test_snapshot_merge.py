"""The snapshot made from the previous snapshot plus its delta (``store/snapshot/merge.py``) holds what
a full build from DuckDB holds (``builder.collect``): the same rows, postings in the same order,
vector keys and dropped keys, the codes read through their tables; it checks itself against the
delta's vector counts, and find answers from a snapshot written from it as from DuckDB."""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cortexctl import Cortex
from cortexctl.engine.results import FindQuery
from cortexctl.memory import codec
from cortexctl.store import snapshot
from cortexctl.store.snapshot.format import WIDE, _schema_version, db_identity, stored_dtype
from cortexctl.store.snapshot.merge import merge

NOW = datetime(2026, 11, 23, 12, 0, 0, 123456)
WORDS = ("deploy key rotation friday latency budget payments owner oncall bastion credentials "
         "database lock merge approvals coverage roadmap").split()

# code column -> its header table (-1 in sessions: none)
CODED = {"head_actor_code": "actors", "head_visibility_code": "visibilities", "head_session_code": "sessions",
         "tag_codes": "tags", "vector_model_code": "models", "dropped_model_code": "models"}
TABLES = ("actors", "visibilities", "sessions", "tags", "models")


def _cx(store: Path, actor: str = "alice") -> Cortex:
    cx = Cortex(store=store, actor=actor)
    cx.context.clock = lambda: NOW
    return cx


def _id(result) -> str:
    return result.uri.rsplit("/", 1)[1]


def _fill(cx: Cortex, n: int = 20) -> list[str]:
    import random

    r = random.Random(7)
    return [_id(cx.write(["fact", "event", "preference"][i % 3], " ".join(r.choices(WORDS, k=5)) + f" number {i}",
                         tags=[f"t{i % 3}"], importance=1 + i % 9, session="s-base" if i % 4 == 0 else None,
                         visibility="public" if i % 5 == 0 else "private"))
            for i in range(n)]


def _built(tmp_path: Path, n: int = 20) -> tuple[Path, Cortex, list[str]]:
    """A store of ``n`` memories with its snapshot built (what later writes go to the delta of)."""
    store = tmp_path / "store"
    cx = _cx(store)
    ids = _fill(cx, n)
    cx.reindex()
    return store, cx, ids


def _merged(store: Path, cleared=None):
    """``merge`` of the store's current snapshot and delta (which must exist)."""
    pair = snapshot.open_current(store)
    assert pair is not None and pair[1] is not None, "the writes reached the delta"
    base, doc = pair
    try:
        return merge(base, doc, cleared=cleared)
    finally:
        base.close()


def _full(cx: Cortex):
    with cx.store.read() as con:
        return snapshot.collect(con)


def _decoded(arrays: dict, extras: dict, name: str) -> list:
    table = extras[CODED[name]]
    return [None if c < 0 else table[c] for c in arrays[name].tolist()]


def assert_same(merged, full) -> None:
    """Equal to a full build: every array exactly (values, order, and type: an array the file stores
    narrow, ``WIDE``, of the same kind, which a full build reads as narrow as its values allow), the
    coded ones through their tables; the header extras equal but for the code tables, which may keep
    values no row uses."""
    assert merged is not None
    (a, x), (fa, fx) = merged, full
    assert list(a) == list(fa)
    for name in fa:
        if name in WIDE:
            assert a[name].dtype.kind == fa[name].dtype.kind, name
            assert stored_dtype(name, a[name]) == stored_dtype(name, fa[name]), name
        else:
            assert a[name].dtype == fa[name].dtype, name
        if name in CODED:
            assert _decoded(a, x, name) == _decoded(fa, fx, name), name
        else:
            assert np.array_equal(a[name], fa[name]), name
    assert list(x) == list(fx)
    for key in fx:
        if key in TABLES:
            assert set(fx[key]) <= set(x[key]) and x[key][:len(set(x[key]))] == x[key], key
        else:
            assert x[key] == fx[key], key


def test_every_kind_of_write_merged_equals_a_full_build(tmp_path):
    store, cx, ids = _built(tmp_path)
    bob = _cx(store, "bob")

    new = _id(cx.write("fact", "xylophone tuning schedule", tags=["fresh-tag"], session="s-new"))
    cx.update(ids[1], "marimba tuning schedule rotated")  # a new vector, the old key dropped
    cx.update(ids[2], "latency budget for payments", supersede=True)  # a new memory superseding it
    later = _id(cx.write("fact", "deploy key rotation, second try"))
    cx.supersede(ids[4], by=later)  # valid_to set, links both ways
    cx.forget(ids[5], reason="wrong")
    cx.forget(new, reason="wrong after all")
    cx.unforget(new)
    cx.attest("ship-it", "success", [ids[6], ids[7]])
    cx.tag(ids[8], add=["rare-tag"], remove=["t2"])
    cx.head(ids[9], importance=10, visibility="scoped")
    timed = _id(cx.write("event", "the okapi census", sets=["valid_from=2026-01-01", "valid_to=2026-06-01"]))
    cx.update(timed, "the okapi census, counted", sets=["valid_from=2025-01-01"])
    _id(bob.write("fact", "bob's own note on the bastion", visibility="public", session="s-bob"))
    g = cx.grant("carol", types=["fact"], tags=["t1"], expires="1h")
    cx.grant("dave", types=["event"])
    cx.revoke(g.id)
    cx.write("fact", "... !!! ---")  # a memory with no terms: a doc of length 0, no postings

    assert_same(_merged(store), _full(cx))


def test_a_supersede_ending_a_valid_time_and_a_time_cleared_by_a_later_version(tmp_path):
    store = tmp_path / "store"
    cx = _cx(store)
    ids = _fill(cx, 6)
    first = _id(cx.write("fact", "an interval", sets=["valid_from=2026-01-01", "valid_to=2026-02-01"]))
    cx.reindex()
    x = _full(cx)[1]
    assert x["valid_set"] == {"head_valid_from_us": 1, "head_valid_to_us": 1}
    cx.update(first, "an interval, open again", sets=["valid_to=2026-03-01"])
    later = _id(cx.write("fact", "the one after"))
    cx.supersede(ids[0], by=later)
    assert_same(_merged(store), _full(cx))


def test_cleared_keys_leave_the_dropped_arrays_and_counts(tmp_path):
    store, cx, ids = _built(tmp_path, 8)
    cx.update(ids[0], "rotated once")
    cx.update(ids[1], "rotated twice")
    (a, x) = _merged(store)
    model = x["models"][0]
    dropped = a["dropped_key"][a["dropped_model_code"] == 0].tolist()
    assert len(dropped) >= 2
    (c, cx_) = _merged(store, cleared={model: dropped[:1]})
    assert c["dropped_key"].tolist() == [k for k in a["dropped_key"].tolist() if k != dropped[0]]
    assert cx_["vector_counts"][model][2] == x["vector_counts"][model][2] - 1
    assert cx_["vector_counts"][model][:2] == x["vector_counts"][model][:2]
    # a cleared key the store never dropped: the merge refuses itself
    assert _merged(store, cleared={model: [int(a["vector_key"][0])]}) is None


def test_a_delta_whose_counts_disagree_gives_none(tmp_path):
    store, cx, ids = _built(tmp_path, 8)
    cx.update(ids[0], "rotated")
    base, doc = snapshot.open_current(store)
    try:
        model = next(iter(doc["vector_counts"]))
        for i in range(4):
            bad = {**doc, "vector_counts": {model: [v + (1 if j == i else 0)
                                                    for j, v in enumerate(doc["vector_counts"][model])]}}
            assert merge(base, bad) is None
        assert merge(base, {**doc, "vector_counts": {**doc["vector_counts"], "other/3": [1, 99, 0, 0]}}) is None
        assert merge(base, doc) is not None
    finally:
        base.close()


def test_a_damaged_base_gives_none(tmp_path):
    from tests import tamper

    store, cx, ids = _built(tmp_path, 8)
    cx.update(ids[0], "rotated")
    header, start = snapshot._header_of(store / snapshot.SNAPSHOT_NAME)
    tamper.flip_bytes(store / snapshot.SNAPSHOT_NAME, start + header["arrays"]["head_id"]["offset"])
    assert _merged(store) is None


def test_an_empty_delta_gives_the_base_back(tmp_path):
    store, cx, _ = _built(tmp_path, 8)
    full = _full(cx)
    cx.grant("carol", types=["fact"])  # a write that changes no memory: a delta with no ids
    base, doc = snapshot.open_current(store)
    try:
        assert doc is not None and doc["ids"] == []
        a, x = merge(base, doc)
        assert {k: base.whole(k).tolist() for k in base.header["arrays"]} == {k: v.tolist() for k, v in a.items()}
        assert x == {**full[1], "grants": x["grants"], "journal_seq": doc["journal_seq"]}
        assert len(x["grants"]) == 1
    finally:
        base.close()


def _fold_by_merge(store: Path) -> None:
    """Replace the store's snapshot with one written from ``merge``'s arrays, stamped as its delta is
    (so current), and remove the delta: a fold that reads no DuckDB."""
    import os

    base, doc = snapshot.open_current(store)
    try:
        arrays, extras = merge(base, doc)
        stamp = {"token": doc["token"], "counter": doc["counter"], "schema_version": _schema_version(),
                 "db": db_identity(store)}
        snapshot.write(store.parent / "merged.snapshot", arrays, extras, stamp)
    finally:
        base.close()
    os.replace(store.parent / "merged.snapshot", store / snapshot.SNAPSHOT_NAME)
    os.unlink(store / snapshot.DELTA_NAME)
    assert snapshot.state(store) == "current"


def _answers_as_duckdb(cx: Cortex, queries: list[dict]) -> None:
    import os

    store = cx.store.path
    for q in queries:
        got = _answer(cx, **q)
        aside = store.parent / "aside"
        os.rename(store / snapshot.SNAPSHOT_NAME, aside)
        try:
            want = _answer(cx, **q)
        finally:
            os.rename(aside, store / snapshot.SNAPSHOT_NAME)
        assert got == want, q
        assert snapshot.state(store) == "current"


FIND_QUERIES = [{"near": "deploy key rotation"}, {"near": "bastion credentials", "k": 3}, {"tags": ["rare-tag"]},
                {"near": "payments", "include_tombstoned": True}, {}, {"near": "latency", "types": ["event"]},
                {"near": "okapi census", "tags": ["t2"]}]


def test_find_from_a_snapshot_written_from_merged_arrays_answers_as_duckdb(tmp_path):
    store, cx, ids = _built(tmp_path, 24)
    cx.update(ids[3], "bastion credentials rotated on friday")
    cx.write("fact", "deploy key rotation for the walrus colony", tags=["t1"], visibility="public")
    cx.forget(ids[4], reason="wrong")
    cx.attest("ship-it", "success", [ids[5]])
    cx.tag(ids[6], add=["rare-tag"])
    _fold_by_merge(store)
    _answers_as_duckdb(cx, FIND_QUERIES)

    # the merged snapshot is a base like any other: writes make its delta, find reads both, and the
    # next merge (on a snapshot whose code tables were appended to) still equals a full build
    cx.write("event", "the okapi census on friday", tags=["t2", "newer-tag"], session="s-later")
    cx.update(ids[3], "bastion credentials rotated again")
    cx.tag(ids[6], remove=["rare-tag"])
    _cx(store, "bob").write("fact", "bob's deploy key rotation notes", visibility="public")
    _answers_as_duckdb(cx, FIND_QUERIES)
    assert_same(_merged(store), _full(cx))
    _fold_by_merge(store)
    _answers_as_duckdb(cx, FIND_QUERIES)


def test_the_salience_groups_are_written_anew_with_every_file_and_find_answers_as_duckdb(tmp_path, monkeypatch):
    """A written file keeps the salience lane's groups (``format.salient_groups``) of its own heads:
    the full build's, then a merge's (the base's groups are not carried over, its heads changed), and
    find through them answers as DuckDB."""
    from cortexctl.store.snapshot import format

    monkeypatch.setattr(format, "SALIENT_FROM", 1)  # groups for a small store
    monkeypatch.setattr(format, "SALIENT_GROUP_MIN", 1)
    store, cx, ids = _built(tmp_path, 30)
    salience_queries = [{}, {"k": 3}, {"types": ["event"]}, {"include_tombstoned": True}, {"near": "deploy key"}]

    def groups_as_written():
        base, _doc = snapshot.open_current(store)
        try:
            return [base.whole(name).astype(np.int64).tolist() for name in format.SALIENT]
        finally:
            base.close()

    want = format.salient_groups(_full(cx)[0])
    assert groups_as_written() == [a.tolist() for a in want]
    _answers_as_duckdb(cx, salience_queries)
    cx.head(ids[2], importance=10)
    cx.forget(ids[7], reason="wrong")
    cx.attest("ship-it", "success", [ids[9], ids[11]])
    _answers_as_duckdb(cx, salience_queries)
    _fold_by_merge(store)
    want = format.salient_groups(_full(cx)[0])
    assert groups_as_written() == [a.tolist() for a in want]
    _answers_as_duckdb(cx, salience_queries)


def _answer(cx: Cortex, **q) -> list[dict]:
    hits, _ = cx.find_with_warnings(FindQuery(**q))
    return [h.to_json() for h in hits]


# one write of a random sequence: (kind, which memory, words, tag, actor)
step = st.tuples(st.sampled_from(["write", "update", "supersede", "forget", "unforget", "attest", "tag", "head",
                                  "valid", "grant"]),
                 st.integers(0, 30), st.lists(st.sampled_from(WORDS), min_size=0, max_size=4),
                 st.sampled_from(["a", "b", "t0", "new"]), st.sampled_from(["alice", "bob"]))


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(before=st.integers(1, 8), steps=st.lists(step, min_size=1, max_size=30))
@pytest.mark.slow
def test_property_merge_equals_a_full_build_after_random_writes(tmp_path_factory, before, steps):
    from cortexctl.errors import CortexError

    store = tmp_path_factory.mktemp("merge") / "store"
    by = {"alice": _cx(store, "alice"), "bob": _cx(store, "bob")}
    mine: dict[str, list[str]] = {"alice": [], "bob": []}
    for i in range(before):
        actor = "alice" if i % 2 else "bob"
        mine[actor].append(_id(by[actor].write("fact", f"{WORDS[i]} {WORDS[-i]} seed {i}", tags=["a"])))
    by["alice"].reindex()
    for kind, which, words, tag, actor in steps:
        cx, own = by[actor], mine[actor]
        text = " ".join(words)
        ref = own[which % len(own)] if own else None
        try:
            if kind == "write" or ref is None:
                own.append(_id(cx.write("event" if which % 2 else "fact", text, tags=[tag],
                                        session=f"s{which % 3}" if which % 2 else None)))
            elif kind == "update":
                cx.update(ref, text or "emptied")
            elif kind == "supersede":
                own.append(_id(cx.update(ref, text or "superseded", supersede=True)))
            elif kind == "forget":
                cx.forget(ref, reason="test")
            elif kind == "unforget":
                cx.unforget(ref)
            elif kind == "attest":
                cx.attest("ship-it", "success" if which % 2 else "failure", [own[j % len(own)] for j in (which, which + 1)])
            elif kind == "tag":
                cx.tag(ref, add=[tag], remove=["a"])
            elif kind == "head":
                cx.head(ref, importance=1 + which % 10, visibility=("private", "public", "scoped")[which % 3])
            elif kind == "valid":
                cx.update(ref, text or "timed", sets=[f"valid_from=2026-0{1 + which % 5}-01"])
            else:
                cx.grant("carol", types=["fact"], tags=[tag])
        except CortexError:
            pass  # refused (a forgotten memory updated, ...): nothing written
    pair = snapshot.open_current(store)
    assert pair is not None
    base, doc = pair
    try:
        if doc is None:  # nothing reached the delta
            return
        got = merge(base, doc)
    finally:
        base.close()
    assert_same(got, _full(by["alice"]))


def test_arrays_stored_narrow_widen_when_a_merge_puts_in_values_past_their_type(tmp_path):
    """Doc numbers, vector keys and offsets are stored in the narrowest type that holds a file's
    values (one byte each for a store of 250 memories): the writes after it carry numbers past 255,
    and the merged snapshot holds them whole (stored two bytes wide) and answers as DuckDB."""
    from cortexctl.store.snapshot.format import _header_of

    store, cx, ids = _built(tmp_path, 250)
    stored = _header_of(store / snapshot.SNAPSHOT_NAME)[0]["arrays"]
    assert stored["doc_number"]["dtype"] == "|u1" and stored["vector_key"]["dtype"] == "|u1"
    for i in range(12):
        cx.write("fact", f"deploy key rotation past the byte number {i}", tags=["t1"], visibility="public")
    cx.update(ids[3], "bastion credentials rotated on friday")
    assert_same(_merged(store), _full(cx))
    _fold_by_merge(store)
    stored = _header_of(store / snapshot.SNAPSHOT_NAME)[0]["arrays"]
    assert stored["doc_number"]["dtype"] == "<u2" and stored["vector_key"]["dtype"] == "<u2"
    _answers_as_duckdb(cx, FIND_QUERIES + [{"near": "past the byte number 11"}])
    snap, _ = snapshot.open_current(store)
    try:
        assert snap.take("doc_number", np.array([0])).dtype == np.uint64
        assert int(snap.whole("doc_number").max()) > 255
    finally:
        snap.close()


def test_narrowed_and_seek_keep_every_value_and_order():
    from cortexctl.store.snapshot.format import narrowed, seek

    a = np.array([0, 3, 200, 255], dtype=np.uint64)
    assert narrowed("doc_number", a).dtype == np.uint8 and narrowed("doc_number", a).tolist() == a.tolist()
    assert narrowed("doc_number", a + 1).dtype == np.uint16
    assert narrowed("doc_head_row", np.array([-1, 127], dtype=np.int64)).dtype == np.int8
    assert narrowed("doc_head_row", np.array([-1, 128], dtype=np.int64)).dtype == np.int16
    assert narrowed("head_confidence", np.array([0.5])).dtype == np.float64  # not one stored narrow
    big = np.array([1, 2**40], dtype=np.uint64)
    assert narrowed("vector_key", big).dtype == np.uint64
    small = narrowed("doc_number", a)
    want = np.array([0, 2, 3, 254, 255, 256, 2**40], dtype=np.uint64)
    for side in ("left", "right"):
        assert seek(small, want, side).tolist() == np.searchsorted(a, want, side).tolist()
    rows = narrowed("doc_head_row", np.array([-5, 0, 7], dtype=np.int64))
    want = np.array([-10, -5, 7, 300], dtype=np.int64)
    assert seek(rows, want).tolist() == np.searchsorted(np.array([-5, 0, 7]), want).tolist()


def test_entry_ids_are_stored_only_where_an_entry_names_no_head(tmp_path):
    """A doc's and a vector's memory ID is its head row's: the file leaves the ID arrays empty and
    reads them through the rows, the same IDs a full build holds. A doc whose memory has no head
    (a store damaged that way) keeps them stored, and find still answers as DuckDB."""
    from cortexctl.store.snapshot.format import _header_of

    store, cx, ids = _built(tmp_path, 12)
    full, _ = _full(cx)
    stored = _header_of(store / snapshot.SNAPSHOT_NAME)[0]["arrays"]
    assert stored["doc_id"]["shape"] == [0] and stored["vector_id"]["shape"] == [0]
    snap, _ = snapshot.open_current(store)
    try:
        for name in ("doc_id", "vector_id"):
            assert len(full[name]) == 12 and snap.whole(name).tolist() == full[name].tolist()
            assert snap.take(name, np.array([3, 0])).tolist() == full[name][[3, 0]].tolist()
            assert snap.span(name, 2, 5).tolist() == full[name][2:5].tolist()
    finally:
        snap.close()
    with cx.store.write() as con:
        con.execute("INSERT INTO lex_docs VALUES (9999, '01ZZZZZZZZZZZZZZZZZZZZZZZZ', 3)")
    cx.reindex()
    stored = _header_of(store / snapshot.SNAPSHOT_NAME)[0]["arrays"]
    assert stored["doc_id"]["shape"] == [13] and stored["vector_id"]["shape"] == [0]
    _answers_as_duckdb(cx, FIND_QUERIES)


def test_an_array_of_one_value_is_held_by_the_header_until_a_merge_gives_it_another(tmp_path):
    """No memory with a valid time, no use counted: those arrays are one value throughout, and the
    header holds it instead of the file (and the recency, every memory's change time, is read
    through the change times). A supersede (a valid time ends) and an attest (use counted) merged
    in give the arrays their values again, stored whole, and find answers as DuckDB."""
    from cortexctl.store.snapshot.builder import NO_TIME
    from cortexctl.store.snapshot.format import _header_of

    store, cx, ids = _built(tmp_path, 20)
    stored = _header_of(store / snapshot.SNAPSHOT_NAME)[0]["arrays"]
    for name, value in (("head_valid_to_us", NO_TIME), ("head_access_count", 0), ("head_forgotten", False)):
        assert stored[name]["fill"] == value and stored[name]["nbytes"] == 0
    assert "fill" not in stored["head_importance"]
    assert stored["head_recent_s"]["shape"] == [0]  # no memory used since its change: the change time
    snap, _ = snapshot.open_current(store)
    try:
        assert snap.whole("head_valid_to_us").tolist() == [NO_TIME] * 20
        assert snap.whole("head_recent_s").tolist() == (snap.whole("head_updated_us") / 1e6).tolist()
        assert snap.take("head_recent_s", np.array([2])).tolist() == [full_recent := _full(cx)[0]["head_recent_s"][2]]
        assert snap.span("head_recent_s", 0, 20).tolist() == _full(cx)[0]["head_recent_s"].tolist() != []
        assert full_recent > 0
        assert snap.take("head_access_count", np.array([4, 1])).dtype == np.uint64
        assert snap.span("head_forgotten", 3, 6).tolist() == [False] * 3
    finally:
        snap.close()
    cx.write("fact", "the deploy key rotation replaces the old note", supersedes=ids[2])
    cx.context.clock = lambda: NOW + timedelta(hours=1)  # used an hour after its change
    cx.attest("ship-it", "success", [ids[5]])
    cx.forget(ids[7], reason="wrong")
    assert_same(_merged(store), _full(cx))
    _fold_by_merge(store)
    stored = _header_of(store / snapshot.SNAPSHOT_NAME)[0]["arrays"]
    for name in ("head_valid_to_us", "head_access_count", "head_forgotten"):
        assert "fill" not in stored[name] and stored[name]["nbytes"] > 0
    assert stored["head_recent_s"]["shape"] == [20 + 1]  # one memory used since: stored whole
    _answers_as_duckdb(cx, FIND_QUERIES)


def test_a_version_whose_data_does_not_render_does_not_fail_the_build(tmp_path):
    """The build renders every current version to compare its forms; data the templates cannot render
    (here a confidence too big for a float: OverflowError) must keep its forms, not fail reindex (the
    build before format 6 never read the data)."""
    store = tmp_path / "store"
    cx = _cx(store)
    i = _id(cx.write("fact", "the payments owner is bob"))
    cx.write("fact", "the deploy key rotates monthly")
    with cx.store.read() as con:
        data = codec.decode(bytes(con.execute("SELECT data FROM versions WHERE id = ?", [i]).fetchone()[0]))
    data["confidence"] = 10 ** 400
    with cx.store.write() as con:
        con.execute("UPDATE versions SET data = ? WHERE id = ?", [codec.encode(data), i])
    snapshot.remove(store)
    cx.reindex()
    assert snapshot.state(store) == "current"
    _answers_as_duckdb(cx, [{"near": "payments owner"}, {}])


def test_the_delta_find_holds_in_memory_keeps_its_rows_as_stored(tmp_path):
    """A delta's arrays are made by every cold find (up to DELTA_MAX memories) and never written: its
    result rows keep both forms and its data is held as stored (not rendered to compare, nor deflated:
    tens of ms at 2,000 memories), and find answers from it as from DuckDB."""
    import base64

    from cortexctl.store.snapshot.delta import _MemSnap

    store, cx, ids = _built(tmp_path, 12)
    cx.write("fact", "deploy key rotation with its own forms", forms={"short": "own short", "medium": "own medium"})
    cx.update(ids[3], "bastion credentials rotated on friday", forms={"medium": "rotated by hand"})
    cx.write("event", "payments latency budget reviewed")
    snap, doc = snapshot.open_current(store)
    snap.close()
    assert doc is not None and len(doc["ids"]) == 3
    held = _MemSnap(doc)
    raw = {i: base64.b64decode(d) for i, _t, d in doc["data"]}
    ids_held = [i.decode() for i in held.whole("head_id").tolist()]
    starts = held.whole("data_start").tolist()
    assert [held.whole("data_blob")[starts[k]:starts[k + 1]].tobytes() for k in range(len(ids_held))] \
        == [raw[i] for i in ids_held]
    rows = held.whole("result_start").tolist()
    assert all(rows[k + 1] > rows[k] for k in range(len(ids_held)))  # every row holds its forms
    _answers_as_duckdb(cx, FIND_QUERIES + [{"near": "deploy key rotation", "form": "medium"},
                                           {"near": "bastion credentials", "form": "medium"}])


def test_a_header_fill_its_type_cannot_hold_sends_find_to_duckdb(tmp_path):
    """A header whose CRC holds but whose ``fill`` is outside its array's type (a writer's bug, or a
    header rewritten with its CRC): find falls back to DuckDB rather than failing with OverflowError."""
    import json
    import zlib

    from cortexctl.engine.results import FindQuery

    store, cx, ids = _built(tmp_path, 12)
    path = store / snapshot.SNAPSHOT_NAME
    raw = path.read_bytes()
    hlen = int.from_bytes(raw[8:16], "little")
    body = raw[24:24 + hlen]
    header = json.loads(body)
    spec = header["arrays"]["vector_model_code"]
    assert spec["fill"] == 0 and spec["dtype"] == "|i1"
    old = json.dumps(spec, separators=(",", ":")).encode()
    new = body.replace(old, json.dumps({**spec, "fill": 300}, separators=(",", ":")).encode(), 1)
    assert -(-(24 + len(new)) // 64) == -(-(24 + hlen) // 64)  # the data starts where it did
    path.write_bytes(raw[:8] + len(new).to_bytes(8, "little") + zlib.crc32(new).to_bytes(8, "little") + new
                     + raw[24 + len(new):])
    assert snapshot.state(store) == "current"
    got = [h.to_json() for h in cx.find(FindQuery(near="deploy key rotation"))]
    os.rename(path, tmp_path / "aside")
    try:
        want = [h.to_json() for h in cx.find(FindQuery(near="deploy key rotation"))]
    finally:
        os.rename(tmp_path / "aside", path)
    assert got == want
