"""remember and outcome: the write-back commands an agent loop calls (SPEC §8)."""

from __future__ import annotations

from cortexctl.cli.spec import command_for
from cortexctl.ops import lookup


def _print(out, result) -> None:
    out.line(result.uri)
    if result.action == "touched":
        out.hint("already known: the existing user fact was touched, not written again")


COMMANDS = [
    command_for(
        lookup("remember"), ("remember",), "Remember a fact about the world, or about the user (--user).",
        positional=("text",), human=_print,
        notes="""A fact about the world is a fact with subject cortex://knowledge/world. A
user fact (--user) has subject cortex://knowledge/user and the tag user;
the newest 12 distinct ones form the user profile in `pinned`. A user fact
equal to one you already have after normalization (case, spacing, trailing
punctuation) is not written again: the existing one is touched (use count
+ 1) and its URI printed; --json says "action": "touched".""",
        examples=('cortexctl remember "The staging database is at db-staging.internal:5432"',
                  'cortexctl remember --user "Prefers answers in French"',
                  'cortexctl remember --user "prefers answers in french." --json'),
        exits=(0, 2, 4, 10),
    ),
    command_for(
        lookup("outcome"), ("outcome",), "Record how a task ended: an event with its status.", positional=("text",),
        human=_print,
        notes="Writes an event of kind outcome whose outcome is the status.",
        examples=('cortexctl outcome "Rotated the deploy key" --status success',
                  'cortexctl outcome "Migration stopped at step 3" --status partial --intent migrate-42 --json'),
        exits=(0, 2, 4, 10),
    ),
]
