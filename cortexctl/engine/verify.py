"""verify: prove the store is sound, reporting every problem found.

Checks, over every actor's memories:

- every version's hash recomputes from its type byte and data, and its data decodes;
- every head matches its latest version (number, type, forms), versions run 1..N
  with no gaps, and no version lacks a head;
- the frame index agrees with the heads' frames;
- the journal's sequence numbers run 1..N with no gaps, every memory has its
  write entry, and no memory has more update entries than versions.
"""

from __future__ import annotations

from cortexctl.engine.models import Problem, VerifyReport
from cortexctl.errors import NotFound
from cortexctl.memory import codec
from cortexctl.memory.ids import memory_uri
from cortexctl.store.db import NoStore

MAX_PER_CHECK = 100  # problems listed per check before summarizing


def verify(cx) -> VerifyReport:
    try:
        with cx.store.read() as con:
            return _verify(con, str(cx.store.path))
    except NoStore:
        raise NotFound(f"no store at {cx.store.path}") from None


def _add(problems: list[Problem], counts: dict[str, int], check: str, message: str, ref: str | None = None) -> None:
    counts[check] = counts.get(check, 0) + 1
    if counts[check] <= MAX_PER_CHECK:
        problems.append(Problem(check, message, ref))


def _verify(con, store: str) -> VerifyReport:
    problems: list[Problem] = []
    counts: dict[str, int] = {}

    # 1. version hashes
    cur = con.execute("SELECT id, version, type, data, hash FROM versions ORDER BY id, version")
    n_versions = 0
    while True:
        rows = cur.fetchmany(10000)
        if not rows:
            break
        for id_, version, type_code, data, stored in rows:
            n_versions += 1
            ref = memory_uri(id_, version)
            if codec.version_hash(type_code, data) != stored:
                _add(problems, counts, "hash", "hash does not match the stored data (corrupt or tampered)", ref)
                continue
            try:
                codec.decode(data)
            except Exception:
                _add(problems, counts, "hash", "data does not decode", ref)

    # 2. heads against their versions
    for id_, current, n, top, why in con.execute(
        """
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
    ).fetchall():
        _add(problems, counts, "heads", f"{why} (head says {current}, versions {n}, latest {top})", memory_uri(id_))
    for (id_,) in con.execute(
        "SELECT DISTINCT v.id FROM versions v ANTI JOIN heads h ON h.id = v.id"
    ).fetchall():
        _add(problems, counts, "heads", "versions without a head", memory_uri(id_))

    # 3. frame index
    for id_, frame, side in con.execute(
        """
        WITH want AS (SELECT id, unnest(frames) AS frame FROM heads),
             have AS (SELECT id, verb || ':' || kind || ':' || ref AS frame FROM frames)
        SELECT id, frame, 'missing from the frame index' FROM (SELECT * FROM want EXCEPT SELECT * FROM have)
        UNION ALL
        SELECT id, frame, 'in the frame index but not on the head' FROM (SELECT * FROM have EXCEPT SELECT * FROM want)
        """
    ).fetchall():
        _add(problems, counts, "frames", f"frame {frame} {side}", memory_uri(id_))

    # 4. journal
    n_journal, lo, hi = con.execute("SELECT count(*), min(seq), max(seq) FROM journal").fetchall()[0]
    if n_journal:
        if lo != 1:
            _add(problems, counts, "journal", f"first sequence number is {lo}, not 1")
        for seq, nxt in con.execute(
            "SELECT seq, nxt FROM (SELECT seq, lead(seq) OVER (ORDER BY seq) AS nxt FROM journal)"
            " WHERE nxt IS NOT NULL AND nxt <> seq + 1 ORDER BY seq"
        ).fetchall():
            _add(problems, counts, "journal", f"gap after entry {seq}: next is {nxt}")
    for (id_,) in con.execute(
        "SELECT h.id FROM heads h ANTI JOIN (SELECT ref FROM journal WHERE kind = 'write') j ON j.ref = h.id"
    ).fetchall():
        _add(problems, counts, "journal", "memory has no write entry in the journal", memory_uri(id_))
    for id_, updates, current in con.execute(
        """
        SELECT h.id, count(*), h.current_version FROM heads h
        JOIN journal j ON j.ref = h.id AND j.kind = 'update'
        GROUP BY h.id, h.current_version HAVING count(*) > h.current_version - 1
        """
    ).fetchall():
        _add(problems, counts, "journal", f"{updates} update entries for {current} versions", memory_uri(id_))

    for check, n in counts.items():
        if n > MAX_PER_CHECK:
            problems.append(Problem(check, f"... and {n - MAX_PER_CHECK} more problems of this kind"))

    n_heads = con.execute("SELECT count(*) FROM heads").fetchall()[0][0]
    return VerifyReport(store=store, memories=n_heads, versions=n_versions, journal=n_journal, problems=problems)
