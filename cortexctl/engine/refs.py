"""Resolving references (IDs, short refs, ID prefixes, memory URIs) to the heads an actor may see.

A reference of 6 to 25 characters names the visible memory whose ID starts or ends
with it. ULIDs begin with their creation time, so memories written together share
their first characters; their ends are random. A memory's *short ref* is the
shortest ending of its ID, at least ``SHORT_REF`` characters, that no other ID
(of any actor) starts or ends with: what ``find`` shows, and always resolves back.
"""

from __future__ import annotations

from typing import Any, Sequence

from cortexctl.errors import AmbiguousRef, NotFound, Refused
from cortexctl.memory.ids import parse_ref
from cortexctl.store.interface import HEAD_FIELDS, Tx, Viewer

MISSING, AMBIGUOUS, NO_VERSION = "missing", "ambiguous", "no such version"


def look_up(tx: Tx, actor: str | Viewer, refs: dict[str, Any], fields: Sequence[str] = HEAD_FIELDS) -> dict[str, dict | str]:
    """Each parsed reference's visible head (with ``fields``), or why there is none:
    MISSING, AMBIGUOUS, or NO_VERSION for a version URI past the memory's latest version.
    Full IDs are looked up together, in one query."""
    full = [r.id_or_prefix for r in refs.values() if r.is_full]
    known = {h["id"]: h for h in tx.heads_by_ids(full, actor, fields)}
    out: dict[str, dict | str] = {}
    for text, ref in refs.items():
        if ref.is_full:
            found = [known[ref.id_or_prefix]] if ref.id_or_prefix in known else []
        else:
            found = tx.heads_by_prefix(ref.id_or_prefix, actor, limit=2)
        if not found:
            out[text] = MISSING
        elif len(found) > 1:
            out[text] = AMBIGUOUS
        elif ref.version is not None and ref.version > found[0]["current_version"]:
            out[text] = NO_VERSION
        else:
            out[text] = found[0]
    return out


SHORT_REF = 8


def short_refs(tx: Tx, ids: Sequence[str]) -> dict[str, str]:
    """id -> its short ref (see the module docstring)."""
    out: dict[str, str] = {}
    todo, n = list(dict.fromkeys(ids)), SHORT_REF
    while todo and n < 26:
        parts = {i: i[-n:] for i in todo}
        counts = tx.ref_counts(sorted(set(parts.values())))
        out.update({i: p for i, p in parts.items() if counts.get(p, 0) <= 1})
        todo, n = [i for i in todo if i not in out], n + 2
    out.update({i: i for i in todo})
    return out


def resolve(tx: Tx, actor: str | Viewer, text: str) -> dict:
    """The one visible head ``text`` names; NotFound or AmbiguousRef otherwise."""
    ref = parse_ref(text)
    heads = tx.heads_by_prefix(ref.id_or_prefix, actor)
    if not heads:
        raise NotFound(f"no memory {text!r}", hint="list memories with: cortexctl find")
    if len(heads) > 1:
        shown = ", ".join(h["id"] for h in heads[:5])
        raise AmbiguousRef(
            f"reference {text!r} is ambiguous: it matches {shown}{' and more' if len(heads) > 5 else ''}",
            hint="give more characters of the ID (its start or its end), or the whole ID",
        )
    return heads[0]


def check_owner(head: dict, actor: str) -> None:
    """Refused unless ``actor`` owns the memory."""
    if head["actor"] != actor:
        raise Refused(
            f"memory {head['id']} belongs to actor {head['actor']!r}; only its owner can change it"
        )
