"""Two servers on one store lose nothing; stdout carries protocol messages only; the SDK is optional."""

from __future__ import annotations

import json
import subprocess
import threading

import orjson
import pytest

from tests.conftest import assert_clean_error, cortexctl_argv, run_process
from tests.mcp.client import McpServer, isolated_env
from tests.mcp.client import rpc as _rpc

pytestmark = pytest.mark.slow  # servers in parallel on one store


def test_two_servers_writing_in_parallel_lose_nothing_and_the_store_verifies(tmp_path):
    store, env = tmp_path / "store", isolated_env(tmp_path / "home")
    per_server, errors = 15, []
    with McpServer(store, actor="alice", env=env) as a, McpServer(store, actor="bob", env=env) as b:
        def writes(server, who):
            for i in range(per_server):
                r = server.call("write", {"type": "fact", "text": f"{who} learned fact number {i}",
                                          "tags": ["race"], "visibility": "public"})
                if r.is_error:
                    errors.append(r.content[0].text)

        threads = [threading.Thread(target=writes, args=(s, w)) for s, w in ((a, "alice"), (b, "bob"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, errors
        seen_by_a = a.call("find", {"tags": ["race"], "k": 100}).structured_content
        assert seen_by_a["count"] == 2 * per_server
    run = run_process(store, "export", "--store", store, env=env, use_store=False)
    assert run.code == 0 and len(run.out.splitlines()) == 2 * per_server, run
    verify = run_process(store, "verify", "--store", store, env=env, use_store=False)
    assert verify.code == 0, verify


def test_stdout_carries_only_protocol_messages_even_when_warnings_are_raised(tmp_path):
    """Raw JSON-RPC on the pipes, no SDK client in between: every stdout line is a protocol message,
    while the duplicate write's warning, a bad call and a line that is not JSON leave their marks on
    stderr only."""
    env = isolated_env(tmp_path / "home", PYTHONWARNINGS="always")
    fact = {"type": "fact", "text": "The build cache lives in /var/cache/build"}
    lines = [
        _rpc(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                               "clientInfo": {"name": "raw", "version": "0"}}),
        _rpc(None, "notifications/initialized"),
        _rpc(2, "tools/call", {"name": "write", "arguments": fact}),
        _rpc(3, "tools/call", {"name": "write", "arguments": fact}),  # the same fact again: a warning
        _rpc(4, "tools/call", {"name": "find", "arguments": {"k": "many"}}),
    ]
    later = [  # after the answers above: calls sent together run one at a time in no set order
        b"this is not json\n",
        _rpc(5, "tools/call", {"name": "find", "arguments": {"near": "build cache"}}),
    ]
    proc = subprocess.Popen([*cortexctl_argv(), "mcp", "--store", str(tmp_path / "store"), "--actor", "alice"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    killer = threading.Timer(120, proc.kill)
    killer.start()
    try:
        answers = {}
        for batch, wanted in ((lines, {1, 2, 3, 4}), (later, {5})):
            proc.stdin.write(b"".join(batch))
            proc.stdin.flush()
            while not wanted <= set(answers):  # a client waits for its answers before it hangs up
                line = proc.stdout.readline()
                assert line, f"stdout ended early: {proc.stderr.read().decode()[-2000:]}"
                msg = orjson.loads(line)  # every line is JSON ...
                assert msg["jsonrpc"] == "2.0"  # ... and a JSON-RPC message
                if msg.get("id") is not None:
                    answers[msg["id"]] = msg
        rest, err = proc.communicate(b"", timeout=60)  # stdin closed: the server ends
    finally:
        killer.cancel()
    assert proc.returncode == 0, err.decode()[-2000:]
    for line in rest.splitlines():
        assert orjson.loads(line)["jsonrpc"] == "2.0"
    warned = [answers[i]["result"]["structuredContent"]["warnings"] for i in (2, 3)]
    assert sorted(map(len, warned)) == [0, 1] and "already stored" in (warned[0] or warned[1])[0]
    assert answers[4]["result"]["isError"] is True
    assert answers[5]["result"]["structuredContent"]["count"] == 2
    assert "already stored" in err.decode()


def test_without_the_sdk_mcp_says_how_to_install_it(tmp_path, store):
    """A Python that cannot import the SDK (a stand-in ``mcp`` package that fails to import, first on
    the path): one line naming the extra, exit 2, nothing on stdout."""
    fake = tmp_path / "no-sdk" / "mcp"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named mcp (test stand-in)')\n")
    run = run_process(store, "mcp", env={"PYTHONPATH": str(fake.parent)})
    assert_clean_error(run, 2)
    assert "pip install 'cortexctl[mcp]'" in run.err
    assert not store.exists()


def test_a_sub_agent_server_sees_what_its_grant_covers_and_nothing_private(tmp_path):
    """`cortexctl mcp --actor SUBAGENT`: the granter's scoped memories a live grant covers reach the
    sub-agent's find, show and context tools; the granter's private ones and uncovered scoped ones
    never do, and a revoke takes effect on the server's next call."""
    store, env = tmp_path / "store", isolated_env(tmp_path / "home")

    def cli(*args):
        run = run_process(store, *args, "--store", store, env=env, use_store=False)
        assert run.code == 0, run
        return run.out

    def write(text, *extra):
        return orjson.loads(cli("write", "fact", text, "--actor", "alice", "--json", *extra))["id"]

    covered = write("orchid greenhouse watering schedule", "--visibility", "scoped", "--tag", "garden")
    uncovered = write("orchid tax filing deadline", "--visibility", "scoped", "--tag", "finance")
    private = write("orchid private diary note", "--tag", "garden")
    grant = orjson.loads(cli("grant", "helper", "--tag", "garden", "--actor", "alice", "--json"))
    with McpServer(store, actor="helper", env=env) as helper:
        found = {r["id"] for r in helper.call("find", {"near": "orchid", "k": 20}).structured_content["results"]}
        assert found == {covered}
        assert not helper.call("show", {"ref": covered}).is_error
        for hidden in (uncovered, private):
            assert helper.call("show", {"ref": hidden}).is_error
        context = json.dumps(helper.call("context", {"goal": "orchid"}).structured_content)
        assert covered in context and uncovered not in context and private not in context
        cli("revoke", grant["id"], "--actor", "alice")
        assert helper.call("find", {"near": "orchid", "k": 20}).structured_content["results"] == []


def test_a_call_on_a_busy_store_is_exit_4_saying_what_a_client_can_do(tmp_path):
    """A tool call has no --wait of its own: the busy answer says to retry, and that the server's
    wait is set when it starts, not "--wait SECONDS" as on a command line."""
    from tests.tamper import hold_writer_lock

    store, env = tmp_path / "store", isolated_env(tmp_path / "home")
    with McpServer(store, env=env, args=("--wait", "0")) as server:
        assert not server.call("write", {"type": "fact", "text": "first"}).is_error
        holder = hold_writer_lock(store)
        try:
            busy = server.call("write", {"type": "fact", "text": "second"})
        finally:
            holder.kill()
            holder.wait()
        assert busy.is_error and busy.structured_content["exit_code"] == 4, busy.content
        line = busy.content[0].text
        assert "is busy" in line and "set when it starts" in line and "--wait SECONDS" not in line, line
        assert busy.structured_content["hint"] in line  # the document says the same
        assert not server.call("write", {"type": "fact", "text": "second"}).is_error
