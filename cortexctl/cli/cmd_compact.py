"""compact and checkpoint load: fit a working context into a token budget, and reload it."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from cortexctl.cli import options as o
from cortexctl.cli import views
from cortexctl.cli.common import exit_status

COMPACT_EPILOG = """\b
The memories in context (URIs on the command line, or one per line in
--in-context-file, - for stdin; a line may also be a JSON object with a
"uri", as find --jsonl prints) are split into kept and compacted. Kept: the
--load-bearing memories and, automatically, every identity, hard constraint
and active goal; each counts at its medium form's tokens. The rest become
stubs {ref, short form, salience}, each counted at its short form's tokens.
When that total is over --budget-tokens, nothing is stored and the exit code
is 6: shed memories from the context and try again (summarize and link, never
truncate). Otherwise the checkpoint record is stored (cortex://journal/logs/
INTENT/STEP) and, with --checkpoint-dir, mirrored as JSON to
DIR/INTENT/STEP.snapshot; a mirror that cannot be written is reported on
stderr and the checkpoint stands. compact never changes salience.
\b
Examples:
  cortexctl compact --intent 01JD3KX2 --step step-7 --budget-tokens 4000 cortex://m/01JD3K... cortex://m/01JD3M...
  cortexctl find --near "release" --jsonl | cortexctl compact --intent rel-1 --step 1 --budget-tokens 800 --in-context-file -
  cortexctl compact --intent rel-1 --step 2 --budget-tokens 800 --load-bearing 01JD3K --checkpoint-dir ~/.agent/thoughts 01JD3M
""" + exit_status(0, 2, 3, 4, 6, notes={3: "a memory in context does not exist (or is not yours to see)",
                                        6: "budget unreachable: nothing was stored"})
LOAD_EPILOG = """\b
Prints the checkpoint record compact stored for this intent and step: the
kept memories' URIs and the stubs {ref, short, salience}.
\b
Examples:
  cortexctl checkpoint load --intent 01JD3KX2 --step step-7
  cortexctl checkpoint load --intent rel-1 --step 2 --json
""" + exit_status(0, 2, 3, 4, notes={3: "no checkpoint for this intent and step"})

Intent = Annotated[Optional[str], typer.Option("--intent", help="The intent's ID.", metavar="ID", show_default=False)]
Step = Annotated[Optional[str], typer.Option("--step", help="The step's ID.", metavar="STEP", show_default=False)]


def compact(
    ctx: typer.Context,
    refs: Annotated[Optional[list[str]], typer.Argument(
        metavar="URI...", help="The memories in context (URIs, IDs or unique ID prefixes).", show_default=False)] = None,
    intent: Intent = None,
    step: Step = None,
    budget_tokens: Annotated[Optional[int], typer.Option(
        "--budget-tokens", help="The token budget for kept memories and stubs.", metavar="N", show_default=False)] = None,
    load_bearing: Annotated[Optional[list[str]], typer.Option(
        "--load-bearing", help="A memory to keep whole (repeatable).", metavar="URI")] = None,
    in_context_file: Annotated[Optional[str], typer.Option(
        "--in-context-file", help="Read the memories in context from a file, - for stdin.", metavar="FILE")] = None,
    checkpoint_dir: Annotated[Optional[str], typer.Option(
        "--checkpoint-dir", help="Also mirror the checkpoint as JSON under this directory.", metavar="DIR")] = None,
    store: o.Store = None, actor: o.Actor = None, wait: o.Wait = None, json: o.Json = False, jsonl: o.Jsonl = False,
) -> None:
    """Fit the memories in context into a budget; store a checkpoint."""
    views.run_compact((ctx.obj or {}).get("config"), refs or [], intent=intent, step=step,
                      budget_tokens=budget_tokens, load_bearing=load_bearing or [], in_context_file=in_context_file,
                      checkpoint_dir=checkpoint_dir, store=store, actor=actor, wait=wait, json=json, jsonl=jsonl)


def load(
    ctx: typer.Context,
    intent: Intent = None,
    step: Step = None,
    store: o.Store = None, actor: o.Actor = None, wait: o.Wait = None, json: o.Json = False, jsonl: o.Jsonl = False,
) -> None:
    """Print the checkpoint compact stored for an intent and step."""
    views.run_checkpoint_load((ctx.obj or {}).get("config"), intent=intent, step=step, store=store, actor=actor,
                              wait=wait, json=json, jsonl=jsonl)


checkpoint_app = typer.Typer(name="checkpoint", help="Checkpoints stored by compact.", no_args_is_help=True,
                             rich_markup_mode=None, context_settings={"help_option_names": ["-h", "--help"]})


def register(app: typer.Typer) -> None:
    app.command("compact", epilog=COMPACT_EPILOG)(compact)
    checkpoint_app.command("load", epilog=LOAD_EPILOG)(load)
    app.add_typer(checkpoint_app)
