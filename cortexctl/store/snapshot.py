"""The search snapshot: what ``find`` reads of a store, as arrays in one file beside the database.

``cortex.snapshot`` is a cache, like the index file: derived from the DuckDB
file, rebuilt from it, never trusted blindly. It holds the heads' filter and
salience columns, the lexical postings (by term and by doc), doc numbers to
IDs, the vector keys, the learned weights and what a result shows, as arrays
that a reader maps with numpy and touches only where it looks. A cold ``find``
answered from it neither imports DuckDB nor decodes a column segment.

Trust rests on the **generation file** ``cortex.gen``: ``TOKEN COUNTER STATE``.
Every committing writer (``Store.transaction``) writes the next counter as
``dirty`` and fsyncs it *before* COMMIT, and the same counter as ``clean``
after. The token is random, made when the file is first written (a missing or
unreadable file gets a new one). A snapshot is stamped with the token and the
counter of the clean generation it was built at, plus the identity (inode, size,
modification time) of ``cortex.duckdb`` and its WAL and the schema version; it
is used only when all of them agree now. So:

- a commit since the build (or one killed between COMMIT and its clean mark,
  which leaves ``dirty``) means the counter differs: bypassed;
- a snapshot copied from another store carries another token; a database file
  replaced under it (a restore, a copy, a writer that does not know the
  generation file) changes the file identity: bypassed;
- a truncated or damaged file fails its header check (magic, length, CRC of the
  header) or, for the pages actually read, the CRC of each 16 KiB block
  (checked the first time a block is touched): ``SnapshotUnusable``, and find
  answers from DuckDB instead.

A bypassed snapshot costs find nothing but a few small reads: it then reads
DuckDB as it always did. The next fold of the index (``FOLD_AT`` new vectors,
the end of an import, ``reindex``) writes a new one: built under the writer
lock into a temp file, fsynced and renamed over the old one.

**The delta** ``cortex.snapdelta`` keeps the snapshot useful between folds. A
``DuckTx`` records which memories it changed (``touched``); after its COMMIT and
clean mark, still on its connection and under the writer lock, the writer reads
the rows of every memory changed since the build (the previous delta's and its
own: heads, current data, docs, postings, vectors with their values) and, once
its connection is closed and the database file's identity is final, writes
them as plain rows (JSON with a CRC: the writer never loads numpy), stamped like
a snapshot with its generation, and naming the snapshot it completes (its stamp
and header CRC). ``find`` makes the delta's arrays (``_arrays``, as a build
does) and answers those memories from them and every other from the snapshot
(their rows, docs and vectors there count as gone); the store-wide numbers
(vector counts, dimensions, the keys given since the build, learned weights)
come from the delta. A writer builds a
delta only on a current snapshot or delta, so a writer killed before writing
its delta leaves the store bypassing both until the next fold; a change that is
not one memory's (``touched`` is None: a model's vectors dropped, a bundle
attached) or more than ``DELTA_MAX`` memories removes the delta instead.

**Visibility** is decided from the arrays as DuckDB decides it in SQL (``records.visible_sql``):
a head is seen by its owner (``h_actor``), by everyone when public (``h_public``), and when scoped
(``h_scoped``) by a sub-agent one of whose live grants covers it; the grants are carried in the
header (``grants``: those not revoked, store-wide, with their expiry) like the learned weights, so a
delta's header has them anew after every write, a grant or a revocation included (which touch no
memory's rows). A file without ``h_scoped`` (built before grants) answers actors holding no grant
and raises ``SnapshotUnusable`` for one that holds some: find then reads DuckDB.

Anything the snapshot does not hold (frame filters, the full form, vectors
for an exact search, memories newer than the index file) is read from DuckDB,
opened on first need; if the store moved on meanwhile, the read is refused
(``SnapshotUnusable``) and find starts over on DuckDB alone.
"""

from __future__ import annotations

import base64
import json
import mmap
import os
import zlib
from contextlib import ExitStack
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Sequence

from cortexctl.store.interface import Filters, Scoring, SnapshotUnusable, Viewer, viewer_of
from cortexctl.store.lanes import Lanes

SNAPSHOT_NAME = "cortex.snapshot"
DELTA_NAME = "cortex.snapdelta"
GEN_NAME = "cortex.gen"
MAGIC = b"CXSNAP01"
FORMAT = 2
BLOCK = 1 << 14  # bytes per checksummed block
ALIGN = 64
EPOCH = datetime(1970, 1, 1)
BUILD_BATCH = 10_000  # rows read at a time while building
DELTA_MAX = 2_000  # memories a delta holds; past that, find reads DuckDB until the next fold


# -- the generation file ---------------------------------------------------------------------
def read_gen(store_path: Path) -> tuple[str, int, bool] | None:
    """(token, counter, clean) of the generation file, or None when missing or unreadable."""
    try:
        with open(store_path / GEN_NAME, "rb") as fh:
            parts = fh.read(200).decode("ascii").split()
        token, counter, state = parts
        if len(token) != 32 or state not in ("clean", "dirty"):
            return None
        return token, int(counter), state == "clean"
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def _write_gen(store_path: Path, token: str, counter: int, state: str, *, sync: bool) -> None:
    """Rewrite the generation in place: the same length every time (the counter is padded), so
    that a reader never sees an empty file and ``fdatasync`` flushes one data block."""
    data = f"{token} {counter:020d} {state}\n".encode("ascii")
    fd = os.open(store_path / GEN_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.pwrite(fd, data, 0)
        if os.fstat(fd).st_size != len(data):
            os.ftruncate(fd, len(data))
        if sync:
            os.fdatasync(fd)
    finally:
        os.close(fd)


def mark_dirty(store_path: Path) -> tuple[str, int]:
    """Before a COMMIT: the next generation, marked dirty and on disk. Returns (token, counter)."""
    gen = read_gen(store_path)
    token, counter = (gen[0], gen[1] + 1) if gen else (os.urandom(16).hex(), 1)
    _write_gen(store_path, token, counter, "dirty", sync=True)
    return token, counter


def mark_clean(store_path: Path, token: str, counter: int) -> None:
    """After the COMMIT: the generation is clean. Left undone (a crash), the generation stays dirty,
    which only makes readers bypass the snapshot."""
    try:
        _write_gen(store_path, token, counter, "clean", sync=False)
    except OSError:
        pass


def db_identity(store_path: Path) -> list:
    """(inode, size, mtime_ns) of the database file and of its WAL (None when absent)."""
    out: list = []
    for name in ("cortex.duckdb", "cortex.duckdb.wal"):
        try:
            st = os.stat(store_path / name)
            out.append([st.st_ino, st.st_size, st.st_mtime_ns])
        except FileNotFoundError:
            out.append(None)
    return out


def _schema_version() -> int:
    from cortexctl.store import migrations

    return migrations.latest()


# -- the file ----------------------------------------------------------------------------------
class Snapshot:
    """An open, stamped snapshot file: arrays mapped read-only, each block checked on first touch."""

    def __init__(self, path: Path, header: dict, mm: mmap.mmap, data_start: int, crcs) -> None:
        self.path, self.header, self._mm, self._start = path, header, mm, data_start
        import numpy as np

        self._crcs = crcs  # one CRC-32 per BLOCK of the data region
        self._ok = np.zeros(len(crcs) + 1, dtype=np.bool_)  # blocks checked so far
        self._arrays: dict[str, Any] = {}
        self.kept = False  # held by a resident process's cache (``open_current``): close() leaves it open

    def close(self) -> None:
        if self.kept:
            return
        self._arrays.clear()
        try:
            self._mm.close()
        except BufferError:  # a view still exported: the mapping goes with the process
            pass

    def _check(self, lo: int, hi: int) -> None:
        """CRC of every block covering data bytes [lo, hi) not checked yet."""
        if hi <= lo:
            return
        self._check_blocks(range(lo // BLOCK, (hi - 1) // BLOCK + 1))

    def _check_blocks(self, blocks) -> None:
        ok, crcs, mm, start = self._ok, self._crcs, self._mm, self._start
        for b in blocks:
            if b < len(ok) and ok[b]:
                continue
            s = start + b * BLOCK
            if b >= len(crcs) or zlib.crc32(mm[s : s + BLOCK]) != crcs[b]:
                raise SnapshotUnusable(f"search snapshot {SNAPSHOT_NAME} is damaged (block {b})")
            ok[b] = True

    def raw(self, name: str):
        """The whole array, unchecked (callers check what they read)."""
        import numpy as np

        a = self._arrays.get(name)
        if a is None:
            spec = self.header["arrays"][name]
            count = 1
            for d in spec["shape"]:
                count *= d
            a = np.frombuffer(self._mm, dtype=np.dtype(spec["dtype"]), count=count,
                              offset=self._start + spec["offset"]).reshape(spec["shape"])
            self._arrays[name] = a
        return a

    def whole(self, name: str):
        """The array, every block of it checked."""
        spec = self.header["arrays"][name]
        self._check(spec["offset"], spec["offset"] + spec["nbytes"])
        return self.raw(name)

    def span(self, name: str, lo: int, hi: int):
        """Elements [lo, hi) of a 1-d array, their blocks checked."""
        a = self.raw(name)
        item = a.dtype.itemsize
        off = self.header["arrays"][name]["offset"]
        self._check(off + lo * item, off + hi * item)
        return a[lo:hi]

    def take(self, name: str, rows):
        """Elements at ``rows`` (numpy int array) of a 1-d array, their blocks checked."""
        import numpy as np

        a = self.raw(name)
        if len(rows):
            item = a.dtype.itemsize
            first = (self.header["arrays"][name]["offset"] + rows.astype(np.int64) * item) // BLOCK
            last = first if BLOCK % item == 0 else \
                (self.header["arrays"][name]["offset"] + rows.astype(np.int64) * item + item - 1) // BLOCK
            blocks = np.concatenate((first, last)) if last is not first else first
            need = blocks[~self._ok[np.minimum(blocks, len(self._ok) - 1)]]
            if len(need):
                self._check_blocks(sorted(set(need.tolist())))
        return a[rows]


def _header_of(path: Path) -> tuple[dict, int] | None:
    """(header, data start) when the file's magic, header CRC, format and length are right."""
    got = _raw_header(path)
    if got is None:
        return None
    header, start, size = got
    try:
        if header.get("format") != FORMAT or header.get("block") != BLOCK \
                or size != start + int(header["data_bytes"]):
            return None
    except (ValueError, KeyError, TypeError):
        return None
    return header, start


def _other_format(path: Path) -> bool:
    """A sound header of another format (a snapshot written by another version of cortexctl): out of
    date, not damaged."""
    got = _raw_header(path)
    return got is not None and got[0].get("format") != FORMAT


def _raw_header(path: Path) -> tuple[dict, int, int] | None:
    """(header, data start, file size) when the file's magic and header CRC are right."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(24)
            if len(head) != 24 or head[:8] != MAGIC:
                return None
            hlen = int.from_bytes(head[8:16], "little")
            hcrc = int.from_bytes(head[16:24], "little")
            if hlen > 1 << 30:
                return None
            body = fh.read(hlen)
            size = os.fstat(fh.fileno()).st_size
        if len(body) != hlen or zlib.crc32(body) != hcrc:
            return None
        header = json.loads(body)
        if not isinstance(header, dict):
            return None
        header["_crc"] = hcrc
        return header, -(-(24 + hlen) // ALIGN) * ALIGN, size
    except (OSError, ValueError, KeyError, TypeError):
        return None


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


def _mark(header: dict) -> list:
    """What a delta names its base by: the base's stamp and header CRC."""
    return [header.get("token"), header.get("counter"), header.get("_crc")]


def _stamp_ok(store_path: Path, header: dict) -> bool:
    gen = read_gen(store_path)
    if gen is None or not gen[2]:
        return False
    return (header.get("token"), header.get("counter")) == (gen[0], gen[1]) \
        and header.get("schema_version") == _schema_version() \
        and header.get("db") == db_identity(store_path)


def _map(path: Path, header: dict, start: int, cache: dict | None = None) -> Snapshot | None:
    """The file mapped, for the header read from it. With ``cache`` (a resident process's), the
    mapping made last for this path is given again while the file is the same one (inode, size,
    mtime and header CRC): a snapshot file is only ever replaced whole (written beside and
    renamed), so a kept mapping keeps the blocks it has checked."""
    import numpy as np

    key = None
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            if cache is not None:
                st = os.fstat(fd)
                key = (st.st_ino, st.st_size, st.st_mtime_ns, header["_crc"])
                kept = cache.get(str(path))
                if kept is not None and kept[0] == key:
                    return kept[1]
            mm = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
        finally:
            os.close(fd)
    except (OSError, ValueError):
        return None
    if cache is not None:
        cache.pop(str(path), None)
        if len(mm) < 24 or int.from_bytes(mm[16:24], "little") != header["_crc"]:
            mm.close()  # replaced between reading the header and opening it: not this call's file
            return None
    crcs = np.frombuffer(bytes.fromhex(header["crcs"]), dtype="<u4")
    snap = Snapshot(path, header, mm, start, crcs)
    if cache is not None:
        snap.kept = True
        cache[str(path)] = (key, snap)
    return snap


def open_current(store_path: Path, cache: dict | None = None) -> tuple[Snapshot, dict | None] | None:
    """(snapshot, None) when the snapshot is current for the store (see the module docstring),
    (snapshot, the delta's document) when a current delta completes it, else None. ``cache``:
    the snapshot's mapping kept between calls by a resident process (see ``_map``)."""
    path = store_path / SNAPSHOT_NAME
    got = _header_of(path)
    if got is None:
        return None
    header, start = got
    delta = None
    if not _stamp_ok(store_path, header):
        delta = _delta_doc(store_path, header)
        if delta is None:
            return None
    base = _map(path, header, start, cache=cache)
    return None if base is None else (base, delta)


def check_whole(store_path: Path) -> str | None:
    """For verify and healthcheck: None when the snapshot is absent, stale (a cache not yet
    refreshed) or sound; otherwise what is wrong with it. Reads every block."""
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
    pair = open_current(store_path)
    if pair is None:
        return None
    try:
        pair[0]._check(0, int(pair[0].header["data_bytes"]))
    except SnapshotUnusable as exc:
        return f"{exc.message} (rebuilt by the next fold or reindex)"
    finally:
        pair[0].close()
    return None


def remove(store_path: Path) -> None:
    for name in (SNAPSHOT_NAME, DELTA_NAME):
        try:
            os.unlink(store_path / name)
        except FileNotFoundError:
            pass


# -- building ------------------------------------------------------------------------------------
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


def _us(t: datetime | None) -> int | None:
    return None if t is None else (t - EPOCH) // timedelta(microseconds=1)


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


class _DeltaRows:
    """The same, from a delta's document (``collect_delta``): the changed memories' rows, their vectors
    with their values, and the store-wide numbers."""

    def __init__(self, doc: dict) -> None:
        self.doc = doc
        self.store_wide = (doc["vector_counts"], doc["dims"])

    def heads(self):
        if self.doc["heads"]:
            yield [tuple(r) for r in self.doc["heads"]]

    def data(self):
        if self.doc["data"]:
            yield [(i, t, base64.b64decode(d)) for i, t, d in self.doc["data"]]

    def lex_docs(self) -> dict:
        rows = self.doc["lex_docs"]
        return {"doc": [r[0] for r in rows], "id": [r[1] for r in rows], "len": [r[2] for r in rows]}

    def postings(self) -> dict:
        rows = self.doc["postings"]
        return {"term": [r[0] for r in rows], "doc": [r[1] for r in rows], "tf": [r[2] for r in rows]}

    def vectors(self) -> dict:
        rows = self.doc["vectors"]
        return {"key": [r[0] for r in rows], "id": [r[1] for r in rows], "version": [r[2] for r in rows],
                "model": [r[3] for r in rows], "dim": [r[4] for r in rows],
                "vec": [base64.b64decode(r[5]) for r in rows]}

    def dropped(self) -> list:
        return []

    def weights(self) -> dict:
        return self.doc["weights"]

    def grants(self) -> list:
        return self.doc["grants"]


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


def write(path: Path, arrays: dict, extras: dict, stamp: dict) -> None:
    """Write the snapshot file atomically (temp file, fsync, rename, fsync of the directory)."""
    import numpy as np

    from cortexctl.files import atomic_path

    specs: dict = {}
    off = 0
    parts: list = []
    for name, arr in arrays.items():
        arr = np.ascontiguousarray(arr)
        pad = -off % ALIGN
        if pad:
            parts.append(b"\0" * pad)
            off += pad
        specs[name] = {"dtype": arr.dtype.str, "shape": list(arr.shape), "offset": off, "nbytes": arr.nbytes}
        parts.append(arr)
        off += arr.nbytes
    data_bytes = off
    crcs = np.zeros(-(-data_bytes // BLOCK), dtype="<u4")
    header = {"format": FORMAT, "block": BLOCK, **stamp, **extras, "arrays": specs, "data_bytes": data_bytes}
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            # the data first, after room for the header, then the header with the block CRCs
            probe = json.dumps({**header, "crcs": "00000000" * len(crcs)}, separators=(",", ":")).encode()
            start = -(-(24 + len(probe)) // ALIGN) * ALIGN
            fh.seek(start)
            for p in parts:
                fh.write(memoryview(p).cast("B") if isinstance(p, np.ndarray) else p)
            fh.flush()
        with open(tmp, "r+b") as fh:
            fh.seek(start)
            for b in range(len(crcs)):
                crcs[b] = zlib.crc32(fh.read(BLOCK))
            body = json.dumps({**header, "crcs": crcs.tobytes().hex()}, separators=(",", ":")).encode()
            assert len(body) == len(probe)
            fh.seek(0)
            fh.write(MAGIC + len(body).to_bytes(8, "little") + zlib.crc32(body).to_bytes(8, "little") + body)
            fh.write(b"\0" * (start - 24 - len(body)))


def build(store) -> dict:
    """Rebuild the snapshot of ``store`` (a ``db.Store``); the caller holds the writer lock and no
    connection. Returns {"action": "build"|"none", "memories": n}."""
    path = store.path
    if not store.db_path.is_file():
        return {"action": "none", "memories": 0}
    _clear_temps(path)
    gen = read_gen(path)
    if gen is None or not gen[2]:  # missing, or left dirty by a killed writer: start a clean generation
        token, counter = mark_dirty(path)
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


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def _clear_temps(store_path: Path) -> None:
    """Temp files of a builder or writer killed midway (the caller holds the writer lock)."""
    for name in (SNAPSHOT_NAME, DELTA_NAME):
        for left in store_path.glob(f".{name}.*.tmp"):
            _unlink(left)


# -- the delta: what writers changed since the build ------------------------------------------
DELTA_MAGIC = b"CXDELT01"


def _delta_body(raw: bytes) -> bytes | None:
    """The JSON of a delta file's bytes when its magic, length and CRC are right."""
    if len(raw) < 24 or raw[:8] != DELTA_MAGIC or int.from_bytes(raw[8:16], "little") != len(raw) - 24 \
            or zlib.crc32(raw[24:]) != int.from_bytes(raw[16:24], "little"):
        return None
    return raw[24:]


def _delta_doc(store_path: Path, base: dict) -> dict | None:
    """The delta's document when the file is whole (length, CRC), current and built on ``base``."""
    import orjson

    try:
        body = _delta_body((store_path / DELTA_NAME).read_bytes())
    except OSError:
        return None
    if body is None:
        return None
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("base") != _mark(base) \
            or not _stamp_ok(store_path, doc):
        return None
    return doc


def _delta_problem(store_path: Path) -> str | None:
    """What is wrong with the delta file's bytes, if anything (a stale delta is not wrong)."""
    try:
        raw = (store_path / DELTA_NAME).read_bytes()
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
    c = base.get("vector_counts", {})
    try:
        top = max([max(int(v[1]), int(v[3])) for v in c.values()] or [0])
    except (TypeError, ValueError, IndexError):
        return None
    start = {"base": _mark(base), "base_top": top, "ids": set()}
    if _stamp_ok(store_path, base):
        return start
    doc = _delta_doc(store_path, base)
    if doc is None:
        return None
    start["ids"] = set(doc["ids"])
    return start


def collect_delta(con, start: dict | None, touched: set[str] | None) -> dict | None:
    """After the writer's COMMIT, on its connection: the delta's document, the rows of every memory
    changed since the build (by this writer and the ones before it), or None when the snapshot is
    left to the next fold (no current snapshot, a change the delta cannot follow, or more than
    DELTA_MAX memories). Plain rows as DuckDB gives them, no numpy: a write stays lean; ``find``
    makes the arrays."""
    if start is None or touched is None:
        return None
    ids = sorted(start["ids"] | touched)
    if len(ids) > DELTA_MAX:
        return None
    from cortexctl.store import feedback

    b64 = base64.b64encode
    only = " IN (SELECT unnest(?::VARCHAR[]))"
    heads = con.execute(f"{HEAD_COLUMNS} WHERE id{only} ORDER BY id", [ids]).fetchall()
    data = con.execute(f"{DATA_QUERY} WHERE h.id{only} AND v.id{only}", [ids, ids]).fetchall()
    docs = con.execute(f"SELECT doc, id, len FROM lex_docs WHERE id{only} ORDER BY doc", [ids]).fetchall()
    postings = con.execute("SELECT term, doc, tf FROM lex_postings WHERE doc IN (SELECT unnest(?::UBIGINT[]))",
                           [[d for d, _, _ in docs]]).fetchall()
    vectors = con.execute(f"SELECT key, id, version, model, dim, vec FROM vectors WHERE id{only} ORDER BY key",
                          [ids]).fetchall()
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
        "grants": _grants_extra(con),
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

    def __init__(self, doc: dict) -> None:
        arrays, extras = _arrays(_DeltaRows(doc))
        self._a = arrays
        self.header = {**extras, "arrays": {k: {"shape": list(v.shape)} for k, v in arrays.items()}}
        self.new_keys = doc["new_keys"]

    def raw(self, name: str):
        return self._a[name]

    whole = raw

    def span(self, name: str, lo: int, hi: int):
        return self._a[name][lo:hi]

    def take(self, name: str, rows):
        return self._a[name][rows]

    def close(self) -> None:
        self._a = {}


# -- answering find ------------------------------------------------------------------------------
def _ids_bytes(ids: Sequence[str]):
    import numpy as np

    return np.array([i.encode("ascii", "replace") for i in ids], dtype="S26") if len(ids) else np.zeros(0, "S26")


def _salience_exact(recent: float, importance: int, access: int, citations: int, confidence: float,
                    tomb: bool, now_epoch: float, half_life: float, weights: Sequence[float]) -> float:
    """The salience as the database computes it (``records.SALIENCE_SQL``), operation by operation."""
    import math

    if tomb:
        return 0.0
    w_rec, w_imp, w_acc, w_cit, w_conf = weights
    age = max(now_epoch - recent, 0.0)
    return (w_rec * math.pow(0.5, age / half_life) + w_imp * importance / 10.0
            + w_acc * access / (access + 5.0) + w_cit * citations / (citations + 3.0) + w_conf * confidence)


class _Part:
    """One snapshot file as find reads it: the base, less the memories a delta holds (``dead``),
    or the delta itself."""

    def __init__(self, snap, dead_ids: Sequence[str] = ()) -> None:
        self.snap, self.h = snap, snap.header
        self.n = int(snap.header["arrays"]["h_id"]["shape"][0])
        self.dead_ids = frozenset(dead_ids)
        self._dead_rows = None
        self._masks: dict = {}
        self.dead_docs = self._docs_of_dead() if self.dead_ids else None

    def _docs_of_dead(self):
        """The sorted doc numbers of the rows a delta overrides (None when none)."""
        import numpy as np

        rows, _ = self._rows(sorted(self.dead_ids), alive=False)
        if "h_doc" in self.h["arrays"]:
            docs = self.snap.take("h_doc", rows)
            docs = docs[docs >= 0].astype(np.uint64)
        else:  # a snapshot from before h_doc: through doc -> row
            dead = np.zeros(max(self.n, 1), dtype=np.bool_)
            dead[rows] = True
            row = self.snap.whole("ld_row")
            docs = self.snap.whole("ld_doc")[(row >= 0) & dead[np.where(row >= 0, row, 0)]]
        return np.unique(docs) if len(docs) else None

    # -- heads --------------------------------------------------------------------------------
    def dead_rows(self):
        """Bool array of the rows a delta overrides (None when there are none)."""
        import numpy as np

        if not self.dead_ids:
            return None
        if self._dead_rows is None:
            rows, _ = self._rows(sorted(self.dead_ids), alive=False)
            self._dead_rows = np.zeros(self.n, dtype=np.bool_)
            self._dead_rows[rows] = True
        return self._dead_rows

    def count(self) -> int:
        d = self.dead_rows()
        return self.n - (int(d.sum()) if d is not None else 0)

    def _rows(self, ids: Sequence[str], *, alive: bool = True):
        """(rows in the heads arrays, the IDs found) of these IDs."""
        import numpy as np

        if alive and self.dead_ids:
            ids = [i for i in ids if i not in self.dead_ids]
        want = _ids_bytes(list(ids))
        if not len(want) or not self.n:
            return np.zeros(0, np.int64), []
        h_id = self.snap.raw("h_id")
        pos = np.searchsorted(h_id, want)
        pos = np.minimum(pos, self.n - 1)
        got = self.snap.take("h_id", pos)
        hit = got == want
        rows = pos[hit].astype(np.int64)
        return rows, [i for i, h in zip(ids, hit.tolist()) if h]

    def mask(self, filters: Filters):
        """Which heads pass ``filters`` (bool array)."""
        import numpy as np

        got = self._masks.get(filters)
        if got is not None:
            return got
        s, h = self.snap, self.h
        m = self.seen(filters.viewer).copy()
        if not filters.include_tombstoned:
            m &= ~s.whole("h_tomb")
        if filters.types:
            m &= np.isin(s.whole("h_type"), np.array(filters.types, dtype=np.int64))
        if filters.session is not None:
            sess = {v: i for i, v in enumerate(h["sessions"])}.get(filters.session, -2)
            m &= s.whole("h_session") == sess
        for t in dict.fromkeys(filters.tags):
            m &= self.has_any_tag((t,))
        dead = self.dead_rows()
        if dead is not None:
            m &= ~dead
        self._masks[filters] = m
        return m

    def has_any_tag(self, tags: Sequence[str]):
        """Which heads carry at least one of ``tags`` (bool array)."""
        import numpy as np

        s = self.snap
        tcodes = {t: i for i, t in enumerate(self.h["tags"])}
        want = [tcodes[t] for t in tags if t in tcodes]
        has = np.zeros(self.n, dtype=np.bool_)
        if want:
            off, code = s.whole("tag_off"), s.whole("tag_code")
            owner = np.repeat(np.arange(self.n), np.diff(off))
            has[owner[np.isin(code, np.array(want, dtype=np.int32))]] = True
        return has

    def seen(self, viewer: Viewer):
        """Which heads ``viewer`` may see (bool array; a delta's overrides not taken out): its own,
        the public ones, and the scoped ones of a granter that one of its live grants covers.
        SnapshotUnusable for a viewer holding grants when the file does not record which heads are
        scoped (built by a cortexctl before grants): find then answers from DuckDB."""
        import numpy as np

        key = ("seen", viewer)
        got = self._masks.get(key)
        if got is not None:
            return got
        s, h = self.snap, self.h
        codes = {a: i for i, a in enumerate(h["actors"])}
        actor = s.whole("h_actor")
        m = (actor == codes.get(viewer.actor, -2)) | s.whole("h_public")
        if viewer.scopes:
            if "h_scoped" not in h["arrays"]:
                raise SnapshotUnusable("the search snapshot does not record scoped memories (built before grants)")
            scoped = s.whole("h_scoped")
            for granter, types, tags in viewer.scopes:
                g = codes.get(granter)
                if g is None:
                    continue
                c = scoped & (actor == g)
                if types:
                    c &= np.isin(s.whole("h_type"), np.array(types, dtype=np.int64))
                if tags:
                    c &= self.has_any_tag(tags)
                m = m | c
        self._masks[key] = m
        return m

    def passing(self, ids: Sequence[str], filters: Filters) -> dict[str, int]:
        m = self.mask(filters)
        rows, found = self._rows(ids)
        ok = m[rows].tolist()
        cur = self.snap.take("h_cur", rows).tolist()
        return {i: int(c) for i, o, c in zip(found, ok, cur) if o}

    def salience_rows(self, rows, scoring: Scoring) -> list[float]:
        s = self.snap
        now = _us(scoring.now) / 1e6
        cols = [s.take(n, rows).tolist() for n in ("h_recent", "h_importance", "h_access", "h_cit", "h_conf", "h_tomb")]
        return [_salience_exact(r, i, a, c, f, t, now, scoring.half_life, scoring.weights)
                for r, i, a, c, f, t in zip(*cols)]

    def candidates(self, ids: Sequence[str], filters: Filters, scoring: Scoring) -> dict[str, tuple[int, bool, float]]:
        m = self.mask(filters)
        rows, found = self._rows(ids)
        ok = m[rows].tolist()
        cur = self.snap.take("h_cur", rows).tolist()
        sal = self.salience_rows(rows, scoring)
        return {i: (int(c), bool(o), s) for i, c, o, s in zip(found, cur, ok, sal)}

    def top_salience(self, filters: Filters, scoring: Scoring, limit: int) -> list[tuple[float, int, str]]:
        """The ``limit`` best as (exact salience, updated, ID), best first; see SnapshotTx.top_salience."""
        import numpy as np

        rows = np.flatnonzero(self.mask(filters))
        if not len(rows) or limit <= 0:
            return []
        s = self.snap
        w_rec, w_imp, w_acc, w_cit, w_conf = scoring.weights
        now = _us(scoring.now) / 1e6
        recent, imp = s.whole("h_recent")[rows], s.whole("h_importance")[rows].astype(np.float64)
        acc, cit = s.whole("h_access")[rows].astype(np.float64), s.whole("h_cit")[rows].astype(np.float64)
        approx = (w_rec * np.power(0.5, np.maximum(now - recent, 0.0) / scoring.half_life) + w_imp * imp / 10.0
                  + w_acc * acc / (acc + 5.0) + w_cit * cit / (cit + 3.0) + w_conf * s.whole("h_conf")[rows])
        approx[s.whole("h_tomb")[rows]] = 0.0
        if len(rows) > limit:
            cut = np.partition(-approx, limit - 1)[limit - 1] * -1
            keep = approx >= cut - 1e-9 * max(1.0, abs(cut))
            rows = rows[keep]
        exact = self.salience_rows(rows, scoring)
        updated = s.take("h_updated", rows).tolist()
        ids = [b.decode() for b in s.take("h_id", rows).tolist()]
        return sorted(zip(exact, updated, ids), reverse=True)[:limit]

    def result_rows(self, ids: Sequence[str], form: str) -> dict[str, dict]:
        rows, found = self._rows(ids)
        out: dict[str, dict] = {}
        for i, r in zip(found, rows.tolist()):
            lo, hi = (int(x) for x in self.snap.span("row_off", r, r + 2))
            t, cur, tags, frames, imp, vis, actor, upd, tomb, short, medium = json.loads(
                self.snap.span("row_blob", lo, hi).tobytes())
            out[i] = {"id": i, "type": t, "current_version": cur, "tags": tags, "frames": frames, "importance": imp,
                      "visibility": vis, "actor": actor, "updated_at": EPOCH + timedelta(microseconds=upd),
                      "tombstoned_at": None if tomb is None else EPOCH + timedelta(microseconds=tomb),
                      "text": short if form == "short" else medium}
        return out

    def search_data(self, ids: Sequence[str]) -> dict[str, tuple[int, bytes]]:
        rows, found = self._rows(ids)
        out: dict[str, tuple[int, bytes]] = {}
        for i, r in zip(found, rows.tolist()):
            t = int(self.snap.span("d_type", r, r + 1)[0])
            if t < 0:
                continue
            lo, hi = (int(x) for x in self.snap.span("d_off", r, r + 2))
            out[i] = (t, self.snap.span("d_blob", lo, hi).tobytes())
        return out

    # -- postings ---------------------------------------------------------------------------
    def _live_docs(self, docs):
        """Bool array: which of ``docs`` a delta does not override."""
        import numpy as np

        if self.dead_docs is None or not len(docs):
            return np.ones(len(docs), dtype=np.bool_)
        return ~np.isin(docs, self.dead_docs)

    def doc_count(self) -> int:
        return int(self.h["arrays"]["ld_doc"]["shape"][0]) - (len(self.dead_docs) if self.dead_docs is not None else 0)

    def _term_spans(self, terms: Sequence[int]) -> list[tuple[int, int, int]]:
        import numpy as np

        p_term = self.snap.raw("p_term")
        if not len(p_term) or not terms:
            return []
        want = np.asarray(list(terms), dtype=np.int64)
        pos = np.minimum(np.searchsorted(p_term, want), len(p_term) - 1)
        out = []
        for t, p in zip(want.tolist(), pos.tolist()):
            if int(self.snap.span("p_term", p, p + 1)[0]) == t:
                lo, hi = (int(x) for x in self.snap.span("p_off", p, p + 2))
                out.append((t, lo, hi))
        return out

    def postings_of(self, terms: Sequence[int]):
        import numpy as np

        spans = self._term_spans(terms)
        if not spans:
            return {"term": np.zeros(0, np.int64), "doc": np.zeros(0, np.uint64), "tf": np.zeros(0, np.uint16)}
        out = {
            "term": np.concatenate([np.full(hi - lo, t, dtype=np.int64) for t, lo, hi in spans]),
            "doc": np.concatenate([self.snap.span("p_doc", lo, hi) for _, lo, hi in spans]),
            "tf": np.concatenate([self.snap.span("p_tf", lo, hi) for _, lo, hi in spans]),
        }
        if self.dead_docs is not None:
            keep = self._live_docs(out["doc"])
            out = {k: v[keep] for k, v in out.items()}
        return out

    def _doc_pos(self, docs: Sequence[int], name: str):
        import numpy as np

        arr = self.snap.raw(name)
        want = np.asarray([int(d) for d in docs], dtype=np.uint64)
        if self.dead_docs is not None:
            want = want[self._live_docs(want)]
        if not len(arr) or not len(want):
            return want, np.zeros(0, np.int64), np.zeros(0, np.bool_)
        pos = np.minimum(np.searchsorted(arr, want), len(arr) - 1)
        return want, pos, self.snap.take(name, pos) == want

    def doc_ids(self, docs: Sequence[int]) -> dict[int, str]:
        want, pos, hit = self._doc_pos(docs, "ld_doc")
        if not hit.any():
            return {}
        ids = self.snap.take("ld_id", pos[hit]).tolist()
        return {int(d): i.decode() for d, i in zip(want[hit].tolist(), ids)}

    def hidden_docs(self, actor: str | Viewer):
        import numpy as np

        s = self.snap
        row = s.whole("ld_row")
        has = row >= 0
        r = np.where(has, row, 0)
        seen = self.seen(viewer_of(actor))[r] if self.n else np.zeros(len(row), np.bool_)
        docs = s.whole("ld_doc")[has & ~seen]
        return docs[self._live_docs(docs)] if self.dead_docs is not None else docs

    def term_df(self, terms: Sequence[int], hidden) -> dict[int, int]:
        import numpy as np

        out: dict[int, int] = {}
        for t, lo, hi in self._term_spans(terms):
            docs = self.snap.span("p_doc", lo, hi)
            if self.dead_docs is not None:
                docs = docs[self._live_docs(docs)]
            c = int(len(docs) - (np.isin(docs, hidden, kind="table").sum() if len(hidden) and len(docs) else 0))
            if c:
                out[t] = c
        return out

    def doc_terms(self, docs: Sequence[int]) -> dict[int, tuple[dict[int, int], int]]:
        want, pos, hit = self._doc_pos(docs, "ld_doc")
        out: dict[int, tuple[dict[int, int], int]] = {}
        for d, p in zip(want[hit].tolist(), pos[hit].tolist()):
            out[int(d)] = ({}, int(self.snap.span("ld_len", p, p + 1)[0]))
        fw, fpos, fhit = self._doc_pos(list(out), "f_doc")
        for d, p in zip(fw[fhit].tolist(), fpos[fhit].tolist()):
            lo, hi = (int(x) for x in self.snap.span("f_off", p, p + 2))
            out[int(d)][0].update(zip(self.snap.span("f_term", lo, hi).tolist(), self.snap.span("f_tf", lo, hi).tolist()))
        return out

    # -- vectors -------------------------------------------------------------------------------
    def model_code(self, model: str) -> int:
        return {m: i for i, m in enumerate(self.h["models"])}.get(model, -2)

    def covered(self, model: str, max_key: int) -> int:
        """Live and dropped keys of ``model`` up to ``max_key`` that this file holds."""
        c = self.model_code(model)
        live = (self.snap.whole("v_model") == c) & (self.snap.whole("v_key") <= max_key)
        dropped = (self.snap.whole("vd_model") == c) & (self.snap.whole("vd_key") <= max_key)
        return int(live.sum() + dropped.sum())

    def vectors_of_keys(self, keys: Sequence[int], model: str) -> list[tuple[int, str, int]]:
        import numpy as np

        v_key = self.snap.raw("v_key")
        want = np.asarray([int(k) for k in keys], dtype=np.uint64)
        if not len(v_key) or not len(want):
            return []
        pos = np.minimum(np.searchsorted(v_key, want), len(v_key) - 1)
        hit = self.snap.take("v_key", pos) == want
        pos = pos[hit]
        hit_m = self.snap.take("v_model", pos) == self.model_code(model)
        pos = pos[hit_m]
        return [(int(k), i.decode(), int(v)) for k, i, v in zip(
            self.snap.take("v_key", pos).tolist(), self.snap.take("v_id", pos).tolist(),
            self.snap.take("v_ver", pos).tolist()) if i.decode() not in self.dead_ids]

    def vector_keys_for(self, filters: Filters, model: str):
        import numpy as np

        m = self.mask(filters)
        s = self.snap
        row = s.whole("v_row")
        sel = (s.whole("v_model") == self.model_code(model)) & (row >= 0)
        r = np.where(sel, row, 0)
        sel &= m[r] & (s.whole("v_ver") == s.whole("h_cur")[r]) if self.n else sel
        pos = np.flatnonzero(sel)
        return [b.decode() for b in s.take("v_id", pos).tolist()], s.take("v_key", pos)

    def vectors_after(self, model: str, after: int):
        """Positions in the vector arrays of ``model``'s vectors with a key above ``after``."""
        import numpy as np

        v_key = self.snap.raw("v_key")
        start = int(np.searchsorted(v_key, np.uint64(after), side="right"))
        sel = self.snap.span("v_model", start, len(v_key)) == self.model_code(model)
        pos = start + np.flatnonzero(sel)
        if self.dead_ids and len(pos):
            ids = self.snap.take("v_id", pos).tolist()
            pos = pos[[i.decode() not in self.dead_ids for i in ids]]
        return pos


class SnapshotTx(Lanes):
    """The read-only ``Tx`` of ``find``, answered from a current snapshot and its delta (what
    writers changed since the build: those memories are answered from the delta, the rest from
    the snapshot); anything they do not hold is read from DuckDB, opened on first need (``_duck``)."""

    def __init__(self, snap: Snapshot, store, delta: dict | None = None) -> None:
        self.snap, self.store = snap, store
        self._stack: ExitStack | None = None
        self._tx = None
        self.delta = None if delta is None else _MemSnap(delta)
        if self.delta is None:
            self.parts = [_Part(snap)]
            self.top = snap.header  # the stamp checked, and the store-wide numbers
        else:
            self.parts = [_Part(snap, delta["ids"]), _Part(self.delta)]
            self.top = {**self.delta.header, **{k: delta[k] for k in ("token", "counter", "schema_version", "db")}}

    def close(self) -> None:
        if self._stack is not None:
            self._stack.close()
        self.snap.close()
        if self.delta is not None:
            self.delta.close()

    # -- DuckDB for the rest -----------------------------------------------------------------
    def _duck(self):
        if self._tx is None:
            from cortexctl.store.duck import DuckTx

            stack = ExitStack()
            con = stack.enter_context(self.store.read())
            self._stack = stack
            if not _stamp_ok(self.store.path, self.top):
                raise SnapshotUnusable("the store changed during the search")
            self._tx = DuckTx(con, self.store)
        return self._tx

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._duck(), name)

    def _merged(self, method: str, *args) -> dict:
        out: dict = {}
        for p in self.parts:
            out.update(getattr(p, method)(*args))
        return out

    # -- heads --------------------------------------------------------------------------------
    def count_heads(self, filters: Filters | None = None) -> int:
        if filters is None:
            return sum(p.count() for p in self.parts)
        if filters.frames:
            return self._duck().count_heads(filters)
        return sum(int(p.mask(filters).sum()) for p in self.parts)

    def passing(self, ids: Sequence[str], filters: Filters) -> dict[str, int]:
        if filters.frames:
            return self._duck().passing(ids, filters)
        return self._merged("passing", ids, filters)

    def candidates(self, ids: Sequence[str], filters: Filters, scoring: Scoring) -> dict[str, tuple[int, bool, float]]:
        if filters.frames:
            return self._duck().candidates(ids, filters, scoring)
        return self._merged("candidates", ids, filters, scoring)

    def top_salience(self, filters: Filters, scoring: Scoring, limit: int) -> list[tuple[str, float]]:
        """As the database orders them (salience, then later update, then higher ID, all
        descending): an approximate vectorised salience picks the contenders, the exact one ranks them."""
        if filters.frames:
            return self._duck().top_salience(filters, scoring, limit)
        ranked = sorted((x for p in self.parts for x in p.top_salience(filters, scoring, limit)), reverse=True)
        return [(i, sal) for sal, _, i in ranked[:limit]]

    def weights(self, actor: str) -> tuple[float, ...] | None:
        w = self.top["weights"].get(actor)
        return None if w is None else tuple(float(x) for x in w)

    def live_grants(self, subagent: str, now: datetime) -> list[dict]:
        """From the header, as the learned weights (DuckDB for a snapshot built before grants)."""
        got = self.top.get("grants")
        if got is None:
            return self._duck().live_grants(subagent, now)
        at = _us(now)
        out = []
        for id_, granter, sub, types, tags, created, expires in got:
            if sub != subagent or (expires is not None and expires <= at):
                continue
            out.append({"id": id_, "granter": granter, "subagent": sub, "types": list(types), "tags": list(tags),
                        "created_at": EPOCH + timedelta(microseconds=created),
                        "expires_at": None if expires is None else EPOCH + timedelta(microseconds=expires),
                        "revoked_at": None, "revoked_by": None})
        return sorted(out, key=lambda g: g["id"])

    def result_rows(self, ids: Sequence[str], form: str) -> dict[str, dict]:
        if form not in ("short", "medium"):
            raise ValueError(form)
        return self._merged("result_rows", ids, form)

    def search_data(self, ids: Sequence[str]) -> dict[str, tuple[int, bytes]]:
        return self._merged("search_data", ids)

    # -- postings ---------------------------------------------------------------------------
    def doc_count(self) -> int:
        return sum(p.doc_count() for p in self.parts)

    def postings_of(self, terms: Sequence[int]):
        import numpy as np

        got = [p.postings_of(terms) for p in self.parts]
        return got[0] if len(got) == 1 else {k: np.concatenate([g[k] for g in got]) for k in got[0]}

    def doc_ids(self, docs: Sequence[int]) -> dict[int, str]:
        return self._merged("doc_ids", docs)

    def hidden_docs(self, actor: str | Viewer):
        import numpy as np

        got = [p.hidden_docs(actor) for p in self.parts]
        return got[0] if len(got) == 1 else np.concatenate(got)

    def term_df(self, terms: Sequence[int], hidden) -> dict[int, int]:
        out: dict[int, int] = {}
        for p in self.parts:
            for t, c in p.term_df(terms, hidden).items():
                out[t] = out.get(t, 0) + c
        return out

    def doc_terms(self, docs: Sequence[int]) -> dict[int, tuple[dict[int, int], int]]:
        return self._merged("doc_terms", docs)

    # -- vectors -------------------------------------------------------------------------------
    def model_dim(self, model: str) -> int | None:
        return self.top["dims"].get(model)

    def vector_stats(self, model: str) -> tuple[int, int, int | None]:
        live, top, _, _ = self.top["vector_counts"].get(model, (0, 0, 0, 0))
        return int(live), int(top), self.model_dim(model)

    def covered(self, model: str, max_key: int) -> int:
        live, top, dropped, top_dropped = self.top["vector_counts"].get(model, (0, 0, 0, 0))
        if max_key >= max(top, top_dropped):
            return int(live + dropped)
        n = self.parts[0].covered(model, max_key)  # the base's keys; drops since only moved some of them
        if self.delta is not None:  # and the keys given since the build
            n += sum(1 for k, m in self.delta.new_keys if m == model and k <= max_key)
        return n

    def vectors_of_keys(self, keys: Sequence[int], model: str) -> list[tuple[int, str, int]]:
        return [x for p in self.parts for x in p.vectors_of_keys(keys, model)]

    def vector_keys_for(self, filters: Filters, model: str):
        import numpy as np

        if filters.frames:
            return None
        got = [p.vector_keys_for(filters, model) for p in self.parts]
        if len(got) == 1:
            return got[0]
        return got[0][0] + got[1][0], np.concatenate([got[0][1], got[1][1]])

    def vectors_after(self, model: str, after: int, dim: int):
        import numpy as np

        if len(self.parts[0].vectors_after(model, after)):  # the build's own delta: DuckDB has the vectors
            return self._duck().vectors_after(model, after, dim)
        if self.delta is None:
            return [], [], np.zeros((0, dim), dtype=np.float32)
        d = self.parts[1]
        pos = d.vectors_after(model, after)
        if not len(pos):
            return [], [], np.zeros((0, dim), dtype=np.float32)
        off, flat = d.snap.whole("v_voff"), d.snap.whole("v_vec")
        if not (off[pos + 1] - off[pos] == dim).all():
            return self._duck().vectors_after(model, after, dim)
        mat = np.stack([flat[off[p]:off[p] + dim] for p in pos.tolist()])
        return ([b.decode() for b in d.snap.take("v_id", pos).tolist()],
                [int(v) for v in d.snap.take("v_ver", pos).tolist()], np.array(mat, dtype=np.float32))


__all__ = ["SNAPSHOT_NAME", "DELTA_NAME", "GEN_NAME", "SnapshotTx", "build", "open_current", "state", "check_whole",
           "mark_dirty", "mark_clean", "read_gen", "remove", "delta_start", "collect_delta", "write_delta"]
