"""reindex: embed what the active model has not, and bring the index file up to date."""

from __future__ import annotations

from typing import Annotated

import typer

from cortexctl.cli import options as o
from cortexctl.cli.common import exit_status
from cortexctl.cli.output import Output

REINDEX_EPILOG = """\b
Embeds every live memory that has no vector from the active embedding model
(memories written while the endpoint was down, or all of them after a
change of model), drops vectors made by other models, and folds new vectors
into the HNSW index file. --rebuild builds the index file from the vectors
in the store instead (the file is a cache; the store is the ground truth).
A configured endpoint is probed first.
\b
Examples:
  cortexctl reindex
  CORTEXCTL_EMBED_BASE_URL=http://127.0.0.1:11434/v1 CORTEXCTL_EMBED_MODEL=nomic-embed-text cortexctl reindex
  cortexctl reindex --rebuild --json
""" + exit_status(0, 2, 4, 7, 9, notes={2: "also: the endpoint's vectors do not have the configured dimension",
                                        9: "the embedding endpoint cannot be reached"})


def reindex(
    ctx: typer.Context,
    rebuild: Annotated[bool, typer.Option("--rebuild", help="Build the index file from scratch.")] = False,
    quiet: o.Quiet = False,
    store: o.Store = None, actor: o.Actor = None, wait: o.Wait = None, json: o.Json = False, jsonl: o.Jsonl = False,
) -> None:
    """Re-embed what the active model did not embed; rebuild the index file."""
    out = Output(json=json, jsonl=jsonl, quiet=quiet)
    cx = o.cortex(ctx, store, actor, wait)
    with out.progress("reindexing") as bar:
        progress = (lambda stage, done, total: bar(done, total)) if bar else None
        result = cx.reindex(rebuild=rebuild, progress=progress)
    if out.machine:
        out.emit(result)
        return
    index = result["index"]
    out.line(f"model {result['model']}: embedded {result['embedded']}, dropped {result['dropped']} "
             f"vectors of other models; index: {index['action']} ({index.get('vectors', 0)} vectors)")


def register(app: typer.Typer) -> None:
    app.command("reindex", epilog=REINDEX_EPILOG)(reindex)
