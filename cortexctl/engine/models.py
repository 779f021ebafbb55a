"""The plain dataclasses the engine takes and returns, each with its one JSON serializer.

JSON documents are additive: fields may be added, never removed or renamed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from cortexctl.memory.ids import memory_uri
from cortexctl.memory.schema import format_time


def iso(dt: datetime | None) -> str | None:
    """A stored time (naive UTC) as ISO 8601 text with a Z."""
    if dt is None:
        return None
    return format_time(dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc))


@dataclass
class Tombstone:
    reason: str
    at: datetime
    by: str

    def to_json(self) -> dict:
        return {"reason": self.reason, "at": iso(self.at), "by": self.by}


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
        }
        if form is not None:
            doc["form"] = form
            doc["text"] = self.form(form)
        return doc


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

    @property
    def uri(self) -> str:
        return memory_uri(self.id)

    def to_json(self) -> dict:
        return {
            "uri": self.uri,
            "version_uri": memory_uri(self.id, self.version),
            "id": self.id,
            "version": self.version,
            "seq": self.seq,
            "changed": self.changed,
            "embedding": "stored" if self.embedded else "pending",
            "warnings": self.warnings,
        }


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
        }


@dataclass
class LineProblem:
    line: int
    message: str

    def to_json(self) -> dict:
        return {"line": self.line, "message": self.message}

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


@dataclass
class ImportReport:
    imported: int
    skipped: int
    batches: int
    problems: list[LineProblem]
    first_seq: int | None
    last_seq: int | None
    pending: int = 0  # imported memories waiting for their embedding
    warnings: list[str] = field(default_factory=list)
    index: dict | None = None  # what was done to the index file

    def to_json(self) -> dict:
        return {
            "imported": self.imported,
            "skipped": self.skipped,
            "batches": self.batches,
            "problems": [p.to_json() for p in self.problems],
            "first_seq": self.first_seq,
            "last_seq": self.last_seq,
            "pending_embeddings": self.pending,
            "warnings": self.warnings,
            "index": self.index,
        }


@dataclass
class Problem:
    check: str
    message: str
    ref: str | None = None

    def to_json(self) -> dict:
        return {"check": self.check, "ref": self.ref, "message": self.message}

    def __str__(self) -> str:
        return f"{self.check}: {self.ref + ': ' if self.ref else ''}{self.message}"


@dataclass
class VerifyReport:
    store: str
    memories: int
    versions: int
    journal: int
    problems: list[Problem]

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict:
        return {
            "ok": self.ok,
            "store": self.store,
            "memories": self.memories,
            "versions": self.versions,
            "journal_entries": self.journal,
            "problems": [p.to_json() for p in self.problems],
        }
