"""show and history: one memory, and all its versions."""

from __future__ import annotations

from cortexctl.cli.spec import command_for
from cortexctl.ops import lookup


def _show(out, shown) -> None:
    from cortexctl.engine.results import iso

    m, form = shown.memory, shown.form
    out.line(f"{m.uri}  (version {m.version} of {m.current_version})")
    if shown.as_of is not None:
        out.line(shown.as_of.text())
    out.line(f"type: {m.type}   actor: {m.actor}   visibility: {m.visibility}   importance: {m.importance}")
    if m.tags:
        out.line(f"tags: {', '.join(m.tags)}")
    if m.frames:
        out.line(f"frames: {', '.join(m.frames)}")
    out.line(f"created: {iso(m.version_created_at)} by {m.created_by}   version confidence: {m.confidence:g}")
    out.line(f"hash: {m.hash}")
    if m.tombstone:
        out.line(f"forgotten: {iso(m.tombstone.at)} by {m.tombstone.by}: {m.tombstone.reason}")
    if m.valid_from is not None or m.valid_to is not None:
        out.line(f"valid: {iso(m.valid_from) or '-'} to {iso(m.valid_to) or '-'}")
    if m.supersedes is not None:
        out.line(f"supersedes: cortex://m/{m.supersedes}")
    if m.superseded_by is not None:
        out.line(f"superseded by: cortex://m/{m.superseded_by}")
    out.line()
    out.line(m.form(form))


def _history(out, history) -> None:
    from cortexctl.engine.results import iso

    out.table(
        ["version", "created", "by", "hash", "short form"],
        [(f"{v.version}{'*' if v.current else ''}", iso(v.created_at), v.created_by, v.hash[:12], v.short)
         for v in history.versions],
    )
    if history.chain:
        out.line()
        out.line("supersede chain (oldest first):")
        out.table(["", "memory", "valid from", "valid to", "short form"],
                  [("*" if c.this else "", c.id + ("†" if c.tombstoned else ""),
                    iso(c.valid_from) or "-", iso(c.valid_to) or "-", c.short) for c in history.chain])


COMMANDS = [
    command_for(
        lookup("show"), ("show",), "Show one memory (its latest version unless --version).", positional=("ref",),
        human=_show,
        examples=(
            "cortexctl show 01JD3K",
            "cortexctl show cortex://m/01JD3KQ5ZC8M3V6W4Y2T7N9R0B/v/1",
            "cortexctl show 01JD3K --version 2 --form short",
            "cortexctl show 01JD3K --json | jq .data",
            "cortexctl show 01JD3K --as-of 2026-11-01",
        ),
        notes="""A memory with a valid time or a supersede link shows them: valid FROM to TO,
supersedes (the memory it replaced) and superseded by (the one that replaced it);
--json: valid_from, valid_to, supersedes, superseded_by (null when unset).

--as-of T shows the memory as it stood at record time T (when cortexctl
learned it): its head fields, counters and tombstone then, at the version
current then (or --version N, one it had then); "version N of M" counts the
versions it had then. T is an RFC 3339 time, a date or an age (3h, 2d, 1w);
a time in the future is exit 2. A memory written after T, or one the actor
could not see at T, is exit 3.""",
        exits=(0, 2, 3, 4, 7),
    ),
    command_for(
        lookup("history"), ("history",), "List every version of a memory, oldest first.", positional=("ref",),
        human=_history,
        notes="A memory in a supersede chain (see cortexctl supersede) also lists the chain,\n"
              "oldest first, each memory with its valid interval (--json: chain).",
        examples=("cortexctl history 01JD3K", "cortexctl history 01JD3K --jsonl"),
        exits=(0, 2, 3, 4, 7),
    ),
]
