"""The result documents the engine takes and returns: plain dataclasses, each with its one JSON serializer.
Those of find and the writes are here; the other commands' reports are in ``engine/reports.py`` and
given from here as well.

JSON documents are additive: fields may be added, never removed or renamed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cortexctl.memory.ids import memory_uri
from cortexctl.memory.schema import iso


@dataclass
class Tombstone:
    reason: str
    at: datetime
    by: str

    def to_json(self) -> dict:
        return {"reason": self.reason, "at": iso(self.at), "by": self.by}


@dataclass(frozen=True)
class AsOf:
    """Record time: the time an answer was asked for, and the journal entry it stands at (the last
    stamped at or before that time; 0 when the journal begins later)."""

    at: datetime
    seq: int

    def to_json(self) -> dict:
        return {"at": iso(self.at), "seq": self.seq}

    def text(self) -> str:
        return f"as of {iso(self.at)} (journal entry {self.seq})"


@dataclass
class Memory:
    """One memory as seen at one version (the current one unless asked otherwise)."""

    id: str
    type: str
    version: int
    current_version: int
    data: dict[str, Any]
    short: str
    medium: str
    tags: list[str]
    frames: list[str]
    importance: int
    visibility: str
    actor: str
    session: str | None
    created_at: datetime
    updated_at: datetime
    version_created_at: datetime
    created_by: str
    confidence: float
    provenance: dict[str, Any]
    hash: str
    forms_override: bool
    tombstone: Tombstone | None
    access_count: int = 0
    citations: int = 0
    last_used: datetime | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    supersedes: str | None = None
    superseded_by: str | None = None

    @property
    def uri(self) -> str:
        return memory_uri(self.id)

    @property
    def version_uri(self) -> str:
        return memory_uri(self.id, self.version)

    def form(self, name: str) -> str:
        from cortexctl.memory import forms

        if name == "short":
            return self.short
        if name == "medium":
            return self.medium
        return forms.render_full(self.type, self.data)

    def to_json(self, form: str | None = None) -> dict:
        doc = {
            "uri": self.uri,
            "version_uri": self.version_uri,
            "id": self.id,
            "type": self.type,
            "version": self.version,
            "current_version": self.current_version,
            "data": self.data,
            "forms": {"short": self.short, "medium": self.medium},
            "tags": self.tags,
            "frames": self.frames,
            "importance": self.importance,
            "visibility": self.visibility,
            "actor": self.actor,
            "session": self.session,
            "created_at": iso(self.created_at),
            "updated_at": iso(self.updated_at),
            "version_created_at": iso(self.version_created_at),
            "created_by": self.created_by,
            "confidence": self.confidence,
            "provenance": self.provenance,
            "hash": self.hash,
            "forms_override": self.forms_override,
            "tombstoned": self.tombstone is not None,
            "tombstone": self.tombstone.to_json() if self.tombstone else None,
            "salience": {
                "access_count": self.access_count,
                "citations": self.citations,
                "last_used": iso(self.last_used),
            },
            "valid_from": iso(self.valid_from),
            "valid_to": iso(self.valid_to),
            "supersedes": self.supersedes,
            "superseded_by": self.superseded_by,
        }
        if form is not None:
            doc["form"] = form
            doc["text"] = self.form(form)
        return doc


@dataclass
class ChainLink:
    """One memory of a supersede chain (``history``), oldest first."""

    id: str
    short: str
    valid_from: datetime | None
    valid_to: datetime | None
    tombstoned: bool
    this: bool  # the memory asked about

    def to_json(self) -> dict:
        return {"uri": memory_uri(self.id), "id": self.id, "short": self.short, "valid_from": iso(self.valid_from),
                "valid_to": iso(self.valid_to), "tombstoned": self.tombstoned, "this": self.this}


@dataclass
class VersionInfo:
    id: str
    version: int
    type: str
    created_at: datetime
    created_by: str
    confidence: float
    hash: str
    short: str
    current: bool

    def to_json(self) -> dict:
        return {
            "uri": memory_uri(self.id, self.version),
            "version": self.version,
            "type": self.type,
            "created_at": iso(self.created_at),
            "created_by": self.created_by,
            "confidence": self.confidence,
            "hash": self.hash,
            "short": self.short,
            "current": self.current,
        }


@dataclass
class WriteResult:
    id: str
    version: int
    seq: int | None
    changed: bool = True
    embedded: bool = True  # False: the memory waits for its embedding (see reindex)
    warnings: list[str] = field(default_factory=list)
    supersedes: str | None = None  # update --supersede: the memory this new one supersedes

    @property
    def uri(self) -> str:
        return memory_uri(self.id)

    def to_json(self) -> dict:
        doc = {
            "uri": self.uri,
            "version_uri": memory_uri(self.id, self.version),
            "id": self.id,
            "version": self.version,
            "seq": self.seq,
            "changed": self.changed,
            "embedding": "stored" if self.embedded else "pending",
            "warnings": self.warnings,
        }
        if self.supersedes is not None:
            doc["supersedes"] = self.supersedes
        return doc


@dataclass
class SupersedeResult:
    """A supersede: ``new`` replaces ``old``, whose valid interval ends at ``valid_to``."""

    old: str
    new: str
    valid_to: datetime | None
    seq: int | None  # the old memory's journal entry (None: the pair was already linked)
    changed: bool

    def to_json(self) -> dict:
        return {"uri": memory_uri(self.old), "id": self.old, "superseded_by": self.new,
                "superseded_by_uri": memory_uri(self.new), "valid_to": iso(self.valid_to), "seq": self.seq,
                "changed": self.changed}

    def text(self) -> str:
        return f"{memory_uri(self.old)} superseded by {memory_uri(self.new)} (valid to {iso(self.valid_to)})"


@dataclass
class HeadResult:
    """The mutable head fields after tag/head/forget."""

    id: str
    tags: list[str]
    frames: list[str]
    importance: int
    visibility: str
    tombstone: Tombstone | None
    seq: int | None
    changed: bool

    def to_json(self) -> dict:
        return {
            "uri": memory_uri(self.id),
            "id": self.id,
            "tags": self.tags,
            "frames": self.frames,
            "importance": self.importance,
            "visibility": self.visibility,
            "tombstoned": self.tombstone is not None,
            "tombstone": self.tombstone.to_json() if self.tombstone else None,
            "seq": self.seq,
            "changed": self.changed,
        }


@dataclass
class FindQuery:
    types: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    frames: list[str] = field(default_factory=list)
    include_tombstoned: bool = False
    k: int = 10
    form: str = "short"
    near: str | None = None
    budget_tokens: int | None = None
    session: str | None = None  # only this session's memories (zoom in)
    summaries: bool = False  # only session summaries (zoom out)
    include_superseded: bool = False  # also memories whose valid time has ended (superseded ones among them)
    valid_at: str | datetime | None = None  # only memories valid at this time (RFC 3339 or a date)
    as_of: datetime | None = None  # as the store stood at this record time (``Cortex.find_as_of`` sets it)


@dataclass
class FindHit:
    id: str
    type: str
    version: int
    text: str
    form: str
    tags: list[str]
    frames: list[str]
    importance: int
    visibility: str
    actor: str
    updated_at: datetime
    tombstoned: bool
    lanes: list[str]
    rank: int
    score: float = 0.0
    similarity: float | None = None
    lexical: float | None = None
    salience: float = 0.0
    tokens: int = 0
    matched: bool = True  # with --near: found by the query's words or meaning, not by salience alone
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    supersedes: str | None = None
    superseded_by: str | None = None
    ended: bool = False  # its valid time had ended when found (superseded or past its valid_to)

    @property
    def uri(self) -> str:
        return memory_uri(self.id)

    def to_json(self) -> dict:
        return {
            "rank": self.rank,
            "uri": memory_uri(self.id),
            "id": self.id,
            "type": self.type,
            "version": self.version,
            "form": self.form,
            "text": self.text,
            "tags": self.tags,
            "frames": self.frames,
            "importance": self.importance,
            "visibility": self.visibility,
            "actor": self.actor,
            "updated_at": iso(self.updated_at),
            "tombstoned": self.tombstoned,
            "lanes": self.lanes,
            "score": self.score,
            "similarity": self.similarity,
            "lexical": self.lexical,
            "salience": self.salience,
            "tokens": self.tokens,
            "matched": self.matched,
            "valid_from": iso(self.valid_from),
            "valid_to": iso(self.valid_to),
            "supersedes": self.supersedes,
            "superseded_by": self.superseded_by,
            "ended": self.ended,
        }


class Note(str):
    """A remark on how an answer was found (an exact search instead of the index, an index
    rebuilt): not a problem, so the CLI shows it only with -v."""


# The reports of the other commands (verify, import, attest, compact, reindex, consolidate,
# healthcheck, changes), kept apart so that a command that answers none of them (find, write) does
# not define them at its start; they are importable from here as well.
_REPORTS = frozenset({
    "LineProblem", "ImportReport", "Problem", "VerifyReport", "AttestResult", "CompactedItem", "Checkpoint",
    "KeptItem", "CompactResult", "WriteBack", "Count", "ReindexResult", "ConsolidateResult",
    "ConsolidateRun", "HealthReport", "FieldChange", "VersionDiff", "Change",
})


def __getattr__(name: str):
    if name in _REPORTS:
        from cortexctl.engine import reports

        return getattr(reports, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
