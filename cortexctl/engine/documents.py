"""The JSON documents of answers that are more than one result's ``to_json()``.

Every front end prints the same document for the same answer: the CLI under
``--json`` and the MCP server as a tool's structured result. Answers that are
one object carry their own ``to_json()`` (``Memory``, ``WriteResult``,
``HeadResult``, ``AttestResult``, ``CompactResult``, ``Checkpoint``,
``Pinned``, ``ContextBlock``); the envelopes around lists are built here, once.
Fields may be added to these documents, never renamed or removed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from cortexctl.engine.results import FindHit, Note


def split_found(found: Iterable[str]) -> tuple[list[str], list[str]]:
    """find's remarks as (warnings, notes): a warning is a problem (a lane that could not run),
    a note says how the answer was found (the CLI shows notes only with -v)."""
    warnings, notes = [], []
    for w in found:
        (notes if isinstance(w, Note) else warnings).append(str(w))
    return warnings, notes


def find_document(hits: Sequence[FindHit], found: Iterable[str], docs: list[dict] | None = None) -> dict:
    """``find --json``: the count, the tokens of the results at the form shown, the warnings and
    notes, and one object per result (``docs``, when the caller has already made them)."""
    warnings, notes = split_found(found)
    results = [h.to_json() for h in hits] if docs is None else docs
    return {"count": len(results), "tokens": sum(h.tokens for h in hits), "warnings": warnings, "notes": notes,
            "results": results}


@dataclass
class PatternsAnswer:
    """``patterns``: the proven patterns whose trigger matches the goal, best first."""

    goal: str
    found: list

    def to_json(self) -> dict:
        return {"goal": self.goal, "count": len(self.found), "patterns": [p.to_json() for p in self.found]}

    def text(self) -> str:
        return "\n".join(p.text() for p in self.found) if self.found else ""


def summaries_document(done: Sequence[dict]) -> dict:
    """``session summarize --json``: the summaries made, one object each."""
    return {"count": len(done), "summaries": list(done)}


__all__ = ["split_found", "find_document", "PatternsAnswer", "summaries_document"]
