"""diff, changes and revert: two versions of a memory compared, what changed in a span of time,
and an old version made current again."""

from __future__ import annotations

from cortexctl.ops.catalogue import REF, RO
from cortexctl.ops.spec import Operation, Param, Tool

CHANGE_KINDS = ("written", "updated", "superseded", "forgotten", "unforgotten", "changed")  # engine.changes.KINDS


def _diff(cx, *, ref, from_version, to_version):
    return cx.diff(ref, from_version, to_version)


def _changes(cx, *, since, until, kinds, limit):
    return cx.changes(since=since, until=until, kinds=kinds, limit=limit)


def _revert(cx, *, ref, to):
    return cx.revert(ref, to=to)


OPERATIONS = [
    Operation(
        "diff", _diff, (
            REF,
            Param("from_version", "The version to compare from (default: the one before the current).", type=int,
                  metavar="A"),
            Param("to_version", "The version to compare to (default: the current one).", type=int, metavar="B"),
        ), **RO,
        tool=Tool("Compare two versions", "How two versions of a memory differ: each field that differs (data "
                  "fields, confidence, short and medium forms; before and after) and a unified diff of the full "
                  "text. Default: the current version against the one before it; from_version alone: that "
                  "version against the current one.")),
    Operation(
        "changes", _changes, (
            Param("since", "The start of the span, not included: an RFC 3339 time, a date (midnight UTC), or an "
                  "age like 3h, 2d, 1w.", required=True, metavar="T"),
            Param("until", "The end of the span, included (default: now); the same forms as since.", metavar="T"),
            Param("kinds", "Only these kinds of change.", many=True, choices=CHANGE_KINDS, metavar="KIND"),
            Param("limit", "At most this many changes, the oldest first.", type=int, metavar="N"),
        ), **RO,
        tool=Tool("What changed since", "What happened to the memories you may see in a span of time, oldest "
                  "first, from the store's journal: each memory written, updated, superseded, forgotten, "
                  "un-forgotten or changed (tags, importance, visibility, frames), with when, by whom, the "
                  "version and its short text. Ask at the start of a session with since set to the end of the "
                  "last one.")),
    Operation(
        "revert", _revert, (
            REF,
            Param("to", "The version to make current again.", type=int, required=True, metavar="N"),
        ), idempotent=True,
        tool=Tool("Revert a memory", "Write a new version of a memory equal to an older version (its data, forms "
                  "and confidence); every version stays readable and nothing is deleted. Reverting to what the "
                  "current version already holds writes nothing (changed: false).")),
]
