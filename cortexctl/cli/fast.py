"""The fast path: find, show, history, write, attest, compact and checkpoint load without Typer.

Typer (with pydantic behind it) costs more to import than DuckDB itself, and
these are the commands agents run in a loop as fresh processes. ``plan(argv)``
recognizes exactly the plain forms of them — known options, ``--opt VALUE`` or
``--opt=VALUE``, whole-number and decimal values — and anything else (help,
an unknown option, ``--``, a value that needs Typer's checks) returns None, so
the Typer command tree handles it with the same result. The command bodies
are shared (``cli/views.py``); tests run argument vectors through both paths
and compare what they print.
"""

from __future__ import annotations

import re
from typing import Any, Callable

_INT = re.compile(r"-?[0-9]+")
_FLOAT = re.compile(r"[0-9]+(\.[0-9]*)?|\.[0-9]+")

FLAG, ONE, MANY = "flag", "one", "many"
CHECKPOINT_LOAD = "checkpoint\0load"  # the two words; no single argument can hold a NUL

# option -> (parameter, arity, converter)
_COMMON: dict[str, tuple[str, str, Callable[[str], Any] | None]] = {
    "--store": ("store", ONE, None),
    "--actor": ("actor", ONE, None),
    "--wait": ("wait", ONE, float),
    "--json": ("json", FLAG, None),
    "--jsonl": ("jsonl", FLAG, None),
}
_SPECS: dict[str, tuple[dict, tuple[int, int], dict[str, Any]]] = {
    # command -> (options, (fewest, most) positionals, defaults)
    "find": (
        {
            "--type": ("types", MANY, None),
            "--tag": ("tags", MANY, None),
            "--frame": ("frames", MANY, None),
            "--include-tombstoned": ("include_tombstoned", FLAG, None),
            "-k": ("k", ONE, int),
            "--form": ("form", ONE, None),
            "--near": ("near", ONE, None),
            "--budget-tokens": ("budget_tokens", ONE, int),
        },
        (0, 0),
        {"types": [], "tags": [], "frames": [], "include_tombstoned": False, "k": 10, "form": "short",
         "near": None, "budget_tokens": None},
    ),
    "attest": (
        {"--intent": ("intent", ONE, None), "--outcome": ("outcome", ONE, None), "--reason": ("reason", ONE, None)},
        (0, 100_000),
        {"intent": None, "outcome": None, "reason": None},
    ),
    "compact": (
        {"--intent": ("intent", ONE, None), "--step": ("step", ONE, None),
         "--budget-tokens": ("budget_tokens", ONE, int), "--load-bearing": ("load_bearing", MANY, None),
         "--in-context-file": ("in_context_file", ONE, None), "--checkpoint-dir": ("checkpoint_dir", ONE, None)},
        (0, 100_000),
        {"intent": None, "step": None, "budget_tokens": None, "load_bearing": [], "in_context_file": None,
         "checkpoint_dir": None},
    ),
    CHECKPOINT_LOAD: (
        {"--intent": ("intent", ONE, None), "--step": ("step", ONE, None)}, (0, 0), {"intent": None, "step": None},
    ),
    "show": (
        {"--version": ("version", ONE, int), "--form": ("form", ONE, None)}, (1, 1), {"version": None, "form": "full"}
    ),
    "history": ({}, (1, 1), {}),
    "write": (
        {
            "--set": ("sets", MANY, None),
            "--data": ("data", ONE, None),
            "--tag": ("tags", MANY, None),
            "--frame": ("frames", MANY, None),
            "--importance": ("importance", ONE, int),
            "--visibility": ("visibility", ONE, None),
            "--confidence": ("confidence", ONE, float),
            "--session": ("session", ONE, None),
            "--short-form": ("short_form", ONE, None),
            "--medium-form": ("medium_form", ONE, None),
        },
        (1, 2),
        {"sets": [], "data": None, "tags": [], "frames": [], "importance": 5, "visibility": "private",
         "confidence": 1.0, "session": None, "short_form": None, "medium_form": None},
    ),
}


def _convert(conv, value: str):
    if conv is int:
        return int(value) if _INT.fullmatch(value) else None
    if conv is float:
        return float(value) if _FLOAT.fullmatch(value) else None
    return value


def plan(argv: list[str]) -> tuple[str, Any, list[str], dict[str, Any]] | None:
    """(command, config path, positionals, options) when the fast path can run argv, else None."""
    args = list(argv)
    config = None
    while args and args[0] in ("-c", "--config") or (args and args[0].startswith("--config=")):
        if "=" in args[0]:
            config = args.pop(0).split("=", 1)[1]
        elif len(args) >= 2:
            args.pop(0)
            config = args.pop(0)
        else:
            return None
    if args[:2] == ["checkpoint", "load"]:
        args[:2] = [CHECKPOINT_LOAD]
    if not args or args[0] not in _SPECS:
        return None
    command = args.pop(0)
    options, n_positional, defaults = _SPECS[command]
    table = {**options, **_COMMON}
    values: dict[str, Any] = {"store": None, "actor": None, "wait": None, "json": False, "jsonl": False, **defaults}
    values = {k: (list(v) if isinstance(v, list) else v) for k, v in values.items()}
    positionals: list[str] = []
    while args:
        token = args.pop(0)
        if not token.startswith("-") or token == "-":
            positionals.append(token)
            continue
        name, eq, inline = token.partition("=")
        if name not in table or (eq and name.startswith("-") and not name.startswith("--")):
            return None
        param, arity, conv = table[name]
        if arity == FLAG:
            if eq:
                return None
            values[param] = True
            continue
        if eq:
            raw = inline
        elif args:
            raw = args.pop(0)
        else:
            return None
        value = _convert(conv, raw)
        if value is None:
            return None
        if arity == MANY:
            values[param].append(value)
        else:
            values[param] = value
    if not n_positional[0] <= len(positionals) <= n_positional[1]:
        return None
    return command, config, positionals, values


def run(argv: list[str]) -> int | None:
    """Run argv on the fast path and return its exit code, or None when Typer must handle it."""
    p = plan(argv)
    if p is None:
        return None
    from cortexctl.cli import views

    command, config, positionals, values = p
    if command == "find":
        views.run_find(config, **values)
    elif command == "show":
        views.run_show(config, positionals[0], **values)
    elif command == "attest":
        views.run_attest(config, positionals, **values)
    elif command == "compact":
        views.run_compact(config, positionals, **values)
    elif command == CHECKPOINT_LOAD:
        views.run_checkpoint_load(config, **values)
    elif command == "history":
        views.run_history(config, positionals[0], **values)
    else:
        views.run_write(config, *positionals, **values)
    return 0
