"""find --as-of and show --as-of: the store as it stood at a record time, on both backends.

One history is built through the engine on a fixed clock (an hour a step, in the past), then read
back through the command line at times between the steps.
"""

from __future__ import annotations

import io
import json
from datetime import datetime, timedelta

import pytest

from cortexctl import Cortex
from cortexctl.engine import salience
from cortexctl.engine.results import FindQuery
from tests import tamper
from tests.conftest import assert_clean_error, clean_environment, run_in_process

T0 = datetime(2026, 1, 5, 9, 0)
BACKENDS = ["duckdb", "postgres"]


def at(hours: float) -> str:
    return (T0 + timedelta(hours=hours)).isoformat() + "Z"


def _history(store) -> dict[str, str]:
    """The steps, one an hour from T0; name -> memory ID."""
    clock = [T0]

    def by(actor: str) -> Cortex:
        cx = Cortex(store=store, actor=actor)
        cx.context.clock = lambda: clock[0]
        return cx

    def step(hours: float) -> None:
        clock[0] = T0 + timedelta(hours=hours)

    alice = by("alice")
    ids = {"key": alice.write("fact", "orchid deploy key rotates monthly", tags=["ops"], visibility="scoped").id}
    ids["host"] = alice.write("fact", "orchid staging host db-stg-2", tags=["db"]).id
    ids["note"] = alice.write("fact", "orchid scoped database note", tags=["db"], visibility="scoped").id
    step(1)
    alice.update(ids["key"], "orchid deploy key rotates weekly")  # 1h: version 2
    step(2)
    alice.tag(ids["host"], add=["ops"])  # 2h
    step(3)
    alice.forget(ids["host"], reason="decommissioned")  # 3h
    step(4)
    g = alice.grant("bob", tags=["ops"])  # 4h
    step(5)
    alice.unforget(ids["host"])  # 5h
    step(6)
    alice.revoke(g.id)  # 6h
    step(7)
    alice.attest("rel-1", "success", [ids["key"]])  # 7h: access and citations up, weights learn
    step(8)
    alice.grant("bob", tags=["db"], expires="30m")  # 8h, until 8h30
    step(9)
    alice.head(ids["key"], importance=9)  # 9h
    step(10)
    alice.head(ids["host"], add_frames=["build:repo:github.com/acme/api"])  # 10h
    step(11)
    alice.tag(ids["host"], add=["later"])  # 11h: the host changes again
    return ids


def _location(backend: str, base) -> str:
    if backend == "duckdb":
        return str(base / "store")
    from tests.pg import store_uri

    return store_uri("asof")


@pytest.fixture(scope="module", params=BACKENDS)
def history_once(request, tmp_path_factory):
    """The history, built once per backend for the tests that only read it."""
    base = tmp_path_factory.mktemp("asof")
    location = _location(request.param, base)
    with clean_environment(base):
        ids = _history(location)
    return location, ids, request.param


@pytest.fixture
def built(history_once):
    location, ids, backend = history_once

    def run(*args):
        return run_in_process(location, *args)

    return run, ids, backend, location


def _found(run, when: str, *args, actor: str = "alice") -> dict[str, dict]:
    r = run("find", "--as-of", when, "-k", "50", "--actor", actor, "--json", *args)
    assert r.code in (0, 1), r
    doc = r.json()
    assert r.code == (0 if doc["matched"] else 1), r
    return {h["id"]: h for h in doc["results"]}


def test_find_as_of_gives_the_versions_texts_and_tags_current_then(built):
    run, ids, _, _ = built
    first = _found(run, at(0.5))
    assert set(first) == {ids["key"], ids["host"], ids["note"]}
    assert (first[ids["key"]]["version"], first[ids["key"]]["text"]) == (1, "orchid deploy key rotates monthly")
    assert first[ids["host"]]["tags"] == ["db"]
    later = _found(run, at(2.5))
    assert (later[ids["key"]]["version"], later[ids["key"]]["text"]) == (2, "orchid deploy key rotates weekly")
    assert later[ids["host"]]["tags"] == ["db", "ops"]
    assert set(_found(run, at(2.5), "--tag", "ops")) == {ids["key"], ids["host"]}
    assert set(_found(run, at(0.5), "--tag", "ops")) == {ids["key"]}


def test_full_form_as_of_is_the_version_of_then(built):
    run, ids, _, _ = built
    r = run("find", "--as-of", at(0.5), "--tag", "ops", "--form", "full", "--json")
    assert r.code == 0, r
    assert "monthly" in r.json()["results"][0]["text"]


def test_tombstones_and_unforget_as_of(built):
    run, ids, _, _ = built
    assert ids["host"] in _found(run, at(2.5))
    assert ids["host"] not in _found(run, at(3.5))
    gone = _found(run, at(3.5), "--include-tombstoned")[ids["host"]]
    assert gone["tombstoned"] is True
    back = _found(run, at(5.5))[ids["host"]]
    assert back["tombstoned"] is False


def test_grants_as_of_decide_what_a_sub_agent_saw(built):
    run, ids, _, _ = built
    assert _found(run, at(3.5), actor="bob") == {}  # before the grant
    assert set(_found(run, at(4.5), actor="bob")) == {ids["key"]}  # ops: the scoped key; host is private
    assert _found(run, at(6.5), actor="bob") == {}  # revoked at 6h
    assert set(_found(run, at(8.25), actor="bob")) == {ids["note"]}  # the db grant, before it expired
    assert _found(run, at(8.75), actor="bob") == {}  # expired at 8h30


def test_near_as_of_matches_the_words_of_then(built):
    run, ids, _, _ = built
    then = _found(run, at(0.5), "--near", "monthly")
    assert [i for i, h in then.items() if h["matched"]] == [ids["key"]]
    assert "lexical" in then[ids["key"]]["lanes"] and then[ids["key"]]["version"] == 1
    now = _found(run, at(1.5), "--near", "monthly")
    assert not any(h["matched"] for h in now.values())  # the key rotates weekly by then


def test_counters_importance_and_salience_as_of(built):
    run, ids, _, _ = built
    before = run("show", ids["key"], "--as-of", at(6.5), "--json").json()
    after = run("show", ids["key"], "--as-of", at(7.5), "--json").json()
    assert (before["salience"]["citations"], before["salience"]["access_count"]) == (0, 0)
    assert after["salience"]["citations"] == 1 and after["salience"]["access_count"] >= 1
    assert after["salience"]["last_used"] == at(7)
    assert (after["importance"], run("show", ids["key"], "--as-of", at(9.5), "--json").json()["importance"]) == (5, 9)
    # salience at T, under the weights of then: the defaults before the attest
    hit = _found(run, at(6.5))[ids["key"]]
    head = {"tombstoned_at": None, "updated_at": T0 + timedelta(hours=1), "last_used": None, "importance": 5,
            "access_count": 0, "citations": 0, "confidence": 1.0}
    want = salience.score(salience.factors(head, T0 + timedelta(hours=6.5)), salience.DEFAULT_WEIGHTS)
    assert hit["salience"] == pytest.approx(want, abs=1e-6)


def test_learned_weights_as_of_are_those_of_then(built):
    run, ids, _, location = built
    with Cortex(store=location, actor="alice").store.reading() as tx:
        learned = tx.weights("alice")
    assert learned is not None and tuple(learned) != salience.DEFAULT_WEIGHTS
    hit = _found(run, at(7.5))[ids["key"]]
    head = {"tombstoned_at": None, "updated_at": T0 + timedelta(hours=1), "last_used": T0 + timedelta(hours=7),
            "importance": 5, "access_count": 1, "citations": 1, "confidence": 1.0}
    want = salience.score(salience.factors(head, T0 + timedelta(hours=7.5)), learned)
    assert hit["salience"] == pytest.approx(want, abs=1e-6)


def test_find_as_of_says_which_journal_entry_it_stands_at(built):
    run, ids, _, _ = built
    doc = run("find", "--as-of", at(0.5), "--json").json()
    assert doc["as_of"] == {"at": at(0.5), "seq": 3}  # the three writes
    piped = run("find", "--as-of", at(0.5))
    assert piped.code == 0 and f"as of {at(0.5)} (journal entry 3)" in piped.err
    assert "as_of" not in run("find", "--json").json()


def test_show_as_of_gives_the_memory_as_it_stood(built):
    run, ids, _, _ = built
    doc = run("show", ids["key"], "--as-of", at(0.5), "--json").json()
    assert (doc["version"], doc["current_version"], doc["data"]["statement"]) == (1, 1, "orchid deploy key rotates monthly")
    assert doc["as_of"]["at"] == at(0.5)
    assert run("show", ids["key"], "--as-of", at(1.5), "--json").json()["version"] == 2
    assert run("show", ids["key"], "--as-of", at(1.5), "--version", "1", "--json").json()["version"] == 1
    gone = run("show", ids["host"], "--as-of", at(3.5), "--json").json()
    assert gone["tombstoned"] is True and gone["tombstone"]["reason"] == "decommissioned"
    assert run("show", ids["host"], "--as-of", at(5.5), "--json").json()["tombstoned"] is False
    human = run("show", ids["key"], "--as-of", at(0.5))
    assert human.code == 0 and "(version 1 of 1)" in human.out and "journal entry 3" in human.out


def test_show_as_of_a_version_it_did_not_have_yet_is_exit_3(built):
    run, ids, _, _ = built
    assert_clean_error(run("show", ids["key"], "--as-of", at(0.5), "--version", "2"), 3)


def test_show_as_of_before_it_was_written_or_seen_is_exit_3_revealing_nothing(built):
    run, ids, _, _ = built
    early = run("show", ids["key"], "--as-of", at(-1))
    assert_clean_error(early, 3)
    assert "did not exist" in early.err
    # bob sees the note now (live db grant? no: it expired), so give a case he can resolve today
    r = run("show", ids["note"], "--as-of", at(8.25), "--actor", "bob")
    assert_clean_error(r, 3)  # today bob cannot see it at all: resolving fails, as for show


@pytest.mark.parametrize("backend", BACKENDS)
def test_show_as_of_needs_the_actor_to_have_seen_it_then(backend, tmp_path):
    location = _location(backend, tmp_path)
    ids = _history(location)
    Cortex(store=location, actor="alice").grant("bob", tags=["db"])  # now: bob sees the note

    def run(*args):
        return run_in_process(location, *args)

    assert run("show", ids["note"], "--actor", "bob").code == 0
    assert run("show", ids["note"], "--as-of", at(8.25), "--actor", "bob").code == 0  # the first db grant
    seen_not = run("show", ids["note"], "--as-of", at(7.5), "--actor", "bob")
    assert_clean_error(seen_not, 3)
    assert seen_not.err == run("show", ids["note"], "--as-of", at(-1), "--actor", "bob").err.replace(at(-1), at(7.5))


@pytest.mark.parametrize("when, code", [
    ("yesterday-ish", 2),
    ("2026-13-45", 2),
    ("2999-01-01T00:00:00Z", 2),
    ("", 2),
])
@pytest.mark.parametrize("command", ["find", "show"])
def test_bad_as_of_is_one_line_exit_2_and_writes_nothing(built, when, code, command):
    run, ids, backend, location = built
    before = _journal_length(location, backend)
    args = ("find",) if command == "find" else ("show", ids["key"])
    r = run(*args, "--as-of", when)
    assert_clean_error(r, code)
    assert "--as-of" in r.err
    assert _journal_length(location, backend) == before


def test_as_of_before_the_first_entry_finds_nothing(built):
    run, ids, _, _ = built
    r = run("find", "--as-of", at(-1), "--json")
    assert r.code == 1 and r.json()["results"] == [] and r.json()["as_of"]["seq"] == 0
    r = run("find", "--as-of", at(-1), "--near", "orchid")
    assert r.code == 1 and r.out == ""


def test_as_of_after_the_last_entry_is_find_now(built):
    run, ids, _, _ = built
    now = run("find", "--json").json()["results"]
    then = run("find", "--as-of", "now", "--json").json()["results"]
    assert [(h["id"], h["version"], h["tags"]) for h in then] == [(h["id"], h["version"], h["tags"]) for h in now]


def _journal_length(location: str, backend: str) -> int:
    if backend == "duckdb":
        return tamper.rows(location, "SELECT count(*) FROM journal")[0][0]
    with Cortex(store=location, actor="x").store.reading() as tx:
        return tx.journal_bounds()[0]


def test_frame_filters_as_of_read_the_frames_of_then(built):
    run, ids, _, _ = built
    assert _found(run, at(9.5), "--frame", "build:repo") == {}
    assert set(_found(run, at(10.5), "--frame", "build:repo")) == {ids["host"]}  # changed since: replayed
    assert set(_found(run, at(10.5), "--frame", "build:repo:github.com/acme/api", "--near", "orchid")) == {ids["host"]}
    assert _found(run, at(10.5), "--frame", "build:repo:github.com/acme/web") == {}
    assert set(_found(run, at(11.5), "--frame", "build")) == {ids["host"]}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_supersede_is_seen_through_time_the_old_fact_before_it_the_new_one_after(backend, tmp_path):
    location = _location(backend, tmp_path)
    clock = [T0]
    cx = Cortex(store=location, actor="alice")
    cx.context.clock = lambda: clock[0]
    old = cx.write("fact", "the badger deploy key rotates monthly").id
    clock[0] = T0 + timedelta(hours=2)
    new = cx.write("fact", "the badger deploy key rotates weekly", supersedes=old).id

    def ids(*args) -> dict[str, dict]:
        r = run_in_process(location, "find", "--near", "badger deploy key", "--json", *args)
        assert r.code == 0, r
        return {h["id"]: h for h in r.json()["results"]}

    assert set(ids()) == {new}  # now: the old one has ended
    before = ids("--as-of", at(1))  # then: only the old one, not yet superseded
    assert set(before) == {old}
    assert before[old]["superseded_by"] is None and before[old]["valid_to"] is None
    after = ids("--as-of", at(3), "--include-superseded")
    assert after[old]["superseded_by"] == new and after[new]["supersedes"] == old
    assert set(ids("--as-of", at(3))) == {new}
    shown = run_in_process(location, "show", old, "--as-of", at(1), "--json").json()
    assert shown["superseded_by"] is None


@pytest.mark.parametrize("backend", BACKENDS)
def test_lanes_led_by_changed_memories_still_give_the_best_of_the_rest(backend, tmp_path):
    """Every lane's best now are memories that changed after T: find --as-of T asks the lanes again,
    for more, until enough unchanged memories remain, and answers as find did at T."""
    location = _location(backend, tmp_path)
    clock = [T0]
    cx = Cortex(store=location, actor="alice")
    cx.context.clock = lambda: clock[0]
    lines = [{"type": "fact", "text": f"orchid note {i:03d} with several other filler words in it", "tags": ["keep"]}
             for i in range(10)]
    lines += [{"type": "fact", "text": f"orchid orchid orchid {i:03d}", "tags": ["other"]} for i in range(110)]
    cx.import_jsonl(io.BytesIO("".join(json.dumps(line) + "\n" for line in lines).encode()))
    strong = {h.id for h in cx.find(FindQuery(k=200, near="orchid", tags=["other"]))}
    assert len(strong) == 110

    def found(*args) -> list[str]:
        r = run_in_process(location, "find", "--near", "orchid", "--tag", "keep", "-k", "10", "--json", *args)
        assert r.code == 0, r
        return [h["id"] for h in r.json()["results"]]

    then = found()
    assert len(then) == 10 and not set(then) & strong
    clock[0] = T0 + timedelta(hours=1)
    for id_ in sorted(strong):
        cx.tag(id_, add=["keep"])
    assert found()[0] in strong  # now the changed memories lead every lane
    assert found("--as-of", at(0.5)) == then


@pytest.mark.parametrize("backend", BACKENDS)
def test_with_an_embedding_endpoint_as_of_reads_the_stored_vectors_of_versions_still_current(
        backend, tmp_path, embed_server, monkeypatch):
    """An endpoint (a costly embedder) is asked only for the texts of then that have no stored vector:
    a memory whose head alone changed after T keeps the vector of its version of then; an updated one
    does not. The similarities are those find gave at T."""
    for k, v in embed_server.env().items():
        monkeypatch.setenv(k, v)
    location = _location(backend, tmp_path)
    clock = [T0]
    cx = Cortex(store=location, actor="alice")
    cx.context.clock = lambda: clock[0]
    tagged = cx.write("fact", "heron deploy host rotates monthly").id
    updated = cx.write("fact", "heron staging host is db-stg-2").id
    cx.write("fact", "heron lunch host on fridays")

    def found(*args) -> dict[str, float]:
        r = run_in_process(location, "find", "--near", "heron deploy host", "-k", "10", "--json", *args,
                           env=embed_server.env())
        assert r.code == 0, r
        return {h["id"]: h["similarity"] for h in r.json()["results"]}

    then = found()
    clock[0] = T0 + timedelta(hours=1)
    cx.tag(tagged, add=["ops"])
    cx.update(updated, "heron staging host is db-stg-9 in another rack")
    del embed_server.requests[:]
    past = found("--as-of", at(0.5))
    asked = [t for r in embed_server.requests for t in ([r["body"]["input"]] if isinstance(r["body"]["input"], str)
                                                         else r["body"]["input"])]
    assert "heron staging host is db-stg-2" in asked  # the updated memory's text of then: no vector of it kept
    assert "heron deploy host rotates monthly" not in asked  # its version of then is current: its vector read
    assert len(asked) == 2  # and the query
    assert set(past) == set(then)
    for id_, sim in then.items():
        assert past[id_] == pytest.approx(sim, abs=1e-5)
