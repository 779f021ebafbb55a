"""parallel.ordered_map: results in task order, a task's error at its turn, a dead worker a CortexError."""

from __future__ import annotations

import os
import signal

import pytest

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


_SCRIPT = """\
import sys
print("TOP", flush=True)
from cortexctl import Cortex, parallel
from cortexctl.engine import verify
from cortexctl.store.snapshot import builder

def work():
    verify.PARALLEL_FROM = 0  # workers and a helper for a store of a few memories
    builder.SLIM_HELPER_FROM = 0
    parallel.cores = lambda: 2
    cx = Cortex(store=sys.argv[1], actor="alice")
    for i in range(12):
        cx.write("fact", f"memory {i} of a script that uses cortexctl as a library")
    cx.reindex(rebuild=True)
    print("VERIFIED", cx.verify(jobs=2).ok, flush=True)
"""


@pytest.mark.parametrize("guarded", [False, True])
def test_a_script_using_cortexctl_at_its_top_level_is_never_run_again_by_a_worker(tmp_path, guarded):
    """Fresh workers (verify's, a snapshot build's helper) import the program's main module; a
    script whose top level uses ``Cortex`` would run again in each of them. Such a script gets no
    workers (the work is done in its own process, the same answers); a guarded one gets them."""
    import subprocess
    import sys

    script = tmp_path / "uses_cortexctl.py"
    script.write_text(_SCRIPT + ('if __name__ == "__main__":\n    work()\n' if guarded else "work()\n"))
    env = {**os.environ, "CORTEXCTL_FOLD": "inline"}
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "store")], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split()
    assert lines.count("VERIFIED") == 1 and "True" in lines
    if guarded:
        assert lines.count("TOP") >= 2  # the workers imported it, and stopped at the guard
    else:
        assert lines.count("TOP") == 1  # no worker started: nothing ran it again
