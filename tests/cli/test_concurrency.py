"""Many processes, one store: waiting on a busy store, and kills that leave it sound."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import orjson
import pytest

from cortexctl import Cortex, FindQuery
from cortexctl.store.db import DB_NAME
from tests.conftest import assert_clean_error, assert_store_verifies, cortexctl_argv

HOLDER = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1])
con.execute("SELECT count(*) FROM heads").fetchall()
print("holding", flush=True)
time.sleep(float(sys.argv[2]))
con.close()
print("released", flush=True)
"""


def _hold(store, seconds: float) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(store / DB_NAME), str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "holding"
    return proc


def test_show_waits_for_a_writer_and_succeeds_when_released(cx, cli_proc, store):
    uri = cx.write("fact", "waiting is fine").uri
    holder = _hold(store, 1.5)
    try:
        started = time.monotonic()
        r = cli_proc("show", uri, "--wait", "20", "--json")
        waited = time.monotonic() - started
    finally:
        holder.wait(timeout=30)
    assert r.code == 0, r
    assert r.json()["data"]["statement"] == "waiting is fine"
    assert waited >= 0.5, "show returned before the writer released the store"


def test_show_with_wait_zero_exits_4_at_once_naming_the_store(cx, cli_proc, store):
    uri = cx.write("fact", "busy").uri
    holder = _hold(store, 5)
    try:
        started = time.monotonic()
        r = cli_proc("show", uri, "--wait", "0")
        took = time.monotonic() - started
    finally:
        holder.kill()
        holder.wait()
    assert_clean_error(r, 4)
    assert str(store) in r.err and "busy" in r.err
    assert took < 4


def test_write_with_wait_zero_exits_4_while_another_process_holds_the_store(cx, cli_proc, store):
    cx.write("fact", "first")
    holder = _hold(store, 5)
    try:
        r = cli_proc("write", "fact", "second", "--wait", "0")
    finally:
        holder.kill()
        holder.wait()
    assert_clean_error(r, 4)
    assert [h.text for h in Cortex(store=store, actor="alice").find(FindQuery())] == ["first"]
    assert_store_verifies(store)


def test_busy_error_under_json_is_a_json_object_on_stderr(cx, cli_proc, store):
    uri = cx.write("fact", "busy").uri
    holder = _hold(store, 5)
    try:
        r = cli_proc("show", uri, "--wait", "0", "--json")
    finally:
        holder.kill()
        holder.wait()
    assert r.code == 4
    doc = orjson.loads(r.err)
    assert doc["error"] == "busy" and doc["exit_code"] == 4


def _lines(n: int) -> bytes:
    return b"".join(
        orjson.dumps({"type": "fact", "text": f"memory number {i} about the deploy pipeline", "tags": [f"t{i % 7}"]})
        + b"\n"
        for i in range(n)
    )


def _start_import(tmp_path, store, total: int, *args: str, **popen) -> subprocess.Popen:
    """A real `cortexctl import` of `total` generated lines into `store`, running in the background."""
    src = tmp_path / "import.jsonl"
    src.write_bytes(_lines(total))
    env = dict(os.environ, CORTEXCTL_STORE=str(store))
    return subprocess.Popen(cortexctl_argv() + ["import", str(src), "--quiet", *args], env=env, **popen)


def test_sigkill_during_import_leaves_a_store_that_verifies_with_whole_batches(tmp_path, store):
    total, batch = 60_000, 2_000
    proc = _start_import(tmp_path, store, total, "--batch-size", str(batch),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    reader = Cortex(store=store, actor="alice", wait=30)
    count = 0
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if (store / DB_NAME).exists():
                try:
                    with reader.store.read() as con:
                        count = con.execute("SELECT count(*) FROM heads").fetchall()[0][0]
                except Exception:
                    count = 0
                if count >= 2 * batch:
                    break
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    if proc.returncode == 0:
        pytest.skip("the import finished before it could be killed")
    assert proc.returncode == -signal.SIGKILL
    assert_store_verifies(store)
    with reader.store.read() as con:
        heads = con.execute("SELECT count(*) FROM heads").fetchall()[0][0]
        journal = con.execute("SELECT count(*) FROM journal").fetchall()[0][0]
    assert 0 < heads < total
    assert heads % batch == 0, f"{heads} memories is not a whole number of {batch}-memory batches"
    assert journal == heads


def test_concurrent_writers_queue_and_every_write_lands(cli, store):
    cli("write", "fact", "seed")
    env = dict(os.environ, CORTEXCTL_STORE=str(store))
    procs = [
        subprocess.Popen(cortexctl_argv() + ["write", "fact", f"writer {i}", "--wait", "60"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for i in range(6)
    ]
    codes = [p.wait(timeout=120) for p in procs]
    assert codes == [0] * 6, [p.stderr.read() for p in procs]
    r = cli("find", "-k", "100", "--json")
    assert r.json()["count"] == 7
    assert_store_verifies(store)


def test_store_directory_is_0700_and_its_files_0600(cli, store):
    assert cli("write", "fact", "private things").code == 0
    assert cli("update", cli("find", "--jsonl").jsonl()[0]["id"], "more private things").code == 0
    assert (store.stat().st_mode & 0o777) == 0o700
    files = [p for p in store.iterdir() if p.is_file()]
    assert files
    for p in files:
        assert (p.stat().st_mode & 0o777) == 0o600, p


GRABBER = """
import sys, time, duckdb
deadline = time.monotonic() + 60
while True:
    try:
        con = duckdb.connect(sys.argv[1])
        break
    except duckdb.IOException:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.001)
print("holding", flush=True)
time.sleep(4)
con.close()
"""


def test_an_import_stopped_by_a_busy_store_says_what_it_imported_and_how_to_resume(tmp_path, store):
    import re

    total, batch = 20_000, 50
    proc = _start_import(tmp_path, store, total, "--batch-size", str(batch), "--wait", "0.3",
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while not (store / DB_NAME).exists() and proc.poll() is None:
        time.sleep(0.01)
    grabber = subprocess.Popen([sys.executable, "-c", GRABBER, str(store / DB_NAME)], stdout=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        grabber.wait(timeout=60)
    if proc.returncode == 0:
        pytest.skip("the import finished before the store could be taken from it")
    assert proc.returncode == 4, err
    m = re.search(r"import stopped after (\d+) of 20000 memories \(lines 1-(\d+) are imported\)", err)
    assert m, err
    assert f"tail -n +{int(m.group(2)) + 1}" in err
    report = Cortex(store=store, actor="alice").verify()
    assert report.ok and report.memories == int(m.group(1)) and report.memories % batch == 0


def test_find_near_keeps_answering_while_an_import_runs(tmp_path, store, cli_proc):
    """Between batches, and while the index file is built at the end, readers get in."""
    Cortex(store=store, actor="alice").write("fact", "the first memory about walruses")
    proc = _start_import(tmp_path, store, 8000, "--batch-size", "1000")
    answered = 0
    try:
        while proc.poll() is None:
            run = cli_proc("find", "--near", "walruses", "--wait", "10", "--json")
            assert run.code == 0, run
            assert run.json()["results"], run
            answered += 1
    finally:
        proc.wait(timeout=300)
    assert proc.returncode == 0
    assert answered >= 1
    assert_store_verifies(store)
