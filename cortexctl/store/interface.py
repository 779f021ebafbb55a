"""What the engine asks of a store, in the engine's own terms: ``Storage`` and ``Tx``.

A store keeps memories (a head and its numbered versions), the journal that
records every change, the lexical postings and vectors that find searches, and
what attest and compact keep (learned salience weights, rate-limit buckets,
checkpoints). The engine opens a ``Storage``, takes a ``Tx`` from ``reading()``
(read-only) or ``transaction()`` (read-write, all or nothing) and calls its
methods. It never sees SQL or a connection, so a second backend plugs in by
implementing these two protocols; ``tests/contract`` holds every backend to them.

Data crosses the boundary as plain values:

- a head or version is a dict keyed by the names in ``HEAD_FIELDS`` /
  ``VERSION_FIELDS``; times are naive UTC ``datetime`` objects;
- a journal entry to append is ``(kind, at, actor, ref, payload)``;
- find's filters are a ``Filters`` and the salience parameters a ``Scoring``;
- bulk vector and posting reads return numpy arrays (numpy is loaded only by them).

The DuckDB backend is ``store/db.py`` (``Store``) with ``store/duck.py`` (``DuckTx``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterator, Protocol, Sequence

from cortexctl.errors import CortexError

HEAD_FIELDS = (
    "id", "type", "actor", "visibility", "tags", "frames", "importance", "session",
    "current_version", "created_at", "updated_at", "short", "medium",
    "tombstone_reason", "tombstoned_at", "tombstoned_by",
    "access_count", "citations", "last_used", "confidence",
)
VERSION_FIELDS = (
    "id", "version", "type", "data", "hash", "created_at", "created_by", "confidence",
    "provenance", "short", "medium", "forms_override",
)
# The head fields salience reads (a narrow lookup is cheaper than a whole head).
SALIENCE_FIELDS = ("id", "current_version", "tombstoned_at", "updated_at", "last_used", "importance",
                   "access_count", "citations", "confidence")
JOURNAL_FIELDS = ("seq", "kind", "ts", "actor", "ref", "payload")
WEIGHT_FIELDS = ("recency", "importance", "access", "citations", "confidence")  # salience.FACTORS
CHECKPOINT_FIELDS = ("actor", "intent", "step", "created_at", "seq", "record")
MEMORY_KINDS = ("write", "update", "update_head", "tombstone", "unforget")  # journal kinds about one memory

JournalEntry = tuple[str, datetime, str, "str | None", bytes]  # (kind, at, actor, ref, payload)
FrameFilter = tuple[str, "str | None", "str | None"]  # (verb, kind or None, ref or None)


class NoStore(CortexError):
    """Raised to readers when no store exists at the path yet."""

    exit_code = 3
    kind = "not_found"


class SnapshotUnusable(CortexError):
    """The search snapshot turned out damaged, or the store moved on while it answered: the caller
    asks again through ``Storage.reading`` (the ground truth)."""


@dataclass(frozen=True)
class Filters:
    """Which memories a search may return: those ``actor`` may see (their own and public
    ones), of one of ``types`` (type codes), holding every one of ``tags``, matching every
    frame filter, of ``session`` when given, and not forgotten unless ``include_tombstoned``.
    Empty means any."""

    actor: str
    types: tuple[int, ...] = ()
    tags: tuple[str, ...] = ()
    frames: tuple[FrameFilter, ...] = ()
    include_tombstoned: bool = False
    session: str | None = None  # only memories of this session

    def __post_init__(self) -> None:  # tuples, so that a Filters is hashable whatever it was given
        object.__setattr__(self, "types", tuple(self.types))
        object.__setattr__(self, "tags", tuple(self.tags))
        object.__setattr__(self, "frames", tuple(tuple(f) for f in self.frames))

    @property
    def narrow(self) -> bool:
        """Filters beyond visibility and tombstones: few memories may pass."""
        return bool(self.types or self.tags or self.frames or self.session is not None)


@dataclass(frozen=True)
class Scoring:
    """The salience parameters: now, the recency half-life (seconds) and the five
    weights in ``WEIGHT_FIELDS`` order (``engine/salience.py`` has the formula)."""

    now: datetime
    half_life: float
    weights: tuple[float, ...]


class Tx(Protocol):
    """One transaction (or, from ``Storage.reading``, one read-only view) on a store.

    Valid only inside the ``with`` block that gave it; so are the iterators it returns.
    """

    # -- heads and versions ---------------------------------------------------------
    def insert_memories(self, heads: list[dict], versions: list[dict]) -> None:
        """New memories: their heads (with their frames) and versions. A taken ID is an IntegrityError."""

    def insert_version(self, version: dict) -> None:
        """One more version of an existing memory."""

    def defer_compaction(self) -> None:
        """Leave the storage this transaction writes as it is written, not merged with earlier
        writes' when the store is next closed: a bulk load defers it for most of its batches and
        lets every few of them (and its last) compact what came before. Changes nothing that is
        stored; a backend that has nothing to defer does nothing."""

    def update_head(self, id_: str, fields: dict[str, Any]) -> None:
        """Set these head fields (frames included, with their index)."""

    def heads_by_ids(self, ids: Sequence[str], actor: str, fields: Sequence[str] = HEAD_FIELDS) -> list[dict]:
        """The heads of these full IDs that ``actor`` may see, with ``fields``."""

    def heads_by_prefix(self, prefix: str, actor: str, limit: int = 6) -> list[dict]:
        """Up to ``limit`` visible heads whose ID starts with ``prefix``, in ID order (a full ID matches itself)."""

    def existing_ids(self, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` exist, whoever owns them."""

    def stored_hashes(self, ids: Sequence[str]) -> dict[str, tuple[str, list[bytes]]]:
        """For each of ``ids`` that exists, whoever owns it: (owner, every version's hash, oldest first)."""

    def versions(self, id_: str, version: int | None = None) -> list[dict]:
        """Every version of a memory, oldest first; or only ``version`` ([] when it has none)."""

    def current_versions(self, ids: Sequence[str]) -> dict[str, dict]:
        """The current version of each of these memories."""

    def current_data(self, current: dict[str, int]) -> dict[str, tuple[int, bytes]]:
        """(type code, data) of version ``current[id]`` of each memory (none for a version it lacks)."""

    def count_heads(self, filters: Filters | None = None) -> int:
        """How many memories pass ``filters`` (every memory without them)."""

    def iter_visible(self, actor: str, batch: int = 2000) -> Iterator[tuple[dict, list[dict]]]:
        """Every head ``actor`` may see, with all its versions, in ID order."""

    def bump(self, ids: Sequence[str], *, access: int, citations: int, at: datetime) -> None:
        """Add to the access count and citations of ``ids`` (kept from 0 to MAX_COUNT); last used = ``at``."""

    # -- journal --------------------------------------------------------------------------
    def next_seq(self) -> int:
        """The sequence number the next journal entry gets (1 for an empty journal)."""

    def append_journal(self, entries: Sequence[JournalEntry]) -> int:
        """Append entries under consecutive sequence numbers; returns the first."""

    # -- filtered candidate sets and salience ------------------------------------------------
    def passing(self, ids: Sequence[str], filters: Filters) -> dict[str, int]:
        """Of ``ids``, those that pass ``filters``: id -> current version."""

    def live_versions(self, ids: Sequence[str]) -> dict[str, int]:
        """Of ``ids``, those not forgotten, whoever owns them: id -> current version."""

    def top_salience(self, filters: Filters, scoring: Scoring, limit: int) -> list[tuple[str, float]]:
        """The ``limit`` memories passing ``filters`` with the highest salience, best first
        (ties: later update first, then higher ID): (id, salience). A forgotten memory's salience is 0."""

    def candidates(self, ids: Sequence[str], filters: Filters, scoring: Scoring) -> dict[str, tuple[int, bool, float]]:
        """For each of these memories, in one lookup: (current version, passes ``filters``, salience)."""

    def sessions(self, actor: str, turn_tag: str, summary_tag: str) -> list[dict]:
        """Each session holding a live memory ``actor`` can see, latest activity first:
        {session, turns (live memories tagged ``turn_tag``), first (earliest creation),
        last (latest update), summary (the ID of a live memory tagged ``summary_tag``, or None)}."""

    def result_rows(self, ids: Sequence[str], form: str) -> dict[str, dict]:
        """What a find result shows of these memories; ``text`` is the ``form`` (short or medium)."""

    def search_data(self, ids: Sequence[str]) -> dict[str, tuple[int, bytes]]:
        """(type code, data) of the current version of each of these memories."""

    # -- lexical postings ----------------------------------------------------------------------
    def add_postings(self, docs: Sequence[tuple[str, Sequence[int]]]) -> None:
        """Postings for new memories: (id, term IDs in text order, repeats kept)."""

    def replace_postings(self, id_: str, term_ids: Sequence[int]) -> None:
        """New postings for a memory whose text changed."""

    def doc_count(self) -> int:
        """How many memories have postings."""

    def postings_of(self, terms: Sequence[int]) -> dict[str, Any]:
        """Every posting of these terms: numpy arrays ``term``, ``doc``, ``tf``."""

    def doc_ids(self, docs: Sequence[int]) -> dict[int, str]:
        """Doc number -> memory ID."""

    def hidden_docs(self, actor: str) -> Any:
        """The doc numbers (numpy array) of memories ``actor`` may not see."""

    def term_df(self, terms: Sequence[int], hidden: Any) -> dict[int, int]:
        """Document frequency of each term, leaving out the ``hidden`` docs."""

    def doc_terms(self, docs: Sequence[int]) -> dict[int, tuple[dict[int, int], int]]:
        """Each doc's term frequencies and length: doc -> ({term: tf}, length)."""

    # -- vectors ----------------------------------------------------------------------------------
    def insert_vectors(self, ids: Sequence[str], versions: Sequence[int], model: str, matrix: Any) -> int:
        """One vector per (id, version) under new increasing keys; returns the last key (0 for none).
        ``matrix``: float32 array (n, dim), or a list of float32 byte strings."""

    def model_dim(self, model: str) -> int | None:
        """The dimension of ``model``'s stored vectors (None when it has none)."""

    def drop_vectors(self, id_: str, *, model: str | None = None) -> None:
        """Take a memory's vectors (all, or one model's) out of service; their keys are kept as dropped."""

    def drop_model(self, model: str) -> int:
        """Take every vector of ``model`` out of service; returns how many."""

    def drop_other_models(self, model: str) -> int:
        """Take every vector not made by ``model`` out of service; returns how many."""

    def maybe_pending(self, model: str) -> bool:
        """A cheap sign that some memory may wait for a vector from ``model``."""

    def count_pending(self, model: str) -> int:
        """Live memories whose current version has no vector from ``model``."""

    def pending(self, model: str, *, limit: int | None = None,
                ids: Sequence[str] | None = None) -> list[tuple[str, int, int, bytes]]:
        """Those memories, in ID order: (id, version, type code, data)."""

    def vector_stats(self, model: str) -> tuple[int, int, int | None]:
        """(count, highest key, dimension) of ``model``'s vectors."""

    def count_vectors(self, model: str, *, after: int = 0) -> int:
        """``model``'s vectors with a key above ``after``."""

    def covered(self, model: str, max_key: int) -> int:
        """``model``'s vectors with a key up to ``max_key``, live or dropped since."""

    def dropped_keys(self, model: str) -> list[int]:
        """Keys of ``model``'s vectors taken out of service since the last ``clear_dropped``."""

    def clear_dropped(self, model: str | None = None) -> None:
        """Forget the dropped keys (of every model, or one)."""

    def iter_vectors(self, model: str, dim: int, *, after: int = 0, batch: int = 50_000) -> Iterator[tuple[Any, Any]]:
        """(keys, matrix) of ``model``'s vectors with a key above ``after``, in key order, batch by batch."""

    def vectors_for(self, filters: Filters, model: str, dim: int) -> tuple[list[str], Any]:
        """(ids, matrix) of the current-version vectors of the memories passing ``filters``."""

    def vector_keys_for(self, filters: Filters, model: str) -> tuple[list[str], Any] | None:
        """(ids, keys as a numpy array) of the current-version vectors of the memories passing
        ``filters``; None when this backend hands the vectors themselves as cheaply (``vectors_for``)."""

    def vectors_of_keys(self, keys: Sequence[int], model: str) -> list[tuple[int, str, int]]:
        """(key, id, version) of these keys that still hold a vector of ``model``."""

    def vectors_between(self, model: str, lo: int, hi: int) -> dict[int, tuple[str, int]]:
        """key -> (id, version) of ``model``'s vectors with a key from ``lo`` to ``hi``."""

    def vectors_after(self, model: str, after: int, dim: int) -> tuple[list[str], list[int], Any]:
        """(ids, versions, matrix) of ``model``'s vectors with a key above ``after``."""

    # -- learned weights, rate buckets, checkpoints ------------------------------------------------
    def weights(self, actor: str) -> tuple[float, ...] | None:
        """``actor``'s learned salience weights, or None when the actor never attested."""

    def set_weights(self, actor: str, weights: Sequence[float], *, seq: int, at: datetime) -> None:
        """Store the weights learned at journal entry ``seq`` (one step more)."""

    def all_weights(self) -> dict[str, dict]:
        """actor -> {weights, steps, seq, updated_at}."""

    def take_token(self, actor: str, intent: str, now: datetime, *, rate: float, burst: float) -> bool:
        """Take a token from the (actor, intent) bucket, which refills at ``rate`` a second up to
        ``burst`` (missing, or stamped after ``now``: full); False when less than one is left."""

    def put_checkpoint(self, row: dict) -> None:
        """Store a checkpoint (``CHECKPOINT_FIELDS``), replacing the one of the same (actor, intent, step)."""

    def checkpoint(self, actor: str, intent: str, step: str) -> dict | None:
        """The stored checkpoint row, or None."""

    def all_checkpoints(self) -> dict[tuple[str, str, str], dict]:
        """(actor, intent, step) -> checkpoint row."""

    # -- integrity (verify) ---------------------------------------------------------------------
    def version_hashes(self, batch: int = 10000, after: str | None = None,
                       upto: str | None = None) -> Iterator[list[tuple]]:
        """(id, version, type code, data, hash) of every version, in batches, in (id, version) order;
        ``after``/``upto`` keep the IDs in ``(after, upto]`` (None: that end is open)."""

    def head_version_mismatches(self) -> list[tuple]:
        """(id, current version, version count, latest, why) of heads that disagree with their versions."""

    def orphan_versions(self) -> list[str]:
        """IDs that have versions but no head."""

    def frame_mismatches(self) -> list[tuple]:
        """(id, frame, side) where the frame index and the heads' frames differ."""

    def journal_bounds(self) -> tuple[int, int | None, int | None]:
        """(count, lowest seq, highest seq) of the journal."""

    def journal_gaps(self) -> list[tuple[int, int]]:
        """(seq, next seq) wherever the sequence skips."""

    def unknown_kinds(self, known: Sequence[str]) -> list[tuple[int, str]]:
        """(seq, kind) of journal entries whose kind is not in ``known``."""

    def unpaired_attests(self) -> list[tuple[int, str, str | None]]:
        """(seq, kind, neighbour kind) of attest entries not followed by their learn_weights and
        learn_weights entries not preceded by an attest."""

    def journal_entries(self, kinds: Sequence[str], batch: int = 10000) -> Iterator[tuple]:
        """(seq, kind, ts, actor, ref, payload) of the entries of these kinds, in sequence order."""

    def memory_batch_ends(self, batch: int = 5000) -> list[str]:
        """The last memory ID of every full run of ``by_memory(batch)``, in order: starting
        ``by_memory`` after one of them gives the very same runs as the whole walk."""

    def by_memory(self, batch: int = 5000, after: str | None = None, upto: str | None = None,
                  rows: bool = False) -> Iterator[tuple[list[tuple], list, list]]:
        """Runs of memory IDs in order (of those in ``(after, upto]``): their journal entries
        (ref, seq, kind, payload), heads and versions (dicts, or with ``rows`` tuples in
        ``HEAD_FIELDS`` / ``VERSION_FIELDS`` order)."""

    def lexical_mismatches(self, expected: Callable[[int, bytes], list[int]], after: str | None = None,
                           upto: str | None = None, strays: bool = True) -> Iterator[tuple[str, str]]:
        """(id, problem) for every memory (ID in ``(after, upto]``) whose postings are not
        ``expected(type code, data)``; ``strays`` adds ``stray_postings()`` at the
        end. A call reads the range's postings once: ask for whole ranges, not memory by memory."""

    def stray_postings(self) -> Iterator[tuple[str, str]]:
        """(id, problem) for postings of memories that do not exist."""

    def vector_problems(self) -> Iterator[tuple[str, int, str]]:
        """(id, version, problem) for vectors cut short or not of their memory's current version."""


    def text_twins(self, actor: str, type_code: int, n_terms: int, term: int) -> list[str]:
        """Live memories of ``actor`` and type whose search text has ``n_terms`` terms, ``term``
        among them (a few candidates for "the same text"; the caller compares the texts)."""

    def ref_counts(self, parts: Sequence[str]) -> dict[str, int]:
        """How many IDs (of any actor) start or end with each of ``parts`` (all of one length)."""

    def health_counts(self) -> dict:
        """{"by_type": {type code: memories}, "tombstoned": n, "versions": n, "schema_version": n}; cheap at any size."""

    # -- bundles (backup and restore) -------------------------------------------------
    def table_counts(self, tables: Sequence[str]) -> dict[str, int]:
        """Rows in each named table that exists."""

    def version_digest(self) -> str:
        """An order-free digest of every version's (id, version, hash) and their count."""

    def attach_bundle(self, files: dict[str, Path]) -> None:
        """Make a checked bundle's members (table -> Parquet file) readable by the bundle_* methods."""

    def bundle_plan(self) -> tuple[list[str], list[tuple[str, int]], list[tuple[str, int, int]]]:
        """Against the attached bundle: (IDs it has and this store has not, (id, version) pairs
        whose hashes differ, (id, local current version, bundle current version) where it is ahead)."""

    def bundle_memories(self, ids: Sequence[str], after: dict[str, int]) -> list[tuple[dict, list[dict]]]:
        """The bundle's head of each of ``ids`` and its versions above ``after[id]`` (0 when absent)."""

    def heads_of(self, ids: Sequence[str]) -> dict[str, dict]:
        """id -> head of each of ``ids`` that exists, whoever owns it."""

    def bundle_missing_checkpoints(self) -> list[dict]:
        """The bundle's checkpoints whose (actor, intent, step) this store has not."""


class Storage(Protocol):
    """A store at a path: opened per operation, for as short a time as it can be."""

    path: Path

    def exists(self) -> bool:
        """A store exists at the path."""

    def check_path(self) -> None:
        """UsageError when the path cannot hold a store (a file where a directory belongs)."""

    def reading(self) -> ContextManager[Tx]:
        """A read-only view; NoStore when there is no store yet."""

    def transaction(self) -> ContextManager[Tx]:
        """A write transaction under the writer lock, creating the store when needed: committed
        when the block ends, rolled back (nothing written) when it raises."""

    def exclusive(self, *, wait: float | None = None) -> ContextManager[None]:
        """Hold the writer lock without opening the store: readers go on, writers wait."""

    def searching(self) -> ContextManager[Tx]:
        """A read-only view for find: like ``reading``, but it may be answered from a search
        snapshot that is current (a cache beside the store). Its methods may raise
        ``SnapshotUnusable``: the caller then starts over with ``reading``."""

    def refresh_snapshot(self) -> dict:
        """Rebuild the search snapshot when it is not current (under the writer lock):
        {"action": "build" or "none", "memories": n}. A backend without one returns action "none"."""

    def snapshot_state(self) -> str:
        """"current", "stale", "missing" or "damaged" (cheap: the header only)."""

    def snapshot_problem(self) -> str | None:
        """What is wrong with the search snapshot after reading all of it; None when sound,
        absent or merely stale."""


__all__ = ["Storage", "Tx", "Filters", "Scoring", "NoStore", "HEAD_FIELDS", "VERSION_FIELDS",
           "SALIENCE_FIELDS", "SnapshotUnusable", "JOURNAL_FIELDS", "WEIGHT_FIELDS", "CHECKPOINT_FIELDS", "MEMORY_KINDS",
           "JournalEntry"]
