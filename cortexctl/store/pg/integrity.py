"""What verify and healthcheck read on PostgreSQL (``PgTx``'s ``IntegrityReads``).

The same answers as the DuckDB store's (``store/integrity.py``, ``records.health_counts``):
bytea comes back as bytes, counts as ints. Memory IDs are compared and ordered bytewise,
as DuckDB and Python order them, whatever the database's collation (the runs of
``by_memory`` are cut by comparing IDs in Python): in a database whose default collation
is bytewise already (C, POSIX, C.UTF-8) the indexes on IDs serve, elsewhere the queries
say ``COLLATE "C"``. Long walks read through
server-side cursors, a batch at a time, so no answer is held whole in memory.
"""

from __future__ import annotations

import itertools
from typing import Any, Iterator, Sequence

from cortexctl.store.interface import HEAD_FIELDS, INFINITE_MICROS, MEMORY_KINDS, TIME_FIELDS, VERSION_FIELDS
from cortexctl.store.predicate import id_range

BYTEWISE = ' COLLATE "C"'
BYTEWISE_DEFAULTS = ("C", "POSIX", "C.UTF-8", "C.utf8")
_cursor_names = itertools.count(1)
_collations: dict[str, str] = {}  # conninfo -> what makes a comparison of IDs bytewise there


def bytewise(con, key: str) -> str:
    """'' when the database's default collation orders text bytewise, else ``COLLATE "C"``."""
    got = _collations.get(key)
    if got is None:
        if con.info.server_version >= 150000:
            provider, collate = con.execute(
                "SELECT datlocprovider, datcollate FROM pg_database WHERE datname = current_database()").fetchone()
        else:
            provider, collate = con.execute(
                "SELECT 'c', datcollate FROM pg_database WHERE datname = current_database()").fetchone()
        bytewise_already = provider in ("c", "b") and collate in BYTEWISE_DEFAULTS  # libc's or the builtin provider
        got = _collations[key] = "" if bytewise_already else BYTEWISE
    return got


def _server_cursor(con, *, binary: bool = False):
    """A server-side cursor of the current transaction: rows come as they are fetched
    (``binary``: in PostgreSQL's binary form, which spares parsing vectors' text)."""
    return con.cursor(name=f"cortexctl_walk_{next(_cursor_names)}", binary=binary)


class _Cursors:
    """What ``store.integrity._Stream`` opens its cursors from: server-side ones here."""

    def __init__(self, con) -> None:
        self._con = con

    def cursor(self):
        return _server_cursor(self._con)


def _memory_ids_sql() -> str:
    return ("SELECT ref AS id FROM journal WHERE kind = ANY(%s) AND ref IS NOT NULL"
            " UNION SELECT id FROM heads")


class IntegrityReads:
    """``interface.Integrity`` (but vectors and postings) over a ``PgTx``'s connection."""

    con: Any
    store: Any

    def _c(self) -> str:
        return bytewise(self._con, self.store.conninfo)

    def hash_mismatches(self, domain: bytes, after: str | None = None,
                        upto: str | None = None) -> tuple[int, list[tuple[str, int]]]:
        c = self._c()
        where, params = id_range("id", after, upto, "postgres", c)
        (n,) = self._con.execute(f"SELECT count(*) FROM versions WHERE {where}", params).fetchone()
        # a type code that is not one byte hashes to nothing, which no stored hash equals
        bad = self._con.execute(
            f"SELECT id, version FROM versions WHERE {where} AND hash IS DISTINCT FROM"
            " CASE WHEN type BETWEEN 0 AND 255 THEN sha256(%s::bytea || set_byte(decode('00', 'hex'), 0, type)"
            f" || data) END ORDER BY id{c}, version", [*params, domain]).fetchall()
        return int(n), [(r[0], int(r[1])) for r in bad]

    def head_version_mismatches(self) -> list[tuple]:
        from cortexctl.store.integrity import HEAD_VERSION_MISMATCHES

        rows = self._con.execute(f"{HEAD_VERSION_MISMATCHES} ORDER BY h.id{self._c()}").fetchall()
        return [(r[0], int(r[1]), int(r[2]), None if r[3] is None else int(r[3]), r[4]) for r in rows]

    def orphan_versions(self) -> list[str]:
        return [r[0] for r in self._con.execute(
            f"SELECT DISTINCT v.id{self._c()} FROM versions v"
            " WHERE NOT EXISTS (SELECT 1 FROM heads h WHERE h.id = v.id) ORDER BY 1").fetchall()]

    def valid_links(self) -> list[tuple]:
        return [tuple(r) for r in self._con.execute(
            f"SELECT id, valid_from, valid_to, supersedes, superseded_by FROM heads WHERE valid_from IS NOT NULL"
            f" OR valid_to IS NOT NULL OR supersedes IS NOT NULL OR superseded_by IS NOT NULL ORDER BY id{self._c()}"
        ).fetchall()]

    def frame_mismatches(self) -> list[tuple]:
        return [tuple(r) for r in self._con.execute(
            """
            WITH want AS (SELECT id, unnest(frames) AS frame FROM heads),
                 have AS (SELECT id, verb || ':' || kind || ':' || ref AS frame FROM frames)
            SELECT id, frame, 'missing from the frame index'
            FROM (SELECT * FROM want EXCEPT ALL SELECT * FROM have) AS missing
            UNION ALL
            SELECT id, frame, 'in the frame index but not on the head'
            FROM (SELECT * FROM have EXCEPT ALL SELECT * FROM want) AS extra
            """).fetchall()]

    def journal_gaps(self) -> list[tuple[int, int]]:
        return [(int(a), int(b)) for a, b in self._con.execute(
            "SELECT seq, nxt FROM (SELECT seq, lead(seq) OVER (ORDER BY seq) AS nxt FROM journal) AS j"
            " WHERE nxt IS NOT NULL AND nxt <> seq + 1 ORDER BY seq").fetchall()]

    def unknown_kinds(self, known: Sequence[str]) -> list[tuple[int, str]]:
        return [(int(s), k) for s, k in self._con.execute(
            "SELECT seq, kind FROM journal WHERE NOT (kind = ANY(%s)) ORDER BY seq", [list(known)]).fetchall()]

    def unpaired_attests(self) -> list[tuple[int, str, str | None]]:
        return [(int(s), k, n) for s, k, n in self._con.execute(
            """
            SELECT seq, kind, neighbour FROM (
                SELECT seq, kind,
                       CASE WHEN kind = 'attest' THEN lead(kind) OVER w ELSE lag(kind) OVER w END AS neighbour,
                       CASE WHEN kind = 'attest' THEN lead(seq) OVER w ELSE lag(seq) OVER w END AS nseq
                FROM journal
                WINDOW w AS (ORDER BY seq)) AS j
            WHERE (kind = 'attest' AND (neighbour IS DISTINCT FROM 'learn_weights' OR nseq <> seq + 1))
               OR (kind = 'learn_weights' AND (neighbour IS DISTINCT FROM 'attest' OR nseq <> seq - 1))
            ORDER BY seq
            """).fetchall()]

    def memory_batch_ends(self, batch: int = 5000) -> list[str]:
        c = self._c()
        return [r[0] for r in self._con.execute(
            f"SELECT id FROM (SELECT id, row_number() OVER (ORDER BY id{c}) AS n FROM ({_memory_ids_sql()}) AS m) AS r"
            f" WHERE mod(n, %s) = 0 ORDER BY id{c}", [list(MEMORY_KINDS), int(batch)]).fetchall()]

    def by_memory(self, batch: int = 5000, after: str | None = None, upto: str | None = None,
                  rows: bool = False) -> Iterator[tuple[list[tuple], list, list]]:
        """Runs of memory IDs (from the heads and the journal alike) with their journal entries,
        heads and versions; each table read once, in ID order, through a cursor of its own."""
        from cortexctl.store.integrity import _Stream, memory_runs

        last = "" if after is None else after
        c = self._c()
        hcols = ", ".join(_micros(HEAD_FIELDS) if rows else HEAD_FIELDS)
        vcols = ", ".join(_micros(VERSION_FIELDS) if rows else VERSION_FIELDS)

        def bound(col: str) -> tuple[str, list]:
            return ("", []) if upto is None else (f" AND {col}{c} <= %s", [upto])

        src = _Cursors(self._con)
        kinds = list(MEMORY_KINDS)
        b_id, p_id = bound("id")
        b_ref, p_ref = bound("ref")
        ids = _Stream(src, f"SELECT id FROM ({_memory_ids_sql()}) AS m WHERE id{c} > %s{b_id} ORDER BY id{c}",
                      [kinds, last, *p_id])
        journal = _Stream(src, f"SELECT ref, seq, kind, payload FROM journal WHERE ref{c} > %s{b_ref}"
                               f" AND kind = ANY(%s) ORDER BY ref{c}, seq", [last, *p_ref, kinds])
        heads = _Stream(src, f"SELECT {hcols} FROM heads WHERE id{c} > %s{b_id} ORDER BY id{c}", [last, *p_id])
        versions = _Stream(src, f"SELECT {vcols} FROM versions WHERE id{c} > %s{b_id} ORDER BY id{c}, version",
                           [last, *p_id])
        data_at = VERSION_FIELDS.index("data"), VERSION_FIELDS.index("hash")
        yield from memory_runs(ids, journal, heads, versions, batch, rows,
                               journal_row=lambda r: (r[0], int(r[1]), r[2], bytes(r[3])),
                               version_row=lambda r: _bytes_at(r, data_at))

    def health_counts(self) -> dict:
        from cortexctl.store.pg import schema

        by_type = {int(t): int(n) for t, n in self._con.execute("SELECT type, count(*) FROM heads GROUP BY type")}
        tombstoned = self._con.execute("SELECT count(*) FROM heads WHERE tombstoned_at IS NOT NULL").fetchone()[0]
        versions = self._con.execute("SELECT count(*) FROM versions").fetchone()[0]
        with self._con.cursor() as cur:
            version = schema.version(cur)
        from cortexctl.store.pg import isolation

        return {"by_type": by_type, "tombstoned": int(tombstoned), "versions": int(versions),
                "schema_version": int(version), "isolation": isolation.state(self._con)}


def _micros(columns) -> list[str]:
    """The columns, times as integer microseconds since the epoch (``by_memory``'s ``rows``): whole
    seconds and the microseconds within the second, each exact whatever type ``extract`` gives
    (a double before PostgreSQL 14); an infinite time as the largest or smallest BIGINT, as on
    DuckDB."""
    return [f"CASE WHEN NOT isfinite({c}) THEN (CASE WHEN {c} > 'epoch'::timestamp THEN {INFINITE_MICROS}"
            f" ELSE -{INFINITE_MICROS} END) ELSE extract(epoch FROM date_trunc('second', {c}))::bigint * 1000000"
            f" + extract(microseconds FROM {c})::bigint %% 1000000 END AS {c}" if c in TIME_FIELDS else c
            for c in columns]


def _bytes_at(row: tuple, at: tuple[int, ...]) -> tuple:
    out = list(row)
    for i in at:
        out[i] = bytes(out[i])
    return tuple(out)


def _close(cur) -> None:
    try:
        cur.close()
    except Exception:  # the transaction already ended: the server closed the cursor with it
        pass
