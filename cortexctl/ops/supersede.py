"""supersede: link two existing memories, the new one replacing the old one in valid time."""

from __future__ import annotations

from cortexctl.ops.spec import Operation, Param, Tool


def _supersede(cx, *, old, by):
    return cx.supersede(old, by=by)


OPERATIONS = [
    Operation(
        "supersede", _supersede, (
            Param("old", "The memory that no longer holds: its URI, ID, a unique start of its ID or its short ref.",
                  required=True, metavar="OLD"),
            Param("by", "The memory that replaces it (the same forms of reference).", required=True, metavar="NEW"),
        ), destructive=False, idempotent=True,
        tool=Tool("Supersede a memory", "Mark a memory of yours as replaced by another of yours: the old one's "
                  "valid time ends where the new one's begins (now unless it has a valid_from), both are linked "
                  "(superseded_by, supersedes) and find leaves the old one out unless include_superseded. Nothing "
                  "is deleted; linking the same pair again changes nothing.")),
]
