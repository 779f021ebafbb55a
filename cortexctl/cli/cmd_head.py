"""tag, head, forget and unforget: the mutable head fields and the tombstone."""

from __future__ import annotations

from cortexctl.cli.spec import COMMON, FRAMES, REF, Command, Option, command_for
from cortexctl.ops import lookup


def _print(out, result) -> None:
    from cortexctl.engine.results import iso

    if out.machine:
        out.emit(result.to_json())
        return
    out.line(f"cortex://m/{result.id}")
    parts = [f"tags: {', '.join(result.tags) or '-'}", f"importance: {result.importance}",
             f"visibility: {result.visibility}"]
    if result.frames:
        parts.append(f"frames: {', '.join(result.frames)}")
    if result.tombstone:
        parts.append(f"forgotten: {iso(result.tombstone.at)}")
    out.hint("   ".join(parts) + ("" if result.changed else "   (no change)"))


def _opened(config, store, actor, wait, json, jsonl):
    """The output object (which refuses --json with --jsonl first) and the Cortex."""
    from cortexctl.cli.common import open_cortex
    from cortexctl.cli.output import Output

    out = Output(json=json, jsonl=jsonl)
    return out, open_cortex(config, store, actor, wait)


def tag(config, *, ref, add, remove, store, actor, wait, json, jsonl) -> None:
    out, cx = _opened(config, store, actor, wait, json, jsonl)
    _print(out, lookup("tag").run(cx, ref=ref, add=add, remove=remove))


def head(config, *, ref, importance, visibility, frames, remove_frames, store, actor, wait, json, jsonl) -> None:
    out, cx = _opened(config, store, actor, wait, json, jsonl)
    _print(out, lookup("head").run(cx, ref=ref, importance=importance, visibility=visibility, frames=frames,
                                   remove_frames=remove_frames))


NOT_YOURS = {8: "not your memory"}
COMMANDS = [
    Command(
        ("tag",), "Add or remove tags of a memory.", tag,
        arguments=(REF,),
        options=(Option("add", ("--add",), "Add a tag (repeatable).", many=True, metavar="TAG"),
                 Option("remove", ("--remove",), "Remove a tag (repeatable).", many=True, metavar="TAG"), *COMMON),
        examples=("cortexctl tag 01JD3K --add ops --add deploy", "cortexctl tag 01JD3K --remove stale"),
        exits=(0, 2, 3, 4, 8), exit_notes=NOT_YOURS, op="tag",
    ),
    Command(
        ("head",), "Change importance, visibility or frames of a memory.", head,
        arguments=(REF,),
        options=(
            Option("importance", ("--importance",), "Declared importance 0-10.", type=int, metavar="N"),
            Option("visibility", ("--visibility",), "private, scoped or public.", metavar="V",
                   choices=("private", "scoped", "public")),
            FRAMES,
            Option("remove_frames", ("--remove-frame",), "Remove a frame (repeatable).", many=True,
                   metavar="VERB:KIND:REF"),
            *COMMON,
        ),
        examples=(
            "cortexctl head 01JD3K --importance 9 --visibility public",
            "cortexctl head 01JD3K --frame build:repo:github.com/acme/api",
            "cortexctl head 01JD3K --remove-frame build:repo:github.com/acme/api",
        ),
        exits=(0, 2, 3, 4, 8), exit_notes=NOT_YOURS, op="head",
    ),
    command_for(
        lookup("forget"), ("forget",), "Tombstone a memory: hidden from find, history kept.", positional=("ref",),
        human=_print,
        notes="The memory keeps every version (show and history still work); find hides it\n"
              "unless --include-tombstoned, and update refuses it.",
        examples=('cortexctl forget 01JD3K --reason "superseded by the new key policy"',),
        exits=(0, 1, 2, 3, 4, 8), exit_notes={1: "already forgotten", 8: "not your memory"},
    ),
    command_for(
        lookup("unforget"), ("unforget",), "Undo forget: the memory is found again, with the salience it had.",
        positional=("ref",), human=_print,
        notes="Clears the tombstone (journaled as unforget, replayed by verify). Access, citations\n"
              "and importance were kept while the memory was forgotten, so find ranks it as before.",
        examples=("cortexctl unforget 01JD3K", "cortexctl unforget 01JD3K --json"),
        exits=(0, 1, 2, 3, 4, 8), exit_notes={1: "not forgotten", 8: "not your memory"},
    ),
]
