"""find --near lifts a memory the query's words matched when its time falls on a date the query
names (``engine/dates.py``, ``engine/find.py``: ``W_DATE``): an event's ``occurred_at``, a fact's
``observed_at``, else the day it was created."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import orjson


def _import(cli, *lines: dict) -> None:
    r = cli("import", "-", input=b"".join(orjson.dumps(x) + b"\n" for x in lines))
    assert r.code == 0, r


def _find(cli, query: str) -> dict[str, dict]:
    r = cli("find", "--near", query, "--json", "-k", "20")
    assert r.code in (0, 1), r
    return {x["text"].removeprefix("observation: "): x for x in r.json()["results"]}


def _order(cli, query: str) -> list[str]:
    return list(_find(cli, query))


def test_an_event_on_the_named_month_outranks_an_equal_match_of_another(cli):
    _import(cli, {"type": "event", "text": "the billing deploy went slow", "data": {"occurred_at": "2023-06-10"}},
            {"type": "event", "text": "the billing deploy went fine", "data": {"occurred_at": "2023-05-03"}})
    fine, slow = "the billing deploy went fine", "the billing deploy went slow"
    may, june = _find(cli, "billing deploy in May 2023"), _find(cli, "billing deploy on 10 June, 2023")
    assert list(may)[:2] == [fine, slow] and list(june)[:2] == [slow, fine]  # whichever came first without
    assert may[fine]["score"] - may[slow]["score"] > 0.3 and june[slow]["score"] - june[fine]["score"] > 0.3
    other = _find(cli, "billing deploy in 2024")  # no lift: neither is of 2024
    assert abs(other[fine]["score"] - other[slow]["score"]) < 0.1


def test_a_memory_the_words_did_not_match_is_not_lifted_by_its_date(cli):
    _import(cli, {"type": "event", "text": "the billing deploy went slow", "data": {"occurred_at": "2023-06-10"}},
            {"type": "event", "text": "lunch with the whole team", "data": {"occurred_at": "2023-05-03"}})
    got = _find(cli, "billing deploy in May 2023")
    assert next(iter(got)) == "the billing deploy went slow"
    assert got["lunch with the whole team"]["score"] < 0.1  # its salience alone


def test_a_fact_is_dated_by_observed_at_and_a_memory_without_a_time_by_its_creation(cli):
    now = datetime.now(timezone.utc)
    _import(cli, {"type": "fact", "text": "the cache hit rate is 91 percent", "data": {"observed_at": "2023-05-20"}},
            {"type": "fact", "text": "the cache hit rate is 75 percent"},
            {"type": "fact", "text": "the cache hit rate is 60 percent",
             "created_at": (now - timedelta(days=1)).isoformat().replace("+00:00", "Z")})
    assert _order(cli, "cache hit rate in May 2023")[0] == "the cache hit rate is 91 percent"
    assert _order(cli, "cache hit rate yesterday")[0] == "the cache hit rate is 60 percent"
    assert _order(cli, "cache hit rate today")[0] == "the cache hit rate is 75 percent"
