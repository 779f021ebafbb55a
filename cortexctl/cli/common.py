"""Helpers the command bodies share: opening a Cortex, reading --data and input files."""

from __future__ import annotations

from pathlib import Path
from typing import Optional


_quick_exit = False
_collector_was = True  # whether the cyclic collector ran before ``end_without_teardown``


def end_without_teardown() -> None:
    """Let this process end without the interpreter's teardown once the command has printed
    (``app.main``): a read-only command whose objects hold nothing to finish. Freeing what it
    built (the search snapshot's mapping, its arrays and rows, every module's objects) costs a cold
    ``find`` at a million memories tens of milliseconds (the index file's view is let go earlier,
    when the semantic lane returns: ``vector_index.nearest``). The cyclic garbage collector is off
    from here on too: such a command's few cycles die with the process, and the collector's passes
    over every object the imports made cost a cold ``find`` about 3% of its time. In a process
    that goes on, ``command_done`` puts both back."""
    import gc

    global _quick_exit, _collector_was
    if not _quick_exit:
        _collector_was = gc.isenabled()
    _quick_exit = True
    gc.disable()


def command_done() -> None:
    """After a command run in a process that goes on (``app.main`` given its arguments: a test, a
    program embedding the CLI): no quick end is pending, and the collector is as it was before."""
    import gc

    global _quick_exit
    if _quick_exit:
        _quick_exit = False
        if _collector_was:
            gc.enable()


def quick_exit() -> bool:
    """Whether the process may end at once: asked for, and no thread but daemons left to finish."""
    import threading

    return _quick_exit and all(t.daemon for t in threading.enumerate() if t is not threading.main_thread())


def open_cortex(config_path, store: Optional[str], actor: Optional[str], wait: Optional[float]):
    """A Cortex from the global -c/--config and a command's --store/--actor/--wait."""
    from cortexctl.engine.cortex import Cortex

    return Cortex(store=store, actor=actor, wait=wait, config=config_path)


def readable_stdin(option: str):
    """stdin as bytes, or a UsageError when it is closed or not open for reading."""
    import os
    import sys

    from cortexctl.errors import UsageError

    if sys.stdin is None:
        raise UsageError(f"{option} -: stdin is closed")
    try:
        os.read(sys.stdin.fileno(), 0)
    except (OSError, ValueError) as exc:
        raise UsageError(f"{option} -: stdin cannot be read ({getattr(exc, 'strerror', None) or exc})") from None
    return sys.stdin.buffer


MAX_INPUT_BYTES = 256 * 1024 * 1024  # an option's file or stdin: far above any real input, below a runaway one


def _bounded(fh, option: str, where: str) -> bytes:
    from cortexctl.errors import InvalidData

    raw = fh.read(MAX_INPUT_BYTES + 1)
    if len(raw) > MAX_INPUT_BYTES:
        raise InvalidData(f"{option} {where}: larger than {MAX_INPUT_BYTES // (1024 * 1024)} MiB")
    return raw


def read_input(value: str, option: str) -> tuple[bytes, str]:
    """The bytes of an option's file, or of stdin for ``-``, and where they came from (at most
    MAX_INPUT_BYTES: /dev/zero or a runaway pipe is refused, not read until memory runs out)."""
    from cortexctl.errors import UsageError

    if value == "-":
        stdin = readable_stdin(option)
        try:
            return _bounded(stdin, option, "-"), "stdin"
        except OSError as exc:
            raise UsageError(f"{option} -: stdin cannot be read ({exc.strerror})") from None
    if not value:
        raise UsageError(f"{option} must not be empty")
    path = Path(value)
    if path.is_dir():
        raise UsageError(f"{option} {path}: is a directory, not a file")
    try:
        with open(path, "rb") as fh:
            return _bounded(fh, option, str(path)), str(path)
    except FileNotFoundError:
        raise UsageError(f"{option} {path}: no such file") from None
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot be read ({exc.strerror})") from None


def read_data(value: Optional[str], option: str = "--data",
              what: str = "a JSON object of the type's fields") -> Optional[dict]:
    """--data (or ``option``): inline JSON, @FILE, or - for stdin."""
    import json

    from cortexctl.errors import InvalidData, check_nesting, too_deep

    if value is None:
        return None
    if value == "-" or value.startswith("@"):
        raw, where = read_input(value if value == "-" else value[1:], option)
    else:
        raw = value.encode("utf-8", "surrogateescape")
        where = option
    try:
        doc = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise InvalidData(f"{where}: not valid UTF-8") from None
    except json.JSONDecodeError as exc:
        why = exc.msg.removesuffix(" at")  # json's "Invalid control character at"
        raise InvalidData(f"{where}: not valid JSON ({why} at line {exc.lineno} column {exc.colno})") from None
    except ValueError:  # an integer longer than Python's int_max_str_digits (4300)
        raise InvalidData(f"{where}: not valid JSON (a number has too many digits)") from None
    except RecursionError:
        raise too_deep(where) from None
    check_nesting(doc, where)
    if not isinstance(doc, dict):
        raise InvalidData(f"{where}: must be {what}")
    return doc


def read_jsonl(value: str, option: str) -> list:
    """A JSONL file (or - for stdin) as a list of values; InvalidData naming the first bad line."""
    import json

    from cortexctl.errors import InvalidData, check_nesting, too_deep

    raw, where = read_input(value, option)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidData(f"{where}: not valid UTF-8") from None
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                out.append(check_nesting(json.loads(line), f"{where}: line {n}"))
            except ValueError as exc:
                why = exc.msg if isinstance(exc, json.JSONDecodeError) else "a number has too many digits"
                raise InvalidData(f"{where}: line {n}: not valid JSON ({why})") from None
            except RecursionError:
                raise too_deep(f"{where}: line {n}") from None
    return out


def emit_result(json: bool, jsonl: bool, result, line: str, hint: str | None = None):
    """A result's warnings on stderr, then its JSON (--json/--jsonl) or ``line`` and ``hint``."""
    from cortexctl.cli.output import Output

    out = Output(json=json, jsonl=jsonl)
    for w in result.warnings:
        out.warn(w)
    if out.machine:
        out.emit(result.to_json())
        return
    out.line(line)
    if hint:
        out.hint(hint)
