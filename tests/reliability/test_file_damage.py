"""Byte flips and truncation in every file of a store, behind cortexctl's back.

Every file a DuckDB store keeps (the database, the index file, the search snapshot, its delta, the
generation file) is damaged at many offsets (fixed seeds), and the store is then driven through the
real ``cortexctl`` in subprocesses, so a crash shows as a signal or exit 70 and not as a dead test
process:

- ``find`` never crashes and never answers wrongly in silence: the answer of the sound store (maybe
  with a warning), or exit 7 naming the file;
- ``verify`` and ``healthcheck`` report the damage they can see (a flip in the database's free space,
  or in the generation file, which only makes find bypass the snapshot, hurts nothing and may pass);
- plain ``reindex`` repairs what damage to a cache (index file, snapshot, delta) broke.

The index file is damaged in particular where its quick check (sampled blocks) does not read. The
default lane flips 16 bytes of each file once and cuts the database in half; the sweep (``slow``)
makes fifteen cases a file (twelve 16-byte flips, three cuts) and prints its counts, also to the file
``CORTEXCTL_DAMAGE_REPORT`` names when set (pytest-xdist keeps a worker's output to itself).
"""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cortexctl import Cortex
from cortexctl.index import hnsw
from cortexctl.store import snapshot
from cortexctl.store import vector_index as semantic
from tests import tamper
from tests.conftest import Run, clean_environment, run_process

REPORT = os.environ.get("CORTEXCTL_DAMAGE_REPORT")  # read at import: every test runs with CORTEXCTL_* cleared
N = semantic.EXACT_MAX + 400  # enough memories that an unfiltered find --near goes through the index file
NEAR = "item77 kilo"
OTHER = "item1234 lima"
WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november".split()

DB, INDEX, SNAP, DELTA, GEN = (tamper.DB_NAME, semantic.INDEX_NAME, snapshot.SNAPSHOT_NAME, snapshot.DELTA_NAME,
                               snapshot.GEN_NAME)


def _line(i: int) -> bytes:
    words = " ".join(WORDS[(i * p) % len(WORDS)] for p in (1, 3, 7))
    return json.dumps({"type": "fact", "text": f"note {i} {words} item{i}"}).encode() + b"\n"


@dataclass
class Sound:
    """The template store and what it answers while sound."""

    path: Path
    near: list[str]
    other: list[str]


@pytest.fixture(scope="module")
def sound(tmp_path_factory) -> Sound:
    root = tmp_path_factory.mktemp("damage")
    with clean_environment(root):
        path = root / "store"
        cx = Cortex(store=path, actor="alice")
        assert cx.import_jsonl(iter([_line(i) for i in range(N)])).imported == N
        near, other = _answers(path)
        return Sound(path, near, other)


def _find(store: Path, *args) -> Run:
    return run_process(store, "find", *args, "-k", "5", "--json", "--store", store)


def _answers(store: Path) -> tuple[list[str], list[str]]:
    near, other = _find(store, "--near", NEAR), _find(store, "--near", OTHER)
    assert near.code == 0 and other.code == 0, (near, other)
    return [r["id"] for r in near.json()["results"]], [r["id"] for r in other.json()["results"]]


def _fresh(sound: Sound, dest: Path) -> Path:
    """A copy of the sound store whose caches are all current: the copy's database is another file
    (its inode), so the snapshot is made anew, and a write leaves a delta beside it."""
    shutil.copytree(sound.path, dest)
    cx = Cortex(store=dest, actor="alice")
    cx.reindex()
    cx.write("fact", "a later note about zulu yankee")
    for name in (DB, INDEX, SNAP, DELTA, GEN):
        assert (dest / name).is_file(), name
    assert snapshot.state(dest) == "current"
    return dest


def _unsampled(size: int, rnd: random.Random, n: int) -> list[int]:
    """Offsets the index file's quick check never reads (outside every sampled block)."""
    step = size // hnsw.SAMPLES
    sampled = [0, max(0, size - hnsw.SAMPLE_BLOCK)] + [i * step for i in range(1, hnsw.SAMPLES)]
    out: list[int] = []
    while len(out) < n:
        off = rnd.randrange(0, size - 16)
        if all(not (s - 16 < off < s + hnsw.SAMPLE_BLOCK) for s in sampled):
            out.append(off)
    return out


def _offsets(path: Path, name: str, rnd: random.Random, n: int) -> list[int]:
    size = path.stat().st_size
    if name == INDEX:
        return _unsampled(size, rnd, n - n // 4) + [rnd.randrange(0, size - 16) for _ in range(n // 4)]
    return sorted(rnd.randrange(0, max(1, size - 16)) for _ in range(n))


@dataclass
class Tally:
    cases: int = 0
    bytes_flipped: int = 0
    detected: int = 0  # verify or healthcheck (or find's exit 7) said so
    harmless: list[str] = field(default_factory=list)  # nothing could tell, and nothing was wrong

    def line(self, name: str) -> str:
        return (f"{name}: {self.cases} damaged copies, {self.bytes_flipped} bytes flipped, {self.detected} detected, "
                f"{len(self.harmless)} harmless and unseen")


def _report(line: str) -> None:
    """Print the counts, and append them to the file ``CORTEXCTL_DAMAGE_REPORT`` names."""
    print(line)
    if REPORT:
        with open(REPORT, "a") as fh:
            fh.write(line + "\n")


def _crashed(run) -> bool:
    return run.code < 0 or run.code >= 70 or "Traceback" in run.err


def _attack(sound: Sound, store: Path, name: str, damage: str, reindex_first: bool, tally: Tally) -> None:
    """Check the store after its file ``name`` was damaged (``damage`` says how, for messages)."""
    what = f"{name} {damage}"
    health = run_process(store, "healthcheck", "--json", "--store", store)
    verify = run_process(store, "verify", "--store", store)
    for run in (health, verify):
        assert not _crashed(run), (what, run)
    doc = json.loads(health.out)
    health_saw = doc["status"] != "healthy"
    if health_saw:
        assert name in " ".join(doc["details"]), (what, doc["details"])
        assert health.code == (7 if name == DB else 0), (what, health)
    assert verify.code in (0, 7), (what, verify)
    if verify.code == 7:
        assert name in verify.out + verify.err, (what, verify)
    if name == INDEX:  # any flipped byte changes the whole-file CRC
        assert verify.code == 7 and health_saw, (what, verify, doc["details"])

    if reindex_first and name != DB:
        run = run_process(store, "reindex", "--store", store)
        assert run.code == 0, (what, run)
    finds_saw = False
    for args, want in ((("--near", NEAR), sound.near), (("--near", OTHER), sound.other)):
        run = _find(store, *args)
        assert not _crashed(run), (what, run)
        if run.code == 7:
            assert name == DB and str(store / DB) in run.err, (what, run)
            finds_saw = True
            continue
        assert run.code == 0, (what, run)
        got = [r["id"] for r in run.json()["results"]]
        assert got == want, (what, run)

    seen = health_saw or verify.code == 7 or finds_saw
    tally.detected += seen
    if not seen:
        tally.harmless.append(what)
    if name == DB:
        if damage.startswith("cut to 50.0%"):  # half the database gone: every command says so, naming it
            reindex = run_process(store, "reindex", "--store", store)
            for run in (health, verify, reindex):
                assert run.code == 7 and str(store / DB) in run.err, (what, run)
            assert finds_saw, what
        return
    run = run_process(store, "reindex", "--store", store)  # plain: repairs whatever a cache's damage broke
    assert run.code == 0, (what, run)
    after = run_process(store, "verify", "--store", store)
    assert after.code == 0, (what, after)
    run = _find(store, "--near", NEAR)
    assert run.code == 0 and [r["id"] for r in run.json()["results"]] == sound.near, (what, run)
    assert not run.json()["warnings"], (what, run)


def _sweep(sound: Sound, tmp_path: Path, name: str, flips: int, cuts: list[float], seed: int) -> Tally:
    rnd = random.Random(seed)
    tally = Tally()
    first = _fresh(sound, tmp_path / "case0")
    plans = [("flip", off) for off in _offsets(first / name, name, rnd, flips)] + [("cut", f) for f in cuts]
    for i, (kind, at) in enumerate(plans):
        store = first if i == 0 else _fresh(sound, tmp_path / f"case{i}")
        path = store / name
        if kind == "flip":
            tamper.flip_bytes(path, at, 16)
            tally.bytes_flipped += 16
            damage = f"16 bytes flipped at {at}"
        else:
            size = path.stat().st_size
            tamper.truncate(path, int(size * at))
            damage = f"cut to {at:.1%} of {size} bytes"
        tally.cases += 1
        _attack(sound, store, name, damage, reindex_first=bool(i % 2), tally=tally)
        shutil.rmtree(store)
    return tally


FILES = [DB, INDEX, SNAP, DELTA, GEN]


@pytest.mark.parametrize("name", FILES)
def test_a_flip_in_each_file_and_a_database_cut_in_half_never_crash_or_mislead(sound, tmp_path, name):
    tally = _sweep(sound, tmp_path, name, flips=1, cuts=[0.5] if name == DB else [], seed=29)
    _report(tally.line(name))
    if name == DB:  # the cut is always detected; a flip may land in space the file does not use
        # (where it lands moves with the store's layout), and _sweep has then checked every answer
        assert tally.detected >= 1 and tally.detected + len(tally.harmless) == tally.cases, tally
    elif name != GEN:  # the generation file only decides whether the snapshot is current
        assert tally.detected == tally.cases, tally


@pytest.mark.slow
@pytest.mark.parametrize("name", FILES)
def test_the_sweep_of_every_file_never_crashes_or_misleads(sound, tmp_path, name):
    tally = _sweep(sound, tmp_path, name, flips=12, cuts=[0.0, 0.5, 0.999], seed=2029)
    _report(f"{tally.line(name)}; unseen: {tally.harmless}")
    if name in (INDEX, DELTA):  # every byte of these is checked
        assert tally.detected == tally.cases, tally


def test_plain_reindex_rebuilds_an_index_damaged_where_the_quick_check_does_not_read(sound, tmp_path):
    store = _fresh(sound, tmp_path / "store")
    index = store / INDEX
    for off in _unsampled(index.stat().st_size, random.Random(400), 25):
        tamper.flip_bytes(index, off, 16)  # 400 bytes, none in a sampled block
    mtime = index.stat().st_mtime_ns
    os.utime(index, ns=(mtime, mtime))
    run = run_process(store, "reindex", "--json", "--store", store)
    assert run.code == 0 and run.json()["index"]["action"] == "rebuild", run
    assert run_process(store, "verify", "--store", store).code == 0
    run = _find(store, "--near", NEAR)
    assert run.code == 0 and [r["id"] for r in run.json()["results"]] == sound.near and not run.json()["warnings"]


def test_find_on_an_index_damaged_where_the_quick_check_does_not_read_answers_and_names_the_file(sound, tmp_path):
    store = _fresh(sound, tmp_path / "store")
    index = store / INDEX
    for off in _unsampled(index.stat().st_size, random.Random(401), 25):
        tamper.flip_bytes(index, off, 16)
    health = run_process(store, "healthcheck", "--json", "--store", store)
    assert health.code == 0 and json.loads(health.out)["status"] == "degraded", health
    assert str(index) in " ".join(json.loads(health.out)["details"])
    holder = tamper.hold_writer_lock(store)  # another writer: find cannot rebuild it, and must not wait
    try:
        run = _find(store, "--near", NEAR)
    finally:
        holder.kill()
        holder.wait()
    assert run.code == 0 and [r["id"] for r in run.json()["results"]] == sound.near, run
    assert len(run.json()["warnings"]) == 1, run
    assert str(index) in run.json()["warnings"][0] and "cortexctl reindex" in run.json()["warnings"][0], run
    assert str(index) in run.err and run.err.count("\n") == 1, run
    run = _find(store, "--near", NEAR)  # now it can: rebuilt, and said only with -v
    assert run.code == 0 and [r["id"] for r in run.json()["results"]] == sound.near and not run.json()["warnings"]
    assert run_process(store, "verify", "--store", store).code == 0


# -- a store file that is not a regular file ----------------------------------------------------------
# A FIFO, a device or a symlink in place of a store's own file: opened as it stood, a FIFO blocked
# every command until someone wrote to it, /dev/zero was read until memory ran out, and the
# generation file was written through a symlink outside the store.
RECORD, INDEX_STAMP, FOLD_LOG = semantic.RECORD_NAME, INDEX + ".checked", "cortex.fold.log"


def _replace_with(path: Path, kind: str) -> None:
    path.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")


@pytest.mark.parametrize("kind", ["fifo", "zero"])
@pytest.mark.parametrize("name", [GEN, INDEX, RECORD, INDEX_STAMP, SNAP, DELTA, FOLD_LOG])
def test_a_fifo_or_device_in_place_of_a_cache_file_is_passed_over_never_read(sound, tmp_path, name, kind):
    store = _fresh(sound, tmp_path / "store")
    _replace_with(store / name, kind)
    run = run_process(store, "find", "--near", NEAR, "-k", "5", "--json", "--store", store, timeout=60)
    assert run.code == 0 and [r["id"] for r in run.json()["results"]] == sound.near, run
    for args in (("healthcheck",), ("verify",)):
        run = run_process(store, *args, "--store", store, timeout=60)
        assert not _crashed(run) and run.code in (0, 1, 7), run
    run = run_process(store, "write", "fact", "after the damage", "--store", store, timeout=60)
    assert run.code == 0, run


def test_the_generation_file_is_never_written_through_a_symlink(sound, tmp_path):
    store = _fresh(sound, tmp_path / "store")
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"not the store's\n")
    (store / GEN).unlink()
    (store / GEN).symlink_to(outside)
    run = run_process(store, "write", "fact", "a note written past a symlink", "--store", store)
    assert run.code == 0, run
    assert outside.read_bytes() == b"not the store's\n"
    assert (store / GEN).is_file() and not (store / GEN).is_symlink()
    assert run_process(store, "verify", "--store", store).code == 0


@pytest.mark.parametrize("kind", ["dangling", "directory"])
def test_a_lock_file_that_is_not_a_regular_file_is_damage_naming_it(sound, tmp_path, kind):
    store = _fresh(sound, tmp_path / "store")
    lock = store / ".lock"
    lock.unlink()
    if kind == "dangling":
        lock.symlink_to(tmp_path / "nowhere")
    else:
        lock.mkdir()
    for args in (("write", "fact", "x"), ("reindex",), ("backup", "--dest", tmp_path / "b"), ("find", "--near", NEAR)):
        run = run_process(store, *args, "--store", store)
        assert run.code == 7 and str(lock) in run.err and run.err.count("\n") == 1, run
    health = run_process(store, "healthcheck", "--json", "--store", store)
    assert json.loads(health.out)["status"] == "unhealthy" and str(lock) in json.loads(health.out)["damaged"], health


def test_a_directory_in_place_of_the_generation_file_is_damage_naming_it(sound, tmp_path):
    """No write could replace it (a symlink or FIFO there is replaced by the next write, above):
    every command says so, healthcheck too, where it said healthy while every write failed."""
    store = _fresh(sound, tmp_path / "store")
    (store / GEN).unlink()
    (store / GEN).mkdir()
    for args in (("write", "fact", "x"), ("find", "--near", NEAR), ("verify",), ("reindex",)):
        run = run_process(store, *args, "--store", store)
        assert run.code == 7 and str(store / GEN) in run.err and run.err.count("\n") == 1, run
    health = run_process(store, "healthcheck", "--json", "--store", store)
    assert json.loads(health.out)["status"] == "unhealthy" and str(store / GEN) in json.loads(health.out)["damaged"]


def test_a_wal_that_is_not_a_regular_file_is_damage_naming_it(sound, tmp_path):
    store = _fresh(sound, tmp_path / "store")
    outside = tmp_path / "elsewhere.wal"
    outside.write_bytes(b"")
    wal = store / (DB + ".wal")
    wal.unlink(missing_ok=True)
    wal.symlink_to(outside)
    for args in (("write", "fact", "x"), ("find", "--near", NEAR), ("backup", "--dest", tmp_path / "b")):
        run = run_process(store, *args, "--store", store)
        assert run.code == 7 and str(wal) in run.err and run.err.count("\n") == 1, run
    assert outside.read_bytes() == b""


def test_an_unreadable_index_record_is_reported_by_verify_and_healthcheck_by_name(sound, tmp_path):
    store = _fresh(sound, tmp_path / "store")
    tamper.flip_bytes(store / RECORD, 0)
    run = run_process(store, "verify", "--store", store)
    assert run.code == 7 and RECORD in run.out + run.err, run
    health = run_process(store, "healthcheck", "--json", "--store", store)
    assert RECORD in " ".join(json.loads(health.out)["details"]), health
    run = _find(store, "--near", NEAR)  # rebuilt
    assert run.code == 0 and [r["id"] for r in run.json()["results"]] == sound.near, run
    assert run_process(store, "verify", "--store", store).code == 0


def test_backup_of_a_damaged_database_is_damage_naming_the_file(sound, tmp_path):
    store = _fresh(sound, tmp_path / "store")
    tamper.flip_bytes(store / DB, 8)
    run = run_process(store, "backup", "--dest", tmp_path / "b", "--store", store)
    assert run.code == 7 and str(store / DB) in run.err and run.err.count("\n") == 1, run


@pytest.mark.parametrize("err", [errno.EROFS, errno.EACCES, errno.EIO, errno.ENOENT],
                         ids=["read-only", "no-permission", "io-error", "gone"])
def test_a_lock_file_that_cannot_be_opened_for_want_of_permission_is_not_called_damaged(tmp_path, err, monkeypatch):
    """A read-only file system, no permission, an I/O error or the directory gone meanwhile is said as
    it is (exit 1, naming the file), never as a lock file that is not a regular file to be removed,
    nor as an internal error (the fault injected: this runs as root)."""
    from tests.conftest import run_in_process

    store = tmp_path / "store"
    Cortex(store=store, actor="alice").write("fact", "a memory before the file system went read-only")
    lock = str(store / ".lock")
    real_open = os.open

    def refusing(path, flags, *args, **kw):
        if str(path) == lock:
            raise OSError(err, os.strerror(err), lock)
        return real_open(path, flags, *args, **kw)

    monkeypatch.setattr(os, "open", refusing)
    run = run_in_process(store, "write", "fact", "x", env={"CORTEXCTL_ACTOR": "alice"})
    assert run.code == 1 and lock in run.err and os.strerror(err) in run.err and "remove it" not in run.err, run


def test_a_large_index_record_is_read_whole_not_called_damaged(sound, tmp_path):
    """A fold records every key dropped since the last one (``cleared``): some 120k of them is past a
    megabyte of JSON, which a bounded read took for a damaged record."""
    store = _fresh(sound, tmp_path / "store")
    tamper.edit_json(store / RECORD, lambda doc: doc.update(cleared=list(range(10**9, 10**9 + 150_000))))
    assert (store / RECORD).stat().st_size > 1 << 20
    run = run_process(store, "verify", "--store", store)
    assert run.code == 0, run
