"""verify: prove the store is sound."""

from __future__ import annotations

from cortexctl.cli.spec import COMMON, Command


def verify(config, *, store, actor, wait, json, jsonl) -> None:
    from cortexctl.cli.common import open_cortex
    from cortexctl.cli.output import Output
    from cortexctl.errors import IntegrityError

    out = Output(json=json, jsonl=jsonl)
    report = open_cortex(config, store, actor, wait).verify()
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
    Command(
        ("verify",), "Check the store's integrity.", verify,
        options=COMMON,
        notes="""Recomputes every version hash, checks every head against its latest version,
the frame index against the heads, and the journal for gaps. Reports every
problem and exits 7 if there is one.""",
        examples=("cortexctl verify", "cortexctl verify --json --store /var/lib/agent/brain"),
        exits=(0, 3, 4, 7), exit_notes={3: "no store", 7: "problems found"},
    ),
]
