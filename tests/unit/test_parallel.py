"""parallel.ordered_map: results in task order, a task's error at its turn, a dead worker a CortexError."""

from __future__ import annotations

import os
import signal

import pytest

from cortexctl import FindQuery
from cortexctl.errors import CortexError, NotFound
from cortexctl.parallel import ordered_map


def _square(x: int) -> int:
    return x * x


def _fails_on_three(x: int) -> int:
    if x == 3:
        raise NotFound(f"no {x}")
    return x


def _dies(x: int) -> int:
    if x == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return x


def test_results_come_in_task_order_whatever_order_the_workers_finish_in():
    with ordered_map(_square, [(i,) for i in range(40)], workers=2, ahead=3) as pool:
        assert list(pool) == [i * i for i in range(40)]


def test_a_task_error_is_raised_at_its_turn_after_the_results_before_it():
    got = []
    with ordered_map(_fails_on_three, [(i,) for i in range(6)], workers=2) as pool:
        with pytest.raises(NotFound, match="no 3"):
            for r in pool:
                got.append(r)
    assert got == [0, 1, 2]


def test_a_worker_killed_mid_task_is_a_cortex_error_not_a_crash():
    with ordered_map(_dies, [(i,) for i in range(4)], workers=1) as pool:
        with pytest.raises(CortexError, match="worker process ended unexpectedly"):
            list(pool)


def test_a_pool_broken_before_the_next_task_is_handed_out_is_a_cortex_error_too():
    """The worker dies on a task queued behind one that succeeded: when the pool knows it is broken
    before the result of the first is taken, handing out the next task is where it is met."""
    from concurrent.futures import wait

    with ordered_map(_dies, [(0,), (2,), (3,), (4,)], workers=1, ahead=2) as pool:
        wait([pool._queue[1]])  # task 2 ended: the worker is dead and the pool broken
        with pytest.raises(CortexError, match="worker process ended unexpectedly"):
            list(pool)


class _Gone:
    """Start-up data that a fresh worker cannot rebuild: a lock whose semaphore (``gone``: another
    file) its parent has let go, or another file that is not there."""

    def __init__(self, name: str, semaphore: bool = True) -> None:
        self.name, self.semaphore = name, semaphore

    def __call__(self) -> None:
        pass

    def __reduce__(self):
        if not self.semaphore:
            return open, (self.name,)
        from multiprocessing import synchronize

        # as a pickled Lock is rebuilt in the worker: by its semaphore's name (FileNotFoundError)
        return object.__new__, (synchronize.Lock,), (0, 1, 1, self.name)


def test_a_fresh_worker_whose_semaphore_is_gone_as_it_starts_ends_quietly(capfd):
    """A parent that ends while a fresh worker starts lets go of the pool's semaphores; the worker's
    start-up then meets FileNotFoundError as it rebuilds one. It ends without a traceback (it printed
    one after the command's last line), and a parent still there says a worker died."""
    with ordered_map(_square, [(i,) for i in range(4)], workers=2, fresh=True,
                     init=_Gone(f"/cortexctl-test-gone-{os.getpid()}")) as pool:
        with pytest.raises(CortexError, match="worker process ended unexpectedly"):
            list(pool)
    assert "Traceback" not in capfd.readouterr().err


def test_any_other_start_up_error_of_a_fresh_worker_is_still_printed(tmp_path, capfd):
    with ordered_map(_square, [(i,) for i in range(2)], workers=1, fresh=True,
                     init=_Gone(str(tmp_path / "not-there"), semaphore=False)) as pool:
        with pytest.raises(CortexError, match="worker process ended unexpectedly"):
            list(pool)
    err = capfd.readouterr().err
    assert "Traceback" in err and "FileNotFoundError" in err and "not-there" in err


_SCRIPT = """\
import sys
print("TOP", flush=True)
from cortexctl import Cortex, parallel
from cortexctl.engine import verify
from cortexctl.store.snapshot import builder

verify.PARALLEL_FROM, verify.BATCH = 0, 4  # workers (over ranges) and a helper for a store of a few memories
builder.SLIM_HELPER_FROM = 0
parallel.cores = lambda: 2
made = parallel.ordered_map.__init__

def counted(self, *args, fresh=False, **kw):
    print("POOL", "fresh" if fresh else "forked", flush=True)
    made(self, *args, fresh=fresh, **kw)

parallel.ordered_map.__init__ = counted

def work():
    cx = Cortex(store=sys.argv[1], actor="alice")
    for i in range(12):
        cx.write("fact", f"memory {i} of a script that uses cortexctl as a library")
    cx.reindex(rebuild=True)
    print("VERIFIED", cx.verify(jobs=2).ok, flush=True)
"""

_WRITES_AT_TOP = """\
Cortex(store=sys.argv[1], actor="alice").write("fact", "written at the top level of the script")
"""


@pytest.mark.parametrize("form", ["unguarded", "guarded", "guarded, writing at its top level"])
def test_a_program_using_cortexctl_is_never_run_again_by_a_fresh_worker(tmp_path, form):
    """Fresh workers (verify's, a snapshot build's helper) are new interpreters that do not import
    the program's main module: a script whose top level uses ``Cortex`` (guarded by
    ``if __name__ == "__main__":`` or not) gets its workers, and its top level runs once."""
    import subprocess
    import sys

    script = tmp_path / "uses_cortexctl.py"
    body = _SCRIPT + (_WRITES_AT_TOP if "writing" in form else "")
    script.write_text(body + ("work()\n" if form == "unguarded" else 'if __name__ == "__main__":\n    work()\n'))
    env = {**os.environ, "CORTEXCTL_FOLD": "inline"}
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "store")], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split()
    assert lines.count("VERIFIED") == 1 and "True" in lines
    assert lines.count("fresh") >= 2  # the snapshot build's helper and verify's workers started
    assert lines.count("TOP") == 1  # and none of them ran the script
    from cortexctl import Cortex

    written = Cortex(store=tmp_path / "store", actor="alice").find(FindQuery(k=50))
    assert len(written) == 12 + ("writing" in form)


def _held(where: str, i: int) -> int:
    """A task that says it started, runs until told to end (a file ``go`` appears) and says, as
    it is left, whether it ended or was stopped."""
    import time
    from pathlib import Path

    Path(where, f"started-{i}").touch()
    try:
        while not Path(where, "go").exists():
            time.sleep(0.01)
        Path(where, f"done-{i}").touch()
        return i
    finally:
        Path(where, f"left-{i}").touch()


_STOPPED = """\
import sys
from cortexctl.errors import Terminated, interrupt_on_signals
from cortexctl.parallel import ordered_map
from tests.unit.test_parallel import _held

interrupt_on_signals()
try:
    with ordered_map(_held, [(sys.argv[1], i) for i in range(4)], workers=2, fresh=sys.argv[2] == "fresh") as pool:
        print(list(pool), flush=True)
except Terminated:
    print("terminated", flush=True)
    sys.exit(130)
"""


@pytest.mark.parametrize("start", ["fresh", "forked"])
def test_sigterm_to_the_whole_group_stops_the_running_tasks_which_unwind_and_starts_no_other(tmp_path, start):
    """kill, timeout and systemd signal every process of the group: the workers leave it to the
    parent (as ^C), which unwinds with ``Terminated`` and stops the running tasks rather than wait
    for them (they would never end here): the workers running them end at once, as killed ones
    would (their ``finally`` does not run), the tasks not started never start, and nothing is said
    (no worker traceback, no "leaked semaphore" warning from multiprocessing's tracker) or left
    running."""
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-c", _STOPPED, str(tmp_path), start], cwd=root, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        while not all((tmp_path / f"started-{i}").exists() for i in range(2)) and proc.poll() is None:
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert (proc.returncode, out, err) == (130, "terminated\n", "")
    assert _said(tmp_path) == ["started-0", "started-1"]
    while True:  # the group's last process (the tracker) goes once the parent has
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.01)


def _said(where) -> list[str]:
    """What the tasks said, as the files they made."""
    return sorted(p.name for p in where.iterdir() if p.name.startswith(("started-", "left-", "done-")))


def _fails_once_both_run(where: str, i: int) -> int:
    """Task 0 fails once task 1 has started; task 1 runs until stopped (says so as it is left)."""
    import time
    from pathlib import Path

    Path(where, f"started-{i}").touch()
    try:
        if i == 0:
            while not Path(where, "started-1").exists():
                time.sleep(0.01)
            raise NotFound("no 0")
        while True:
            time.sleep(0.01)
    finally:
        Path(where, f"left-{i}").touch()


def test_a_task_error_stops_the_tasks_still_running_instead_of_waiting_for_them(tmp_path):
    """Leaving the ``with`` block on an error (here a task's, at its turn) ends the workers running
    tasks (they would never end) and starts none of the rest."""
    with pytest.raises(NotFound, match="no 0"):
        with ordered_map(_fails_once_both_run, [(str(tmp_path), i) for i in range(5)], workers=2) as pool:
            list(pool)
    said = _said(tmp_path)
    started = {n.split("-")[1] for n in said if n.startswith("started-")}
    # task 2 may have been taken by the first worker as task 0 failed: it is stopped too
    assert started in ({"0", "1"}, {"0", "1", "2"})
    assert said == sorted(["left-0"] + [f"started-{i}" for i in started])  # only the failed task left by itself


_STARTING = """\
import sys
from cortexctl.errors import interrupt_on_signals
from cortexctl.parallel import ordered_map

interrupt_on_signals()
try:
    with ordered_map(abs, [(-i,) for i in range(8)], workers=2, fresh=True) as pool:
        print(sum(pool), flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
"""


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    stat = fh.read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def test_ctrl_c_to_the_group_as_fresh_workers_start_says_nothing_from_them():
    """The terminal's ^C reaches every process of the group, workers still starting too: their
    signals are held from the moment the parent starts them until their own handlers are in place,
    so none dies in its interpreter's start-up ("Fatal Python error: init_import_site") or prints a
    traceback; the parent unwinds. Ten times, the signal sent as soon as a worker exists."""
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    for _ in range(10):
        proc = subprocess.Popen([sys.executable, "-c", _STARTING], cwd=root, text=True, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        try:
            while not [c for c in _children(proc.pid) if "resource_tracker" not in open(f"/proc/{c}/cmdline").read()] \
                    and proc.poll() is None:
                time.sleep(0.001)
            try:
                os.killpg(proc.pid, signal.SIGINT)
            except ProcessLookupError:
                pass
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert (proc.returncode, out, err) in ((130, "interrupted\n", ""), (0, "28\n", "")), (proc.returncode, out, err)


_INTERRUPTED_CLOSE = """\
import os, signal, sys, threading, time
from pathlib import Path
from cortexctl.parallel import ordered_map
from tests.unit.test_parallel import _held

pool = ordered_map(_held, [(sys.argv[1], 0), (sys.argv[1], 1)], workers=2, fresh=True)
while not all(Path(sys.argv[1], f"started-{i}").exists() for i in (0, 1)):  # both tasks run (for ever)
    time.sleep(0.01)
main = threading.get_ident()


def closing() -> bool:  # the main thread waits inside the pool's shutdown for its manager thread
    frame, names = sys._current_frames().get(main), set()
    while frame is not None:
        names.add(frame.f_code.co_name)
        frame = frame.f_back
    return {"shutdown", "join"} <= names


def interrupt() -> None:
    while not closing():
        time.sleep(0.01)
    os.kill(os.getpid(), signal.SIGINT)


threading.Thread(target=interrupt, daemon=True).start()
try:
    pool.close()
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


def test_a_pool_whose_close_is_interrupted_ends_its_workers_and_the_process_can_exit(tmp_path):
    """A ^C (a second one, say) while the pool waits for its running tasks leaves the executor half
    shut: idle workers would wait for ever, and the process's exit for them. The workers are ended."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-c", _INTERRUPTED_CLOSE, str(tmp_path)], cwd=root, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(timeout=120)  # the tasks never end
    finally:
        if proc.poll() is None:
            for child in _children(proc.pid):
                os.kill(child, signal.SIGKILL)
            proc.kill()
            proc.communicate()
    assert (proc.returncode, out) == (0, "interrupted\n"), err
    assert _children(proc.pid) == []
