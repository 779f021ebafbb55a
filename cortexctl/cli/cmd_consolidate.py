"""consolidate: file a transcript's durable learnings through the chat model (SPEC §9)."""

from __future__ import annotations

from cortexctl.cli.spec import Argument, command_for
from cortexctl.ops import lookup


def consolidate(config, *, source, dry_run, store, actor, wait, json, jsonl) -> None:
    from cortexctl.cli.common import open_cortex, read_input
    from cortexctl.cli.output import Output
    from cortexctl.errors import InvalidData

    out = Output(json=json, jsonl=jsonl)
    raw, where = read_input(source or "-", "FILE")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidData(f"{where}: not valid UTF-8") from None
    result = lookup("consolidate").run(open_cortex(config, store, actor, wait), transcript=text, dry_run=dry_run)
    for d in result.dropped:
        out.warn(f"dropped {d['kind']}: {d['text'][:80]!r}: {d['reason']}")
    if out.machine:
        out.emit(result.to_json())
        return
    for w in result.written:
        out.line(f"{'would write' if dry_run else w['action']} {w['kind']}: {w['text']}"
                 + (f" {w['uri']}" if w.get("uri") else "")
                 + (f" (supersedes {w['supersedes']}: {w['old_text']})" if w.get("supersedes") else ""))
    if not result.written:
        out.hint("nothing durable in this transcript (a common, correct answer)")


COMMANDS = [
    command_for(
        lookup("consolidate"), ("consolidate",),
        "File a transcript's durable learnings: facts, user facts, patterns, outcome.", run=consolidate,
        arguments=(Argument("source", "FILE|-", "The transcript (default: stdin).", required=False),),
        notes="""Needs a chat endpoint (config section chat). At most 5 facts, 5 user facts,
3 patterns (reinforcing existing ones) and 1 outcome are written; an item
holding an ID, hash, path or URL that is not verbatim in the transcript is
dropped and reported on stderr, as is a fact you already have. Everything
written has provenance {"via": "consolidated", "transcript_sha256": ...}.
\b
The model also sees up to 20 of your facts that still hold, and may propose
that the transcript supersedes one (at most 3): a proposal that does not
quote the old fact's statement verbatim is dropped; a kept one writes the new
fact with write --supersedes (the old one's valid time ends, both are
linked). Nothing is ever deleted.""",
        examples=("cortexctl consolidate transcript.txt", "cortexctl consolidate - --dry-run --json < turn.txt"),
        exits=(0, 2, 4, 9, 10),
    ),
]
