"""Opening the store: locking, waiting, permissions, schema checks.

A store is a directory (mode 0700) holding ``cortex.duckdb`` (mode 0600, the
ground truth) and ``.lock``. DuckDB lets one process hold the file read-write,
or many hold it read-only, never both. So:

- readers open read-only, for as short a time as they need;
- writers first take an exclusive ``flock`` on ``.lock`` (our own writers
  queue there, woken as it is let go: ``_flock_until``), then open read-write;
- a file locked by another process means retrying with jittered exponential
  backoff until ``wait`` seconds have passed, then ``StoreBusy`` (exit 4).

Never open, copy or hash the live ``.duckdb`` file through another descriptor
in a process that has it open: DuckDB's POSIX lock would silently drop.
"""

from __future__ import annotations

import errno
import fcntl
import os
import random
import stat
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from cortexctl.errors import CortexError, IntegrityError, StoreBusy, UsageError, no_space, signalled
from cortexctl.files import fsync_path
from cortexctl.store import DEFAULT_WAIT
from cortexctl.store.interface import NoStore
from cortexctl.store.search import VECTOR_DTYPE

if TYPE_CHECKING:
    from cortexctl.store.duck import DuckTx

DB_NAME = "cortex.duckdb"
LOCK_NAME = ".lock"
# Files of the store that cortexctl creates (the database, its WAL, the lock, later the index).
OWN_FILE_PREFIXES = ("cortex.", LOCK_NAME)
# DuckDB's memory in a bulk load's transactions (``transaction(bulk=True)``): at a million memories
# an import's compacting commits took it to about 1.3 GB unbounded; 512 MB left an import at 1.06 GB
# at 300k where 256 MB left it at 0.82 GB in the same time (bench/README.md).
LOAD_MEMORY = "256MB"
# DuckDB's memory in a bounded reading view (``reading(bounded=True)``: verify's workers): unbounded,
# each worker cached what its view read, about 1.6 GB apiece at a million memories.
READ_MEMORY = "512MB"
SETTLE = 0.5  # seconds a reader looks again at a file that reads as damaged (``_open_reader``)
START_TRIES = 20  # attempts, 5 ms apart, to start a background fold while another process looks at its lock


def _load_for_writing() -> None:
    """Import what a writer's turn needs before it queues for the writer lock. A cold process
    would otherwise import the database driver while holding the lock: a large part of a short
    write's turn (seconds on a loaded machine), and every other writer waits through it."""
    import duckdb  # noqa: F401
    import orjson  # noqa: F401

    from cortexctl.store import duck, feedback, grants, migrations, scratch, snapshot  # noqa: F401


def _is_lock_error(exc: Exception) -> bool:
    text = str(exc).lower()
    return "lock" in text and ("conflicting" in text or "could not set" in text)


def _integrity(exc: BaseException, path: Path, hint: str | None = None) -> CortexError:
    full = no_space(exc)
    if full is not None:  # a full disk is not a damaged store
        return full
    return IntegrityError(f"store {path} cannot be read: {str(exc).splitlines()[0]}", hint=hint, path=str(path))


def _flock_until(fd: int, deadline: float) -> bool:
    """Take the exclusive ``flock`` on ``fd``, waiting until ``deadline`` (``time.monotonic``).

    The wait is a blocked ``flock`` (in a thread, so that it can be given up at the deadline): the
    kernel wakes it the moment the holder lets go. Waiters that polled with a growing backoff slept
    through most releases, and a writer that had just come usually took the lock from one that had
    waited for seconds. The thread's descriptor shares ``fd``'s open file, so the lock it takes is
    ``fd``'s; a thread that gets the lock after its caller gave up lets it go at once."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError as exc:
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return False
    waiter_fd = os.dup(fd)
    done = threading.Event()
    turn = threading.Lock()
    outcome: dict = {}

    def wait() -> None:
        try:
            fcntl.flock(waiter_fd, fcntl.LOCK_EX)
            with turn:
                if outcome.setdefault("got", True) is not True:  # the caller gave up meanwhile
                    fcntl.flock(waiter_fd, fcntl.LOCK_UN)
        except OSError as exc:
            outcome.setdefault("got", exc)
        finally:
            os.close(waiter_fd)
            done.set()

    threading.Thread(target=wait, name="cortexctl-writer-lock", daemon=True).start()
    done.wait(remaining)
    with turn:
        got = outcome.setdefault("got", False)
    if isinstance(got, OSError):
        raise got
    return got


class DuckStorage:
    """A store directory: the DuckDB backend of ``interface.Storage``.

    Connections are opened per operation and closed at once. ``reading()`` and
    ``transaction()`` yield a ``DuckTx``; ``read()`` and ``write()`` yield the raw
    connection, for this room and for tools that inspect the file.
    """

    vector_dtype = VECTOR_DTYPE  # float16 (``search.VECTOR_DTYPE``)

    def __init__(self, path: str | os.PathLike, *, wait: float = DEFAULT_WAIT, resident: bool = False) -> None:
        self.path = Path(path).expanduser()
        # resident: the search snapshot's mappings, the delta's document and the index file's view kept
        # between calls while the files are the same (``snapshot.open_current``, ``hnsw.open_view``), and
        # find's search state while those are the same (``snapshot.SnapshotTx``); None keeps nothing.
        self.maps: dict | None = {} if resident else None
        self.wait = max(0.0, float(wait))
        self.db_path = self.path / DB_NAME
        self.lock_path = self.path / LOCK_NAME
        self._holder: int | None = None  # the thread holding the writer lock (inside ``exclusive``)
        self._kept = None  # the read-write connection ``holding`` keeps open for its thread's transactions
        self._last_delta: tuple | None = None  # the search snapshot's delta its last transaction collected
        self._staged = False  # a store restore_bundle is making: it moves, so nothing starts on it
        self._index_later: str | None = None  # the model whose index update_index(later=True) left to a fold

    @property
    def location(self) -> str:
        return str(self.path)

    @property
    def address(self) -> str:
        return str(self.path)

    def local_dir(self) -> Path:
        """The store's directory (it may not exist yet)."""
        return self.path

    def worker_address(self, tx) -> str:
        """The store itself: while ``tx``'s read-only connection is open no writer can open the file,
        so every reader sees what it sees."""
        return self.address

    # -- state ---------------------------------------------------------------
    def size_bytes(self) -> int:
        """The bytes the store's directory holds (its files, not below)."""
        try:
            return sum(e.stat(follow_symlinks=False).st_size for e in os.scandir(self.path)
                       if e.is_file(follow_symlinks=False))
        except OSError:
            return 0

    def exists(self) -> bool:
        return self.db_path.is_file()

    def check_location(self) -> None:
        """UsageError when the path cannot hold a store; IntegrityError naming a file of the store
        that must be a regular file and is not: the database's log (DuckDB would replay and fsync
        whatever it names: a FIFO, /dev/zero, a file elsewhere), the writer lock (no writer could
        take it), the generation file when it is a directory (no writer could replace it; a symlink
        or FIFO there is replaced by the next write)."""
        from cortexctl.store.snapshot.format import GEN_NAME

        if self.path.exists() and not self.path.is_dir():
            raise UsageError(f"store path {self.path} is not a directory")
        if self.db_path.exists() and not self.db_path.is_file():
            raise UsageError(f"store file {self.db_path} is not a regular file")
        # (the log holds committed writes not yet in the database file: not to be removed unread)
        odd = "is not a regular file (a symlink, device, FIFO or directory)"
        for path, regular, why in ((self.db_path.with_name(self.db_path.name + ".wal"), stat.S_ISREG, odd),
                                   (self.lock_path, stat.S_ISREG, f"{odd}: remove it"),
                                   (self.path / GEN_NAME, lambda m: not stat.S_ISDIR(m), "is a directory: remove it")):
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue
            if not regular(mode):
                raise IntegrityError(f"store file {path} {why}", path=str(path))

    def _create_dir(self) -> None:
        """Create the store directory (0700) if needed; an existing directory is left as it is."""
        self.check_location()
        if not self.path.exists():
            try:
                self.path.mkdir(mode=0o700, parents=True)
                os.chmod(self.path, 0o700)
            except FileExistsError:  # another process made it meanwhile: the same new store
                if not self.path.is_dir():
                    raise UsageError(f"store path {self.path} is not a directory") from None
            except OSError as exc:
                raise UsageError(f"cannot create store directory {self.path}: {exc.strerror}") from None

    def tighten(self) -> None:
        """Make the store's own files 0600 (memories hold private facts); nothing else is touched."""
        try:
            for entry in os.scandir(self.path):
                if (
                    entry.name.startswith(OWN_FILE_PREFIXES)
                    and entry.is_file(follow_symlinks=False)
                    and (entry.stat(follow_symlinks=False).st_mode & 0o777) != 0o600
                ):
                    os.chmod(entry.path, 0o600)
        except OSError:
            pass

    # -- waiting ---------------------------------------------------------------
    def _busy(self, why: str) -> StoreBusy:
        return StoreBusy(
            f"store {self.path} is busy ({why}); gave up after {self.wait:g}s",
            hint="retry, or wait longer with --wait SECONDS",
        )

    def _deadline(self) -> float:
        return time.monotonic() + self.wait

    def _retry(self, attempt, deadline: float):
        delay = 0.005
        while True:
            result = attempt()
            if result is not None:
                return result
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            time.sleep(min(remaining, delay * random.uniform(0.5, 1.5)))
            delay = min(delay * 2, 0.2)

    def _connect(self, read_only: bool, deadline: float | None = None):
        import duckdb

        def attempt():
            try:
                return duckdb.connect(str(self.db_path), read_only=read_only)
            except duckdb.IOException as exc:
                if _is_lock_error(exc):
                    return None
                raise _integrity(exc, self.db_path) from None
            except duckdb.Error as exc:
                raise _integrity(exc, self.db_path) from None

        con = self._retry(attempt, self._deadline() if deadline is None else deadline)
        if con is None:
            raise self._busy("another process has it open for writing" if read_only else "another process has it open")
        return con

    def _open_reader(self):
        """A read-only connection and the schema's state. A file that reads as damaged is opened
        again for ``SETTLE`` seconds before that is said (exit 7): under many writers a reader has
        once met a sound store as cut short (a read past the end of the file), which a second look
        did not; a damaged file stays damaged."""
        from cortexctl.store import migrations

        settle = time.monotonic() + SETTLE
        while True:
            try:
                con = self._connect(read_only=True)
                try:
                    return con, migrations.state(con)
                except BaseException as exc:
                    con.close()
                    _reraise_duckdb(exc, self.db_path)
                    raise
            except IntegrityError:
                if time.monotonic() >= settle:
                    raise
                time.sleep(0.02)

    @contextmanager
    def _writer_lock(self, deadline: float) -> Iterator[None]:
        from cortexctl.files import open_regular

        try:
            # never through a symlink (a dangling one cannot be opened, one to elsewhere locks that
            # file) nor a FIFO (its open blocks): the writer lock is this store's own file
            fd = open_regular(self.lock_path, os.O_RDWR | os.O_CREAT)
        except OSError as exc:
            # what says the name is not a regular file is damage (a symlink: ELOOP, EMLINK on some
            # systems; a directory: EISDIR; a socket: ENXIO; another kind: open_regular's EINVAL); no
            # permission, a read-only file system or a full disk are said as they always were (exit
            # 1, naming the file), anything else in one line
            if exc.errno in (errno.ELOOP, errno.EMLINK, errno.EISDIR, errno.ENXIO, errno.ENODEV, errno.EINVAL):
                raise IntegrityError(f"store lock file {self.lock_path} is not a regular file ({exc.strerror}): "
                                     "remove it", path=str(self.lock_path)) from None
            if no_space(exc) is not None or exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR):
                raise
            raise CortexError(f"store lock file {self.lock_path} cannot be opened ({exc.strerror})") from None
        try:
            if not _flock_until(fd, deadline):
                raise self._busy("another cortexctl is writing to it")
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the flock

    # -- connections -------------------------------------------------------------
    @contextmanager
    def read(self) -> Iterator[object]:
        """A read-only connection. Raises ``NoStore`` when there is no store yet."""
        from cortexctl.store import migrations

        self.check_location()
        if not self.exists():
            raise NoStore(f"no store at {self.path}")
        con, state = self._open_reader()
        if state == migrations.OLDER:
            con.close()
            with self.write():  # migrates forward, then reopen read-only
                pass
            con = self._connect(read_only=True)
        with self._session(con):
            yield con

    @contextmanager
    def _session(self, con, *, after=None) -> Iterator[object]:
        """Yield an open connection; corruption errors become IntegrityError; always close."""
        try:
            yield con
        except Exception as exc:
            _reraise_duckdb(exc, self.db_path)
            raise
        finally:
            con.close()
            if after is not None:
                after()

    @property
    def _held(self) -> bool:
        """This thread holds the writer lock: its own nested writes need not take it again (another
        thread sharing this storage takes its turn like another process)."""
        return self._holder == threading.get_ident()

    @contextmanager
    def exclusive(self, *, wait: float | None = None) -> Iterator[None]:
        """Hold the writer lock without holding the file: readers go on, other writers wait.

        For long work outside DuckDB (building the index file); ``write()``
        inside it opens the file without taking the lock again. ``wait``
        overrides the store's ``--wait`` (0: one attempt).
        """
        if self._held:
            yield
            return
        _load_for_writing()
        self._create_dir()
        deadline = self._deadline() if wait is None else time.monotonic() + wait
        with self._writer_lock(deadline):
            from cortexctl.store import scratch

            scratch.sweep(scratch.areas(self), store_dir=self.path)  # what killed commands left
            self._holder = threading.get_ident()
            try:
                yield
            finally:
                self._holder = None

    @contextmanager
    def write(self, *, deadline: float | None = None) -> Iterator[object]:
        """A read-write connection under the writer lock; the schema is made current.

        The caller runs its own transaction (``BEGIN`` ... ``COMMIT``).
        """
        from cortexctl.store import migrations

        if self._kept is not None and self._held:  # inside ``holding``: its connection, left open
            yield self._kept
            return
        self._create_dir()
        old_umask = os.umask(0o077)
        try:
            if deadline is None:
                deadline = self._deadline()  # one --wait for the lock and the file together
            with self.exclusive() if not self._held else _nothing():
                con = self._connect(read_only=False, deadline=deadline)
                with self._session(con, after=self.tighten):
                    migrations.migrate(con)
                    yield con
        finally:
            os.umask(old_umask)


    # -- the Storage protocol -----------------------------------------------------------
    @contextmanager
    def reading(self, *, as_actor: str | None = None, bounded: bool = False) -> Iterator[DuckTx]:
        """A read-only ``DuckTx``. Raises ``NoStore`` when there is no store yet. ``as_actor``: no
        holding here (whoever opens the file reads all of it; the engine's rule decides).
        ``bounded``: DuckDB held to ``READ_MEMORY``, spilling into a scratch directory of its own
        (not bounded when no scratch directory can be made: a store on a read-only filesystem); a
        read that does not fit is ``OverBudget`` as it leaves the view."""
        from cortexctl.store.duck import DuckTx

        if not (bounded and self.exists()):  # no store: NoStore from ``read``, and no scratch area made
            with self.read() as con:
                yield DuckTx(con, self)
            return
        from cortexctl.store import scratch

        with scratch.spill_space(scratch.areas(self), "read", sweep_kind=True) as spill, \
                _over_budget(spill is not None, "a read", READ_MEMORY), self.read() as con, \
                scratch.limited(con, READ_MEMORY, spill):  # put back as it ends: the process's settings for the file
            yield DuckTx(con, self)

    @contextmanager
    def holding(self) -> Iterator[None]:
        """The writer lock and one read-write connection for this thread's transactions inside, each
        committed on its own (``Storage.holding``): what opening and closing the file costs is paid
        once. Other processes wait meanwhile, readers too (DuckDB lets one process have the file)."""
        if self._kept is not None and self._held:
            yield
            return
        from cortexctl.store import snapshot

        self._last_delta = None
        with self.exclusive():
            try:
                with self.write() as con:
                    self._kept = con
                    try:
                        yield
                    finally:
                        self._kept = None
            finally:
                if self._last_delta is not None:  # the connection closed: the file's identity is final
                    snapshot.write_delta(self, *self._last_delta)
                    got, self._last_delta = self._last_delta[1], None
                    _fold_when_grown(self, got)

    @contextmanager
    def transaction(self, *, bulk: bool = False, tidy: bool = True) -> Iterator[DuckTx]:
        """A ``DuckTx`` in one transaction: committed at the end, rolled back when the block raises.
        ``bulk``: DuckDB held to ``LOAD_MEMORY`` (spilling into the scratch area), unless inside
        ``holding`` or where no scratch directory can be made; ``OverBudget`` when the transaction does not fit (a big batch: DuckDB keeps a
        transaction's appends and its commit's work in memory). Unless ``tidy``, storage left as
        written, not compacted at close (``DuckTx.defer_compaction``)."""
        from cortexctl.store import scratch, snapshot
        from cortexctl.store.duck import DuckTx

        deadline = self._deadline()
        with self.exclusive(wait=max(deadline - time.monotonic(), 0.0)):  # the lock until the delta is written
            if self._kept is not None and self._last_delta is not None:
                start = self._last_delta[0]  # inside ``holding``: the delta builds on where it began
            else:
                start = snapshot.delta_start(self.path) if self.db_path.is_file() else None
            held = bulk and self._kept is None  # a connection of its own: the limit ends with it
            with (scratch.spill_space(scratch.areas(self), "load") if held else _nothing()) as spill, \
                    _over_budget(spill is not None, "a bulk transaction", LOAD_MEMORY), \
                    self.write(deadline=deadline) as con:
                if spill is not None:  # left in place until the connection closes: its checkpoint at close is held too
                    scratch.limit_memory(con, LOAD_MEMORY, spill)
                con.execute("BEGIN")
                tx = DuckTx(con, self)
                if bulk and not tidy:
                    tx.defer_compaction()
                try:
                    yield tx
                except BaseException:
                    try:
                        con.execute("ROLLBACK")
                    except Exception:  # a broken connection: closing it discards the transaction anyway
                        pass
                    raise
                token, counter = snapshot.mark_dirty(self.path)  # on disk before the commit is
                con.execute("COMMIT")
                snapshot.mark_clean(self.path, token, counter)
                stopped = None  # an interrupt DuckDB made an error of: raised once the delta is seen to
                try:  # what changed, as the search snapshot's delta; a cache: never fails the write
                    got = snapshot.collect_delta(con, start, wide=tx.wide)
                except Exception as exc:  # noqa: BLE001
                    got = None
                    if signalled() is not None:
                        stopped = exc
                if self._kept is not None and self._last_delta is not None and self._last_delta[1] is None:
                    got = None  # an earlier transaction of the holding left the snapshot to the next fold
            if self._kept is not None:  # inside ``holding``: written once its connection is closed
                self._last_delta = (start, got, token, counter)
                if stopped is not None:
                    raise stopped
                return
            snapshot.write_delta(self, start, got, token, counter)  # the file's identity is final once closed
            if stopped is not None:
                raise stopped
        _fold_when_grown(self, got)

    # -- the search snapshot (store/snapshot/) ---------------------------------------------
    @contextmanager
    def searching(self, *, as_actor: str | None = None) -> Iterator[object]:
        """A read-only view for find, answered from the search snapshot when it is current."""
        from cortexctl.store import snapshot

        self.check_location()
        if not self.exists():
            raise NoStore(f"no store at {self.path}")
        pair = snapshot.open_current(self.path, self.maps)
        if pair is None:
            with self.reading() as tx:
                yield tx
            return
        try:
            tx = snapshot.SnapshotTx(pair[0], self, pair[1], self.maps)
        except BaseException:
            pair[0].close()
            raise
        try:
            yield tx
        except Exception as exc:
            _reraise_duckdb(exc, self.db_path)
            raise
        finally:
            tx.close()

    @contextmanager
    def _private_turn(self) -> Iterator[None]:
        """The writer lock, with the files made meanwhile private (0600)."""
        with self.exclusive():
            old_umask = os.umask(0o077)
            try:
                yield
            finally:
                os.umask(old_umask)

    def refresh_snapshot(self) -> dict:
        """Rebuild the search snapshot when it is not current or is damaged, under the writer lock."""
        from cortexctl.store import snapshot

        with self._private_turn():
            if snapshot.check_whole(self.path) is not None:  # every block read: a damaged one is built again
                snapshot.remove(self.path)
            return snapshot.build(self)

    def snapshot_state(self) -> str:
        from cortexctl.store import snapshot

        return snapshot.state(self.path)

    def snapshot_problem(self) -> str | None:
        from cortexctl.store import snapshot

        return snapshot.check_whole(self.path)

    def cache_health(self) -> dict:
        # A cache: stale or damaged only makes find read DuckDB (slower, same answers).
        from cortexctl.store import fold

        problem = self.snapshot_problem()
        return {"state": "damaged" if problem else self.snapshot_state(), "problem": problem,
                "fold_failed": fold.last_failure(self.path)}

    # -- bundles (store/bundle.py) ------------------------------------------------------------------
    def export_bundle(self, dest: Path) -> tuple[list[dict], dict]:
        """Write one Parquet member per state table into ``dest`` from one committed state: the
        database is copied while our writers are held off (readers go on), and the copy exported.
        Returns ([{table, name, rows}], {schema_version, vectors, journal_position})."""
        import shutil

        from cortexctl.store import bundle as sb

        copy_dir = Path(str(dest) + "-snapshot")  # the copy's directory (the name kept: leftovers of a killed backup)
        try:
            with self.exclusive():
                copy = sb.copy_database(self, copy_dir)
            try:
                con = sb.open_copy(copy)
            except Exception as exc:  # the copy is byte for byte the store's file: its damage is that file's
                _reraise_duckdb(exc, self.db_path)
                raise
            try:
                return sb.export_tables(con, dest), sb.store_facts(con)
            except Exception as exc:
                _reraise_duckdb(exc, self.db_path)
                raise
            finally:
                con.close()
        finally:
            shutil.rmtree(copy_dir, ignore_errors=True)

    def restore_bundle(self, members: dict[str, Path], schema_version: int, check) -> None:
        """Replace the whole store (or make it) with a checked bundle's members (table -> Parquet
        file), atomically: the new store is built beside this one, handed to ``check`` (a
        ``Storage``; raising abandons the restore) and swapped in with one rename. A failed restore
        leaves the store as it was, and nothing behind where there was none."""
        import shutil

        from cortexctl.store import bundle as sb
        from cortexctl.store import scratch

        target = self.path
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        existed = target.exists()
        staging = scratch.make([scratch.beside_store_dir(self.path)], "restore")  # swapped in by rename
        swapped = False
        try:
            with self.exclusive(), scratch.private():  # creates the target directory (for its lock) when new
                sb.build_store(staging / DB_NAME, members, schema_version)
                staged = DuckStorage(staging, wait=self.wait)
                staged._staged = True
                check(staged)
                staged.tighten()
                _swap(staging, target)
                swapped = True
        finally:
            scratch.remove(staging)  # after the swap: the old store
            if not existed and not swapped:  # a failed restore into a new location leaves nothing behind
                shutil.rmtree(target, ignore_errors=True)
        self._index_later = staged._index_later  # an index check() left to build in the background
        self.build_index_later()

    # -- the vector index (store/vector_index.py) ----------------------------------------------
    def update_index(self, model: str, *, rebuild: bool = False, progress=None, loader=None,
                     wait: float | None = None, later: bool = False) -> dict:
        from cortexctl.store import fold, vector_index

        if later and rebuild and loader is None and fold.mode() == "background" and self._has_vectors(model):
            # the index file by a background fold (find searches exactly until it is in place)
            if self._staged:  # a restore's: the snapshot now, the fold once the store is in place
                with self.exclusive(wait=wait):
                    self.refresh_snapshot()
                self._index_later = model
                return {"action": "background", "reason": "built in the background"}
            # not when the last fold failed (it would again, and say nothing): built here, or the error said
            if fold.last_failure(self.path) is None and self._start_fold(model):
                return {"action": "background", "reason": "built in the background"}
        done = vector_index.update(self, model, rebuild=rebuild, progress=progress, built=loader, wait=wait)
        if self.snapshot_state() == "current":
            fold.completed(self.path)  # both caches are current: a fold's failure before is no longer the news
        return done

    def _has_vectors(self, model: str) -> bool:
        with self.reading() as tx:
            return tx.vector_stats(model)[2] is not None

    def build_index_later(self) -> None:
        """Start the background fold ``update_index(later=True)`` asked for: with no trusted index
        file, it builds a whole one without holding the writer lock (``store/fold.py``)."""
        from cortexctl.store import fold

        model, self._index_later = self._index_later, None
        if model is not None:
            try:
                if not self._start_fold(model):
                    fold.failed(self.path, OSError(0, "the background fold that builds the index file "
                                                      "could not be started"))
            except OSError as exc:
                fold.failed(self.path, exc)

    def _start_fold(self, model: str) -> bool:
        """Start a background fold of ``model``; True when one is under way. A process that only
        looks whether a fold runs (``fold.under_way``) holds the fold lock for an instant: tried
        again for a little while, not given up at once."""
        from cortexctl.store import fold

        for _ in range(START_TRIES):
            if fold.start(self.path, model) or fold.under_way(self.path):
                return True
            time.sleep(0.005)
        return False

    def reclaim_space(self) -> dict:
        """The file rewritten with only its live blocks when a bulk load left much of it free
        (``store/reclaim.py``). Never fails: the old file stays when anything goes wrong."""
        from cortexctl.store import reclaim

        if self._kept is not None:  # inside ``holding``: its connection is on the file
            return {"action": "none", "reason": "store held open"}
        try:
            with self._private_turn():
                return reclaim.run(self)
        except Exception as exc:  # noqa: BLE001 - DuckDB's own errors; the store is as it was
            if signalled() is not None:  # an interrupt that DuckDB made an error of: the command stops
                raise
            if isinstance(exc, (CortexError, OSError)):
                return {"action": "none", "reason": f"failed: {exc}"}
            if not type(exc).__module__.lstrip("_").startswith("duckdb"):
                raise
            return {"action": "none", "reason": f"failed: {str(exc).splitlines()[0]}"}

    def index_loader(self, model: str, *, threads: int = 1, expected: int = 0):
        from cortexctl.store import vector_index

        return vector_index.IndexLoader(self, model, threads=threads, expected=expected)

    def after_vectors(self, model: str, last_key: int) -> None:
        from cortexctl.store import fold, vector_index

        if vector_index.fold_due(self, model, last_key):
            fold.request(self, model)  # in the background, unless CORTEXCTL_FOLD=inline; never fails

    def index_health(self, model: str | None) -> dict:
        from cortexctl.store import vector_index

        return vector_index.health(self, model, folding=self.folding())

    def folding(self) -> bool:
        """A background fold of this store is under way (``store/fold.py``)."""
        from cortexctl.store import fold

        return fold.under_way(self.path)


def _fold_when_grown(store: DuckStorage, delta: dict | None) -> None:
    """After a write (the lock let go): a delta grown to ``fold.FOLD_DELTA`` memories is folded into
    the snapshot (in the background) before it outgrows ``DELTA_MAX``."""
    from cortexctl.store import fold

    if delta is not None and len(delta["ids"]) >= fold.FOLD_DELTA:
        fold.request(store, None)


@contextmanager
def _nothing() -> Iterator[None]:
    yield


@contextmanager
def _over_budget(held: bool, what: str, limit: str) -> Iterator[None]:
    """DuckDB out of memory in ``what`` (a transaction, rolled back; a read) held to a budget:
    ``OverBudget``."""
    try:
        yield
    except Exception as exc:
        from cortexctl.store import scratch

        if held and scratch.out_of_memory(exc):
            from cortexctl.store.interface import OverBudget

            raise OverBudget(f"{what} did not fit in {limit} of memory") from None
        raise


def _swap(new: Path, target: Path) -> None:
    """Put ``new`` at ``target`` in one step; the old store (if any) ends up at ``new``."""
    if not target.exists():
        os.rename(new, target)
        try:
            new.mkdir(mode=0o700)  # so the caller's cleanup finds a directory
        except FileNotFoundError:  # a reader removed the scratch area, left empty: nothing to clean up
            pass
    else:
        _exchange(new, target)
    fsync_path(target.parent)


def _exchange(a: Path, b: Path) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    at_fdcwd, rename_exchange = -100, 2
    if libc.renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"cannot swap {a} and {b} atomically: {os.strerror(err)}")


# What DuckDB says when the file itself is damaged: a block whose checksum fails, a file cut short
# (a read past its end), a header that is not DuckDB's, metadata that cannot be decoded.
_DAMAGE = ("corrupt", "checksum", "could not read enough bytes", "not a valid duckdb database",
           "unexpected end of file", "failed to deserialize")


def _reraise_duckdb(exc: BaseException, path: Path) -> None:
    """Turn a DuckDB error that says the file is damaged into an IntegrityError naming it; leave
    the rest (a bug stays a bug). A ``SerializationException`` is always the file's: cortexctl
    decodes nothing through DuckDB's serializer but the database's own storage."""
    if isinstance(exc, CortexError) or not isinstance(exc, Exception):
        return
    mod = type(exc).__module__ or ""
    if mod.startswith("duckdb") or mod.startswith("_duckdb"):
        text = str(exc).lower()
        if type(exc).__name__ == "SerializationException" or any(word in text for word in _DAMAGE):
            raise _integrity(exc, path, "the file is damaged; cortexctl restore puts back a backup") from None


__all__ = ["DuckStorage", "NoStore", "DEFAULT_WAIT", "DB_NAME"]
