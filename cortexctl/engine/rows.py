"""Rows and journal payloads: how a memory's head and versions are built, and stored times.

A head or version row is the dict the store keeps (``store.interface.HEAD_FIELDS``,
``VERSION_FIELDS``); a journal payload is canonical CBOR with every time as integer
microseconds since the epoch (UTC). Shared by write, update, import, attest and compact.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Iterable

from cortexctl.engine.results import Tombstone
from cortexctl.errors import IntegrityError, UsageError
from cortexctl.memory import codec
from cortexctl.memory.record import VersionBody
from cortexctl.memory.types import Frame, check_tag


# -- time ------------------------------------------------------------------------------
def utcnow() -> datetime:
    """Now, as the naive UTC datetime the store keeps (a ``Context``'s default clock)."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


def to_naive(text: str) -> datetime:
    """An ISO 8601 time as a naive UTC datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc).replace(tzinfo=None)


_EPOCH = datetime(1970, 1, 1)
_MICROSECOND = timedelta(microseconds=1)


def micros(at: datetime) -> int:
    """A stored time as integer microseconds since the epoch (UTC), as journal payloads hold it."""
    return (at - _EPOCH) // _MICROSECOND


def plain(row: dict) -> dict:
    """A row with times as integer microseconds since the epoch (UTC), for canonical CBOR payloads."""
    return {k: (micros(v) if isinstance(v, datetime) else v) for k, v in row.items()}


# -- head fields ---------------------------------------------------------------------------
def clean_tags(tags: Iterable[str], *, error=UsageError) -> list[str]:
    """Tags checked, without repeats, sorted."""
    return sorted({check_tag(t, error=error) for t in tags})


def clean_frames(frames: Iterable[str], *, error=UsageError) -> list[str]:
    """Frames checked and normalized, without repeats, sorted."""
    return sorted({str(Frame.parse(f, error=error)) for f in frames})


# -- rows ------------------------------------------------------------------------------------
def head_row(
    *, id_: str, body: VersionBody, actor: str, visibility: str, tags: list[str], frames: list[str],
    importance: int, session: str | None, version: int, created_at: datetime, updated_at: datetime,
    confidence: float, tombstone: Tombstone | None = None, access_count: int = 0, citations: int = 0,
    last_used: datetime | None = None, valid_from: datetime | None = None, valid_to: datetime | None = None,
    supersedes: str | None = None, superseded_by: str | None = None,
) -> dict:
    return {
        "id": id_, "type": body.type_code, "actor": actor, "visibility": visibility,
        "tags": tags, "frames": frames, "importance": importance, "session": session,
        "current_version": version, "created_at": created_at, "updated_at": updated_at,
        "short": body.short, "medium": body.medium,
        "tombstone_reason": tombstone.reason if tombstone else None,
        "tombstoned_at": tombstone.at if tombstone else None,
        "tombstoned_by": tombstone.by if tombstone else None,
        "access_count": access_count, "citations": citations, "last_used": last_used,
        "confidence": confidence,  # the current version's, kept on the head for salience
        "valid_from": valid_from, "valid_to": valid_to, "supersedes": supersedes, "superseded_by": superseded_by,
    }


def version_row(
    *, id_: str, version: int, body: VersionBody, created_at: datetime, created_by: str,
    confidence: float, provenance: dict,
) -> dict:
    return {
        "id": id_, "version": version, "type": body.type_code, "data": body.data_bytes,
        "hash": body.hash, "created_at": created_at, "created_by": created_by,
        "confidence": confidence, "provenance": provenance_text(provenance),
        "short": body.short, "medium": body.medium, "forms_override": body.forms_override,
    }


_PROVENANCE_TEXT: dict[tuple[str, str], str] = {}


def provenance_text(provenance: dict) -> str:
    """Provenance as stored: compact JSON with sorted keys. The usual one-key forms
    ({"via": "import"}, ...) are made once."""
    if len(provenance) == 1:
        key = next(iter(provenance.items()))
        if type(key[1]) is str:
            text = _PROVENANCE_TEXT.get(key)
            if text is None:
                text = json.dumps(provenance, sort_keys=True, separators=(",", ":"))
                if len(_PROVENANCE_TEXT) < 64:
                    _PROVENANCE_TEXT[key] = text
            return text
    return json.dumps(provenance, sort_keys=True, separators=(",", ":"))


def provenance_of(version: dict) -> dict:
    """A version's stored provenance; text that is not a JSON object means a damaged store."""
    try:
        value = json.loads(version["provenance"])
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise IntegrityError(
            f"memory {version['id']} version {version['version']} has unreadable provenance (damaged store)"
        )
    return value


def tombstone_of(head: dict) -> Tombstone | None:
    if head["tombstoned_at"] is None:
        return None
    return Tombstone(head["tombstone_reason"], head["tombstoned_at"], head["tombstoned_by"])


def write_payload(head: dict, versions: list[dict]) -> bytes:
    """The journal payload of a write or import: the head and every version, each field left out
    that holds what ``write_implied`` (the head's) or ``version_implied`` (a version's) says a
    reader puts back. A new memory's entry so holds its text once, not three times."""
    h = plain(head)
    vs = [plain(v) for v in versions]
    top = next((v for v in vs if v.get("version") == h.get("current_version")), None)
    if top is not None:
        h = _without(h, write_implied(top))
    if "id" in h and "actor" in h:
        vs = [_without(v, version_implied(h, v)) for v in vs]
    return codec.encode_plain({"head": h, "versions": vs})


def write_implied(top: dict) -> dict:
    """The head fields a write entry may leave out, with the value a reader puts back (times as
    integer microseconds): those of its current version ``top`` (type, forms, confidence, its
    time as the memory's), and a new memory's (no session, frames or tags, no use, no tombstone,
    no valid time, no supersede links)."""
    return {"type": top["type"], "short": top["short"], "medium": top["medium"], "confidence": top["confidence"],
            "created_at": top["created_at"], "updated_at": top["created_at"], "session": None, "frames": [],
            "tags": [], "access_count": 0, "citations": 0, "last_used": None, "tombstone_reason": None,
            "tombstoned_at": None, "tombstoned_by": None, "valid_from": None, "valid_to": None, "supersedes": None,
            "superseded_by": None}


def version_implied(head: dict, version: dict) -> dict:
    """The version fields a write entry may leave out, with the value a reader puts back: the
    memory's ID, its author, forms not overridden, and the hash of the version's type and data
    (None when they cannot be hashed, which no stored hash equals)."""
    try:
        digest = codec.version_hash(version["type"], version["data"])
    except (KeyError, TypeError, ValueError):
        digest = None
    return {"id": head["id"], "created_by": head["actor"], "forms_override": False, "hash": digest}


def _without(row: dict, implied: dict) -> dict:
    """``row`` less each field whose value is the implied one (the same type and value)."""
    out = {}
    for k, v in row.items():
        if k in implied:
            w = implied[k]
            if v is w or (type(v) is type(w) and v == w):
                continue
        out[k] = v
    return out
