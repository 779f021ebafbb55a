"""Building the snapshot: the store's rows read from DuckDB (or a delta's document) made into the
snapshot's arrays and header extras, and ``build``, which writes the file under the writer lock."""

from __future__ import annotations

from typing import Any

from cortexctl.store.snapshot.format import (BUILD_BATCH, DELTA_NAME, SNAPSHOT_NAME, _clear_temps, _header_of,
                                             _schema_version, _stamp_ok, _unlink, _us, db_identity, mark_clean,
                                             mark_dirty, read_gen, write)

def _blob(items: list[bytes]):
    import numpy as np

    off = np.zeros(len(items) + 1, dtype=np.int64)
    if items:
        np.cumsum([len(b) for b in items], out=off[1:])
    return off, np.frombuffer(b"".join(items), dtype=np.uint8)


def _codes(values: list, table: dict) -> list[int]:
    out = []
    for v in values:
        c = table.get(v)
        if c is None:
            c = table[v] = len(table)
        out.append(c)
    return out




HEAD_COLUMNS = ("SELECT id, type, actor, visibility, epoch_us(tombstoned_at), session, current_version,"
                " epoch_us(updated_at), epoch(greatest(updated_at, last_used)), importance, access_count, citations,"
                " confidence, tags, frames, short, medium FROM heads")
DATA_QUERY = "SELECT h.id, v.type, v.data FROM heads h JOIN versions v ON v.id = h.id AND v.version = h.current_version"


class _StoreRows:
    """What a snapshot holds, as rows and columns read from an open DuckDB connection: the whole store."""

    def __init__(self, con) -> None:
        self.con = con

    def _batches(self, sql: str):
        cur = self.con.execute(sql)
        while True:  # in batches, so that building never holds every row as Python objects at once
            rows = cur.fetchmany(BUILD_BATCH)
            if not rows:
                return
            yield rows

    def heads(self):
        return self._batches(HEAD_COLUMNS + " ORDER BY id")

    def data(self):
        return self._batches(DATA_QUERY)

    def lex_docs(self) -> dict:
        return self.con.execute("SELECT doc, id, len FROM lex_docs ORDER BY doc").fetchnumpy()

    def postings(self) -> dict:
        return self.con.execute("SELECT term, doc, tf FROM lex_postings").fetchnumpy()

    def vectors(self) -> dict:
        return self.con.execute("SELECT key, id, version, model, dim FROM vectors ORDER BY key").fetchnumpy()

    def dropped(self) -> list:
        return self.con.execute("SELECT key, model FROM vectors_dropped ORDER BY key").fetchall()

    def weights(self) -> dict:
        from cortexctl.store import feedback

        return {k: list(w["weights"]) for k, w in feedback.all_weights(self.con).items()}

    def grants(self) -> list:
        return _grants_extra(self.con)

    store_wide = None  # vector counts and dimensions: from the arrays themselves



def collect(con) -> tuple[dict, dict]:
    """Everything the snapshot holds, read from an open connection: (arrays, header extras)."""
    return _arrays(_StoreRows(con))


def _arrays(src) -> tuple[dict, dict]:
    """The snapshot's arrays and header extras from a source of rows (``_StoreRows`` or ``_DeltaRows``)."""
    import numpy as np

    import orjson

    actors: dict = {}
    sessions: dict = {None: -1}
    tags: dict = {}
    cols = ("h_id", "h_type", "h_actor", "h_public", "h_scoped", "h_tomb", "h_session", "h_cur", "h_updated", "h_recent",
            "h_importance", "h_access", "h_cit", "h_conf", "tag_len", "tag_code")
    parts: dict[str, list] = {c: [] for c in cols}
    # the result rows go straight into one buffer: orjson's bytes keep a 4 KiB allocation each, which
    # held in a list made the build's peak about 4 KB a memory
    row_buf = bytearray()
    row_ends: list[int] = []
    for rows in src.heads():
        p = parts
        p["h_id"].append(np.array([r[0].encode("ascii") for r in rows], dtype="S26"))
        p["h_type"].append(np.array([r[1] for r in rows], dtype=np.uint8))
        p["h_actor"].append(np.array(_codes([r[2] for r in rows], actors), dtype=np.int32))
        p["h_public"].append(np.array([r[3] == "public" for r in rows], dtype=np.bool_))
        p["h_scoped"].append(np.array([r[3] == "scoped" for r in rows], dtype=np.bool_))
        p["h_tomb"].append(np.array([r[4] is not None for r in rows], dtype=np.bool_))
        p["h_session"].append(np.array([sessions.setdefault(r[5], len(sessions) - 1) for r in rows], dtype=np.int32))
        p["h_cur"].append(np.array([r[6] for r in rows], dtype=np.uint32))
        p["h_updated"].append(np.array([r[7] for r in rows], dtype=np.int64))
        p["h_recent"].append(np.array([r[8] for r in rows], dtype=np.float64))
        p["h_importance"].append(np.array([r[9] for r in rows], dtype=np.uint8))
        p["h_access"].append(np.array([r[10] for r in rows], dtype=np.uint64))
        p["h_cit"].append(np.array([r[11] for r in rows], dtype=np.uint64))
        p["h_conf"].append(np.array([r[12] for r in rows], dtype=np.float64))
        tag_lists = [_codes(list(r[13]), tags) for r in rows]
        p["tag_len"].append(np.array([len(t) for t in tag_lists], dtype=np.int64))
        p["tag_code"].append(np.array([c for t in tag_lists for c in t], dtype=np.int32))
        for r in rows:
            row_buf += orjson.dumps([r[1], r[6], r[13], r[14], r[9], r[3], r[2], r[7], r[4], r[15], r[16]])
            row_ends.append(len(row_buf))
        del rows, tag_lists
    empty = {"h_id": np.zeros(0, "S26")}
    a: dict[str, Any] = {}
    for c in cols:
        a[c] = np.concatenate(parts[c]) if parts[c] else empty.get(c, np.zeros(0, np.int64))
    del parts
    n = len(a["h_id"])
    for c, dt in (("h_type", np.uint8), ("h_actor", np.int32), ("h_public", np.bool_), ("h_scoped", np.bool_),
                  ("h_tomb", np.bool_),
                  ("h_session", np.int32), ("h_cur", np.uint32), ("h_updated", np.int64), ("h_recent", np.float64),
                  ("h_importance", np.uint8), ("h_access", np.uint64), ("h_cit", np.uint64), ("h_conf", np.float64),
                  ("tag_code", np.int32)):
        a[c] = a[c].astype(dt, copy=False)
    a["tag_off"] = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(a.pop("tag_len"), out=a["tag_off"][1:])
    order = ["h_id", "h_type", "h_actor", "h_public", "h_scoped", "h_tomb", "h_session", "h_cur", "h_updated", "h_recent",
             "h_importance", "h_access", "h_cit", "h_conf", "tag_off", "tag_code"]
    a = {c: a[c] for c in order}
    a["row_off"] = np.zeros(len(row_ends) + 1, dtype=np.int64)
    a["row_off"][1:] = row_ends
    a["row_blob"] = np.frombuffer(bytes(row_buf), dtype=np.uint8)
    del row_buf, row_ends
    row_of = {i.decode(): k for k, i in enumerate(a["h_id"].tolist())}

    dtype = np.zeros(n, dtype=np.int16) - 1
    blobs: list[bytes] = [b""] * n
    for data in src.data():
        for id_, t, d in data:
            k = row_of[id_]
            dtype[k] = t
            blobs[k] = bytes(d)
    a["d_type"] = dtype
    a["d_off"], a["d_blob"] = _blob(blobs)
    del blobs

    ld = src.lex_docs()
    a["ld_doc"] = np.asarray(ld["doc"], dtype=np.uint64)
    ld_ids = [str(i) for i in ld["id"]]
    a["ld_id"] = np.array([i.encode("ascii") for i in ld_ids], dtype="S26") if ld_ids else np.zeros(0, "S26")
    a["ld_row"] = np.array([row_of.get(i, -1) for i in ld_ids], dtype=np.int64)
    a["ld_len"] = np.asarray(ld["len"], dtype=np.uint32)
    a["h_doc"] = np.full(n, -1, dtype=np.int64)  # each head's doc (-1: none), for a delta's masking
    has = a["ld_row"] >= 0
    a["h_doc"][a["ld_row"][has]] = a["ld_doc"][has].astype(np.int64)

    p = src.postings()
    term = np.asarray(p["term"], dtype=np.int64)
    doc = np.asarray(p["doc"], dtype=np.uint64)
    tf = np.asarray(p["tf"], dtype=np.uint16)
    order = np.lexsort((doc, term))
    terms_sorted = term[order]
    a["p_term"], first = np.unique(terms_sorted, return_index=True)
    a["p_off"] = np.append(first, len(order)).astype(np.int64)
    a["p_doc"], a["p_tf"] = doc[order], tf[order]
    order = np.lexsort((term, doc))
    docs_sorted = doc[order]
    a["f_doc"], first = np.unique(docs_sorted, return_index=True)
    a["f_off"] = np.append(first, len(order)).astype(np.int64)
    a["f_term"], a["f_tf"] = term[order], tf[order]
    del p, term, doc, tf, order

    v = src.vectors()
    models: dict = {}
    a["v_key"] = np.asarray(v["key"], dtype=np.uint64)
    a["v_id"] = np.array([str(i).encode("ascii") for i in v["id"]], dtype="S26") if len(v["key"]) else np.zeros(0, "S26")
    a["v_ver"] = np.asarray(v["version"], dtype=np.uint32)
    a["v_model"] = np.array(_codes([str(m) for m in v["model"]], models), dtype=np.int32)
    a["v_row"] = np.array([row_of.get(i.decode(), -1) for i in a["v_id"].tolist()], dtype=np.int64)
    dims: dict[str, int] = {}
    for m, d in zip(v["model"], v["dim"]):
        dims.setdefault(str(m), int(d))
    if "vec" in v:  # a delta's vectors come with their values (newer than the index file)
        a["v_vec"] = np.frombuffer(b"".join(v["vec"]), dtype="<f4")
        a["v_voff"] = np.zeros(len(v["vec"]) + 1, dtype=np.int64)  # where each vector starts in v_vec
        np.cumsum([len(x) // 4 for x in v["vec"]], out=a["v_voff"][1:])
    del v
    vd = src.dropped()
    a["vd_key"] = np.array([r[0] for r in vd], dtype=np.uint64)
    a["vd_model"] = np.array(_codes([r[1] for r in vd], models), dtype=np.int32)

    if src.store_wide is not None:
        counts, dims = src.store_wide
    else:
        counts = {}
        for code, m in enumerate(models):
            live = a["v_key"][a["v_model"] == code]
            dropped = a["vd_key"][a["vd_model"] == code]
            counts[m] = [int(len(live)), int(live.max()) if len(live) else 0, int(len(dropped)),
                         int(dropped.max()) if len(dropped) else 0]
    extras = {
        "vector_counts": counts,  # model -> [live, highest live key, dropped, highest dropped key]
        "actors": list(actors), "sessions": [s for s in sessions if s is not None], "tags": list(tags),
        "models": list(models), "dims": dims, "weights": src.weights(), "grants": src.grants(),
    }
    return a, extras


def _grants_extra(con) -> list[list]:
    """The grants not revoked, store-wide, as the header carries them (like the learned weights:
    a delta's header has them anew after every write, grants and revocations included):
    [id, granter, subagent, type codes, tags, created_at µs, expires_at µs or None]."""
    from cortexctl.store import grants

    return [[g["id"], g["granter"], g["subagent"], g["types"], g["tags"], _us(g["created_at"]), _us(g["expires_at"])]
            for g in grants.all_grants(con).values() if g["revoked_at"] is None]



def build(store) -> dict:
    """Rebuild the snapshot of ``store`` (a ``db.Store``); the caller holds the writer lock and no
    connection. Returns {"action": "build"|"none", "memories": n}."""
    path = store.path
    if not store.db_path.is_file():
        return {"action": "none", "memories": 0}
    _clear_temps(path)
    gen = read_gen(path)
    if gen is None or not gen[2]:  # missing, or left dirty by a killed writer: start a clean generation
        token, counter = mark_dirty(path, sync=True)
        mark_clean(path, token, counter)
        gen = (token, counter, True)
    current = _header_of(path / SNAPSHOT_NAME)
    if current is not None and _stamp_ok(path, current[0]):
        return {"action": "none", "memories": int(current[0]["arrays"]["h_id"]["shape"][0])}
    with store.read() as con:
        arrays, extras = collect(con)
    stamp = {"token": gen[0], "counter": gen[1], "schema_version": _schema_version(), "db": db_identity(path)}
    write(path / SNAPSHOT_NAME, arrays, extras, stamp)
    _unlink(path / DELTA_NAME)
    return {"action": "build", "memories": int(len(arrays["h_id"]))}


