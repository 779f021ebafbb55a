"""Folding the DuckDB backend's caches off the write path.

A store's index file and search snapshot (``vector_index.py``, ``snapshot/``) fall behind its writes
by design: a write adds to the pending tail of the index and to the snapshot's delta. Once the tail
holds ``vector_index.FOLD_AT`` vectors, or the delta ``FOLD_DELTA`` memories, they are folded in.
The write that finds them grown does not fold: it starts a **background fold** (a detached
``python -m cortexctl.store.fold_process``) and returns. ``CORTEXCTL_FOLD=inline`` folds in the
writing process instead, after its write (scripts that want the files current when the command
returns; the tests).

A fold holds the writer lock only to read what to fold and to put the result in place, never while
it builds:

1. **Under the lock:** the index record, the vectors newer than the file, the keys dropped since
   it, and the rows of every memory the snapshot's delta names (``snapshot.collect_delta``: the same
   rows a write reads). With no file to trust (missing, damaged, another model's: after a
   ``restore``, say), every vector of the model instead, written to the fold's work directory.
   The generation is clean and no writer can run: the rows, the snapshot and the stamp taken then
   are one state of the store.
2. **Without it:** the index file loaded, the dropped keys taken out and the new vectors added (or a
   whole new file built from the written vectors), saved beside the store; the snapshot made from
   the previous one plus those rows
   (``snapshot.merge``, no DuckDB) and written beside it, stamped with the state of step 1.
   Writers go on meanwhile.
3. **Under the lock again:** when the index record is still the one step 1 read (no other fold or
   reindex came between) and the database file is the same one (no restore), both files are
   renamed into place. Writes made meanwhile are followed as
   any write is: a delta on the new snapshot, read from the journal after the position it covers.
   Last, the dropped keys the new index no longer holds leave ``vectors_dropped`` (the delta
   follows that too).

Work files go to the store's scratch area (``store/scratch.py``): a fold killed at any point leaves
the old files in place and its work for the next writer's sweep. A fold that fails (rather than is
killed) leaves ``cortex.fold.log``: when, and its error in one line, as git leaves ``gc.log``;
healthcheck reports it, and the next fold or index update that completes removes it. One fold runs at a time per store:
the process that starts one takes ``cortex.fold.lock`` (``flock``) and hands it to the child, which
holds it until it exits, so a write that finds a fold under way starts no other, and ``wait_idle``
can wait for it.
"""

from __future__ import annotations

import fcntl
import os
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

FOLD_LOCK = "cortex.fold.lock"
FOLD_LOG = "cortex.fold.log"  # the last fold's failure, until a fold completes
LOG_MAX = 4096  # bytes of the fold log read back
FOLD_DELTA = 500  # memories in the snapshot's delta that start a fold (a write rewrites the delta: kept small)
LOCK_WAIT = 120.0  # seconds a background fold waits for the writer lock at each step
ENV = "CORTEXCTL_FOLD"  # "background" (the default) or "inline"


def mode() -> str:
    return "inline" if os.environ.get(ENV, "").strip().lower() == "inline" else "background"


def request(store, model: str | None) -> None:
    """A write found the tail or the delta grown: fold now (inline) or start a background fold,
    unless one is under way. Never fails the write."""
    from cortexctl.errors import CortexError

    if getattr(_folding, "on", False):
        return  # the fold's own writes
    try:
        if mode() == "inline":
            with _fold_lock(store.path) as fd:
                if fd is not None:
                    _folding.on = True
                    try:
                        run(store, model)
                    finally:
                        _folding.on = False
        else:
            start(store.path, model)
    except (CortexError, OSError) as exc:  # StoreBusy among them
        failed(store.path, exc)


_folding = threading.local()


@contextmanager
def _fold_lock(store_path: Path) -> Iterator[int | None]:
    """The fold lock's descriptor when no other fold holds the lock, else None."""
    fd = os.open(Path(store_path) / FOLD_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield None
            return
        yield fd
    finally:
        os.close(fd)  # a child given the descriptor keeps the lock until it exits


def start(store_path: Path, model: str | None) -> bool:
    """Start a detached background fold of the store at ``store_path``; False when one is under way.
    The fold lock is taken here and handed to the child (its descriptor inherited: the lock belongs
    to the open file, which the child keeps open until it exits), so no second fold starts meanwhile."""
    import subprocess

    with _fold_lock(store_path) as fd:
        if fd is None:
            return False
        argv = [sys.executable, "-m", "cortexctl.store.fold_process", str(store_path), model or "", str(fd)]
        subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         pass_fds=(fd,), start_new_session=True)
        return True


def failed(store_path: Path, exc: BaseException) -> None:
    """Leave ``cortex.fold.log`` saying when a fold failed and why (one line). Never fails."""
    import orjson

    from cortexctl.errors import CortexError
    from cortexctl.files import atomic_path

    if isinstance(exc, CortexError):
        why = exc.message
    elif isinstance(exc, OSError) and exc.strerror:
        why = f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    else:
        why = f"{type(exc).__name__}: {exc}"
    lines = str(why).strip().splitlines() or [type(exc).__name__]
    doc = {"at": _now(), "error": lines[0][:500]}
    try:
        with atomic_path(Path(store_path) / FOLD_LOG, sync=False) as tmp:
            Path(tmp).write_bytes(orjson.dumps(doc) + b"\n")
    except OSError:
        pass  # a store directory that takes no file: there is nowhere to say it


def completed(store_path: Path) -> None:
    """A fold (or a whole index update) completed: the last failure is no longer the news."""
    try:
        os.unlink(Path(store_path) / FOLD_LOG)
    except OSError:
        pass


def last_failure(store_path: Path) -> dict | None:
    """{at, error} of the last fold that failed since one completed, or None. A log that cannot be
    read as one (it is ours, but a user may have edited it) is reported by what it holds."""
    import orjson

    try:
        from cortexctl.files import read_regular

        raw = read_regular(Path(store_path) / FOLD_LOG, LOG_MAX)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return {"at": None, "error": f"{FOLD_LOG} cannot be read ({exc.strerror})"}
    try:
        doc = orjson.loads(raw)
        if isinstance(doc, dict) and isinstance(doc.get("error"), str) and isinstance(doc.get("at"), (str, type(None))):
            return {"at": doc["at"], "error": doc["error"]}
    except orjson.JSONDecodeError:
        pass
    return {"at": None, "error": f"{FOLD_LOG} holds no fold's failure (a fold failed, or the file was edited)"}


def _now() -> str:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def under_way(store_path: Path) -> bool:
    """A fold of the store is running now (another process holds its lock)."""
    try:
        fd = os.open(Path(store_path) / FOLD_LOCK, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # a shared lock taken here goes with the descriptor
    return False


def wait_idle(store_path: Path) -> None:
    """Return once no fold of the store is under way (waits for the one running, if any)."""
    try:
        fd = os.open(Path(store_path) / FOLD_LOCK, os.O_RDWR)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    finally:
        os.close(fd)


def run(store, model: str | None) -> dict:
    """Fold the store's pending vectors into its index file and its delta into its snapshot (see the
    module docstring). Returns what was done: {"index": ..., "snapshot": ...}."""
    from cortexctl.store import scratch
    from cortexctl.store import vector_index as vi

    whole_from = 0  # vectors from which a missing index file is built whole
    if model is None:
        rec = vi.read_record(store)
        model = rec.model if rec is not None else _only_model(store)
        if rec is None:  # a store too small for an index file has none: not built for a delta's fold
            whole_from = vi.FOLD_AT
    taken: dict = {}
    work = None
    try:
        with store.exclusive(), scratch.private():
            work = scratch.make(scratch.areas(store), "fold")
            _take(store, model, work, whole_from, taken)  # filled in place: released whatever happens
        with scratch.private():
            built = _build(store, taken, work)
        with store.exclusive(), scratch.private():
            done = _install(store, model, taken, built)
        if "abandoned" not in done.values():
            completed(store.path)
        return done
    finally:
        release(taken)
        scratch.remove(work)


def release(taken: dict) -> None:
    """What ``_take`` holds open: the snapshot's mapping and the database file's descriptor."""
    if taken.get("snapshot") is not None:
        taken["snapshot"].close()
        taken["snapshot"] = None
    if taken.get("rebuild") is not None and taken["rebuild"].get("db_fd") is not None:
        os.close(taken["rebuild"]["db_fd"])
        taken["rebuild"]["db_fd"] = None


def _only_model(store) -> str | None:
    """The model of the store's vectors when they are all of one (a store with no index record
    yet: after a restore, or with its record lost), else None."""
    if not store.db_path.is_file():
        return None
    from cortexctl.store import search

    with store.reading() as tx:
        models = search.vector_models(tx.con, limit=2)
    return models[0] if len(models) == 1 else None


def _take(store, model: str | None, work: Path, whole_from: int = 0, taken: dict | None = None) -> dict:
    """Step 1, under the writer lock: what to fold, as one state of the store (into ``taken``, which
    ``release`` lets go of, whether this step completes or not). With no trusted index file, every
    vector of the model is written to ``work`` (``_spool``) for step 2 to build a whole new file from."""
    from cortexctl.store import snapshot
    from cortexctl.store.snapshot import format as sf
    from cortexctl.store import vector_index as vi

    taken = {} if taken is None else taken
    taken.update({"model": model, "rec": None, "tail": None, "drop": [], "snapshot": None, "doc": None})
    if not store.db_path.is_file():
        return taken
    vi.settle(store)
    start = snapshot.delta_start(store.path)
    with store.reading() as tx:
        if model is not None:
            count, max_key, dim = tx.vector_stats(model)
            if dim is not None:
                rec, why = vi.index_state(tx, store, model, dim)
                if (why != "ok" or rec is None) and count < whole_from:
                    pass  # no index file yet, and none wanted: searched exactly
                elif why != "ok" or rec is None:
                    # the file is missing, damaged or another model's: built whole from the vectors
                    # spooled now, and installed only while the record is still the one read here and
                    # the store holds the database file kept open (an open file's inode is not reused).
                    # That descriptor is closed by ``release`` only, once this process has no DuckDB
                    # connection open: closing another descriptor of the file drops DuckDB's lock
                    rb = taken["rebuild"] = {"was": vi.read_record(store), "db_fd": os.open(store.db_path, os.O_RDONLY),
                                             "dim": dim, "max_key": max_key, "count": count}
                    rb["spool"] = _spool(tx, model, dim, work)
                    rb["classes"] = tx.vector_classes(model)  # the files the build makes (vi.layout)
                    taken["drop"] = tx.dropped_keys(model)
                else:
                    taken["rec"] = rec
                if taken["rec"] is not None and (max_key > rec.max_key or tx.dropped_keys(model)):
                    keys, mats = [], []
                    for k, m in tx.iter_vectors(model, dim, after=rec.max_key):
                        keys.append(k)
                        mats.append(m)
                    taken["tail"] = (keys, mats)
                    # the highest live key, as a foreground fold records it: a dropped key above it is out
                    # of the files and leaves vectors_dropped, and the next vector may be given it again
                    taken["max_key"] = max_key
                    taken["classes"] = tx.vector_classes(model, after=rec.max_key)
                    # every key dropped by then: those in the file leave it, and all leave vectors_dropped
                    taken["drop"] = tx.dropped_keys(model)
        if start is not None:
            try:
                taken["doc"] = snapshot.collect_delta(tx.con, start)
            except Exception:  # noqa: BLE001 - a cache: built whole instead
                from cortexctl.errors import signalled

                if signalled() is not None:  # an interrupt that DuckDB made an error of: the fold stops
                    raise
                taken["doc"] = None
    if taken["doc"] is not None:
        got = sf._header_of(store.path / sf.SNAPSHOT_NAME)
        if got is not None and sf._mark(got[0]) == start["base"]:
            taken["current"] = sf._stamp_ok(store.path, got[0])  # no delta: nothing to merge but drops
            # every block checked as merge reads it, whatever the stamp says: a damaged block is not
            # carried into the next snapshot under fresh CRCs
            taken["snapshot"] = sf._map(store.path / sf.SNAPSHOT_NAME, got[0], got[1], use_stamp=False)
        gen = sf.read_gen(store.path)
        if gen is None or not gen[2]:
            taken["snapshot"] = None
        else:  # the state the rows were read at: the new snapshot's stamp (the connection is closed)
            taken["stamp"] = {"token": gen[0], "counter": gen[1], "schema_version": sf._schema_version(),
                              "db": sf.db_identity(store.path)}
    return taken


def _spool(tx, model: str, dim: int, work: Path) -> dict:
    """Every vector of ``model`` (in key order) written to ``work`` as one float32 matrix, for a
    whole index built without the writer lock; the keys are kept in memory."""
    import zlib

    import numpy as np

    keys, runs = [], []
    path = work / "vectors.f32"
    with open(path, "wb") as fh:
        for k, m in tx.iter_vectors(model, dim):
            keys.append(np.asarray(k, dtype=np.uint64))
            raw = np.ascontiguousarray(m, dtype=np.float32)
            runs.append((len(raw), zlib.crc32(raw)))  # read back checked: the file is outside the database
            fh.write(raw.data)  # a full disk says so (ENOSPC), which numpy's tofile does not
    return {"path": path, "keys": np.concatenate(keys) if keys else np.zeros(0, dtype=np.uint64), "runs": runs}


def _same_db(store, fd: int) -> bool:
    """The store still holds the database file ``fd`` is open on (a restore or a space reclaim
    puts another in place)."""
    try:
        now, then = os.stat(store.db_path), os.fstat(fd)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (then.st_dev, then.st_ino)


def _rebuilt(store, rb: dict):
    """The indexes of a whole build of the spooled vectors (``_spool``), one a file of their classes'
    layout (``vector_index.Build``), built as ``vector_index.update`` builds them;
    None as soon as the store holds another database file (the build would be thrown away)."""
    import zlib

    import numpy as np

    from cortexctl.errors import CortexError
    from cortexctl.store import vector_index as vi

    spool = rb["spool"]
    keys = spool["keys"]
    build = vi.Build(rb["dim"], rb["classes"], spool["path"].parent)  # files saved in the work area as they complete
    if len(keys):
        mat = np.memmap(spool["path"], dtype=np.float32, mode="r", shape=(len(keys), rb["dim"]))
        at = 0
        for n, crc in spool["runs"]:
            if not _same_db(store, rb["db_fd"]):
                return None
            part = np.array(mat[at:at + n])
            if zlib.crc32(part) != crc:
                raise CortexError(f"the fold's work file {spool['path']} changed while the index was built")
            build.add(keys[at:at + n], part)
            at += n
        del mat
    os.unlink(spool["path"])
    return build.entries()


def _build(store, taken: dict, work: Path) -> dict:
    """Step 2, without the lock: the new index files and snapshot, written into ``work``."""
    from cortexctl.store import vector_index as vi
    from cortexctl.store.snapshot import format as sf

    built: dict = {"index": None, "snapshot": None}
    rec = taken["rec"]
    rb = taken.get("rebuild")
    entries = None
    if rb is not None:
        entries = _rebuilt(store, rb)
        if entries is None:  # another store now: _install abandons the fold
            return built
        model, top = taken["model"], rb["max_key"]
    elif rec is not None and taken["tail"] is not None:
        entries = vi.grow(store, rec, list(zip(*taken["tail"])), taken["classes"], taken["drop"])
        model = rec.model
        top = taken["max_key"]
    if entries is not None:
        parts, files = vi.save_parts(work, entries)
        del entries
        built["index"] = (files, vi.IndexRecord.of_parts(model, top, parts, taken["drop"]))
    cleared = {taken["model"]: taken["drop"]} if built["index"] is not None and taken["drop"] else None
    if taken["snapshot"] is not None and taken.get("current") and not cleared:
        built["snapshot"] = "current"
    elif taken["snapshot"] is not None:
        from cortexctl.store.snapshot.merge import merge

        got = merge(taken["snapshot"], taken["doc"], cleared=cleared)
        if got is not None:
            arrays, extras = got
            tmp = work / sf.SNAPSHOT_NAME
            built["written"] = sf.write_beside(tmp, arrays, extras, taken["stamp"])
            built["snapshot"] = tmp
            built["journal_seq"] = extras["journal_seq"]
    return built


def _install(store, model: str | None, taken: dict, built: dict) -> dict:
    """Step 3, under the lock again: the files put in place, and the writes made meanwhile followed."""
    from cortexctl.store import snapshot
    from cortexctl.store import vector_index as vi
    from cortexctl.store.snapshot import format as sf

    done = {"index": "none", "snapshot": "none"}
    gen = sf.read_gen(store.path)
    rb = taken.get("rebuild")
    if (taken["rec"] is not None and vi.read_record(store) != taken["rec"]) \
            or (rb is not None and (vi.read_record(store) != rb["was"] or not _same_db(store, rb["db_fd"]))) \
            or (taken.get("stamp") is not None and (gen is None or gen[0] != taken["stamp"]["token"])):
        # another fold or a reindex came between, or the store was replaced (a restore): the rows
        # taken are not this store's
        return {"index": "abandoned", "snapshot": "abandoned"}
    if built["index"] is not None:
        files, rec = built["index"]
        vi.install_parts(store, rec, files)
        done["index"] = "fold" if rb is None else "rebuild"
    cleared = taken["drop"] if built["index"] is not None else []
    if built["snapshot"] == "current":
        return done
    if built["snapshot"] is None:  # no snapshot to build on, or the merge failed its checks: built whole
        if cleared:
            with store.transaction() as tx:
                tx.clear_folded(model, cleared)
                tx.wide = True  # the snapshot is built from the store as it is then
        done["snapshot"] = store.refresh_snapshot()["action"]
        return done
    sf.install(built["snapshot"], store.path, built["written"])
    sf._unlink(store.path / sf.DELTA_NAME)
    done["snapshot"] = "merged"
    header = sf._header_of(store.path / sf.SNAPSHOT_NAME)
    if header is not None and not sf._stamp_ok(store.path, header[0]):
        # written to since step 1: a delta on the new snapshot, from where it stands
        start = snapshot.delta.start_on(header[0], built["journal_seq"])
        with store.reading() as tx:
            got = snapshot.collect_delta(tx.con, start)
        gen = sf.read_gen(store.path)
        if gen is not None:
            snapshot.write_delta(store, start, got, gen[0], gen[1])
    if cleared:  # the new snapshot left them out already: its delta follows
        with store.transaction() as tx:
            tx.clear_folded(model, cleared)
    return done
