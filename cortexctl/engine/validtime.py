"""Valid time and supersedes: when a memory holds in the world, and which memory replaced it.

Valid time is two head fields, ``valid_from`` and ``valid_to`` (naive UTC; None is an open end),
set by ``write``/``update`` with ``--set valid_from=T --set valid_to=T`` (head fields, taken out of
the data fields: ``split_sets``) or by superseding. A supersede links two memories of one actor both
ways (the new one's ``supersedes``, the old one's ``superseded_by``) and ends the old one's interval
where the new one's begins (its ``valid_to`` = the new ``valid_from``, now by default); nothing is
deleted. Every change is journaled as an ``update_head`` of the old memory (and the new memory's
write or ``update_head``), in the transaction that makes it.

A link is refused (nothing written) when it would make the chain wrong: a memory superseding
itself, a forgotten memory on either side, an old memory already superseded by another one, a
cycle, or an old interval that would end before it begins.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable

from cortexctl.engine.context import Context
from cortexctl.engine.refs import check_owner, resolve
from cortexctl.engine.results import ChainLink, SupersedeResult, iso
from cortexctl.engine.rows import plain, to_naive
from cortexctl.errors import InvalidData, Tombstoned, UsageError
from cortexctl.memory import codec
from cortexctl.memory.ids import parse_ref
from cortexctl.store.interface import Tx

TIME_FIELDS = ("valid_from", "valid_to")  # the --set names that are head fields, not data
MAX_CHAIN = 100_000  # links followed looking for a cycle before the chain counts as one


def parse_valid_time(field: str, raw: Any) -> datetime:
    """A valid time (RFC 3339, or a date: midnight UTC) as the naive UTC datetime the store keeps."""
    from cortexctl.memory import schema

    return to_naive(schema.parse_time(field, raw))


def split_sets(sets: Iterable[str] | None) -> tuple[list[str], dict[str, datetime]]:
    """``--set`` items as (the data fields' items, the valid times given: field -> time)."""
    rest: list[str] = []
    times: dict[str, datetime] = {}
    for item in sets or ():
        field, sep, raw = item.partition("=")
        if sep and field in TIME_FIELDS:
            times[field] = parse_valid_time(field, raw)
        else:
            rest.append(item)
    return rest, times


def check_interval(valid_from: datetime | None, valid_to: datetime | None, what: str = "valid_to") -> None:
    """InvalidData when the interval ends before (or when) it begins."""
    if valid_from is not None and valid_to is not None and valid_to <= valid_from:
        raise InvalidData(f"{what} {iso(valid_to)} is not after valid_from {iso(valid_from)}: "
                          "a valid interval must end after it begins")


def _live(head: dict, verb: str) -> None:
    if head["tombstoned_at"] is not None:
        raise Tombstoned(f"memory {head['id']} was forgotten on {iso(head['tombstoned_at'])} "
                         f"({head['tombstone_reason']}); it cannot {verb}")


def check_old(tx: Tx, old: dict, new_id: str | None, new_from: datetime) -> None:
    """Refuse linking ``old`` as superseded by ``new_id`` (None: a memory not written yet) whose
    interval begins at ``new_from``. A pair already linked passes (the caller makes no change)."""
    _live(old, "be superseded")
    if old["superseded_by"] is not None and old["superseded_by"] != new_id:
        raise InvalidData(f"memory {old['id']} is already superseded by {old['superseded_by']}")
    if old["valid_from"] is not None and old["valid_from"] > new_from:
        raise InvalidData(f"memory {old['id']} is valid from {iso(old['valid_from'])}, after the new memory's "
                          f"valid_from {iso(new_from)}: its interval would end before it begins")
    if new_id is not None:
        _no_cycle(tx, old["id"], new_id)


def _no_cycle(tx: Tx, old_id: str, new_id: str) -> None:
    """InvalidData when ``new_id`` is already, through its ``superseded_by`` links, superseded by ``old_id``."""
    at, seen = new_id, {new_id}
    while True:
        heads = tx.heads_of([at])
        nxt = heads[at]["superseded_by"] if at in heads else None
        if nxt is None:
            return
        if nxt == old_id or nxt in seen or len(seen) > MAX_CHAIN:
            raise InvalidData(f"memory {new_id} is already superseded, through its chain, by {old_id}: "
                              "linking them would make a cycle")
        seen.add(nxt)
        at = nxt


def close_old(ctx: Context, tx: Tx, old: dict, new_id: str, new_from: datetime, now: datetime) -> int:
    """End ``old``'s interval at ``new_from`` and link it to ``new_id`` (journaled); returns the entry's seq.
    Its ``updated_at`` stays: being superseded is no change of its own (nor a reason to rank it as recent)."""
    fields = {"valid_to": new_from, "superseded_by": new_id}
    return _set_head(ctx, tx, old, fields, now, touch=False)


def _set_head(ctx: Context, tx: Tx, head: dict, fields: dict, now: datetime, *, touch: bool = True) -> int:
    if touch:
        fields = {**fields, "updated_at": now}
    tx.update_head(head["id"], fields)
    payload = codec.encode({"id": head["id"], **plain(fields)})
    return tx.append_journal([("update_head", now, ctx.actor, head["id"], payload)])


def set_times(ctx: Context, tx: Tx, head: dict, times: dict[str, datetime], now: datetime) -> int | None:
    """Set a memory's valid times (given ones only), checked against the ones it keeps; journaled as
    an ``update_head``. Returns its seq, or None when they are already so."""
    fields = {k: v for k, v in times.items() if head[k] != v}
    if not fields:
        return None
    merged = {**head, **fields}
    check_interval(merged["valid_from"], merged["valid_to"])
    return _set_head(ctx, tx, head, fields, now)


def supersede(ctx: Context, old_ref: str, new_ref: str) -> SupersedeResult:
    """Link two existing memories of the actor: ``new_ref`` supersedes ``old_ref``. The old one's
    interval ends where the new one's begins (its ``valid_from``, set to now when it has none).
    Linking a pair that is already linked changes nothing."""
    parse_ref(old_ref)
    parse_ref(new_ref)
    with ctx.transaction(existing=True) as tx:
        old = resolve(tx, ctx.viewer, old_ref)
        new = resolve(tx, ctx.viewer, new_ref)
        if old["id"] == new["id"]:
            raise UsageError(f"memory {old['id']} cannot supersede itself")
        check_owner(old, ctx.actor)
        check_owner(new, ctx.actor)
        _live(new, "supersede another memory")
        seq = None
        if old["superseded_by"] == new["id"] and new["supersedes"] == old["id"]:
            _live(old, "be superseded")
        else:
            if new["supersedes"] is not None and new["supersedes"] != old["id"]:
                raise InvalidData(f"memory {new['id']} already supersedes {new['supersedes']}")
            now = ctx.clock()
            new_from = new["valid_from"] or now
            check_old(tx, old, new["id"], new_from)
            check_interval(new_from, new["valid_to"])
            seq = close_old(ctx, tx, old, new["id"], new_from, now)
            _set_head(ctx, tx, new, {"supersedes": old["id"], "valid_from": new_from}, now)
            old = {**old, "valid_to": new_from, "superseded_by": new["id"]}
    return SupersedeResult(old=old["id"], new=new["id"], valid_to=old["valid_to"], seq=seq, changed=seq is not None)


def chain(ctx: Context, ref: str) -> list[ChainLink]:
    """The supersede chain through a memory, oldest first: the memories it supersedes, one by one,
    then itself, then those that superseded it (only those the actor may see; [] when it has no link)."""
    parse_ref(ref)
    with ctx.reading() as tx:
        head = resolve(tx, ctx.viewer, ref)
        if head["supersedes"] is None and head["superseded_by"] is None:
            return []
        links = {head["id"]: head}
        back: list[dict] = []
        forward: list[dict] = []
        for field, out in (("supersedes", back), ("superseded_by", forward)):
            at = head
            while at[field] is not None and at[field] not in links and len(links) < MAX_CHAIN:
                got = tx.heads_by_ids([at[field]], ctx.viewer)
                if not got:
                    break
                links[got[0]["id"]] = at = got[0]
                out.append(at)
    return [ChainLink(id=h["id"], short=h["short"], valid_from=h["valid_from"], valid_to=h["valid_to"],
                      tombstoned=h["tombstoned_at"] is not None, this=h["id"] == head["id"])
            for h in [*reversed(back), head, *forward]]


__all__ = ["chain", "TIME_FIELDS", "parse_valid_time", "split_sets", "check_interval", "check_old", "close_old", "set_times",
           "supersede"]
