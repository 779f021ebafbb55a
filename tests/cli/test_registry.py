"""Every command is declared once: the Typer tree and the run-time parser agree with the declaration,
every plain invocation runs without Typer, and what the command line does not know is refused."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path
from typing import get_args, get_origin

import pytest

from cortexctl.cli import parser
from cortexctl.cli.registry import MODULES, commands
from cortexctl.cli.spec import Command
from tests.conftest import assert_clean_error

COMMANDS = commands()
IDS = [c.name for c in COMMANDS]


def _typer_command(command: Command):
    import typer

    from cortexctl.cli.tree import app

    node = typer.main.get_command(app)
    for word in command.words:
        node = node.commands[word]
    return node


def _sample(opt) -> str:
    if opt.choices:
        return opt.choices[-1]
    return {int: "7", float: "0.5"}.get(opt.type, "some-text")


def _plain_argv(command: Command, store: Path) -> list[str]:
    """A plain invocation: the words, every argument, and every option the declaration requires."""
    argv = list(command.words)
    argv += [f"{a.metavar.strip('.').lower()}-value" for a in command.arguments if a.required]
    for opt in command.options:
        if opt.required:
            argv += [opt.flags[0], _sample(opt)]
    if command.option("--store"):
        argv += ["--store", str(store)]
    return argv


def test_every_module_in_the_registry_declares_commands():
    for name in MODULES:
        module = __import__(f"cortexctl.cli.{name}", fromlist=["COMMANDS"])
        assert module.COMMANDS and all(isinstance(c, Command) for c in module.COMMANDS), name
    assert len({c.words for c in COMMANDS}) == len(COMMANDS), "two declarations of one command"


@pytest.mark.parametrize("command", COMMANDS, ids=IDS)
def test_typer_parameters_agree_with_the_declaration(command):
    params = {p.name: p for p in _typer_command(command).params}
    declared = [*command.arguments, *command.options]
    assert list(params) == [d.name for d in declared]
    for arg in command.arguments:
        p = params[arg.name]
        assert p.param_type_name == "argument"
        assert p.required == (arg.required and not arg.many)
        assert (p.nargs == -1) == arg.many
    for opt in command.options:
        p = params[opt.name]
        assert p.param_type_name == "option"
        assert sorted(p.opts + p.secondary_opts) == sorted(opt.flags)
        assert p.multiple == opt.many
        assert p.is_flag == opt.is_flag
        assert p.required == opt.required
        annotation = p.type_descriptor.annotation
        assert (get_origin(annotation) is list) == opt.many
        assert (get_args(annotation)[0] if opt.many else annotation) is opt.type
        if not opt.many and not opt.required:
            assert p.default == opt.default
        if opt.choices:
            assert [c.value for c in p.shell_complete(None, "")] == list(opt.choices)


@pytest.mark.parametrize("command", COMMANDS, ids=IDS)
def test_the_parser_reads_every_declared_option(command, tmp_path):
    base = _plain_argv(command, tmp_path)
    plan = parser.plan(base)
    assert plan is not None and plan[0] is command
    given = {a.name for a in command.arguments if a.required} | {o.name for o in command.options if o.required}
    for name, default in command.defaults().items():
        if name not in given | {"store"}:
            assert plan[3][name] == default, name
    for opt in command.options:
        for flag in opt.flags:
            argv = [*base, flag] if opt.is_flag else [*base, flag, _sample(opt)]
            got = parser.plan(argv)
            assert got is not None, argv
            expected = True if opt.is_flag else {int: 7, float: 0.5}.get(opt.type, _sample(opt))
            assert got[3][opt.name] == ([expected] if opt.many else expected), argv
        if not opt.is_flag and opt.type in (int, float):
            assert parser.plan([*base, opt.flags[0], "not-a-number"]) is None
    assert parser.plan([*base, "--no-such-option"]) is None


def _imports_under_importtime(argv: list[str], cwd: Path) -> set[str]:
    code = f"import sys\nfrom cortexctl.cli.app import main\nsys.exit(main({argv!r}))"
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True,
                          cwd=cwd, timeout=120)
    names = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names


@pytest.mark.parametrize("command", COMMANDS, ids=IDS)
def test_a_plain_invocation_imports_no_typer_click_or_pydantic(command, tmp_path):
    argv = _plain_argv(command, tmp_path / "store")
    if command.words == ("generate-man",):
        argv = ["generate-man", str(tmp_path / "man")]
    if command.words == ("mcp",):
        # A plain `mcp` serves stdio through the SDK, which is built on pydantic: the command's own
        # part (declaration, parsing, settings, the checks before serving) is what must stay light.
        argv = ["mcp", "--transport", "http", "--store", str(tmp_path / "store")]  # no token: exit 2 first
    assert parser.plan(argv) is not None, argv
    loaded = _imports_under_importtime(argv, tmp_path)
    assert "cortexctl" in loaded, "importtime saw nothing: the check would pass vacuously"
    assert not {"typer", "click", "pydantic"} & loaded, argv


def _store_bytes(store: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(store.iterdir()) if p.is_file()}


@pytest.mark.parametrize("argv", [
    ["bogus"], ["wirte", "fact", "x"], ["checkpoint", "bogus"], ["write", "fact", "x", "--bogus"],
    ["write", "fact", "x", "--tags", "a"], ["find", "--nope"], ["import", "-", "--force"], ["--bogus", "find"],
])
def test_an_unknown_command_or_option_is_one_usage_line_and_writes_nothing(argv, cli, store):
    cli("write", "fact", "already here")
    before = _store_bytes(store)
    run = cli(*argv)
    assert_clean_error(run, 2)
    assert _store_bytes(store) == before
