"""find without --near: filters, salience order (importance, recency), -k, forms, tombstones, actor isolation."""

from __future__ import annotations

import pytest

from cortexctl import Cortex


def _populated(store):
    alice = Cortex(store=store, actor="alice")
    bob = Cortex(store=store, actor="bob")
    ids = {
        "f1": alice.write("fact", "first fact", tags=["ops"], frames=["build:repo:acme/api"]).id,
        "p1": alice.write("preference", "dark mode", tags=["ui", "ops"]).id,
        "g1": alice.write("goal", "ship v2", frames=["deliver:repo:acme/api"]).id,
        "pub": alice.write("fact", "public fact", visibility="public").id,
        "bob": bob.write("fact", "bob's secret").id,
        "gone": alice.write("fact", "forgotten fact", tags=["ops"]).id,
    }
    alice.forget(ids["gone"], reason="obsolete")
    return ids


@pytest.fixture
def populated(store_once):
    """Memories of alice and bob (one forgotten): written once per session, copied per test."""
    return store_once(_populated)


def _ids(run):
    assert run.code == (0 if run.json()["matched"] else 1), run  # find exits like grep
    return [r["id"] for r in run.json()["results"]]


def test_find_lists_newest_first_and_hides_tombstoned(cli, populated):
    assert _ids(cli("find", "--json")) == [populated[k] for k in ("pub", "g1", "p1", "f1")]


def test_find_include_tombstoned_shows_forgotten_memories(cli, populated):
    got = cli("find", "--include-tombstoned", "-k", "100", "--json").json()["results"]
    gone = [g for g in got if g["id"] == populated["gone"]]
    assert gone and gone[0]["tombstoned"] is True
    assert gone[0]["salience"] == 0 and got[-1]["id"] == populated["gone"]  # a forgotten memory has salience 0


@pytest.mark.parametrize("args, expected", [
    (["--type", "fact"], ["pub", "f1"]),
    (["--type", "goal", "--type", "preference"], ["g1", "p1"]),
    (["--tag", "ops"], ["p1", "f1"]),
    (["--tag", "ops", "--tag", "ui"], ["p1"]),
    (["--frame", "build:repo:acme/api"], ["f1"]),
    (["--frame", "deliver"], ["g1"]),
    (["--frame", "build:repo"], ["f1"]),
    (["--frame", "build:file"], []),
    (["-k", "2"], ["pub", "g1"]),
])
def test_find_filters_combine(cli, populated, args, expected):
    assert _ids(cli("find", *args, "--json")) == [populated[k] for k in expected]


def test_find_never_shows_another_actors_private_memories(cli, populated):
    assert populated["bob"] not in _ids(cli("find", "-k", "100", "--json"))
    bob_sees = _ids(cli("find", "-k", "100", "--json", "--actor", "bob"))
    assert bob_sees == [populated["bob"], populated["pub"]]


def test_find_renders_the_requested_form(cli, populated):
    got = cli("find", "--type", "goal", "--form", "full", "--json").json()["results"][0]
    assert got["text"].startswith("goal: ship v2\nstatus: active")
    assert cli("find", "--type", "goal", "--form", "medium", "--json").json()["results"][0]["text"].startswith("goal: ship v2")


def test_find_jsonl_prints_one_object_per_line_and_plain_output_is_tab_separated(cli, populated):
    assert len(cli("find", "--jsonl").jsonl()) == 4
    plain = cli("find", "--type", "goal").out.splitlines()
    assert plain == [f"cortex://m/{populated['g1']}\tgoal\t[active] ship v2"]


def test_find_on_a_store_that_does_not_exist_says_so_and_creates_nothing(cli, store):
    r = cli("find", "--json")
    assert r.code == 3 and "no store at" in r.err and r.out == "", r
    assert not store.exists()
