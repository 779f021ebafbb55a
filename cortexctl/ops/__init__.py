"""Operations: what cortexctl can do, declared once for every front end.

``spec.py`` says how an operation is declared (``Operation``, ``Param``,
``Tool``); ``catalogue.py`` declares every one. The MCP server (``serve/``)
builds its tools from them and the commands (``cli/``) run their engine calls,
so a new operation is one declaration here plus, for the shell, one command
derived from it. This package sits between serve/ and the engine: it imports
neither the command line's libraries nor the SDK, nor anything heavy when
imported.
"""

from __future__ import annotations

import importlib

from cortexctl.ops.spec import Operation, Param, Tool

# The modules that declare operations (each has an OPERATIONS list), in the order tools are listed.
MODULES = ["cortexctl.ops.catalogue", "cortexctl.ops.changes", "cortexctl.ops.supersede"]


def operations() -> list[Operation]:
    """Every declared operation, in declaration order."""
    found: list[Operation] = []
    for name in MODULES:
        found.extend(importlib.import_module(name).OPERATIONS)
    return found


def lookup(name: str) -> Operation:
    """The operation called ``name``; KeyError when there is none."""
    for op in operations():
        if op.name == name:
            return op
    raise KeyError(name)


def tools() -> list[Operation]:
    """The operations served as MCP tools, in declaration order."""
    return [op for op in operations() if op.tool is not None]


__all__ = ["Operation", "Param", "Tool", "operations", "lookup", "tools", "MODULES"]
