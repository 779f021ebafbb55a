"""The core commands end to end through the CLI entry point (see ``cli`` in tests/conftest.py)."""

from __future__ import annotations

from cortexctl import __version__
from tests.conftest import assert_store_verifies


def test_version_and_help(cli):
    assert cli("--version").out.strip() == f"cortexctl {__version__}"
    r = cli("--help")
    assert r.code == 0 and "Examples:" in r.out and "find" in r.out


def test_write_show_update_history_round_trip(cli, store):
    uri = cli("write", "fact", "The deploy key rotates monthly", "--tag", "ops", "--set", "subject=deploy-key").out.strip()
    assert uri.startswith("cortex://m/")
    shown = cli("show", uri, "--json").json()
    assert shown["data"]["statement"] == "The deploy key rotates monthly"
    assert shown["data"]["subject"] == "deploy-key" and shown["tags"] == ["ops"]
    assert cli("update", uri[11:19], "The deploy key rotates weekly").out.strip() == f"{uri}/v/2"
    assert cli("show", uri, "--version", "1", "--json").json()["data"]["statement"] == "The deploy key rotates monthly"
    assert cli("show", f"{uri}/v/2", "--form", "short").out.splitlines()[-1] == "deploy-key: The deploy key rotates weekly"
    versions = cli("history", uri, "--json").json()["versions"]
    assert [v["version"] for v in versions] == [1, 2] and [v["current"] for v in versions] == [False, True]
    assert_store_verifies(store)


def test_update_with_identical_data_writes_no_version(cli):
    uri = cli("write", "fact", "same").out.strip()
    r = cli("update", uri, "same", "--json")
    assert r.json()["changed"] is False and r.json()["version"] == 1
    assert len(cli("history", uri, "--jsonl").jsonl()) == 1


def test_show_plain_prints_header_then_the_form(cli):
    uri = cli("write", "goal", "ship v2", "--importance", "8").out.strip()
    lines = cli("show", uri).out.splitlines()
    assert lines[0] == f"{uri}  (version 1 of 1)"
    assert "importance: 8" in lines[1]
    assert lines[-2:] == ["goal: ship v2", "status: active"]


def test_write_data_from_file_and_stdin(tmp_path, cli):
    f = tmp_path / "d.json"
    f.write_text('{"statement": "from a file", "status": "paused"}')
    a = cli("write", "goal", "--data", f"@{f}", "--json").json()["uri"]
    b = cli("write", "goal", "--data", "-", "--json", input='{"statement": "from stdin"}').json()["uri"]
    assert cli("show", a, "--json").json()["data"]["status"] == "paused"
    assert cli("show", b, "--json").json()["data"]["statement"] == "from stdin"


def test_forms_override_is_stored_and_shown(cli):
    uri = cli("write", "pattern", "a long recipe", "--short-form", "recipe").out.strip()
    doc = cli("show", uri, "--json", "--form", "short").json()
    assert doc["text"] == "recipe" and doc["forms_override"] is True


def test_tag_head_and_forget_change_only_the_head(cli, store):
    uri = cli("write", "fact", "tagged").out.strip()
    assert cli("tag", uri, "--add", "b", "--add", "a", "--json").json()["tags"] == ["a", "b"]
    assert cli("tag", uri, "--remove", "a", "--json").json()["tags"] == ["b"]
    head = cli("head", uri, "--importance", "9", "--visibility", "public", "--frame", "monitor:host:db1", "--json").json()
    assert (head["importance"], head["visibility"], head["frames"]) == (9, "public", ["monitor:host:db1"])
    assert cli("head", uri, "--remove-frame", "monitor:host:db1", "--json").json()["frames"] == []
    assert cli("head", uri, "--importance", "9", "--json").json()["changed"] is False
    gone = cli("forget", uri, "--reason", "wrong", "--json").json()
    assert gone["tombstoned"] and gone["tombstone"]["reason"] == "wrong"
    shown = cli("show", uri, "--json").json()
    assert shown["version"] == 1 and shown["tombstone"]["by"] == "alice"
    assert cli("find", "--json").json()["count"] == 0
    r = cli("update", uri, "revived")
    assert r.code == 1 and "forgotten" in r.err
    assert_store_verifies(store)


def test_every_mutation_appends_one_journal_entry(cli, cx):
    uri = cli("write", "fact", "j").out.strip()
    cli("update", uri, "j2")
    cli("tag", uri, "--add", "x")
    cli("head", uri, "--importance", "1")
    cli("forget", uri, "--reason", "done")
    report = cx.verify()
    assert report.ok and report.journal == 5
