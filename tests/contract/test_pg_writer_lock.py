"""The PostgreSQL backend's write transaction once the store was seen current: the writer lock and the
schema version come in one round trip, and what changed behind a long-lived storage's back still
counts (a store migrated by a newer cortexctl is refused, a dropped one is made again)."""

from __future__ import annotations

import pytest

from cortexctl.errors import SchemaTooNew
from tests import tamper
from tests.contract.conftest import _open, ident, memory, put


def test_a_storage_that_saw_the_store_current_refuses_it_once_a_newer_cortexctl_migrated_it(tmp_path):
    storage = _open("postgres", tmp_path)
    put(storage, memory(1))
    assert storage._current  # the next transactions take the short way
    tamper.set_schema_version(storage.address, "999")
    head, versions = memory(2)
    with pytest.raises(SchemaTooNew), storage.transaction() as tx:
        tx.insert_memories([head], versions)
    tamper.set_schema_version(storage.address, str(_latest()))
    with storage.reading() as tx:
        assert tx.existing_ids([ident(1), ident(2)]) == {ident(1)}  # nothing of the refused write


def test_a_storage_that_saw_the_store_current_makes_it_again_after_its_schema_was_dropped(tmp_path):
    storage = _open("postgres", tmp_path)
    put(storage, memory(1))
    tamper.rows(storage.address, f'DROP SCHEMA "{storage.schema}" CASCADE')
    put(storage, memory(2))
    with storage.reading() as tx:
        assert tx.existing_ids([ident(1), ident(2)]) == {ident(2)}
        assert tx.journal_bounds()[0] == 0


def test_a_writer_held_back_by_another_gives_up_after_its_wait_the_short_way_too(tmp_path):
    from cortexctl.errors import StoreBusy
    from cortexctl.store import open_storage

    storage = _open("postgres", tmp_path)
    put(storage, memory(1))
    storage.wait = 0.2
    with open_storage(storage.address).transaction():  # another writer holds the lock meanwhile
        with pytest.raises(StoreBusy, match="is busy"), storage.transaction():
            pass
    put(storage, memory(2))  # and takes it once it is free


def _latest() -> int:
    from cortexctl.store.pg import schema

    return schema.latest()


def test_a_client_library_that_cannot_pipeline_writes_and_refuses_as_one_that_can(tmp_path, monkeypatch):
    """libpq before 14 has no pipeline mode (a psycopg built against a system libpq): the same
    statements go one by one, with the same rows written and the same refusals."""
    import psycopg

    from cortexctl.errors import IntegrityError

    def libpq_13(check: bool = False) -> bool:  # as psycopg answers over a libpq before 14
        if check:
            raise psycopg.NotSupportedError("Connection.pipeline() requires libpq version 14.0 or greater")
        return False

    monkeypatch.setattr(psycopg.capabilities, "has_pipeline", libpq_13)
    storage = _open("postgres", tmp_path)
    put(storage, memory(1))
    put(storage, memory(2))  # the short way: lock and schema check without a pipeline
    head, versions = memory(1)
    with pytest.raises(IntegrityError, match="already exists"), storage.transaction() as tx:
        tx.insert_memories([head], versions)
    tamper.set_schema_version(storage.address, "999")
    with pytest.raises(SchemaTooNew), storage.transaction():
        pass
    tamper.set_schema_version(storage.address, str(_latest()))
    with storage.reading() as tx:
        assert tx.existing_ids([ident(1), ident(2), ident(3)]) == {ident(1), ident(2)}


def test_a_resident_storage_reading_the_short_way_still_sees_a_newer_a_dropped_and_an_older_store(tmp_path):
    """A resident storage that has read the store current begins its reading transactions with the
    schema version alone: a store migrated by a newer cortexctl is refused, a dropped one is no store,
    and one made again at an older version is migrated forward by the long way."""
    from cortexctl.store import open_storage
    from cortexctl.store.interface import NoStore as Missing

    storage = _open("postgres", tmp_path)
    put(storage, memory(1))
    resident = open_storage(storage.address, wait=5.0, resident=True)
    try:
        for _ in range(2):
            with resident.reading() as tx:
                assert tx.existing_ids([ident(1)]) == {ident(1)}
        assert resident._seen_current
        tamper.set_schema_version(storage.address, "999")
        with pytest.raises(SchemaTooNew), resident.reading():
            pass
        tamper.set_schema_version(storage.address, str(_latest()))
        with resident.reading() as tx:
            assert tx.existing_ids([ident(1)]) == {ident(1)}
        tamper.rows(storage.address, "ALTER TABLE heads DROP COLUMN valid_from, DROP COLUMN valid_to,"
                                     " DROP COLUMN supersedes, DROP COLUMN superseded_by")
        tamper.rows(storage.address, "DELETE FROM schema_migrations WHERE number >= 5")
        tamper.set_schema_version(storage.address, "4")
        with resident.reading() as tx:  # the long way: migrated to the newest first
            assert tx.existing_ids([ident(1)]) == {ident(1)}
        assert tamper.rows(storage.address, "SELECT value FROM meta WHERE key = 'schema_version'") == [(str(_latest()),)]
        tamper.rows(storage.address, f'DROP SCHEMA "{storage.schema}" CASCADE')
        with pytest.raises(Missing), resident.reading():
            pass
    finally:
        resident.close()
