"""The error tree and the exit codes of cortexctl.

Every error a user can cause is a ``CortexError`` subclass that carries its
own exit code. The CLI has one catch point (``cortexctl.cli.app.main``) that
prints ``cortexctl: <message>`` on stderr and exits with that code::

    CortexError (1)                failed
    ├── UsageError (2)             bad arguments, bad references, bad config
    │   ├── AmbiguousRef (2)       an ID prefix matches more than one memory
    │   └── ConfigError (2)        an unreadable or invalid config file or value
    ├── NotFound (3)               no such memory, version, store or checkpoint
    ├── StoreBusy (4)              the store stayed locked longer than --wait
    ├── RateLimited (5)            an attest over its token bucket
    ├── BudgetUnreachable (6)      compact cannot fit the budget
    ├── IntegrityError (7)         a corrupt or tampered store or bundle
    ├── Refused (8)                destructive or not yours without confirmation
    ├── ProviderUnreachable (9)    an embedding or chat endpoint did not answer
    ├── InvalidData (10)           data that breaks a type's schema or a rule
    ├── NoSpace (1)                the disk filled (or a file size limit was reached) while writing
    ├── Tombstoned (1)             a change to a forgotten memory
    ├── NotForgotten (1)           unforget of a memory that is not forgotten
    └── SchemaTooNew (1)           a store written by a newer cortexctl

Exit codes 0 (ok), 70 (internal error) and 130 (interrupted) are not errors
of this tree; they are decided in ``main()``.
"""

from __future__ import annotations

import errno

EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130


class Terminated(KeyboardInterrupt):
    """SIGTERM (what ``kill``, ``timeout``, systemd and docker send), raised where the program is
    so that a command unwinds as from Ctrl-C: its transaction rolled back, its workers and scratch
    files let go, exit 130."""


_SIGNALLED: list[int] = []  # the signals taken over by ``interrupt_on_signals`` that arrived


def interrupt_on_signals() -> None:
    """From now on Ctrl-C raises KeyboardInterrupt and the first SIGTERM ``Terminated`` in the main
    thread (a second SIGTERM ends the process at once, as before), and each is remembered
    (``signalled``): DuckDB turns an exception raised in a signal handler while one of its
    queries runs into ``RuntimeError("Query interrupted")``, which the command then meets instead.
    A signal ignored by whoever started this process is left ignored. (Through ``_signal``, the C
    module: ``signal``'s enums would cost every command, a cold find too, half a millisecond.)"""
    import _signal

    try:
        if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
            _signal.signal(_signal.SIGINT, _interrupted)
        if _signal.getsignal(_signal.SIGTERM) == _signal.SIG_DFL:
            _signal.signal(_signal.SIGTERM, _terminated)
    except ValueError:  # not the main thread: signals are the main thread's
        pass


def default_signals() -> None:
    """The signals ``interrupt_on_signals`` took over back to their default action: once a command
    is done nothing is left to unwind, and a flush to a pipe that no one reads must not turn a
    SIGTERM into a traceback (or a wait for ever, the one SIGTERM spent)."""
    import _signal

    try:
        if _signal.getsignal(_signal.SIGINT) is _interrupted:
            _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
        if _signal.getsignal(_signal.SIGTERM) is _terminated:
            _signal.signal(_signal.SIGTERM, _signal.SIG_DFL)
    except ValueError:  # not the main thread
        pass


def signalled() -> int | None:
    """The last of the signals ``interrupt_on_signals`` took over that arrived, or None."""
    return _SIGNALLED[-1] if _SIGNALLED else None


class _Held:
    """``interrupts_held``'s block: entered and left any number of times, by any thread (the count
    changed under a lock: ``+=`` on it is three steps another thread could come between)."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        import _thread

        self._lock = _thread.allocate_lock()

    def __enter__(self) -> None:
        with self._lock:
            _HELD[0] += 1

    def __exit__(self, *exc) -> None:
        with self._lock:
            _HELD[0] -= 1


_HELD = [0]  # blocks under way that the signals taken over wait for
_HOLDING = _Held()


def interrupts_held() -> _Held:
    """A block that Ctrl-C and SIGTERM (as ``interrupt_on_signals`` takes them over) wait for: a
    signal that lands in it is raised once it is over (a second SIGTERM still ends the process at
    once). For a few milliseconds of work that must not be left half done, such as starting a worker
    process, whose start-up data would be half written."""
    return _HOLDING


def _interrupted(signum, frame) -> None:
    if _waits(frame):
        return _put_off(signum)
    _SIGNALLED.append(signum)
    raise KeyboardInterrupt


def _terminated(signum, frame) -> None:
    import _signal

    if _waits(frame) and signum not in _PUT_OFF:  # a second SIGTERM meanwhile ends the process now
        return _put_off(signum)
    _SIGNALLED.append(signum)
    _signal.signal(_signal.SIGTERM, _signal.SIG_DFL)
    if signum in _PUT_OFF:
        import os

        os.kill(os.getpid(), signum)
    raise Terminated


def _waits(frame) -> bool:
    """A signal that lands at ``frame`` waits: a block holds interrupts (``interrupts_held``), or a
    module is being imported. An exception raised inside a compiled module's initialisation
    (DuckDB's makes its enums through Python code) aborts the process ("Critical nanobind error")."""
    if _HELD[0] > 0:
        return True
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


_PUT_OFF: list[int] = []  # signals that landed where they wait, to be sent again once they need not


def _put_off(signum: int) -> None:
    """The signal sent again once the main thread is where it need not wait (``_waits``), from a
    thread of its own that looks every 10 ms. Only modules every interpreter has loaded before any
    code runs (``_thread``, ``os``, ``sys``): an import here would start inside the import the signal
    landed in, and could find a module of it half made."""
    import _thread
    import os
    import sys

    if signum in _PUT_OFF:
        return
    _PUT_OFF.append(signum)
    main = _thread.get_ident()  # a handler runs in the main thread

    def send() -> None:
        pause = _thread.allocate_lock()
        pause.acquire()
        while _waits(sys._current_frames().get(main)):
            pause.acquire(timeout=0.01)
        _PUT_OFF.remove(signum)
        os.kill(os.getpid(), signum)

    _thread.start_new_thread(send, ())


class CortexError(Exception):
    """Base of every error a user can cause; ``str(err)`` is the one-line message."""

    exit_code = 1
    kind = "failed"

    def __init__(self, message: str, *, hint: str | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        # The engine parameter the message is about, named in the engine's own terms ("k",
        # "budget_tokens"); a front end rewords it for its users (the CLI names the flag).
        self.field = field

    def to_json(self) -> dict:
        doc = {"error": self.kind, "message": self.message, "exit_code": self.exit_code}
        if self.hint:
            doc["hint"] = self.hint
        return doc


class UsageError(CortexError):
    exit_code = 2
    kind = "usage"


class AmbiguousRef(UsageError):
    kind = "ambiguous"


class ConfigError(UsageError):
    kind = "config"


class NotFound(CortexError):
    exit_code = 3
    kind = "not_found"


class StoreBusy(CortexError):
    exit_code = 4
    kind = "busy"


class RateLimited(CortexError):
    exit_code = 5
    kind = "rate_limited"


class BudgetUnreachable(CortexError):
    exit_code = 6
    kind = "budget_unreachable"


class IntegrityError(CortexError):
    exit_code = 7
    kind = "integrity"

    def __init__(self, message: str, *, path: str | None = None, **kw) -> None:
        super().__init__(message, **kw)
        self.path = path  # the damaged file, when one is to blame


class Refused(CortexError):
    exit_code = 8
    kind = "refused"


class ProviderUnreachable(CortexError):
    exit_code = 9
    kind = "provider_unreachable"


class StoreUnreachable(ProviderUnreachable):
    """The server holding the store (PostgreSQL) cannot be reached."""


class InvalidData(CortexError):
    exit_code = 10
    kind = "invalid"


class NoSpace(CortexError):
    exit_code = 1
    kind = "no_space"


# ENOSPC (the disk is full), EFBIG (a file size limit, RLIMIT_FSIZE), EDQUOT (a quota); DuckDB
# reports the same as text in its IOException.
_NO_SPACE_ERRNOS = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
_NO_SPACE_WORDS = ("no space left on device", "file too large", "disk quota exceeded")


def no_space(exc: BaseException) -> NoSpace | None:
    """The ``NoSpace`` error for ``exc`` when it (or an error it came from) is a write that ran out
    of room, else None. Every command that writes turns such a failure into this one line."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, NoSpace):
            return exc
        if isinstance(exc, OSError) and exc.errno in _NO_SPACE_ERRNOS:
            where = f" {exc.filename}" if exc.filename else ""
            return NoSpace(f"cannot write{where}: {exc.strerror} (the disk is full or a file size limit was "
                           "reached); free some space and run it again")
        text = str(exc).lower()
        for word in _NO_SPACE_WORDS:
            if word in text:
                return NoSpace(f"cannot write: {word[0].upper() + word[1:]} (the disk is full or a file size "
                               "limit was reached); free some space and run it again")
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def bad_path(exc: BaseException) -> UsageError | None:
    """A ``UsageError`` for an OSError that says a path given to cortexctl cannot name a file at
    all (a name too long, too many symbolic links), wherever it was met; else None."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENAMETOOLONG, errno.ELOOP):
        name = str(exc.filename or "")
        shown = name if len(name) <= 80 else name[:40] + "..." + name[-20:]
        return UsageError(f"{shown}: {exc.strerror}")
    return None


# A file cortexctl must read or write is in the way: a directory where a file goes, a file where a
# directory goes, no permission, a read-only file system.
_BLOCKED_ERRNOS = (errno.EISDIR, errno.ENOTDIR, errno.EACCES, errno.EPERM, errno.EROFS)


def blocked_path(exc: BaseException) -> CortexError | None:
    """A one-line error naming the path for an OSError that says a file cortexctl reads or writes
    cannot be used as one (a directory in its place, no permission, a read-only file system); else
    None. A rename names its destination."""
    if isinstance(exc, OSError) and exc.errno in _BLOCKED_ERRNOS and (exc.filename or exc.filename2):
        name = str(exc.filename2 or exc.filename)
        shown = name if len(name) <= 120 else name[:60] + "..." + name[-40:]
        return CortexError(f"{shown}: {exc.strerror}")
    return None


class Tombstoned(CortexError):
    exit_code = 1
    kind = "tombstoned"


class NotForgotten(CortexError):
    exit_code = 1
    kind = "not_forgotten"


class SchemaTooNew(CortexError):
    exit_code = 1
    kind = "schema_too_new"


# How deeply any structure cortexctl reads from outside may nest: JSON given to write --data,
# update --set, import lines, MCP tool arguments, config files, bundle manifests. No valid input
# comes near it (a memory's data is at most a map of text); past it the input is refused.
MAX_NESTING = 64


def too_deep(where: str, error: type[CortexError] = InvalidData) -> CortexError:
    """The one error for input nested past ``MAX_NESTING`` (or too deep for a parser to read)."""
    return error(f"{where + ': ' if where else ''}nested more than {MAX_NESTING} levels deep")


def check_nesting(value: object, where: str, error: type[CortexError] = InvalidData) -> object:
    """``value`` (parsed JSON or TOML) if no list or map in it is nested more than ``MAX_NESTING``
    deep, else ``too_deep``. Walks without recursion, so any depth is safe to check."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth > MAX_NESTING:
            raise too_deep(where, error)
        stack.extend((child, depth + 1) for child in children)
    return value


# The documented table; a test checks every class above against it.
EXIT_CODES = {
    "ok": 0,
    "failed": 1,
    "usage": 2,
    "not_found": 3,
    "busy": 4,
    "rate_limited": 5,
    "budget_unreachable": 6,
    "integrity": 7,
    "refused": 8,
    "provider_unreachable": 9,
    "invalid": 10,
    "internal": 70,
    "interrupted": 130,
}
