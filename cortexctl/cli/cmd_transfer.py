"""import and export: JSONL in and out, one JSON object per memory."""

from __future__ import annotations

from cortexctl.cli.spec import ACTOR, QUIET, STORE, WAIT, Argument, Option, command_for
from cortexctl.ops import lookup


def import_(config, *, file, skip_invalid, skip_existing, keep_actors, batch_size, quiet, store, actor, wait, json, jsonl) -> None:
    from pathlib import Path

    from cortexctl.cli.common import open_cortex, readable_stdin
    from cortexctl.cli.output import Output
    from cortexctl.errors import UsageError

    out = Output(json=json, jsonl=jsonl, quiet=quiet)
    cx = open_cortex(config, store, actor, wait)
    if file == "-":
        report = _run(cx, readable_stdin("import"), out, skip_invalid, skip_existing, keep_actors, batch_size)
    else:
        if not file.strip():
            raise UsageError("FILE must not be empty")
        path = Path(file)
        if path.is_dir():
            raise UsageError(f"{path}: is a directory, not a file")
        try:
            fh = open(path, "rb")
        except FileNotFoundError:
            raise UsageError(f"{path}: no such file") from None
        except OSError as exc:
            raise UsageError(f"{path}: cannot be read ({exc.strerror})") from None
        with fh:
            report = _run(cx, fh, out, skip_invalid, skip_existing, keep_actors, batch_size)
    for w in report.warnings:
        out.warn(w)
    if out.machine:
        out.emit(report.to_json())
        return
    for p in report.problems:
        out.warn(f"skipped {p}")
    out.line(f"imported {report.imported} memories in {report.batches} batch{'es' if report.batches != 1 else ''}"
             + (f"; skipped {report.existing} already in the store" if report.existing else "")
             + (f"; skipped {report.skipped} invalid lines" if report.skipped else ""))
    if report.pending:
        out.hint(f"{report.pending} memories wait for their embedding; run: cortexctl reindex")


def _run(cx, source, out, skip_invalid: bool, skip_existing: bool, keep_actors: bool, batch_size: int):
    with out.progress("importing") as progress:
        return lookup("import").run(cx, source=source, skip_invalid=skip_invalid, skip_existing=skip_existing,
                                    keep_actors=keep_actors, batch_size=batch_size, progress=progress)


def export(config, *, out, store, actor, wait, jsonl) -> None:
    import sys
    from pathlib import Path

    from cortexctl.cli.common import open_cortex

    cx = open_cortex(config, store, actor, wait)
    if out is None or out == "-":  # `-` is stdout, as `import -` reads stdin
        lookup("export").run(cx, sink=sys.stdout.buffer)
        sys.stdout.buffer.flush()
    else:
        written = lookup("export").run(cx, sink=out)  # a str: Path("") would be "."
        sys.stderr.write(f"exported {written.n} memories to {Path(out)}\n")


COMMANDS = [
    command_for(
        lookup("import"), ("import",), "Load memories in bulk from JSONL.", run=import_,
        arguments=(Argument("file", "FILE", "A JSONL file, or - for stdin."),), options=(QUIET,),
        notes="""One JSON object per line; the smallest is {"type": "fact", "text": "..."}.
Optional keys: data, tags, frames, importance, visibility, confidence, actor,
session, created_at, forms, id. Lines written by export (with "versions")
are read back as they were. A line whose "actor" is not you is refused
unless --keep-actors (an operator loading other agents' memories). Every line is checked first: any bad line rejects
the whole file (each one is reported) unless --skip-invalid. A memory whose
ID the store already holds is a bad line; with --skip-existing it is skipped
(and counted) when the stored memory has the same owner and the same versions
(each version's hash equal, in order), and the stored one is kept as it is,
head fields included. The same ID with other content is a conflict, reported
and handled like any bad line. Memories are
written in batches of --batch-size, each one transaction (with its
postings and vectors); the store is released between batches, and the index
file is brought up to date once at the end. On a local store DuckDB is held
to 256 MB in each batch's transaction (spilling into the store's scratch area);
a batch that does not fit is committed again without the limit. When the
embedding endpoint fails, memories are imported all the same and wait for `reindex`.""",
        examples=("cortexctl import memories.jsonl", "some-tool | cortexctl import - --skip-invalid --json",
                  "cortexctl import team-dump.jsonl --keep-actors",
                  "cortexctl import memories.jsonl --skip-existing"),
        exits=(0, 2, 4, 7, 10),
        exit_notes={10: "invalid lines or conflicts with stored memories (nothing imported)"},
    ),
    command_for(
        lookup("export"), ("export",), "Dump every memory you can see as JSONL.", run=export,
        options=(Option("out", ("--out", "-o"), "Write to this file (atomically); - for stdout.", metavar="FILE"),),
        common=(STORE, ACTOR, WAIT,
                Option("jsonl", ("--jsonl",), "JSONL output (the only format; accepted for symmetry).", type=bool,
                       default=False)),
        notes="""Writes every memory you can see, with every version, its head fields and IDs,
in ID order; `import` reads it back into an equal store. --out writes the
file atomically (a FIFO or a device is written into as it is).""",
        examples=("cortexctl export > memories.jsonl", "cortexctl export --out backup/memories.jsonl"),
        exits=(0, 2, 4, 7),
    ),
]
