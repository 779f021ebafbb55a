"""find: three lanes, merged by weighted score fusion, bounded by -k and a token budget.

Lanes, each over the memories that pass the filters and the visibility rule:

- **lexical**: the store's ``Tx.search_terms`` over the query's terms (the same
  Porter-stemmed, stopword-free terms as the memories', ``memory.terms``): a
  relevance score with term statistics over every memory the actor may see, so
  a score reveals nothing of another actor's private words (the DuckDB backend
  scores BM25 with one pass of pseudo-relevance feedback: ``store/lexical.py``);
- **semantic**: the store's ``Tx.nearest``: cosine similarity between the query's
  embedding and each memory's vector (the DuckDB backend searches an HNSW index
  file, or compares exactly under a narrow filter);
- **salience**: the memories with the highest salience under the actor's
  learned weights (recency, importance, access, citations, confidence; see
  ``engine/salience.py``), so what was written a moment ago and is not yet
  embedded can still surface.

Session context (``session_context``): each memory the lexical lane found lends
``W_CONTEXT[d - 1]`` times its ``bm25 / max_bm25`` to the memories ``d`` places before and after
it in its session (creation order, among those passing the filters); a memory's ``context`` is the
most it is lent, and one no lane found joins the candidates with the lane ``context``.

Dates (``by_phrase``, ``engine/dates.py``): among the best ``PHRASE_WINDOW``, a candidate the
words matched (lanes lexical or context) whose day (``memory_day``) falls on a date the query
names gains ``W_DATE``, before the phrase regrouping.

Fusion (with ``--near``): every candidate any lane or its session returned gets

    score = W_LEX * bm25 / max_bm25 + w_sem * max(cos, 0) + W_SAL * salience + context

where max_bm25 is the best lexical score of this query (so the lexical part
is in [0, 1]) and w_sem is the model's weight: ``W_SEM_HASH`` for the built-in
hash embedder, whose vectors know spelling but not meaning,
``W_SEM_WORDLLAMA`` for the static local model (``embedding.model =
"wordllama-l2-256"``) and ``W_SEM_MODEL`` for any other real embedding model. A lane that returns nothing adds
nothing. Then, among the best ``PHRASE_WINDOW`` candidates, a memory whose text
is the query (words compared in lower case) comes first, then those holding the
query's words as one phrase, then the rest, each group in score order: an exact
match is never outranked by a longer memory that repeats the words. Ties break
by ID. A hit is *matched* when the lexical lane found it, it borrowed from a session
neighbour the lexical lane found, it holds the phrase, or its similarity reaches
``MATCH_SIMILARITY_*`` (per embedder, ``semantic_weights``); otherwise only its
salience brought it, and the output says so. Without ``--near`` only the
salience lane runs and results come in salience order.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING

from cortexctl.engine.dates import periods, within
from cortexctl.engine.results import FindHit, FindQuery, Note, iso
from cortexctl.memory import codec
from cortexctl.memory.forms import count_tokens
from cortexctl.memory.ids import id_time_ms
from cortexctl.memory.terms import term_id, terms, words
from cortexctl.memory.types import type_name as stored_type
from cortexctl.store.interface import Filters, Remark, Scoring, Tx, Viewer

if TYPE_CHECKING:
    from cortexctl.engine.context import Context

W_LEX = 1.0
_NEVER = datetime(1, 1, 1)
W_SEM_HASH = 0.05  # LoCoMo recall@10 is flat from 0 to 0.1 and falls beyond: a tie-break and a fallback
W_SEM_MODEL = 1.0
W_SEM_WORDLLAMA = 0.25  # LoCoMo recall@10, both halves: 0.1 0.682, 0.25 0.689, 0.5 0.684, 1 0.653
W_SAL = 0.05
# What a memory borrows of the lexical score of a memory 1, 2, ... places away in its session
# (LoCoMo, tuning half: recall@10 0.681 -> 0.732; see bench/README.md)
W_CONTEXT = (0.4, 0.2)
W_DATE = 0.4  # a matched memory whose time falls on a date the query names (LoCoMo tuning half: 0.732 -> 0.745)
MIN_CANDIDATES = 50
PHRASE_WINDOW = 50  # candidates whose text is compared with the query as a phrase
MATCH_SIMILARITY_HASH = 0.3  # the hash embedder: unrelated texts stay below ~0.15
MATCH_SIMILARITY_MODEL = 0.5
MATCH_SIMILARITY_LOCAL = 0.35  # the local model (centred e5): ~90th percentile of unrelated LoCoMo turns
MATCH_SIMILARITY_WORDLLAMA = 0.4  # the static local model: ~90th percentile of unrelated LoCoMo turns


@dataclass
class Candidate:
    id: str
    lanes: list[str]
    similarity: float | None = None
    lexical: float | None = None  # the BM25 score
    lexical_norm: float = 0.0  # divided by the query's best BM25 score
    salience: float = 0.0
    context: float = 0.0  # the most it borrows of its session neighbours' lexical_norm (``session_context``)
    score: float = 0.0
    tier: int = 0  # 2: the query's exact text, 1: the query as a phrase (``by_phrase``)


def scoring(tx: Tx, actor: str, now) -> Scoring:
    """The salience parameters under ``actor``'s learned weights."""
    from cortexctl.engine import salience

    weights = tx.weights(actor) or salience.DEFAULT_WEIGHTS
    return Scoring(now, salience.HALF_LIFE_SECONDS, tuple(weights))


def query_terms(text: str) -> dict[int, float]:
    """Distinct query terms, each weighing 1."""
    return {term_id(t): 1.0 for t in terms(text)}


def run(ctx: Context, query: FindQuery, filters: Filters, stood: list | None = None) -> tuple[list[FindHit], list[str]]:
    """The ranked hits and any warnings (a lane that could not run, an index rebuilt); with
    ``query.as_of``, as the store stood at that record time (``engine/asof.py``), and ``stood``
    then holds the ``AsOf`` answered (the journal entry it stands at)."""
    from cortexctl.errors import CortexError, StoreBusy
    from cortexctl.store.interface import IndexUnusable

    warnings: list[str] = []
    stood = [] if stood is None else stood
    qvec = _embed_query(ctx, query.near, warnings) if query.near is not None else None
    try:
        return _search(ctx, query, filters, qvec, warnings, stood), warnings
    except IndexUnusable as exc:
        reason = exc.message
        # a damaged file left as it is wants the user's attention (a warning); a cache merely out of
        # date does not (a note, shown with -v)
        say = str if exc.damaged else Note
        building = exc.building
    if not building:  # a background build under way (after a restore, say) is not started twice
        try:
            # never queue behind another writer; a backend that can builds it in the background
            done = ctx.storage.update_index(ctx.embedder.model, rebuild=True, wait=0, later=True)
        except StoreBusy:
            warnings.append(say(f"index {reason} and another writer holds the store: exact search "
                                "(cortexctl reindex repairs it)"))
            return _search(ctx, query, filters, qvec, warnings, stood, exact=True), warnings
        except (CortexError, OSError) as err:  # a read-only store, a full disk: answer all the same
            detail = err.message if isinstance(err, CortexError) else (err.strerror or type(err).__name__)
            warnings.append(say(f"index {reason} and it cannot be rebuilt ({detail}): exact search "
                                "(cortexctl reindex repairs it)"))
            return _search(ctx, query, filters, qvec, warnings, stood, exact=True), warnings
        building = done.get("action") == "background"
    if building:
        warnings.append(say(f"index {reason}; being built in the background: exact search"))
        return _search(ctx, query, filters, qvec, warnings, stood, exact=True), warnings
    try:
        hits = _search(ctx, query, filters, qvec, warnings, stood)
        warnings.append(Note(f"index {reason}: rebuilt"))
        return hits, warnings
    except IndexUnusable as exc:  # nothing to build it from (no vectors of this model yet)
        warnings.append(Note(f"index {exc.message}: exact search"))
        return _search(ctx, query, filters, qvec, warnings, stood, exact=True), warnings


def _search(ctx: Context, query: FindQuery, filters: Filters, qvec, warnings: list[str], stood: list, *,
            exact: bool = False) -> list[FindHit]:
    """One search, answered from the search snapshot when it is current, else from the store
    (and from the store alone when the snapshot fails on the way: damaged, or the store moved on)."""
    from cortexctl.store.interface import CacheUnusable

    found: list[str] = []
    try:
        hits = _search_in(ctx.searching, ctx, query, filters, qvec, found, stood, exact=exact)
    except CacheUnusable:
        found = []
        hits = _search_in(ctx.reading, ctx, query, filters, qvec, found, stood, exact=exact)
    warnings.extend(found)
    return hits


def _search_in(view, ctx: Context, query: FindQuery, filters: Filters, qvec, warnings: list[str], stood: list, *,
               exact: bool = False) -> list[FindHit]:
    n = max(query.k * 3, MIN_CANDIDATES)
    # held to what the actor may see now by the database, where the backend can (the past's
    # visibility is the journal's, which the engine's rule alone reads)
    with view(held=query.as_of is None) as tx:
        past = None
        if query.as_of is None:
            filters = replace(filters, scopes=ctx.viewer.scopes)  # the live grants the actor holds, now
            score = scoring(tx, ctx.actor, ctx.clock())
        else:  # the changed memories are dropped from each lane's answer, and join as they stood
            from cortexctl.engine import asof

            past = asof.past(ctx, tx, query.as_of)
            stood[:] = [past.as_of]
            if past.seq == 0:
                warnings.append(Note(f"the journal begins after {iso(past.at)}: the store held nothing then"))
                return []
            # the grants live then, and what had ended by then (unless --include-superseded/--valid-at)
            filters = replace(filters, scopes=past.scopes,
                              ended_by=None if filters.ended_by is None else past.at)
            score = past.scoring

        def lane(fetch, count: int) -> list[tuple[str, float]]:
            return fetch(count) if past is None else past.lane(fetch, count)

        if query.near is None:
            top = lane(lambda c: tx.top_salience(filters, score, c), query.k)
            if past is not None:
                top = _salience_order(tx, top, past, filters, score)
            ranked = [Candidate(i, ["salience"], salience=s) for i, s in top[:query.k]]
            hits = _hits(tx, ranked, query, score.now, past)
            if not hits and past is None:
                _no_visible_memory(tx, filters.viewer, warnings)
            return hits
        nearest: list[tuple[str, float]] = []
        qw = query_terms(query.near)
        lexical = lane(lambda c: tx.search_terms(qw, filters, c), n)
        semantic = False
        if qvec is not None:
            notes: list = []

            def near(count: int) -> list[tuple[str, float]]:
                got, note = tx.nearest(qvec, ctx.embedder.model, filters, count,
                                       exact=exact or (past is not None and past.exact_vectors))
                notes[:] = [note]
                return got

            nearest = lane(near, n)
            note = notes[0]
            semantic = not note or isinstance(note, Remark)  # the lane ran (a warning: it could not)
            if note:
                warnings.append(Note(note) if isinstance(note, Remark) else note)
        salient = lane(lambda c: tx.top_salience(filters, score, c), n)
        if past is not None:
            lexical, nearest, salient = past.join(tx, ctx, qw, qvec, filters, score,
                                                  (lexical, nearest, salient), n, semantic)
        cands = fuse(lexical, nearest, salient)
        if past is None:  # as of a past time: the lanes alone (sessions are read as they are now)
            session_context(tx, cands, filters)
        missing = [c.id for c in cands.values() if "salience" not in c.lanes]
        if past is not None:
            for id_ in [i for i in missing if i in past.changed]:
                cands[id_].salience = past.salience[id_]
            missing = [i for i in missing if i not in past.changed]
        for id_, (_version, _passes, sal) in tx.candidates(missing, filters, score).items():
            cands[id_].salience = sal
        spans = periods(query.near, score.now.date())
        w_sem, floor = semantic_weights(ctx.embedder)
        ranked = by_phrase(tx, rank(cands.values(), w_sem=w_sem), query.near, past, spans)
        hits = _hits(tx, ranked, query, score.now, past)
        tier = {c.id: c.tier for c in ranked[:PHRASE_WINDOW]}
        for h in hits:
            h.matched = ("lexical" in h.lanes or "context" in h.lanes or tier.get(h.id, 0) > 0
                         or (h.similarity or 0.0) >= floor)
        if not hits and past is None:
            _no_visible_memory(tx, filters.viewer, warnings)
        return hits


def _salience_order(tx: Tx, lane: list[tuple[str, float]], past, filters: Filters, score: Scoring
                    ) -> list[tuple[str, float]]:
    """``find --as-of`` without ``near``: the salience lane's answer (less the changed memories) and
    the changed memories that pass the filters as they stood, merged in ``Tx.top_salience``'s order
    (highest first, then the later update, then the higher ID)."""
    lane = past.drop(lane)
    joined = [(i, past.salience[i]) for i in past.passing(filters, score)]
    if not joined:
        return lane
    updated = {i: m.head["updated_at"] for i, m in past.memories.items()}
    tied = {s for _, s in joined}  # only a lane memory of equal salience needs its update time
    updated.update((r["id"], r["updated_at"]) for r in tx.heads_by_ids([i for i, s in lane if s in tied], filters.viewer,
                                                                        ("id", "updated_at")))

    def key(p: tuple[str, float]):
        return p[1], updated.get(p[0], _NEVER), p[0]

    joined.sort(key=key, reverse=True)
    out: list[tuple[str, float]] = []
    j = 0
    for p in lane:  # already in order: the changed memories go in between
        while j < len(joined) and key(joined[j]) > key(p):
            out.append(joined[j])
            j += 1
        out.append(p)
    return out + joined[j:]


def _embed_query(ctx: Context, text: str, warnings: list[str]):
    from cortexctl.errors import ConfigError, ProviderUnreachable

    try:
        return ctx.embedder.embed_query(text)
    except (ProviderUnreachable, ConfigError) as exc:
        warnings.append(f"semantic lane skipped: {exc.message}")
        return None


def fuse(lexical, semantic, salient) -> dict[str, Candidate]:
    """Merge the lanes' (id, score) lists into one candidate per memory."""
    by_id: dict[str, Candidate] = {}

    def get(id_: str) -> Candidate:
        c = by_id.get(id_)
        if c is None:
            c = by_id[id_] = Candidate(id_, [])
        return c

    top_lex = lexical[0][1] if lexical else 0.0
    for id_, s in lexical:
        c = get(id_)
        c.lanes.append("lexical")
        c.lexical = s
        c.lexical_norm = s / top_lex if top_lex > 0 else 0.0
    for id_, s in semantic:
        c = get(id_)
        c.lanes.append("semantic")
        c.similarity = s
    for id_, s in salient:
        c = get(id_)
        c.lanes.append("salience")
        c.salience = s
    return by_id


def session_context(tx: Tx, cands: dict[str, Candidate], filters: Filters) -> None:
    """Each memory the lexical lane found lends to its neighbours in its session (the memories
    before and after it in creation order, among those passing the filters): ``W_CONTEXT[d - 1]``
    times its ``lexical_norm`` to those d places away. A neighbour's ``context`` is the most it is
    lent, and it joins the candidates (if no lane found it) with the lane ``context``. Memories
    without a session lend nothing and borrow nothing."""
    found = {c.id: c.lexical_norm for c in cands.values() if c.lexical is not None}
    if not found:
        return
    lent: dict[str, float] = {}
    for id_, sides in tx.session_neighbours(list(found), filters, len(W_CONTEXT)).items():
        for side in sides:
            for w, other in zip(W_CONTEXT, side):
                if w * found[id_] > lent.get(other, 0.0):
                    lent[other] = w * found[id_]
    for id_, v in lent.items():
        c = cands.get(id_)
        if c is None:
            c = cands[id_] = Candidate(id_, [])
        c.lanes.append("context")
        c.context = v


def semantic_weights(embedder) -> tuple[float, float]:
    """(w_sem, match floor) for the vectors of ``embedder``: its cosines' weight in the fusion
    formula and the similarity from which a hit counts as matched."""
    if embedder.provider == "hash":
        return W_SEM_HASH, MATCH_SIMILARITY_HASH
    if embedder.model.startswith("local:wordllama"):
        return W_SEM_WORDLLAMA, MATCH_SIMILARITY_WORDLLAMA
    return W_SEM_MODEL, MATCH_SIMILARITY_LOCAL if embedder.provider == "local" else MATCH_SIMILARITY_MODEL


def rank(cands, *, w_sem: float) -> list[Candidate]:
    """Score every candidate by the fusion formula (module docstring) with the vectors' weight
    ``w_sem`` (``semantic_weights``); best first."""
    out = list(cands)
    for c in out:
        c.score = (W_LEX * c.lexical_norm + w_sem * max(c.similarity or 0.0, 0.0) + W_SAL * c.salience
                   + c.context)
    out.sort(key=lambda c: (-c.score, c.id))
    return out


def by_phrase(tx: Tx, ranked: list[Candidate], near: str, past=None, spans=()) -> list[Candidate]:
    """The best ``PHRASE_WINDOW`` candidates regrouped: the query's exact text first, then
    memories holding its words as one phrase, then the rest (module docstring); before that, each
    of them the words matched (lanes lexical or context) whose time (``memory_day``) falls in one of
    ``spans`` (``engine/dates.py``: the dates the query names) gains ``W_DATE``. ``past``
    (``asof.Past``): the changed memories' texts and times are those of then."""
    q = words(near)
    head = ranked[:PHRASE_WINDOW]
    if not q or not head:
        return ranked
    from cortexctl.memory import schema

    ids = [c.id for c in head]
    if past is None:
        current = tx.search_data(ids)
    else:
        current = {**tx.search_data([i for i in ids if i not in past.changed]), **past.search_data(ids)}
    n = len(q)
    for c in head:
        v = current.get(c.id)
        data = codec.decode(v[1]) if v else {}
        if spans and ("lexical" in c.lanes or "context" in c.lanes) and within(memory_day(c.id, data), spans):
            c.score += W_DATE
        w = words(schema.search_text(stored_type(v[0]), data)) if v else []
        if w == q:
            c.tier = 2
        elif any(w[i:i + n] == q for i in range(len(w) - n + 1)):
            c.tier = 1
    return sorted(head, key=lambda c: (-c.tier, -c.score, c.id)) + ranked[PHRASE_WINDOW:]


def memory_day(id_: str, data: dict):
    """The day a memory is about: its ``occurred_at`` (events) or ``observed_at`` (facts) when it
    holds one, else the day it was created (its ID's time), UTC."""
    from datetime import date, timezone

    for key in ("occurred_at", "observed_at"):
        at = data.get(key) if isinstance(data, dict) else None
        if isinstance(at, str) and len(at) >= 10:
            try:
                return date.fromisoformat(at[:10])
            except ValueError:
                pass
    return datetime.fromtimestamp(id_time_ms(id_) / 1000, timezone.utc).date()


def _no_visible_memory(tx: Tx, viewer: Viewer, warnings: list[str]) -> None:
    """When the actor sees no memory at all in a store that holds some: say so (no counts)."""
    actor = viewer.actor
    if tx.count_heads() and not tx.count_heads(Filters(actor=actor, include_tombstoned=True, scopes=viewer.scopes)):
        warnings.append(f"actor {actor!r} sees no memories in this store: other actors' memories are "
                        "private to them (is --actor right?)")


def _hits(tx: Tx, ranked: list[Candidate], query: FindQuery, now, past=None) -> list[FindHit]:
    ranked = ranked[: query.k]
    ids = [c.id for c in ranked]
    form = "medium" if query.form == "medium" else "short"
    present = ids if past is None else [i for i in ids if i not in past.changed]  # as they are now
    heads = tx.result_rows(present, form)
    full = tx.current_versions(present) if query.form == "full" else {}
    if past is not None:  # the changed memories as they stood, at their version of then
        heads.update(past.result_rows(ids, form))
        full.update(past.current_versions(ids) if query.form == "full" else {})
    hits: list[FindHit] = []
    used = 0
    for c in ranked:
        if len(hits) >= query.k:
            break
        h = heads.get(c.id)
        if h is None:
            continue
        type_name = stored_type(h["type"])
        if query.form == "full":
            from cortexctl.memory.forms import render_full

            text = render_full(type_name, codec.decode(full[h["id"]]["data"]))
        else:
            text = h["text"]
        tokens = count_tokens(text)
        if query.budget_tokens is not None and used + tokens > query.budget_tokens:
            break
        used += tokens
        hits.append(
            FindHit(
                id=h["id"], type=type_name, version=h["current_version"], text=text, form=query.form,
                tags=list(h["tags"]), frames=list(h["frames"]), importance=h["importance"],
                visibility=h["visibility"], actor=h["actor"], updated_at=h["updated_at"],
                tombstoned=h["tombstoned_at"] is not None, lanes=c.lanes, rank=len(hits) + 1,
                score=round(c.score if query.near is not None else c.salience, 6),
                similarity=None if c.similarity is None else round(c.similarity, 6),
                lexical=None if c.lexical is None else round(c.lexical, 6),
                salience=round(c.salience, 6), tokens=tokens, valid_from=h["valid_from"], valid_to=h["valid_to"],
                supersedes=h["supersedes"], superseded_by=h["superseded_by"],
                ended=h["superseded_by"] is not None or (h["valid_to"] is not None and h["valid_to"] <= now),
            )
        )
    return hits
