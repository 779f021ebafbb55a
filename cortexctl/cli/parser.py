"""The run-time parser: every plain invocation of every declared command, without Typer.

Typer (with click and pydantic behind it) costs more to import than DuckDB
itself, and agents run cortexctl in a loop as fresh processes. ``plan(argv)``
reads the plain forms straight from the declarations (``cli/spec.py``): the
global ``-c/--config``, the command's words, its options as ``--opt VALUE`` or
``--opt=VALUE`` (short ones as ``-o VALUE``), flags, whole-number and decimal
values, and its positionals. Anything else — help, shell
completion, ``--``, an unknown command or option, a value that does not
convert, a missing required option — returns None, and the Typer tree built
from the same declarations (``cli/tree.py``) answers it: help for people, or
one usage line and exit 2, having written nothing.
"""

from __future__ import annotations

import re
from typing import Any

from cortexctl.cli.spec import Command, Option

_INT = re.compile(r"-?[0-9]+")
_FLOAT = re.compile(r"-?([0-9]+(\.[0-9]*)?|\.[0-9]+)")


def convert(opt: Option, value: str) -> Any:
    """The option's value from its text, or None when the text is not one (Typer then explains)."""
    if opt.type is int:
        return int(value) if _INT.fullmatch(value) else None
    if opt.type is float:
        return float(value) if _FLOAT.fullmatch(value) else None
    return value


# Options every store command takes that may also come before the command's name, like git -C.
LEADING = ("--store", "--actor", "--wait")


def hoist(argv: list[str]) -> list[str]:
    """argv with ``--store``/``--actor``/``--wait`` given before the command's words moved after
    them (``cortexctl --store X find`` is ``cortexctl find --store X``), for the parser and the
    Typer tree alike. Anything it does not recognise is left as it is, for Typer to explain."""
    from cortexctl.cli.registry import lookup

    front: list[str] = []
    moved: list[str] = []
    args = list(argv)
    while args:
        token = args[0]
        name = token.split("=", 1)[0]
        if name in ("-c", "--config") or name in LEADING:
            takes = 1 if "=" in token and name.startswith("--") else 2
            if len(args) < takes:
                return list(argv)
            (moved if name in LEADING else front).extend(args[:takes])
            del args[:takes]
        else:
            break
    if not moved:
        return list(argv)
    command, n = lookup(args)
    if command is None:
        return list(argv)
    return front + args[:n] + moved + args[n:]


def plan(argv: list[str]) -> tuple[Command, Any, list[str], dict[str, Any]] | None:
    """(command, config path, positionals, values by parameter name, positionals included) when argv
    is a plain invocation, else None."""
    from cortexctl.cli.registry import lookup

    args = list(hoist(argv))  # a copy: plan consumes it
    config = None
    while args and (args[0] in ("-c", "--config") or args[0].startswith("--config=")):
        if "=" in args[0]:
            config = args.pop(0).split("=", 1)[1]
        elif len(args) >= 2:
            args.pop(0)
            config = args.pop(0)
        else:
            return None
    command, n = lookup(args)
    if command is None:
        return None
    del args[:n]
    values = command.defaults()
    given: set[str] = set()
    positionals: list[str] = []
    while args:
        token = args.pop(0)
        if not token.startswith("-") or token == "-":
            positionals.append(token)
            continue
        name, eq, inline = token.partition("=")
        opt = command.option(name)
        if opt is None or (eq and not name.startswith("--")):
            return None
        given.add(opt.name)
        if opt.is_flag:
            if eq:
                return None
            values[opt.name] = True
            continue
        if eq:
            raw = inline
        elif args:
            raw = args.pop(0)
        else:
            return None
        value = convert(opt, raw)
        if value is None:
            return None
        if opt.many:
            values[opt.name].append(value)
        else:
            values[opt.name] = value
    if any(o.required and o.name not in given for o in command.options):
        return None
    if not _place(command, positionals, values):
        return None
    return command, config, positionals, values


def _place(command: Command, positionals: list[str], values: dict[str, Any]) -> bool:
    """Put the positionals into the command's arguments; False when their number does not fit."""
    rest = list(positionals)
    for arg in command.arguments:
        if arg.many:
            values[arg.name] = rest
            rest = []
        elif rest:
            values[arg.name] = rest.pop(0)
        elif arg.required:
            return False
    return not rest


def run(argv: list[str]) -> int | None:
    """Run a plain invocation and return its exit code, or None when Typer must handle argv."""
    p = plan(argv)
    if p is None:
        return None
    command, config, _, values = p
    return command.invoke(config, values)
