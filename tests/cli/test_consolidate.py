"""consolidate (SPEC §9) against a real chat server on 127.0.0.1: what is written in each case."""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.conftest import assert_clean_error, assert_store_verifies

TRANSCRIPT = """user: the deploy key for acme/api lives at /etc/keys/deploy.pem, rotate it please
agent: rotated; new fingerprint 9f86d081884c7d65. I'm Ann, by the way -- I prefer short answers.
"""
FULL = {
    "facts": ["The acme/api deploy key lives at /etc/keys/deploy.pem", "Key fingerprint is 9f86d081884c7d65"],
    "user_facts": ["Prefers short answers"],
    "patterns": [{"name": "rotate deploy key", "trigger": "deploy key rotation", "steps": ["rotate", "verify"]}],
    "outcome": {"summary": "Rotated the acme/api deploy key", "status": "success"},
}


@pytest.fixture
def chat():
    from tests.chat_server import ChatServer

    server = ChatServer().start()
    yield server
    server.stop()


@pytest.fixture
def transcript(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text(TRANSCRIPT)
    return p


@pytest.mark.parametrize("wrap", ["```json\n{}\n```", "Sure! Here it is:\n{}\nHope that helps.", "{}"])
def test_fenced_and_prose_wrapped_json_are_written(cli, chat, transcript, store, wrap):
    doc = dict(FULL)
    chat.replies.append(wrap.replace("{}", json.dumps(doc)[:-1] + ",}"))  # a trailing comma too
    r = cli("consolidate", str(transcript), "--json", env=chat.env())
    assert r.code == 0, r
    res = r.json()
    assert sorted(w["kind"] for w in res["written"]) == ["facts", "facts", "outcome", "patterns", "user_facts"]
    sha = hashlib.sha256(TRANSCRIPT.encode()).hexdigest()
    assert res["transcript_sha256"] == sha
    for w in res["written"]:
        m = cli("show", w["uri"], "--json").json()
        assert m["provenance"]["via"] == "consolidated" and m["provenance"]["transcript_sha256"] == sha
    assert_store_verifies(store)


def test_an_empty_object_writes_nothing(cli, chat, transcript):
    chat.replies.append('{"facts": [], "patterns": [], "outcome": null}')
    r = cli("consolidate", str(transcript), "--json", env=chat.env())
    assert r.code == 0 and r.json()["count"] == 0 and r.json()["dropped"] == []
    chat.replies.append("{}")
    assert "nothing durable" in cli("consolidate", str(transcript), "--again", env=chat.env()).err


def test_garbage_writes_nothing_and_quotes_the_reply(cli, chat, transcript, store):
    chat.replies.append("I am sorry, I cannot help with that " + "x" * 300)
    r = cli("consolidate", str(transcript), env=chat.env())
    assert_clean_error(r, 10)
    assert "I am sorry" in r.err and "x" * 300 not in r.err
    chat.replies.append('{"facts": "not a list"}')
    assert_clean_error(cli("consolidate", str(transcript), env=chat.env()), 10)
    assert cli("find", "--jsonl").jsonl() == []


def test_the_verbatim_guard_both_ways(cli, chat, transcript):
    chat.replies.append(json.dumps({
        "facts": ["The key lives at /etc/keys/deploy.pem", "The key lives at /etc/keys/deploy.key",
                  "Fingerprint 9f86d081884c7d65", "Fingerprint 9f86d081884c7d66"],
    }))
    res = cli("consolidate", str(transcript), "--json", env=chat.env()).json()
    assert [w["text"] for w in res["written"]] == ["The key lives at /etc/keys/deploy.pem",
                                                   "Fingerprint 9f86d081884c7d65"]
    assert sorted(d["reason"] for d in res["dropped"]) == ["not in the transcript: /etc/keys/deploy.key",
                                                          "not in the transcript: 9f86d081884c7d66"]


def test_limits_dedup_and_dry_run(cli, chat, transcript):
    cli("remember", "the sky is blue")
    chat.replies.append(json.dumps({"facts": ["The sky is blue."] + [f"fact {i}" for i in range(7)]}))
    res = cli("consolidate", str(transcript), "--dry-run", "--json", env=chat.env()).json()
    assert res["dry_run"] and res["count"] == 4 and all("uri" not in w for w in res["written"])
    reasons = [d["reason"] for d in res["dropped"]]
    assert reasons.count("over the limit") == 3 and "already known" in reasons
    assert len(cli("find", "--jsonl").jsonl()) == 1


def test_429_then_success_500_and_timeout(cli, chat, transcript, tmp_path):
    chat.statuses.append(429)
    chat.replies.append(json.dumps({"facts": ["fact one"]}))
    assert cli("consolidate", str(transcript), env=chat.env()).code == 0
    chat.statuses += [500] * 10
    assert_clean_error(cli("consolidate", str(transcript), "--again", env=chat.env()), 9)
    chat.statuses.clear()
    chat.delay = 1.5
    cfg = tmp_path / "c.toml"
    cfg.write_text("[chat]\ntimeout = 0.3\n")
    assert_clean_error(cli("-c", str(cfg), "consolidate", str(transcript), "--again", env=chat.env()), 9)
    assert len(cli("find", "--jsonl").jsonl()) == 1


def test_api_key_bearer_and_never_printed(cli, chat, transcript):
    secret = "sk-live-abcdef0123456789"
    chat.replies.append(json.dumps({"facts": ["fact one"]}))
    r = cli("consolidate", str(transcript), "--json", env=chat.env(CORTEXCTL_CHAT_API_KEY=secret))
    assert r.code == 0 and chat.requests[0]["auth"] == f"Bearer {secret}" and secret not in r.out + r.err


def test_errors(cli, transcript, tmp_path, chat):
    r = cli("consolidate", str(transcript))
    assert_clean_error(r, 2)
    assert "chat -> base_url" in r.err
    assert_clean_error(cli("consolidate", str(tmp_path / "missing.txt"), env=chat.env()), 2)
    assert_clean_error(cli("consolidate", str(tmp_path), env=chat.env()), 2)
    assert_clean_error(cli("consolidate", "-", input="   ", env=chat.env()), 2)
    (tmp_path / "bin").write_bytes(b"\xff\xfe")
    assert_clean_error(cli("consolidate", str(tmp_path / "bin"), env=chat.env()), 10)


def test_a_supersede_proposal_must_quote_a_stored_fact_verbatim_and_deletes_nothing(cli, chat, transcript, store):
    old = cli("write", "fact", "The acme/api deploy key lives at /etc/keys/old.pem").out.strip()
    other = cli("write", "fact", "Ann prefers long answers").out.strip()
    chat.replies.append(json.dumps({"supersedes": [
        {"old": "The acme/api deploy key lives at /etc/keys/old.pem",
         "new": "The acme/api deploy key lives at /etc/keys/deploy.pem"},
        {"old": "Ann prefers long answer", "new": "Ann prefers short answers"},  # not verbatim
        {"old": "Ann prefers long answers", "new": "Ann's key is at /etc/keys/nowhere.pem"},  # not in the transcript
    ]}))
    res = cli("consolidate", str(transcript), "--json", env=chat.env()).json()
    sent = chat.requests[-1]["body"]["messages"][1]["content"]
    assert "The acme/api deploy key lives at /etc/keys/old.pem" in sent and "Ann prefers long answers" in sent
    assert [(w["kind"], w["supersedes"]) for w in res["written"]] == [("supersedes", old)]
    assert sorted(d["reason"] for d in res["dropped"]) == ["not in the transcript: /etc/keys/nowhere.pem",
                                                           "old fact not quoted verbatim"]
    new = res["written"][0]["uri"]
    assert cli("show", old, "--json").json()["superseded_by"] == new.rsplit("/", 1)[-1]
    found = {h["uri"] for h in cli("find", "--jsonl").jsonl()}
    assert found == {new, other}  # the old fact is kept, no longer current
    assert len(cli("find", "--include-superseded", "--jsonl").jsonl()) == 3
    assert_store_verifies(store)
