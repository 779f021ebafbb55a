"""The one place tests reach a store's (or a bundle's) files behind cortexctl's back.

Corruption tests say what they change by meaning: a field of a memory, a journal entry's payload,
some bytes of a file, rows that go missing. How that is done on the backend's files (today the
DuckDB database ``cortex.duckdb`` and a bundle's Parquet members) is kept here, so that a second
backend is one more branch in this module and not a rewrite of every test. ``sql`` and ``rows`` are
the last resort, for tampering no operation below names; inspection that cortexctl can answer
itself goes through ``Cortex`` or ``Storage``, not here.

Every function opens the files, changes or reads them, and closes them again: call them while no
cortexctl process holds the store.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

DB_NAME = "cortex.duckdb"


def db_file(store: str | os.PathLike) -> Path:
    """The file holding the store's tables."""
    return Path(store) / DB_NAME


@contextmanager
def _connect(store: str | os.PathLike, *, read_only: bool = False) -> Iterator[Any]:
    import duckdb

    con = duckdb.connect(str(db_file(store)), read_only=read_only)
    try:
        yield con
    finally:
        con.close()


# -- by meaning ---------------------------------------------------------------------------------------
def set_field(store: str | os.PathLike, memory_id: str, field: str, value: Any) -> None:
    """Set one head field (importance, access_count, citations, type, ...) of a memory; ``store`` is a
    DuckDB store's directory or a PostgreSQL store's ``postgresql://`` URI."""
    if _is_pg(store):
        _pg_sql(str(store), f'UPDATE heads SET "{field}" = %s WHERE id = %s', [value, memory_id])
        return
    sql(store, f'UPDATE heads SET "{field}" = ? WHERE id = ?', [value, memory_id])


def _is_pg(store) -> bool:
    return isinstance(store, str) and store.startswith(("postgresql://", "postgres://"))


def _pg_sql(uri: str, statement: str, params: Sequence[Any]) -> list[tuple]:
    """One statement on a PostgreSQL store's tables (its schema first on the search path); its rows."""
    import psycopg

    from cortexctl.store.pg import split_uri

    conninfo, schema = split_uri(uri)
    with psycopg.connect(conninfo, autocommit=True) as con:
        con.execute("SELECT set_config('search_path', %s, false)", [f'"{schema}", public'])
        cur = con.execute(statement, list(params))
        return cur.fetchall() if cur.description else []


def set_version_field(store: str | os.PathLike, memory_id: str, version: int, field: str, value: Any) -> None:
    """Set one field (data, hash, provenance, ...) of one stored version of a memory."""
    sql(store, f'UPDATE versions SET "{field}" = ? WHERE id = ? AND version = ?', [value, memory_id, version])


def version_field(store: str | os.PathLike, memory_id: str, version: int, field: str) -> Any:
    """One field of one stored version of a memory, as stored."""
    (value,) = rows(store, f'SELECT "{field}" FROM versions WHERE id = ? AND version = ?', [memory_id, version])[0]
    return value


def rename_memory(store: str | os.PathLike, memory_id: str, new_id: str) -> None:
    """Give a memory (its head and its versions) another id."""
    sql(store, "UPDATE heads SET id = ? WHERE id = ?", [new_id, memory_id])
    sql(store, "UPDATE versions SET id = ? WHERE id = ?", [new_id, memory_id])


def journal(store: str | os.PathLike) -> list[tuple[int, str]]:
    """(seq, kind) of every journal entry, in order."""
    return rows(store, "SELECT seq, kind FROM journal ORDER BY seq")


def journal_kinds(store: str | os.PathLike) -> list[str]:
    return [kind for _, kind in journal(store)]


def delete_journal(store: str | os.PathLike, *, kind: str | None = None, seq: int | None = None) -> None:
    """Remove the journal entries of a kind, or the one at a sequence number."""
    if (kind is None) == (seq is None):
        raise ValueError("give kind or seq")
    if kind is not None:
        sql(store, "DELETE FROM journal WHERE kind = ?", [kind])
    else:
        sql(store, "DELETE FROM journal WHERE seq = ?", [seq])


def edit_payload(store: str | os.PathLike, kind: str, change: Callable[[dict], None], *, actor: str | None = None,
                 ref: str | None = None, last: bool = False) -> int:
    """Decode the first (or last) journal entry of ``kind`` (by ``actor``, about ``ref``), let
    ``change`` edit the document in place, and store it re-encoded; the entry's seq."""
    from cortexctl.memory import codec

    where, params = ["kind = ?"], [kind]
    for column, value in (("actor", actor), ("ref", ref)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    order = "DESC" if last else "ASC"
    with _connect(store) as con:
        seq, payload = con.execute(f"SELECT seq, payload FROM journal WHERE {' AND '.join(where)} "
                                   f"ORDER BY seq {order} LIMIT 1", params).fetchall()[0]
        doc = codec.decode(payload)
        change(doc)
        con.execute("UPDATE journal SET payload = ? WHERE seq = ?", [codec.encode(doc), seq])
    return seq


def count(store: str | os.PathLike, table: str) -> int:
    """How many rows a table of the store holds (heads, versions, journal, rate_buckets, grants, ...)."""
    return rows(store, f'SELECT count(*) FROM "{table}"')[0][0]


def grants(store: str | os.PathLike) -> list[tuple]:
    """Every stored grant row, ordered by id."""
    return rows(store, "SELECT * FROM grants ORDER BY id")


def replace_grants(store: str | os.PathLike, grant_rows: Sequence[Sequence[Any]]) -> None:
    """Put these grant rows (as ``grants`` returns them) in place of the stored ones."""
    with _connect(store) as con:
        con.execute("DELETE FROM grants")
        for row in grant_rows:
            con.execute(f"INSERT INTO grants VALUES ({', '.join('?' * len(row))})", list(row))


def drain_rate_bucket(store: str | os.PathLike, actor: str, intent: str, *, tokens: float = -1e6) -> None:
    """Empty an (actor, intent) attest bucket so far below zero that it cannot refill during a test."""
    sql(store, "UPDATE rate_buckets SET tokens = ? WHERE actor = ? AND intent = ?", [tokens, actor, intent])


def tables(store: str | os.PathLike) -> set[str]:
    """The names of the store's tables."""
    return {r[0] for r in rows(store, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'")}


def every_table(store: str | os.PathLike) -> dict[str, list[str]]:
    """Every row of every table, as sorted reprs: a whole-store state to compare before and after."""
    state: dict[str, list[str]] = {}
    with _connect(store, read_only=True) as con:
        names = [r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables ORDER BY table_name").fetchall()]
        for name in names:
            state[name] = sorted(repr(row) for row in con.execute(f'SELECT * FROM "{name}"').fetchall())
    return state


# -- the schema -------------------------------------------------------------------------------------------
_UNDO = {  # what each migration added, to make a store look as if it never ran
    7: [],  # the vectors' values only (float16): a rewound store keeps them so
    6: [],  # no table changes: write entries leave out implied fields from here on
    5: [f"ALTER TABLE heads DROP COLUMN {c}" for c in ("valid_from", "valid_to", "supersedes", "superseded_by")],
    4: ["DROP TABLE grants"],
    3: ["DROP TABLE learned_weights", "DROP TABLE rate_buckets", "DROP TABLE checkpoints",
        "ALTER TABLE heads DROP COLUMN confidence"],
    2: ["DROP TABLE vectors", "DROP TABLE vectors_dropped", "DROP TABLE lex_docs", "DROP TABLE lex_postings"],
    1: ["DROP TABLE heads", "DROP TABLE versions", "DROP TABLE frames", "DROP TABLE journal", "DROP TABLE meta",
        "DROP TABLE schema_migrations"],
}


def schema(store: str | os.PathLike) -> tuple[str, list[str]]:
    """The store's recorded schema version and the names of the migrations it records, in order."""
    with _connect(store, read_only=True) as con:
        version = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchall()
        names = [r[0] for r in con.execute("SELECT name FROM schema_migrations ORDER BY number").fetchall()]
    return (version[0][0] if version else None), names


def widen_vectors(store: str | os.PathLike) -> int:
    """Hold every stored vector as float32 (4 bytes a value), as a store before schema version 7 did;
    how many rows were rewritten."""
    import numpy as np

    with _connect(store) as con:
        rows = con.execute("SELECT key, vec FROM vectors").fetchall()
        for key, vec in rows:
            con.execute("UPDATE vectors SET vec = ? WHERE key = ?",
                        [np.frombuffer(vec, dtype="<f2").astype("<f4").tobytes(), key])
    return len(rows)


def set_schema_version(store: str | os.PathLike, value: str) -> None:
    """Record another schema version (a newer cortexctl's, say) without changing the tables."""
    if _is_pg(store):
        _pg_sql(str(store), "UPDATE meta SET value = %s WHERE key = 'schema_version'", [value])
        return
    sql(store, "UPDATE meta SET value = ? WHERE key = 'schema_version'", [value])


def rewind_schema(store: str | os.PathLike, to: int) -> None:
    """Make the store what schema version ``to`` left (0: no tables at all): the later migrations'
    tables, columns and records go, the data in what stays is kept."""
    with _connect(store) as con:
        latest = con.execute("SELECT max(number) FROM schema_migrations").fetchall()[0][0]
        for number in range(latest, to, -1):
            for statement in _UNDO[number]:
                con.execute(statement)
        if to:
            con.execute("DELETE FROM schema_migrations WHERE number > ?", [to])
            con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(to)])


# -- holding the store from another process -------------------------------------------------------------
_HOLD = """
import sys, time, duckdb
while True:  # as soon as the file can be had (between two of a writer's transactions)
    try:
        con = duckdb.connect(sys.argv[1])
        break
    except duckdb.IOException:
        time.sleep(0.001)
print("holding", flush=True)
sys.stdin.readline()  # until told (a line, or stdin closed)
con.close()
print("released", flush=True)
"""


def hold_open(store: str | os.PathLike) -> subprocess.Popen:
    """Start a process that opens the store's database for writing as soon as it can and keeps it
    open until a line arrives on its stdin; it prints "holding" once it has it and "released"
    after. Text pipes; the caller reads "holding" when it needs to know."""
    return subprocess.Popen([sys.executable, "-c", _HOLD, str(db_file(store))], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)


_LOCK = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()  # until stdin closes or the process is killed
"""


def hold_writer_lock(store: str | os.PathLike) -> subprocess.Popen:
    """Start a process that takes the store's writer lock (as another cortexctl writing would) and
    keeps it until killed or its stdin closes; returns once it holds it."""
    proc = subprocess.Popen([sys.executable, "-c", _LOCK, str(Path(store) / ".lock")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


# -- bytes of a file ------------------------------------------------------------------------------------
def flip_bytes(path: str | os.PathLike, offset: int, n: int = 1) -> None:
    """Invert ``n`` bytes of a file from ``offset`` (negative: from the end), keeping its size."""
    with open(path, "r+b") as fh:
        fh.seek(offset, os.SEEK_END if offset < 0 else os.SEEK_SET)
        at = fh.tell()
        data = fh.read(n)
        fh.seek(at)
        fh.write(bytes(b ^ 0xFF for b in data))


def flip_every(path: str | os.PathLike, step: int) -> None:
    """Invert every ``step``-th byte of a file (from the first): damage all through it."""
    data = bytearray(Path(path).read_bytes())
    for i in range(0, len(data), step):
        data[i] ^= 0xFF
    Path(path).write_bytes(bytes(data))


def truncate(path: str | os.PathLike, size: int) -> None:
    with open(path, "r+b") as fh:
        fh.truncate(size)


def edit_json(path: str | os.PathLike, change: Callable[[dict], None]) -> None:
    """Rewrite a JSON file beside the store (e.g. the index record ``cortex.usearch.json``) after
    ``change`` edits its document in place."""
    doc = json.loads(Path(path).read_bytes())
    change(doc)
    Path(path).write_text(json.dumps(doc))


# -- a bundle's members ------------------------------------------------------------------------------------
def rewrite_member(member: str | os.PathLike, statement: str, *, to: str | os.PathLike | None = None) -> int:
    """Change a bundle's table member with ``statement`` run on it as table ``t``; written back in
    place (or to ``to``); the rows it holds afterwards."""
    import duckdb

    con = duckdb.connect()
    try:
        con.execute(f"CREATE TABLE t AS SELECT * FROM read_parquet('{member}')")
        con.execute(statement)
        con.execute(f"COPY t TO '{to or member}' (FORMAT parquet)")
        return con.execute("SELECT count(*) FROM t").fetchone()[0]
    finally:
        con.close()


def member_rows(member: str | os.PathLike, query: str) -> list[tuple]:
    """``query`` over a bundle's table member, read as table ``t``."""
    import duckdb

    con = duckdb.connect()
    try:
        con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('{member}')")
        return con.execute(query).fetchall()
    finally:
        con.close()


# -- the last resort -------------------------------------------------------------------------------------
def sql(store: str | os.PathLike, statement: str, params: Sequence[Any] = ()) -> None:
    """Run a statement (or several, without params) on the store's tables."""
    with _connect(store) as con:
        if params:
            con.execute(statement, list(params))
        else:
            con.execute(statement)


def rows(store: str | os.PathLike, query: str, params: Sequence[Any] = ()) -> list[tuple]:
    """A read-only query over the store's tables (DuckDB's ``?`` markers; psycopg's ``%s`` on PostgreSQL)."""
    if _is_pg(store):
        return _pg_sql(str(store), query, params)
    with _connect(store, read_only=True) as con:
        return con.execute(query, list(params)).fetchall()
