"""Listing: memories chosen by ``Filters`` and ordered by salience, and the lookups every lane's
candidates go through."""

from __future__ import annotations

from datetime import timedelta

import pytest

from cortexctl.store.interface import Filters, Viewer
from tests.contract.conftest import FACT, GOAL, SCORING, T0, ident, in_session, memory, put


def test_count_heads_counts_everything_or_what_passes_the_filters(storage):
    put(storage, memory(1, tags=["a"]), memory(2), memory(3, actor="bob"))
    with storage.reading() as tx:
        assert tx.count_heads() == 3
        assert tx.count_heads(Filters("alice")) == 2
        assert tx.count_heads(Filters("alice", tags=("a",))) == 1


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
        assert tx.live_versions([ident(1), ident(2), ident(3)]) == {ident(1): 2}


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


def test_search_data_gives_the_type_and_data_of_each_current_version(storage):
    put(storage, memory(1, versions=2), memory(2, type_=GOAL, actor="bob"))
    with storage.reading() as tx:
        assert tx.search_data([ident(1), ident(2), ident(9)]) == {
            ident(1): (FACT, b"data 1 v2"), ident(2): (GOAL, b"data 2 v1")}
        assert tx.search_data([]) == {}


def test_sessions_count_turns_and_name_the_summary_and_a_session_filter_narrows(storage):
    put(storage, in_session(1, "s1", tags=["turn"]), in_session(2, "s1", tags=["turn"], at=T0 + timedelta(hours=1)),
        in_session(3, "s1", tags=["session-summary"], at=T0 + timedelta(hours=2)),
        in_session(4, "s2", tags=["turn"]), in_session(5, "s2", tags=["session-summary"], tombstoned=True),
        in_session(6, "s3", tags=["turn"], actor="bob"), memory(7, tags=["turn"]))
    with storage.reading() as tx:
        rows = {r["session"]: r for r in tx.sessions("alice", "turn", "session-summary")}
        assert set(rows) == {"s1", "s2"}
        assert rows["s1"] == {"session": "s1", "turns": 2, "first": T0, "last": T0 + timedelta(hours=2),
                              "summary": ident(3)}
        assert rows["s2"]["turns"] == 1 and rows["s2"]["summary"] is None
        assert tx.count_heads(Filters("alice", session="s1")) == 3
        assert tx.count_heads(Filters("alice", session="s1", tags=("turn",))) == 2
        assert tx.sessions("carol", "turn", "session-summary") == []


def test_a_viewers_scopes_show_the_sessions_of_the_scoped_memories_they_cover(storage):
    put(storage, in_session(1, "s1", tags=["turn"], visibility="scoped"), in_session(2, "s1", tags=["turn"]),
        in_session(3, "s2", tags=["turn"], visibility="scoped", type_=GOAL))
    with storage.reading() as tx:
        assert tx.sessions("bob", "turn", "summary") == []
        (row,) = tx.sessions(Viewer("bob", (("alice", (FACT,), ()),)), "turn", "summary")
        assert (row["session"], row["turns"]) == ("s1", 1)  # the private turn of s1 is not counted


def test_session_neighbours_are_the_memories_before_and_after_in_the_session_by_id(storage):
    put(storage, in_session(1, "s1"), in_session(2, "s2"), in_session(3, "s1"), in_session(4, "s1", tags=["x"]),
        in_session(5, "s1", actor="bob"), in_session(6, "s1", tombstoned=True), in_session(7, "s1"), memory(8))
    with storage.reading() as tx:
        got = tx.session_neighbours([ident(3), ident(1), ident(7), ident(2), ident(8)], Filters("alice"))
        # bob's private 5 and the forgotten 6 are not alice's to see: 4 and 7 are neighbours
        assert got == {ident(1): ((), (ident(3),)), ident(3): ((ident(1),), (ident(4),)),
                       ident(7): ((ident(4),), ()), ident(2): ((), ())}  # 8 has no session: left out
        two = tx.session_neighbours([ident(3), ident(7)], Filters("alice"), 2)
        assert two == {ident(3): ((ident(1),), (ident(4), ident(7))), ident(7): ((ident(4), ident(3)), ())}
        # among the memories passing the filters only: 4 alone holds the tag x
        assert tx.session_neighbours([ident(4)], Filters("alice", tags=("x",))) == {ident(4): ((), ())}
        assert tx.session_neighbours([ident(7)], Filters("alice", include_tombstoned=True)) == {
            ident(7): ((ident(6),), ())}
        assert tx.session_neighbours([ident(5)], Filters("alice")) == {}  # not visible: not answered
        assert tx.session_neighbours([ident(5)], Filters("bob"), 3) == {ident(5): ((), ())}
        assert tx.session_neighbours([], Filters("alice")) == {}


def test_both_backends_give_the_same_salience_to_the_last_bit_at_microsecond_times(tmp_path):
    """Recency is computed from each time in epoch seconds (microseconds over 1e6): PostgreSQL's SQL
    must give the very doubles DuckDB's gives, or the two backends could order ties differently."""
    import random

    from tests.contract.conftest import _open

    r = random.Random(5)
    mems = [memory(n, importance=r.randint(0, 10), confidence=r.random(),
                   at=T0 - timedelta(days=r.uniform(0, 400), microseconds=r.randint(0, 999_999)))
            for n in range(1, 61)]
    got = {}
    for name in ("duckdb", "postgres"):
        storage = _open(name, tmp_path, f"bits_{name}")
        put(storage, *mems)
        with storage.reading() as tx:
            got[name] = tx.top_salience(Filters("alice"), SCORING, 60)
    assert len(got["duckdb"]) == 60
    assert got["postgres"] == got["duckdb"]
