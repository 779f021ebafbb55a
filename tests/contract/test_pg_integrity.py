"""verify's walks on PostgreSQL give the same answers whether the database's collation orders
IDs bytewise itself or the queries must say so (``COLLATE "C"``)."""

from __future__ import annotations

from tests.contract.conftest import _open, entry, ident, memory, put


def walks(storage) -> list:
    with storage.reading() as tx:
        return [tx.memory_batch_ends(2), list(tx.by_memory(2)), list(tx.by_memory(2, ident(2), ident(7))),
                tx.hash_mismatches(b"d", after=ident(1)), tx.orphan_versions(),
                tx.head_version_mismatches()]


def test_the_walks_are_the_same_with_and_without_an_explicit_bytewise_collation(tmp_path):
    from cortexctl.store.pg import integrity

    storage = _open("postgres", tmp_path)
    bad, versions = memory(3, versions=2)
    bad["current_version"] = 1
    put(storage, *(memory(n) for n in (1, 2, 5, 7, 8)), (bad, versions))
    with storage.transaction() as tx:
        tx.insert_version(memory(9)[1][0])
        tx.append_journal([entry("write", ident(n)) for n in (1, 2, 3, 4, 5)] + [entry("attest", "i")])
    integrity._collations.pop(storage.conninfo, None)
    as_found = walks(storage)
    integrity._collations[storage.conninfo] = integrity.BYTEWISE
    try:
        assert walks(storage) == as_found
    finally:
        integrity._collations.pop(storage.conninfo, None)
    assert as_found[0] == [ident(2), ident(4), ident(7)]
    assert as_found[4] == [ident(9)] and [r[0] for r in as_found[5]] == [ident(3)]


def test_a_type_code_that_is_not_one_byte_hashes_to_nothing(tmp_path):
    from cortexctl.memory import codec
    from tests.contract.test_integrity import hashed

    storage = _open("postgres", tmp_path)
    put(storage, hashed(memory(1)), hashed(memory(2)))
    with storage._connection() as con:  # the schema allows it (smallint); SHA-256 over one type byte cannot
        con.execute(f"UPDATE {storage.schema}.versions SET type = 258 WHERE id = %s", [ident(2)])
        con.commit()
    with storage.reading() as tx:
        assert tx.hash_mismatches(codec.HASH_DOMAIN) == (2, [(ident(2), 1)])
