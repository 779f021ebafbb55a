"""The result documents the engine takes and returns: plain dataclasses, each with its one JSON serializer.

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
    existing: int = 0  # lines skipped because the store holds that memory as it is (skip_existing)

    def to_json(self) -> dict:
        return {
            "imported": self.imported,
            "skipped": self.skipped,
            "skipped_existing": self.existing,
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


def _weights_json(weights) -> dict[str, float]:
    from cortexctl.engine.salience import FACTORS

    return dict(zip(FACTORS, weights))


@dataclass
class AttestResult:
    """What one attest did (SPEC §6): its two journal entries, the memories it bumped,
    the citations it skipped, and the learned weights before and after."""

    seq: int
    learn_seq: int
    intent: str
    outcome: str
    reason: str | None
    affected: list[str]
    skipped: list[tuple[str, str]]  # (the citation as given, why it was skipped)
    citations_delta: int
    access_delta: int
    previous_weights: tuple[float, ...]
    new_weights: tuple[float, ...]
    step_skipped: str | None  # why the EMA step was skipped; None when it was taken

    @property
    def weights_updated(self) -> bool:
        return self.new_weights != self.previous_weights

    def to_json(self) -> dict:
        return {
            "seq": self.seq,
            "learn_seq": self.learn_seq,
            "intent": self.intent,
            "outcome": self.outcome,
            "reason": self.reason,
            "affected": [memory_uri(i) for i in self.affected],
            "skipped": [{"uri": u, "why": why} for u, why in self.skipped],
            "citations_delta": self.citations_delta,
            "access_delta": self.access_delta,
            "previous_weights": _weights_json(self.previous_weights),
            "new_weights": _weights_json(self.new_weights),
            "weights_updated": self.weights_updated,
            "step_skipped": self.step_skipped,
        }


@dataclass
class CompactedItem:
    ref: str
    short: str
    salience: float

    def to_json(self) -> dict:
        return {"ref": self.ref, "short": self.short, "salience": self.salience}


@dataclass
class Checkpoint:
    """A checkpoint record (SPEC §7), as stored in canonical CBOR."""

    intent: str
    step: str
    created_at: datetime
    created_by: str
    budget_tokens: int
    kept: list[str]  # memory URIs
    compacted: list[CompactedItem]
    schema_version: int = 1

    @property
    def uri(self) -> str:
        return f"cortex://journal/logs/{self.intent}/{self.step}"

    def to_json(self) -> dict:
        return {
            "schema_version": self.schema_version,
            "uri": self.uri,
            "intent": self.intent,
            "step": self.step,
            "created_at": iso(self.created_at),
            "created_by": self.created_by,
            "budget_tokens": self.budget_tokens,
            "kept": list(self.kept),
            "compacted": [c.to_json() for c in self.compacted],
        }


@dataclass
class KeptItem:
    uri: str
    why: str  # load-bearing, identity, hard constraint, active goal
    tokens: int
    medium: str


@dataclass
class CompactResult:
    seq: int
    checkpoint: Checkpoint
    kept: list[KeptItem]
    compacted_tokens: list[int]  # per stub, at the short form
    dropped: list[tuple[str, str]]  # (the input as given, why it is not in the checkpoint)
    snapshot_path: str | None
    mirror_error: str | None = None

    @property
    def total_tokens(self) -> int:
        return sum(k.tokens for k in self.kept) + sum(self.compacted_tokens)

    def to_json(self) -> dict:
        return {
            "seq": self.seq,
            "snapshot_uri": self.checkpoint.uri,
            "snapshot_path": self.snapshot_path,
            "mirror_error": self.mirror_error,
            "budget_tokens": self.checkpoint.budget_tokens,
            "total_tokens": self.total_tokens,
            "kept": [{"uri": k.uri, "why": k.why, "tokens": k.tokens, "medium": k.medium} for k in self.kept],
            "compacted": [{**c.to_json(), "tokens": t}
                          for c, t in zip(self.checkpoint.compacted, self.compacted_tokens)],
            "dropped": [{"uri": u, "why": why} for u, why in self.dropped],
            "checkpoint": self.checkpoint.to_json(),
        }


@dataclass
class WriteBack:
    """What a write-back command (remember, outcome, pattern write/reinforce) did.

    ``action``: written (a new memory), touched (a repeated user fact: its use counted, no
    new memory) or reinforced (an existing pattern: a new version with coverage + 1)."""

    id: str
    version: int
    action: str
    seq: int | None
    type: str
    coverage: int | None = None
    strength: float | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def uri(self) -> str:
        return memory_uri(self.id)

    def to_json(self) -> dict:
        doc = {"uri": self.uri, "id": self.id, "version": self.version, "type": self.type,
               "action": self.action, "seq": self.seq, "warnings": self.warnings}
        if self.coverage is not None:
            doc.update(coverage=self.coverage, strength=self.strength)
        return doc


# -- small answers: a count, a dict the engine builds, each as a result with to_json() ----------------
@dataclass
class Count:
    """A scalar answer: how many of something, as ``{what: n}`` (export's memories written, the
    versions of a memory). A command or tool that answers a number answers one of these."""

    what: str
    n: int

    def to_json(self) -> dict:
        return {self.what: self.n}

    def text(self) -> str:
        return str(self.n)


@dataclass
class ReindexResult:
    """``reindex``: the active model, what was embedded and dropped, and what the index file did."""

    model: str
    dim: int | None
    embedded: int
    dropped: int
    index: dict

    @classmethod
    def of(cls, doc: dict) -> "ReindexResult":
        return cls(doc["model"], doc["dim"], doc["embedded"], doc["dropped"], doc["index"])

    def to_json(self) -> dict:
        return {"model": self.model, "dim": self.dim, "embedded": self.embedded, "dropped": self.dropped,
                "index": self.index}


@dataclass
class ConsolidateResult:
    """``consolidate``: what was (or, with dry_run, would be) written from a transcript, and what was
    dropped; ``skipped`` when the actor had consolidated it before (nothing asked, nothing written)."""

    transcript_sha256: str
    dry_run: bool
    written: list[dict]
    dropped: list[dict]
    source: str = ""
    skipped: bool = False

    @classmethod
    def of(cls, doc: dict) -> "ConsolidateResult":
        return cls(doc["transcript_sha256"], doc["dry_run"], doc["written"], doc["dropped"], doc.get("source", ""),
                   doc.get("skipped", False))

    def to_json(self) -> dict:
        out = {"transcript_sha256": self.transcript_sha256, "dry_run": self.dry_run, "skipped": self.skipped,
               "count": len(self.written), "written": self.written, "dropped": self.dropped}
        if self.source:
            out = {"source": self.source, **out}
        return out


@dataclass
class ConsolidateRun:
    """``consolidate`` of several transcripts: each one's result, in the order given."""

    dry_run: bool
    results: list[ConsolidateResult]

    def to_json(self) -> dict:
        return {"dry_run": self.dry_run, "transcripts": len(self.results),
                "consolidated": sum(not r.skipped for r in self.results),
                "skipped": sum(r.skipped for r in self.results),
                "count": sum(len(r.written) for r in self.results),
                "results": [r.to_json() for r in self.results]}

    def docs(self) -> list[dict]:
        return [r.to_json() for r in self.results]


@dataclass
class HealthReport:
    """``healthcheck``: the monitoring payload (SPEC §12) as engine/health.py builds it."""

    doc: dict

    @property
    def status(self) -> str:
        return self.doc["status"]

    def to_json(self) -> dict:
        return self.doc


# -- time travel: diff and changes ------------------------------------------------------------------
@dataclass
class FieldChange:
    """One difference between two versions: ``field`` is its path in ``show --json``
    (``data.statement``, ``confidence``, ``forms.short``); None where a side lacks the field."""

    field: str
    before: Any
    after: Any

    def to_json(self) -> dict:
        return {"field": self.field, "before": self.before, "after": self.after}


@dataclass
class VersionDiff:
    """``diff``: how version ``to`` of a memory differs from version ``from_``: the fields that
    differ and a unified diff of the full rendered text (empty lists: the versions are the same)."""

    id: str
    from_: int
    to: int
    current_version: int
    fields: list[FieldChange]
    text_lines: list[str]

    @property
    def same(self) -> bool:
        return not self.fields and not self.text_lines

    def to_json(self) -> dict:
        return {"uri": memory_uri(self.id), "id": self.id, "from": self.from_, "to": self.to,
                "current_version": self.current_version, "same": self.same,
                "fields": [f.to_json() for f in self.fields], "text": self.text_lines}


@dataclass
class Change:
    """One entry of ``changes``: what happened to a memory (``kind``: written, updated, superseded,
    forgotten, unforgotten or changed), at journal entry ``seq``, stamped ``at``, by ``actor``.
    ``version`` is the version a write or update made (None otherwise); ``text`` the short form
    of that version, or the memory's current one for a change of its head fields. ``detail``
    holds what only some kinds have: ``reason`` (forgotten), ``superseded_by`` (superseded),
    ``fields`` (changed: the head fields that changed)."""

    seq: int
    at: datetime
    kind: str
    id: str
    version: int | None
    actor: str
    text: str
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"seq": self.seq, "at": iso(self.at), "kind": self.kind, "uri": memory_uri(self.id), "id": self.id,
                "version": self.version, "actor": self.actor, "text": self.text, **self.detail}
