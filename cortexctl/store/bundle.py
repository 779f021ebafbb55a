"""The DuckDB side of backup bundles: a copy of the database, tables to Parquet, Parquet back into tables.

A bundle holds one Parquet file per state table of the store. Which tables
hold state is read from the catalog, not listed here, so a table added by a
later migration goes into bundles without a change to this module;
``NOT_BUNDLED`` names the few that stay out and says why.

Reading a bundle never executes anything it contains: no ``IMPORT DATABASE``
(its ``load.sql`` would run whatever a crafted bundle put there). Each member
is read with ``read_parquet`` into tables this cortexctl created by its own
migrations, column by column, after its columns have been checked against them.
Every connection that reads a bundle has a memory limit, so one oversized
record spills or fails instead of exhausting memory.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Iterator, Sequence

from cortexctl.errors import IntegrityError

# table -> why it is not in bundles
NOT_BUNDLED = {
    "meta": "the schema version, recorded in bundle-meta.json; a restored store makes its own",
    "schema_migrations": "the migration history of this file; a restored store makes its own",
    "rate_buckets": "attest rate limiting: short-lived, per machine",
    "vectors_dropped": "keys taken out of the index file, which restore rebuilds",
}
MEMORY_LIMIT = "512MB"  # per connection that reads a bundle
# Rows per Parquet row group of a member: a reader holds a row group at a time, so it must fit in
# MEMORY_LIMIT with room to spare (DuckDB's default, 122,880 rows, is ~180 MB of 384-d vectors).
ROW_GROUP_ROWS = 8192
SUFFIX = ".parquet"


def _connect(path: str = ":memory:", *, temp_dir: Path | None = None):
    import duckdb

    con = duckdb.connect(path)
    con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
    con.execute("SET threads = 2")
    if temp_dir is not None:
        con.execute("SET temp_directory = ?", [str(temp_dir)])
    return con


def _fail(what: str, exc: Exception) -> IntegrityError:
    return IntegrityError(f"{what}: {str(exc).splitlines()[0]}")


def state_tables(con) -> list[str]:
    """Every table of the store that holds state (all but ``NOT_BUNDLED``), in name order."""
    rows = con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'"
        " AND table_type = 'BASE TABLE' ORDER BY table_name"
    ).fetchall()
    return [r[0] for r in rows if r[0] not in NOT_BUNDLED]


def columns(con, table: str) -> list[tuple[str, str]]:
    """(name, type) of each column of ``table``, in order."""
    return [(r[0], r[1]) for r in con.execute(
        "SELECT column_name, data_type FROM information_schema.columns"
        " WHERE table_schema = 'main' AND table_name = ? ORDER BY ordinal_position", [table]).fetchall()]


def _keys(con, table: str) -> list[str]:
    """The table's primary key columns, else all its columns: a stable order for its rows."""
    rows = con.execute(
        "SELECT constraint_column_names FROM duckdb_constraints()"
        " WHERE table_name = ? AND constraint_type = 'PRIMARY KEY'", [table]).fetchall()
    if rows:
        return list(rows[0][0])
    return [name for name, type_ in columns(con, table) if not type_.endswith("[]") and type_ != "BLOB"]


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# -- writing a bundle -----------------------------------------------------------------------
def copy_database(store, into: Path) -> Path:
    """Copy the store's database into ``into`` while no writer holds it; returns the copy's path.

    The caller holds ``store.exclusive()``: our writers open the file only under that
    lock, so the copy is one committed state (a WAL left by a killed writer is copied
    too and replayed when the copy is opened). Readers go on meanwhile.
    """
    into.mkdir(mode=0o700, parents=True, exist_ok=True)
    for name in (store.db_path.name, store.db_path.name + ".wal"):
        src = store.path / name
        if src.is_file():
            shutil.copyfile(src, into / name)
    return into / store.db_path.name


def open_copy(path: Path):
    """A read-write connection to a private copy of a store, its schema made current."""
    from cortexctl.store import migrations

    con = _connect(str(path), temp_dir=path.parent)
    try:
        migrations.migrate(con)
    except BaseException:
        con.close()
        raise
    return con


# Members are written zstd level 1: at 1M memories 0.79x the time of zstd's default level (3) for
# 4% more bytes (bench/README, "backup").
COMPRESSION = "COMPRESSION zstd, COMPRESSION_LEVEL 1"
EXPORT_WORKERS = 2  # tables written at once: one COPY keeps about 1.3 cores busy


def export_tables(con, dest: Path) -> list[dict]:
    """Each state table of ``con`` as ``dest/<table>.parquet``; returns [{table, name, rows}].

    Rows go in key order (``_keys``) where the connection's memory limit allows it. A table of wide
    rows (a blob, list or array column) that is stored in key order already (the journal and the
    vectors, appended with rising keys) is written as it is scanned: DuckDB's sort of wide rows is
    most of the cost and, held to ``MEMORY_LIMIT``, runs out of memory on a large store (the journal
    and the vectors of a million memories). Any other table is sorted, and written as it is scanned
    when the sort runs out of memory. Nothing that reads a member depends on its order.

    ``EXPORT_WORKERS`` tables are written at once, each through a cursor of its own (DuckDB works
    without the GIL; the memory limit is the database's, shared), the largest first.
    """
    tables = state_tables(con)
    sizes = dict(con.execute("SELECT table_name, estimated_size FROM duckdb_tables() WHERE schema_name = 'main'")
                 .fetchall())
    largest = sorted(tables, key=lambda t: -(sizes.get(t) or 0) * (4 if _wide(con, t) else 1))
    done = _each_table(con, largest, lambda cur, t: _export_table(cur, t, dest))
    return [done[t] for t in tables]


def _each_table(con, largest: Sequence[str], work) -> dict:
    """``work(cursor, table)`` for each table, ``EXPORT_WORKERS`` at once (largest first), each on a
    cursor of its own (DuckDB works without the GIL); {table: its result}. The first failure is
    raised at once, and an interrupt (^C) or a failure stops the other tables' statements too."""
    from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

    cursors = {t: con.cursor() for t in largest}
    pool = ThreadPoolExecutor(EXPORT_WORKERS)
    futures: dict = {}
    try:
        for t in largest:  # one at a time: an interrupt meanwhile stops those already submitted
            futures[t] = pool.submit(work, cursors[t], t)
        finished, _ = wait(futures.values(), return_when=FIRST_EXCEPTION)
        for f in finished:
            f.result()  # the first table that failed, at once
        return {t: f.result() for t, f in futures.items()}
    except BaseException:
        for f in futures.values():
            f.cancel()
        # an interrupt reaches only the statement running then: again until every table has stopped
        while running := [f for f in futures.values() if not f.done()]:
            for cur in cursors.values():
                cur.interrupt()
            wait(running, timeout=0.05)
        raise
    finally:
        pool.shutdown(wait=True)
        for cur in cursors.values():
            cur.close()


def _export_table(con, table: str, dest: Path) -> dict:
    """One member (see ``export_tables``), on ``con``, a cursor of this table's own."""
    import duckdb

    name = table + SUFFIX
    keys = _keys(con, table)
    scan = f"SELECT * FROM {_quote(table)}"
    into = f" TO '{_sql_text(str(dest / name))}' (FORMAT parquet, {COMPRESSION}, ROW_GROUP_SIZE {ROW_GROUP_ROWS})"
    if not keys or (_wide(con, table) and _in_key_order(con, table, keys)):
        con.execute(f"COPY ({scan}){into}")
    else:
        try:
            con.execute(f"COPY ({scan} ORDER BY {', '.join(_quote(k) for k in keys)}){into}")
        except duckdb.OutOfMemoryException:
            con.execute(f"COPY ({scan}){into}")
    rows = con.execute(f"SELECT count(*) FROM {_quote(table)}").fetchone()[0]
    return {"table": table, "name": name, "rows": int(rows)}


def _wide(con, table: str) -> bool:
    """Whether the table has a blob, list or array column (rows DuckDB sorts at a cost)."""
    return any(type_ == "BLOB" or type_.endswith("]") for _, type_ in columns(con, table))


def _in_key_order(con, table: str, keys: Sequence[str]) -> bool:
    """Whether a scan of the table meets its rows in strictly rising key order (a sort of the
    keys alone, in storage order: cheap beside sorting the rows)."""
    key = _quote(keys[0]) if len(keys) == 1 else f"row({', '.join(_quote(k) for k in keys)})"
    later = con.execute(
        f"SELECT count(*) FROM (SELECT {key} AS k, lag({key}) OVER (ORDER BY rowid) AS p FROM {_quote(table)})"
        " WHERE p IS NOT NULL AND NOT coalesce(p < k, false)").fetchone()[0]
    return later == 0


def store_facts(con) -> dict:
    """Schema version, journal position and the embedding models of a store's copy."""
    from cortexctl.store import migrations

    seq = con.execute("SELECT coalesce(max(seq), 0) FROM journal").fetchone()[0]
    models = con.execute("SELECT model, any_value(dim), count(*) FROM vectors GROUP BY model ORDER BY model").fetchall()
    return {"schema_version": migrations.latest(), "journal_position": int(seq),
            "vectors": [{"model": m, "dim": int(d), "count": int(n)} for m, d, n in models]}


def _sql_text(text: str) -> str:
    if "\x00" in text:
        raise IntegrityError("a path holds a NUL byte")
    return text.replace("'", "''")


# -- reading a bundle ----------------------------------------------------------------------------
def expected_schema(schema_version: int) -> dict[str, list[tuple[str, str]]]:
    """table -> columns of the state tables of a store at ``schema_version``."""
    from cortexctl.store import migrations

    con = _connect()
    try:
        migrations.migrate(con, upto=schema_version)
        return {t: columns(con, t) for t in state_tables(con)}
    finally:
        con.close()


_INTEGER_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT")


class Members:
    """A bundle's Parquet members, read (never written) through an in-memory connection,
    memory-limited and spilling to ``temp_dir``. ``files`` maps each table to its member's file.
    Every read of a damaged member is an IntegrityError naming it."""

    def __init__(self, files: dict[str, Path], temp_dir: Path | None = None) -> None:
        self.files = files
        self._con = _connect(temp_dir=temp_dir)

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> "Members":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _source(self, table: str) -> str:
        return f"read_parquet('{_sql_text(str(self.files[table]))}')"

    def facts(self, table: str) -> tuple[list[tuple[str, str]], int]:
        """(columns, rows) of the table's member; IntegrityError when it is not readable Parquet."""
        path = self.files[table]
        p = _sql_text(str(path))
        try:
            cols = [(r[0], r[1]) for r in self._con.execute(f"DESCRIBE SELECT * FROM {self._source(table)}").fetchall()]
            rows = self._con.execute(
                f"SELECT coalesce(sum(num_rows), 0) FROM parquet_file_metadata('{p}')").fetchone()[0]
        except Exception as exc:  # duckdb raises many kinds for a damaged file
            raise _fail(f"member {path.name} is not readable Parquet", exc) from None
        return cols, int(rows)

    def widest(self, table: str, cols: Sequence[tuple[str, str]]) -> dict[str, int]:
        """column -> its largest value in bytes, for the text and blob columns among ``cols``."""
        sized = [(name, f"strlen({_quote(name)})" if type_ == "VARCHAR" else f"octet_length({_quote(name)})")
                 for name, type_ in cols if type_ in ("VARCHAR", "BLOB")]
        if not sized:
            return {}
        row = self._one(table, ", ".join(f"coalesce(max({e}), 0)" for _, e in sized))
        return {name: int(v) for (name, _), v in zip(sized, row)}

    def rows(self, table: str, cols: Sequence[str], *, batch: int = 5000) -> Iterator[list[tuple]]:
        """Batches of ``cols`` from the table's member, in file order."""
        try:
            cur = self._con.execute(f"SELECT {', '.join(_quote(c) for c in cols)} FROM {self._source(table)}")
            while rows := cur.fetchmany(batch):
                yield rows
        except IntegrityError:
            raise
        except Exception as exc:
            raise _fail(f"member {self.files[table].name} cannot be read", exc) from None

    def hash_mismatch(self, domain: bytes) -> tuple[int, tuple[str, str] | None]:
        """(the versions member's records, the first by ID whose hash is not SHA-256 of ``domain``, its
        type code as one byte and its data, or None), recomputed by DuckDB over the member. A record
        missing any of them, or with a type code that is not one byte, matches nothing; so does every
        record of a member whose type codes are not integers or whose data or hashes are not bytes."""
        source = self._source("versions")
        try:
            types = dict((r[0], r[1]) for r in self._con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall())
            if types.get("type") in _INTEGER_TYPES and types.get("data") == types.get("hash") == "BLOB":
                from cortexctl.store.integrity import HASH_DIFFERS

                bad, params = HASH_DIFFERS, [domain]
            else:
                bad, params = "true", []
            (n,), = self._con.execute(f"SELECT count(*) FROM {source}").fetchall()
            first = self._con.execute(f"SELECT CAST(id AS VARCHAR), CAST(version AS VARCHAR) FROM {source}"
                                      f" WHERE {bad} ORDER BY id, version LIMIT 1", params).fetchone()
        except Exception as exc:
            raise _fail(f"member {self.files['versions'].name} cannot be read", exc) from None
        return int(n), (None if first is None else (first[0], first[1]))

    def journal_end(self) -> int:
        """The last journal position the bundle holds (0 for none)."""
        return int(self._one("journal", "coalesce(max(seq), 0)")[0])

    def version_digest(self) -> str:
        """The order-free digest of the bundle's (id, version, hash) rows, as ``Tx.version_digest``."""
        return str(self._one("versions", DIGEST)[0])

    def _one(self, table: str, expression: str) -> tuple:
        try:
            return self._con.execute(f"SELECT {expression} FROM {self._source(table)}").fetchone()
        except Exception as exc:
            raise _fail(f"member {self.files[table].name} cannot be read", exc) from None


# -- restoring ------------------------------------------------------------------------------------
def build_store(db_path: Path, members: dict[str, Path], schema_version: int, *, keep_float32: bool = False) -> None:
    """A new database at ``db_path`` holding the members' rows, its schema made current, its
    vectors float16 (``search.halve_vectors``) unless ``keep_float32`` (a copy on its way into
    PostgreSQL, which holds them as they came).

    The tables are created by this cortexctl's migrations up to the bundle's schema
    version, filled from the members by column name, then migrated forward. A table's
    insert keeps the member's row order and so runs on one core: ``EXPORT_WORKERS`` tables
    are filled at once, the largest members first (a failure leaves a database nobody uses:
    the caller removes it).
    """
    from cortexctl.store import migrations
    from cortexctl.store.search import KEEP_FLOAT32, halve_vectors

    def fill(cur, table: str) -> None:
        path = members[table]
        cols = ", ".join(_quote(name) for name, _ in columns(cur, table))
        try:
            cur.execute(f"INSERT INTO {_quote(table)} ({cols}) SELECT {cols}"
                        f" FROM read_parquet('{_sql_text(str(path))}')")
        except Exception as exc:
            raise _fail(f"member {path.name} does not fit table {table}", exc) from None

    con = _connect(str(db_path), temp_dir=db_path.parent)
    try:
        if keep_float32:
            con.execute(f"SET VARIABLE {KEEP_FLOAT32} = true")
        migrations.migrate(con, upto=schema_version)
        _each_table(con, sorted(members, key=lambda t: -members[t].stat().st_size), fill)
        migrations.migrate(con)
        halve_vectors(con)  # a bundle from PostgreSQL carries float32 rows
        con.execute("CHECKPOINT")
    finally:
        con.close()


def attach_members(con, members: dict[str, Path], schema: dict[str, list[tuple[str, str]]] | None = None) -> None:
    """Each member as a view ``bundle_<table>`` on ``con`` (for merge's comparisons and the rows it
    copies), in the layout and column types of this cortexctl's schema (``schema``: table -> (name,
    type) of each column; the tables of ``con`` when not given), as a restore's build reads them:
    a column of another type is cast (a text version compares as a number; a value that does not cast
    stops the query, as the build's insert stopped). What a bundle of an older schema lacks reads as
    the migrations that added it fill a restored store: a column as ``_added_column`` says, a table
    as an empty view."""
    if schema is None:
        schema = {t: columns(con, t) for t in state_tables(con)}
    for table, want in schema.items():
        if table not in members:  # a table the bundle's schema version did not have yet: no rows
            cols = ", ".join(f"NULL::{t} AS {_quote(c)}" for c, t in want)
            con.execute(f"CREATE OR REPLACE TEMP VIEW {_quote('bundle_' + table)} AS SELECT {cols} WHERE false")
    for table, path in members.items():
        source = f"read_parquet('{_sql_text(str(path))}')"
        have = dict((r[0], r[1]) for r in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall())
        want = schema.get(table, [])  # none known: as it is
        cols = ", ".join(_quote(c) if have.get(c) == t else f"CAST({_quote(c)} AS {t}) AS {_quote(c)}" if c in have
                         else _added_column(table, c, t, members) for c, t in want)
        con.execute(f"CREATE OR REPLACE TEMP VIEW {_quote('bundle_' + table)} AS SELECT {cols or '*'}"
                    f" FROM {source} AS m")


def _added_column(table: str, column: str, type_: str, members: dict[str, Path]) -> str:
    """A column a bundle of an older schema lacks, filled as the migration that added it fills a
    restored store (m003: a head's confidence is its current version's, else 1.0); else NULL."""
    if (table, column) == ("heads", "confidence") and "versions" in members:
        versions = f"read_parquet('{_sql_text(str(members['versions']))}')"
        return (f"coalesce((SELECT CAST(v.confidence AS DOUBLE) FROM {versions} v"
                f" WHERE CAST(v.id AS VARCHAR) = CAST(m.id AS VARCHAR)"
                f" AND CAST(v.version AS UINTEGER) = CAST(m.current_version AS UINTEGER)), 1.0) AS {_quote(column)}")
    return f"NULL::{type_} AS {_quote(column)}"


def fsync_tree(root: Path) -> None:
    """fsync every file under ``root`` and the directories themselves."""
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fd = os.open(dirpath, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


__all__ = ["NOT_BUNDLED", "state_tables", "copy_database", "open_copy", "export_tables", "build_store"]


# -- comparing and merging (through DuckTx) -------------------------------------------------------
# An order-free digest of every (id, version, hash): a restored store and its bundle must agree.
# The columns are cast to the store's types: DuckDB's hash() of a value depends on its type, and a
# bundle member may hold a sound version as text or as a wider integer (a restore's build casts it).
DIGEST = ("count(*)::VARCHAR || ':' || coalesce(bit_xor(hash(CAST(id AS VARCHAR), CAST(version AS UINTEGER),"
          " CAST(hash AS BLOB))), 0)::VARCHAR")


def table_counts(con, tables: Sequence[str]) -> dict[str, int]:
    have = set(state_tables(con)) | set(NOT_BUNDLED)
    return {t: int(con.execute(f"SELECT count(*) FROM {_quote(t)}").fetchone()[0]) for t in tables if t in have}


def version_digest(con) -> str:
    return str(con.execute(f"SELECT {DIGEST} FROM versions").fetchone()[0])


def merge_plan(con) -> tuple[list[str], list[tuple[str, int]], list[tuple[str, int, int]]]:
    """Against the attached bundle: (IDs new here, (id, version) pairs whose hashes differ,
    (id, local current version, bundle current version) where the bundle is ahead)."""
    new = [r[0] for r in con.execute(
        "SELECT b.id FROM bundle_heads b ANTI JOIN heads h ON h.id = b.id ORDER BY b.id").fetchall()]
    conflicts = [(r[0], int(r[1])) for r in con.execute(
        "SELECT b.id, b.version FROM bundle_versions b JOIN versions v ON v.id = b.id AND v.version = b.version"
        " WHERE b.hash <> v.hash ORDER BY b.id, b.version").fetchall()]
    ahead = [(r[0], int(r[1]), int(r[2])) for r in con.execute(
        "SELECT h.id, h.current_version, b.current_version FROM heads h JOIN bundle_heads b ON b.id = h.id"
        " WHERE b.current_version > h.current_version ORDER BY h.id").fetchall()]
    return new, conflicts, ahead


def heads_of(con, ids: Sequence[str], fields: Sequence[str]) -> dict[str, dict]:
    cols = ", ".join(_quote(f) for f in fields)
    rows = con.execute(f"SELECT {cols} FROM heads WHERE list_contains(?, id)", [list(ids)]).fetchall()
    return {r[0]: dict(zip(fields, r)) for r in rows}


def bundle_heads(con, ids: Sequence[str], fields: Sequence[str]) -> dict[str, dict]:
    cols = ", ".join(_quote(f) for f in fields)
    rows = con.execute(f"SELECT {cols} FROM bundle_heads WHERE list_contains(?, id)", [list(ids)]).fetchall()
    return {r[0]: dict(zip(fields, r)) for r in rows}


def bundle_versions(con, ids: Sequence[str], fields: Sequence[str], after: dict[str, int]) -> dict[str, list[dict]]:
    """Versions of ``ids`` in the bundle above ``after[id]`` (0 when absent), in order."""
    cols = ", ".join(_quote(f) for f in fields)
    rows = con.execute(f"SELECT {cols} FROM bundle_versions WHERE list_contains(?, id) ORDER BY id, version",
                       [list(ids)]).fetchall()
    out: dict[str, list[dict]] = {}
    for r in rows:
        row = dict(zip(fields, r))
        if row["version"] > after.get(row["id"], 0):
            out.setdefault(row["id"], []).append(row)
    return out


def bundle_missing_checkpoints(con, fields: Sequence[str]) -> list[dict]:
    cols = ", ".join(f"b.{_quote(f)}" for f in fields)
    rows = con.execute(
        f"SELECT {cols} FROM bundle_checkpoints b ANTI JOIN checkpoints c"
        " ON c.actor = b.actor AND c.intent = b.intent AND c.step = b.step ORDER BY b.actor, b.intent, b.step"
    ).fetchall()
    return [dict(zip(fields, r)) for r in rows]


def bundle_grants(con) -> list[dict]:
    """Every grant row of the attached bundle ([] for a bundle from before grants)."""
    from cortexctl.store.interface import GRANT_FIELDS

    if not con.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = 'bundle_grants'").fetchall()[0][0]:
        return []
    cols = ", ".join(_quote(f) for f in GRANT_FIELDS)
    rows = con.execute(f"SELECT {cols} FROM bundle_grants ORDER BY id").fetchall()
    out = []
    for r in rows:
        row = dict(zip(GRANT_FIELDS, r))
        row["types"], row["tags"] = [int(t) for t in row["types"]], [str(t) for t in row["tags"]]
        out.append(row)
    return out


def bundle_links(con) -> list[tuple]:
    """Valid times and supersede links of the attached bundle's heads that hold any (``BundleIO.bundle_links``)."""
    return [tuple(r) for r in con.execute(
        "SELECT id, valid_from, valid_to, supersedes, superseded_by FROM bundle_heads WHERE valid_from IS NOT NULL"
        " OR valid_to IS NOT NULL OR supersedes IS NOT NULL OR superseded_by IS NOT NULL ORDER BY id").fetchall()]
