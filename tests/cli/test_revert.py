"""revert REF --to N: a new version equal to version N (data, forms, confidence), journaled as an
update that says it is a revert; history, use counts and learned weights kept. Both backends."""

from __future__ import annotations

import pytest

from cortexctl import Cortex
from tests.conftest import assert_clean_error, assert_refused, cli_state



def _ok(r):
    assert r.code == 0, r
    return r


@pytest.fixture
def key(backend_cli) -> str:
    """A fact with three versions: v1 monthly (own short form, confidence 0.9), v2 weekly (forms
    rendered, confidence 1), v3 weekly with confidence 0.6."""
    uri = _ok(backend_cli("write", "fact", "The deploy key rotates monthly", "--short-form",
                          "deploy key: monthly", "--confidence", "0.9", "--tag", "ops")).out.strip()
    id_ = uri.rsplit("/", 1)[-1]
    _ok(backend_cli("update", id_, "The deploy key rotates weekly", "--confidence", "1"))
    _ok(backend_cli("update", id_, "--confidence", "0.6"))
    return id_


def _show(backend_cli, ref: str, version: int | None = None) -> dict:
    args = ("--version", str(version)) if version else ()
    return _ok(backend_cli("show", ref, *args, "--json")).json()


def test_revert_writes_a_new_version_equal_to_the_old_one_and_keeps_history(backend_cli, key):
    r = _ok(backend_cli("revert", key, "--to", "1", "--json")).json()
    assert (r["version"], r["changed"]) == (4, True)
    v1, v4 = _show(backend_cli, key, 1), _show(backend_cli, key)
    assert v4["version"] == v4["current_version"] == 4
    for field in ("data", "forms", "confidence", "hash", "forms_override", "type"):
        assert v4[field] == v1[field], field
    assert v4["forms"]["short"] == "deploy key: monthly" and v4["confidence"] == 0.9
    assert v4["provenance"] == {"via": "revert", "reverted_to": 1}
    assert v4["tags"] == ["ops"]
    history = _ok(backend_cli("history", key, "--json")).json()["versions"]
    assert [v["version"] for v in history] == [1, 2, 3, 4]
    assert _show(backend_cli, key, 3)["data"]["statement"] == "The deploy key rotates weekly"
    # journaled as an update; find reads the reverted text by its words
    change = _ok(backend_cli("changes", "--since", "1d", "--kind", "updated", "--json")).json()["changes"][-1]
    assert (change["kind"], change["version"], change["text"]) == ("updated", 4, "deploy key: monthly")
    found = _ok(backend_cli("find", "--near", "monthly", "--json")).json()["results"]
    assert found[0]["id"] == key and "monthly" in found[0]["text"]
    _ok(backend_cli("verify"))


def test_reverting_to_what_the_current_version_holds_writes_nothing(backend_cli, key):
    r = _ok(backend_cli("revert", key, "--to", "3", "--json")).json()
    assert (r["version"], r["changed"], r["seq"]) == (3, False, None)
    _ok(backend_cli("revert", key, "--to", "1"))
    r = _ok(backend_cli("revert", key, "--to", "1"))  # version 4 already equals version 1
    assert r.out.strip() == f"cortex://m/{key}/v/4"
    assert "no change" in r.err
    assert [v["version"] for v in _ok(backend_cli("history", key, "--json")).json()["versions"]] == [1, 2, 3, 4]


def test_revert_leaves_use_counts_and_learned_weights_as_they_were(backend_cli, backend_store, key):
    _ok(backend_cli("attest", "--intent", "rel-1", "--outcome", "success", key))
    before = _show(backend_cli, key)["salience"]
    cx = Cortex(store=backend_store, actor="alice")
    with cx.context.reading() as tx:
        weights = tx.weights("alice")
    assert weights is not None
    _ok(backend_cli("revert", key, "--to", "2"))
    assert _show(backend_cli, key)["salience"] == before
    with cx.context.reading() as tx:
        assert tx.weights("alice") == weights


@pytest.mark.parametrize("args, code, says", [
    (("--to", "9"), 3, "has no version 9 (latest is 3)"),
    (("--to", "0"), 2, "--to must be a version number"),
    (("--to", "-2"), 2, "--to must be a version number"),
    (("--to", "two"), 2, ""),
    ((), 2, ""),
])
def test_bad_versions_are_one_line_with_their_exit_code_and_write_nothing(backend_cli, key, args, code, says):
    assert_refused(backend_cli, "revert", key, *args, code=code, says=says)


def test_a_forgotten_memory_or_another_actors_is_refused_and_nothing_is_written(backend_cli, key):
    public = _ok(backend_cli("write", "fact", "The office closes at six", "--visibility", "public", "--actor", "bob"))
    public_id = public.out.strip().rsplit("/", 1)[-1]
    _ok(backend_cli("update", public_id, "The office closes at seven", "--actor", "bob"))
    private = _ok(backend_cli("write", "fact", "bob's pager code", "--actor", "bob")).out.strip().rsplit("/", 1)[-1]
    _ok(backend_cli("forget", key, "--reason", "moved to the vault"))
    before = cli_state(backend_cli)
    r = backend_cli("revert", key, "--to", "1")
    assert_clean_error(r, 1)
    assert "was forgotten" in r.err
    r = backend_cli("revert", public_id, "--to", "1")
    assert_clean_error(r, 8)
    assert "belongs to actor 'bob'" in r.err
    assert_clean_error(backend_cli("revert", private, "--to", "1"), 3)  # not seen: not found
    assert_clean_error(backend_cli("revert", "01ZZZZZZZZZZZZZZZZZZZZZZZZ", "--to", "1"), 3)
    assert cli_state(backend_cli) == before
