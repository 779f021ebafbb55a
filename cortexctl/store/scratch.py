"""A store's scratch space: where work that must not outlive its command goes.

Decrypted bundle members, a restore's staged store, merge's and the drill's throwaway
stores, an import's spilled batches and what DuckDB spills past a memory budget
(``limit_memory``) are made here, never in a shared temp directory:

- the area is a private directory (0700; what is written in it 0600) that belongs to the store
  (``areas``): for a store directory, ``.<name>.scratch`` beside it, on the same
  filesystem (a staged store is swapped in with one rename), or ``.scratch`` inside it when its
  parent cannot be written or the store directory is a mount point (work renamed into the store is
  then made on its file system; a file that still meets another one is copied in,
  ``files.move_in``); for a store on a server, a directory in the user's data dir named after the
  store;
- each piece of work is one directory in the area, ``<kind>-<pid>-<start>-<where>-<random>``:
  the process that made it, when that process started and where its pids mean something (this
  boot of this machine, this pid namespace), so a later process can tell a live command's work
  (never touched) from a dead one's (a reused pid does not count as alive); work made where our
  pids mean nothing (another container or machine sharing the directory) is left for a day;
- ``sweep`` removes every entry whose process is gone, and the area when that leaves it empty
  (or a killed command left it so). Every command that takes the store's
  writer lock sweeps (a directory listing when there is nothing to remove), so what a killed
  command left goes with the next command that writes.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

ENTRY = re.compile(r"^([a-z]+)-(\d+)-(\d+)-([0-9a-f]{8})-[0-9a-f]{8}$")
_FOREIGN_AGE = 24 * 3600  # work made where our pids mean nothing is removed once this old
# what cortexctl versions before the scratch area left beside or inside a store directory
_LEGACY_BESIDE = re.compile(r"^\.(.+)\.restore-(\d+)-[0-9a-f]{8}$")
_LEGACY_INSIDE = ".import-"
_LEGACY_AGE = 24 * 3600  # an old version's import spill names no process: removed once this old


def start_time(pid: int) -> int:
    """When process ``pid`` started (clock ticks since boot; Linux), 0 when that cannot be told,
    -1 when there is no such process (or only its zombie)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except FileNotFoundError:
        return -1
    except (OSError, IndexError):
        return 0 if exists(pid) else -1
    if fields[0] == b"Z":
        return -1
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return 0


def exists(pid: int) -> bool:
    """A process ``pid`` exists (of any user)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


_ME: tuple[int, int] | None = None
_WHERE: str | None = None


def _me() -> tuple[int, int]:
    global _ME
    if _ME is None or _ME[0] != os.getpid():  # a forked child is another owner
        _ME = (os.getpid(), max(start_time(os.getpid()), 0))
    return _ME


def where() -> str:
    """Where this process's pids mean something: this boot and pid namespace (8 hex digits)."""
    global _WHERE
    if _WHERE is None:
        import zlib

        try:
            with open("/proc/sys/kernel/random/boot_id", "rb") as fh:
                boot = fh.read().strip()
        except OSError:
            boot = os.uname().nodename.encode()
        try:
            space = os.stat("/proc/self/ns/pid").st_ino
        except OSError:
            space = 0
        _WHERE = f"{zlib.crc32(boot + b'/' + str(space).encode()):08x}"
    return _WHERE


def name(kind: str, pid: int, started: int) -> str:
    """The name of a piece of work of ``kind`` made by process ``pid`` started at ``started``."""
    return f"{kind}-{pid}-{started}-{where()}-{os.urandom(4).hex()}"


def alive(pid: int, started: int) -> bool:
    """The process that made an entry (``pid``, started at ``started``) is still running."""
    now = start_time(pid)
    if now < 0:
        return False
    return now == 0 or started == 0 or now == started


def _keep(path: Path) -> bool:
    """Whether a sweep leaves ``path`` (an entry of an area) where it is."""
    m = ENTRY.match(path.name)
    if m is None:
        return False
    if m.group(4) != where():
        import time

        try:
            return time.time() - os.lstat(path).st_mtime < _FOREIGN_AGE
        except OSError:
            return True
    return alive(int(m.group(2)), int(m.group(3)))


@contextmanager
def private() -> Iterator[None]:
    """Files and directories made inside the block are 0600 and 0700."""
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


def _area(path: Path) -> Path:
    """``path`` made (0700) when missing; refused when it is not a directory of ours."""
    try:
        path.mkdir(mode=0o700, parents=False)
    except FileExistsError:
        pass
    except FileNotFoundError:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.mkdir(mode=0o700, exist_ok=True)
    st = os.lstat(path)  # gone again (a sweep removed it empty): FileNotFoundError, and ``make`` retries
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():  # a symlink is not a directory here
        raise PermissionError(f"scratch area {path} is not a directory of this user")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


def make(areas: Sequence[Path], kind: str) -> Path:
    """A new private directory for ``kind`` of work in the first of ``areas`` that can hold one."""
    pid, started = _me()
    last: OSError | None = None
    for area in areas:
        for _ in range(5):  # another process may remove the area when it leaves it empty
            try:
                path = _area(Path(area)) / name(kind, pid, started)
                path.mkdir(mode=0o700)
                return path
            except FileNotFoundError as exc:
                last = exc
            except OSError as exc:
                last = exc
                break
    from cortexctl.errors import UsageError

    where = ", ".join(str(a) for a in areas)
    raise UsageError(f"cannot make a private work directory in {where}: "
                     f"{getattr(last, 'strerror', None) or last}")


def remove(path: str | os.PathLike | None) -> None:
    """Remove an entry and, when it was the last, its area (no empty directory is left behind)."""
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)
        _drop_if_empty(Path(path).parent)


def _remove_any(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            path.unlink()
        except OSError:
            pass


def _drop_if_empty(area: Path) -> None:
    try:
        os.rmdir(area)
    except OSError:
        pass


@contextmanager
def space(areas: Sequence[Path], kind: str) -> Iterator[Path]:
    """A private directory for the block (``make``), removed with everything in it afterwards."""
    path = make(areas, kind)
    try:
        with private():
            yield path
    finally:
        remove(path)


def limit_memory(con, limit: str, spill: Path) -> None:
    """Hold the DuckDB of ``con`` to ``limit``, what does not fit spilled into ``spill`` (a scratch
    directory: a killed command's spill is swept with it, never left in the store). Unbounded,
    DuckDB keeps every block it has read or written cached, up to most of the machine's memory.
    When this process's DuckDB has spilled elsewhere already, or holds more than ``limit`` already,
    it is left unbounded."""
    import duckdb

    try:
        con.execute("SET temp_directory = ?", [str(spill)])
        con.execute(f"SET memory_limit = '{limit}'")
    except duckdb.Error:
        pass


@contextmanager
def spill_space(areas: Sequence[Path], kind: str, *, sweep_kind: bool = False) -> Iterator[Path | None]:
    """A private directory of ``kind`` for what DuckDB spills past a memory budget (``limit_memory``),
    made in the first of ``areas`` that can hold one and removed afterwards; None when none can (a
    store in a read-only place): the work then goes unbounded rather than fail. ``sweep_kind``: what
    dead processes left of ``kind`` is removed first (for a reader, which holds no writer lock and so
    sweeps nothing else: a store that is only ever read has no writer to sweep it)."""
    from cortexctl.errors import CortexError, interrupts_held

    path = None
    try:  # removed whatever happens once it is made, a ^C as the held block ends too
        try:
            if sweep_kind:
                sweep(areas, kinds=(kind,))
            with interrupts_held():  # a ^C waits until the directory is made and named
                path = make(areas, kind)
        except (CortexError, OSError):  # nowhere to make one: unbounded
            pass
        if path is None:
            yield None
            return
        with private():
            yield path
    finally:
        remove(path)


@contextmanager
def limited(con, limit: str, spill: Path | None) -> Iterator[None]:
    """``limit_memory`` for the block, undone after it (``unlimit_memory``); nothing without a
    ``spill`` directory."""
    if spill is None:
        yield
        return
    limit_memory(con, limit, spill)
    try:
        yield
    finally:
        unlimit_memory(con)


def unlimit_memory(con) -> None:
    """Put back DuckDB's own memory limit and spill directory on ``con`` (``limit_memory`` undone):
    they are the settings of every connection this process has to the same file."""
    import duckdb

    for setting in ("memory_limit", "temp_directory"):
        try:
            con.execute(f"RESET {setting}")
        except duckdb.Error:  # a connection broken by the error that ends its view
            pass


def out_of_memory(exc: BaseException) -> bool:
    """DuckDB ran out of the memory ``limit_memory`` gave it (the work may be tried again unbounded)."""
    module = type(exc).__module__ or ""
    if not module.startswith(("duckdb", "_duckdb")):  # ours, or another library's, whatever it says
        return False
    return type(exc).__name__ == "OutOfMemoryException" or "could not allocate block" in str(exc)


def sweep(areas: Sequence[Path], *, store_dir: Path | None = None, kinds: Sequence[str] | None = None) -> list[str]:
    """Remove what dead processes left in ``areas`` (and, for a store directory, what older
    versions left beside and inside it); returns the names removed. Never raises. ``kinds``: only
    entries of these kinds, and the area left where it is (a sweep without the writer lock)."""
    removed: list[str] = []
    for area in areas:
        try:
            names = os.listdir(area)
        except OSError:
            continue
        for entry in names:
            if kinds is not None and ((m := ENTRY.match(entry)) is None or m.group(1) not in kinds):
                continue
            if _keep(Path(area) / entry):
                continue
            _remove_any(Path(area) / entry)
            removed.append(entry)
        if kinds is not None:
            continue
        # emptied now, or left empty by a command killed between making the area and its entry (or
        # between removing its entry and the area): ``make`` makes it again should one be starting
        _drop_if_empty(Path(area))
    if store_dir is not None:
        removed += _sweep_legacy(store_dir)
    return removed


def _sweep_legacy(store_dir: Path) -> list[str]:
    import time

    removed = []
    try:
        for entry in os.scandir(store_dir.parent):
            m = _LEGACY_BESIDE.match(entry.name)
            if m and m.group(1) == store_dir.name and not exists(int(m.group(2))):
                shutil.rmtree(entry.path, ignore_errors=True)
                removed.append(entry.name)
    except OSError:
        pass
    try:
        for entry in os.scandir(store_dir):
            if entry.name.startswith(_LEGACY_INSIDE) and entry.is_dir(follow_symlinks=False) \
                    and time.time() - entry.stat(follow_symlinks=False).st_mtime > _LEGACY_AGE:
                shutil.rmtree(entry.path, ignore_errors=True)
                removed.append(entry.name)
    except OSError:
        pass
    return removed


def areas(storage) -> list[Path]:
    """The scratch areas of ``storage`` (a ``Storage``), the preferred first."""
    local = storage.local_dir()
    return for_store_dir(local) if local is not None else for_server(storage.location)


def for_store_dir(store_dir: Path) -> list[Path]:
    """The scratch areas of a store directory, the preferred first (see the module docstring)."""
    beside, inside = beside_store_dir(store_dir), store_dir / ".scratch"
    # a store directory that is a mount point (a container's volume): beside it is another file system,
    # and the files work makes there (index files, the snapshot) could not be renamed into the store
    return [inside, beside] if os.path.ismount(store_dir) else [beside, inside]


def beside_store_dir(store_dir: Path) -> Path:
    """The scratch area beside a store directory: where a restore stages the store it swaps in."""
    return store_dir.parent / f".{store_dir.name}.scratch"


def for_server(location: str) -> list[Path]:
    """The scratch area of a store on a server (``location``: its name without credentials)."""
    import hashlib

    from platformdirs import user_data_dir

    from cortexctl.config import APP

    tag = hashlib.sha256(location.encode()).hexdigest()[:16]
    return [Path(user_data_dir(APP)) / "scratch" / tag]


__all__ = ["areas", "make", "space", "sweep", "remove", "private", "alive", "exists", "name"]
