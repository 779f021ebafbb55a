"""The snapshot's files on disk: the generation file ``cortex.gen`` that stamps every commit, and the
layout of ``cortex.snapshot`` (magic, header length and CRC, a JSON header naming each array's dtype,
shape and offset, the arrays aligned to 64 bytes, one CRC-32 per 16 KiB block), mapped read-only and
checked block by block as it is read, unless its checked stamp names it. The package docstring (``store/snapshot/__init__.py``) says why
the stamps make the files safe to trust."""

from __future__ import annotations

import functools
import json
import mmap
import os
import zlib
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from cortexctl.files import atomic_path, checked_value, identity, open_regular, read_regular, stale_temps
from cortexctl.files import unlink_quietly as _unlink
from cortexctl.memory.forms import RENDERING
from cortexctl.store.interface import CacheUnusable

SNAPSHOT_NAME = "cortex.snapshot"
DELTA_NAME = "cortex.snapdelta"
GEN_NAME = "cortex.gen"
MAGIC = b"CXSNAP01"
FORMAT = 6  # 6: result rows leave out the rendered forms, integers stored narrow, a doc's terms by their place;
#            5: result rows hold only what no column does; 4: valid times and supersede links; 3: arrays
#            named for what they hold, visibility as a code; an older file is stale (rebuilt)
BLOCK = 1 << 14  # bytes per checksummed block
ALIGN = 64
WRITE_PIECE = 1 << 22  # items of an array converted to its stored type at a time as the file is written
EPOCH = datetime(1970, 1, 1)
BUILD_BATCH = 10_000  # rows read at a time while building
# Integer arrays a writer stores in the narrowest type of their kind that holds every value of the
# file (``narrowed``): doc numbers, row numbers, offsets, counts and codes are mostly far below 2^63. Each
# with the type ``span`` and ``take`` give (``whole`` and ``raw`` give the stored one) and a merge
# works in.
WIDE = {"head_access_count": "<u8", "head_citations": "<u8", "head_tags_start": "<i8", "result_start": "<i8",
        "data_start": "<i8", "doc_number": "<u8", "doc_head_row": "<i8", "head_doc": "<i8", "by_term_start": "<i8",
        "by_term_doc": "<u8", "by_term_tf": "<u2", "by_doc_doc": "<u8", "by_doc_start": "<i8", "by_doc_tf": "<u2",
        "by_doc_term_at": "<i8",
        "vector_key": "<u8", "vector_head_row": "<i8", "head_actor_code": "<i4", "head_session_code": "<i4",
        "tag_codes": "<i4", "doc_length": "<u4", "data_type": "<i2", "head_current_version": "<u4",
        "vector_version": "<u4", "vector_model_code": "<i4", "dropped_key": "<u8", "dropped_model_code": "<i4",
        "salient_order": "<i8", "salient_start": "<i8"}
# An entry's memory ID is its head row's: a writer stores these ID arrays empty when every entry names
# its head (``_stored``), and ``Snapshot`` reads them through the rows (the array -> its head rows).
ENTRY_IDS = {"doc_id": "doc_head_row", "vector_id": "vector_head_row"}
# A head's recency is its change time unless it was used since: stored empty when it is that for
# every head, and read as the change time in seconds (what DuckDB's ``epoch`` gives).
SECONDS_OF = {"head_recent_s": "head_updated_us"}
THROUGH = {**ENTRY_IDS, **SECONDS_OF}  # array stored empty -> the array it is read through
# The salience lane's summary of the heads (``salient_groups``), derived from their columns as the
# file is written (a merge leaves it out of what it reads and writes it anew): the heads grouped by
# every column salience reads but the recency, most recent first within a group. Kept where the
# groups are few enough to help: SALIENT_FROM heads or more, SALIENT_GROUP_MIN of them a group on average.
SALIENT = ("salient_order", "salient_start")
SALIENT_KEYS = ("head_forgotten", "head_importance", "head_access_count", "head_citations", "head_confidence")
SALIENT_FROM, SALIENT_GROUP_MIN = 4096, 64
SAMPLED_BLOCKS = 32  # blocks checked on opening a file its checked stamp names (the index file checks as many)


class SnapshotUnusable(CacheUnusable):
    """The search snapshot or its delta turned out damaged, or the store moved on while it
    answered: find starts over on DuckDB (``Storage.reading``)."""


# -- the generation file ---------------------------------------------------------------------
def read_gen(store_path: Path) -> tuple[str, int, bool] | None:
    """(token, counter, clean) of the generation file, or None when missing or unreadable."""
    try:
        parts = read_regular(store_path / GEN_NAME, 200).decode("ascii").split()
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
    try:
        fd = open_regular(store_path / GEN_NAME, os.O_RDWR | os.O_CREAT)
    except OSError:
        # not a regular file (a symlink, FIFO, device): written beside and renamed over it, never
        # through it; a directory in its place is said as damage, naming the file
        try:
            with atomic_path(store_path / GEN_NAME, sync=sync) as tmp:
                with open(tmp, "wb") as fh:
                    fh.write(data)
        except IsADirectoryError:
            from cortexctl.errors import IntegrityError

            raise IntegrityError(f"generation file {store_path / GEN_NAME} is not a regular file (remove it)") from None
        return
    try:
        os.pwrite(fd, data, 0)
        if os.fstat(fd).st_size != len(data):
            os.ftruncate(fd, len(data))
        if sync:
            os.fdatasync(fd)
    finally:
        os.close(fd)


def mark_dirty(store_path: Path, *, sync: bool | None = None) -> tuple[str, int]:
    """Before a COMMIT: the next generation, marked dirty. Returns (token, counter).

    Synced to disk (``fdatasync``) when there is a snapshot file to protect (``sync`` None: look;
    the caller holds the writer lock, so none appears meanwhile). A store without one pays no
    sync: the mark is still written, so the counter moves on and a process killed at any point
    leaves it dirty; only a power loss can lose it, and with no snapshot there is nothing a lost
    mark could make a reader trust (a build starts from the database as it is then, stamped with
    the generation it finds, made clean and synced first if it was dirty or unreadable)."""
    if sync is None:
        sync = (store_path / SNAPSHOT_NAME).exists()
    gen = read_gen(store_path)
    token, counter = (gen[0], gen[1] + 1) if gen else (os.urandom(16).hex(), 1)
    _write_gen(store_path, token, counter, "dirty", sync=sync)
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

    packed = True  # its data deflated (``pack_data``); a delta held in memory keeps it as stored

    def __init__(self, path: Path, header: dict, mm: mmap.mmap, data_start: int, crcs) -> None:
        self.path, self.header, self._mm, self._start = path, header, mm, data_start
        import numpy as np

        self._crcs = crcs  # one CRC-32 per BLOCK of the data region
        self._ok = np.zeros(len(crcs) + 1, dtype=np.bool_)  # blocks checked so far
        self._arrays: dict[str, Any] = {}
        self._seconds: dict[str, Any] = {}  # the recency read through the change times (``SECONDS_OF``)
        self.stat: os.stat_result | None = None  # the file's when it was mapped (``_map``)
        self.kept = False  # held by a resident process's cache (``open_current``): close() leaves it open

    def close(self) -> None:
        if self.kept:
            return
        self._arrays.clear()
        self._seconds.clear()
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
        import numpy as np

        ok, crcs, start = self._ok, self._crcs, self._start
        b = np.asarray(blocks, dtype=np.int64)
        b = b[~ok[np.minimum(b, len(ok) - 1)]]  # the last flag is never set: a block past the end stays
        if not len(b):
            return
        if int(b.max()) >= len(crcs):
            raise SnapshotUnusable(f"search snapshot {SNAPSHOT_NAME} is damaged (block {int(b.max())})")
        with memoryview(self._mm) as mv:  # blocks read in place, not copied out
            got = np.fromiter((zlib.crc32(mv[start + x * BLOCK : start + (x + 1) * BLOCK]) for x in b.tolist()),
                              dtype=np.uint32, count=len(b))
        bad = np.flatnonzero(got != crcs[b])
        if len(bad):
            raise SnapshotUnusable(f"search snapshot {SNAPSHOT_NAME} is damaged (block {int(b[bad[0]])})")
        ok[b] = True

    def raw(self, name: str):
        """The whole array, unchecked (callers check what they read)."""
        import numpy as np

        a = self._arrays.get(name)
        if a is None:
            spec = self.header["arrays"][name]
            try:
                if "fill" in spec:  # one value throughout, held by the header (``_fill``)
                    a = np.full(spec["shape"], spec["fill"], dtype=np.dtype(spec["dtype"]))
                else:
                    count = 1
                    for d in spec["shape"]:
                        count *= d
                    a = np.frombuffer(self._mm, dtype=np.dtype(spec["dtype"]), count=count,
                                      offset=self._start + spec["offset"]).reshape(spec["shape"])
            except (ValueError, TypeError, OverflowError):  # a header naming what its file cannot hold
                raise SnapshotUnusable(f"search snapshot {SNAPSHOT_NAME}: array {name} is not as its header"
                                       " says") from None
            self._arrays[name] = a
        return a

    def _through(self, name: str) -> str | None:
        """The array ``name`` is read through when stored empty (``THROUGH``), else None."""
        src = THROUGH.get(name)
        arrays = self.header["arrays"]
        return src if src is not None and not arrays[name]["shape"][0] and arrays[src]["shape"][0] else None

    def _read_through(self, name: str, values, whole: bool = False):
        """Array ``name``'s values from its source's ``values``: IDs of head rows, or seconds of µs."""
        if name in SECONDS_OF:
            return values / 1e6
        return self.whole("head_id")[values] if whole else self.take("head_id", values)

    def whole(self, name: str):
        """The array, every block of it checked."""
        src = self._through(name)
        if src is not None:
            got = self._seconds.get(name)
            if got is None:
                got = self._read_through(name, self.whole(src), whole=True)
                if name in SECONDS_OF:
                    self._seconds[name] = got
            return got
        spec = self.header["arrays"][name]
        self._check(spec["offset"], spec["offset"] + spec["nbytes"])
        return self.raw(name)

    def span(self, name: str, lo: int, hi: int):
        """Elements [lo, hi) of a 1-d array, their blocks checked."""
        src = self._through(name)
        if src is not None:
            return self._read_through(name, self.span(src, lo, hi))
        if "fill" in self.header["arrays"][name]:
            return _widened(name, self.raw(name)[lo:hi])
        a = self.raw(name)
        item = a.dtype.itemsize
        off = self.header["arrays"][name]["offset"]
        self._check(off + lo * item, off + hi * item)
        return _widened(name, a[lo:hi])

    def take(self, name: str, rows):
        """Elements at ``rows`` (numpy int array) of a 1-d array, their blocks checked."""
        import numpy as np

        src = self._through(name)
        if src is not None:
            return self._read_through(name, self.take(src, rows))
        if "fill" in self.header["arrays"][name]:
            return _widened(name, self.raw(name)[rows])
        a = self.raw(name)
        if len(rows):
            item = a.dtype.itemsize
            first = (self.header["arrays"][name]["offset"] + rows.astype(np.int64) * item) // BLOCK
            last = first if BLOCK % item == 0 else \
                (self.header["arrays"][name]["offset"] + rows.astype(np.int64) * item + item - 1) // BLOCK
            blocks = np.concatenate((first, last)) if last is not first else first
            need = np.sort(blocks[~self._ok[np.minimum(blocks, len(self._ok) - 1)]])
            if len(need):  # each block once (not np.unique: its first plain call imports numpy.ma, 7 ms)
                self._check_blocks(need[np.r_[True, need[1:] != need[:-1]]])
        return _widened(name, a[rows])


def _stored(arrays: dict) -> dict:
    """The arrays as a writer stores them: an ID array ``ENTRY_IDS`` names left empty when each of
    its entries names a head whose ID it is, and the recency ``SECONDS_OF`` names when it is every
    head's change time."""
    out = {k: v for k, v in arrays.items() if k not in SALIENT}
    got = salient_groups(out)
    if got is not None:
        out["salient_order"], out["salient_start"] = got
    for name, rows in ENTRY_IDS.items():
        ids, at = out.get(name), out.get(rows)
        if ids is not None and at is not None and len(ids) and bool((at >= 0).all()) \
                and bool((out["head_id"][at] == ids).all()):
            out[name] = ids[:0]
    for name, src in SECONDS_OF.items():
        got, at = out.get(name), out.get(src)
        if got is not None and at is not None and len(got) and bool((got == at / 1e6).all()):
            out[name] = got[:0]
    return out


def salient_groups(arrays: dict):
    """(order, starts) of the heads for the salience lane (``SALIENT``), or None where it would not
    help: ``order`` holds the head rows grouped by ``SALIENT_KEYS`` (rows whose salience differs by
    their recency alone), each group most recent first (equal recency: in row order), and group g is
    ``order[starts[g]:starts[g + 1]]``. Within a group a salience whose recency only falls with age
    falls along the order, so the best of a group are at its start (``query._Part``'s
    ``_contenders``)."""
    import numpy as np

    if any(arrays.get(k) is None for k in (*SALIENT_KEYS, "head_recent_s")):
        return None
    n = len(arrays["head_recent_s"])
    keys = [arrays[k] for k in SALIENT_KEYS]
    if n < SALIENT_FROM or any(len(k) != n for k in keys):
        return None
    order = np.lexsort((-arrays["head_recent_s"], *reversed(keys)))  # the last key sorts first
    change = np.zeros(n - 1, dtype=np.bool_)
    for k in keys:
        v = k[order]
        change |= v[1:] != v[:-1]
    starts = np.flatnonzero(change) + 1
    if (len(starts) + 1) * SALIENT_GROUP_MIN > n:
        return None
    return order.astype(np.int64), np.concatenate(([0], starts, [n])).astype(np.int64)


def one_doc_a_head(arrays: dict) -> bool:
    """Every doc with a head row is that head's only doc, so ``head_doc`` names each of them (as in
    every store but a damaged one, where a memory holds two docs): written in the header, for
    ``query._Part``'s hidden docs."""
    import numpy as np

    rows, docs = arrays.get("doc_head_row"), arrays.get("head_doc")
    return rows is not None and docs is not None and \
        int(np.count_nonzero(rows >= 0)) == int(np.count_nonzero(docs >= 0))


def _fill(a) -> int | bool | None:
    """The one value of an integer or boolean array that holds nothing else (the header then holds it
    instead of the file: no valid times set, no use counted, one model), else None."""
    if a.ndim != 1 or len(a) < 2 or a.dtype.kind not in "iub" or not bool((a == a[0]).all()):
        return None
    return a[0].item()


def _widened(name: str, a):
    """``a`` (part of array ``name``) in the type ``WIDE`` gives it."""
    wide = WIDE.get(name)
    return a if wide is None else a.astype(wide, copy=False)


def narrowed(name: str, a):
    """Array ``name`` as a writer stores it (``stored_dtype``)."""
    return a.astype(stored_dtype(name, a), copy=False)


def stored_dtype(name: str, a):
    """The type array ``name`` is stored in: one ``WIDE`` names in the narrowest integer type of its
    kind that holds its values; any other in its own."""
    import numpy as np

    wide = WIDE.get(name)
    if wide is None or not len(a):
        return a.dtype
    lo, hi = int(a.min()), int(a.max())
    for dtype in (("<i1", "<i2", "<i4") if np.dtype(wide).kind == "i" else ("<u1", "<u2", "<u4")):
        info = np.iinfo(dtype)
        if info.min <= lo and hi <= info.max:
            return np.dtype(dtype)
    return np.dtype(wide)


def spans(lo, hi):
    """The positions lo[i] .. hi[i]-1 of every span, in order."""
    import numpy as np

    lens = (hi - lo).astype(np.int64)
    total = int(lens.sum())
    if not total:
        return np.zeros(0, np.int64)
    ends = np.cumsum(lens)
    return np.repeat(lo.astype(np.int64) - (ends - lens), lens) + np.arange(total)


def seek(a, want, side: str = "left"):
    """``np.searchsorted(a, want, side)`` for a sorted integer array ``a`` of any stored type,
    without converting ``a`` (a value beyond its type's range sorts past either end)."""
    import numpy as np

    want = np.asarray(want)
    if want.dtype == a.dtype or not len(a):
        return np.searchsorted(a, want.astype(a.dtype, copy=False) if len(a) else want, side=side)
    info = np.iinfo(a.dtype)
    pos = np.searchsorted(a, np.clip(want, max(info.min, 0) if want.dtype.kind == "u" else info.min,
                                     info.max).astype(a.dtype), side=side)
    return np.where(want > info.max, len(a), np.where(want < info.min, 0, pos))


def _header_of(path: Path) -> tuple[dict, int] | None:
    """(header, data start) when the file's magic, header CRC, format and length are right."""
    got = _raw_header(path)
    if got is None:
        return None
    header, start, size = got
    try:
        if not _this_format(header) or header.get("block") != BLOCK \
                or size != start + int(header["data_bytes"]):
            return None
    except (ValueError, KeyError, TypeError):
        return None
    return header, start


def _other_format(path: Path) -> bool:
    """A sound header of another format (a snapshot written by another version of cortexctl): out of
    date, not damaged."""
    got = _raw_header(path)
    return got is not None and not _this_format(got[0])


def _this_format(header: dict) -> bool:
    """The header is of this version's format, its result rows leaving out forms this version renders
    and its data deflated against this version's dictionary."""
    return header.get("format") == FORMAT and header.get("forms") == RENDERING \
        and header.get("data_dictionary") == data_dictionary()[1]


# -- the current versions' data, deflated --------------------------------------------------------
DATA_WBITS = 10  # a 1 KiB window: the dictionary and a blob of a few hundred bytes


@functools.cache
def data_dictionary() -> tuple[bytes, int]:
    """(dictionary, its CRC-32) the snapshot's data blobs are deflated against: every memory type's
    field names and closed values as CBOR spells them, which a blob of a hundred-odd bytes would
    otherwise spell out (its CRC is in the header: a file deflated against another is rebuilt)."""
    from cortexctl.memory import codec, schema
    from cortexctl.memory.types import TYPES

    words: dict[bytes, None] = {codec.encode("schema_version"): None}
    for t in TYPES:
        for name in schema.field_names(t):
            words[codec.encode(name)] = None
        for values in schema.enum_fields(t).values():
            words.update((codec.encode(v), None) for v in values)
    raw = b"".join(words)[-(1 << DATA_WBITS) // 2:]
    return raw, zlib.crc32(raw)


@functools.cache
def _deflater():
    return zlib.compressobj(9, zlib.DEFLATED, -DATA_WBITS, 2, zlib.Z_DEFAULT_STRATEGY, data_dictionary()[0])


def pack_data(data: bytes) -> bytes:
    """A version's data as the snapshot holds it (raw deflate against ``data_dictionary``)."""
    if not data:
        return b""
    d = _deflater().copy()
    return d.compress(data) + d.flush()


def unpack_data(blob: bytes) -> bytes:
    """``pack_data``'s bytes back; SnapshotUnusable when they do not inflate whole."""
    if not blob:
        return b""
    d = zlib.decompressobj(-DATA_WBITS, data_dictionary()[0])
    try:
        out = d.decompress(blob)
    except zlib.error:
        out = None
    if out is None or not d.eof or d.unused_data:
        raise SnapshotUnusable(f"search snapshot {SNAPSHOT_NAME}: a data blob does not inflate")
    return out


def _raw_header(path: Path) -> tuple[dict, int, int] | None:
    """(header, data start, file size) when the file's magic and header CRC are right."""
    try:
        with os.fdopen(open_regular(path), "rb") as fh:
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


def _map(path: Path, header: dict, start: int, cache: dict | None = None, *,
         use_stamp: bool = True) -> Snapshot | None:
    """The file mapped, for the header read from it. With ``cache`` (a resident process's), the
    mapping made last for this path is given again while the file is the same one (``files.identity``
    and header CRC): a snapshot file is only ever replaced whole (written beside and renamed), so a
    kept mapping keeps the blocks it has checked. A file its checked stamp names
    (``files.stamp_checked``: written by the writer, which read every block back to make its
    CRCs, or by a ``healthcheck`` that read it whole) has ``SAMPLED_BLOCKS`` blocks spread over it
    checked now and the rest taken as sound (None when a sampled block fails: find reads DuckDB);
    ``use_stamp`` False: every block is checked as it is touched."""
    import numpy as np

    key = None
    try:
        fd = open_regular(path)
        try:
            st = os.fstat(fd)
            if cache is not None:
                key = (*identity(st), header["_crc"])  # a write in place changes the change time
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
    snap.stat = st
    if use_stamp and checked_value(path, st) == header["_crc"]:
        # checked whole since the file last changed: a few blocks spread over it are checked still (a
        # block damaged below the file system), the rest taken as sound (the last flag stays: past the end)
        try:
            snap._check_blocks(np.linspace(0, len(crcs) - 1, min(len(crcs), SAMPLED_BLOCKS)).astype(np.int64))
        except SnapshotUnusable:
            mm.close()  # find reads DuckDB; verify and healthcheck read every block and name the damage
            return None
        snap._ok[:-1] = True
    if cache is not None:
        snap.kept = True
        cache[str(path)] = (key, snap)
    return snap



def _us(t: datetime | None) -> int | None:
    return None if t is None else (t - EPOCH) // timedelta(microseconds=1)


def write(path: Path, arrays: dict, extras: dict, stamp: dict) -> None:
    """Write the snapshot file atomically (temp file, fsync, rename, fsync of the directory), its
    checked stamp beside it (the writer read every block back to make its CRCs)."""
    from cortexctl.files import atomic_path, stamp_installed

    with atomic_path(path) as tmp:
        sound = _write_file(Path(tmp), arrays, extras, stamp)
        saved = os.stat(tmp)
    stamp_installed(path, saved, sound)


def write_beside(tmp: Path, arrays: dict, extras: dict, stamp: dict) -> tuple[list[int], int]:
    """Write a snapshot file to ``tmp`` (fsynced, 0600), to be put in place later with ``install``
    (a fold made without the writer lock puts it in place once it holds the lock). Returns what
    ``install`` is given: the file's identity as written and its header's CRC."""
    from cortexctl.files import fsync_path

    sound = _write_file(tmp, arrays, extras, stamp)
    fsync_path(tmp)
    os.chmod(tmp, 0o600)
    return identity(os.stat(tmp)), sound


def install(tmp: Path, store_path: Path, written: tuple[list[int], int]) -> None:
    """Rename a file ``write_beside`` wrote over the store's snapshot (the directory fsynced). Its
    checked stamp goes beside it when the file is still as written (``written``: its identity then
    and its header's CRC; its writer read every block back to make the CRCs): a file written to
    since is checked block by block as it is read."""
    from cortexctl.files import fsync_path, move_in, stamp_installed

    saved = os.stat(tmp)
    move_in(tmp, store_path / SNAPSHOT_NAME)  # a copy across file systems is another inode: not stamped
    fsync_path(store_path)
    if identity(saved) == written[0]:
        stamp_installed(store_path / SNAPSHOT_NAME, saved, written[1])


def _write_file(tmp: Path, arrays: dict, extras: dict, stamp: dict) -> int:
    """Write the file; its header's CRC (which covers every block's)."""
    import numpy as np

    specs: dict = {}
    off = 0
    parts: list = []  # (padding before, array, its stored type): converted piece by piece as written
    for name, arr in _stored(arrays).items():
        dtype = stored_dtype(name, arr)
        fill = _fill(arr)
        if fill is not None:
            specs[name] = {"dtype": dtype.str, "shape": list(arr.shape), "offset": off, "nbytes": 0, "fill": fill}
            continue
        pad = -off % ALIGN
        off += pad
        nbytes = arr.size * dtype.itemsize
        specs[name] = {"dtype": dtype.str, "shape": list(arr.shape), "offset": off, "nbytes": nbytes}
        parts.append((pad, arr, dtype))
        off += nbytes
    data_bytes = off
    crcs = np.zeros(-(-data_bytes // BLOCK), dtype="<u4")
    header = {"format": FORMAT, "forms": RENDERING, "data_dictionary": data_dictionary()[1], "block": BLOCK,
              **stamp, **extras, "one_doc_a_head": one_doc_a_head(arrays), "arrays": specs, "data_bytes": data_bytes}
    with open(tmp, "wb") as fh:
        # the data first, after room for the header, then the header with the block CRCs
        probe = json.dumps({**header, "crcs": "00000000" * len(crcs)}, separators=(",", ":")).encode()
        start = -(-(24 + len(probe)) // ALIGN) * ALIGN
        fh.seek(start)
        for pad, arr, dtype in parts:
            fh.write(b"\0" * pad)
            flat = arr.reshape(-1) if arr.ndim != 1 else arr
            for at in range(0, len(flat), WRITE_PIECE):
                piece = np.ascontiguousarray(flat[at : at + WRITE_PIECE].astype(dtype, copy=False))
                fh.write(memoryview(piece).cast("B"))
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
    return zlib.crc32(body)



def _clear_temps(store_path: Path) -> None:
    """Temp files of a builder or writer killed midway (the caller holds the writer lock)."""
    for name in (SNAPSHOT_NAME, DELTA_NAME):
        for left in stale_temps(store_path / name):
            _unlink(left)


