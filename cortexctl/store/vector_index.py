"""The DuckDB backend's vector index: the HNSW file beside the store, and keeping it in step.

Ground truth is the ``vectors`` table. The index file ``cortex.usearch`` and
its record ``cortex.usearch.json`` are a cache of it:

- The record names the model, the dimension, the highest vector key the file
  covers (``max_key``), its vector count and the file's fingerprint. The file is
  used only when the fingerprint matches and the store agrees: the vectors of
  that model with a key up to ``max_key``, live ones plus those taken out of
  service since (``vectors_dropped``), number exactly ``count``. Anything
  else (missing, truncated, damaged, another model, a store restored under it)
  means rebuild.
- Vectors newer than the file (key above ``max_key``) are the pending tail,
  searched exactly beside it, so one ``write`` never rewrites a large file. The
  tail is folded in when it reaches ``FOLD_AT`` vectors, at the end of an import,
  and by ``reindex``.
- Building holds the writer lock but not the database file: readers go on
  searching the old file (a new one replaces it atomically) and only the last
  step, clearing ``vectors_dropped``, opens the file for writing.

- The index may be several files, one a visibility class of the vectors' memories
  (the section "the files by visibility class" below): the record lists each file
  (``Part``) with its classes, count and fingerprint, and ``count`` above is their sum.

A filtered search whose candidates are few (``EXACT_MAX``) skips the index and
compares the query with every candidate's vector: exact, and faster than
filtering HNSW results at that size.

The engine sees none of this: it asks ``Tx.nearest`` for the nearest memories and
``Storage.update_index`` / ``index_loader`` / ``after_vectors`` to keep the index
current (``store/interface.py``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from cortexctl.errors import CortexError
from cortexctl.index.hnsw import DAMAGED  # index_state's reason when the file is not the one recorded
from cortexctl.store.interface import Filters, IndexUnusable, Remark

DuckStorage = "cortexctl.store.db.DuckStorage"  # annotations only: the module reads its path, lock and maps

INDEX_NAME = "cortex.usearch"
RECORD_NAME = "cortex.usearch.json"
NEXT_SUFFIX = ".next"  # the record of a file being put in place (install)
RECORD_FORMAT = 2  # a record of several files (``parts``); a record of one file is written as format 1
PART_NAME = r"cortex\.usearch-[0-9a-f]{16}"  # the files after the first (``part_name``)
FOLD_AT = 2000  # vectors newer than the file that trigger a fold after a write
EXACT_MAX = 4096  # candidates compared exactly instead of through the index
WIDEST = 64  # times max(2n, 64): the widest search of the index before a filter sends find to an exact one


@dataclass
class Part:
    """One index file of the store's: ``file`` (its name in the store directory), the visibility
    classes whose vectors it holds (``classes``; None: every class, the one file of a store not
    split), and what its record keeps of it."""

    file: str
    classes: tuple | None
    count: int
    fingerprint: dict
    crc_all: int = 0  # CRC-32 of the whole file, checked by verify
    connectivity: int = 16  # of the file's graph (hnsw.build_settings); files recorded before it said are 16

    @classmethod
    def of_file(cls, file: str, classes, index, fp) -> Part:
        """The part of ``index`` (or of a ``Sealed`` file) just saved with fingerprint ``fp`` (``hnsw.save_*``)."""
        from cortexctl.index import hnsw

        sampled = {k: v for k, v in fp.to_json().items() if k != "whole"}  # the record keeps it as crc_all
        count, links = (index.count, index.connectivity) if isinstance(index, Sealed) \
            else (len(index), hnsw.connectivity(index))
        return cls(file, None if classes is None else tuple(classes), count, sampled, fp.whole, links)

    def to_json(self) -> dict:
        return {"file": self.file, "classes": None if self.classes is None else list(self.classes),
                "count": self.count, "fingerprint": self.fingerprint, "crc_all": self.crc_all,
                "connectivity": self.connectivity}


@dataclass
class IndexRecord:
    model: str
    dim: int
    max_key: int
    parts: list  # of Part: the first is the file ``cortex.usearch``; the last takes the classes no part names
    # dropped keys a background fold left out of the files and takes out of vectors_dropped just after
    # writing this record (store/fold.py): until then the store still lists them, and they do not count
    cleared: list = field(default_factory=list)

    @classmethod
    def of_file(cls, model: str, max_key: int, index, fp, cleared=()) -> IndexRecord:
        """The record of one file (every class) ``index`` just saved with fingerprint ``fp``,
        holding the vectors up to ``max_key``."""
        return cls(model, int(index.ndim), max_key, [Part.of_file(INDEX_NAME, None, index, fp)],
                   [int(k) for k in cleared])

    @classmethod
    def of_parts(cls, model: str, max_key: int, parts: list, cleared=()) -> IndexRecord:
        """The record of files just saved (``save_parts``), holding the vectors up to ``max_key``."""
        return cls(model, int(parts[0].fingerprint["dim"]), max_key, parts, [int(k) for k in cleared])

    @property
    def count(self) -> int:
        return sum(p.count for p in self.parts)

    @property
    def connectivity(self) -> int:
        """Of the graph of the file holding the most vectors."""
        return max(self.parts, key=lambda p: p.count).connectivity

    def to_json(self) -> dict:
        if len(self.parts) == 1 and self.parts[0].classes is None:  # one file: as before files were split
            p = self.parts[0]
            doc = {"format": 1, "model": self.model, "dim": self.dim, "max_key": self.max_key,
                   "count": p.count, "fingerprint": p.fingerprint, "crc_all": p.crc_all,
                   "connectivity": p.connectivity}
        else:
            parts = [p.to_json() for p in self.parts]
            doc = {"format": RECORD_FORMAT, "model": self.model, "dim": self.dim, "max_key": self.max_key,
                   "parts": parts, "parts_crc": _parts_crc(parts)}
        if self.cleared:
            doc["cleared"] = [int(k) for k in self.cleared]
        return doc

    def searched_by(self, sight: Sight) -> list:
        """The parts holding any class ``sight`` (a viewer's: ``viewer_classes``) sees, the one file
        of a store not split included."""
        return [p for p in self.parts if p.classes is None or any(map(sight.sees, p.classes))]


@dataclass
class Sealed:
    """A file of a build saved as soon as its last vector was added (``Build``), its graph let go:
    ``save_parts`` records it as it is."""

    tmp: Path
    fp: object  # hnsw.Fingerprint
    count: int
    connectivity: int


# -- the files by visibility class ------------------------------------------------------------------
# A store's vectors may be split over several index files by their memories' visibility class
# (``search.VECTOR_CLASS``: "public", "private:ACTOR", "scoped:ACTOR"), so that a find views and
# searches only the files holding what its viewer may see (its own, the public ones, its granters'
# scoped ones): a viewer who sees a tenth of a million memories views a tenth of the graph. A whole
# build (``layout``) gives each class of at least PART_MIN vectors its own file and puts the rest
# together in the last. No file is given more than PART_MAX vectors: a group past it is built as
# several files by key range (``pieces``), and a fold adds each vector to its class's own file, else
# the last file that names its class, else the last file, until that file holds PART_MAX, then starts
# another (``_Filler``), so that a fold rewrites at most one such file a class and a build holds at most
# one graph a group in memory (``Build``). A memory whose visibility changes gets new vector keys
# (``search.rekey_vectors``): the pending tail until the next fold puts them in the new class's file.
PART_MIN = 20_000
PART_MAX = 200_000  # hnsw.DENSE_AT: each file's graph is built sparse, about 1 KB a vector while it builds


@dataclass(frozen=True)
class Sight:
    """The visibility classes a viewer sees (``rules.visibility``): the public one, every class of
    its own memories (whatever their visibility says), and the scoped memories of its granters (the
    passing check after the search still applies the scopes' types and tags)."""

    actor: str
    granters: frozenset = frozenset()

    def sees(self, cls: str) -> bool:
        kind, _, owner = cls.partition(":")
        return cls == "public" or owner == self.actor or (kind == "scoped" and owner in self.granters)


def viewer_classes(filters: Filters) -> Sight:
    """What ``filters``' viewer sees, by class."""
    return Sight(filters.actor, frozenset(g for g, _, _ in filters.scopes))


def layout(counts: dict) -> list:
    """The classes of each file a whole build of vectors of these classes (class -> count) makes,
    largest first and the rest last; [None] for one file of every class."""
    own = sorted((c for c, n in counts.items() if n >= PART_MIN), key=lambda c: (-counts[c], c))
    rest = tuple(sorted(c for c in counts if c not in own))
    groups = [(c,) for c in own] + ([rest] if rest else [])
    return [None] if len(groups) <= 1 else groups


def pieces(n: int) -> int:
    """The files a whole build makes of a group of ``n`` vectors: as few as hold at most PART_MAX each."""
    return max(1, -(-n // PART_MAX))


def part_name() -> str:
    """A new name for a file after the first: never one in use, so that a file is put in place by
    a rename and the record that names it (``install_parts``)."""
    return f"{INDEX_NAME}-{os.urandom(8).hex()}"


def _named(store, why: str) -> tuple[Path, str]:
    """The file an ``index_state`` reason is about, and the reason alone."""
    import re

    got = re.fullmatch(rf"(.*) \(({PART_NAME})\)", why)
    return (store.path / got[2], got[1]) if got else (index_path(store), why)


def fingerprint_of(rec: IndexRecord, part: Part | None = None):
    """The record's fingerprint of a part's file (the first's by default), with the whole-file CRC it keeps."""
    from cortexctl.index import hnsw

    part = rec.parts[0] if part is None else part
    return hnsw.Fingerprint.from_json({**part.fingerprint, "whole": part.crc_all})


def index_path(store) -> Path:
    return store.path / INDEX_NAME


def part_path(store, part: Part) -> Path:
    return store.path / part.file


def record_path(store) -> Path:
    return store.path / RECORD_NAME


def next_record_path(store) -> Path:
    """The record of an index file being put in place (``install``)."""
    return store.path / (RECORD_NAME + NEXT_SUFFIX)


def read_record(store) -> IndexRecord | None:
    """The record of the index file in place: the one a writer wrote beside the old record
    (``install``) when it describes the file, else the record."""
    nxt = _parse_record(next_record_path(store))
    if nxt is not None and _describes_file(store, nxt):
        return nxt
    return _parse_record(record_path(store))


def _parse_record(path: Path) -> IndexRecord | None:
    try:
        from cortexctl.files import read_regular

        # read whole: a regular file cannot be endless, and a fold's record lists every key it
        # cleared (``cleared``: 100k+ keys after a merge or an update of that many memories)
        doc = json.loads(read_regular(path))
        if doc.get("format") == 1:
            parts = [Part(INDEX_NAME, None, int(doc["count"]), dict(doc["fingerprint"]), int(doc.get("crc_all", 0)),
                          int(doc.get("connectivity", 16)))]
        elif doc.get("format") == RECORD_FORMAT:
            if not all(p["classes"] is None or (isinstance(p["classes"], list)
                                                and all(isinstance(c, str) for c in p["classes"])) for p in doc["parts"]):
                return None  # classes are a list of names (a string is not its letters)
            if doc.get("parts_crc") != _parts_crc(doc["parts"]):
                return None  # the classes are trusted as read (a find searches by them): a changed byte is damage
            parts = [Part(str(p["file"]), None if p["classes"] is None else tuple(p["classes"]),
                          int(p["count"]), dict(p["fingerprint"]), int(p["crc_all"]), int(p["connectivity"]))
                     for p in doc["parts"]]
        else:
            return None
        rec = IndexRecord(str(doc["model"]), int(doc["dim"]), int(doc["max_key"]), parts,
                          [int(k) for k in doc.get("cleared", [])])
        numbers = [rec.dim, rec.max_key, *rec.cleared]
        for p in parts:
            numbers += [p.count, p.crc_all, p.connectivity, *(int(v) for v in p.fingerprint.values())]
    except (OSError, ValueError, KeyError, TypeError, AttributeError, OverflowError):
        return None
    if not all(0 <= v < 2**63 for v in numbers) or not _sound_parts(parts):
        return None  # a damaged record: rebuild
    return rec


def _parts_crc(parts) -> int:
    """CRC-32 of a record's parts as written (sorted keys): a byte of a class name changed gives a
    record still well-formed whose classes send a viewer's find past the file holding its vectors."""
    import zlib

    return zlib.crc32(json.dumps(parts, sort_keys=True).encode())


def _sound_parts(parts: list) -> bool:
    """The first part is the file ``cortex.usearch``, the others files named as ``part_name`` makes,
    each once; a lone part holds every class, and so may the first of several (a file of every class
    that a fold found full: ``grow``), no other; a part that names classes names some, each once."""
    import re

    names = [p.file for p in parts]
    return (bool(parts) and names[0] == INDEX_NAME and len(set(names)) == len(names)
            and all(re.fullmatch(PART_NAME, n) for n in names[1:])
            and (len(parts) > 1 or parts[0].classes is None)  # a lone part holds every class
            and all(p.classes is not None for p in parts[1:])
            and all(p.classes is None or (p.classes and len(set(p.classes)) == len(p.classes)) for p in parts))


def _describes_file(store, rec: IndexRecord) -> bool:
    from cortexctl.index import hnsw

    try:
        return hnsw.check(index_path(store), fingerprint_of(rec)) is None
    except (KeyError, TypeError, ValueError):
        return False


def _write_record(store, rec: IndexRecord, path: Path | None = None) -> None:
    from cortexctl.files import atomic_path

    with atomic_path(path or record_path(store)) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(json.dumps(rec.to_json(), sort_keys=True).encode())


def install(store, tmp: Path, fp, rec: IndexRecord) -> None:
    """``install_parts`` of a record of one file written to ``tmp``."""
    install_parts(store, rec, {INDEX_NAME: (tmp, fp)})


def install_parts(store, rec: IndexRecord, files: dict) -> None:
    """Put the index files a build or fold wrote (name -> (temp file from ``hnsw.save_beside``,
    fingerprint)) and their record ``rec`` in place, under the writer lock, so that a kill at any
    moment leaves the old files with the old record or the new files with the new one: the files
    after the first are put in place first under names no record uses yet (``part_name``), the new
    record is written beside the old one (``cortex.usearch.json.next``), the first file renamed
    over the old one (when it is new), then the new record over the old record. In between,
    ``read_record`` takes the record beside when it describes the first file in place. The files
    no record names any more are removed last."""
    from cortexctl.files import fsync_path
    from cortexctl.index import hnsw

    for name, (tmp, fp) in files.items():
        if name != INDEX_NAME:
            hnsw.install(tmp, store.path / name, fp)
    _write_record(store, rec, next_record_path(store))
    if INDEX_NAME in files:
        hnsw.install(files[INDEX_NAME][0], index_path(store), files[INDEX_NAME][1])
    os.replace(next_record_path(store), record_path(store))
    fsync_path(store.path)
    _remove_unnamed(store, rec)


def _remove_unnamed(store, rec: IndexRecord | None) -> None:
    """The files after the first (and their checked stamps) that ``rec`` does not name: a reader that
    read the record before meets a file gone and reads the record again (``index_state``)."""
    import re

    from cortexctl.files import CHECKED_SUFFIX, unlink_quietly

    named = set() if rec is None else {p.file for p in rec.parts}
    try:
        names = os.listdir(store.path)
    except OSError:
        return
    for name in names:
        got = re.fullmatch(rf"({PART_NAME})({re.escape(CHECKED_SUFFIX)})?", name)
        if got and got[1] not in named:
            unlink_quietly(store.path / name)


def settle(store) -> None:
    """Under the writer lock: finish what a writer killed while saving or installing index files
    left: its temp files removed, the record beside put over the record when it describes the
    first file in place, else removed, and the files no record names removed. Best effort: what
    cannot be removed stays (``read_record`` passes over a record beside that does not describe
    the file)."""
    from cortexctl.files import fsync_path, stale_temps, unlink_quietly

    for left in stale_temps(index_path(store)):  # the files' and the records' (theirs start alike)
        unlink_quietly(left)
    _sweep_part_temps(store)
    nxt = next_record_path(store)
    if os.path.lexists(nxt):
        rec = _parse_record(nxt)
        try:
            if rec is not None and _describes_file(store, rec):
                os.replace(nxt, record_path(store))
            else:
                unlink_quietly(nxt)
            fsync_path(store.path)
        except OSError:
            pass
    _remove_unnamed(store, _parse_record(record_path(store)))


def _sweep_part_temps(store) -> None:
    """The temp files of the checked stamps of the files after the first (``.cortex.usearch-HEX.checked.*.tmp``,
    which a reader writes without the lock and a writer as it installs one): a process killed
    while it wrote one leaves it, and ``stale_temps`` of the first file does not name them."""
    import re

    from cortexctl.files import stale_temps, unlink_quietly

    try:
        names = os.listdir(store.path)
    except OSError:
        return
    for part in sorted({m[1] for n in names if (m := re.fullmatch(rf"\.({PART_NAME})\..*\.tmp", n))}):
        for left in stale_temps(store.path / part):  # a stamp's temp only once it is old (a reader may be writing it)
            unlink_quietly(left)


# A writer puts a new index file in place between writing its record beside the old one and moving
# it over (``install``): a reader that read the old record just before the rename finds the file
# unlike it. When the file was put in place this recently, the reader looks again (record and file)
# for up to this long before it says so; a damaged file stays damaged.
INSTALL_SETTLE = 1.0


def index_state(tx, store, model: str, dim: int | None, classes=None) -> tuple[IndexRecord | None, str]:
    """(record, "ok") when the index files can be trusted for ``model``, else (record or None, why
    not). ``classes``: only the files of the parts holding them are read (a find's viewer's,
    ``viewer_classes``); the counts are checked for all."""
    import time

    from cortexctl.index import hnsw

    deadline = None
    while True:
        rec, why = _file_state(store, model, dim, classes)
        if why is None or not why.startswith((DAMAGED, hnsw.NEWER)) \
                or not (_just_installed(index_path(store)) or read_record(store) != rec):
            break
        # a writer is putting new files in place: the record and the files are read again
        deadline = deadline or time.monotonic() + INSTALL_SETTLE
        if time.monotonic() >= deadline:
            break
        time.sleep(0.02)
    if why is not None:
        return rec, why
    covered = tx.covered(model, rec.max_key)  # the files hold live and dropped vectors up to max_key
    if covered != rec.count and rec.cleared:  # a fold's record written, its dropped keys not yet cleared
        # (covered counts only keys up to max_key: a dropped key above it was never in the file)
        covered -= len({k for k in rec.cleared if k <= rec.max_key} & set(tx.dropped_keys(model)))
    if covered != rec.count:
        return rec, "out of step with the store"
    return rec, "ok"


def _file_state(store, model: str, dim: int | None, classes=None) -> tuple[IndexRecord | None, str | None]:
    """The record, and None when the files are the ones it describes, else why not."""
    rec = read_record(store)
    if rec is None:
        if os.path.lexists(record_path(store)):
            return None, f"not described by its record ({RECORD_NAME} unreadable or damaged)"
        return None, "missing"
    if rec.model != model or (dim is not None and rec.dim != dim):
        return rec, f"built by model {rec.model}"
    for part in rec.parts if classes is None else rec.searched_by(classes):
        why = _part_state(store, rec, part)
        if why is not None:  # DAMAGED, or a file a writer has just saved and is recording (NEWER)
            return rec, why if part.file == INDEX_NAME or why == "unreadable record" else f"{why} ({part.file})"
    return rec, None


def _part_state(store, rec: IndexRecord, part: Part) -> str | None:
    """None when the file of ``part`` is the one the record describes, else why not."""
    from cortexctl.index import hnsw

    try:
        fp = fingerprint_of(rec, part)
    except (KeyError, TypeError, ValueError):
        return "unreadable record"
    if fp.count != part.count or fp.dim != rec.dim:
        return "unreadable record"
    path = part_path(store, part)
    why = hnsw.check(path, fp)
    if why is None and not hnsw.header_ok(path, fp):
        why = DAMAGED
    return why


def _just_installed(path: Path) -> bool:
    """The file's inode changed (a rename put it in place, or it was written) within INSTALL_SETTLE."""
    import time

    try:
        return time.time_ns() - os.stat(path).st_ctime_ns < INSTALL_SETTLE * 1e9
    except OSError:
        return False
# -- building --------------------------------------------------------------------------
class IndexLoader:
    """The index filled batch by batch while an import goes on, for ``fold`` to take over.

    usearch adds vectors without holding the GIL, so a worker thread grows the
    graph while the next batch is read and written. It starts from the trusted
    index file (``base``, a store of one file) when there is one and adds every
    vector to it; else from nothing: one graph of the classes below PART_MIN (``_REST``) and one
    of each class from the batch that takes it to PART_MIN on (the vectors' ``owners``);
    a class's vectors added to the first before it had a graph of its own are moved to its own
    when it is taken (fewer than PART_MIN a class), which then gives ``layout``'s files. A graph
    that reaches PART_MAX vectors is saved into the import's scratch work directory and let go
    (``Sealed``; the next vectors of its class start another), so that an import holds about one
    graph a group in memory; a class whose first vectors were saved in a shared file stays named
    there. ``fold`` uses it only when it is what a fold or rebuild would start from at that moment:
    the same trusted file (or none), and every vector it was given still in
    the store under its key; otherwise the usual fold or rebuild runs.
    """

    CHUNK = 1024  # vectors per job, so that the last ones can be added with every core
    CHECK_SPAN = 100_000  # keys whose stored rows ``take`` reads at a time
    QUEUED = 16  # jobs waiting at most (about 25 MB of 384-d vectors)

    def __init__(self, store: DuckStorage, model: str, *, threads: int = 1, expected: int = 0) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.model = model
        self.store = store
        self.size = expected  # the vectors the index will hold: those in the store are added below
        self.base: IndexRecord | None = None
        self.indexes: dict = {}  # class -> index (None: every class, the base file's; None value: saved, none since)
        self.class_keys: dict = {}  # class -> [keys added to the graph of the small classes, _REST, in memory]
        self.rest_classes: set = set()  # the classes with vectors in that graph
        self.sealed: list = []  # (class or _REST, classes, Sealed): the graphs saved as they filled
        self.work: Path | None = None  # the scratch directory they are saved in
        self.counts: dict = {}  # class -> vectors added
        self.queued: dict = {}  # graph (class or _REST) -> vectors handed to its graph since the last was saved
        self.broken = False
        self.threads = threads  # cores for adding (the adding thread itself is one)
        self.added: list[tuple[int, list[str], list[int]]] = []  # (first key, ids, versions)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cortexctl-index")
        self._jobs: list = []
        try:
            with store.reading() as tx:
                rec, why = index_state(tx, store, self.model, None)
                self.size += tx.vector_stats(self.model)[0]
        except CortexError:
            return  # no store yet (or unreadable): start from nothing
        if why == "ok" and rec is not None and (len(rec.parts) > 1 or self.size > PART_MAX):
            # files by class, or one file the import would fill past PART_MAX: the fold adds each vector to
            # a file of its class, and starts another when that one is full (``grow``)
            self.broken = True
        elif why == "ok" and rec is not None:
            self.base = rec
            self._jobs.append(self._pool.submit(self._restore, index_path(store), rec))

    def _restore(self, path: Path, rec: IndexRecord) -> None:
        from cortexctl.index import hnsw

        index = hnsw.open_mutable(path, fingerprint_of(rec))
        self.broken = index is None
        if index is not None:
            self.indexes[None] = index

    def _add(self, into, cls, keys, matrix) -> None:
        """In the worker: add to the graph ``into`` (a class, ``_REST`` or None) vectors of ``cls``."""
        from cortexctl.index import hnsw

        if self.broken:
            return
        index = self.indexes.get(into)
        if index is None:
            index = self.indexes[into] = hnsw.new(int(matrix.shape[1]), self.size if into is None
                                                  else min(self.size, PART_MAX))
        if index.ndim != matrix.shape[1]:
            self.broken = True
            return
        index.add(keys, matrix, threads=self.threads)
        if into == _REST:
            self.rest_classes.add(cls)
            self.class_keys.setdefault(cls, []).append(keys)
        if into is not None and len(index) >= PART_MAX:
            self._seal(into)

    def _seal(self, into) -> None:
        """Save the full graph ``into`` in the work directory and let it go."""
        import tempfile

        from cortexctl.index import hnsw
        from cortexctl.store import scratch

        index = self.indexes[into]
        if self.work is None:  # 0700 and mkstemp's 0600 whatever the umask: the umask is not changed from this thread
            self.work = scratch.make(scratch.areas(self.store), "index")
        fd, tmp = tempfile.mkstemp(prefix=f".{INDEX_NAME}.", suffix=".tmp", dir=self.work)
        os.close(fd)
        fp = hnsw.save_beside(index, Path(tmp))
        classes = tuple(sorted(self.rest_classes)) if into == _REST else (into,)
        self.sealed.append((into, classes, Sealed(Path(tmp), fp, len(index), hnsw.connectivity(index))))
        self.indexes[into] = None
        if into == _REST:  # saved: no longer moved to their class's graph when taken
            self.class_keys, self.rest_classes = {}, set()
        del index

    def add(self, last_key: int, ids: list[str], versions: list[int], matrix, owners=None) -> None:
        """Queue vectors just committed under keys up to ``last_key`` (one per id, in order);
        ``owners``: each memory's (visibility, actor), for its class."""
        import numpy as np

        first = last_key - len(ids) + 1
        self.added.append((first, list(ids), [int(v) for v in versions]))
        keys = np.arange(first, last_key + 1, dtype=np.uint64)
        # A bounded queue: when the worker falls behind, the import waits rather than holding
        # every batch's vectors in memory until the end.
        from concurrent.futures import wait

        self._jobs = [j for j in self._jobs if not j.done() or j.exception() is not None]  # errors: for take()
        running = [j for j in self._jobs if not j.done()]
        if len(running) > self.QUEUED:
            wait(running[: len(running) - self.QUEUED])
        if self.base is not None or owners is None:
            groups = {None: np.arange(len(keys))}
        else:
            classes = np.array([vector_class(v, a) for v, a in owners])
            groups = {str(c): np.flatnonzero(classes == c) for c in np.unique(classes)}
        for cls, at in groups.items():
            into = cls
            if cls is not None:
                self.counts[cls] = self.counts.get(cls, 0) + len(at)
                if self.counts[cls] < PART_MIN and cls not in self.indexes:
                    # a small class (so far) shares one graph: most of an import of many actors' memories
                    # is not built a class at a time and put together again when taken
                    into = _REST
                else:
                    self.indexes.setdefault(cls, None)  # its own graph from now on (made by _add)
            s = 0
            while s < len(at):
                take = self.CHUNK
                if into is not None:  # a graph is given exactly PART_MAX, then saved (_add)
                    take = min(take, PART_MAX - self.queued.get(into, 0))
                    self.queued[into] = (self.queued.get(into, 0) + min(take, len(at) - s)) % PART_MAX
                part = at[s : s + take]
                s += take
                self._jobs.append(self._pool.submit(self._add, into, cls, keys[part], matrix[part]))

    def _stop(self) -> None:
        """Stop the worker (waiting for the add under way)."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._jobs = []

    def close(self) -> None:
        """Stop the worker; the indexes are dropped, and the graphs saved as they filled removed
        (those ``take`` gave were put in place by then, or are not wanted)."""
        from cortexctl.store import scratch

        self._stop()
        self.sealed = []
        scratch.remove(self.work)
        self.work = None

    def take(self, tx, rec: IndexRecord | None, dim: int) -> list | None:
        """The indexes as ``entries`` for ``save_parts`` ([(classes, index or ``Sealed``)], the
        saved ones and, per class of its own, its graph in memory, largest class first, the shared
        ones last; a small class's vectors read from the store into its file's), when they can
        stand in for what ``fold`` would start from, else None.

        ``rec`` is the trusted record now (None when the file cannot be trusted).
        Waits for the worker; an error it met is raised here.
        """
        from cortexctl.index import hnsw

        self.threads = os.cpu_count() or 1  # nothing else to do now: every core on what is left
        for job in self._jobs:
            job.result()
        self._stop()
        self.indexes = {c: ix for c, ix in self.indexes.items() if ix is not None}
        if self.broken or not (self.indexes or self.sealed) or not self.added \
                or any(ix.ndim != dim for ix in self.indexes.values()):
            return None
        if rec != self.base:
            return None
        if not self._still_stored(tx):
            return None  # changed since (another writer updated or dropped one)
        if None in self.indexes:
            return [(None, self.indexes.pop(None))]
        import numpy as np

        rest = self.indexes.pop(_REST, None)
        for cls, index in self.indexes.items():  # a class's first vectors, in the shared graph before it had its own
            early = self.class_keys.get(cls)
            if early and len(index) + sum(map(len, early)) > PART_MAX:
                continue  # they would fill its graph past PART_MAX: the shared file keeps them, and names the class
            if early:
                keys = np.concatenate(early)
                mat = tx.vectors_at_keys(keys, self.model, dim)
                if mat is None:
                    return None
                hnsw.add(index, keys, mat)
                hnsw.remove(rest, keys)
                self.rest_classes.discard(cls)
        own = sorted({c for c in self.counts if c in self.indexes or any(c == s[0] for s in self.sealed)},
                     key=lambda c: (-self.counts[c], c))
        shared = [(classes, saved) for into, classes, saved in self.sealed if into == _REST]
        if rest is not None and len(rest):
            shared.append((tuple(sorted(self.rest_classes)), rest))
        if not self.sealed and len(own) + len(shared) <= 1:  # one file: the one graph that holds anything
            held = [ix for ix in (*self.indexes.values(), rest) if ix is not None and len(ix)]
            return [(None, held[0])] if len(held) == 1 else None
        entries = []
        for cls in own:
            entries += [((cls,), saved) for into, _c, saved in self.sealed if into == cls]
            if cls in self.indexes and len(self.indexes[cls]):
                entries.append(((cls,), self.indexes.pop(cls)))
        return entries + shared

    def _still_stored(self, tx) -> bool:
        """Every vector given to the graphs still in the store under its key, read a span of about
        ``CHECK_SPAN`` keys at a time: the whole import's at once was a dict of a million rows (some
        300 MB) beside the graphs, the import's peak."""
        group: list = []
        for item in (*self.added, None):
            if item is not None and (not group or item[0] + len(item[1]) - group[0][0] <= self.CHECK_SPAN):
                group.append(item)
                continue
            if group:
                stored = tx.vectors_between(self.model, group[0][0], group[-1][0] + len(group[-1][1]) - 1)
                for first, ids, versions in group:
                    for k, (i, v) in enumerate(zip(ids, versions), first):
                        if stored.get(k) != (i, v):
                            return False
            group = [item]
        return True

    def keys(self):
        import numpy as np

        return np.concatenate([np.arange(f, f + len(ids), dtype=np.uint64) for f, ids, _ in self.added])


_REST = "\0rest"  # IndexLoader's graph of the classes below PART_MIN (no class is named so)


def update(store: DuckStorage, model: str, *, rebuild: bool = False, progress: Callable[[int, int], None] | None = None,
           built: IndexLoader | None = None, wait: float | None = None) -> dict:
    """Bring the index file up to date with the active model's vectors; returns what was done.

    Folds the unindexed vectors (newer than the file) into a trusted file, or rebuilds from DuckDB when the file
    cannot be trusted (or ``rebuild``). Holds the writer lock throughout.
    With ``built`` (an import's ``IndexLoader``), its vectors are not added
    again when it can take the place of the file or of the empty start.
    """
    with store.exclusive(wait=wait):
        done = _fold(store, model, rebuild=rebuild, progress=progress, built=built)
        if built is not None:
            built.indexes = {}  # saved: their memory is not needed for the snapshot build
        try:  # the search snapshot follows the index (store/snapshot/); it is a cache: never fail for it
            store.refresh_snapshot()
        except (CortexError, OSError):
            pass
    return done


def _fold(store: DuckStorage, model: str, *, rebuild: bool, progress, built: IndexLoader | None) -> dict:
    from cortexctl.index import hnsw

    try:
        with store.exclusive():
            settle(store)
            with store.reading() as tx:
                count, max_key, dim = tx.vector_stats(model)
                rec, why = index_state(tx, store, model, dim)
                cleared = tx.dropped_keys(model)
                if dim is None:
                    return {"action": "none", "vectors": 0, "reason": "no vectors yet"}
                entries = None
                skip = None
                trusted = rec if why == "ok" else None
                if built is not None and not (rebuild and built.base is not None):
                    entries = built.take(tx, None if rebuild else trusted, dim)
                    if entries is not None:
                        skip = built.keys()
                if entries is None and not rebuild and trusted is not None:
                    if rec.max_key == max_key and not tx.dropped_keys(model):
                        return {"action": "none", "vectors": rec.count, "reason": "up to date"}
                    read: list[int] = []

                    def tail():  # batch by batch: a tail of a million vectors is not held at once
                        for keys, mat in tx.iter_vectors(model, dim, after=rec.max_key):
                            read.append(len(keys))
                            yield keys, mat

                    entries = grow(store, rec, tail(), tx.vector_classes(model, after=rec.max_key),
                                   tx.dropped_keys(model))
                    if entries is not None:
                        done = sum(read)
                        if progress:
                            progress(done, done)
                        action = "fold"
                if entries is None or skip is not None:
                    if skip is not None and built.base is not None:
                        action = "fold"  # the builder started from the trusted file and holds the tail
                        index = entries[0][1]
                        hnsw.remove(index, [k for k in tx.dropped_keys(model) if k <= rec.max_key and index.contains(k)])
                        after = rec.max_key
                    else:
                        action = "rebuild"
                        after = 0
                    total = tx.count_vectors(model, after=after)
                    done = 0 if skip is None else len(skip)
                    if skip is not None and len(skip) and int(skip.min()) > after:
                        # The builder holds every vector from after `after` up to its last key (take()
                        # checked each is in the store): read only those past it, not all of them again.
                        top = int(skip.max())
                        if total == len(skip) + tx.count_vectors(model, after=top):
                            after, skip = top, None
                    if skip is not None and total - len(skip) > PART_MAX:
                        # many vectors stored before the import and no trusted file: a whole build, which
                        # saves each file as it completes, rather than new graphs all held until the end
                        built.close()
                        entries = skip = None
                        done = 0
                    if entries is None:  # files saved beside the store as they complete (swept by settle after a kill)
                        build = Build(dim, tx.vector_classes(model), store.path)
                        add = build.add
                    else:  # the builder's files: what it was not given goes where a fold would put it
                        files = [[c, None, None if isinstance(ix, Sealed) else ix, PART_MAX if isinstance(ix, Sealed)
                                  else len(ix)] for c, ix in entries]
                        saved = {id(f): ix for f, (_c, ix) in zip(files, entries) if isinstance(ix, Sealed)}
                        filler = _Filler(files, dim, lambda f: f[2])  # a saved file is full: never given one
                        classes = tx.vector_classes(model, after=after)

                        def add(keys, mat):
                            if not filler.add(classes, keys, mat):
                                raise CortexError("internal: a saved index file was given a vector")
                    try:
                        for keys, mat in tx.iter_vectors(model, dim, after=after):
                            if skip is not None:
                                import numpy as np

                                keep = ~np.isin(keys, skip, assume_unique=True)
                                keys, mat = keys[keep], mat[keep]
                            add(keys, mat)
                            done += len(keys)
                            if progress:
                                progress(done, max(total, done))
                    except BaseException:
                        if entries is None:
                            build.discard()
                        raise
                    if entries is None:
                        entries = build.entries()
                    else:
                        entries = [(f[0], saved[id(f)] if id(f) in saved else f[2]) for f in files if f[3]]
            # the dropped keys are out of the new files; the record names them until they are cleared
            _save_and_install(store, entries, model, max_key, cleared)
            vectors = sum(p.count for p in read_record(store).parts)
            with store.transaction() as tx:
                tx.clear_dropped()
    finally:
        if built is not None:
            built.close()  # the graphs it saved are in place, or not wanted
    # "delta" in reindex's output: the unindexed vectors were folded in
    return {"action": action, "vectors": vectors, "added": done, "reason": why if action == "rebuild" else "delta"}


def whole(dim: int, names: list, keys, codes) -> tuple[list, tuple]:
    """A whole build's files of the vectors whose classes are given (``Tx.vector_classes``: names,
    keys in order, codes): the ``layout`` of their classes, each group of more than PART_MAX vectors
    in ``pieces`` files by key range, a file's classes those of its vectors. ([(classes, size)], the
    router ``Build`` takes: (keys, the file of each), None for one file of every class)."""
    import numpy as np

    counts = np.bincount(codes, minlength=len(names)) if len(codes) else np.zeros(len(names), dtype=np.int64)
    groups = layout({n: int(c) for n, c in zip(names, counts.tolist()) if c})
    if groups == [None]:
        if len(keys) <= PART_MAX:
            return [(None, len(keys))], None
        groups = [tuple(n for n, c in zip(names, counts.tolist()) if c)]  # one group, in files by key range
    code_of = {n: c for c, n in enumerate(names)}
    group_of = np.full(len(names), -1, dtype=np.int64)
    for g, group in enumerate(groups):
        group_of[[code_of[c] for c in group]] = g
    pos = np.zeros(len(keys), dtype=np.int64)
    files: list = []
    for g, group in enumerate(groups):
        at = np.flatnonzero(group_of[codes] == g)
        k = pieces(len(at))
        piece = np.arange(len(at), dtype=np.int64) * k // max(len(at), 1)  # in key order: ranges of keys
        pos[at] = len(files) + piece
        for i in range(k):
            held = at[piece == i]
            kinds = group if k == 1 or len(group) == 1 else tuple(names[c] for c in np.unique(codes[held]).tolist())
            files.append((tuple(sorted(kinds)), len(held)))
    return files, (keys, pos)


class Build:
    """The files of a whole build (``whole``), filled batch by batch in key order (``add``): each
    file's graph is made at its first vector and, with ``out`` (a directory on the store's file
    system), saved there as soon as its last vector is in and let go (``Sealed``), so that a build
    of files by key range holds about one graph a group at a time. ``entries`` then gives
    ``save_parts`` what it saves or records."""

    def __init__(self, dim: int, classes, out: Path | None = None) -> None:
        import numpy as np

        self.dim = dim
        self.out = out
        self.files, self.where = whole(dim, *classes)
        self.indexes: list = [None] * len(self.files)
        self.sealed: list = [None] * len(self.files)
        keys = classes[1]
        self.last = np.full(len(self.files), -1, dtype=np.int64)  # each file's highest key: complete once reached
        if self.where is None:
            self.last[0] = int(keys[-1]) if len(keys) else -1
        elif len(keys):
            files, at = np.unique(self.where[1][::-1], return_index=True)  # keys rise: a file's last is its highest
            self.last[files] = np.asarray(keys, dtype=np.int64)[len(keys) - 1 - at]

    def add(self, keys, mat) -> None:
        """Add vectors (keys rising from batch to batch) to their files; save the files completed."""
        import numpy as np

        from cortexctl.index import hnsw

        if not len(keys):
            return
        pos = np.zeros(len(keys), dtype=np.int64) if self.where is None \
            else _route(self.where[0], self.where[1], keys, len(self.files) - 1)
        for i in np.unique(pos).tolist():
            if self.sealed[i] is not None:
                raise ValueError(f"vectors after the last of file {i} of the build")  # keys out of order
            if self.indexes[i] is None:
                self.indexes[i] = hnsw.new(self.dim, self.files[i][1])
            sel = pos == i
            hnsw.add(self.indexes[i], keys if sel.all() else keys[sel], mat if sel.all() else mat[sel])
        if self.out is not None and len(self.files) > 1:
            top = int(keys[-1])
            for i in np.flatnonzero((self.last <= top) & (self.last >= 0)).tolist():
                if self.indexes[i] is not None and self.sealed[i] is None:
                    self._seal(i)

    def _seal(self, i: int) -> None:
        import tempfile

        from cortexctl.index import hnsw

        index = self.indexes[i]
        fd, tmp = tempfile.mkstemp(prefix=f".{INDEX_NAME}.", suffix=".tmp", dir=self.out)
        os.close(fd)
        try:
            fp = hnsw.save_beside(index, Path(tmp))
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self.sealed[i] = Sealed(Path(tmp), fp, len(index), hnsw.connectivity(index))
        self.indexes[i] = None
        del index

    def entries(self) -> list:
        """Per file, (classes, index or ``Sealed``), for ``save_parts``; a file given no vector
        (none of its keys arrived: the store changed under a build without the lock) gets an empty graph."""
        from cortexctl.index import hnsw

        out = []
        for i, (classes, size) in enumerate(self.files):
            got = self.sealed[i] if self.sealed[i] is not None else self.indexes[i]
            out.append((classes, hnsw.new(self.dim, size) if got is None else got))
        self.indexes = [None] * len(self.files)
        self.sealed = [None] * len(self.files)
        return out

    def discard(self) -> None:
        """Remove the files saved so far (a build that does not complete)."""
        for s in self.sealed:
            if s is not None:
                s.tmp.unlink(missing_ok=True)
        self.sealed = [None] * len(self.files)
        self.indexes = [None] * len(self.files)


def vector_class(visibility: str, actor: str) -> str:
    """The class of a memory's vectors (``search.VECTOR_CLASS``, which says it in SQL)."""
    return "public" if visibility == "public" else f"{visibility}:{actor}"


def _route(known, of_key, keys, default: int):
    """The file of each of ``keys``: ``of_key`` at its place among ``known`` (in order), else ``default``."""
    import numpy as np

    if not len(known):
        return np.full(len(keys), default, dtype=np.int64)
    at = np.minimum(np.searchsorted(known, keys), len(known) - 1)
    return np.where(known[at] == keys, of_key[at], default)


def grow(store, rec: IndexRecord, tail, classes, drop) -> list | None:
    """The record's files with the pending ``tail`` added ((keys, matrix) batches, keys above
    ``max_key``, whose classes are ``classes``: ``Tx.vector_classes``; an iterable, read once, batch
    by batch, so that a tail of a million vectors is not held in memory) and the ``drop``ped keys
    they hold removed: per file, its ``Part`` when nothing changes in it, else (classes, index) with
    the changes made (``_Filler`` says which file takes each vector). None when a file that changes
    cannot be opened (a rebuild follows)."""
    import numpy as np

    from cortexctl.index import hnsw

    # per file: [classes, Part or None (new), index once opened or made, vectors it holds]
    files = [[p.classes, p, None, p.count] for p in rec.parts]

    def index_of(f: list):
        if f[2] is None:
            f[2] = hnsw.open_mutable(part_path(store, f[1]), fingerprint_of(rec, f[1]))
        return f[2]

    gone = np.array(sorted(int(k) for k in drop if k <= rec.max_key), dtype=np.uint64)
    for f in files if len(gone) else ():
        part = f[1]
        slots = hnsw.slot_rows(part_path(store, part), fingerprint_of(rec, part)) if len(rec.parts) > 1 else None
        held = gone[np.isin(gone, slots[0])] if slots is not None else None  # None: known once loaded
        if held is not None and not len(held):
            continue
        index = index_of(f)
        if index is None:
            return None
        hnsw.remove(index, [int(k) for k in gone.tolist() if index.contains(k)] if held is None else held)
        f[3] = len(index)
    filler = _Filler(files, rec.dim, index_of)
    for keys, mat in tail:
        if not filler.add(classes, keys, mat):
            return None
    return [f[1] if f[2] is None else (f[0], f[2]) for f in files if f[2] is not None or f[1] is not None]


class _Filler:
    """Adds vectors to files ([classes, Part or None, index or None, vectors held], changed in
    place) as a fold does: a vector goes to its class's own file (one naming it alone) with room,
    else to the last file naming it, else to the last file (its class joins that file's), and a file
    holding PART_MAX takes no more: a full own file is followed by a new one of its class (before
    the last file), a full shared one by a new last file. The last file as the filler found it counts
    as shared whatever it names, so that the files made do not depend on the order classes are met."""

    def __init__(self, files: list, dim: int, index_of) -> None:
        self.files, self.dim, self.index_of = files, dim, index_of
        self.was_last = files[-1]

    def _target(self, name) -> list:
        from cortexctl.index import hnsw

        files = self.files
        own = [f for f in files if f[0] == (name,) and f is not self.was_last]
        if own:  # never a shared file that names the class too (an import leaves a class's first vectors there)
            if own[-1][3] < PART_MAX:
                return own[-1]
            files.insert(len(files) - 1, [(name,), None, hnsw.new(self.dim, PART_MAX), 0])
            return files[-2]
        named = [f for f in files if f[0] is not None and name in f[0]]
        at = named[-1] if named else files[-1]
        if at[3] < PART_MAX:
            return at
        if files[-1][3] < PART_MAX:
            return files[-1]
        files.append([(), None, hnsw.new(self.dim, PART_MAX), 0])
        return files[-1]

    def add(self, classes, keys, mat) -> bool:
        """Add a batch (``classes``: ``Tx.vector_classes`` of its keys, or more); False when a file
        that takes some cannot be opened."""
        import numpy as np

        from cortexctl.index import hnsw

        names, known, codes = classes
        if len(known):
            at = np.minimum(np.searchsorted(known, keys), len(known) - 1)
            code = np.where(known[at] == keys, codes[at], -1)
        else:
            code = np.full(len(keys), -1, dtype=np.int64)
        for c in np.unique(code).tolist():
            rows = np.flatnonzero(code == c)
            name = names[c] if c >= 0 else None
            while len(rows):
                f = self._target(name) if name is not None else self.files[-1]
                index = self.index_of(f)
                if index is None:
                    return False
                take = rows[: PART_MAX - f[3]] if name is not None else rows  # a key of no class: the last file
                hnsw.add(index, keys[take], mat[take])
                f[3] += len(take)
                rows = rows[len(take):]
                if name is not None and f[0] is not None and name not in f[0]:
                    f[0] = tuple(sorted({*f[0], name}))  # joins the file's classes
        return True


def save_parts(out: Path, entries: list) -> tuple[list, dict]:
    """Save the indexes of ``entries`` (per file, a ``Part`` kept as it is or (classes, index or a
    ``Sealed`` file, recorded as it is)) into temp files in ``out``: (the parts, {file name: (temp file, fingerprint)}) for
    ``install_parts``. The first file is ``cortex.usearch``, a new one after it gets a new name.
    Each index is let go once saved."""
    import tempfile

    from cortexctl.index import hnsw

    parts: list = []
    files: dict = {}
    try:
        for i, entry in enumerate(entries):
            if isinstance(entry, Part):
                parts.append(entry)
                continue
            classes, index = entry
            if len(entries) == 1:
                classes = None  # a lone file holds every class (an import's one saved graph names its class)
            entries[i] = None
            name = INDEX_NAME if i == 0 else part_name()
            if isinstance(index, Sealed):  # saved already (``Build``)
                files[name] = (index.tmp, index.fp)
                parts.append(Part.of_file(name, classes, index, index.fp))
                continue
            fd, tmp = tempfile.mkstemp(prefix=f".{INDEX_NAME}.", suffix=".tmp", dir=out)
            os.close(fd)
            files[name] = (Path(tmp), None)
            fp = hnsw.save_beside(index, Path(tmp))
            files[name] = (Path(tmp), fp)
            parts.append(Part.of_file(name, classes, index, fp))
            del index, entry
    except BaseException:
        for tmp, _fp in files.values():
            tmp.unlink(missing_ok=True)
        for entry in entries:  # the files saved already that it had not come to
            if entry is not None and not isinstance(entry, Part) and isinstance(entry[1], Sealed):
                entry[1].tmp.unlink(missing_ok=True)
        raise
    return parts, files


def _save_and_install(store: DuckStorage, entries: list, model: str, max_key: int, cleared) -> None:
    """Save the indexes of ``entries`` (``save_parts``) beside the files in place and install them
    with their record."""
    parts, files = save_parts(store.path, entries)
    try:
        install_parts(store, IndexRecord.of_parts(model, max_key, parts, cleared), files)
    finally:
        for tmp, _fp in files.values():
            tmp.unlink(missing_ok=True)


def fold_due(store: DuckStorage, model: str, last_key: int) -> bool:
    """After a write that stored vectors up to ``last_key``: the pending tail has grown to FOLD_AT
    (``store/fold.py`` folds it)."""
    rec = read_record(store)
    base = rec.max_key if rec is not None and rec.model == model else 0
    return last_key - base >= FOLD_AT


# -- searching ---------------------------------------------------------------------------
def nearest(tx, store: DuckStorage, model: str, query_vec, filters: Filters, n: int, *,
            exact: bool = False) -> tuple[list[tuple[str, float]], str | None]:
    """The ``n`` memories passing ``filters`` nearest to ``query_vec``: ([(id, cosine)], note).

    Filters that pass few memories (``EXACT_MAX`` or fewer: narrow ones, or a viewer who sees
    little of the store) send it to an exact comparison of those; otherwise the index is
    searched for as many as ``first_want`` says. ``exact``: skip the
    index. ``note`` says when the index had to be bypassed; the answer is exact
    then. Raises ``IndexUnusable`` when the index file cannot be trusted.
    """
    import numpy as np

    from cortexctl.index import hnsw

    cache = store.maps
    q = np.asarray(query_vec, dtype=np.float32).reshape(-1)
    if not np.any(q):
        return [], None
    def check(ids):
        return tx.passing(ids, filters)

    from cortexctl.store.rules import model_unusable

    dim = q.shape[0]
    unusable = model_unusable(tx, model, dim)
    if unusable is not None:
        return unusable
    total = tx.count_heads()
    passing = tx.count_heads(filters) if not exact and total > EXACT_MAX else total
    if exact or total <= EXACT_MAX or passing <= EXACT_MAX:
        return _exact(tx, filters, model, dim, q, n, store=None if exact else store, cache=cache), None
    classes = viewer_classes(filters)
    rec, views = _views(tx, store, model, dim, classes, cache)
    found: dict[str, float] = {}
    # the unindexed vectors (newer than the files), compared exactly, checked with the first batch from the index
    u_ids, u_versions, u_mat = tx.vectors_after(model, rec.max_key, dim)
    unindexed = list(zip(u_ids, u_versions, (u_mat @ q).tolist())) if u_ids else []
    base = max(n * 2, 64)
    size = sum(len(v) for v in views)
    want = first_want(n, total if len(rec.parts) == 1 else max(size, passing), passing)
    wants = [min(max(base, -(-want * len(v) // max(size, 1))), len(v)) for v in views]
    reach = [float("inf")] * len(views)  # each file's farthest similarity given, -inf once all of it was
    while True:
        rows: list = []
        for i, view in enumerate(views):
            if reach[i] == float("-inf"):
                continue
            keys, sims = hnsw.search(view, q, wants[i])
            sim_of = dict(zip(keys.tolist(), sims.tolist()))
            rows += [(i_, v, sim_of[k]) for k, i_, v in tx.vectors_of_keys(keys.tolist(), model)]
            reach[i] = float("-inf") if wants[i] >= len(view) else (float(sims.min()) if len(sims) else float("inf"))
        ok = check([i for i, _, _ in rows + unindexed])
        for i, v, s in rows + unindexed:
            if ok.get(i) == v:
                if s > found.get(i, -2.0):
                    found[i] = s
        unindexed = []
        if _reached(found, max(reach, default=float("-inf")), n):
            break
        if max((w for i, w in enumerate(wants) if reach[i] != float("-inf")), default=0) >= WIDEST * base:
            # A filter that keeps few of the memories the index finds: compare them all exactly.
            return (_exact(tx, filters, model, dim, q, n, store=store, cache=cache, opened=rec),
                    Remark("filter too narrow for the index; exact search"))
        wants = [w if reach[i] == float("-inf") else min(w * 4, WIDEST * base, len(views[i]))
                 for i, w in enumerate(wants)]
    ranked = sorted(((i, s) for i, s in found.items() if s > 0), key=lambda kv: (-kv[1], kv[0]))[:n]
    return ranked, None


VIEW_TRIES = 3  # records a find reads while folds keep replacing the files it checked before it viewed them


def _views(tx, store, model: str, dim: int, classes, cache) -> tuple[IndexRecord, list]:
    """The trusted record and a view of each file holding ``classes``. A file checked by
    ``index_state`` may be replaced (and removed) by a fold before it is viewed: the record is then
    another, and the files it names are checked and viewed instead."""
    from cortexctl.index import hnsw

    for _ in range(VIEW_TRIES):
        rec, why = index_state(tx, store, model, dim, classes)
        if why != "ok" or rec is None:
            path, why = _named(store, why)
            raise IndexUnusable(f"file {path} {why}", damaged=why == DAMAGED)
        views, bad = [], None
        for part in rec.searched_by(classes):
            view = hnsw.open_view(part_path(store, part), fingerprint_of(rec, part), cache)
            if view is None:
                bad = part
                break
            views.append(view)
        if bad is None:
            return rec, views
        if read_record(store) == rec:
            break  # the file its record still names cannot be viewed
    raise IndexUnusable(f"file {part_path(store, bad)} {DAMAGED}", damaged=True)


def _reached(found: dict[str, float], reach: float, n: int) -> bool:
    """Whether ``n`` of the memories ``found`` (id -> similarity) are at least as near as ``reach``,
    the farthest similarity the files' searches gave (of each file's farthest, the nearest; -inf
    when every file was searched whole, inf when a search gave none): a memory they did not give
    may be nearer than any found below that (one newer than the files, compared exactly), so only
    those count. By what a search gave, not by how many were asked: a search may give fewer while
    the file holds more (removed vectors' slots). A search that gave none reached nothing."""
    return sum(s >= reach for s in found.values()) >= n or reach == float("-inf")


def first_want(n: int, total: int, passing: int) -> int:
    """How many nearest the first search of the index asks for, to keep ``n`` that pass the filters
    when ``passing`` of the ``total`` memories do. With no filter beyond what every memory passes:
    twice ``n``, at least 64. Else enough that about twice that pass, were the nearest a fair
    sample (the search's width is the count asked for, and the last of the ``n`` should not sit at
    the edge of it), up to the widest search before an exact one (``WIDEST`` times the first).
    One walk of the graph where growing fourfold took up to three (a default find at a million
    memories, a tenth of which its viewer sees: 100, 400 and 1,600)."""
    base = max(n * 2, 64)
    if passing <= 0 or passing >= total:
        return base
    return min(-(-2 * base * total // passing), WIDEST * base)


def _exact(tx, filters: Filters, model, dim, q, n, *, store=None, cache=None, opened=None) -> list[tuple[str, float]]:
    """The ``n`` nearest of every candidate's vector, compared one by one (ties by ID).

    A backend that knows the candidates' vector keys cheaply (the search snapshot) gives
    those, and the trusted index file's vectors pick the candidates that can be among the ``n``
    nearest: an f16 file's from its own rows (``_by_slots``), an f32 file's (an earlier version's)
    by key from usearch when they are few (``_by_keys``); the store then hands those few vectors by
    key. Otherwise, or when the file does not cover the keys, the store hands every candidate's
    vector, a span of candidates at a time in key order (``vector_chunks``: each span's nearest
    are kept).
    Similarities are computed row by row (``_similarities``), so every way gives the same.
    ``opened``: the record of the files when the caller has checked those it reads already."""
    got = tx.vector_keys_for(filters, model) if store is not None else None
    ids = mat = None
    if got is not None:
        ids, keys = got
        if not len(ids):
            return []
        classes = viewer_classes(filters)
        rec, why = (opened, "ok") if opened is not None else index_state(tx, store, model, dim, classes)
        if why == "ok" and rec is not None:
            mat = _by_slots(tx, store, rec, rec.searched_by(classes), ids, keys, model, dim, q, n, cache)
            if mat is None and len(rec.parts) == 1 and int((keys <= rec.max_key).sum()) <= BY_KEYS_MAX:  # an f32 file
                from cortexctl.index import hnsw

                index = hnsw.open_view(index_path(store), fingerprint_of(rec), cache, by_key=True)
                if index is not None:
                    mat = _by_keys(tx, index, ids, keys, rec.max_key, model, dim, q, n)
            if mat is not None:
                ids, mat = mat
    if mat is not None:
        return _ranked(ids, mat, q, n)
    best: list[tuple[str, float]] = []
    for ids, mat in tx.vector_chunks(filters, model, dim):  # the n nearest of each chunk's, and of theirs
        best = sorted(best + _ranked(ids, mat, q, n), key=_nearest_first)[:n]
    return best


def _nearest_first(hit: tuple[str, float]) -> tuple[float, str]:
    """The order of ``_ranked``'s answer: similarity, high first, ties by ID."""
    return -hit[1], hit[0]


def _ranked(ids: list[str], mat, q, n: int) -> list[tuple[str, float]]:
    """The ``n`` of ``ids`` whose rows (``mat``) are nearest ``q``, by ``_similarities`` (ties by ID).
    Many float16 rows are first narrowed to those that can be among them (``_rough``)."""
    import numpy as np

    if not len(ids):
        return []
    if mat.dtype == np.float16 and len(ids) > ROUGH_FROM:
        keep = _rough(mat, q, n)
        if keep is not None:
            ids, mat = [ids[i] for i in keep.tolist()], mat[keep]
    sims = _similarities(mat.astype(np.float32, copy=False), q)
    top = np.lexsort((np.asarray(ids), -sims))[:n]
    return [(ids[i], float(sims[i])) for i in top if sims[i] > 0]


# Candidates whose vectors are taken from an f32 index file by key at most: usearch hands them one by
# one (about 5 us each), where DuckDB reads a large set through the filter faster. (An f16 file's rows
# are read from its bytes, ``_by_slots``: at a million vectors about 40 ms for the table of slots,
# where opening a view that takes vectors by key costs 100.)
BY_KEYS_MAX = 50_000
# Float16 rows from which the exact similarities are computed only for those a rough comparison keeps:
# numpy widens float16 at about 1.5 ns a value (0.15 s for 280k rows of 384), usearch compares them
# in a tenth of that.
ROUGH_FROM = 4096


def _by_keys(tx, index, ids, keys, max_key: int, model, dim, q, n):
    """(ids, float32 vectors) of the candidates that can be among the ``n`` nearest, by their keys:
    those the index file holds shortlisted by its vectors and then read from the store by key
    (``_shortlist``); those written after the file (the pending tail, keys above ``max_key``) from
    the store by key, all of them. None when the file lacks a key it should hold or the store one
    it gave."""
    import numpy as np

    from cortexctl.index import hnsw

    inside = keys <= max_key
    tail_ids = [i for i, x in zip(ids, inside.tolist()) if not x]
    ids_in = list(ids) if not tail_ids else [i for i, x in zip(ids, inside.tolist()) if x]
    keys_in, keys_tail = keys[inside], keys[~inside]
    mat = hnsw.vectors(index, keys_in)  # None when the file lacks one
    if mat is None:
        return None
    ids_in, keys_in = _shortlist(ids_in, keys_in, mat, q, n)  # the tail can only raise the n-th best
    mat = tx.vectors_at_keys(np.concatenate((keys_in, keys_tail)), model, dim)  # None when one is gone
    return None if mat is None else (ids_in + tail_ids, mat)


def _by_slots(tx, store, rec: IndexRecord, parts: list, ids, keys, model, dim, q, n, cache):
    """``_by_keys`` without usearch's table of keys: the candidates' rows found among the rows of the
    index files of ``parts`` (``hnsw.slot_rows``, f16 files) by the key of each slot, narrowed by
    ``_rough``, and those kept read from the store by key, where each must be the very row the file
    holds (else the file is not read as it was written). None when a file cannot be read so, the
    files lack a key they should hold or hold one twice, or the store lacks one they gave."""
    import numpy as np

    from cortexctl.index import hnsw

    inside = keys <= rec.max_key
    inside_at = np.flatnonzero(inside)
    keys_in = keys[inside_at]
    if not len(keys_in) or not parts:
        return None
    order = np.argsort(keys_in, kind="stable")
    ordered = keys_in[order]
    seen = np.zeros(len(ordered), dtype=np.int64)
    which_of, rows_of = [], []
    for part in parts:
        got = hnsw.slot_rows(part_path(store, part), fingerprint_of(rec, part), cache)
        if got is None:
            return None
        slot_keys, rows = got
        pos = np.minimum(np.searchsorted(ordered, slot_keys), len(ordered) - 1)
        slots = np.flatnonzero(ordered[pos] == slot_keys)
        seen += np.bincount(pos[slots], minlength=len(ordered))
        which_of.append(inside_at[order[pos[slots]]])  # the candidate in each of those slots
        rows_of.append(rows[slots])
    if (seen != 1).any():
        return None  # the files lack a key, or hold one twice
    which, rows = (which_of[0], rows_of[0]) if len(parts) == 1 else (np.concatenate(which_of), np.concatenate(rows_of))
    keep = _rough(rows, q, n)  # the tail can only raise the n-th best
    if keep is None:
        return None
    which, kept_rows = which[keep], rows[keep]
    tail = np.flatnonzero(~inside)
    mat = tx.vectors_at_keys(np.concatenate((keys[which], keys[tail])), model, dim)  # None when one is gone
    if mat is None or not np.array_equal(mat[:len(which)], kept_rows.astype(np.float32)):
        return None
    return [ids[i] for i in which.tolist()] + [ids[i] for i in tail.tolist()], mat


def _similarities(mat, q):
    """``mat @ q`` with each row summed alone in one fixed order (BLAS may sum a row differently by
    its place among the rows): the same vector gives the same float32 whatever else is compared."""
    import numpy as np

    return np.einsum("ij,j->i", mat, q, optimize=False)


F16_ERROR = 2.0 ** -11  # float16 keeps 11 significant bits: rounding moves a normal value by at most this part
F16_SUBNORMAL = 2.0 ** -25  # and a value below float16's smallest normal by at most this much


def _shortlist(ids: list[str], keys, rounded, q, n: int):
    """Of the candidates, those whose exact similarity can be among the ``n`` largest, judged by
    their float16-rounded vectors (``rounded``, float32 rows). A rounded similarity is within
    ``delta`` of the exact one: per component |x16 - x| <= 2^-11 |x| (2^-25 below the normal range),
    so |s16 - s| <= 2^-11 |q| |x| + 2^-25 |q|_1, plus both float32 sums' own error (each at most
    d 2^-24 |q| |x|). The n-th largest exact similarity t is at least the n-th largest rounded one
    less delta, so every candidate at or above t has a rounded similarity of at least that less
    2 delta: those are kept, ties included."""
    import numpy as np

    if len(ids) <= n:
        return ids, keys
    sims = _similarities(rounded, q)
    q_norm = float(np.linalg.norm(q))
    x_norm = float(np.linalg.norm(rounded, axis=1).max()) / (1.0 - F16_ERROR)
    d = len(q)
    delta = (F16_ERROR * q_norm * x_norm + F16_SUBNORMAL * float(np.abs(q).sum())
             + 2.0 * d * 2.0 ** -24 * q_norm * x_norm) * 1.01 + 1e-12
    nth = float(np.partition(sims, len(sims) - n)[len(sims) - n])
    keep = np.flatnonzero(sims >= nth - 2.0 * delta)
    return [ids[i] for i in keep.tolist()], keys[keep]


def _rough(rows, q, n: int):
    """Positions of the float16 ``rows`` whose exact similarity to ``q`` (``_similarities`` of the rows
    widened to float32) can be among the ``n`` largest, judged by usearch's (``hnsw.nearest_rows``:
    the query rounded to float16, products summed in float32, the similarity as one less a
    distance); None when the values allow no bound (an infinite or NaN value, a query beyond float16).

    With m the largest magnitude among the rows' values, the rough similarity is within ``delta``
    of the exact one: rounding the query moves it by at most 2^-11 m |q|_1 + 2^-25 d m (below
    float16's normal range), each float32 sum of d products (the rough one and the exact one) by
    at most d 2^-24 m |q|_1, and the distance and its complement by a few units in the last place
    of 1 + m |q|_1. Every candidate at or above the n-th exact similarity then has a rough one of
    at least the n-th rough one less 2 delta (as in ``_shortlist``): those are kept, ties
    included. The rows are compared in growing numbers until the last given is below that."""
    import numpy as np

    from cortexctl.index import hnsw

    if len(rows) <= n:
        return np.arange(len(rows))
    top = max(int(rows.view(np.int16).max()), int(rows.view(np.uint16).max()) - 0x8000, 0)
    q_abs = float(np.abs(q).max()) if len(q) else 0.0
    if top >= 0x7C00 or not q_abs < 65504.0:  # a value float16 cannot bound, or a query it cannot hold
        return None
    m = float(np.array([top], dtype=np.uint16).view(np.float16)[0])
    mq = m * float(np.abs(q).sum())
    d = len(q)
    delta = ((2.0 ** -11 + 2.0 * d * 2.0 ** -24) * mq * (1.0 + 2.0 ** -10) + 2.0 ** -25 * d * m
             + 2.0 ** -21 * (1.0 + mq)) * 1.01 + 1e-12
    count = max(8 * n, 256)
    while True:
        at, sims = hnsw.nearest_rows(rows, q, count)
        cut = float(sims[n - 1]) - 2.0 * delta
        if len(at) >= len(rows) or float(sims[-1]) < cut:
            return np.sort(at[sims >= cut])
        count = len(rows) if count * 8 >= len(rows) else count * 8


WHOLE_TRIES = 5  # files a verify reads whole while folds keep replacing the one it reads


def verify_index(tx, store, model: str) -> list[str]:
    """Problems with the index files for verify (whole-file CRCs included); [] when sound or absent."""
    from cortexctl.index import hnsw

    rec = read_record(store)
    if rec is None:
        if os.path.lexists(record_path(store)) or os.path.lexists(index_path(store)):
            return [f"index file {INDEX_NAME}: its record {RECORD_NAME} is missing, unreadable or damaged "
                    "(cortexctl reindex rebuilds both)"]
        return []
    if rec.model != model:
        return []  # built by another model: reindex rebuilds it, nothing is wrong
    count, max_key, dim = tx.vector_stats(model)
    for _ in range(WHOLE_TRIES):
        rec, why = index_state(tx, store, model, dim)
        if why != "ok":
            path, why = _named(store, why)
            out = [f"index file {path.name}: {why} (cortexctl reindex rebuilds it)"]
            if why == DAMAGED and rec is not None:  # every damaged file named, not the first alone
                out += [f"index file {p.file}: {DAMAGED} (cortexctl reindex rebuilds it)" for p in rec.parts
                        if p.file != path.name and _part_state(store, rec, p) == DAMAGED]
            return out
        bad = [p for p in rec.parts if not hnsw.whole_ok(part_path(store, p), fingerprint_of(rec, p))]
        if not bad:
            return _misfiled(tx, store, rec, model)
        if read_record(store) == rec and not _just_installed(index_path(store)):
            break  # a file its record describes is not whole
        # a fold put new files (and their record) in place while they were read: check those
    return [f"index file {p.file}: its checksum does not match (damaged; cortexctl reindex rebuilds it)" for p in bad]


def _misfiled(tx, store, rec: IndexRecord, model: str) -> list[str]:
    """Files holding vectors of classes their record does not list (a find of a viewer who may see
    those vectors would not search the file: the record's classes are trusted as they are read), a
    vector in two files, or one up to the record's highest key in none (the counts the record keeps
    add up all the same when one is in two files and another in none)."""
    import numpy as np

    from cortexctl.index import hnsw

    if len(rec.parts) == 1 or not hasattr(tx, "vector_classes"):
        return []
    names, keys, codes = tx.vector_classes(model)
    out = []
    every: list = []
    for part in rec.parts:
        got = hnsw.slot_rows(part_path(store, part), fingerprint_of(rec, part)) if part.count else (np.zeros(0, np.uint64),)
        if got is None:
            every = None  # a file whose rows cannot be read so: its keys are not known here
            continue
        held = got[0][got[0] != hnsw.FREE_KEY]
        if every is not None:
            every.append(held)
        if part.classes is None or not len(keys):
            continue  # a file of every class (the first, found full by a fold)
        at = np.minimum(np.searchsorted(keys, held), len(keys) - 1)
        live = at[keys[at] == held]  # dropped keys are searched by no one
        stray = {names[c] for c in np.unique(codes[live]).tolist()} - set(part.classes)
        if stray:
            out.append(f"index file {part.file}: holds vectors of {', '.join(sorted(stray))}, which its record "
                       "does not list (cortexctl reindex rebuilds it)")
    if every:
        held = np.concatenate(every)
        keys_held, times = np.unique(held, return_counts=True)
        twice = keys_held[times > 1]
        if len(twice):
            out.append(f"index files: {len(twice)} vector(s) in two files, key {int(twice[0])} the first "
                       "(cortexctl reindex rebuilds them)")
        want = keys[keys <= rec.max_key]
        lost = want[~np.isin(want, keys_held)]
        if len(lost):
            out.append(f"index files: {len(lost)} vector(s) up to key {rec.max_key} in no file, key {int(lost[0])} "
                       "the first (cortexctl reindex rebuilds them)")
    return out


def health(store: DuckStorage, model: str | None, *, folding: bool = False) -> dict:
    """The healthcheck's ``index`` block: the file, and whether it can be trusted for ``model``
    (a store too small to have one is searched exactly, which is as it should be); the
    ``connectivity`` of its graph, and ``denser_on_rebuild`` when the graph grew past the size it
    was built for (``hnsw.sparser_than_wanted``: ``reindex --rebuild`` builds files whose graphs suit their size); the
    number of ``files``, and ``split_on_rebuild`` when a file holds classes a whole build would
    put in files of their own (``would_split``: ``reindex --rebuild`` splits it).
    ``folding``: a background fold is under way (``store/fold.py``), building a file not there yet."""
    from cortexctl.index import hnsw

    block = {"path": str(index_path(store)), "exists": index_path(store).is_file(),
             "count": None, "model": None, "dimension": None, "consistent": None, "state": None,
             "connectivity": None, "files": None, "denser_on_rebuild": False, "split_on_rebuild": False,
             "building": False}
    if model is None or not store.exists():
        return block
    with store.reading() as tx:
        n, _max_key, dim = tx.vector_stats(model)
        rec, why = index_state(tx, store, model, dim)
        counts = tx.class_counts(model) if why == "ok" and rec is not None else {}
    building = why != "ok" and bool(n) and folding
    small = why == "missing" and n < FOLD_AT and not building
    state = "not built yet (searched exactly)" if small else why
    if building:
        state = f"{why}; being built in the background (searched exactly meanwhile)"
    block.update(count=rec.count if rec else 0, model=rec.model if rec else model,
                 dimension=rec.dim if rec else dim, state=state,
                 consistent=why == "ok" or small or building or not n, building=building)
    if why == "ok" and rec is not None:
        block.update(connectivity=rec.connectivity, files=len(rec.parts), split_on_rebuild=would_split(rec, counts),
                     denser_on_rebuild=any(hnsw.sparser_than_wanted(p.connectivity, p.count) for p in rec.parts))
    return block


def would_split(rec: IndexRecord, counts: dict) -> bool:
    """A file holds more than PART_MAX vectors (an import's), or a class of PART_MIN vectors
    (``counts``: class -> vectors) and other classes of as many together: a whole build would give
    them files of their own (a fold never splits one; a class new since the build joins the last
    file, which may be a large class's own)."""
    if any(p.count > PART_MAX for p in rec.parts):
        return True
    own = {p.classes[0] for p in rec.parts if p.classes is not None and len(p.classes) == 1}
    for part in rec.parts:
        # a class with files of its own counts for nothing in a shared one (an import leaves its first vectors there)
        held = sorted((counts.get(c, 0) for c in (counts if part.classes is None else part.classes)
                       if c not in own or len(part.classes or ()) == 1), reverse=True)
        if len(held) > 1 and held[0] >= PART_MIN and sum(held[1:]) >= PART_MIN:
            return True
    return False
