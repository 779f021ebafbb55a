"""import and export: JSONL in and out, one JSON object per memory."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from cortexctl.cli import options as o
from cortexctl.cli.common import exit_status, readable_stdin
from cortexctl.cli.output import Output
from cortexctl.errors import UsageError

IMPORT_EPILOG = """\b
One JSON object per line; the smallest is {"type": "fact", "text": "..."}.
Optional keys: data, tags, frames, importance, visibility, confidence, actor,
session, created_at, forms, id. Lines written by export (with "versions")
are read back as they were. A line whose "actor" is not you is refused
unless --keep-actors (an operator loading other agents' memories). Every line is checked first: any bad line rejects
the whole file (each one is reported) unless --skip-invalid. Memories are
written in batches of --batch-size, each one transaction (with its
postings and vectors); the store is released between batches, and the index
file is brought up to date once at the end. When the embedding endpoint
fails, memories are imported all the same and wait for `reindex`.
\b
Examples:
  cortexctl import memories.jsonl
  some-tool | cortexctl import - --skip-invalid --json
  cortexctl import team-dump.jsonl --keep-actors
""" + exit_status(0, 2, 4, 7, 10, notes={10: "invalid lines (nothing imported)"})
EXPORT_EPILOG = """\b
Writes every memory you can see, with every version, its head fields and IDs,
in ID order; `import` reads it back into an equal store. --out writes the
file atomically.
\b
Examples:
  cortexctl export > memories.jsonl
  cortexctl export --out backup/memories.jsonl
""" + exit_status(0, 2, 4, 7)


def import_(
    ctx: typer.Context,
    file: Annotated[str, typer.Argument(metavar="FILE", help="A JSONL file, or - for stdin.", show_default=False)],
    skip_invalid: Annotated[bool, typer.Option("--skip-invalid", help="Import the good lines, report the bad.")] = False,
    keep_actors: Annotated[bool, typer.Option("--keep-actors", help="Keep lines owned by other actors as theirs (else refused).")] = False,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Memories per transaction.", metavar="N")] = 5000,
    quiet: o.Quiet = False,
    store: o.Store = None, actor: o.Actor = None, wait: o.Wait = None, json: o.Json = False, jsonl: o.Jsonl = False,
) -> None:
    """Load memories in bulk from JSONL."""
    out = Output(json=json, jsonl=jsonl, quiet=quiet)
    cx = o.cortex(ctx, store, actor, wait)
    if file == "-":
        source = readable_stdin("import")
        report = _run(cx, source, out, skip_invalid, keep_actors, batch_size)
    else:
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
            report = _run(cx, fh, out, skip_invalid, keep_actors, batch_size)
    for w in report.warnings:
        out.warn(w)
    if out.machine:
        out.emit(report.to_json())
        return
    for p in report.problems:
        out.warn(f"skipped {p}")
    out.line(f"imported {report.imported} memories in {report.batches} batch{'es' if report.batches != 1 else ''}"
             + (f"; skipped {report.skipped} invalid lines" if report.skipped else ""))
    if report.pending:
        out.hint(f"{report.pending} memories wait for their embedding; run: cortexctl reindex")


def _run(cx, source, out: Output, skip_invalid: bool, keep_actors: bool, batch_size: int):
    with out.progress("importing") as progress:
        return cx.import_jsonl(source, skip_invalid=skip_invalid, keep_actors=keep_actors, batch_size=batch_size,
                               progress=progress)


def export(
    ctx: typer.Context,
    out_path: Annotated[Optional[Path], typer.Option("--out", "-o", help="Write to this file (atomically).", metavar="FILE")] = None,
    store: o.Store = None, actor: o.Actor = None, wait: o.Wait = None,
    jsonl: Annotated[bool, typer.Option("--jsonl", help="JSONL output (the only format; accepted for symmetry).")] = False,
) -> None:
    """Dump every memory you can see as JSONL."""
    cx = o.cortex(ctx, store, actor, wait)
    if out_path is None:
        cx.export_jsonl(sys.stdout.buffer)
        sys.stdout.buffer.flush()
    else:
        n = cx.export_jsonl(out_path)
        sys.stderr.write(f"exported {n} memories to {out_path}\n")


def register(app: typer.Typer) -> None:
    app.command("import", epilog=IMPORT_EPILOG)(import_)
    app.command("export", epilog=EXPORT_EPILOG)(export)
