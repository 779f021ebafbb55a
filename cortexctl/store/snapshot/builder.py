"""Building the snapshot: the store's rows read from DuckDB (or a delta's document) made into the
snapshot's arrays and header extras, and ``build``, which writes the file under the writer lock."""

from __future__ import annotations

import itertools
from collections import deque
from typing import Any

from cortexctl.memory import codec, forms
from cortexctl.memory.types import TYPE_NAMES
from cortexctl.store.search import VECTOR_DTYPE, VECTOR_WIDTH
from cortexctl.store.snapshot.format import (BUILD_BATCH, DELTA_NAME, SNAPSHOT_NAME, _clear_temps, _header_of,
                                             _schema_version, _stamp_ok, _unlink, _us, db_identity, mark_clean,
                                             mark_dirty, pack_data, read_gen, write)

def _codes(values: list, table: dict) -> list[int]:
    out = []
    for v in values:
        c = table.get(v)
        if c is None:
            c = table[v] = len(table)
        out.append(c)
    return out




VISIBILITIES = ("private", "public", "scoped")  # codes 0, 1, 2 (any other value gets the next code)
HEAD_COLUMNS = ("SELECT id, type, actor, visibility, epoch_us(tombstoned_at), session, current_version,"
                " epoch_us(updated_at), epoch(greatest(updated_at, last_used)), importance, access_count, citations,"
                " confidence, tags, frames, short, medium, epoch_us(valid_from), epoch_us(valid_to), supersedes,"
                " superseded_by FROM heads")
NO_TIME = -(1 << 63)  # a NULL valid time in the snapshot's int64 arrays (``_Part.times`` masks it)
DATA_QUERY = "SELECT h.id, v.type, v.data FROM heads h JOIN versions v ON v.id = h.id AND v.version = h.current_version"
# each head's row with its current version's type and data (NULL when it has none), by ID
HEADS_WITH_DATA = (f"SELECT h.*, v.type, v.data FROM ({HEAD_COLUMNS}) h LEFT JOIN versions v"
                   " ON v.id = h.id AND v.version = h.current_version ORDER BY h.id")


def rendered(type_code: int, data: bytes) -> tuple[str, str] | None:
    """The short and medium forms rendered from a version's type and data, or None when they cannot
    be (data that is not a memory's: storage keeps data as bytes it does not read). A snapshot's
    result row leaves out each form equal to its rendering, and ``result_rows`` renders it again."""
    try:
        name = TYPE_NAMES[type_code]
        value = codec.decode(data)
        return forms.render_short(name, value), forms.render_medium(name, value)
    except Exception:  # noqa: BLE001 - any data the templates cannot render (a number too big for a
        # float, a field of another type, an unknown stance...): the row keeps its forms
        return None


# DuckDB's memory while a whole snapshot is built (``scratch.limit_memory``): unbounded, it kept the store's
# blocks cached, about a gigabyte beside the build's arrays at a million memories (bench/README.md).
BUILD_MEMORY = "256MB"
LEXICON = ("by_term_term", "by_term_start", "by_term_doc", "by_term_tf", "by_doc_doc", "by_doc_start", "by_doc_term_at",
           "by_doc_tf")  # the postings' arrays, in the order the file holds them
ROWS_PIECE = 200_000  # docs' and vectors' rows fetched at a time by a whole build (``_StoreRows._pieces``)
POSTINGS_PIECE = 2_000_000  # postings fetched at a time by a whole build (``_StoreRows.lexicon``)
SLIM_HELPER_FROM = 50_000  # heads: from this many, a full build slims its rows in a helper process (2+ cores)


def slim_rows(items: list[tuple]) -> tuple[bytes, list[int], list[int]]:
    """What a written snapshot makes of a batch of (type, data, short, medium) items, its current
    versions' and forms: (their data packed one after another, where each ends, each one's forms
    flag: -1 when its data renders no forms, else bit 0 set when the short form is the rendered one
    and bit 1 when the medium is). The rendering and deflating cost about 15 us a memory, most of a
    full build's own work: a big build hands them to a helper process (``_slimmed``)."""
    buf = bytearray()
    ends: list[int] = []
    flags: list[int] = []
    for type_code, data, short, medium in items:
        blob = b"" if data is None else bytes(data)
        buf += pack_data(blob)
        ends.append(len(buf))
        got = None if data is None else rendered(type_code, blob)
        flags.append(-1 if got is None else (short == got[0]) | (medium == got[1]) << 1)
    return bytes(buf), ends, flags


def _slimmed(src, slim: bool):
    """Each batch of ``src.heads()`` with ``slim_rows``'s making of it (None when not ``slim``). With
    ``src.helpers()`` (a big store, more than one core) the batches are slimmed by a helper process
    (a fresh interpreter: this one holds the database open) while this one makes the columns of the
    next; should the helper fail, the rest is slimmed here. The result is the same either way."""
    batches = src.heads()
    if not slim:
        for rows in batches:
            yield rows, None
        return
    held: deque = deque()  # the batches handed to the helper, in order, until their slimming is back
    if src.helpers():
        from cortexctl.parallel import ordered_map

        unread: list[BaseException] = []  # reading the rows failed (not the helper): the build fails

        def tasks():
            while True:
                try:
                    rows = next(batches, None)
                    task = None if rows is None else (_items(rows),)
                except BaseException as exc:
                    unread.append(exc)
                    raise
                if task is None:
                    return
                held.append(rows)
                yield task

        try:
            with ordered_map(slim_rows, tasks(), workers=1, ahead=2, fresh=True) as pool:
                for got in pool:
                    yield held.popleft(), got
        except Exception:  # noqa: BLE001 - the helper could not start or died: the rest is slimmed here
            if unread:
                raise
    for rows in itertools.chain(held, batches):
        yield rows, slim_rows(_items(rows))


def _items(rows: list[tuple]) -> list[tuple]:
    """``slim_rows``'s items of ``HEADS_WITH_DATA`` rows."""
    return [(r[21], r[22], r[15], r[16]) for r in rows]


def result_row(short: str, medium: str, frames, tomb, sup, sup_by, rendering: tuple[str, str] | None) -> bytes:
    """A head's result row: what a result needs that no column holds. Empty when its forms are the
    rendered ones (``rendering``) and it has no frames, tombstone or links; else the JSON list [short,
    medium, frames, tombstone µs, supersedes, superseded_by] less what is unset at its end, a form
    that is the rendered one given as null."""
    import orjson

    s = None if rendering is not None and short == rendering[0] else short
    m = None if rendering is not None and medium == rendering[1] else medium
    row = [s, m, frames or [], tomb, sup, sup_by]
    while len(row) > 2 and (row[-1] is None or row[-1] == []):  # unset at the end: left off (read back as unset)
        row.pop()
    return b"" if row == [None, None] else orjson.dumps(row)


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
        return self._batches(HEADS_WITH_DATA)

    def helpers(self) -> int:
        """Helper processes for ``_slimmed``: one for a big store on more than one core."""
        from cortexctl.parallel import cores

        if cores() < 2:
            return 0
        return int(self.con.execute("SELECT count(*) FROM heads").fetchall()[0][0] >= SLIM_HELPER_FROM)

    def _pieces(self, columns: str, table: str, key: str):
        """``SELECT columns FROM table ORDER BY key`` as numpy columns, in pieces of about
        ``ROWS_PIECE`` rows between quantiles of ``key`` (a key is never split between two), so that
        the rows' strings are Python objects a piece at a time."""
        n = int(self.con.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0])
        k = max(1, -(-n // ROWS_PIECE))
        bounds = [] if k == 1 else self.con.execute(
            f"SELECT quantile_disc({key}, {[j / k for j in range(1, k)]}) FROM {table}").fetchall()[0][0]
        edges = [None, *sorted(set(int(b) for b in bounds)), None]
        for lo, hi in zip(edges, edges[1:]):
            where = [w for w, b in ((f"{key} > ?", lo), (f"{key} <= ?", hi)) if b is not None]
            sql = f"SELECT {columns} FROM {table}" + (f" WHERE {' AND '.join(where)}" if where else "")
            yield self.con.execute(f"{sql} ORDER BY {key}", [b for b in (lo, hi) if b is not None]).fetchnumpy()

    def lex_docs(self) -> dict:
        import numpy as np

        got = [(np.asarray(p["doc"], dtype=np.uint64), _ids(p["id"]), np.asarray(p["len"], dtype=np.uint32),
                np.asarray(p["long"], dtype=np.bool_))  # an ID longer than an ID's 26 bytes: no head's
               for p in self._pieces("doc, id, len, strlen(id) > 26 AS long", "lex_docs", "doc")]
        return {c: np.concatenate([g[i] for g in got]) for i, c in enumerate(("doc", "id", "len", "long"))}

    def lexicon(self) -> dict:
        """The postings' arrays (``lexicon_of``'s), sorted by DuckDB within the connection's memory
        limit and fetched a piece of ``POSTINGS_PIECE`` at a time into arrays as narrow as their values
        allow (the writer stores them so): fetched whole, a million memories' 11 million postings held
        about half a gigabyte of columns beside DuckDB's result, twice over."""
        import numpy as np

        con = self.con
        terms = con.execute("SELECT term, count(*) AS n FROM lex_postings GROUP BY term ORDER BY term").fetchnumpy()
        docs = con.execute("SELECT doc, count(*) AS n FROM lex_postings GROUP BY doc ORDER BY doc").fetchnumpy()
        a = {"by_term_term": np.asarray(terms["term"], dtype=np.int64), "by_doc_doc": np.asarray(docs["doc"], dtype=np.uint64)}
        for name, counts in (("by_term_start", terms["n"]), ("by_doc_start", docs["n"])):
            a[name] = np.zeros(len(counts) + 1, dtype=np.int64)
            np.cumsum(counts, out=a[name][1:])
        total = int(a["by_term_start"][-1])
        top = int(a["by_doc_doc"][-1]) if len(a["by_doc_doc"]) else 0
        a["by_term_doc"] = np.empty(total, dtype=np.uint32 if total and top <= 0xFFFFFFFF else np.uint64)
        a["by_term_tf"] = np.empty(total, dtype=np.uint16)
        a["by_doc_term_at"] = np.empty(total, dtype=np.int32 if total and len(a["by_term_term"]) <= 0x7FFFFFFF else np.int64)
        a["by_doc_tf"] = np.empty(total, dtype=np.uint16)
        pieces = (("term", "doc", a["by_term_term"], a["by_term_start"], a["by_term_doc"], a["by_term_tf"]),
                  ("doc", "term", a["by_doc_doc"], a["by_doc_start"], a["by_doc_term_at"], a["by_doc_tf"]))
        for key, other, keys, starts, into, tfs in pieces:
            for lo, hi in _run_ranges(starts, POSTINGS_PIECE):
                got = con.execute(f"SELECT {other}, tf FROM lex_postings WHERE {key} BETWEEN ? AND ?"
                                  f" ORDER BY {key}, {other}, tf", [int(keys[lo]), int(keys[hi - 1])]).fetchnumpy()
                at, end = int(starts[lo]), int(starts[hi])
                if len(got["tf"]) != end - at:  # the counts were read in this same transaction
                    raise RuntimeError(f"lex_postings changed while read: {len(got['tf'])} postings, {end - at} counted")
                into[at:end] = got[other] if key == "term" else np.searchsorted(a["by_term_term"], got[other])
                tfs[at:end] = got["tf"]
                del got
        return {k: a[k] for k in LEXICON}

    def vectors(self, models: dict) -> dict:
        import numpy as np

        out: dict = {"key": [], "id": [], "version": [], "model_code": [], "dims": {}}
        for p in self._pieces("key, id, version, model, dim", "vectors", "key"):
            out["key"].append(np.asarray(p["key"], dtype=np.uint64))
            out["id"].append(_ids(p["id"]))
            out["version"].append(np.asarray(p["version"], dtype=np.uint32))
            out["model_code"].append(np.array(_codes([str(m) for m in p["model"]], models), dtype=np.int32))
            for m, d in zip(p["model"], p["dim"]):
                out["dims"].setdefault(str(m), int(d))
        for c, dt in (("key", np.uint64), ("id", "S26"), ("version", np.uint32), ("model_code", np.int32)):
            out[c] = np.concatenate(out[c]) if out[c] else np.zeros(0, dt)
        return out

    def dropped(self) -> list:
        return self.con.execute("SELECT key, model FROM vectors_dropped ORDER BY key").fetchall()

    def weights(self) -> dict:
        from cortexctl.store import feedback

        return {k: list(w["weights"]) for k, w in feedback.all_weights(self.con).items()}

    def grants(self) -> list:
        return _grants_extra(self.con)

    store_wide = None  # vector counts and dimensions: from the arrays themselves



def collect(con) -> tuple[dict, dict]:
    """Everything the snapshot holds, read from an open connection: (arrays, header extras), the
    extras with the journal position the snapshot covers (``journal_seq``: its delta follows the
    journal from there)."""
    arrays, extras = _arrays(_StoreRows(con))
    return arrays, {**extras, "journal_seq": journal_seq(con)}


def journal_seq(con) -> int:
    """The journal's last position (0 when empty)."""
    return int(con.execute("SELECT coalesce(max(seq), 0) FROM journal").fetchall()[0][0])


def _arrays(src, *, slim: bool = True) -> tuple[dict, dict]:
    """The snapshot's arrays and header extras from a source of rows (``_StoreRows`` or ``_DeltaRows``).
    ``slim`` False (a delta's arrays held in memory by find, never written): the result rows keep both
    forms and the data is kept as stored (no rendering, no deflating)."""
    import numpy as np

    actors: dict = {}
    visibilities: dict = {v: i for i, v in enumerate(VISIBILITIES)}
    sessions: dict = {None: -1}
    tags: dict = {}
    cols = ("head_id", "head_type", "head_actor_code", "head_visibility_code", "head_forgotten", "head_session_code",
            "head_current_version", "head_updated_us", "head_recent_s",
            "head_importance", "head_access_count", "head_citations", "head_confidence", "tag_count", "tag_codes",
            "head_valid_from_us", "head_valid_to_us", "data_type")
    parts: dict[str, list] = {c: [] for c in cols}
    valid_set = {"head_valid_from_us": 0, "head_valid_to_us": 0}  # how many heads hold each valid time
    # the result rows go straight into one buffer: orjson's bytes keep a 4 KiB allocation each, which
    # held in a list made the build's peak about 4 KB a memory
    row_buf, data_buf = bytearray(), bytearray()
    row_ends: list[int] = []
    data_ends: list[int] = []
    for rows, slimmed in _slimmed(src, slim):
        p = parts
        p["head_id"].append(np.array([r[0].encode("ascii") for r in rows], dtype="S26"))
        p["head_type"].append(np.array([r[1] for r in rows], dtype=np.uint8))
        p["head_actor_code"].append(np.array(_codes([r[2] for r in rows], actors), dtype=np.int32))
        p["head_visibility_code"].append(np.array(_codes([r[3] for r in rows], visibilities), dtype=np.uint8))
        p["head_forgotten"].append(np.array([r[4] is not None for r in rows], dtype=np.bool_))
        p["head_session_code"].append(np.array([sessions.setdefault(r[5], len(sessions) - 1) for r in rows], dtype=np.int32))
        p["head_current_version"].append(np.array([r[6] for r in rows], dtype=np.uint32))
        p["head_updated_us"].append(np.array([r[7] for r in rows], dtype=np.int64))
        p["head_recent_s"].append(np.array([r[8] for r in rows], dtype=np.float64))
        p["head_importance"].append(np.array([r[9] for r in rows], dtype=np.uint8))
        p["head_access_count"].append(np.array([r[10] for r in rows], dtype=np.uint64))
        p["head_citations"].append(np.array([r[11] for r in rows], dtype=np.uint64))
        p["head_confidence"].append(np.array([r[12] for r in rows], dtype=np.float64))
        tag_lists = [_codes(list(r[13]), tags) for r in rows]
        p["tag_count"].append(np.array([len(t) for t in tag_lists], dtype=np.int64))
        p["tag_codes"].append(np.array([c for t in tag_lists for c in t], dtype=np.int32))
        for k, c in ((17, "head_valid_from_us"), (18, "head_valid_to_us")):
            got = [r[k] for r in rows]
            valid_set[c] += sum(v is not None for v in got)
            p[c].append(np.array([NO_TIME if v is None else v for v in got], dtype=np.int64))
        p["data_type"].append(np.array([-1 if r[21] is None else r[21] for r in rows], dtype=np.int16))
        # the current version's data, and what a result needs that no column holds
        if slimmed is None:  # kept as stored, both forms in the row
            for r in rows:
                data_buf += b"" if r[22] is None else bytes(r[22])
                data_ends.append(len(data_buf))
                row_buf += result_row(r[15], r[16], r[14], r[4], r[19], r[20], None)
                row_ends.append(len(row_buf))
        else:
            blob, ends, flags = slimmed
            base = len(data_buf)
            data_buf += blob
            data_ends.extend([base + e for e in ends])
            for r, f in zip(rows, flags):
                same = None if f < 0 else (r[15] if f & 1 else None, r[16] if f & 2 else None)
                row_buf += result_row(r[15], r[16], r[14], r[4], r[19], r[20], same)
                row_ends.append(len(row_buf))
        del rows, tag_lists, slimmed
    empty = {"head_id": np.zeros(0, "S26")}
    a: dict[str, Any] = {}
    for c in cols:
        a[c] = np.concatenate(parts[c]) if parts[c] else empty.get(c, np.zeros(0, np.int64))
    del parts
    n = len(a["head_id"])
    for c, dt in (("head_type", np.uint8), ("head_actor_code", np.int32), ("head_visibility_code", np.uint8),
                  ("head_forgotten", np.bool_), ("head_session_code", np.int32), ("head_current_version", np.uint32),
                  ("head_updated_us", np.int64), ("head_recent_s", np.float64), ("head_importance", np.uint8),
                  ("head_access_count", np.uint64), ("head_citations", np.uint64), ("head_confidence", np.float64),
                  ("tag_codes", np.int32), ("head_valid_from_us", np.int64), ("head_valid_to_us", np.int64),
                  ("data_type", np.int16)):
        a[c] = a[c].astype(dt, copy=False)
    a["head_tags_start"] = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(a.pop("tag_count"), out=a["head_tags_start"][1:])
    order = ["head_id", "head_type", "head_actor_code", "head_visibility_code", "head_forgotten", "head_session_code",
             "head_current_version", "head_updated_us", "head_recent_s",
             "head_importance", "head_access_count", "head_citations", "head_confidence", "head_tags_start", "tag_codes",
             "head_valid_from_us", "head_valid_to_us"]
    data_type = a.pop("data_type")
    a = {c: a[c] for c in order}
    a["result_start"] = np.zeros(len(row_ends) + 1, dtype=np.int64)
    a["result_start"][1:] = row_ends
    a["result_json"] = np.frombuffer(row_buf, dtype=np.uint8)  # the buffers' own bytes, not a copy
    del row_buf, row_ends
    a["data_type"] = data_type
    a["data_start"] = np.zeros(len(data_ends) + 1, dtype=np.int64)
    a["data_start"][1:] = data_ends
    a["data_blob"] = np.frombuffer(data_buf, dtype=np.uint8)
    del data_buf, data_ends
    rows_of = _rows_in(a["head_id"])

    ld = src.lex_docs()
    a["doc_number"], a["doc_id"] = ld["doc"], ld["id"]
    a["doc_head_row"] = rows_of(a["doc_id"])
    a["doc_head_row"][ld["long"]] = -1  # the old dict matched the whole ID: one cut to 26 bytes is no head's
    a["doc_length"] = ld["len"]
    del ld
    a["head_doc"] = np.full(n, -1, dtype=np.int64)  # each head's doc (-1: none), for a delta's masking
    has = a["doc_head_row"] >= 0
    a["head_doc"][a["doc_head_row"][has]] = a["doc_number"][has].astype(np.int64)

    a.update(src.lexicon())

    models: dict = {}  # each model's code, in the order the vectors by key first name them
    v = src.vectors(models)
    a["vector_key"], a["vector_id"], a["vector_version"] = v["key"], v["id"], v["version"]
    a["vector_model_code"] = v["model_code"]
    a["vector_head_row"] = rows_of(a["vector_id"])
    dims: dict[str, int] = v["dims"]
    if "vec" in v:  # a delta's vectors come with their values (newer than the index file)
        a["vector_values"] = np.frombuffer(b"".join(v["vec"]), dtype=VECTOR_DTYPE).astype("<f4")
        a["vector_values_start"] = np.zeros(len(v["vec"]) + 1, dtype=np.int64)  # where each vector starts in v_vec
        np.cumsum([len(x) // VECTOR_WIDTH for x in v["vec"]], out=a["vector_values_start"][1:])
    del v
    vd = src.dropped()
    a["dropped_key"] = np.array([r[0] for r in vd], dtype=np.uint64)
    a["dropped_model_code"] = np.array(_codes([r[1] for r in vd], models), dtype=np.int32)

    if src.store_wide is not None:
        counts, dims = src.store_wide
    else:
        counts = {}
        for code, m in enumerate(models):
            live = a["vector_key"][a["vector_model_code"] == code]
            dropped = a["dropped_key"][a["dropped_model_code"] == code]
            counts[m] = [int(len(live)), int(live.max()) if len(live) else 0, int(len(dropped)),
                         int(dropped.max()) if len(dropped) else 0]
    extras = {
        "vector_counts": counts,  # model -> [live, highest live key, dropped, highest dropped key]
        "actors": list(actors), "visibilities": list(visibilities),
        "sessions": [s for s in sessions if s is not None], "tags": list(tags),
        "models": list(models), "dims": dims, "weights": src.weights(), "grants": src.grants(),
        "valid_set": valid_set,
    }
    return a, extras


def _ids(column):
    """A column of memory IDs (strings) as the snapshot's ``S26`` array."""
    import numpy as np

    return np.array(column, dtype="S26") if len(column) else np.zeros(0, "S26")  # ASCII: an ID is a ULID


def _rows_in(head_id):
    """A function giving each of an ``S26`` array of IDs its row in ``head_id`` (its last, were an ID
    there twice), -1 where it has none: by binary search over the IDs in order (the heads are read by
    ID), where a dict of a million IDs held about 130 MB."""
    import numpy as np

    order = None
    if len(head_id) > 1 and not bool((head_id[1:] >= head_id[:-1]).all()):
        order = np.argsort(head_id, kind="stable")
    ordered = head_id if order is None else head_id[order]

    def rows(ids):
        if not len(ids) or not len(ordered):
            return np.full(len(ids), -1, dtype=np.int64)
        at = np.searchsorted(ordered, ids, side="right") - 1
        at[at < 0] = 0
        found = ordered[at] == ids
        return np.where(found, at if order is None else order[at], -1).astype(np.int64)

    return rows


def lexicon_of(by_term: dict, by_doc: dict) -> dict:
    """The snapshot's postings arrays from the postings' columns (term, doc, tf) sorted by term then
    doc (``by_term``) and by doc then term (``by_doc``): each order's distinct keys and where each
    one's run starts, the other column and the term frequencies; a posting of the doc order names
    its term by its place in ``by_term_term`` (a few bytes, where the term is eight)."""
    import numpy as np

    a: dict = {}
    a["by_term_term"], a["by_term_start"] = _runs(np.asarray(by_term["term"], dtype=np.int64))
    a["by_term_doc"], a["by_term_tf"] = np.asarray(by_term["doc"], dtype=np.uint64), np.asarray(by_term["tf"], dtype=np.uint16)
    a["by_doc_doc"], a["by_doc_start"] = _runs(np.asarray(by_doc["doc"], dtype=np.uint64))
    a["by_doc_term_at"] = np.searchsorted(a["by_term_term"], np.asarray(by_doc["term"], dtype=np.int64)).astype(np.int64)
    a["by_doc_tf"] = np.asarray(by_doc["tf"], dtype=np.uint16)
    return a


def _run_ranges(starts, most: int) -> list[tuple[int, int]]:
    """The runs (``starts``: where each starts, the total last) as consecutive (first, end) ranges of
    at most ``most`` items each, a run bigger than that alone in its range."""
    import numpy as np

    out: list[tuple[int, int]] = []
    lo, runs = 0, len(starts) - 1
    while lo < runs:
        hi = min(max(int(np.searchsorted(starts, starts[lo] + most, side="right")) - 1, lo + 1), runs)
        out.append((lo, hi))
        lo = hi
    return out


def _runs(keys):
    """A sorted column's distinct values and where each one's run starts, the column's length last."""
    import numpy as np

    starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1]))) if len(keys) else np.zeros(0, np.int64)
    return keys[starts], np.append(starts, len(keys)).astype(np.int64)


def _grants_extra(con) -> list[list]:
    """The grants not revoked, store-wide, as the header carries them (like the learned weights:
    a delta's header has them anew after every write, grants and revocations included):
    [id, granter, subagent, type codes, tags, created_at µs, expires_at µs or None]."""
    from cortexctl.store import grants

    return [[g["id"], g["granter"], g["subagent"], g["types"], g["tags"], _us(g["created_at"]), _us(g["expires_at"])]
            for g in grants.all_grants(con).values() if g["revoked_at"] is None]



def build(store) -> dict:
    """Rebuild the snapshot of ``store`` (a ``db.DuckStorage``); the caller holds the writer lock and no
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
        return {"action": "none", "memories": int(current[0]["arrays"]["head_id"]["shape"][0])}
    from cortexctl.store import scratch

    with scratch.spill_space(scratch.areas(store), "snapshot") as spill:
        try:
            with store.read() as con, scratch.limited(con, BUILD_MEMORY, spill):
                arrays, extras = collect(con)
        except Exception as exc:  # noqa: BLE001 - only running out of the budget is tried again
            if not scratch.out_of_memory(exc):
                raise
            with store.read() as con:  # a store whose build needs more: built unbounded
                arrays, extras = collect(con)
    stamp = {"token": gen[0], "counter": gen[1], "schema_version": _schema_version(), "db": db_identity(path)}
    write(path / SNAPSHOT_NAME, arrays, extras, stamp)
    _unlink(path / DELTA_NAME)
    return {"action": "build", "memories": int(len(arrays["head_id"]))}


