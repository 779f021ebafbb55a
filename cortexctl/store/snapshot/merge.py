"""A snapshot made from the previous snapshot and its delta, without DuckDB: ``merge``.

A fold that rebuilds the snapshot reads the whole store from DuckDB (``builder.collect``). Between
folds the delta already holds every row that changed since the snapshot was built (the rows of every
memory the journal names, and the store-wide numbers), so the next snapshot is the previous one with
those memories' rows, docs, postings and vectors replaced: ``merge`` gives the same arrays and header
extras as ``collect`` would, working on the mapped arrays with numpy (whole columns, never a Python
object per row; only the delta's few thousand rows pass through Python) and never sorting the whole
postings: the delta's postings are put into the kept ones at the places a binary search finds.

What it gives differs from a full build only in the code tables (actors, sessions, tags, models,
visibilities): the previous snapshot's codes are kept and the delta's new values appended, so a
value no head uses any more may stay listed (it matches nothing). Everything else is equal element
for element, the postings in the same order (find's BM25 sums are added in that order).

It checks itself: the vector counts of the result (live and dropped, with the top key of each, per
model) must be the delta's, which DuckDB counted; any disagreement (or a base whose blocks fail
their CRC) gives None, and the caller builds from DuckDB instead.
"""

from __future__ import annotations

from typing import Any

from cortexctl.store.snapshot.builder import NO_TIME, _arrays
from cortexctl.store.snapshot.delta import _DeltaRows
from cortexctl.store.snapshot.format import SALIENT, SnapshotUnusable, _widened, spans

# the heads' one-value-per-row columns (besides the ragged ones below), in the builder's order
_ROW_COLUMNS = ("head_id", "head_type", "head_actor_code", "head_visibility_code", "head_forgotten",
                "head_session_code", "head_current_version", "head_updated_us", "head_recent_s", "head_importance",
                "head_access_count", "head_citations", "head_confidence", "head_valid_from_us", "head_valid_to_us",
                "data_type")
# (offsets, values) of the heads' variable-length columns
_RAGGED = (("head_tags_start", "tag_codes"), ("result_start", "result_json"), ("data_start", "data_blob"))
# code column -> its header table
_CODED = {"head_actor_code": "actors", "head_visibility_code": "visibilities", "head_session_code": "sessions"}


def merge(base, delta: dict, *, cleared: dict[str, list[int]] | None = None) -> tuple[dict, dict] | None:
    """The arrays and header extras that ``builder.collect`` would give for the store as the delta
    saw it, made from the snapshot ``base`` (a mapped ``format.Snapshot``, current up to the delta)
    and its current delta document (``collect_delta``'s, as ``open_current`` returns it), without
    DuckDB. ``cleared``: model -> keys taken out of ``vectors_dropped`` by the fold (left out of the
    dropped arrays and counts). None when the result fails its own checks (the caller then builds
    from DuckDB): its vector counts are not the delta's (which were counted before ``cleared`` was
    taken out), a cleared key was not dropped, or a block of ``base`` fails its CRC."""
    try:
        return _merge(base, delta, cleared or {})
    except SnapshotUnusable:
        return None


def _merge(base, delta: dict, cleared: dict[str, list[int]]) -> tuple[dict, dict] | None:
    import numpy as np

    h = base.header
    d, dx = _arrays(_DeltaRows(delta))  # the changed memories' arrays, coded by their own tables
    b = {name: _widened(name, base.whole(name)) for name in h["arrays"] if name not in SALIENT}  # derived anew
    out: dict[str, Any] = {}
    extras = {k: list(h[k]) for k in ("actors", "visibilities", "sessions", "tags", "models")}

    # -- heads: the changed memories' rows out, their current rows in (sorted by id) ----------------
    n = len(b["head_id"])
    changed = np.array(sorted(i.encode("ascii") for i in delta["ids"]), dtype="S26")
    new_ids = d["head_id"]
    if not _increasing(new_ids):
        return None
    drop_rows = _found(b["head_id"], changed)
    at_rows = np.searchsorted(b["head_id"], new_ids)
    remap = {table: _recode(extras[table], dx[table], offset=1 if table == "sessions" else 0)
             for table in _CODED.values()}
    for col in _ROW_COLUMNS:
        vals = d[col]
        if col in _CODED:
            vals = _apply(remap[_CODED[col]], vals, offset=1 if col == "head_session_code" else 0).astype(vals.dtype)
        out[col] = _splice(b[col], drop_rows, at_rows, vals)
    tag_map = _recode(extras["tags"], dx["tags"])
    for starts, flat in _RAGGED:
        vals = d[flat] if flat != "tag_codes" else _apply(tag_map, d[flat]).astype(np.int32)
        out[starts], out[flat] = _ragged(b[starts], b[flat], drop_rows, at_rows, d[starts], vals)
    m = len(out["head_id"])
    if not _increasing(out["head_id"]):
        return None  # a delta row beside a base row of the same ID: not a delta of this base
    # where each kept base row went (-1: gone), for the docs' and vectors' head rows
    row_to = np.arange(n, dtype=np.int64) - np.searchsorted(drop_rows, np.arange(n), side="left") \
        + np.searchsorted(at_rows, np.arange(n), side="right")
    row_to[drop_rows] = -1

    def new_rows(ids):
        pos = np.minimum(np.searchsorted(out["head_id"], ids), max(m - 1, 0))
        return np.where((out["head_id"][pos] == ids) if m else np.zeros(len(ids), np.bool_), pos, -1).astype(np.int64)

    # -- docs: the changed memories' docs out, theirs in (sorted by doc number) ----------------------
    drop_docs = _owned(b["doc_head_row"], b["doc_id"], drop_rows, changed, n)
    gone_docs = np.sort(b["doc_number"][drop_docs])
    at_docs = np.searchsorted(b["doc_number"], d["doc_number"])
    for col in ("doc_number", "doc_id", "doc_length"):
        out[col] = _splice(b[col], drop_docs, at_docs, d[col])
    kept_rows = b["doc_head_row"]
    kept_rows = np.where(kept_rows >= 0, row_to[np.maximum(kept_rows, 0)], -1) if n else kept_rows
    out["doc_head_row"] = _splice(kept_rows, drop_docs, at_docs, new_rows(d["doc_id"]))
    if not _increasing(out["doc_number"]):
        return None
    out["head_doc"] = np.full(m, -1, dtype=np.int64)
    has = out["doc_head_row"] >= 0
    out["head_doc"][out["doc_head_row"][has]] = out["doc_number"][has].astype(np.int64)

    # -- postings --------------------------------------------------------------------------------
    got = _postings(b, d, gone_docs)
    if got is None:
        return None
    out.update(got)

    # -- vectors: the changed memories' vectors out, theirs in (sorted by key) -----------------------
    model_map = _recode(extras["models"], dx["models"])
    drop_vec = _owned(b["vector_head_row"], b["vector_id"], drop_rows, changed, n)
    at_vec = np.searchsorted(b["vector_key"], d["vector_key"])
    out["vector_key"] = _splice(b["vector_key"], drop_vec, at_vec, d["vector_key"])
    out["vector_id"] = _splice(b["vector_id"], drop_vec, at_vec, d["vector_id"])
    out["vector_version"] = _splice(b["vector_version"], drop_vec, at_vec, d["vector_version"])
    out["vector_model_code"] = _splice(b["vector_model_code"], drop_vec, at_vec,
                                       _apply(model_map, d["vector_model_code"]).astype(np.int32))
    kept_rows = b["vector_head_row"]
    kept_rows = np.where(kept_rows >= 0, row_to[np.maximum(kept_rows, 0)], -1) if n else kept_rows
    out["vector_head_row"] = _splice(kept_rows, drop_vec, at_vec, new_rows(d["vector_id"]))
    if not _increasing(out["vector_key"]):
        return None

    # -- dropped keys: every vector that left ``vectors`` (search.py puts it there) -------------------
    models = extras["models"]
    live_new = set(d["vector_key"].tolist())
    left = [(k, c) for k, c in zip(b["vector_key"][drop_vec].tolist(), b["vector_model_code"][drop_vec].tolist())
            if k not in live_new]
    for k, model in delta["new_keys"]:
        if int(k) not in live_new:
            if model not in models:
                models.append(model)
            left.append((int(k), models.index(model)))
    left.sort()
    add_key = np.array([k for k, _ in left], dtype=np.uint64)
    add_code = np.array([c for _, c in left], dtype=np.int32)
    at_drop = np.searchsorted(b["dropped_key"], add_key)
    none = np.zeros(0, np.int64)
    dropped_key = _splice(b["dropped_key"], none, at_drop, add_key)
    dropped_code = _splice(b["dropped_model_code"], none, at_drop, add_code)
    if not _increasing(dropped_key):
        return None
    if _counts(out["vector_key"], out["vector_model_code"], dropped_key, dropped_code, models) \
            != {m: [int(x) for x in c] for m, c in delta["vector_counts"].items()}:
        return None
    if cleared:
        gone = np.zeros(len(dropped_key), dtype=np.bool_)
        for model, keys in cleared.items():
            keys = np.unique(np.asarray(keys, dtype=np.uint64))
            pos = np.minimum(np.searchsorted(dropped_key, keys), max(len(dropped_key) - 1, 0))
            hit = (dropped_key[pos] == keys) if len(dropped_key) else np.zeros(len(keys), np.bool_)
            if not bool(hit.all()) or model not in models \
                    or not bool(np.all(dropped_code[pos] == models.index(model))):
                return None  # a key cleared that the store did not list as dropped
            gone[pos] = True
        dropped_key, dropped_code = dropped_key[~gone], dropped_code[~gone]
    out["dropped_key"], out["dropped_model_code"] = dropped_key, dropped_code

    extras.update({
        "vector_counts": _counts(out["vector_key"], out["vector_model_code"], dropped_key, dropped_code, models),
        "dims": dx["dims"], "weights": dx["weights"], "grants": dx["grants"],
        "valid_set": {c: int(np.count_nonzero(out[c] != NO_TIME)) for c in ("head_valid_from_us", "head_valid_to_us")},
        "journal_seq": delta["journal_seq"],
    })
    extras = {k: extras[k] for k in ("vector_counts", "actors", "visibilities", "sessions", "tags", "models", "dims",
                                     "weights", "grants", "valid_set", "journal_seq")}
    return {k: out[k] for k in d if not k.startswith("vector_values")}, extras


# -- pieces ----------------------------------------------------------------------------------------
def _increasing(a) -> bool:
    """Each value above the one before (sorted, no value twice)."""
    import numpy as np

    return len(a) < 2 or bool(np.all(a[:-1] < a[1:]))


def _found(sorted_ids, want):
    """The positions in ``sorted_ids`` of the values of ``want`` (sorted) that are there."""
    import numpy as np

    if not len(sorted_ids) or not len(want):
        return np.zeros(0, np.int64)
    pos = np.minimum(np.searchsorted(sorted_ids, want), len(sorted_ids) - 1)
    return pos[sorted_ids[pos] == want].astype(np.int64)


def _owned(head_row, ids, drop_rows, changed, n: int):
    """The entries (docs or vectors) that belong to the changed memories: those of a dropped head row,
    and those naming no head whose ID is a changed one (sorted positions)."""
    import numpy as np

    table = np.zeros(n + 1, dtype=np.bool_)
    table[drop_rows + 1] = True
    mine = table[head_row + 1]
    loose = np.flatnonzero(head_row < 0)
    if len(loose) and len(changed):
        names = ids[loose]
        pos = np.minimum(np.searchsorted(changed, names), len(changed) - 1)
        mine[loose[changed[pos] == names]] = True
    return np.flatnonzero(mine)


def _recode(table: list, theirs: list, offset: int = 0):
    """Codes of ``theirs`` (a delta's code table) in ``table`` (kept codes; new values appended, so a
    value no row uses any more may remain listed)."""
    import numpy as np

    at = {v: i for i, v in enumerate(table)}
    codes = []
    for v in theirs:
        if v not in at:
            at[v] = len(table)
            table.append(v)
        codes.append(at[v])
    return np.array([-offset] * offset + codes, dtype=np.int64)  # sessions: code -1 (none) stays -1


def _apply(code_map, codes, offset: int = 0):
    import numpy as np

    return code_map[np.asarray(codes, dtype=np.int64) + offset] if len(codes) else np.zeros(0, np.int64)


def _splice(base, drop, at, values):
    """``base`` without the elements at ``drop`` (sorted positions) and with ``values`` put in, each
    before base position ``at`` (non-decreasing; equal ones in the order given). The kept elements
    are copied run by run (a run ends at each dropped element and each insertion: a few thousand for
    a delta), so nothing but the result is the size of ``base``."""
    import numpy as np

    values = np.asarray(values, dtype=base.dtype)
    if not len(drop) and not len(values):
        return base
    n = len(base)
    drop, at = np.asarray(drop, dtype=np.int64), np.asarray(at, dtype=np.int64)
    out = np.empty(n - len(drop) + len(values), dtype=base.dtype)
    out[at - np.searchsorted(drop, at, side="left") + np.arange(len(at))] = values
    cuts = np.unique(np.concatenate(([0, n], drop, drop + 1, at)))
    lo, hi = cuts[:-1], cuts[1:]
    kept = np.ones(len(lo), dtype=np.bool_)
    kept[np.searchsorted(lo, drop)] = False  # a dropped element is a run of its own
    lo, hi = lo[kept], hi[kept]
    # where base position p goes: less the dropped before it, plus the values put in at or before it
    to = lo - np.searchsorted(drop, lo, side="left") + np.searchsorted(at, lo, side="right")
    for a, b, o in zip(lo.tolist(), hi.tolist(), to.tolist()):
        out[o:o + b - a] = base[a:b]
    return out


def _ragged(starts, flat, drop_rows, at_rows, new_starts, new_flat):
    """A variable-length column (offsets ``starts``, values ``flat``) with the rows at ``drop_rows``
    left out and the rows (``new_starts``, ``new_flat``) put in before base rows ``at_rows``."""
    import numpy as np

    lens = np.diff(starts)
    new_lens = np.diff(new_starts)
    merged = _splice(lens, drop_rows, at_rows, new_lens)
    out_starts = np.zeros(len(merged) + 1, dtype=np.int64)
    np.cumsum(merged, out=out_starts[1:])
    drop = spans(starts[drop_rows], starts[drop_rows + 1])
    at = np.repeat(starts[at_rows], new_lens)
    return out_starts, _splice(flat, drop, at, new_flat)


def _bisect(keys, lo, hi, want):
    """For each i, the first position in keys[lo[i]:hi[i]] (sorted there) whose value is not below
    want[i]: a binary search of many spans at once."""
    import numpy as np

    lo, hi = lo.astype(np.int64).copy(), hi.astype(np.int64).copy()
    last = max(len(keys) - 1, 0)
    while True:
        busy = lo < hi
        if not bool(busy.any()):
            return lo
        mid = (lo + hi) // 2
        below = keys[np.minimum(mid, last)] < want if len(keys) else np.zeros(len(lo), np.bool_)
        lo = np.where(busy & below, mid + 1, lo)
        hi = np.where(busy & ~below, mid, hi)


def _postings(b: dict, d: dict, gone_docs) -> dict | None:
    """The postings by term and by doc, the docs ``gone_docs`` (sorted) left out and the delta's put in,
    in the order a full build makes them: (term, doc) and (doc, term)."""
    import numpy as np

    bt, bs, bd = b["by_term_term"], b["by_term_start"], b["by_term_doc"]
    # the gone docs' postings, by doc (whole spans) and where each sits by term
    gj = _found(b["by_doc_doc"], gone_docs.astype(np.uint64))
    drop_by_doc = spans(b["by_doc_start"][gj], b["by_doc_start"][gj + 1])
    g_term = bt[b["by_doc_term_at"][drop_by_doc]]
    g_doc = np.repeat(b["by_doc_doc"][gj], np.diff(b["by_doc_start"])[gj]) if len(gj) else np.zeros(0, np.uint64)
    tj = np.searchsorted(bt, g_term)
    if len(tj) and (bool((tj >= len(bt)).any()) or not bool(np.all(bt[np.minimum(tj, len(bt) - 1)] == g_term))):
        return None
    drop_by_term = _bisect(bd, bs[tj], bs[tj + 1], g_doc)
    if len(drop_by_term) and not bool(np.all(bd[np.minimum(drop_by_term, len(bd) - 1)] == g_doc)):
        return None
    drop_by_term = np.sort(drop_by_term)

    # the delta's postings in (term, doc) order, and where each goes among the base's
    n_term = np.repeat(d["by_term_term"], np.diff(d["by_term_start"]))
    n_doc, n_tf = d["by_term_doc"], d["by_term_tf"]
    tj = np.searchsorted(bt, n_term)
    there = tj < len(bt)
    there[there] = bt[tj[there]] == n_term[there]
    lo = bs[tj]  # a term the base lacks goes where its span would start
    hi = np.where(there, bs[np.minimum(tj + 1, len(bs) - 1)], lo)
    at = _bisect(bd, lo, hi, n_doc)
    out = {"by_term_doc": _splice(bd, drop_by_term, at, n_doc),
           "by_term_tf": _splice(b["by_term_tf"], drop_by_term, at, n_tf)}
    # terms and their spans: the base's counts less the gone, the delta's added, empty terms left out
    fresh = np.setdiff1d(d["by_term_term"], bt)
    terms = _splice(bt, np.zeros(0, np.int64), np.searchsorted(bt, fresh), fresh)
    counts = np.zeros(len(terms), dtype=np.int64)
    counts[np.searchsorted(terms, bt)] = np.diff(bs)
    np.subtract.at(counts, np.searchsorted(terms, g_term), 1)
    np.add.at(counts, np.searchsorted(terms, n_term), 1)
    if bool((counts < 0).any()):
        return None
    keep = counts > 0
    out["by_term_term"] = terms[keep]
    out["by_term_start"] = np.zeros(int(keep.sum()) + 1, dtype=np.int64)
    np.cumsum(counts[keep], out=out["by_term_start"][1:])

    # by doc: whole docs out and in
    dd, ds = b["by_doc_doc"], b["by_doc_start"]
    at_doc = np.searchsorted(dd, d["by_doc_doc"])
    new_lens = np.diff(d["by_doc_start"])
    at = np.repeat(ds[at_doc], new_lens)
    out["by_doc_doc"] = _splice(dd, gj, at_doc, d["by_doc_doc"])
    lens = _splice(np.diff(ds), gj, at_doc, new_lens)
    out["by_doc_start"] = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=out["by_doc_start"][1:])
    # each posting's term as its place among the merged terms (a kept posting's term is kept)
    at_base, at_new = np.searchsorted(out["by_term_term"], bt), np.searchsorted(out["by_term_term"], d["by_term_term"])
    out["by_doc_term_at"] = _splice(at_base[b["by_doc_term_at"]] if len(bt) else b["by_doc_term_at"], drop_by_doc, at,
                                    at_new[d["by_doc_term_at"]] if len(d["by_term_term"]) else d["by_doc_term_at"])
    out["by_doc_tf"] = _splice(b["by_doc_tf"], drop_by_doc, at, d["by_doc_tf"])
    return out


def _counts(keys, codes, dropped, dropped_codes, models: list) -> dict:
    """model -> [live, highest live key, dropped, highest dropped key], for the models that have any
    (as a full build counts them)."""
    out = {}
    for code, m in enumerate(models):
        live = keys[codes == code]
        gone = dropped[dropped_codes == code]
        if len(live) or len(gone):
            out[m] = [int(len(live)), int(live.max()) if len(live) else 0, int(len(gone)),
                      int(gone.max()) if len(gone) else 0]
    return out
