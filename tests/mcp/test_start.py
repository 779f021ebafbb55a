"""`cortexctl mcp` answers initialize and tools/list before the SDK has loaded (serve/early.py):
with the SDK's own answers of an earlier start, only when they are still its answers."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

import pytest

from tests.conftest import cortexctl_argv
from tests.mcp.client import McpServer, isolated_env
from tests.mcp.client import rpc as _rpc

INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}


def _session(store: Path, env: dict, init: dict = INIT) -> dict:
    """One raw stdio session: initialize, initialized, tools/list, a write; every answer by id."""
    lines = [_rpc(1, "initialize", init), _rpc(None, "notifications/initialized"), _rpc(2, "tools/list"),
             _rpc(3, "tools/call", {"name": "write", "arguments": {"type": "fact", "text": "The deploy key rotates"}})]
    proc = subprocess.Popen([*cortexctl_argv(), "mcp", "--store", str(store), "--actor", "alice"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    killer = threading.Timer(120, proc.kill)
    killer.start()
    answers: dict = {}
    try:
        proc.stdin.write(b"".join(lines))
        proc.stdin.flush()
        while len(answers) < 3:  # a client waits for its answers before it hangs up
            line = proc.stdout.readline()
            assert line, f"stdout ended early: {proc.stderr.read().decode()[-2000:]}"
            doc = json.loads(line)
            assert doc["id"] not in answers, f"answered twice: {doc['id']}"
            answers[doc["id"]] = doc
        rest, err = proc.communicate(b"", timeout=60)  # stdin closed: the server ends
    finally:
        killer.cancel()
    assert proc.returncode == 0, err.decode()[-2000:]
    assert rest == b"" and sorted(answers) == [1, 2, 3], (rest, answers)
    assert answers[3]["result"]["isError"] is False
    return answers


@pytest.fixture
def served(tmp_path):
    store = tmp_path / "store"
    env = isolated_env(tmp_path / "home", XDG_CACHE_HOME=str(tmp_path / "cache"))
    return store, env, tmp_path / "cache" / "cortexctl" / "mcp-answers.json"


def _edit_cached(cache: Path, edit) -> None:
    doc = json.loads(cache.read_text())
    for entry in doc["answers"].values():
        edit(doc, entry)
    cache.write_text(json.dumps(doc))


def test_a_second_start_answers_initialize_and_tools_list_from_the_sdks_answers_of_the_first(served):
    """The first start records the SDK's answers; the next answers with them (shown by a marked copy),
    each request once, and what it answers is what the SDK answered."""
    store, env, cache = served
    first = _session(store, env)
    assert cache.is_file()
    second = _session(store, env)
    assert second[1] == first[1] and second[2] == first[2]

    def mark(doc, entry):
        entry["initialize"]["instructions"] = "from the cache"
        entry["tools/list"]["null"]["tools"][0]["description"] = "from the cache too"

    _edit_cached(cache, mark)
    marked = _session(store, env)
    assert marked[1]["result"]["instructions"] == "from the cache"
    assert marked[2]["result"]["tools"][0]["description"] == "from the cache too"
    assert marked[3]["result"]["isError"] is False  # the SDK, handed the handshake, serves the call


def test_the_sdk_client_works_with_a_server_that_answered_early(served):
    """The SDK's own client (initialize, list tools, call, read a resource) on a start that answers
    from the cache, as on the first."""
    store, env, cache = served
    for _ in range(2):
        with McpServer(store, env=env) as server:
            assert server.init.server_info.name == "cortexctl"
            names = {t.name for t in server.run(lambda s: s.list_tools()).tools}
            assert {"find", "write", "show"} <= names
            wrote = server.call("write", {"type": "fact", "text": "The deploy key rotates monthly"})
            assert wrote.is_error is False
            uri = wrote.structured_content["uri"]
            assert "rotates monthly" in server.read(uri).contents[0].text
        assert cache.is_file()


@pytest.mark.slow
def test_a_cache_of_another_fingerprint_or_another_client_is_not_used(served):
    """A cache whose key is not this start's is dropped whole; a client whose initialize params differ
    from the cached ones waits for the SDK. Either way the answers are the SDK's own."""
    store, env, cache = served
    sdk = _session(store, env)

    def stale(doc, entry):
        doc["key"] = "0" * 64
        entry["initialize"]["instructions"] = "stale"

    _edit_cached(cache, stale)
    assert _session(store, env)[1] == sdk[1]
    assert json.loads(cache.read_text())["key"] != "0" * 64  # recorded again under this start's key

    _edit_cached(cache, lambda doc, entry: entry["initialize"].update(instructions="for the raw client"))
    other = dict(INIT, clientInfo={"name": "another", "version": "1"})
    answers = _session(store, env, other)
    assert answers[1]["result"]["instructions"] == sdk[1]["result"]["instructions"]
    assert answers[2] == sdk[2]


@pytest.mark.slow
def test_an_unwritable_cache_costs_only_the_early_answers(tmp_path):
    """The cache directory cannot be made (a file where it would be): every start serves as the first."""
    store = tmp_path / "store"
    (tmp_path / "cache").write_text("not a directory")
    env = isolated_env(tmp_path / "home", XDG_CACHE_HOME=str(tmp_path / "cache"))
    assert _session(store, env)[1] == _session(store, env)[1]


@pytest.mark.parametrize("junk", [b"\x00\xff not json", b"[" * 100_000 + b"]" * 100_000, b'{"key": 1, "answers": []}'])
def test_a_damaged_cache_is_a_start_without_one(served, junk):
    """Bytes that are not the cache (not JSON, JSON nested past the parser, another shape): the server
    starts as the first time, answers as the SDK does, and writes the cache anew."""
    store, env, cache = served
    first = _session(store, env)
    cache.write_bytes(junk)
    assert _session(store, env)[1] == first[1]
    assert json.loads(cache.read_text())["answers"]


def test_no_cache_reads_and_writes_nothing(tmp_path, monkeypatch):
    """Where the cache's place cannot be known the server starts without one: recording an answer
    then writes no file anywhere (a fallback path once replaced /dev/null, running as root)."""
    import os
    import stat

    from cortexctl.serve.early import Answers

    monkeypatch.chdir(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    answers = Answers(None, "")
    answers.record(json.dumps(INIT), "initialize", {"ok": True})
    assert answers.initialize(json.dumps(INIT)) == {"ok": True}  # kept for this start only
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
    assert sorted(tmp_path.rglob("*")) == before
