"""Bundles on PostgreSQL: export, restore and merge's reads (``PgTx``'s ``BundleReads``).

A bundle is the same on both backends: one Parquet member per state table, in the
DuckDB store's layout (``store/bundle.py``), so a PostgreSQL bundle restores into
DuckDB and a DuckDB bundle into PostgreSQL. PostgreSQL's rows cross over through a
private DuckDB database, a batch at a time (never a whole table in memory):

- ``export`` reads every table in one REPEATABLE READ snapshot (writers go on; the
  bundle is the state they had committed when it began) into a DuckDB copy of the store
  made by this cortexctl's migrations, and writes its members as DuckDB's export does.
  A ``vector`` becomes DuckDB's BLOB of little-endian float16 (``search.VECTOR_DTYPE``, what a
  DuckDB store holds) when that holds it exactly, else float32 (a DuckDB store restoring it rounds
  it); a restore into PostgreSQL reads either width.
- ``restore`` builds the DuckDB store from the members (``bundle.build_store``), copies
  it into a new staging schema of the same database (its tables made by
  ``store/pg/schema.py``'s migrations), hands ``check`` a ``PgStorage`` of that schema,
  and only then swaps it in: in one transaction, the live ``meta`` table, which every
  reader reads first, is locked (readers in the store finish first, readers that come
  meanwhile wait and then read the new tables), the live schema is renamed away and the
  staging one takes its name; then the old one is dropped. The store's writer lock is held
  from start to end (a session-level advisory lock), so no write lands in between and
  is lost. A failed check or any error drops the staging schema and leaves the store
  as it was (a store that did not exist stays absent).
- ``BundleReads`` (merge) keeps an in-memory DuckDB on the transaction with the
  bundle's members as views, and loads the few columns of the store it compares them
  with (heads' versions, versions' hashes, checkpoints' keys) beside them.

``version_digest`` is DuckDB's digest (``bundle.DIGEST``, over DuckDB's ``hash()``) of
the store's (id, version, hash) rows, computed in batches in an in-memory DuckDB, so it
equals the digest of the same versions in a DuckDB store or a bundle.
"""

from __future__ import annotations

import os
import shutil
import weakref
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence
from urllib.parse import urlencode

from cortexctl.errors import ConfigError, IntegrityError, UsageError
from cortexctl.store.search import VECTOR_DTYPE

BATCH = 20_000  # rows per batch between PostgreSQL and DuckDB
# Tables whose rows may be wide (a version's data and forms run to about 100 KB): read a few rows at a
# time, and handed over in batches of at most BATCH rows or BATCH_BYTES bytes, so memory stays bounded.
WIDE = {"heads": 500, "versions": 500, "journal": 500, "checkpoints": 500}
BATCH_BYTES = 32 << 20
VECTOR_TABLE, VECTOR_COLUMN = "vectors", "vec"


def _quote(name: str) -> str:
    from cortexctl.store.pg import quote_ident

    return quote_ident(name)


# -- PostgreSQL rows into DuckDB ------------------------------------------------------------------
def _pg_select(table: str, cols: Sequence[tuple[str, str]]) -> str:
    """The SELECT list that reads ``cols`` (DuckDB (name, type)) from the PostgreSQL table:
    arrays as JSON text (DuckDB casts them back), the rest as they are."""
    exprs = [f"array_to_json({_quote(name)})::text" if type_.endswith("[]") else _quote(name) for name, type_ in cols]
    return f"SELECT {', '.join(exprs)} FROM {_quote(table)}"


def _duck_casts(cols: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"CAST(CAST(c{i} AS JSON) AS {type_})" if type_.endswith("[]") else f"CAST(c{i} AS {type_})"
                     for i, (_, type_) in enumerate(cols))


def _converters(table: str, cols: Sequence[tuple[str, str]]) -> list[Callable | None]:
    def blob(v):
        return None if v is None else bytes(v)

    def vector(v):
        import numpy as np

        if v is None:
            return None
        if hasattr(v, "to_numpy"):  # pgvector's Vector (how binary results load)
            v = v.to_numpy()
        v = np.asarray(v, dtype="<f4")
        half = v.astype(VECTOR_DTYPE)
        # float16 when that holds it exactly (a vector that came from a DuckDB store crosses back as it
        # came), else float32 as PostgreSQL holds it (a DuckDB store restoring it rounds it)
        return half.tobytes() if np.array_equal(half.astype("<f4"), v) else v.tobytes()

    out: list[Callable | None] = []
    for name, type_ in cols:
        if table == VECTOR_TABLE and name == VECTOR_COLUMN:
            out.append(vector)
        elif type_ == "BLOB":
            out.append(blob)
        else:
            out.append(None)
    return out


def _into_duck(duck, table: str, cols: Sequence[tuple[str, str]], rows: Sequence[tuple],
               convert: Sequence[Callable | None]) -> None:
    """One batch of rows (in ``cols`` order) into DuckDB's ``table``, each value cast to its column's type."""
    import numpy as np

    n = len(rows)
    batch: dict[str, Any] = {}
    for i, fn in enumerate(convert):
        column = np.empty(n, dtype=object)
        column[:] = [r[i] for r in rows] if fn is None else [fn(r[i]) for r in rows]
        batch[f"c{i}"] = column
    names = ", ".join(_quote(name) for name, _ in cols)
    duck.register("pg_batch", batch)
    try:
        duck.execute(f"INSERT INTO {_quote(table)} ({names}) SELECT {_duck_casts(cols)} FROM pg_batch")
    finally:
        duck.unregister("pg_batch")


def _walk(con, sql: str, params: Sequence[Any] = (), batch: int = BATCH) -> Iterator[list[tuple]]:
    """The rows of ``sql`` in batches, through a server-side cursor of the current transaction
    (binary results: vectors load without parsing text)."""
    from cortexctl.store.pg.integrity import _close, _server_cursor

    cur = _server_cursor(con, binary=True)
    try:
        cur.execute(sql, list(params))
        while rows := cur.fetchmany(batch):
            yield rows
    finally:
        _close(cur)


def _copy_to_duck(con, duck, table: str, cols: Sequence[tuple[str, str]], *, batch: int | None = None) -> int:
    """Every row of ``cols`` of the PostgreSQL table into DuckDB's ``table``; returns how many.
    ``batch``: rows per fetch (else a wide table's few, or BATCH)."""
    convert = _converters(table, cols)
    n = 0
    for rows in _bounded(_walk(con, _pg_select(table, cols), batch=batch or WIDE.get(table, BATCH))):
        _into_duck(duck, table, cols, rows, convert)
        n += len(rows)
    return n


def _bounded(batches: Iterator[list[tuple]]) -> Iterator[list[tuple]]:
    """The rows of ``batches`` gathered into batches of at most BATCH rows or about BATCH_BYTES bytes."""
    out: list[tuple] = []
    size = 0
    for rows in batches:
        out.extend(rows)
        size += sum(len(v) for r in rows for v in r if isinstance(v, (bytes, str)))
        if len(out) >= BATCH or size >= BATCH_BYTES:
            yield out
            out, size = [], 0
    if out:
        yield out


def _pg_tables(con, schema: str) -> set[str]:
    return {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables"
                                      " WHERE table_schema = %s AND table_type = 'BASE TABLE'", [schema]).fetchall()}


def _duck_connection(temp_dir: Path):
    from cortexctl.store import bundle as sb

    return sb._connect(temp_dir=temp_dir)


# -- merge's reads ----------------------------------------------------------------------------------
class _Attached:
    """The in-memory DuckDB of an attached bundle, with the store's columns it is compared with."""

    def __init__(self, members: dict[str, Any], areas) -> None:
        from cortexctl.store import bundle as sb
        from cortexctl.store import scratch

        self.dir = scratch.make(areas, "merge")
        try:
            self.duck = _duck_connection(self.dir)
            from cortexctl.store.migrations import latest

            sb.attach_members(self.duck, {t: Path(p) for t, p in members.items()}, sb.expected_schema(latest()))
        except BaseException:
            scratch.remove(self.dir)
            raise
        self.loaded: set[str] = set()
        self._finalizer = weakref.finalize(self, _discard, self.duck, self.dir)

    def load(self, con, table: str, cols: Sequence[tuple[str, str]]) -> None:
        """The store's ``cols`` of ``table`` as a DuckDB table of the same name (once)."""
        if table in self.loaded:
            return
        self.duck.execute(f"CREATE TABLE {_quote(table)} ({', '.join(f'{_quote(n)} {t}' for n, t in cols)})")
        self.duck.execute("BEGIN")
        _copy_to_duck(con, self.duck, table, cols, batch=BATCH)  # narrow columns: big batches
        self.duck.execute("COMMIT")
        self.loaded.add(table)


def _discard(duck, where: Path) -> None:
    try:
        duck.close()
    finally:
        from cortexctl.store import scratch

        scratch.remove(where)


class BundleReads:
    """``interface.BundleIO`` over a ``PgTx``'s connection."""

    con: Any
    store: Any

    def table_counts(self, tables: Sequence[str]) -> dict[str, int]:
        have = _pg_tables(self._con, self.store.schema)
        return {t: int(self._con.execute(f"SELECT count(*) FROM {_quote(t)}").fetchone()[0]) for t in tables if t in have}

    def version_digest(self) -> str:
        return version_digest(self._con)

    def attach_bundle(self, members: dict[str, Any]) -> None:
        old = getattr(self, "_bundle", None)
        if old is not None:
            old._finalizer()
        from cortexctl.store import scratch

        self._bundle = _Attached(members, scratch.areas(self.store))

    def _attached(self) -> _Attached:
        got = getattr(self, "_bundle", None)
        if got is None:
            raise UsageError("no bundle is attached")
        return got

    def bundle_plan(self) -> tuple[list[str], list[tuple[str, int]], list[tuple[str, int, int]]]:
        from cortexctl.store import bundle as sb

        b = self._attached()
        b.load(self._con, "heads", [("id", "VARCHAR"), ("current_version", "UINTEGER")])
        b.load(self._con, "versions", [("id", "VARCHAR"), ("version", "UINTEGER"), ("hash", "BLOB")])
        return sb.merge_plan(b.duck)

    def bundle_memories(self, ids: Sequence[str], after: dict[str, int]) -> list[tuple[dict, list[dict]]]:
        from cortexctl.store import bundle as sb
        from cortexctl.store.interface import HEAD_FIELDS, VERSION_FIELDS

        b = self._attached()
        heads = sb.bundle_heads(b.duck, ids, HEAD_FIELDS)
        versions = sb.bundle_versions(b.duck, ids, VERSION_FIELDS, after)
        return [(heads[i], versions.get(i, [])) for i in ids if i in heads]

    def bundle_missing_checkpoints(self) -> list[dict]:
        from cortexctl.store import bundle as sb
        from cortexctl.store.interface import CHECKPOINT_FIELDS

        b = self._attached()
        b.load(self._con, "checkpoints", [("actor", "VARCHAR"), ("intent", "VARCHAR"), ("step", "VARCHAR")])
        return sb.bundle_missing_checkpoints(b.duck, CHECKPOINT_FIELDS)

    def bundle_grants(self) -> list[dict]:
        from cortexctl.store import bundle as sb

        return sb.bundle_grants(self._attached().duck)

    def bundle_links(self) -> list[tuple]:
        from cortexctl.store import bundle as sb

        return sb.bundle_links(self._attached().duck)


def version_digest(con) -> str:
    """``bundle.DIGEST`` of the (id, version, hash) rows of PostgreSQL's ``versions``: DuckDB
    hashes each batch (its values cast to the DuckDB store's column types), the batches' counts
    add up and their XORs combine."""
    import duckdb

    duck = duckdb.connect()
    try:
        duck.execute("CREATE TABLE versions (id VARCHAR, version UINTEGER, hash BLOB)")
        count, xor = 0, 0
        cols = [("id", "VARCHAR"), ("version", "UINTEGER"), ("hash", "BLOB")]
        convert = _converters("versions", cols)
        for rows in _walk(con, "SELECT id, version, hash FROM versions"):
            _into_duck(duck, "versions", cols, rows, convert)
            n, x = duck.execute("SELECT count(*), coalesce(bit_xor(hash(id, version, hash)), 0) FROM versions"
                                ).fetchone()
            count, xor = count + int(n), xor ^ int(x)
            duck.execute("DELETE FROM versions")
        return f"{count}:{xor}"
    finally:
        duck.close()


# -- export -----------------------------------------------------------------------------------
def export(store, dest) -> tuple[list[dict], dict]:
    """One Parquet member per state table into ``dest`` from one snapshot of the store:
    ([{table, name, rows}], {schema_version, vectors, journal_position}), as DuckDB's."""
    from cortexctl.store import bundle as sb

    copy_dir = Path(str(dest) + "-snapshot")  # named as DuckDB's copy: leftovers of a killed backup are found
    shutil.rmtree(copy_dir, ignore_errors=True)
    try:
        copy_dir.mkdir(mode=0o700, parents=True)
        duck = sb.open_copy(copy_dir / "cortex.duckdb")
        try:
            with store.reading() as tx:  # one REPEATABLE READ snapshot for every table
                have = _pg_tables(tx._con, store.schema)
                for table in sb.state_tables(duck):
                    if table not in have:
                        raise IntegrityError(f"store {store.location} has no table {table}")
                    duck.execute("BEGIN")
                    _copy_to_duck(tx._con, duck, table, sb.columns(duck, table))
                    duck.execute("COMMIT")
            duck.execute("CHECKPOINT")  # the rows on disk, not held in memory, as a copied DuckDB store's are
            return sb.export_tables(duck, Path(dest)), sb.store_facts(duck)
        finally:
            duck.close()
    finally:
        shutil.rmtree(copy_dir, ignore_errors=True)


# -- restore ------------------------------------------------------------------------------------------
def restore(store, members: dict[str, Any], schema_version: int, check) -> None:
    """Replace the store's schema (or make it) with a checked bundle's members, atomically,
    holding the store's writer lock throughout (see the module's docstring)."""
    from cortexctl.store import bundle as sb
    from cortexctl.store import migrations

    from cortexctl.store.pg import isolation
    from cortexctl.store.pg import schema as pg_schema
    from cortexctl.store.pg.vectors import _count_rows

    if pg_schema.latest() != migrations.latest():
        raise IntegrityError(f"this cortexctl's PostgreSQL schema ({pg_schema.latest()}) does not hold its DuckDB"
                             f" schema ({migrations.latest()}): bundles cannot cross over")
    from cortexctl.store import scratch

    work = scratch.make(scratch.areas(store), "restore")
    tag = os.urandom(4).hex()
    staging = f"{store.schema[:40]}_restore_{tag}"
    con = None
    made = False
    try:
        db_path = work / "cortex.duckdb"
        with scratch.private():
            sb.build_store(db_path, {t: Path(p) for t, p in members.items()}, schema_version, keep_float32=True)
        con = store._open()
        con.autocommit = True
        with _errors(store), con.cursor() as cur:
            store._configure(con)
            store._lock(cur, session=True)  # held until this connection ends
            _refuse_shared_schema(cur, store)
            _drop_leftovers(con, cur, store)
            if store._vector_schema is None:
                with con.transaction():
                    store._create_extension(con, cur)
            made = True
            with con.transaction():
                cur.execute(f"CREATE SCHEMA {_quote(staging)}")
                _search_path(cur, staging, store._vector_schema)
                pg_schema.migrate(cur, 0)
                for table in _fill(con, db_path):
                    cur.execute(f"ANALYZE {_quote(table)}")  # the planner's statistics, as for a store grown by writes
                _count_rows(con, store.address)  # as a new store's: its rows counted, its changes numbered
                isolation.install(con, staging)  # and its finds held to their actor
            _search_path(cur, store.schema, store._vector_schema)
        staged = _staged_storage(store, staging)
        for model in _models(db_path):
            staged.after_vectors(model, 0)  # the backend's index of each model's vectors
        check(staged)
        with _errors(store), con.cursor() as cur:
            with con.transaction():
                old = _swap(con, cur, store, staging, tag)
            made = False
            if old is not None:  # no reader is left in the old tables; the writer lock is still held
                _drop_schema(con, store, old)
        from cortexctl.store.pg.vectors import vacuum

        vacuum(store)  # visibility maps, so find reads postings from their index alone
    finally:
        if con is not None:
            if made:
                _drop_schema(con, store, staging)
            try:
                con.close()  # ends the session: the writer lock is released
            except Exception:  # noqa: BLE001
                pass
        scratch.remove(work)


@contextmanager
def _errors(store) -> Iterator[None]:
    """PostgreSQL's errors a user can meet during a restore, as the store's other operations say them."""
    import psycopg

    from cortexctl.store.pg import _reraise

    try:
        yield
    except psycopg.errors.InsufficientPrivilege as exc:
        raise ConfigError(f"PostgreSQL store {store.location}: {str(exc).splitlines()[0]}",
                          hint="a restore makes the new store in a schema beside the old one: the user needs"
                               " CREATE on the database and to own the store's schema") from None
    except Exception as exc:
        _reraise(exc, store)
        raise


def _search_path(cur, schema: str, vector_schema: str | None) -> None:
    path = _quote(schema) + (f", {_quote(vector_schema)}" if vector_schema else "")
    cur.execute("SELECT set_config('search_path', %s, false)", [path])


def _staged_storage(store, staging: str):
    from cortexctl.store.pg import PgStorage

    sep = "&" if "?" in store.conninfo else "?"
    return PgStorage(f"{store.conninfo}{sep}{urlencode({'schema': staging})}", wait=store.wait)


def _models(db_path: Path) -> list[str]:
    import duckdb

    from cortexctl.store.search import vector_models

    duck = duckdb.connect(str(db_path), read_only=True)
    try:
        return vector_models(duck)
    finally:
        duck.close()


def _fill(con, db_path: Path) -> list[str]:
    """Every state table of the DuckDB store at ``db_path`` into the same tables on the search path, by
    binary COPY; returns the tables filled."""
    import duckdb

    from cortexctl.store import bundle as sb

    duck = duckdb.connect(str(db_path), read_only=True)
    try:
        tables = sb.state_tables(duck)
        for table in tables:
            cols = sb.columns(duck, table)
            names = ", ".join(_quote(name) for name, _ in cols)
            vec_at = [i for i, (name, _) in enumerate(cols) if table == VECTOR_TABLE and name == VECTOR_COLUMN]
            dim_at = next((i for i, (name, _) in enumerate(cols) if name == "dim"), None)
            cur = duck.execute(f"SELECT {names} FROM {_quote(table)}")
            types = _pg_types(con, table, [name for name, _ in cols])
            with con.cursor() as pg, pg.copy(f"COPY {_quote(table)} ({names}) FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(types)
                while rows := cur.fetchmany(WIDE.get(table, BATCH)):
                    for r in rows:
                        if vec_at:
                            r = list(r)
                            for i in vec_at:
                                r[i] = _vector_of(r[i], r[dim_at])
                        copy.write_row(r)
        return tables
    finally:
        duck.close()


def _vector_of(blob: bytes, dim) -> Any:
    """A stored vector's values: float16 (a DuckDB store's, ``search.VECTOR_DTYPE``) when the BLOB
    holds two bytes a value, else float32 (a bundle from PostgreSQL, or from before version 7)."""
    import numpy as np

    wide = dim is None or len(blob) != 2 * int(dim)
    return np.frombuffer(blob, dtype="<f4" if wide else VECTOR_DTYPE).astype(np.float32)


def _pg_types(con, table: str, names: Sequence[str]) -> list[str]:
    """The PostgreSQL type of each named column of ``table`` (on the search path), for a binary COPY."""
    rows = dict(con.execute("SELECT a.attname, format_type(a.atttypid, NULL) FROM pg_attribute a"
                            " WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 AND NOT a.attisdropped",
                            [_quote(table)]).fetchall())
    missing = [n for n in names if n not in rows]
    if missing:
        raise IntegrityError(f"the PostgreSQL table {table} has no column {missing[0]}")
    return [rows[n] for n in names]


def _refuse_shared_schema(cur, store) -> None:
    """A restore replaces the store's whole schema: refuse one that holds anything else."""
    cur.execute("SELECT 1 FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE n.nspname = %s",
                [store.schema])
    foreign = cur.fetchone() is not None
    if not foreign:
        from cortexctl.store.pg.vectors import FUNCTIONS

        cur.execute("SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
                    " WHERE n.nspname = %s AND p.proname <> ALL(%s)", [store.schema, list(FUNCTIONS)])
        foreign = cur.fetchone()[0] > 0
    if not foreign:
        cur.execute("SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                    " WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'v', 'm', 'f')", [store.schema])
        foreign = bool({r[0] for r in cur.fetchall()} - _store_tables())
    if foreign:
        raise UsageError(f"store {store.location}: its schema {store.schema!r} holds more than the store,"
                         " and a restore replaces the whole schema",
                         hint="give the store a schema of its own (the URI's schema parameter)")


def _store_tables() -> set[str]:
    """The tables this cortexctl's PostgreSQL migrations make."""
    from cortexctl.store import bundle as sb
    from cortexctl.store import migrations

    import duckdb

    duck = duckdb.connect()
    try:
        migrations.migrate(duck)
        return set(sb.state_tables(duck)) | set(sb.NOT_BUNDLED)
    finally:
        duck.close()


def _swap(con, cur, store, staging: str, tag: str) -> str | None:
    """In the caller's transaction: the staging schema takes the live one's name; returns the old
    schema's new name (None when there was none), for the caller to drop once the swap committed.

    Every reader's transaction reads the store's ``meta`` table first (its schema version) and
    keeps that lock to its end. So the swap first locks the live ``meta`` (ACCESS EXCLUSIVE):
    readers already in the store finish, and readers that come meanwhile wait at their first
    table and then find the new tables by name; no reader's transaction sees some tables of the
    old store and some of the new. Readers never wait for another table the swap holds, so
    there is no deadlock. Writers wait on the writer lock the restore holds. After the store's
    ``wait`` seconds (at least 10) of readers not finishing: StoreBusy, the store as it was."""
    import psycopg

    from cortexctl.errors import StoreBusy

    cur.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", [store.schema])
    if cur.fetchone() is None:
        cur.execute(f"ALTER SCHEMA {_quote(staging)} RENAME TO {_quote(store.schema)}")
        return None
    cur.execute("SELECT to_regclass(%s) IS NOT NULL", [f"{_quote(store.schema)}.meta"])
    if cur.fetchone()[0]:
        patience = max(store.wait, 10.0)
        cur.execute("SELECT set_config('lock_timeout', %s, true)", [f"{int(patience * 1000)}ms"])
        try:
            cur.execute(f"LOCK TABLE {_quote(store.schema)}.meta IN ACCESS EXCLUSIVE MODE")
        except psycopg.errors.LockNotAvailable:
            raise StoreBusy(f"store {store.location}: readers kept it busy; the restore gave up after"
                            f" {patience:g}s and left the store as it was",
                            hint="retry when fewer readers are at work, or with a longer --wait") from None
        cur.execute("SELECT set_config('lock_timeout', '0', true)")
    old = f"{store.schema[:40]}_old_{tag}"
    cur.execute(f"ALTER SCHEMA {_quote(store.schema)} RENAME TO {_quote(old)}")
    cur.execute(f"ALTER SCHEMA {_quote(staging)} RENAME TO {_quote(store.schema)}")
    return old


def _drop_leftovers(con, cur, store) -> None:
    """Drop the staging and replaced schemas a killed restore of this store left behind. The caller
    holds the store's writer lock, which every restore of it holds throughout: none is running. (A
    store whose schema name is longer than the 40 characters these names keep is left alone: another
    store's name could share them.)"""
    import re

    if len(store.schema) > 40:
        return
    cur.execute("SELECT nspname FROM pg_namespace WHERE starts_with(nspname, %s)", [store.schema + "_"])
    pattern = re.compile(re.escape(store.schema) + r"_(restore|old)_[0-9a-f]{8}")
    for (name,) in cur.fetchall():
        if pattern.fullmatch(name):
            _drop_schema(con, store, name)


def _drop_schema(con, store, name: str) -> None:
    """Drop a schema a restore made or replaced (on this connection, or a new one when it broke);
    a server that is gone leaves it behind, as a killed restore does."""
    sql = f"DROP SCHEMA IF EXISTS {_quote(name)} CASCADE"
    try:
        con.execute(sql)
        return
    except Exception:  # noqa: BLE001 - a broken connection: try a fresh one
        pass
    try:
        other = store._open()
        try:
            other.autocommit = True
            other.execute(sql)
        finally:
            other.close()
    except Exception:  # noqa: BLE001
        pass
