"""Typer-free helpers shared by the commands and the fast path: opening a Cortex, reading --data."""

from __future__ import annotations

from pathlib import Path
from typing import Optional


def open_cortex(config_path, store: Optional[str], actor: Optional[str], wait: Optional[float]):
    """A Cortex from the global -c/--config and a command's --store/--actor/--wait."""
    from cortexctl.engine.cortex import Cortex

    return Cortex(store=store, actor=actor, wait=wait, config=config_path)


def read_data(value: Optional[str]) -> Optional[dict]:
    """--data: inline JSON, @FILE, or - for stdin."""
    import json
    import sys

    from cortexctl.errors import InvalidData, UsageError

    if value is None:
        return None
    if value == "-":
        raw = sys.stdin.buffer.read()
        where = "stdin"
    elif value.startswith("@"):
        path = Path(value[1:])
        where = str(path)
        if path.is_dir():
            raise UsageError(f"--data {path}: is a directory, not a file")
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raise UsageError(f"--data {path}: no such file") from None
        except OSError as exc:
            raise UsageError(f"--data {path}: cannot be read ({exc.strerror})") from None
    else:
        raw = value.encode("utf-8", "surrogateescape")
        where = "--data"
    try:
        doc = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise InvalidData(f"{where}: not valid UTF-8") from None
    except ValueError as exc:
        raise InvalidData(f"{where}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    if not isinstance(doc, dict):
        raise InvalidData(f"{where}: must be a JSON object of the type's fields")
    return doc
