"""The storage contract: what every backend of ``store.interface`` must do, pinned by behaviour.

Written against ``Storage`` and ``Tx`` only; the backend comes from the ``storage``
fixture (conftest.py), so each test runs once per backend, on a real store.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Protocol

import numpy as np
import pytest

from cortexctl.errors import CortexError, UsageError
from cortexctl.memory.types import MAX_COUNT
from cortexctl.store.interface import (CAPABILITIES, HEAD_FIELDS, SALIENCE_FIELDS, Filters, NoStore, Scoring, Storage,
                                      Tx, Viewer)
from tests.contract.conftest import FACT, GOAL, T0, ident, memory, put

WEIGHTS = (0.2, 0.2, 0.2, 0.2, 0.2)
SCORING = Scoring(T0 + timedelta(days=1), 7 * 86400.0, WEIGHTS)


def entry(kind: str, ref: str | None = None, payload: bytes = b"p", actor: str = "alice", at=T0):
    return (kind, at, actor, ref, payload)


def unit_rows(n: int, dim: int = 4, seed: int = 0) -> np.ndarray:
    m = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def _methods(protocol) -> set[str]:
    """The methods a protocol declares, its capabilities' included (``Tx`` is their union)."""
    return {name for klass in protocol.__mro__ if klass not in (object, Protocol)
            for name, value in vars(klass).items() if callable(value) and not name.startswith("_")}


# -- opening and transactions ------------------------------------------------------------------
def test_tx_is_the_union_of_small_capabilities():
    assert _methods(Tx) == set().union(*(_methods(c) for c in CAPABILITIES))
    assert all(len(_methods(c)) <= 15 for c in (*CAPABILITIES, Storage))


def test_the_backend_has_every_method_of_the_protocols(storage):
    assert all(callable(getattr(storage, m, None)) for m in _methods(Storage)), _methods(Storage)
    with storage.transaction() as tx:
        missing = {m for m in _methods(Tx) if not callable(getattr(tx, m, None))}
    assert not missing


def test_the_search_view_has_every_method_of_tx_and_no_other_falls_through(storage):
    """``searching()`` may answer from a cache (the DuckDB backend's snapshot): its view still has
    every ``Tx`` method, and a name that is none of them does not reach the database behind it."""
    put(storage, memory(1))
    storage.refresh_snapshot()
    with storage.searching() as tx:
        missing = {m for m in _methods(Tx) if not callable(getattr(tx, m, None))}
        assert not missing
        assert getattr(tx, "heads_by_idz", None) is None and getattr(tx, "con", None) is None
        assert tx.heads_by_ids([ident(1)], "alice")[0]["id"] == ident(1)


def test_a_store_does_not_exist_until_the_first_transaction(storage):
    assert not storage.exists()
    with pytest.raises(NoStore):
        with storage.reading():
            pass
    with storage.transaction():
        pass
    assert storage.exists()
    with storage.reading() as tx:
        assert tx.count_heads() == 0


def test_check_path_refuses_a_file_where_the_store_directory_belongs(storage):
    storage.path.parent.mkdir(parents=True, exist_ok=True)
    storage.path.write_text("not a store")
    with pytest.raises(UsageError):
        storage.check_path()


def test_a_committed_transaction_is_seen_by_later_readers(storage):
    put(storage, memory(1))
    with storage.reading() as tx:
        assert [h["id"] for h in tx.heads_by_ids([ident(1)], "alice")] == [ident(1)]


def test_an_exception_in_a_transaction_leaves_nothing_written(storage):
    put(storage, memory(1))
    with pytest.raises(RuntimeError):
        with storage.transaction() as tx:
            h, vs = memory(2)
            tx.insert_memories([h], vs)
            tx.append_journal([entry("write", ident(2))])
            tx.add_postings([(ident(2), [7, 8])])
            tx.insert_vectors([ident(2)], [1], "m", unit_rows(1))
            tx.set_weights("alice", WEIGHTS, seq=1, at=T0)
            tx.update_head(ident(1), {"importance": 9})
            raise RuntimeError("boom")
    with storage.reading() as tx:
        assert tx.existing_ids([ident(1), ident(2)]) == {ident(1)}
        assert tx.heads_by_ids([ident(1)], "alice")[0]["importance"] == 5
        assert tx.journal_bounds() == (0, None, None)
        assert tx.doc_count() == 0
        assert tx.vector_stats("m") == (0, 0, None)
        assert tx.weights("alice") is None


def test_the_exclusive_lock_can_be_taken_again_by_its_holder_for_a_transaction(storage):
    with storage.exclusive(wait=0):
        with storage.transaction() as tx:
            head, versions = memory(1)
            tx.insert_memories([head], versions)
    with storage.reading() as tx:
        assert tx.count_heads() == 1


# -- heads and versions ---------------------------------------------------------------------------
def test_a_head_and_its_versions_come_back_as_they_were_inserted(storage):
    head, versions = memory(1, tags=["a", "b"], frames=["about:project:x"], versions=3)
    head.update(session="s1", access_count=3, citations=2, last_used=T0 + timedelta(minutes=5))
    put(storage, (head, versions))
    with storage.reading() as tx:
        assert tx.heads_by_ids([ident(1)], "alice") == [head]
        assert tx.versions(ident(1)) == versions
        assert tx.versions(ident(1), 2) == [versions[1]]
        assert tx.versions(ident(1), 4) == []
        assert tx.current_versions([ident(1)]) == {ident(1): versions[2]}


def test_heads_by_ids_returns_only_the_fields_asked_for(storage):
    put(storage, memory(1))
    with storage.reading() as tx:
        (row,) = tx.heads_by_ids([ident(1)], "alice", SALIENCE_FIELDS)
    assert set(row) == set(SALIENCE_FIELDS)


def test_another_actors_private_memory_is_invisible_and_a_public_one_visible(storage):
    put(storage, memory(1, actor="bob"), memory(2, actor="bob", visibility="public"), memory(3))
    with storage.reading() as tx:
        assert [h["id"] for h in tx.heads_by_ids([ident(1), ident(2), ident(3)], "alice")] == [ident(2), ident(3)]
        assert tx.heads_by_prefix(ident(1), "alice") == []
        assert [h["id"] for h in tx.heads_by_prefix("01J", "alice")] == [ident(2), ident(3)]
        assert tx.existing_ids([ident(1), ident(2), ident(9)]) == {ident(1), ident(2)}


def test_a_prefix_finds_heads_in_id_order_up_to_the_limit_and_a_full_id_only_itself(storage):
    put(storage, *(memory(n) for n in (10, 11, 12, 20)))
    with storage.reading() as tx:
        assert [h["id"] for h in tx.heads_by_prefix(ident(10)[:-1], "alice")] == [ident(10), ident(11), ident(12)]
        assert [h["id"] for h in tx.heads_by_prefix(ident(10)[:-1], "alice", limit=2)] == [ident(10), ident(11)]
        assert [h["id"] for h in tx.heads_by_prefix(ident(20), "alice")] == [ident(20)]


def test_inserting_a_memory_whose_id_is_taken_is_an_integrity_error(storage):
    put(storage, memory(1))
    with pytest.raises(CortexError):
        put(storage, memory(1))
    with storage.reading() as tx:
        assert tx.count_heads() == 1


def test_stored_hashes_give_each_existing_memorys_owner_and_hashes_in_version_order(storage):
    put(storage, memory(1, versions=3), memory(2, actor="bob"))
    with storage.reading() as tx:
        got = tx.stored_hashes([ident(1), ident(2), ident(9)])
    assert got == {
        ident(1): ("alice", [bytes([1, 1]) * 16, bytes([1, 2]) * 16, bytes([1, 3]) * 16]),
        ident(2): ("bob", [bytes([2, 1]) * 16]),
    }


def test_bulk_transactions_change_nothing_that_is_stored(storage):
    for n in range(1, 4):
        with storage.transaction(bulk=True) as tx:
            tx.insert_memories(*(lambda h, vs: ([h], vs))(*memory(n)))
    with storage.transaction() as tx:
        tx.insert_memories(*(lambda h, vs: ([h], vs))(*memory(4)))
    with storage.reading() as tx:
        assert tx.existing_ids([ident(n) for n in range(1, 6)]) == {ident(n) for n in range(1, 5)}
        assert sorted(h["id"] for h in tx.heads_by_ids([ident(n) for n in range(1, 5)], "alice")) == [
            ident(n) for n in range(1, 5)]


def test_a_new_version_and_head_update_move_the_current_version(storage):
    head, versions = memory(1, type_=GOAL)
    put(storage, (head, versions))
    v2 = {**versions[0], "version": 2, "data": b"new", "short": "v2"}
    with storage.transaction() as tx:
        tx.insert_version(v2)
        tx.update_head(ident(1), {"current_version": 2, "short": "v2", "updated_at": T0 + timedelta(hours=1)})
    with storage.reading() as tx:
        (h,) = tx.heads_by_ids([ident(1)], "alice")
        assert (h["current_version"], h["short"], h["updated_at"]) == (2, "v2", T0 + timedelta(hours=1))
        assert tx.current_versions([ident(1)])[ident(1)]["data"] == b"new"
        assert tx.current_data({ident(1): 2}) == {ident(1): (GOAL, b"new")}
        assert tx.current_data({ident(1): 1}) == {ident(1): (GOAL, b"data 1 v1")}
        assert tx.current_data({ident(2): 1}) == {}


def test_changing_a_heads_frames_changes_what_a_frame_filter_finds(storage):
    put(storage, memory(1, frames=["about:project:x"]))
    about_x = Filters("alice", frames=(("about", "project", "x"),))
    about_y = Filters("alice", frames=(("about", "project", "y"),))
    with storage.transaction() as tx:
        assert tx.passing([ident(1)], about_x) == {ident(1): 1}
        tx.update_head(ident(1), {"frames": ["about:project:y"]})
    with storage.reading() as tx:
        assert tx.passing([ident(1)], about_x) == {}
        assert tx.passing([ident(1)], about_y) == {ident(1): 1}
        assert tx.frame_mismatches() == []


def test_iter_visible_yields_each_visible_head_with_its_versions_in_id_order(storage):
    put(storage, memory(3, versions=2), memory(1), memory(2, actor="bob"), memory(4, actor="bob", visibility="public"))
    with storage.reading() as tx:
        got = [(h["id"], [v["version"] for v in vs]) for h, vs in tx.iter_visible("alice", batch=1)]
    assert got == [(ident(1), [1]), (ident(3), [1, 2]), (ident(4), [1])]


def test_bump_adds_access_and_citations_keeps_them_in_bounds_and_marks_last_use(storage):
    high, _ = memory(2)
    high["citations"] = MAX_COUNT
    put(storage, memory(1), (high, _))
    at = T0 + timedelta(hours=2)
    with storage.transaction() as tx:
        tx.bump([ident(1)], access=1, citations=-1, at=at)
        tx.bump([ident(2)], access=1, citations=1, at=at)
        tx.bump([], access=1, citations=1, at=at)
    with storage.reading() as tx:
        one, two = tx.heads_by_ids([ident(1), ident(2)], "alice")
    assert (one["access_count"], one["citations"], one["last_used"]) == (1, 0, at)
    assert (two["access_count"], two["citations"]) == (1, MAX_COUNT)


def test_count_heads_counts_everything_or_what_passes_the_filters(storage):
    put(storage, memory(1, tags=["a"]), memory(2), memory(3, actor="bob"))
    with storage.reading() as tx:
        assert tx.count_heads() == 3
        assert tx.count_heads(Filters("alice")) == 2
        assert tx.count_heads(Filters("alice", tags=("a",))) == 1


# -- journal -----------------------------------------------------------------------------------------
def test_journal_entries_get_consecutive_sequence_numbers_from_one(storage):
    with storage.transaction() as tx:
        assert tx.next_seq() == 1
        assert tx.append_journal([entry("write", ident(1), b"a"), entry("update", ident(1), b"b")]) == 1
        assert tx.next_seq() == 3
    with storage.transaction() as tx:
        assert tx.append_journal([entry("checkpoint", "i/s", b"c")]) == 3
    with storage.reading() as tx:
        assert tx.journal_bounds() == (3, 1, 3)
        assert tx.journal_gaps() == []
        assert list(tx.journal_entries(["update", "checkpoint"])) == [
            (2, "update", T0, "alice", ident(1), b"b"), (3, "checkpoint", T0, "alice", "i/s", b"c")]


def test_unknown_kinds_and_unpaired_attests_are_reported(storage):
    with storage.transaction() as tx:
        tx.append_journal([entry("attest", "i"), entry("learn_weights", "alice"), entry("attest", "i"),
                           entry("mystery"), entry("learn_weights", "alice")])
    with storage.reading() as tx:
        assert tx.unknown_kinds(["attest", "learn_weights"]) == [(4, "mystery")]
        assert [(s, k) for s, k, _ in tx.unpaired_attests()] == [(3, "attest"), (5, "learn_weights")]


# -- filtered candidate sets and salience --------------------------------------------------------------
def test_filters_select_by_type_tags_frames_tombstone_and_visibility(storage):
    put(storage,
        memory(1, tags=["a", "b"], frames=["about:project:x"]),
        memory(2, type_=GOAL, tags=["a"], frames=["about:person:y"]),
        memory(3, tombstoned=True, tags=["a"]),
        memory(4, actor="bob", tags=["a"]),
        memory(5, actor="bob", visibility="public", tags=["a"]))
    ids = [ident(n) for n in range(1, 6)]

    def ids_passing(**kw):
        with storage.reading() as tx:
            return sorted(tx.passing(ids, Filters("alice", **kw)))

    assert ids_passing() == [ident(1), ident(2), ident(5)]
    assert ids_passing(include_tombstoned=True) == [ident(1), ident(2), ident(3), ident(5)]
    assert ids_passing(types=(GOAL,)) == [ident(2)]
    assert ids_passing(types=[GOAL], tags=["a"]) == [ident(2)]  # lists are taken too
    assert ids_passing(types=(FACT, GOAL), tags=("a", "b")) == [ident(1)]
    assert ids_passing(frames=(("about", None, None),)) == [ident(1), ident(2)]
    assert ids_passing(frames=(("about", "person", None),)) == [ident(2)]
    assert ids_passing(frames=(("about", "project", "x"),)) == [ident(1)]
    assert ids_passing(frames=(("about", "project", "z"),)) == []


def test_live_versions_ignore_the_owner_but_not_the_tombstone(storage):
    put(storage, memory(1, actor="bob", versions=2), memory(2, tombstoned=True))
    with storage.reading() as tx:
        assert tx.live_versions([ident(1), ident(2)]) == {ident(1): 2}


def test_top_salience_ranks_by_salience_then_later_update_then_higher_id(storage):
    put(storage,
        memory(1, importance=2),
        memory(2, importance=9),
        memory(3, importance=5, at=T0),
        memory(4, importance=5, at=T0 + timedelta(seconds=1)),
        memory(5, importance=5, at=T0 + timedelta(seconds=1)),
        memory(6, importance=10, tombstoned=True))
    with storage.reading() as tx:
        top = tx.top_salience(Filters("alice"), SCORING, 10)
        assert [i for i, _ in top] == [ident(2), ident(5), ident(4), ident(3), ident(1)]
        assert [s for _, s in top] == sorted((s for _, s in top), reverse=True)
        assert [i for i, _ in tx.top_salience(Filters("alice"), SCORING, 2)] == [ident(2), ident(5)]
        with_dead = dict(tx.top_salience(Filters("alice", include_tombstoned=True), SCORING, 10))
        assert with_dead[ident(6)] == 0.0  # a forgotten memory has no salience


def test_candidates_give_version_filter_verdict_and_the_same_salience_as_top_salience(storage):
    put(storage, memory(1, tags=["a"], versions=2), memory(2), memory(3, actor="bob"))
    filters = Filters("alice", tags=("a",))
    with storage.reading() as tx:
        got = tx.candidates([ident(1), ident(2), ident(3)], filters, SCORING)
        top = dict(tx.top_salience(Filters("alice"), SCORING, 10))
    assert {i: c[:2] for i, c in got.items()} == {ident(1): (2, True), ident(2): (1, False), ident(3): (1, False)}
    assert got[ident(1)][2] == pytest.approx(top[ident(1)])
    assert got[ident(2)][2] == pytest.approx(top[ident(2)])


def test_result_rows_carry_the_asked_form_as_text(storage):
    put(storage, memory(1, short="brief"))
    with storage.reading() as tx:
        assert tx.result_rows([ident(1)], "short")[ident(1)]["text"] == "brief"
        assert tx.result_rows([ident(1)], "medium")[ident(1)]["text"] == "brief at length"
        assert tx.result_rows([], "short") == {}


# -- lexical postings ------------------------------------------------------------------------------------
def test_postings_hold_each_memorys_term_frequencies_and_length(storage):
    put(storage, memory(1), memory(2))
    with storage.transaction() as tx:
        tx.add_postings([(ident(1), [5, 6, 5]), (ident(2), [6])])
    with storage.reading() as tx:
        assert tx.doc_count() == 2
        got = tx.postings_of([5, 6])
        docs = tx.doc_ids([int(d) for d in got["doc"]])
        rows = sorted((int(t), docs[int(d)], int(f)) for t, d, f in zip(got["term"], got["doc"], got["tf"]))
        assert rows == [(5, ident(1), 2), (6, ident(1), 1), (6, ident(2), 1)]
        doc_of = {v: k for k, v in docs.items()}
        assert tx.doc_terms([doc_of[ident(1)]]) == {doc_of[ident(1)]: ({5: 2, 6: 1}, 3)}
        assert len(tx.postings_of([99])["doc"]) == 0


def test_replaced_postings_drop_the_old_terms(storage):
    put(storage, memory(1))
    with storage.transaction() as tx:
        tx.add_postings([(ident(1), [5, 6])])
    with storage.transaction() as tx:
        tx.replace_postings(ident(1), [7])
    with storage.reading() as tx:
        assert tx.doc_count() == 1
        assert len(tx.postings_of([5, 6])["doc"]) == 0
        assert list(tx.doc_ids(list(tx.postings_of([7])["doc"])).values()) == [ident(1)]


def test_document_frequencies_leave_out_what_the_actor_may_not_see(storage):
    put(storage, memory(1), memory(2, actor="bob"), memory(3, actor="bob", visibility="public"))
    with storage.transaction() as tx:
        tx.add_postings([(ident(1), [5]), (ident(2), [5]), (ident(3), [5, 6])])
    with storage.reading() as tx:
        hidden = tx.hidden_docs("alice")
        assert list(tx.doc_ids([int(d) for d in hidden]).values()) == [ident(2)]
        assert tx.term_df([5, 6], hidden) == {5: 2, 6: 1}
        assert tx.term_df([5], tx.hidden_docs("bob")) == {5: 2}  # alice's private one is hidden from bob


# -- vectors -----------------------------------------------------------------------------------------------
def test_vectors_get_increasing_keys_and_come_back_by_key(storage):
    put(storage, memory(1), memory(2), memory(3))
    mat = unit_rows(3)
    with storage.transaction() as tx:
        assert tx.insert_vectors([ident(1), ident(2)], [1, 1], "m", mat[:2]) == 2
        assert tx.insert_vectors([ident(3)], [1], "m", [mat[2].astype("<f4").tobytes()]) == 3  # a few as bytes
        assert tx.insert_vectors([], [], "m", mat[:0]) == 0
    with storage.reading() as tx:
        assert tx.model_dim("m") == 4 and tx.model_dim("other") is None
        assert tx.vector_stats("m") == (3, 3, 4)
        assert tx.count_vectors("m") == 3 and tx.count_vectors("m", after=2) == 1
        ((keys, got),) = list(tx.iter_vectors("m", 4))
        assert keys.tolist() == [1, 2, 3] and np.allclose(got, mat)
        assert [k.tolist() for k, _ in tx.iter_vectors("m", 4, after=1, batch=1)] == [[2], [3]]
        assert sorted(tx.vectors_of_keys([1, 3, 9], "m")) == [(1, ident(1), 1), (3, ident(3), 1)]
        assert tx.vectors_between("m", 2, 3) == {2: (ident(2), 1), 3: (ident(3), 1)}
        ids, versions, after = tx.vectors_after("m", 1, 4)
        assert sorted(zip(ids, versions)) == [(ident(2), 1), (ident(3), 1)] and after.shape == (2, 4)


def test_dropped_vectors_leave_service_but_stay_counted_until_cleared(storage):
    put(storage, memory(1), memory(2))
    with storage.transaction() as tx:
        tx.insert_vectors([ident(1), ident(2)], [1, 1], "m", unit_rows(2))
        tx.insert_vectors([ident(1)], [1], "n", unit_rows(1))
    with storage.transaction() as tx:
        tx.drop_vectors(ident(1), model="m")
    with storage.reading() as tx:
        assert tx.vector_stats("m")[0] == 1 and tx.vector_stats("n")[0] == 1
        assert tx.dropped_keys("m") == [1]
        assert tx.covered("m", 2) == 2  # live or dropped since
    with storage.transaction() as tx:
        tx.drop_vectors(ident(1))  # every model's
        tx.clear_dropped("m")
    with storage.reading() as tx:
        assert tx.dropped_keys("m") == [] and tx.dropped_keys("n") == [3]
        assert tx.covered("m", 2) == 1
    with storage.transaction() as tx:
        tx.clear_dropped()
        assert tx.dropped_keys("n") == []


def test_dropping_a_model_or_every_other_model_counts_what_it_dropped(storage):
    put(storage, memory(1))
    with storage.transaction() as tx:
        tx.insert_vectors([ident(1)], [1], "m", unit_rows(1))
        tx.insert_vectors([ident(1)], [1], "n", unit_rows(1))
        tx.insert_vectors([ident(1)], [1], "o", unit_rows(1))
        assert tx.drop_other_models("m") == 2
        assert tx.drop_model("m") == 1
        assert tx.vector_stats("m")[0] == 0


def test_a_live_memory_without_a_vector_of_the_model_is_pending(storage):
    put(storage, memory(1), memory(2), memory(3, tombstoned=True), memory(4, actor="bob"))
    with storage.transaction() as tx:
        tx.insert_vectors([ident(2)], [1], "m", unit_rows(1))
    with storage.reading() as tx:
        assert tx.count_pending("m") == 2
        assert [(i, v) for i, v, _, _ in tx.pending("m")] == [(ident(1), 1), (ident(4), 1)]
        assert [(i, t, d) for i, _, t, d in tx.pending("m", limit=1)] == [(ident(1), FACT, b"data 1 v1")]
        assert [i for i, *_ in tx.pending("m", ids=[ident(4)])] == [ident(4)]
        assert tx.maybe_pending("m") is True
        assert tx.count_pending("other") == 3


def test_vectors_for_returns_the_current_version_vectors_of_memories_passing_the_filters(storage):
    put(storage, memory(1, tags=["a"], versions=2), memory(2), memory(3, actor="bob", tags=["a"]))
    mat = unit_rows(4)
    with storage.transaction() as tx:
        tx.insert_vectors([ident(1), ident(1), ident(2), ident(3)], [1, 2, 1, 1], "m", mat)
    with storage.reading() as tx:
        ids, got = tx.vectors_for(Filters("alice", tags=("a",)), "m", 4)
        assert ids == [ident(1)] and np.allclose(got, mat[1:2])
        ids, got = tx.vectors_for(Filters("carol"), "m", 4)
        assert ids == [] and got.shape == (0, 4)


# -- learned weights, rate buckets, checkpoints -------------------------------------------------------------
def test_learned_weights_are_none_until_set_and_count_their_steps(storage):
    with storage.transaction() as tx:
        assert tx.weights("alice") is None
        tx.set_weights("alice", WEIGHTS, seq=2, at=T0)
        tx.set_weights("alice", (0.1, 0.2, 0.3, 0.2, 0.2), seq=4, at=T0 + timedelta(seconds=1))
        tx.set_weights("bob", WEIGHTS, seq=6, at=T0)
    with storage.reading() as tx:
        assert tx.weights("alice") == (0.1, 0.2, 0.3, 0.2, 0.2)
        assert tx.all_weights()["alice"] == {"weights": (0.1, 0.2, 0.3, 0.2, 0.2), "steps": 2, "seq": 4,
                                             "updated_at": T0 + timedelta(seconds=1)}
        assert set(tx.all_weights()) == {"alice", "bob"}


def test_a_rate_bucket_gives_its_burst_refills_and_forgives_a_clock_step_back(storage):
    with storage.transaction() as tx:
        take = lambda at, intent="i", actor="alice": tx.take_token(actor, intent, at, rate=1.0, burst=5.0)  # noqa: E731
        assert [take(T0) for _ in range(6)] == [True] * 5 + [False]
        assert take(T0 + timedelta(milliseconds=900)) is False
        assert take(T0 + timedelta(seconds=1)) is True
        assert take(T0, intent="other") is True and take(T0, actor="bob") is True
        assert take(T0 - timedelta(hours=1)) is True


def test_a_checkpoint_is_stored_replaced_and_listed(storage):
    row = {"actor": "alice", "intent": "i", "step": "s", "created_at": T0, "seq": 1, "record": b"r1"}
    with storage.transaction() as tx:
        assert tx.checkpoint("alice", "i", "s") is None
        tx.put_checkpoint(row)
        tx.put_checkpoint({**row, "seq": 2, "record": b"r2"})
        tx.put_checkpoint({**row, "step": "t", "seq": 3})
    with storage.reading() as tx:
        assert tx.checkpoint("alice", "i", "s") == {**row, "seq": 2, "record": b"r2"}
        assert tx.checkpoint("bob", "i", "s") is None
        assert set(tx.all_checkpoints()) == {("alice", "i", "s"), ("alice", "i", "t")}


# -- integrity queries ----------------------------------------------------------------------------------------
def test_a_sound_store_gives_the_integrity_queries_nothing_to_report(storage):
    put(storage, memory(1, frames=["about:project:x"], versions=2), memory(2))
    with storage.transaction() as tx:
        tx.append_journal([entry("write", ident(1)), entry("write", ident(2))])
        tx.add_postings([(ident(1), [5]), (ident(2), [6])])
        tx.insert_vectors([ident(1)], [2], "m", unit_rows(1))
    with storage.reading() as tx:
        assert tx.head_version_mismatches() == [] and tx.orphan_versions() == []
        assert tx.frame_mismatches() == [] and tx.journal_gaps() == []
        assert list(tx.vector_problems()) == []
        terms = {ident(1): [5], ident(2): [6]}
        hashes = [r for batch in tx.version_hashes(batch=2) for r in batch]
        data_of = {r[3]: r[0] for r in hashes}
        assert list(tx.lexical_mismatches(lambda t, d: terms[data_of[d]])) == []
        assert [(r[0], r[1]) for r in hashes] == [(ident(1), 1), (ident(1), 2), (ident(2), 1)]


def test_integrity_queries_name_heads_versions_postings_and_vectors_that_disagree(storage):
    bad_head, versions = memory(1)
    bad_head["current_version"] = 2  # says 2, has only 1
    put(storage, (bad_head, versions), memory(2), memory(3))
    with storage.transaction() as tx:
        tx.insert_version(memory(9)[1][0])  # a version without a head
        tx.add_postings([(ident(2), [5])])
        tx.insert_vectors([ident(2)], [7], "m", unit_rows(1))  # not the current version
    with storage.reading() as tx:
        assert [(r[0], r[4]) for r in tx.head_version_mismatches()] == [(ident(1), "current version is not the latest")]
        assert tx.orphan_versions() == [ident(9)]
        problems = dict(tx.lexical_mismatches(lambda t, d: [6]))
        assert problems[ident(2)] == "lexical postings do not match the current text"
        assert problems[ident(3)] == "no lexical postings"
        assert [(i, v) for i, v, _ in tx.vector_problems()] == [(ident(2), 7)]



def test_lexical_mismatches_name_only_the_memories_of_the_range_asked_for(storage):
    put(storage, memory(1), memory(2), memory(3), memory(4))
    with storage.transaction() as tx:
        tx.add_postings([(ident(1), [5]), (ident(2), [5, 5]), (ident(3), [6]), (ident(4), [5])])
    with storage.reading() as tx:
        # every memory's text should give [5]: 2 has the wrong frequency, 3 the wrong term
        assert list(tx.lexical_mismatches(lambda t, d: [5], strays=False)) == [
            (ident(2), "lexical postings do not match the current text"),
            (ident(3), "lexical postings do not match the current text")]
        assert [i for i, _ in tx.lexical_mismatches(lambda t, d: [5], after=ident(2), strays=False)] == [ident(3)]
        assert [i for i, _ in tx.lexical_mismatches(lambda t, d: [5], upto=ident(2), strays=False)] == [ident(2)]
        assert list(tx.lexical_mismatches(lambda t, d: [5], after=ident(3), upto=ident(4), strays=False)) == []


def test_by_memory_gives_each_memorys_journal_head_and_versions_together(storage):
    put(storage, memory(1, versions=2), memory(2))
    with storage.transaction() as tx:
        tx.append_journal([entry("write", ident(1), b"w1"), entry("write", ident(3), b"w3"),
                           entry("attest", "intent"), entry("update", ident(1), b"u1")])
    with storage.reading() as tx:
        runs = list(tx.by_memory(batch=2))
    journal = [row for j, _, _ in runs for row in j]
    heads = [h["id"] for _, hs, _ in runs for h in hs]
    versions = [(v["id"], v["version"]) for _, _, vs in runs for v in vs]
    assert journal == [(ident(1), 1, "write", b"w1"), (ident(1), 4, "update", b"u1"), (ident(3), 2, "write", b"w3")]
    assert heads == [ident(1), ident(2)]
    assert versions == [(ident(1), 1), (ident(1), 2), (ident(2), 1)]


def test_head_fields_are_the_documented_ones(storage):
    put(storage, memory(1))
    with storage.reading() as tx:
        assert tuple(tx.heads_by_ids([ident(1)], "alice")[0]) == HEAD_FIELDS


# -- sessions --------------------------------------------------------------------------------------------
def _in_session(n, session, **kw):
    head, versions = memory(n, **kw)
    head["session"] = session
    return head, versions


def test_sessions_count_turns_and_name_the_summary_and_a_session_filter_narrows(storage):
    put(storage, _in_session(1, "s1", tags=["turn"]), _in_session(2, "s1", tags=["turn"], at=T0 + timedelta(hours=1)),
        _in_session(3, "s1", tags=["session-summary"], at=T0 + timedelta(hours=2)),
        _in_session(4, "s2", tags=["turn"]), _in_session(5, "s2", tags=["session-summary"], tombstoned=True),
        _in_session(6, "s3", tags=["turn"], actor="bob"), memory(7, tags=["turn"]))
    with storage.reading() as tx:
        rows = {r["session"]: r for r in tx.sessions("alice", "turn", "session-summary")}
        assert set(rows) == {"s1", "s2"}
        assert rows["s1"] == {"session": "s1", "turns": 2, "first": T0, "last": T0 + timedelta(hours=2),
                              "summary": ident(3)}
        assert rows["s2"]["turns"] == 1 and rows["s2"]["summary"] is None
        assert tx.count_heads(Filters("alice", session="s1")) == 3
        assert tx.count_heads(Filters("alice", session="s1", tags=("turn",))) == 2


def grant_id(n: int) -> str:
    return f"01G{n:023d}"


def grant(n: int, granter: str, subagent: str, *, types=(), tags=(), expires=None, at=T0) -> dict:
    """A grant row as the engine hands it to ``Tx.insert_grant``."""
    return {"id": grant_id(n), "granter": granter, "subagent": subagent, "types": list(types), "tags": list(tags),
            "created_at": at, "expires_at": expires, "revoked_at": None, "revoked_by": None}


def test_grants_are_stored_listed_revoked_and_live_until_they_expire(storage):
    with storage.transaction() as tx:
        tx.insert_grant(grant(1, "alice", "bob", types=(FACT,), tags=("ops",), expires=T0 + timedelta(hours=2)))
        tx.insert_grant(grant(2, "alice", "carol"))
        tx.insert_grant(grant(3, "carol", "bob"))
    with storage.transaction() as tx:
        tx.revoke_grant(grant_id(3), at=T0 + timedelta(minutes=5), by="carol")
    with pytest.raises(CortexError), storage.transaction() as tx:
        tx.insert_grant(grant(1, "x", "y"))
    with storage.reading() as tx:
        assert [g["id"] for g in tx.live_grants("bob", T0 + timedelta(hours=1))] == [grant_id(1)]
        assert tx.live_grants("bob", T0 + timedelta(hours=2)) == []  # expired at its expiry
        assert tx.live_grants("bob", T0 + timedelta(hours=1))[0] == grant(
            1, "alice", "bob", types=(FACT,), tags=("ops",), expires=T0 + timedelta(hours=2))
        assert [g["id"] for g in tx.grants_of("carol")] == [grant_id(2), grant_id(3)]
        assert [g["id"] for g in tx.grants_of("alice")] == [grant_id(1), grant_id(2)]
        every = tx.all_grants()
        assert every[grant_id(3)]["revoked_at"] == T0 + timedelta(minutes=5)
        assert every[grant_id(3)]["revoked_by"] == "carol" and len(every) == 3


def test_a_viewers_scopes_show_the_granters_scoped_memories_they_cover_and_never_private_ones(storage):
    put(storage, memory(1, visibility="scoped", tags=("ops",)), memory(2, visibility="private", tags=("ops",)),
        memory(3, visibility="scoped", tags=("dev",)), memory(4, visibility="scoped", type_=GOAL, tags=("ops",)),
        memory(5, actor="carol", visibility="scoped", tags=("ops",)), memory(6, visibility="public"))
    bob = Viewer("bob", (("alice", (FACT,), ("ops", "x")),))
    with storage.reading() as tx:
        seen = {h["id"] for h in tx.heads_by_ids([ident(i) for i in range(1, 7)], bob)}
        assert seen == {ident(1), ident(6)}
        assert {h["id"] for h, _ in tx.iter_visible(bob)} == {ident(1), ident(6)}
        assert [h["id"] for h in tx.heads_by_prefix(ident(2), bob)] == []
        assert [h["id"] for h in tx.heads_by_prefix(ident(1), bob)] == [ident(1)]
        assert tx.count_heads(Filters("bob", scopes=bob.scopes)) == 2
        assert tx.count_heads(Filters("bob")) == 1  # without the scopes: the public one alone
        anything = Viewer("bob", (("alice", (), ()),))
        assert {h["id"] for h, _ in tx.iter_visible(anything)} == {ident(1), ident(3), ident(4), ident(6)}


def test_searching_answers_as_reading_does_from_a_current_snapshot_and_after_a_change(storage):
    """``searching()`` may answer from the search snapshot: the same answers as ``reading()``,
    whether the snapshot is current, missing or out of date."""
    mems = [memory(i, actor="alice" if i % 3 else "bob",
                   visibility="public" if i % 4 == 0 else "scoped" if i % 4 == 2 or i % 7 == 1 else "private",
                   type_=FACT if i % 2 else GOAL, tags=("a",) if i % 3 == 0 else ("a", "b") if i % 5 == 0 else (),
                   importance=1 + i % 9, at=T0 + timedelta(minutes=i), tombstoned=i == 7, versions=1 + i % 2)
            for i in range(1, 21)]
    put(storage, *mems)
    mat = unit_rows(20, dim=4, seed=3)
    with storage.transaction() as tx:
        tx.add_postings([(ident(i), [i % 4, 10 + i % 3, i % 4]) for i in range(1, 21)])
        tx.insert_vectors([ident(i) for i in range(1, 21)], [1 + i % 2 for i in range(1, 21)], "m", mat)
        tx.set_weights("alice", (0.3, 0.2, 0.2, 0.2, 0.1), seq=1, at=T0)
        tx.bump([ident(2), ident(3)], access=2, citations=1, at=T0 + timedelta(hours=3))
        tx.insert_grant(grant(1, "alice", "carol", tags=("a",), expires=T0 + timedelta(days=3)))
        tx.insert_grant(grant(2, "bob", "carol", types=(GOAL,)))
        tx.insert_grant(grant(3, "alice", "bob", expires=T0 + timedelta(days=1)))  # expired at the query's now
        tx.insert_grant(grant(4, "alice", "dave"))
        tx.revoke_grant(grant_id(4), at=T0 + timedelta(hours=1), by="alice")
    ids = [ident(i) for i in range(0, 23)]  # 0, 21 and 22 do not exist
    now = T0 + timedelta(days=2, microseconds=7)
    score = Scoring(now, 86400.0 * 7, (0.3, 0.2, 0.2, 0.2, 0.1))
    filters = [Filters(actor="alice"), Filters(actor="bob", types=(FACT,)), Filters(actor="alice", tags=("a", "b")),
               Filters(actor="alice", include_tombstoned=True), Filters(actor="carol"),
               Filters(actor="carol", scopes=(("alice", (), ("a",)), ("bob", (GOAL,), ()))),
               Filters(actor="bob", scopes=(("alice", (FACT, GOAL), ("a", "b")),), include_tombstoned=True),
               Filters(actor="dave", scopes=(("alice", (), ()),), tags=("a",)),
               Filters(actor="alice", scopes=(("bob", (FACT,), ()), ("nobody", (), ())))]

    def answers(view) -> list:
        with view() as tx:
            out: list = [tx.doc_count(), tx.count_heads(), tx.weights("alice"), tx.weights("bob"),
                         tx.model_dim("m"), tx.vector_stats("m"), tx.covered("m", 20), tx.covered("m", 5),
                         sorted(tx.vectors_of_keys([1, 5, 19, 20, 99], "m")), tx.search_data(ids),
                         tx.result_rows(ids, "short"), tx.result_rows(ids, "medium"),
                         *(tx.live_grants(a, now) for a in ("alice", "bob", "carol", "dave"))]
            for f in filters:
                hidden = tx.hidden_docs(f.viewer)
                post = tx.postings_of([0, 1, 2, 3, 10, 11, 12, 99])
                out += [tx.count_heads(f), tx.passing(ids, f), tx.candidates(ids, f, score),
                        tx.top_salience(f, score, 7), sorted(hidden.tolist()),
                        sorted(zip(post["term"].tolist(), post["doc"].tolist(), post["tf"].tolist())),
                        tx.doc_ids(list(range(0, 25))), tx.term_df([0, 1, 10, 99], hidden),
                        tx.doc_terms([1, 2, 5, 99])]
            return out

    want = answers(storage.reading)
    assert answers(storage.searching) == want  # no snapshot yet
    assert storage.refresh_snapshot()["action"] == "build"
    assert storage.snapshot_state() == "current"
    assert answers(storage.searching) == want
    # vector_keys_for may be None (the backend hands the vectors with vectors_for instead)
    with storage.searching() as tx:
        got = tx.vector_keys_for(Filters(actor="alice"), "m")
    ids_, keys = got if got is not None else ([], np.zeros(0, np.uint64))
    with storage.reading() as tx:
        ids2, _ = tx.vectors_for(Filters(actor="alice"), "m", 4)
        key_of = {i: k for k, i, v in tx.vectors_of_keys(list(range(1, 21)), "m")}
    if got is not None:
        assert sorted(ids_) == sorted(ids2) and all(key_of[i] == k for i, k in zip(ids_, keys.tolist()))
    # a change, made as the engine makes every change to a memory, with a journal entry naming it:
    # searching reads the store, or (a backend that keeps a delta of what changed since the
    # snapshot, as DuckDB's does, following the journal) the snapshot and its delta, with the same answers
    def journaled(tx, kind, *ns):
        tx.append_journal([entry(kind, ident(n)) for n in ns])

    head, versions = memory(30, tags=("a",))
    with storage.transaction() as tx:
        tx.insert_memories([head], versions)
        journaled(tx, "write", 30)
    assert storage.snapshot_state() in ("current", "stale")
    assert answers(storage.searching) == answers(storage.reading)
    with storage.transaction() as tx:  # an update, a bump and a forgotten memory, on top of the delta
        tx.update_head(ident(4), {"tags": ["b"], "importance": 9})
        tx.bump([ident(5), ident(30)], access=3, citations=2, at=T0 + timedelta(hours=5))
        tx.update_head(ident(6), {"tombstoned_at": T0 + timedelta(hours=6)})
        journaled(tx, "update_head", 4, 5, 30)
        journaled(tx, "tombstone", 6)
    assert answers(storage.searching) == answers(storage.reading)
    with storage.transaction() as tx:  # grants given and revoked on top of the delta, and a head made scoped
        tx.insert_grant(grant(5, "bob", "dave", tags=("b",)))
        tx.revoke_grant(grant_id(1), at=T0 + timedelta(hours=7), by="alice")
        tx.update_head(ident(8), {"visibility": "scoped", "tags": ["a"]})
        journaled(tx, "update_head", 8)
    assert answers(storage.searching) == answers(storage.reading)
