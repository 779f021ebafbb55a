"""cortexctl mcp --transport http: streamable HTTP on loopback behind a bearer token."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.error
import urllib.request

import anyio
import pytest

from tests.conftest import assert_clean_error, cortexctl_argv, run_process
from tests.mcp.client import isolated_env

TOKEN = "s3cret-token-for-tests"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def http_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("mcp-http")
    port = _free_port()
    env = isolated_env(root / "home", CORTEXCTL_MCP_TOKEN=TOKEN)
    proc = subprocess.Popen([*cortexctl_argv(), "mcp", "--transport", "http", "--listen", f"127.0.0.1:{port}",
                             "--store", str(root / "store"), "--actor", "alice"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(proc.communicate()[1].decode()[-2000:])
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/mcp", port, proc
    proc.terminate()
    out, _ = proc.communicate(timeout=30)
    assert out == b""  # nothing on stdout over HTTP either


def _post(url: str, headers: dict) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=json.dumps(INIT).encode(), method="POST",
                                 headers={"Content-Type": "application/json",
                                          "Accept": "application/json, text/event-stream", **headers})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong-token"}, {"Authorization": TOKEN},
                                     {"Authorization": f"Basic {TOKEN}"}, {"Authorization": f"Bearer {TOKEN}x"}])
def test_a_request_without_the_right_bearer_token_is_refused(http_server, headers):
    url, _, _ = http_server
    status, body = _post(url, headers)
    assert status == 401 and json.loads(body)["error"] == "unauthorized"


def test_the_right_token_opens_a_session_with_the_sdk_client(http_server):
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    url, _, _ = http_server

    async def session():
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http:
            async with streamable_http_client(url, http_client=http) as (r, w):
                async with ClientSession(r, w) as s:
                    await s.initialize()
                    wrote = await s.call_tool("write", {"type": "fact", "text": "Served over HTTP"})
                    found = await s.call_tool("find", {"near": "served over http"})
                    return wrote, found

    wrote, found = anyio.run(session)
    assert not wrote.is_error and not found.is_error
    assert found.structured_content["results"][0]["uri"] == wrote.structured_content["uri"]


def test_it_listens_on_loopback_only(http_server):
    _, port, _ = http_server
    listening = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            local, state = row.split()[1], row.split()[3]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                listening.append(local.rsplit(":", 1)[0])
    assert listening == ["0100007F"]  # 127.0.0.1, and nothing else


@pytest.mark.parametrize("listen", ["0.0.0.0:8765", "192.0.2.10:8765", "[::]:8765", "example.com:80"])
def test_an_address_that_is_not_loopback_needs_allow_remote(listen, store):
    run = run_process(store, "mcp", "--transport", "http", "--listen", listen, env={"CORTEXCTL_MCP_TOKEN": TOKEN})
    assert_clean_error(run, 2)
    assert "--allow-remote" in run.err


@pytest.mark.parametrize("argv, says", [
    (["mcp", "--transport", "http"], "CORTEXCTL_MCP_TOKEN"),
    (["mcp", "--transport", "http", "--listen", "127.0.0.1"], "HOST:PORT"),
    (["mcp", "--transport", "http", "--listen", "127.0.0.1:70000"], "HOST:PORT"),
    (["mcp", "--listen", "127.0.0.1:8765"], "--transport http"),
    (["mcp", "--transport", "carrier-pigeon"], "--transport"),
])
def test_bad_http_settings_are_one_line_and_exit_2(argv, says, store):
    env = {"CORTEXCTL_MCP_TOKEN": TOKEN} if "HOST:PORT" in says else {}
    run = run_process(store, *argv, env=env)
    assert_clean_error(run, 2)
    assert says in run.err


def test_the_token_variable_is_the_one_config_names(tmp_path, store):
    config = tmp_path / "config.toml"
    config.write_text('[mcp]\ntoken_env = "MY_AGENT_TOKEN"\n')
    run = run_process(store, "-c", config, "mcp", "--transport", "http", env={"CORTEXCTL_MCP_TOKEN": TOKEN})
    assert_clean_error(run, 2)
    assert "$MY_AGENT_TOKEN" in run.err
