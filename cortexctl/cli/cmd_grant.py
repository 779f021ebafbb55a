"""grant, grant list and revoke: scoped visibility for sub-agents."""

from __future__ import annotations

from cortexctl.cli import complete
from cortexctl.cli.spec import command_for
from cortexctl.ops import lookup


def _rows(grants) -> list[tuple]:
    from cortexctl.engine.results import iso

    return [(g.id, g.granter, g.subagent, ",".join(g.types) or "any", ",".join(g.tags) or "any",
             iso(g.expires_at) or "never", g.state) for g in grants]


def grant(config, *, subagent, types, tags, expires, store, actor, wait, json, jsonl) -> None:
    from cortexctl.cli.common import open_cortex
    from cortexctl.cli.output import Output
    from cortexctl.engine.results import iso
    from cortexctl.errors import UsageError

    out = Output(json=json, jsonl=jsonl)
    cx = open_cortex(config, store, actor, wait)
    if subagent == "list":
        if types or tags or expires is not None:
            raise UsageError("grant list takes no --type, --tag or --expires")
        listing = lookup("grant_list").run(cx)
        if out.machine:
            out.emit_many(listing.docs(), listing.to_json)
            return
        if not listing.items:
            out.hint(f"actor {cx.actor!r} has given no grant and holds none")
            return
        out.table(["id", "granter", "subagent", "types", "tags", "expires", "state"], _rows(listing.items))
        return
    got = lookup("grant").run(cx, subagent=subagent, types=types, tags=tags, expires=expires)
    if not got.created:
        until = f"until {iso(got.expires_at)}" if got.expires_at else "until revoked"
        out.hint(f"cortexctl: {got.subagent!r} already holds grant {got.id} of this scope ({until}): no second "
                 "grant made")
    if out.machine:
        out.emit(got.to_json())
    else:
        out.line(got.id)


def _revoked(out, got) -> None:
    out.line(f"revoked {got.id} (granted to {got.subagent})")


COMMANDS = [
    command_for(
        lookup("grant"), ("grant",), "Let a sub-agent see your scoped memories, or list grants.", run=grant,
        positional=("subagent",), flags={"types": ("--type",), "tags": ("--tag",)},
        completers={"subagent": complete.grant_subagent, "types": complete.memory_types},
        notes="""A grant from the acting actor (the granter) lets SUBAGENT, acting as
--actor SUBAGENT, see every memory that is the granter's, has visibility
scoped, is of one of the --type values (any type when none is given) and
carries at least one of the --tag values (any tags when none is given). It
sees them in every command (find's every lane, show, history, export,
context, pinned, patterns, compact, session), beside its own and the public
memories; it never sees the granter's private memories, and it cannot change
the granter's memories (exit 8). A grant lasts until revoke, or until
--expires has passed, read against the clock at each command. Prints the
grant's ID (--json: the grant).

Grants are a set: granting SUBAGENT the same --type and --tag values again
while that grant is live makes no second grant. It says so on stderr, prints
the live grant's ID and exits 0 (--json: that grant, "created": false); its
--expires stands (revoke it and grant again to change it).

grant list prints the grants the acting actor gave and those it holds,
revoked and expired ones included, with their state (live, expired or
revoked); list is therefore not a sub-agent name. Grants and revocations are
journaled, carried in backups and replayed by verify.""",
        examples=("cortexctl write fact \"Staging DB is db-stg-2\" --visibility scoped --tag ops",
                  "cortexctl grant researcher --tag ops --expires 2h",
                  "cortexctl grant reviewer --type fact --type pattern",
                  "cortexctl find --near \"staging db\" --actor researcher",
                  "cortexctl grant list --json"),
        exits=(0, 2, 3, 4),
        exit_notes={2: "usage error: a bad sub-agent name, --type or --expires, or a grant to yourself",
                    3: "no store at the path (grant list)"},
        op=("grant", "grant_list"),
    ),
    command_for(
        lookup("revoke"), ("revoke",), "Take back a grant you gave or hold.", positional=("target",),
        flags={"types": ("--type",), "tags": ("--tag",)},
        completers={"types": complete.memory_types}, human=_revoked,
        notes="""Revokes one live grant: from this command on, the sub-agent no longer
sees the memories it covered. The grant stays listed (grant list) as
revoked. Name it by its ID (or a unique start of it, 6 characters or more),
or by its sub-agent and its scope as it was given: revoke SUBAGENT --tag TAG
revokes the grant of exactly tag TAG and any type (--type narrows it as in
grant); revoke SUBAGENT alone, when no grant ID starts so, the sub-agent's
grant of any type and tag. The granter may revoke a grant, and so may the
sub-agent it was given to (revoke SUBAGENT with its own name, or the ID):
revoked_by says which.""",
        examples=("cortexctl revoke 01JD3KX2M4Q8R5T7V9W1Y3Z5A7", "cortexctl revoke 01JD3KX2 --json",
                  "cortexctl revoke researcher --tag ops",
                  "cortexctl revoke researcher --tag ops --actor researcher"),
        exits=(0, 2, 3, 4),
        exit_notes={3: "the acting actor has no live grant of that ID or scope (unknown, another's, or "
                       "revoked)"},
    ),
]
