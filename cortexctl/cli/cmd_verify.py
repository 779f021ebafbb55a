"""verify: prove the store is sound."""

from __future__ import annotations

from cortexctl.cli.spec import command_for
from cortexctl.ops import lookup


def verify(config, *, jobs, store, actor, wait, json, jsonl) -> None:
    from cortexctl.cli.common import open_cortex
    from cortexctl.cli.output import Output
    from cortexctl.errors import IntegrityError

    out = Output(json=json, jsonl=jsonl)
    report = lookup("verify").run(open_cortex(config, store, actor, wait), jobs=jobs)
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


COMMANDS = [
    command_for(
        lookup("verify"), ("verify",), "Check the store's integrity.", run=verify,
        flags={"jobs": ("--jobs", "-j")}, envs={"jobs": "CORTEXCTL_VERIFY_JOBS"},
        notes="""Recomputes every version hash, checks every head against its latest version,
the frame index against the heads, and the journal for gaps; replays the
journal and compares every memory, the lexical postings and the vectors.
Reports every problem and exits 7 if there is one. On a large store the
per-memory checks are split by memory ID across --jobs worker processes (like
make -j; default: the setting verify.jobs, else one per CPU); the report is
the same whatever the number. Each process holds DuckDB to 512 MB, spilling
into the store's scratch area; work that does not fit is checked again
without the limit.""",
        examples=("cortexctl verify", "cortexctl verify --json --store /var/lib/agent/brain",
                  "cortexctl verify --jobs 1"),
        exits=(0, 3, 4, 7), exit_notes={3: "no store", 7: "problems found"},
    ),
]
