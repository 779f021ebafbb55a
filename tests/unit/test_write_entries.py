"""A write's journal entry leaves out what its current version or a new memory implies, replays
whole, and entries in the whole form older stores hold replay the same."""

from __future__ import annotations

from datetime import datetime, timedelta

from cortexctl import Cortex
from cortexctl.engine.replay import write_entry
from cortexctl.engine.results import FindQuery
from cortexctl.engine.rows import plain, write_payload
from cortexctl.memory import codec
from cortexctl.store.interface import HEAD_FIELDS, VERSION_FIELDS
from tests import tamper
from tests.conftest import assert_store_verifies

LATER_HEAD_FIELDS = ("confidence", "valid_from", "valid_to", "supersedes", "superseded_by")


def _entry(store, id_: str) -> dict:
    (payload,), = tamper.rows(store, "SELECT payload FROM journal WHERE kind = 'write' AND ref = ?", [id_])
    return codec.decode(payload)


def _record(store, table: str, fields: tuple, id_: str) -> list[dict]:
    got = tamper.rows(store, f"SELECT {', '.join(fields)} FROM {table} WHERE id = ? ORDER BY {fields[1]}", [id_])
    return [plain(dict(zip(fields, r))) for r in got]


def test_a_new_memorys_entry_holds_its_forms_once_and_no_field_its_version_implies(store):
    cx = Cortex(store=store, actor="alice")
    id_ = cx.write("fact", "the deploy key rotates every week", tags=["ops"], importance=7).id
    doc = _entry(store, id_)
    assert doc["head"] == {"id": id_, "tags": ["ops"], "actor": "alice", "importance": 7, "visibility": "private",
                           "current_version": 1}
    (version,) = doc["versions"]
    assert not {"id", "forms_override", "created_by", "hash"} & set(version)
    assert version["short"] == "the deploy key rotates every week"
    # and the rows the journal's replay gives are the stored ones
    head, versions = write_entry(doc)
    assert head == _record(store, "heads", HEAD_FIELDS, id_)[0]
    assert versions == _record(store, "versions", VERSION_FIELDS, id_)


def test_an_entry_in_the_whole_form_of_older_stores_replays_the_same(store, cli):
    cx = Cortex(store=store, actor="alice")
    id_ = cx.write("goal", "ship the pager rota", tags=["ops", "rota"], frames=["build:repo:acme/api"],
                   session="s-1", importance=3, confidence=0.5).id
    other = cx.write("fact", "the staging database is db-stg-3").id
    cx.update(id_, "ship the pager rota by friday")
    before = (cx.show(id_), cx.find(FindQuery(near="pager rota")), cli("verify", "--json").json())

    head = _record(store, "heads", HEAD_FIELDS, id_)[0]

    def whole(doc: dict) -> None:  # as a write entry was before it left anything out (and before later fields)
        head.update(current_version=1, short="ship the pager rota", medium=doc["versions"][0]["medium"],
                    updated_at=doc["versions"][0]["created_at"])
        doc["head"] = {k: v for k, v in head.items() if k not in LATER_HEAD_FIELDS}
        doc["versions"] = [dict(v, id=id_, forms_override=False) for v in doc["versions"]]

    tamper.edit_payload(store, "write", whole, ref=id_)
    assert "short" in _entry(store, id_)["head"]
    cx = Cortex(store=store, actor="alice")
    assert (cx.show(id_), cx.find(FindQuery(near="pager rota")), cli("verify", "--json").json()) == before
    assert_store_verifies(store)
    assert cx.show(other).data["statement"] == "the staging database is db-stg-3"


def test_head_and_version_fields_other_than_the_implied_ones_are_kept_and_replayed():
    t0 = datetime(2026, 1, 2, 3, 4, 5, 6)
    versions = [
        {"id": "01J0000000000000000000000A", "version": n, "type": 2, "data": b"\xa0", "hash": bytes(32),
         "created_at": t0 + timedelta(days=n), "created_by": "bob" if n == 1 else "carol", "confidence": 0.25 * n,
         "provenance": '{"via":"import"}', "short": f"v{n}", "medium": f"fact: v{n}", "forms_override": n == 2}
        for n in (1, 2)
    ]
    head = {"id": "01J0000000000000000000000A", "type": 2, "actor": "bob", "visibility": "public",
            "tags": [], "frames": ["build:repo:acme/api"], "importance": 0, "session": "s-9", "current_version": 2,
            "created_at": t0, "updated_at": t0 + timedelta(days=5), "short": "v2", "medium": "fact: v2",
            "tombstone_reason": "old", "tombstoned_at": t0 + timedelta(days=6), "tombstoned_by": "carol",
            "access_count": 4, "citations": 1, "last_used": t0 + timedelta(days=7), "confidence": 0.5,
            "valid_from": t0, "valid_to": None, "supersedes": None, "superseded_by": "01J0000000000000000000000B"}
    doc = codec.decode(write_payload(head, versions))
    left_out = set(HEAD_FIELDS) - set(doc["head"])
    assert left_out == {"type", "short", "medium", "confidence", "valid_to", "supersedes", "tags"}
    assert set(doc["versions"][0]) == {"version", "type", "data", "created_at", "confidence", "provenance", "short",
                                       "medium", "hash"}  # the hash kept: it is not the data's
    assert doc["versions"][1]["forms_override"] is True and doc["versions"][1]["created_by"] == "carol"
    assert write_entry(doc) == (plain(head), [plain(v) for v in versions])
    # a version of another memory's ID (a damaged entry) keeps it, and so fails the comparison
    odd = [dict(versions[0], id="01J0000000000000000000000Z"), versions[1]]
    assert write_entry(codec.decode(write_payload(head, odd)))[1][0]["id"] == "01J0000000000000000000000Z"
    # a version whose hash is its data's leaves it out, and gets it back
    sound = [dict(v, hash=codec.version_hash(v["type"], v["data"])) for v in versions]
    doc = codec.decode(write_payload(head, sound))
    assert not any("hash" in v for v in doc["versions"])
    assert write_entry(doc)[1] == [plain(v) for v in sound]


def test_an_entry_without_its_current_version_is_a_replay_finding_not_a_crash(store, cli):
    cx = Cortex(store=store, actor="alice")
    id_ = cx.write("fact", "the deploy key rotates every week").id
    tamper.edit_payload(store, "write", lambda doc: doc["versions"][0].update(version=9), ref=id_)
    r = cli("verify")
    assert r.code == 7 and "failed verification" in r.err
    report = Cortex(store=store, actor="alice").verify()
    assert any("missing fields" in p.message and id_ in (p.ref or "") for p in report.problems), report.problems
