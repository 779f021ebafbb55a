"""The SQL of heads, versions, frames and the journal. The only module with SQL for them.

Rows cross this boundary as plain dicts keyed by column name; times are naive
UTC ``datetime`` objects. Bulk inserts register numpy columns and run one
``INSERT ... SELECT`` per table (``executemany`` is ~20x slower).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable, Sequence

from cortexctl.errors import IntegrityError
from cortexctl.store.interface import HEAD_FIELDS, JOURNAL_FIELDS, VERSION_FIELDS, Filters, Scoring, viewer_of

HEAD_COLUMNS = HEAD_FIELDS
VERSION_COLUMNS = VERSION_FIELDS
JOURNAL_COLUMNS = JOURNAL_FIELDS

_SQL_TYPES = {
    "id": "VARCHAR", "type": "UTINYINT", "actor": "VARCHAR", "visibility": "VARCHAR",
    "tags": "VARCHAR[]", "frames": "VARCHAR[]", "importance": "UTINYINT", "session": "VARCHAR",
    "current_version": "UINTEGER", "created_at": "TIMESTAMP", "updated_at": "TIMESTAMP",
    "short": "VARCHAR", "medium": "VARCHAR", "tombstone_reason": "VARCHAR",
    "tombstoned_at": "TIMESTAMP", "tombstoned_by": "VARCHAR", "access_count": "UBIGINT",
    "citations": "UBIGINT", "last_used": "TIMESTAMP", "version": "UINTEGER", "data": "BLOB",
    "hash": "BLOB", "created_by": "VARCHAR", "confidence": "DOUBLE", "provenance": "VARCHAR",
    "forms_override": "BOOLEAN", "seq": "UBIGINT", "kind": "VARCHAR", "ts": "TIMESTAMP",
    "ref": "VARCHAR", "payload": "BLOB", "verb": "VARCHAR",
    "granter": "VARCHAR", "subagent": "VARCHAR", "types": "UTINYINT[]", "expires_at": "TIMESTAMP",
    "revoked_at": "TIMESTAMP", "revoked_by": "VARCHAR",
    "valid_from": "TIMESTAMP", "valid_to": "TIMESTAMP", "supersedes": "VARCHAR", "superseded_by": "VARCHAR",
}


# -- visibility ----------------------------------------------------------------
def visible_sql(who, alias: str = "h") -> tuple[str, list[Any]]:
    """The one visibility rule (``rules.visibility``) as SQL over a heads alias, with its
    parameters; ``who`` is an actor's name or an ``interface.Viewer``."""
    from cortexctl.store import rules
    from cortexctl.store.predicate import to_sql

    return to_sql(rules.visibility(viewer_of(who)), alias)


# -- bulk insert ---------------------------------------------------------------
FEW_ROWS = 8
def _column(values: list[Any], sql_type: str):
    import numpy as np

    arr = np.empty(len(values), dtype=object)
    if sql_type.endswith("[]"):
        for i, v in enumerate(values):  # element-wise, so list values stay lists
            arr[i] = v
    else:
        arr[:] = values
    return arr


def bulk_insert(con, table: str, columns: Sequence[str], rows: Sequence[dict]) -> None:
    if not rows:
        return
    import duckdb

    if len(rows) <= FEW_ROWS:
        # A handful of rows (one write): plain parameters, so numpy is never loaded for it.
        values = ", ".join(f"CAST(? AS {_SQL_TYPES[c]})" for c in columns)
        sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({values})"
        try:
            for r in rows:
                con.execute(sql, [r[c] for c in columns])
        except duckdb.ConstraintException as exc:
            raise IntegrityError(f"{table}: a row with the same key already exists ({str(exc).splitlines()[0]})") from None
        return
    name = f"_src_{table}"
    con.register(name, {c: _column([r[c] for r in rows], _SQL_TYPES[c]) for c in columns})
    select = ", ".join(f"CAST({c} AS {_SQL_TYPES[c]})" for c in columns)
    try:
        con.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT {select} FROM {name}")
    except duckdb.ConstraintException as exc:
        raise IntegrityError(f"{table}: a row with the same key already exists ({str(exc).splitlines()[0]})") from None
    finally:
        try:
            con.unregister(name)
        except Exception:  # an aborted transaction refuses it; the error above is the one to report
            pass


def insert_memories(con, heads: list[dict], versions: list[dict]) -> None:
    bulk_insert(con, "heads", HEAD_COLUMNS, heads)
    bulk_insert(con, "versions", VERSION_COLUMNS, versions)
    frames = [
        {"id": h["id"], "verb": v, "kind": k, "ref": r}
        for h in heads
        for v, k, r in (f.split(":", 2) for f in h["frames"])
    ]
    bulk_insert(con, "frames", ("id", "verb", "kind", "ref"), frames)


def defer_compaction(con) -> None:
    """No row-group merging ("vacuum") at this database's next checkpoint, which is its close."""
    con.execute("SET max_vacuum_tasks = 0")


def insert_version(con, version: dict) -> None:
    bulk_insert(con, "versions", VERSION_COLUMNS, [version])


def update_head(con, id_: str, fields: dict[str, Any]) -> None:
    sets = ", ".join(f"{k} = CAST(? AS {_SQL_TYPES[k]})" for k in fields)
    con.execute(f"UPDATE heads SET {sets} WHERE id = ?", [*fields.values(), id_])
    if "frames" in fields:
        con.execute("DELETE FROM frames WHERE id = ?", [id_])
        rows = [{"id": id_, "verb": v, "kind": k, "ref": r}
                for v, k, r in (f.split(":", 2) for f in fields["frames"])]
        bulk_insert(con, "frames", ("id", "verb", "kind", "ref"), rows)


# -- journal -------------------------------------------------------------------
def next_seq(con) -> int:
    return int(con.execute("SELECT coalesce(max(seq), 0) + 1 FROM journal").fetchall()[0][0])


def append_journal(con, entries: list[tuple[str, datetime, str, str | None, bytes]]) -> int:
    """Append (kind, at, actor, ref, payload) entries; returns the first seq given."""
    first = next_seq(con)
    rows = [
        {"seq": first + i, "kind": k, "ts": at, "actor": actor, "ref": ref, "payload": payload}
        for i, (k, at, actor, ref, payload) in enumerate(entries)
    ]
    bulk_insert(con, "journal", JOURNAL_COLUMNS, rows)
    return first


# -- reads ---------------------------------------------------------------------
def _dicts(cur, columns: Sequence[str]) -> list[dict]:
    return [dict(zip(columns, row)) for row in cur.fetchall()]


def heads_by_prefix(con, prefix: str, actor: str, limit: int = 6) -> list[dict]:
    """Visible heads whose ID starts or ends with ``prefix`` (a full ID matches itself)."""
    cols = ", ".join(f"h.{c}" for c in HEAD_COLUMNS)
    seen, seen_params = visible_sql(actor)
    if len(prefix) == 26:
        cur = con.execute(
            f"SELECT {cols} FROM heads h WHERE h.id = ? AND {seen}", [prefix, *seen_params]
        )
    else:
        cur = con.execute(
            f"SELECT {cols} FROM heads h WHERE (starts_with(h.id, ?) OR ends_with(h.id, ?)) AND {seen}"
            f" ORDER BY h.id LIMIT {int(limit)}",
            [prefix, prefix, *seen_params],
        )
    return _dicts(cur, HEAD_COLUMNS)


def heads_by_ids(con, ids: Sequence[str], actor: str, columns: Sequence[str] = HEAD_COLUMNS) -> list[dict]:
    """The visible heads of these full IDs, with ``columns`` (narrow ones are cheaper: a wide
    column, text or tags, costs a decode of its whole segment)."""
    if not ids:
        return []
    cols = ", ".join(f"h.{c}" for c in columns)
    seen, seen_params = visible_sql(actor)
    cur = con.execute(f"SELECT {cols} FROM heads h WHERE h.id IN {id_list(ids)} AND {seen}", seen_params)
    return _dicts(cur, columns)


def head_exists(con, ids: Iterable[str]) -> set[str]:
    """Which of ``ids`` exist, whoever owns them."""
    ids = list(ids)
    if not ids:
        return set()
    found: set[str] = set()
    for i in range(0, len(ids), 10000):
        chunk = ids[i : i + 10000]
        rows = con.execute("SELECT id FROM heads WHERE list_contains(?, id)", [chunk]).fetchall()
        found.update(r[0] for r in rows)
    return found


def stored_hashes(con, ids: Iterable[str]) -> dict[str, tuple[str, list[bytes]]]:
    """id -> (owner, every version's hash in version order) for those of ``ids`` that exist."""
    ids = list(ids)
    out: dict[str, tuple[str, list[bytes]]] = {}
    for i in range(0, len(ids), 10000):
        chunk = ids[i : i + 10000]
        rows = con.execute(
            "SELECT h.id, any_value(h.actor), list(v.hash ORDER BY v.version) FROM heads h"
            " JOIN versions v ON v.id = h.id WHERE list_contains(?, h.id) AND list_contains(?, v.id)"
            " GROUP BY h.id", [chunk, chunk]).fetchall()
        out.update((r[0], (r[1], [bytes(b) for b in r[2]])) for r in rows)
    return out


def versions_of(con, id_: str, version: int | None = None) -> list[dict]:
    cols = ", ".join(VERSION_COLUMNS)
    if version is None:
        cur = con.execute(f"SELECT {cols} FROM versions WHERE id = ? ORDER BY version", [id_])
    else:
        cur = con.execute(f"SELECT {cols} FROM versions WHERE id = ? AND version = ?", [id_, version])
    return _dicts(cur, VERSION_COLUMNS)


def current_versions(con, ids: list[str]) -> dict[str, dict]:
    """The current version row of each ID."""
    if not ids:
        return {}
    cols = ", ".join(f"v.{c}" for c in VERSION_COLUMNS)
    cur = con.execute(
        f"SELECT {cols} FROM versions v JOIN heads h ON h.id = v.id AND h.current_version = v.version"
        f" WHERE v.id IN {id_list(ids)} AND h.id IN {id_list(ids)}"
    )
    return {r["id"]: r for r in _dicts(cur, VERSION_COLUMNS)}


def current_data(con, current: dict[str, int]) -> dict[str, tuple[int, bytes]]:
    """(type, data) of each ID's version ``current[id]``: two narrow columns, looked up by ID."""
    if not current:
        return {}
    rows = con.execute(f"SELECT id, version, type, data FROM versions WHERE id IN {id_list(current)}").fetchall()
    return {r[0]: (int(r[2]), r[3]) for r in rows if current.get(r[0]) == r[1]}


def filter_sql(filters: Filters) -> tuple[str, list[Any]]:
    """find's filters (``rules.filters``) as one SQL condition over a heads alias ``h``, with its parameters."""
    from cortexctl.store import rules
    from cortexctl.store.predicate import to_sql

    return to_sql(rules.filters(filters))


def count_heads(con, where: str | None = None, params: Sequence[Any] = ()) -> int:
    """Heads passing ``where`` (all heads without it, from the table's metadata)."""
    sql = "SELECT count(*) FROM heads h" + (f" WHERE {where}" if where else "")
    return int(con.execute(sql, list(params)).fetchall()[0][0])


_ID_CHARS = frozenset("0123456789ABCDEFGHJKMNPQRSTVWXYZ")


def id_list(ids: Iterable[str]) -> str:
    """IDs as an SQL literal list, ``('A', 'B')``. DuckDB looks a literal IN list up in the
    primary-key index, where a bound list is scanned; IDs are checked to be Crockford base32."""
    out = []
    for i in ids:
        if len(i) != 26 or not _ID_CHARS.issuperset(i):
            raise IntegrityError(f"not a memory ID: {i!r}")
        out.append(f"'{i}'")
    return "(" + ", ".join(out) + ")"


def passing(con, ids: Sequence[str], where: str, params: Sequence[Any]) -> dict[str, int]:
    """Of ``ids``, those whose head passes ``where``: id -> current version."""
    if not ids:
        return {}
    rows = con.execute(
        f"SELECT h.id, h.current_version FROM heads h WHERE h.id IN {id_list(ids)} AND {where}", list(params)
    ).fetchall()
    return {r[0]: int(r[1]) for r in rows}


def salience_sql(scoring: Scoring) -> tuple[str, list[Any]]:
    """Salience (``rules.salience``; engine/salience.py has the formula and its reasons) as SQL
    over a heads alias ``h``, with its parameters."""
    from cortexctl.store import rules
    from cortexctl.store.predicate import to_sql

    return to_sql(rules.salience(scoring))


def top_salience(con, where: str, params: list[Any], salience: tuple[str, list[Any]],
                 limit: int) -> list[tuple[str, float]]:
    """The ``limit`` heads passing ``where`` with the highest ``salience`` (``salience_sql``): (id, salience)."""
    sal_sql, sal_params = salience
    rows = con.execute(
        f"SELECT h.id, {sal_sql} AS s FROM heads h WHERE {where}"
        f" ORDER BY s DESC, h.updated_at DESC, h.id DESC LIMIT {int(limit)}",
        [*sal_params, *params],
    ).fetchall()
    return [(r[0], float(r[1])) for r in rows]


def candidate_rows(con, ids: Sequence[str], where: str, params: Sequence[Any],
                   salience: tuple[str, list[Any]]) -> dict[str, tuple[int, bool, float]]:
    """For each of these heads, in one lookup: (current version, passes ``where``, salience).
    Only narrow columns: wide ones (text, tags) cost a decode of their whole segment."""
    if not ids:
        return {}
    sal_sql, sal_params = salience
    rows = con.execute(
        f"SELECT h.id, h.current_version, ({where}) AS ok, {sal_sql} AS salience"
        f" FROM heads h WHERE h.id IN {id_list(ids)}",
        [*params, *sal_params],
    ).fetchall()
    return {r[0]: (int(r[1]), bool(r[2]), float(r[3])) for r in rows}


def neighbour_columns(reach: int) -> str:
    """``Tx.session_neighbours``'s window columns (the same SQL on both backends): lag(h.id, 1..reach)
    then lead(h.id, 1..reach) over the window ``w``."""
    return ", ".join([f"lag(h.id, {d}) OVER w" for d in range(1, reach + 1)]
                     + [f"lead(h.id, {d}) OVER w" for d in range(1, reach + 1)])


def neighbour_rows(rows, reach: int) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """(id, the ``neighbour_columns``) rows as ``Tx.session_neighbours`` answers them."""
    return {r[0]: (tuple(i for i in r[1:reach + 1] if i is not None),
                   tuple(i for i in r[reach + 1:] if i is not None)) for r in rows}


def session_neighbours(con, ids: Sequence[str], where: str, params: Sequence[Any], reach: int
                       ) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """``Tx.session_neighbours``: each session of ``ids`` ordered by ID among the heads passing
    ``where``, and the IDs up to ``reach`` places before and after each of ``ids`` in it."""
    if not ids or reach < 1:
        return {}
    listed = id_list(ids)
    rows = con.execute(
        f"""SELECT * FROM (
              SELECT h.id, {neighbour_columns(reach)} FROM heads h
              WHERE h.session IN (SELECT session FROM heads WHERE id IN {listed} AND session IS NOT NULL)
                AND ({where})
              WINDOW w AS (PARTITION BY h.session ORDER BY h.id)) WHERE id IN {listed}""",
        list(params),
    ).fetchall()
    return neighbour_rows(rows, reach)


def result_rows(con, ids: Sequence[str], form: str) -> dict[str, dict]:
    """What a find result shows of these heads; ``text`` is the ``form`` column (short or medium)."""
    if not ids:
        return {}
    if form not in ("short", "medium"):
        raise ValueError(form)
    cols = ("id", "type", "current_version", "tags", "frames", "importance", "visibility", "actor",
            "updated_at", "tombstoned_at", "valid_from", "valid_to", "supersedes", "superseded_by")
    rows = con.execute(
        f"SELECT {', '.join('h.' + c for c in cols)}, h.{form} FROM heads h WHERE h.id IN {id_list(ids)}"
    ).fetchall()
    return {r[0]: dict(zip((*cols, "text"), r)) for r in rows}


def iter_visible(con, actor: str, batch: int = 2000):
    """Every visible head with all its versions, in ID order, batch by batch."""
    cols = ", ".join(f"h.{c}" for c in HEAD_COLUMNS)
    seen, seen_params = visible_sql(actor)
    last = ""
    while True:
        heads = _dicts(
            con.execute(
                f"SELECT {cols} FROM heads h WHERE h.id > ? AND {seen} ORDER BY h.id LIMIT {batch}",
                [last, *seen_params],
            ),
            HEAD_COLUMNS,
        )
        if not heads:
            return
        ids = [h["id"] for h in heads]
        vcols = ", ".join(VERSION_COLUMNS)
        versions: dict[str, list[dict]] = {i: [] for i in ids}
        for v in _dicts(
            con.execute(
                f"SELECT {vcols} FROM versions WHERE id BETWEEN ? AND ? ORDER BY id, version",
                [ids[0], ids[-1]],
            ),
            VERSION_COLUMNS,
        ):
            if v["id"] in versions:
                versions[v["id"]].append(v)
        for h in heads:
            yield h, versions[h["id"]]
        last = ids[-1]


def health_counts(con) -> dict:
    """Memories by type code, tombstoned memories, and versions: healthcheck's cheap counts."""
    by_type = {int(t): int(n) for t, n in con.execute("SELECT type, count(*) FROM heads GROUP BY type").fetchall()}
    tombstoned = con.execute("SELECT count(*) FROM heads WHERE tombstoned_at IS NOT NULL").fetchone()[0]
    versions = con.execute("SELECT count(*) FROM versions").fetchone()[0]
    schema = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    # whoever opens the file reads all of it: the engine's rule is the only one
    return {"by_type": by_type, "tombstoned": int(tombstoned), "versions": int(versions), "schema_version": int(schema),
            "isolation": "engine"}


def ref_counts(con, parts: Sequence[str]) -> dict[str, int]:
    """How many IDs (of any actor) start or end with each of ``parts``, which share one length."""
    if not parts:
        return {}
    n = len(parts[0])
    if any(len(p) != n or not _ID_CHARS.issuperset(p) for p in parts):
        raise IntegrityError("not parts of memory IDs")
    listed = "(" + ", ".join(f"'{p}'" for p in parts) + ")"
    # UNION, not UNION ALL: an ID that starts and ends with the same part is one ID
    rows = con.execute(
        f"SELECT s, count(*) FROM (SELECT id, right(id, {n}) AS s FROM heads WHERE right(id, {n}) IN {listed}"
        f" UNION SELECT id, left(id, {n}) FROM heads WHERE left(id, {n}) IN {listed}) GROUP BY s"
    ).fetchall()
    return {s: int(c) for s, c in rows}


def sessions(con, actor: str, turn_tag: str, summary_tag: str) -> list[dict]:
    """Each session with a live memory ``actor`` can see: turns, first and last activity, summary ID."""
    seen, seen_params = visible_sql(actor)
    rows = con.execute(
        f"""SELECT h.session,
                   count(*) FILTER (WHERE list_contains(h.tags, ?)),
                   min(h.created_at), max(h.updated_at),
                   max(h.id) FILTER (WHERE list_contains(h.tags, ?))
            FROM heads h
            WHERE h.session IS NOT NULL AND h.tombstoned_at IS NULL AND {seen}
            GROUP BY h.session ORDER BY max(h.updated_at) DESC, h.session""",
        [turn_tag, summary_tag, *seen_params],
    ).fetchall()
    return [{"session": r[0], "turns": int(r[1]), "first": r[2], "last": r[3], "summary": r[4]} for r in rows]
