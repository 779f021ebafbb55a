"""The Typer command tree, built from the declarations: what users meet for ``--help`` and completion.

Imported only when the run-time parser (``cli/parser.py``) leaves argv to it:
help, shell completion, ``--`` before positionals, and every usage error,
which Typer words. Each command's callback runs the same body the parser
runs, with the same values.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cortexctl import __version__
from cortexctl.cli.registry import commands
from cortexctl.cli.spec import EPILOG, HELP, Command, Option

SETTINGS = {"help_option_names": ["-h", "--help"]}


def _declared_name_only(display_type):
    """Typer labels an argument with its Python type (``REF <str>``, ``URI... <list[str]>``); an
    argument with a declared metavar shows that name alone, as options do."""

    def shown(self, ctx):
        return None if self.metavar else display_type(self, ctx)

    return shown


if hasattr(typer.core.TyperArgument, "display_type"):
    typer.core.TyperArgument.display_type = _declared_name_only(typer.core.TyperArgument.display_type)

app = typer.Typer(
    name="cortexctl",
    help=HELP,
    epilog=EPILOG,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    add_completion=True,
    context_settings=SETTINGS,
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


def _completer(complete):
    """A Typer autocompletion callback over a declared completer (``cli/complete.py``).

    Click parses the words typed so far only when they parse whole; while an option still
    waits for its value (``write goal x --set <TAB>``) it drops them all, so the positional
    arguments are recovered here from the words the shell sent.
    """

    def offer(ctx: typer.Context, incomplete: str) -> list[str]:
        values = dict(ctx.params)
        if any(a.name in values and values[a.name] is None for a in _arguments(ctx)):
            values.update(_positionals(ctx))
        return complete(values, incomplete or "")

    return offer


def _arguments(ctx: typer.Context):
    return [p for p in ctx.command.params if isinstance(p, typer.core.TyperArgument)]


def _positionals(ctx: typer.Context) -> dict[str, str]:
    """The command's positional arguments among the words the shell sent, by name."""
    import os
    import shlex

    line = os.environ.get("_TYPER_COMPLETE_ARGS") or os.environ.get("COMP_WORDS") or ""
    try:
        words = shlex.split(line)
    except ValueError:  # an unclosed quote: the word being typed
        words = line.split()
    path = ctx.command_path.split()[1:]  # the command's own words, after the program's
    for i in range(len(words) - len(path) + 1):
        if words[i:i + len(path)] == path:
            words = words[i + len(path):]
            break
    command = ctx.command
    positional, skip = [], False
    for w in words:
        if skip:
            skip = False
        elif w.startswith("-"):
            opt = next((p for p in command.params if w.split("=", 1)[0] in getattr(p, "opts", ())), None)
            skip = opt is not None and not opt.is_flag and "=" not in w
        else:
            positional.append(w)
    return {a.name: v for a, v in zip(_arguments(ctx), positional)}


def _option_annotation(opt: Option) -> tuple[Any, Any]:
    """(annotation, default) of one option, for Typer."""
    base = {str: str, int: int, float: float, bool: bool}[opt.type]
    extra: dict[str, Any] = {"help": opt.help}
    if opt.metavar and not opt.is_flag:
        extra["metavar"] = opt.metavar
    if opt.choices is not None:
        # Offered in completion; checked, with the same message on both paths, by Command.invoke.
        extra["autocompletion"] = lambda incomplete: [c for c in opt.choices if c.startswith(incomplete or "")]
    elif opt.complete is not None:
        extra["autocompletion"] = _completer(opt.complete)
    if opt.is_flag:
        return Annotated[bool, typer.Option(*opt.flags, **extra)], bool(opt.default)
    if opt.many:
        return Annotated[Optional[list[base]], typer.Option(*opt.flags, **extra)], None
    if opt.required:
        return Annotated[base, typer.Option(*opt.flags, show_default=False, **extra)], inspect.Parameter.empty
    if opt.default is None:
        return Annotated[Optional[base], typer.Option(*opt.flags, show_default=False, **extra)], None
    return Annotated[base, typer.Option(*opt.flags, **extra)], opt.default


def callback_for(command: Command):
    """A function whose signature Typer reads as the command's parameters, and which runs its body."""
    params = [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)]
    for arg in command.arguments:
        info = typer.Argument(metavar=arg.metavar, help=arg.help, show_default=False,
                              autocompletion=_completer(arg.complete) if arg.complete else None)
        if arg.many:
            annotation, default = Annotated[Optional[list[str]], info], None
        elif arg.required:
            annotation, default = Annotated[str, info], inspect.Parameter.empty
        else:
            annotation, default = Annotated[Optional[str], info], None
        params.append(inspect.Parameter(arg.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=annotation,
                                        default=default))
    for opt in command.options:
        annotation, default = _option_annotation(opt)
        params.append(inspect.Parameter(opt.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=annotation,
                                        default=default))
    many = {a.name for a in command.arguments if a.many} | {o.name for o in command.options if o.many}

    def callback(ctx: typer.Context, **values: Any) -> int:
        values = {k: (list(v or []) if k in many else v) for k, v in values.items()}
        config = (ctx.obj or {}).get("config")
        return command.invoke(None if config is None else str(config), values)

    callback.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    callback.__annotations__ = {p.name: p.annotation for p in params}
    callback.__name__ = command.words[-1].replace("-", "_")
    callback.__doc__ = command.summary
    return callback


def _build() -> None:
    groups: dict[str, typer.Typer] = {}
    for command in commands():
        target = app
        if len(command.words) == 2:
            group = command.words[0]
            if group not in groups:
                groups[group] = typer.Typer(name=group, help=command.group_help, no_args_is_help=True,
                                            rich_markup_mode=None, context_settings=SETTINGS)
                app.add_typer(groups[group])
            target = groups[group]
        target.command(command.words[-1], help=command.summary, epilog=command.epilog or None,
                       hidden=command.hidden)(callback_for(command))


_build()
