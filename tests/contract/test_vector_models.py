"""VectorSearch across a model's life: re-embedded at another dimension, and of many dimensions."""

from __future__ import annotations

import numpy as np

from cortexctl.store.interface import Filters
from tests.contract.conftest import ident, memory, put, self_score, unit_rows


def test_a_model_dropped_and_stored_again_at_another_dimension_is_searched_at_the_new_one(storage):
    """reindex drops a model whose endpoint now makes vectors of another length, then stores them anew."""
    put(storage, *(memory(n) for n in range(1, 4)))
    old = unit_rows(3, dim=8, seed=1)
    with storage.transaction() as tx:
        tx.insert_vectors([ident(n) for n in range(1, 4)], [1] * 3, "m", old)
    storage.update_index("m")
    with storage.transaction() as tx:
        assert tx.drop_model("m") == 3
    new = unit_rows(3, dim=12, seed=2)
    with storage.transaction() as tx:
        last = tx.insert_vectors([ident(n) for n in range(1, 4)], [1] * 3, "m", new)
    storage.after_vectors("m", last)
    assert storage.update_index("m")["vectors"] == 3
    with storage.reading() as tx:
        assert tx.model_dim("m") == 12
        ((first, score),), note = tx.nearest(new[1], "m", Filters("alice"), 1)
        assert first == ident(2) and abs(score - self_score(storage, new[1])) < 1e-6 and note is None
        assert tx.nearest(old[1], "m", Filters("alice"), 1)[0] == []  # the old length: skipped, with a note
        assert tx.index_problems("m") == []
    health = storage.index_health("m")
    assert health["dimension"] == 12 and health["consistent"] is True


def test_vectors_of_many_dimensions_are_stored_and_found(storage):
    """Wider than an index of half-precision vectors holds (4000 on PostgreSQL): still found, exactly."""
    put(storage, *(memory(n) for n in range(1, 4)))
    mat = unit_rows(3, dim=4096, seed=3)
    with storage.transaction() as tx:
        last = tx.insert_vectors([ident(n) for n in range(1, 4)], [1] * 3, "wide", mat)
    storage.after_vectors("wide", last)
    assert storage.update_index("wide")["action"] in {"fold", "rebuild", "none"}
    with storage.reading() as tx:
        got, _ = tx.nearest(mat[2], "wide", Filters("alice"), 3)
        assert got[0][0] == ident(2 + 1) and abs(got[0][1] - 1.0) < 1e-5
        assert got == tx.nearest(mat[2], "wide", Filters("alice"), 3, exact=True)[0]
        assert tx.index_problems("wide") == []
    assert storage.index_health("wide")["consistent"] is not False
    assert np.isfinite([s for _, s in got]).all()
