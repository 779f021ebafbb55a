"""The store room: schema versions, migrations, refusals and corrupt files."""

from __future__ import annotations

import pytest

from cortexctl import Cortex, FindQuery
from cortexctl.errors import SchemaTooNew, UsageError
from cortexctl.store import migrations
from tests import tamper
from tests.conftest import assert_clean_error


def test_a_new_store_records_its_schema_version_and_migrations(cx, store):
    cx.write("fact", "x")
    assert tamper.schema(store) == (str(migrations.latest()), [name for _, name, _ in migrations.MIGRATIONS])


def test_a_store_from_a_newer_cortexctl_is_refused_by_readers_and_writers(cx, cli, store):
    uri = cx.write("fact", "x").uri
    tamper.set_schema_version(store, "99")
    with pytest.raises(SchemaTooNew):
        cx.show(uri)
    with pytest.raises(SchemaTooNew):
        cx.write("fact", "y")
    r = cli("find")
    assert_clean_error(r, 1)
    assert "newer" in r.err


def test_an_older_store_is_migrated_forward_when_opened(cx, store):
    uri = cx.write("fact", "x").uri
    # Pretend no migration ever ran: a database file without any of cortexctl's tables.
    tamper.rewind_schema(store, 0)
    assert cx.find(FindQuery()) == []  # a reader migrates to the current schema
    assert cx.write("fact", "again").uri != uri


def test_a_store_from_before_the_search_tables_gets_postings_and_then_vectors(cx, store):
    uri = cx.write("fact", "The pager rota changes every Monday").uri
    # Make it a schema-1 store: no search tables, no record of migration 2.
    tamper.rewind_schema(store, 1)
    hits = cx.find(FindQuery(near="pager rota"))
    assert [h.uri for h in hits] == [uri]
    assert "lexical" in hits[0].lanes and "semantic" not in hits[0].lanes  # its vector waits for reindex
    assert cx.reindex()["embedded"] == 1
    assert "semantic" in cx.find(FindQuery(near="pager rota"))[0].lanes


def test_a_file_that_is_not_a_database_is_an_integrity_error(cli, store):
    store.mkdir(mode=0o700)
    tamper.db_file(store).write_bytes(b"this is not a duckdb file" * 100)
    r = cli("find")
    assert_clean_error(r, 7)
    assert str(store) in r.err


def test_a_store_path_that_is_a_file_is_a_usage_error(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(UsageError):
        Cortex(store=f, actor="a").write("fact", "x")


def test_a_store_from_before_salience_gets_head_confidence_and_verifies(cx, store):
    low = cx.write("fact", "a shaky rumour", confidence=0.25).uri
    cx.update(low, confidence=0.5)
    sure = cx.write("fact", "a checked fact").uri
    # Make it a schema-2 store: no head confidence, no weights, buckets or checkpoints.
    tamper.rewind_schema(store, 2)
    assert cx.verify().ok  # opening migrates; the replay derives each head's confidence
    got = dict(tamper.rows(store, "SELECT id, confidence FROM heads"))
    assert got == {low.rsplit("/", 1)[1]: 0.5, sure.rsplit("/", 1)[1]: 1.0}
    assert cx.attest("i", "success", [low, sure]).affected


def test_a_store_from_before_grants_gets_an_empty_grants_table_and_verifies(cx, store):
    uri = cx.write("fact", "kept across the migration", visibility="scoped").uri
    tamper.rewind_schema(store, 3)
    assert cx.grants() == []  # opening migrates
    assert cx.verify().ok
    cx.grant("helper")
    from cortexctl import Cortex

    assert Cortex(store=store, actor="helper").show(uri).uri == uri


def test_a_store_from_before_float16_vectors_has_them_rounded_when_opened_and_answers_the_same(cx, store, cli):
    """Schema version 7 holds vectors as float16: an older store's float32 rows are rounded to it when
    the store is first opened (a row of another length is left for verify to name)."""
    for text in ("the deploy key rotates weekly", "the pager rota changes on mondays", "lunch is at noon"):
        cx.write("fact", text)
    before = cli("find", "--near", "deploy key", "--json").json()["results"]
    tamper.rewind_schema(store, 6)
    assert tamper.widen_vectors(store) == 3
    assert {r[0] for r in tamper.rows(store, "SELECT octet_length(vec) // dim FROM vectors")} == {4}
    assert cli("find", "--near", "deploy key", "--json").json()["results"] == before  # it migrates first
    assert tamper.schema(store)[0] == str(migrations.latest())
    assert {r[0] for r in tamper.rows(store, "SELECT octet_length(vec) // dim FROM vectors")} == {2}
    assert cli("verify").code == 0
    tamper.sql(store, "UPDATE vectors SET vec = vec || vec WHERE key = (SELECT min(key) FROM vectors)")
    r = cli("verify")
    assert r.code == 7 and "failed verification" in r.err
