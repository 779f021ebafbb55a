"""diff, changes and revert: two versions compared, what changed since a time, an old version back."""

from __future__ import annotations

from cortexctl.cli.spec import Option, command_for
from cortexctl.ops import lookup


def _value(v) -> str:
    import json

    return json.dumps(v, ensure_ascii=False, default=str)


def _diff(out, d) -> None:
    out.line(f"{d.to_json()['uri']}  version {d.from_} -> {d.to} (current {d.current_version})")
    if d.same:
        out.line("no differences" + (" (the memory has one version)" if d.current_version == 1 else ""))
        return
    for f in d.fields:
        out.line(f"{f.field}: {_value(f.before)} -> {_value(f.after)}")
    if d.text_lines:
        out.line()
        for line in d.text_lines:
            out.line(line)


def changes(config, *, since, until, kinds, limit, quiet, store, actor, wait, json, jsonl) -> int:
    """Exit status: 0 when something changed in the span, 1 when nothing did."""
    from cortexctl.cli.common import open_cortex
    from cortexctl.cli.output import Output
    from cortexctl.engine.results import iso

    out = Output(json=json, jsonl=jsonl, quiet=quiet)
    cx = open_cortex(config, store, actor, wait)
    log = lookup("changes").run(cx, since=since, until=until, kinds=kinds, limit=limit)
    status = 0 if log.changed else 1
    if quiet:
        return status
    if out.machine:
        out.emit_many(log.docs(), log.to_json)
        return status
    found = log.changes
    if out.tty:
        refs = cx.short_refs([c.id for c in found]) if found else {}
        out.table(["seq", "at", "kind", "ref", "v", "actor", "short form"],
                  [(c.seq, iso(c.at), c.kind, refs.get(c.id, c.id), c.version or "", c.actor, c.text)
                   for c in found])
    else:
        out.table([], [(c.seq, iso(c.at), c.kind, f"cortex://m/{c.id}", c.version or "", c.actor, c.text)
                       for c in found])
    span = f"after {iso(log.since)} up to {iso(log.until)}"
    if not found:
        out.hint(f"cortexctl: nothing changed {span}")
    elif log.more:
        out.hint(f"cortexctl: the first {len(found)} changes; more follow (raise --limit to see them)")
    return status


def _revert(out, result) -> None:
    out.line(f"{result.uri}/v/{result.version}")
    if not result.changed:
        out.hint("no change: the current version already equals that version; no version written")


NOT_YOURS = {8: "not your memory"}
COMMANDS = [
    command_for(
        lookup("diff"), ("diff",), "Show how two versions of a memory differ.",
        positional=("ref", "from_version", "to_version"), human=_diff,
        notes="""Without versions, the current version is compared with the one before it; with
one (A), version A with the current one; with two, A with B. Each field that
differs is one line (FIELD: BEFORE -> AFTER, named as in show --json:
data.statement, confidence, forms.short, forms.medium), then a unified diff
of the full text. Versions that are the same (or a memory with one version)
print "no differences" and exit 0.
\b
--json: {"id", "from", "to", "same", "fields": [{"field", "before", "after"}],
"text": [the unified diff's lines]}.""",
        examples=(
            "cortexctl diff 01JD3K",
            "cortexctl diff 01JD3K 1",
            "cortexctl diff 01JD3K 1 3 --json",
        ),
        exits=(0, 2, 3, 4, 7), exit_notes={3: "no such memory or version"},
    ),
    command_for(
        lookup("changes"), ("changes",), "List what changed since a time: written, updated, forgotten, ...",
        run=changes, flags={"kinds": ("--kind",)},
        options=(Option("quiet", ("--quiet", "-q"), "Print nothing: the exit status says whether anything changed.",
                        type=bool, default=False),),
        notes="""Reads the store's journal: every memory written, updated, superseded,
forgotten, un-forgotten or changed (tags, importance, visibility, frames)
after --since and up to --until (default: now), oldest first. Only memories
you may see now are listed. A use of a memory (attest, a repeated remember)
is not a change. Each line: seq, time, kind, memory, version (written and
updated), actor, short form; tab-separated when piped.
\b
T is an RFC 3339 time (2026-11-21T09:30:00Z), a date (2026-11-21, midnight
UTC) or an age (90s, 30m, 3h, 2d, 1w). --since may not be in the future,
and --until not before --since.
\b
At the start of a session, an agent asks what changed since its last one:
cortexctl changes --since 2026-11-25T17:40:00Z --json. The answer's "until"
is the --since to give next time.
\b
Exit status as find's: 0 when something changed, 1 when nothing did.""",
        examples=(
            "cortexctl changes --since 2d",
            "cortexctl changes --since 2026-11-21 --until 2026-11-22T12:00:00Z",
            "cortexctl changes --since 1w --kind forgotten --kind superseded --json",
            "cortexctl changes --since 3h --jsonl | jq -r .uri",
            "if cortexctl changes -q --since 1h; then echo changed; fi",
        ),
        exits=(0, 1, 2, 3, 4, 7),
        exit_notes={0: "something changed", 1: "nothing changed", 3: "no store"},
    ),
    command_for(
        lookup("revert"), ("revert",), "Write a new version of a memory equal to an older version.",
        positional=("ref",), human=_revert,
        notes="""The new version has version N's data, forms and confidence; its provenance
says it is a revert to N. Every version stays readable (history, show
--version), and the memory's use counts and the learned weights are not
touched. When the current version already equals version N, nothing is
written.""",
        examples=(
            "cortexctl revert 01JD3K --to 1",
            "cortexctl revert 01JD3K --to 2 --json",
        ),
        exits=(0, 1, 2, 3, 4, 8), exit_notes={1: "memory forgotten", 3: "no such memory or version", **NOT_YOURS},
    ),
]
