"""Every command module, in the order ``cortexctl --help`` lists them.

Adding a command: write ``cli/cmd_<name>.py`` with its ``COMMANDS`` list (see
``cli/spec.py``; ``command_for`` derives one from an operation of
``cortexctl/ops``) and add the module's name here (a dotted name is imported as
it is). The parser, the Typer tree, the man pages and the tests that walk every
command pick it up from this list.
"""

from __future__ import annotations

import importlib

from cortexctl.cli.spec import Command

MODULES = (
    "cmd_write",
    "cmd_supersede",
    "cmd_show",
    "cmd_head",
    "cmd_changes",
    "cmd_find",
    "cmd_attest",
    "cmd_remember",
    "cmd_pattern",
    "cmd_pager",
    "cmd_session",
    "cmd_consolidate",
    "cmd_compact",
    "cmd_grant",
    "cmd_transfer",
    "cmd_reindex",
    "cmd_verify",
    "cmd_backup",
    "cmd_health",
    "cmd_mcp",
    "cmd_config",
    "cmd_man",
)

_COMMANDS: list[Command] = []


def commands() -> list[Command]:
    """Every declared command (hidden ones included)."""
    if not _COMMANDS:
        for name in MODULES:
            _COMMANDS.extend(importlib.import_module(name if "." in name else f"cortexctl.cli.{name}").COMMANDS)
    return _COMMANDS


def lookup(words: list[str]) -> tuple[Command | None, int]:
    """The command named by the first words of ``words`` and how many words it took."""
    for cmd in commands():
        n = len(cmd.words)
        if tuple(words[:n]) == cmd.words:
            return cmd, n
    return None, 0
