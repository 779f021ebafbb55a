"""find: memories that pass the filters, newest first."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from cortexctl.cli import options as o
from cortexctl.cli.common import exit_status
from cortexctl.cli import views

FIND_EPILOG = """\b
Filters combine with AND: every --type given is allowed, every --tag given
must be present, every --frame given must match (VERB, VERB:KIND or
VERB:KIND:REF). Results are newest first (last change, then ID).
\b
Examples:
  cortexctl find -k 5
  cortexctl find --type fact --type preference --tag ops
  cortexctl find --frame build:repo --form medium
  cortexctl find --include-tombstoned --jsonl | jq -r .uri
""" + exit_status(0, 2, 4, 7)


def find(
    ctx: typer.Context,
    types: Annotated[Optional[list[str]], typer.Option("--type", help="Only this type (repeatable).", metavar="TYPE")] = None,
    tags: o.Tags = None,
    frames: Annotated[Optional[list[str]], typer.Option(
        "--frame", help="A frame VERB, VERB:KIND or VERB:KIND:REF (repeatable).", metavar="FRAME")] = None,
    include_tombstoned: Annotated[bool, typer.Option("--include-tombstoned", help="Also forgotten memories.")] = False,
    k: Annotated[int, typer.Option("-k", help="At most this many results.", metavar="N")] = 10,
    form: o.Form = "short",
    store: o.Store = None, actor: o.Actor = None, wait: o.Wait = None, json: o.Json = False, jsonl: o.Jsonl = False,
) -> None:
    """Find memories by type, tag and frame."""
    views.run_find((ctx.obj or {}).get("config"), types=types or [], tags=tags or [], frames=frames or [],
                   include_tombstoned=include_tombstoned, k=k, form=form, store=store, actor=actor, wait=wait,
                   json=json, jsonl=jsonl)


def register(app: typer.Typer) -> None:
    app.command("find", epilog=FIND_EPILOG)(find)
