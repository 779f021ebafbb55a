"""LexicalSearch: memories found by their words. The engine hands each memory's search-text
terms (``memory.terms.text_terms``) and asks with the query's terms, each weighing 1."""

from __future__ import annotations

import math

import pytest

from cortexctl.memory.terms import terms, text_terms
from cortexctl.memory.terms import term_id as tid
from cortexctl.store.interface import Filters, Viewer
from tests.contract.conftest import FACT, GOAL, ident, memory, put

TEXTS = {
    1: "the deploy script restarts the api server",
    2: "deploy on fridays is forbidden",
    3: "the api server listens on port 8080",
    4: "lunch is at noon",
    5: "deploy on fridays is forbidden",  # the same text as 2
}


def query(text: str) -> dict[int, float]:
    return {tid(t): 1.0 for t in terms(text)}


def indexed(storage, texts: dict[int, str], **kw) -> None:
    put(storage, *(memory(n, **kw) for n in texts))
    with storage.transaction() as tx:
        tx.add_terms([(ident(n), text_terms(t)) for n, t in texts.items()])


def test_search_terms_ranks_the_memories_holding_the_query_words_best_first(storage):
    indexed(storage, TEXTS)
    with storage.reading() as tx:
        got = tx.search_terms(query("api server"), Filters("alice"), 10)
        assert {i for i, _ in got[:2]} == {ident(1), ident(3)}  # both words: above those with one or none
        assert ident(4) not in {i for i, _ in got}
        assert all(s > 0 for _, s in got)
        assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
        assert len(tx.search_terms(query("api server deploy"), Filters("alice"), 2)) == 2
        assert tx.search_terms(query("kubernetes"), Filters("alice"), 10) == []
        assert tx.search_terms({}, Filters("alice"), 10) == []


def test_equal_scores_come_in_id_order(storage):
    indexed(storage, TEXTS)
    with storage.reading() as tx:
        got = tx.search_terms(query("fridays forbidden"), Filters("alice"), 10)
    assert [i for i, _ in got][:2] == [ident(2), ident(5)]
    assert got[0][1] == got[1][1]


def test_search_terms_returns_only_memories_passing_the_filters(storage):
    put(storage, memory(1), memory(2, type_=GOAL), memory(3, actor="bob"), memory(4, tombstoned=True),
        memory(5, tags=["ops"]), memory(6, actor="bob", visibility="public"))
    with storage.transaction() as tx:
        tx.add_terms([(ident(n), text_terms("rotate the signing keys")) for n in range(1, 7)])
    words = query("signing keys")
    with storage.reading() as tx:
        def ids(filters):
            return sorted(i for i, _ in tx.search_terms(words, filters, 10))

        assert ids(Filters("alice")) == [ident(1), ident(2), ident(5), ident(6)]
        assert ids(Filters("alice", types=(GOAL,))) == [ident(2)]
        assert ids(Filters("alice", tags=("ops",))) == [ident(5)]
        assert ids(Filters("alice", include_tombstoned=True)) == [ident(n) for n in (1, 2, 4, 5, 6)]
        assert ids(Filters("bob")) == [ident(3), ident(6)]


def test_scores_count_only_what_the_viewer_may_see(storage):
    """Another actor's private words change none of alice's scores: a score reveals nothing."""
    indexed(storage, TEXTS)
    words = query("deploy api")
    with storage.reading() as tx:
        before = tx.search_terms(words, Filters("alice"), 10)
    put(storage, *(memory(n, actor="bob") for n in range(20, 26)))
    with storage.transaction() as tx:
        tx.add_terms([(ident(n), text_terms("deploy deploy api")) for n in range(20, 26)])
    with storage.reading() as tx:
        assert tx.search_terms(words, Filters("alice"), 10) == before
        assert {ident(n) for n in range(20, 26)} <= {i for i, _ in tx.search_terms(words, Filters("bob"), 20)}
        # a grant's scope shows bob's scoped memories to carol, and only those count for her
        assert tx.search_terms(words, Filters("carol", scopes=Viewer("carol", (("bob", (), ()),)).scopes), 10) == []


def test_replaced_postings_drop_the_old_words(storage):
    indexed(storage, {1: "the api server", 2: "the api client"})
    with storage.transaction() as tx:
        tx.replace_terms(ident(1), text_terms("a garden of roses"))
    with storage.reading() as tx:
        assert [i for i, _ in tx.search_terms(query("server"), Filters("alice"), 10)] == []
        assert [i for i, _ in tx.search_terms(query("api"), Filters("alice"), 10)] == [ident(2)]
        assert [i for i, _ in tx.search_terms(query("roses"), Filters("alice"), 10)] == [ident(1)]


def test_text_twins_are_live_memories_of_the_actor_and_type_with_as_many_terms_one_of_them_given(storage):
    """write --dedupe looks for "the same text" among these few, then compares the texts."""
    same = "deploy on fridays is forbidden"
    put(storage, memory(1), memory(2), memory(3, type_=GOAL), memory(4, actor="bob"), memory(5, tombstoned=True),
        memory(6), memory(7))
    with storage.transaction() as tx:
        tx.add_terms([(ident(n), text_terms(same)) for n in (1, 2, 3, 4, 5)]
                        + [(ident(6), text_terms(same + " kubernetes")), (ident(7), text_terms("forbidden fruit tastes"))])
    term_ids = text_terms(same)
    with storage.reading() as tx:
        assert tx.text_twins("alice", FACT, len(term_ids), min(term_ids)) == [ident(1), ident(2)]
        assert tx.text_twins("alice", GOAL, len(term_ids), min(term_ids)) == [ident(3)]
        assert tx.text_twins("bob", FACT, len(term_ids), min(term_ids)) == [ident(4)]
        assert tx.text_twins("alice", FACT, len(term_ids), tid("lunch")) == []


def _bm25(tf: int, n_docs: int, df: int) -> float:
    """BM25 with b = 0 and k1 1.2 for one query term of weight 1 (``store/lexical.py``), by hand."""
    return math.log1p((n_docs - df + 0.5) / (df + 0.5)) * tf * 2.2 / (tf + 1.2)


def test_score_terms_scores_term_lists_in_hand_by_bm25_over_the_stored_statistics(storage):
    """find --as-of scores a memory's text of then, which the postings no longer hold."""
    indexed(storage, TEXTS)  # "deploy" in 3 of 5 docs, "api" in 2, "lunch" in 1
    docs = [("then", text_terms("deploy the api deploy")), ("none", text_terms("a garden of roses")),
            ("rare", text_terms("lunch"))]
    with storage.reading() as tx:
        got = tx.score_terms(query("deploy api lunch"), docs, "alice")
        assert set(got) == {"then", "none", "rare"}
        assert got["then"] == pytest.approx(_bm25(2, 5, 3) + _bm25(1, 5, 2))
        assert got["rare"] == pytest.approx(_bm25(1, 5, 1))
        assert got["none"] == 0.0
        assert tx.score_terms(query("deploy"), [], "alice") == {}
        assert tx.score_terms({}, docs, "alice") == {"then": 0.0, "none": 0.0, "rare": 0.0}


def test_score_terms_counts_only_what_the_viewer_may_see(storage):
    indexed(storage, TEXTS)
    docs = [("then", text_terms("deploy the api"))]
    with storage.reading() as tx:
        before = tx.score_terms(query("deploy api"), docs, Viewer("alice"))
    put(storage, *(memory(n, actor="bob") for n in range(20, 26)))
    with storage.transaction() as tx:
        tx.add_terms([(ident(n), text_terms("deploy deploy api")) for n in range(20, 26)])
    with storage.reading() as tx:
        assert tx.score_terms(query("deploy api"), docs, Viewer("alice")) == before
        # bob sees his six and none of alice's five: deploy and api are in all of them, so each scores low
        assert tx.score_terms(query("deploy api"), docs, "bob")["then"] == pytest.approx(2 * _bm25(1, 6, 6))
