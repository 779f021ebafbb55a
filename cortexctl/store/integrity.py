"""The SQL behind verify: raw rows for the engine to check. Reads only."""

from __future__ import annotations

import bisect
import operator
from typing import Iterator

from cortexctl.store.interface import INFINITE_MICROS, TIME_FIELDS
from cortexctl.store.records import HEAD_COLUMNS, VERSION_COLUMNS
from cortexctl.store.predicate import id_range


# DuckDB: true for a version row (type, data, hash) whose hash is not SHA-256 of the domain (the one
# parameter), its type code as one byte and its data. A row missing any of them, or whose type code
# is not one byte, matches nothing. The store's rows (verify) and a bundle's member (its check) alike.
HASH_DIFFERS = ("(data IS NULL OR hash IS NULL OR hash IS DISTINCT FROM CASE WHEN type BETWEEN 0 AND 255 THEN"
                " unhex(sha256(?::BLOB || from_hex(printf('%02x', type)) || data)) END)")


def hash_mismatches(con, domain: bytes, after: str | None = None,
                    upto: str | None = None) -> tuple[int, list[tuple[str, int]]]:
    """(versions counted, (id, version) of each whose hash is not SHA-256 of ``domain``, its type
    byte and its data, in order), over the IDs in ``(after, upto]``: recomputed by DuckDB, column by
    column on its threads, instead of each version's bytes fetched into Python and hashed there."""
    where, params = id_range("id", after, upto)
    (n,), = con.execute(f"SELECT count(*) FROM versions WHERE {where}", params).fetchall()
    bad = con.execute(f"SELECT id, version FROM versions WHERE {where} AND {HASH_DIFFERS} ORDER BY id, version",
                      [*params, domain]).fetchall()
    return int(n), [(r[0], int(r[1])) for r in bad]


# Heads that disagree with their versions: standard SQL, the same on DuckDB and PostgreSQL.
HEAD_VERSION_MISMATCHES = """
    SELECT h.id, h.current_version, count(v.version), max(v.version),
           CASE WHEN count(v.version) = 0 THEN 'no versions'
                WHEN max(v.version) <> h.current_version THEN 'current version is not the latest'
                WHEN count(v.version) <> max(v.version) THEN 'versions are not numbered 1..N'
                ELSE 'type or forms differ from the latest version' END
    FROM heads h LEFT JOIN versions v ON v.id = h.id
    GROUP BY h.id, h.current_version, h.type, h.short, h.medium
    HAVING count(v.version) = 0
        OR max(v.version) <> h.current_version
        OR count(v.version) <> max(v.version)
        OR bool_or(v.version = h.current_version
                   AND (v.type <> h.type OR v.short <> h.short OR v.medium <> h.medium))
"""


def head_version_mismatches(con) -> list[tuple]:
    """(id, current_version, count, latest, why) for heads that disagree with their versions."""
    return con.execute(HEAD_VERSION_MISMATCHES).fetchall()


def orphan_versions(con) -> list[str]:
    return [r[0] for r in con.execute("SELECT DISTINCT v.id FROM versions v ANTI JOIN heads h ON h.id = v.id").fetchall()]


def frame_mismatches(con) -> list[tuple]:
    """(id, frame, side) where the frame index and the heads' frames differ, duplicates included."""
    return con.execute(
        """
        WITH want AS (SELECT id, unnest(frames) AS frame FROM heads),
             have AS (SELECT id, verb || ':' || kind || ':' || ref AS frame FROM frames)
        SELECT id, frame, 'missing from the frame index' FROM (SELECT * FROM want EXCEPT ALL SELECT * FROM have)
        UNION ALL
        SELECT id, frame, 'in the frame index but not on the head' FROM (SELECT * FROM have EXCEPT ALL SELECT * FROM want)
        """
    ).fetchall()


def valid_links(con) -> list[tuple]:
    return [tuple(r) for r in con.execute(
        "SELECT id, valid_from, valid_to, supersedes, superseded_by FROM heads WHERE valid_from IS NOT NULL"
        " OR valid_to IS NOT NULL OR supersedes IS NOT NULL OR superseded_by IS NOT NULL ORDER BY id").fetchall()]


def journal_bounds(con) -> tuple[int, int | None, int | None]:
    return tuple(con.execute("SELECT count(*), min(seq), max(seq) FROM journal").fetchall()[0])


def journal_gaps(con) -> list[tuple[int, int]]:
    return con.execute(
        "SELECT seq, nxt FROM (SELECT seq, lead(seq) OVER (ORDER BY seq) AS nxt FROM journal)"
        " WHERE nxt IS NOT NULL AND nxt <> seq + 1 ORDER BY seq"
    ).fetchall()


def unknown_kinds(con, known) -> list[tuple[int, str]]:
    """(seq, kind) of the entries whose kind is not one of ``known``."""
    return con.execute(
        "SELECT seq, kind FROM journal WHERE NOT list_contains(?, kind) ORDER BY seq", [list(known)]
    ).fetchall()


MEMORY_KINDS = ("write", "update", "update_head", "tombstone", "unforget")
_MEMORY_KINDS_SQL = "kind IN ('write', 'update', 'update_head', 'tombstone', 'unforget')"


def entries_of(con, kinds: tuple[str, ...], batch: int = 10000) -> Iterator[tuple]:
    """(seq, kind, ts, actor, ref, payload) of the entries of these kinds, in sequence order."""
    cur = con.execute(
        "SELECT seq, kind, ts, actor, ref, payload FROM journal WHERE list_contains(?, kind) ORDER BY seq",
        [list(kinds)],
    )
    while True:
        rows = cur.fetchmany(batch)
        if not rows:
            return
        yield from rows


LOOKUP = 2048  # journal entries fetched by key in one query


def seq_at(con, at) -> int:
    """The highest seq of an entry stamped at or before ``at`` (0 when none)."""
    return int(con.execute("SELECT coalesce(max(seq), 0) FROM journal WHERE ts <= ?", [at]).fetchall()[0][0])


def journal_window(con, after: int, upto: int | None, kinds: tuple[str, ...], refs, batch: int,
                   payloads: bool = True) -> Iterator[tuple]:
    """(seq, kind, ts, actor, ref, payload) of the entries in ``(after, upto]`` of ``kinds`` (any when
    empty) naming one of ``refs`` (any when None), in sequence order."""
    payload = "payload" if payloads else "''::BLOB"
    where, params = ["seq > ?"], [int(after)]
    if upto is not None:
        where.append("seq <= ?")
        params.append(int(upto))
    if kinds:
        where.append("list_contains(?, kind)")
        params.append(list(kinds))
    if refs is not None:
        # Two steps: the entries from the narrow columns (a semi-join: thousands of refs stay cheap),
        # then their payloads alone by key, as literal numbers, which DuckDB looks up in the primary
        # key's index instead of decompressing the whole payload column (3x at 100k; fetching the
        # narrow columns again by key cost a fifth more).
        where.append("ref IN (SELECT unnest(?::VARCHAR[]))")
        params.append(list(refs))
        rows = con.execute(f"SELECT seq, kind, ts, actor, ref FROM journal WHERE {' AND '.join(where)} ORDER BY seq",
                           params).fetchall()
        if not payloads:
            yield from (r + (b"",) for r in rows)
            return
        for i in range(0, len(rows), LOOKUP):
            part = rows[i:i + LOOKUP]
            listed = ",".join(str(int(r[0])) for r in part)
            got = dict(con.execute(f"SELECT seq, payload FROM journal WHERE seq IN ({listed})").fetchall())
            yield from (r + (got[r[0]],) for r in part)
        return
    cur = con.execute(f"SELECT seq, kind, ts, actor, ref, {payload} FROM journal WHERE {' AND '.join(where)}"
                      " ORDER BY seq", params)
    while True:
        rows = cur.fetchmany(batch)
        if not rows:
            return
        yield from rows


def unpaired_attests(con) -> list[tuple[int, str, str | None]]:
    """(seq, kind, neighbour kind) of attest entries not followed by a learn_weights entry
    and of learn_weights entries not preceded by an attest entry."""
    return con.execute(
        """
        SELECT seq, kind, neighbour FROM (
            SELECT seq, kind,
                   CASE WHEN kind = 'attest' THEN lead(kind) OVER w ELSE lag(kind) OVER w END AS neighbour,
                   CASE WHEN kind = 'attest' THEN lead(seq) OVER w ELSE lag(seq) OVER w END AS nseq
            FROM journal WINDOW w AS (ORDER BY seq))
        WHERE (kind = 'attest' AND (neighbour IS DISTINCT FROM 'learn_weights' OR nseq <> seq + 1))
           OR (kind = 'learn_weights' AND (neighbour IS DISTINCT FROM 'attest' OR nseq <> seq - 1))
        ORDER BY seq
        """
    ).fetchall()


def count_heads(con) -> int:
    return con.execute("SELECT count(*) FROM heads").fetchall()[0][0]


_MEMORY_IDS_SQL = f"SELECT ref AS id FROM journal WHERE {_MEMORY_KINDS_SQL} UNION SELECT id FROM heads"


def memory_batch_ends(con, batch: int = 5000) -> list[str]:
    """The last ID of each full run of ``batch`` memory IDs (those ``by_memory`` yields), in order."""
    return [r[0] for r in con.execute(
        f"SELECT id FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM ({_MEMORY_IDS_SQL}))"
        f" WHERE n % {int(batch)} = 0 ORDER BY id").fetchall()]


def by_memory(con, batch: int = 5000, after: str | None = None, upto: str | None = None,
              rows: bool = False) -> Iterator[tuple[list[tuple], list, list]]:
    """Journal entries (ref, seq, kind, payload), heads and versions, for runs of memory IDs in order.

    IDs come from the heads and from the journal alike, so a head with no journal
    entry and a journal entry with no head both show up. ``rows``: heads and versions as
    tuples in column order rather than dicts, their times as integer microseconds since the
    epoch (as journal payloads hold them). ``after`` and ``upto``
    bound the IDs to ``(after, upto]``; runs start right after ``after``, so a run
    boundary of ``memory_batch_ends`` splits the whole into the very same runs.

    Each table is read once, in ID order, by a query of its own (a cursor each), and cut
    into runs here: a query per run would scan the whole table for every run.
    """
    last = "" if after is None else after
    hcols = ", ".join(_micros(HEAD_COLUMNS) if rows else HEAD_COLUMNS)
    vcols = ", ".join(_micros(VERSION_COLUMNS) if rows else VERSION_COLUMNS)
    bound, bound_params = ("", []) if upto is None else (" AND {col} <= ?", [upto])
    ids = _Stream(con, f"SELECT id FROM ({_MEMORY_IDS_SQL}) WHERE id > ?{bound.format(col='id')} ORDER BY id",
                  [last, *bound_params])
    journal = _Stream(con, f"SELECT ref, seq, kind, payload FROM journal WHERE ref > ?{bound.format(col='ref')}"
                           f" AND {_MEMORY_KINDS_SQL} ORDER BY ref, seq", [last, *bound_params])
    heads = _Stream(con, f"SELECT {hcols} FROM heads WHERE id > ?{bound.format(col='id')} ORDER BY id",
                    [last, *bound_params])
    versions = _Stream(con, f"SELECT {vcols} FROM versions WHERE id > ?{bound.format(col='id')} ORDER BY id, version",
                       [last, *bound_params])
    yield from memory_runs(ids, journal, heads, versions, batch, rows)


def _micros(columns) -> list[str]:
    """The columns, times as integer microseconds since the epoch (``by_memory``'s ``rows``); an
    infinite time (which no journal entry can hold, and ``epoch_us`` would make NULL) as the
    largest or smallest BIGINT, so that it differs from the journal's."""
    return [f"CASE WHEN isinf({c}) THEN (CASE WHEN {c} > TIMESTAMP 'epoch' THEN {INFINITE_MICROS}"
            f" ELSE -{INFINITE_MICROS} END) ELSE epoch_us({c}) END AS {c}" if c in TIME_FIELDS else c
            for c in columns]


def memory_runs(ids, journal, heads, versions, batch: int, rows: bool, *, journal_row=None, version_row=None):
    """``by_memory``'s walk over four ``_Stream``s in memory-ID order (IDs; journal entries, heads and
    versions keyed by ID): runs of ``batch`` IDs, each (entries, heads, versions), heads and versions
    as dicts unless ``rows``; ``journal_row`` / ``version_row`` turn a backend's row into the plain
    values (bytes, ints). Closes the streams."""
    try:
        while True:
            run = [r[0] for r in ids.take_n(batch)]
            if not run:
                return
            lo, hi = run[0], run[-1]
            got_j = journal.between(lo, hi)
            got_h = heads.between(lo, hi)
            got_v = versions.between(lo, hi)
            if journal_row is not None:
                got_j = [journal_row(r) for r in got_j]
            if version_row is not None:
                got_v = [version_row(r) for r in got_v]
            if not rows:
                got_h = [dict(zip(HEAD_COLUMNS, r)) for r in got_h]
                got_v = [dict(zip(VERSION_COLUMNS, r)) for r in got_v]
            yield got_j, got_h, got_v
    finally:
        for stream in (ids, journal, heads, versions):
            stream.close()


_KEY = operator.itemgetter(0)


class _Stream:
    """The rows of one query, in key (first column) order, taken a run at a time."""

    def __init__(self, con, sql: str, params: list, chunk: int = 2000) -> None:
        self.cur = con.cursor()
        self.cur.execute(sql, params)
        self.chunk = chunk
        self.rows: list[tuple] = []
        self.at = 0
        self.done = False

    def _peek(self) -> tuple | None:
        if self.at >= len(self.rows):
            if self.done:
                return None
            self.rows, self.at = self.cur.fetchmany(self.chunk), 0
            if not self.rows:
                self.done = True
                return None
        return self.rows[self.at]

    def take_n(self, n: int) -> list[tuple]:
        out: list[tuple] = []
        while len(out) < n and self._peek() is not None:
            k = min(n - len(out), len(self.rows) - self.at)
            out.extend(self.rows[self.at:self.at + k])
            self.at += k
        return out

    def between(self, lo: str, hi: str) -> list[tuple]:
        """The rows whose key is in [lo, hi]; rows before lo are passed over. The rows come in
        key order, so each fetched chunk is cut by bisection, not looked at row by row."""
        out: list[tuple] = []
        while self._peek() is not None:
            rows, at = self.rows, self.at
            end = bisect.bisect_right(rows, hi, at, len(rows), key=_KEY)
            start = bisect.bisect_left(rows, lo, at, end, key=_KEY)
            out.extend(rows[start:end])
            self.at = end
            if end < len(rows):
                break
        return out

    def close(self) -> None:
        try:
            self.cur.close()
        except Exception:  # closing a finished cursor twice
            pass


def read_every_block(con) -> None:
    """Read every column of every table once, so that DuckDB checks the checksum of every block
    the tables use; a damaged block raises (``db._reraise_duckdb`` names the file). For
    healthcheck: counts alone are answered from metadata and touch no data block. Hashing is the
    cheapest aggregate that makes DuckDB read a column's data (``count(col)`` does not): about
    1.4 s at 100,000 memories, most of it the vectors and the journal."""
    tables = [r[0] for r in con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' "
        "AND table_type = 'BASE TABLE' ORDER BY table_name").fetchall()]
    for table in tables:
        cols = [r[0] for r in con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = 'main' AND table_name = ? "
            "ORDER BY ordinal_position", [table]).fetchall()]
        if cols:
            sums = ", ".join(f'sum(hash("{c}"))' for c in cols)
            con.execute(f'SELECT {sums} FROM "{table}"').fetchall()
