"""write and update: new memories and new versions."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from cortexctl.cli import options as o
from cortexctl.cli import views
from cortexctl.cli.common import exit_status
from cortexctl.cli.output import Output
from cortexctl.memory.types import TYPES

WRITE_EPILOG = f"""\b
Types: {', '.join(TYPES)}.
TEXT fills the type's main field (statement, name, topic, summary,
description). Later sources win: --data, then --set, then TEXT.
\b
Examples:
  cortexctl write fact "The deploy key rotates monthly" --tag ops
  cortexctl write preference "tabs over spaces" --set polarity=avoid --set strength=0.8
  cortexctl write constraint "never push to main" --set strength=hard --importance 9
  cortexctl write goal --data '{{"statement": "ship v2", "horizon": "2026-12-31"}}'
  cortexctl write event "deploy failed" --set outcome=failure --frame deliver:repo:acme/api --json
""" + exit_status(0, 2, 4, 7, 10)

UPDATE_EPILOG = """\b
The new version starts from the current one; given fields replace its fields.
Old versions stay readable with: cortexctl show REF --version N
\b
Examples:
  cortexctl update 01JD3K "The deploy key rotates weekly"
  cortexctl update cortex://m/01JD3KQ5ZC8M3V6W4Y2T7N9R0B --set confidence=0.6
""" + exit_status(0, 1, 2, 3, 4, 8, 10, notes={1: "memory forgotten", 8: "not your memory"})

ShortForm = Annotated[Optional[str], typer.Option("--short-form", help="Your own short form (<= 50 tokens).", metavar="TEXT")]
MediumForm = Annotated[Optional[str], typer.Option("--medium-form", help="Your own medium form (<= 200 tokens).", metavar="TEXT")]


def _forms(short: Optional[str], medium: Optional[str]) -> Optional[dict]:
    forms = {k: v for k, v in (("short", short), ("medium", medium)) if v is not None}
    return forms or None


def write(
    ctx: typer.Context,
    type_name: Annotated[str, typer.Argument(metavar="TYPE", help="Memory type.", show_default=False)],
    text: Annotated[Optional[str], typer.Argument(metavar="TEXT", help="The main text.", show_default=False)] = None,
    sets: o.Sets = None,
    data: o.Data = None,
    tags: o.Tags = None,
    frames: o.Frames = None,
    importance: Annotated[int, typer.Option("--importance", help="Declared importance 0-10.", metavar="N")] = 5,
    visibility: Annotated[str, typer.Option("--visibility", help="private, scoped or public.", metavar="V")] = "private",
    confidence: Annotated[float, typer.Option("--confidence", help="Confidence in this version, 0-1.", metavar="X")] = 1.0,
    session: Annotated[Optional[str], typer.Option("--session", help="Session this memory belongs to.", metavar="ID")] = None,
    short_form: ShortForm = None,
    medium_form: MediumForm = None,
    store: o.Store = None, actor: o.Actor = None, wait: o.Wait = None, json: o.Json = False, jsonl: o.Jsonl = False,
) -> None:
    """Write a new memory and print its URI."""
    views.run_write((ctx.obj or {}).get("config"), type_name, text, sets=sets or [], data=data, tags=tags or [],
                    frames=frames or [], importance=importance, visibility=visibility, confidence=confidence,
                    session=session, short_form=short_form, medium_form=medium_form, store=store, actor=actor,
                    wait=wait, json=json, jsonl=jsonl)


def update(
    ctx: typer.Context,
    ref: Annotated[str, typer.Argument(metavar="REF", help="URI, ID or unique ID prefix.", show_default=False)],
    text: Annotated[Optional[str], typer.Argument(metavar="TEXT", help="New main text.", show_default=False)] = None,
    sets: o.Sets = None,
    data: o.Data = None,
    confidence: Annotated[Optional[float], typer.Option("--confidence", help="Confidence in the new version, 0-1.", metavar="X")] = None,
    short_form: ShortForm = None,
    medium_form: MediumForm = None,
    store: o.Store = None, actor: o.Actor = None, wait: o.Wait = None, json: o.Json = False, jsonl: o.Jsonl = False,
) -> None:
    """Write a new version of a memory; old versions stay readable."""
    out = Output(json=json, jsonl=jsonl)
    cx = o.cortex(ctx, store, actor, wait)
    result = cx.update(
        ref, text, data=o.read_data(data), sets=sets, confidence=confidence,
        forms=_forms(short_form, medium_form),
    )
    for w in result.warnings:
        out.warn(w)
    if out.machine:
        out.emit(result.to_json())
    else:
        out.line(f"{result.uri}/v/{result.version}")
        if not result.changed:
            out.hint("no change: the memory already holds this data; no version written")


def register(app: typer.Typer) -> None:
    app.command("write", epilog=WRITE_EPILOG)(write)
    app.command("update", epilog=UPDATE_EPILOG)(update)
