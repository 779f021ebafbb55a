"""The cortexctl command line: the Typer app, global options, and the one error boundary.

``main()`` is the console script. Every error a user can cause is a
``CortexError`` that becomes one line on stderr (a JSON object under
``--json``/``--jsonl``) and its documented exit code; anything else is an
internal error (exit 70) whose traceback shows only with CORTEXCTL_DEBUG=1.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from cortexctl import __version__
from cortexctl.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, CortexError

HELP = """Long-term memory for AI agents, over a local single-file store.

Write typed memories, find them again, change them with full history, and
move them in and out as JSONL. Exit codes: 0 ok, 1 failed, 2 usage, 3 not
found, 4 store busy, 5 rate limited, 6 budget unreachable, 7 integrity error,
8 refused, 9 provider unreachable, 10 invalid input data, 70 internal error,
130 interrupted. See cortexctl(1).
"""

EPILOG = """\b
Examples:
  cortexctl write fact "The deploy key rotates monthly" --tag ops
  cortexctl find --tag ops -k 5
  cortexctl show 01JD3K --form full
  cortexctl export --out memories.jsonl
"""

app = typer.Typer(
    name="cortexctl",
    help=HELP,
    epilog=EPILOG,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    add_completion=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        print(f"cortexctl {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    ctx: typer.Context,
    config: Annotated[
        Optional[Path],
        typer.Option("-c", "--config", help="Config file (TOML or JSON) [env CORTEXCTL_CONFIG].",
                     metavar="PATH", show_default=False),
    ] = None,
    version: Annotated[
        bool, typer.Option("--version", help="Print the version and exit.", callback=_version, is_eager=True)
    ] = False,
) -> None:
    ctx.obj = {"config": config}


def _register() -> None:
    from cortexctl.cli import cmd_config, cmd_find, cmd_head, cmd_man, cmd_show, cmd_transfer, cmd_verify, cmd_write

    for module in (cmd_write, cmd_show, cmd_head, cmd_find, cmd_transfer, cmd_verify, cmd_config, cmd_man):
        module.register(app)


_register()


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


def _report(err: CortexError, as_json: bool) -> None:
    if as_json:
        import json

        # ensure_ascii keeps any undecodable text an escape, never an encoding error.
        sys.stderr.write(json.dumps(err.to_json(), ensure_ascii=True) + "\n")
        return
    for problem in getattr(err, "problems", ())[:1000]:
        sys.stderr.write(f"cortexctl: {problem}\n")
    line = f"cortexctl: {err.message}"
    if err.hint:
        line += f" ({err.hint})"
    sys.stderr.write(line + "\n")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = _wants_json(argv)
    try:
        _check_utf8(argv)
        rv = app(args=argv, prog_name="cortexctl", standalone_mode=False)
        code = rv if isinstance(rv, int) and not isinstance(rv, bool) else 0
    except CortexError as err:
        _report(err, as_json)
        code = err.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("cortexctl: interrupted\n")
        code = EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): stop quietly, like other Unix tools.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = 0
    except Exception as exc:  # noqa: BLE001 - the one boundary
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
        sys.stderr.write(
            f"cortexctl: internal error: {type(exc).__name__}: {exc} "
            "(this is a bug, please report it; CORTEXCTL_DEBUG=1 shows the traceback)\n"
        )
        code = EXIT_INTERNAL
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return code


if __name__ == "__main__":
    raise SystemExit(main())
