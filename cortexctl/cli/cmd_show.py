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
    out.line()
    out.line(m.form(form))


def _history(out, history) -> None:
    from cortexctl.engine.results import iso

    out.table(
        ["version", "created", "by", "hash", "short form"],
        [(f"{v.version}{'*' if v.current else ''}", iso(v.created_at), v.created_by, v.hash[:12], v.short)
         for v in history.versions],
    )


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
        notes="""--as-of T shows the memory as it stood at record time T (when cortexctl
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
        examples=("cortexctl history 01JD3K", "cortexctl history 01JD3K --jsonl"),
        exits=(0, 2, 3, 4, 7),
    ),
]
