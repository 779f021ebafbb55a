"""How an operation is declared: its name, parameters, hints, engine call and answer, in one place.

An ``Operation`` is what cortexctl can do, whoever asks: the command line
(``cli/``) and the MCP server (``serve/``) are both built from it. It says

- its parameters (``Param``: name, type, default, help), which are the MCP
  tool's arguments and, for a command derived from it, the command's options;
- whether it only reads (``read_only``), destroys (``destructive``) or can be
  repeated to the same effect (``idempotent``), the MCP tool's annotations;
- the engine call: ``call(cx, **params)`` on a ``Cortex``, answering a result
  document (anything with ``to_json()``; a count or a line of text is a small
  result dataclass of ``engine/results.py``, never a bare int or dict);
- its MCP tool (``tool``: the tool's title and description), or why it has
  none (``no_tool``: admin-only or local-file operations opt out, saying so).

This module imports the standard library only; nothing here may import typer,
rich, click, pydantic, mcp, duckdb or the store (import-linter keeps it so),
and an engine call imports what it needs when it runs, so declaring costs no
start-up time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from cortexctl.errors import InvalidData, check_nesting


@dataclass(frozen=True)
class Param:
    """One parameter. ``help`` is what a model reads in the tool's schema (no text: no description);
    ``type`` is str, int, float, bool or dict (a JSON object); ``many`` makes it a list of text."""

    name: str
    help: str = ""
    type: type = str
    default: Any = None
    many: bool = False
    choices: tuple[str, ...] | None = None
    required: bool = False
    # For the command derived from the operation (cli.spec.command_for): its metavar. Its help is
    # ``help``, the tool's and the command's alike (written once).
    metavar: str | None = None

    @property
    def initial(self) -> Any:
        """The value the call gets when the parameter is not given."""
        return [] if self.many and self.default is None else self.default


@dataclass(frozen=True)
class Tool:
    """An operation's MCP tool: the title in its annotations and the description a model reads."""

    title: str
    description: str


@dataclass(frozen=True)
class Operation:
    name: str
    call: Callable[..., Any] | None  # call(cx, **params) -> a result document; None: the front end's own
    params: tuple[Param, ...] = ()
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    open_world: bool = False  # reaches a service beyond the store (the chat model, an endpoint)
    tool: Tool | None = None
    no_tool: str = ""  # why the operation has no MCP tool

    def __post_init__(self) -> None:
        if (self.tool is None) == (not self.no_tool):
            raise ValueError(f"operation {self.name}: give either its MCP tool or why it has none (no_tool)")

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def run(self, cx: Any, **values: Any) -> Any:
        """The engine call with every declared parameter: the given values over the defaults."""
        args = {p.name: (list(p.initial) if p.many else p.initial) for p in self.params}
        args.update(values)
        for name, value in values.items():  # a tool's arguments arrive as any JSON a client sends
            if isinstance(value, (dict, list)):
                try:
                    check_nesting(value, name)
                except InvalidData as exc:
                    exc.field = name
                    raise
        return self.call(cx, **args)
