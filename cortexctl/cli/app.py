"""The cortexctl console script: the one error boundary around the parser and the Typer tree.

``main()`` is the console script. Every error a user can cause is a
``CortexError`` that becomes one line on stderr (a JSON object under
``--json``/``--jsonl``) and its documented exit code; anything else is an
internal error (exit 70) whose traceback shows only with CORTEXCTL_DEBUG=1.
"""

from __future__ import annotations

import os
import sys

from cortexctl.errors import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    CortexError,
    Terminated,
    bad_path,
    blocked_path,
    default_signals,
    interrupt_on_signals,
    no_space,
    signalled,
)

def _wants_json(argv: list[str]) -> bool:
    args = argv[: argv.index("--")] if "--" in argv else argv
    return "--json" in args or "--jsonl" in args


def _check_utf8(argv: list[str]) -> None:
    """Arguments are text: bytes that are not UTF-8 (decoded as surrogates) are refused here, once."""
    from cortexctl.errors import InvalidData

    for n, arg in enumerate(argv, 1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            shown = arg.encode("utf-8", "backslashreplace").decode("ascii", "replace")
            raise InvalidData(f"argument {n} ({shown}) is not valid UTF-8") from None


def flag_for(field: str, command=None) -> str:
    """The command-line option for an engine parameter: the command's declared flag, else the
    usual spelling (``k`` -> ``-k``, ``budget_tokens`` -> ``--budget-tokens``)."""
    declared = command.flag_of(field) if command is not None else None
    if declared:
        return declared
    return f"-{field}" if len(field) == 1 else "--" + field.replace("_", "-")


def in_cli_terms(err: CortexError, command=None) -> CortexError:
    """The error worded for the command line: the engine parameter it names becomes its flag."""
    if not err.field:
        return err
    import re

    pattern = re.compile(rf"(?<![\w-]){re.escape(err.field)}(?![\w-])")
    flag = flag_for(err.field, command)
    err.message = pattern.sub(lambda _: flag, err.message, count=1)
    if err.hint:
        err.hint = pattern.sub(lambda _: flag, err.hint, count=1)
    err.args = (err.message,)
    return err


def _command_of(argv: list[str]):
    """The declared command argv names, if any (for wording its errors)."""
    from cortexctl.cli.registry import lookup

    args = list(argv)
    while args and args[0] in ("-c", "--config"):
        del args[:2]
    while args and args[0].startswith("--config="):
        del args[:1]
    return lookup(args)[0]


def _report(err: CortexError, as_json: bool, argv: list[str] | None = None) -> None:
    if err.field:
        err = in_cli_terms(err, _command_of(argv or []))
    from cortexctl.dsn import hide_credentials

    hide_credentials(err)
    if as_json:
        import json

        # ensure_ascii keeps any undecodable text an escape, never an encoding error.
        sys.stderr.write(json.dumps(err.to_json(), ensure_ascii=True) + "\n")
        return
    problems = getattr(err, "problems", ())
    for problem in problems[:1000]:
        sys.stderr.write(f"cortexctl: {problem}\n")
    if len(problems) > 1000:
        sys.stderr.write(f"cortexctl: ... and {len(problems) - 1000} more (--json lists them all)\n")
    line = f"cortexctl: {err.message}"
    if err.hint:
        line += f" ({err.hint})"
    sys.stderr.write(line + "\n")


def _stopped(terminated: bool | None = None) -> int:
    """Say that the command was stopped by ^C or SIGTERM; exit 130."""
    import signal

    if terminated is None:
        terminated = signalled() == signal.SIGTERM  # imported only once stopped
    if not _SAID_STOPPED:
        _SAID_STOPPED.append(terminated)
        sys.stderr.write("cortexctl: terminated\n" if terminated else "cortexctl: interrupted\n")
    return EXIT_INTERRUPTED


_SAID_STOPPED: list[bool] = []  # the command said it was stopped (once, however many signals came)


def main(argv: list[str] | None = None) -> int:
    """Run one command; its exit code. Called with no ``argv`` (the console script), a command that
    asked for it (``common.end_without_teardown``) ends the process here once all is printed; given
    ``argv`` (the process goes on), what that asked is undone once the command is over."""
    if argv is None:
        _open_closed_std_fds()
        try:
            return _main(None)
        except KeyboardInterrupt as exc:  # a second ^C while the first was said: one line still
            return _stopped(isinstance(exc, Terminated) or None)
        finally:
            default_signals()  # as it returns early, too
    try:
        return _main(argv)
    finally:
        common = sys.modules.get("cortexctl.cli.common")
        if common is not None:
            common.command_done()


def _open_closed_std_fds() -> None:
    """A process started with stdin, stdout or stderr closed (`>&-`) has /dev/null on that
    descriptor, so that the next file opened (the database, the lock, an export's descriptor) does
    not take it; Python left sys.stdout None (every command's last flush raised AttributeError):
    stdout and stderr write to /dev/null. ``sys.stdin`` stays None: reading a closed stdin
    (``--data -``) is a usage error that says so (``common.readable_stdin``)."""
    for fd, name, mode in ((0, "stdin", os.O_RDONLY), (1, "stdout", os.O_WRONLY), (2, "stderr", os.O_WRONLY)):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, mode)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            if fd and getattr(sys, name) is None:
                setattr(sys, name, open(fd, "w", encoding="utf-8", closefd=False))


def _main(argv: list[str] | None) -> int:
    process = argv is None
    _SAID_STOPPED.clear()  # a command of its own (in-process callers run many)
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = _wants_json(argv)
    try:
        if process:
            interrupt_on_signals()  # a command stopped by kill or a service manager cleans up as on ^C
        _check_utf8(argv)
        from cortexctl.cli import parser

        argv = parser.hoist(argv)  # --store/--actor/--wait before the command: for both paths

        code = parser.run(argv)
        if code is None:
            from cortexctl.cli.tree import app

            rv = app(args=argv, prog_name="cortexctl", standalone_mode=False)
            code = rv if isinstance(rv, int) and not isinstance(rv, bool) else 0
    except KeyboardInterrupt as exc:
        code = _stopped(isinstance(exc, Terminated))
    except CortexError as err:
        if signalled() is not None:  # what an interrupt became on its way out (a worker's, a query's)
            code = _stopped()
        else:
            _report(err, as_json, argv)
            code = err.exit_code
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): stop quietly, like other Unix tools.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = 0
    except Exception as exc:  # noqa: BLE001 - the one boundary
        code = _stopped() if signalled() is not None else _failed(exc, as_json, argv)
    if process:
        default_signals()
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    if process:
        from cortexctl.cli import common

        if common.quick_exit():
            try:
                sys.stderr.flush()
            except OSError:
                pass
            os._exit(code)
    return code


def _failed(exc: Exception, as_json: bool, argv: list[str]) -> int:
    """Say an error that is not a ``CortexError`` and follows no ^C or SIGTERM (after one, DuckDB's
    RuntimeError("Query interrupted") or click's Abort is said as the interrupt); its exit code."""
    full = no_space(exc) or bad_path(exc) or blocked_path(exc)
    if full is not None:
        _report(full, as_json, argv)
        return full.exit_code
    if hasattr(exc, "exit_code") and hasattr(exc, "format_message"):
        # An argument-parsing error from Typer: one line, exit 2.
        from cortexctl.errors import UsageError

        ctx = getattr(exc, "ctx", None)
        where = ctx.command_path if ctx is not None else "cortexctl"
        message = exc.format_message()
        if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
            names = ", ".join(n for n, c in getattr(ctx.command, "commands", {}).items() if not c.hidden)
            message = f"missing command: one of {names}"
        err = UsageError(message, hint=f"see '{where} --help'")
        if exc.exit_code == 0:
            return 0
        _report(err, as_json)
        return int(exc.exit_code) or 2
    if type(exc).__name__ == "Abort":
        sys.stderr.write("cortexctl: aborted\n")
        return 1
    if os.environ.get("CORTEXCTL_DEBUG") == "1":
        import traceback

        traceback.print_exc()
    from cortexctl.dsn import redact_text

    sys.stderr.write(
        f"cortexctl: internal error: {type(exc).__name__}: {redact_text(str(exc))} "
        "(this is a bug, please report it; CORTEXCTL_DEBUG=1 shows the traceback)\n"
    )
    return EXIT_INTERNAL


if __name__ == "__main__":
    raise SystemExit(main())
