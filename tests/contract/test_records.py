"""Records: memories, their heads and numbered versions, as every backend keeps them."""

from __future__ import annotations

from datetime import timedelta

import pytest

from cortexctl.errors import IntegrityError
from cortexctl.memory.types import MAX_COUNT
from cortexctl.store.interface import HEAD_FIELDS, SALIENCE_FIELDS, Filters
from tests.contract.conftest import GOAL, SCORING, T0, ident, memory, put


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


def test_head_fields_are_the_documented_ones(storage):
    put(storage, memory(1))
    with storage.reading() as tx:
        assert tuple(tx.heads_by_ids([ident(1)], "alice")[0]) == HEAD_FIELDS


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


def test_a_prefix_finds_a_memory_by_the_end_of_its_id_too(storage):
    """Short refs are the ends of IDs."""
    put(storage, memory(123), memory(223), memory(5, actor="bob"))
    with storage.reading() as tx:
        assert [h["id"] for h in tx.heads_by_prefix(ident(123)[-3:], "alice")] == [ident(123)]
        assert [h["id"] for h in tx.heads_by_prefix("23", "alice")] == [ident(123), ident(223)]
        assert tx.heads_by_prefix(ident(5)[-4:], "alice") == []  # bob's private one stays unseen


def test_asking_about_no_memories_answers_nothing(storage):
    put(storage, memory(1))
    filters = Filters("alice")
    with storage.transaction() as tx:
        tx.insert_memories([], [])
        tx.bump([], access=1, citations=1, at=T0)
        tx.add_terms([])
        assert tx.heads_by_ids([], "alice") == [] and tx.heads_of([]) == {} and tx.existing_ids([]) == set()
        assert tx.stored_hashes([]) == {} and tx.current_versions([]) == {} and tx.current_data({}) == {}
        assert tx.passing([], filters) == {} and tx.live_versions([]) == {}
        assert tx.candidates([], filters, SCORING) == {} and tx.result_rows([], "short") == {}
        assert tx.search_data([]) == {} and tx.pending("m", ids=[]) == [] and tx.ref_counts([]) == {}
        assert tx.top_salience(filters, SCORING, 0) == [] and tx.search_terms({1: 1.0}, filters, 0) == []
    with storage.reading() as tx:
        assert tx.count_heads() == 1


def test_heads_of_gives_every_existing_head_whoever_owns_it(storage):
    """merge compares its own heads with a bundle's, whoever owns them."""
    mine, bobs = memory(1, tags=["a"], versions=2), memory(2, actor="bob")
    put(storage, mine, bobs)
    with storage.transaction() as tx:
        tx.update_head(ident(2), {"importance": 8})
    with storage.reading() as tx:
        got = tx.heads_of([ident(1), ident(2), ident(9)])
        assert tx.heads_of([]) == {}
    assert got == {ident(1): mine[0], ident(2): {**bobs[0], "importance": 8}}
    assert all(tuple(h) == HEAD_FIELDS for h in got.values())


def test_ref_counts_count_the_ids_of_any_actor_that_start_or_end_with_each_part(storage):
    """Short refs: an ID's last characters name it when no other ID starts or ends with them."""
    put(storage, memory(1), memory(11, actor="bob"), memory(21), memory(121, actor="carol"))
    with storage.reading() as tx:
        counts = tx.ref_counts(["01", "11", "21", "99"])
        assert counts["01"] == 4  # every ID starts with "01" (ident(1) ends with it too: still one ID)
        assert counts["11"] == 1
        assert counts["21"] == 2  # ident(21) and ident(121)
        assert counts.get("99", 0) == 0
        assert tx.ref_counts([]) == {}
        assert tx.ref_counts([ident(21)[-3:]]) == {"021": 1}


def test_inserting_a_memory_whose_id_is_taken_is_an_integrity_error(storage):
    put(storage, memory(1))
    with pytest.raises(IntegrityError):
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
