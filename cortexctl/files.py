"""Files that must never be seen half-written: the index file, its record, an export.

``atomic_path(path)`` yields a temporary name in the same directory; when the
block ends without an error the file is fsynced, made 0600, renamed over
``path`` and the directory fsynced, so a reader sees the old file or the new
one, never a part. On an error the temporary file is removed. ``sync=False`` skips both fsyncs,
for a file whose loss in a power cut costs nothing but work done again (a checked stamp).

**Checked stamps.** A cache file whose every byte a reader would otherwise check on every cold start
(the index file, the search snapshot) has a stamp ``<file>.checked`` beside it: the identity of the
file last checked whole and found sound (device, inode, size, modification and change times) and
what it matched (``stamp_checked``, ``checked_value``). The change time cannot be set from user
space, so any write to the file since (a byte flipped in place, even with its modification time
put back) makes the stamp name another file, and the next reader checks it all again. A copy
(``cp -r``, a restore) is another inode: checked again once. Best effort: a store a process
cannot write to only costs the next reader the checks again.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


@contextmanager
def atomic_path(path: str | os.PathLike, *, mode: int = 0o600, sync: bool = True) -> Iterator[str]:
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield tmp
        if sync:
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if sync:
        fsync_path(path.parent)


def move_in(src: str | os.PathLike, path: str | os.PathLike) -> bool:
    """Rename ``src`` (a finished file, fsynced) over ``path``. When the two are on different file
    systems (work made in a scratch area beside a store directory that is itself a mount point) the
    file is copied beside ``path`` with ``atomic_path`` and ``src`` removed: a reader sees the old
    file or the new one either way. True when it was copied (a new inode: a checked stamp taken of
    ``src`` names another file). The caller fsyncs the directory after a rename."""
    import errno
    import shutil

    try:
        os.replace(src, path)
        return False
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
    with atomic_path(path) as tmp:
        shutil.copyfile(src, tmp)
    os.unlink(src)
    return True


def open_regular(path: str | os.PathLike, flags: int = os.O_RDONLY) -> int:
    """A descriptor of ``path`` when it is a regular file, else OSError. A store's own file that was
    replaced by a FIFO (opening it would block until someone writes to it), a device (``/dev/zero``
    never ends), a directory or a symlink (a write would go through it, outside the store) is
    never opened as the file it stands for: a cache is bypassed, a marker rewritten."""
    import errno
    import stat

    fd = os.open(path, flags | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)  # a file it creates: private
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: str | os.PathLike, limit: int | None = None) -> bytes:
    """The bytes of ``path`` (at most ``limit``) when it is a regular file (``open_regular``)."""
    fd = open_regular(path)
    with os.fdopen(fd, "rb") as fh:
        return fh.read() if limit is None else fh.read(limit)


def fsync_path(path: str | os.PathLike) -> None:
    """fsync a file or a directory (a directory: so that a rename in it survives a crash)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def unlink_quietly(path: str | os.PathLike) -> None:
    """Remove a file if it can be: gone already, or something this process may not remove (a
    directory of that name), is left as it is."""
    try:
        os.unlink(path)
    except OSError:
        pass


CHECKED_SUFFIX = ".checked"


def checked_path(path: str | os.PathLike) -> Path:
    """Where the checked stamp of ``path`` is kept (the module docstring)."""
    return Path(str(path) + CHECKED_SUFFIX)


def identity(st: os.stat_result) -> list[int]:
    """What a checked stamp names a file by: device, inode, size, modification and change times."""
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def checked_value(path: str | os.PathLike, st: os.stat_result) -> int | None:
    """What the stamp says this very file (``st``: its stat now) matched when it was checked whole,
    or None when the stamp is missing, unreadable or names another file."""
    import json

    try:
        doc = json.loads(read_regular(checked_path(path), 1 << 16))
        return int(doc["crc"]) if doc["file"] == identity(st) else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def stamp_checked(path: str | os.PathLike, st: os.stat_result, value: int) -> None:
    """Record that the file ``st`` describes was checked whole and matched ``value``. Best effort."""
    import json

    try:
        with atomic_path(checked_path(path), sync=False) as tmp:
            with open(tmp, "wb") as fh:
                fh.write(json.dumps({"file": identity(st), "crc": value}).encode())
    except OSError:
        pass


def stamp_installed(path: str | os.PathLike, saved: os.stat_result, value: int) -> None:
    """Stamp a file a writer checked as it wrote it (``saved``: its stat then) and has just renamed
    to ``path``: the rename may change the change time, so the stamp takes the file as it is now,
    when it is still the same file."""
    try:
        st = os.stat(path)
    except OSError:
        return
    if identity(st)[:4] == identity(saved)[:4]:
        stamp_checked(path, st, value)


STAMP_TEMP_AGE = 60.0  # seconds: a reader writes its checked stamp's temp file in milliseconds


def stale_temps(path: str | os.PathLike) -> list[Path]:
    """``leftover_temps(path)`` that no one is writing: every one of a writer's (the caller holds the
    writer lock), and a checked stamp's temp file (which a reader writes without the lock) once it
    is older than ``STAMP_TEMP_AGE``."""
    import time

    stamps = f".{Path(path).name}{CHECKED_SUFFIX}."
    out = []
    for left in leftover_temps(path):
        if left.name.startswith(stamps):
            try:
                if time.time() - left.stat().st_mtime < STAMP_TEMP_AGE:
                    continue
            except OSError:
                continue
        out.append(left)
    return out


def leftover_temps(path: str | os.PathLike) -> list[Path]:
    """The temporary files ``atomic_path(path)`` names (``.<name>.*.tmp`` beside ``path``), which a
    writer killed midway leaves; only a caller that knows no writer is at work may remove them."""
    path = Path(path)
    return sorted(path.parent.glob(f".{path.name}.*.tmp"))
