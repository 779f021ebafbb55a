"""The CLI's core cases on both backends: the same commands, the same answers, whether the store
is a DuckDB directory or a PostgreSQL schema (a real server: tests/pg.py).

Each case runs through the CLI in this process (``run_in_process``, the store given as
``CORTEXCTL_STORE``: a path or a ``postgresql://`` URI); the MCP case runs the installed script.
"""

from __future__ import annotations

import pytest

from tests.conftest import run_in_process

@pytest.fixture
def location(backend_store) -> str:
    """A store on each backend (``backend_store`` in tests/conftest.py)."""
    return backend_store


@pytest.fixture
def run(backend_cli):
    return backend_cli


def _ok(r):
    assert r.code == 0, r
    return r


def test_write_find_show_and_history_answer_the_same_on_both_backends(run):
    key = _ok(run("write", "fact", "The deploy key rotates monthly", "--tag", "ops", "--importance", "8")).out.strip()
    _ok(run("write", "fact", "The staging database is db-stg-2", "--tag", "db"))
    _ok(run("update", key, "The deploy key rotates weekly"))
    found = _ok(run("find", "--near", "deploy key rotation", "--json")).json()
    assert found["results"][0]["id"].endswith(key.rsplit("/", 1)[-1]) or key in found["results"][0]["uri"], found
    assert "weekly" in found["results"][0]["text"]
    tagged = _ok(run("find", "--tag", "db", "--json")).json()
    assert [r["text"] for r in tagged["results"]] == ["The staging database is db-stg-2"]
    history = _ok(run("history", key, "--json")).json()
    assert [v["version"] for v in history["versions"]] == [1, 2], history
    assert "monthly" in _ok(run("show", f"{key}/v/1")).out


def test_attest_bumps_citations_and_learns_weights_and_the_rate_limit_holds(run):
    key = _ok(run("write", "fact", "Always run the smoke tests before a release")).out.strip()
    _ok(run("attest", "--intent", "rel-1", "--outcome", "success", key))
    shown = _ok(run("show", key, "--json")).json()["salience"]
    assert shown["citations"] == 1 and shown["access_count"] >= 1, shown
    statuses = [run("attest", "--intent", "rel-2", "--outcome", "success", key).code for _ in range(12)]
    assert 5 in statuses, statuses  # the bucket empties: rate limited, exit 5


def test_compact_then_checkpoint_load_gives_back_what_was_kept(run):
    for text in ("Release step one: tag", "Release step two: build", "Release step three: publish"):
        _ok(run("write", "fact", text))
    rows = _ok(run("find", "--near", "release step", "--jsonl")).out
    _ok(run("compact", "--intent", "rel-1", "--step", "3", "--budget-tokens", "800", "--in-context-file", "-",
            input=rows))
    loaded = _ok(run("checkpoint", "load", "--intent", "rel-1", "--step", "3", "--json")).json()
    assert "Release step" in str(loaded), loaded
    listed = _ok(run("checkpoint", "list", "--intent", "rel-1", "--json")).json()
    assert len(listed["checkpoints"]) == 1, listed


def _nothing(r):
    assert r.code == 1 and r.json()["matched"] is False, r  # find, like grep: nothing matched
    return r


def test_a_grant_shows_a_scoped_memory_to_its_sub_agent_until_revoked(run):
    _ok(run("write", "fact", "Staging DB is db-stg-2", "--visibility", "scoped", "--tag", "ops", "--actor", "planner"))
    _ok(run("write", "fact", "The planner's private note on db-stg-2", "--actor", "planner"))
    assert _nothing(run("find", "--near", "staging db", "--actor", "researcher", "--json")).json()["results"] == []
    grant = _ok(run("grant", "researcher", "--tag", "ops", "--actor", "planner")).out.strip()
    seen = _ok(run("find", "--near", "staging db", "--actor", "researcher", "--json")).json()["results"]
    assert [r["text"] for r in seen] == ["Staging DB is db-stg-2"], seen
    _ok(run("revoke", grant, "--actor", "planner"))
    assert _nothing(run("find", "--near", "staging db", "--actor", "researcher", "--json")).json()["results"] == []
    # grants are a set, and the sub-agent may end one given to it, by its scope
    again = _ok(run("grant", "researcher", "--tag", "ops", "--actor", "planner", "--json")).json()
    twin = _ok(run("grant", "researcher", "--tag", "ops", "--actor", "planner", "--json"))
    assert (twin.json()["id"], twin.json()["created"], again["created"]) == (again["id"], False, True), twin
    assert "no second grant" in twin.err
    gone = _ok(run("revoke", "researcher", "--tag", "ops", "--actor", "researcher", "--json")).json()
    assert (gone["id"], gone["revoked_by"]) == (again["id"], "researcher")
    assert _nothing(run("find", "--near", "staging db", "--actor", "researcher", "--json")).json()["results"] == []
    _ok(run("verify"))


def test_backup_verify_drill_and_restore_round_trip(run, tmp_path):
    for i in range(5):
        _ok(run("write", "fact", f"Memory number {i} about the deploy pipeline"))
    exported = _ok(run("export")).out
    bundle = _ok(run("backup", "--dest", str(tmp_path / "backups"), "--json")).json()["path"]
    _ok(run("bundle", "verify", bundle))
    _ok(run("bundle", "drill", bundle))
    _ok(run("verify"))
    _ok(run("restore", bundle, "--mode", "merge"))
    assert _ok(run("export")).out == exported  # merging the store's own bundle changes nothing
    _ok(run("write", "fact", "Written after the backup"))
    _ok(run("restore", bundle, "--mode", "replace", "--force"))
    assert _ok(run("export")).out == exported
    _ok(run("verify"))


@pytest.mark.slow
def test_eight_processes_writing_attesting_and_granting_at_once_lose_nothing(tmp_path):
    """Eight writer processes on one PostgreSQL store, attests and grant changes interleaved: every
    acknowledged write is there, the journal has no gap (verify), and the rate buckets held."""
    import subprocess
    import sys

    from tests.pg import store_uri

    uri = store_uri("eight")
    script = tmp_path / "writer.sh"
    script.write_text(
        "set -u\n"
        "for i in 1 2 3 4 5 6; do\n"
        '  k=$(cortexctl write fact "writer $W memory $i about topic $i" --tag "w$W" --visibility scoped) || exit 1\n'
        '  echo "$k"\n'
        '  cortexctl attest --intent "w$W-$i" --outcome success "$k" >/dev/null || exit 2\n'
        "done\n"
        'g=$(cortexctl grant "sub$W" --tag "w$W") || exit 3\n'
        'cortexctl revoke "$g" >/dev/null || exit 4\n'
        'cortexctl grant "sub$W" --tag "w$W" >/dev/null || exit 5\n')
    import os

    bindir = os.path.dirname(sys.executable)
    procs = []
    for w in range(8):
        env = dict(os.environ, CORTEXCTL_STORE=uri, CORTEXCTL_ACTOR=f"agent{w}", W=str(w), CORTEXCTL_WAIT="120",
                   PATH=bindir + os.pathsep + os.environ.get("PATH", ""))
        procs.append(subprocess.Popen(["bash", str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    acknowledged: dict[int, list[str]] = {}
    for w, p in enumerate(procs):
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        acknowledged[w] = out.split()
    assert sum(len(keys) for keys in acknowledged.values()) == 48
    run = lambda *a, actor="agent0": run_in_process(uri, *a, env={"CORTEXCTL_ACTOR": actor})  # noqa: E731
    for w, keys in acknowledged.items():
        mine = _ok(run("find", "--tag", f"w{w}", "--json", "-k", "50", actor=f"agent{w}")).json()["results"]
        assert sorted(r["uri"] for r in mine) == sorted(keys), (mine, keys)
        seen = _ok(run("find", "--tag", f"w{w}", "--json", "-k", "50", actor=f"sub{w}")).json()["results"]
        assert sorted(r["uri"] for r in seen) == sorted(keys)  # the second grant is live
    report = _ok(run("verify", "--json")).json()
    assert report["ok"], report
    # every write, attest (two entries) and grant change is one journal entry; verify found no gap
    assert report["journal_entries"] == 48 + 48 * 2 + 8 * 3, report


def test_the_mcp_server_serves_a_postgresql_store_as_it_serves_a_duckdb_one(location, tmp_path):
    pytest.importorskip("mcp", reason="the MCP SDK is not installed: pip install -e '.[test]'")
    from tests.mcp.client import McpServer, isolated_env

    env = isolated_env(tmp_path / "mcp-home")
    with McpServer(location, env=env) as server:
        wrote = server.call("write", {"type": "fact", "text": "The deploy key rotates monthly"})
        assert not wrote.is_error, wrote.content
        found = server.call("find", {"near": "deploy key"})
        assert not found.is_error, found.content
        assert [r["text"] for r in found.structured_content["results"]] == ["The deploy key rotates monthly"]


def test_the_mcp_server_serves_vectors_from_a_database_where_its_first_write_enabled_pgvector(tmp_path):
    """A resident server's pooled connections opened before the store's first write enabled pgvector
    get its types too (they were left unable to send a vector)."""
    pytest.importorskip("mcp", reason="the MCP SDK is not installed: pip install -e '.[test]'")
    from tests.mcp.client import McpServer, isolated_env
    from tests.pg import new_database_uri

    with McpServer(new_database_uri("mcpnew"), env=isolated_env(tmp_path / "mcp-home")) as server:
        for text in ("The deploy key rotates monthly", "Lunch is at noon"):
            wrote = server.call("write", {"type": "fact", "text": text})
            assert not wrote.is_error, wrote.content
            found = server.call("find", {"near": text})
            assert not found.is_error, found.content
            assert found.structured_content["results"][0]["text"] == text


def test_a_connection_that_looked_for_pgvector_before_the_first_write_enabled_it_keeps_the_schema_that_write_found():
    """The race behind the test above, made to happen: a pooled connection looks for pgvector (not
    enabled yet) and, before it records what it found, the store's first write (on another thread)
    enables pgvector and records its schema. The connection's "not found" must not be written back
    over it, or no connection of the process is given pgvector's types again."""
    import psycopg

    from cortexctl.store.pg import PgStorage
    from tests.pg import new_database_uri

    storage = PgStorage(new_database_uri("race"), resident=True)

    class FirstWriteMeanwhile(psycopg.Connection):
        def execute(self, query, params=None, **kwargs):
            cur = super().execute(query, params, **kwargs)
            if "pg_extension" in str(query) and storage._vector_schema is None:
                with psycopg.connect(storage.conninfo, autocommit=True) as writer:
                    writer.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
                storage._vector_schema = "public"  # what the write's ``_use_vector`` records
            return cur

    con = FirstWriteMeanwhile.connect(storage.conninfo)
    try:
        storage._configure(con)
        assert storage._vector_schema == "public"
        assert con in storage._ready  # given pgvector's types
    finally:
        con.close()


def test_a_connection_configured_before_the_write_enabling_pgvector_commits_leaves_pgvectors_types_to_a_later_one():
    """The write that enables pgvector records its schema before its transaction commits; a pooled
    connection configured in that window finds no committed type. It must not keep "no type" for the
    process: a connection configured after the commit gets pgvector's types."""
    import psycopg

    from cortexctl.store.pg import PgStorage
    from tests.pg import new_database_uri

    storage = PgStorage(new_database_uri("race2"), resident=True)
    with psycopg.connect(storage.conninfo) as writer:  # the first write's transaction, not committed yet
        writer.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
        storage._vector_schema = "public"  # what ``_use_vector`` records before the commit
        with psycopg.connect(storage.conninfo) as early:
            storage._configure(early)
            assert early not in storage._ready  # configured again when next taken from the pool
        writer.commit()
    with psycopg.connect(storage.conninfo) as later:
        storage._configure(later)
        assert later in storage._ready and storage._types[0] is not None


@pytest.mark.slow
def test_a_restore_killed_midway_on_postgresql_leaves_the_store_as_it_was_and_the_next_one_cleans_up(tmp_path):
    """kill -9 a ``restore --mode replace`` while its staging schema exists (polled, not timed): the
    store answers as before, and the next restore drops what the dead one left and succeeds."""
    import signal
    import subprocess
    import sys
    import time

    import psycopg

    from tests.conftest import cortexctl_argv
    from tests.pg import base_uri, store_uri

    uri = store_uri("killed")
    schema = uri.rsplit("schema=", 1)[1]
    run = lambda *a: run_in_process(uri, *a)  # noqa: E731
    for i in range(300):
        _ok(run("write", "fact", f"Memory {i} of the store a restore replaces", "--tag", "t"))
    bundle = _ok(run("backup", "--dest", str(tmp_path / "b"), "--json")).json()["path"]
    _ok(run("write", "fact", "Written after the backup"))
    before = _ok(run("export")).out
    import os

    env = dict(os.environ, CORTEXCTL_STORE=uri)
    with psycopg.connect(base_uri(), autocommit=True) as admin:
        def leftovers() -> list[str]:
            return [r[0] for r in admin.execute("SELECT nspname FROM pg_namespace WHERE starts_with(nspname, %s)",
                                                [schema + "_"]).fetchall()]

        for attempt in range(20):  # until a kill lands while the staging schema exists
            proc = subprocess.Popen(cortexctl_argv() + ["restore", bundle, "--mode", "replace", "--force"], env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            while proc.poll() is None and not leftovers():
                time.sleep(0.002)
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
                break
            proc.wait()
            _ok(run("write", "fact", f"Written again {attempt}"))  # it finished first: make it differ again
            before = _ok(run("export")).out
        else:
            pytest.fail("no restore was still running once its staging schema existed")
        assert leftovers(), "the killed restore left its staging schema"
        assert _ok(run("export")).out == before  # the store is as it was
        _ok(run("verify"))
        _ok(run("restore", bundle, "--mode", "replace", "--force"))
        assert leftovers() == []
    assert "Written after the backup" not in _ok(run("export")).out
    _ok(run("verify"))
