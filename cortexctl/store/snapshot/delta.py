"""The delta file ``cortex.snapdelta``: what writers changed since the build, as plain rows (see the
package docstring), and which snapshot and delta are current for the store (``open_current``,
``state``, ``check_whole``)."""

from __future__ import annotations

import base64
import os
import zlib
from pathlib import Path

from cortexctl.files import checked_path, identity, read_regular, stamp_checked
from cortexctl.store.snapshot.builder import (DATA_QUERY, HEAD_COLUMNS, _arrays, _codes, _grants_extra, _ids, journal_seq,
                                              lexicon_of)
from cortexctl.store.snapshot.format import (DELTA_NAME, FORMAT, SNAPSHOT_NAME, Snapshot, SnapshotUnusable, _clear_temps,
                                             _header_of, _map, _mark, _other_format, _schema_version, _stamp_ok,
                                             _unlink, db_identity)

DELTA_MAX = 2_000  # memories a delta holds; past that, find reads DuckDB until the next fold

DELTA_MAGIC = b"CXDELT01"


def _delta_body(raw: bytes) -> bytes | None:
    """The JSON of a delta file's bytes when its magic, length and CRC are right."""
    if len(raw) < 24 or raw[:8] != DELTA_MAGIC or int.from_bytes(raw[8:16], "little") != len(raw) - 24 \
            or zlib.crc32(raw[24:]) != int.from_bytes(raw[16:24], "little"):
        return None
    return raw[24:]


def _delta_doc(store_path: Path, base: dict, cache: dict | None = None) -> dict | None:
    """The delta's document when the file is whole (length, CRC), current and built on ``base``.
    ``cache`` (a resident process's): the document read last is given again, the same object, while
    the file holds the same bytes (read and compared every call; the stamps checked every call)."""
    import orjson

    try:
        raw = read_regular(store_path / DELTA_NAME)
    except OSError:
        return None
    kept = cache.get(DELTA_NAME) if cache is not None else None
    if kept is not None and kept[0] == raw:
        doc = kept[1]
    else:
        body = _delta_body(raw)
        if body is None:
            return None
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(doc, dict):
            return None
        if cache is not None:
            cache[DELTA_NAME] = (raw, doc)
    if doc.get("format") != FORMAT or doc.get("base") != _mark(base) or not _stamp_ok(store_path, doc):
        return None
    return doc


def _delta_problem(store_path: Path) -> str | None:
    """What is wrong with the delta file's bytes, if anything (a stale delta is not wrong)."""
    try:
        raw = read_regular(store_path / DELTA_NAME)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"search snapshot delta {DELTA_NAME}: {exc.strerror}"
    if _delta_body(raw) is None:
        return f"search snapshot delta {DELTA_NAME} is truncated or damaged"
    return None


def delta_start(store_path: Path) -> dict | None:
    """Before a writer's transaction (under the writer lock): what its delta will build on, or
    None when no snapshot is current (the writer then leaves it to the next fold)."""
    got = _header_of(store_path / SNAPSHOT_NAME)
    if got is None:
        return None
    base = got[0]
    start = start_on(base, base.get("journal_seq"))
    if start is None:
        return None
    if not _stamp_ok(store_path, base):
        doc = _delta_doc(store_path, base)
        if doc is None:
            return None
        start["ids"], start["journal_seq"] = set(doc["ids"]), doc.get("journal_seq")
    return start if isinstance(start["journal_seq"], int) else None


def start_on(base: dict, journal_seq) -> dict | None:
    """What a delta on the snapshot with header ``base`` builds on when it follows the journal from
    ``journal_seq`` (the snapshot's own position, or where a fold's snapshot stood)."""
    c = base.get("vector_counts", {})
    try:
        top = max([max(int(v[1]), int(v[3])) for v in c.values()] or [0])
    except (TypeError, ValueError, IndexError, AttributeError):
        return None
    return {"base": _mark(base), "base_top": top, "ids": set(), "journal_seq": journal_seq}


def changed_since(con, seq: int, base_top: int) -> set[str] | None:
    """The memories whose rows changed after journal position ``seq``: every change to a memory is a
    journal entry (``interface.MEMORY_KINDS`` name it by ``ref``; an attest names the memories it
    bumped in its payload), and a vector given since the build has a key above ``base_top`` (keys
    only grow). None for an entry of a kind not known here (the delta cannot follow it)."""
    from cortexctl.memory import codec
    from cortexctl.store.interface import MEMORY_KINDS

    out: set[str] = set()
    for kind, ref, payload in con.execute("SELECT kind, ref, payload FROM journal WHERE seq > ? ORDER BY seq",
                                          [seq]).fetchall():
        if kind in MEMORY_KINDS:
            out.add(ref)
        elif kind == "attest":
            out.update(codec.decode(bytes(payload))["affected"])
        elif kind not in NO_MEMORY_KINDS:
            return None
    out.update(i for (i,) in con.execute("SELECT DISTINCT id FROM vectors WHERE key > ?", [base_top]).fetchall())
    return out


# entries that change no memory's rows (a consolidate entry marks a transcript done; its writes have their own)
NO_MEMORY_KINDS = ("grant", "revoke", "learn_weights", "checkpoint", "consolidate")


def collect_delta(con, start: dict | None, *, wide: bool = False) -> dict | None:
    """After the writer's COMMIT, on its connection: the delta's document, the rows of every memory
    changed since the build (read from the journal since the position the snapshot or the last
    delta covers: ``changed_since``), or None when the snapshot is left to the next fold (no
    current snapshot, a change the delta cannot follow: ``wide`` or an unknown journal kind, or
    more than DELTA_MAX memories). Plain rows as DuckDB gives them, no numpy: a write stays lean;
    ``find`` makes the arrays."""
    if start is None or wide:
        return None
    changed = changed_since(con, start["journal_seq"], start["base_top"])
    if changed is None:
        return None
    ids = sorted(start["ids"] | changed)
    if len(ids) > DELTA_MAX:
        return None
    from cortexctl.store import feedback

    b64 = base64.b64encode
    only = " IN (SELECT unnest(?::VARCHAR[]))"
    # found by ID first, then read by row: the heads' columns are read for those rows only (a
    # writer's connection starts with nothing cached: the scan a join would make reads them all)
    heads = con.execute(f"{HEAD_COLUMNS} WHERE rowid IN (SELECT rowid FROM heads WHERE id{only}) ORDER BY id",
                        [ids]).fetchall()
    data = con.execute(f"{DATA_QUERY} WHERE h.id{only} AND v.id{only}", [ids, ids]).fetchall()
    docs = con.execute(f"SELECT doc, id, len FROM lex_docs WHERE id{only} ORDER BY doc", [ids]).fetchall()
    postings = con.execute("SELECT term, doc, tf FROM lex_postings WHERE doc IN (SELECT unnest(?::UBIGINT[]))",
                           [[d for d, _, _ in docs]]).fetchall()
    # the values only of vectors given since the build (keys only grow): find reads those beside the
    # index file; an older one's are in it (or read from DuckDB), and reading every vector's value to
    # find the changed memories' would read the whole column
    values = dict(con.execute("SELECT key, vec FROM vectors WHERE key > ?", [start["base_top"]]).fetchall())
    vectors = [(k, i, v, m, d, values.get(k, b"")) for k, i, v, m, d in con.execute(
        f"SELECT key, id, version, model, dim FROM vectors WHERE id{only} ORDER BY key", [ids]).fetchall()]
    counts: dict[str, list[int]] = {}
    dims: dict[str, int] = {}
    for m, n, top, d in con.execute("SELECT model, count(*), max(key), min(dim) FROM vectors GROUP BY model").fetchall():
        counts[m] = [int(n), int(top), 0, 0]
        dims[m] = int(d)
    for m, n, top in con.execute("SELECT model, count(*), max(key) FROM vectors_dropped GROUP BY model").fetchall():
        counts.setdefault(m, [0, 0, 0, 0])[2:] = [int(n), int(top)]
    # every vector key given since the build, live or dropped (keys only grow: see search.next_vector_key)
    new_keys = con.execute("SELECT key, model FROM vectors WHERE key > ? UNION ALL"
                           " SELECT key, model FROM vectors_dropped WHERE key > ?", [start["base_top"]] * 2).fetchall()
    return {
        "ids": ids, "heads": [list(r) for r in heads],
        "data": [[i, t, b64(bytes(d)).decode()] for i, t, d in data],
        "lex_docs": [list(r) for r in docs], "postings": [list(r) for r in postings],
        "vectors": [[k, i, v, m, d, b64(bytes(x)).decode()] for k, i, v, m, d, x in vectors],
        "new_keys": [list(r) for r in new_keys], "vector_counts": counts, "dims": dims,
        "weights": {k: list(w["weights"]) for k, w in feedback.all_weights(con).items()},
        "grants": _grants_extra(con), "journal_seq": journal_seq(con),
    }


def write_delta(store, start: dict | None, doc: dict | None, token: str, counter: int) -> None:
    """After the writer closed its connection (the file's identity is final), still under the
    writer lock: write the delta stamped with the writer's generation, or remove a delta that
    no longer holds. Never fails the write: a delta not written only sends find to DuckDB."""
    path = store.path
    if start is None or doc is None:
        _unlink(path / DELTA_NAME)
        return
    import orjson

    from cortexctl.files import atomic_path

    try:
        _clear_temps(path)
        base = _header_of(path / SNAPSHOT_NAME)
        if base is None or _mark(base[0]) != start["base"]:
            _unlink(path / DELTA_NAME)
            return
        body = orjson.dumps({**doc, "format": FORMAT, "base": start["base"], "token": token, "counter": counter,
                             "schema_version": _schema_version(), "db": db_identity(path)})
        with atomic_path(path / DELTA_NAME) as tmp:
            with open(tmp, "wb") as fh:
                fh.write(DELTA_MAGIC + len(body).to_bytes(8, "little") + zlib.crc32(body).to_bytes(8, "little") + body)
    except Exception:  # noqa: BLE001 - a cache: find reads DuckDB until the next fold
        _unlink(path / DELTA_NAME)


class _MemSnap:
    """A delta's arrays in memory, read through the same calls as a mapped ``Snapshot`` (its bytes
    were checked whole when the file was read)."""

    kept = False  # held by a resident process's search state (``query.SnapshotTx``): close() leaves it
    packed = True  # its data deflated (``format.pack_data``), as a file's: a whole store's (``of``)

    def __init__(self, doc: dict) -> None:
        # never written: its rows keep their forms and data as stored (rendering and deflating up to
        # DELTA_MAX memories in every find would cost it tens of milliseconds)
        arrays, extras = _arrays(_DeltaRows(doc), slim=False)
        self.packed = False
        self._set(arrays, extras)
        self.new_keys = doc["new_keys"]

    @classmethod
    def of(cls, arrays: dict, extras: dict) -> "_MemSnap":
        """Arrays and header extras made by ``builder.collect`` (a whole store) held in memory."""
        snap = cls.__new__(cls)
        snap._set(arrays, extras)
        snap.new_keys = []
        return snap

    def _set(self, arrays: dict, extras: dict) -> None:
        self._a = arrays
        self.header = {**extras, "arrays": {k: {"shape": list(v.shape)} for k, v in arrays.items()}}

    def raw(self, name: str):
        return self._a[name]

    whole = raw

    def span(self, name: str, lo: int, hi: int):
        return self._a[name][lo:hi]

    def take(self, name: str, rows):
        return self._a[name][rows]

    def close(self) -> None:
        if not self.kept:
            self._a = {}


class _DeltaRows:
    """The same, from a delta's document (``collect_delta``): the changed memories' rows, their vectors
    with their values, and the store-wide numbers."""

    def __init__(self, doc: dict) -> None:
        self.doc = doc
        self.store_wide = (doc["vector_counts"], doc["dims"])

    def helpers(self) -> int:
        """A delta is small: its rows are slimmed by the process that builds (``builder._slimmed``)."""
        return 0

    def heads(self):
        """The changed heads, each with its current version's type and data (as ``HEADS_WITH_DATA``)."""
        if self.doc["heads"]:
            data = {i: (t, base64.b64decode(d)) for i, t, d in self.doc["data"]}
            yield [(*r, *data.get(r[0], (None, None))) for r in self.doc["heads"]]

    def lex_docs(self) -> dict:
        import numpy as np

        rows = self.doc["lex_docs"]
        return {"doc": np.array([r[0] for r in rows], dtype=np.uint64), "id": _ids([r[1] for r in rows]),
                "len": np.array([r[2] for r in rows], dtype=np.uint32),
                "long": np.array([len(r[1]) > 26 for r in rows], dtype=np.bool_)}

    def postings(self, by: str) -> dict:
        """The postings' columns sorted by term then doc, or by doc then term (``lexicon_of``'s input)."""
        rows = sorted(self.doc["postings"], key=None if by == "term" else (lambda r: (r[1], r[0], r[2])))
        return {"term": [r[0] for r in rows], "doc": [r[1] for r in rows], "tf": [r[2] for r in rows]}

    def lexicon(self) -> dict:
        return lexicon_of(self.postings("term"), self.postings("doc"))

    def vectors(self, models: dict) -> dict:
        """As ``_StoreRows.vectors``, with each vector's value (``vec``)."""
        import numpy as np

        rows = self.doc["vectors"]
        dims: dict = {}
        for r in rows:
            dims.setdefault(str(r[3]), int(r[4]))
        return {"key": np.array([r[0] for r in rows], dtype=np.uint64), "id": _ids([r[1] for r in rows]),
                "version": np.array([r[2] for r in rows], dtype=np.uint32),
                "model_code": np.array(_codes([str(r[3]) for r in rows], models), dtype=np.int32), "dims": dims,
                "vec": [base64.b64decode(r[5]) for r in rows]}

    def dropped(self) -> list:
        return []

    def weights(self) -> dict:
        return self.doc["weights"]

    def grants(self) -> list:
        return self.doc["grants"]



def state(store_path: Path) -> str:
    """"current", "missing", "stale" or "damaged" (header only: blocks are checked when read).
    A snapshot with a current delta is current."""
    path = store_path / SNAPSHOT_NAME
    if not path.exists():
        return "missing"
    got = _header_of(path)
    if got is None:
        return "stale" if _other_format(path) else "damaged"
    return "current" if _stamp_ok(store_path, got[0]) or _delta_doc(store_path, got[0]) else "stale"



def open_current(store_path: Path, cache: dict | None = None, *,
                 use_stamp: bool = True) -> tuple[Snapshot, dict | None] | None:
    """(snapshot, None) when the snapshot is current for the store (see the module docstring),
    (snapshot, the delta's document) when a current delta completes it, else None. ``cache``:
    the snapshot's mapping kept between calls by a resident process; ``use_stamp``: whether its
    checked stamp spares the block checks (see ``_map``)."""
    path = store_path / SNAPSHOT_NAME
    got = _header_of(path)
    if got is None:
        return None
    header, start = got
    delta = None
    if not _stamp_ok(store_path, header):
        delta = _delta_doc(store_path, header, cache)
        if delta is None:
            return None
    base = _map(path, header, start, cache=cache, use_stamp=use_stamp)
    return None if base is None else (base, delta)


def check_whole(store_path: Path) -> str | None:
    """For healthcheck: None when the snapshot is absent, stale (a cache not yet
    refreshed) or sound; otherwise what is wrong with it. Reads every block, whatever the checked
    stamp says, and stamps a sound file that was not written to meanwhile."""
    path = store_path / SNAPSHOT_NAME
    if not path.exists():
        return None
    got = _header_of(path)
    if got is None:
        if _other_format(path):
            return None  # written by another version: rebuilt by the next fold, like a stale one
        return f"search snapshot {SNAPSHOT_NAME}: truncated or damaged header (rebuilt by the next fold or reindex)"
    delta = _delta_problem(store_path)
    if delta is not None:
        return f"{delta} (removed by the next write, rebuilt by the next fold or reindex)"
    pair = open_current(store_path, use_stamp=False)
    if pair is None:
        return None
    snap = pair[0]
    try:
        snap._check(0, int(snap.header["data_bytes"]))
        if identity(os.stat(path)) == identity(snap.stat):
            stamp_checked(path, snap.stat, snap.header["_crc"])
    except SnapshotUnusable as exc:
        return f"{exc.message} (rebuilt by the next fold or reindex)"
    except OSError:
        pass  # gone or replaced since: checked as it was, stamped by its own writer
    finally:
        snap.close()
    return None


def remove(store_path: Path) -> None:
    for path in (store_path / SNAPSHOT_NAME, checked_path(store_path / SNAPSHOT_NAME), store_path / DELTA_NAME):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


