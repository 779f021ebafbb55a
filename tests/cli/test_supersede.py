"""Valid time and supersedes: write --supersedes, update --supersede, supersede, --set valid_from/valid_to,
find's --include-superseded and --valid-at, show and history, verify's checks and bad input, on both
backends (a DuckDB directory and a PostgreSQL schema: tests/pg.py; ``backend_cli`` in tests/conftest.py)."""

from __future__ import annotations

import pytest

from tests import tamper
from tests.conftest import assert_clean_error


def _ok(r):
    assert r.code == 0, r
    return r


def _id(uri: str) -> str:
    return uri.strip().rsplit("/", 1)[-1]


def _journal(run) -> int:
    return _ok(run("verify", "--json")).json()["journal_entries"]


def _found(run, *args) -> dict[str, dict]:
    r = run("find", "--json", *args)
    assert r.code in (0, 1), r
    return {h["id"]: h for h in r.json()["results"]}


def test_write_supersedes_hides_the_old_memory_from_find_and_links_both_ways(backend_cli):
    run = backend_cli
    old = _id(_ok(run("write", "fact", "The deploy key rotates monthly", "--tag", "ops")).out)
    new = _id(_ok(run("write", "fact", "The deploy key rotates weekly", "--supersedes", old)).out)
    assert set(_found(run)) == {new}
    both = _found(run, "--include-superseded")
    assert set(both) == {old, new}
    assert both[old]["superseded_by"] == new and both[old]["ended"] is True
    assert both[new]["supersedes"] == old and both[new]["ended"] is False and both[new]["superseded_by"] is None
    assert both[old]["valid_to"] == both[new]["valid_from"] is not None
    near = _ok(run("find", "--near", "deploy key", "--include-superseded")).out
    assert f"superseded by {new}" in near and "monthly" in near
    shown_old, shown_new = (_ok(run("show", i, "--json")).json() for i in (old, new))
    assert shown_old["superseded_by"] == new and shown_new["supersedes"] == old
    assert shown_old["data"]["statement"] == "The deploy key rotates monthly"  # nothing deleted
    assert f"superseded by: cortex://m/{new}" in _ok(run("show", old)).out
    chain = _ok(run("history", new, "--json")).json()["chain"]
    assert [(c["id"], c["this"]) for c in chain] == [(old, False), (new, True)]
    assert _ok(run("verify")).code == 0


def test_update_supersede_writes_a_new_memory_with_the_old_heads_fields(backend_cli):
    run = backend_cli
    old = _id(_ok(run("write", "fact", "Staging is db-stg-1", "--tag", "db", "--importance", "8",
                      "--visibility", "public", "--session", "s-1")).out)
    out = _ok(run("update", old, "Staging is db-stg-2", "--supersede")).out.strip()
    assert "/v/" not in out
    new = _id(out)
    assert new != old
    shown = _ok(run("show", new, "--json")).json()
    assert (shown["tags"], shown["importance"], shown["visibility"], shown["session"], shown["version"]) == \
        (["db"], 8, "public", "s-1", 1)
    assert shown["data"]["statement"] == "Staging is db-stg-2" and shown["supersedes"] == old
    assert _ok(run("show", old, "--json")).json()["current_version"] == 1  # no version written on the old one
    assert set(_found(run)) == {new}
    assert _ok(run("verify")).code == 0


def test_supersede_links_two_memories_once_and_again_changes_nothing(backend_cli):
    run = backend_cli
    a = _id(_ok(run("write", "fact", "Builds run on runner-1")).out)
    b = _id(_ok(run("write", "fact", "Builds run on runner-2")).out)
    first = _ok(run("supersede", a, "--by", b, "--json")).json()
    assert first["changed"] is True and first["superseded_by"] == b
    entries = _journal(run)
    again = _ok(run("supersede", a, "--by", b, "--json")).json()
    assert again["changed"] is False and again["seq"] is None
    assert _journal(run) == entries
    assert set(_found(run)) == {b} and set(_found(run, "--include-superseded")) == {a, b}
    assert _ok(run("verify")).code == 0


def test_valid_times_are_head_fields_and_find_valid_at_keeps_the_memories_valid_then(backend_cli):
    run = backend_cli
    q1 = _id(_ok(run("write", "fact", "Office hours 9-5", "--set", "valid_from=2025-01-01",
                     "--set", "valid_to=2025-07-01")).out)
    q2 = _id(_ok(run("write", "fact", "Office hours 8-4", "--set", "valid_from=2025-07-01")).out)
    always = _id(_ok(run("write", "fact", "The office is in Lyon")).out)
    assert set(_found(run)) == {q2, always}  # q1 ended in 2025
    assert set(_found(run, "--valid-at", "2025-03-01")) == {q1, always}
    assert set(_found(run, "--valid-at", "2025-07-01T00:00:00Z")) == {q2, always}  # valid_to is exclusive
    assert set(_found(run, "--valid-at", "2024-12-31")) == {always}
    before = _journal(run)
    r = _ok(run("update", q1, "--set", "valid_to=2030-01-01", "--json")).json()
    assert r["version"] == 1 and r["changed"] is True  # a head change: no new version
    assert _journal(run) == before + 1
    assert _ok(run("show", q1, "--json")).json()["valid_to"] == "2030-01-01T00:00:00Z"
    assert len(_ok(run("history", q1, "--json")).json()["versions"]) == 1
    assert set(_found(run)) == {q1, q2, always}
    assert _ok(run("update", q1, "--set", "valid_to=2030-01-01", "--json")).json()["changed"] is False
    assert _journal(run) == before + 1
    assert _ok(run("verify")).code == 0


def _bad_cases(run):
    """name -> (args, exit code), over a small store made here."""
    mine = _id(_ok(run("write", "fact", "Mine")).out)
    other = _id(_ok(run("write", "fact", "Other")).out)
    gone = _id(_ok(run("write", "fact", "Gone")).out)
    _ok(run("forget", gone, "--reason", "wrong"))
    a = _id(_ok(run("write", "fact", "A")).out)
    b = _id(_ok(run("write", "fact", "B", "--supersedes", a)).out)
    late = _id(_ok(run("write", "fact", "Late", "--set", "valid_from=2099-01-01")).out)
    theirs = _id(_ok(run("write", "fact", "Theirs", "--actor", "bob")).out)
    theirs_too = _id(_ok(run("write", "fact", "Theirs too", "--actor", "bob", "--visibility", "public")).out)
    return {
        "itself": (("supersede", mine, "--by", mine), 2),
        "old forgotten": (("supersede", gone, "--by", mine), 1),
        "new forgotten": (("supersede", mine, "--by", gone), 1),
        "write supersedes a forgotten one": (("write", "fact", "X", "--supersedes", gone), 1),
        "already superseded by another": (("supersede", a, "--by", other), 10),
        "write supersedes a superseded one": (("write", "fact", "X", "--supersedes", a), 10),
        "cycle": (("supersede", b, "--by", a), 10),
        "old begins after the new one": (("write", "fact", "X", "--supersedes", late), 10),
        "not the actor's": (("supersede", theirs_too, "--by", mine), 8),
        "not visible": (("supersede", theirs, "--by", mine), 3),
        "unknown ref": (("supersede", "01ZZZZZZZZZZZZZZZZZZZZZZZZ", "--by", mine), 3),
        "interval ends before it begins": (("write", "fact", "X", "--set", "valid_from=2025-02-01",
                                            "--set", "valid_to=2025-01-01"), 10),
        "update ends before it begins": (("update", late, "--set", "valid_to=2098-01-01"), 10),
        "unparsable valid time": (("write", "fact", "X", "--set", "valid_from=next tuesday"), 10),
        "unparsable valid-at": (("find", "--valid-at", "soon"), 2),
        "update supersede of a superseded one": (("update", a, "Y", "--supersede"), 10),
    }


def test_bad_input_is_one_line_the_documented_exit_and_nothing_written(backend_cli):
    run = backend_cli
    for name, (args, code) in _bad_cases(run).items():
        before = _journal(run)
        got = run(*args)
        assert_clean_error(got, code)
        assert _journal(run) == before, name
    assert _ok(run("verify")).code == 0


def _verify_problems(run) -> list[str]:
    r = run("verify", "--json")
    assert r.code == 7, r
    return [p["message"] for p in r.json()["problems"] if p["check"] == "valid"]


@pytest.mark.parametrize("tampering, expected", [
    ("one way", "does not link back"),
    ("self", "links the memory to itself"),
    ("cycle", "form a cycle"),
    ("interval", "ends"),
])
def test_verify_finds_broken_links_and_intervals(backend_cli, backend_store, tampering, expected):
    run = backend_cli
    location = backend_store
    a = _id(_ok(run("write", "fact", "A")).out)
    b = _id(_ok(run("write", "fact", "B", "--supersedes", a)).out)
    if tampering == "one way":
        tamper.set_field(location, a, "superseded_by", None)
    elif tampering == "self":
        tamper.set_field(location, b, "supersedes", b)
    elif tampering == "cycle":
        tamper.set_field(location, b, "superseded_by", a)
        tamper.set_field(location, a, "supersedes", b)
    else:
        tamper.set_field(location, b, "valid_to", "2001-01-01 00:00:00")
    problems = _verify_problems(run)
    assert any(expected in p for p in problems), problems


def test_changes_lists_a_supersede_as_superseded(backend_cli):
    run = backend_cli
    old = _id(_ok(run("write", "fact", "The deploy key rotates monthly")).out)
    new = _id(_ok(run("write", "fact", "The deploy key rotates weekly", "--supersedes", old)).out)
    got = _ok(run("changes", "--since", "1h", "--json")).json()["changes"]
    assert [(c["kind"], c["id"]) for c in got] == [("written", old), ("written", new), ("superseded", old)]
