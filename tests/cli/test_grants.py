"""grant, grant list and revoke: what a sub-agent sees through scoped grants, in every command."""

from __future__ import annotations

import shutil
from datetime import timedelta

import orjson
import pytest

from cortexctl import Cortex
from cortexctl.engine.rows import utcnow
from cortexctl.store import snapshot
from tests import tamper
from tests.conftest import assert_clean_error, assert_store_verifies, clean_environment

# alice's memories (and one of carol's); every text holds "orchid", so find --near orchid reaches all
CORPUS = {
    "fact_ops": ("alice", "fact", "orchid deploy runbook", ["ops"], "scoped"),
    "fact_dev": ("alice", "fact", "orchid build cache", ["dev"], "scoped"),
    "goal_ops": ("alice", "goal", "orchid migrate the pager", ["ops"], "scoped"),
    "private_ops": ("alice", "fact", "orchid root password hint", ["ops"], "private"),
    "carol_ops": ("carol", "fact", "orchid carol staging host", ["ops"], "scoped"),
}

# (grants as (granter, engine kwargs, state), what bob then sees of CORPUS)
CASES = {
    "no grant": ([], set()),
    "by tag": ([("alice", {"tags": ["ops"]}, "live")], {"fact_ops", "goal_ops"}),
    "by type": ([("alice", {"types": ["fact"]}, "live")], {"fact_ops", "fact_dev"}),
    "type and any tag": ([("alice", {"types": ["fact"], "tags": ["ops", "nope"]}, "live")], {"fact_ops"}),
    "whole scope": ([("alice", {}, "live")], {"fact_ops", "fact_dev", "goal_ops"}),
    "expired": ([("alice", {"tags": ["ops"], "expires": "30m"}, "expired")], set()),
    "revoked": ([("alice", {"tags": ["ops"]}, "revoked")], set()),
    "unexpired": ([("alice", {"tags": ["ops"], "expires": "7d"}, "live")], {"fact_ops", "goal_ops"}),
    "private under a matching grant": ([("alice", {"tags": ["ops"], "types": ["fact"]}, "live")], {"fact_ops"}),
    "another granter's": ([("carol", {"tags": ["ops"]}, "live")], {"carol_ops"}),
    "two granters": ([("carol", {}, "live"), ("alice", {"types": ["goal"]}, "live")], {"carol_ops", "goal_ops"}),
    "grant to another sub-agent": ([("alice", {}, "live")], set()),  # given to dave, not bob
}


@pytest.fixture(scope="module")
def corpus_once(tmp_path_factory):
    """The corpus, written once per module (each test copies it)."""
    base = tmp_path_factory.mktemp("corpus")
    with clean_environment(base):
        ids = {}
        for name, (actor, type_, text, tags, vis) in CORPUS.items():
            ids[name] = Cortex(store=base / "store", actor=actor).write(type_, text, tags=tags, visibility=vis).id
    return base / "store", ids


@pytest.fixture(autouse=True)
def _corpus(corpus_once):
    _CORPUS[:] = [corpus_once]


_CORPUS: list[tuple] = []


def _setup(store, case: str) -> dict[str, str]:
    """Copy the corpus into ``store`` and give the case's grants; name -> memory ID."""
    template, ids = _CORPUS[0]
    shutil.copytree(template, store)
    ids = dict(ids)
    for granter, kwargs, state in CASES[case][0]:
        cx = Cortex(store=store, actor=granter)
        subagent = "dave" if case == "grant to another sub-agent" else "bob"
        if state == "expired":  # given two hours ago, for 30 minutes
            cx.context.clock = lambda: utcnow() - timedelta(hours=2)
        g = cx.grant(subagent, **kwargs)
        if state == "revoked":
            cx.revoke(g.id)
    return ids


def _find_ids(cli, *args) -> dict[str, list[str]]:
    r = cli("find", *args, "-k", "50", "--actor", "bob", "--json")
    assert r.code == (0 if r.json()["results"] else 1), r  # every text holds the query: seen is matched
    return {h["id"]: h["lanes"] for h in r.json()["results"]}


@pytest.mark.parametrize("with_snapshot", [True, False], ids=["snapshot", "duckdb"])
@pytest.mark.parametrize("case", list(CASES))
def test_what_a_sub_agent_sees_in_every_command(cli, store, case, with_snapshot):
    ids = _setup(store, case)
    expected = {ids[n] for n in CASES[case][1]}
    if with_snapshot:
        assert cli("reindex").code == 0
        assert snapshot.state(store) == "current"
    else:
        snapshot.remove(store)
    # find: the lexical and semantic lanes (--near) and the salience lane (no --near, and beside --near)
    near = _find_ids(cli, "--near", "orchid")
    assert set(near) == expected
    for lanes in near.values():
        assert {"lexical", "semantic", "salience"} <= set(lanes)
    assert set(_find_ids(cli)) == expected
    assert set(_find_ids(cli, "--near", "orchid", "--tag", "ops")) == expected & {ids["fact_ops"], ids["goal_ops"],
                                                                                   ids["carol_ops"]}
    if with_snapshot:
        assert snapshot.state(store) == "current"  # find wrote nothing
    # show and history: a covered memory reads, any other is not found
    for name, id_ in ids.items():
        r = cli("show", id_, "--actor", "bob", "--json")
        if id_ in expected:
            assert r.code == 0 and r.json()["id"] == id_, r
            assert cli("history", id_, "--actor", "bob").code == 0
        else:
            assert r.code == 3 and "\"not_found\"" in r.err and r.out == "", r
            assert_clean_error(cli("show", id_, "--actor", "bob"), 3)
    # export: exactly what bob sees
    r = cli("export", "--actor", "bob")
    assert r.code == 0, r
    assert {d["id"] for d in r.jsonl()} == expected
    # context: page-fault retrieval draws only on what bob sees
    r = cli("context", "--goal", "orchid", "--actor", "bob", "--json")
    assert r.code == 0, r
    got = {m["ref"] for m in r.json()["memories"]}
    assert got == expected
    # never the granter's private memory, through any of the above
    assert ids["private_ops"] not in set(near) | got


def test_a_sub_agent_cannot_change_what_it_sees_through_a_grant(cli, store):
    ids = _setup(store, "whole scope")
    r = cli("update", ids["fact_ops"], "orchid changed", "--actor", "bob")
    assert_clean_error(r, 8)
    r = cli("forget", ids["fact_ops"], "--reason", "x", "--actor", "bob")
    assert_clean_error(r, 8)
    assert cli("show", ids["fact_ops"], "--actor", "alice", "--json").json()["version"] == 1


@pytest.fixture
def views(monkeypatch) -> list[str]:
    """The views each find searched, in order: "searching" (the snapshot may answer), then
    "reading" when it fell back to DuckDB alone."""
    from cortexctl.engine import find

    seen: list[str] = []
    real = find._search_in

    def spy(view, *args, **kwargs):
        seen.append(view.__name__)
        return real(view, *args, **kwargs)

    monkeypatch.setattr(find, "_search_in", spy)
    return seen


def test_a_sub_agents_find_is_answered_from_the_snapshot(store, views):
    from cortexctl.engine.results import FindQuery

    ids = _setup(store, "by tag")
    Cortex(store=store, actor="alice").reindex()
    bob = Cortex(store=store, actor="bob")
    assert {h.id for h in bob.find(FindQuery(near="orchid", k=20))} == {ids["fact_ops"], ids["goal_ops"]}
    assert views == ["searching"]  # no fallback to DuckDB alone


def test_a_snapshot_of_the_format_before_the_visibility_code_is_not_read_for_anyone(store, views):
    """A snapshot written by a cortexctl before the visibility code (format 2, whose file may not say
    which memories are scoped) is out of date: a sub-agent's find is answered from DuckDB, as everyone's."""
    import json
    import zlib

    from cortexctl.engine.results import FindQuery

    ids = _setup(store, "by tag")
    Cortex(store=store, actor="alice").reindex()
    path = store / snapshot.SNAPSHOT_NAME
    raw = path.read_bytes()
    hlen = int.from_bytes(raw[8:16], "little")
    header = json.loads(raw[24:24 + hlen])
    header["format"] = 2
    body = json.dumps(header, separators=(",", ":")).encode()
    path.write_bytes(raw[:16] + zlib.crc32(body).to_bytes(8, "little") + body + raw[24 + hlen:])
    assert snapshot.state(store) == "stale"
    bob = Cortex(store=store, actor="bob")
    assert {h.id for h in bob.find(FindQuery(near="orchid", k=20))} == {ids["fact_ops"], ids["goal_ops"]}
    alice = Cortex(store=store, actor="alice")
    assert len(alice.find(FindQuery(near="orchid", k=20))) == 4
    assert views == ["searching", "searching"]  # a stale snapshot: the view is DuckDB's from the start


def test_a_grant_and_a_revoke_on_top_of_the_snapshot_reach_the_next_find(cli, store):
    ids = _setup(store, "no grant")
    assert cli("reindex").code == 0
    assert _find_ids(cli, "--near", "orchid") == {}
    r = cli("grant", "bob", "--tag", "ops", "--json")
    assert r.code == 0, r
    gid = r.json()["id"]
    assert snapshot.state(store) == "current"  # the delta carries the grant
    assert set(_find_ids(cli, "--near", "orchid")) == {ids["fact_ops"], ids["goal_ops"]}
    assert cli("head", ids["fact_dev"], "--visibility", "private").code == 0
    assert cli("tag", ids["fact_dev"], "--add", "ops").code == 0
    assert set(_find_ids(cli, "--near", "orchid")) == {ids["fact_ops"], ids["goal_ops"]}  # private now
    assert cli("head", ids["fact_dev"], "--visibility", "scoped").code == 0
    assert set(_find_ids(cli, "--near", "orchid")) == {ids["fact_ops"], ids["goal_ops"], ids["fact_dev"]}
    assert cli("revoke", gid[:10]).code == 0
    assert _find_ids(cli, "--near", "orchid") == {}
    assert_store_verifies(store)


# -- grant, grant list and revoke themselves -----------------------------------------------------------
def test_grant_prints_its_id_and_grant_list_shows_both_sides(cli, store):
    r = cli("grant", "bob", "--type", "fact", "--tag", "ops", "--tag", "oncall", "--expires", "2h")
    assert r.code == 0, r
    gid = r.out.strip()
    assert len(gid) == 26
    mine = cli("grant", "list", "--json").json()
    assert mine["count"] == 1
    g = mine["grants"][0]
    assert (g["id"], g["granter"], g["subagent"], g["types"], g["tags"], g["state"]) == (
        gid, "alice", "bob", ["fact"], ["oncall", "ops"], "live")
    assert g["expires_at"] is not None and g["revoked_at"] is None
    assert cli("grant", "list", "--actor", "bob", "--json").json()["grants"] == [g]  # held by bob
    assert cli("grant", "list", "--actor", "carol", "--json").json() == {"count": 0, "grants": []}
    assert [x["id"] for x in cli("grant", "list", "--jsonl").jsonl()] == [gid]
    r = cli("revoke", gid, "--json")
    assert r.code == 0 and r.json()["state"] == "revoked" and r.json()["revoked_by"] == "alice", r
    assert cli("grant", "list", "--json").json()["grants"][0]["state"] == "revoked"
    assert "revoked" in cli("grant", "list").out
    assert_store_verifies(store)


def _journal_and_grants(store) -> tuple:
    if not tamper.db_file(store).exists():
        return None
    return tamper.count(store, "journal"), tamper.grants(store)


@pytest.mark.parametrize("args, code, words", [
    (["grant", "bob", "--expires", "soon"], 2, "--expires"),
    (["grant", "bob", "--expires", "0h"], 2, "--expires"),
    (["grant", "bob", "--expires", "30s"], 2, "--expires"),
    (["grant", "bob", "--expires", "-2h"], 2, "--expires"),
    (["grant", "bob", "--expires", "99999d"], 2, "--expires"),
    (["grant", "alice"], 2, "itself"),
    (["grant", " bob"], 2, "SUBAGENT"),
    (["grant", "bob\tx"], 2, "SUBAGENT"),
    (["grant", ""], 2, "SUBAGENT"),
    (["grant", "b" * 257], 2, "SUBAGENT"),
    (["grant", "bob", "--type", "gossip"], 2, "gossip"),
    (["grant", "bob", "--tag", "not a tag!"], 2, "tag"),
    (["grant", "list", "--tag", "ops"], 2, "grant list"),
    (["revoke", "01M85AWENDS9KJ2ARCZC6N5RNP"], 3, "no live grant"),
    (["revoke", "nothing"], 3, "no live grant"),
    (["revoke", ""], 2, "GRANT_ID"),
])
def test_bad_input_is_one_line_with_the_documented_code_and_nothing_written(cli, store, args, code, words):
    cli("write", "fact", "orchid first", "--visibility", "scoped")
    before = _journal_and_grants(store)
    r = cli(*args)
    assert_clean_error(r, code)
    assert words in r.err, r
    assert _journal_and_grants(store) == before


def test_revoking_another_actors_or_a_revoked_grant_is_not_found(cli, store):
    gid = cli("grant", "bob").out.strip()
    assert_clean_error(cli("revoke", gid, "--actor", "carol"), 3)  # neither given nor held by carol
    assert_clean_error(cli("revoke", "bob", "--actor", "carol"), 3)
    assert cli("revoke", gid).code == 0
    before = _journal_and_grants(store)
    assert_clean_error(cli("revoke", gid), 3)
    assert_clean_error(cli("revoke", gid, "--actor", "bob"), 3)
    assert_clean_error(cli("revoke", "bob"), 3)
    assert _journal_and_grants(store) == before


# -- grants are a set ------------------------------------------------------------------------------------
def test_granting_a_live_scope_again_makes_no_second_grant_and_says_so(cli, store):
    r = cli("grant", "bob", "--type", "fact", "--tag", "ops", "--tag", "oncall")
    assert r.code == 0 and r.err == "", r
    gid = r.out.strip()
    before = _journal_and_grants(store)
    again = cli("grant", "bob", "--tag", "oncall", "--tag", "ops", "--tag", "ops", "--type", "fact", "--expires", "2h")
    assert again.code == 0 and again.out.strip() == gid, again  # the same set of tags, in any order
    (line,) = again.err.splitlines()
    assert line.startswith("cortexctl: ") and gid in line and "no second grant" in line, again
    doc = cli("grant", "bob", "--type", "fact", "--tag", "ops", "--tag", "oncall", "--json")
    assert doc.code == 0 and doc.json()["id"] == gid and doc.json()["created"] is False, doc
    assert doc.json()["expires_at"] is None  # the live grant's expiry stands
    assert _journal_and_grants(store) == before  # nothing written
    # another scope, another sub-agent or another granter is another grant
    others = [cli("grant", *args, "--json") for args in (
        ["bob", "--type", "fact", "--tag", "ops"], ["bob", "--tag", "ops", "--tag", "oncall"],
        ["carol", "--type", "fact", "--tag", "ops", "--tag", "oncall"],
        ["bob", "--type", "fact", "--tag", "ops", "--tag", "oncall", "--actor", "dave"])]
    assert all(o.code == 0 and o.json()["created"] is True for o in others), others
    assert len({gid, *(o.json()["id"] for o in others)}) == 5
    # once revoked (or expired), the same scope is granted anew
    assert cli("revoke", gid).code == 0
    fresh = cli("grant", "bob", "--type", "fact", "--tag", "ops", "--tag", "oncall", "--json")
    assert fresh.code == 0 and fresh.json()["created"] is True and fresh.json()["id"] != gid, fresh
    assert_store_verifies(store)


def test_an_expired_grant_of_the_scope_does_not_stand_in_for_a_new_one(store):
    cx = Cortex(store=store, actor="alice")
    cx.context.clock = lambda: utcnow() - timedelta(hours=2)
    old = cx.grant("bob", tags=["ops"], expires="30m")
    cx.context.clock = utcnow
    new = cx.grant("bob", tags=["ops"])
    assert new.created and new.id != old.id and new.state == "live"
    assert cx.grant("bob", tags=["ops"]).id == new.id
    assert_store_verifies(store)


def test_revoke_by_sub_agent_and_exact_scope(cli, store):
    g = {name: cli("grant", "bob", *args).out.strip() for name, args in (
        ("ops", ["--tag", "ops"]), ("ops facts", ["--tag", "ops", "--type", "fact"]), ("all", []),
        ("two tags", ["--tag", "ops", "--tag", "dev"]))}
    assert len(set(g.values())) == 4
    before = _journal_and_grants(store)
    for args in (["bob", "--tag", "nope"], ["bob", "--tag", "dev"], ["bob", "--type", "goal"],
                 ["carol", "--tag", "ops"]):
        r = cli("revoke", *args)
        assert_clean_error(r, 3)
        assert "no live grant to" in r.err, r
    assert "to 'bob' of type goal and any tag" in cli("revoke", "bob", "--type", "goal").err
    assert _journal_and_grants(store) == before
    r = cli("revoke", "bob", "--tag", "ops", "--json")
    assert r.code == 0 and r.json()["id"] == g["ops"] and r.json()["revoked_by"] == "alice", r
    assert cli("revoke", "bob", "--type", "fact", "--tag", "ops", "--json").json()["id"] == g["ops facts"]
    assert cli("revoke", "bob", "--tag", "dev", "--tag", "ops", "--json").json()["id"] == g["two tags"]
    assert cli("revoke", "bob", "--json").json()["id"] == g["all"]  # no ID starts so: bob's grant of any scope
    assert_clean_error(cli("revoke", "bob", "--tag", "ops"), 3)  # revoked already
    states = {x["id"]: x["state"] for x in cli("grant", "list", "--json").json()["grants"]}
    assert states == {i: "revoked" for i in g.values()}
    assert_store_verifies(store)


def test_a_sub_agent_may_revoke_a_grant_made_to_it_and_verify_replays_it(cli, store):
    _setup(store, "no grant")
    by_id = cli("grant", "bob", "--tag", "ops").out.strip()
    by_scope = cli("grant", "bob", "--type", "goal").out.strip()
    carols = cli("grant", "bob", "--type", "goal", "--actor", "carol").out.strip()
    assert set(_find_ids(cli, "--near", "orchid"))  # bob sees what they cover
    r = cli("revoke", by_id, "--actor", "bob", "--json")
    assert r.code == 0 and (r.json()["id"], r.json()["revoked_by"], r.json()["granter"]) == (by_id, "bob", "alice"), r
    # bob's own name and the scope: two granters give bob that scope, so it names two grants
    r = cli("revoke", "bob", "--type", "goal", "--actor", "bob")
    assert_clean_error(r, 2)
    assert by_scope in r.err and carols in r.err, r
    assert cli("revoke", carols, "--actor", "bob").code == 0
    r = cli("revoke", "bob", "--type", "goal", "--actor", "bob", "--json")
    assert r.code == 0 and r.json()["id"] == by_scope and r.json()["revoked_by"] == "bob", r
    assert _find_ids(cli, "--near", "orchid") == {}
    listed = {x["id"]: (x["state"], x["revoked_by"]) for x in cli("grant", "list", "--json").json()["grants"]}
    assert listed == {by_id: ("revoked", "bob"), by_scope: ("revoked", "bob")}
    r = cli("verify", "--json")
    assert r.code == 0, r


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["duckdb", "postgres"])
def test_identical_grants_racing_make_one_grant(backend, store, tmp_path):
    """Processes granting the same scope at once: the look and the insert are one writing
    transaction, so exactly one grant is made and every process prints its ID."""
    import subprocess

    from tests.conftest import _full_env, cortexctl_argv

    if backend == "duckdb":
        location = str(store)
    else:
        from tests.pg import store_uri

        location = store_uri("race", tmp_path)
    env = _full_env(store, {"CORTEXCTL_STORE": location, "CORTEXCTL_ACTOR": "alice", "CORTEXCTL_WAIT": "60"},
                    True)
    subprocess.run(cortexctl_argv() + ["write", "fact", "orchid", "--visibility", "scoped"], env=env, check=True,
                   capture_output=True, timeout=120)
    for round_ in range(3):
        procs = [subprocess.Popen(cortexctl_argv() + ["grant", f"bob{round_}", "--tag", "ops", "--json"], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(4)]
        outs = [p.communicate(timeout=300) for p in procs]
        assert [p.returncode for p in procs] == [0] * 4, outs
        docs = [orjson.loads(o) for o, _ in outs]
        assert len({d["id"] for d in docs}) == 1, docs
        assert sorted(d["created"] for d in docs) == [False, False, False, True], docs
    listed = subprocess.run(cortexctl_argv() + ["grant", "list", "--json"], env=env, capture_output=True,
                            timeout=120)
    assert orjson.loads(listed.stdout)["count"] == 3, listed
    verified = subprocess.run(cortexctl_argv() + ["verify"], env=env, capture_output=True, timeout=300)
    assert verified.returncode == 0, verified


def test_grant_list_and_revoke_without_a_store_are_not_found_and_create_nothing(cli, store):
    assert_clean_error(cli("grant", "list"), 3)
    assert_clean_error(cli("revoke", "01M85AWENDS9KJ2ARCZC6N5RNP"), 3)
    assert not store.exists()


# -- verify and bundles ----------------------------------------------------------------------------------
def test_verify_passes_after_grants_and_revokes_and_reports_a_tampered_grants_table(cli, store):
    _setup(store, "by tag")
    keep = cli("grant", "carol", "--type", "goal", "--expires", "1d").out.strip()
    gone = cli("grant", "dave").out.strip()
    assert cli("revoke", gone).code == 0
    assert cli("verify").code == 0
    for statement, params, words in [
        ("UPDATE grants SET revoked_at = NULL, revoked_by = NULL WHERE id = ?", [gone], "revoked_at"),
        ("UPDATE grants SET tags = ['ops', 'dev'] WHERE id = ?", [keep], "tags"),
        ("UPDATE grants SET expires_at = NULL WHERE id = ?", [keep], "expires_at"),
        ("DELETE FROM grants WHERE id = ?", [keep], "missing from the store"),
        ("INSERT INTO grants VALUES ('01M85AWENDS9KJ2ARCZC6N5RNP', 'alice', 'eve', [], [], now()::TIMESTAMP,"
         " NULL, NULL, NULL)", [], "not in the journal"),
    ]:
        backup = {r[0]: r for r in _journal_and_grants(store)[1]}
        tamper.sql(store, statement, params)
        r = cli("verify", "--json")
        assert r.code == 7, r
        problems = [p for p in r.json()["problems"] if p["check"] == "grants"]
        assert len(problems) == 1 and words in problems[0]["message"], r.json()["problems"]
        tamper.replace_grants(store, list(backup.values()))
        assert cli("verify").code == 0


def test_a_backup_restored_keeps_its_grants_and_a_merge_adds_them(cli, store, tmp_path):
    ids = _setup(store, "by tag")
    gone = cli("grant", "dave", "--expires", "7d").out.strip()
    assert cli("revoke", gone).code == 0
    want = cli("grant", "list", "--json").json()["grants"]
    dest = tmp_path / "bundles"
    r = cli("backup", "--dest", str(dest), "--json")
    assert r.code == 0, r
    (bundle,) = [p for p in dest.iterdir() if p.name.startswith("backup-")]
    # replace into a fresh store: the same grants, and bob sees the same
    fresh = tmp_path / "fresh"
    r = cli("restore", str(bundle), "--mode", "replace", "--store", str(fresh), "--json")
    assert r.code == 0, r
    assert cli("grant", "list", "--store", str(fresh), "--json").json()["grants"] == want
    r = cli("find", "--near", "orchid", "--store", str(fresh), "--actor", "bob", "--json")
    assert {h["id"] for h in r.json()["results"]} == {ids["fact_ops"], ids["goal_ops"]}
    assert_store_verifies(fresh)
    # merge into a store holding other data: the grants and the revocation are added, once
    other = tmp_path / "other"
    assert cli("write", "fact", "something else", "--store", str(other)).code == 0
    for _ in range(2):
        r = cli("restore", str(bundle), "--mode", "merge", "--store", str(other), "--json")
        assert r.code == 0, r
    assert cli("grant", "list", "--store", str(other), "--json").json()["grants"] == want
    r = cli("find", "--near", "orchid", "--store", str(other), "--actor", "bob", "--json")
    assert {h["id"] for h in r.json()["results"]} == {ids["fact_ops"], ids["goal_ops"]}
    assert_store_verifies(other)


def test_sessions_pinned_compact_and_attest_follow_the_grants_too(cli, store):
    assert cli("session", "add", "--session", "s1", "--prompt", "orchid p", "--thought", "t", "--response", "r").code == 0
    turn = cli("find", "--session", "s1", "--json").json()["results"][0]["id"]
    assert cli("head", turn, "--visibility", "scoped").code == 0
    rule = cli("write", "constraint", "orchid never deploy on friday", "--set", "strength=hard",
               "--visibility", "scoped", "--tag", "ops").out.strip().rsplit("/", 1)[1]
    secret = cli("write", "constraint", "orchid never say the vault code", "--set", "strength=hard",
                 "--tag", "ops").out.strip().rsplit("/", 1)[1]

    def seen() -> dict:
        sessions = cli("session", "list", "--actor", "bob", "--json").json()["sessions"]
        shown = cli("session", "show", "s1", "--actor", "bob", "--json")
        pinned = cli("pinned", "--goal", "x", "--actor", "bob", "--json").json()
        hard = {c["ref"] for c in pinned["hard_constraints"]}
        compact = cli("compact", "--intent", "i", "--step", "1", "--budget-tokens", "4000", rule, secret,
                      "--actor", "bob", "--json")
        attest = cli("attest", "--intent", "i", "--outcome", "success", rule, secret, "--actor", "bob", "--json")
        return {"sessions": [s["session"] for s in sessions], "show": shown.code, "hard": hard,
                "compact": compact.code, "attest": attest.json()["affected"] if attest.code == 0 else attest.code}

    got = seen()
    assert got["sessions"] == [] and got["show"] == 3 and got["hard"] == set() and got["compact"] == 3
    assert cli("grant", "bob", "--tag", "ops").code == 0  # the rule, not the turn (tagged turn)
    got = seen()
    assert got["sessions"] == [] and got["hard"] == {rule} and got["compact"] == 3  # the secret stays unseen
    assert cli("grant", "bob", "--type", "event").code == 0
    got = seen()
    assert got["sessions"] == ["s1"] and got["show"] == 0 and got["hard"] == {rule}
    r = cli("compact", "--intent", "i", "--step", "2", "--budget-tokens", "4000", rule, "--actor", "bob", "--json")
    assert r.code == 0, r
    r = cli("attest", "--intent", "j", "--outcome", "success", rule, secret, "--actor", "bob", "--json")
    assert r.code == 0, r
    assert [a.rsplit("/", 1)[1] for a in r.json()["affected"]] == [rule]
    assert_store_verifies(store)
