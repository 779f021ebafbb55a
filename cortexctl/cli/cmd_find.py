"""find: memories by meaning (--near) and by type, tag and frame."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from cortexctl.cli import options as o
from cortexctl.cli.common import exit_status
from cortexctl.cli import views

FIND_EPILOG = """\b
With --near, three lanes search the memories that pass the filters: lexical
(BM25 over the text), semantic (embedding similarity) and salience
(importance, recency, use); results are merged by one score (see
cortexctl(1), FIND). --json shows per result the lanes that found it, its
similarity, lexical score, salience and score. Without --near, results come
in salience order.
\b
Filters combine with AND: every --type given is allowed, every --tag given
must be present, every --frame given must match (VERB, VERB:KIND or
VERB:KIND:REF). -k and --budget-tokens bound the results; each result counts
at the form shown, and the results are the longest run of the ranking that
fits the budget.
\b
Examples:
  cortexctl find --near "how do we rotate the deploy key"
  cortexctl find --near "deploy" --type fact --tag ops -k 5 --json
  cortexctl find --near "release checklist" --budget-tokens 400 --form medium
  cortexctl find --frame build:repo
  cortexctl find --include-tombstoned --jsonl | jq -r .uri
""" + exit_status(0, 2, 4, 7)


def find(
    ctx: typer.Context,
    near: Annotated[Optional[str], typer.Option("--near", help="Find by meaning: text to search for.", metavar="TEXT")] = None,
    types: Annotated[Optional[list[str]], typer.Option("--type", help="Only this type (repeatable).", metavar="TYPE")] = None,
    tags: o.Tags = None,
    frames: Annotated[Optional[list[str]], typer.Option(
        "--frame", help="A frame VERB, VERB:KIND or VERB:KIND:REF (repeatable).", metavar="FRAME")] = None,
    include_tombstoned: Annotated[bool, typer.Option("--include-tombstoned", help="Also forgotten memories.")] = False,
    k: Annotated[int, typer.Option("-k", help="At most this many results.", metavar="N")] = 10,
    budget_tokens: Annotated[Optional[int], typer.Option(
        "--budget-tokens", help="At most this many tokens of results (at the form shown).", metavar="N")] = None,
    form: o.Form = "short",
    store: o.Store = None, actor: o.Actor = None, wait: o.Wait = None, json: o.Json = False, jsonl: o.Jsonl = False,
) -> None:
    """Find memories by meaning, type, tag and frame."""
    views.run_find((ctx.obj or {}).get("config"), types=types or [], tags=tags or [], frames=frames or [],
                   include_tombstoned=include_tombstoned, k=k, form=form, near=near, budget_tokens=budget_tokens,
                   store=store, actor=actor, wait=wait, json=json, jsonl=jsonl)


def register(app: typer.Typer) -> None:
    app.command("find", epilog=FIND_EPILOG)(find)
