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
from tests import tamper
from tests.conftest import Run, assert_clean_error, assert_store_verifies, cortexctl_argv, run_process

def _hold(store) -> subprocess.Popen:
    """A process holding the store's database open for writing until its stdin gets a line."""
    proc = tamper.hold_open(store)
    assert proc.stdout.readline().strip() == "holding"
    return proc


def _release(holder: subprocess.Popen) -> None:
    holder.stdin.write("release\n")
    holder.stdin.flush()
    assert holder.stdout.readline().strip() == "released"
    holder.wait(timeout=60)


def _stop(holder: subprocess.Popen) -> None:
    holder.kill()
    holder.wait()


def test_show_waits_for_a_writer_and_succeeds_when_released(cx, store):
    uri = cx.write("fact", "waiting is fine").uri
    holder = _hold(store)
    env = dict(os.environ, CORTEXCTL_STORE=str(store))
    show = subprocess.Popen(cortexctl_argv() + ["show", uri, "--wait", "60", "--json"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        time.sleep(1.0)  # give show time to find the store busy (a pause, not a measure)
        assert show.poll() is None, "show returned while another process held the store"
        _release(holder)
        out, err = show.communicate(timeout=120)
    finally:
        _stop(holder)
        if show.poll() is None:
            show.kill()
            show.communicate()
    assert show.returncode == 0, err
    assert orjson.loads(out)["data"]["statement"] == "waiting is fine"


def test_show_with_wait_zero_exits_4_without_waiting_for_the_holder_naming_the_store(cx, cli_proc, store):
    uri = cx.write("fact", "busy").uri
    holder = _hold(store)  # holds until killed: a show that waited for it would never return
    try:
        r = cli_proc("show", uri, "--wait", "0", timeout=120)
    finally:
        _stop(holder)
    assert_clean_error(r, 4)
    assert str(store) in r.err and "busy" in r.err


def test_write_with_wait_zero_exits_4_while_another_process_holds_the_store(cx, cli_proc, store):
    cx.write("fact", "first")
    holder = _hold(store)
    try:
        r = cli_proc("write", "fact", "second", "--wait", "0")
    finally:
        _stop(holder)
    assert_clean_error(r, 4)
    assert [h.text for h in Cortex(store=store, actor="alice").find(FindQuery())] == ["first"]
    assert_store_verifies(store)


def test_busy_error_under_json_is_a_json_object_on_stderr(cx, cli_proc, store):
    uri = cx.write("fact", "busy").uri
    holder = _hold(store)
    try:
        r = cli_proc("show", uri, "--wait", "0", "--json")
    finally:
        _stop(holder)
    assert r.code == 4
    doc = orjson.loads(r.err)
    assert doc["error"] == "busy" and doc["exit_code"] == 4


def _catches(pid: int, signum: int) -> bool:
    """The process has a handler of its own for ``signum`` (the SigCgt mask of its /proc status)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            mask = next(int(line.split()[1], 16) for line in fh if line.startswith("SigCgt:"))
    except (FileNotFoundError, ProcessLookupError):
        return False
    return bool(mask >> (signum - 1) & 1)


@pytest.mark.parametrize("signum, said", [(signal.SIGTERM, "terminated"), (signal.SIGINT, "interrupted")])
def test_a_write_stopped_by_sigterm_or_ctrl_c_while_it_waits_unwinds_exit_130_and_writes_nothing(
        cx, store, signum, said):
    """What `kill`, `timeout`, systemd and docker send is taken as ^C is: the command unwinds (its
    transaction rolled back, its files let go), says so in one line and exits 130; it is not the
    default death by the signal."""
    cx.write("fact", "the only memory")
    holder = _hold(store)
    env = dict(os.environ, CORTEXCTL_STORE=str(store))
    proc = subprocess.Popen(cortexctl_argv() + ["write", "fact", "never written", "--wait", "60"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while not _catches(proc.pid, signal.SIGTERM) and proc.poll() is None:
            time.sleep(0.01)  # until the command has taken SIGTERM over
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=120)
    finally:
        _stop(holder)
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert_clean_error(Run(["write"], proc.returncode, out, err), 130)
    assert err == f"cortexctl: {said}\n"
    assert [h.text for h in Cortex(store=store, actor="alice").find(FindQuery())] == ["the only memory"]
    assert_store_verifies(store)


def _wchan(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/wchan") as fh:
            return fh.read()
    except OSError:
        return ""


def test_sigterm_once_the_command_is_done_and_stuck_writing_to_an_unread_pipe_ends_it_quietly(cx, store):
    """A command that has done its work and waits to flush its answer to a pipe no one reads: a
    SIGTERM then has its default action (nothing is left to unwind), not a traceback, and the
    process does not stay blocked with the one SIGTERM spent."""
    import fcntl

    for i in range(30):
        cx.write("fact", f"memory {i} about the deploy pipeline " + "with many more words " * 20)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env["CORTEXCTL_STORE"] = str(store)
    proc = subprocess.Popen(cortexctl_argv() + ["find", "--near", "deploy pipeline", "-k", "12", "--form", "full"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # F_SETPIPE_SZ: the answer (6.4 KB, within Python's 8 KB buffer, written as the command ends) no
        # longer fits the pipe
        fcntl.fcntl(proc.stdout.fileno(), 1031, 4096)
        while "pipe_write" not in _wchan(proc.pid) and proc.poll() is None:
            time.sleep(0.01)  # until it is blocked writing its answer
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    assert (code, err) == (-signal.SIGTERM, b"")


@pytest.mark.slow
def test_ctrl_c_or_sigterm_that_lands_inside_a_database_query_is_still_exit_130_in_one_line(tmp_path):
    """DuckDB turns an exception raised by a signal handler while its query runs into
    RuntimeError("Query interrupted"): the command still says it was interrupted (exit 130), not
    that it met a bug (exit 70). A healthcheck reads every block of the store, mostly inside
    DuckDB's queries; signals are sent at moments spread over its run, so that some land there."""
    store = tmp_path / "store"
    report = Cortex(store=store, actor="alice").import_jsonl(iter(_lines(20_000).splitlines(keepends=True)))
    assert report.imported == 20_000
    env = dict(os.environ, CORTEXCTL_STORE=str(store))
    outcomes = []
    for i in range(30):
        signum = (signal.SIGINT, signal.SIGTERM)[i % 2]
        proc = subprocess.Popen(cortexctl_argv() + ["healthcheck"], env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            while not _catches(proc.pid, signal.SIGTERM) and proc.poll() is None:
                time.sleep(0.001)
            time.sleep(0.015 * i)  # a pause, not a measure: a moment further into the run each time
            proc.send_signal(signum)
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        said = "terminated" if signum == signal.SIGTERM else "interrupted"
        # done before it (0), stopped by it (130), or met by it as the interpreter exited (its default death)
        assert (proc.returncode, err) in ((0, ""), (130, f"cortexctl: {said}\n"), (-signum, "")), (i, proc.returncode, err)
        assert proc.returncode != 130 or "unhealthy" not in out, (i, out)  # a stopped check says nothing of the store
        outcomes.append(proc.returncode)
    assert 130 in outcomes


@pytest.mark.slow
def test_a_verify_stopped_mid_range_leaves_none_of_its_workers_spill_directories(tmp_path):
    """A worker stopped mid-range ends at once, without closing its view: once the pool has ended,
    verify removes what the workers' views left in the scratch area (their `read-` directories)."""
    from cortexctl.store import scratch

    store = tmp_path / "store"
    report = Cortex(store=store, actor="alice").import_jsonl(iter(_lines(20_000).splitlines(keepends=True)))
    assert report.imported == 20_000
    area = scratch.for_store_dir(store)[0]
    env = dict(os.environ, CORTEXCTL_STORE=str(store))
    proc = subprocess.Popen(cortexctl_argv() + ["verify", "--jobs", "2"], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        def readers() -> list[str]:
            try:
                return [e for e in os.listdir(area) if e.startswith("read-") and f"-{proc.pid}-" not in e]
            except FileNotFoundError:
                return []

        while len(readers()) < 2 and proc.poll() is None:  # both workers are in their first range
            time.sleep(0.005)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert (proc.returncode, out, err) == (130, "", "cortexctl: interrupted\n")
    assert readers() == []


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


def _kill_import_after_two_batches(tmp_path, store, total: int, batch: int) -> subprocess.Popen:
    """Import ``total`` lines and SIGKILL the import once two batches have landed (or it ends first)."""
    proc = _start_import(tmp_path, store, total, "--batch-size", str(batch),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    reader = Cortex(store=store, actor="alice", wait=30)
    try:
        while proc.poll() is None:
            if tamper.db_file(store).exists():
                try:
                    with reader.store.reading() as tx:
                        count = tx.count_heads()
                except Exception:
                    count = 0
                if count >= 2 * batch:
                    break
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stderr.close()
    return proc


@pytest.mark.slow
def test_sigkill_during_import_leaves_a_store_that_verifies_with_whole_batches(tmp_path):
    batch = 2_000
    for attempt in range(4):  # an import that outran the kill is tried again, four times as long
        total = 60_000 * 4 ** attempt
        store = tmp_path / f"store-{attempt}"
        proc = _kill_import_after_two_batches(tmp_path, store, total, batch)
        if proc.returncode != 0:
            break
    assert proc.returncode == -signal.SIGKILL, "every import finished before it could be killed"
    assert_store_verifies(store)
    heads, journal = tamper.count(store, "heads"), tamper.count(store, "journal")
    assert 0 < heads < total
    assert heads % batch == 0, f"{heads} memories is not a whole number of {batch}-memory batches"
    assert journal == heads


@pytest.mark.slow
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


def _import_with_the_store_taken(tmp_path, store, total: int, batch: int) -> tuple[int, str]:
    """Import ``total`` lines while another process takes the store between two batches and
    keeps it until the import has ended; the import's exit code and stderr."""
    proc = _start_import(tmp_path, store, total, "--batch-size", str(batch), "--wait", "0.3",
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while not tamper.db_file(store).exists() and proc.poll() is None:
        time.sleep(0.01)
    grabber = tamper.hold_open(store)  # between two of the import's batches
    try:
        _, err = proc.communicate(timeout=600)
    finally:
        grabber.kill()  # the import has ended; the grabber may still be waiting to get in
        grabber.communicate()
    return proc.returncode, err


@pytest.mark.slow
def test_an_import_stopped_by_a_busy_store_says_what_it_imported_and_how_to_resume(tmp_path):
    import re

    batch = 50
    for attempt in range(4):  # an import that finished before the store was taken: again, four times as long
        total = 20_000 * 4 ** attempt
        store = tmp_path / f"store-{attempt}"
        code, err = _import_with_the_store_taken(tmp_path, store, total, batch)
        if code != 0:
            break
    assert code == 4, err or "every import finished before the store could be taken from it"
    m = re.search(rf"import stopped after (\d+) of {total} memories \(lines 1-(\d+) are imported\)", err)
    assert m, err
    assert f"tail -n +{int(m.group(2)) + 1}" in err
    report = Cortex(store=store, actor="alice").verify()
    assert report.ok and report.memories == int(m.group(1)) and report.memories % batch == 0


@pytest.mark.slow
def test_find_near_keeps_answering_while_an_import_runs(tmp_path):
    """Between batches, and while the index file is built at the end, readers get in."""
    for attempt in range(4):  # an import that ended before the first find answered: again, four times as long
        store = tmp_path / f"store-{attempt}"
        Cortex(store=store, actor="alice").write("fact", "the first memory about walruses")
        proc = _start_import(tmp_path, store, 8000 * 4 ** attempt, "--batch-size", "1000")
        answered = 0
        try:
            while proc.poll() is None:
                run = run_process(store, "find", "--near", "walruses", "--wait", "10", "--json")
                assert run.code == 0, run
                assert run.json()["results"], run
                answered += proc.poll() is None  # the import was still running after this answer
        finally:
            proc.wait(timeout=600)
        assert proc.returncode == 0
        assert_store_verifies(store)
        if answered:
            break
    assert answered >= 1, "every import ended before a find could answer beside it"


# Runs cortexctl's main in this interpreter and lists each module it imports while the store's
# writer lock (a flock on .lock, which another descriptor of this process cannot take while held)
# is taken.
_IMPORTS_UNDER_THE_LOCK = r"""
import fcntl, json, os, sys
lock, out = os.path.join(sys.argv[1], ".lock"), sys.argv[2]
seen = []

class Watch:
    def find_spec(self, name, path=None, target=None):
        fd = os.open(lock, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            seen.append(name)
        finally:
            os.close(fd)
        return None

sys.meta_path.insert(0, Watch())
try:
    from cortexctl.cli.app import main
    code = main(sys.argv[3:])
finally:
    with open(out, "w") as fh:
        json.dump(seen, fh)
sys.exit(code)
"""


@pytest.mark.parametrize("command", ["write", "update", "attest"])
def test_a_writer_imports_nothing_while_it_holds_the_writer_lock(cx, store, tmp_path, command):
    """Every other writer waits through a writer's turn: a fresh process imports the database
    driver and whatever else its change needs before it takes the lock, not during its turn."""
    uri = cx.write("fact", "the deploy key rotates monthly").uri
    args = {"write": ["write", "fact", "the build cache lives in /var/cache"],
            "update": ["update", uri, "the deploy key rotates weekly"],
            "attest": ["attest", "--intent", "deploy-1", "--outcome", "success", uri]}[command]
    out = tmp_path / "imported-under-the-lock.json"
    run = subprocess.run([sys.executable, "-c", _IMPORTS_UNDER_THE_LOCK, str(store), str(out), *args],
                         env=dict(os.environ, CORTEXCTL_STORE=str(store)), capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert orjson.loads(out.read_bytes()) == []
