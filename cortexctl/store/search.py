"""The SQL of vectors and the lexical postings. The only module with SQL for them.

- ``vectors``: one row per embedded version: ``key`` (the HNSW key, assigned
  in increasing order), memory ``id`` and ``version``, the ``model`` tag, the
  dimension and the float16 bytes (``VECTOR_DTYPE``; unit length). A version's vector is
  replaced when its memory is updated; the keys taken out of service go to
  ``vectors_dropped`` until the index file is folded or rebuilt.
- ``lex_docs`` / ``lex_postings``: BM25 postings over each memory's current
  search text: a doc number per memory, its length in terms, and (term ID,
  doc, term frequency) rows. They change in the same transaction as the
  memory, so the lexical lane is never behind the store.
"""

from __future__ import annotations

import struct
from collections import Counter
from typing import Any, Iterator, Sequence

from cortexctl.store.predicate import id_range

# -- vectors ---------------------------------------------------------------------
# Live memories whose current version has no vector from a model (bound as ``{mark}``): standard SQL,
# the same on DuckDB and PostgreSQL.
PENDING = ("SELECT h.id, h.current_version, v.type, v.data FROM heads h"
           " JOIN versions v ON v.id = h.id AND v.version = h.current_version"
           " WHERE h.tombstoned_at IS NULL AND NOT EXISTS (SELECT 1 FROM vectors x"
           " WHERE x.id = h.id AND x.version = h.current_version AND x.model = {mark})")


# A stored vector: float16, little-endian (``dim`` values; half the bytes of float32, and the
# precision of the index file, which holds the same values). Schema version 7 made the older float32
# rows so (``migrations.m007_half_vectors``).
VECTOR_DTYPE = "<f2"
VECTOR_WIDTH = 2  # bytes a value


def vector_bytes(row: bytes) -> bytes:
    """One float32 row (little-endian bytes, as ``Embedder.embed_one`` gives it) as stored, without numpy."""
    n = len(row) // 4
    return struct.pack(f"<{n}e", *struct.unpack(f"<{n}f", row))


def as_rows(raw: bytes, n: int, dim: int):
    """``n`` stored vectors joined (``raw``) as a float32 (n, dim) array."""
    import numpy as np

    return np.frombuffer(raw, dtype=VECTOR_DTYPE).reshape(n, dim).astype(np.float32)


KEEP_FLOAT32 = "cortexctl_keep_float32"  # a connection's variable: its ``halve_vectors`` leaves rows as they are


def halve_vectors(con, batch: int = 50_000) -> int:
    """Round each float32 row (4 bytes a value: a store before schema version 7, or a bundle's rows
    from PostgreSQL) to the nearest float16 in place, a range of keys at a time; a row of another
    length is kept as it is, for ``verify`` to name. Returns how many rows were rounded. Nothing on
    a connection with the variable ``KEEP_FLOAT32`` set (a bundle built only to be copied into
    PostgreSQL, which holds float32)."""
    if con.execute(f"SELECT getvariable('{KEEP_FLOAT32}')").fetchall()[0][0]:
        return 0
    wide = con.execute("SELECT count(*) FROM vectors WHERE octet_length(vec) = 4 * dim").fetchall()[0][0]
    if not wide:
        return 0
    import numpy as np

    top = int(con.execute("SELECT max(key) FROM vectors").fetchall()[0][0])
    lo = -1
    while lo < top:
        got = con.execute("SELECT key, vec FROM vectors WHERE key > ? AND key <= ? AND octet_length(vec) = 4 * dim",
                          [lo, lo + batch]).fetchall()
        lo += batch
        if not got:
            continue
        vec = np.empty(len(got), dtype=object)
        vec[:] = [np.frombuffer(r[1], dtype="<f4").astype(VECTOR_DTYPE).tobytes() for r in got]
        con.register("_half_src", {"key": np.asarray([r[0] for r in got], dtype=np.uint64), "vec": vec})
        try:
            con.execute("UPDATE vectors SET vec = s.vec FROM _half_src s WHERE vectors.key = s.key")
        finally:
            con.unregister("_half_src")
    return int(wide)


def next_vector_key(con) -> int:
    """Above every key given so far, live or dropped: a dropped key may still be in the index
    file, so a new vector never takes it (keys dropped before the last fold are cleared, and the
    index's record then ends below them)."""
    return int(con.execute(
        "SELECT greatest((SELECT coalesce(max(key), 0) FROM vectors),"
        " (SELECT coalesce(max(key), 0) FROM vectors_dropped)) + 1").fetchall()[0][0])


def insert_vectors(con, ids: Sequence[str], versions: Sequence[int], model: str, matrix) -> int:
    """Store one row per (id, version) with its vector; returns the last key given (0 for none).

    ``matrix`` is a float32 array (n, dim), or for a few rows a list of
    float32 byte strings, which spares a single write from loading numpy.
    """
    n = len(ids)
    if not n:
        return 0
    first = next_vector_key(con)
    if isinstance(matrix, list):
        blobs = [vector_bytes(b) for b in matrix]
        dim = len(matrix[0]) // 4
    else:
        import numpy as np

        matrix = np.ascontiguousarray(matrix, dtype=VECTOR_DTYPE)
        dim = matrix.shape[1]
        raw = matrix.tobytes()
        width = dim * VECTOR_WIDTH
        blobs = [raw[i * width : (i + 1) * width] for i in range(n)]
    if n <= 8:
        for i in range(n):
            con.execute("INSERT INTO vectors VALUES (?, ?, ?, ?, ?, ?)",
                        [first + i, ids[i], int(versions[i]), model, dim, blobs[i]])
    else:
        import numpy as np

        col = np.empty(n, dtype=object)
        col[:] = blobs
        con.register("_src_vectors", {
            "key": np.arange(first, first + n, dtype=np.uint64),
            "id": np.asarray(ids, dtype=object),
            "version": np.asarray(versions, dtype=np.uint32),
            "vec": col,
        })
        try:
            con.execute(
                "INSERT INTO vectors SELECT key, id, version, ?, ?, vec FROM _src_vectors", [model, dim]
            )
        finally:
            con.unregister("_src_vectors")
    return first + n - 1


def model_dim(con, model: str) -> int | None:
    """The dimension of the model's stored vectors (None when it has none)."""
    rows = con.execute("SELECT dim FROM vectors WHERE model = ? LIMIT 1", [model]).fetchall()
    return int(rows[0][0]) if rows else None


def _drop(con, cond: str, params: list[Any]) -> int:
    """Take the vectors matching ``cond`` out of service (their keys go to vectors_dropped)."""
    n = int(con.execute(f"SELECT count(*) FROM vectors WHERE {cond}", params).fetchall()[0][0])
    if n:
        con.execute(f"INSERT INTO vectors_dropped SELECT key, model FROM vectors WHERE {cond}", params)
        con.execute(f"DELETE FROM vectors WHERE {cond}", params)
    return n


def drop_vectors(con, id_: str, *, model: str | None = None) -> None:
    """Take a memory's vectors out of service (all of them, or one model's)."""
    _drop(con, "id = ?" + (" AND model = ?" if model else ""), [id_] + ([model] if model else []))


def class_counts(con, model: str) -> dict[str, int]:
    """How many of the model's vectors each class (``VECTOR_CLASS``) has."""
    return {str(c): int(n) for c, n in con.execute(
        f"SELECT {VECTOR_CLASS} AS cls, count(*) FROM vectors v LEFT JOIN heads h ON h.id = v.id"
        " WHERE v.model = ? GROUP BY cls", [model]).fetchall()}


def rekey_vectors(con, id_: str) -> int:
    """Give a memory's vectors new keys, the old ones dropped, when its visibility class changes:
    the index file that holds a vector is its class's (``vector_index``), and a key stays in the
    file it was folded into, so the vectors become the pending tail (searched exactly) until the
    next fold puts them in their new class's file. Returns how many."""
    rows = con.execute("SELECT key FROM vectors WHERE id = ? ORDER BY key", [id_]).fetchall()
    if not rows:
        return 0
    base = next_vector_key(con)
    con.execute("INSERT INTO vectors_dropped SELECT key, model FROM vectors WHERE id = ?", [id_])
    for i, (key,) in enumerate(rows):
        con.execute("UPDATE vectors SET key = ? WHERE key = ?", [base + i, key])
    return len(rows)


def drop_model(con, model: str) -> int:
    """Take every vector of one model out of service; returns how many."""
    return _drop(con, "model = ?", [model])


def maybe_pending(con, model: str) -> bool:
    """A cheap sign that some memory may wait for a vector from ``model`` (from table sizes)."""
    row = con.execute(
        "SELECT EXISTS (SELECT 1 FROM vectors WHERE model <> ?)"
        " OR (SELECT count(*) FROM vectors) < (SELECT count(*) FROM heads)", [model]
    ).fetchall()[0]
    return bool(row[0])


def drop_other_models(con, model: str) -> int:
    """Take every vector not made by ``model`` out of service; returns how many."""
    return _drop(con, "model <> ?", [model])


def other_models(con, model: str) -> bool:
    """Whether any stored vector was made by a model other than ``model``."""
    return bool(con.execute("SELECT EXISTS (SELECT 1 FROM vectors WHERE model <> ?)", [model]).fetchall()[0][0])


def vector_models(con, *, limit: int | None = None) -> list[str]:
    """The models the stored vectors were made by (at most ``limit`` of them)."""
    sql = "SELECT DISTINCT model FROM vectors ORDER BY model" + (f" LIMIT {int(limit)}" if limit else "")
    return [r[0] for r in con.execute(sql).fetchall()]


def vector_stats(con, model: str) -> tuple[int, int, int | None]:
    """(count, max key, dimension) of the model's vectors."""
    row = con.execute(
        "SELECT count(*), coalesce(max(key), 0), min(dim) FROM vectors WHERE model = ?", [model]
    ).fetchall()[0]
    return int(row[0]), int(row[1]), (None if row[2] is None else int(row[2]))


def count_vectors(con, model: str, after: int = 0) -> int:
    """The model's vectors with a key above ``after``."""
    return int(con.execute("SELECT count(*) FROM vectors WHERE model = ? AND key > ?", [model, after]).fetchall()[0][0])


def covered(con, model: str, max_key: int) -> int:
    """Vectors of ``model`` with a key up to ``max_key``, live or dropped since."""
    row = con.execute(
        "SELECT (SELECT count(*) FROM vectors WHERE model = ? AND key <= ?)"
        " + (SELECT count(*) FROM vectors_dropped WHERE model = ? AND key <= ?)",
        [model, max_key, model, max_key],
    ).fetchall()[0]
    return int(row[0])


def vectors_between(con, model: str, lo: int, hi: int) -> dict[int, tuple[str, int]]:
    """key -> (id, version) of the model's vectors with a key from ``lo`` to ``hi``."""
    return {int(k): (i, int(v)) for k, i, v in con.execute(
        "SELECT key, id, version FROM vectors WHERE model = ? AND key BETWEEN ? AND ?", [model, lo, hi]).fetchall()}


def dropped_keys(con, model: str) -> list[int]:
    return [int(r[0]) for r in con.execute("SELECT key FROM vectors_dropped WHERE model = ?", [model]).fetchall()]


def clear_dropped(con, model: str | None = None, keys: Sequence[int] | None = None) -> None:
    if model is None:
        con.execute("DELETE FROM vectors_dropped")
    elif keys is None:
        con.execute("DELETE FROM vectors_dropped WHERE model = ?", [model])
    else:
        con.execute("DELETE FROM vectors_dropped WHERE model = ? AND key IN (SELECT unnest(?::UBIGINT[]))",
                    [model, [int(k) for k in keys]])


def iter_vectors(con, model: str, dim: int, *, after: int = 0, batch: int = 50_000) -> Iterator[tuple]:
    """(keys, matrix) of the model's vectors with key > ``after``, in key order, batch by batch.

    A batch is a range of ``batch`` keys, fetched as columns (``fetchnumpy``) and put in order
    by numpy: an ``ORDER BY key LIMIT`` page cost DuckDB a pass over the rest of the table each
    (13.4 s for a million vectors, against 2.4 s by ranges)."""
    import numpy as np

    top = con.execute("SELECT max(key) FROM vectors WHERE model = ? AND key > ?", [model, after]).fetchone()[0]
    if top is None:
        return
    lo, top = int(after), int(top)
    while lo < top:
        hi = min(lo + batch, top)
        got = con.execute("SELECT key, vec FROM vectors WHERE model = ? AND key > ? AND key <= ?",
                          [model, lo, hi]).fetchnumpy()
        lo = hi
        keys = np.asarray(got["key"], dtype=np.uint64)
        if not len(keys):
            continue
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        mat = as_rows(b"".join(got["vec"][order]), len(keys), dim)
        yield keys, mat


# A vector's visibility class, the index file that holds it (``vector_index``): its memory's
# visibility and, unless public, its owner ("private:ACTOR", "scoped:ACTOR"). A vector whose memory
# is gone (a damaged store) has the class "".
VECTOR_CLASS = ("CASE WHEN h.id IS NULL THEN '' WHEN h.visibility = 'public' THEN 'public'"
                " ELSE h.visibility || ':' || h.actor END")


def vector_classes(con, model: str, *, after: int = 0):
    """(class names, keys, codes): the class (``VECTOR_CLASS``) of each of the model's vectors with
    a key above ``after``, keys in order, ``codes`` indexing the names (sorted)."""
    import numpy as np

    got = con.execute(
        f"WITH c AS (SELECT v.key, {VECTOR_CLASS} AS cls FROM vectors v LEFT JOIN heads h ON h.id = v.id"
        " WHERE v.model = ? AND v.key > ?)"
        " SELECT key, cls, (dense_rank() OVER (ORDER BY cls) - 1)::INTEGER AS code FROM c ORDER BY key",
        [model, after]).fetchnumpy()
    keys = np.asarray(got["key"], dtype=np.uint64)
    codes = np.asarray(got["code"], dtype=np.int64)
    names = [""] * (int(codes.max()) + 1 if len(codes) else 0)
    if len(codes):
        first = np.unique(codes, return_index=True)[1]
        for at in first.tolist():
            names[int(codes[at])] = str(got["cls"][at])
    return names, keys, codes


def pending(con, model: str, *, limit: int | None = None, ids: list[str] | None = None) -> list[tuple[str, int, int, bytes]]:
    """Live memories whose current version has no vector from ``model``: (id, version, type, data)."""
    params: list[Any] = [model]
    sql = PENDING.format(mark="?")
    if ids is not None:
        sql += " AND list_contains(?, h.id)"
        params.append(list(ids))
    sql += " ORDER BY h.id"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return [(r[0], int(r[1]), int(r[2]), r[3]) for r in con.execute(sql, params).fetchall()]


def count_pending(con, model: str) -> int:
    return int(con.execute(
        "SELECT count(*) FROM heads h WHERE h.tombstoned_at IS NULL AND NOT EXISTS (SELECT 1 FROM vectors x"
        " WHERE x.id = h.id AND x.version = h.current_version AND x.model = ?)", [model]
    ).fetchall()[0][0])


CHUNK_KEYS = 1 << 16  # candidates per read of vector_chunks: float16 rows of at most 48 MiB at 384 dimensions


def vector_chunks(con, where: str, params: list, model: str, dim: int, span: int | None = None):
    """(ids, matrix) of the current-version vectors of heads passing ``where`` (alias h), the
    matrix's rows float16 as stored (read-only), ``span`` candidates at a time in the order of
    their vector keys: an exact search over the whole store holds one span's rows, never every
    vector at once (at a million memories 0.8 GB of rows, and as much again of their bytes on the
    way). The candidates' keys are found first (one join, without the vectors); each span's
    vectors are then read from the part of the table that holds its keys (about as fast as one
    read of them all: 1.5 s at a million)."""
    import numpy as np

    span = span or CHUNK_KEYS
    keys = con.execute(
        f"SELECT x.key FROM heads h JOIN vectors x ON x.id = h.id AND x.version = h.current_version"
        f" AND x.model = ? WHERE {where} ORDER BY x.key", [model, *params],
    ).fetchnumpy()["key"]
    for at in range(0, len(keys), span):
        part = keys[at:at + span]
        con.register("_chunk_keys", {"key": part})
        try:
            got = con.execute(  # as columns: a million rows in 3.2 s, against 8.3 s as tuples
                "SELECT x.id, x.vec FROM vectors x SEMI JOIN _chunk_keys c ON c.key = x.key"
                " WHERE x.model = ? AND x.key BETWEEN ? AND ?", [model, int(part[0]), int(part[-1])],
            ).fetchnumpy()
        finally:
            con.unregister("_chunk_keys")
        ids = got["id"].tolist()
        if ids:
            yield ids, np.frombuffer(b"".join(got["vec"]), dtype=VECTOR_DTYPE).reshape(len(ids), dim)


def vectors_at_keys(con, keys: Sequence[int], model: str, dim: int):
    """The float32 rows of these vector keys of ``model``, in the order of ``keys``; None when one
    of them is not in the store. The keys are joined, not listed in a filter: DuckDB then reads the
    vector column only where a key matched (about 25 ms for 20 keys among a million, against a scan
    of every vector for a filter on the key)."""
    import numpy as np

    want = [int(k) for k in keys]
    if not want:
        return np.zeros((0, dim), dtype=np.float32)
    rows = dict(con.execute("SELECT key, vec FROM vectors WHERE model = ? AND key IN (SELECT unnest(?::UBIGINT[]))",
                            [model, want]).fetchall())
    if len(rows) != len(set(want)) or any(len(v) != VECTOR_WIDTH * dim for v in rows.values()):
        return None
    return as_rows(b"".join(rows[k] for k in want), len(want), dim)


def stored_vectors(con, pairs: Sequence[tuple[str, int]], model: str) -> dict:
    """id -> float32 row of the ``model`` vector of each (id, version) in ``pairs`` that has one."""
    import numpy as np

    want = {i: int(v) for i, v in pairs}
    if not want:
        return {}
    rows = con.execute("SELECT id, version, vec FROM vectors WHERE model = ? AND id IN (SELECT unnest(?::VARCHAR[]))",
                       [model, list(want)]).fetchall()
    return {i: np.frombuffer(vec, dtype=VECTOR_DTYPE).astype(np.float32) for i, version, vec in rows
            if want[i] == int(version)}


def vectors_of_keys(con, keys: Sequence[int], model: str) -> list[tuple[int, str, int]]:
    """(key, id, version) of these vector keys that still exist for ``model``."""
    if not len(keys):
        return []
    rows = con.execute(
        "SELECT key, id, version FROM vectors WHERE list_contains(?, key) AND model = ?",
        [[int(k) for k in keys], model],
    ).fetchall()
    return [(int(k), i, int(v)) for k, i, v in rows]


def vectors_after(con, model: str, after: int, dim: int):
    """(ids, versions, matrix) of the model's vectors with key above ``after``
    (unindexed: the index file does not hold them yet)."""
    import numpy as np

    rows = con.execute(
        "SELECT id, version, vec FROM vectors WHERE model = ? AND key > ?", [model, after]
    ).fetchall()
    if not rows:
        return [], [], np.zeros((0, dim), dtype=np.float32)
    return ([r[0] for r in rows], [int(r[1]) for r in rows],
            as_rows(b"".join(r[2] for r in rows), len(rows), dim))


# -- lexical postings --------------------------------------------------------------
def _next_doc(con) -> int:
    return int(con.execute("SELECT coalesce(max(doc), 0) + 1 FROM lex_docs").fetchall()[0][0])


def lex_add(con, docs: Sequence[tuple[str, Sequence[int]]]) -> None:
    """Postings for new memories: (id, term IDs in order, repeats kept)."""
    if not docs:
        return
    first = _next_doc(con)
    terms: list[int] = []
    doc_col: list[int] = []
    tfs: list[int] = []
    lens: list[int] = []
    for i, (_, tids) in enumerate(docs):
        counts = Counter(tids)
        terms.extend(counts.keys())
        tfs.extend(min(c, 65535) for c in counts.values())
        doc_col.extend([first + i] * len(counts))
        lens.append(len(tids))
    if len(docs) <= 8 and len(terms) <= 64:
        for i, (id_, _) in enumerate(docs):
            con.execute("INSERT INTO lex_docs VALUES (?, ?, ?)", [first + i, id_, lens[i]])
        if terms:
            con.execute(
                "INSERT INTO lex_postings SELECT unnest(?::BIGINT[]), unnest(?::UBIGINT[]), unnest(?::USMALLINT[])",
                [terms, doc_col, tfs],
            )
        return
    import numpy as np

    con.register("_src_docs", {
        "doc": np.arange(first, first + len(docs), dtype=np.uint64),
        "id": np.asarray([d[0] for d in docs], dtype=object),
        "len": np.asarray(lens, dtype=np.uint32),
    })
    con.register("_src_postings", {
        "term": np.asarray(terms, dtype=np.int64),
        "doc": np.asarray(doc_col, dtype=np.uint64),
        "tf": np.asarray(tfs, dtype=np.uint16),
    })
    try:
        con.execute("INSERT INTO lex_docs SELECT doc, id, len FROM _src_docs")
        con.execute("INSERT INTO lex_postings SELECT term, doc, tf FROM _src_postings")
    finally:
        con.unregister("_src_docs")
        con.unregister("_src_postings")


def lex_replace(con, id_: str, tids: Sequence[int]) -> None:
    """New postings for a memory whose text changed (update)."""
    con.execute("DELETE FROM lex_postings WHERE doc IN (SELECT doc FROM lex_docs WHERE id = ?)", [id_])
    con.execute("DELETE FROM lex_docs WHERE id = ?", [id_])
    lex_add(con, [(id_, tids)])


def backfill_lexical(con, batch: int = 5000) -> None:
    """Postings for every memory that has none (a store from before the lexical lane)."""
    from cortexctl.memory import codec, schema
    from cortexctl.memory.terms import text_terms
    from cortexctl.memory.types import type_name

    while True:
        rows = con.execute(
            "SELECT h.id, v.type, v.data FROM heads h JOIN versions v ON v.id = h.id AND v.version = h.current_version"
            " WHERE h.id NOT IN (SELECT id FROM lex_docs) ORDER BY h.id LIMIT ?", [batch]
        ).fetchall()
        if not rows:
            return
        lex_add(con, [(id_, text_terms(schema.search_text(type_name(t), codec.decode(d)))) for id_, t, d in rows])


def doc_count(con) -> int:
    return int(con.execute("SELECT count(*) FROM lex_docs").fetchall()[0][0])


def postings_of(con, terms: Sequence[int]):
    """Every posting of these terms across the store: numpy arrays term, doc, tf."""
    import numpy as np

    if not terms:
        return {"term": np.zeros(0, np.int64), "doc": np.zeros(0, np.uint64), "tf": np.zeros(0, np.uint16)}
    got = con.execute(
        "SELECT term, doc, tf FROM lex_postings WHERE list_contains(?::BIGINT[], term)", [list(terms)]
    ).fetchnumpy()
    return {k: np.asarray(got[k]) for k in ("term", "doc", "tf")}


def doc_ids(con, docs: Sequence[int]) -> dict[int, str]:
    """doc number -> memory ID."""
    if not len(docs):
        return {}
    rows = con.execute("SELECT doc, id FROM lex_docs WHERE list_contains(?::UBIGINT[], doc)",
                       [[int(d) for d in docs]]).fetchall()
    return {int(d): i for d, i in rows}


def hidden_docs(con, actor: str):
    """The doc numbers of memories ``actor`` may not see (numpy array): term statistics leave
    them out, so scores reveal nothing of another actor's private words."""
    import numpy as np

    from cortexctl.store.records import visible_sql

    seen, params = visible_sql(actor)
    got = con.execute(f"SELECT d.doc FROM lex_docs d JOIN heads h ON h.id = d.id WHERE NOT {seen}", params).fetchnumpy()
    return np.asarray(got["doc"], dtype=np.uint64)


def term_df(con, terms: Sequence[int], hidden) -> dict[int, int]:
    """Document frequency of each term, leaving out the ``hidden`` doc numbers (see ``hidden_docs``)."""
    if not terms:
        return {}
    rows = con.execute(
        "SELECT term, count(*) FROM lex_postings WHERE list_contains(?::BIGINT[], term)"
        " AND doc NOT IN (SELECT unnest(?::UBIGINT[])) GROUP BY term",
        [list(terms), [int(d) for d in hidden]],
    ).fetchall()
    return {int(t): int(c) for t, c in rows}


def doc_terms(con, docs: Sequence[int]) -> dict[int, tuple[dict[int, int], int]]:
    """Each doc's term frequencies and length: doc -> ({term: tf}, length)."""
    if not len(docs):
        return {}
    want = [int(d) for d in docs]
    lens = dict(con.execute("SELECT doc, len FROM lex_docs WHERE list_contains(?::UBIGINT[], doc)", [want]).fetchall())
    out: dict[int, tuple[dict[int, int], int]] = {int(d): ({}, int(n)) for d, n in lens.items()}
    for doc, term, tf in con.execute(
        "SELECT doc, term, tf FROM lex_postings WHERE list_contains(?::UBIGINT[], doc)", [want]
    ).fetchall():
        out[int(doc)][0][int(term)] = int(tf)
    return out


def lexical_mismatches(con, expected, batch: int = 5000, after: str | None = None, upto: str | None = None,
                       strays: bool = True):
    """(id, problem) for every memory whose postings are not ``expected(type, data)``'s terms.

    ``after`` and ``upto`` bound the memories to IDs in ``(after, upto]``; ``strays``
    adds the postings of memories that do not exist (see ``stray_terms``). The
    expected terms and the stored postings become sorted (memory, term, tf) arrays,
    compared column by column, so a memory is named when its term count, any term or
    any frequency differs, or when its document length does.

    The range is read once: its current texts by one cursor (``batch`` rows at a time,
    each memory's postings document and length beside its text) and all its postings by
    one query. Only when the range's ``lex_docs`` rows repeat a memory ID or a doc number
    (damage: ``add_terms`` gives each memory one fresh doc number) does it fall back to
    one pair of queries per run of ``batch`` memories (``_lexical_runs``), whose findings
    (``more than one postings document`` among them) are those of that walk.
    """
    where, params = id_range("id", after, upto)
    n, ids, docs = con.execute(
        f"SELECT count(*), count(DISTINCT id), count(DISTINCT doc) FROM lex_docs WHERE {where}", params
    ).fetchall()[0]
    if n == ids == docs:
        yield from _lexical_range(con, expected, batch, after, upto)
    else:
        yield from _lexical_runs(con, expected, batch, after, upto)
    if strays:
        yield from stray_terms(con)


_CURRENT = ("SELECT h.id, v.type, v.data{more} FROM heads h"
            " JOIN versions v ON v.id = h.id AND v.version = h.current_version{join} WHERE {where} ORDER BY h.id")


def batch_mismatches(expected, rows, p_doc, p_term, p_tf):
    """(id, problem) for each of ``rows`` (id, type, data, doc, len: a memory's current text and its
    postings document, doc and len None when it has none) whose postings, in the arrays ``p_doc``
    (sorted), ``p_term`` and ``p_tf`` (int64), are not ``expected(type, data)``'s terms. Any backend
    that keeps postings compares a batch of memories this way."""
    import numpy as np

    docs = np.array([-1 if r[3] is None else r[3] for r in rows], dtype=np.int64)
    stored_len = np.array([-1 if r[4] is None else r[4] for r in rows], dtype=np.int64)
    first = np.searchsorted(p_doc, docs, "left")
    n_post = np.searchsorted(p_doc, docs, "right") - first
    n_post[docs < 0] = 0
    h_mem = np.repeat(np.arange(len(rows), dtype=np.int64), n_post)
    take = np.repeat(first - np.cumsum(n_post) + n_post, n_post) + np.arange(len(h_mem), dtype=np.int64)
    sizes: list[int] = []
    flat: list[int] = []
    skip: list[int] = []
    _expected_runs(expected, rows, sizes, flat, skip)
    for i in _mismatched(sizes, flat, skip, stored_len, h_mem, p_term[take], p_tf[take]).tolist():
        yield rows[i][0], _problem(int(stored_len[i]))


def _expected_runs(expected, rows, sizes: list[int], flat: list[int], skip: list[int]) -> None:
    """Append each row's expected terms to ``flat`` and their count to ``sizes``; the rows
    whose data does not decode (the hash check reports them) go to ``skip``."""
    base = len(sizes)
    for i, row in enumerate(rows):
        try:
            tids = expected(row[1], row[2])
        except Exception:  # undecodable data: the hash check reports it
            skip.append(base + i)
            tids = ()
        sizes.append(len(tids))
        flat.extend(tids)


def _mismatched(sizes: list[int], flat: list[int], skip: list[int], stored_len, h_mem, h_term, h_tf):
    """The rows (in order) whose stored postings (``h_*``: row, term, tf, any order) or
    document length (``stored_len``, -1 for none) are not their expected terms."""
    import numpy as np

    n = len(sizes)
    counts = np.array(sizes, dtype=np.int64)
    e_mem = np.repeat(np.arange(n, dtype=np.int64), counts)
    e_term = np.array(flat, dtype=np.int64)
    e_mem, e_term, e_tf = _term_runs(e_mem, e_term)
    order = np.lexsort((h_term, h_mem))
    h_mem, h_term, h_tf = h_mem[order], h_term[order], h_tf[order]
    same = np.bincount(e_mem, minlength=n) == np.bincount(h_mem, minlength=n)
    se, sh = same[e_mem], same[h_mem]
    differ = (e_term[se] != h_term[sh]) | (e_tf[se] != h_tf[sh])
    bad = ~same | (stored_len != counts) | (stored_len < 0)
    bad[e_mem[se][differ]] = True
    if skip:
        bad[np.array(skip, dtype=np.int64)] = False
    return np.flatnonzero(bad)


def _problem(stored_len: int) -> str:
    return "no lexical postings" if stored_len < 0 else "lexical postings do not match the current text"


def _lexical_range(con, expected, batch: int, after: str | None, upto: str | None):
    """``lexical_mismatches`` over a range whose ``lex_docs`` rows have distinct IDs and doc numbers:
    the range's postings by one query (kept as arrays in doc order), its current texts by one
    cursor, each run of ``batch`` memories compared with its documents' slices of the arrays."""
    import numpy as np

    where, params = id_range("id", after, upto)
    got = con.execute(
        f"SELECT doc, term, tf FROM lex_postings WHERE doc IN (SELECT doc FROM lex_docs WHERE {where})", params
    ).fetchnumpy()
    p_doc = np.asarray(got["doc"], dtype=np.int64)
    p_term = np.asarray(got["term"], dtype=np.int64)
    p_tf = np.asarray(got["tf"], dtype=np.int64)
    if len(p_doc) > 1 and not (p_doc[1:] >= p_doc[:-1]).all():  # they mostly come in doc order already
        order = np.argsort(p_doc, kind="stable")
        p_doc, p_term, p_tf = p_doc[order], p_term[order], p_tf[order]
    where, params = id_range("h.id", after, upto)
    current = con.cursor()
    current.execute(_CURRENT.format(more=", d.doc, d.len", join=" LEFT JOIN lex_docs d ON d.id = h.id",
                                    where=where), params)
    try:
        while rows := current.fetchmany(batch):
            yield from batch_mismatches(expected, rows, p_doc, p_term, p_tf)
    finally:
        current.close()


def _lexical_runs(con, expected, batch: int, after: str | None, upto: str | None):
    """``lexical_mismatches`` one run of ``batch`` memories at a time, a pair of queries each:
    for a range whose ``lex_docs`` rows repeat an ID or a doc number."""
    import numpy as np

    where, params = id_range("h.id", after, upto)
    current = con.cursor()  # read once in ID order, cut into runs here (a query per run scans every head)
    current.execute(_CURRENT.format(more="", join="", where=where), params)
    try:
        while rows := current.fetchmany(batch):
            lo, hi = rows[0][0], rows[-1][0]
            at = {r[0]: i for i, r in enumerate(rows)}
            chosen: dict[int, int] = {}  # row -> its postings document (the last, when there are more)
            stored_len = np.full(len(rows), -1, dtype=np.int64)
            seen: set[str] = set()
            for id_, doc, ln in con.execute(
                "SELECT id, doc, len FROM lex_docs WHERE id BETWEEN ? AND ? ORDER BY id, doc", [lo, hi]
            ).fetchall():
                if id_ in seen:
                    yield id_, "more than one postings document"
                seen.add(id_)
                i = at.get(id_)
                if i is not None:
                    chosen[i] = int(doc)
                    stored_len[i] = int(ln)
            doc_of = {d: i for i, d in chosen.items()}
            got = con.execute(
                "SELECT p.doc, p.term, p.tf FROM lex_docs d JOIN lex_postings p ON p.doc = d.doc"
                " WHERE d.id BETWEEN ? AND ?", [lo, hi]
            ).fetchnumpy()
            docs = np.asarray(got["doc"], dtype=np.int64)
            if doc_of:
                keys = np.fromiter(doc_of, dtype=np.int64, count=len(doc_of))
                vals = np.fromiter(doc_of.values(), dtype=np.int64, count=len(doc_of))
                order = np.argsort(keys)
                keys, vals = keys[order], vals[order]
                pos = np.minimum(np.searchsorted(keys, docs), len(keys) - 1)
                mine = keys[pos] == docs
                h_mem = vals[pos][mine]
            else:
                mine = np.zeros(len(docs), dtype=bool)
                h_mem = np.zeros(0, dtype=np.int64)
            h_term = np.asarray(got["term"], dtype=np.int64)[mine]
            h_tf = np.asarray(got["tf"], dtype=np.int64)[mine]
            sizes: list[int] = []
            flat: list[int] = []
            skip: list[int] = []
            _expected_runs(expected, rows, sizes, flat, skip)
            for i in _mismatched(sizes, flat, skip, stored_len, h_mem, h_term, h_tf).tolist():
                yield rows[i][0], _problem(stored_len[i])
    finally:
        current.close()


def _term_runs(mem, terms):
    """Sorted (memory, term, count) runs of the (memory, term) pairs given."""
    import numpy as np

    if not len(terms):
        return mem, terms, terms
    order = np.lexsort((terms, mem))
    mem, terms = mem[order], terms[order]
    start = np.flatnonzero(np.r_[True, (mem[1:] != mem[:-1]) | (terms[1:] != terms[:-1])])
    tf = np.diff(np.r_[start, len(terms)])
    return mem[start], terms[start], tf


def stray_terms(con):
    """(id, problem) for the postings documents of memories that do not exist."""
    for (id_,) in con.execute("SELECT id FROM lex_docs WHERE id NOT IN (SELECT id FROM heads) ORDER BY id").fetchall():
        yield id_, "lexical postings for a memory that does not exist"


def vector_problems(con):
    """(id, version, problem) for vectors that are cut short or not of a current version."""
    for id_, version, model in con.execute(
        f"SELECT id, version, model FROM vectors WHERE octet_length(vec) <> {VECTOR_WIDTH} * dim"
    ).fetchall():
        yield id_, int(version), f"vector of model {model} has the wrong length"
    for id_, version, model in con.execute(
        "SELECT x.id, x.version, x.model FROM vectors x LEFT JOIN heads h ON h.id = x.id"
        " AND h.current_version = x.version WHERE h.id IS NULL"
    ).fetchall():
        yield id_, int(version), f"vector of model {model} is not of the memory's current version"


def text_twins(con, actor: str, type_code: int, n_terms: int, term: int, limit: int = 20) -> list[str]:
    """Live memories of ``actor`` and type whose text has ``n_terms`` terms, ``term`` among them:
    the few whose text may equal a new one's (the caller compares the texts)."""
    rows = con.execute(
        "SELECT h.id FROM lex_docs d JOIN heads h ON h.id = d.id WHERE d.len = ? AND h.actor = ? AND h.type = ?"
        " AND h.tombstoned_at IS NULL AND d.doc IN (SELECT doc FROM lex_postings WHERE term = ?)"
        f" ORDER BY h.id LIMIT {int(limit)}", [n_terms, actor, type_code, term]).fetchall()
    return [r[0] for r in rows]
