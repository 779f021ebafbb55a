"""show and history: one memory, and all its versions."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from cortexctl.cli import options as o
from cortexctl.cli.common import exit_status
from cortexctl.cli import views

SHOW_EPILOG = """\b
Examples:
  cortexctl show 01JD3K
  cortexctl show cortex://m/01JD3KQ5ZC8M3V6W4Y2T7N9R0B/v/1
  cortexctl show 01JD3K --version 2 --form short
  cortexctl show 01JD3K --json | jq .data
""" + exit_status(0, 2, 3, 4, 7)

HISTORY_EPILOG = """\b
Examples:
  cortexctl history 01JD3K
  cortexctl history 01JD3K --jsonl
""" + exit_status(0, 2, 3, 4, 7)

Ref = Annotated[str, typer.Argument(metavar="REF", help="URI, ID or unique ID prefix.", show_default=False)]


def show(
    ctx: typer.Context,
    ref: Ref,
    version: Annotated[Optional[int], typer.Option("--version", help="Show this version.", metavar="N")] = None,
    form: o.Form = "full",
    store: o.Store = None, actor: o.Actor = None, wait: o.Wait = None, json: o.Json = False, jsonl: o.Jsonl = False,
) -> None:
    """Show one memory (its latest version unless --version)."""
    views.run_show((ctx.obj or {}).get("config"), ref, version=version, form=form, store=store, actor=actor,
                   wait=wait, json=json, jsonl=jsonl)


def history(
    ctx: typer.Context,
    ref: Ref,
    store: o.Store = None, actor: o.Actor = None, wait: o.Wait = None, json: o.Json = False, jsonl: o.Jsonl = False,
) -> None:
    """List every version of a memory, oldest first."""
    views.run_history((ctx.obj or {}).get("config"), ref, store=store, actor=actor, wait=wait, json=json,
                      jsonl=jsonl)


def register(app: typer.Typer) -> None:
    app.command("show", epilog=SHOW_EPILOG)(show)
    app.command("history", epilog=HISTORY_EPILOG)(history)
