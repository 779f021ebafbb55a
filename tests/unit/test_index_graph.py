"""The HNSW graph is built for the size of the store it indexes (``hnsw.build_settings``): denser
past ``hnsw.DENSE_AT`` vectors. Rebuilds and imports pick the setting; a fold keeps the file's
graph, and healthcheck says when ``reindex --rebuild`` would make it denser. The threshold is
lowered here so that a few hundred memories stand for a million."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cortexctl import Cortex
from cortexctl.index import hnsw
from cortexctl.store import vector_index as semantic
from cortexctl.store.interface import Filters
from tests import tamper

N = 300
QUERIES = ("item17 alpha kilo", "note 250 tango", "item3", "sierra victor item99", "golf hotel")


def _lines(start: int, n: int) -> list[bytes]:
    words = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike sierra tango victor".split()
    return [json.dumps({"type": "fact", "text": f"note {i} {words[i % 16]} {words[(i * 7) % 16]} item{i}"}).encode()
            + b"\n" for i in range(start, start + n)]


@pytest.fixture(autouse=True)
def through_the_index(monkeypatch):
    monkeypatch.setattr(semantic, "EXACT_MAX", 0)  # nearest goes through the index even for a few memories


def _view(cx):
    rec = semantic.read_record(cx.store)
    return hnsw.open_view(semantic.index_path(cx.store), semantic.fingerprint_of(rec))


def _graph(cx) -> tuple[int, int]:
    """(connectivity the record names, connectivity of the file's graph as usearch opens it)."""
    return semantic.read_record(cx.store).connectivity, _view(cx).connectivity


def _nearest_are_exact(cx) -> None:
    """The index's 10 nearest for each query are the exact 10 nearest, give or take its approximation
    (at least 8 of them, as the storage contract asks of an index: a graph built on several threads is
    not the same graph twice), by similarity computed from the stored float32 vectors, so an f16
    rounding tie does not count against it."""
    model = cx.embedder.model
    for text in QUERIES:
        q = np.frombuffer(cx.embedder.embed_bytes(text), dtype="<f4")
        with cx.store.reading() as tx:
            ids, mat = _all_vectors(tx, Filters(actor="alice"), model, q.shape[0])
            found, note = tx.nearest(q, model, Filters(actor="alice"), 10)
        exact = dict(zip(ids, (mat @ q).tolist()))
        tenth = sorted(exact.values(), reverse=True)[9]
        assert note is None and len(found) == 10
        assert sum(exact[i] >= tenth - 1e-6 for i, _ in found) >= 8, (text, found)


@pytest.mark.parametrize(("dense_at", "connectivity"), [(N - 1, hnsw.DENSE_CONNECTIVITY), (N, hnsw.CONNECTIVITY)],
                         ids=["past-the-threshold", "at-the-threshold"])
def test_an_import_builds_the_graph_for_the_size_it_brings_the_store_to(store, monkeypatch, dense_at, connectivity):
    monkeypatch.setattr(hnsw, "DENSE_AT", dense_at)
    cx = Cortex(store=store, actor="alice")
    report = cx.import_jsonl(iter(_lines(0, N)))
    assert report.imported == N and report.index["action"] == "rebuild"
    assert _graph(cx) == (connectivity, connectivity)
    health = cx.store.index_health(cx.embedder.model)
    assert (health["connectivity"], health["denser_on_rebuild"], health["consistent"]) == (connectivity, False, True)
    _nearest_are_exact(cx)


def test_a_graph_grown_past_the_threshold_is_kept_by_folds_and_made_denser_by_reindex_rebuild(store, cli,
                                                                                                 monkeypatch):
    monkeypatch.setattr(hnsw, "DENSE_AT", N + 50)
    monkeypatch.setattr(hnsw, "WIDE_AT", N + 50)
    cx = Cortex(store=store, actor="alice")
    cx.import_jsonl(iter(_lines(0, N)))
    assert _graph(cx) == (hnsw.CONNECTIVITY, hnsw.CONNECTIVITY)
    report = cx.import_jsonl(iter(_lines(N, 100)))  # now N + 100 vectors: past the threshold
    assert report.index["action"] == "fold" and report.index["vectors"] == N + 100
    assert _graph(cx) == (hnsw.CONNECTIVITY, hnsw.CONNECTIVITY)  # a fold extends the file's own graph
    assert _view(cx).expansion_search > hnsw.EXPANSION_SEARCH  # the grown sparse graph is searched wider
    _nearest_are_exact(cx)
    doc = json.loads(cli("healthcheck", "--json").out)
    assert doc["status"] == "healthy" and doc["index"]["denser_on_rebuild"] is True, doc["index"]
    human = cli("healthcheck")
    assert human.code == 0 and f"connectivity {hnsw.CONNECTIVITY})" in human.out
    assert "cortexctl reindex --rebuild builds files whose graphs suit their size" in human.out, human.out

    assert cli("reindex").code == 0  # plain reindex: nothing to fold, the graph stays
    assert _graph(cx) == (hnsw.CONNECTIVITY, hnsw.CONNECTIVITY)
    run = cli("reindex", "--rebuild")
    assert run.code == 0, run
    assert _graph(cx) == (hnsw.DENSE_CONNECTIVITY, hnsw.DENSE_CONNECTIVITY)
    assert _view(cx).expansion_search == hnsw.EXPANSION_SEARCH  # the dense graph needs no wider search
    doc = json.loads(cli("healthcheck", "--json").out)
    assert doc["index"]["connectivity"] == hnsw.DENSE_CONNECTIVITY and doc["index"]["denser_on_rebuild"] is False
    assert "graphs suit their size" not in cli("healthcheck").out
    _nearest_are_exact(cx)


def test_a_fold_into_a_dense_graph_keeps_it_dense(store, monkeypatch):
    monkeypatch.setattr(hnsw, "DENSE_AT", N - 1)
    cx = Cortex(store=store, actor="alice")
    cx.import_jsonl(iter(_lines(0, N)))
    for line in _lines(N, 5):  # written one by one: the pending tail, then folded by reindex
        cx.write("fact", json.loads(line)["text"])
    assert cx.reindex()["index"]["action"] == "fold"
    assert _graph(cx) == (hnsw.DENSE_CONNECTIVITY, hnsw.DENSE_CONNECTIVITY)
    _nearest_are_exact(cx)


def test_a_record_that_does_not_name_its_connectivity_is_trusted_as_the_sparse_graph(store, monkeypatch):
    cx = Cortex(store=store, actor="alice")
    cx.import_jsonl(iter(_lines(0, N)))
    tamper.edit_json(semantic.record_path(cx.store), lambda doc: doc.pop("connectivity"))  # as recorded before it
    monkeypatch.setattr(hnsw, "DENSE_AT", N - 1)
    health = cx.store.index_health(cx.embedder.model)
    assert (health["state"], health["connectivity"], health["denser_on_rebuild"]) == ("ok", hnsw.CONNECTIVITY, True)
    _nearest_are_exact(cx)
    assert semantic.read_record(cx.store).connectivity == hnsw.CONNECTIVITY  # used as it is, not rebuilt


def _all_vectors(tx, filters, model, dim):
    """Every candidate's (ids, float16 rows), the store's chunks put together."""
    chunks = list(tx.vector_chunks(filters, model, dim))
    return [i for ids, _ in chunks for i in ids], np.concatenate([m for _, m in chunks] or [np.zeros((0, dim), "<f2")])


def _twins() -> np.ndarray:
    """500 vectors of texts that come in near twins (the same four words, another number)."""
    from cortexctl.embed import hashing

    words = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
             "quebec romeo sierra tango uniform victor whiskey xray yankee zulu").split()
    texts = [f"note {i} " + " ".join(words[(i * p) % 26] for p in (1, 3, 7, 11)) + f" item{i}"
             for i in range(0, 5000, 10)]
    return np.stack([np.frombuffer(hashing.embed_one(t), dtype="<f4") for t in texts])


def _found_by_own_vector(index, keys) -> set[int]:
    index.expansion_search = len(index)  # every node a walk reaches
    return {int(k) for k in keys if int(k) in {int(x) for x in index.search(hnsw.vectors(index, [k])[0], 10).keys}}


@pytest.mark.parametrize("dtype", ["f16", "f32"])  # f32: a file built before the index was f16
def test_a_vector_a_fold_cuts_off_from_the_graph_is_linked_again_when_the_graph_is_saved(tmp_path, dtype):
    """usearch gives a removed vector's node to the next vector added, with its links made anew: a
    near twin linked to only from there can no longer be reached, not even by its own vector."""
    from usearch.index import Index

    twins = _twins()
    base = Index(ndim=twins.shape[1], metric=hnsw.METRIC, dtype=dtype, connectivity=hnsw.CONNECTIVITY,
                 expansion_add=hnsw.EXPANSION_ADD)
    base.add(np.arange(len(twins), dtype=np.uint64), twins, threads=1)  # one thread: the same graph each run
    base.save(str(tmp_path / "base.usearch"))
    added = np.stack([twins[0] * 0.5 + twins[j] * 0.5 for j in range(1, 5)])
    for gone in range(len(twins)):  # remove one vector, add four: until a vector is cut off
        index = Index.restore(str(tmp_path / "base.usearch"))
        index.remove(np.array([gone], dtype=np.uint64))
        index.add(np.arange(10_000, 10_004, dtype=np.uint64), added, threads=1)
        index.save(str(tmp_path / "plain.usearch"))
        cut = hnsw.unreachable(tmp_path / "plain.usearch")
        if len(cut):
            break
    else:
        pytest.fail("no removal cut a vector off")
    keys = [int(k) for k in index.keys]
    reached = {int(k) for k in index.search(twins[0], len(index)).keys}  # a walk from the entry meets them all
    assert set(keys) - reached == {int(k) for k in cut}
    assert not _found_by_own_vector(index, cut)
    fp = hnsw.save_beside(index, tmp_path / "saved.usearch")
    assert not len(hnsw.unreachable(tmp_path / "saved.usearch"))
    again = Index.restore(str(tmp_path / "saved.usearch"))
    assert _found_by_own_vector(again, cut) == {int(k) for k in cut}
    assert sorted(int(k) for k in again.keys) == sorted(keys) and fp.count == len(keys)
    assert np.array_equal(hnsw.vectors(again, keys), hnsw.vectors(index, keys))
    assert hnsw.trusted(tmp_path / "saved.usearch", fp)


def test_the_walk_of_a_file_not_laid_out_as_expected_finds_nothing_cut_off(tmp_path):
    path = tmp_path / "f.usearch"
    for raw in (b"", b"usearch", bytes(200), np.arange(1000, dtype=np.uint32).tobytes()):
        path.write_bytes(raw)
        assert not len(hnsw.unreachable(path))


def test_a_file_system_that_refuses_the_link_s_writes_still_gets_the_saved_graph(tmp_path, monkeypatch):
    import errno
    import os

    from usearch.index import Index

    twins = _twins()
    index = Index(ndim=twins.shape[1], metric=hnsw.METRIC, dtype=hnsw.DTYPE, connectivity=hnsw.CONNECTIVITY,
                  expansion_add=hnsw.EXPANSION_ADD)
    index.add(np.arange(len(twins), dtype=np.uint64), twins, threads=1)
    index.remove(np.array([0], dtype=np.uint64))
    index.add(np.arange(10_000, 10_004, dtype=np.uint64), np.stack([twins[0] * 0.5 + twins[j] * 0.5 for j in range(1, 5)]),
              threads=1)

    def refused(*_args):
        raise OSError(errno.EINVAL, "Invalid argument")

    monkeypatch.setattr(os, "pwrite", refused)
    fp = hnsw.save_beside(index, tmp_path / "saved.usearch")
    assert hnsw.trusted(tmp_path / "saved.usearch", fp) and fp.count == len(index)
    assert len(hnsw.unreachable(tmp_path / "saved.usearch"))  # saved as usearch left it


def test_a_lone_cut_off_vector_is_linked_too(tmp_path):
    """One vector cut off: usearch answers its search as one query, not as a batch."""
    from usearch.index import Index

    from cortexctl.embed import hashing

    twins = _twins()
    index = Index(ndim=twins.shape[1], metric=hnsw.METRIC, dtype=hnsw.DTYPE, connectivity=hnsw.CONNECTIVITY,
                  expansion_add=hnsw.EXPANSION_ADD)
    index.add(np.arange(len(twins), dtype=np.uint64), twins, threads=1)
    index.remove(np.array([4], dtype=np.uint64))
    added = np.stack([np.frombuffer(hashing.embed_one(f"walrus public {i}"), dtype="<f4") for i in range(4)])
    index.add(np.arange(10_000, 10_004, dtype=np.uint64), added, threads=1)
    index.save(str(tmp_path / "plain.usearch"))
    assert len(hnsw.unreachable(tmp_path / "plain.usearch")) == 1
    fp = hnsw.save_beside(index, tmp_path / "saved.usearch")
    assert not len(hnsw.unreachable(tmp_path / "saved.usearch")) and hnsw.trusted(tmp_path / "saved.usearch", fp)


def test_a_save_of_thousands_of_vectors_alike_leaves_none_cut_off(tmp_path):
    """3,000 memories of one text: the nearest lists of a cut-off one are all full, and so are
    those of the others' nearest: each is linked from one of them linked before, or the first node
    with room past them."""
    from cortexctl.embed import hashing

    x = np.vstack([np.repeat(hashing.embed(["the build is green"]), 3000, axis=0),
                   hashing.embed([f"note {i} other words" for i in range(300)])])
    index = hnsw.new(x.shape[1], len(x))
    hnsw.add(index, np.arange(len(x), dtype=np.uint64), x)
    index.save(str(tmp_path / "plain.usearch"))
    assert len(hnsw.unreachable(tmp_path / "plain.usearch")) > 1000  # what a save cut off before linking
    fp = hnsw.save_beside(index, tmp_path / "saved.usearch")
    assert not len(hnsw.unreachable(tmp_path / "saved.usearch")) and hnsw.trusted(tmp_path / "saved.usearch", fp)


def _clusters(ncl=50, per=1000, dim=64, seed=3):
    """``ncl`` texts each stored ``per`` times (identical vectors), shuffled; built single-threaded
    so that the graph is the same every run."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((ncl, dim)).astype(np.float32)
    lab = rng.permutation(np.repeat(np.arange(ncl), per))
    index = hnsw.new(dim, len(lab))
    index.add(np.arange(len(lab), dtype=np.uint64), centres[lab], threads=1)
    return index, centres, lab


def test_a_save_of_many_texts_each_repeated_leaves_none_cut_off(tmp_path):
    """50 texts of 1,000 memories each: every one of a vector's nearest is its twin, reached by a
    search only through the levels above the base."""
    index, _c, _lab = _clusters()
    hnsw.save_beside(index, tmp_path / "saved.usearch")
    assert len(hnsw.unreachable(tmp_path / "saved.usearch")) == 0


def test_no_vector_a_search_returns_is_called_cut_off(tmp_path):
    """A search comes down through the levels above the base and lands in parts of the base level
    that no walk of the base from the entry meets: the walk starts from every node it may land on."""
    from usearch.index import Index

    index, centres, _lab = _clusters()
    index.save(str(tmp_path / "plain.usearch"))
    cut = hnsw.unreachable(tmp_path / "plain.usearch")
    view = Index.restore(str(tmp_path / "plain.usearch"), view=True)
    view.expansion_search = 512
    found = np.asarray(view.search(centres, 10).keys).ravel()
    assert not np.isin(found, cut).any(), f"{int(np.isin(found, cut).sum())} of {found.size} returned keys called unreachable"
