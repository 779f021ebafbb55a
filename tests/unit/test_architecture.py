"""Imports point down: cli -> engine -> {store, ...} -> memory -> errors; heavy modules stay lazy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


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
