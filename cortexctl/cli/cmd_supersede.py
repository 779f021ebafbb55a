"""supersede: mark a memory as replaced by another (valid time and links; nothing deleted)."""

from __future__ import annotations

from cortexctl.cli.spec import command_for
from cortexctl.ops import lookup


def _print(out, result) -> None:
    out.line(result.text())
    if not result.changed:
        out.hint("no change: already linked")


COMMANDS = [
    command_for(
        lookup("supersede"), ("supersede",), "Mark a memory as superseded by another one.", positional=("old",),
        human=_print,
        notes="NEW supersedes OLD: OLD's valid time ends where NEW's begins (NEW's\n"
              "valid_from, set to now when it has none), OLD gets superseded_by and NEW\n"
              "supersedes; nothing is deleted. Default find leaves OLD out\n"
              "(find --include-superseded shows it, marked). Linking the same pair again\n"
              "changes nothing. To write the new memory and link it at once:\n"
              "cortexctl write TYPE TEXT --supersedes OLD, or cortexctl update OLD --supersede.",
        examples=(
            "cortexctl supersede 01JD3K --by 01JD9X",
            "cortexctl supersede cortex://m/01JD3KQ5ZC8M3V6W4Y2T7N9R0B --by 01JD9X --json",
        ),
        exits=(0, 1, 2, 3, 4, 8, 10),
        exit_notes={1: "OLD or NEW forgotten", 2: "OLD and NEW are the same memory", 8: "not your memory",
                    10: "OLD already superseded by another memory, a cycle, or an interval ending before it begins"},
    ),
]
