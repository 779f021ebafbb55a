"""remember, remember --user, outcome, pattern write and pattern reinforce (SPEC §8)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import assert_clean_error, assert_store_verifies

STEPS = ("--name", "rotate deploy key", "--trigger", "deploy key expired",
         "--step", "vault write keys/deploy", "--step", "restart the runner")


def test_remember_writes_a_world_fact(cli, cx):
    r = cli("remember", "The staging DB is db-staging.internal:5432", "--json")
    assert r.code == 0, r
    doc = r.json()
    assert doc["action"] == "written" and doc["type"] == "fact"
    m = cx.show(doc["uri"])
    assert m.data["subject"] == "cortex://knowledge/world"
    assert m.tags == [] and m.provenance == {"via": "remember"}


def test_remember_user_deduplicates_by_normalized_statement(cli, cx, store):
    first = cli("remember", "--user", "Prefers answers in French", "--json").json()
    again = cli("remember", "--user", "  prefers answers in  FRENCH. ", "--json").json()
    assert first["action"] == "written" and again["action"] == "touched"
    assert again["uri"] == first["uri"]
    m = cx.show(first["uri"])
    assert m.tags == ["user"] and m.data["subject"] == "cortex://knowledge/user"
    assert m.access_count == 1 and m.last_used is not None
    plain = cli("remember", "--user", "prefers answers in french")
    assert plain.code == 0 and plain.out.strip() == first["uri"] and "touched" in plain.err
    # a world fact with the same words is another memory
    other = cli("remember", "Prefers answers in French", "--json").json()
    assert other["uri"] != first["uri"]
    assert_store_verifies(store)


def test_remember_user_does_not_touch_a_forgotten_fact(cli):
    first = cli("remember", "--user", "Lives in Lyon", "--json").json()
    assert cli("forget", first["uri"], "--reason", "moved").code == 0
    again = cli("remember", "--user", "lives in lyon", "--json").json()
    assert again["action"] == "written" and again["uri"] != first["uri"]


def test_remember_user_ignores_other_actors(cli):
    bob = cli("remember", "--user", "Likes tea", "--actor", "bob", "--json").json()
    mine = cli("remember", "--user", "Likes tea", "--json").json()
    assert mine["action"] == "written" and mine["uri"] != bob["uri"]


def test_outcome_writes_an_event(cli, cx, store):
    doc = cli("outcome", "Rotated the deploy key", "--status", "partial", "--intent", "rot-1", "--json").json()
    m = cx.show(doc["uri"])
    assert m.type == "event" and m.data["outcome"] == "partial" and m.data["kind"] == "outcome"
    assert m.provenance == {"via": "outcome", "intent": "rot-1"}
    assert_store_verifies(store)


def test_pattern_write_from_flags_and_spec(cli, cx, tmp_path):
    doc = cli("pattern", "write", *STEPS, "--gotcha", "old key cached", "--coverage", "4", "--json").json()
    m = cx.show(doc["uri"])
    assert m.data["statement"].startswith("cortex.pattern.v1:")
    spec = json.loads(m.data["statement"][len("cortex.pattern.v1:"):])
    assert spec["steps"] == ["vault write keys/deploy", "restart the runner"]
    assert spec["gotchas"] == ["old key cached"] and m.data["coverage"] == 4
    f = tmp_path / "spec.json"
    f.write_text(json.dumps({"name": "n", "trigger": "t", "steps": ["s"]}))
    assert cli("pattern", "write", "--spec", f"@{f}", "--json").json()["coverage"] == 1
    via_stdin = cli("pattern", "write", "--spec", "-", "--trigger", "other", "--json", input=f.read_text()).json()
    assert json.loads(cx.show(via_stdin["uri"]).data["statement"][18:])["trigger"] == "other"


def test_pattern_reinforce_versus_new_candidate(cli, cx, store):
    first = cli("pattern", "reinforce", *STEPS, "--json").json()
    assert (first["action"], first["coverage"], first["strength"]) == ("written", 1, 0.3)
    assert cx.show(first["uri"]).confidence == 0.5
    second = cli("pattern", "reinforce", "--name", "Rotate deploy key.", "--trigger", "deploy key expired",
                 "--step", "vault write keys/deploy", "--step", "restart the runner", "--json").json()
    assert (second["action"], second["uri"], second["coverage"]) == ("reinforced", first["uri"], 2)
    assert second["strength"] == pytest.approx(0.37)
    assert cx.show(first["uri"]).version == 2
    other = cli("pattern", "reinforce", *STEPS, "--step", "page the on-call", "--json").json()
    assert other["action"] == "written" and other["uri"] != first["uri"]
    assert_store_verifies(store)


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (("remember", ""), 2, "text"),
        (("remember", "   "), 2, "text"),
        (("outcome", "x", "--status", "meh"), 2, "--status"),
        (("outcome", "x"), 2, "--status"),
        (("outcome", "", "--status", "success"), 2, "TEXT"),
        (("outcome", "x", "--status", "success", "--intent", ""), 2, "intent"),
        (("pattern", "write", "--name", "n"), 10, "steps"),
        (("pattern", "write", "--step", "s"), 10, "name"),
        (("pattern", "write", "--spec", "{nope"), 10, "not valid JSON"),
        (("pattern", "write", "--spec", "[1]"), 10, "JSON object"),
        (("pattern", "write", "--spec", '{"name": "n", "steps": ["s"], "colour": 1}'), 10, "colour"),
        (("pattern", "write", "--spec", "@/nonexistent/spec.json"), 2, "no such file"),
        (("pattern", "write", "--name", "n", "--step", "s", "--strength", "2"), 10, "strength"),
        (("pattern", "reinforce", "--spec", '{"name": 1, "steps": ["s"]}'), 10, "name"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(cli, store, args, code, needle):
    cli("remember", "seed")  # a store exists
    r = cli(*args)
    assert_clean_error(r, code)
    assert needle.lower() in r.err.lower()
    assert len(cli("find", "--jsonl").jsonl()) == 1
