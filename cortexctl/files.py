"""Files that must never be seen half-written: the index file, its record, an export.

``atomic_path(path)`` yields a temporary name in the same directory; when the
block ends without an error the file is fsynced, made 0600, renamed over
``path`` and the directory fsynced, so a reader sees the old file or the new
one, never a part. On an error the temporary file is removed. ``sync=False`` skips both fsyncs,
for a file whose loss in a power cut costs nothing but work done again (the index's checked stamp).
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


def leftover_temps(path: str | os.PathLike) -> list[Path]:
    """The temporary files ``atomic_path(path)`` names (``.<name>.*.tmp`` beside ``path``), which a
    writer killed midway leaves; only a caller that knows no writer is at work may remove them."""
    path = Path(path)
    return sorted(path.parent.glob(f".{path.name}.*.tmp"))
