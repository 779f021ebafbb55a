"""write and update: new memories and new versions."""

from __future__ import annotations

from cortexctl.cli import complete
from cortexctl.cli.spec import SETS, command_for
from cortexctl.ops import lookup


def write(config, *, type_name, text, sets, data, tags, frames, importance, visibility, confidence, session,
          short_form, medium_form, dedupe, supersedes, store, actor, wait, json, jsonl) -> None:
    from cortexctl.cli.common import open_cortex, read_data
    from cortexctl.cli.output import Output

    out = Output(json=json, jsonl=jsonl)
    result = lookup("write").run(
        open_cortex(config, store, actor, wait), type=type_name, text=text, data=read_data(data), sets=sets,
        tags=tags, frames=frames, importance=importance, visibility=visibility, confidence=confidence,
        session=session, short_form=short_form, medium_form=medium_form, dedupe=dedupe, supersedes=supersedes,
    )
    for w in result.warnings:
        out.warn(w)
    if out.machine:
        out.emit(result.to_json())
    else:
        out.line(result.uri)


def update(config, *, ref, text, sets, data, confidence, short_form, medium_form, supersede, store, actor, wait,
           json, jsonl) -> None:
    from cortexctl.cli.common import open_cortex, read_data
    from cortexctl.cli.output import Output

    out = Output(json=json, jsonl=jsonl)
    result = lookup("update").run(
        open_cortex(config, store, actor, wait), ref=ref, text=text, data=read_data(data), sets=sets,
        confidence=confidence, short_form=short_form, medium_form=medium_form, supersede=supersede,
    )
    for w in result.warnings:
        out.warn(w)
    if out.machine:
        out.emit(result.to_json())
    elif result.supersedes is not None:
        out.line(result.uri)
    else:
        out.line(f"{result.uri}/v/{result.version}")
        if not result.changed:
            out.hint("no change: the memory already holds this data; no version written")


COMMANDS = [
    command_for(
        lookup("write"), ("write",), "Write a new memory and print its URI.", run=write,
        positional=("type", "text"), names={"type": "type_name"}, flags={"tags": ("--tag",), "frames": ("--frame",)},
        completers={"type": complete.memory_types, "frames": complete.frames}, options=(SETS,),
        notes="TEXT fills the type's main field (statement, name, topic, summary,\n"
              "description). Later sources win: --data, then --set, then TEXT.\n"
              "Writing a memory whose type and text (words, in lower case) equal a live\n"
              "memory of yours warns and names it; --dedupe prints that one instead.\n"
              "--set valid_from=T and --set valid_to=T (RFC 3339 or a date) say when it\n"
              "holds in the world (head fields, not data). --supersedes OLD replaces OLD:\n"
              "OLD's valid time ends where this one's begins (now by default) and both\n"
              "are linked; nothing is deleted (see cortexctl supersede).",
        examples=(
            'cortexctl write fact "The deploy key rotates monthly" --tag ops',
            'cortexctl write preference "tabs over spaces" --set polarity=avoid --set strength=0.8',
            'cortexctl write constraint "never push to main" --set strength=hard --importance 9',
            'cortexctl write goal --data \'{"statement": "ship v2", "horizon": "2026-12-31"}\'',
            'cortexctl write event "deploy failed" --set outcome=failure --frame deliver:repo:acme/api --json',
            'cortexctl write fact "The deploy key rotates monthly" --dedupe',
            'cortexctl write fact "The deploy key rotates weekly" --supersedes 01JD3K',
            'cortexctl write fact "Office closed" --set valid_from=2026-12-24 --set valid_to=2026-12-27',
        ),
        exits=(0, 1, 2, 3, 4, 7, 8, 10),
        exit_notes={1: "the superseded memory is forgotten", 3: "no memory --supersedes names",
                    8: "--supersedes names another actor's memory",
                    10: "invalid data, a valid interval ending before it begins, or the memory --supersedes\n"
                        "names is already superseded"},
    ),
    command_for(
        lookup("update"), ("update",), "Write a new version of a memory; old versions stay readable.", run=update,
        positional=("ref", "text"), options=(SETS,),
        notes="The new version starts from the current one; given fields replace its fields.\n"
              "Old versions stay readable with: cortexctl show REF --version N\n"
              "--set valid_from=T / valid_to=T alone change when it holds in the world:\n"
              "no new version. --supersede writes a new memory instead (same type, tags,\n"
              "frames, importance, visibility, session; the current data with the\n"
              "changes) that supersedes this one, and prints its URI.",
        examples=(
            'cortexctl update 01JD3K "The deploy key rotates weekly"',
            "cortexctl update cortex://m/01JD3KQ5ZC8M3V6W4Y2T7N9R0B --set confidence=0.6",
            'cortexctl update 01JD3K "The deploy key rotates weekly" --supersede',
            "cortexctl update 01JD3K --set valid_to=2026-06-30",
        ),
        exits=(0, 1, 2, 3, 4, 8, 10),
        exit_notes={1: "memory forgotten", 8: "not your memory",
                    10: "invalid data, a valid interval ending before it begins, or (--supersede) already\n"
                        "superseded"},
    ),
]
