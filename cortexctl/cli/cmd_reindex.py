"""reindex: embed what the active model has not, and bring the index file up to date."""

from __future__ import annotations

from cortexctl.cli.spec import QUIET, command_for
from cortexctl.ops import lookup


def reindex(config, *, rebuild, quiet, store, actor, wait, json, jsonl) -> None:
    from cortexctl.cli.common import open_cortex
    from cortexctl.cli.output import Output

    out = Output(json=json, jsonl=jsonl, quiet=quiet)
    cx = open_cortex(config, store, actor, wait)
    with out.progress("reindexing") as bar:
        progress = (lambda stage, done, total: bar(done, total)) if bar else None
        result = lookup("reindex").run(cx, rebuild=rebuild, progress=progress)
    if out.machine:
        out.emit(result.to_json())
        return
    index = result.index
    out.line(f"model {result.model}: embedded {result.embedded}, dropped {result.dropped} "
             f"vectors of other models; index: {index['action']} ({index.get('vectors', 0)} vectors)")


COMMANDS = [
    command_for(
        lookup("reindex"), ("reindex",), "Re-embed what the active model did not embed; rebuild the index file.",
        run=reindex, options=(QUIET,),
        notes="""Embeds every live memory that has no vector from the active embedding model
(memories written while the endpoint was down, or all of them after a
change of model: to embedding.provider local, one of the model extra's
local models chosen by embedding.model (multilingual-e5-small or
wordllama-l2-256), and back), drops vectors made by other models, and folds new
vectors into the HNSW index file. --rebuild builds the index file from the vectors
in the store instead (the file is a cache; the store is the ground truth), split
into files by visibility class (each class of 20,000 vectors or more in its own,
the rest in one more), so that a find views only the files of what its viewer may
see, and no file of more than 200,000 vectors (a bigger class in several, by the
order its memories were written), each with the graph its size wants; a fold
keeps the files a rebuild made, and starts another once a class's file is full.
A configured endpoint is probed first.""",
        examples=(
            "cortexctl reindex",
            "CORTEXCTL_EMBED_BASE_URL=http://127.0.0.1:11434/v1 CORTEXCTL_EMBED_MODEL=nomic-embed-text cortexctl reindex",
            "CORTEXCTL_EMBED_PROVIDER=local cortexctl reindex",
            "CORTEXCTL_EMBED_PROVIDER=local CORTEXCTL_EMBED_MODEL=wordllama-l2-256 cortexctl reindex",
            "cortexctl reindex --rebuild --json",
        ),
        exits=(0, 2, 4, 7, 9),
        exit_notes={2: "also: the endpoint's vectors do not have the configured dimension, or provider local "
                       "without the model extra or with a model that is not a local model",
                    9: "the embedding endpoint cannot be reached"},
    ),
]
