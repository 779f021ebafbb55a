"""The SQL of scoped grants (the ``grants`` table). The only module with SQL for it.

A grant lets a sub-agent see the ``scoped`` memories of its granter that its scope
covers (``interface.Scope``). Revoked grants keep their row, with the revocation's
time and actor, so that the table is what the journal's grant and revoke entries say.
"""

from __future__ import annotations

from datetime import datetime

from cortexctl.store.interface import GRANT_FIELDS

GRANT_COLUMNS = GRANT_FIELDS
_COLS = ", ".join(GRANT_COLUMNS)


def _rows(cur) -> list[dict]:
    out = []
    for r in cur.fetchall():
        row = dict(zip(GRANT_COLUMNS, r))
        row["types"] = [int(t) for t in row["types"]]
        row["tags"] = [str(t) for t in row["tags"]]
        out.append(row)
    return out


def live_grants(con, subagent: str, now: datetime) -> list[dict]:
    """The grants ``subagent`` holds, neither revoked nor expired at ``now``."""
    return _rows(con.execute(
        f"SELECT {_COLS} FROM grants WHERE subagent = ? AND revoked_at IS NULL"
        " AND (expires_at IS NULL OR expires_at > CAST(? AS TIMESTAMP)) ORDER BY id", [subagent, now]))


def grants_of(con, actor: str) -> list[dict]:
    """Every grant ``actor`` gave or holds, in ID order."""
    return _rows(con.execute(f"SELECT {_COLS} FROM grants WHERE granter = ? OR subagent = ? ORDER BY id",
                             [actor, actor]))


def all_grants(con) -> dict[str, dict]:
    return {r["id"]: r for r in _rows(con.execute(f"SELECT {_COLS} FROM grants ORDER BY id"))}


def insert_grant(con, row: dict) -> None:
    import duckdb

    from cortexctl.errors import IntegrityError

    try:
        con.execute(f"INSERT INTO grants ({_COLS}) VALUES (?, ?, ?, CAST(? AS UTINYINT[]), CAST(? AS VARCHAR[]),"
                    " ?, ?, ?, ?)", [row[c] if c not in ("types", "tags") else list(row[c]) for c in GRANT_COLUMNS])
    except duckdb.ConstraintException:
        raise IntegrityError(f"grants: a grant with ID {row['id']} already exists") from None


def revoke_grant(con, id_: str, *, at: datetime, by: str) -> None:
    con.execute("UPDATE grants SET revoked_at = ?, revoked_by = ? WHERE id = ?", [at, by, id_])
