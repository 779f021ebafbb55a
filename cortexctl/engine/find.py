"""find: three lanes, merged by weighted score fusion, bounded by -k and a token budget.

Lanes, each over the memories that pass the filters and the visibility rule:

- **lexical**: BM25 (k1 1.2, b 0) over each memory's search text, with the
  same Porter-stemmed, stopword-free terms for memory and query
  (``memory.terms``), then one pass of pseudo-relevance feedback: the
  ``PRF_TERMS`` best terms of the top ``PRF_DOCS`` results, each weighted
  e(t) = sum_d (s_d / sum s) * tf(t, d) / len(d) * idf(t), join the query at
  ``PRF_BETA`` * e(t) / max e (the query's own terms weigh 1), and BM25 runs
  again. Term statistics (document count and frequencies) are over every
  memory the actor may see, so a score reveals nothing of another actor's
  private words; the type, tag and frame filters then pick the candidates.
  b is 0 (no length normalization): memories are short, and on
  LoCoMo b 0 beats 0.2 by 0.006 and 0.75 by more;
- **semantic**: cosine similarity between the query's embedding and each
  memory's vector (HNSW, or exact for a narrow filter; see ``semantic.py``);
- **salience**: the memories with the highest salience under the actor's
  learned weights (recency, importance, access, citations, confidence; see
  ``engine/salience.py``), so what was written a moment ago and is not yet
  embedded can still surface.

Fusion (with ``--near``): every candidate any lane returned gets

    score = W_LEX * bm25 / max_bm25 + w_sem * max(cos, 0) + W_SAL * salience

where max_bm25 is the best lexical score of this query (so the lexical part
is in [0, 1]) and w_sem is the model's weight: ``W_SEM_HASH`` for the built-in
hash embedder, whose vectors know spelling but not meaning, and
``W_SEM_MODEL`` for a real embedding model. A lane that returns nothing adds
nothing. Then, among the best ``PHRASE_WINDOW`` candidates, a memory whose text
is the query (words compared in lower case) comes first, then those holding the
query's words as one phrase, then the rest, each group in score order: an exact
match is never outranked by a longer memory that repeats the words. Ties break
by ID. A hit is *matched* when the lexical lane found it, it holds the phrase, or
its similarity reaches ``MATCH_SIMILARITY`` (per embedder); otherwise only its
salience brought it, and the output says so. Without ``--near`` only the
salience lane runs and results come in salience order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from cortexctl.engine.models import FindHit, FindQuery, Note
from cortexctl.memory import codec
from cortexctl.memory.forms import count_tokens
from cortexctl.memory.terms import term_id, terms, words
from cortexctl.memory.types import type_name as stored_type
from cortexctl.store.interface import Filters, Scoring, Tx, Viewer

if TYPE_CHECKING:
    from cortexctl.engine.context import Context

K1 = 1.2  # BM25; b is 0, so document length plays no part (module docstring)
W_LEX = 1.0
W_SEM_HASH = 0.05  # LoCoMo recall@10 is flat from 0 to 0.1 and falls beyond: a tie-break and a fallback
W_SEM_MODEL = 1.0
PRF_DOCS, PRF_TERMS, PRF_BETA = 5, 10, 0.3
W_SAL = 0.05
MIN_CANDIDATES = 50
PHRASE_WINDOW = 50  # candidates whose text is compared with the query as a phrase
MATCH_SIMILARITY_HASH = 0.3  # the hash embedder: unrelated texts stay below ~0.15
MATCH_SIMILARITY_MODEL = 0.5


@dataclass
class Candidate:
    id: str
    lanes: list[str]
    similarity: float | None = None
    lexical: float | None = None  # the BM25 score
    lexical_norm: float = 0.0  # divided by the query's best BM25 score
    salience: float = 0.0
    score: float = 0.0
    tier: int = 0  # 2: the query's exact text, 1: the query as a phrase (``by_phrase``)


class Heads:
    """What find knows of its candidates' heads, each looked up once (``Tx.candidates``)."""

    def __init__(self, tx: Tx, filters: Filters, scoring: Scoring) -> None:
        self.tx, self.filters, self.scoring = tx, filters, scoring
        self.known: dict[str, tuple[int, bool, float]] = {}
        self.wanted: set[str] = set()

    def want(self, ids) -> None:
        """Look these up along with the next lookup (one query instead of two)."""
        self.wanted.update(ids)

    def _fetch(self, ids) -> None:
        want = [i for i in dict.fromkeys([*ids, *self.wanted]) if i not in self.known]
        self.wanted.clear()
        if want:
            self.known.update(self.tx.candidates(want, self.filters, self.scoring))

    def passing(self, ids) -> dict[str, int]:
        """Of ``ids``, those that pass the filters: id -> current version."""
        self._fetch(ids)
        return {i: self.known[i][0] for i in ids if i in self.known and self.known[i][1]}

    def salience(self, ids) -> dict[str, float]:
        self._fetch(ids)
        return {i: self.known[i][2] for i in ids if i in self.known}


def scoring(tx: Tx, actor: str, now) -> Scoring:
    """The salience parameters under ``actor``'s learned weights."""
    from cortexctl.engine import salience

    weights = tx.weights(actor) or salience.DEFAULT_WEIGHTS
    return Scoring(now, salience.HALF_LIFE_SECONDS, tuple(weights))


def query_terms(text: str) -> dict[int, float]:
    """Distinct query terms, each weighing 1."""
    return {term_id(t): 1.0 for t in terms(text)}


def run(ctx: Context, query: FindQuery, filters: Filters) -> tuple[list[FindHit], list[str]]:
    """The ranked hits and any warnings (a lane that could not run, an index rebuilt)."""
    from cortexctl.engine.semantic import IndexUnusable, fold
    from cortexctl.errors import CortexError, StoreBusy

    warnings: list[str] = []
    qvec = _embed_query(ctx, query.near, warnings) if query.near is not None else None
    try:
        return _search(ctx, query, filters, qvec, warnings), warnings
    except IndexUnusable as exc:
        reason = exc.message
    try:
        fold(ctx, rebuild=True, wait=0)  # the writer lock only; never queue behind another writer
    except StoreBusy:
        warnings.append(Note(f"index {reason} and another writer holds the store: exact search"))
        return _search(ctx, query, filters, qvec, warnings, exact=True), warnings
    except (CortexError, OSError) as err:  # a read-only store, a full disk: answer all the same
        detail = err.message if isinstance(err, CortexError) else (err.strerror or type(err).__name__)
        warnings.append(Note(f"index {reason} and it cannot be rebuilt ({detail}): exact search"))
        return _search(ctx, query, filters, qvec, warnings, exact=True), warnings
    try:
        hits = _search(ctx, query, filters, qvec, warnings)
        warnings.append(Note(f"index {reason}: rebuilt"))
        return hits, warnings
    except IndexUnusable as exc:  # nothing to build it from (no vectors of this model yet)
        warnings.append(Note(f"index {exc.message}: exact search"))
        return _search(ctx, query, filters, qvec, warnings, exact=True), warnings


def _search(ctx: Context, query: FindQuery, filters: Filters, qvec, warnings: list[str], *,
            exact: bool = False) -> list[FindHit]:
    """One search, answered from the search snapshot when it is current, else from the store
    (and from the store alone when the snapshot fails on the way: damaged, or the store moved on)."""
    from cortexctl.store.interface import SnapshotUnusable

    found: list[str] = []
    try:
        hits = _search_in(ctx.searching, ctx, query, filters, qvec, found, exact=exact)
    except SnapshotUnusable:
        found = []
        hits = _search_in(ctx.reading, ctx, query, filters, qvec, found, exact=exact)
    warnings.extend(found)
    return hits


def _search_in(view, ctx: Context, query: FindQuery, filters: Filters, qvec, warnings: list[str], *,
               exact: bool = False) -> list[FindHit]:
    from cortexctl.engine import semantic

    n = max(query.k * 3, MIN_CANDIDATES)
    with view() as tx:
        filters = replace(filters, scopes=ctx.viewer.scopes)  # the live grants the actor holds, now
        score = scoring(tx, ctx.actor, ctx.clock())
        if query.near is None:
            ranked = [Candidate(i, ["salience"], salience=s) for i, s in tx.top_salience(filters, score, query.k)]
            hits = _hits(tx, ranked, query)
            if not hits:
                _no_visible_memory(tx, filters.viewer, warnings)
            return hits
        heads = Heads(tx, filters, score)
        nearest: list[tuple[str, float]] = []

        def semantic_lane() -> None:
            nonlocal nearest
            if qvec is None:
                return
            nearest, note = semantic.search(ctx, tx, qvec, filters, n, exact=exact, check=heads.passing)
            if note:
                warnings.append(note)

        lexical = lexical_lane(tx, query.near, heads, n, between=semantic_lane, actor=filters.viewer)
        salient = tx.top_salience(filters, score, n)
        cands = fuse(lexical, nearest, salient)
        missing = [c.id for c in cands.values() if "salience" not in c.lanes]
        for id_, sal in heads.salience(missing).items():
            cands[id_].salience = sal
        ranked = by_phrase(tx, rank(cands.values(), remote=ctx.embedder.remote), query.near)
        hits = _hits(tx, ranked, query)
        floor = MATCH_SIMILARITY_MODEL if ctx.embedder.remote else MATCH_SIMILARITY_HASH
        tier = {c.id: c.tier for c in ranked[:PHRASE_WINDOW]}
        for h in hits:
            h.matched = "lexical" in h.lanes or tier.get(h.id, 0) > 0 or (h.similarity or 0.0) >= floor
        if not hits:
            _no_visible_memory(tx, filters.viewer, warnings)
        return hits


def bm25_scores(tx: Tx, qw: dict[int, float], n_docs: int, hidden=None):
    """(docs, scores) of every memory holding a query term, as numpy arrays.

    score = sum over query terms t of w_t * idf(t) * tf * (k1 + 1) / (tf + k1), which is BM25 with
    b = 0; idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5)), N and df over the memories the actor may
    see (``hidden`` holds the doc numbers of the rest).
    """
    import numpy as np

    hits = tx.postings_of(list(qw))
    if hidden is not None and len(hidden) and len(hits["doc"]):
        keep = ~np.isin(hits["doc"], hidden, kind="table")  # doc numbers are dense: a lookup table
        hits = {k: v[keep] for k, v in hits.items()}
    if not len(hits["doc"]):
        return np.zeros(0, np.uint64), np.zeros(0)
    terms_, inverse, df = np.unique(hits["term"], return_inverse=True, return_counts=True)
    weight = np.array([qw[int(t)] for t in terms_]) * np.log1p((n_docs - df + 0.5) / (df + 0.5))
    tf = hits["tf"].astype(np.float64)
    contrib = weight[inverse] * tf * (K1 + 1) / (tf + K1)
    docs, where_ = np.unique(hits["doc"], return_inverse=True)
    return docs, np.bincount(where_, weights=contrib, minlength=len(docs))


def filtered_top(tx: Tx, docs, scores, heads: Heads, n: int, ids_of: dict[int, str]) -> list[tuple[str, int, float]]:
    """The ``n`` best (id, doc, score) whose memory passes the filters; ties by ID.

    Candidates are checked in growing slices of the ranking, so a broad filter
    costs one small lookup and a narrow one a few more. ``ids_of`` (doc ->
    memory ID) is filled as docs are looked up and kept across calls.
    """
    import numpy as np

    order = np.lexsort((docs, -scores))
    out: list[tuple[str, int, float]] = []
    start, size = 0, max(4 * n, 64)
    while start < len(order) and len(out) < n:
        sel = order[start : start + size]
        need = [int(d) for d in docs[sel] if int(d) not in ids_of]
        if need:
            ids_of.update(tx.doc_ids(need))
        sel_ids = [ids_of.get(int(d)) for d in docs[sel]]
        ok = heads.passing([i for i in sel_ids if i is not None])
        out.extend((i, int(d), float(s)) for i, d, s in zip(sel_ids, docs[sel], scores[sel]) if i in ok)
        start += size
        size *= 4
    out.sort(key=lambda x: (-x[2], x[0]))
    return out[:n]


def lexical_lane(tx: Tx, text: str, heads: Heads, n: int, between=None, *, actor: str | Viewer) -> list[tuple[str, float]]:
    """BM25, then one pass of pseudo-relevance feedback (module docstring).

    ``between()`` runs once the first pass is scored and its best candidates
    are announced to ``heads``, before any of them is looked up: the semantic
    lane runs there, so one lookup serves both lanes.
    """
    import numpy as np

    qw = query_terms(text)
    hidden = tx.hidden_docs(actor) if qw else None
    n_docs = tx.doc_count() - (len(hidden) if qw else 0) if qw else 0
    docs, scores = bm25_scores(tx, qw, n_docs, hidden) if qw else (np.zeros(0, np.uint64), np.zeros(0))
    ids_of: dict[int, str] = {}
    if len(docs):
        best_docs = docs[np.lexsort((docs, -scores))[: max(4 * max(n, PRF_DOCS), 64)]]
        ids_of.update(tx.doc_ids(best_docs.tolist()))
        heads.want(ids_of.values())
    if between is not None:
        between()
    if not len(docs):
        return []
    first = filtered_top(tx, docs, scores, heads, max(n, PRF_DOCS), ids_of)
    if not first:
        return []
    top = first[:PRF_DOCS]
    held = tx.doc_terms([d for _, d, _ in top])
    total = sum(s for _, _, s in top) or 1.0
    weights: dict[int, float] = {}
    for _, doc, s in top:
        tfs, length = held.get(doc, ({}, 1))
        for t, tf in tfs.items():
            if t not in qw:
                weights[t] = weights.get(t, 0.0) + (s / total) * tf / max(length, 1)
    if not weights:
        return [(i, s) for i, _, s in first[:n]]
    df = tx.term_df(list(weights), hidden)
    e = {t: w * math.log1p((n_docs - df.get(t, 0) + 0.5) / (df.get(t, 0) + 0.5)) for t, w in weights.items()}
    best = sorted(e.items(), key=lambda kv: (-kv[1], kv[0]))[:PRF_TERMS]
    if not best or best[0][1] <= 0:
        return [(i, s) for i, _, s in first[:n]]
    expanded = dict(qw)
    for t, v in best:
        expanded[t] = PRF_BETA * v / best[0][1]
    docs, scores = bm25_scores(tx, expanded, n_docs, hidden)
    return [(i, s) for i, _, s in filtered_top(tx, docs, scores, heads, n, ids_of)]


def _embed_query(ctx: Context, text: str, warnings: list[str]):
    from cortexctl.errors import ConfigError, ProviderUnreachable

    try:
        vec = ctx.embedder.embed([text])
    except (ProviderUnreachable, ConfigError) as exc:
        warnings.append(f"semantic lane skipped: {exc.message}")
        return None
    return vec[0]


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


def rank(cands, *, remote: bool) -> list[Candidate]:
    """Score every candidate by the fusion formula (module docstring); best first."""
    w_sem = W_SEM_MODEL if remote else W_SEM_HASH
    out = list(cands)
    for c in out:
        c.score = W_LEX * c.lexical_norm + w_sem * max(c.similarity or 0.0, 0.0) + W_SAL * c.salience
    out.sort(key=lambda c: (-c.score, c.id))
    return out


def by_phrase(tx: Tx, ranked: list[Candidate], near: str) -> list[Candidate]:
    """The best ``PHRASE_WINDOW`` candidates regrouped: the query's exact text first, then
    memories holding its words as one phrase, then the rest (module docstring)."""
    q = words(near)
    head = ranked[:PHRASE_WINDOW]
    if not q or not head:
        return ranked
    from cortexctl.memory import schema

    current = tx.search_data([c.id for c in head])
    n = len(q)
    for c in head:
        v = current.get(c.id)
        w = words(schema.search_text(stored_type(v[0]), codec.decode(v[1]))) if v else []
        if w == q:
            c.tier = 2
        elif any(w[i:i + n] == q for i in range(len(w) - n + 1)):
            c.tier = 1
    return sorted(head, key=lambda c: (-c.tier, -c.score, c.id)) + ranked[PHRASE_WINDOW:]


def _no_visible_memory(tx: Tx, viewer: Viewer, warnings: list[str]) -> None:
    """When the actor sees no memory at all in a store that holds some: say so (no counts)."""
    actor = viewer.actor
    if tx.count_heads() and not tx.count_heads(Filters(actor=actor, include_tombstoned=True, scopes=viewer.scopes)):
        warnings.append(f"actor {actor!r} sees no memories in this store: other actors' memories are "
                        "private to them (is --actor right?)")


def _hits(tx: Tx, ranked: list[Candidate], query: FindQuery) -> list[FindHit]:
    ranked = ranked[: query.k]
    ids = [c.id for c in ranked]
    heads = tx.result_rows(ids, "medium" if query.form == "medium" else "short")
    full = tx.current_versions(ids) if query.form == "full" else {}
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
                salience=round(c.salience, 6), tokens=tokens,
            )
        )
    return hits
