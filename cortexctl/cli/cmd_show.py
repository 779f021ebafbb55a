"""show and history: one memory, and all its versions."""

from __future__ import annotations

from cortexctl.cli.spec import COMMON, REF, Command, Option, form_option


def show(config, *, ref, version, form, store, actor, wait, json, jsonl) -> None:
    from cortexctl.cli.common import open_cortex
    from cortexctl.cli.output import Output
    from cortexctl.engine.results import iso

    out = Output(json=json, jsonl=jsonl)
    m = open_cortex(config, store, actor, wait).show(ref, version=version)
    if out.machine:
        out.emit(m.to_json(form))
        return
    out.line(f"{m.uri}  (version {m.version} of {m.current_version})")
    out.line(f"type: {m.type}   actor: {m.actor}   visibility: {m.visibility}   importance: {m.importance}")
    if m.tags:
        out.line(f"tags: {', '.join(m.tags)}")
    if m.frames:
        out.line(f"frames: {', '.join(m.frames)}")
    out.line(f"created: {iso(m.version_created_at)} by {m.created_by}   version confidence: {m.confidence:g}")
    out.line(f"hash: {m.hash}")
    if m.tombstone:
        out.line(f"forgotten: {iso(m.tombstone.at)} by {m.tombstone.by}: {m.tombstone.reason}")
    out.line()
    out.line(m.form(form))


def history(config, *, ref, store, actor, wait, json, jsonl) -> None:
    from cortexctl.cli.common import open_cortex
    from cortexctl.cli.output import Output
    from cortexctl.engine.results import iso

    out = Output(json=json, jsonl=jsonl)
    versions = open_cortex(config, store, actor, wait).history(ref)
    if out.machine:
        out.emit_many((v.to_json() for v in versions),
                      lambda docs: {"uri": f"cortex://m/{versions[0].id}", "versions": docs})
        return
    out.table(
        ["version", "created", "by", "hash", "short form"],
        [(f"{v.version}{'*' if v.current else ''}", iso(v.created_at), v.created_by, v.hash[:12], v.short)
         for v in versions],
    )


COMMANDS = [
    Command(
        ("show",), "Show one memory (its latest version unless --version).", show,
        arguments=(REF,),
        options=(Option("version", ("--version",), "Show this version.", type=int, metavar="N"),
                 form_option("full"), *COMMON),
        examples=(
            "cortexctl show 01JD3K",
            "cortexctl show cortex://m/01JD3KQ5ZC8M3V6W4Y2T7N9R0B/v/1",
            "cortexctl show 01JD3K --version 2 --form short",
            "cortexctl show 01JD3K --json | jq .data",
        ),
        exits=(0, 2, 3, 4, 7),
    ),
    Command(
        ("history",), "List every version of a memory, oldest first.", history,
        arguments=(REF,), options=COMMON,
        examples=("cortexctl history 01JD3K", "cortexctl history 01JD3K --jsonl"),
        exits=(0, 2, 3, 4, 7),
    ),
]
