"""consolidate: file transcripts' durable learnings through the chat model (SPEC §9)."""

from __future__ import annotations

from cortexctl.cli.spec import Argument, command_for
from cortexctl.ops import lookup


def consolidate(config, *, sources, dry_run, again, jobs, store, actor, wait, json, jsonl) -> None:
    from cortexctl.cli.common import open_cortex, read_input
    from cortexctl.cli.output import Output
    from cortexctl.errors import InvalidData, UsageError

    out = Output(json=json, jsonl=jsonl)
    names = list(sources or ["-"])
    if names.count("-") > 1:
        raise UsageError("FILE - (stdin) may be given once")
    transcripts = []
    for name in names:  # every file read and checked before the first request
        raw, where = read_input(name, "FILE")
        try:
            transcripts.append((where if len(names) > 1 else "", raw.decode("utf-8")))
        except UnicodeDecodeError:
            raise InvalidData(f"{where}: not valid UTF-8") from None

    def show(r) -> None:  # each transcript as it is written, for people
        for d in r.dropped:
            out.warn(f"{r.source + ': ' if r.source else ''}dropped {d['kind']}: {d['text'][:80]!r}: {d['reason']}")
        if out.machine:
            return
        where = f"{r.source}: " if r.source else ""
        if r.skipped:
            out.hint(f"{where}consolidated before: skipped (--again consolidates it again)")
        for w in r.written:
            out.line(f"{where}{'would write' if dry_run else w['action']} {w['kind']}: {w['text']}"
                     + (f" {w['uri']}" if w.get("uri") else "")
                     + (f" (supersedes {w['supersedes']}: {w['old_text']})" if w.get("supersedes") else ""))
        if not r.written and not r.skipped:
            out.hint(f"{where}nothing durable in this transcript (a common, correct answer)")

    result = lookup("consolidate").run(open_cortex(config, store, actor, wait), transcripts=transcripts,
                                       dry_run=dry_run, again=again, jobs=jobs, on_done=show)
    if out.machine:
        if len(transcripts) > 1:
            out.emit_many(result.docs(), lambda _docs: result.to_json())
        else:
            out.emit(result.to_json())


COMMANDS = [
    command_for(
        lookup("consolidate"), ("consolidate",),
        "File transcripts' durable learnings: facts, user facts, patterns, outcome.", run=consolidate,
        arguments=(Argument("sources", "FILE|-", "The transcripts, one a file (default: stdin).", required=False,
                            many=True),),
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
linked). Nothing is ever deleted.
\b
Each transcript's writes are one transaction, journaled with the
transcript's SHA-256: a transcript you consolidated before is skipped
(--again asks the model again), so a run that was killed or failed
midway, run again with the same files, writes nothing twice and does the
rest. Up to --jobs transcripts are sent to the model at once; their
answers are written one at a time, in the order the files are given. The
first transcript that fails stops the run with its error.""",
        examples=("cortexctl consolidate transcript.txt", "cortexctl consolidate - --dry-run --json < turn.txt",
                  "cortexctl consolidate transcripts/*.txt --jobs 8"),
        exits=(0, 2, 4, 9, 10),
    ),
]
