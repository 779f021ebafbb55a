"""Fuzzing with hypothesis: command lines, import lines, MCP tool arguments and config files.

Whatever is thrown at cortexctl, it answers with a documented exit code (never 70, the internal
error) and never a traceback. Everything runs in this process (``cortexctl.cli.app.main``, and the
MCP server through the SDK's in-process client) so hundreds of cases run in seconds; the working
directory is the test's temporary directory, so a fuzzed path (``--dest x``, ``--out y``) lands
there. The number of cases: ``FUZZ`` in the default lane, more in the slow lane, many more with
``CORTEXCTL_SOAK=1``; each test prints how many it ran.
"""

from __future__ import annotations

import json
import os
import re
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cortexctl import Cortex
from cortexctl.cli.registry import commands
from cortexctl.errors import EXIT_CODES
from tests.conftest import assert_store_verifies, run_in_process

SOAK = os.environ.get("CORTEXCTL_SOAK") == "1"
DOCUMENTED = set(EXIT_CODES.values()) - {EXIT_CODES["internal"]}
LANES = [pytest.param("default", id="default"), pytest.param("slow", id="slow", marks=pytest.mark.slow)]
# commands a fuzzed command line must not run: `mcp` serves until its client leaves
SKIP = {"mcp"}
COMMANDS = [c for c in commands() if c.name not in SKIP and not c.hidden]
GLOBAL = {"--store", "--actor", "--wait", "--json", "--jsonl"}


def examples(lane: str, default: int, slow: int) -> int:
    """Cases for a lane: ``default`` or ``slow``; under CORTEXCTL_SOAK=1 the slow lane's times
    CORTEXCTL_SOAK_TIMES (20 unless set), drawn afresh on every run instead of from a fixed seed."""
    if SOAK:
        return slow * int(os.environ.get("CORTEXCTL_SOAK_TIMES", "20"))
    return default if lane == "default" else slow


def run_cases(n: int, strategy, body) -> None:
    """``body`` on ``n`` values drawn from ``strategy`` (hypothesis shrinks a failure to its simplest)."""
    @settings(max_examples=n, deadline=None, database=None, derandomize=not SOAK,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def each(value):
        body(value)

    each()


def assert_documented(run, what) -> None:
    assert run.code in DOCUMENTED, (what, run)
    assert "Traceback" not in run.err and "internal error" not in run.err, (what, run)


@pytest.fixture
def fuzz_store(tmp_path, monkeypatch, store_once):
    """A store with a few memories (their IDs returned), and the test's directory as the working one."""
    ids = store_once(_fill)
    monkeypatch.chdir(tmp_path)
    return ids


def _fill(path):
    cx = Cortex(store=path, actor="alice")
    a = cx.write("fact", "The deploy key rotates monthly", tags=["ops"], frames=["deliver:repo:acme/api"])
    b = cx.write("goal", "ship v2")
    c = cx.write("preference", "tabs over spaces", visibility="public")
    cx.update(a.uri, "The deploy key rotates weekly")
    cx.attest("i1", "success", [a.uri])
    return [a.id, b.id, c.id, a.uri, a.id[:8]]


# -- values ----------------------------------------------------------------------------------------
def _text(max_size=24):
    return st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=max_size)


WORDS = ["", "-", "x", "0", "-1", "1.5", "nan", "inf", "1e400", "99999999999999999999", "fact", "goal",
         "pattern", "@missing.json", "@.", ".", "..", "cortex://m/", "cortex://m/x/v/0", "a" * 300,
         "deliver:repo:x", "fly:repo:x", "::", "{}", "[]", '{"statement": 1}', "[[[[[[[[", "--json", "-k",
         "success", "failure", "private", "public", "short", "full", "2026-01-01T00:00:00Z", "30m", "7d",
         "backup-20260101T000000Z", "merge", "replace", "REPLACE", "é", "\u202e", "x" * 5000]


def _string(refs):
    return st.one_of(st.sampled_from(WORDS + refs), _text()).filter(lambda s: not s.startswith("/"))


def _number(kind, refs):
    core = st.integers(-5, 200) if kind is int else st.floats(allow_nan=True, allow_infinity=True)
    return st.one_of(core.map(str), st.integers().map(str), _string(refs))


@st.composite
def command_lines(draw, refs):
    cmd = draw(st.sampled_from(COMMANDS))
    argv = list(cmd.words)
    for opt in cmd.options:
        if opt.flags[0] in ("--store", "--wait") or not draw(st.booleans()):
            continue
        flag = draw(st.sampled_from(opt.flags))
        for _ in range(draw(st.integers(1, 3)) if opt.many else 1):
            if opt.is_flag:
                argv.append(flag)
            elif opt.choices and draw(st.booleans()):
                argv += [flag, draw(st.sampled_from(opt.choices))]
            elif opt.type in (int, float):
                argv += [flag, draw(_number(opt.type, refs))]
            else:
                argv += [flag, draw(_string(refs))]
    for arg in cmd.arguments:
        if not arg.required and draw(st.booleans()):
            continue
        argv += draw(st.lists(_string(refs), min_size=1, max_size=3 if arg.many else 1))
    if draw(st.integers(0, 9)) == 0:  # now and then: a stray word or an unknown option somewhere
        argv.insert(draw(st.integers(0, len(argv))), draw(st.sampled_from(["--bogus", "-z", "extra", "--"])))
    return cmd, argv


@pytest.mark.parametrize("lane", LANES)
def test_fuzzed_command_lines_exit_with_documented_codes_only(lane, fuzz_store, store, capsys):
    refs = fuzz_store
    seen = {"cases": 0}
    undeclared = {}

    def body(case):
        cmd, argv = case
        seen["cases"] += 1
        run = run_in_process(store, *argv, env={"CORTEXCTL_WAIT": "0"})
        assert_documented(run, argv)
        if cmd.exits and run.code not in cmd.exits and run.code != 2:
            undeclared.setdefault((cmd.name, run.code), argv)

    run_cases(examples(lane, 150, 1500), command_lines(refs), body)
    assert_store_verifies(store)
    with capsys.disabled():
        print(f"\nfuzz command lines ({lane}): {seen['cases']} cases")
    assert not undeclared, f"exit codes the command's help does not list: {undeclared}"


# -- import lines ------------------------------------------------------------------------------------
KEYS = ["type", "text", "data", "tags", "frames", "importance", "visibility", "id", "forms", "created_at",
        "confidence", "actor", "versions", "provenance", "session", "tombstoned_at", "uri", "extra"]
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), _text(12),
              st.sampled_from(["fact", "goal", "identity", "pattern", "public", "x:y:z", "find:repo:x",
                               "01JAMB0000000000000000000A", "2026-01-01T00:00:00Z"])),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(KEYS + ["statement",
                            "source", "polarity", "profile", "derived_from", "short"]), inner, max_size=5)),
    max_leaves=20,
)


@st.composite
def import_files(draw):
    lines = []
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.integers(0, 9))
        if kind == 0:
            lines.append(draw(st.binary(max_size=40)).replace(b"\n", b" "))
        elif kind == 1:
            lines.append(b"[" * draw(st.integers(1, 3000)))
        else:
            doc = draw(st.dictionaries(st.sampled_from(KEYS), json_values, max_size=6))
            if draw(st.booleans()):
                doc.setdefault("type", draw(st.sampled_from(["fact", "goal", "event", "preference", "bogus"])))
                doc.setdefault("text", draw(_text()))
            lines.append(json.dumps(doc).encode())
    return b"\n".join(lines) + b"\n"


@pytest.mark.parametrize("lane", LANES)
def test_fuzzed_import_lines_exit_with_documented_codes_only(lane, fuzz_store, store, capsys):
    seen = {"cases": 0, "imported": 0}

    def body(content):
        seen["cases"] += 1
        flags = ["--skip-invalid"] if seen["cases"] % 2 else []
        run = run_in_process(store, "import", "-", *flags, "--json", input=content)
        assert_documented(run, content[:200])
        assert run.code in (0, 10), run
        if run.code == 0:
            seen["imported"] += run.json().get("imported", 0)

    run_cases(examples(lane, 60, 600), import_files(), body)
    assert_store_verifies(store)
    with capsys.disabled():
        print(f"\nfuzz import ({lane}): {seen['cases']} files, {seen['imported']} memories imported")


# -- config files --------------------------------------------------------------------------------------
SETTINGS = {"store": None, "actor": None, "wait": None, "embedding": ["provider", "base_url", "model", "api_key_env",
            "timeout", "dimensions", "batch_size"], "chat": ["base_url", "model", "api_key_env", "timeout"],
            "backup": ["dest", "keep", "max_age_days", "key_env", "window_days"],
            "pager": ["pinned_budget_tokens", "context_budget_tokens", "retrieval_top_k", "min_pattern_successes",
                      "rules"], "verify": ["jobs"], "mcp": ["token_env"], "colour": None}
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), _text(16),
                    st.sampled_from(["http://u:p@h:1/v1", "https://h/v1", "http://[::1", "hash", "openai", "auto",
                                     "postgresql://u:p@h/db", "host=x", "./s", "~/s"]))
config_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                             st.dictionaries(_text(6), inner, max_size=3)), max_leaves=8)


@st.composite
def config_trees(draw):
    tree = {}
    for key in draw(st.lists(st.sampled_from(sorted(SETTINGS)), max_size=5, unique=True)):
        subs = SETTINGS[key]
        if subs and draw(st.booleans()):
            tree[key] = {s: draw(config_values) for s in draw(st.lists(st.sampled_from(subs), max_size=3, unique=True))}
        else:
            tree[key] = draw(config_values)
    return tree


def _toml(tree: dict) -> str:
    """A TOML rendering of ``tree`` good enough for fuzzing (None left out; keys quoted)."""
    def value(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v) if v == v and abs(v) != float("inf") else ("nan" if v != v else ("inf" if v > 0 else "-inf"))
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v if x is not None) + "]"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{json.dumps(k)} = {value(x)}" for k, x in v.items() if x is not None) + "}"
        return '""'

    return "".join(f"{json.dumps(k)} = {value(v)}\n" for k, v in tree.items() if v is not None)


@st.composite
def config_files(draw):
    kind = draw(st.integers(0, 5))
    if kind == 0:
        return "c.toml", draw(st.binary(max_size=80))
    if kind == 1:
        return "c.json", draw(st.binary(max_size=80))
    tree = draw(config_trees())
    if kind in (2, 3):
        return "c.json", json.dumps(tree).encode()
    return "c.toml", _toml(tree).encode("utf-8", "surrogatepass")


@pytest.mark.parametrize("lane", LANES)
def test_fuzzed_config_files_exit_with_documented_codes_only(lane, fuzz_store, store, tmp_path, capsys):
    seen = {"cases": 0, "accepted": 0}

    def body(file):
        name, content = file
        seen["cases"] += 1
        path = tmp_path / name
        path.write_bytes(content)
        for args in (("config", "show", "--json"), ("find", "--near", "deploy key")):
            run = run_in_process(store, "-c", path, *args, env={"CORTEXCTL_WAIT": "0"})
            assert_documented(run, content[:200])
            assert run.code in (0, 2, 3, 4, 9) if args[0] == "find" else run.code in (0, 2), run
            assert not re.search(r"u:p@|p@h", run.out + run.err), run  # credentials in URLs never show
        seen["accepted"] += run.code == 0

    run_cases(examples(lane, 60, 600), config_files(), body)
    with capsys.disabled():
        print(f"\nfuzz config ({lane}): {seen['cases']} files, {seen['accepted']} accepted")


# -- MCP tool arguments --------------------------------------------------------------------------------
@st.composite
def _tool_args(draw, op, refs):
    """Argument objects for one operation's tool: its parameters, mostly with values of their
    type, now and then of any JSON type, and now and then one it does not take."""
    typed = {str: _string(refs), int: st.integers(-10, 10_000) | st.integers(),
             float: st.floats(), bool: st.booleans(), dict: st.dictionaries(_text(8), json_values, max_size=4)}
    args = {}
    for p in op.params:
        if not p.required and draw(st.booleans()):
            continue
        if draw(st.integers(0, 7)) == 0:
            args[p.name] = draw(json_values)
        elif p.many:
            args[p.name] = draw(st.lists(_string(refs), max_size=3))
        elif p.choices and draw(st.booleans()):
            args[p.name] = draw(st.sampled_from(p.choices))
        else:
            args[p.name] = draw(typed[p.type])
    if draw(st.integers(0, 15)) == 0:
        args["bogus"] = draw(json_values)
    return args


def mcp_batches(refs):
    from cortexctl import ops

    tools = list(ops.tools())
    return st.lists(st.sampled_from(tools).flatmap(lambda op: st.tuples(st.just(op.name), _tool_args(op, refs))),
                    min_size=4, max_size=12)


@pytest.mark.parametrize("lane", LANES)
def test_fuzzed_mcp_tool_arguments_answer_documented_errors_only(lane, fuzz_store, store, capsys):
    pytest.importorskip("mcp", reason="the MCP SDK is not installed: pip install -e '.[test]'")
    import anyio
    from mcp import Client

    from cortexctl.serve.server import build

    cx = Cortex(store=store, actor="alice")
    app = build(cx)
    seen = {"calls": 0, "errors": 0}

    async def calls(batch):
        async with Client(app) as client:
            for name, args in batch:
                seen["calls"] += 1
                result = await client.call_tool(name, args)
                text = " ".join(getattr(c, "text", "") for c in result.content)
                assert "Traceback" not in text, (name, args, text)
                if result.is_error:
                    seen["errors"] += 1
                    doc = result.structured_content or {}
                    assert doc.get("exit_code") in DOCUMENTED, (name, args, text)

    run_cases(examples(lane, 25, 250), mcp_batches(fuzz_store), lambda batch: anyio.run(calls, batch))
    assert_store_verifies(store)
    with capsys.disabled():
        print(f"\nfuzz MCP ({lane}): {seen['calls']} tool calls, {seen['errors']} refused")


def test_an_mcp_server_keeps_serving_after_tool_arguments_nested_past_any_limit(tmp_path):
    """Over stdio, as a client would send them: arguments nested 100 deep are refused by cortexctl
    (exit code 10 in the result); 10,000 deep are past the SDK's own parser, which drops the
    message; either way the server answers the next call."""
    import subprocess

    from tests.conftest import cortexctl_argv

    env = {**os.environ, "HOME": str(tmp_path / "home")}
    proc = subprocess.Popen(cortexctl_argv() + ["mcp", "--store", str(tmp_path / "store"), "--actor", "alice"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)

    def send(text: str) -> None:
        proc.stdin.write(text.encode() + b"\n")
        proc.stdin.flush()

    def answer(id_: int) -> dict:
        while True:  # synchronised on the answer itself; the subprocess timeout below bounds a hang
            line = proc.stdout.readline()
            assert line, proc.stderr.read().decode()[-2000:]
            doc = json.loads(line)
            if doc.get("id") == id_:
                return doc

    def call(id_: int, arguments: str) -> str:
        return ('{"jsonrpc": "2.0", "id": %d, "method": "tools/call", "params": {"name": "write", "arguments": %s}}'
                % (id_, arguments))

    try:
        send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}}}))
        answer(1)
        send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        send(call(2, '{"type": "fact", "text": "x", "data": {"source": %s}}' % ("[" * 10_000 + "]" * 10_000)))
        send(call(3, '{"type": "fact", "text": "x", "data": {"source": %s}}' % ("[" * 100 + "]" * 100)))
        refused = answer(3)["result"]
        assert refused["isError"] and refused["structuredContent"]["exit_code"] == 10, refused
        assert "nested more than 64 levels deep" in refused["structuredContent"]["message"]
        send(call(4, '{"type": "fact", "text": "still serving"}'))
        assert not answer(4)["result"].get("isError"), "the server stopped serving"
    finally:
        proc.stdin.close()
        proc.wait(timeout=120)
    assert proc.returncode == 0
    assert "Traceback" not in proc.stderr.read().decode()
    assert_store_verifies(tmp_path / "store")
