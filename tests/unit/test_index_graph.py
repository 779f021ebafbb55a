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
