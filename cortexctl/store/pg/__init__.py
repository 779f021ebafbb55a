"""The PostgreSQL backend: one store shared by agents on many machines (``cortexctl[postgres]``).

A store is one schema of a PostgreSQL database that has pgvector, named by a
``postgresql://`` URI (its ``schema`` parameter, default ``cortexctl``, picks the
schema; the rest is libpq's). ``PgStorage`` is ``interface.Storage`` over it and
``PgTx`` (``store/pg/tx.py``) its ``Tx``:

- Every operation opens a connection (or takes one from a pool in a long-lived
  ``cortexctl mcp``), runs one transaction and gives the connection back.
- Readers run REPEATABLE READ, READ ONLY: one consistent view, never waiting.
- Writers take turns, as on DuckDB: a write transaction first takes the store's
  transaction-scoped advisory lock (``pg_advisory_xact_lock``), waiting at most
  ``--wait`` seconds (then ``StoreBusy``, exit 4), so the engine's read-then-write
  steps (a memory's next version number, the journal's next sequence number, a rate
  bucket, a grant) see every earlier writer's commit. The journal's order therefore
  comes from the database inside the writing transaction and has no gaps, whichever
  machine writes. ``restore --mode replace`` holds the same lock for its whole length.
- Find has no cache of its own here: PostgreSQL's buffers are it (``searching`` is
  ``reading``); pgvector's HNSW index is kept by the database as rows change.

Errors a user can meet are one line each: the server unreachable (exit 9),
authentication failed or pgvector missing (exit 2, saying what to do), a store
from a newer cortexctl (exit 1), a busy store (exit 4). Credentials never appear
in a message: ``location`` is the URI without its password.
"""

from __future__ import annotations

import weakref
import zlib
from contextlib import contextmanager, nullcontext
from typing import Iterator
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from cortexctl.errors import ConfigError, CortexError, IntegrityError, StoreBusy, StoreUnreachable, UsageError
from cortexctl.dsn import redact
from cortexctl.store import DEFAULT_WAIT
from cortexctl.store.interface import NoStore

DEFAULT_SCHEMA = "cortexctl"
LOCK_CLASS = 0x636F7274  # "cort": the first key of the store's advisory lock; the second is the schema's CRC
CONNECT_TIMEOUT = 10  # seconds to reach the server
# a write transaction's first statement: the lock's timeout, then the lock (evaluated in this order)
XACT_LOCK = "SELECT set_config('lock_timeout', %s, true), pg_advisory_xact_lock(%s, %s)"


OWN_PARAMETERS = ("schema", "snapshot")  # cortexctl's own query parameters, not libpq's


def split_uri(uri: str) -> tuple[str, str]:
    """(the URI libpq takes, the store's schema): the ``schema`` query parameter is cortexctl's own,
    and so is ``snapshot`` (``PgStorage.worker_address``)."""
    parts = urlsplit(uri)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = DEFAULT_SCHEMA
    rest = []
    for k, v in query:
        if k == "schema":
            schema = v
        elif k not in OWN_PARAMETERS:
            rest.append((k, v))
    if not schema or len(schema) > 63 or "\x00" in schema:
        raise ConfigError(f"store URI: schema must be a name of 1 to 63 characters, got {schema!r}")
    if schema.lower().startswith("pg_") or schema.lower() == "information_schema":
        raise ConfigError(f"store URI: schema {schema!r} is one of PostgreSQL's own: name another")
    return urlunsplit(parts._replace(query=urlencode(rest))), schema


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def pipelined(con):
    """What follows in one round trip when the client library can pipeline (libpq 14 and later, as the
    psycopg binary wheel bundles); statement by statement, with the same results, when it cannot."""
    import psycopg

    return con.pipeline() if psycopg.Pipeline.is_supported() else nullcontext()


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class PgStorage:
    """A store in a PostgreSQL schema: the PostgreSQL backend of ``interface.Storage``."""

    vector_dtype = "<f4"  # pgvector's ``vector`` (float32); its HNSW index is over the halfvec form

    def __init__(self, uri: str, *, wait: float = DEFAULT_WAIT, resident: bool = False) -> None:
        self.address = str(uri)  # what open_storage takes to reopen this store (may hold a password)
        self.conninfo, self.schema = split_uri(self.address)
        self.location = redact(self.address)
        # a reading view that shares another process's snapshot (verify's workers): worker_address
        self._snapshot = dict(parse_qsl(urlsplit(self.address).query)).get("snapshot")
        self.wait = max(0.0, float(wait))
        self.resident = resident
        self._pool = None
        self._vector_schema: str | None = None  # where pgvector's types are, once a connection has looked
        self._types = None  # pgvector's TypeInfo for vector and halfvec, once fetched
        self._ready = weakref.WeakSet()  # connections whose pgvector types are registered
        self._lock_key = zlib.crc32(self.schema.encode()) - 2**31  # a signed 32-bit key
        self._current = False  # this storage has seen the store at the newest schema (``_lock_current``)
        self._copy_types: dict = {}  # (table, columns) -> their types, for binary COPY (``PgTx._copy_types``)
        self._secured_tables: set[str] = set()  # tables row security applies to for this user (``PgTx._row_secured``)
        # resident: what reading transactions worked out, for one state of the store (``PgTx._kept``)
        self._kept: tuple[tuple[int, int], dict] | None = None
        self._seen_current = False  # a reading transaction found the store at the newest schema

    # -- connections ---------------------------------------------------------------------
    def _open(self):
        import psycopg

        try:
            return psycopg.connect(self.conninfo, **self._connect_options())
        except psycopg.OperationalError as exc:
            raise self._connect_error(exc) from None
        except psycopg.ProgrammingError as exc:  # an option libpq does not know
            raise UsageError(f"store {self.location}: {_first_line(exc)}") from None

    def _connect_error(self, exc: Exception) -> CortexError:
        text = str(exc)
        low = text.lower()
        if "password authentication failed" in low or "authentication failed" in low or "no password supplied" in low:
            return ConfigError(f"PostgreSQL store {self.location}: authentication failed",
                               hint="check the user and password (the URI, PGPASSWORD or ~/.pgpass)")
        if "database" in low and "does not exist" in low:
            return ConfigError(f"PostgreSQL store {self.location}: {_first_line(exc).split('FATAL:')[-1].strip()}",
                               hint="create the database first (createdb), or name another in the URI")
        return StoreUnreachable(f"cannot reach the PostgreSQL server of store {self.location}: "
                                f"{_first_line(exc).split('failed:')[-1].strip()}",
                                hint="check that the server runs and the host and port are right")

    def _search_path(self) -> str:
        return quote_ident(self.schema) + (f", {quote_ident(self._vector_schema)}" if self._vector_schema else "")

    def _connect_options(self) -> dict:
        """libpq's options for a new connection: once this process knows where pgvector lives, the
        search path is set as the connection starts (no query of its own)."""
        kwargs: dict = {"connect_timeout": CONNECT_TIMEOUT, "application_name": "cortexctl"}
        if self._vector_schema is not None:
            path = self._search_path().replace("\\", "\\\\").replace(" ", "\\ ")
            kwargs["options"] = f"-c search_path={path}"
        return kwargs

    def _configure(self, con) -> None:
        """The store's schema first on the search path, then the schema holding pgvector's types
        (looked up by the process's first connection), whose types are registered on ``con``."""
        if self._vector_schema is None:
            row = con.execute("SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
                              " WHERE e.extname = 'vector'").fetchone()
            # a first write on another thread may have enabled pgvector and set the schema since this
            # connection looked: only a schema found is kept, never None written back over it
            if row is not None and self._vector_schema is None:
                self._vector_schema = row[0]
        if "search_path=" not in (con.info.options or ""):  # not set as the connection started
            con.execute("SELECT set_config('search_path', %s, false)", [self._search_path()])
        if self._vector_schema is not None:
            self._register(con)
        con.commit()

    def _register(self, con) -> None:
        """pgvector's ``vector`` and ``halfvec`` types on ``con``: their descriptions are fetched by
        the process's first connection and kept."""
        from pgvector.psycopg.halfvec import register_halfvec_info
        from pgvector.psycopg.vector import register_vector_info
        from psycopg.types import TypeInfo

        if self._types is None:
            vector = TypeInfo.fetch(con, "vector")
            if vector is None:  # the write enabling pgvector has not committed: looked up again next time
                return
            self._types = (vector, TypeInfo.fetch(con, "halfvec"))
        vector, halfvec = self._types
        register_vector_info(con, vector)
        if halfvec is not None:
            register_halfvec_info(con, halfvec)
        self._ready.add(con)

    @contextmanager
    def _connection(self) -> Iterator[object]:
        """A configured connection, given back (closed, or to the pool) afterwards."""
        if self.resident:
            pool = self._get_pool()
            try:
                with pool.connection() as con:
                    if self._vector_schema is not None and con not in self._ready:
                        # pooled before this process enabled pgvector (the store's first write)
                        self._configure(con)
                    yield con
            except Exception as exc:
                if type(exc).__name__ == "PoolTimeout":
                    raise StoreUnreachable(f"cannot reach the PostgreSQL server of store {self.location}") from None
                raise
            return
        con = self._open()
        try:
            self._configure(con)
            yield con
        finally:
            con.close()

    def _get_pool(self):
        if self._pool is None:
            from psycopg_pool import ConnectionPool

            self._pool = ConnectionPool(self.conninfo, min_size=1, max_size=4, configure=self._configure,
                                        kwargs=self._connect_options(),
                                        open=True, timeout=CONNECT_TIMEOUT + self.wait)
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    # -- state ---------------------------------------------------------------------------
    def exists(self) -> bool:
        with self._connection() as con:
            return self._exists(con)

    def _exists(self, con) -> bool:
        row = con.execute("SELECT to_regclass(%s) IS NOT NULL", [f"{quote_ident(self.schema)}.meta"]).fetchone()
        con.rollback()
        return bool(row[0])

    def check_location(self) -> None:
        """The URI is one libpq reads (nothing is opened)."""
        try:
            from psycopg.conninfo import conninfo_to_dict

            conninfo_to_dict(self.conninfo)
        except Exception as exc:  # noqa: BLE001 - psycopg's ProgrammingError: a malformed URI
            raise UsageError(f"store URI {self.location} is not valid: {_first_line(exc)}") from None

    def size_bytes(self) -> int:
        """The bytes the store's tables and indexes take."""
        try:
            with self._connection() as con:
                row = con.execute("SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
                                  " JOIN pg_namespace n ON n.oid = c.relnamespace"
                                  " WHERE n.nspname = %s AND c.relkind = 'r'", [self.schema]).fetchone()
                con.rollback()
                return int(row[0])
        except CortexError:
            return 0

    def local_dir(self):
        return None  # the store is on a server

    # -- transactions ----------------------------------------------------------------------
    @contextmanager
    def reading(self, *, as_actor: str | None = None, bounded: bool = False) -> Iterator[object]:
        """A REPEATABLE READ, READ ONLY ``PgTx``; ``NoStore`` when the schema holds no store.
        ``as_actor``: the database holds the view to what that actor may see (``pg/isolation.py``).
        ``bounded``: no bound here (the server holds its own memory; this process streams)."""
        from cortexctl.store.pg import isolation, schema
        from cortexctl.store.pg.tx import PgTx

        with self._connection() as con:
            if not self._read_current(con):
                if not self._exists(con):
                    raise NoStore(f"no store at {self.location}")
                _mode(con, read_only=True)
                with con.cursor() as cur:
                    if self._snapshot is not None:  # the first statement of the transaction
                        from psycopg import sql

                        cur.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(self._snapshot)))
                    if not schema.check(schema.version(cur)):
                        con.rollback()
                        _mode(con, read_only=False)
                        with self.transaction():  # migrates forward
                            pass
                        _mode(con, read_only=True)
                self._seen_current = True
            try:
                if as_actor is not None:
                    isolation.hold(con, as_actor)
                yield PgTx(con, self, reading=True)
            except BaseException as exc:
                _rollback(con)
                _reraise(exc, self)
                raise
            con.rollback()

    searching = reading  # no cache of its own: the server's buffers serve find

    def _read_current(self, con) -> bool:
        """A resident storage that has seen the store current begins a reading transaction with the
        schema version as its first statement (one round trip, not four): True when it is still the
        current one (``SchemaTooNew`` when a newer cortexctl migrated it); False, rolled back, when
        the long way must run (the store dropped, or older)."""
        if not (self.resident and self._seen_current and self._snapshot is None):
            return False
        import psycopg

        from cortexctl.store.pg import schema

        _mode(con, read_only=True)
        try:
            row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except psycopg.errors.UndefinedTable:
            row = None
        if row is not None and str(row[0]).isdigit() and schema.check(int(row[0])):
            return True
        con.rollback()
        self._seen_current = False
        return False

    def worker_address(self, tx) -> str:
        """The address with the snapshot of ``tx`` (a reading view, open meanwhile) exported: a
        reading view opened from it in another process sees exactly what ``tx`` sees."""
        snapshot = tx._con.execute("SELECT pg_export_snapshot()").fetchone()[0]
        return f"{self.address}{'&' if '?' in self.address else '?'}snapshot={quote(snapshot)}"

    @contextmanager
    def holding(self) -> Iterator[None]:
        """Nothing to keep (``Storage.holding``): each transaction takes the writer lock for itself, and
        the connections come from the pool when the storage is resident."""
        yield

    @contextmanager
    def transaction(self, *, bulk: bool = False, tidy: bool = True) -> Iterator[object]:
        """A ``PgTx`` in one transaction under the store's writer lock, the schema made current
        (``bulk`` and ``tidy`` change nothing: the server's memory and housekeeping are its own)."""
        from cortexctl.store.pg.tx import PgTx

        with self._connection() as con:
            _mode(con, read_only=False)
            try:
                with con.cursor() as cur:
                    if not self._lock_current(con, cur):
                        self._lock(cur)
                        self._make_current(con, cur)
                        self._current = True
                from cortexctl.store import scratch

                scratch.sweep(scratch.areas(self))  # what killed commands left
                yield PgTx(con, self)
                con.commit()
            except BaseException as exc:
                _rollback(con)
                _reraise(exc, self)
                raise

    def _lock(self, cur, *, session: bool = False) -> None:
        """Take the store's writer lock, waiting up to ``wait`` seconds (then StoreBusy)."""
        import psycopg

        try:
            if session:
                cur.execute("SELECT set_config('lock_timeout', %s, false)", [self._lock_timeout()])
                cur.execute("SELECT pg_advisory_lock(%s, %s)", [LOCK_CLASS, self._lock_key])
            else:  # the timeout is set before the lock is asked for, in the same statement
                cur.execute(XACT_LOCK, [self._lock_timeout(), LOCK_CLASS, self._lock_key])
        except psycopg.errors.LockNotAvailable:
            raise self._busy() from None
        finally:
            if session:
                cur.execute("SELECT set_config('lock_timeout', '0', false)")

    def _lock_timeout(self) -> str:
        return f"{max(1, int(self.wait * 1000))}ms"  # 0 would mean forever

    def _busy(self) -> StoreBusy:
        return StoreBusy(f"store {self.location} is busy (another cortexctl is writing to it);"
                         f" gave up after {self.wait:g}s", hint="retry, or wait longer with --wait SECONDS")

    def _lock_current(self, con, cur) -> bool:
        """Once this storage has seen the store current: take the writer lock and read the schema version
        in one round trip (a pipeline). True when the store is still current (SchemaTooNew when a newer
        cortexctl has migrated it meanwhile); False, with the transaction rolled back, when the
        caller must take the lock and make the schema current the long way."""
        import psycopg

        if not self._current or con.adapters.types.get("vector") is None:
            return False
        try:
            with pipelined(con):
                cur.execute(XACT_LOCK, [self._lock_timeout(), LOCK_CLASS, self._lock_key])
                version = con.cursor()
                version.execute("SELECT value FROM meta WHERE key = 'schema_version'")
            row = version.fetchone()
        except psycopg.errors.LockNotAvailable:
            raise self._busy() from None
        except psycopg.errors.UndefinedTable:  # the store was dropped since: the long way creates it
            con.rollback()
            self._current = False
            return False
        from cortexctl.store.pg import schema

        if row is None or not str(row[0]).isdigit() or not schema.check(int(row[0])):
            self._make_current(con, cur)  # the lock is held: an older store is migrated, a damaged one refused
        return True

    def _make_current(self, con, cur) -> None:
        """Create the schema and its tables, or migrate them forward (the writer lock is held)."""
        from cortexctl.store.pg import schema

        have = schema.version(cur) if self._exists_in(cur) else 0
        current = schema.check(have)
        if con.adapters.types.get("vector") is None:  # connected before another process made the store
            row = cur.execute("SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
                              " WHERE e.extname = 'vector'").fetchone()
            if row is not None:
                self._use_vector(con, cur, row[0])
            elif not current:
                self._create_extension(con, cur)
        from cortexctl.store.pg import isolation

        if current:
            if not isolation.installed(con):  # a store made before its finds were held to their actor
                isolation.install(con, self.schema)
            return
        cur.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(self.schema)}")
        schema.migrate(cur, have)
        from cortexctl.store.pg.vectors import _count_rows

        _count_rows(con, self.address)  # rows counted and changes numbered from the start (vectors.ROW_COUNTS)
        isolation.install(con, self.schema)  # finds held to their actor by the database (pg/isolation.py)

    def _exists_in(self, cur) -> bool:
        cur.execute("SELECT to_regclass(%s) IS NOT NULL", [f"{quote_ident(self.schema)}.meta"])
        return bool(cur.fetchone()[0])

    def _create_extension(self, con, cur) -> None:
        import psycopg

        cur.execute("SAVEPOINT ext")
        try:
            cur.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")  # shared by every store of the database
        except psycopg.errors.InsufficientPrivilege:
            raise ConfigError(f"PostgreSQL store {self.location}: pgvector is installed on the server but not enabled"
                              " in this database, and this user may not enable it",
                              hint="as a superuser, run CREATE EXTENSION vector; in the database") from None
        except (psycopg.errors.FeatureNotSupported, psycopg.errors.UndefinedFile, psycopg.errors.UndefinedObject):
            raise ConfigError(f"PostgreSQL store {self.location}: the server has no pgvector extension",
                              hint="install pgvector on the server (Debian/Ubuntu: apt install postgresql-NN-pgvector;"
                                   " see https://github.com/pgvector/pgvector), then retry") from None
        cur.execute("RELEASE SAVEPOINT ext")
        row = cur.execute("SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
                          " WHERE e.extname = 'vector'").fetchone()
        self._use_vector(con, cur, row[0])

    def _use_vector(self, con, cur, where: str) -> None:
        """pgvector's schema on this connection's search path, its types registered."""
        self._vector_schema = where
        cur.execute("SELECT set_config('search_path', %s, false)", [self._search_path()])
        self._register(con)

    # -- search structures ------------------------------------------------------------------
    def update_index(self, model: str, *, rebuild: bool = False, progress=None, loader=None,
                     wait: float | None = None, later: bool = False) -> dict:
        from cortexctl.store.pg import vectors

        # later: built now all the same (the server builds pgvector's index; restore does it staged)

        return vectors.update_index(self, model, rebuild=rebuild, progress=progress, wait=wait)

    def index_loader(self, model: str, *, threads: int = 1, expected: int = 0):
        from cortexctl.store.pg import vectors

        return vectors.BulkLoader(self, model)

    def reclaim_space(self) -> dict:
        """Nothing to give back: a load inserts rows and leaves no dead tuples; the server's
        autovacuum keeps the rest."""
        size = self.size_bytes()
        return {"action": "none", "reason": "the server keeps its own space", "bytes_before": size, "bytes": size}

    def after_vectors(self, model: str, last_key: int) -> None:
        from cortexctl.store.pg import vectors

        vectors.after_vectors(self, model)

    def index_health(self, model: str | None) -> dict:
        from cortexctl.store.pg import vectors

        return vectors.health(self, model)

    def cache_health(self) -> dict:
        return {"state": "none (the server's buffers)", "problem": None, "fold_failed": None}

    # -- bundles ------------------------------------------------------------------------------
    def export_bundle(self, dest):
        from cortexctl.store.pg import bundle

        return bundle.export(self, dest)

    def restore_bundle(self, members, schema_version: int, check) -> None:
        from cortexctl.store.pg import bundle

        bundle.restore(self, members, schema_version, check)


def _mode(con, *, read_only: bool) -> None:
    """Readers: one consistent view (REPEATABLE READ), read-only. Writers: READ COMMITTED under the lock."""
    import psycopg

    con.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ if read_only else None
    con.read_only = read_only


def _rollback(con) -> None:
    try:
        con.rollback()
    except Exception:  # a broken connection: closing it discards the transaction anyway
        pass


def _reraise(exc: BaseException, storage: PgStorage) -> None:
    """Turn a psycopg error a user can meet into a CortexError; leave the rest (bugs) alone."""
    if isinstance(exc, CortexError) or not isinstance(exc, Exception):
        return
    mod = type(exc).__module__ or ""
    if not mod.startswith("psycopg"):
        return
    import psycopg

    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        raise ConfigError(f"PostgreSQL store {storage.location}: {_first_line(exc)}",
                          hint="the store's user needs CREATE on the database (a new store) and to own its schema")
    if isinstance(exc, psycopg.errors.LockNotAvailable):
        raise StoreBusy(f"store {storage.location} is busy; gave up after {storage.wait:g}s",
                        hint="retry, or wait longer with --wait SECONDS") from None
    if isinstance(exc, psycopg.errors.DataCorrupted) or isinstance(exc, psycopg.errors.IndexCorrupted):
        raise IntegrityError(f"store {storage.location} cannot be read: {_first_line(exc)}") from None
    if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
        raise StoreUnreachable(f"lost the PostgreSQL server of store {storage.location}: {_first_line(exc)}") from None


__all__ = ["PgStorage", "StoreUnreachable", "split_uri", "DEFAULT_SCHEMA"]
