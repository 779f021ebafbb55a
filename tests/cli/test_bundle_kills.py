"""backup and restore under SIGKILL, beside a writer, and against a held writer lock (real processes)."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import orjson
import pytest

from tests.conftest import assert_clean_error, assert_store_verifies, cortexctl_argv, run_process

N = 3000
DELAYS_BACKUP = 8
DELAYS_RESTORE = 7
MAX_TRIES = 40  # kills that missed (the process had already finished) are tried again, up to this many


def _env(store: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORTEXCTL_")}
    env.update(CORTEXCTL_STORE=str(store), CORTEXCTL_ACTOR="alice")
    return env


def _spawn(store: Path, *args) -> subprocess.Popen:
    return subprocess.Popen(cortexctl_argv() + [str(a) for a in args], env=_env(store),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _kill_after(proc: subprocess.Popen, delay: float) -> bool:
    """SIGKILL ``proc`` after ``delay`` seconds; True when it was still running then."""
    try:
        proc.wait(timeout=delay)
        return False
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        return True


def _whole_run(store: Path, *args) -> float:
    """How long ``cortexctl ARGS`` takes start to end on this machine, to spread kills over (not a bound)."""
    started = time.monotonic()
    proc = _spawn(store, *args)
    assert proc.wait(timeout=600) == 0, args
    return time.monotonic() - started


def _kill_moments(whole: float, rng: random.Random):
    """Moments (seconds after start) from start-up to past the end of a run that takes ``whole``."""
    while True:
        yield rng.uniform(0.02, 1.1) * whole


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """A store of a few thousand memories, imported with `cortexctl import` (copied by each test)."""
    base = tmp_path_factory.mktemp("big")
    src = base / "m.jsonl"
    with open(src, "wb") as fh:
        for i in range(N):
            fh.write(orjson.dumps({"type": "fact", "text": f"fact {i} about the deploy key rotation and item{i % 97}",
                                   "tags": [f"t{i % 7}"]}) + b"\n")
    store = base / "store"
    r = run_process(store, "import", src, env=_env(store))
    assert r.code == 0, r
    return store


@pytest.fixture
def populated(tmp_path, big):
    store = tmp_path / "populated"
    shutil.copytree(big, store)
    return store


def _export(store: Path) -> str:
    r = run_process(store, "export", env=_env(store))
    assert r.code == 0, r
    return r.out


@pytest.mark.slow
def test_a_backup_killed_at_any_moment_leaves_no_unsound_bundle_and_the_next_backup_clears_its_partial(
        populated, tmp_path):
    dest = tmp_path / "bundles"
    dest.mkdir()
    whole = _whole_run(populated, "backup", "--dest", tmp_path / "timing", "--quiet")
    killed = tries = 0
    for delay in _kill_moments(whole, random.Random(1234)):  # from start-up to past the rename
        killed += _kill_after(_spawn(populated, "backup", "--dest", dest, "--keep", "100", "--quiet"), delay)
        tries += 1
        for b in dest.glob("backup-*"):
            r = run_process(populated, "bundle", "verify", b, env=_env(populated))
            assert r.code == 0, (delay, r)
        if (tries >= DELAYS_BACKUP and killed >= 3) or tries == MAX_TRIES:
            break
    assert killed >= 3, f"{killed} of {tries} kills landed inside a backup"
    partials = [p for p in dest.iterdir() if p.name.startswith(".backup-partial-")]
    r = run_process(populated, "backup", "--dest", dest, "--keep", "100", "--json", env=_env(populated))
    assert r.code == 0, r
    left = [p.name for p in dest.iterdir() if p.name.startswith(".backup-partial-")]
    assert left == [], (partials, left)  # both the partial directories and their -snapshot copies
    assert run_process(populated, "bundle", "verify", r.json()["path"], env=_env(populated)).code == 0


@pytest.mark.slow
def test_a_killed_backup_leaves_a_partial_and_its_snapshot_which_the_next_backup_removes(populated, tmp_path):
    """Kill during the snapshot/export phase until a partial and its -snapshot directory are left behind."""
    dest = tmp_path / "bundles"
    dest.mkdir()  # a kill before backup makes it leaves nothing to look at
    whole = _whole_run(populated, "backup", "--dest", tmp_path / "timing", "--quiet")
    seen: set[str] = set()
    moments = _kill_moments(whole, random.Random(77))
    for _ in range(MAX_TRIES):
        _kill_after(_spawn(populated, "backup", "--dest", dest, "--keep", "100", "--quiet"), next(moments))
        seen.update("snapshot" if p.name.endswith("-snapshot") else "partial"
                    for p in dest.iterdir() if p.name.startswith(".backup-partial-"))
        if seen == {"snapshot", "partial"}:
            break
    assert seen == {"snapshot", "partial"}, f"after {MAX_TRIES} kills, left behind: {seen}"
    r = run_process(populated, "backup", "--dest", dest, "--keep", "100", "--quiet", env=_env(populated))
    assert r.code == 0 and r.out == "", r
    assert [p.name for p in dest.iterdir() if p.name.startswith(".backup-partial-")] == []


@pytest.mark.slow
def test_replace_killed_at_any_moment_leaves_the_old_store_or_the_new_one_and_it_verifies(
        populated, tmp_path):
    # The bundle: the big store with a few more memories; the target: the big store as it is.
    source = tmp_path / "source"
    shutil.copytree(populated, source)
    for i in range(3):
        assert run_process(source, "write", "fact", f"only in the bundle {i}", env=_env(source)).code == 0
    r = run_process(source, "backup", "--dest", tmp_path / "bundles", "--json", env=_env(source))
    assert r.code == 0, r
    bundle = r.json()["path"]
    new, old = _export(source), _export(populated)
    assert new != old
    timing = tmp_path / "timing"
    shutil.copytree(populated, timing)
    whole = _whole_run(timing, "restore", bundle, "--mode", "replace", "--force")
    moments = _kill_moments(whole, random.Random(99))
    outcomes = []
    for i in range(MAX_TRIES):
        target = tmp_path / f"target-{i}"
        shutil.copytree(populated, target)
        delay = next(moments)
        killed = _kill_after(_spawn(target, "restore", bundle, "--mode", "replace", "--force"), delay)
        now = _export(target)
        assert now in (old, new), (delay, killed)
        outcomes.append((killed, "new" if now == new else "old"))
        assert_store_verifies(target)
        shutil.rmtree(target)
        if len(outcomes) >= DELAYS_RESTORE and any(k for k, _ in outcomes):
            break
    assert any(k for k, _ in outcomes), outcomes  # some kills landed inside the restore


@pytest.mark.slow
def test_a_backup_beside_a_writer_loop_succeeds_or_is_busy_and_what_it_writes_restores_and_verifies(
        populated, tmp_path):
    stop = tmp_path / "stop"
    loop = subprocess.Popen(["/bin/sh", "-c", textwrap.dedent(f"""
        i=0
        while [ ! -e {stop} ]; do
          {' '.join(cortexctl_argv())} write fact "written beside a backup $i" --wait 10 >/dev/null 2>&1
          i=$((i+1))
        done
    """)], env=_env(populated))
    try:
        time.sleep(1.0)  # let the writer loop get going (a pause, not a measure)
        results = []
        while len(results) < 2 or not any(r.code == 0 for r in results):  # busy every time: try again
            assert len(results) < 20, results
            r = run_process(populated, "backup", "--dest", tmp_path / "bundles", "--keep", "10", "--wait", "5",
                            "--json", env=_env(populated))
            assert r.code in (0, 4), r
            results.append(r)
    finally:
        stop.touch()
        loop.wait(timeout=60)
    done = [r for r in results if r.code == 0]
    assert done, results
    for i, r in enumerate(done):
        bundle = r.json()["path"]
        assert run_process(populated, "bundle", "verify", bundle, env=_env(populated)).code == 0
        fresh = tmp_path / f"fresh-{i}"
        rr = run_process(fresh, "restore", bundle, "--mode", "replace", env=_env(fresh))
        assert rr.code == 0, rr
        assert_store_verifies(fresh)
    assert_store_verifies(populated)


def test_a_backup_of_a_store_whose_writer_lock_is_held_exits_4_without_waiting_for_it_and_leaves_no_bundle(
        tmp_path):
    store = tmp_path / "store"
    assert run_process(store, "write", "fact", "held", env=_env(store)).code == 0
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import fcntl, os, sys
        fd = os.open({str(store / '.lock')!r}, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        print("held", flush=True)
        sys.stdin.read()  # held until killed: a backup that waited for it would never end
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    dest = tmp_path / "bundles"
    try:
        assert holder.stdout.readline().strip() == b"held"
        r = run_process(store, "backup", "--dest", dest, "--wait", "0.5", env=_env(store), timeout=120)
    finally:
        holder.kill()
        holder.wait()
    assert_clean_error(r, 4)
    assert not dest.exists() or list(dest.iterdir()) == []
