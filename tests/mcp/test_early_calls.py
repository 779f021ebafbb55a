"""`cortexctl mcp` answers tool calls before the MCP SDK has loaded (serve/early.py, serve/calls.py):
only calls it can answer exactly as the SDK would, with the SDK's own answer, each once."""

from __future__ import annotations

import json
import re
import subprocess
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import cortexctl_argv
from tests.mcp.client import isolated_env
from tests.mcp.client import rpc as _rpc

GATE_DIR = Path(__file__).with_name("sdk_gate")


def _init(version: str) -> dict:
    return {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}


class Session:
    """One raw stdio session of a `cortexctl mcp` subprocess; ``gate``: the SDK's import waits for
    that file (tests/mcp/sdk_gate), so what is answered before ``open_gate`` was answered early."""

    def __init__(self, store: Path, env: dict, gate: Path | None = None) -> None:
        env = dict(env)
        if gate is not None:
            env.update(PYTHONPATH=str(GATE_DIR), CORTEXCTL_TEST_SDK_GATE=str(gate))
        self.gate = gate
        self.proc = subprocess.Popen([*cortexctl_argv(), "mcp", "--store", str(store), "--actor", "alice"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.killer = threading.Timer(120, self.proc.kill)
        self.killer.start()
        self.answers: dict = {}

    def send(self, *lines: bytes) -> None:
        self.proc.stdin.write(b"".join(lines))
        self.proc.stdin.flush()

    def answer(self, id_) -> dict:
        while id_ not in self.answers:
            line = self.proc.stdout.readline()
            assert line, f"stdout ended early: {self.proc.stderr.read().decode()[-2000:]}"
            doc = json.loads(line)
            assert doc["id"] not in self.answers, f"answered twice: {doc['id']}"
            self.answers[doc["id"]] = doc
        return self.answers[id_]

    def open_gate(self) -> None:
        if self.gate is not None:
            self.gate.write_text("open")

    def close(self) -> None:
        self.open_gate()
        try:
            rest, err = self.proc.communicate(b"", timeout=60)  # stdin closed: the server ends
        finally:
            self.killer.cancel()
        assert self.proc.returncode == 0, err.decode()[-2000:]
        for line in rest.splitlines():  # whatever else it said: never a second answer
            doc = json.loads(line)
            assert doc.get("id") not in self.answers, f"answered twice: {doc}"
            self.answers[doc.get("id")] = doc


def _canon(doc) -> str:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


ID = re.compile(r"01[0-9A-HJKMNP-TV-Z]{24}")
WHEN = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z?")


NUMBER = re.compile(r"\d+\.\d+")


def _steady(doc) -> str:
    """The canonical answer with its fractions to three places: a memory's salience decays with its
    age (recency), so a find seconds later scores it a millionth lower, early or not."""
    return NUMBER.sub(lambda m: f"{float(m.group()):.3f}", _canon(doc))


def _same_shape(doc) -> str:
    """A write's answer with its new memory's id and times taken out (they differ from write to write)."""
    return WHEN.sub("<time>", ID.sub("<id>", _canon(doc)))


@pytest.fixture
def served(tmp_path):
    store = tmp_path / "store"
    env = isolated_env(tmp_path / "home", XDG_CACHE_HOME=str(tmp_path / "cache"))
    return store, env, tmp_path / "cache" / "cortexctl" / "mcp-answers.json", tmp_path / "gate"


def _calls(mem_id: str) -> list[tuple[str, dict]]:
    """Calls with arguments the early front takes (every type of parameter), then ones it must leave
    to the SDK (each a bad argument of another kind, or a shape it does not check)."""
    return [("find", {"near": "deploy key"}),
            ("find", {"near": "deploy key", "types": ["fact"], "k": 3, "form": "medium", "summaries": False}),
            ("show", {"ref": mem_id}),
            ("show", {"ref": mem_id, "version": 1, "form": "short", "as_of": None}),
            ("show", {"ref": "01ZZZZZZZZZZZZZZZZZZZZZZZZ"}),  # an engine error: isError, its document
            ("changes", {"since": "2020-01-01", "until": "2099-01-01", "kinds": ["written"], "limit": 5}),
            ("find", {"near": 5}),  # wrong type
            ("find", {"k": "3"}),  # text for a number: the SDK's lax parsing
            ("find", {"near": "x", "colour": "red"}),  # unknown argument
            ("show", {}),  # missing required
            ("show", {"ref": "null"}),  # text the SDK pre-parses as JSON
            ("find", {"form": "huge"}),  # not one of the choices
            ("no_such_tool", {}),  # unknown tool
            ("find", {"k": True})]  # a bool for a number


EARLY = 6  # the first six of _calls are answered early


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
def test_calls_answered_before_the_sdk_loads_are_the_sdks_own_answers(served, version):
    store, env, cache, gate = served
    first = Session(store, env)  # no cache: the SDK answers everything, and its answers are cached
    first.send(_rpc(1, "initialize", _init(version)), _rpc(None, "notifications/initialized"))
    first.send(_rpc(3, "tools/call", {"name": "write", "arguments": {"type": "fact", "text": "The deploy key rotates"}}))
    wrote = first.answer(3)["result"]
    first.close()
    mem_id = wrote["structuredContent"]["id"]
    calls = [_rpc(10 + i, "tools/call", {"name": n, "arguments": a}) for i, (n, a) in enumerate(_calls(mem_id))]

    cache.unlink()  # the reference: the SDK's answers (a start without the cache answers nothing early)
    sdk = Session(store, env)
    sdk.send(_rpc(1, "initialize", _init(version)), _rpc(None, "notifications/initialized"), *calls)
    sdk_answers = [sdk.answer(10 + i) for i in range(len(calls))]
    sdk.close()

    early = Session(store, env, gate)
    early.send(_rpc(1, "initialize", _init(version)), _rpc(None, "notifications/initialized"), *calls)
    got = [early.answer(10 + i) for i in range(EARLY)]  # answered while the SDK cannot load
    early.open_gate()
    got += [early.answer(10 + i) for i in range(EARLY, len(calls))]
    early.close()

    assert sdk.answers[1] == early.answers[1]
    for (name, args), want, have in zip(_calls(mem_id), sdk_answers, got):
        assert _steady(have) == _steady(want), (name, args)
    assert got[4]["result"]["isError"] is True and "structuredContent" in got[4]["result"]
    assert got[6]["result"]["isError"] is True and "error" not in got[12]


def test_a_write_answered_early_is_the_sdks_answer_and_is_stored_once(served):
    """The same write to two new stores, through the SDK and early: the same answer (but for the new
    memory's id and times); the early one is in its store once, with the SDK serving what follows."""
    store, env, cache, gate = served
    write = {"name": "write", "arguments": {"type": "fact", "text": "The deploy key rotates", "tags": ["ops"],
                                            "importance": 7, "confidence": 1, "data": {"source": "observed"}}}
    init = _init("2025-06-18")
    first = Session(store, env)
    first.send(_rpc(1, "initialize", init), _rpc(None, "notifications/initialized"), _rpc(2, "tools/call", write))
    by_sdk = first.answer(2)
    first.close()
    assert by_sdk["result"]["isError"] is False

    other = store.with_name("other")
    early = Session(other, env, gate)
    early.send(_rpc(1, "initialize", init), _rpc(None, "notifications/initialized"), _rpc(2, "tools/call", write))
    by_early = early.answer(2)  # the SDK cannot have loaded
    early.open_gate()
    early.send(_rpc(3, "tools/call", {"name": "find", "arguments": {"near": "deploy key", "k": 10, "types": []}}),
               _rpc(4, "ping"))
    found = early.answer(3)["result"]["structuredContent"]["results"]
    assert early.answer(4)["result"] == {}  # the SDK serves what follows
    early.close()

    assert _same_shape(by_early) == _same_shape(by_sdk)
    assert [r["id"] for r in found] == [by_early["result"]["structuredContent"]["id"]]


# -- the arguments the early front takes are the ones the SDK takes, to the same values ------------------
def _tool(name):
    from cortexctl import ops
    from cortexctl.serve.calls import Serving
    from cortexctl.serve.server import tool_for

    op = next(o for o in ops.tools() if o.name == name)
    return op, tool_for(Serving(None), op)


_json = st.recursive(st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70) | st.floats()
                     | st.text(max_size=8) | st.sampled_from(["null", "[1]", "{}", "true", "3", "short", "fact"]),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                     max_leaves=6)


_TEXTS = st.text(max_size=6) | st.text(max_size=6) | st.text(max_size=6) | st.sampled_from(["null", "[1]", '{"a": 1}', "true", "3", "2.5", '"x"', "short"])


def _near_valid(p) -> st.SearchStrategy:
    """Values of the parameter's type, and text the SDK pre-parses."""
    if p.many:
        good = st.lists(_TEXTS, max_size=3)
    elif p.choices is not None:
        good = st.sampled_from(p.choices) | _TEXTS
    else:
        good = {str: _TEXTS, int: st.integers(-2 ** 70, 2 ** 70), bool: st.booleans(),
                float: st.integers(-10, 10) | st.floats(), dict: st.dictionaries(st.text(max_size=4), _json, max_size=3),
                }[p.type]
    return good


@pytest.mark.parametrize("name", ["find", "write", "show", "changes", "compact"])
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_arguments_the_early_front_takes_are_taken_by_the_sdk_to_the_same_values(name, data):
    from pydantic import ValidationError

    from cortexctl.serve.calls import exact_values

    op, tool = _tool(name)
    args = {}
    for p in op.params:  # the required ones, most of the time, and some of the others
        if data.draw(st.sampled_from([True] * 9 + [False]) if p.required else st.booleans()):
            args[p.name] = data.draw(_near_valid(p))
    spoilt = data.draw(st.sampled_from([None] * len(op.params) + ["other", *(p.name for p in op.params)]))
    if spoilt is not None:  # one argument of any JSON value (or one the tool does not take)
        args[spoilt] = data.draw(st.none() | _json)
    values = exact_values(op, args)
    if values is None:
        return
    assert set(args) <= set(tool.parameters["properties"])  # check_arguments: no unknown argument
    try:
        by_sdk = tool.fn_metadata.validate_arguments(args)
    except ValidationError as exc:
        raise AssertionError(f"the early front took {args!r}, the SDK refuses it: {exc}") from None
    assert by_sdk == values and [type(v) for v in by_sdk.values()] == [type(v) for v in values.values()]
