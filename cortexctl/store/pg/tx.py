"""The PostgreSQL backend's transaction: ``PgTx`` implements ``interface.Tx`` over one connection.

Records, the journal, listing (filters and salience), feedback and grants are here;
vectors and the lexical lane are ``store/pg/vectors.py`` and ``store/pg/lexical.py``,
verify's reads ``store/pg/integrity.py``, merge's bundle reads ``store/pg/bundle.py``
(each a mixin of ``PgTx``). Filters and salience are the rules of ``store/rules.py``
compiled to PostgreSQL by ``predicate.to_sql(..., dialect="postgres")``, the same
expressions DuckDB's SQL and the search snapshot compile.
"""

from __future__ import annotations

from contextlib import nullcontext
from datetime import datetime, timedelta
from typing import Any, Iterator, Sequence

from cortexctl.errors import IntegrityError
from cortexctl.memory.types import MAX_COUNT
from cortexctl.store.interface import (CHECKPOINT_FIELDS, GRANT_FIELDS, HEAD_FIELDS, JOURNAL_FIELDS, VERSION_FIELDS,
                                       WEIGHT_FIELDS, Filters, Scoring, Viewer, viewer_of)
from cortexctl.store.pg import pipelined
from cortexctl.store.pg.bundle import BundleReads
from cortexctl.store.pg.integrity import IntegrityReads
from cortexctl.store.pg.lexical import LexicalReads
from cortexctl.store.pg.vectors import VectorReads

CHUNK = 10_000  # IDs per ``= ANY(%s)`` lookup


def visible_sql(who, alias: str = "h") -> tuple[str, list[Any]]:
    """``rules.visibility`` as PostgreSQL over a heads alias."""
    from cortexctl.store import rules
    from cortexctl.store.predicate import to_sql

    return to_sql(rules.visibility(viewer_of(who)), alias, "postgres")


def _chunks(ids: Sequence[str]) -> Iterator[list[str]]:
    ids = list(ids)
    for i in range(0, len(ids), CHUNK):
        yield ids[i:i + CHUNK]


FILTERS_KEPT = 64  # filters a resident storage keeps answers by, for one state of the store
PASSING_KEPT = 100_000  # heads' verdicts a resident storage keeps per filters, beyond which it starts again
CONTENDERS_MAX = 4096  # salience contenders a resident storage keeps per filters (beyond 4x the limit)


class PgTx(VectorReads, LexicalReads, IntegrityReads, BundleReads):
    """One PostgreSQL transaction seen through ``interface.Tx`` (the storage commits or rolls back)."""

    def __init__(self, con, store, *, reading: bool = False) -> None:
        self._con = con
        self.store = store
        self._reading = reading  # REPEATABLE READ, READ ONLY: one state of the store throughout
        self._where: dict[Filters, tuple[str, list[Any]]] = {}
        self._sal: dict[Scoring, tuple[str, list[Any]]] = {}
        self._state: dict | None | bool = False  # ``_kept``'s answer, once asked

    def _kept(self) -> dict | None:
        """In a resident storage's reading transaction, the dict where reads keep what they worked out
        for the state of the store this transaction sees; None elsewhere.

        A state is named by the store's change counter (``meta`` 'changes', which statement triggers
        raise with every statement that changes heads, frames, documents, postings or grants, whoever runs it:
        ``vectors.ROW_COUNTS``) and the heads table's identity (a restore makes the tables anew). Only
        a reading transaction uses it: a writing one sees its own changes, which may yet roll back."""
        if self._state is False:
            self._state = None
            if self._reading and self.store.resident:
                row = self._rows("SELECT (SELECT value FROM meta WHERE key = 'changes'), 'heads'::regclass::oid")[0]
                if row[0] is not None:
                    key = (int(row[0]), int(row[1]))
                    kept = self.store._kept
                    if kept is None or kept[0] != key:
                        kept = self.store._kept = (key, {})
                    self._state = kept[1]
        return self._state

    # -- helpers -------------------------------------------------------------------------
    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        return self._con.execute(sql, list(params)).fetchall()

    def _dicts(self, sql: str, params: Sequence[Any], columns: Sequence[str]) -> list[dict]:
        return [dict(zip(columns, r)) for r in self._rows(sql, params)]

    def _filter(self, filters: Filters) -> tuple[str, list[Any]]:
        got = self._where.get(filters)
        if got is None:
            from cortexctl.store import rules
            from cortexctl.store.predicate import to_sql

            got = self._where[filters] = to_sql(rules.filters(filters), "h", "postgres")
        return got

    def _salience(self, scoring: Scoring) -> tuple[str, list[Any]]:
        got = self._sal.get(scoring)
        if got is None:
            from cortexctl.store import rules
            from cortexctl.store.predicate import to_sql

            got = self._sal[scoring] = to_sql(rules.salience(scoring), "h", "postgres")
        return got

    def _insert(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """Rows into ``table`` (a binary COPY for many, INSERTs for a few); a taken key is an IntegrityError
        (the transaction is then failed: the storage rolls it back)."""
        import psycopg

        if not rows:
            return
        cols = ", ".join(columns)
        try:  # no savepoint: a failed insert fails the transaction, which the storage rolls back
            if len(rows) <= 8 or self._row_secured(table):  # PostgreSQL has no COPY FROM under row security
                marks = ", ".join(["%s"] * len(columns))
                with self._con.cursor() as cur:
                    cur.executemany(f"INSERT INTO {table} ({cols}) VALUES ({marks})", [list(r) for r in rows])
            else:
                types = self._copy_types(table, columns)
                with self._con.cursor() as cur, cur.copy(f"COPY {table} ({cols}) FROM STDIN (FORMAT BINARY)") as copy:
                    copy.set_types(types)
                    for r in rows:
                        copy.write_row(r)
        except psycopg.errors.UniqueViolation as exc:
            raise IntegrityError(f"{table}: a row with the same key already exists"
                                 f" ({str(exc).splitlines()[0]})") from None

    def _row_secured(self, table: str) -> bool:
        """Row security applies to this user on ``table`` (a role not its owner, ``pg/isolation.py``):
        kept once true; asked again while false (another process may put the policies on meanwhile)."""
        if table not in self.store._secured_tables:
            if not self._rows("SELECT row_security_active(%s::regclass)", [table])[0][0]:
                return False
            self.store._secured_tables.add(table)
        return True

    def _copy_types(self, table: str, columns: Sequence[str]) -> list[str]:
        """The PostgreSQL types of ``columns`` of ``table``, for a binary COPY: read from the catalogue
        once per table and storage (a schema version's columns do not change)."""
        key = (table, tuple(columns))
        got = self.store._copy_types.get(key)
        if got is None:
            from cortexctl.store.pg.bundle import _pg_types

            got = self.store._copy_types[key] = _pg_types(self._con, table, columns)
        return got

    # -- Records ----------------------------------------------------------------------------
    def insert_memories(self, heads: list[dict], versions: list[dict]) -> None:
        import psycopg

        frames = [[h["id"], *f.split(":", 2)] for h in heads for f in h["frames"]]
        few = max(len(heads), len(versions), len(frames)) <= 8  # a write's: INSERTs, no COPY
        try:
            with pipelined(self._con) if few else nullcontext():  # a write's rows in one round trip
                self._insert("heads", HEAD_FIELDS, [[h[c] for c in HEAD_FIELDS] for h in heads])
                self._insert("versions", VERSION_FIELDS, [[v[c] for c in VERSION_FIELDS] for v in versions])
                self._insert("frames", ("id", "verb", "kind", "ref"), frames)
        except psycopg.errors.UniqueViolation as exc:  # raised when the pipeline ends
            raise IntegrityError(f"{exc.diag.table_name}: a row with the same key already exists"
                                 f" ({str(exc).splitlines()[0]})") from None

    def insert_version(self, version: dict) -> None:
        self._insert("versions", VERSION_FIELDS, [[version[c] for c in VERSION_FIELDS]])

    def update_head(self, id_: str, fields: dict[str, Any]) -> None:
        bad = set(fields) - set(HEAD_FIELDS)
        if bad:
            raise ValueError(f"not head fields: {sorted(bad)}")
        sets = ", ".join(f"{k} = %s" for k in fields)
        self._con.execute(f"UPDATE heads SET {sets} WHERE id = %s", [*fields.values(), id_])
        if "frames" in fields:
            self._con.execute("DELETE FROM frames WHERE id = %s", [id_])
            self._insert("frames", ("id", "verb", "kind", "ref"), [[id_, *f.split(":", 2)] for f in fields["frames"]])

    def bump(self, ids: Sequence[str], *, access: int, citations: int, at: datetime) -> None:
        for chunk in _chunks(ids):
            self._con.execute(
                "UPDATE heads SET access_count = least(access_count + %s, %s),"
                " citations = least(greatest(citations + %s, 0), %s), last_used = %s WHERE id = ANY(%s)",
                [int(access), MAX_COUNT, int(citations), MAX_COUNT, at, chunk])

    def heads_by_ids(self, ids: Sequence[str], actor: str | Viewer, fields: Sequence[str] = HEAD_FIELDS) -> list[dict]:
        if not ids:
            return []
        bad = set(fields) - set(HEAD_FIELDS)
        if bad:
            raise ValueError(f"not head fields: {sorted(bad)}")
        seen, params = visible_sql(actor)
        cols = ", ".join(f"h.{c}" for c in fields)
        out: list[dict] = []
        for chunk in _chunks(ids):
            out += self._dicts(f"SELECT {cols} FROM heads h WHERE h.id = ANY(%s) AND {seen}", [chunk, *params], fields)
        return out

    def heads_by_prefix(self, prefix: str, actor: str | Viewer, limit: int = 6) -> list[dict]:
        seen, params = visible_sql(actor)
        cols = ", ".join(f"h.{c}" for c in HEAD_FIELDS)
        if len(prefix) == 26:
            return self._dicts(f"SELECT {cols} FROM heads h WHERE h.id = %s AND {seen}", [prefix, *params], HEAD_FIELDS)
        return self._dicts(
            f"SELECT {cols} FROM heads h WHERE (starts_with(h.id, %s) OR right(h.id, %s) = %s) AND {seen}"
            f" ORDER BY h.id LIMIT {int(limit)}", [prefix, len(prefix), prefix, *params], HEAD_FIELDS)

    def heads_of(self, ids: Sequence[str]) -> dict[str, dict]:
        cols = ", ".join(HEAD_FIELDS)
        out: dict[str, dict] = {}
        for chunk in _chunks(ids):
            for row in self._dicts(f"SELECT {cols} FROM heads WHERE id = ANY(%s)", [chunk], HEAD_FIELDS):
                out[row["id"]] = row
        return out

    def existing_ids(self, ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for chunk in _chunks(ids):
            found.update(r[0] for r in self._rows("SELECT id FROM heads WHERE id = ANY(%s)", [chunk]))
        return found

    def stored_hashes(self, ids: Sequence[str]) -> dict[str, tuple[str, list[bytes]]]:
        out: dict[str, tuple[str, list[bytes]]] = {}
        for chunk in _chunks(ids):
            for id_, actor, hashes in self._rows(
                    "SELECT h.id, h.actor, array_agg(v.hash ORDER BY v.version) FROM heads h"
                    " JOIN versions v ON v.id = h.id WHERE h.id = ANY(%s) GROUP BY h.id, h.actor", [chunk]):
                out[id_] = (actor, [bytes(b) for b in hashes])
        return out

    def versions(self, id_: str, version: int | None = None) -> list[dict]:
        cols = ", ".join(VERSION_FIELDS)
        if version is None:
            return self._dicts(f"SELECT {cols} FROM versions WHERE id = %s ORDER BY version", [id_], VERSION_FIELDS)
        return self._dicts(f"SELECT {cols} FROM versions WHERE id = %s AND version = %s", [id_, int(version)],
                           VERSION_FIELDS)

    def current_versions(self, ids: Sequence[str]) -> dict[str, dict]:
        cols = ", ".join(f"v.{c}" for c in VERSION_FIELDS)
        out: dict[str, dict] = {}
        for chunk in _chunks(ids):
            for row in self._dicts(f"SELECT {cols} FROM versions v JOIN heads h ON h.id = v.id"
                                   " AND h.current_version = v.version WHERE h.id = ANY(%s)", [chunk], VERSION_FIELDS):
                out[row["id"]] = row
        return out

    def current_data(self, current: dict[str, int]) -> dict[str, tuple[int, bytes]]:
        out: dict[str, tuple[int, bytes]] = {}
        for chunk in _chunks(list(current)):
            for id_, version, type_, data in self._rows(
                    "SELECT v.id, v.version, v.type, v.data FROM versions v"
                    " JOIN unnest(%s::text[], %s::int[]) AS w(id, version) ON w.id = v.id AND w.version = v.version",
                    [chunk, [int(current[i]) for i in chunk]]):
                out[id_] = (int(type_), bytes(data))
        return out

    def iter_visible(self, actor: str | Viewer, batch: int = 2000):
        seen, params = visible_sql(actor)
        cols = ", ".join(f"h.{c}" for c in HEAD_FIELDS)
        vcols = ", ".join(VERSION_FIELDS)
        last = ""
        while True:
            heads = self._dicts(f"SELECT {cols} FROM heads h WHERE h.id > %s AND {seen} ORDER BY h.id LIMIT {int(batch)}",
                                [last, *params], HEAD_FIELDS)
            if not heads:
                return
            ids = [h["id"] for h in heads]
            versions: dict[str, list[dict]] = {i: [] for i in ids}
            for v in self._dicts(f"SELECT {vcols} FROM versions WHERE id = ANY(%s) ORDER BY id, version", [ids],
                                 VERSION_FIELDS):
                versions[v["id"]].append(v)
            for h in heads:
                yield h, versions[h["id"]]
            last = ids[-1]

    def ref_counts(self, parts: Sequence[str]) -> dict[str, int]:
        if not parts:
            return {}
        n = len(parts[0])
        if any(len(p) != n for p in parts):
            raise IntegrityError("not parts of memory IDs")
        rows = self._rows(  # UNION, not UNION ALL: an ID that starts and ends with the same part is one ID
            "SELECT s, count(*) FROM (SELECT id, right(id, %s) AS s FROM heads WHERE right(id, %s) = ANY(%s)"
            " UNION SELECT id, left(id, %s) FROM heads WHERE left(id, %s) = ANY(%s)) u GROUP BY s",
            [n, n, list(parts), n, n, list(parts)])
        return {s: int(c) for s, c in rows}

    # -- Journal --------------------------------------------------------------------------------
    def next_seq(self) -> int:
        return int(self._rows("SELECT coalesce(max(seq), 0) + 1 FROM journal")[0][0])

    def append_journal(self, entries) -> int:
        entries = list(entries)
        if 0 < len(entries) <= 8:  # a write's: numbered by the server in the same statement (one round trip)
            cols = list(zip(*entries))
            rows = self._rows(
                "INSERT INTO journal (seq, kind, ts, actor, ref, payload)"
                " SELECT (SELECT coalesce(max(seq), 0) FROM journal) + e.n, e.kind, e.ts, e.actor, e.ref, e.payload"
                " FROM unnest(%s::text[], %s::timestamp[], %s::text[], %s::text[], %s::bytea[]) WITH ORDINALITY"
                " AS e(kind, ts, actor, ref, payload, n) RETURNING seq",
                [list(c) for c in cols])
            return int(min(r[0] for r in rows))
        first = self.next_seq()  # under the writer lock: no other transaction appends meanwhile
        self._insert("journal", JOURNAL_FIELDS, [(first + i, *e) for i, e in enumerate(entries)])
        return first

    def journal_entries(self, kinds: Sequence[str], batch: int = 10000):
        last = 0
        while True:
            rows = self._rows("SELECT seq, kind, ts, actor, ref, payload FROM journal WHERE seq > %s AND kind = ANY(%s)"
                              f" ORDER BY seq LIMIT {int(batch)}", [last, list(kinds)])
            if not rows:
                return
            for r in rows:
                yield (int(r[0]), r[1], r[2], r[3], r[4], bytes(r[5]))
            last = int(rows[-1][0])

    def journal_memo(self) -> dict | None:
        return None  # a view of the database itself: nothing tells cheaply that no commit came since

    def seq_at(self, at) -> int:
        return int(self._rows("SELECT coalesce(max(seq), 0) FROM journal WHERE ts <= %s", [at])[0][0])

    def journal_window(self, after: int = 0, upto: int | None = None, kinds: Sequence[str] = (),
                       refs: Sequence[str] | None = None, batch: int = 10000, payloads: bool = True):
        where, params = ["seq > %s"], [int(after)]
        if upto is not None:
            where.append("seq <= %s")
            params.append(int(upto))
        if kinds:
            where.append("kind = ANY(%s)")
            params.append(list(kinds))
        if refs is not None:
            where.append("ref = ANY(%s)")
            params.append(list(refs))
        last = params[0]
        while True:
            params[0] = last
            rows = self._rows(f"SELECT seq, kind, ts, actor, ref, {'payload' if payloads else 'NULL'} FROM journal"
                              f" WHERE {' AND '.join(where)} ORDER BY seq LIMIT {int(batch)}", params)
            if not rows:
                return
            for r in rows:
                yield (int(r[0]), r[1], r[2], r[3], r[4], b"" if r[5] is None else bytes(r[5]))
            last = int(rows[-1][0])

    def journal_bounds(self) -> tuple[int, int | None, int | None]:
        n, lo, hi = self._rows("SELECT count(*), min(seq), max(seq) FROM journal")[0]
        return int(n), None if lo is None else int(lo), None if hi is None else int(hi)

    # -- Listing ---------------------------------------------------------------------------------
    def count_heads(self, filters: Filters | None = None) -> int:
        if filters is None:  # the count the database keeps (vectors.ROW_COUNTS): every head, held view or not
            return int(self._rows("SELECT coalesce((SELECT value::bigint FROM meta WHERE key = 'rows:heads'),"
                                  " (SELECT count(*) FROM heads))")[0][0])
        where, params = self._filter(filters)
        return int(self._rows(f"SELECT count(*) FROM heads h WHERE {where}", params)[0][0])

    def passing(self, ids: Sequence[str], filters: Filters) -> dict[str, int]:
        where, params = self._filter(filters)
        return self._by_id("passing", filters, ids, lambda some: self._passing(some, where, params))

    def _by_id(self, name: str, filters: Filters, ids: Sequence[str], fetch) -> dict:
        """``fetch(ids)``'s answer ({id: value}, the IDs it leaves out absent). A resident storage keeps
        each ID's answer (or its absence) for this state of the store, by ``name`` and the filters, and
        fetches only the IDs it has not seen."""
        kept = self._kept()
        if kept is None:
            return fetch(list(ids))
        by_key = kept.setdefault("by id", {})
        key = (name, self._times_key(kept, filters))
        known = by_key.get(key)
        if known is None:
            if len(by_key) >= FILTERS_KEPT:  # many filters: start again
                by_key.clear()
            known = by_key[key] = {}
        want = list(dict.fromkeys(ids))
        if len(known) > PASSING_KEPT:  # a long-lived process asked about very many: start again
            known.clear()
        missing = [i for i in want if i not in known]
        if missing:
            got = fetch(missing)
            known.update((i, got.get(i)) for i in missing)
        return {i: known[i] for i in want if known[i] is not None}

    def _passing(self, ids: Sequence[str], where: str, params: list[Any]) -> dict[str, int]:
        out: dict[str, int] = {}
        for chunk in _chunks(ids):
            out.update((r[0], int(r[1])) for r in self._rows(
                f"SELECT h.id, h.current_version FROM heads h WHERE h.id = ANY(%s) AND {where}", [chunk, *params]))
        return out

    def live_versions(self, ids: Sequence[str]) -> dict[str, int]:
        return self._passing(ids, "h.tombstoned_at IS NULL", [])

    def top_salience(self, filters: Filters, scoring: Scoring, limit: int) -> list[tuple[str, float]]:
        """The ``limit`` most salient, ties by later update then higher ID. A resident storage keeps the
        contenders (``_contenders``) for this state of the store and ``rules.salient_fall``'s hold of the
        clock, and works out their exact salience and order anew at every call."""
        where, params = self._filter(filters)
        sal, sal_params = self._salience(scoring)
        kept = self._kept()
        got = None
        if kept is not None and limit > 0:
            from cortexctl.store.predicate import epoch_seconds

            now = epoch_seconds(scoring.now)
            salient = kept.setdefault("salient", {})
            key = (self._times_key(kept, filters), scoring.half_life, scoring.weights, limit)
            got = salient.get(key)
            if got is None or not got[0] <= now <= got[1]:
                if got is None and len(salient) >= FILTERS_KEPT:
                    salient.clear()
                got = salient[key] = self._contenders(filters, scoring, limit, now)
        if got is None or got[2] is None:
            rows = self._rows(f"SELECT h.id, {sal} AS s FROM heads h WHERE {where}"
                              f" ORDER BY s DESC, h.updated_at DESC, h.id DESC LIMIT {int(limit)}",
                              [*sal_params, *params])
            return [(r[0], float(r[1])) for r in rows]
        rows = self._rows(f"SELECT h.id, {sal} AS s, h.updated_at FROM heads h WHERE h.id = ANY(%s) AND {where}",
                          [*sal_params, got[2], *params])
        rows.sort(key=lambda r: (r[1], r[2], r[0]), reverse=True)
        return [(r[0], float(r[1])) for r in rows[:limit]]

    def _contenders(self, filters: Filters, scoring: Scoring, limit: int,
                    now: float) -> tuple[float, float, list[str] | None]:
        """(from, until, IDs): the heads that may be among the ``limit`` most salient from ``now`` until
        then: those within the fall of recency meanwhile (and a rounding's width) of the cut."""
        from cortexctl.store import rules

        where, params = self._filter(filters)
        sal, sal_params = self._salience(scoring)
        hold, fall = rules.salient_fall(scoring)
        rows = self._rows(
            f"WITH s AS MATERIALIZED (SELECT h.id, {sal} AS s FROM heads h WHERE {where}),"
            f" c AS (SELECT coalesce((SELECT s FROM s ORDER BY s DESC LIMIT 1 OFFSET {int(limit) - 1}),"
            " '-infinity'::float8) AS cut)"
            " SELECT s.id FROM s, c WHERE s.s >= c.cut - %s - 1e-9 * greatest(1.0, abs(c.cut))",
            [*sal_params, *params, fall + 1e-9 * bool(hold)])
        ids = [r[0] for r in rows]
        return now, now + hold, (ids if len(ids) <= CONTENDERS_MAX + 4 * limit else None)  # None: too many to keep

    def _times_key(self, kept: dict, filters: Filters):
        """``filters`` as far as which heads pass: its times taken as how many valid times of the heads
        lie at or before them (the same number, the same heads pass ``rules.valid_at``/``not_ended``)."""
        if filters.ended_by is None and filters.valid_at is None:
            return filters
        from bisect import bisect_right
        from dataclasses import replace

        times = kept.get("valid_times")
        if times is None:
            got = self._rows("SELECT array(SELECT valid_from FROM heads WHERE valid_from IS NOT NULL ORDER BY 1),"
                             " array(SELECT valid_to FROM heads WHERE valid_to IS NOT NULL ORDER BY 1)")[0]
            times = kept["valid_times"] = (list(got[0]), list(got[1]))
        starts, ends = times
        return (replace(filters, ended_by=None, valid_at=None),
                None if filters.ended_by is None else bisect_right(ends, filters.ended_by),
                None if filters.valid_at is None else (bisect_right(starts, filters.valid_at),
                                                       bisect_right(ends, filters.valid_at)))

    def candidates(self, ids: Sequence[str], filters: Filters, scoring: Scoring) -> dict[str, tuple[int, bool, float]]:
        where, params = self._filter(filters)
        sal, sal_params = self._salience(scoring)
        out: dict[str, tuple[int, bool, float]] = {}
        for chunk in _chunks(ids):
            for r in self._rows(f"SELECT h.id, h.current_version, ({where}), {sal} FROM heads h WHERE h.id = ANY(%s)",
                                [*params, *sal_params, chunk]):
                out[r[0]] = (int(r[1]), bool(r[2]), float(r[3]))
        return out

    def session_neighbours(self, ids: Sequence[str], filters: Filters, reach: int = 1
                           ) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
        if not ids or reach < 1:
            return {}
        from cortexctl.store.records import neighbour_columns, neighbour_rows

        where, params = self._filter(filters)

        def fetch(ids: list[str]) -> dict:
            rows = self._rows(
                f"""SELECT * FROM (
                      SELECT h.id, {neighbour_columns(reach)} FROM heads h
                      WHERE h.session IN (SELECT session FROM heads WHERE id = ANY(%s) AND session IS NOT NULL)
                        AND ({where})
                      WINDOW w AS (PARTITION BY h.session ORDER BY h.id COLLATE "C")) s WHERE id = ANY(%s)""",
                [ids, *params, ids])
            return neighbour_rows(rows, reach)

        return self._by_id(f"neighbours {int(reach)}", filters, ids, fetch)

    def sessions(self, actor: str | Viewer, turn_tag: str, summary_tag: str) -> list[dict]:
        seen, params = visible_sql(actor)
        rows = self._rows(
            f"""SELECT h.session,
                       count(*) FILTER (WHERE %s = ANY(h.tags)),
                       min(h.created_at), max(h.updated_at),
                       max(h.id) FILTER (WHERE %s = ANY(h.tags))
                FROM heads h
                WHERE h.session IS NOT NULL AND h.tombstoned_at IS NULL AND {seen}
                GROUP BY h.session ORDER BY max(h.updated_at) DESC, h.session""",
            [turn_tag, summary_tag, *params])
        return [{"session": r[0], "turns": int(r[1]), "first": r[2], "last": r[3], "summary": r[4]} for r in rows]

    def result_rows(self, ids: Sequence[str], form: str) -> dict[str, dict]:
        if form not in ("short", "medium"):
            raise ValueError(form)
        cols = ("id", "type", "current_version", "tags", "frames", "importance", "visibility", "actor",
                "updated_at", "tombstoned_at", "valid_from", "valid_to", "supersedes", "superseded_by")
        out: dict[str, dict] = {}
        for chunk in _chunks(ids):
            for r in self._rows(f"SELECT {', '.join('h.' + c for c in cols)}, h.{form} FROM heads h"
                                " WHERE h.id = ANY(%s)", [chunk]):
                out[r[0]] = dict(zip((*cols, "text"), r))
        return out

    def search_data(self, ids: Sequence[str]) -> dict[str, tuple[int, bytes]]:
        return {i: (int(v["type"]), bytes(v["data"])) for i, v in self.current_versions(ids).items()}

    # -- Feedback ---------------------------------------------------------------------------------
    def weights(self, actor: str) -> tuple[float, ...] | None:
        rows = self._rows(f"SELECT {', '.join(WEIGHT_FIELDS)} FROM learned_weights WHERE actor = %s", [actor])
        return tuple(float(w) for w in rows[0]) if rows else None

    def set_weights(self, actor: str, weights: Sequence[float], *, seq: int, at: datetime) -> None:
        cols = ", ".join(WEIGHT_FIELDS)
        self._con.execute(
            f"INSERT INTO learned_weights (actor, {cols}, steps, seq, updated_at)"
            f" VALUES (%s, {', '.join(['%s'] * len(WEIGHT_FIELDS))}, 1, %s, %s)"
            f" ON CONFLICT (actor) DO UPDATE SET {', '.join(f'{c} = excluded.{c}' for c in WEIGHT_FIELDS)},"
            " steps = learned_weights.steps + 1, seq = excluded.seq, updated_at = excluded.updated_at",
            [actor, *[float(w) for w in weights], int(seq), at])

    def all_weights(self) -> dict[str, dict]:
        n = len(WEIGHT_FIELDS)
        rows = self._rows(f"SELECT actor, {', '.join(WEIGHT_FIELDS)}, steps, seq, updated_at FROM learned_weights")
        return {r[0]: {"weights": tuple(float(w) for w in r[1:1 + n]), "steps": int(r[1 + n]), "seq": int(r[2 + n]),
                       "updated_at": r[3 + n]} for r in rows}

    def take_token(self, actor: str, intent: str, now: datetime, *, rate: float, burst: float) -> bool:
        # The writer lock orders every transaction that takes a token: the read below is current.
        rows = self._rows("SELECT tokens, updated_at FROM rate_buckets WHERE actor = %s AND intent = %s", [actor, intent])
        from cortexctl.store.rules import tokens_now

        tokens = tokens_now(rows[0] if rows else None, now, rate=rate, burst=burst)
        if tokens < 1.0:
            return False
        self._con.execute("INSERT INTO rate_buckets VALUES (%s, %s, %s, %s) ON CONFLICT (actor, intent)"
                         " DO UPDATE SET tokens = excluded.tokens, updated_at = excluded.updated_at",
                         [actor, intent, tokens - 1.0, now])
        self._con.execute("DELETE FROM rate_buckets WHERE updated_at < %s", [now - timedelta(seconds=burst / rate)])
        return True

    def put_checkpoint(self, row: dict) -> None:
        cols = ", ".join(CHECKPOINT_FIELDS)
        self._con.execute(f"INSERT INTO checkpoints ({cols}) VALUES (%s, %s, %s, %s, %s, %s)"
                         " ON CONFLICT (actor, intent, step) DO UPDATE SET created_at = excluded.created_at,"
                         " seq = excluded.seq, record = excluded.record", [row[c] for c in CHECKPOINT_FIELDS])

    def _checkpoints(self, where: str = "", params: Sequence[Any] = ()) -> list[dict]:
        rows = self._dicts(f"SELECT {', '.join(CHECKPOINT_FIELDS)} FROM checkpoints {where}", params, CHECKPOINT_FIELDS)
        for r in rows:
            r["record"] = bytes(r["record"])
        return rows

    def checkpoint(self, actor: str, intent: str, step: str) -> dict | None:
        rows = self._checkpoints("WHERE actor = %s AND intent = %s AND step = %s", [actor, intent, step])
        return rows[0] if rows else None

    def all_checkpoints(self) -> dict[tuple[str, str, str], dict]:
        return {(r["actor"], r["intent"], r["step"]): r for r in self._checkpoints()}

    # -- Grants ------------------------------------------------------------------------------------
    def _grants(self, where: str, params: Sequence[Any]) -> list[dict]:
        rows = self._dicts(f"SELECT {', '.join(GRANT_FIELDS)} FROM grants {where} ORDER BY id", params, GRANT_FIELDS)
        for r in rows:
            r["types"] = [int(t) for t in r["types"]]
            r["tags"] = [str(t) for t in r["tags"]]
        return rows

    def live_grants(self, subagent: str, now: datetime) -> list[dict]:
        return self._grants("WHERE subagent = %s AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > %s)",
                            [subagent, now])

    def grants_of(self, actor: str) -> list[dict]:
        return self._grants("WHERE granter = %s OR subagent = %s", [actor, actor])

    def insert_grant(self, row: dict) -> None:
        self._insert("grants", GRANT_FIELDS, [[list(row[c]) if c in ("types", "tags") else row[c]
                                               for c in GRANT_FIELDS]])

    def revoke_grant(self, id_: str, *, at: datetime, by: str) -> None:
        self._con.execute("UPDATE grants SET revoked_at = %s, revoked_by = %s WHERE id = %s", [at, by, id_])

    def all_grants(self) -> dict[str, dict]:
        return {r["id"]: r for r in self._grants("", [])}


__all__ = ["PgTx", "visible_sql"]
