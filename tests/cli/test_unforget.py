"""unforget: undo forget, journaled and replayed by verify, salience as it was (issue 12, item 8)."""

from __future__ import annotations

from tests import tamper
from tests.conftest import assert_clean_error, assert_store_verifies


def journal(store):
    return [(kind,) for kind in tamper.journal_kinds(store)]


def test_unforget_brings_a_forgotten_memory_back_with_its_salience(cli, store):
    uri = cli("write", "fact", "the deploy key rotates monthly", "--importance", "8").out.strip()
    cli("attest", "--intent", "i-1", "--outcome", "success", uri)
    before = cli("show", uri, "--json").json()["salience"]
    assert cli("forget", uri, "--reason", "wrong").code == 0
    assert cli("find", "--near", "deploy key", "--json").json()["results"] == []
    r = cli("unforget", uri, "--json")
    assert r.code == 0, r
    assert r.json()["tombstone"] is None and r.json()["changed"] is True
    shown = cli("show", uri, "--json").json()
    assert shown["tombstoned"] is False and shown["salience"] == before
    found = cli("find", "--near", "deploy key", "--json").json()["results"]
    assert [f["uri"] for f in found] == [uri]
    assert "forgotten" not in cli("show", uri).out
    assert cli("update", uri, "the deploy key rotates weekly").code == 0
    assert ("unforget",) in journal(store)
    assert_store_verifies(store)


def test_unforget_plain_output_names_the_memory(cli):
    uri = cli("write", "fact", "x").out.strip()
    cli("forget", uri, "--reason", "r")
    r = cli("unforget", uri)
    assert r.code == 0 and r.out.strip() == uri


def test_forget_unforget_forget_replays(cli, store):
    uri = cli("write", "goal", "ship v2").out.strip()
    for _ in range(2):
        cli("forget", uri, "--reason", "later")
        cli("unforget", uri)
    cli("forget", uri, "--reason", "for good")
    assert cli("show", uri, "--json").json()["tombstone"]["reason"] == "for good"
    assert_store_verifies(store)


def test_unforget_of_a_memory_that_is_not_forgotten_is_refused_and_writes_nothing(cli, store):
    uri = cli("write", "fact", "x").out.strip()
    kinds = journal(store)
    r = cli("unforget", uri)
    assert_clean_error(r, 1)
    assert "is not forgotten" in r.err
    assert journal(store) == kinds


def test_unforget_is_owner_only(cli, store):
    uri = cli("write", "fact", "x", "--visibility", "public").out.strip()
    cli("forget", uri, "--reason", "r")
    kinds = journal(store)
    r = cli("unforget", uri, env={"CORTEXCTL_ACTOR": "bob"})
    assert r.code in (3, 8), r
    assert journal(store) == kinds
    assert cli("show", uri, "--json").json()["tombstoned"] is True


def test_unforget_of_an_unknown_memory_is_exit_3(cli):
    cli("write", "fact", "x")
    assert_clean_error(cli("unforget", "01JD3KQ5ZC8M3V6W4Y2T7N9R0B"), 3)


def test_verify_notices_a_deleted_unforget_entry(cli, store):
    uri = cli("write", "fact", "x").out.strip()
    cli("forget", uri, "--reason", "r")
    cli("unforget", uri)
    tamper.delete_journal(store, kind="unforget")
    assert cli("verify").code == 7
