"""tag, head and forget: the mutable head fields and the tombstone."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from cortexctl.cli import options as o
from cortexctl.cli.common import exit_status
from cortexctl.cli.output import Output
from cortexctl.engine.models import HeadResult, iso

Ref = Annotated[str, typer.Argument(metavar="REF", help="URI, ID or unique ID prefix.", show_default=False)]

TAG_EPILOG = """\b
Examples:
  cortexctl tag 01JD3K --add ops --add deploy
  cortexctl tag 01JD3K --remove stale
""" + exit_status(0, 2, 3, 4, 8, notes={8: "not your memory"})
HEAD_EPILOG = """\b
Examples:
  cortexctl head 01JD3K --importance 9 --visibility public
  cortexctl head 01JD3K --frame build:repo:github.com/acme/api
  cortexctl head 01JD3K --remove-frame build:repo:github.com/acme/api
""" + exit_status(0, 2, 3, 4, 8, notes={8: "not your memory"})
FORGET_EPILOG = """\b
The memory keeps every version (show and history still work); find hides it
unless --include-tombstoned, and update refuses it.
\b
Examples:
  cortexctl forget 01JD3K --reason "superseded by the new key policy"
""" + exit_status(0, 1, 2, 3, 4, 8, notes={1: "already forgotten", 8: "not your memory"})


def _print(out: Output, result: HeadResult) -> None:
    if out.machine:
        out.emit(result.to_json())
        return
    out.line(f"cortex://m/{result.id}")
    parts = [f"tags: {', '.join(result.tags) or '-'}", f"importance: {result.importance}",
             f"visibility: {result.visibility}"]
    if result.frames:
        parts.append(f"frames: {', '.join(result.frames)}")
    if result.tombstone:
        parts.append(f"forgotten: {iso(result.tombstone.at)}")
    out.hint("   ".join(parts) + ("" if result.changed else "   (no change)"))


def tag(
    ctx: typer.Context,
    ref: Ref,
    add: Annotated[Optional[list[str]], typer.Option("--add", help="Add a tag (repeatable).", metavar="TAG")] = None,
    remove: Annotated[Optional[list[str]], typer.Option("--remove", help="Remove a tag (repeatable).", metavar="TAG")] = None,
    store: o.Store = None, actor: o.Actor = None, wait: o.Wait = None, json: o.Json = False, jsonl: o.Jsonl = False,
) -> None:
    """Add or remove tags of a memory."""
    out = Output(json=json, jsonl=jsonl)
    _print(out, o.cortex(ctx, store, actor, wait).tag(ref, add=add or (), remove=remove or ()))


def head(
    ctx: typer.Context,
    ref: Ref,
    importance: Annotated[Optional[int], typer.Option("--importance", help="Declared importance 0-10.", metavar="N")] = None,
    visibility: Annotated[Optional[str], typer.Option("--visibility", help="private, scoped or public.", metavar="V")] = None,
    frames: o.Frames = None,
    remove_frames: Annotated[Optional[list[str]], typer.Option("--remove-frame", help="Remove a frame (repeatable).", metavar="VERB:KIND:REF")] = None,
    store: o.Store = None, actor: o.Actor = None, wait: o.Wait = None, json: o.Json = False, jsonl: o.Jsonl = False,
) -> None:
    """Change importance, visibility or frames of a memory."""
    out = Output(json=json, jsonl=jsonl)
    result = o.cortex(ctx, store, actor, wait).head(
        ref, importance=importance, visibility=visibility, add_frames=frames or (), remove_frames=remove_frames or (),
    )
    _print(out, result)


def forget(
    ctx: typer.Context,
    ref: Ref,
    reason: Annotated[str, typer.Option("--reason", help="Why it is forgotten (required).", metavar="TEXT")],
    store: o.Store = None, actor: o.Actor = None, wait: o.Wait = None, json: o.Json = False, jsonl: o.Jsonl = False,
) -> None:
    """Tombstone a memory: hidden from find, history kept."""
    out = Output(json=json, jsonl=jsonl)
    _print(out, o.cortex(ctx, store, actor, wait).forget(ref, reason=reason))


def register(app: typer.Typer) -> None:
    app.command("tag", epilog=TAG_EPILOG)(tag)
    app.command("head", epilog=HEAD_EPILOG)(head)
    app.command("forget", epilog=FORGET_EPILOG)(forget)
