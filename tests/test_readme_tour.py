"""The README's short tour runs as pasted, top to bottom, on a fresh store (issue 12, item 1)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import cortexctl_argv

pytestmark = pytest.mark.slow  # runs the whole tour in a shell, one process per command

ROOT = Path(__file__).resolve().parents[1]


def tour_script() -> str:
    readme = (ROOT / "README.md").read_text()
    m = re.search(r"^## A short tour\n+```sh\n(.*?)^```", readme, re.S | re.M)
    assert m, "README.md has no '## A short tour' ```sh block"
    return m.group(1)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_readme_tour_runs_top_to_bottom_on_a_fresh_store(tmp_path):
    script = tour_script()
    assert "cortexctl write" in script and "cortexctl forget" in script
    bindir = tmp_path / "bin"
    bindir.mkdir()
    argv = cortexctl_argv()
    shim = bindir / "cortexctl"
    shim.write_text("#!/bin/sh\nexec " + " ".join(f"'{a}'" for a in argv) + ' "$@"\n')
    shim.chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    env["CORTEXCTL_STORE"] = str(tmp_path / "store")
    work = tmp_path / "work"
    work.mkdir()
    # -e: the first failing command stops the tour; pipefail: a failure inside a pipe counts too
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=work, env=env,
                          capture_output=True, text=True, timeout=300)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("cortexctl:")]
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert errors == [], errors
    assert (tmp_path / "store").exists()


def run_readme_example(tmp_path, heading: str) -> subprocess.CompletedProcess:
    """The first ```sh block after the README heading ``heading`` (a regex: "## Time travel"), run
    as pasted by bash (-e, pipefail) with the installed cortexctl first on PATH and TMPDIR in
    ``tmp_path``; asserts it exits 0."""
    readme = (ROOT / "README.md").read_text()
    m = re.search(rf"^{heading}.*?\n```sh\n(.*?)^```", readme, re.S | re.M)
    assert m, f"README.md has no '{heading}' ```sh block"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "cortexctl").write_text("#!/bin/sh\nexec " + " ".join(f"'{a}'" for a in cortexctl_argv()) + ' "$@"\n')
    (bindir / "cortexctl").chmod(0o755)
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}", "TMPDIR": str(tmp_path)}
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", m.group(1)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    return proc


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_readme_time_travel_example_runs_as_pasted(tmp_path):
    proc = run_readme_example(tmp_path, "## Time travel")
    lines = proc.stdout.splitlines()
    monthly = [line for line in lines if line.endswith("rotates monthly")]
    # find --as-of before the supersede: the monthly fact, as it was (nothing marks it then)
    assert any("as of " in line for line in proc.stderr.splitlines()), proc.stderr
    assert monthly, proc.stdout
    assert any("superseded by" in line and "rotates monthly" in line for line in lines), proc.stdout
    assert any("\tsuperseded\t" in line for line in lines) and any("\twritten\t" in line for line in lines)
