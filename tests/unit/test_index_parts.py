"""The index split into files by visibility class (``store/vector_index.py``): a whole build gives
each class big enough its own file, a fold adds each vector to its class's, a find views only the
files holding what its viewer may see, and answers as an exact search would whatever the split."""

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
from cortexctl.index import hnsw
from cortexctl.store import vector_index as vi
from cortexctl.store.interface import Filters
from tests.conftest import assert_store_verifies, run_in_process

N = vi.EXACT_MAX + 904  # enough that an unfiltered find goes through the index
PART_MIN = 300  # a class of this many vectors gets its own file here (the store's classes: 4,104 / 500 / 300)
WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
         "quebec romeo sierra tango uniform victor whiskey xray yankee zulu").split()
QUERIES = ("note 40 alpha", "kilo lima item2000", "quebec romeo sierra", "item4990 zulu", "golf hotel 17")


def _line(i: int) -> bytes:
    words = " ".join(WORDS[(i * p) % len(WORDS)] for p in (1, 3, 7, 11))
    vis = "public" if i % 10 == 0 else "scoped" if i % 16 == 1 else "private"  # alice owns them all
    return json.dumps({"type": "fact", "text": f"note {i} {words} item{i}", "visibility": vis}).encode() + b"\n"


@pytest.fixture(autouse=True)
def small_parts(monkeypatch):
    monkeypatch.setattr(vi, "PART_MIN", PART_MIN)
    monkeypatch.setattr(vi, "EXACT_MAX", 200)  # bob's finds (500 public memories) through the index too


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    path = tmp_path_factory.mktemp("template") / "store"
    cx = Cortex(store=path, actor="alice")
    report = cx.import_jsonl(iter([_line(i) for i in range(N)]))
    assert report.imported == N
    return path


@pytest.fixture
def split(template, tmp_path, monkeypatch):
    """A copy of the store rebuilt into files by class."""
    monkeypatch.setattr(vi, "PART_MIN", PART_MIN)
    path = tmp_path / "split"
    shutil.copytree(template, path)
    Cortex(store=path, actor="alice").reindex(rebuild=True)
    return path


def _record(path) -> vi.IndexRecord:
    return vi.read_record(Cortex(store=path, actor="alice").store)


def _nearest(cx, filters: Filters, text: str, n: int = 10, *, exact: bool = False):
    q = np.frombuffer(cx.embedder.embed_bytes(text), dtype="<f4")
    with cx.store.searching() as tx:
        hits, _note = vi.nearest(tx, cx.store, cx.embedder.model, q, filters, n, exact=exact)
    return [i for i, _ in hits]


def _answers_as_exact(cx, filters: Filters) -> None:
    """Nine of the ten nearest at least as near as the exact tenth (memories of the same words tie)."""
    q_of = {text: np.frombuffer(cx.embedder.embed_bytes(text), dtype="<f4") for text in QUERIES}
    for text in QUERIES:
        got = _nearest(cx, filters, text)
        with cx.store.searching() as tx:
            exact, _note = vi.nearest(tx, cx.store, cx.embedder.model, q_of[text], filters, 50, exact=True)
        sim = dict(exact)
        assert len(exact) >= 10 and len(got) == 10, (text, got, exact[:10])
        kth = exact[9][1]
        assert sum(sim.get(i, -2.0) >= kth - 1e-6 for i in got) >= 9, (text, got, exact[:10])


def _file_keys(cx, part: vi.Part) -> set[int]:
    rec = vi.read_record(cx.store)
    keys, _rows = hnsw.slot_rows(vi.part_path(cx.store, part), vi.fingerprint_of(rec, part))
    return {int(k) for k in keys if k != hnsw.FREE_KEY}


def _class_keys(cx, cls: str) -> set[int]:
    names, keys, codes = _classes(cx)
    return {int(k) for k, c in zip(keys, codes) if names[c] == cls}


def _classes(cx):
    with cx.store.reading() as tx:
        return tx.vector_classes(cx.embedder.model)


def test_a_whole_build_gives_each_class_big_enough_its_own_file_and_the_rest_the_last(split):
    cx = Cortex(store=split, actor="alice")
    rec = _record(split)
    assert [p.classes for p in rec.parts] == [("private:alice",), ("public",), ("scoped:alice",)]
    assert [p.file for p in rec.parts][0] == vi.INDEX_NAME
    assert all((split / p.file).is_file() for p in rec.parts)
    for part in rec.parts:  # every vector in its class's file, once
        assert _file_keys(cx, part) == _class_keys(cx, part.classes[0])
    assert json.loads((split / vi.RECORD_NAME).read_text())["format"] == vi.RECORD_FORMAT
    assert cx.healthcheck()["index"]["files"] == 3
    assert_store_verifies(split)


def test_a_store_with_one_class_big_enough_keeps_one_file(template, tmp_path, monkeypatch):
    monkeypatch.setattr(vi, "PART_MIN", 1000)  # only alice's private memories reach it: the rest is one more file
    path = tmp_path / "s"
    shutil.copytree(template, path)
    Cortex(store=path, actor="alice").reindex(rebuild=True)
    assert [p.classes for p in _record(path).parts] == [("private:alice",), ("public", "scoped:alice")]
    monkeypatch.setattr(vi, "PART_MIN", 10_000)  # none does: one file of every class, recorded as before
    Cortex(store=path, actor="alice").reindex(rebuild=True)
    assert [p.classes for p in _record(path).parts] == [None]
    assert json.loads((path / vi.RECORD_NAME).read_text())["format"] == 1
    assert sorted(f.name for f in path.glob("cortex.usearch-*")) == []  # the split files removed


def test_a_find_answers_as_an_exact_search_for_every_viewer(split):
    cx = Cortex(store=split, actor="alice")
    _answers_as_exact(cx, Filters(actor="alice"))  # all three files
    _answers_as_exact(cx, Filters(actor="bob"))  # the public file alone
    _answers_as_exact(cx, Filters(actor="bob", scopes=(("alice", (), ()),)))  # public and alice's scoped
    hits = _nearest(cx, Filters(actor="bob"), "note 40 alpha", 50)
    with cx.store.reading() as tx:
        seen = {h["id"]: h["visibility"] for h in tx.heads_by_ids(hits, "alice", ("id", "visibility"))}
    assert set(seen.values()) == {"public"}


def test_files_small_enough_to_compare_whole_answer_each_of_the_exact_ten(template, tmp_path):
    """A store of one file of 5,104 memories of a few repeated words, where a walk of the graph at
    512 misses one of the ten nearest for some of these queries: each of its files is at most
    ``SCAN_MAX`` vectors, so each of the ten is as near as the exact tenth (up to f16 rounding)."""
    path = tmp_path / "s"
    shutil.copytree(template, path)
    cx = Cortex(store=path, actor="alice")
    assert len(_record(path).parts) == 1 and _record(path).parts[0].count == N <= hnsw.SCAN_MAX
    for text in QUERIES:
        q = np.frombuffer(cx.embedder.embed_bytes(text), dtype="<f4")
        got = _nearest(cx, Filters(actor="alice"), text)
        with cx.store.searching() as tx:
            exact, _note = vi.nearest(tx, cx.store, cx.embedder.model, q, Filters(actor="alice"), 50, exact=True)
        sim = dict(exact)
        assert all(sim.get(i, -2.0) >= exact[9][1] - 1e-3 for i in got), (text, got, exact[:10])


def test_a_viewer_reads_only_the_files_of_what_it_may_see(split):
    """A damaged file of alice's private memories: bob's find never opens it (no warning, the same
    answers), alice's says it and searches exactly, verify names the file."""
    cx = Cortex(store=split, actor="alice")
    before = _nearest(cx, Filters(actor="bob"), "quebec romeo sierra")
    private = vi.index_path(cx.store)
    raw = bytearray(private.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    private.write_bytes(bytes(raw))
    assert _nearest(cx, Filters(actor="bob"), "quebec romeo sierra") == before
    bob = Cortex(store=split, actor="bob")
    hits, warnings = bob.find_with_warnings(FindQuery(near="quebec romeo sierra", k=5))
    assert hits and not warnings
    problems = [str(p) for p in cx.verify().problems if "index file" in str(p)]
    assert problems and all(vi.INDEX_NAME + ":" in p for p in problems), problems
    hits, warnings = cx.find_with_warnings(FindQuery(near="quebec romeo sierra", k=5))
    assert hits and any(str(private) in w for w in warnings), warnings


def test_a_damaged_file_after_the_first_is_named(split):
    cx = Cortex(store=split, actor="alice")
    public = next(p for p in _record(split).parts if p.classes == ("public",))
    path = split / public.file
    raw = bytearray(path.read_bytes())
    raw[100] ^= 0xFF
    path.write_bytes(bytes(raw))
    problems = [str(p) for p in cx.verify().problems if "index file" in str(p)]
    assert problems and all(public.file in p for p in problems), problems
    bob = Cortex(store=split, actor="bob")
    hits, warnings = bob.find_with_warnings(FindQuery(near="quebec romeo sierra", k=5))
    assert hits and any(str(path) in w for w in warnings), warnings
    cx.reindex(rebuild=True)
    assert not path.exists() and _record(split).parts[1].file != public.file
    assert_store_verifies(split)


def test_a_fold_adds_each_vector_to_its_class_s_file_and_a_new_class_to_the_last(split):
    cx = Cortex(store=split, actor="alice")
    carol = Cortex(store=split, actor="carol")
    before = _record(split)
    new = {"public": [cx.write("fact", f"walrus public {i}", visibility="public").id for i in range(4)],
           "private:alice": [cx.write("fact", f"walrus private {i}").id for i in range(3)],
           "private:carol": [carol.write("fact", f"walrus carol {i}").id for i in range(2)]}
    gone = cx.find(FindQuery(near="note 40 alpha", k=1))[0].id
    cx.forget(gone, reason="wrong")
    cx.update(new["public"][0], text="walrus public renamed")
    assert cx.reindex()["index"]["action"] == "fold"
    after = _record(split)
    assert [p.classes for p in after.parts] == [("private:alice",), ("public",), ("private:carol", "scoped:alice")]
    assert after.parts[2].classes != before.parts[2].classes
    for part in after.parts:
        assert _file_keys(cx, part) == set().union(*(_class_keys(cx, c) for c in part.classes))
        assert not len(hnsw.unreachable(split / part.file))  # no vector cut off by a node reused
    assert sorted(f.name for f in split.glob("cortex.usearch-*")) == sorted(
        f for p in after.parts[1:] for f in (p.file, p.file + hnsw.STAMP_SUFFIX) if (split / f).exists())
    assert _nearest(carol, Filters(actor="carol"), "walrus carol 1", 2)[0] == new["private:carol"][1]
    _answers_as_exact(cx, Filters(actor="bob"))
    assert_store_verifies(split)


def test_a_memory_whose_visibility_changes_is_found_by_its_new_viewers_and_moves_file(split):
    cx = Cortex(store=split, actor="alice")
    secret = cx.write("fact", "zebra crossing near the harbour", visibility="private").id
    cx.reindex()
    private, public = _record(split).parts[0], _record(split).parts[1]
    was_public = _file_keys(cx, public)
    with cx.store.reading() as tx:
        (key, _i, _v), = [r for r in tx.vectors_of_keys(sorted(_file_keys(cx, private)), cx.embedder.model)
                          if r[1] == secret]
    assert _nearest(cx, Filters(actor="bob"), "zebra crossing near the harbour", 1) != [secret]
    cx.head(secret, visibility="public")
    assert _nearest(cx, Filters(actor="bob"), "zebra crossing near the harbour", 1) == [secret]  # the tail
    cx.reindex()
    rec = _record(split)
    assert key not in _file_keys(cx, rec.parts[0])
    assert _class_keys(cx, "public") == _file_keys(cx, rec.parts[1]) != was_public
    assert not (split / public.file).exists()
    assert _nearest(cx, Filters(actor="bob"), "zebra crossing near the harbour", 1) == [secret]
    cx.head(secret, visibility="private")
    assert _nearest(cx, Filters(actor="bob"), "zebra crossing near the harbour", 1) != [secret]
    assert _nearest(cx, Filters(actor="alice"), "zebra crossing near the harbour", 1) == [secret]
    assert_store_verifies(split)


KILLER = textwrap.dedent("""
    import os, signal, sys
    from cortexctl import Cortex
    from cortexctl.index import hnsw
    from cortexctl.store import vector_index as vi

    store, moment, how = sys.argv[1:]
    vi.PART_MIN = int(os.environ["PART_MIN"])
    vi.PART_MAX = int(os.environ.get("PART_MAX", vi.PART_MAX))
    installs = []

    def kill(*a, **k):
        os.kill(os.getpid(), signal.SIGKILL)

    real_install = hnsw.install
    if moment == "a file of the build saved":  # before the build's last vector is in
        real_save = hnsw.save_beside

        def save_beside(index, tmp):
            real_save(index, tmp)
            kill()
        hnsw.save_beside = save_beside
    elif moment == "a later file in place":
        def install(tmp, path, fp):
            real_install(tmp, path, fp)
            kill()
        hnsw.install = install
    elif moment == "its record beside":
        def install(tmp, path, fp):
            if path.name == vi.INDEX_NAME:
                kill()
            real_install(tmp, path, fp)
        hnsw.install = install
    elif moment == "the first file in place":
        def install(tmp, path, fp):
            real_install(tmp, path, fp)
            if path.name == vi.INDEX_NAME:
                kill()
        hnsw.install = install
    else:  # "the record in place": the files no longer named not yet removed
        real_remove = vi._remove_unnamed

        def remove(*a):
            installs.append(a)
            if len(installs) > 1:  # the first is the writer settling what was left before it
                kill()
            real_remove(*a)
        vi._remove_unnamed = remove
    cx = Cortex(store=store, actor="alice")
    if how == "reindex":
        cx.reindex(rebuild=True)
    elif how == "background":
        from cortexctl.store import fold
        fold.run(cx.store, cx.embedder.model)
    else:
        cx.reindex()
""")


@pytest.mark.parametrize("how", ["reindex", "fold", "background"])
@pytest.mark.parametrize("moment", ["a later file in place", "its record beside", "the first file in place",
                                    "the record in place"])
def test_a_writer_killed_while_it_puts_split_files_in_place_leaves_one_trusted_set(split, moment, how):
    """A kill at any moment of putting several files in place leaves the old files with their record
    or the new ones with theirs; the next writer removes the files no record names."""

    cx = Cortex(store=split, actor="alice")
    for i in range(3):
        cx.write("fact", f"walrus public {i}", visibility="public")
    cx.write("fact", "walrus private")
    before = _record(split)
    run = subprocess.run([sys.executable, "-c", KILLER, str(split), moment, how], capture_output=True, text=True,
                         env={**os.environ, "PART_MIN": str(PART_MIN)})
    assert run.returncode == -9, run.stderr
    cx = Cortex(store=split, actor="alice")
    after = _record(split)
    assert (after == before) == (moment in ("a later file in place", "its record beside"))
    with cx.store.reading() as tx:
        assert vi.index_state(tx, cx.store, cx.embedder.model, None)[1] == "ok"
    assert_store_verifies(split)
    _answers_as_exact(cx, Filters(actor="bob"))
    cx.write("fact", "after the kill", visibility="public")
    assert cx.reindex()["index"]["action"] == "fold"
    named = {p.file for p in _record(split).parts[1:]}
    assert {f.name for f in split.glob("cortex.usearch-*") if not f.name.endswith(hnsw.STAMP_SUFFIX)} == named
    assert not list(split.glob(".cortex.usearch*.tmp"))
    assert_store_verifies(split)


@pytest.mark.parametrize("record", [
    {"parts": [{"file": "../escape"}]},
    {"parts": [{"file": "cortex.usearch-0123456789abcdef"}]},  # the first must be cortex.usearch
    {"parts": "x"},
])
def test_a_record_naming_files_it_should_not_is_damaged_and_rebuilt(split, record):
    cx = Cortex(store=split, actor="alice")
    doc = json.loads((split / vi.RECORD_NAME).read_text())
    for field, value in record.items():
        doc[field] = [{**doc["parts"][0], **value[0]}, *doc["parts"][1:]] if isinstance(value, list) else value
    (split / vi.RECORD_NAME).write_text(json.dumps(doc))
    assert vi.read_record(cx.store) is None
    assert cx.reindex()["index"]["action"] == "rebuild"
    assert not (split.parent / "escape").exists()
    assert_store_verifies(split)


def test_an_import_builds_the_files_by_class_as_a_rebuild_would(tmp_path, monkeypatch):
    """An import into a store without an index file builds one graph a class as the rows commit, and
    puts the small classes together into the last file (their vectors read back from the store)."""
    monkeypatch.setattr(vi, "PART_MIN", 400)  # alice's 313 scoped memories and bob's 50 share the last
    path = tmp_path / "fresh"
    cx = Cortex(store=path, actor="alice")
    bob = [json.dumps({"type": "fact", "text": f"bob's own note {i} {WORDS[i % 26]}", "actor": "bob"}).encode() + b"\n"
           for i in range(50)]
    report = cx.import_jsonl(iter([_line(i) for i in range(N)] + bob), keep_actors=True, batch_size=700)
    assert report.imported == N + 50 and report.index["action"] == "rebuild"
    rec = _record(path)
    assert [p.classes for p in rec.parts] == [("private:alice",), ("public",), ("private:bob", "scoped:alice")]
    for part in rec.parts:
        assert _file_keys(cx, part) == set().union(*(_class_keys(cx, c) for c in part.classes))
    _answers_as_exact(cx, Filters(actor="alice"))
    _answers_as_exact(cx, Filters(actor="bob"))
    assert _nearest(cx, Filters(actor="bob"), "bob's own note 7 hotel", 1)
    assert_store_verifies(path)


def test_an_import_into_a_store_of_split_files_folds_each_vector_into_its_class_s(split):
    cx = Cortex(store=split, actor="alice")
    lines = [json.dumps({"type": "fact", "text": f"imported {i} {WORDS[i % 26]}", "actor": a, "visibility": v}).encode()
             + b"\n" for i, (a, v) in enumerate([("alice", "public"), ("alice", "private"), ("carol", "private")] * 10)]
    report = cx.import_jsonl(iter(lines), keep_actors=True)
    assert report.imported == 30 and report.index["action"] == "fold"
    rec = _record(split)
    assert [p.classes for p in rec.parts] == [("private:alice",), ("public",), ("private:carol", "scoped:alice")]
    for part in rec.parts:
        assert _file_keys(cx, part) == set().union(*(_class_keys(cx, c) for c in part.classes))
    _answers_as_exact(cx, Filters(actor="carol"))
    assert_store_verifies(split)


def test_vectors_stored_before_an_import_go_to_their_class_s_file(tmp_path, monkeypatch):
    """A store with a few vectors and no index file yet: the import's graphs take them too, a class
    the import did not bring joining the last file."""
    monkeypatch.setattr(vi, "PART_MIN", 400)
    path = tmp_path / "s"
    Cortex(store=path, actor="dave").write("fact", "dave's note before the import", visibility="scoped")
    cx = Cortex(store=path, actor="alice")
    assert cx.import_jsonl(iter([_line(i) for i in range(N)])).index["action"] == "rebuild"
    rec = _record(path)
    assert [p.classes for p in rec.parts] == [("private:alice",), ("public",), ("scoped:alice", "scoped:dave")]
    for part in rec.parts:
        assert _file_keys(cx, part) == set().union(*(_class_keys(cx, c) for c in part.classes))
    assert_store_verifies(path)


def test_a_viewer_sees_the_public_class_its_own_classes_and_its_granters_scoped_ones():
    sight = vi.viewer_classes(Filters(actor="bob", scopes=(("alice", (), ("ops",)),)))
    assert [c for c in ("public", "private:bob", "scoped:bob", "scoped:alice", "private:alice", "scoped:carol",
                        "public:bob", "", "scoped:alice:x") if sight.sees(c)] == [
        "public", "private:bob", "scoped:bob", "scoped:alice", "public:bob"]
    assert vi.viewer_classes(Filters(actor="a:b")).sees("private:a:b")


def test_a_background_fold_adds_each_vector_to_its_class_s_file_as_a_foreground_one(split, tmp_path):
    """``fold.run`` (the background fold: taken under the lock, built without it, installed under it
    again) leaves the same files and classes as ``reindex``'s fold of the same writes."""
    from cortexctl.store import fold

    other = tmp_path / "other"
    shutil.copytree(split, other)
    for path in (split, other):
        cx = Cortex(store=path, actor="alice")
        for i in range(3):
            cx.write("fact", f"walrus public {i}", visibility="public")
        Cortex(store=path, actor="erin").write("fact", "erin's own walrus")
        cx.forget(cx.find(FindQuery(near="note 40 alpha", k=1))[0].id, reason="wrong")
    assert fold.run(Cortex(store=split, actor="alice").store, Cortex(store=split, actor="alice").embedder.model)["index"] == "fold"
    assert Cortex(store=other, actor="alice").reindex()["index"]["action"] == "fold"
    a, b = _record(split), _record(other)
    assert [(p.classes, p.count) for p in a.parts] == [(p.classes, p.count) for p in b.parts]
    assert a.parts[2].classes == ("private:erin", "scoped:alice")
    cx = Cortex(store=split, actor="alice")
    for part in a.parts:
        assert _file_keys(cx, part) == set().union(*(_class_keys(cx, c) for c in part.classes))
    assert_store_verifies(split)


@pytest.mark.parametrize("how", ["removed", "fifo", "truncated"])
def test_a_file_after_the_first_gone_or_not_a_file_is_named_and_rebuilt(split, how):


    cx = Cortex(store=split, actor="alice")
    public = _record(split).parts[1]
    path = split / public.file
    bob = Cortex(store=split, actor="bob")
    before = [h.id for h in bob.find(FindQuery(near="quebec romeo sierra", k=5))]
    path.unlink()
    if how == "fifo":
        os.mkfifo(path)
    elif how == "truncated":
        path.write_bytes(b"usearch")
    health = cx.healthcheck()["index"]
    assert not health["consistent"] and public.file in health["state"]
    problems = [str(p) for p in cx.verify().problems if "index file" in str(p)]
    assert problems and public.file in problems[0]
    hits, _warnings = bob.find_with_warnings(FindQuery(near="quebec romeo sierra", k=5))
    assert len(set(before) & {h.id for h in hits}) >= 4
    cx.reindex()  # a file that fails its check is rebuilt, not extended
    assert not os.path.lexists(path) and cx.healthcheck()["index"]["consistent"]
    assert_store_verifies(split)


def _flip(path, at=100):
    raw = bytearray(path.read_bytes())
    raw[at] ^= 0xFF
    path.write_bytes(bytes(raw))


def test_verify_names_every_damaged_file(split):
    cx = Cortex(store=split, actor="alice")
    rec = _record(split)
    for p in rec.parts[1:]:
        _flip(split / p.file)
    problems = [str(p) for p in cx.verify().problems if "index file" in str(p)]
    assert all(any(p.file in x for x in problems) for p in rec.parts[1:]), problems


def test_a_bit_flipped_in_a_class_name_of_the_record_is_damage_not_a_find_that_skips_a_file(split):
    cx = Cortex(store=split, actor="alice")
    bob = Cortex(store=split, actor="bob")
    want = [h.id for h in bob.find(FindQuery(near="quebec romeo sierra", k=5))]
    raw = (split / vi.RECORD_NAME).read_bytes()
    at = raw.index(b'"public"') + 2
    (split / vi.RECORD_NAME).write_bytes(raw[:at] + bytes([raw[at] ^ 0x20]) + raw[at + 1:])  # "pUblic"
    assert vi.read_record(cx.store) is None
    problems = [str(p) for p in cx.verify().problems if "index" in str(p)]
    assert problems and vi.RECORD_NAME in problems[0]
    hits, _warnings = bob.find_with_warnings(FindQuery(near="quebec romeo sierra", k=5))
    assert len(set(want) & {h.id for h in hits}) >= 4
    cx.reindex()
    assert vi.read_record(cx.store) is not None
    assert_store_verifies(split)


def test_verify_names_a_file_holding_classes_its_record_does_not_list(split):
    """A record rewritten whole with its checksum (an edit, not a flipped bit) that moves a class's
    name: verify names the file that holds that class's vectors."""
    cx = Cortex(store=split, actor="alice")
    doc = json.loads((split / vi.RECORD_NAME).read_text())
    public = next(p for p in doc["parts"] if p["classes"] == ["public"])
    public["classes"] = ["publik"]
    doc["parts_crc"] = vi._parts_crc(doc["parts"])
    (split / vi.RECORD_NAME).write_text(json.dumps(doc))
    assert vi.read_record(cx.store) is not None
    problems = [str(p) for p in cx.verify().problems if "index" in str(p)]
    assert len(problems) == 1 and public["file"] in problems[0] and "public" in problems[0], problems


def test_a_lone_part_with_classes_is_not_trusted(split, monkeypatch):
    monkeypatch.setattr(vi, "PART_MIN", 10_000)
    cx = Cortex(store=split, actor="alice")
    cx.reindex(rebuild=True)
    doc = json.loads((split / vi.RECORD_NAME).read_text())
    assert doc["format"] == 1
    part = {"file": vi.INDEX_NAME, "classes": [], "count": doc["count"], "fingerprint": doc["fingerprint"],
            "crc_all": doc["crc_all"], "connectivity": doc["connectivity"]}
    doc = {k: doc[k] for k in ("model", "dim", "max_key")} | {"format": 2, "parts": [part]}
    (split / vi.RECORD_NAME).write_text(json.dumps(doc))
    monkeypatch.setattr(vi, "EXACT_MAX", 200)
    if vi.read_record(cx.store) is None:
        return  # not trusted: rebuilt by the next find or fold
    alice = Filters(actor="alice")
    got, want = _nearest(cx, alice, "note 40 alpha"), _nearest(cx, alice, "note 40 alpha", exact=True)
    problems = [str(p) for p in cx.verify().problems if "index" in str(p)]
    assert got == want or problems


FOLDER = """
import sys
from cortexctl import Cortex
from cortexctl.store import vector_index as vi
vi.PART_MIN = int(sys.argv[2])
cx = Cortex(store=sys.argv[1], actor="alice")
print(cx.reindex()["index"]["action"])
"""


def test_a_fold_between_a_find_s_check_and_its_views_is_not_damage(split, monkeypatch):
    """A find checks the files its record names (index_state), then views them: a fold that puts a
    new public file in place between the two removes the one the find checked."""
    import subprocess
    import sys

    bob = Cortex(store=split, actor="bob")
    Cortex(store=split, actor="alice").write("fact", "walrus public late", visibility="public")  # the tail
    real = vi.index_state
    fired = []

    def index_state(tx, store, model, dim, classes=None):
        got = real(tx, store, model, dim, classes)
        if classes is not None and not fired:
            fired.append(1)
            run = subprocess.run([sys.executable, "-c", FOLDER, str(split), str(PART_MIN)], capture_output=True,
                                 text=True, env={**os.environ})
            assert run.returncode == 0 and run.stdout.strip() == "fold", run
        return got

    monkeypatch.setattr(vi, "index_state", index_state)
    hits, warnings = bob.find_with_warnings(FindQuery(near="quebec romeo sierra", k=5))
    assert hits and fired and not [w for w in warnings if "damaged" in str(w)], warnings


def test_a_fold_into_split_files_streams_the_tail(split):
    """An import into a store of split files folds its vectors through grow(), batch by batch: the
    tail is never held in memory whole."""
    import tracemalloc
    import unittest.mock as um

    cx = Cortex(store=split, actor="alice")
    lines = [json.dumps({"type": "fact", "text": f"imported {i} kilo", "visibility": "public" if i % 2 else "private"}
                        ).encode() + b"\n" for i in range(6000)]
    peaks = []
    real_fold = vi._fold

    def fold(*a, **k):
        tracemalloc.start()
        try:
            return real_fold(*a, **k)
        finally:
            peaks.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()

    from cortexctl.store.duck import DuckTx

    real_iter = DuckTx.iter_vectors

    def iter_vectors(self, model, dim, *, after=0, batch=50_000):  # batches as at a million vectors
        return real_iter(self, model, dim, after=after, batch=500)

    with um.patch.object(vi, "_fold", fold), um.patch.object(DuckTx, "iter_vectors", iter_vectors):
        report = cx.import_jsonl(iter(lines))
    assert report.index["action"] == "fold"
    tail_bytes = 6000 * vi.read_record(cx.store).dim * 4
    assert peaks and peaks[0] < 0.5 * tail_bytes, (peaks, tail_bytes)


def test_an_import_of_many_small_classes_does_not_build_its_graph_twice(tmp_path, monkeypatch):
    """An import of many actors' memories, each actor's class below PART_MIN: the loader adds them
    to one shared graph as the rows commit, and take() does not add them again."""
    import unittest.mock as um

    monkeypatch.setattr(vi, "PART_MIN", 1000)
    path = tmp_path / "fresh"
    cx = Cortex(store=path, actor="alice")
    lines = [json.dumps({"type": "fact", "text": f"note {i} of agent {i % 10}", "actor": f"agent{i % 10}"}).encode()
             + b"\n" for i in range(3000)]
    added = []
    real_take, real_add = vi.IndexLoader.take, hnsw.add

    def take(self, *a, **k):
        with um.patch.object(hnsw, "add", lambda index, keys, vectors, progress=None: (
                added.append(len(keys)), real_add(index, keys, vectors, progress))):
            return real_take(self, *a, **k)

    with um.patch.object(vi.IndexLoader, "take", take):
        report = cx.import_jsonl(iter(lines), keep_actors=True)
    assert report.index["action"] == "rebuild"
    assert [p.classes for p in _record(path).parts] == [None]
    assert sum(added) < len(lines) // 2


def _mutations(doc):
    import copy
    import random

    rnd = random.Random(7)
    values = [None, True, False, 0, -1, 2**63, 2**64, 1.5, float("inf"), "", "x", "7", [], [1], {}, {"a": 1},
              "cortex.usearch", "cortex.usearch-0123456789abcdef", "../x", ["public"], [["public"]], "public"]
    paths = [("format",), ("parts",), ("cleared",), ("dim",), ("max_key",), ("model",)]
    for i, p in enumerate(doc["parts"]):
        for k in ("file", "classes", "count", "fingerprint", "crc_all", "connectivity"):
            paths.append(("parts", i, k))
        for k in p["fingerprint"]:
            paths.append(("parts", i, "fingerprint", k))
    for path in paths:
        for v in values:
            d = copy.deepcopy(doc)
            t = d
            for k in path[:-1]:
                t = t[k]
            t[path[-1]] = v
            yield path, v, d
    for _ in range(200):  # parts shuffled, duplicated, dropped
        d = copy.deepcopy(doc)
        parts = d["parts"]
        op = rnd.choice(["dup", "drop", "shuffle", "swapfp", "swapcls"])
        if op == "dup":
            parts.append(copy.deepcopy(rnd.choice(parts)))
        elif op == "drop":
            parts.pop(rnd.randrange(len(parts)))
        elif op == "shuffle":
            rnd.shuffle(parts)
        elif op == "swapfp":
            a, b = rnd.sample(range(len(parts)), 2)
            parts[a]["fingerprint"], parts[b]["fingerprint"] = parts[b]["fingerprint"], parts[a]["fingerprint"]
        else:
            a, b = rnd.sample(range(len(parts)), 2)
            parts[a]["classes"], parts[b]["classes"] = parts[b]["classes"], parts[a]["classes"]
        yield (op,), None, d


def test_hostile_records_never_raise(split):
    from cortexctl.store.interface import IndexUnusable

    cx = Cortex(store=split, actor="alice")
    model = cx.embedder.model
    good = json.loads((split / vi.RECORD_NAME).read_text())
    failures = []
    wrong = []
    want = {a: _nearest(cx, Filters(actor=a), "note 40 alpha", exact=True) for a in ("alice", "bob")}
    for path, v, doc in _mutations(good):
        (split / vi.RECORD_NAME).write_text(json.dumps(doc))
        try:
            with cx.store.reading() as tx:
                vi.index_state(tx, cx.store, model, None)
                vi.verify_index(tx, cx.store, model)
            vi.health(cx.store, model)
            for a in ("alice", "bob"):
                try:
                    got = _nearest(cx, Filters(actor=a), "note 40 alpha")
                    if len(set(got) & set(want[a])) < 9:
                        wrong.append((path, v, a))
                except IndexUnusable:
                    pass
        except Exception as exc:  # noqa: BLE001
            failures.append((path, v, type(exc).__name__, str(exc)[:100]))
    (split / vi.RECORD_NAME).write_text(json.dumps(good))
    assert not failures


@pytest.mark.parametrize("full", [False, True], ids=["room", "every file full"])
def test_the_background_fold_makes_the_files_the_foreground_one_makes(split, tmp_path, monkeypatch, full):
    from cortexctl.store import fold

    if full:  # new files: the public class's own, and a last one carol's class joins
        monkeypatch.setattr(vi, "PART_MAX", min(p.count for p in _record(split).parts))
    cx = Cortex(store=split, actor="alice")
    carol = Cortex(store=split, actor="carol")
    for i in range(3):
        cx.write("fact", f"walrus public {i}", visibility="public")
        carol.write("fact", f"walrus carol {i}")
    gone = cx.find(FindQuery(near="note 40 alpha", k=1))[0].id
    cx.forget(gone, reason="wrong")
    secret = cx.write("fact", "zebra crossing", visibility="private").id
    cx.head(secret, visibility="public")
    other = tmp_path / "other"
    shutil.copytree(split, other)
    Cortex(store=other, actor="alice").reindex()
    assert fold.run(Cortex(store=split, actor="alice").store, cx.embedder.model)["index"] == "fold"
    a, b = _record(split), _record(other)
    assert [(p.classes, p.count) for p in a.parts] == [(p.classes, p.count) for p in b.parts]
    assert a.max_key == b.max_key and (len(a.parts) > 3) == full
    for c in (cx, Cortex(store=other, actor="alice")):
        _answers_as_exact(c, Filters(actor="bob"))
        _answers_as_exact(c, Filters(actor="carol"))


def test_a_background_fold_after_the_top_vector_was_dropped_leaves_a_trusted_index(split):
    """The newest vector taken out of service with none after it (an update whose new vector the
    remote embedder did not give yet): the background fold records the old max_key, the dropped key
    is cleared, and the next vector is given that key: a key the record says the files hold."""
    from cortexctl.store import fold

    cx = Cortex(store=split, actor="alice")
    model = cx.embedder.model
    last = cx.write("fact", "walrus the last one", visibility="public").id
    cx.reindex()
    with cx.store.transaction() as tx:
        tx.drop_vectors(last)  # as update does before its new vector is embedded
    fold.run(cx.store, model)  # the background fold's steps, run here
    cx.write("fact", "a new public note after the fold", visibility="public")
    with cx.store.reading() as tx:
        state = vi.index_state(tx, cx.store, model, None)[1]
    assert state == "ok"


def test_a_part_file_s_stamp_temp_left_by_a_killed_reader_is_swept(split):
    """A reader killed while it writes the checked stamp of a file after the first leaves
    .cortex.usearch-HEX.checked.XXXX.tmp: the next writer sweeps it once it is old."""
    import time

    cx = Cortex(store=split, actor="alice")
    part = _record(split).parts[1]
    left = split / f".{part.file}{hnsw.STAMP_SUFFIX}.abcd1234.tmp"
    left.write_text("{")
    old = time.time() - 3600
    os.utime(left, (old, old))
    gone_part = split / f".cortex.usearch-0123456789abcdef{hnsw.STAMP_SUFFIX}.abcd1234.tmp"
    gone_part.write_text("{")
    os.utime(gone_part, (old, old))
    cx.write("fact", "walrus", visibility="public")
    cx.reindex()
    assert not left.exists() and not gone_part.exists()


def test_a_merge_that_makes_a_memory_public_re_keys_it_into_the_public_file(split, tmp_path):
    """``restore --mode merge`` of a bundle whose copy of a memory is ahead (a new version) and was
    made public: the merged head takes the bundle's visibility, bob finds it at once (the tail),
    and the next fold puts it in the public file."""
    cx = Cortex(store=split, actor="alice")
    secret = cx.write("fact", "okapi grazing by the river bend").id
    cx.reindex()
    bundle = cx.backup(dest=tmp_path / "b1").path
    other = Cortex(store=tmp_path / "other", actor="alice")
    other.restore(bundle, mode="replace", force=True)
    other.update(secret, text="okapi grazing by the river bend at dawn")
    other.head(secret, visibility="public")
    changed = other.backup(dest=tmp_path / "b2").path
    assert _nearest(cx, Filters(actor="bob"), "okapi grazing by the river bend", 1) != [secret]
    cx.restore(changed, mode="merge")
    with cx.store.reading() as tx:
        assert tx.heads_by_ids([secret], "alice", ("id", "visibility")) == [{"id": secret, "visibility": "public"}]
    assert _nearest(cx, Filters(actor="bob"), "okapi grazing by the river bend", 1) == [secret]
    cx.reindex()
    public = next(p for p in _record(split).parts if p.classes == ("public",))
    assert _class_keys(cx, "public") == _file_keys(cx, public)
    assert _nearest(cx, Filters(actor="bob"), "okapi grazing by the river bend", 1) == [secret]
    assert_store_verifies(split)


def test_healthcheck_says_when_a_class_outgrew_the_file_it_shares(split, monkeypatch):
    cx = Cortex(store=split, actor="alice")
    carol = Cortex(store=split, actor="carol")
    for i in range(12):
        carol.write("fact", f"carol's walrus {i}")
    cx.reindex()
    assert _record(split).parts[-1].classes == ("private:carol", "scoped:alice")
    assert cx.healthcheck()["index"]["split_on_rebuild"] is False  # carol's 12 beside alice's 313 scoped
    one_file = vi.IndexRecord("m", 4, 0, [vi.Part(vi.INDEX_NAME, None, 0, {})])
    assert vi.would_split(one_file, {"private:alice": 400, "public": 350})  # two classes of 300 in one file
    assert not vi.would_split(one_file, {"private:alice": 400, "public": 50, "scoped:alice": 60})
    monkeypatch.setattr(vi, "PART_MIN", 10)  # carol's 12 vectors now make a class of its own
    assert cx.healthcheck()["index"]["split_on_rebuild"] is True
    said = run_in_process(split, "healthcheck")
    assert "grew in it, or more than 200,000 vectors; cortexctl reindex --rebuild splits it" in said.out, said
    cx.reindex(rebuild=True)
    assert ("private:carol",) in [p.classes for p in _record(split).parts]
    assert cx.healthcheck()["index"]["split_on_rebuild"] is False
    monkeypatch.setattr(vi, "PART_MAX", 4000)  # alice's 4,104 private vectors in one file: past it
    assert cx.healthcheck()["index"]["split_on_rebuild"] is True
    cx.reindex(rebuild=True)
    assert cx.healthcheck()["index"]["split_on_rebuild"] is False


# -- files by key range: no file is given more than PART_MAX vectors ---------------------------------

def _ranges_hold_their_class(cx, parts, cls: str) -> None:
    """The files of ``cls`` hold each of its vectors once, in rising ranges of keys."""
    held = [_file_keys(cx, p) for p in parts]
    assert sum(map(len, held)) == len(set().union(*held)) and set().union(*held) == _class_keys(cx, cls)
    assert all(max(a) < min(b) for a, b in zip(held, held[1:]))


def test_a_class_past_part_max_is_built_as_files_by_key_range(template, tmp_path, monkeypatch):
    monkeypatch.setattr(vi, "PART_MAX", 1500)  # alice's 4,104 private vectors: three files of 1,368
    path = tmp_path / "s"
    shutil.copytree(template, path)
    cx = Cortex(store=path, actor="alice")
    cx.reindex(rebuild=True)
    rec = _record(path)
    assert [p.classes for p in rec.parts] == [("private:alice",)] * 3 + [("public",), ("scoped:alice",)]
    assert all(p.count <= 1500 for p in rec.parts)
    _ranges_hold_their_class(cx, rec.parts[:3], "private:alice")
    health = cx.healthcheck()["index"]
    assert health["files"] == 5 and not health["split_on_rebuild"]
    _answers_as_exact(cx, Filters(actor="alice"))
    _answers_as_exact(cx, Filters(actor="bob"))
    assert_store_verifies(path)


def test_the_small_classes_past_part_max_share_files_by_key_range_each_naming_its_own(template, tmp_path,
                                                                                      monkeypatch):
    monkeypatch.setattr(vi, "PART_MIN", 1000)  # public and alice's scoped ones share: 813 vectors
    monkeypatch.setattr(vi, "PART_MAX", 500)
    path = tmp_path / "s"
    shutil.copytree(template, path)
    cx = Cortex(store=path, actor="alice")
    cx.reindex(rebuild=True)
    rec = _record(path)
    own, rest = rec.parts[:-2], rec.parts[-2:]
    assert {p.classes for p in own} == {("private:alice",)} and len(own) == 9
    _ranges_hold_their_class(cx, own, "private:alice")
    for part in rest:  # each names the classes of the vectors it holds, no more
        held = _file_keys(cx, part)
        assert part.count <= 500 and {c for c in part.classes if held & _class_keys(cx, c)} == set(part.classes)
    assert set().union(*(_file_keys(cx, p) for p in rest)) == _class_keys(cx, "public") | _class_keys(cx, "scoped:alice")
    _answers_as_exact(cx, Filters(actor="bob"))
    _answers_as_exact(cx, Filters(actor="bob", scopes=(("alice", (), ()),)))
    assert_store_verifies(path)


def test_one_group_past_part_max_is_files_by_key_range_of_every_class(template, tmp_path, monkeypatch):
    monkeypatch.setattr(vi, "PART_MIN", 10_000)  # no class has a file of its own
    monkeypatch.setattr(vi, "PART_MAX", 3000)
    path = tmp_path / "s"
    shutil.copytree(template, path)
    cx = Cortex(store=path, actor="alice")
    cx.reindex(rebuild=True)
    rec = _record(path)
    assert len(rec.parts) == 2 and all(p.count == 2500 for p in rec.parts)
    assert all(set(p.classes) == {"private:alice", "public", "scoped:alice"} for p in rec.parts)
    assert json.loads((path / vi.RECORD_NAME).read_text())["format"] == vi.RECORD_FORMAT
    _answers_as_exact(cx, Filters(actor="bob"))
    assert_store_verifies(path)


def test_a_fold_gives_a_full_file_no_more_and_starts_another_of_its_class(split, monkeypatch):
    cx = Cortex(store=split, actor="alice")
    before = _record(split)
    private = before.parts[0]
    stat = (split / private.file).stat()
    monkeypatch.setattr(vi, "PART_MAX", private.count)  # alice's private file is full
    new = [cx.write("fact", f"walrus private {i}").id for i in range(3)]
    public = [cx.write("fact", f"walrus public {i}", visibility="public").id for i in range(2)]
    assert cx.reindex()["index"]["action"] == "fold"
    after = _record(split)
    assert [p.classes for p in after.parts] == [("private:alice",), ("public",), ("private:alice",), ("scoped:alice",)]
    assert after.parts[0] == private and (split / private.file).stat().st_mtime_ns == stat.st_mtime_ns  # not rewritten
    assert after.parts[3] == before.parts[2]
    assert len(_file_keys(cx, after.parts[2])) == 3 and after.parts[1].count == before.parts[1].count + 2
    _ranges_hold_their_class(cx, [after.parts[0], after.parts[2]], "private:alice")
    assert _nearest(cx, Filters(actor="alice"), "walrus private 2", 1) == [new[2]]
    assert _nearest(cx, Filters(actor="bob"), "walrus public 1", 1) == [public[1]]
    _answers_as_exact(cx, Filters(actor="alice"))
    assert_store_verifies(split)


def test_a_fold_that_finds_the_last_file_full_starts_a_new_last_one_new_classes_join(split, monkeypatch):
    cx = Cortex(store=split, actor="alice")
    carol = Cortex(store=split, actor="carol")
    scoped = _record(split).parts[2]
    monkeypatch.setattr(vi, "PART_MAX", scoped.count)
    cx.write("fact", "walrus scoped", visibility="scoped")
    mine = carol.write("fact", "walrus carol").id
    assert cx.reindex()["index"]["action"] == "fold"
    after = _record(split)
    assert after.parts[2] == scoped and after.parts[3].classes == ("private:carol", "scoped:alice")
    assert _nearest(carol, Filters(actor="carol"), "walrus carol", 1) == [mine]
    _answers_as_exact(cx, Filters(actor="bob", scopes=(("alice", (), ()),)))
    assert_store_verifies(split)


def test_a_fold_that_finds_the_one_file_full_adds_a_file_after_it(template, tmp_path, monkeypatch):
    monkeypatch.setattr(vi, "PART_MIN", 10_000)
    path = tmp_path / "s"
    shutil.copytree(template, path)
    cx = Cortex(store=path, actor="alice")
    cx.reindex(rebuild=True)
    one = _record(path).parts[0]
    assert one.classes is None
    monkeypatch.setattr(vi, "PART_MAX", one.count)
    new = cx.write("fact", "walrus public", visibility="public").id
    cx.write("fact", "walrus private")
    assert cx.reindex()["index"]["action"] == "fold"
    after = _record(path)
    assert after.parts[0] == one and after.parts[1].classes == ("private:alice", "public")
    assert json.loads((path / vi.RECORD_NAME).read_text())["format"] == vi.RECORD_FORMAT
    assert _nearest(cx, Filters(actor="bob"), "walrus public", 1) == [new]
    _answers_as_exact(cx, Filters(actor="alice"))
    assert cx.healthcheck()["index"]["files"] == 2
    assert_store_verifies(path)
    monkeypatch.setattr(vi, "PART_MAX", 200_000)
    cx.reindex(rebuild=True)
    assert [p.classes for p in _record(path).parts] == [None]


def test_a_build_lets_each_file_go_once_its_last_vector_is_in(template, tmp_path, monkeypatch):
    monkeypatch.setattr(vi, "PART_MAX", 1500)
    cx = Cortex(store=template, actor="alice")
    with cx.store.reading() as tx:
        classes = tx.vector_classes(cx.embedder.model)
        dim = tx.vector_stats(cx.embedder.model)[2]
        batches = [(k[s:s + 250], m[s:s + 250]) for k, m in tx.iter_vectors(cx.embedder.model, dim)
                   for s in range(0, len(k), 250)]
    out = tmp_path / "out"
    out.mkdir()
    build = vi.Build(dim, classes, out)
    private = [i for i, (c, _n) in enumerate(build.files) if c == ("private:alice",)]
    assert len(private) == 3
    for keys, mat in batches:
        build.add(keys, mat)
        assert sum(build.indexes[i] is not None for i in private) <= 1  # one graph of the class in memory
    assert all(isinstance(build.sealed[i], vi.Sealed) for i in private)
    parts, files = vi.save_parts(out, build.entries())
    assert [p.count for p in parts] == [n for _c, n in build.files]
    assert sorted(p.name for p in out.iterdir()) == sorted(tmp.name for tmp, _fp in files.values())


def test_a_rebuild_that_fails_midway_leaves_no_saved_file_behind(split, monkeypatch):
    monkeypatch.setattr(vi, "PART_MAX", 1500)
    cx = Cortex(store=split, actor="alice")
    before = _record(split)
    real = hnsw.save_beside
    saved = []

    def save_beside(index, tmp):
        saved.append(tmp)
        if len(saved) == 2:
            raise OSError(28, "No space left on device")
        return real(index, tmp)

    monkeypatch.setattr(hnsw, "save_beside", save_beside)
    with pytest.raises(OSError):
        vi.update(cx.store, cx.embedder.model, rebuild=True)
    assert not list(split.glob(".cortex.usearch*.tmp")) and _record(split) == before
    assert_store_verifies(split)


def test_a_rebuild_killed_after_saving_a_file_leaves_it_for_the_next_writer_to_sweep(split):
    cx = Cortex(store=split, actor="alice")
    before = _record(split)
    run = subprocess.run([sys.executable, "-c", KILLER, str(split), "a file of the build saved", "reindex"],
                         capture_output=True, text=True,
                         env={**os.environ, "PART_MIN": str(PART_MIN), "PART_MAX": "1500"})
    assert run.returncode == -9, run.stderr
    assert len(list(split.glob(".cortex.usearch.*.tmp"))) == 1 and _record(split) == before
    _answers_as_exact(cx, Filters(actor="alice"))
    cx.write("fact", "after the kill", visibility="public")
    assert cx.reindex()["index"]["action"] == "fold"
    assert not list(split.glob(".cortex.usearch*.tmp"))
    assert_store_verifies(split)


def test_a_background_build_makes_the_files_by_key_range_a_rebuild_makes(split, tmp_path, monkeypatch):
    from cortexctl.store import fold

    monkeypatch.setattr(vi, "PART_MAX", 1500)
    other = tmp_path / "other"
    shutil.copytree(split, other)
    Cortex(store=other, actor="alice").reindex(rebuild=True)
    cx = Cortex(store=split, actor="alice")
    (split / vi.RECORD_NAME).unlink()  # no file to trust: the fold builds them whole, without the lock
    assert fold.run(cx.store, cx.embedder.model)["index"] == "rebuild"
    a, b = _record(split), _record(other)
    assert [(p.classes, p.count) for p in a.parts] == [(p.classes, p.count) for p in b.parts]
    assert len(a.parts) == 5
    _ranges_hold_their_class(cx, a.parts[:3], "private:alice")
    _answers_as_exact(cx, Filters(actor="alice"))
    assert_store_verifies(split)


def test_an_import_saves_each_graph_as_it_fills_and_lets_it_go(tmp_path, monkeypatch):
    monkeypatch.setattr(vi, "PART_MAX", 1000)
    saved = []
    real = vi.IndexLoader._seal

    def seal(self, into):
        n = len(self.indexes[into])
        real(self, into)
        saved.append((into, n, self.work))
        assert self.indexes[into] is None  # let go

    monkeypatch.setattr(vi.IndexLoader, "_seal", seal)
    path = tmp_path / "s"
    cx = Cortex(store=path, actor="alice")
    cx.import_jsonl(iter([_line(i) for i in range(N)]), batch_size=500)
    assert saved and all(n == 1000 for _into, n, _w in saved)
    assert {into for into, _n, _w in saved} >= {"private:alice"}
    assert not saved[0][2].exists()  # the work directory is gone once the files are in place
    rec = _record(path)
    assert [p.classes for p in rec.parts if p.classes == ("private:alice",)] and len(rec.parts) >= 5
    held = [_file_keys(cx, p) for p in rec.parts]
    assert sum(map(len, held)) == N == len(set().union(*held))  # every vector once
    _ranges_hold_their_class(cx, [p for p in rec.parts if p.classes == ("private:alice",)], "private:alice")
    _answers_as_exact(cx, Filters(actor="alice"))
    _answers_as_exact(cx, Filters(actor="bob"))
    assert_store_verifies(path)


def _counts(path) -> list:
    return [(p.classes, p.count) for p in _record(path).parts]


def _as_written(i: int, vis: str | None = None, tag: str = "note") -> bytes:
    if vis is None:
        return _line(i).replace(b"note ", f"{tag} ".encode(), 1)
    words = " ".join(WORDS[(i * p) % len(WORDS)] for p in (1, 3, 7, 11))
    return json.dumps({"type": "fact", "text": f"{tag} {i} {words} item{i}", "visibility": vis}).encode() + b"\n"


@pytest.fixture
def no_fold_during_import(monkeypatch):
    """As when the background fold a commit starts has not put its files in place before the
    import's own index update: the import's loader is what the update starts from."""
    from cortexctl.store import fold

    monkeypatch.setattr(fold, "request", lambda store, model: None)


def test_an_import_whose_one_graph_filled_exactly_is_one_file_of_every_class(tmp_path, monkeypatch):
    monkeypatch.setattr(vi, "PART_MIN", 20_000)  # the shared graph alone, saved full at the end
    monkeypatch.setattr(vi, "PART_MAX", 600)
    path = tmp_path / "s"
    cx = Cortex(store=path, actor="alice")
    cx.import_jsonl(iter([_as_written(i, "private") for i in range(600)]), batch_size=200)
    assert _counts(path) == [(None, 600)]
    assert json.loads((path / vi.RECORD_NAME).read_text())["format"] == 1
    _answers_as_exact(cx, Filters(actor="alice"))
    assert_store_verifies(path)


def test_an_import_whose_last_graph_was_saved_full_makes_no_empty_file(tmp_path, monkeypatch):
    monkeypatch.setattr(vi, "PART_MAX", 1000)
    path = tmp_path / "s"
    cx = Cortex(store=path, actor="alice")
    cx.import_jsonl(iter([_as_written(i, "private") for i in range(2000)]), batch_size=500)
    assert all(n > 0 for _c, n in _counts(path)), _counts(path)
    assert_store_verifies(path)


def test_an_import_over_vectors_the_index_lacks_caps_every_file(tmp_path, monkeypatch, no_fold_during_import):
    """Vectors in the store and no trusted index (its record lost): a whole build, not the import's
    graphs filled past PART_MAX with the vectors they were not given."""
    monkeypatch.setattr(vi, "PART_MAX", 1000)
    path = tmp_path / "s"
    cx = Cortex(store=path, actor="alice")
    cx.import_jsonl(iter([_as_written(i) for i in range(3000)]))
    (path / vi.RECORD_NAME).unlink()
    cx.import_jsonl(iter([_as_written(i, tag="later") for i in range(3000, 4500)]), batch_size=500)
    assert sum(n for _c, n in _counts(path)) == 4500
    assert max(n for _c, n in _counts(path)) <= 1000, _counts(path)
    _answers_as_exact(cx, Filters(actor="alice"))
    assert_store_verifies(path)


def test_an_import_s_first_vectors_of_a_class_stay_shared_rather_than_overfill_its_graph(tmp_path, monkeypatch):
    monkeypatch.setattr(vi, "PART_MAX", 1000)
    path = tmp_path / "s"
    cx = Cortex(store=path, actor="alice")
    cx.import_jsonl(iter([_as_written(i, "private") for i in range(2150)]), batch_size=100)
    assert max(n for _c, n in _counts(path)) <= 1000, _counts(path)
    assert not cx.healthcheck()["index"]["split_on_rebuild"]  # a fresh import is not due for a split
    _answers_as_exact(cx, Filters(actor="alice"))
    assert_store_verifies(path)


def test_an_import_into_a_store_of_one_file_does_not_grow_it_past_part_max(tmp_path, monkeypatch,
                                                                           no_fold_during_import):
    monkeypatch.setattr(vi, "PART_MIN", 20_000)
    monkeypatch.setattr(vi, "PART_MAX", 5000)
    path = tmp_path / "s"
    cx = Cortex(store=path, actor="alice")
    cx.import_jsonl(iter([_as_written(i) for i in range(2500)]))
    assert [n for _c, n in _counts(path)] == [2500]
    monkeypatch.setattr(vi, "PART_MAX", 3000)
    cx.import_jsonl(iter([_as_written(i, tag="more") for i in range(2500, 5000)]), batch_size=500)
    assert max(n for _c, n in _counts(path)) <= 3000, _counts(path)
    _answers_as_exact(cx, Filters(actor="alice"))
    assert_store_verifies(path)


def test_a_fresh_import_of_many_actors_is_not_reported_due_for_a_split(tmp_path, monkeypatch):
    """The shared graph saved full holds the first vectors of classes that got graphs of their own
    later; it names them, which is no reason for a rebuild."""
    monkeypatch.setattr(vi, "PART_MAX", 1000)
    path = tmp_path / "s"
    cx = Cortex(store=path, actor="alice")
    lines = [json.dumps({"type": "fact", "text": f"imp {i} {WORDS[i % 26]} {WORDS[i * 7 % 26]}",
                         "actor": "bob" if i % 3 else "carol",
                         "visibility": "public" if i % 10 == 0 else "scoped" if i % 16 == 1 else "private"}
                        ).encode() + b"\n" for i in range(5000)]
    cx.import_jsonl(iter(lines), batch_size=500, keep_actors=True)
    assert any(len(c or ()) > 2 for c, _n in _counts(path))  # the saved shared graph names bob's and carol's private
    assert max(n for _c, n in _counts(path)) <= 1000
    assert not cx.healthcheck()["index"]["split_on_rebuild"], _counts(path)
    assert_store_verifies(path)


def test_verify_names_a_vector_in_two_files_and_one_in_none_though_the_counts_add_up(template, tmp_path,
                                                                                     monkeypatch):
    monkeypatch.setattr(vi, "PART_MAX", 1500)
    path = tmp_path / "s"
    shutil.copytree(template, path)
    cx = Cortex(store=path, actor="alice")
    cx.reindex(rebuild=True)
    assert_store_verifies(path)
    rec = _record(path)
    first, second = rec.parts[0], rec.parts[1]  # alice's private vectors, two ranges of keys
    lost, twice = min(_file_keys(cx, second)), min(_file_keys(cx, first))
    index = hnsw.open_mutable(vi.part_path(cx.store, second), vi.fingerprint_of(rec, second))
    with cx.store.reading() as tx:
        vec = tx.vectors_at_keys(np.array([twice], dtype=np.uint64), cx.embedder.model, rec.dim)
    hnsw.remove(index, [lost])
    hnsw.add(index, np.array([twice], dtype=np.uint64), vec)
    entries = list(rec.parts)
    entries[1] = (second.classes, index)
    with cx.store.exclusive():
        parts, files = vi.save_parts(path, entries)
        vi.install_parts(cx.store, vi.IndexRecord.of_parts(rec.model, rec.max_key, parts), files)
    assert sum(p.count for p in _record(path).parts) == rec.count  # the counts add up: trusted
    problems = [str(p) for p in cx.verify().problems if "index" in str(p)]
    assert any(f"key {twice}" in p and "two files" in p for p in problems), problems
    assert any(f"key {lost}" in p and "in no file" in p for p in problems), problems
    cx.reindex(rebuild=True)
    assert_store_verifies(path)


def _every_vector_once(cx, path):
    rec = _record(path)
    held = [_file_keys(cx, p) for p in rec.parts]
    assert sum(map(len, held)) == len(set().union(*held)) == rec.count


def test_writes_after_an_import_s_last_batch_do_not_fill_its_graph_past_part_max(tmp_path, monkeypatch,
                                                                                 no_fold_during_import):
    """Vectors written after the import's last batch and before its index update (keys above the
    loader's) go where a fold would put them: a new file once the import's graph is full."""
    monkeypatch.setattr(vi, "PART_MIN", 20_000)
    monkeypatch.setattr(vi, "PART_MAX", 1000)
    path = tmp_path / "s"
    cx = Cortex(store=path, actor="alice")
    from cortexctl.store import db

    real = db.DuckStorage.update_index

    def late_writes(self, model, **kw):
        if kw.get("loader") is not None:
            w = Cortex(store=path, actor="alice")
            for i in range(300):
                w.write("fact", f"late {i} written while the import was finishing")
        return real(self, model, **kw)

    monkeypatch.setattr(db.DuckStorage, "update_index", late_writes)
    cx.import_jsonl(iter([_as_written(i, "private") for i in range(900)]), batch_size=300)
    counts = _counts(path)
    assert sum(n for _c, n in counts) == 1200, counts
    assert max(n for _c, n in counts) <= 1000, counts
    _every_vector_once(cx, path)
    _answers_as_exact(cx, Filters(actor="alice"))
    assert_store_verifies(path)


def test_an_import_into_one_file_with_a_pending_tail_does_not_grow_it_past_part_max(tmp_path, monkeypatch,
                                                                               no_fold_during_import):
    """The vectors pending after the file count too: the loader does not extend the one file."""
    monkeypatch.setattr(vi, "PART_MIN", 20_000)
    monkeypatch.setattr(vi, "PART_MAX", 3000)
    path = tmp_path / "s"
    cx = Cortex(store=path, actor="alice")
    cx.import_jsonl(iter([_as_written(i) for i in range(2500)]))
    assert [n for _c, n in _counts(path)] == [2500]
    for i in range(400):  # the pending tail (FOLD_AT is 2000: no fold)
        cx.write("fact", f"tail {i} pending after the file")
    cx.import_jsonl(iter([_as_written(i, tag="more") for i in range(2500, 3000)]), batch_size=250)
    counts = _counts(path)
    assert sum(n for _c, n in counts) == 3400, counts
    assert max(n for _c, n in counts) <= 3000, counts
    _every_vector_once(cx, path)
    assert_store_verifies(path)


def test_a_class_s_first_vectors_left_shared_do_not_draw_its_later_ones_there(tmp_path, monkeypatch):
    """take() leaves alice's first vectors in the shared graph (they would overfill her own graph),
    so the shared file names her class; later folds still add her vectors to her own files (not to
    a file bob's finds search), and healthcheck says when the shared file is worth a split."""
    monkeypatch.setattr(vi, "PART_MAX", 1000)
    monkeypatch.setattr(vi, "EXACT_MAX", 50)
    from cortexctl.store import fold
    monkeypatch.setattr(fold, "mode", lambda: "inline")
    path = tmp_path / "s"
    cx = Cortex(store=path, actor="alice")
    lines = [_as_written(i, "private") for i in range(2150)]
    lines += [json.dumps({"type": "fact", "text": f"pub {i} kilo", "actor": "bob",
                          "visibility": "public" if i < 250 else "scoped"}).encode() + b"\n" for i in range(350)]
    cx.import_jsonl(iter(lines), batch_size=100, keep_actors=True)
    shared = [p for p in _record(path).parts if len(p.classes) > 1]
    assert shared and "private:alice" in shared[-1].classes  # her first vectors, left shared (by design)
    cx.import_jsonl(iter([_as_written(i, "private", tag="more") for i in range(2150, 3000)]), batch_size=100)
    rec = _record(path)
    names, keys, codes = _classes_of(cx)
    of = dict(zip(keys.tolist(), codes.tolist()))
    shared = [p for p in rec.parts if len(p.classes) > 1][-1]
    held = [names[of[k]] for k in _file_keys(cx, shared)]
    alice_in_shared, others = held.count("private:alice"), len(held) - held.count("private:alice")
    # a whole build gives alice files of her own and puts public + scoped:bob (350 >= PART_MIN) in one more
    assert not (alice_in_shared >= vi.PART_MIN and others >= vi.PART_MIN
                and not cx.healthcheck()["index"]["split_on_rebuild"]), (alice_in_shared, others, _counts(path))
    assert alice_in_shared < vi.PART_MIN, ("alice's later vectors went to the shared file", alice_in_shared, _counts(path))
    _every_vector_once(cx, path)
    assert_store_verifies(path)


def _classes_of(cx):
    with cx.store.reading() as tx:
        return tx.vector_classes(cx.embedder.model)


def test_an_import_onto_a_few_memories_without_an_index_uses_its_own_graphs(tmp_path, monkeypatch):
    """Three memories written before (no index file yet: fewer than FOLD_AT): they join the import's
    graphs, which are not thrown away for a whole build."""
    monkeypatch.setattr(vi, "PART_MAX", 1000)
    path = tmp_path / "s"
    cx = Cortex(store=path, actor="alice")
    for i in range(3):
        cx.write("fact", f"hand written {i}")
    assert vi.read_record(cx.store) is None

    def no_build(*a, **k):
        raise AssertionError("a whole build")

    monkeypatch.setattr(vi, "Build", no_build)
    cx.import_jsonl(iter([_as_written(i) for i in range(1500)]), batch_size=500)
    assert sum(n for _c, n in _counts(path)) == 1503 and max(n for _c, n in _counts(path)) <= 1000
    _every_vector_once(cx, path)
    _answers_as_exact(cx, Filters(actor="alice"))
    assert_store_verifies(path)


@pytest.mark.parametrize("changed", [False, True])
def test_an_import_s_graphs_are_taken_only_while_every_vector_they_hold_is_still_stored(tmp_path, monkeypatch,
                                                                                       no_fold_during_import, changed):
    """take() reads the stored rows of the keys it was given a span at a time (``CHECK_SPAN``): a
    vector changed since (here near the import's last key, in its last span) leaves the graphs
    untaken, and the index update does what it would do without them."""
    from cortexctl.store import db

    monkeypatch.setattr(vi.IndexLoader, "CHECK_SPAN", 7)
    taken: list = []
    real_take = vi.IndexLoader.take

    def take(self, *a, **kw):
        got = real_take(self, *a, **kw)
        taken.append(got is not None)
        return got

    monkeypatch.setattr(vi.IndexLoader, "take", take)
    real_update = db.DuckStorage.update_index

    def update(self, model, **kw):
        if changed and kw.get("loader") is not None:  # another writer's change, between the rows and the update
            with self.write() as con:
                con.execute("UPDATE vectors SET version = version + 1 WHERE key = (SELECT max(key) - 2 FROM vectors)")
        return real_update(self, model, **kw)

    monkeypatch.setattr(db.DuckStorage, "update_index", update)
    cx = Cortex(store=tmp_path / "s", actor="alice")
    cx.import_jsonl(iter([_as_written(i) for i in range(300)]), batch_size=50)
    assert taken == [not changed]
