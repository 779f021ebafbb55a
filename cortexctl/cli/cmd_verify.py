"""verify: prove the store is sound."""

from __future__ import annotations

import typer

from cortexctl.cli import options as o
from cortexctl.cli.common import exit_status
from cortexctl.cli.output import Output
from cortexctl.errors import IntegrityError

VERIFY_EPILOG = """\b
Recomputes every version hash, checks every head against its latest version,
the frame index against the heads, and the journal for gaps. Reports every
problem and exits 7 if there is one.
\b
Examples:
  cortexctl verify
  cortexctl verify --json --store /var/lib/agent/brain
""" + exit_status(0, 3, 4, 7, notes={3: "no store", 7: "problems found"})


def verify(
    ctx: typer.Context,
    store: o.Store = None, actor: o.Actor = None, wait: o.Wait = None, json: o.Json = False, jsonl: o.Jsonl = False,
) -> None:
    """Check the store's integrity."""
    out = Output(json=json, jsonl=jsonl)
    report = o.cortex(ctx, store, actor, wait).verify()
    if out.machine:
        out.emit(report.to_json())
    else:
        for p in report.problems:
            out.line(f"problem: {p}")
        state = "ok" if report.ok else f"{len(report.problems)} problem(s)"
        out.line(f"{state}: {report.memories} memories, {report.versions} versions, "
                 f"{report.journal} journal entries in {report.store}")
    if not report.ok:
        raise IntegrityError(f"store {report.store} failed verification ({len(report.problems)} problems)")


def register(app: typer.Typer) -> None:
    app.command("verify", epilog=VERIFY_EPILOG)(verify)
