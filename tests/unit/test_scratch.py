"""The store's scratch space (store/scratch.py): private, named by owner, swept of the dead only."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from cortexctl.store import scratch


def _entry(area, kind, pid, started):
    path = area / scratch.name(kind, pid, started)
    path.mkdir(parents=True)
    (path / "member.parquet").write_bytes(b"plain")
    return path


def test_work_space_is_private_and_gone_afterwards(tmp_path):
    tmp_path = tmp_path / "stores"
    tmp_path.mkdir()
    store = tmp_path / "store"
    areas = scratch.for_store_dir(store)
    with scratch.space(areas, "bundle") as path:
        (path / "plain.parquet").write_bytes(b"x")
        assert path.parent == tmp_path / ".store.scratch"
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700 and stat.S_IMODE(path.stat().st_mode) == 0o700
        assert stat.S_IMODE((path / "plain.parquet").stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # the entry and its emptied area


def test_a_sweep_removes_the_dead_and_keeps_the_living(tmp_path):
    area = tmp_path / ".store.scratch"
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        started = scratch.start_time(child.pid)
        assert started > 0
        live = _entry(area, "restore", child.pid, started)
        reused = _entry(area, "import", child.pid, started + 1)  # the same pid, another process
        mine = scratch.make([area], "merge")
        stray = area / "not-an-entry"
        stray.write_bytes(b"x")
        removed = scratch.sweep([area])
        assert sorted(removed) == sorted([reused.name, stray.name])
        assert live.is_dir() and mine.is_dir()
    finally:
        child.stdin.close()
        child.wait()
    assert sorted(scratch.sweep([area])) == [live.name]  # its process has ended
    scratch.remove(mine)
    assert not area.exists()


def test_an_empty_area_a_killed_command_left_is_swept_and_made_again_when_needed(tmp_path):
    """A command killed between making the area and its entry in it (or between removing its entry
    and the area) leaves the area empty: the next sweep removes it, and work made after has one."""
    area = tmp_path / ".store.scratch"
    area.mkdir(mode=0o700)
    assert scratch.sweep([area]) == []
    assert not area.exists()
    made = scratch.make([area], "bundle")
    assert made.parent == area and made.is_dir()
    assert scratch.sweep([area]) == [] and made.is_dir()  # a living command's area stays
    scratch.remove(made)
    assert not area.exists()


def test_work_is_made_when_a_sweep_removes_the_empty_area_under_it(tmp_path, monkeypatch):
    """A sweep may remove the area, empty, between its making and the check that it is ours: the
    work is made in it all the same (made again), never refused or put elsewhere."""
    area = tmp_path / ".store.scratch"
    real = os.lstat
    swept = []

    def then_swept(path, *args, **kw):
        got = real(path, *args, **kw)
        if os.fspath(path) == os.fspath(area) and not swept:
            swept.append(scratch.sweep([area]))  # another command's sweep, just after the look
        return got

    monkeypatch.setattr(scratch.os, "lstat", then_swept)
    made = scratch.make([area, tmp_path / "elsewhere"], "restore")
    assert swept == [[]] and made.parent == area and made.is_dir()
    scratch.remove(made)


def test_work_made_where_our_pids_mean_nothing_is_left_for_a_day(tmp_path):
    """Another container or machine sharing the directory: its pids are not ours to look up."""
    area = tmp_path / ".store.scratch"
    other = "ffffffff" if scratch.where() != "ffffffff" else "00000000"
    young = area / f"restore-1-1-{other}-0a1b2c3d"
    old = area / f"import-1-1-{other}-0a1b2c3e"
    young.mkdir(parents=True)
    old.mkdir()
    os.utime(old, (1, 1))
    assert scratch.sweep([area]) == [old.name]
    assert young.is_dir()


def test_older_versions_leftovers_are_swept_too(tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    old_staging = tmp_path / f".store.restore-{dead.stdout.strip()}-0a1b2c3d"
    old_staging.mkdir()
    other = tmp_path / f".other.restore-{dead.stdout.strip()}-0a1b2c3d"
    other.mkdir()
    old_spill = store / ".import-abc123"
    old_spill.mkdir()
    os.utime(old_spill, (1, 1))
    fresh_spill = store / ".import-def456"  # may be a running older import's: left alone while young
    fresh_spill.mkdir()
    removed = scratch.sweep(scratch.for_store_dir(store), store_dir=store)
    assert sorted(removed) == sorted([old_staging.name, old_spill.name])
    assert other.is_dir() and fresh_spill.is_dir()


def _other_file_system(tmp_path):
    """A writable directory of ours on another file system than ``tmp_path`` (tmpfs at /dev/shm)."""
    import tempfile

    import pytest

    for root in ("/dev/shm", "/run/shm", "/run/user/%d" % os.getuid()):
        try:
            if os.stat(root).st_dev != os.stat(tmp_path).st_dev and os.access(root, os.W_OK):
                return Path(tempfile.mkdtemp(dir=root, prefix="cortexctl-test-"))
        except OSError:
            continue
    pytest.skip("no second file system is writable here")


def test_a_store_directory_that_is_a_mount_point_keeps_its_work_on_its_own_file_system(tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    assert scratch.for_store_dir(store) == [tmp_path / ".store.scratch", store / ".scratch"]
    mount = next(Path(p) for p in ("/dev/shm", "/proc", "/sys") if os.path.ismount(p))
    assert scratch.for_store_dir(mount) == [mount / ".scratch", mount.parent / f".{mount.name}.scratch"]
    assert scratch.beside_store_dir(mount) == mount.parent / f".{mount.name}.scratch"  # a restore's staging


def test_a_file_made_on_another_file_system_is_copied_in_whole(tmp_path):
    import shutil

    from cortexctl.files import leftover_temps, move_in

    other = _other_file_system(tmp_path)
    try:
        src = other / "made.tmp"
        src.write_bytes(b"new index file" * 1000)
        dest = tmp_path / "cortex.usearch"
        dest.write_bytes(b"old")
        assert move_in(src, dest) is True
        assert dest.read_bytes() == b"new index file" * 1000 and not src.exists()
        assert stat.S_IMODE(dest.stat().st_mode) == 0o600 and leftover_temps(dest) == []
        same = tmp_path / "same.tmp"
        same.write_bytes(b"renamed")
        inode = same.stat().st_ino
        assert move_in(same, dest) is False and dest.stat().st_ino == inode
    finally:
        shutil.rmtree(other, ignore_errors=True)


def test_an_index_file_saved_on_another_file_system_is_installed_unstamped_and_sound(tmp_path):
    import shutil

    import numpy as np

    from cortexctl.index import hnsw

    other = _other_file_system(tmp_path)
    try:
        index = hnsw.new(8, 50)
        vectors = np.random.default_rng(3).random((50, 8), dtype=np.float32)
        hnsw.add(index, np.arange(1, 51, dtype=np.uint64), vectors)
        tmp = other / ".cortex.usearch.x.tmp"
        fp = hnsw.save_beside(index, tmp)
        path = tmp_path / "cortex.usearch"
        hnsw.install(tmp, path, fp)
        assert not tmp.exists() and not hnsw.stamp_path(path).exists()  # another inode than the one saved
        assert hnsw.trusted(path, fp)  # read whole once, then stamped
        assert hnsw.stamp_path(path).exists()
    finally:
        shutil.rmtree(other, ignore_errors=True)
