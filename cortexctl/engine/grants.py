"""Scoped grants: an actor lets a sub-agent see some of its ``scoped`` memories.

``grant(ctx, subagent, types=, tags=, expires=)`` gives the acting actor's grant to
``subagent``; ``revoke(ctx, target, types=, tags=)`` takes one back, by its ID or by
its sub-agent and scope; ``list_grants(ctx)``
lists the grants the actor gave and those it holds.

**Grants are a set.** A grant's scope is its sub-agent, its set of types and its set of
tags. Granting a scope the granter already grants live makes no second grant: the answer
is the live one (``Grant.created`` False), and nothing is written. The look and the insert
are one writing transaction, so two identical grants racing still make one. Either side
may end a grant: its granter, or the sub-agent it was given to (``revoked_by`` says which).

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
    created: bool | None = None  # grant's answer: made now (True), or the live grant of that scope (False)

    def to_json(self) -> dict:
        doc = {"id": self.id, "granter": self.granter, "subagent": self.subagent, "types": self.types,
               "tags": self.tags, "created_at": iso(self.created_at), "expires_at": iso(self.expires_at),
               "revoked_at": iso(self.revoked_at), "revoked_by": self.revoked_by, "state": self.state}
        if self.created is not None:
            doc["created"] = self.created
        return doc


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


def _scope(types: Iterable[str], tags: Iterable[str]) -> tuple[list[int], list[str]]:
    """A grant's types (codes) and tags, checked, each a sorted set."""
    codes = sorted({type_code(t) for t in types})
    tag_list = clean_tags(tags)
    if len(tag_list) > MAX_TAGS:
        raise UsageError(f"a grant takes at most {MAX_TAGS} tags", field="tags")
    return codes, tag_list


def _live(row: dict, now: datetime) -> bool:
    return row["revoked_at"] is None and (row["expires_at"] is None or row["expires_at"] > now)


def _covers_exactly(row: dict, subagent: str, codes: list[int], tags: list[str]) -> bool:
    return row["subagent"] == subagent and sorted(set(row["types"])) == codes and sorted(set(row["tags"])) == tags


def grant(ctx: Context, subagent: str, *, types: Iterable[str] = (), tags: Iterable[str] = (),
          expires: str | None = None) -> Grant:
    """Let ``subagent`` see the acting actor's scoped memories this scope covers (module docstring):
    a new grant (``created`` True), or the live one that already grants this scope (``created``
    False; its expiry stands, nothing is written)."""
    check_subagent(subagent, ctx.actor)
    codes, tag_list = _scope(types, tags)
    span = parse_duration(expires) if expires is not None else None
    with ctx.transaction() as tx:
        now = ctx.clock()
        for g in tx.grants_of(ctx.actor):  # in the writing transaction: a racing twin waits for it
            if g["granter"] == ctx.actor and _live(g, now) and _covers_exactly(g, subagent, codes, tag_list):
                existing = grant_of(g, now)
                existing.created = False
                return existing
        row = {"id": new_id(), "granter": ctx.actor, "subagent": subagent, "types": codes, "tags": tag_list,
               "created_at": now, "expires_at": None if span is None else now + span,
               "revoked_at": None, "revoked_by": None}
        tx.insert_grant(row)
        tx.append_journal([("grant", now, ctx.actor, row["id"], grant_payload(row))])
    made = grant_of(row, now)
    made.created = True
    return made


def grant_payload(row: dict) -> bytes:
    keep = ("id", "granter", "subagent", "types", "tags", "created_at", "expires_at")
    return codec.encode(plain({k: row[k] for k in keep}))


def revoke_payload(id_: str, at: datetime, by: str) -> bytes:
    return codec.encode(plain({"id": id_, "revoked_at": at, "revoked_by": by}))


def revoke(ctx: Context, target: str, *, types: Iterable[str] = (), tags: Iterable[str] = ()) -> Grant:
    """Take back one live grant the acting actor gave or holds. Without ``types`` and ``tags``,
    ``target`` is the grant's ID or a unique start of it (at least 6 characters), else the
    sub-agent of a grant of any type and tag; with them, ``target`` is the sub-agent and the grant
    is the one of exactly that scope (``_by_scope``). NotFound when there is none."""
    if not isinstance(target, str) or not target.strip():
        raise UsageError("target must not be empty: a grant's ID or a sub-agent", field="target")
    codes, tag_list = _scope(types, tags)
    with ctx.transaction(existing=True) as tx:
        now = ctx.clock()
        live = [g for g in tx.grants_of(ctx.actor) if g["revoked_at"] is None]
        found = [] if codes or tag_list else _by_id(live, target)
        if not found:
            found = _by_scope(ctx.actor, live, target, codes, tag_list)
        if not found:
            scope = ("of type " + ",".join(type_name(c) for c in codes) if codes else "of any type") + \
                (" tagged " + ",".join(tag_list) if tag_list else " and any tag")
            what = f"to {target!r} {scope}" if codes or tag_list else \
                f"{target!r} (a grant's ID, or a sub-agent's grant {scope})"
            raise NotFound(f"actor {ctx.actor!r} has no live grant {what}",
                           hint="list grants with: cortexctl grant list")
        if len(found) > 1:
            raise UsageError(f"{target!r} names {len(found)} live grants: revoke one by its ID "
                             f"({', '.join(g['id'] for g in found)})", field="target")
        return _revoke_row(ctx, tx, found[0], now)


def _by_id(live: list[dict], target: str) -> list[dict]:
    want = target.strip().upper()
    return [g for g in live if g["id"] == want] or \
        ([g for g in live if g["id"].startswith(want)] if len(want) >= 6 else [])


def _by_scope(actor: str, live: list[dict], subagent: str, codes: list[int], tags: list[str]) -> list[dict]:
    """The live grants of exactly this scope: those ``actor`` gave ``subagent``, or, when
    ``subagent`` is ``actor`` itself, those it holds (one per granter)."""
    return [g for g in live if (g["granter"] == actor or subagent == actor)
            and _covers_exactly(g, subagent, codes, tags)]


def _revoke_row(ctx: Context, tx, row: dict, now: datetime) -> Grant:
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
