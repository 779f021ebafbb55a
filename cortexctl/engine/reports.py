"""The reports of the commands other than find and the writes (verify, import, attest, compact,
reindex, consolidate, healthcheck, changes): plain dataclasses, each with its one JSON serializer, as
``results`` (which gives these names too). Apart from ``results`` so that a command answering none
of them does not define them at its start.

JSON documents are additive: fields may be added, never removed or renamed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cortexctl.memory.ids import memory_uri
from cortexctl.memory.schema import iso


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
