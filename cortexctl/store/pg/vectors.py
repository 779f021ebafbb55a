"""Vectors in pgvector and find's nearest-neighbour lane on PostgreSQL (``PgTx``'s ``VectorReads``).

Ground truth is the ``vectors`` table: one row per embedded version, its float32
``vector`` (unit length) under a key that grows with every insert. Each model has
one partial HNSW index of its own over the half-precision form of its vectors::

    CREATE INDEX vec_<model digest>_<dim> ON vectors
        USING hnsw ((vec::halfvec(<dim>)) halfvec_cosine_ops) WHERE model = '<model>'

The database keeps it as rows come and go (no file, no fold, no dropped keys), so
``update_index`` only creates a missing index (or rebuilds it with ``rebuild``).
``halfvec`` holds up to 4000 dimensions: a model with more has no index and is
searched exactly (``nearest`` says so with a ``Remark``).

``nearest`` is one query: the index's candidates (``vec::halfvec(dim) <=> query``,
the indexed expression, so the planner can use it), joined to the heads of their
current versions and the filters, then ranked again by the full-precision cosine
(``vec <=> query``), ties by ID, so a score is the exact one. pgvector 0.8's
iterative scan (``hnsw.iterative_scan = relaxed_order``) keeps reading the index
while the filters drop its candidates, so a filtered search still fills ``n``; when
the scan ends short of ``n`` (a filter that keeps very few), the exact search answers.
As on DuckDB, a narrow filter (types, tags, frames, a session) that leaves at most
``SMALL`` memories is answered exactly from the start. ``update_index`` also runs
ANALYZE, so that after an import the planner weighs the index against the filters
with the tables' real sizes.
"""

from __future__ import annotations

import hashlib
from typing import Any, Sequence

from cortexctl.errors import CortexError
from cortexctl.store.interface import Filters, IndexUnusable, Remark

HALFVEC_MAX = 4000  # the most dimensions a halfvec (and so the index) holds
SMALL = 4096  # candidates compared one by one: a narrow filter's, or a model's without an index yet
EF_MIN, EF_MAX = 400, 1000  # hnsw.ef_search: at least twice the candidates, within pgvector's bounds
CANDIDATES = 2  # the index's candidates per result, ranked again at full precision
INDEX_PREFIX = "vec_"
# (store address, model, dimension) whose index this process has seen: after_vectors then needs no
# connection of its own (an index dropped since is rebuilt by find, which IndexUnusable asks for)
_INDEXED: set[tuple[str, str, int]] = set()


def index_stem(model: str) -> str:
    """The start of the names of ``model``'s index (the dimension follows)."""
    return INDEX_PREFIX + hashlib.sha256(model.encode()).hexdigest()[:20] + "_"


def _model_index(con, model: str) -> tuple[str, int, bool] | None:
    """(name, dimension, valid) of ``model``'s index in the store's schema, or None."""
    stem = index_stem(model)
    rows = con.execute(
        "SELECT c.relname, i.indisvalid AND i.indisready FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid"
        " WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema()) AND c.relkind = 'i' AND starts_with(c.relname, %s)"
        " ORDER BY c.relname", [stem]).fetchall()
    for name, valid in rows:
        tail = name[len(stem):]
        if tail.isdigit():
            return name, int(tail), bool(valid)
    return None


_ITERATIVE: dict[str, bool] = {}  # store address -> its pgvector has iterative index scans (0.8 on)


def _iterative(con, address: str) -> bool:
    """Whether the server's pgvector scans an HNSW index iteratively (0.8 and later); without it a
    filtered search that ends short of n is answered exactly (``nearest``)."""
    got = _ITERATIVE.get(address)
    if got is None:
        row = con.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        parts = [int(p) if p.isdigit() else 0 for p in (row[0] if row else "0").split(".")[:2]]
        got = _ITERATIVE[address] = tuple(parts + [0] * (2 - len(parts))) >= (0, 8)
    return got


def _forget(address: str, model: str) -> None:
    for key in [k for k in _INDEXED if k[0] == address and k[1] == model]:
        _INDEXED.discard(key)


def _drop_indexes(con, address: str, where: str, params: Sequence[Any]) -> None:
    """Drop the indexes of the models (of the store's vectors) matching ``where`` over ``model``."""
    from cortexctl.store.pg import quote_ident

    for (model,) in con.execute(f"SELECT DISTINCT model FROM vectors WHERE {where}", list(params)).fetchall():
        got = _model_index(con, model)
        if got is not None:
            con.execute(f"DROP INDEX {quote_ident(got[0])}")
        _forget(address, model)


def _create_index(con, model: str, dim: int) -> str:
    from psycopg import sql

    name = f"{index_stem(model)}{int(dim)}"
    con.execute(sql.SQL("CREATE INDEX {} ON vectors USING hnsw ((vec::halfvec({})) halfvec_cosine_ops)"
                        " WHERE model = {}").format(sql.Identifier(name), sql.Literal(int(dim)), sql.Literal(model)))
    con.execute(sql.SQL("COMMENT ON INDEX {} IS {}").format(sql.Identifier(name),
                                                            sql.Literal(f"cortexctl: vectors of model {model}")))
    return name


# The rows of heads and vectors, kept in ``meta`` ('rows:heads', 'rows:vectors') by the database
# itself (and 'changes', below, with them): statement triggers add what a statement inserted and take off what it deleted, whichever
# client (any cortexctl version, a COPY, psql) made the change. Not state: a bundle does not hold
# ``meta``, and a restored store's are counted again by its first write.
ROW_COUNTS = """
CREATE OR REPLACE FUNCTION cortexctl_count_rows() RETURNS trigger LANGUAGE plpgsql AS $body$
DECLARE k bigint;
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        k := NULL;
    ELSE
        SELECT count(*) INTO k FROM changed;
        IF TG_OP = 'DELETE' THEN k := -k; END IF;
    END IF;
    EXECUTE format('UPDATE %I.meta SET value = (CASE WHEN $1 IS NULL THEN 0 ELSE value::bigint + $1 END)::text'
                   ' WHERE key = $2', TG_TABLE_SCHEMA) USING k, 'rows:' || TG_TABLE_NAME;
    RETURN NULL;
END $body$;
"""
CHANGES = """
CREATE OR REPLACE FUNCTION cortexctl_count_change() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    EXECUTE format('UPDATE %I.meta SET value = (value::bigint + 1)::text WHERE key = $1', TG_TABLE_SCHEMA)
        USING 'changes';
    RETURN NULL;
END $body$;
"""
FUNCTIONS = ("cortexctl_count_rows", "cortexctl_count_change")  # the store's own, in its schema
COUNTED = ("heads", "vectors")
# Every statement that changes these raises ``meta`` 'changes' by one: a resident storage's reading
# transactions keep what they worked out while it stays the same (``PgTx._kept``).
CHANGED = ("heads", "frames", "lex_docs", "lex_postings", "grants")
_UNCOUNTABLE: set[str] = set()  # store addresses whose user may not make the triggers: counted each time


def _count_rows(con, address: str) -> None:
    """Make the row-count triggers and count the rows once, in a savepoint of the caller's transaction
    (which holds the writer lock); a user without the right to make them goes on counting each time."""
    import psycopg

    try:
        with con.transaction():
            con.execute(ROW_COUNTS)
            for table in COUNTED:
                for event, ref in (("INSERT", "NEW"), ("DELETE", "OLD")):
                    name = f"{table}_rows_{event.lower()}"
                    con.execute(f"DROP TRIGGER IF EXISTS {name} ON {table}")
                    con.execute(f"CREATE TRIGGER {name} AFTER {event} ON {table} REFERENCING {ref} TABLE AS changed"
                                " FOR EACH STATEMENT EXECUTE FUNCTION cortexctl_count_rows()")
                con.execute(f"DROP TRIGGER IF EXISTS {table}_rows_truncate ON {table}")
                con.execute(f"CREATE TRIGGER {table}_rows_truncate AFTER TRUNCATE ON {table}"
                            " FOR EACH STATEMENT EXECUTE FUNCTION cortexctl_count_rows()")
                con.execute(f"INSERT INTO meta SELECT 'rows:{table}', count(*)::text FROM {table}"
                            " ON CONFLICT (key) DO UPDATE SET value = excluded.value")
            con.execute(CHANGES)
            for table in CHANGED:
                con.execute(f"DROP TRIGGER IF EXISTS {table}_changes ON {table}")
                con.execute(f"CREATE TRIGGER {table}_changes AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {table}"
                            " FOR EACH STATEMENT EXECUTE FUNCTION cortexctl_count_change()")
            # from a random start: a state it names now is none that a counter made before named
            con.execute("INSERT INTO meta VALUES ('changes', (floor(random() * 4e18))::bigint::text)"
                        " ON CONFLICT (key) DO UPDATE SET value = excluded.value")
    except psycopg.errors.InsufficientPrivilege:
        _UNCOUNTABLE.add(address)
    except psycopg.errors.ReadOnlySqlTransaction:
        pass  # a reading transaction: the next write makes them


def _binary_rows(con, table: str, columns: Sequence[str], types: Sequence[str], rows) -> None:
    with con.cursor() as cur:
        with cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(list(types))
            for r in rows:
                copy.write_row(r)


class VectorReads:
    """``interface.VectorSearch`` and the vector parts of ``Integrity`` over a ``PgTx``'s connection."""

    # -- writing ---------------------------------------------------------------------------
    def insert_vectors(self, ids: Sequence[str], versions: Sequence[int], model: str, matrix) -> int:
        """One row per (id, version) under keys above every key given so far; the last key (0 for none)."""
        import numpy as np

        n = len(ids)
        if not n:
            return 0
        if isinstance(matrix, list):
            matrix = np.frombuffer(b"".join(matrix), dtype="<f4").reshape(n, -1)
        matrix = np.ascontiguousarray(matrix, dtype=np.float32)
        dim = int(matrix.shape[1])
        # this process saw the model's index of this dimension: no query (a write's turn under the lock is short)
        got = None if (self.store.address, model, dim) in _INDEXED else _model_index(self._con, model)
        if got is not None and got[1] != dim:
            # the model's vectors were dropped and it now makes another length: its old index would
            # refuse them (update_index and after_vectors build the new one)
            self._drop_model_index(got[0])
            _forget(self.store.address, model)
        elif got is not None:
            _INDEXED.add((self.store.address, model, dim))
        import psycopg

        try:
            if n == 1:  # a write's: keyed by the server in the same statement (one round trip)
                return int(self._rows(
                    "INSERT INTO vectors (key, id, version, model, dim, vec)"
                    " VALUES ((SELECT coalesce(max(key), 0) + 1 FROM vectors), %s, %s, %s, %s, %s) RETURNING key",
                    [ids[0], int(versions[0]), model, dim, matrix[0]])[0][0])
            first = int(self._rows("SELECT coalesce(max(key), 0) + 1 FROM vectors")[0][0])
            with self._con.transaction():
                _binary_rows(self._con, "vectors", ("key", "id", "version", "model", "dim", "vec"),
                             ("int8", "text", "int4", "text", "int2", "vector"),
                             ((first + i, ids[i], int(versions[i]), model, dim, matrix[i]) for i in range(n)))
        except psycopg.errors.UniqueViolation as exc:
            from cortexctl.errors import IntegrityError

            raise IntegrityError(f"vectors: a row with the same key already exists ({str(exc).splitlines()[0]})") from None
        return first + n - 1

    def _drop_model_index(self, name: str) -> None:
        from cortexctl.store.pg import quote_ident

        self._con.execute(f"DROP INDEX {quote_ident(name)}")

    def model_dim(self, model: str) -> int | None:
        rows = self._rows("SELECT dim FROM vectors WHERE model = %s LIMIT 1", [model])
        return int(rows[0][0]) if rows else None

    def drop_vectors(self, id_: str, *, model: str | None = None) -> None:
        if model is None:
            self._con.execute("DELETE FROM vectors WHERE id = %s", [id_])
        else:
            self._con.execute("DELETE FROM vectors WHERE id = %s AND model = %s", [id_, model])

    def drop_model(self, model: str) -> int:
        """Delete the model's vectors and its index (the next update_index builds one afresh)."""
        _drop_indexes(self._con, self.store.address, "model = %s", [model])
        return self._con.execute("DELETE FROM vectors WHERE model = %s", [model]).rowcount

    def drop_other_models(self, model: str) -> int:
        _drop_indexes(self._con, self.store.address, "model <> %s", [model])
        return self._con.execute("DELETE FROM vectors WHERE model <> %s", [model]).rowcount

    def other_models(self, model: str) -> bool:
        """Two probes of the (model, key) index."""
        return bool(self._rows("SELECT EXISTS (SELECT 1 FROM vectors WHERE model < %s)"
                               " OR EXISTS (SELECT 1 FROM vectors WHERE model > %s)", [model, model])[0][0])

    # -- pending ------------------------------------------------------------------------------
    def maybe_pending(self, model: str) -> bool:
        """Another model's vectors (two probes of the (model, key) index), or fewer vectors than heads:
        the rows of each, as the database keeps them counted (``ROW_COUNTS``), so a write does not
        count every row under the writer lock. Where they are not counted yet, they are counted
        here once and kept counted from then on (a write's transaction: the writer lock is held)."""
        row = self._rows("SELECT EXISTS (SELECT 1 FROM vectors WHERE model < %s)"
                         " OR EXISTS (SELECT 1 FROM vectors WHERE model > %s),"
                         " (SELECT value FROM meta WHERE key = 'rows:vectors'),"
                         " (SELECT value FROM meta WHERE key = 'rows:heads'),"
                         " (SELECT value FROM meta WHERE key = 'changes')", [model, model])[0]
        other, vectors, heads, changes = row
        if None in (vectors, heads, changes):
            vectors, heads = self._rows("SELECT (SELECT count(*) FROM vectors), (SELECT count(*) FROM heads)")[0]
            if self.store.address not in _UNCOUNTABLE:
                _count_rows(self._con, self.store.address)
        return bool(other) or int(vectors) < int(heads)

    def count_pending(self, model: str) -> int:
        return int(self._rows(
            "SELECT count(*) FROM heads h WHERE h.tombstoned_at IS NULL AND NOT EXISTS (SELECT 1 FROM vectors x"
            " WHERE x.id = h.id AND x.version = h.current_version AND x.model = %s)", [model])[0][0])

    def pending(self, model: str, *, limit: int | None = None,
                ids: Sequence[str] | None = None) -> list[tuple[str, int, int, bytes]]:
        from cortexctl.store.search import PENDING

        params: list[Any] = [model]
        sql = PENDING.format(mark="%s")
        if ids is not None:
            sql += " AND h.id = ANY(%s)"
            params.append(list(ids))
        sql += " ORDER BY h.id"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [(r[0], int(r[1]), int(r[2]), bytes(r[3])) for r in self._rows(sql, params)]

    # -- searching ------------------------------------------------------------------------------
    def nearest(self, query_vector, model: str, filters: Filters, n: int, *,
                exact: bool = False) -> tuple[list[tuple[str, float]], str | None]:
        """The ``n`` memories passing ``filters`` nearest to ``query_vector``: ([(id, cosine > 0)], note)
        (module docstring). Raises ``IndexUnusable`` when a model with many vectors has no sound index."""
        import numpy as np

        q = np.asarray(query_vector, dtype=np.float32).reshape(-1)
        if not np.any(q) or n <= 0:
            return [], None
        from cortexctl.store.rules import model_unusable

        dim = int(q.shape[0])
        unusable = model_unusable(self, model, dim)
        if unusable is not None:
            return unusable
        if exact:
            return self._exact(q, model, filters, n), None
        if dim > HALFVEC_MAX:
            return self._exact(q, model, filters, n), Remark(
                f"vectors of {dim} dimensions have no index (at most {HALFVEC_MAX}): exact search")
        if filters.narrow and self._at_most(filters, SMALL):
            return self._exact(q, model, filters, n), None  # few candidates: compared one by one, as on DuckDB
        got = _model_index(self._con, model)
        if got is None or got[1] != dim or not got[2]:
            why = "missing" if got is None else "invalid" if not got[2] else f"built for {got[1]} dimensions"
            if int(self._rows("SELECT count(*) FROM (SELECT 1 FROM vectors WHERE model = %s LIMIT %s) s",
                              [model, SMALL + 1])[0][0]) <= SMALL:
                return self._exact(q, model, filters, n), None  # few vectors: exact is as quick
            raise IndexUnusable(why)
        found = self._through_index(q, model, filters, n)
        if len(found) < n:  # the scan ended short of n: few pass the filters, or few are left
            full = self._exact(q, model, filters, n)
            if [i for i, _ in full] != [i for i, s in found if s > 0]:
                return full, Remark("filter too narrow for the index; exact search")
        return [(i, s) for i, s in found if s > 0], None

    def _at_most(self, filters: Filters, limit: int) -> bool:
        """Whether at most ``limit`` memories pass ``filters`` (the count stops at ``limit`` + 1)."""
        where, params = self._filter(filters)
        return int(self._rows(f"SELECT count(*) FROM (SELECT 1 FROM heads h WHERE {where} LIMIT {int(limit) + 1}) s",
                              params)[0][0]) <= limit

    def _through_index(self, q, model: str, filters: Filters, n: int) -> list[tuple[str, float]]:
        """The index's best candidates passing the filters, ranked at full precision: [(id, cosine)]
        (every sign; at most ``n``)."""
        dim = int(q.shape[0])
        where, params = self._filter(filters)
        k = max(CANDIDATES * n, n + 10)
        ef = min(EF_MAX, max(EF_MIN, 2 * k))
        self._con.execute(f"SET LOCAL hnsw.ef_search = {int(ef)}")
        if _iterative(self._con, self.store.address):
            self._con.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        # prepare=False: the statement is planned with its parameters, so the planner sees that
        # ``v.model = %s`` is the model of the partial index (a generic plan would not)
        rows = self._con.execute(
            f"""SELECT c.id, 1 - (c.vec <=> %s::vector) FROM (
                    SELECT v.id, v.vec FROM vectors v
                    JOIN heads h ON h.id = v.id AND h.current_version = v.version
                    WHERE v.model = %s AND {where}
                    ORDER BY v.vec::halfvec({dim}) <=> %s::vector::halfvec({dim})
                    LIMIT {int(k)}) c
                ORDER BY c.vec <=> %s::vector, c.id LIMIT {int(n)}""",
            [q, model, *params, q, q], prepare=False).fetchall()
        return [(r[0], float(r[1])) for r in rows]

    def _exact(self, q, model: str, filters: Filters, n: int) -> list[tuple[str, float]]:
        """Every candidate compared at full precision (no index: the float32 expression has none)."""
        where, params = self._filter(filters)
        rows = self._rows(
            "SELECT v.id, 1 - (v.vec <=> %s::vector) FROM vectors v"
            " JOIN heads h ON h.id = v.id AND h.current_version = v.version"
            f" WHERE v.model = %s AND {where} ORDER BY v.vec <=> %s::vector, v.id LIMIT {int(n)}",
            [q, model, *params, q])
        return [(r[0], float(r[1])) for r in rows if r[1] > 0]

    def stored_vectors(self, pairs: Sequence[tuple[str, int]], model: str) -> dict:
        """id -> float32 row of the ``model`` vector of each (id, version) in ``pairs`` that has one."""
        import numpy as np

        want = {i: int(v) for i, v in pairs}
        if not want:
            return {}
        rows = self._rows("SELECT id, version, vec FROM vectors WHERE model = %s AND id = ANY(%s)", [model, list(want)])
        return {i: np.asarray(vec.to_numpy() if hasattr(vec, "to_numpy") else vec, dtype=np.float32).reshape(-1)
                for i, version, vec in rows if want[i] == int(version)}  # pgvector's Vector, or an array

    # -- integrity ---------------------------------------------------------------------------
    def vector_problems(self):
        """(id, version, problem) for vectors of the wrong length or not of a current version."""
        for id_, version, model in self._rows("SELECT id, version, model FROM vectors WHERE vector_dims(vec) <> dim"
                                              " ORDER BY key"):
            yield id_, int(version), f"vector of model {model} has the wrong length"
        for id_, version, model in self._rows(
                "SELECT x.id, x.version, x.model FROM vectors x LEFT JOIN heads h ON h.id = x.id"
                " AND h.current_version = x.version WHERE h.id IS NULL ORDER BY x.key"):
            yield id_, int(version), f"vector of model {model} is not of the memory's current version"

    def index_problems(self, model: str) -> list[str]:
        """An index PostgreSQL marks invalid, or one of another dimension than the model's vectors.
        A missing one is no problem: it is built on demand (find, reindex, the next write)."""
        got = _model_index(self._con, model)
        if got is None:
            return []
        name, dim, valid = got
        if not valid:
            return [f"index {name} of model {model} is invalid (reindex --rebuild rebuilds it)"]
        have = self.model_dim(model)
        if have is not None and have != dim:
            return [f"index {name} of model {model} is built for {dim} dimensions, its vectors have {have}"
                    " (reindex --rebuild rebuilds it)"]
        return []


class NoLoader:
    """``Storage.index_loader`` on PostgreSQL: the database keeps its HNSW index as rows arrive."""

    def add(self, last_key, ids, versions, matrix, owners=None) -> None:
        pass

    def close(self) -> None:
        pass


class BulkLoader(NoLoader):
    """``Storage.index_loader`` for an import: once the import has added a tenth as many vectors
    as the model had before it (at once, into an empty store), the model's HNSW index is dropped
    and ``update_index`` at the end of the import builds it again. PostgreSQL adds a row to an
    HNSW graph one by one as it is inserted (about 800 384-d vectors a second on 2 cores) but
    builds a graph about ten times as fast; meanwhile ``nearest`` answers exactly (a few vectors)
    or asks for the index (``IndexUnusable``: find builds it). Never fails the import."""

    MIN_ADDED = 1000  # vectors an import adds before the index is worth dropping

    def __init__(self, store, model: str) -> None:
        self.store = store
        self.model = model
        self.added = 0
        self.before: int | None = None  # the model's vectors before the import
        self.dropped = False

    def add(self, last_key, ids, versions, matrix, owners=None) -> None:
        self.added += len(ids)
        if self.dropped or self.added < self.MIN_ADDED:
            return
        try:
            if self.before is None:
                with self.store.reading() as tx:
                    have = int(tx._con.execute("SELECT count(*) FROM vectors WHERE model = %s",
                                              [self.model]).fetchone()[0])
                self.before = max(0, have - self.added)
            if self.added * 10 < self.before:
                return
            with self.store.transaction() as tx:
                got = _model_index(tx._con, self.model)
                if got is not None:
                    tx._drop_model_index(got[0])
            _forget(self.store.address, self.model)
            self.dropped = True
        except (CortexError, OSError):
            self.dropped = True  # another writer holds the store: leave the index as it is


def _with_wait(store, wait: float | None):
    """The storage, or a copy of it that waits ``wait`` seconds for the writer lock."""
    if wait is None:
        return store
    import copy

    other = copy.copy(store)
    other.wait = max(0.0, float(wait))
    return other


def update_index(store, model: str, *, rebuild: bool = False, progress=None, wait=None) -> dict:
    """Make sure ``model``'s HNSW index exists and is sound (REINDEX with ``rebuild``), in a write
    transaction, then vacuum what find reads; returns what was done ({"action": "rebuild" | "none",
    "vectors": n, "reason": ...})."""
    done = _update_index(store, model, rebuild=rebuild, progress=progress, wait=wait)
    vacuum(store)
    return done


def vacuum(store) -> None:
    """VACUUM ANALYZE the tables find reads, so that their visibility maps let a term's postings come
    from the covering index alone (after an import, or reindex). Upkeep: never fails a command."""
    from cortexctl.store.pg import quote_ident

    try:
        con = store._open()
        try:
            con.autocommit = True
            con.execute("SELECT set_config('search_path', %s, false)", [quote_ident(store.schema)])
            con.execute("VACUUM (ANALYZE) lex_postings, lex_docs, heads")
        finally:
            con.close()
    except Exception:  # noqa: BLE001 - the autovacuum daemon gets there too, later
        pass


def _update_index(store, model: str, *, rebuild: bool, progress, wait) -> dict:
    from cortexctl.store.pg import quote_ident

    with _with_wait(store, wait).transaction() as tx:
        con = tx._con
        count, dim = con.execute("SELECT count(*), min(dim) FROM vectors WHERE model = %s", [model]).fetchone()
        count = int(count)
        if dim is None:
            return {"action": "none", "vectors": 0, "reason": "no vectors yet"}
        dim = int(dim)
        if dim > HALFVEC_MAX:
            return {"action": "none", "vectors": count, "reason": f"{dim} dimensions: no index, searched exactly"}
        # fresh statistics, so the planner weighs the index against the filters as it should (after an
        # import it would otherwise plan for the empty tables it last sampled)
        con.execute("ANALYZE vectors, heads")
        got = _model_index(con, model)
        if got is not None and got[1] == dim and got[2] and not rebuild:
            return {"action": "none", "vectors": count, "reason": "up to date"}
        if progress:
            progress(0, count)
        # the graph in memory while it is built (about 1 KB a vector at 384 dimensions): a build that
        # outgrows it goes on on disk, many times slower
        mem = max(256, min(4096, count * dim * 3 // (1 << 20) + 64))
        con.execute(f"SET LOCAL maintenance_work_mem = '{int(mem)}MB'")
        if got is not None and got[1] == dim:
            con.execute(f"REINDEX INDEX {quote_ident(got[0])}")
            why = "rebuild asked for" if got[2] else "invalid"
        else:
            if got is not None:
                con.execute(f"DROP INDEX {quote_ident(got[0])}")
            _create_index(con, model, dim)
            why = "missing" if got is None else f"built for {got[1]} dimensions"
        if progress:
            progress(count, count)
    return {"action": "rebuild", "vectors": count, "added": count, "reason": why}


def after_vectors(store, model: str) -> None:
    """After a write stored vectors of ``model``: build its index when it has none. Never fails the write."""
    if any(k[0] == store.address and k[1] == model for k in _INDEXED):
        return
    try:
        with store.reading() as tx:
            dim = tx.model_dim(model)
            got = _model_index(tx._con, model)
        if dim is None or dim > HALFVEC_MAX or (got is not None and got[1] == dim):
            if got is not None and got[1] == dim:
                _INDEXED.add((store.address, model, dim))
            return
        update_index(store, model)
    except (CortexError, OSError):
        pass
    except Exception:  # noqa: BLE001 - upkeep after a committed write: find builds the index if this did not
        pass


def health(store, model: str | None) -> dict:
    """The healthcheck's ``index`` block: the model's HNSW index (its name), whether it exists, and
    whether it can be trusted (a missing one for a few vectors, or above 4000 dimensions, is fine:
    those are searched exactly)."""
    where = f"{store.schema}.{index_stem(model)}*" if model is not None else f"{store.schema}.{INDEX_PREFIX}*"
    block = {"path": where, "exists": False, "count": None, "model": None, "dimension": None,
             "consistent": None, "state": None, "connectivity": None, "files": None, "denser_on_rebuild": False,
             "split_on_rebuild": False, "building": False}  # the server builds its index inside the statement that asks for it
    if model is None or not store.exists():
        return block
    with store.reading() as tx:
        count, dim = tx._con.execute("SELECT count(*), min(dim) FROM vectors WHERE model = %s", [model]).fetchone()
        got = _model_index(tx._con, model)
    count = int(count)
    dim = None if dim is None else int(dim)
    name = f"{store.schema}.{got[0]}" if got else f"{store.schema}.{index_stem(model)}{dim or '*'}"
    if dim is not None and dim > HALFVEC_MAX:
        state, consistent = f"none for {dim} dimensions (searched exactly)", True
    elif got is None:
        small = count <= SMALL
        state, consistent = ("not built yet (searched exactly)" if small else "missing"), small
    elif not got[2]:
        state, consistent = "invalid", False
    elif dim is not None and got[1] != dim:
        state, consistent = f"built for {got[1]} dimensions", False
    else:
        state, consistent = "ok", True
    block.update(path=name, exists=got is not None, count=count, model=model, dimension=dim,
                 consistent=consistent, state=state)
    return block


__all__ = ["VectorReads", "NoLoader", "BulkLoader", "update_index", "after_vectors", "health", "index_stem"]
