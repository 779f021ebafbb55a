"""VectorSearch: one vector per memory version and model, and the nearest of them. Vectors come
from the built-in hashing embedder the engine uses when no endpoint is configured."""

from __future__ import annotations

import numpy as np
import pytest

from cortexctl.store.interface import Filters
from tests.contract.conftest import FACT, GOAL, as_stored, embedded, ident, memory, put, self_score, unit_rows

TEXTS = ["the deploy script restarts the api server", "deploy on fridays is forbidden",
         "the api server listens on port 8080", "lunch is at noon in the big hall",
         "rotate the signing keys every month", "the cat sleeps on the warm keyboard"]


def stored(storage, *memories, texts=TEXTS):
    """Put these memories, each with the vector of the text of the same rank, for its current version."""
    put(storage, *memories)
    model, mat = embedded(texts[:len(memories)])
    with storage.transaction() as tx:
        tx.insert_vectors([h["id"] for h, _ in memories], [h["current_version"] for h, _ in memories], model, mat)
    return model


def nearest(storage, q, model, filters=None, n=10, **kw):
    with storage.reading() as tx:
        return tx.nearest(q, model, filters or Filters("alice"), n, **kw)


def test_insert_vectors_returns_a_number_that_grows_and_model_dim_gives_the_dimension(storage):
    put(storage, memory(1), memory(2), memory(3))
    mat = unit_rows(3)
    with storage.transaction() as tx:
        first = tx.insert_vectors([ident(1), ident(2)], [1, 1], "m", mat[:2])
        second = tx.insert_vectors([ident(3)], [1], "m", [mat[2].astype("<f4").tobytes()])  # as bytes
        assert tx.insert_vectors([], [], "m", mat[:0]) == 0
    assert 0 < first < second
    with storage.reading() as tx:
        assert tx.model_dim("m") == 4 and tx.model_dim("other") is None
        got, note = tx.nearest(mat[2], "m", Filters("alice"), 1)
    assert [i for i, _ in got] == [ident(3)] and got[0][1] == pytest.approx(self_score(storage, mat[2]), abs=1e-6)
    assert note is None


def test_nearest_ranks_the_visible_memories_by_the_cosine_of_their_current_vector(storage):
    model = stored(storage, *(memory(n) for n in range(1, 7)))
    _, q = embedded(["api server port"])
    got, note = nearest(storage, q[0], model)
    assert note is None
    assert got[0][0] == ident(3)
    assert [s for _, s in got] == sorted((s for _, s in got), reverse=True) and all(s > 0 for _, s in got)
    assert nearest(storage, q[0], model, n=2)[0] == got[:2]
    _, same = embedded([TEXTS[4]])
    best = nearest(storage, same[0], model, n=1)[0]
    assert best[0][0] == ident(5) and best[0][1] == pytest.approx(self_score(storage, same[0]), abs=1e-6)


def test_equal_cosines_come_in_id_order(storage):
    model = stored(storage, memory(3), memory(1), memory(2), texts=["same words", "same words", "lunch at noon by the river"])
    _, q = embedded(["same words"])
    got, _ = nearest(storage, q[0], model)
    assert [i for i, _ in got][:2] == [ident(1), ident(3)] and got[0][1] == pytest.approx(got[1][1])


def test_nearest_returns_only_memories_passing_the_filters(storage):
    model = stored(storage, memory(1), memory(2, type_=GOAL), memory(3, actor="bob"), memory(4, tombstoned=True),
                   memory(5, tags=["ops"]), memory(6, actor="bob", visibility="public"),
                   memory(7, actor="bob", visibility="scoped"), texts=["rotate the signing keys"] * 7)
    _, q = embedded(["rotate the signing keys"])

    def ids(filters):
        return sorted(i for i, _ in nearest(storage, q[0], model, filters)[0])

    assert ids(Filters("alice")) == [ident(1), ident(2), ident(5), ident(6)]
    assert ids(Filters("alice", types=(GOAL,))) == [ident(2)]
    assert ids(Filters("alice", tags=("ops",))) == [ident(5)]
    assert ids(Filters("alice", include_tombstoned=True)) == [ident(n) for n in (1, 2, 4, 5, 6)]
    assert ids(Filters("bob", types=(FACT,))) == [ident(3), ident(6), ident(7)]
    assert ids(Filters("carol")) == [ident(6)]
    assert ids(Filters("carol", scopes=(("bob", (), ()),))) == [ident(6), ident(7)]  # bob's private one stays private


def test_only_the_current_versions_vector_counts(storage):
    head, versions = memory(1, versions=2)
    put(storage, (head, versions), memory(2))
    model, mat = embedded(["an old text", "another text"])
    with storage.transaction() as tx:
        tx.insert_vectors([ident(1), ident(2)], [1, 1], model, mat)  # ident(1)'s vector is of version 1
    assert [i for i, _ in nearest(storage, mat[0], model)[0]] == [ident(2)]
    with storage.reading() as tx:
        assert [(i, v) for i, v, _, _ in tx.pending(model)] == [(ident(1), 2)]


def test_exact_search_answers_as_the_default_one(storage):
    model = stored(storage, *(memory(n) for n in range(1, 7)))
    for text in ("api server", "deploy on fridays", "a warm cat"):
        _, q = embedded([text])
        assert nearest(storage, q[0], model, exact=True)[0] == nearest(storage, q[0], model)[0]


def test_nearest_without_vectors_of_the_model_or_of_another_dimension_finds_nothing_and_says_why(storage):
    model, q = embedded(["anything"])
    with storage.transaction():
        pass
    assert nearest(storage, q[0], model) == ([], None)  # an empty store: nothing to say
    stored(storage, memory(1), memory(2))
    got, note = nearest(storage, q[0], "another-model")
    assert got == [] and isinstance(note, str) and note
    got, note = nearest(storage, np.ones(8, np.float32) / np.sqrt(8), model)
    assert got == [] and isinstance(note, str) and note
    assert nearest(storage, np.zeros(q.shape[1], np.float32), model)[0] == []


def test_dropped_vectors_leave_the_search_and_their_memories_wait_again(storage):
    model = stored(storage, memory(1), memory(2), texts=["same words", "same words"])
    with storage.transaction() as tx:
        tx.insert_vectors([ident(1)], [1], "other", unit_rows(1))
        tx.drop_vectors(ident(1), model=model)
    _, q = embedded(["same words"])
    assert [i for i, _ in nearest(storage, q[0], model)[0]] == [ident(2)]
    with storage.reading() as tx:
        assert [i for i, *_ in tx.pending(model)] == [ident(1)] and tx.count_pending("other") == 1
    with storage.transaction() as tx:
        tx.drop_vectors(ident(1))  # every model's
    with storage.reading() as tx:
        assert tx.count_pending("other") == 2


def test_dropping_a_model_or_every_other_model_counts_what_it_dropped(storage):
    put(storage, memory(1), memory(2))
    with storage.transaction() as tx:
        tx.insert_vectors([ident(1), ident(2)], [1, 1], "m", unit_rows(2))
        tx.insert_vectors([ident(1)], [1], "n", unit_rows(1))
        tx.insert_vectors([ident(1)], [1], "o", unit_rows(1))
    with storage.reading() as tx:
        assert tx.other_models("m") and tx.other_models("n") and tx.other_models("z")
    with storage.transaction() as tx:
        assert tx.drop_other_models("m") == 2
    with storage.reading() as tx:
        assert not tx.other_models("m") and tx.other_models("n")
    with storage.transaction() as tx:
        assert tx.drop_model("m") == 2
    with storage.reading() as tx:
        assert not tx.other_models("m") and not tx.other_models("n")
        assert {m: tx.count_pending(m) for m in "mno"} == {"m": 2, "n": 2, "o": 2}
        assert nearest(storage, unit_rows(1)[0], "m")[0] == []


def test_a_live_memory_without_a_vector_of_the_model_is_pending(storage):
    put(storage, memory(1), memory(2), memory(3, tombstoned=True), memory(4, actor="bob"))
    with storage.transaction() as tx:
        assert tx.maybe_pending("m") is True
        tx.insert_vectors([ident(2)], [1], "m", unit_rows(1))
    with storage.reading() as tx:
        assert tx.count_pending("m") == 2
        assert [(i, v) for i, v, _, _ in tx.pending("m")] == [(ident(1), 1), (ident(4), 1)]
        assert [(i, t, d) for i, _, t, d in tx.pending("m", limit=1)] == [(ident(1), FACT, b"data 1 v1")]
        assert [i for i, *_ in tx.pending("m", ids=[ident(4), ident(2)])] == [ident(4)]
        assert tx.maybe_pending("m") is True
        assert tx.count_pending("other") == 3
    with storage.transaction() as tx:
        tx.insert_vectors([ident(1), ident(4)], [1, 1], "m", unit_rows(2))
    with storage.reading() as tx:
        assert tx.count_pending("m") == 0 and tx.pending("m") == []


def test_stored_vectors_are_those_of_the_versions_asked_for_of_that_model_as_stored(storage):
    mat = unit_rows(3, dim=6)
    put(storage, memory(1), memory(2, versions=2), memory(3))
    with storage.transaction() as tx:
        tx.insert_vectors([ident(1), ident(2)], [1, 2], "m", mat[:2])
        tx.insert_vectors([ident(3)], [1], "other", mat[2:])
    with storage.reading() as tx:
        got = tx.stored_vectors([(ident(1), 1), (ident(2), 1), (ident(3), 1), (ident(4), 1)], "m")
        assert set(got) == {ident(1)}  # 2 has a vector of version 2 only, 3 of another model only, 4 none
        np.testing.assert_array_equal(got[ident(1)], as_stored(storage, mat[0]))
        assert got[ident(1)].dtype == np.float32
        assert set(tx.stored_vectors([(ident(2), 2)], "m")) == {ident(2)}
        assert tx.stored_vectors([], "m") == {}
    with storage.transaction() as tx:
        tx.drop_vectors(ident(1))
    with storage.reading() as tx:
        assert tx.stored_vectors([(ident(1), 1)], "m") == {}
