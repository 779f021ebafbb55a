"""What a restore does on PostgreSQL beyond the contract: it holds the store's writer lock from
start to end, leaves no schema of its own behind, and will not replace a schema the store shares."""

from __future__ import annotations

import pytest

from cortexctl.errors import StoreBusy, UsageError
from tests.contract.conftest import _open, entry, ident, memory, put
from tests.contract.test_bundle_io import exported, filled


def schemas_like(storage) -> set[str]:
    """The schemas whose names start with the store's."""
    with storage._connection() as con:
        rows = con.execute("SELECT nspname FROM pg_namespace WHERE starts_with(nspname, %s)",
                           [storage.schema]).fetchall()
        con.rollback()
    return {r[0] for r in rows}


@pytest.fixture
def bundle(tmp_path):
    source = _open("duckdb", tmp_path, "source")
    filled(source)
    _, facts, files = exported(source, tmp_path)
    return files, facts["schema_version"]


def test_writers_wait_for_a_restore_and_then_write_into_the_restored_store(bundle, tmp_path):
    from cortexctl.store import open_storage

    files, version = bundle
    target = _open("postgres", tmp_path, "target")
    put(target, memory(50))
    writer = open_storage(target.address, wait=0.3)  # another handle on the same store
    refused = []

    def check(staged) -> None:
        with pytest.raises(StoreBusy):
            with writer.transaction() as tx:
                tx.append_journal([entry("write", ident(50))])
        refused.append(True)

    target.restore_bundle(files, version, check)
    assert refused == [True]
    with writer.transaction() as tx:  # the lock is free again, and the store is the bundle's
        assert tx.existing_ids([ident(1), ident(50)]) == {ident(1)}
        tx.append_journal([entry("write", ident(1))])
    with target.reading() as tx:
        assert tx.journal_bounds()[0] == 5


def test_a_restore_leaves_no_schema_of_its_own_behind(bundle, tmp_path):
    files, version = bundle
    target = _open("postgres", tmp_path, "target")
    staged_names = []

    def refuse(staged) -> None:
        staged_names.append(staged.schema)
        raise RuntimeError("does not verify")

    with pytest.raises(RuntimeError):
        target.restore_bundle(files, version, refuse)
    assert schemas_like(target) == set()
    target.restore_bundle(files, version, lambda staged: staged_names.append(staged.schema))
    target.restore_bundle(files, version, lambda staged: staged_names.append(staged.schema))
    assert schemas_like(target) == {target.schema}
    assert all(name.startswith(target.schema + "_restore_") for name in staged_names)


def test_a_schema_the_store_shares_with_other_tables_is_not_replaced(bundle, tmp_path):
    files, version = bundle
    target = _open("postgres", tmp_path, "target")
    put(target, memory(50))
    with target._connection() as con:
        con.execute("CREATE TABLE not_ours (x integer)")
        con.commit()
    with pytest.raises(UsageError, match="holds more than the store"):
        target.restore_bundle(files, version, lambda staged: None)
    with target.reading() as tx:
        assert tx.existing_ids([ident(1), ident(50)]) == {ident(50)}
    assert schemas_like(target) == {target.schema}


def test_a_user_who_may_not_make_the_staging_schema_is_told_so_and_nothing_changes(bundle, tmp_path):
    import uuid

    from cortexctl.errors import ConfigError
    from cortexctl.store import open_storage

    files, version = bundle
    owner = _open("postgres", tmp_path, "target")
    put(owner, memory(50))
    role = f"r_{uuid.uuid4().hex[:10]}"
    with owner._connection() as con:
        con.execute(f'CREATE ROLE "{role}" LOGIN')
        con.commit()
    try:
        parts = owner.address.split("://", 1)[1]
        _user, _, rest = parts.partition("@")
        limited = open_storage(f"postgresql://{role}@{rest}", wait=1.0)
        with pytest.raises(ConfigError, match="permission denied") as err:
            limited.restore_bundle(files, version, lambda staged: None)
        assert "CREATE on the database" in err.value.hint
        with owner.reading() as tx:
            assert tx.existing_ids([ident(1), ident(50)]) == {ident(50)}
        assert schemas_like(owner) == {owner.schema}
    finally:
        with owner._connection() as con:
            con.execute(f'DROP ROLE "{role}"')
            con.commit()


def test_readers_during_a_restore_see_the_old_store_or_the_new_one_never_a_mix(bundle, tmp_path):
    import threading

    files, version = bundle
    target = _open("postgres", tmp_path, "target")
    put(target, *(memory(n) for n in range(50, 80)))
    with target.transaction() as tx:
        tx.append_journal([entry("write", ident(n)) for n in range(50, 60)])

    def state() -> tuple:
        with target.reading() as tx:
            return tx.count_heads(), tx.journal_bounds(), tx.version_digest(), len(tx.all_grants())

    old = state()
    seen: list = []
    errors: list = []
    done = threading.Event()

    def reader() -> None:
        while not done.is_set():
            try:
                seen.append(state())
            except Exception as exc:  # noqa: BLE001 - collected, asserted below
                errors.append(exc)

    readers = [threading.Thread(target=reader) for _ in range(2)]
    for r in readers:
        r.start()
    try:
        target.restore_bundle(files, version, lambda staged: None)
        new = state()
        while len([s for s in seen if s == new]) < 2 and not errors:  # readers reach the new store too
            done.wait(0.05)
    finally:
        done.set()
        for r in readers:
            r.join(30)
    assert errors == []
    assert new != old and set(seen) <= {old, new} and old in seen
    assert schemas_like(target) == {target.schema}
