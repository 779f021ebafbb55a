"""changes --since T [--until T]: what happened to the memories an actor may see, from the journal,
on both backends. The history is written through the library on fixed clocks (an hour apart), then
read through the CLI in this process with absolute times, and through the library on a fixed clock
for ages (2h, 1d)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from cortexctl import Cortex
from cortexctl.engine import changes as changes_mod
from cortexctl.memory import codec
from tests.conftest import assert_clean_error, assert_refused, run_in_process

T0 = datetime(2026, 11, 20, 9, 0, 0)


def at(hours: float) -> str:
    """T0 + ``hours`` as the RFC 3339 text a user types."""
    return (T0 + timedelta(hours=hours)).isoformat() + "Z"



def _as(backend_store: str, actor: str, hours: float) -> Cortex:
    cx = Cortex(store=backend_store, actor=actor)
    cx.context.clock = lambda: T0 + timedelta(hours=hours)
    return cx


@pytest.fixture
def history(backend_store) -> dict[str, str]:
    """One change an hour from T0+1h; name -> memory ID.

    1 alice writes `key`; 2 updates it; 3 tags it; 4 writes `note`; 5 forgets it; 6 un-forgets it;
    7 bob writes a private memory and 8 a public one; 9 carol a scoped one (tag ops); 10 alice
    remembers a user fact and 11 repeats it (a use: no change); 12 alice sets `key`'s importance."""
    ids = {}
    ids["key"] = _as(backend_store, "alice", 1).write("fact", "The deploy key rotates monthly", tags=["ops"]).id
    _as(backend_store, "alice", 2).update(ids["key"], "The deploy key rotates weekly")
    _as(backend_store, "alice", 3).tag(ids["key"], add=["keys"])
    ids["note"] = _as(backend_store, "alice", 4).write("fact", "Staging is db-stg-2").id
    _as(backend_store, "alice", 5).forget(ids["note"], reason="moved to db-stg-3")
    _as(backend_store, "alice", 6).unforget(ids["note"])
    ids["bob_private"] = _as(backend_store, "bob", 7).write("fact", "bob's private pager code").id
    ids["bob_public"] = _as(backend_store, "bob", 8).write("fact", "The office closes at six", visibility="public").id
    ids["carol_scoped"] = _as(backend_store, "carol", 9).write("fact", "Carol's runbook for deploys", tags=["ops"],
                                                          visibility="scoped").id
    ids["user"] = _as(backend_store, "alice", 10).remember("Prefers answers in French", user=True).id
    assert _as(backend_store, "alice", 11).remember("Prefers answers in French", user=True).action == "touched"
    _as(backend_store, "alice", 12).head(ids["key"], importance=9)
    return ids


def _ok(r):
    assert r.code == 0, r
    return r


def _rows(doc) -> list[tuple]:
    return [(c["kind"], c["id"], c["version"], c["actor"], c["text"]) for c in doc["changes"]]


def test_each_kind_of_change_is_listed_oldest_first_with_its_version_actor_and_text(backend_cli, history):
    doc = _ok(backend_cli("changes", "--since", at(0), "--until", at(24), "--json")).json()
    key, note, pub = history["key"], history["note"], history["bob_public"]
    assert _rows(doc) == [
        ("written", key, 1, "alice", "The deploy key rotates monthly"),
        ("updated", key, 2, "alice", "The deploy key rotates weekly"),
        ("changed", key, None, "alice", "The deploy key rotates weekly"),
        ("written", note, 1, "alice", "Staging is db-stg-2"),
        ("forgotten", note, None, "alice", "Staging is db-stg-2"),
        ("unforgotten", note, None, "alice", "Staging is db-stg-2"),
        ("written", pub, 1, "bob", "The office closes at six"),
        ("written", history["user"], 1, "alice", "cortex://knowledge/user: Prefers answers in French"),
        ("changed", key, None, "alice", "The deploy key rotates weekly"),
    ]
    assert (doc["count"], doc["more"], doc["since"], doc["until"]) == (9, False, at(0), at(24))
    by_kind = {c["kind"]: c for c in doc["changes"]}
    assert by_kind["forgotten"]["reason"] == "moved to db-stg-3"
    assert [c["fields"] for c in doc["changes"] if c["kind"] == "changed"] == [["tags"], ["importance"]]
    assert [c["at"] for c in doc["changes"]][:3] == [at(1), at(2), at(3)]
    seqs = [c["seq"] for c in doc["changes"]]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert all(c["uri"] == f"cortex://m/{c['id']}" for c in doc["changes"])


def test_the_span_leaves_since_out_and_takes_until_in(backend_cli, history):
    doc = _ok(backend_cli("changes", "--since", at(2), "--until", at(4), "--json")).json()
    assert [(c["kind"], c["at"]) for c in doc["changes"]] == [("changed", at(3)), ("written", at(4))]
    one = _ok(backend_cli("changes", "--since", at(1.5), "--until", at(2), "--json")).json()
    assert [(c["kind"], c["version"]) for c in one["changes"]] == [("updated", 2)]


def test_another_actors_private_memory_never_shows_and_a_grant_opens_a_scoped_one(backend_cli, backend_store, history):
    def ids(actor: str) -> set[str]:
        doc = _ok(backend_cli("changes", "--since", at(0), "--until", at(24), "--actor", actor, "--json")).json()
        return {c["id"] for c in doc["changes"]}

    seen = ids("alice")
    assert history["bob_private"] not in seen and history["carol_scoped"] not in seen
    assert history["bob_public"] in seen
    assert history["bob_private"] in ids("bob")  # the owner sees its own
    # a grant of carol's ops scope to alice: carol's scoped memory's write shows for alice, now
    Cortex(store=backend_store, actor="carol").grant("alice", tags=["ops"])
    seen = ids("alice")
    assert history["carol_scoped"] in seen and history["bob_private"] not in seen
    assert history["carol_scoped"] not in ids("dave")


def test_kind_and_limit_narrow_the_list_and_more_says_when_others_follow(backend_cli, history):
    doc = _ok(backend_cli("changes", "--since", at(0), "--until", at(24), "--kind", "forgotten", "--kind",
                          "unforgotten", "--json")).json()
    assert [c["kind"] for c in doc["changes"]] == ["forgotten", "unforgotten"]
    doc = _ok(backend_cli("changes", "--since", at(0), "--until", at(24), "--kind", "written", "--limit", "2",
                          "--json")).json()
    assert [c["text"] for c in doc["changes"]] == ["The deploy key rotates monthly", "Staging is db-stg-2"]
    assert (doc["count"], doc["more"]) == (2, True)
    r = _ok(backend_cli("changes", "--since", at(0), "--until", at(24), "--limit", "2"))
    assert (len(r.out.splitlines()), r.err) == (2, "cortexctl: the first 2 changes; more follow (raise --limit to see them)\n")
    doc = _ok(backend_cli("changes", "--since", at(0), "--until", at(24), "--limit", "9", "--json")).json()
    assert (doc["count"], doc["more"]) == (9, False)


@pytest.mark.parametrize("n", [2 * changes_mod._BATCH + 300, pytest.param(12_300, marks=pytest.mark.slow)])
def test_a_span_longer_than_a_page_of_the_journal_is_read_whole(backend_cli, tmp_path, n):
    """More entries than changes reads at once (``engine.changes._BATCH``), each page checked for
    what the actor sees: none is lost between pages, and the limit holds across them. The slow
    case passes the 10,000 entries a backend may fetch at once from one cursor."""
    source = tmp_path / "memories.jsonl"
    source.write_text("".join(f'{{"type": "fact", "text": "imported memory {i}"}}\n' for i in range(n)))
    _ok(backend_cli("import", str(source), "--quiet"))
    _ok(backend_cli("write", "fact", "bob's private note", "--actor", "bob"))
    doc = _ok(backend_cli("changes", "--since", "2020-01-01", "--json")).json()
    assert (doc["count"], doc["more"]) == (n, False)
    assert [c["text"] for c in doc["changes"]] == [f"imported memory {i}" for i in range(n)]
    doc = _ok(backend_cli("changes", "--since", "2020-01-01", "--limit", str(n - 1), "--json")).json()
    assert (doc["count"], doc["more"], doc["changes"][-1]["text"]) == (n - 1, True, f"imported memory {n - 2}")


def test_jsonl_gives_one_change_a_line_and_piped_text_one_tab_separated_row(backend_cli, history):
    rows = _ok(backend_cli("changes", "--since", at(0), "--until", at(3), "--jsonl")).jsonl()
    assert [(r["kind"], r["version"]) for r in rows] == [("written", 1), ("updated", 2), ("changed", None)]
    text = _ok(backend_cli("changes", "--since", at(0), "--until", at(2))).out.splitlines()
    key = history["key"]
    assert [line.split("\t")[1:] for line in text] == [
        [at(1), "written", f"cortex://m/{key}", "1", "alice", "The deploy key rotates monthly"],
        [at(2), "updated", f"cortex://m/{key}", "2", "alice", "The deploy key rotates weekly"],
    ]


def test_nothing_changed_exits_1_and_says_so_in_one_stderr_line(backend_cli, history):
    r = backend_cli("changes", "--since", at(30), "--until", at(40))
    assert (r.code, r.out) == (1, ""), r
    assert r.err.splitlines() == [f"cortexctl: nothing changed after {at(30)} up to {at(40)}"]
    r = backend_cli("changes", "--since", at(30), "--until", at(40), "--json")
    assert r.code == 1 and r.json()["count"] == 0 and r.json()["changes"] == [], r
    assert backend_cli("changes", "-q", "--since", at(30), "--until", at(40)).code == 1
    r = backend_cli("changes", "-q", "--since", at(0))
    assert (r.code, r.out, r.err) == (0, "", ""), r


def test_ages_count_back_from_the_clock(backend_store, history):
    cx = _as(backend_store, "alice", 12.5)
    assert [(c.kind, c.at) for c in cx.changes(since="3h").changes] == [  # the repeat at 11h: a use
        ("written", T0 + timedelta(hours=10)), ("changed", T0 + timedelta(hours=12))]
    assert [(c.kind, c.id) for c in cx.changes(since="1d", until="11h").changes] == [("written", history["key"])]
    assert cx.changes(since="now").changes == []


@pytest.mark.parametrize("args, code, says", [
    (("--since", "yesterday-ish"), 2, "--since: 'yesterday-ish' is not a time"),
    (("--since", "2999-01-01"), 2, "--since: 2999-01-01 is in the future"),
    (("--since", "1h", "--until", "not a time"), 2, "--until: 'not a time' is not a time"),
    (("--since", at(5), "--until", at(4)), 2, f"--until ({at(4)}) is before since ({at(5)})"),
    (("--since", "1h", "--kind", "deleted"), 2, "--kind must be one of"),
    (("--since", "1h", "--limit", "0"), 2, "--limit must be a whole number from 1"),
    (("--since", "1h", "--limit", "many"), 2, ""),
    ((), 2, ""),
])
def test_bad_input_is_one_line_and_exit_2_and_writes_nothing(backend_cli, history, args, code, says):
    assert_refused(backend_cli, "changes", *args, code=code, says=says)


def test_no_store_is_exit_3_and_makes_none(tmp_path):
    r = run_in_process(tmp_path / "none", "changes", "--since", "1d")
    assert_clean_error(r, 3)
    assert not (tmp_path / "none").exists()


def test_a_supersede_entry_is_reported_as_superseded_and_a_use_as_nothing():
    """The journal's update_head entries: one that sets superseded_by is a supersede; one that moves
    only a memory's use counters is no change; any other is a change of the fields it sets."""
    def entry(**fields):
        return 7, "update_head", T0, "alice", "01M8BR15028ZYYN01PXTJZJ3KS", codec.encode({"id": "x", **fields})

    superseded = changes_mod._change_of(*entry(superseded_by="01M8BR15028ZYYN01PXTJZJ3KT", valid_to=5))
    assert (superseded.kind, superseded.detail) == ("superseded", {"superseded_by": "01M8BR15028ZYYN01PXTJZJ3KT"})
    assert changes_mod._change_of(*entry(access_count=3, last_used=5, updated_at=5)) is None
    changed = changes_mod._change_of(*entry(valid_from=5, updated_at=5))
    assert (changed.kind, changed.detail) == ("changed", {"fields": ["valid_from"]})


def test_the_kinds_a_tool_or_the_shell_may_ask_for_are_the_kinds_changes_reports():
    from cortexctl.ops import lookup

    assert lookup("changes").param("kinds").choices == changes_mod.KINDS
