"""Record time: the store as it stood at a past time T (``find --as-of``, ``show --as-of``).

The store as of record time T is the journal up to S = ``Tx.seq_at(T)``, the last entry
stamped at or before T: a state the store passed through. As of S: the versions current
then, tombstones and un-forgets, every head field (tags, frames, importance, visibility, and
any other a head carries), the attest counters (access, citations, last used); the grants live
at T (granted by an entry <= S, not revoked by an entry <= S, not expired at T); the actor's
learned salience weights (the last ``learn_weights`` entry <= S of that actor, else the
defaults); and salience computed at T. T before the first entry: the store was empty.

How: a memory's state now equals its state at S unless the journal has an entry about it
after S. So

1. the changed set C is the memories the entries after S name (``MEMORY_KINDS``) and those an
   attest after S affected;
2. each member of C is replayed from its own entries <= S (``engine/replay.py``), its counters
   from the attests <= S that affected it; a member written after S did not exist at T;
3. ``find`` runs its lanes as usual (``engine/find.py``) with the filters and scoring of T (the
   scopes of the grants live at T, salience at T under the weights of S), dropping every member of
   C from each lane's answer and asking again for more while too few remain (``Past.lane``): what
   remains is exactly as it was at S.
   The members of C that existed at S and pass the same filters, evaluated over their replayed
   heads (the rules of ``store/rules.py``, stated once), join each lane scored on their version
   of then: BM25 of its terms (``Tx.score_terms``), the cosine of the embedder's vector of its
   text with the query's (the stored vector when that version is the current one and the embedder is
   ``costly``), and salience on the replayed head at T. Above ``EXACT_VECTORS``
   changed memories the semantic lane compares vectors exactly rather than search the index again
   and again.

Exact: which memories pass the filters, their versions, texts and fields, and salience
(so ``find --as-of`` without ``--near`` ranks exactly as ``find`` did at T). Approximate,
with ``--near``: the lexical and semantic scores, which use today's term statistics (and
today's query expansion for the memories that did not change) and the current embedding
model; so the order, and which memories make the cut of ``-k``, may differ from what a
search at T ranked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Sequence

from cortexctl.engine import replay
from cortexctl.engine.results import AsOf, Memory
from cortexctl.errors import NotFound
from cortexctl.memory import codec
from cortexctl.store.interface import MEMORY_KINDS, Filters, Scope, Scoring, Tx, Viewer

if TYPE_CHECKING:
    from cortexctl.engine.context import Context

# Changed memories above which the semantic lane searches exactly rather than over-fetch the index by
# that many: at 100k memories the over-fetch was still the faster by 2x with 10,000 (bench/asof_bench.py).
EXACT_VECTORS = 20_000
LANE_MARGIN = 32  # a lane's first ask under --as-of: n + max(n, this), at most n + |C| (``Past.lane``)


def moment(ctx: Context, value: str | datetime) -> datetime:
    """The record time asked for, as naive UTC: text as users give it (``engine/when.py``) or a
    ``datetime``; a time after now is a UsageError (exit 2)."""
    from cortexctl.engine import when

    text = value.isoformat() if isinstance(value, datetime) else value
    return when.parse_past(text, ctx.clock(), field="as_of")


def replay_memories(tx: Tx, ids: Sequence[str], upto: int) -> dict[str, replay.Memory]:
    """Each of ``ids`` that existed at journal entry ``upto``, replayed from its entries up to it:
    head (counters included) and versions as they stood then."""
    if not ids or upto <= 0:
        return {}
    mems: dict[str, replay.Memory] = {}
    first = None
    for seq, kind, _ts, _actor, ref, payload in tx.journal_window(0, upto, MEMORY_KINDS, refs=sorted(ids)):
        mems.setdefault(ref, replay.Memory()).apply(seq, kind, payload)
        if first is None:
            first = seq
    if first is not None:
        for seq, _kind, _ts, _actor, _ref, payload in tx.journal_window(first, upto, ("attest",)):
            _doc, affected, event = replay.attest_events(seq, payload)
            for id_ in affected:
                m = mems.get(id_)
                if m is not None and m.head is not None:
                    m.attested(seq, event)
    return {i: m for i, m in mems.items() if m.head is not None}


def changed_after(tx: Tx, seq: int) -> tuple[set[str], set[str]]:
    """The memories the journal names after entry ``seq`` (written, changed, forgotten, un-forgotten
    or attested since), and those of them written since (nothing of theirs to replay)."""
    changed: set[str] = set()
    born: set[str] = set()
    for _s, kind, _ts, _actor, ref, _payload in tx.journal_window(seq, None, MEMORY_KINDS, payloads=False):
        if ref is not None:
            changed.add(ref)
            if kind == "write":
                born.add(ref)
    for s, _kind, _ts, _actor, _ref, payload in tx.journal_window(seq, None, ("attest",)):
        changed.update(replay.attest_events(s, payload)[1])
    return changed, born


def grants_upto(tx: Tx, seq: int) -> list[dict]:
    """Every grant as it stood after journal entry ``seq`` (revoked ones too), replayed."""
    grants = replay.Grants()
    for s, kind, _ts, _actor, _ref, payload in tx.journal_window(0, seq, ("grant", "revoke")):
        grants.apply(s, kind, payload)
    return list(grants.rows.values())


def scopes_at(tx: Tx, actor: str, seq: int, at: datetime, grants: Sequence[dict] | None = None
              ) -> tuple[Scope, ...]:
    """The scopes of the grants ``actor`` held at ``at``: granted by an entry up to ``seq``, not
    revoked by one, not expired at ``at`` (as ``Context.viewer_for`` reads the live ones now).
    ``grants``: ``grants_upto(tx, seq)`` when already in hand."""
    return tuple((g["granter"], tuple(g["types"]), tuple(g["tags"]))
                 for g in (grants_upto(tx, seq) if grants is None else grants)
                 if g["subagent"] == actor and g["granter"] != actor and g["revoked_at"] is None
                 and (g["expires_at"] is None or g["expires_at"] > at))


def weights_at(tx: Tx, actor: str, seq: int) -> tuple[float, ...]:
    """``actor``'s learned salience weights as of journal entry ``seq``: those of its last
    ``learn_weights`` entry up to it, else the defaults."""
    from cortexctl.engine import salience

    now = tx.all_weights().get(actor)
    if now is None:
        return tuple(salience.DEFAULT_WEIGHTS)
    if now["seq"] <= seq:
        return tuple(float(w) for w in now["weights"])
    last = None
    for s, _kind, _ts, who, _ref, payload in tx.journal_window(0, seq, ("learn_weights",)):
        if who == actor:
            last = (s, payload)
    if last is None:
        return tuple(salience.DEFAULT_WEIGHTS)
    return tuple(float(w) for w in replay._doc(*last)["new"])


class Heads:
    """Heads in hand (replayed ones) as ``predicate.Columns``: the rules of ``store/rules.py``
    evaluate over them as over the store's columns. Each column is read once."""

    _NUMBERS = {"importance": "importance", "access": "access_count", "citations": "citations",
                "confidence": "confidence"}

    def __init__(self, heads: Sequence[dict]) -> None:
        self.heads = list(heads)
        self._columns: dict[str, list] = {}

    def _column(self, name: str) -> list:
        got = self._columns.get(name)
        if got is None:
            from cortexctl.store.predicate import epoch_seconds

            if name == "tombstoned":
                got = [h["tombstoned_at"] is not None for h in self.heads]
            elif name == "recent":
                got = [epoch_seconds(h["updated_at"] if h["last_used"] is None or h["last_used"] < h["updated_at"]
                                     else h["last_used"]) for h in self.heads]
            else:
                key = self._NUMBERS.get(name, name)
                got = [epoch_seconds(v) if isinstance(v, datetime) else v for v in (h.get(key) for h in self.heads)]
            self._columns[name] = got
        return got

    def array(self, name: str):
        import numpy as np

        if name == "tombstoned":
            return np.array(self._column(name), dtype=np.bool_)
        return np.array([float("nan") if v is None else float(v) for v in self._column(name)], dtype=np.float64)

    def equals(self, name: str, value):
        import numpy as np

        return np.array([v == value for v in self._column(name)], dtype=np.bool_)

    def isin(self, name: str, values: tuple):
        import numpy as np

        return np.array([v in values for v in self._column(name)], dtype=np.bool_)

    def has_tag(self, tag: str):
        import numpy as np

        return np.array([tag in h["tags"] for h in self.heads], dtype=np.bool_)

    def times(self, name: str):
        """(µs since 1970, NULL) of a valid time column (``predicate.TIME_COLUMNS``)."""
        import numpy as np

        values = [h.get(name) for h in self.heads]
        at = np.array([0 if v is None else (v - datetime(1970, 1, 1)) // timedelta(microseconds=1) for v in values],
                      dtype=np.int64)
        return at, np.array([v is None for v in values], dtype=np.bool_)

    def has_frame(self, verb: str, kind: str | None, ref: str | None):
        import numpy as np

        want = [verb] + [p for p in (kind, ref) if p is not None]

        def has(h: dict) -> bool:
            return any(str(f).split(":", 2)[:len(want)] == want for f in h["frames"])

        return np.array([has(h) for h in self.heads], dtype=np.bool_)


@dataclass
class Then:
    """What the journal up to entry ``seq`` and after it says, whoever asks and whenever: kept by a
    resident process while the store stays as it is (``Tx.journal_memo``), so that its next
    ``find --as-of`` at the same entry reads nothing of the journal again. What it works out of the
    changed memories' versions of then (texts, their terms, their vectors by model) is kept with it:
    a version never changes."""

    changed: frozenset[str]
    memories: dict[str, replay.Memory]
    grants: list[dict]
    weights: dict[str, tuple[float, ...]] = field(default_factory=dict)  # by actor
    texts: dict[str, str] = field(default_factory=dict)
    terms: dict[str, list[int]] = field(default_factory=dict)
    vectors: dict[tuple[str, str], object] = field(default_factory=dict)  # (model, ID) -> vector


MEMO_MOMENTS = 256  # record times asked for, kept with the entry each stood at (``past``)
MEMO_PASTS = 4  # replayed pasts kept, by entry


@dataclass
class Past:
    """What ``find --as-of`` needs of the store at record time ``at`` (journal entry ``seq``)."""

    at: datetime
    seq: int
    changed: frozenset[str]  # C: the memories the journal names after ``seq``
    memories: dict[str, replay.Memory]  # the members of C that existed at ``seq``, as they stood
    scopes: tuple[Scope, ...]  # the grants the actor held at ``at``
    weights: tuple[float, ...]  # its learned weights at ``seq``
    salience: dict[str, float] = field(default_factory=dict)  # of members that passed ``passing``
    then: Then | None = None  # where the texts, terms and vectors of then are kept

    @property
    def as_of(self) -> AsOf:
        return AsOf(self.at, self.seq)

    @property
    def scoring(self) -> Scoring:
        from cortexctl.engine import salience

        return Scoring(self.at, salience.HALF_LIFE_SECONDS, self.weights)

    @property
    def exact_vectors(self) -> bool:
        return len(self.changed) > EXACT_VECTORS

    def drop(self, lane: list[tuple[str, float]]) -> list[tuple[str, float]]:
        """A lane's answer without the members of C (whose state now is not theirs of then)."""
        return [p for p in lane if p[0] not in self.changed] if self.changed else lane

    def lane(self, fetch, n: int) -> list[tuple[str, float]]:
        """A lane's best ``n`` (at least; fewer when it has no more) of the memories not in C, from
        ``fetch(count)``, which answers the lane's best ``count``, best first. It asks for a margin over
        ``n`` and asks again, for more, while the members of C it drops leave fewer than ``n``: the members
        of C are few among the best of a lane, so one round is the rule, where over-fetching by |C| read
        |C| more every time."""
        if not self.changed:
            return fetch(n)
        margin = min(len(self.changed), max(n, LANE_MARGIN))
        while True:
            got = fetch(n + margin)
            kept = self.drop(got)
            if len(kept) >= n or len(got) < n + margin or margin >= len(self.changed):
                return kept
            margin = min(len(self.changed), margin * 4)

    def passing(self, filters: Filters, scoring: Scoring) -> list[str]:
        """The members of C that existed then and pass ``filters`` as they stood, in ID order; their
        salience at ``scoring`` is kept in ``salience``."""
        from cortexctl.store import rules
        from cortexctl.store.predicate import evaluate

        ids = sorted(self.memories)
        if not ids:
            return []
        env = Heads([self.memories[i].head for i in ids])
        ok = evaluate(rules.filters(filters), env).tolist()
        sal = evaluate(rules.salience(scoring), env).tolist()
        out = [i for i, keep in zip(ids, ok) if keep]
        self.salience.update((i, s) for i, s, keep in zip(ids, sal, ok) if keep)
        return out

    def version(self, id_: str) -> dict:
        m = self.memories[id_]
        return m.versions[m.head["current_version"]]

    def search_data(self, ids: Sequence[str]) -> dict[str, tuple[int, bytes]]:
        """(type code, data) of the version of then of each member of C among ``ids``."""
        return {i: (v["type"], v["data"]) for i in ids if i in self.memories for v in (self.version(i),)}

    def search_text(self, id_: str) -> str:
        from cortexctl.memory import schema
        from cortexctl.memory.types import type_name

        kept = None if self.then is None else self.then.texts
        text = None if kept is None else kept.get(id_)
        if text is None:
            v = self.version(id_)
            text = schema.search_text(type_name(v["type"]), codec.decode(v["data"]))
            if kept is not None:
                kept[id_] = text
        return text

    def terms(self, id_: str, text: str) -> list[int]:
        from cortexctl.memory.terms import text_terms

        kept = None if self.then is None else self.then.terms
        got = None if kept is None else kept.get(id_)
        if got is None:
            got = text_terms(text)
            if kept is not None:
                kept[id_] = got
        return got

    def result_rows(self, ids: Sequence[str], form: str) -> dict[str, dict]:
        """What a find result shows of the members of C among ``ids``, as they stood (``Tx.result_rows``)."""
        return {i: {**self.memories[i].head, "text": self.version(i)[form]} for i in ids if i in self.memories}

    def current_versions(self, ids: Sequence[str]) -> dict[str, dict]:
        return {i: self.version(i) for i in ids if i in self.memories}

    def vectors(self, tx: Tx, embedder, ids: Sequence[str], texts: dict[str, str], dim: int, dtype: str):
        """The vector of each of ``ids``' version of then, in order: the stored one where the store keeps
        one of that version (it is the current one: nothing but its head changed since) and the
        embedder is ``costly`` (``embed/__init__.py``), else the embedder's of its text. At 100k DuckDB
        reads 750 scattered vectors back in about 300 ms, where the hash embedder makes them in about
        10 ms and e5 on a CPU in a minute (bench/README.md). A vector made now is rounded to ``dtype``,
        the precision the store holds one to (``Storage.vector_dtype``), as the one find scored then was."""
        import numpy as np

        kept = None if self.then is None else self.then.vectors
        stored = {} if kept is None else {i: v for i in ids if (v := kept.get((embedder.model, i))) is not None}
        if embedder.costly:
            asked = [i for i in ids if i not in stored]
            if asked:
                got = tx.stored_vectors([(i, self.memories[i].head["current_version"]) for i in asked], embedder.model)
                stored.update((i, v) for i, v in got.items() if v.shape == (dim,))
        if not stored and kept is None:
            return embedder.embed([texts[i] for i in ids]).astype(dtype).astype(np.float32)
        rest = [i for i in ids if i not in stored]
        if rest:
            made = embedder.embed([texts[i] for i in rest]).astype(dtype).astype(np.float32)
            stored.update(zip(rest, made))
        if kept is not None:
            kept.update(((embedder.model, i), stored[i]) for i in ids)
        return np.stack([stored[i] for i in ids]).astype(np.float32, copy=False)

    def join(self, tx: Tx, ctx: Context, qw: dict[int, float], qvec, filters: Filters, scoring: Scoring,
             lanes: tuple[list, list, list], n: int, semantic: bool) -> tuple[list, list, list]:
        """The three lanes' answers of now, less C, with the members of C that pass the filters as they
        stood, each scored on its version of then; each lane best first, ties by ID, at most ``n``.
        ``qw``: the query's terms (term ID -> weight); ``qvec``: its vector; ``semantic``: the
        semantic lane ran."""
        lexical, nearest, salient = (self.drop(lane) for lane in lanes)
        ids = self.passing(filters, scoring)
        if not ids:
            return lexical, nearest, salient
        texts = {i: self.search_text(i) for i in ids}
        lex = tx.score_terms(qw, [(i, self.terms(i, texts[i])) for i in ids], filters.viewer)
        lexical = _best(lexical + [(i, s) for i, s in lex.items() if s > 0], n)
        if semantic and qvec is not None:
            sims = self.vectors(tx, ctx.embedder, ids, texts, len(qvec), ctx.storage.vector_dtype) @ qvec
            nearest = _best(nearest + [(i, float(s)) for i, s in zip(ids, sims.tolist()) if s > 0], n)
        salient = _best(salient + [(i, self.salience[i]) for i in ids], n)
        return lexical, nearest, salient


def _best(pairs: list[tuple[str, float]], n: int) -> list[tuple[str, float]]:
    return sorted(pairs, key=lambda p: (-p[1], p[0]))[:n]


def past(ctx: Context, tx: Tx, at: datetime) -> Past:
    """The store at record time ``at``, as ``find`` reads it in ``tx`` (at journal entry 0, before
    the journal began: nothing)."""
    memo = tx.journal_memo()
    moments = pasts = None
    if memo is not None:
        moments, pasts = memo.setdefault("asof.moments", {}), memo.setdefault("asof.pasts", {})
    seq = None if moments is None else moments.get(at)
    if seq is None:
        seq = tx.seq_at(at)
        if moments is not None:
            if len(moments) >= MEMO_MOMENTS:
                moments.pop(next(iter(moments)))
            moments[at] = seq
    if seq == 0:
        return Past(at=at, seq=0, changed=frozenset(), memories={}, scopes=(), weights=())
    then = None if pasts is None else pasts.get(seq)
    if then is None:
        changed, born = changed_after(tx, seq)
        then = Then(changed=frozenset(changed), memories=replay_memories(tx, sorted(changed - born), seq),
                    grants=grants_upto(tx, seq))
        if pasts is not None:
            if len(pasts) >= MEMO_PASTS:
                pasts.pop(next(iter(pasts)))
            pasts[seq] = then
    weights = then.weights.get(ctx.actor)
    if weights is None:
        weights = then.weights[ctx.actor] = weights_at(tx, ctx.actor, seq)
    return Past(at=at, seq=seq, changed=then.changed, memories=then.memories,
                scopes=scopes_at(tx, ctx.actor, seq, at, then.grants), weights=weights,
                then=then if pasts is not None else None)


def show(ctx: Context, ref: str, value: str | datetime, *, version: int | None = None) -> tuple[Memory, AsOf]:
    """One memory as it stood at record time ``value``: head fields, counters and tombstone then, at
    the version current then (or ``version``, one it had then). NotFound when it did not exist then
    or the actor could not see it then (the same words for both: nothing is revealed); resolving
    ``ref`` needs the actor to see it now, as ``show`` does."""
    from cortexctl.engine.memories import memory_of, wanted_version
    from cortexctl.engine.refs import resolve
    from cortexctl.engine.results import iso
    from cortexctl.store import rules
    from cortexctl.store.predicate import evaluate

    want = wanted_version(ref, version)
    at = moment(ctx, value)
    with ctx.reading() as tx:
        seq = tx.seq_at(at)
        head = resolve(tx, ctx.viewer, ref)
        id_ = head["id"]
        gone = NotFound(f"memory {id_} did not exist at {iso(at)}, or actor {ctx.actor!r} could not see it then")
        m = replay_memories(tx, [id_], seq).get(id_)
        if m is None:
            raise gone
        viewer = Viewer(ctx.actor, scopes_at(tx, ctx.actor, seq, at))
        if not evaluate(rules.visibility(viewer), Heads([m.head])).tolist()[0]:
            raise gone
    current = m.head["current_version"]
    n = want or current
    if n > current:
        raise NotFound(f"memory {id_} had no version {n} at {iso(at)} (its latest then was {current})")
    return memory_of(m.head, m.versions[n]), AsOf(at, seq)


__all__ = ["Past", "Then", "Heads", "past", "grants_upto", "show", "moment", "replay_memories", "changed_after", "scopes_at",
           "weights_at", "EXACT_VECTORS"]
