"""Bundles cross between the backends: a DuckDB store's bundle restores into PostgreSQL, and that
store's own bundle restores into DuckDB, every member's rows and the version digest unchanged."""

from __future__ import annotations

import pytest

from tests.contract.conftest import _open, ident
from tests.contract.test_bundle_io import exported, filled


def member_rows(files) -> dict[str, list[tuple]]:
    """table -> every row of its member, sorted (the bundle's content, whatever the order)."""
    import duckdb

    con = duckdb.connect()
    try:
        return {table: sorted(con.execute("SELECT * FROM read_parquet(?)", [str(path)]).fetchall(), key=repr)
                for table, path in files.items()}
    finally:
        con.close()


def contents(storage) -> list:
    """What the store answers about its records, journal and state, through the protocol."""
    with storage.reading() as tx:
        ids = [ident(n) for n in range(1, 10)]
        return [tx.heads_of(ids), [tx.versions(i) for i in ids], list(tx.journal_entries(["write", "update"])),
                tx.journal_bounds(), tx.all_weights(), tx.all_checkpoints(), tx.all_grants(),
                {k: v for k, v in tx.health_counts().items() if k != "isolation"},  # each backend's own
                tx.version_digest()]


@pytest.mark.parametrize("start", ["duckdb", "postgres"])
def test_a_bundle_crosses_to_the_other_backend_and_back_unchanged(start, tmp_path):
    other = "postgres" if start == "duckdb" else "duckdb"
    first = _open(start, tmp_path, "first")
    if start == "duckdb":
        filled(first)
    else:  # the PostgreSQL store is filled by restoring a DuckDB store's bundle into it
        source = _open("duckdb", tmp_path, "source")
        filled(source)
        _, facts, files = exported(source, tmp_path, "source-bundle")
        first.restore_bundle(files, facts["schema_version"], lambda staged: None)
    _, facts, files = exported(first, tmp_path, "there")
    second = _open(other, tmp_path, "second")
    checked = []
    second.restore_bundle(files, facts["schema_version"], lambda staged: checked.append(type(staged).__name__))
    assert checked == [type(second).__name__]
    back_facts_members, back_facts, back_files = exported(second, tmp_path, "back")
    third = _open(start, tmp_path, "third")
    third.restore_bundle(back_files, back_facts["schema_version"], lambda staged: None)

    assert back_facts == facts
    assert member_rows(back_files) == member_rows(files)
    assert contents(second) == contents(first) == contents(third)
    with first.reading() as a, second.reading() as b:
        assert a.version_digest() == b.version_digest()
        assert a.table_counts(list(files)) == b.table_counts(list(files)) == {
            m["table"]: m["rows"] for m in back_facts_members}


def test_a_postgresql_stores_float32_vectors_cross_whole_and_a_duckdb_store_rounds_them(tmp_path):
    """PostgreSQL holds a vector as float32: its bundle carries it so, a PostgreSQL store restoring the
    bundle holds it as it was, and a DuckDB store holds it rounded to its float16; that store's
    bundle then carries the float16 values, which a PostgreSQL store holds exactly."""
    import numpy as np

    from tests.contract.conftest import as_stored, memory, put, unit_rows

    pg = _open("postgres", tmp_path, "pg")
    put(pg, memory(1), memory(2))
    mat = unit_rows(2, dim=8, seed=5)
    with pg.transaction() as tx:
        tx.insert_vectors([ident(1), ident(2)], [1, 1], "m", mat)
    _, facts, files = exported(pg, tmp_path, "from-pg")
    pairs = [(ident(1), 1), (ident(2), 1)]

    def vectors(storage):
        with storage.reading() as tx:
            got = tx.stored_vectors(pairs, "m")
        return np.stack([got[i] for i, _ in pairs])

    again = _open("postgres", tmp_path, "pg-again")
    again.restore_bundle(files, facts["schema_version"], lambda staged: None)
    np.testing.assert_array_equal(vectors(again), mat)
    duck = _open("duckdb", tmp_path, "duck")
    duck.restore_bundle(files, facts["schema_version"], lambda staged: None)
    half = as_stored(duck, mat)
    assert not np.array_equal(half, mat)
    np.testing.assert_array_equal(vectors(duck), half)
    _, back_facts, back_files = exported(duck, tmp_path, "from-duck")
    assert {len(r[-1]) for r in member_rows(back_files)["vectors"]} == {2 * 8}  # two bytes a value
    third = _open("postgres", tmp_path, "pg-third")
    third.restore_bundle(back_files, back_facts["schema_version"], lambda staged: None)
    np.testing.assert_array_equal(vectors(third), half)
