"""show and history: one memory, and all its versions."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from cortexctl.cli import options as o
from cortexctl.cli.output import Output
from cortexctl.engine.models import iso

SHOW_EPILOG = """\b
Examples:
  cortexctl show 01JD3K
  cortexctl show cortex://m/01JD3KQ5ZC8M3V6W4Y2T7N9R0B/v/1
  cortexctl show 01JD3K --version 2 --form short
  cortexctl show 01JD3K --json | jq .data
"""

HISTORY_EPILOG = """\b
Examples:
  cortexctl history 01JD3K
  cortexctl history 01JD3K --jsonl
"""

Ref = Annotated[str, typer.Argument(metavar="REF", help="URI, ID or unique ID prefix.", show_default=False)]


def show(
    ctx: typer.Context,
    ref: Ref,
    version: Annotated[Optional[int], typer.Option("--version", help="Show this version.", metavar="N")] = None,
    form: o.Form = "full",
    store: o.Store = None, actor: o.Actor = None, wait: o.Wait = None, json: o.Json = False, jsonl: o.Jsonl = False,
) -> None:
    """Show one memory (its latest version unless --version)."""
    out = Output(json=json, jsonl=jsonl)
    if form not in ("short", "medium", "full"):
        from cortexctl.errors import UsageError

        raise UsageError(f"--form must be short, medium or full, not {form!r}")
    m = o.cortex(ctx, store, actor, wait).show(ref, version=version)
    if out.machine:
        out.emit(m.to_json(form))
        return
    out.line(f"{m.uri}  (version {m.version} of {m.current_version})")
    out.line(f"type: {m.type}   actor: {m.actor}   visibility: {m.visibility}   importance: {m.importance}")
    if m.tags:
        out.line(f"tags: {', '.join(m.tags)}")
    if m.frames:
        out.line(f"frames: {', '.join(m.frames)}")
    out.line(f"created: {iso(m.version_created_at)} by {m.created_by}   confidence: {m.confidence:g}")
    out.line(f"hash: {m.hash}")
    if m.tombstone:
        out.line(f"forgotten: {iso(m.tombstone.at)} by {m.tombstone.by}: {m.tombstone.reason}")
    out.line()
    out.line(m.form(form))


def history(
    ctx: typer.Context,
    ref: Ref,
    store: o.Store = None, actor: o.Actor = None, wait: o.Wait = None, json: o.Json = False, jsonl: o.Jsonl = False,
) -> None:
    """List every version of a memory, oldest first."""
    out = Output(json=json, jsonl=jsonl)
    versions = o.cortex(ctx, store, actor, wait).history(ref)
    if out.machine:
        out.emit_many((v.to_json() for v in versions), lambda docs: {"uri": f"cortex://m/{versions[0].id}", "versions": docs})
        return
    out.table(
        ["version", "created", "by", "hash", "short form"],
        [(f"{v.version}{'*' if v.current else ''}", iso(v.created_at), v.created_by, v.hash[:12], v.short) for v in versions],
    )


def register(app: typer.Typer) -> None:
    app.command("show", epilog=SHOW_EPILOG)(show)
    app.command("history", epilog=HISTORY_EPILOG)(history)
