"""remember and outcome: the write-back commands an agent loop calls (SPEC §8)."""

from __future__ import annotations

from cortexctl.cli.spec import COMMON, Argument, Command, Option


def _emit(json, jsonl, result) -> None:
    from cortexctl.cli.common import emit_result

    touched = "already known: the existing user fact was touched, not written again"
    emit_result(json, jsonl, result, result.uri, touched if result.action == "touched" else None)


def remember(config, *, text, user, store, actor, wait, json, jsonl) -> None:
    from cortexctl.cli.common import open_cortex

    _emit(json, jsonl, open_cortex(config, store, actor, wait).remember(text, user=user))


def outcome(config, *, text, status, intent, store, actor, wait, json, jsonl) -> None:
    from cortexctl.cli.common import open_cortex

    _emit(json, jsonl, open_cortex(config, store, actor, wait).outcome(text, status=status, intent=intent))


COMMANDS = [
    Command(
        ("remember",), "Remember a fact about the world, or about the user (--user).", remember,
        arguments=(Argument("text", "TEXT", "The fact."),),
        options=(Option("user", ("--user",), "A fact about the user: part of the pinned user profile.",
                        type=bool, default=False), *COMMON),
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
    Command(
        ("outcome",), "Record how a task ended: an event with its status.", outcome,
        arguments=(Argument("text", "TEXT", "What was done and how it ended."),),
        options=(Option("status", ("--status",), "success, failure or partial.", metavar="STATUS", required=True,
                        choices=("success", "failure", "partial")),
                 Option("intent", ("--intent",), "The intent this outcome belongs to (kept in the provenance).",
                        metavar="ID"),
                 *COMMON),
        notes="Writes an event of kind outcome whose outcome is the status.",
        examples=('cortexctl outcome "Rotated the deploy key" --status success',
                  'cortexctl outcome "Migration stopped at step 3" --status partial --intent migrate-42 --json'),
        exits=(0, 2, 4, 10),
    ),
]
