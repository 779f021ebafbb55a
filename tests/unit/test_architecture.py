"""Imports point down: cli -> engine -> {store, ...} -> memory -> errors; heavy modules stay lazy."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "cortexctl"


def _imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module


def test_import_linter_contracts_hold():
    """The rooms, the one-way doors, the heavy libraries' homes and the absence of cycles,
    as pyproject.toml's [tool.importlinter] contracts state them."""
    proc = subprocess.run([sys.executable, "-c", "from importlinter.cli import lint_imports_command as c; c()"],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "Contracts: " in proc.stdout and " broken" in proc.stdout, proc.stdout[-2000:]


def _loaded_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys; print(' '.join(sorted(sys.modules)))"],
                         capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_engine_imports_without_typer_or_rich():
    mods = _loaded_after("from cortexctl import Cortex; Cortex")
    assert not {"typer", "rich", "duckdb", "numpy", "usearch", "httpx"} & mods


def test_cli_start_up_imports_nothing_heavy():
    mods = _loaded_after("import cortexctl.cli.app")
    assert not {"rich", "duckdb", "numpy", "usearch", "httpx", "cbor2"} & mods


SQL = re.compile(r"\b(SELECT\s.+\sFROM|INSERT\s+INTO|DELETE\s+FROM|UPDATE\s+\w+\s+SET|CREATE\s+(TABLE|INDEX))\b", re.S)


@pytest.mark.parametrize("path", sorted(p for p in PKG.rglob("*.py") if p.relative_to(PKG).parts[0] != "store"),
                         ids=lambda p: str(p.relative_to(PKG)))
def test_no_sql_outside_the_store(path):
    """SQL text never leaves store/: the engine speaks to storage through store.interface."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            assert not SQL.search(node.value), f"{path.name} holds SQL: {node.value[:80]!r}"
        if isinstance(node, ast.Attribute) and node.attr in ("execute", "executemany", "fetchall", "fetchnumpy"):
            raise AssertionError(f"{path.name} runs a query ({node.attr})")


@pytest.mark.parametrize("path", sorted((PKG / "engine").glob("*.py")), ids=lambda p: p.name)
def test_no_engine_module_imports_the_facade(path):
    """Use cases take a Context; only the public package entry point imports engine.cortex."""
    if path.name == "cortex.py":
        return
    for name in _imports(path):
        assert name != "cortexctl.engine.cortex", f"{path.name} imports the Cortex facade"
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "cortexctl.engine":
            assert "cortex" not in [a.name for a in node.names], f"{path.name} imports the Cortex facade"
