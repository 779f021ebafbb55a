"""One way to spread work over cores: ``ordered_map``, a function over tasks in worker processes.

Used where the work is CPU-bound Python (import's checking pass, verify's per-memory checks):
threads would share one interpreter lock. The results come back in task order, whichever
worker finished first; at most ``ahead`` tasks per worker are handed out at a time, so a long
stream of tasks (an import's chunks of lines) is never held in memory all at once.

Workers die with the process that started them (Linux: ``PR_SET_PDEATHSIG``), so a killed
command leaves no worker behind, and they leave Ctrl-C and SIGTERM to it: when the caller leaves
early (an interrupt, an error), a worker running a task ends at once, as a killed one would (what
it leaves in the scratch area is swept by the next command), and tasks not started never start.
(An exception raised in a task from a signal handler could land inside a compiled module's
initialisation, which aborts the process, or inside C code that can only print it and go on.) ``fresh`` workers are new
interpreters, never forks of the caller: a process that holds an open database connection must
not fork. They do not import the program's main module (``_fresh_context``), so a program that uses
cortexctl as a library is never run again by them, guarded by ``if __name__ == "__main__":`` or not.
Otherwise they are forks, which start in a few milliseconds.

The vector index's builder is not a map but a pipeline (one thread adds each committed batch to
the graph while the next is written; usearch adds without holding the interpreter lock), and
keeps its one thread (``store/vector_index.py``).
"""

from __future__ import annotations

import os
import signal
import sys
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator

from cortexctl.errors import interrupts_held


def _fresh_context():
    """A context that starts fresh interpreters which do not import the program's main module.

    Python's spawning imports the main module in each new process (as ``__mp_main__``) so that
    functions defined there can be found: a script using ``Cortex`` at its top level would run again
    in each worker, and a guarded one would still run what it does at its top level. The workers'
    functions are cortexctl's own, so the main module is left out of what the new process is told to
    prepare (``_FreshPopen``; Windows spawns its own way and keeps Python's rule)."""
    import multiprocessing

    if _FreshContext is None:
        return multiprocessing.get_context("spawn")
    global _FRESH
    if _FRESH is None:
        _FRESH = _FreshContext()
    return _FRESH


_FRESH = None
if sys.platform == "win32":
    _FreshContext = None
else:
    import threading
    from multiprocessing import context, popen_spawn_posix, spawn

    _LAUNCH = threading.Lock()

    # What a fresh worker runs: Python's own start (``spawn_main``), but a start-up that finds what its
    # parent handed it already gone ends quietly. A parent that ends while a worker is still starting
    # (a second ^C) lets go of the pool's semaphores, and the worker, rebuilding them from their
    # names, met FileNotFoundError (or the pipe closed: EOFError) and printed a traceback after the
    # command's last line. A parent still there learns of it as of any worker that died. Any other
    # error of the start-up is printed as before.
    _QUIET_START = ("import os\n"
                    "try:\n"
                    "    {}\n"
                    "except EOFError:\n"  # the pipe closed before the start-up data was whole
                    "    os._exit(1)\n"
                    "except FileNotFoundError as e:\n"  # only a semaphore rebuilt by its name
                    "    t = e.__traceback__\n"
                    "    while t.tb_next is not None:\n"
                    "        t = t.tb_next\n"
                    "    if not t.tb_frame.f_code.co_filename.endswith('synchronize.py'):\n"
                    "        raise\n"
                    "    os._exit(1)\n")

    class _FreshPopen(popen_spawn_posix.Popen):
        def _launch(self, process_obj) -> None:
            me = threading.get_ident()
            with _LAUNCH:
                prepare, command = spawn.get_preparation_data, spawn.get_command_line

                def without_main(name):  # only for the process this thread starts
                    data = prepare(name)
                    if threading.get_ident() == me:
                        data.pop("init_main_from_name", None)
                        data.pop("init_main_from_path", None)
                    return data

                def quiet_start(**kwds):
                    cmd = command(**kwds)
                    # the executable may be bytes: found by type and value, not compared with a str
                    at = next((i for i, a in enumerate(cmd) if isinstance(a, str) and a == "-c"), None)
                    if threading.get_ident() == me and at is not None:
                        cmd[at + 1] = _QUIET_START.format(cmd[at + 1])
                    return cmd

                spawn.get_preparation_data, spawn.get_command_line = without_main, quiet_start
                try:
                    super()._launch(process_obj)
                finally:
                    spawn.get_preparation_data, spawn.get_command_line = prepare, command

    class _FreshProcess(context.SpawnProcess):
        @staticmethod
        def _Popen(process_obj):
            return _FreshPopen(process_obj)

    class _FreshContext(context.SpawnContext):
        Process = _FreshProcess


STOP = signal.SIGUSR1 if hasattr(signal, "SIGUSR1") else None  # the parent's word to a worker: stop the task


# Held while the parent starts a worker, and by the worker until its handlers are in place: a ^C to
# the whole group (the terminal's) could otherwise land in a fresh interpreter's start-up ("Fatal
# Python error: init_import_site") or kill a worker before it ignores it.
_WORKER_SIGNALS = ({signal.SIGINT, signal.SIGTERM} | ({STOP} if STOP is not None else set())
                   if hasattr(signal, "pthread_sigmask") else set())


@contextmanager
def _held(signals: set) -> Iterator[None]:
    """``signals`` blocked in this thread for the block (delivered after it, if they came)."""
    if not signals:
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


_STOPPED = None  # in a worker: the pool's event, set once the caller left early
_RUNNING = False  # in a worker: a task is running (a stop then ends the worker)


def _worker_start(init: Callable[[], None] | None, parent: int, stopped) -> None:  # pragma: no cover - in the workers
    """A worker dies with its parent and leaves Ctrl-C and SIGTERM to it (the parent stops the
    tasks, ``_stop_task``, and unwinds).

    Linux: ``PR_SET_PDEATHSIG``, then a check that the parent did not die before it was set.
    Elsewhere: a thread that ends the worker once it has been handed to another parent."""
    global _STOPPED
    _STOPPED = stopped
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if STOP is not None:
        signal.signal(STOP, _stop_task)
    if _WORKER_SIGNALS:  # held since the parent started this process (``_held``): a signal that came
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _WORKER_SIGNALS)  # meanwhile meets the handlers above
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


def _stop_task(signum, frame) -> None:  # pragma: no cover - in the workers
    if _RUNNING:
        os._exit(STOPPED_EXIT)


STOPPED_EXIT = 130  # a worker's exit status when its task was stopped


def _run(fn: Callable[..., Any], *args: Any) -> Any:  # pragma: no cover - in the workers
    """One task in a worker: not started once the pool is stopped; the worker ends if it is
    stopped while the task runs."""
    global _RUNNING
    _RUNNING = True  # before the look at the event: a stop between the two still ends the task
    try:
        if _STOPPED is not None and _STOPPED.is_set():
            raise KeyboardInterrupt
        return fn(*args)
    finally:
        _RUNNING = False


def _worker_died():
    from cortexctl.errors import CortexError

    return CortexError("a worker process ended unexpectedly (killed, or out of memory)")


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

        fork = not fresh and "fork" in multiprocessing.get_all_start_methods()
        self._fn = fn
        self._tasks = iter(tasks)
        self._limit = max(1, workers) * max(1, ahead)
        start = multiprocessing.get_context("fork") if fork else _fresh_context()
        with interrupts_held():  # the pool whole, or none of it
            self._stopped = start.Event()
            self._pool = ProcessPoolExecutor(max_workers=max(1, workers), mp_context=start,
                                             initializer=_worker_start, initargs=(init, os.getpid(), self._stopped))
        self._queue: list = []
        try:
            self._fill()
        except BaseException:
            self.close(stop=True)
            raise

    def _fill(self) -> None:
        from concurrent.futures import BrokenExecutor

        while len(self._queue) < self._limit:
            task = next(self._tasks, None)
            if task is None:
                return
            # submitting may start a worker: it starts with the signals blocked, and a signal that
            # another thread takes is raised here only once the worker has its start-up data
            try:
                with _held(_WORKER_SIGNALS), interrupts_held():
                    future = self._pool.submit(_run, self._fn, *task)
            except BrokenExecutor:  # a worker died on a task queued behind the results taken so far
                raise _worker_died() from None
            self._queue.append(future)

    def __iter__(self) -> Iterator[Any]:
        from concurrent.futures import BrokenExecutor

        while self._queue:
            try:
                result = self._queue.pop(0).result()
            except BrokenExecutor:
                raise _worker_died() from None
            self._fill()
            yield result

    def close(self, *, stop: bool = False) -> None:
        """End the pool once the running tasks have; ``stop``: stop them first (each worker that
        runs one gets ``STOP`` and ends) and start no other."""
        # the executor's own table of its worker processes: it has no call to signal them
        procs = list((getattr(self._pool, "_processes", None) or {}).values())
        if stop and STOP is not None:
            self._stopped.set()
            _signal_all(procs, STOP)
        try:
            self._pool.shutdown(wait=True, cancel_futures=True)
        except BaseException:
            # a second ^C while the pool shuts down leaves it half shut (its manager thread gone, idle
            # workers waiting for a word that never comes, and the process's exit waiting for them)
            _signal_all(procs, signal.SIGKILL)
            for proc in procs:  # ended and reaped, so that a sweep of what they left sees them gone
                proc.join(timeout=5)
            raise
        finally:
            self._queue = []

    def __enter__(self) -> ordered_map:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(stop=exc_type is not None)


def _signal_all(procs: list, signum: int) -> None:
    """``signum`` to each of the pool's worker processes ``procs`` still running."""
    for proc in procs:
        try:
            if proc.exitcode is None:  # not one already ended (its pid may be another's now)
                os.kill(proc.pid, signum)
        except (OSError, AttributeError, TypeError, ValueError):
            pass


__all__ = ["ordered_map", "cores"]
