"""Shared fixtures: an isolated environment, a store in tmp_path, and the CLI as a subprocess.

Every test runs with CORTEXCTL_* cleared, HOME and XDG dirs in tmp_path (so
no user config or default store is touched), NO_COLOR=1 and COLUMNS=80.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from cortexctl import Cortex


def cortexctl_argv() -> list[str]:
    """The installed console script, as a user would run it."""
    script = Path(sys.executable).with_name("cortexctl")
    if script.exists():
        return [str(script)]
    found = shutil.which("cortexctl")
    return [found] if found else [sys.executable, "-m", "cortexctl"]


@dataclass
class Run:
    args: list[str]
    code: int
    out: str
    err: str

    def json(self):
        return orjson.loads(self.out)

    def jsonl(self):
        return [orjson.loads(line) for line in self.out.splitlines() if line.strip()]

    def __repr__(self) -> str:  # shown by pytest on failure
        return f"Run({self.args!r}, code={self.code}, out={self.out[:400]!r}, err={self.err[:400]!r})"


@pytest.fixture(autouse=True)
def clean_env(tmp_path, monkeypatch):
    for key in list(os.environ):
        if key.startswith("CORTEXCTL_"):
            monkeypatch.delenv(key)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("CORTEXCTL_ACTOR", "alice")


@pytest.fixture
def store(tmp_path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def cli(store):
    """Run cortexctl as a subprocess against the test store: cli("write", "fact", "x")."""

    def run(*args: str, input: bytes | str | None = None, env: dict | None = None, use_store: bool = True,
            timeout: float = 120) -> Run:
        full_env = dict(os.environ)
        if use_store:
            full_env.setdefault("CORTEXCTL_STORE", str(store))
        if env:
            full_env.update(env)
        data = input.encode() if isinstance(input, str) else input
        proc = subprocess.run(
            cortexctl_argv() + [str(a) for a in args], input=data, capture_output=True,
            env=full_env, timeout=timeout,
        )
        return Run([str(a) for a in args], proc.returncode, proc.stdout.decode("utf-8", "replace"),
                   proc.stderr.decode("utf-8", "replace"))

    return run


@pytest.fixture
def cx(store) -> Cortex:
    return Cortex(store=store, actor="alice")


def run_sql(store: Path, statement: str, params=()) -> None:
    """Change the store's tables directly, behind cortexctl's back (tampering tests)."""
    import duckdb

    con = duckdb.connect(str(store / "cortex.duckdb"))
    try:
        con.execute(statement, list(params))
    finally:
        con.close()


def assert_store_verifies(path: Path) -> None:
    report = Cortex(store=path, actor="verifier").verify()
    assert report.ok, [str(p) for p in report.problems]


def assert_clean_error(run: Run, code: int) -> None:
    """One line on stderr, the documented exit code, no traceback, nothing on stdout."""
    assert run.code == code, run
    lines = [l for l in run.err.splitlines() if l.strip()]
    assert len(lines) == 1, run
    assert "Traceback" not in run.err, run
    assert lines[0].startswith("cortexctl: "), run
    assert run.out == "", run


@pytest.fixture
def embed_server():
    """A real embeddings endpoint on 127.0.0.1 (see tests/embed_server.py)."""
    from tests.embed_server import EmbedServer

    server = EmbedServer().start()
    yield server
    server.stop()
