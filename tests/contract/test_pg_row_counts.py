"""The PostgreSQL store keeps its heads and vectors counted (``meta`` 'rows:heads' and 'rows:vectors',
by statement triggers), so a write asks whether memories wait for a vector without counting every row
under the writer lock. The counts must stay exact whoever changes the rows: cortexctl's inserts, its
COPY, its deletes, and statements behind its back."""

from __future__ import annotations

from tests import tamper
from tests.contract.conftest import _open, ident, memory, put, unit_rows


def _counted(storage) -> dict[str, int]:
    return {k: int(v) for k, v in tamper.rows(storage.address, "SELECT key, value FROM meta WHERE key LIKE %s", ["rows:%"])}


def _real(storage) -> dict[str, int]:
    return {f"rows:{t}": tamper.rows(storage.address, f"SELECT count(*) FROM {t}")[0][0] for t in ("heads", "vectors")}


def _pending(storage) -> bool:
    with storage.transaction() as tx:
        return tx.maybe_pending("m")


def test_the_first_write_that_asks_counts_the_rows_and_every_change_after_keeps_them_exact(tmp_path):
    storage = _open("postgres", tmp_path)
    put(storage, memory(1), memory(2))
    assert _counted(storage) == {}  # nothing asked yet
    assert _pending(storage) is True  # two heads, no vector
    assert _counted(storage) == _real(storage) == {"rows:heads": 2, "rows:vectors": 0}
    with storage.transaction() as tx:
        tx.insert_vectors([ident(1)], [1], "m", unit_rows(1))  # one row: an INSERT
        assert tx.maybe_pending("m") is True  # this transaction's own rows count
        tx.insert_vectors([ident(2)], [1], "m", unit_rows(1, seed=1))
    assert _pending(storage) is False
    put(storage, *[memory(n) for n in range(3, 40)])
    with storage.transaction() as tx:
        tx.insert_vectors([ident(n) for n in range(3, 40)], [1] * 37, "m", unit_rows(37, seed=2))  # a COPY
    assert _counted(storage) == _real(storage) == {"rows:heads": 39, "rows:vectors": 39}
    assert _pending(storage) is False
    with storage.transaction() as tx:
        tx.drop_vectors(ident(5))
    assert _counted(storage) == _real(storage) == {"rows:heads": 39, "rows:vectors": 38}
    assert _pending(storage) is True


def test_rows_changed_behind_cortexctls_back_are_counted_too(tmp_path):
    storage = _open("postgres", tmp_path)
    put(storage, memory(1), memory(2))
    with storage.transaction() as tx:
        tx.insert_vectors([ident(1), ident(2)], [1, 1], "m", unit_rows(2))
    assert _pending(storage) is False
    tamper.rows(storage.address, "DELETE FROM vectors WHERE id = %s", [ident(2)])
    assert _pending(storage) is True
    assert _counted(storage) == _real(storage)
    tamper.rows(storage.address, "TRUNCATE vectors")
    assert _counted(storage) == _real(storage) == {"rows:heads": 2, "rows:vectors": 0}
    assert _pending(storage) is True


def test_a_reading_transaction_answers_without_making_the_counts(tmp_path):
    storage = _open("postgres", tmp_path)
    put(storage, memory(1))
    with storage.reading() as tx:
        assert tx.maybe_pending("m") is True
    assert _counted(storage) == {}
    assert _pending(storage) is True and _counted(storage) == {"rows:heads": 1, "rows:vectors": 0}


def test_a_migration_has_the_rows_counted_again(tmp_path):
    storage = _open("postgres", tmp_path)
    put(storage, memory(1))
    assert _pending(storage) is True
    tamper.rows(storage.address, "UPDATE meta SET value = '7' WHERE key = 'rows:heads'")  # as a rebuilt table would
    for statement in ("ALTER TABLE heads DROP COLUMN valid_from, DROP COLUMN valid_to, DROP COLUMN supersedes,"
                      " DROP COLUMN superseded_by", "DELETE FROM schema_migrations WHERE number = 5"):
        tamper.rows(storage.address, statement)  # the store as schema version 4 left it
    tamper.set_schema_version(storage.address, "4")
    put(_open("postgres", tmp_path), memory(2))  # a new process: it migrates the store to 5
    assert _counted(storage) == {}
    assert _pending(storage) is True
    assert _counted(storage) == _real(storage) == {"rows:heads": 2, "rows:vectors": 0}


def test_a_user_who_may_only_change_rows_writes_and_is_answered_by_counting(tmp_path):
    """The triggers need CREATE on the store's schema: a user granted only the rows writes as well,
    and maybe_pending counts every time instead."""
    import uuid

    from cortexctl.store import open_storage

    owner = _open("postgres", tmp_path)
    put(owner, memory(1))
    role = f"r_{uuid.uuid4().hex[:10]}"
    with owner._connection() as con:
        con.execute(f'CREATE ROLE "{role}" LOGIN')
        con.execute(f'GRANT USAGE ON SCHEMA "{owner.schema}" TO "{role}"')
        con.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "{owner.schema}" TO "{role}"')
        con.commit()
    try:
        _user, _, rest = owner.address.split("://", 1)[1].partition("@")
        limited = open_storage(f"postgresql://{role}@{rest}", wait=5.0)
        put(limited, memory(2))
        for _ in range(2):  # the second time without trying again
            with limited.transaction() as tx:
                assert tx.maybe_pending("m") is True
                tx.insert_vectors([ident(1), ident(2)], [1, 1], "m", unit_rows(2))
                assert tx.maybe_pending("m") is False
                tx.drop_vectors(ident(1)), tx.drop_vectors(ident(2))
        assert _counted(owner) == {}
        with owner.reading() as tx:
            assert tx.existing_ids([ident(1), ident(2)]) == {ident(1), ident(2)}
    finally:
        with owner._connection() as con:
            con.execute(f'DROP OWNED BY "{role}"')
            con.execute(f'DROP ROLE "{role}"')
            con.commit()
