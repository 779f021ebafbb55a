"""BundleIO and the Storage methods that write and restore a bundle: backup's export, restore's
replacement, and what ``restore --mode merge`` reads of a checked bundle against the store.

A bundle's members are the files ``Storage.export_bundle`` writes into its destination (one per
table, named in what it returns); the tests hand them back as the engine does, table -> file."""

from __future__ import annotations

from datetime import timedelta

import pytest

from cortexctl.memory.terms import term_id, text_terms
from cortexctl.store.interface import CHECKPOINT_FIELDS, HEAD_FIELDS, Filters, NoStore
from tests.contract.conftest import (GOAL, T0, WEIGHTS, embedded, entry, grant, grant_id, ident, memory, put)


def filled(storage) -> str:
    """A small store with something in every kind of table; returns the vectors' model."""
    put(storage, memory(1, versions=2, tags=["a"]), memory(2, actor="bob", visibility="public"),
        memory(3, type_=GOAL, tombstoned=True))
    model, mat = embedded(["first memory", "second memory", "third memory"])
    with storage.transaction() as tx:
        tx.append_journal([entry("write", ident(n)) for n in (1, 2, 3)] + [entry("update", ident(1))])
        tx.add_terms([(ident(n), text_terms(f"memory number {n} about rivers")) for n in (1, 2, 3)])
        tx.insert_vectors([ident(1), ident(2), ident(3)], [2, 1, 1], model, mat)
        tx.set_weights("alice", WEIGHTS, seq=4, at=T0)
        tx.put_checkpoint({"actor": "alice", "intent": "i", "step": "s", "created_at": T0, "seq": 4, "record": b"r"})
        tx.insert_grant(grant(1, "alice", "carol", tags=("a",)))
        tx.insert_grant(grant(2, "bob", "carol"))
        tx.revoke_grant(grant_id(2), at=T0 + timedelta(hours=1), by="bob")
    return model


def exported(storage, tmp_path, name: str = "bundle"):
    """(members, facts, files): what export_bundle returns, and its members as table -> file."""
    dest = tmp_path / name
    dest.mkdir()
    members, facts = storage.export_bundle(dest)
    return members, facts, {m["table"]: dest / m["name"] for m in members}


def everything(storage, model: str) -> list:
    """All a store answers about its contents, through the protocol."""
    with storage.reading() as tx:
        every = [h["id"] for h in tx.heads_by_prefix("01", "alice", limit=100)]
        return [tx.heads_of([ident(n) for n in range(1, 10)]), [tx.versions(ident(n)) for n in range(1, 10)],
                list(tx.journal_entries(["write", "update", "checkpoint"])), tx.journal_bounds(),
                tx.all_weights(), tx.all_checkpoints(), tx.all_grants(), tx.health_counts(), tx.version_digest(),
                tx.count_pending(model), every,
                rounded(tx.search_terms({term_id("river"): 1.0}, Filters("alice", include_tombstoned=True), 10)),
                rounded(tx.nearest(embedded(["first memory"])[1][0], model, Filters("alice"), 5, exact=True)[0])]


def rounded(ranked: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """Scores to 9 places: summed in another order, a float may differ in its last bits."""
    return [(i, round(s, 9)) for i, s in ranked]


def test_export_writes_one_member_per_table_with_its_rows_and_the_stores_facts(storage, tmp_path):
    model = filled(storage)
    members, facts, files = exported(storage, tmp_path)
    assert {"heads", "versions", "journal"} <= set(files)
    assert all(path.is_file() for path in files.values())
    with storage.reading() as tx:
        assert tx.table_counts([m["table"] for m in members]) == {m["table"]: m["rows"] for m in members}
        assert tx.table_counts(["heads", "versions", "journal", "no_such_table"]) == {
            "heads": 3, "versions": 4, "journal": 4}
        assert facts["schema_version"] == tx.health_counts()["schema_version"]
        assert facts["journal_position"] == tx.journal_bounds()[2] == 4
    assert facts["vectors"] == [{"model": model, "dim": 64, "count": 3}]


def test_a_restored_bundle_answers_as_the_store_it_came_from(storage, other_storage, tmp_path):
    model = filled(storage)
    _, facts, files = exported(storage, tmp_path)
    seen = []

    def check(staged) -> None:
        with staged.reading() as tx:
            seen.append(tx.count_heads())

    other_storage.restore_bundle(files, facts["schema_version"], check)
    assert seen == [3]  # check saw the new store before it took the place of the old
    assert other_storage.exists()
    assert everything(other_storage, model) == everything(storage, model)


def test_a_restore_replaces_the_whole_store(storage, other_storage, tmp_path):
    model = filled(storage)
    _, facts, files = exported(storage, tmp_path)
    put(other_storage, memory(50), memory(51))
    with other_storage.transaction() as tx:
        tx.append_journal([entry("write", ident(50)), entry("write", ident(51))])
        tx.insert_grant(grant(9, "alice", "dave"))
    other_storage.restore_bundle(files, facts["schema_version"], lambda staged: None)
    assert everything(other_storage, model) == everything(storage, model)
    with other_storage.reading() as tx:
        assert tx.existing_ids([ident(50), ident(51)]) == set() and grant_id(9) not in tx.all_grants()


def test_a_failed_check_leaves_the_store_as_it_was_or_leaves_none(storage, other_storage, tmp_path):
    model = filled(storage)
    _, facts, files = exported(storage, tmp_path)

    def refuse(staged) -> None:
        raise RuntimeError("does not verify")

    with pytest.raises(RuntimeError):
        other_storage.restore_bundle(files, facts["schema_version"], refuse)
    assert not other_storage.exists()
    with pytest.raises(NoStore):
        with other_storage.reading():
            pass
    put(other_storage, memory(50))
    before = everything(other_storage, model)
    with pytest.raises(RuntimeError):
        other_storage.restore_bundle(files, facts["schema_version"], refuse)
    assert everything(other_storage, model) == before


def test_the_version_digest_is_the_same_for_the_same_versions_in_any_order(storage, other_storage):
    mems = [memory(1, versions=2), memory(2), memory(3, actor="bob")]
    put(storage, *mems)
    for m in reversed(mems):
        put(other_storage, m)
    with storage.reading() as a, other_storage.reading() as b:
        assert a.version_digest() == b.version_digest()
    changed, versions = memory(4)
    put(other_storage, (changed, versions))
    put(storage, (changed, [{**versions[0], "hash": b"\x09" * 32}]))
    with storage.reading() as a, other_storage.reading() as b:
        assert a.version_digest() != b.version_digest()


def test_an_attached_bundle_is_planned_against_the_store_and_read_for_a_merge(storage, other_storage, tmp_path):
    """What ``restore --mode merge`` asks: what is new, what conflicts, where the bundle is ahead."""
    filled(storage)
    with storage.transaction() as tx:
        head, vs = memory(4, versions=3)
        tx.insert_memories([head], vs)
        tx.put_checkpoint({"actor": "bob", "intent": "j", "step": "t", "created_at": T0, "seq": 5, "record": b"x"})
    _, _, files = exported(storage, tmp_path)
    # the store merged into: memory 1 with a different version 1, memory 4 one version behind, one of its own
    one, one_versions = memory(1, versions=1, tags=["a"])
    four, four_versions = memory(4, versions=3)
    four.update(current_version=2)
    put(other_storage, (one, [{**one_versions[0], "hash": b"\x07" * 32}]), (four, four_versions[:2]), memory(60))
    with other_storage.transaction() as tx:
        tx.put_checkpoint({"actor": "alice", "intent": "i", "step": "s", "created_at": T0, "seq": 1, "record": b"r"})
    with storage.reading() as tx:
        theirs = tx.heads_of([ident(2), ident(3), ident(4)])
        their_versions = {n: tx.versions(ident(n)) for n in (2, 3, 4)}
        their_grants = sorted(tx.all_grants().values(), key=lambda g: g["id"])
    with other_storage.transaction() as tx:
        tx.attach_bundle(files)
        new, conflicts, ahead = tx.bundle_plan()
        assert new == [ident(2), ident(3)]
        assert conflicts == [(ident(1), 1)]
        assert ahead == [(ident(1), 1, 2), (ident(4), 2, 3)]
        got = tx.bundle_memories([ident(2), ident(3)], {})
        assert got == [(theirs[ident(2)], their_versions[2]), (theirs[ident(3)], their_versions[3])]
        assert all(tuple(h) == HEAD_FIELDS for h, _ in got)
        assert tx.bundle_memories([ident(4), ident(99)], {ident(4): 2}) == [(theirs[ident(4)], their_versions[4][2:])]
        (cp,) = tx.bundle_missing_checkpoints()
        assert tuple(cp) == CHECKPOINT_FIELDS and (cp["actor"], cp["intent"], cp["step"], cp["record"]) == (
            "bob", "j", "t", b"x")
        assert sorted(tx.bundle_grants(), key=lambda g: g["id"]) == their_grants
        assert tx.heads_of([ident(60)])[ident(60)]["id"] == ident(60)  # the store itself reads on as before


def test_a_bundle_whose_columns_hold_sound_values_as_other_types_reads_in_the_stores_types(
        storage, other_storage, tmp_path):
    """A member may hold a version as text, or a time as text, that a restore's build casts into the
    store's table: merge's reads see them in the store's types too (a text version is compared with
    the store's as a number, the rows handed back are those of the untouched bundle), and the
    bundle's version digest is the store's."""
    from tests import tamper

    filled(storage)
    four, four_versions = memory(4, versions=3)
    with storage.transaction() as tx:
        tx.insert_memories([four], four_versions)
    _, _, files = exported(storage, tmp_path)
    put(other_storage, memory(60), ({**four, "current_version": 2}, four_versions[:2]))  # two versions behind
    with other_storage.transaction() as tx:
        tx.attach_bundle(files)
        plain = tx.bundle_plan(), tx.bundle_memories([ident(1), ident(2), ident(4)], {ident(4): 2})
        plain_grants = tx.bundle_grants()
    for table, statement in (("heads", "ALTER TABLE t ALTER current_version TYPE VARCHAR;"
                                       " ALTER TABLE t ALTER importance TYPE VARCHAR"),
                             ("versions", "ALTER TABLE t ALTER version TYPE VARCHAR"),
                             ("grants", "ALTER TABLE t ALTER created_at TYPE VARCHAR")):
        tamper.rewrite_member(files[table], statement)
    with other_storage.transaction() as tx:
        tx.attach_bundle(files)
        assert (tx.bundle_plan(), tx.bundle_memories([ident(1), ident(2), ident(4)], {ident(4): 2})) == plain
        assert tx.bundle_grants() == plain_grants
    from cortexctl.store.bundle import Members

    with Members(files) as members, storage.reading() as tx:
        assert members.version_digest() == tx.version_digest()


def test_a_bundle_from_before_grants_has_no_grants(storage, other_storage, tmp_path):
    filled(storage)
    _, _, files = exported(storage, tmp_path)
    files.pop("grants", None)
    with other_storage.transaction() as tx:
        tx.attach_bundle(files)
        assert tx.bundle_grants() == []
        assert tx.bundle_plan()[0] == [ident(1), ident(2), ident(3)]


def test_an_attached_bundle_lists_its_valid_times_and_links(storage, other_storage, tmp_path):
    from datetime import datetime

    t = datetime(2026, 3, 1, 12, 0, 0, 7)
    old, new = memory(1), memory(2)
    old[0].update(valid_to=t, superseded_by=ident(2))
    new[0].update(valid_from=t, supersedes=ident(1))
    put(storage, old, new, memory(3))
    _, _, files = exported(storage, tmp_path)
    with other_storage.transaction() as tx:
        tx.attach_bundle(files)
        assert tx.bundle_links() == [(ident(1), None, t, None, ident(2)), (ident(2), t, None, ident(1), None)]
