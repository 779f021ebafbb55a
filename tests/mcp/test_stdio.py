"""cortexctl mcp over stdio, with the SDK's own client on a real subprocess of the installed script.

One server (and one chat endpoint for session_summarize) serves the module's tests: they read
what earlier ones wrote only where they say so, and each makes its own memories.
"""

from __future__ import annotations

import json

import orjson
import pytest
from mcp.shared.exceptions import MCPError

from cortexctl import ops

from tests.conftest import run_process
from tests.mcp.client import McpServer, isolated_env

# The tools are the operations that declare one (cortexctl/ops): no list of our own to fall behind.
OPERATIONS = {op.name: op for op in ops.tools()}
TOOLS = set(OPERATIONS)
READ_ONLY = {name for name, op in OPERATIONS.items() if op.read_only}
DESTRUCTIVE = {name for name, op in OPERATIONS.items() if op.destructive}
SUMMARY = {"title": "Fixed the flaky poll test", "category": "bugfix", "productivity": 80, "complexity": 30,
           "quality": 70, "summary": "The user asked to fix a flaky test; a retry around the poll fixed it.",
           "technologies": ["python", "pytest"]}


@pytest.fixture(scope="module")
def chat():
    from tests.chat_server import ChatServer

    server = ChatServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def served(tmp_path_factory, chat):
    root = tmp_path_factory.mktemp("mcp")
    env = isolated_env(root / "home", **chat.env())
    with McpServer(root / "store", env=env) as server:
        server.env = env
        # the store exists whichever of the module's tests a worker runs first (only writes make one)
        ok(server.call("write", {"type": "fact", "text": "The mcp tests made this store"}))
        yield server


def cli(server: McpServer, *args):
    """The installed CLI on the server's store, as the server's actor, in a fresh process."""
    return run_process(server.store, *args, "--store", server.store, "--actor", "alice", env=server.env,
                       use_store=False)


def ok(result) -> dict:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


def failed(result) -> str:
    assert result.is_error, result
    (block,) = result.content
    assert "\n" not in block.text and block.text
    return block.text


def test_initialize_names_the_server_and_offers_tools_and_resources(served):
    init = served.init
    assert init.server_info.name == "cortexctl"
    assert init.capabilities.tools is not None and init.capabilities.resources is not None
    assert "find" in (init.instructions or "")
    assert "`changes` with `since` set to the end of your last one" in init.instructions


def test_every_tool_is_listed_with_a_schema_a_description_and_annotations(served):
    tools = {t.name: t for t in served.run(lambda s: s.list_tools()).tools}
    assert set(tools) == TOOLS
    for name, tool in tools.items():
        assert tool.description and len(tool.description) > 40, name
        assert tool.input_schema["type"] == "object", name
        assert tool.output_schema and tool.output_schema["type"] == "object", name
        a = tool.annotations
        assert a.read_only_hint is (name in READ_ONLY), name
        assert a.destructive_hint is (name in DESTRUCTIVE), name
        op = OPERATIONS[name]
        assert a.title == op.tool.title and tool.description == op.tool.description, name
        assert a.idempotent_hint is (op.read_only or op.idempotent) and a.open_world_hint is op.open_world, name
        assert list(tool.input_schema["properties"]) == [p.name for p in op.params], name
        assert tool.input_schema.get("required", []) == [p.name for p in op.params if p.required], name
        for p in op.params:
            assert tool.input_schema["properties"][p.name].get("description") == (p.help or None), (name, p.name)
    # the names and hints agents already rely on
    assert {"find", "show", "write", "update", "forget", "remember", "outcome", "attest", "compact",
            "checkpoint_load", "context", "pinned", "patterns", "session_add", "session_summarize",
            "healthcheck"} <= TOOLS
    assert {"find", "show", "context", "pinned", "healthcheck"} <= READ_ONLY and {"forget", "compact"} <= DESTRUCTIVE
    props = tools["find"].input_schema["properties"]
    assert {"near", "types", "tags", "frames", "k", "budget_tokens", "form"} <= set(props)
    assert props["form"]["enum"] == ["short", "medium", "full"]
    assert tools["write"].input_schema["required"] == ["type"]
    assert "fact" in tools["write"].input_schema["properties"]["type"]["enum"]
    assert set(tools["attest"].input_schema["required"]) == {"intent", "outcome", "cited"}


def test_each_tool_answers_good_arguments(served, chat):
    w = ok(served.call("write", {"type": "fact", "text": "The deploy key rotates monthly", "tags": ["ops"]}))
    uri = w["uri"]
    assert uri.startswith("cortex://m/") and w["version"] == 1
    assert ok(served.call("show", {"ref": uri}))["data"]["statement"] == "The deploy key rotates monthly"
    u = ok(served.call("update", {"ref": uri, "text": "The deploy key rotates weekly"}))
    assert u["version"] == 2
    found = ok(served.call("find", {"near": "deploy key rotation", "k": 5}))
    assert found["count"] >= 1 and found["results"][0]["uri"] == uri
    assert ok(served.call("remember", {"text": "Prefers answers in French", "user": True}))["uri"]
    assert ok(served.call("outcome", {"text": "Rotated the deploy key", "status": "success", "intent": "rot-1"}))
    att = ok(served.call("attest", {"intent": "rot-1", "outcome": "success", "cited": [uri]}))
    assert att["affected"]
    comp = ok(served.call("compact", {"intent": "rot-1", "step": "s1", "budget_tokens": 800, "in_context": [uri]}))
    assert comp["checkpoint"]["uri"] if isinstance(comp.get("checkpoint"), dict) else comp
    loaded = ok(served.call("checkpoint_load", {"intent": "rot-1", "step": "s1"}))
    assert loaded["intent"] == "rot-1" and loaded["step"] == "s1"
    ctx = ok(served.call("context", {"goal": "rotate the deploy key"}))
    assert "Prefers answers in French" in ctx["text"]
    assert ok(served.call("pinned", {"goal": "rotate the deploy key"}))["goal"] == "rotate the deploy key"
    assert ok(served.call("patterns", {"goal": "deploy"}))["count"] == 0
    turn = ok(served.call("session_add", {"session": "s-42", "prompt": "fix the flaky test",
                                          "thought": "timing", "response": "added a retry"}))
    assert turn["uri"]
    chat.replies.append(json.dumps(SUMMARY))
    summ = ok(served.call("session_summarize", {"session": "s-42"}))
    assert summ["count"] == 1 and summ["summaries"][0]["title"] == SUMMARY["title"]
    assert ok(served.call("forget", {"ref": uri, "reason": "superseded"}))["tombstone"]
    assert ok(served.call("healthcheck"))["status"] in ("healthy", "degraded")


def test_supersede_and_find_s_valid_time_parameters_over_mcp(served):
    props = {t.name: t for t in served.run(lambda s: s.list_tools()).tools}["find"].input_schema["properties"]
    assert {"include_superseded", "valid_at"} <= set(props)
    old = ok(served.call("write", {"type": "fact", "text": "The build host is ci-1", "tags": ["vt"]}))
    new = ok(served.call("write", {"type": "fact", "text": "The build host is ci-2", "tags": ["vt"],
                                   "data": {"valid_from": "2026-01-01"}}))
    linked = ok(served.call("supersede", {"old": old["id"], "by": new["id"]}))
    assert linked["superseded_by"] == new["id"] and linked["valid_to"] == "2026-01-01T00:00:00Z"
    assert ok(served.call("supersede", {"old": old["id"], "by": new["id"]}))["changed"] is False
    assert [r["id"] for r in ok(served.call("find", {"tags": ["vt"]}))["results"]] == [new["id"]]
    both = ok(served.call("find", {"tags": ["vt"], "include_superseded": True}))["results"]
    assert {r["id"]: r["superseded_by"] for r in both} == {old["id"]: new["id"], new["id"]: None}
    then = ok(served.call("find", {"tags": ["vt"], "valid_at": "2025-06-01"}))["results"]
    assert [r["id"] for r in then] == [old["id"]]
    assert "itself" in failed(served.call("supersede", {"old": new["id"], "by": new["id"]}))


def test_results_are_the_documents_json_prints(served):
    w = ok(served.call("write", {"type": "preference", "text": "tabs over spaces", "data": {"polarity": "avoid"}}))
    shown = ok(served.call("show", {"ref": w["id"], "form": "medium"}))
    run = cli(served, "show", w["id"], "--form", "medium", "--json")
    assert run.code == 0, run
    assert shown == orjson.loads(run.out)
    found = ok(served.call("find", {"tags": [], "types": ["preference"], "k": 3}))
    run = cli(served, "find", "--type", "preference", "-k", "3", "--json")
    doc = orjson.loads(run.out)
    assert set(found) == set(doc) and [r["uri"] for r in found["results"]] == [r["uri"] for r in doc["results"]]
    assert set(found["results"][0]) == set(doc["results"][0])
    pats = ok(served.call("patterns", {"goal": "deploy"}))
    assert pats == orjson.loads(cli(served, "patterns", "--goal", "deploy", "--json").out)


def test_find_says_whether_each_result_and_the_answer_matched(served):
    w = ok(served.call("write", {"type": "fact", "text": "The zorblax key rotates monthly"}))
    p = ok(served.call("write", {"type": "preference", "text": "tabs over spaces", "importance": 10}))
    found = ok(served.call("find", {"near": "zorblax key", "k": 50}))
    assert found["matched"] is True
    matched = {r["uri"]: r["matched"] for r in found["results"]}
    assert matched[w["uri"]] is True and matched[p["uri"]] is False  # the preference: salience alone
    nothing = ok(served.call("find", {"near": "zebra quantum pancake", "k": 5}))
    assert nothing["matched"] is False and nothing["count"] >= 2
    assert not any(r["matched"] for r in nothing["results"])
    run = cli(served, "find", "--near", "zebra quantum pancake", "-k", "5", "--json")
    assert run.code == 1, run  # the CLI exits 1 on the same answer
    doc = orjson.loads(run.out)
    assert doc["matched"] is False and [(r["uri"], r["matched"]) for r in doc["results"]] == [
        (r["uri"], r["matched"]) for r in nothing["results"]]
    empty = ok(served.call("find", {"tags": ["nothing-has-this"]}))
    assert (empty["matched"], empty["count"]) == (False, 0)


def test_a_memory_and_its_versions_are_resources(served):
    w = ok(served.call("write", {"type": "fact", "text": "The staging database is at db-staging.internal:5432"}))
    ok(served.call("update", {"ref": w["uri"], "text": "The staging database is at db-staging-2.internal:5432"}))
    latest = json.loads(served.read(w["uri"]).contents[0].text)
    assert latest["version"] == 2 and "db-staging-2.internal:5432" in latest["data"]["statement"]
    first = served.read(w["uri"] + "/v/1").contents[0]
    assert first.mime_type == "application/json"
    assert json.loads(first.text)["data"]["statement"] == "The staging database is at db-staging.internal:5432"
    pinned = served.read("cortex://pinned").contents[0]
    assert pinned.mime_type == "text/plain" and "Rules" in pinned.text
    resources = {str(r.uri) for r in served.run(lambda s: s.list_resources()).resources}
    assert "cortex://pinned" in resources
    templates = {t.uri_template for t in served.run(lambda s: s.list_resource_templates()).resource_templates}
    assert {"cortex://m/{id}", "cortex://m/{id}/v/{version}"} <= templates
    with pytest.raises(MCPError, match="no memory"):
        served.read("cortex://m/01JD3KQ5ZC8M3V6W4Y2T7N9R0B")


def test_diff_changes_and_revert_tools_answer_what_their_commands_print(served):
    w = ok(served.call("write", {"type": "fact", "text": "The flurbo key rotates monthly"}))
    ok(served.call("update", {"ref": w["uri"], "text": "The flurbo key rotates weekly"}))
    d = ok(served.call("diff", {"ref": w["id"]}))
    assert (d["from"], d["to"], d["same"]) == (1, 2, False)
    assert {"field": "data.statement", "before": "The flurbo key rotates monthly",
            "after": "The flurbo key rotates weekly"} in d["fields"]
    assert d == orjson.loads(cli(served, "diff", w["id"], "--json").out)
    assert ok(served.call("diff", {"ref": w["id"], "from_version": 2, "to_version": 2}))["same"] is True
    r = ok(served.call("revert", {"ref": w["id"], "to": 1}))
    assert (r["version"], r["changed"]) == (3, True)
    assert ok(served.call("show", {"ref": w["id"]}))["data"]["statement"] == "The flurbo key rotates monthly"
    assert ok(served.call("revert", {"ref": w["id"], "to": 1}))["changed"] is False
    c = ok(served.call("changes", {"since": "2020-01-01", "kinds": ["written", "updated"]}))
    mine = [(x["kind"], x["version"]) for x in c["changes"] if x["id"] == w["id"]]
    assert mine == [("written", 1), ("updated", 2), ("updated", 3)]
    until = c["until"]
    again = ok(served.call("changes", {"since": "2020-01-01", "until": until, "kinds": ["written", "updated"]}))
    run = cli(served, "changes", "--since", "2020-01-01", "--until", until, "--kind", "written", "--kind", "updated",
              "--json")
    assert run.code == 0 and again == orjson.loads(run.out), run
    assert "future" in failed(served.call("changes", {"since": "2999-01-01"}))
    assert "no version 9" in failed(served.call("revert", {"ref": w["id"], "to": 9}))
    assert "from_version must be" in failed(served.call("diff", {"ref": w["id"], "from_version": 0}))
    assert "kinds must" in failed(served.call("changes", {"since": "1h", "kinds": ["deleted"]}))


@pytest.mark.parametrize("tool, arguments, says", [
    ("find", {"k": "many"}, "k: Input should be a valid integer"),
    ("find", {"near": "x", "form": "huge"}, "form: Input should be"),
    ("find", {"nere": "typo"}, "unknown argument nere"),
    ("find", {"k": 0}, "k must be"),
    ("show", {}, "ref: Field required"),
    ("show", {"ref": "nope"}, "too short"),
    ("show", {"ref": "01JD3KQ5ZC8M3V6W4Y2T7N9R0B"}, "no memory"),
    ("write", {"type": "bogus", "text": "x"}, "type: Input should be"),
    ("write", {"type": "fact"}, "statement"),
    ("write", {"type": "fact", "text": "x", "importance": 11}, "importance"),
    ("update", {"ref": "cortex://m/not-an-id", "text": "x"}, "malformed URI"),
    ("attest", {"intent": "i", "outcome": "success", "cited": []}, "at least one cited"),
    ("compact", {"intent": "i", "step": "s", "budget_tokens": 1, "in_context": ["cortex://m/x"]}, "malformed URI"),
    ("checkpoint_load", {"intent": "nothing", "step": "here"}, "no checkpoint"),
    ("pinned", {"goal": "  "}, "goal needs some text"),
    ("no_such_tool", {}, "no_such_tool"),
])
def test_bad_arguments_are_error_results_and_the_server_keeps_answering(served, tool, arguments, says):
    text = failed(served.call(tool, arguments))
    assert says.lower() in text.lower()
    assert "Traceback" not in text
    assert ok(served.call("find", {"k": 1}))["count"] <= 1


def test_errors_carry_the_json_error_object(served):
    result = served.call("show", {"ref": "01JD3KQ5ZC8M3V6W4Y2T7N9R0B"})
    assert result.is_error and result.structured_content["error"] == "not_found"
    assert result.structured_content["exit_code"] == 3


def test_parallel_calls_in_one_server_all_land(served):
    import asyncio

    async def many(session):
        return await asyncio.gather(*(session.call_tool("write", {"type": "fact", "text": f"parallel fact {i}",
                                                                  "tags": ["parallel"]}) for i in range(12)))

    results = served.run(many)
    assert all(not r.is_error for r in results), [r.content for r in results if r.is_error]
    assert len({r.structured_content["uri"] for r in results}) == 12
    assert ok(served.call("find", {"tags": ["parallel"], "k": 50}))["count"] == 12


def test_a_shell_write_goes_through_while_the_server_runs_and_the_server_sees_it(served):
    ok(served.call("find", {"k": 1}))  # the server has been working on the store
    run = cli(served, "write", "fact", "Written from a shell beside the server", "--tag", "shell", "--wait", "2")
    assert run.code == 0, run
    found = ok(served.call("find", {"near": "written from a shell", "tags": ["shell"]}))
    assert [r["uri"] for r in found["results"]] == [run.out.strip()]
    assert cli(served, "verify").code == 0


def test_a_backup_goes_through_while_the_server_runs(served, tmp_path):
    ok(served.call("write", {"type": "fact", "text": "Backed up while served"}))
    run = cli(served, "backup", "--dest", tmp_path / "bundles", "--quiet", "--wait", "2")
    assert run.code == 0, run
    assert [p.name.startswith("backup-") for p in (tmp_path / "bundles").iterdir()] == [True]
    ok(served.call("write", {"type": "fact", "text": "Written after the backup"}))


def test_find_and_show_take_as_of(served):
    w = ok(served.call("write", {"type": "fact", "text": "The quillfeather token rotates monthly"}))
    first = ok(served.call("show", {"ref": w["uri"]}))["created_at"]  # the write's record time
    ok(served.call("update", {"ref": w["uri"], "text": "The quillfeather token rotates weekly"}))
    then = ok(served.call("find", {"near": "quillfeather token", "as_of": first, "k": 50}))
    hit = next(r for r in then["results"] if r["uri"] == w["uri"])
    assert (hit["version"], hit["text"]) == (1, "The quillfeather token rotates monthly")
    assert then["as_of"]["at"] == first and then["as_of"]["seq"] >= 1
    shown = ok(served.call("show", {"ref": w["uri"], "as_of": first}))
    assert (shown["version"], shown["current_version"], shown["as_of"]) == (1, 1, then["as_of"])
    late = served.call("show", {"ref": w["uri"], "as_of": "2999-01-01"})
    assert late.is_error and "in the future" in late.content[0].text
