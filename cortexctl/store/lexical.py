"""Lexical search over the store's postings: BM25 with pseudo-relevance feedback.

Any backend that keeps postings (each memory's search-text term IDs, repeats kept)
answers ``Tx.search_terms`` with ``search`` below, over five reads of its own
(``doc_count``, ``postings_of``, ``doc_ids``, ``hidden_docs``, ``term_df``,
``doc_terms``: the DuckDB tables, or the search snapshot's arrays) and ``passing``,
and ``Tx.score_terms`` (term lists the caller holds, as ``find --as-of`` holds a
memory's text of then) with ``score_docs``, over ``doc_count``, ``hidden_docs`` and ``term_df``.

- BM25 (k1 1.2, b 0) over each memory's search text, with the same
  Porter-stemmed, stopword-free terms for memory and query (``memory.terms``);
  b is 0 (no length normalization): memories are short, and on LoCoMo b 0 beats
  0.2 by 0.006 and 0.75 by more.
- Then one pass of pseudo-relevance feedback: the ``PRF_TERMS`` best terms of the
  top ``PRF_DOCS`` results, each weighted
  e(t) = sum_d (s_d / sum s) * tf(t, d) / len(d) * idf(t), join the query at
  ``PRF_BETA`` * e(t) / max e (the query's own terms keep their weight), and BM25
  runs again.
- Term statistics (document count and frequencies) are over every memory the
  viewer may see, so a score reveals nothing of another actor's private words;
  the type, tag and frame filters then pick the candidates.
"""

from __future__ import annotations

import math

from cortexctl.store.interface import Filters

K1 = 1.2  # BM25; b is 0, so document length plays no part (module docstring)
PRF_DOCS, PRF_TERMS, PRF_BETA = 5, 10, 0.3


def hidden_table(hidden):
    """A lookup table of the doc numbers in ``hidden`` (doc numbers are dense), None when there are
    none: built once, asked of each term's postings (``count_in``, ``bm25_scores``) instead of one
    table per term and pass."""
    import numpy as np

    if hidden is None or not len(hidden):
        return None
    table = np.zeros(int(hidden.max()) + 1, dtype=np.bool_)
    table[hidden] = True
    return table


def _in_table(docs, table):
    import numpy as np

    inside = docs < len(table)
    if inside.all():
        return table[docs]
    hit = np.zeros(len(docs), dtype=np.bool_)
    hit[inside] = table[docs[inside]]
    return hit


def count_in(docs, table) -> int:
    """How many of ``docs`` the table (``hidden_table``) holds."""
    return 0 if table is None or not len(docs) else int(_in_table(docs, table).sum())


def bm25_scores(tx, qw: dict[int, float], n_docs: int, hidden=None):
    """(docs, scores) of every memory holding a query term, as numpy arrays.

    score = sum over query terms t of w_t * idf(t) * tf * (k1 + 1) / (tf + k1), which is BM25 with
    b = 0; idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5)), N and df over the memories the viewer may
    see (``hidden``: the rest's doc numbers as ``hidden_table`` holds them, None when there are none).
    """
    import numpy as np

    hits = tx.postings_of(list(qw))
    if hidden is not None and len(hits["doc"]):
        keep = ~_in_table(hits["doc"], hidden)
        hits = {k: v[keep] for k, v in hits.items()}
    if not len(hits["doc"]):
        return np.zeros(0, np.uint64), np.zeros(0)
    terms_ = np.array(sorted(qw), dtype=hits["term"].dtype)  # every posting's term is one of the query's
    inverse = np.searchsorted(terms_, hits["term"])
    df = np.bincount(inverse, minlength=len(terms_))
    weight = np.array([qw[int(t)] for t in terms_]) * np.log1p((n_docs - df + 0.5) / (df + 0.5))
    tf = hits["tf"].astype(np.float64)
    contrib = weight[inverse] * tf * (K1 + 1) / (tf + K1)
    doc = hits["doc"]
    top = int(doc.max())
    if top <= 4 * len(doc) + 65_536:  # dense doc numbers: summed by number, in the same order (the same sums)
        at = doc.astype(np.int64)
        docs = np.flatnonzero(np.bincount(at, minlength=top + 1))
        return docs.astype(doc.dtype), np.bincount(at, weights=contrib, minlength=top + 1)[docs]
    docs, where_ = np.unique(doc, return_inverse=True)
    return docs, np.bincount(where_, weights=contrib, minlength=len(docs))


def filtered_top(tx, docs, scores, filters: Filters, n: int, ids_of: dict[int, str],
                 docs_passing=None) -> list[tuple[str, int, float]]:
    """The ``n`` best (id, doc, score) whose memory passes the filters; ties by ID.

    Candidates are checked in growing slices of the ranking, so a broad filter
    costs one small lookup and a narrow one a few more. ``ids_of`` (doc ->
    memory ID) is filled as docs are looked up and kept across calls.
    ``docs_passing`` (a view that can say for many docs at once whether their memory
    passes: the search snapshot; None for filters it cannot answer) checks each slice
    at once rather than memory by memory, with the same answer.
    """
    import numpy as np

    start, size = 0, max(4 * n, 64)
    order = _leading(docs, scores, size)
    at_once = docs_passing is not None and docs_passing(docs[:0], filters) is not None
    out: list[tuple[str, int, float]] = []
    while start < len(docs) and len(out) < n:
        if start + size > len(order) and len(order) < len(docs):
            order = np.lexsort((docs, -scores))  # past the leading ones: the whole ranking
        sel = order[start : start + size]
        if at_once:  # the slice's passing docs, found together: only they are looked up
            sel = sel[docs_passing(docs[sel], filters)]
        need = [int(d) for d in docs[sel] if int(d) not in ids_of]
        if need:
            ids_of.update(tx.doc_ids(need))
        sel_ids = [ids_of.get(int(d)) for d in docs[sel]]
        ok = None if at_once else tx.passing([i for i in sel_ids if i is not None], filters)
        out.extend((i, int(d), float(s)) for i, d, s in zip(sel_ids, docs[sel], scores[sel])
                   if i is not None and (at_once or i in ok))
        start += size
        size *= 4
    out.sort(key=lambda x: (-x[2], x[0]))
    return out[:n]


def _leading(docs, scores, count: int):
    """At least the first ``count`` of ``np.lexsort((docs, -scores))`` (the ranking: score
    descending, then doc number), in that order, without sorting the rest: every doc scoring at
    least the ``count``-th best score, sorted."""
    import numpy as np

    if len(scores) <= 4 * count:
        return np.lexsort((docs, -scores))
    kth = -np.partition(-scores, count - 1)[count - 1]
    lead = np.flatnonzero(scores >= kth)
    return lead[np.lexsort((docs[lead], -scores[lead]))]


def search(tx, qw: dict[int, float], filters: Filters, n: int, docs_passing=None) -> list[tuple[str, float]]:
    """The ``n`` best memories passing ``filters`` for the query terms ``qw`` (term ID -> weight):
    [(id, BM25 score)], best first, ties by ID (module docstring). ``docs_passing``: as
    ``filtered_top`` takes it."""
    if not qw:
        return []
    hidden = tx.hidden_docs(filters.viewer)
    n_docs = tx.doc_count() - len(hidden)
    table = hidden_table(hidden)  # once for both passes
    docs, scores = bm25_scores(tx, qw, n_docs, table)
    if not len(docs):
        return []
    ids_of: dict[int, str] = {}
    first = filtered_top(tx, docs, scores, filters, max(n, PRF_DOCS), ids_of, docs_passing)
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
    docs, scores = bm25_scores(tx, expanded, n_docs, table)
    return [(i, s) for i, _, s in filtered_top(tx, docs, scores, filters, n, ids_of, docs_passing)]


def score_docs(tx, qw: dict[int, float], docs, viewer) -> dict[str, float]:
    """BM25 (the first pass of ``search``, no feedback) of each of ``docs`` (id, term IDs in text
    order, repeats kept) for the query ``qw`` (term ID -> weight), with the document count and the
    frequencies of the stored memories ``viewer`` may see: {id: score >= 0}."""
    if not docs:
        return {}
    if not qw:
        return {id_: 0.0 for id_, _ in docs}
    from collections import Counter

    hidden = tx.hidden_docs(viewer)
    n_docs = tx.doc_count() - len(hidden)
    df = tx.term_df(list(qw), hidden)
    weight = {t: w * math.log1p((n_docs - df.get(t, 0) + 0.5) / (df.get(t, 0) + 0.5)) for t, w in sorted(qw.items())}
    out: dict[str, float] = {}
    for id_, term_ids in docs:
        tfs = Counter(term_ids)
        score = 0.0
        for t, w in weight.items():
            tf = tfs.get(t, 0)
            if tf:
                score += w * tf * (K1 + 1) / (tf + K1)
        out[id_] = score
    return out
