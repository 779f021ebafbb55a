"""What the engine asks of a store, in the engine's own terms: capabilities, ``Tx`` and ``Storage``.

A store keeps memories (a head and its numbered versions), the journal that
records every change, what find searches by words and by meaning, and what
attest and compact keep (learned salience weights, rate-limit buckets,
checkpoints). The engine gets a ``Storage`` from ``store.open_storage`` (the
one place a backend is chosen), takes a ``Tx`` from ``reading()`` (read-only) or
``transaction()`` (read-write, all or nothing) and calls its methods.

``Tx`` is the union of small capabilities, each named for what the engine asks:
``Records``, ``Journal``, ``Listing`` (filters and salience), ``LexicalSearch``,
``VectorSearch``, ``Feedback``, ``Grants``, ``Integrity`` and ``BundleIO``. How a
backend answers them (SQL, an index file, a cache beside the store) is its own:
the engine never sees SQL, a connection or a file of the store, so a second
backend plugs in by implementing these protocols; ``tests/contract`` holds every
backend to each of them.

Data crosses the boundary as plain values:

- a head or version is a dict keyed by the names in ``HEAD_FIELDS`` /
  ``VERSION_FIELDS``; times are naive UTC ``datetime`` objects;
- a journal entry to append is ``(kind, at, actor, ref, payload)``;
- find's filters are a ``Filters`` (who sees, types, tags, frames, session,
  tombstones) and the salience parameters a ``Scoring``: values, not SQL text.
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
    "valid_from", "valid_to", "supersedes", "superseded_by",
)
# The head and version fields that are times (journal payloads hold them as integer microseconds).
TIME_FIELDS = frozenset({"created_at", "updated_at", "tombstoned_at", "last_used", "valid_from", "valid_to"})
INFINITE_MICROS = 2**63 - 1  # an infinite time read as microseconds (Tx.by_memory's rows): +/- this
# Valid time and the supersede links (head fields: changed by ``update_head`` entries, never by a version).
VALID_FIELDS = ("valid_from", "valid_to", "supersedes", "superseded_by")
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
# What one live grant lets its sub-agent see: (granter, type codes, tags). It covers a memory of
# the granter's with visibility ``scoped`` whose type is one of the codes (any when none) and that
# carries at least one of the tags (any tags, or none, when no tag is given).
Scope = tuple[str, tuple[int, ...], tuple[str, ...]]
GRANT_FIELDS = ("id", "granter", "subagent", "types", "tags", "created_at", "expires_at",
                "revoked_at", "revoked_by")


def _scopes(scopes) -> tuple[Scope, ...]:
    return tuple(sorted((str(g), tuple(sorted(int(t) for t in types)), tuple(sorted(str(t) for t in tags)))
                        for g, types, tags in scopes))


class NoStore(CortexError):
    """Raised to readers when no store exists at the location yet."""

    exit_code = 3
    kind = "not_found"


class OverBudget(CortexError):
    """A bulk load's transaction (``Storage.transaction(bulk=True)``) or a bounded view's read
    (``Storage.reading(bounded=True)``) did not fit the memory the backend held it to; nothing of
    the transaction was written. Run it again as a transaction that is not bulk, or read again
    through a view that is not bounded."""


class CacheUnusable(CortexError):
    """A backend's read cache (behind ``Storage.searching``) turned out damaged, or the store moved
    on while it answered: the caller asks again through ``Storage.reading`` (the ground truth)."""


class IndexUnusable(CortexError):
    """The backend's vector index cannot be trusted for this search; ``Storage.update_index``
    with ``rebuild`` repairs it. ``damaged``: its file is not what was saved (not merely missing,
    out of step or another model's), which find says as a warning when it cannot rebuild it.
    ``building``: a background build of it is under way (find searches exactly meanwhile rather
    than build it again)."""

    def __init__(self, message: str, *, damaged: bool = False, building: bool = False) -> None:
        super().__init__(message)
        self.damaged = damaged
        self.building = building


class Remark(str):
    """A note on how an answer was found (an exact search instead of the index): not a problem."""


@dataclass(frozen=True)
class Viewer:
    """Who looks at the store: ``actor``, and the scopes of the live grants it holds (resolved by
    the engine at its clock's now). It sees its own memories, public ones, and the ``scoped``
    memories of a granter that one of ``scopes`` covers (see ``Scope``); never another's private."""

    actor: str
    scopes: tuple[Scope, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "scopes", _scopes(self.scopes))


def viewer_of(who: "str | Viewer | Filters") -> Viewer:
    """A method's ``actor`` argument (a name alone sees no grant's scope) as a ``Viewer``."""
    if isinstance(who, Viewer):
        return who
    if isinstance(who, Filters):
        return Viewer(who.actor, who.scopes)
    return Viewer(who)


@dataclass(frozen=True)
class Filters:
    """Which memories a search may return: those ``actor`` may see (their own and public
    ones, and the scoped ones that one of ``scopes`` covers), of one of ``types`` (type codes),
    holding every one of ``tags``, matching every frame filter, of ``session`` when given,
    not forgotten unless ``include_tombstoned``, whose valid interval ``[valid_from, valid_to)``
    holds ``valid_at`` when given (a NULL end is open), and whose ``valid_to`` is not at or
    before ``ended_by`` when given (superseded or ended by then). Empty means any."""

    actor: str
    types: tuple[int, ...] = ()
    tags: tuple[str, ...] = ()
    frames: tuple[FrameFilter, ...] = ()
    include_tombstoned: bool = False
    session: str | None = None  # only memories of this session
    scopes: tuple[Scope, ...] = ()  # the live grants ``actor`` holds (``Viewer``)
    valid_at: datetime | None = None  # only memories valid at this time
    ended_by: datetime | None = None  # hide memories whose valid time ended at or before this time

    def __post_init__(self) -> None:  # tuples, so that a Filters is hashable whatever it was given
        object.__setattr__(self, "types", tuple(self.types))
        object.__setattr__(self, "tags", tuple(self.tags))
        object.__setattr__(self, "frames", tuple(tuple(f) for f in self.frames))
        object.__setattr__(self, "scopes", _scopes(self.scopes))

    @property
    def viewer(self) -> Viewer:
        return Viewer(self.actor, self.scopes)

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


class Records(Protocol):
    """Memories: heads and their numbered versions."""

    def insert_memories(self, heads: list[dict], versions: list[dict]) -> None:
        """New memories: their heads (with their frames) and versions. A taken ID is an IntegrityError."""

    def insert_version(self, version: dict) -> None:
        """One more version of an existing memory."""

    def update_head(self, id_: str, fields: dict[str, Any]) -> None:
        """Set these head fields (frames included, with their index)."""

    def bump(self, ids: Sequence[str], *, access: int, citations: int, at: datetime) -> None:
        """Add to the access count and citations of ``ids`` (kept from 0 to MAX_COUNT); last used = ``at``."""

    def heads_by_ids(self, ids: Sequence[str], actor: "str | Viewer", fields: Sequence[str] = HEAD_FIELDS) -> list[dict]:
        """The heads of these full IDs that ``actor`` may see, with ``fields``."""

    def heads_by_prefix(self, prefix: str, actor: "str | Viewer", limit: int = 6) -> list[dict]:
        """Up to ``limit`` visible heads whose ID starts or ends with ``prefix`` (a ref: the start of
        an ID, or its end, as short refs are), in ID order; a full ID matches itself alone."""

    def heads_of(self, ids: Sequence[str]) -> dict[str, dict]:
        """id -> head of each of ``ids`` that exists, whoever owns it."""

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

    def iter_visible(self, actor: "str | Viewer", batch: int = 2000) -> Iterator[tuple[dict, list[dict]]]:
        """Every head ``actor`` may see, with all its versions, in ID order."""

    def ref_counts(self, parts: Sequence[str]) -> dict[str, int]:
        """How many IDs (of any actor) start or end with each of ``parts`` (all of one length)."""


class Journal(Protocol):
    """The journal: every change, in one gap-free order. A change to a memory's rows is made in the
    transaction that appends its entry, which names the memory (``ref`` for ``MEMORY_KINDS``; an
    attest's payload lists the memories it bumped): a backend may follow the journal to know what
    changed (the DuckDB backend's search cache does), as verify's replay holds the heads to it."""

    def next_seq(self) -> int:
        """The sequence number the next journal entry gets (1 for an empty journal)."""

    def append_journal(self, entries: Sequence[JournalEntry]) -> int:
        """Append entries under consecutive sequence numbers; returns the first."""

    def journal_entries(self, kinds: Sequence[str], batch: int = 10000) -> Iterator[tuple]:
        """(seq, kind, ts, actor, ref, payload) of the entries of these kinds, in sequence order."""

    def journal_bounds(self) -> tuple[int, int | None, int | None]:
        """(count, lowest seq, highest seq) of the journal."""

    def seq_at(self, at: datetime) -> int:
        """The highest sequence number of an entry stamped at or before ``at`` (0 when none):
        the journal up to it is a state the store passed through (record time ``at``)."""

    def journal_memo(self) -> dict | None:
        """A dict a resident process keeps for as long as the store stays as this view sees it (no
        commit since: the same journal, the same rows), where a caller keeps what it worked out from
        them for its next calls (``find --as-of``'s replayed past); None where the backend cannot
        tell cheaply that nothing changed, or keeps nothing. Keyed by the caller's own keys; the
        caller bounds what it keeps."""

    def journal_window(self, after: int = 0, upto: int | None = None, kinds: Sequence[str] = (),
                       refs: Sequence[str] | None = None, batch: int = 10000,
                       payloads: bool = True) -> Iterator[tuple]:
        """(seq, kind, ts, actor, ref, payload) of the entries with ``after < seq <= upto`` (no upper
        end when None), of ``kinds`` (any when empty) and, when ``refs`` is given, naming one of
        them as their ``ref``; in sequence order. Without ``payloads`` each payload is ``b""`` (the
        payloads are most of the journal's bytes). The entries may come from a cursor open on the
        view, ``batch`` at a time: take what you need from them before asking the view anything
        else (another query may end that cursor)."""


class Listing(Protocol):
    """Memories chosen by ``Filters`` and ordered by salience: find's salience lane and the
    lookups every lane's candidates go through."""

    def count_heads(self, filters: Filters | None = None) -> int:
        """How many memories pass ``filters`` (every memory without them)."""

    def passing(self, ids: Sequence[str], filters: Filters) -> dict[str, int]:
        """Of ``ids``, those that pass ``filters``: id -> current version."""

    def live_versions(self, ids: Sequence[str]) -> dict[str, int]:
        """Of ``ids``, those not forgotten, whoever owns them: id -> current version."""

    def top_salience(self, filters: Filters, scoring: Scoring, limit: int) -> list[tuple[str, float]]:
        """The ``limit`` memories passing ``filters`` with the highest salience, best first
        (ties: later update first, then higher ID): (id, salience). A forgotten memory's salience is 0."""

    def candidates(self, ids: Sequence[str], filters: Filters, scoring: Scoring) -> dict[str, tuple[int, bool, float]]:
        """For each of these memories, in one lookup: (current version, passes ``filters``, salience)."""

    def session_neighbours(self, ids: Sequence[str], filters: Filters, reach: int = 1
                           ) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
        """For each of ``ids`` that belongs to a session and passes ``filters``: (the up to ``reach``
        memories before it, nearest first; the up to ``reach`` after it, nearest first) in its
        session, in ID order (creation order), among the memories passing ``filters``. IDs without
        a session, or not passing ``filters``, are left out."""

    def sessions(self, actor: "str | Viewer", turn_tag: str, summary_tag: str) -> list[dict]:
        """Each session holding a live memory ``actor`` can see, latest activity first:
        {session, turns (live memories tagged ``turn_tag``), first (earliest creation),
        last (latest update), summary (the ID of a live memory tagged ``summary_tag``, or None)}."""

    def result_rows(self, ids: Sequence[str], form: str) -> dict[str, dict]:
        """What a find result shows of these memories: id, type, current_version, tags, frames,
        importance, visibility, actor, updated_at, tombstoned_at, valid_from, valid_to, supersedes,
        superseded_by, and ``text``, the ``form`` (short or medium)."""

    def search_data(self, ids: Sequence[str]) -> dict[str, tuple[int, bytes]]:
        """(type code, data) of the current version of each of these memories."""


class LexicalSearch(Protocol):
    """Search by words. The engine hands each memory's search-text terms (``memory.terms``:
    term IDs in text order, repeats kept) and asks with the query's terms; how the backend
    ranks (BM25 over its own term lists, a full-text index) is its own."""

    def add_terms(self, docs: Sequence[tuple[str, Sequence[int]]]) -> None:
        """Terms of new memories: (id, term IDs in text order, repeats kept)."""

    def replace_terms(self, id_: str, term_ids: Sequence[int]) -> None:
        """New terms for a memory whose text changed."""

    def search_terms(self, terms: dict[int, float], filters: Filters, n: int) -> list[tuple[str, float]]:
        """The ``n`` memories passing ``filters`` that best match the query terms (term ID ->
        weight), best first, ties by ID: [(id, score > 0)]. Term statistics count only the
        memories the filters' viewer may see, so a score reveals nothing of another's words."""

    def score_terms(self, terms: dict[int, float], docs: Sequence[tuple[str, Sequence[int]]],
                    viewer: "str | Viewer") -> dict[str, float]:
        """How well each of ``docs`` (id, term IDs in text order, repeats kept: terms the caller
        holds, not necessarily stored) matches the query terms, on ``search_terms``' scale before
        any query expansion, with the term statistics of the stored memories ``viewer`` may see:
        {id: score >= 0}, 0 for a doc holding no query term."""

    def text_twins(self, actor: str, type_code: int, n_terms: int, term: int) -> list[str]:
        """Live memories of ``actor`` and type whose search text has ``n_terms`` terms, ``term``
        among them (a few candidates for "the same text"; the caller compares the texts)."""


class VectorSearch(Protocol):
    """Search by meaning: one vector per memory version and model, and the nearest of them."""

    def insert_vectors(self, ids: Sequence[str], versions: Sequence[int], model: str, matrix: Any) -> int:
        """One vector per (id, version); returns a number that grows with every insert (0 for
        none), which ``Storage.after_vectors`` takes. ``matrix``: float32 array (n, dim), or a list
        of float32 byte strings."""

    def model_dim(self, model: str) -> int | None:
        """The dimension of ``model``'s stored vectors (None when it has none)."""

    def drop_vectors(self, id_: str, *, model: str | None = None) -> None:
        """Take a memory's vectors (all, or one model's) out of service."""

    def drop_model(self, model: str) -> int:
        """Take every vector of ``model`` out of service; returns how many."""

    def drop_other_models(self, model: str) -> int:
        """Take every vector not made by ``model`` out of service; returns how many."""

    def other_models(self, model: str) -> bool:
        """Whether any vector in service was made by a model other than ``model``."""

    def maybe_pending(self, model: str) -> bool:
        """A cheap sign that some memory may wait for a vector from ``model``."""

    def count_pending(self, model: str) -> int:
        """Live memories whose current version has no vector from ``model``."""

    def pending(self, model: str, *, limit: int | None = None,
                ids: Sequence[str] | None = None) -> list[tuple[str, int, int, bytes]]:
        """Those memories, in ID order: (id, version, type code, data)."""

    def stored_vectors(self, pairs: Sequence[tuple[str, int]], model: str) -> dict[str, Any]:
        """The stored ``model`` vector of each (id, version) in ``pairs`` that has one, by ID (float32
        rows): ``find --as-of`` reads them rather than embed those versions' texts again."""

    def nearest(self, query_vector: Any, model: str, filters: Filters, n: int, *,
                exact: bool = False) -> tuple[list[tuple[str, float]], str | None]:
        """The ``n`` memories passing ``filters`` whose current version's ``model`` vector is
        nearest to ``query_vector``, best first, ties by ID: ([(id, cosine > 0)], note). ``note``
        is a warning (str) or a ``Remark`` on how the answer was found, or None. ``exact``:
        compare every candidate, using no approximate index. Raises ``IndexUnusable`` when the
        backend's index cannot answer (``Storage.update_index(rebuild=True)`` repairs it)."""


class Feedback(Protocol):
    """What attest and compact keep: learned salience weights, rate buckets, checkpoints."""

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


class Grants(Protocol):
    """Scoped grants: what a sub-agent may see of its granter's ``scoped`` memories."""

    def live_grants(self, subagent: str, now: datetime) -> list[dict]:
        """The grants (``GRANT_FIELDS``) ``subagent`` holds that are neither revoked nor expired at
        ``now`` (expired means ``expires_at <= now``), in ID order."""

    def grants_of(self, actor: str) -> list[dict]:
        """Every grant ``actor`` gave or holds, revoked and expired ones included, in ID order."""

    def insert_grant(self, row: dict) -> None:
        """Store a new grant (``GRANT_FIELDS``); a taken ID is an IntegrityError."""

    def revoke_grant(self, id_: str, *, at: datetime, by: str) -> None:
        """Mark a grant revoked at ``at`` by ``by``."""

    def all_grants(self) -> dict[str, dict]:
        """id -> grant row, every grant."""


class Integrity(Protocol):
    """What verify and healthcheck read to prove the store whole."""

    def hash_mismatches(self, domain: bytes, after: str | None = None,
                        upto: str | None = None) -> tuple[int, list[tuple[str, int]]]:
        """(how many versions, (id, version) of those whose stored hash is not SHA-256 of ``domain``,
        the version's type code as one byte, and its data, in (id, version) order), over the IDs in
        ``(after, upto]`` (None: that end is open). The database recomputes the hashes: the bytes
        are not fetched."""

    def head_version_mismatches(self) -> list[tuple]:
        """(id, current version, version count, latest, why) of heads that disagree with their versions."""

    def orphan_versions(self) -> list[str]:
        """IDs that have versions but no head."""

    def frame_mismatches(self) -> list[tuple]:
        """(id, frame, side) where the frame index and the heads' frames differ."""

    def valid_links(self) -> list[tuple]:
        """(id, valid_from, valid_to, supersedes, superseded_by) of every head holding any of the last
        four, in ID order."""

    def journal_gaps(self) -> list[tuple[int, int]]:
        """(seq, next seq) wherever the sequence skips."""

    def unknown_kinds(self, known: Sequence[str]) -> list[tuple[int, str]]:
        """(seq, kind) of journal entries whose kind is not in ``known``."""

    def unpaired_attests(self) -> list[tuple[int, str, str | None]]:
        """(seq, kind, neighbour kind) of attest entries not followed by their learn_weights and
        learn_weights entries not preceded by an attest."""

    def memory_batch_ends(self, batch: int = 5000) -> list[str]:
        """The last memory ID of every full run of ``by_memory(batch)``, in order: starting
        ``by_memory`` after one of them gives the very same runs as the whole walk."""

    def by_memory(self, batch: int = 5000, after: str | None = None, upto: str | None = None,
                  rows: bool = False) -> Iterator[tuple[list[tuple], list, list]]:
        """Runs of memory IDs in order (of those in ``(after, upto]``): their journal entries
        (ref, seq, kind, payload), heads and versions (dicts, or with ``rows`` tuples in
        ``HEAD_FIELDS`` / ``VERSION_FIELDS`` order with every time as integer microseconds since
        the epoch, as journal payloads hold them; an infinite time as +/- ``INFINITE_MICROS``)."""

    def lexical_mismatches(self, expected: Callable[[int, bytes], list[int]], after: str | None = None,
                           upto: str | None = None, strays: bool = True) -> Iterator[tuple[str, str]]:
        """(id, problem) for every memory (ID in ``(after, upto]``) whose terms are not
        ``expected(type code, data)``; ``strays`` adds ``stray_terms()`` at the
        end. A call reads the range's terms once: ask for whole ranges, not memory by memory."""

    def stray_terms(self) -> Iterator[tuple[str, str]]:
        """(id, problem) for terms kept for memories that do not exist."""

    def vector_problems(self) -> Iterator[tuple[str, int, str]]:
        """(id, version, problem) for vectors cut short or not of their memory's current version."""

    def index_problems(self, model: str) -> list[str]:
        """What is wrong with the backend's search structures for ``model`` (an index that no
        longer matches its checksum, say), each a sentence naming how to repair it; [] when sound."""

    def health_counts(self) -> dict:
        """{"by_type": {type code: memories}, "tombstoned": n, "versions": n, "schema_version": n,
        "isolation": "database" when the backend holds a find to its actor itself (``reading``'s
        ``as_actor``), else "engine"}. A
        backend whose tables are files of its own (DuckDB) reads every block of them here, so that a
        damaged file raises ``IntegrityError`` naming it rather than passing for healthy."""


class BundleIO(Protocol):
    """Reading a checked bundle against the store, for ``restore --mode merge``."""

    def table_counts(self, tables: Sequence[str]) -> dict[str, int]:
        """Rows in each named table that exists."""

    def version_digest(self) -> str:
        """An order-free digest of every version's (id, version, hash) and their count."""

    def attach_bundle(self, members: dict[str, Any]) -> None:
        """Make a checked bundle's members (table name -> member) readable by the bundle_* methods."""

    def bundle_plan(self) -> tuple[list[str], list[tuple[str, int]], list[tuple[str, int, int]]]:
        """Against the attached bundle: (IDs it has and this store has not, (id, version) pairs
        whose hashes differ, (id, local current version, bundle current version) where it is ahead)."""

    def bundle_memories(self, ids: Sequence[str], after: dict[str, int]) -> list[tuple[dict, list[dict]]]:
        """The bundle's head of each of ``ids`` and its versions above ``after[id]`` (0 when absent)."""

    def bundle_missing_checkpoints(self) -> list[dict]:
        """The bundle's checkpoints whose (actor, intent, step) this store has not."""

    def bundle_grants(self) -> list[dict]:
        """Every grant row of the attached bundle (none for a bundle from before grants)."""

    def bundle_links(self) -> list[tuple]:
        """(id, valid_from, valid_to, supersedes, superseded_by) of the attached bundle's heads holding any
        of the last four, in ID order (none for a bundle from before them)."""


class Tx(Records, Journal, Listing, LexicalSearch, VectorSearch, Feedback, Grants, Integrity, BundleIO, Protocol):
    """One transaction (or, from ``Storage.reading``, one read-only view) on a store: every
    capability above, on one consistent view.

    Valid only inside the ``with`` block that gave it; so are the iterators it returns.
    Every ``actor`` that decides what may be seen takes a name or a ``Viewer`` (a name alone
    holds no grant).
    """


CAPABILITIES = (Records, Journal, Listing, LexicalSearch, VectorSearch, Feedback, Grants, Integrity, BundleIO)


class Holding(Protocol):
    """What a backend adds to ``Storage`` (at its size limit) for many transactions in a row: one
    connection for small ones, and the space a bulk load's left given back after it."""

    def reclaim_space(self) -> dict:
        """After a bulk load's last transaction: give back the space its transactions left unused
        in the store's files, when that is much; what the store holds is unchanged. Waits for
        other writers. Never fails: {"action": "rewrite" or "none", "bytes_before", "bytes",
        "reason"}."""

    def holding(self) -> ContextManager[None]:
        """Keep the store open for this thread's transactions inside the block: each is still
        committed (or rolled back) on its own, as ``transaction`` does, but the backend may keep one
        connection and its writer's turn for all of them, so other writers (and, on a backend whose
        writer excludes readers, other processes' readers) wait as for one longer transaction. Open
        no ``reading`` view inside: read through the transactions. Creates the store when needed."""


class Storage(Protocol):
    """A store, opened per operation for as short a time as it can be (``store.open_storage``
    builds one from the settings)."""

    location: str  # where the store is, as a user names it in messages (never a password)
    address: str  # what store.open_storage takes to reopen this store (in another process); may
    #               hold credentials, so it is never printed
    vector_dtype: str  # numpy's name of the precision a stored vector is held to ("<f2", "<f4"): what
    #                    reads of it give back (as float32) and what an exact score is computed from

    def local_dir(self) -> Path | None:
        """The local directory holding the store, None for a store on a server; its local work
        (decrypted bundles, staged stores, spilled batches) goes beside it (``store/scratch.py``)."""

    def exists(self) -> bool:
        """A store exists there."""

    def check_location(self) -> None:
        """UsageError when the location cannot hold a store."""

    def size_bytes(self) -> int:
        """How many bytes the store takes (0 when that cannot be told)."""

    def reading(self, *, as_actor: str | None = None, bounded: bool = False) -> ContextManager[Tx]:
        """A read-only view; NoStore when there is no store yet. ``as_actor``: the view answers that
        actor, and a backend that can holds it, in the database, to what the actor may see (never
        more than ``rules.visibility`` allows, with any grant the actor was ever given: PostgreSQL's
        row security, ``pg/isolation.py``); the engine's own rule still applies on top.
        ``bounded``: the backend may hold the memory the view uses in this process to a bound; a
        read that does not fit raises ``OverBudget`` out of the view (the caller reads again
        through a view that is not bounded)."""

    def worker_address(self, tx: Tx) -> str:
        """What ``open_storage`` takes, in a worker process, for a reading view that sees exactly
        what ``tx`` (a view from ``reading``, held open meanwhile) sees; never printed."""

    def transaction(self, *, bulk: bool = False, tidy: bool = True) -> ContextManager[Tx]:
        """A write transaction, creating the store when needed: committed when the block ends,
        rolled back (nothing written) when it raises. Writers take turns. ``bulk``: one of many
        transactions of a bulk load; the backend may hold the memory it uses to a bound, and
        unless ``tidy``, leave its housekeeping (merging what earlier writes left) to a later
        transaction of the load that tidies (the last one does)."""

    def searching(self, *, as_actor: str | None = None) -> ContextManager[Tx]:
        """A read-only view for find: like ``reading``, but it may be answered from a cache of
        the backend's that is current. Its methods may raise ``CacheUnusable``: the caller
        then starts over with ``reading``."""

    def update_index(self, model: str, *, rebuild: bool = False, progress: Callable[[int, int], None] | None = None,
                     loader: Any = None, wait: float | None = None, later: bool = False) -> dict:
        """Bring the search structures for ``model``'s vectors up to date (from scratch with
        ``rebuild``): {"action": "fold", "rebuild" or "none", "vectors": n, ...}. ``loader``:
        an ``index_loader`` an import filled. ``wait``: seconds to wait for other writers.
        ``later`` (with ``rebuild``): the backend may leave the index to a background build
        (of a store ``restore_bundle`` is making: once it is in place, its other read caches
        brought up to date now); {"action": "background"} then, and until the build is done
        ``Tx.nearest`` raises ``IndexUnusable`` with ``building`` set."""

    def index_loader(self, model: str, *, threads: int = 1, expected: int = 0) -> Any:
        """Something a bulk load hands each committed batch of vectors (``add(last_key, ids,
        versions, matrix, owners=...)``, ``owners`` each memory's (visibility, actor): a backend
        may index memories by who may see them) so that ``update_index(loader=...)`` need not read them again, using
        up to ``threads`` cores meanwhile; ``close()`` when it is not used. ``expected``: how many
        memories the load brings, for a backend whose structures are built for a size."""

    def after_vectors(self, model: str, last_key: int) -> None:
        """After a write stored vectors (``insert_vectors`` returned ``last_key``): the cheap
        upkeep the backend's search structures want. Never fails."""

    def index_health(self, model: str | None) -> dict:
        """The healthcheck's ``index`` block for ``model``: where the index is, whether it exists,
        its count, model and dimension, whether it is consistent, its state, and whether a
        background build of it is under way (``building``)."""

    def cache_health(self) -> dict:
        """The healthcheck's block on the backend's read cache: {state, problem, fold_failed}
        (``fold_failed``: {at, error} of the last background fold that failed since one completed,
        or None)."""

    def export_bundle(self, dest: Any) -> tuple[list[dict], dict]:
        """Write the store's tables, from one committed state, as a bundle's members into the
        bundle being written (``dest``, one member per table in the bundle's format; writers wait
        meanwhile, readers go on): ([{table, name, rows}], {schema_version, vectors,
        journal_position})."""

    def restore_bundle(self, members: dict[str, Any], schema_version: int, check: Callable[["Storage"], None]) -> None:
        """Replace the whole store (or make it) with a checked bundle's members (table -> member),
        atomically: the new store is made aside, handed to ``check`` (raising abandons it) and
        only then takes the old one's place. A failed restore leaves the store as it was."""


__all__ = ["Storage", "Tx", "Filters", "Viewer", "Scope", "viewer_of", "GRANT_FIELDS", "Scoring", "NoStore", "HEAD_FIELDS", "VERSION_FIELDS",
           "SALIENCE_FIELDS", "CacheUnusable", "JOURNAL_FIELDS", "WEIGHT_FIELDS", "CHECKPOINT_FIELDS", "MEMORY_KINDS",
           "JournalEntry", "IndexUnusable", "Remark", "CAPABILITIES", "Records", "Journal",
           "Listing", "LexicalSearch", "VectorSearch", "Feedback", "Grants", "Integrity", "BundleIO", "Holding"]
