"""find --near borrows from a memory's session: a memory the lexical lane found lends part of its
lexical score to the memories just before and after it in its session (``engine/find.py``,
``session_context``), so the reply to a turn that holds the query's words is found with it. On both
backends, through the CLI in this process."""

from __future__ import annotations

from datetime import datetime, timezone

import orjson
import pytest

TURNS = [  # (session, text), written in this order
    ("s1", "User: which retry limit should the billing worker use?"),
    ("s1", "Assistant: five, with a backoff doubling from one second"),
    ("s1", "User: thanks, and the invoice email template?"),
    ("s2", "User: the mail queue is slow again"),
    ("s2", "Assistant: raise its backoff to one minute"),
    (None, "The backoff of the cron poller is thirty seconds"),
]


def _import(run, turns=TURNS, **extra) -> dict:
    lines = [orjson.dumps({"type": "event", "text": t, **({"session": s} if s else {}), **extra}) for s, t in turns]
    r = run("import", "-", "--json", input=b"\n".join(lines) + b"\n")
    assert r.code == 0, r
    return r.json()

def _find(run, query: str, *args) -> list[dict]:
    """The results, each text without the event's kind ("observation: ")."""
    r = run("find", "--near", query, "--json", "-k", "20", *args)
    assert r.code in (0, 1), r
    results = r.json()["results"]
    for x in results:
        x["text"] = x["text"].removeprefix("observation: ")
    return results


def _texts(results) -> list[str]:
    return [r["text"] for r in results]


def test_the_reply_to_a_matching_turn_is_found_through_its_session(backend_cli):
    _import(backend_cli)
    got = _find(backend_cli, "billing worker retry limit")
    assert got[0]["text"] == TURNS[0][1]
    reply = next(r for r in got if r["text"] == TURNS[1][1])
    assert "context" in reply["lanes"] and "lexical" not in reply["lanes"]
    assert reply["matched"] is True  # shown when piped: it is there for the turn it answers
    assert _texts(got).index(TURNS[1][1]) == 1  # right after the turn it answers


def test_a_memory_whose_neighbour_matched_outranks_an_equal_match_without_one(backend_cli):
    _import(backend_cli)
    got = _find(backend_cli, "billing worker backoff")
    texts = _texts(got)
    # three memories hold "backoff" alone; the billing reply also sits next to the billing question
    assert texts.index(TURNS[1][1]) < texts.index(TURNS[4][1])
    assert texts.index(TURNS[1][1]) < texts.index(TURNS[5][1])
    lent = {r["text"]: r for r in got}
    assert lent[TURNS[1][1]]["score"] > lent[TURNS[5][1]]["score"]


def test_only_the_same_session_lends_and_memories_without_one_borrow_nothing(backend_cli):
    turns = [("s1", "the lighthouse keeper retired"), ("s1", "the garden needs rain"),
             ("s2", "the mail queue is slow again"), (None, "a note about tulips"),
             ("s2", "raise its backoff to one minute")]
    _import(backend_cli, turns)
    got = {r["text"]: r for r in _find(backend_cli, "mail queue slow")}
    # s2's reply borrows; s1's last turn, written just before, is of another session; the note
    # written in between has no session: it borrows nothing and does not stand between s2's turns
    assert [t for t, r in got.items() if "context" in r["lanes"]] == [turns[4][1]]
    assert "lexical" not in got[turns[4][1]]["lanes"]


def test_neighbours_are_taken_among_the_memories_that_pass_the_filters(backend_cli):
    turns = [("s1", "User: where do the nightly backups go?"), ("s1", "Assistant: checking the config"),
             ("s1", "Assistant: to the cold storage bucket in eu-west")]
    _import(backend_cli, turns[:1], tags=["ops"])
    _import(backend_cli, turns[1:2], tags=["chatter"])
    _import(backend_cli, turns[2:], tags=["ops"])
    got = _texts(_find(backend_cli, "nightly backups", "--tag", "ops"))
    # the reply tagged chatter does not pass --tag ops: the next turn that does is the neighbour
    assert got == [turns[0][1], turns[2][1]]
    got = _texts(_find(backend_cli, "nightly backups"))
    assert got[:2] == [turns[0][1], turns[1][1]]


def test_another_actors_private_turn_is_skipped_and_never_shown(backend_cli):
    backend_cli("import", "-", input=orjson.dumps({"type": "event", "text": "User: what port does the api use?",
                                                   "session": "s1"}) + b"\n")
    backend_cli("import", "-", "--actor", "bob", input=orjson.dumps(
        {"type": "event", "text": "Bob: a private aside", "session": "s1"}) + b"\n")
    backend_cli("import", "-", input=orjson.dumps({"type": "event", "text": "Assistant: 8080, behind the proxy",
                                                   "session": "s1"}) + b"\n")
    got = _texts(_find(backend_cli, "api port"))
    assert got == ["User: what port does the api use?", "Assistant: 8080, behind the proxy"]
    assert "Bob: a private aside" in _texts(_find(backend_cli, "api port", "--actor", "bob"))


@pytest.mark.parametrize("backend_store", ["duckdb"], indirect=True)
def test_find_as_of_ranks_by_the_lanes_alone(backend_cli):
    _import(backend_cli)
    now = _find(backend_cli, "billing worker retry limit")
    at = datetime.now(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")
    then = _find(backend_cli, "billing worker retry limit", "--as-of", at)
    assert any("context" in r["lanes"] for r in now)
    assert not any("context" in r["lanes"] for r in then)
    assert then[0]["text"] == now[0]["text"] == TURNS[0][1]


def test_a_neighbour_two_places_away_borrows_less_and_three_places_away_nothing(backend_cli):
    turns = [("s1", "pebbles on the shore"), ("s1", "the blue heron nests by the pier"), ("s1", "it left at dawn"),
             ("s1", "a storm came later"), ("s1", "boats stayed in port")]
    _import(backend_cli, turns)
    got = {r["text"]: r for r in _find(backend_cli, "blue heron")}
    lent = [t for _, t in turns if "context" in got[t]["lanes"]]
    assert lent == [turns[0][1], turns[2][1], turns[3][1]]  # 1 before, 1 and 2 after; not 3 after
    assert got[turns[1][1]]["score"] > got[turns[2][1]]["score"] > got[turns[3][1]]["score"] > got[turns[4][1]]["score"]
