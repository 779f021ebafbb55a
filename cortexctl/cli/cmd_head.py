"""tag, head, forget and unforget: the mutable head fields and the tombstone."""

from __future__ import annotations

from cortexctl.cli import complete
from cortexctl.cli.spec import command_for
from cortexctl.ops import lookup


def _print(out, result) -> None:
    from cortexctl.engine.results import iso

    out.line(f"cortex://m/{result.id}")
    parts = [f"tags: {', '.join(result.tags) or '-'}", f"importance: {result.importance}",
             f"visibility: {result.visibility}"]
    if result.frames:
        parts.append(f"frames: {', '.join(result.frames)}")
    if result.tombstone:
        parts.append(f"forgotten: {iso(result.tombstone.at)}")
    out.hint("   ".join(parts) + ("" if result.changed else "   (no change)"))


NOT_YOURS = {8: "not your memory"}
COMMANDS = [
    command_for(
        lookup("tag"), ("tag",), "Add or remove tags of a memory.", positional=("ref",), human=_print,
        examples=("cortexctl tag 01JD3K --add ops --add deploy", "cortexctl tag 01JD3K --remove stale"),
        exits=(0, 2, 3, 4, 8), exit_notes=NOT_YOURS,
    ),
    command_for(
        lookup("head"), ("head",), "Change importance, visibility or frames of a memory.", positional=("ref",),
        flags={"frames": ("--frame",), "remove_frames": ("--remove-frame",)},
        completers={"frames": complete.frames}, human=_print,
        examples=(
            "cortexctl head 01JD3K --importance 9 --visibility public",
            "cortexctl head 01JD3K --frame build:repo:github.com/acme/api",
            "cortexctl head 01JD3K --remove-frame build:repo:github.com/acme/api",
        ),
        exits=(0, 2, 3, 4, 8), exit_notes=NOT_YOURS,
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
