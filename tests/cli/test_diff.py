"""diff REF [A] [B]: the fields and the text that differ between two versions of a memory."""

from __future__ import annotations

import pytest

from tests.conftest import assert_clean_error, assert_refused



def _ok(r):
    assert r.code == 0, r
    return r


@pytest.fixture
def key(backend_cli) -> str:
    """v1 monthly; v2 weekly with a subject; v3 the same data at confidence 0.6 with an own short form."""
    id_ = _ok(backend_cli("write", "fact", "The deploy key rotates monthly")).out.strip().rsplit("/", 1)[-1]
    _ok(backend_cli("update", id_, "The deploy key rotates weekly", "--set", "subject=deploy key"))
    _ok(backend_cli("update", id_, "--confidence", "0.6", "--short-form", "key: weekly"))
    return id_


def _fields(doc) -> dict:
    return {f["field"]: (f["before"], f["after"]) for f in doc["fields"]}


def test_without_versions_the_current_one_is_compared_with_the_one_before(backend_cli, key):
    doc = _ok(backend_cli("diff", key, "--json")).json()
    assert (doc["id"], doc["from"], doc["to"], doc["current_version"], doc["same"]) == (key, 2, 3, 3, False)
    assert _fields(doc) == {"confidence": (1.0, 0.6),
                            "forms.short": ("deploy key: The deploy key rotates weekly", "key: weekly")}
    assert doc["text"] == []  # the full text is rendered from the data, which did not change


def test_data_fields_and_the_full_text_differ_line_by_line(backend_cli, key):
    doc = _ok(backend_cli("diff", key, "1", "2", "--json")).json()
    fields = _fields(doc)
    assert fields["data.statement"] == ("The deploy key rotates monthly", "The deploy key rotates weekly")
    assert fields["data.subject"] == ("", "deploy key")
    assert "confidence" not in fields and "forms.medium" in fields
    assert doc["text"][:2] == ["--- v1", "+++ v2"]
    assert "-fact: The deploy key rotates monthly" in doc["text"]
    assert "+fact: The deploy key rotates weekly" in doc["text"]
    assert "+subject: deploy key" in doc["text"]
    # one version given: that one against the current; backwards is the mirror image
    assert _ok(backend_cli("diff", key, "1", "--json")).json()["to"] == 3
    back = _ok(backend_cli("diff", key, "2", "1", "--json")).json()
    assert _fields(back)["data.statement"] == fields["data.statement"][::-1]
    # a version URI names the first version
    assert _ok(backend_cli("diff", f"cortex://m/{key}/v/1", "--json")).json()["from"] == 1


def test_the_text_form_prints_one_line_per_field_then_the_unified_diff(backend_cli, key):
    lines = _ok(backend_cli("diff", key, "1", "2")).out.splitlines()
    assert lines[0] == f"cortex://m/{key}  version 1 -> 2 (current 3)"
    assert 'data.statement: "The deploy key rotates monthly" -> "The deploy key rotates weekly"' in lines
    assert lines[lines.index("--- v1") + 1] == "+++ v2"


def test_a_memory_with_one_version_or_the_same_version_twice_is_no_difference_exit_0(backend_cli, key):
    one = _ok(backend_cli("write", "fact", "Staging is db-stg-2")).out.strip()
    doc = _ok(backend_cli("diff", one, "--json")).json()
    assert (doc["from"], doc["to"], doc["same"], doc["fields"], doc["text"]) == (1, 1, True, [], [])
    r = _ok(backend_cli("diff", one))
    assert r.out.splitlines()[1] == "no differences (the memory has one version)"
    doc = _ok(backend_cli("diff", key, "2", "2", "--json")).json()
    assert (doc["same"], doc["fields"], doc["text"]) == (True, [], [])
    assert _ok(backend_cli("diff", key, "2", "2")).out.splitlines()[1] == "no differences"


@pytest.mark.parametrize("args, code, says", [
    (("4",), 3, "has no version 4 (latest is 3)"),
    (("1", "7"), 3, "has no version 7 (latest is 3)"),
    (("0",), 2, "A must be a version number"),
    (("1", "two"), 2, "B must be a version number"),
    (("1.5",), 2, "A must be a version number"),
    (("-1",), 2, ""),
    (("1", "2", "3"), 2, ""),
])
def test_bad_versions_are_one_line_with_their_exit_code(backend_cli, key, args, code, says):
    assert_refused(backend_cli, "diff", key, *args, code=code, says=says)


def test_another_actors_private_memory_is_not_found(backend_cli):
    private = _ok(backend_cli("write", "fact", "bob's pager code", "--actor", "bob")).out.strip()
    assert_clean_error(backend_cli("diff", private), 3)
    assert _ok(backend_cli("diff", private, "--actor", "bob", "--json")).json()["same"] is True
