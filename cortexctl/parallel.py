"""One way to spread work over cores: ``ordered_map``, a function over tasks in worker processes.

Used where the work is CPU-bound Python (import's checking pass, verify's per-memory checks):
threads would share one interpreter lock. The results come back in task order, whichever
worker finished first; at most ``ahead`` tasks per worker are handed out at a time, so a long
stream of tasks (an import's chunks of lines) is never held in memory all at once.

Workers die with the process that started them (Linux: ``PR_SET_PDEATHSIG``), so a killed
command leaves no worker behind, and they leave Ctrl-C to it. ``fresh`` workers are new
interpreters, never forks of the caller: a process that holds an open database connection must
not fork. Otherwise they are forks, which start in a few milliseconds.

The vector index's builder is not a map but a pipeline (one thread adds each committed batch to
the graph while the next is written; usearch adds without holding the interpreter lock), and
keeps its one thread (``store/vector_index.py``).
"""

from __future__ import annotations

import functools
import os
from typing import Any, Callable, Iterable, Iterator


def spawn_safe() -> bool:
    """Whether ``fresh`` workers may start here without running this program again. A fresh
    interpreter imports the program's main module before it works (as ``__mp_main__``, Python's
    rule for starting processes by spawning): harmless for ``python -m`` of a package, an
    interactive session or ``python -c``, and for a script or module whose top-level work sits under
    ``if __name__ == "__main__"`` (cortexctl's console script, its fold process, pytest); a script
    using ``Cortex`` at its top level would run again in each worker. Callers do the work in this
    process instead when it is not safe."""
    import sys

    main = sys.modules.get("__main__")
    name = getattr(getattr(main, "__spec__", None), "name", None)
    if name is not None and (name == "__main__" or name.endswith(".__main__")):
        return True  # a package's __main__: not imported again
    path = getattr(main, "__file__", None)
    if path is None:
        return name is None  # interactive or -c: nothing to import again
    return _guarded(os.path.abspath(path))


@functools.lru_cache(maxsize=8)
def _guarded(path: str) -> bool:
    import re

    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read(1 << 20)
    except OSError:
        return False
    return re.search(r"^if\s+__name__\s*==\s*['\"]__main__['\"]\s*:", text, re.MULTILINE) is not None


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _worker_start(init: Callable[[], None] | None, parent: int) -> None:  # pragma: no cover - in the workers
    """A worker dies with its parent and leaves Ctrl-C to it.

    Linux: ``PR_SET_PDEATHSIG``, then a check that the parent did not die before it was set.
    Elsewhere: a thread that ends the worker once it has been handed to another parent."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    armed = False
    try:
        import ctypes

        armed = ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL) == 0  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(1)
    if not armed:
        import threading

        def watch() -> None:
            import time

            while os.getppid() == parent:
                time.sleep(0.5)
            os._exit(1)

        threading.Thread(target=watch, daemon=True).start()
    if init is not None:
        init()


class ordered_map:  # noqa: N801 - used like the builtin map
    """``fn(*task)`` for each task, in ``workers`` processes; iterate for the results in task order.

    The first tasks are handed out when it is made, so the caller can do other work while the
    workers start. An exception raised by ``fn`` is raised by the iteration, at its task's turn
    (``fn`` must raise picklable exceptions); a worker that dies (killed, out of memory) is a
    ``CortexError``. Use it in a ``with`` block (or call ``close``):
    leaving early cancels the tasks not started and waits for the running ones.
    """

    def __init__(self, fn: Callable[..., Any], tasks: Iterable[tuple], *, workers: int, ahead: int = 2,
                 fresh: bool = False, init: Callable[[], None] | None = None) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        methods = multiprocessing.get_all_start_methods()
        method = "spawn" if fresh or "fork" not in methods else "fork"
        self._fn = fn
        self._tasks = iter(tasks)
        self._limit = max(1, workers) * max(1, ahead)
        self._pool = ProcessPoolExecutor(max_workers=max(1, workers), mp_context=multiprocessing.get_context(method),
                                         initializer=_worker_start, initargs=(init, os.getpid()))
        self._queue: list = []
        try:
            self._fill()
        except BaseException:
            self.close()
            raise

    def _fill(self) -> None:
        while len(self._queue) < self._limit:
            task = next(self._tasks, None)
            if task is None:
                return
            self._queue.append(self._pool.submit(self._fn, *task))

    def __iter__(self) -> Iterator[Any]:
        from concurrent.futures import BrokenExecutor

        from cortexctl.errors import CortexError

        while self._queue:
            try:
                result = self._queue.pop(0).result()
            except BrokenExecutor:
                raise CortexError("a worker process ended unexpectedly (killed, or out of memory)") from None
            self._fill()
            yield result

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._queue = []

    def __enter__(self) -> ordered_map:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["ordered_map", "cores", "spawn_safe"]
