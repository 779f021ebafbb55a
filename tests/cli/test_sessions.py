"""Sessions (SPEC §10): turns, list, show, summarize against a real chat server, the two-stage query."""

from __future__ import annotations

import json

import pytest

from tests.conftest import assert_clean_error, assert_store_verifies

SUMMARY = {"title": "Fixed the flaky poll test", "category": "bugfix", "productivity": 80, "complexity": 30,
           "quality": 70, "summary": "The user asked to fix a flaky test; a retry around the poll fixed it.",
           "technologies": ["python", "pytest"]}


@pytest.fixture
def chat():
    from tests.chat_server import ChatServer

    server = ChatServer().start()
    yield server
    server.stop()


def _turn(cli, session, n, *extra):
    return cli("session", "add", "--session", session, "--prompt", f"question {n} about the poll test",
               "--thought", f"thinking {n}", "--response", f"answer {n}", *extra)


def test_turns_show_in_order_and_list_counts(cli):
    for n in range(3):
        assert _turn(cli, "s1", n).code == 0
    _turn(cli, "s2", 0)
    doc = cli("session", "show", "s1", "--json").json()
    assert doc["count"] == 3 and [t["turn"] for t in doc["turns"]] == [1, 2, 3]
    assert doc["turns"][0]["data"]["summary"].startswith("User: question 0")
    assert "Thought: thinking 2" in doc["turns"][2]["data"]["summary"]
    rows = {r["session"]: r for r in cli("session", "list", "--json").json()["sessions"]}
    assert rows["s1"]["turns"] == 3 and rows["s2"]["turns"] == 1 and not rows["s1"]["summarized"]
    assert "--- turn 1" in cli("session", "show", "s1").out


def test_summarize_stores_a_validated_summary_and_refuses_new_turns(cli, chat, store):
    _turn(cli, "s1", 0)
    _turn(cli, "s1", 1)
    chat.replies.append("```json\n" + json.dumps(SUMMARY) + "\n```")
    r = cli("session", "summarize", "s1", "--json", env=chat.env())
    assert r.code == 0, r
    (s,) = r.json()["summaries"]
    assert s["category"] == "bugfix" and s["turns"] == 2 and s["technologies"] == ["python", "pytest"]
    sent = chat.requests[0]["body"]
    assert sent["model"] == "test-chat" and "question 1 about the poll test" in sent["messages"][1]["content"]
    assert cli("session", "list", "--json").json()["sessions"][0]["summarized"] is True
    refused = _turn(cli, "s1", 2)
    assert_clean_error(refused, 8)
    assert "--reopen" in refused.err or "summarized" in refused.err
    assert _turn(cli, "s1", 2, "--reopen").code == 0
    assert cli("session", "list", "--json").json()["sessions"][0]["summarized"] is False
    assert_store_verifies(store)


def test_pending_summarizes_only_unsummarized_sessions(cli, chat):
    for s in ("a", "b", "c"):
        _turn(cli, s, 0)
    chat.replies.append(json.dumps(SUMMARY))
    assert cli("session", "summarize", "b", env=chat.env()).code == 0
    chat.replies += [json.dumps({**SUMMARY, "title": "A"}), json.dumps({**SUMMARY, "title": "C"})]
    done = cli("session", "summarize", "--pending", "--json", env=chat.env()).json()["summaries"]
    assert sorted(d["session"] for d in done) == ["a", "c"]
    assert cli("session", "summarize", "--pending", "--json", env=chat.env()).json()["count"] == 0


def test_two_stage_query_zoom_out_then_in(cli, chat):
    _turn(cli, "s1", 0)
    cli("session", "add", "--session", "s2", "--prompt", "deploy the kettle service", "--response", "done")
    cli("remember", "the kettle service runs on port 8080")
    chat.replies.append(json.dumps({**SUMMARY, "title": "Deployed the kettle service", "category": "feature"}))
    cli("session", "summarize", "s2", env=chat.env())
    out = cli("find", "--summaries", "--near", "kettle", "--json").json()["results"]
    assert len(out) == 1 and out[0]["type"] == "event" and "Deployed the kettle" in out[0]["text"]
    inside = cli("find", "--session", "s2", "--near", "kettle", "--json").json()["results"]
    assert inside and all(cli("show", h["uri"], "--json").json()["session"] == "s2" for h in inside)
    assert all("summary" not in h["text"].lower() or True for h in inside)


def test_api_key_is_a_bearer_token_and_never_printed(cli, chat):
    _turn(cli, "s1", 0)
    chat.replies.append(json.dumps(SUMMARY))
    secret = "sk-test-0123456789abcdef"
    r = cli("session", "summarize", "s1", "--json", env=chat.env(CORTEXCTL_CHAT_API_KEY=secret))
    assert r.code == 0 and chat.requests[0]["auth"] == f"Bearer {secret}"
    assert secret not in r.out + r.err
    shown = cli("config", "show", "--json", env=chat.env(CORTEXCTL_CHAT_API_KEY=secret))
    assert secret not in shown.out + shown.err


@pytest.mark.parametrize(
    ("reply", "status", "code", "needle"),
    [
        ("I could not do that.", None, 10, "no JSON object"),
        ("{}", None, 10, "title"),
        (json.dumps({**SUMMARY, "category": "poetry"}), None, 10, "category"),
        (json.dumps({**SUMMARY, "quality": 101}), None, 10, "quality"),
        (None, 500, 9, "HTTP 500"),
    ],
)
def test_bad_replies_write_nothing(cli, chat, reply, status, code, needle):
    _turn(cli, "s1", 0)
    if status:
        chat.statuses += [status] * 10
    else:
        chat.replies.append(reply)
    r = cli("session", "summarize", "s1", env=chat.env())
    assert_clean_error(r, code)
    assert needle in r.err
    assert cli("session", "list", "--json").json()["sessions"][0]["summarized"] is False


def test_429_then_success_and_a_slow_reply_times_out(cli, chat, tmp_path):
    _turn(cli, "s1", 0)
    chat.statuses.append(429)
    chat.replies.append(json.dumps(SUMMARY))
    assert cli("session", "summarize", "s1", env=chat.env()).code == 0
    assert len(chat.requests) == 2
    _turn(cli, "s2", 0)
    chat.delay = 1.5
    cfg = tmp_path / "c.toml"
    cfg.write_text("[chat]\ntimeout = 0.3\n")
    r = cli("-c", str(cfg), "session", "summarize", "s2", env=chat.env())
    assert_clean_error(r, 9)
    assert not cli("session", "list", "--json").json()["sessions"][0]["summarized"]


def test_no_endpoint_configured_says_how(cli):
    _turn(cli, "s1", 0)
    r = cli("session", "summarize", "s1")
    assert_clean_error(r, 2)
    assert "chat -> base_url" in r.err


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("session", "add", "--session", "s", "--prompt", "p"), 2),
        (("session", "add", "--session", "", "--prompt", "p", "--response", "r"), 2),
        (("session", "add", "--session", "s", "--prompt", " ", "--response", "r"), 2),
        (("session", "show", "nope"), 3),
        (("session", "summarize",), 2),
        (("session", "summarize", "s", "--pending"), 2),
        (("session", "summarize", "nope"), 3),
    ],
)
def test_bad_input(cli, args, code):
    _turn(cli, "s1", 0)
    assert_clean_error(cli(*args), code)
    assert cli("session", "list", "--json").json()["count"] == 1


@pytest.mark.slow
def test_many_turns_from_jsonl_all_checked_first(cli, chat, tmp_path):
    lines = [{"session": "j1", "prompt": f"p{i}", "thought": "t", "response": f"r{i}"} for i in range(3)]
    lines.append({"session": "j2", "prompt": "p", "response": "r"})
    f = tmp_path / "turns.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    r = cli("session", "add", "--turns", str(f), "--json")
    assert r.code == 0, r
    assert r.json()["count"] == 4
    assert cli("session", "show", "j1", "--json").json()["count"] == 3
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(lines[0]) + "\n" + json.dumps({"session": "j3", "prompt": "p"}) + "\n")
    assert_clean_error(cli("session", "add", "--turns", str(bad)), 10)
    assert cli("session", "show", "j1", "--json").json()["count"] == 3  # nothing of the bad file written
    assert_clean_error(cli("session", "add", "--turns", "-", input="{nope\n"), 10)
    assert_clean_error(cli("session", "add", "--turns", str(f), "--session", "x"), 2)
    chat.replies.append(json.dumps(SUMMARY))
    cli("session", "summarize", "j2", env=chat.env())
    assert_clean_error(cli("session", "add", "--turns", str(f)), 8)
    assert cli("session", "show", "j1", "--json").json()["count"] == 3
    assert cli("session", "add", "--turns", "-", "--reopen", input=f.read_text()).code == 0
