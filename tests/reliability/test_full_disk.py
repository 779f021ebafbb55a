"""A full disk: a store (or a backup's destination) on a small filesystem the test makes, filling
up during import, backup and restore.

Each case ends with one clear error line and a documented exit code (never 70, never a
traceback); the store still verifies and holds every memory acknowledged before; no partial file
(spill data, a half bundle, a restore's staging) is left behind.

The small filesystem is a size-limited tmpfs mounted by the test where the machine allows it
(root, and a kernel that lets this process mount); elsewhere the same cases run under
``RLIMIT_FSIZE`` (each file the command writes is capped; writing past it is EFBIG), which works
for any user. Every command runs as a real ``cortexctl`` process.
"""

from __future__ import annotations

import json
import os
import random
import resource
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from cortexctl import Cortex
from tests.conftest import Run, _full_env, assert_store_verifies, cortexctl_argv

SMALL = 12 << 20  # the filesystem: room for a store with a few memories, not for a big import
FSIZE = 6 << 20  # the per-file cap of the fallback: above a small store's files, below what fills it


def _mount_tmpfs(where: Path, size: int) -> str | None:
    """Mount a tmpfs of ``size`` bytes at ``where``; None if done, else why not."""
    if os.geteuid() != 0:
        return "not root: cannot mount a filesystem"
    where.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)],
                          capture_output=True, text=True)
    return None if proc.returncode == 0 else f"mount failed: {proc.stderr.strip() or proc.returncode}"


@pytest.fixture(params=["tmpfs", "fsize"])
def disk(request, tmp_path):
    """Where the small disk is and how a command is run against it: ``disk.root`` is a directory
    on it (tmpfs) or an ordinary one whose files the command may not grow past FSIZE (fsize)."""
    root = tmp_path / "small"
    mode = request.param
    if mode == "tmpfs":
        why = _mount_tmpfs(root, SMALL)
        if why:
            print(f"full-disk on tmpfs skipped: {why}; the RLIMIT_FSIZE cases run instead")
            pytest.skip(f"no small filesystem here ({why}); RLIMIT_FSIZE cases cover this")
        request.addfinalizer(lambda: subprocess.run(["umount", "-l", str(root)], check=False))
    else:
        root.mkdir()
    return Disk(mode, root)


class Disk:
    def __init__(self, mode: str, root: Path) -> None:
        self.mode, self.root = mode, root

    def run(self, store: Path, *args, input: bytes | None = None) -> Run:
        """The installed cortexctl in a process of its own; under the fsize mode, with its files capped."""
        def cap():
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the cap is EFBIG, not a kill
            resource.setrlimit(resource.RLIMIT_FSIZE, (FSIZE, FSIZE))

        proc = subprocess.run(cortexctl_argv() + [str(a) for a in args], input=input, capture_output=True,
                              env=_full_env(store, None, True), timeout=600,
                              preexec_fn=cap if self.mode == "fsize" else None)
        return Run([str(a) for a in args], proc.returncode, proc.stdout.decode("utf-8", "replace"),
                   proc.stderr.decode("utf-8", "replace"))


def assert_clear_failure(run: Run) -> None:
    """Failed, with a documented code and one line on stderr that says the disk is full."""
    assert run.code not in (0, 70), run
    assert run.code in (1, 7, 9), run
    assert "Traceback" not in run.err and "internal error" not in run.err, run
    lines = [l for l in run.err.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("cortexctl: "), run
    assert "no space" in run.err.lower() or "too large" in run.err.lower(), run


def _files(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*")} if path.exists() else set()


def _acknowledged(store: Path, n: int = 5) -> set[str]:
    cx = Cortex(store=store, actor="alice")
    return {cx.write("fact", f"acknowledged before the disk filled {i}").id for i in range(n)}


def _big_import(path: Path, lines: int = 20_000, *, varied: bool = False) -> Path:
    """``lines`` memories to import; ``varied``: each of its own words, which a bundle's compression
    cannot fold together (about 1.5 KB of bundle a memory, where the same words make about 0.1 KB)."""
    draw = random.Random(20261128)
    with open(path, "w") as fh:
        for i in range(lines):
            words = " ".join(f"{draw.getrandbits(40):010x}" for _ in range(30)) if varied else "lorem ipsum dolor " * 30
            fh.write(json.dumps({"type": "fact", "text": f"imported memory {i} {words}"}) + "\n")
    return path


def _still_there(store: Path, ids: set[str]) -> None:
    cx = Cortex(store=store, actor="alice")
    for id_ in ids:
        assert cx.show(id_).id == id_
    assert_store_verifies(store)


@pytest.mark.slow
def test_an_import_that_fills_the_disk_fails_clearly_and_loses_nothing(disk, tmp_path):
    store = disk.root / "store"
    ids = _acknowledged(store)
    before = _files(store)
    source = _big_import(tmp_path / "big.jsonl")

    run = disk.run(store, "import", source)

    assert_clear_failure(run)
    assert _files(store) <= before | {"cortex.duckdb.wal"}, _files(store) - before  # no spill data left
    _still_there(store, ids)


@pytest.mark.slow
def test_a_backup_that_fills_its_destination_fails_clearly_and_leaves_no_partial_bundle(disk, tmp_path):
    store = tmp_path / "store"
    ids = _acknowledged(store)
    # a bundle above the filesystem's 12 MB (a store's files above the per-file cap)
    big = _big_import(tmp_path / "big.jsonl", 10_000, varied=True)
    Cortex(store=store, actor="alice").import_jsonl(open(big, "rb"))
    dest = disk.root / "backups"

    run = disk.run(store, "backup", "--dest", dest)

    assert_clear_failure(run)
    assert not dest.exists() or not any(dest.iterdir()), _files(dest)
    _still_there(store, ids)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["merge", "replace"])
def test_a_restore_that_fills_the_disk_fails_clearly_and_keeps_the_store(disk, tmp_path, mode):
    source = tmp_path / "source"
    Cortex(store=source, actor="alice").import_jsonl(open(_big_import(tmp_path / "big.jsonl", 6_000), "rb"))
    bundle = Path(Cortex(store=source, actor="alice").backup(dest=tmp_path / "bundles").path)
    store = disk.root / "store"
    ids = _acknowledged(store)
    before = _files(store)
    siblings = set(os.listdir(disk.root))

    run = disk.run(store, "restore", bundle, "--mode", mode, *(["--force"] if mode == "replace" else []))

    assert_clear_failure(run)
    assert _files(store) <= before | {"cortex.duckdb.wal"}, _files(store) - before
    assert set(os.listdir(disk.root)) == siblings  # no staging beside the store
    _still_there(store, ids)
