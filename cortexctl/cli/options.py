"""Reusable option aliases, and opening a Cortex from them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

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
    from cortexctl.engine.cortex import Cortex

    config_path = (ctx.obj or {}).get("config")
    return Cortex(store=store, actor=actor, wait=wait, config=config_path)


def read_data(value: Optional[str]) -> Optional[dict]:
    """--data: inline JSON, @FILE, or - for stdin."""
    import json
    import sys

    from cortexctl.errors import InvalidData, UsageError

    if value is None:
        return None
    if value == "-":
        raw = sys.stdin.buffer.read()
        where = "stdin"
    elif value.startswith("@"):
        path = Path(value[1:])
        where = str(path)
        if path.is_dir():
            raise UsageError(f"--data {path}: is a directory, not a file")
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raise UsageError(f"--data {path}: no such file") from None
        except OSError as exc:
            raise UsageError(f"--data {path}: cannot be read ({exc.strerror})") from None
    else:
        raw = value.encode("utf-8", "surrogateescape")
        where = "--data"
    try:
        doc = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise InvalidData(f"{where}: not valid UTF-8") from None
    except ValueError as exc:
        raise InvalidData(f"{where}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    if not isinstance(doc, dict):
        raise InvalidData(f"{where}: must be a JSON object of the type's fields")
    return doc
