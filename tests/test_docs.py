"""Docs stay true: every command has help with examples, a man page, and a place in the README."""

from __future__ import annotations

from pathlib import Path

import pytest

from cortexctl.cli.cmd_man import render_all
from cortexctl.cli.registry import commands

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = [list(c.words) for c in commands() if not c.hidden]


def test_the_committed_man_pages_match_the_command_tree():
    pages = render_all()
    committed = {p.name: p.read_text() for p in (ROOT / "man").glob("*.1")}
    assert set(committed) == set(pages), "run: cortexctl generate-man man"
    for name, text in pages.items():
        assert committed[name] == text, f"man/{name} is stale; run: cortexctl generate-man man"


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_every_command_has_help_with_examples(path, cli):
    r = cli(*path, "--help", use_store=False)
    assert r.code == 0 and "Examples:" in r.out and f"cortexctl {' '.join(path)}" in r.out


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_every_command_is_in_the_readme_and_the_main_man_page(path):
    readme = (ROOT / "README.md").read_text()
    assert f"cortexctl {' '.join(path)}" in readme
    assert f"cortexctl {' '.join(path)}" in (ROOT / "man" / "cortexctl.1").read_text()


def test_readme_test_command_is_what_ci_runs():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    test_cmd = "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test]' && python -m pytest -q -m \"not slow\" && python -m pytest -q -m slow"
    assert test_cmd in readme and test_cmd in ci


@pytest.mark.slow
def test_a_built_wheel_installs_the_man_pages_beside_bin(tmp_path):
    """`man cortexctl` after `pip install .` in a venv: the pages go to <prefix>/share/man/man1."""
    import subprocess
    import sys
    import zipfile

    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = tmp_path.glob("cortexctl-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    pages = {n.rsplit("/", 1)[1] for n in names if ".data/data/share/man/man1/" in n}
    assert pages == {p.name for p in (ROOT / "man").glob("*.1")}
    assert "cortexctl.1" in pages


def test_the_man_pages_exit_codes_are_the_ones_commands_can_give():
    """Every code cortexctl(1) lists is one some command declares (or main's 70 and 130), and back."""
    import re

    import cortexctl.errors as errors

    text = (ROOT / "man" / "cortexctl.1").read_text()
    section = text.split(".SH EXIT STATUS", 1)[1].split(".SH ", 1)[0]
    listed = {int(n) for n in re.findall(r"\\fB(\d+)\\fR", section)}
    declared = set().union(*(set(c.exits) for c in commands()))
    assert listed == declared | {errors.EXIT_INTERNAL, errors.EXIT_INTERRUPTED}
    assert set(errors.EXIT_CODES.values()) <= listed
