"""The SQL of what attest and compact keep: learned weights, rate-limit buckets, checkpoints."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Sequence

from cortexctl.memory.types import MAX_COUNT
from cortexctl.store.records import id_list

WEIGHT_COLUMNS = ("recency", "importance", "access", "citations", "confidence")  # salience.FACTORS


# -- learned weights -----------------------------------------------------------
def weights_of(con, actor: str) -> tuple[float, ...] | None:
    """``actor``'s learned weights, or None when the actor has never attested."""
    rows = con.execute(
        f"SELECT {', '.join(WEIGHT_COLUMNS)} FROM learned_weights WHERE actor = ?", [actor]
    ).fetchall()
    return tuple(float(w) for w in rows[0]) if rows else None


def set_weights(con, actor: str, weights: Sequence[float], *, seq: int, at: datetime) -> None:
    """Record the weights after the learn-weights entry ``seq`` (one step more)."""
    cols = ", ".join(WEIGHT_COLUMNS)
    con.execute(
        f"INSERT INTO learned_weights (actor, {cols}, steps, seq, updated_at)"
        f" VALUES (?, {', '.join('?' * len(WEIGHT_COLUMNS))}, 1, ?, ?)"
        f" ON CONFLICT (actor) DO UPDATE SET {', '.join(f'{c} = excluded.{c}' for c in WEIGHT_COLUMNS)},"
        " steps = learned_weights.steps + 1, seq = excluded.seq, updated_at = excluded.updated_at",
        [actor, *weights, seq, at],
    )


def all_weights(con) -> dict[str, dict]:
    """Every actor's row: weights, steps, seq and updated_at."""
    rows = con.execute(
        f"SELECT actor, {', '.join(WEIGHT_COLUMNS)}, steps, seq, updated_at FROM learned_weights"
    ).fetchall()
    n = len(WEIGHT_COLUMNS)
    return {r[0]: {"weights": tuple(r[1:1 + n]), "steps": r[1 + n], "seq": r[2 + n], "updated_at": r[3 + n]}
            for r in rows}


# -- salience counters -----------------------------------------------------------
def bump(con, ids: Sequence[str], *, access: int, citations: int, at: datetime) -> None:
    """Add to the access count and citations of ``ids`` (each kept from 0 to MAX_COUNT) and
    mark them used at ``at``."""
    if not ids:
        return
    con.execute(
        f"UPDATE heads SET access_count = least(access_count + {int(access)}, {MAX_COUNT}),"
        f" citations = least(greatest(CAST(citations AS BIGINT) + {int(citations)}, 0), {MAX_COUNT}),"
        " last_used = ?"
        f" WHERE id IN {id_list(ids)}",
        [at],
    )


# -- rate limits ----------------------------------------------------------------
def take_token(con, actor: str, intent: str, now: datetime, *, rate: float, burst: float) -> bool:
    """Take one token from the (actor, intent) bucket; False when it has less than one.

    A bucket refills at ``rate`` tokens a second up to ``burst``; a missing bucket is
    full, and so is one stamped later than ``now`` (the clock went back), so that a
    clock step can never lock an intent out. Buckets that have refilled are deleted,
    so the table holds only recent ones.
    """
    rows = con.execute(
        "SELECT tokens, updated_at FROM rate_buckets WHERE actor = ? AND intent = ?", [actor, intent]
    ).fetchall()
    from cortexctl.store.rules import tokens_now

    tokens = tokens_now(rows[0] if rows else None, now, rate=rate, burst=burst)
    if tokens < 1.0:
        return False
    con.execute(
        "INSERT INTO rate_buckets VALUES (?, ?, ?, ?)"
        " ON CONFLICT (actor, intent) DO UPDATE SET tokens = excluded.tokens, updated_at = excluded.updated_at",
        [actor, intent, tokens - 1.0, now],
    )
    full_since = now - timedelta(seconds=burst / rate)
    con.execute("DELETE FROM rate_buckets WHERE updated_at < ?", [full_since])
    return True


# -- checkpoints -----------------------------------------------------------------
CHECKPOINT_COLUMNS = ("actor", "intent", "step", "created_at", "seq", "record")


def put_checkpoint(con, row: dict) -> None:
    """Store a checkpoint record, replacing an earlier one for the same (actor, intent, step)."""
    con.execute("DELETE FROM checkpoints WHERE actor = ? AND intent = ? AND step = ?",
                [row["actor"], row["intent"], row["step"]])
    con.execute("INSERT INTO checkpoints VALUES (?, ?, ?, ?, ?, ?)", [row[c] for c in CHECKPOINT_COLUMNS])


def checkpoint(con, actor: str, intent: str, step: str) -> dict | None:
    rows = con.execute(
        f"SELECT {', '.join(CHECKPOINT_COLUMNS)} FROM checkpoints WHERE actor = ? AND intent = ? AND step = ?",
        [actor, intent, step],
    ).fetchall()
    return dict(zip(CHECKPOINT_COLUMNS, rows[0])) if rows else None


def all_checkpoints(con) -> dict[tuple[str, str, str], dict]:
    rows = con.execute(f"SELECT {', '.join(CHECKPOINT_COLUMNS)} FROM checkpoints").fetchall()
    return {(r[0], r[1], r[2]): dict(zip(CHECKPOINT_COLUMNS, r)) for r in rows}

