"""The DuckDB file after an import holds only live blocks (``store/reclaim.py``): the free blocks
the batches' checkpoints left are given back by a rewrite that keeps every table, key, index and
row, and the search structures are built from the rewritten file."""

from __future__ import annotations

import json

import pytest

from cortexctl import Cortex, FindQuery
from tests import tamper
from tests.conftest import assert_store_verifies

N = 2000
BATCH = 200  # many batches, many checkpoints: without the rewrite about 2/3 of the file is free
WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split()

SCHEMA = {
    "tables": "SELECT table_name, sql FROM duckdb_tables() ORDER BY 1",
    "indexes": "SELECT table_name, index_name, sql FROM duckdb_indexes() ORDER BY 1, 2",
    "constraints": "SELECT table_name, constraint_type, constraint_column_names FROM duckdb_constraints()"
                   " ORDER BY 1, 2, 3",
    "columns": "SELECT table_name, column_name, data_type, column_default, is_nullable FROM duckdb_columns()"
               " ORDER BY 1, 2",
    "migrations": "SELECT number, name FROM schema_migrations ORDER BY 1",
    "meta": "SELECT * FROM meta ORDER BY 1",
}


def _line(i: int) -> bytes:
    words = " ".join(WORDS[(i * p) % len(WORDS)] for p in (1, 5, 7))
    return json.dumps({"type": "fact", "text": f"note {i} {words} item{i}", "tags": ["t" + str(i % 7)]}).encode() + b"\n"


def _free_blocks(store) -> int:
    return tamper.rows(store, "SELECT free_blocks FROM pragma_database_size()")[0][0]


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    path = tmp_path_factory.mktemp("reclaim") / "store"
    report = Cortex(store=path, actor="alice").import_jsonl(iter([_line(i) for i in range(N)]), batch_size=BATCH)
    assert report.imported == N and report.batches == N // BATCH
    return path


def test_an_import_in_many_batches_leaves_no_free_blocks_in_the_database_file(imported):
    assert _free_blocks(imported) == 0


def test_the_rewritten_file_has_the_tables_keys_indexes_and_defaults_the_migrations_make(imported, tmp_path):
    fresh = tmp_path / "fresh"
    Cortex(store=fresh, actor="alice").write("fact", "one memory, in a file the migrations made")
    for name, query in SCHEMA.items():
        assert tamper.rows(imported, query) == tamper.rows(fresh, query), name


def test_the_rewritten_store_verifies_finds_from_its_snapshot_and_takes_writes(imported, tmp_path):
    import shutil

    assert Cortex(store=imported, actor="alice").store.snapshot_state() == "current"  # built from the new file
    store = tmp_path / "store"  # a copy: a new file, the snapshot is stale there
    shutil.copytree(imported, store)
    assert_store_verifies(store)
    cx = Cortex(store=store, actor="alice")
    hit = cx.find(FindQuery(near="item1234 ", k=1))[0]
    assert hit.text.startswith("note 1234 ")
    written = cx.write("fact", "written after the rewrite")
    assert tamper.rows(store, "SELECT count(*) FROM heads")[0][0] == N + 1
    assert cx.show(written.id).id == written.id


def test_the_file_is_rewritten_only_when_a_quarter_of_it_or_more_is_free():
    from cortexctl.store.reclaim import worth_it

    assert not worth_it({"free": 0, "total": 1})
    assert not worth_it({"free": 24, "total": 100})
    assert worth_it({"free": 25, "total": 100})
    assert worth_it({"free": 42, "total": 64})


def test_a_copy_into_the_store_killed_midway_is_swept_by_the_next_reclaim(tmp_path):
    """A rewritten file that met another file system is copied in beside the store's file
    (``files.move_in``); a kill mid-copy leaves that temp file, which the next reclaim removes."""
    path = tmp_path / "s"
    cx = Cortex(store=path, actor="alice")
    cx.write("fact", "the deploy key rotates monthly")
    left = path / ".cortex.duckdb.k1ll3d.tmp"
    left.write_bytes(b"half a copied database file")
    cx.import_jsonl(iter([_line(i) for i in range(300)]), batch_size=100)
    assert not left.exists()
    assert_store_verifies(path)
