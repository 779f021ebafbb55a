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
