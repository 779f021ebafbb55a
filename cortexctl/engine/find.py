"""find: three lanes, merged by weighted score fusion, bounded by -k and a token budget.

Lanes, each over the memories that pass the filters and the visibility rule:

- **lexical**: BM25 (k1 1.2, b 0) over each memory's search text, with the
  same Porter-stemmed, stopword-free terms for memory and query
  (``memory.terms``), then one pass of pseudo-relevance feedback: the
  ``PRF_TERMS`` best terms of the top ``PRF_DOCS`` results, each weighted
  e(t) = sum_d (s_d / sum s) * tf(t, d) / len(d) * idf(t), join the query at
  ``PRF_BETA`` * e(t) / max e (the query's own terms weigh 1), and BM25 runs
  again. Term statistics are over the whole store; only candidates are
  filtered. b is 0 (no length normalization): memories are short, and on
  LoCoMo b 0 beats 0.2 by 0.006 and 0.75 by more;
- **semantic**: cosine similarity between the query's embedding and each
  memory's vector (HNSW, or exact for a narrow filter; see ``semantic.py``);
- **salience**: the memories with the highest salience (importance, recency,
  use; see ``store.records.SALIENCE_SQL``), so what was written a moment ago
  and is not yet embedded can still surface.

Fusion (with ``--near``): every candidate any lane returned gets

    score = W_LEX * bm25 / max_bm25 + w_sem * max(cos, 0) + W_SAL * salience

where max_bm25 is the best lexical score of this query (so the lexical part
is in [0, 1]) and w_sem is the model's weight: ``W_SEM_HASH`` for the built-in
hash embedder, whose vectors know spelling but not meaning, and
``W_SEM_MODEL`` for a real embedding model. A lane that returns nothing adds
nothing. Ties break by ID. Without ``--near`` only the salience lane runs and
results come in salience order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cortexctl.engine.models import FindHit, FindQuery
from cortexctl.memory import codec
from cortexctl.memory.forms import count_tokens
from cortexctl.memory.terms import term_id, terms
from cortexctl.memory.types import type_name as stored_type
from cortexctl.store import records
from cortexctl.store import search as sq

W_LEX = 1.0
W_SEM_HASH = 0.05  # LoCoMo recall@10 is flat from 0 to 0.1 and falls beyond: a tie-break and a fallback
W_SEM_MODEL = 1.0
PRF_DOCS, PRF_TERMS, PRF_BETA = 5, 10, 0.3
W_SAL = 0.05
HALF_LIFE_DAYS = 30.0
SALIENCE_WEIGHTS = (0.35, 0.35, 0.15, 0.15)  # recency, importance, access, citations
MIN_CANDIDATES = 50


@dataclass
class Candidate:
    id: str
    lanes: list[str]
    similarity: float | None = None
    lexical: float | None = None  # the BM25 score
    lexical_norm: float = 0.0  # divided by the query's best BM25 score
    salience: float = 0.0
    score: float = 0.0


def salience_params(now) -> list[Any]:
    return records.salience_params(now, HALF_LIFE_DAYS * 86400.0, SALIENCE_WEIGHTS)


def query_terms(text: str) -> dict[int, float]:
    """Distinct query terms, each weighing 1."""
    return {term_id(t): 1.0 for t in terms(text)}


def run(cx, query: FindQuery, filters: dict) -> tuple[list[FindHit], list[str]]:
    """The ranked hits and any warnings (a lane that could not run)."""
    from cortexctl.engine.cortex import utcnow

    warnings: list[str] = []
    now = utcnow()
    sal_params = salience_params(now)
    where, params = records.filter_sql(actor=cx.actor, **filters)
    n = max(query.k * 3, MIN_CANDIDATES)

    qvec = None
    if query.near is not None:
        qvec = _embed_query(cx, query.near, warnings)

    semantic_result = None
    for attempt in range(2):
        try:
            with cx._reading() as con:
                if con is None:
                    return [], warnings
                if query.near is None:
                    ranked = [Candidate(i, ["salience"], salience=s)
                              for i, s in records.top_salience(con, where, params, sal_params, query.k)]
                    return _hits(con, ranked, query), warnings
                lexical = lexical_lane(con, query.near, where, params, n)
                if qvec is not None and semantic_result is None:
                    from cortexctl.engine import semantic

                    semantic_result, note = semantic.search(cx, con, qvec, where, params, n)
                    if note:
                        warnings.append(note)
                salient = records.top_salience(con, where, params, sal_params, n)
                cands = fuse(lexical, semantic_result or [], salient)
                missing = [c for c in cands.values() if "salience" not in c.lanes]
                for id_, s in records.salience_of(con, [c.id for c in missing], sal_params).items():
                    cands[id_].salience = s
                ranked = rank(cands.values(), remote=cx.embedder.remote)
                return _hits(con, ranked, query), warnings
        except Exception as exc:
            from cortexctl.engine.semantic import IndexUnusable, exact_search

            if not isinstance(exc, IndexUnusable) or attempt:
                raise
            reason = exc.message
            # Rebuild the index (the writer lock, not the file); if another writer is busy, search exactly.
            from cortexctl.engine import semantic
            from cortexctl.errors import StoreBusy

            try:
                semantic.fold(cx, rebuild=True)
                warnings.append(f"index {reason}: rebuilt")
            except StoreBusy:
                with cx._reading() as con:
                    semantic_result = exact_search(cx, con, qvec, where, params, n)
                warnings.append(f"index {reason} and the store is busy: exact search")
    return [], warnings


def lexical_lane(con, text: str, where: str, params: list, n: int) -> list[tuple[str, float]]:
    """BM25, then one pass of pseudo-relevance feedback (module docstring)."""
    qw = query_terms(text)
    first = sq.bm25(con, qw, where, params, max(n, PRF_DOCS))
    if not first:
        return []
    top = first[:PRF_DOCS]
    docs = sq.doc_terms(con, [i for i, _ in top])
    total = sum(s for _, s in top) or 1.0
    weights: dict[int, float] = {}
    for id_, s in top:
        tfs, length = docs.get(id_, ({}, 1))
        for t, tf in tfs.items():
            if t not in qw:
                weights[t] = weights.get(t, 0.0) + (s / total) * tf / max(length, 1)
    if not weights:
        return first[:n]
    idf = sq.term_idf(con, list(weights))
    e = {t: w * idf[t] for t, w in weights.items()}
    best = sorted(e.items(), key=lambda kv: (-kv[1], kv[0]))[:PRF_TERMS]
    if not best or best[0][1] <= 0:
        return first[:n]
    expanded = dict(qw)
    for t, v in best:
        expanded[t] = PRF_BETA * v / best[0][1]
    return sq.bm25(con, expanded, where, params, n)


def _embed_query(cx, text: str, warnings: list[str]):
    from cortexctl.errors import ConfigError, ProviderUnreachable

    try:
        vec = cx.embedder.embed([text])
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


def _hits(con, ranked: list[Candidate], query: FindQuery) -> list[FindHit]:
    ids = [c.id for c in ranked]
    heads = records.heads_by_ids(con, ids)
    full = records.current_versions(con, ids) if query.form == "full" else {}
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
            text = h[query.form]
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
