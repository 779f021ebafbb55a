"""Scoped grants: an actor lets a sub-agent see some of its ``scoped`` memories.

``grant(ctx, subagent, types=, tags=, expires=)`` gives the acting actor's grant to
``subagent``; ``revoke(ctx, grant_id)`` takes one back; ``list_grants(ctx)`` lists the
grants the actor gave and those it holds.

**The scope rule.** A live grant from G to S covers a memory when the memory is G's,
its visibility is ``scoped``, its type is one of the grant's types (any type when the
grant names none) and it carries at least one of the grant's tags (any tags, or none,
when the grant names none). A grant is live from its creation until it is revoked or
its ``expires_at`` passes; expiry is read against the engine's clock (``ctx.clock()``)
at every query, so an expired grant stops covering anything without a write. S then
sees, in every command, the memories of G that one of its live grants covers, beside
its own and the public ones; never G's ``private`` ones, which no grant reaches. S
cannot change G's memories (changes stay their owner's: exit 8).

Each grant and revocation is one journal entry (``grant``, ``revoke``; the payload is
the grant row, times as integer microseconds), replayed by ``verify`` against the
``grants`` table. What a sub-agent sees is resolved once per view of the store by
``Context.viewer`` (the live grants it holds, as ``interface.Viewer`` scopes), which
every read that decides visibility passes to the store.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Iterable

from cortexctl.engine.results import iso
from cortexctl.engine.rows import clean_tags, plain
from cortexctl.errors import NotFound, UsageError
from cortexctl.memory import codec
from cortexctl.memory.ids import new_id
from cortexctl.memory.types import MAX_NAME_CHARS, type_code, type_name

if TYPE_CHECKING:
    from cortexctl.engine.context import Context

RESERVED = ("list",)  # ``grant list`` lists: no sub-agent takes that name
_DURATION = re.compile(r"^([0-9]{1,6})([mhdw])$")
_UNITS = {"m": timedelta(minutes=1), "h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1)}
MAX_DURATION = timedelta(days=3650)
MAX_TAGS = 64


@dataclass
class Grant:
    """One grant, and its state at the time it was read (live, expired or revoked)."""

    id: str
    granter: str
    subagent: str
    types: list[str]
    tags: list[str]
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    revoked_by: str | None
    state: str

    def to_json(self) -> dict:
        return {"id": self.id, "granter": self.granter, "subagent": self.subagent, "types": self.types,
                "tags": self.tags, "created_at": iso(self.created_at), "expires_at": iso(self.expires_at),
                "revoked_at": iso(self.revoked_at), "revoked_by": self.revoked_by, "state": self.state}


def grant_of(row: dict, now: datetime) -> Grant:
    state = "revoked" if row["revoked_at"] is not None else \
        "expired" if row["expires_at"] is not None and row["expires_at"] <= now else "live"
    return Grant(id=row["id"], granter=row["granter"], subagent=row["subagent"],
                 types=[type_name(t) for t in row["types"]], tags=list(row["tags"]), created_at=row["created_at"],
                 expires_at=row["expires_at"], revoked_at=row["revoked_at"], revoked_by=row["revoked_by"], state=state)


def parse_duration(text: object) -> timedelta:
    """``30m``, ``2h``, ``7d`` or ``2w``: minutes, hours, days or weeks, up to 3650 days."""
    m = _DURATION.match(text) if isinstance(text, str) else None
    if m is None or int(m.group(1)) == 0:
        raise UsageError(f"expires must be a positive whole number of minutes, hours, days or weeks, "
                         f"like 30m, 2h, 7d or 2w (got {text!r})", field="expires")
    d = int(m.group(1)) * _UNITS[m.group(2)]
    if d > MAX_DURATION:
        raise UsageError(f"expires must be at most {MAX_DURATION.days}d (got {text!r})", field="expires")
    return d


def check_subagent(name: object, granter: str) -> str:
    """A sub-agent's name: an actor name (1-256 printable characters, no space at either end),
    not ``list``, and not the granter."""
    if not isinstance(name, str) or not name.strip() or name != name.strip() \
            or len(name) > MAX_NAME_CHARS or not name.isprintable():
        raise UsageError(f"subagent must be an actor name of 1-{MAX_NAME_CHARS} printable characters "
                         f"with no space at either end (got {name!r})", field="subagent")
    if name in RESERVED:
        raise UsageError(f"subagent cannot be named {name!r} (grant {name} lists grants)", field="subagent")
    if name == granter:
        raise UsageError(f"actor {granter!r} cannot grant to itself: it sees its own memories already",
                         field="subagent")
    return name


def grant(ctx: Context, subagent: str, *, types: Iterable[str] = (), tags: Iterable[str] = (),
          expires: str | None = None) -> Grant:
    """Let ``subagent`` see the acting actor's scoped memories this scope covers (module docstring)."""
    check_subagent(subagent, ctx.actor)
    codes = sorted({type_code(t) for t in types})
    tag_list = clean_tags(tags)
    if len(tag_list) > MAX_TAGS:
        raise UsageError(f"a grant takes at most {MAX_TAGS} tags", field="tags")
    span = parse_duration(expires) if expires is not None else None
    with ctx.transaction() as tx:
        now = ctx.clock()
        row = {"id": new_id(), "granter": ctx.actor, "subagent": subagent, "types": codes, "tags": tag_list,
               "created_at": now, "expires_at": None if span is None else now + span,
               "revoked_at": None, "revoked_by": None}
        tx.insert_grant(row)
        tx.append_journal([("grant", now, ctx.actor, row["id"], grant_payload(row))])
    return grant_of(row, now)


def grant_payload(row: dict) -> bytes:
    keep = ("id", "granter", "subagent", "types", "tags", "created_at", "expires_at")
    return codec.encode(plain({k: row[k] for k in keep}))


def revoke_payload(id_: str, at: datetime, by: str) -> bytes:
    return codec.encode(plain({"id": id_, "revoked_at": at, "revoked_by": by}))


def revoke(ctx: Context, grant_id: str) -> Grant:
    """Take back one of the acting actor's live grants, named by its ID or a unique start of it
    (at least 6 characters); NotFound when the actor gave no live grant of that ID."""
    if not isinstance(grant_id, str) or not grant_id.strip():
        raise UsageError("grant_id must not be empty", field="grant_id")
    want = grant_id.strip().upper()
    with ctx.transaction(existing=True) as tx:
        now = ctx.clock()
        mine = [g for g in tx.grants_of(ctx.actor) if g["granter"] == ctx.actor and g["revoked_at"] is None]
        found = [g for g in mine if g["id"] == want] or \
            ([g for g in mine if g["id"].startswith(want)] if len(want) >= 6 else [])
        if not found:
            raise NotFound(f"actor {ctx.actor!r} has no live grant {grant_id!r}",
                           hint="list grants with: cortexctl grant list")
        if len(found) > 1:
            raise UsageError(f"grant {grant_id!r} is ambiguous: it matches {', '.join(g['id'] for g in found)}",
                             field="grant_id")
        row = found[0]
        tx.revoke_grant(row["id"], at=now, by=ctx.actor)
        tx.append_journal([("revoke", now, ctx.actor, row["id"], revoke_payload(row["id"], now, ctx.actor))])
    return grant_of({**row, "revoked_at": now, "revoked_by": ctx.actor}, now)


def list_grants(ctx: Context) -> list[Grant]:
    """The grants the acting actor gave and those it holds, revoked and expired ones included."""
    with ctx.reading() as tx:
        rows = tx.grants_of(ctx.actor)
    now = ctx.clock()
    return [grant_of(r, now) for r in rows]


__all__ = ["Grant", "grant", "revoke", "list_grants", "parse_duration", "check_subagent",
           "grant_payload", "revoke_payload", "grant_of"]
