"""Reusable option aliases, and opening a Cortex from them."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from cortexctl.cli.common import open_cortex, read_data  # noqa: F401 (re-exported)
from cortexctl.config import ENV_ACTOR, ENV_STORE, ENV_WAIT

Store = Annotated[
    Optional[str],
    typer.Option("--store", help=f"Store directory [env {ENV_STORE}; default: user data dir].",
                 show_default=False, metavar="PATH"),
]
Actor = Annotated[
    Optional[str],
    typer.Option("--actor", help=f"Acting agent [env {ENV_ACTOR}; default: OS user].", show_default=False,
                 metavar="NAME"),
]
Wait = Annotated[
    Optional[float],
    typer.Option("--wait", help=f"Seconds to wait for a busy store before exit 4 [env {ENV_WAIT}; default 5].",
                 show_default=False, metavar="SECONDS"),
]
Json = Annotated[bool, typer.Option("--json", help="Print one JSON document.")]
Jsonl = Annotated[bool, typer.Option("--jsonl", help="Print one JSON object per line.")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or hints.")]
Tags = Annotated[Optional[list[str]], typer.Option("--tag", help="A tag (repeatable).", metavar="TAG")]
Frames = Annotated[
    Optional[list[str]],
    typer.Option("--frame", help="A frame VERB:KIND:REF (repeatable).", metavar="VERB:KIND:REF"),
]
Form = Annotated[str, typer.Option("--form", help="short, medium or full.", metavar="FORM")]
Data = Annotated[
    Optional[str],
    typer.Option("--data", help="The type's fields as a JSON object, @FILE, or - for stdin.", metavar="JSON|@FILE|-"),
]
Sets = Annotated[
    Optional[list[str]], typer.Option("--set", help="Set one data field (repeatable).", metavar="FIELD=VALUE")
]


def cortex(ctx: typer.Context, store: Optional[str], actor: Optional[str], wait: Optional[float]):
    """A Cortex from the global -c/--config and this command's options."""
    return open_cortex((ctx.obj or {}).get("config"), store, actor, wait)
