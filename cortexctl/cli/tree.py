"""The Typer command tree: global options and every command's module.

Imported only when the fast path (``cli/fast.py``) does not handle argv.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from cortexctl import __version__

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
    from cortexctl.cli import (
        cmd_attest, cmd_compact, cmd_config, cmd_find, cmd_head, cmd_man, cmd_reindex, cmd_show, cmd_transfer,
        cmd_verify, cmd_write,
    )

    for module in (cmd_write, cmd_show, cmd_head, cmd_find, cmd_attest, cmd_compact, cmd_transfer, cmd_reindex,
                   cmd_verify, cmd_config, cmd_man):
        module.register(app)


_register()


