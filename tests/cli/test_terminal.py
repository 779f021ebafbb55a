"""On a terminal: tables and a progress bar; piped: plain lines and no decoration."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time

import orjson
import pytest

from tests.conftest import cortexctl_argv

pytestmark = pytest.mark.slow  # imports under a pseudo-terminal


def _run_on_terminal(args: list[str], env: dict, *, stdout_tty: bool, code: int = 0) -> tuple[str, str]:
    """Run with stderr (and optionally stdout) on a pseudo-terminal; return (stdout, terminal text)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        cortexctl_argv() + args, env=env, stdin=subprocess.DEVNULL,
        stdout=slave if stdout_tty else subprocess.PIPE, stderr=slave,
    )
    os.close(slave)
    chunks = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    out = b"" if stdout_tty else proc.stdout.read()
    proc.wait(timeout=30)
    os.close(master)
    assert proc.returncode == code
    return out.decode(), b"".join(chunks).decode("utf-8", "replace")


def _env(store) -> dict:
    return dict(os.environ, CORTEXCTL_STORE=str(store), COLUMNS="100", TERM="xterm")


def test_import_draws_a_progress_bar_only_on_a_terminal(tmp_path, store, cli_proc):
    src = tmp_path / "m.jsonl"
    src.write_bytes(b"".join(orjson.dumps({"type": "fact", "text": f"fact {i}"}) + b"\n" for i in range(3000)))
    out, terminal = _run_on_terminal(["import", str(src), "--batch-size", "500"], _env(store), stdout_tty=False)
    assert "imported 3000 memories in 6 batches" in out
    assert "importing" in terminal  # the bar's label, drawn on stderr
    piped = cli_proc("import", str(src), "--batch-size", "500", env={"CORTEXCTL_STORE": str(tmp_path / "other")})
    assert piped.err == "" and piped.out.strip() == "imported 3000 memories in 6 batches"
    quiet_out, quiet_terminal = _run_on_terminal(
        ["import", str(src), "--quiet", "--store", str(tmp_path / "third")], _env(store), stdout_tty=False)
    assert "importing" not in quiet_terminal


def test_find_draws_a_table_on_a_terminal_and_plain_lines_when_piped(cx, store, cli_proc):
    cx.write("goal", "[active] ship v2 with did:x:1 kept as written")
    _, terminal = _run_on_terminal(["find"], _env(store), stdout_tty=True)
    assert "#" in terminal and "type" in terminal and "goal" in terminal
    assert "[active] ship v2 with did:x:1" in terminal  # data, never markup or emoji codes
    assert "\x1b[" not in terminal  # NO_COLOR is set by the test environment
    piped = cli_proc("find")
    assert piped.out.count("\t") == 2 and "#" not in piped.out


def test_find_on_a_terminal_keeps_the_no_match_rows_and_exits_1_when_nothing_matched(store, cli_proc):
    assert cli_proc("write", "fact", "The deploy key rotates monthly").code == 0
    assert cli_proc("write", "preference", "tabs over spaces").code == 0
    _, terminal = _run_on_terminal(["find", "--near", "zebra quantum pancake"], _env(store), stdout_tty=True, code=1)
    assert terminal.count("(no match)") == 2 and "deploy key" in terminal and "tabs over spaces" in terminal
    assert "nothing matched 'zebra quantum pancake'" in terminal  # the hint, on the terminal's stderr
    _, terminal = _run_on_terminal(["find", "--near", "deploy key"], _env(store), stdout_tty=True)
    assert terminal.count("(no match)") == 1  # the preference, shown and marked; the answer matched
    out, terminal = _run_on_terminal(["find", "-q", "--near", "zebra quantum pancake"], _env(store),
                                     stdout_tty=True, code=1)
    assert terminal.strip() == "" and out == ""
