"""The HNSW index file: build, save atomically, fingerprint, open memory-mapped, search.

The only module that imports usearch. The file is a cache of the vectors kept
in DuckDB and is trusted only when it matches the record the store keeps of
it (``Fingerprint``): its size, a CRC-32 over sampled blocks and a CRC-32 of
the whole file, plus the dimension and count usearch reads from its header (not
its modification time, so that a byte-identical copy of a store, ``cp -r`` or a
restore, is trusted). Anything else (missing, truncated, rewritten, flipped
bytes anywhere, another model) means rebuild. usearch has no checksum of its
own, and a damaged file can load and then crash on search (a segfault, "Out of
memory!"), so this check comes before any load.

Reading the whole file on every cold start would cost a large store more than
the rest of ``find``, so the whole-file CRC is checked once per file: a
**checked stamp** ``<index>.checked`` beside it records the identity of the
file last read whole and found sound (device, inode, size, modification and
change times, and the CRC it matched). ``install`` writes it for the file
it puts in place when that file is still as ``save_beside`` left it, and the
first reader that verifies a file whole (a copy, a restore) writes it too.
A reader whose file has that very identity checks only the
sampled blocks; any other reads the whole file once. The change time cannot be
set from user space, so any write to the file after it was checked (a byte
flipped in place, even with its modification time put back) makes the next
reader read it whole. ``verify`` always reads the whole file.

usearch's own ``save`` overwrites in place, which crashes a reader that has the
file memory-mapped (SIGBUS). ``save_beside`` writes a file in the same
directory (or a scratch one) and fsyncs it; ``install`` renames it over the old one and fsyncs the
directory: a reader keeps its old mapping, the next one opens the new file. (The store puts a
file and its record in place together: ``store/vector_index.install``.)

An exact search over many candidates reads an f16 file's vectors from its own bytes
(``slot_rows``: usearch hands vectors by key one call each) after the same checks, and only when
the layout accounts for every byte of the file.

A find opens the file as a ``View`` through usearch's compiled module alone (``_compiled``), not
through the package: importing ``usearch`` also imports urllib.request and ``usearch.index``
imports tqdm, which no search uses (tens of milliseconds of every cold ``find``; bench/README.md).
Building, adding and saving keep usearch's own ``Index``.
"""

from __future__ import annotations

import os
import sys
import threading
import zlib
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from cortexctl.files import (CHECKED_SUFFIX, checked_path, checked_value, identity, open_regular, stamp_checked,
                             stamp_installed)

METRIC = "cos"
# usearch defaults to bf16, which loses recall. f16 keeps recall@10 at 100k at 0.992 (f32: 0.9965;
# bench/hnsw_params.py, similarities recomputed from the f32 vectors), builds about 1.5x faster and
# holds about half the memory (1.5 KB a vector against 2.9 KB), which bounds an import's peak. An
# index file keeps the dtype it was built with; a rebuild makes it f16.
DTYPE = "f16"
# The graph a build makes: connectivity is fixed in the file; expansion_add is not stored in it and
# is set on every open. Up to DENSE_AT vectors the graph is sparse and quick to build; a graph built
# for more is denser (``build_settings``), since at 1M the sparse one reaches recall@10 0.9645 and no
# wider search lifts it to 0.99 (bench/README.md, hnsw_params.py).
CONNECTIVITY = 16
EXPANSION_ADD = 64
DENSE_AT = 200_000  # 100k: recall@10 0.992-0.996 sparse; 500k: 0.977 (bench/README.md)
# past this a sparse graph is built with the dense graph's expansion_add: at a million vectors in files
# of about 200,000 (vector_index.PART_MAX), recall@10 0.9990 against 0.9935 (a class's files merged:
# 0.9995 against 0.9890), the build 1.7 times the CPU, the same search time (bench/README.md)
CAREFUL_AT = 100_000
DENSE_CONNECTIVITY = 32
DENSE_EXPANSION_ADD = 128
EXPANSION_SEARCH = 512
WIDE_AT = 500_000  # a sparse graph holding more is searched at 1024
# A file of at most this many vectors is searched by comparing the query with each of them, not by a
# walk of its graph: the answer is exact, for less than a millisecond more. On memories of a few
# repeated words (the built-in embedder) a walk at 512 misses some of the nearest even in a small
# graph: recall@10 0.982 at 5,000 vectors and 0.966 at 16,384; comparing all takes 0.27 ms a query
# at 5,000 (the walk 0.22) and 0.96 ms at 16,384 (the walk 0.47; bench/scan_bench.py).
SCAN_MAX = 16_384


def build_settings(size: int) -> tuple[int, int]:
    """(connectivity, expansion_add) of a graph built to hold ``size`` vectors."""
    if size > DENSE_AT:
        return DENSE_CONNECTIVITY, DENSE_EXPANSION_ADD
    return CONNECTIVITY, EXPANSION_ADD if size <= CAREFUL_AT else DENSE_EXPANSION_ADD


def sparser_than_wanted(connectivity: int, size: int) -> bool:
    """True when a graph of ``connectivity`` holds more vectors than that setting is built for:
    one that grew past DENSE_AT fold by fold (a fold keeps the file's graph); a rebuild makes it
    denser."""
    return connectivity < build_settings(size)[0]


def expansion_for(size: int, connectivity: int | None = None) -> int:
    """Search expansion for an index of ``size`` vectors whose graph has ``connectivity`` (None: the
    one a build for that size makes). Measured (bench/hnsw_params.py): connectivity 16,
    expansion_add 64 at 100k, recall@10 0.9905 at 256, 0.9955 at 512 and 1024 (2.6, 3.7 and 6.2
    ms a search on a loaded machine); at 1M 0.9525 / 0.9630 / 0.9710 at 256 / 512 / 1024 (1.6,
    2.1, 4.4 ms), so a sparse graph that grew that big is searched wider; the dense graph at 1M
    0.9925 / 0.9950 / 0.9955 (2.8, 3.4, 6.8 ms): 512 is enough."""
    if connectivity is None:
        connectivity = build_settings(size)[0]
    return EXPANSION_SEARCH if size <= WIDE_AT or connectivity >= DENSE_CONNECTIVITY else 1024
SAMPLE_BLOCK = 4096
SAMPLES = 32
STAMP_SUFFIX = CHECKED_SUFFIX
DAMAGED = "changed or damaged"  # ``check``'s answers when the file is not the one expected
NEWER = "newer than its record"


@dataclass(frozen=True)
class Fingerprint:
    """What the store records about the index file it last saved (``whole``: the CRC-32 of every
    byte; 0 when unknown, which trusts nothing)."""

    size: int
    mtime_ns: int
    crc: int
    count: int
    dim: int
    whole: int = 0
    # the file's identity (``files.identity``) as ``save_beside`` left it: ``install`` stamps the file
    # only when it is still so. Not recorded, not compared.
    written: tuple | None = field(default=None, compare=False, repr=False)

    def to_json(self) -> dict:
        doc = asdict(self)
        del doc["written"]
        return doc

    @classmethod
    def from_json(cls, doc: dict) -> "Fingerprint":
        return cls(**{k: int(doc[k]) for k in ("size", "mtime_ns", "crc", "count", "dim")},
                   whole=int(doc.get("whole", 0)))


def _whole_crc(fd: int) -> int:
    crc = 0
    with os.fdopen(os.dup(fd), "rb") as fh:
        while chunk := fh.read(1 << 20):
            crc = zlib.crc32(chunk, crc)
    return crc


def _sampled_crc(fd: int, size: int) -> int:
    crc = 0
    offsets = {0, max(0, size - SAMPLE_BLOCK)}
    if size > SAMPLE_BLOCK:
        step = size // SAMPLES
        offsets.update(i * step for i in range(1, SAMPLES))
    for off in sorted(offsets):
        crc = zlib.crc32(os.pread(fd, SAMPLE_BLOCK, off), crc)
    return crc


# -- the checked stamp (module docstring; ``files.stamp_checked``) ---------------------------------
def stamp_path(path: Path) -> Path:
    return checked_path(path)


def whole_ok(path: Path, expected: Fingerprint) -> bool:
    """True when every byte of the file is what was saved: read whole now, whatever the stamp
    says (``verify``); a sound file is stamped."""
    return check(path, expected, use_stamp=False) is None


def check(path: Path, expected: Fingerprint, *, use_stamp: bool = True) -> str | None:
    """None when the file is the one ``expected`` describes (the module docstring says how that is
    known); else why not: ``NEWER`` when it is a file saved since (its stamp, written by the writer
    that saved it, names it: the record follows), else ``DAMAGED``."""
    if not expected.whole:
        return DAMAGED
    try:
        fd = open_regular(path)
    except OSError:
        return DAMAGED
    try:
        st = os.fstat(fd)
        stamped = checked_value(path, st)
        if st.st_size != expected.size or _sampled_crc(fd, st.st_size) != expected.crc:
            return NEWER if stamped is not None and stamped != expected.whole else DAMAGED
        if use_stamp and stamped == expected.whole:
            return None
        if _whole_crc(fd) != expected.whole:
            return DAMAGED
        if identity(os.fstat(fd)) == identity(st):  # not written to while it was read
            stamp_checked(path, st, expected.whole)
        return None
    except OSError:
        return DAMAGED
    finally:
        os.close(fd)


def new(dim: int, size: int = 0):
    """An empty index whose graph is built for ``size`` vectors (``build_settings``)."""
    from usearch.index import Index

    connectivity, expansion_add = build_settings(size)
    return Index(
        ndim=dim, metric=METRIC, dtype=DTYPE, connectivity=connectivity,
        expansion_add=expansion_add, expansion_search=expansion_for(size),
    )


def connectivity(index) -> int:
    return int(index.connectivity)


def add(index, keys, vectors, progress=None) -> None:
    import numpy as np

    if len(keys):
        index.add(np.asarray(keys, dtype=np.uint64), vectors, threads=os.cpu_count() or 1,
                  progress=progress)


def save_beside(index, tmp: Path) -> Fingerprint:
    """Write ``index`` to ``tmp`` (fsynced, 0600), every vector in it reachable by a search (see
    ``link_cut_off``), to be put in place with ``install``; its
    fingerprint, the whole-file CRC included (taken before the rename, so that a reader meets the new
    file unstamped only for the moment the stamp takes). A fold builds without the writer lock and
    installs once it holds it."""
    from cortexctl.files import fsync_path

    fp, _saved = _save(index, tmp)
    fsync_path(tmp)
    os.chmod(tmp, 0o600)
    return replace(fp, written=tuple(identity(os.stat(tmp))))


# A graph can leave a vector no walk from its entry reaches, so that no search finds it, not even
# for its own vector: usearch gives a removed vector's node to the next vector added, with that
# node's links made anew, and a vector linked to only from there (its near twin, say) is cut off;
# a build's pruning of links can cut a vector off too. Measured: removing one vector of a 500-vector
# graph of near twins and adding four cut 13 off; a build of 200,000 random vectors cut off 5.
# ``_save`` links each such vector from a node a search reaches (``link_cut_off``).


def install(tmp: Path, path: Path, fp: Fingerprint) -> None:
    """Rename a file written by ``save_beside`` over ``path`` (the directory fsynced) and stamp it
    checked when it is still as it was saved (a fold saves without the writer lock and installs
    later): a file written to since is read whole by its first reader."""
    from cortexctl.files import fsync_path, move_in

    saved = os.stat(tmp)
    move_in(tmp, path)  # a copy across file systems is another inode: left unstamped below
    fsync_path(Path(path).parent)
    if fp.written is not None and tuple(identity(saved)) == fp.written:
        stamp_installed(path, saved, fp.whole)


def _save(index, tmp: Path) -> tuple[Fingerprint, os.stat_result]:
    index.save(str(tmp))
    try:
        link_cut_off(tmp, index)
    except (OSError, ValueError):  # a file system that maps no file, say: saved as usearch left it
        pass
    fd = os.open(tmp, os.O_RDONLY)
    try:
        saved = os.fstat(fd)
        fp = Fingerprint(saved.st_size, saved.st_mtime_ns, _sampled_crc(fd, saved.st_size), len(index),
                         index.ndim, _whole_crc(fd))
    finally:
        os.close(fd)
    return fp, saved


def trusted(path: Path, expected: Fingerprint) -> bool:
    """True when the file on disk is the one the store recorded (see the module docstring)."""
    return check(path, expected) is None and header_ok(path, expected)


def header_ok(path: Path, expected: Fingerprint) -> bool:
    """True when usearch reads the dimension and count recorded from the file's header."""
    meta = _metadata(path)
    if not meta:
        return False
    return meta.get("dimensions") == expected.dim and meta.get("count_present") == expected.count


def _metadata(path: Path) -> dict | None:
    try:
        return _compiled().index_dense_metadata_from_path(os.fspath(path)) if os.path.exists(path) else None
    except Exception:
        return None


def _compiled():
    """usearch's compiled module. Loaded on its own where it can be: ``import usearch`` also imports
    urllib.request (for the package's downloads of extra binaries) and ``usearch.index`` imports tqdm
    (progress bars), about a tenth of a cold ``find``'s time at a million memories, none of which
    a view, a search or an exact comparison uses. Should the package be laid out otherwise than
    this loader knows (another usearch version), the package's own import loads it."""
    module = sys.modules.get("usearch.compiled")
    if module is None:
        with _LOADING:  # one load, should two threads of a resident process come at once
            module = sys.modules.get("usearch.compiled")
            if module is None:
                try:
                    module = _load_compiled()
                except Exception:  # noqa: BLE001 - any failure here means the package's own way
                    module = None
            if module is None:
                from usearch import compiled as module
    return module


_LOADING = threading.Lock()


def _load_compiled():
    """The compiled module loaded as ``usearch/__init__.py`` loads it: NumKong's extension first,
    its symbols made global (the compiled module resolves them as it loads), then the module itself
    under its own name, so that a later ``import usearch.index`` (or ``from usearch.compiled import``)
    finds it loaded; the package imported later lacks it as an attribute. None when either file is
    not where the package keeps it."""
    import ctypes
    import importlib.machinery
    import importlib.util

    def extension(package: str, stem: str) -> str | None:
        spec = importlib.util.find_spec(package)  # a top-level package's spec: nothing is run
        for where in (spec.submodule_search_locations or []) if spec is not None else []:
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                candidate = os.path.join(where, stem + suffix)
                if os.path.isfile(candidate):
                    return candidate
        return None

    numkong, compiled = extension("numkong", "_numkong"), extension("usearch", "compiled")
    if numkong is None or compiled is None or os.name != "posix":
        return None
    ctypes.CDLL(numkong, mode=ctypes.RTLD_GLOBAL)
    loader = importlib.machinery.ExtensionFileLoader("usearch.compiled", compiled)
    spec = importlib.util.spec_from_file_location("usearch.compiled", compiled, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return sys.modules.setdefault("usearch.compiled", module)


class View:
    """An index file memory-mapped read-only through usearch's compiled index (``open_view``): what a
    find asks of a file (``search``, ``vectors``) without usearch's Python wrapper. ``by_key``:
    usearch keeps a table from key to slot, so ``vectors`` can hand vectors by key."""

    __slots__ = ("_index", "_dtype", "ndim", "connectivity", "by_key")

    def __init__(self, index, dtype, by_key: bool) -> None:
        self._index, self._dtype, self.by_key = index, dtype, by_key
        self.ndim, self.connectivity = int(index.ndim), int(index.connectivity)

    def __len__(self) -> int:
        return len(self._index)

    @property
    def expansion_search(self) -> int:
        return int(self._index.expansion_search)

    @expansion_search.setter
    def expansion_search(self, value: int) -> None:
        self._index.expansion_search = value

    def search(self, query, count: int, *, exact: bool = False):
        """(keys, distances) of the ``count`` nearest to one query, nearest first (``exact``: each
        vector compared, not a walk of the graph)."""
        import numpy as np

        query = np.asarray(query)
        keys, distances, counts, _visited, _computed = self._index.search_many(
            query.reshape(1, -1), count=count, exact=exact, threads=0, dtype=_compiled().ScalarKind.Unknown)
        n = int(counts[0])
        return keys[0, :n], distances[0, :n]

    def get(self, keys) -> tuple:
        """Each key's vector as the file keeps it (None for a key it lacks)."""
        import numpy as np

        numpy_dtype = {"F16": np.float16, "F32": np.float32, "F64": np.float64}.get(self._dtype.name)
        wanted = self._dtype if numpy_dtype is not None else _compiled().ScalarKind.F32
        got = self._index.get_many(np.asarray(keys, dtype=np.uint64), wanted)
        return tuple(None if row is None else row.view(numpy_dtype or np.float32) for row in got)


def _restore(path: Path, expected: Fingerprint, *, view: bool, by_key: bool = True):
    if not trusted(path, expected):
        return None
    try:
        if view:
            index = _view(path, by_key)
        else:
            from usearch.index import Index

            index = Index.restore(str(path), view=False)
    except Exception:
        return None
    if index is None or len(index) != expected.count or index.ndim != expected.dim:
        return None
    if not view:
        index.expansion_add = build_settings(len(index))[1]
    index.expansion_search = expansion_for(len(index), int(index.connectivity))
    return index


def _view(path: Path, by_key: bool) -> View | None:
    meta = _metadata(path)
    if not meta:
        return None
    c = _compiled()
    index = c.Index(ndim=meta["dimensions"], dtype=meta["kind_scalar"], metric_kind=meta["kind_metric"],
                    metric_signature=c.MetricSignature.ArrayArraySize, metric_pointer=0,
                    enable_key_lookups=by_key)
    index.view_index_from_path(os.fspath(path), None)
    return View(index, meta["kind_scalar"], by_key)


_VIEW_SLOTS = {False: "index_view", True: "index_view_by_key"}  # a resident cache's kept views


def open_view(path: Path, expected: Fingerprint, cache: dict | None = None, *, by_key: bool = False):
    """The index memory-mapped read-only, or None when the file cannot be trusted.

    A view is for searching unless ``by_key`` asks that ``vectors`` can hand its vectors by key:
    usearch then fills a table from every key to its slot as it opens the file, which is half the
    time of opening a view of a million vectors (about 50 of 100 ms) and which a search does not
    read (it walks the graph by slot).

    ``cache`` (a resident process's, e.g. ``cortexctl mcp``): the view opened last of each kind is
    kept there and given again while the file is the same one (``files.identity``: a write in place
    changes its change time) and the store still
    expects the same fingerprint; a kept view of either kind is let go once the file is another (its
    mapping would hold a replaced file's disk space). The file is only ever replaced whole, never
    rewritten in place (``install``), so a kept view always maps the content that was checked."""
    if cache is None:
        return _restore(path, expected, view=True, by_key=by_key)
    _let_go(cache)
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = (str(path), *identity(st), expected)
    for other in (*_VIEW_SLOTS.values(), _SLOT_ROWS):  # a view of a file since replaced is let go, of any kind
        if cache.get((other, str(path)), (key,))[0] != key:
            del cache[(other, str(path))]
    slot = (_VIEW_SLOTS[by_key], str(path))
    kept = cache.get(slot)
    if kept is not None:
        return kept[1]
    index = _restore(path, expected, view=True, by_key=by_key)
    if index is not None:
        cache[slot] = (key, index)
    return index


def _let_go(cache: dict) -> None:
    """Views and tables of rows kept of files since removed (a store's index files are replaced
    by new ones, under other names when split by class): their mappings would hold the disk space."""
    for slot in [s for s in cache if isinstance(s, tuple) and s[0] in (*_VIEW_SLOTS.values(), _SLOT_ROWS)]:
        if not os.path.exists(slot[1]):
            del cache[slot]


def by_key(index) -> bool:
    """Whether ``vectors`` can take this index's vectors by key (not a view opened for searching)."""
    return not isinstance(index, View) or index.by_key


def open_mutable(path: Path, expected: Fingerprint):
    """The index loaded into memory for adding to, or None when it cannot be trusted."""
    return _restore(path, expected, view=False)


def search(index, query, count: int):
    """(keys, cosine similarities) of the ``count`` nearest, best first: exact for an index of at
    most ``SCAN_MAX`` vectors (each compared), through the graph for a bigger one."""
    import numpy as np

    count = min(count, len(index))
    if count <= 0:
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.float32)
    exact = len(index) <= SCAN_MAX
    if count > index.expansion_search:
        index.expansion_search = count
    if isinstance(index, View):
        keys, distances = index.search(query, count, exact=exact)
    else:
        m = index.search(query, count, exact=exact)
        keys, distances = m.keys, m.distances
    return np.asarray(keys, dtype=np.uint64), 1.0 - np.asarray(distances, dtype=np.float32)


def vectors(index, keys):
    """The stored vectors of these keys (float32, one row each), as the index keeps them (an f16
    index rounded); None when one of the keys is not in the index. Not for a view opened for
    searching only (``by_key``), where usearch would answer every key as missing."""
    import numpy as np

    if not by_key(index):
        raise ValueError("vectors by key from an index view opened for searching only")

    if not len(keys):
        return np.zeros((0, index.ndim), dtype=np.float32)
    got = index.get(np.asarray(keys, dtype=np.uint64))
    if isinstance(got, tuple):
        if any(v is None for v in got):
            return None
        return np.vstack(got).astype(np.float32, copy=False)
    return None if got is None else np.asarray(got, dtype=np.float32).reshape(len(keys), -1)


# -- the file's own bytes -------------------------------------------------------------------------
# usearch 2 writes a dense index as its vectors, a row a slot (two u32: rows and bytes a row, then
# the rows), then a 64-byte head (the magic "usearch", its version as three u16, one byte each for
# the metric, the scalar kind, the key's and the slot's kinds, then u64 counts of present and
# removed vectors and of dimensions, and a byte saying whether a key may hold many vectors), then
# the graph: five u64 (nodes, connectivity, base connectivity, top level, entry slot), every node's
# level (i16), and the nodes in slot order, each its key (u64) and level (i16) followed by its
# neighbour lists (a u32 count and ``connectivity`` u32 slots on each level, twice as many at the
# base). A removed vector's slot keeps its row with the key ``FREE_KEY``.
FREE_KEY = (1 << 64) - 1
_NODE_HEAD = 10  # a node's key and level
_KINDS = bytes([12, 14, 15])  # usearch's codes for f16 values, u64 keys and u32 slots
_SCALAR_BYTES = {4: 2, 10: 8, 11: 4, 12: 2, 23: 1}  # bf16, f64, f32, f16, i8: bytes a value
_LEVEL_ECHO = 64  # every 64th node's own level is checked against the levels block


def slot_rows(path: Path, expected: Fingerprint, cache: dict | None = None):
    """(keys, rows) from the file's own bytes: the key each slot holds (``FREE_KEY`` where a vector
    was removed) and the float16 vectors, a row a slot, memory-mapped read-only: the whole file's
    vectors without a call a vector (``vectors`` takes about 5 us a key). None when the file cannot be
    trusted or is not an f16 file laid out as above (another dtype, another usearch version): the
    layout is checked to account for every byte of the file, the levels block against the nodes' own,
    and the slots' keys against the count recorded. ``cache``: kept as ``open_view`` keeps views."""
    import mmap

    import numpy as np

    slot = (_SLOT_ROWS, str(path))
    if cache is not None:
        _let_go(cache)
    try:
        fd = open_regular(path)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        key = (str(path), *identity(st), expected)
        if cache is not None and slot in cache:
            if cache[slot][0] == key:
                return cache[slot][1]
            del cache[slot]
        if st.st_size != expected.size or st.st_size < 8:
            return None
        mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    try:  # what is mapped is the file the store recorded: the path still names it, and it is sound
        if identity(os.stat(path)) != identity(st) or not trusted(path, expected):
            return None
    except OSError:
        return None
    got = _slot_layout(np.frombuffer(mapped, dtype=np.uint8), expected)
    if got is not None and cache is not None:
        cache[slot] = (key, got)
    return got


def _layout(raw):
    """The file's parts as laid out above: (rows, dim, the head's offset, the graph's five u64, the
    nodes' levels, the nodes' offsets, the scalar kind's code), or None when its bytes are not laid
    out so (every byte accounted for, a file of usearch 2 with u64 keys and u32 slots)."""
    import numpy as np

    total = len(raw)
    if total < 8:
        return None
    rows, width = (int(x) for x in raw[:8].view("<u4"))
    head = 8 + rows * width
    core = head + 64
    if core + 40 > total:
        return None
    magic, kinds = bytes(raw[head:head + 7]), bytes(raw[head + 14:head + 17])
    version = int(raw[head + 7:head + 9].view("<u2")[0])
    dims = int(raw[head + 33:head + 41].view("<u8")[0])
    if (magic != b"usearch" or version != 2 or kinds[1:] != _KINDS[1:] or raw[head + 41]
            or dims * _SCALAR_BYTES.get(kinds[0], 0) != width):
        return None
    graph = size, connectivity, base, top, entry = tuple(int(x) for x in raw[core:core + 40].view("<u8"))
    levels_at = core + 40
    nodes_at = levels_at + 2 * size
    if (size != rows or not 0 < connectivity <= 1 << 16 or not 0 < base <= 1 << 17 or top >= 1 << 15
            or (size and entry >= size) or nodes_at > total):
        return None
    levels = raw[levels_at:nodes_at].view("<i2")
    if size and (int(levels.min()) < 0 or int(levels.max()) > top):
        return None
    sizes = _NODE_HEAD + 4 + 4 * base + levels.astype(np.int64) * (4 + 4 * connectivity)
    ends = nodes_at + np.cumsum(sizes)
    if (int(ends[-1]) if size else nodes_at) != total:
        return None
    return rows, dims, head, graph, levels, ends - sizes, kinds[0]


def _slot_layout(raw, expected: Fingerprint):
    import numpy as np

    got = _layout(raw)
    if got is None:
        return None
    rows, dim, head, _graph, levels, starts, scalar = got
    present = int(raw[head + 17:head + 25].view("<u8")[0])
    if scalar != _KINDS[0] or dim != expected.dim or rows < expected.count or present != expected.count:
        return None
    total = len(raw)
    at_byte = np.ndarray((total - 7,), dtype="<u8", buffer=raw, strides=(1,))  # a u64 at every byte
    keys = at_byte[starts]
    echo = np.ndarray((total - 1,), dtype="<i2", buffer=raw, strides=(1,))[starts[::_LEVEL_ECHO] + 8]
    if not np.array_equal(echo, levels[::_LEVEL_ECHO]) or int((keys != FREE_KEY).sum()) != expected.count:
        return None
    return keys, raw[8:head].view("<f2").reshape(rows, dim)


def _base_graph(raw):
    """The graph's base level from a file's bytes: (the nodes a search may come down to it at, each
    node's list offset, each node's neighbour count, its neighbours (u32 slots, the node count where
    a list has no more), its key), or None when the file is empty or not laid out as above."""
    import numpy as np

    got = _layout(raw)
    if got is None or not got[3][0]:
        return None
    _rows, _dim, _head, (size, connectivity, base, top, entry), levels, starts, _scalar = got
    total = len(raw)
    at_u32 = np.ndarray((total - 3,), dtype="<u4", buffer=raw, strides=(1,))
    landings = _upper(at_u32, size, connectivity, base, top, entry, levels, starts)
    lists = starts + _NODE_HEAD  # a u32 count, then ``base`` u32 slots
    counts = np.minimum(at_u32[lists], base)
    links = np.empty((size, base), dtype=np.uint32)
    for at in range(0, size, 1 << 15):  # the offsets a piece at a time (8 bytes each beside the 4 read)
        links[at:at + (1 << 15)] = at_u32[(lists[at:at + (1 << 15)] + 4)[:, None] + 4 * np.arange(base)]
    links[np.arange(base) >= counts[:, None]] = size
    links[links > size] = size
    keys = np.ndarray((total - 7,), dtype="<u8", buffer=raw, strides=(1,))[starts]
    return landings, lists, counts, links, keys


def _upper(at_u32, size: int, connectivity: int, base: int, top: int, entry: int, levels, starts):
    """The nodes a search may meet coming down the levels above the base from the entry: each
    level walked along its own lists from every node met above it (a node of a level is in every
    level below). A search lands on the base level at one of them."""
    import numpy as np

    met = np.zeros(size + 1, dtype=bool)
    met[size] = met[entry] = True
    upper = np.flatnonzero(levels > 0)
    row = np.full(size + 1, -1, dtype=np.int64)
    for level in range(top, 0, -1):
        at = upper[levels[upper] >= level]
        if not len(at):
            continue
        lists = starts[at] + _NODE_HEAD + 4 + 4 * base + (level - 1) * (4 + 4 * connectivity)
        counts = np.minimum(at_u32[lists], connectivity)
        links = at_u32[(lists + 4)[:, None] + 4 * np.arange(connectivity)].astype(np.int64)
        links[np.arange(connectivity) >= counts[:, None]] = size
        links[(links > size) | (links < 0)] = size
        row[:] = -1
        row[at] = np.arange(len(at))
        front = np.flatnonzero(met[:size] & (row[:size] >= 0))
        while len(front):
            got = links[row[front]].ravel()
            got = np.unique(got[~met[got]])
            met[got] = True
            front = got[row[got] >= 0]
    return np.flatnonzero(met[:size])


def _reached(links, seen, front) -> None:
    """Mark in ``seen`` every node a walk from ``front`` meets (``seen`` has one more entry, set,
    for "no neighbour")."""
    import numpy as np

    while len(front):
        met = links[front].ravel()
        front = np.unique(met[~seen[met]])
        seen[front] = True


def _walk(graph):
    import numpy as np

    landings, _lists, _counts, links, _keys = graph
    seen = np.zeros(len(links) + 1, dtype=bool)
    seen[-1] = True
    seen[landings] = True
    _reached(links, seen, landings)
    return seen


LINK_NEAREST = 64  # a cut-off vector's holder: the nearest of this many a search finds that has room


def _nearest_of(index, keys, among):
    """Per slot of ``among``, the slots of the ``LINK_NEAREST`` vectors a search of ``index`` (the
    graph just saved) finds nearest that slot's vector, nearest first (the node count where it found
    fewer): nodes a walk reaches."""
    import numpy as np

    found = index.search(vectors(index, keys[among]), LINK_NEAREST, threads=os.cpu_count() or 1)
    got = np.asarray(found.keys, dtype=np.uint64).reshape(len(among), -1)
    counts = np.asarray(getattr(found, "counts", [got.shape[1]])).reshape(-1)  # one query: its matches alone
    order = np.argsort(keys, kind="stable")
    at = np.minimum(np.searchsorted(keys[order], got), len(keys) - 1)
    slots = order[at].astype(np.int64)
    slots[(keys[slots] != got) | (np.arange(got.shape[1]) >= counts[:, None])] = len(keys)
    return slots


def unreachable(path: Path):
    """The keys of the vectors a search of the saved file can never reach: not linked, at the graph's
    base, from any node a walk from where a search may come down to it meets (the entry and every
    node a walk of the levels above meets: ``_upper``; a removed vector's node is walked through,
    as usearch's search does). An empty array when the file is not laid out as above."""
    import numpy as np

    fd = os.open(path, os.O_RDONLY)
    try:
        graph = _graph_of(fd)
    finally:
        os.close(fd)
    if graph is None:
        return np.zeros(0, dtype=np.uint64)
    keys = graph[4][~_walk(graph)[:-1]]
    return keys[keys != FREE_KEY]


def _graph_of(fd: int):
    """``_base_graph`` of the open file, read through a mapping let go before it returns (what it
    returns is copied out of it)."""
    import mmap

    import numpy as np

    if os.fstat(fd).st_size < 8:
        return None
    mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    try:
        return _base_graph(np.frombuffer(mapped, dtype=np.uint8))
    finally:
        mapped.close()


def link_cut_off(path: Path, index) -> int:
    """Link each vector of a file just saved from ``index`` that no walk reaches (``unreachable``)
    from the node nearest it that a search of ``index`` finds and whose list has room
    (``LINK_NEAREST``): the slot, then the list's new count, written into the file in place (a file
    cut short between the two still loads, the link not made). The number still cut off (no such
    node near it); 0 for a file not laid out as above."""
    fd = os.open(path, os.O_RDWR)
    try:
        graph = _graph_of(fd)
        return 0 if graph is None else _link(fd, graph, index)
    finally:
        os.close(fd)


def _link(fd: int, graph, index) -> int:
    import numpy as np

    _landings, lists, counts, links, keys = graph
    base = links.shape[1]
    seen = _walk(graph)
    cut = np.flatnonzero(~seen[:-1] & (keys != FREE_KEY))
    if not len(cut):
        return 0
    near = dict(zip(cut.tolist(), _nearest_of(index, keys, cut)))
    left = cut.tolist()
    linked: list[int] = []  # the cut-off vectors linked so far, the last linked last
    while left:  # a vector whose nearest are all cut off too waits for them to be linked
        waiting = []
        for u in left:
            if seen[u]:
                continue
            them = near[u][near[u] < len(keys)]
            them = them[(them != u) & seen[them] & (counts[them] < base) & (keys[them] != FREE_KEY)]
            if not len(them):  # its nearest lists all full (many vectors alike): one linked just now as near,
                them = _alike(index, keys, u, linked, counts, base, near[u])  # else the first with room past them
                if not len(them):
                    them = _roomy(links, counts, seen, keys, near[u])
            if not len(them):
                waiting.append(u)
                continue
            v = int(them[0])
            os.pwrite(fd, int(u).to_bytes(4, "little"), int(lists[v]) + 4 + 4 * int(counts[v]))
            links[v, counts[v]] = u
            counts[v] += 1
            os.pwrite(fd, int(counts[v]).to_bytes(4, "little"), int(lists[v]))
            seen[u] = True
            linked.append(u)
            _reached(links, seen, np.array([u]))
        if len(waiting) == len(left):
            break
        left = waiting
    return int((~seen[cut]).sum())


def _alike(index, keys, u: int, linked: list, counts, base: int, near):
    """The cut-off vector linked last that has room in its list, when it is at least as near ``u``
    as the farthest of ``u``'s ``near``est (thousands of vectors alike: they hold one another);
    none otherwise."""
    import numpy as np

    while linked and counts[linked[-1]] >= base:
        linked.pop()
    near = near[near < len(keys)]
    if not linked or not len(near):
        return near[:0]
    v = linked[-1]
    rows = vectors(index, [keys[u], keys[v], keys[near[-1]]]).astype(np.float64)
    rows /= np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-30)
    return np.array([v]) if rows[0] @ rows[1] >= rows[0] @ rows[2] else near[:0]


LINK_SPREAD = 1 << 16  # nodes met past a cut-off vector's nearest before it is left cut off


def _roomy(links, counts, seen, keys, start):
    """A node a walk reaches, with room in its list, met first going out from the nodes ``start``
    along their links (the nearest a search found for a cut-off vector, all full: thousands of
    vectors alike leave every list among them full), at most ``LINK_SPREAD`` nodes out; none when
    there is no such node that near."""
    import numpy as np

    size, base = len(keys), links.shape[1]
    front = start[start < size]
    front = front[seen[front]]
    met = np.zeros(size + 1, dtype=bool)
    met[size] = True
    met[front] = True
    spread = len(front)
    while len(front) and spread < LINK_SPREAD:
        front = links[front].ravel()
        front = np.unique(front[~met[front]])
        met[front] = True
        front = front[seen[front]]
        roomy = front[(counts[front] < base) & (keys[front] != FREE_KEY)]
        if len(roomy):
            return roomy[:1]
        spread += len(front)
    return front[:0]


_SLOT_ROWS = "index_slot_rows"


def nearest_rows(rows, query, count: int):
    """(positions, similarities) of the ``count`` rows of a float16 matrix with the largest inner
    product with ``query`` (rounded to float16 too), largest first, compared one by one by usearch
    (its exact search: products of float16 values summed in float32, about a tenth of the time
    numpy takes only to widen the rows to float32)."""
    import numpy as np

    c = _compiled()
    rows = np.ascontiguousarray(rows)
    keys, distances, counts, _visited, _computed = c.exact_search(
        rows, np.asarray(query, dtype=np.float16).astype(rows.dtype).reshape(1, -1), min(count, len(rows)),
        metric_kind=c.MetricKind.IP, metric_signature=c.MetricSignature.ArrayArraySize, metric_pointer=0)
    n = int(counts[0])
    return np.asarray(keys[0, :n], dtype=np.int64), 1.0 - np.asarray(distances[0, :n], dtype=np.float64)


def remove(index, keys) -> None:
    import numpy as np

    if len(keys):
        index.remove(np.asarray(keys, dtype=np.uint64))
