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
