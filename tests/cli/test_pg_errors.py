"""What a user meets when a PostgreSQL store cannot be used: one line on stderr, the documented
exit code, nothing written, and never the password. Against a real server (tests/pg.py)."""

from __future__ import annotations

import uuid

import pytest

from tests.conftest import assert_clean_error, run_in_process
from tests.pg import base_uri, store_uri
from tests.pg import with_parts as _with


def _admin():
    import psycopg

    return psycopg.connect(base_uri(), autocommit=True)


def _schema_of(uri: str) -> str:
    return uri.rsplit("schema=", 1)[1]


def test_an_unreachable_server_is_exit_9_naming_the_store_without_its_password(tmp_path):
    uri = "postgresql://agent:s3cret-pw@127.0.0.1:9/memory"  # port 9: nothing listens there
    run = run_in_process(uri, "write", "fact", "x")
    assert_clean_error(run, 9)
    assert "s3cret-pw" not in run.err and "127.0.0.1" in run.err, run


def test_a_wrong_password_is_exit_2_saying_authentication_failed_and_never_the_password():
    role = f"pw_{uuid.uuid4().hex[:8]}"
    with _admin() as con:
        con.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'right-one'")
        hba = con.execute("SHOW hba_file").fetchone()[0]
        with open(hba) as fh:
            rules = fh.read()
        if f"local all {role} " not in rules:  # password auth for this role alone, before the trust lines
            with open(hba, "w") as fh:
                fh.write(f"local all {role} scram-sha-256\n" + rules)
            con.execute("SELECT pg_reload_conf()")
    uri = _with(store_uri("auth"), user=role, password="wrong-one")
    run = run_in_process(uri, "write", "fact", "x")
    assert_clean_error(run, 2)
    assert "authentication failed" in run.err and "wrong-one" not in run.err, run


def test_a_database_without_pgvector_that_the_user_may_not_enable_says_how_and_writes_nothing():
    role, db = f"plain_{uuid.uuid4().hex[:8]}", f"novec_{uuid.uuid4().hex[:8]}"
    with _admin() as con:
        con.execute(f"CREATE ROLE {role} LOGIN")
        con.execute(f"CREATE DATABASE {db} OWNER {role}")
    uri = _with(store_uri("novec"), user=role, database=db)
    run = run_in_process(uri, "write", "fact", "x")
    assert_clean_error(run, 2)
    assert "pgvector" in run.err and "CREATE EXTENSION vector" in run.err, run
    import psycopg

    with psycopg.connect(_with(base_uri(), database=db), autocommit=True) as con:
        assert con.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s",
                           [_schema_of(uri)]).fetchone()[0] == 0  # nothing written


def test_a_store_made_by_a_newer_cortexctl_is_refused_and_left_as_it_was():
    uri = store_uri("newer")
    assert run_in_process(uri, "write", "fact", "x").code == 0
    with _admin() as con:
        con.execute(f'UPDATE "{_schema_of(uri)}".meta SET value = %s WHERE key = %s', ["99", "schema_version"])
    for args in (("write", "fact", "y"), ("find", "--near", "x")):
        run = run_in_process(uri, *args)
        assert_clean_error(run, 1)
        assert "newer" in run.err, run
    with _admin() as con:
        assert con.execute(f'SELECT count(*) FROM "{_schema_of(uri)}".heads').fetchone()[0] == 1


def test_a_writer_holding_the_store_makes_another_wait_then_exit_4():
    from cortexctl.store import open_storage

    uri = store_uri("busy")
    assert run_in_process(uri, "write", "fact", "x").code == 0
    with open_storage(uri).transaction():  # holds the store's writer lock until the block ends
        run = run_in_process(uri, "write", "fact", "y", "--wait", "0")
    assert_clean_error(run, 4)
    assert "busy" in run.err, run


def test_no_store_in_the_schema_is_not_found_for_a_reader_and_creates_nothing():
    uri = store_uri("none")
    run = run_in_process(uri, "find", "--near", "x")
    assert run.code == 3, run
    with _admin() as con:
        assert con.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s",
                           [_schema_of(uri)]).fetchone()[0] == 0


@pytest.mark.parametrize("bad", ["postgresql://host:notaport/db", "postgresql://h/db?schema=", "postgresql://h/db?nosuchoption=1"])
def test_a_malformed_store_uri_is_a_usage_error(bad):
    run = run_in_process(bad, "find", "--near", "x")
    assert_clean_error(run, 2)


@pytest.mark.parametrize("schema", ["pg_catalog", "pg_toast", "information_schema"])
def test_a_schema_of_postgresqls_own_is_refused_as_a_store(schema):
    uri = f"{base_uri()}{'&' if '?' in base_uri() else '?'}schema={schema}"
    for args in (("write", "fact", "x"), ("find", "--near", "x")):
        run = run_in_process(uri, *args)
        assert_clean_error(run, 2)
        assert "PostgreSQL's own" in run.err, run


def test_a_user_who_may_not_create_the_stores_schema_is_told_what_it_needs_and_nothing_is_written():
    role = f"nocreate_{uuid.uuid4().hex[:8]}"
    with _admin() as con:
        con.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")  # what it lacks is CREATE alone
        con.execute(f"CREATE ROLE {role} LOGIN")  # no CREATE on the database
    uri = _with(store_uri("nocreate"), user=role)
    run = run_in_process(uri, "write", "fact", "x")
    assert_clean_error(run, 2)
    assert "permission denied" in run.err, run
    with _admin() as con:
        assert con.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s",
                           [_schema_of(uri)]).fetchone()[0] == 0
