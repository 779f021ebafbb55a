"""attest: feed an intent's outcome back into the salience of the memories it cited."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from cortexctl.cli import options as o
from cortexctl.cli import views
from cortexctl.cli.common import exit_status

ATTEST_EPILOG = """\b
Each distinct memory cited is touched (last used = now). On success its
access count and citations go up by 1; on failure with reason factual_error
or wrong_assumption its citations go down by 1 (never below 0); any other
failure changes no count. Citations that are malformed, name no memory you
can see, are ambiguous or name a forgotten memory are skipped and listed; the
same memory cited twice counts once. The actor's learned salience weights
take one EMA step (see cortexctl(1), SALIENCE). Two journal entries commit
together: attest at N, learn-weights at N+1. At most 256 citations; at most
1 call a second per actor and intent, in bursts of up to 5.
\b
Examples:
  cortexctl attest --intent 01JD3KX2 --outcome success cortex://m/01JD3K... cortex://m/01JD3M...
  cortexctl attest --intent deploy-7 --outcome failure --reason factual_error 01JD3K --json
""" + exit_status(0, 2, 4, 5, notes={2: "empty intent, no citations, more than 256, or a bad outcome",
                                     5: "over the rate limit for this actor and intent; nothing changed"})


def attest(
    ctx: typer.Context,
    cited: Annotated[Optional[list[str]], typer.Argument(
        metavar="URI...", help="The memories the intent cited (URIs, IDs or unique ID prefixes).",
        show_default=False)] = None,
    intent: Annotated[Optional[str], typer.Option("--intent", help="The intent's ID.", metavar="ID",
                                                  show_default=False)] = None,
    outcome: Annotated[Optional[str], typer.Option("--outcome", help="success or failure.", metavar="OUTCOME",
                                                   show_default=False)] = None,
    reason: Annotated[Optional[str], typer.Option(
        "--reason", help="Why it failed (factual_error and wrong_assumption lower citations).", metavar="R",
        show_default=False)] = None,
    store: o.Store = None, actor: o.Actor = None, wait: o.Wait = None, json: o.Json = False, jsonl: o.Jsonl = False,
) -> None:
    """Record an intent's outcome and feed it back into salience."""
    views.run_attest((ctx.obj or {}).get("config"), cited or [], intent=intent, outcome=outcome, reason=reason,
                     store=store, actor=actor, wait=wait, json=json, jsonl=jsonl)


def register(app: typer.Typer) -> None:
    app.command("attest", epilog=ATTEST_EPILOG)(attest)
