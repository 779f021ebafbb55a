"""consolidate of many transcripts: one transaction each, journaled by the transcript's SHA-256, so a
run that stopped (a bad reply, a kill) and is run again writes nothing twice and does the rest; the
model asked about several at once, the answers written in the order given. Against a real chat
server on 127.0.0.1 that answers each request by the transcript it carries, on both backends."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess

import orjson
import pytest

from tests.conftest import assert_refused, cortexctl_argv, run_in_process

N = 8


def transcript(n: int) -> str:
    return (f"transcript {n}\nuser: service s{n} listens on port {8000 + n}; staging is the blue cluster\n"
            "agent: noted. You prefer tea, I remember.\n")


def answer(message: str) -> str:
    """The model's reply to one transcript: a fact of its own, a fact and a user fact every transcript
    repeats (written once, then already known / touched), the same pattern (written, then
    reinforced) and, for even ones, an outcome."""
    n = int(re.match(r"transcript (\d+)", message).group(1))
    doc = {"facts": [f"Service s{n} listens on port {8000 + n}", "Staging is the blue cluster"],
           "user_facts": ["Prefers tea"],
           "patterns": [{"name": "port lookup", "trigger": "a port question", "steps": ["look", "answer"]}],
           "outcome": {"summary": f"Noted the port of s{n}", "status": "success"} if n % 2 == 0 else None}
    return json.dumps(doc)


@pytest.fixture
def chat():
    from tests.chat_server import ChatServer

    server = ChatServer().start()
    server.answer = answer
    yield server
    server.release.set()
    server.stop()


@pytest.fixture
def files(tmp_path):
    out = []
    for n in range(N):
        p = tmp_path / f"t{n:02d}.txt"
        p.write_text(transcript(n))
        out.append(str(p))
    return out


def state(run) -> list:
    """Every memory as export writes it, less what differs from run to run (IDs, times), sorted."""
    rows = []
    for line in run("export").out.splitlines():
        doc = orjson.loads(line)
        versions = [({k: x for k, x in v["data"].items() if not k.endswith("_at")}, v["provenance"])
                    for v in doc["versions"]]
        rows.append((doc["type"], json.dumps(versions, sort_keys=True), doc["tags"],
                     doc["salience"]["access_count"]))
    return sorted(rows, key=repr)


def test_each_transcript_once_in_order_and_a_second_run_skips_them_all(backend_cli, chat, files, tmp_path):
    r = backend_cli("consolidate", *files, "--jobs", "3", "--json", env=chat.env())
    assert r.code == 0, r
    doc = r.json()
    assert (doc["transcripts"], doc["consolidated"], doc["skipped"]) == (N, N, 0)
    assert [x["source"] for x in doc["results"]] == files  # in the order given
    first = doc["results"][0]
    assert sorted(w["kind"] for w in first["written"]) == ["facts", "facts", "outcome", "patterns", "user_facts"]
    later = doc["results"][1]
    assert [w["kind"] for w in later["written"]] == ["facts", "user_facts", "patterns"]
    assert [w["action"] for w in later["written"]] == ["written", "touched", "reinforced"]
    assert [d["reason"] for d in later["dropped"]] == ["already known"]
    before, asked = state(backend_cli), len(chat.requests)

    again = backend_cli("consolidate", *files, "--jobs", "3", "--json", env=chat.env())
    assert again.code == 0 and (again.json()["consolidated"], again.json()["skipped"]) == (0, N), again
    assert len(chat.requests) == asked  # the model is not asked again
    assert state(backend_cli) == before
    assert backend_cli("verify").code == 0

    lines = backend_cli("consolidate", *files[:3], "--jsonl", env=chat.env()).jsonl()
    assert [(x["source"], x["skipped"]) for x in lines] == [(f, True) for f in files[:3]]
    one = backend_cli("consolidate", files[3], "--json", env=chat.env()).json()
    assert one["skipped"] is True and one["count"] == 0 and "source" not in one
    redo = backend_cli("consolidate", files[3], "--again", "--json", env=chat.env()).json()
    assert redo["skipped"] is False and [w["action"] for w in redo["written"]] == ["touched", "reinforced"]


def test_a_dry_run_writes_nothing_and_marks_nothing_done(cli, chat, files):
    r = cli("consolidate", *files, "--dry-run", "--json", env=chat.env())
    assert r.code == 0 and r.json()["consolidated"] == N and r.json()["count"] > 0, r
    assert all("uri" not in w for x in r.json()["results"] for w in x["written"])
    assert cli("export").out == ""
    after = cli("consolidate", *files, "--json", env=chat.env()).json()
    assert (after["consolidated"], after["skipped"]) == (N, 0)


def test_the_search_snapshot_follows_a_run_and_find_sees_what_it_wrote(cli, chat, files):
    """DuckDB: the transcripts written on the store kept open leave the search snapshot current (its
    delta written once the file is closed), and find answers with what they wrote."""
    for n in range(20):
        cli("write", "fact", f"an earlier fact number {n}")
    assert cli("reindex").code == 0
    assert cli("consolidate", *files, env=chat.env()).code == 0
    assert cli("healthcheck", "--json").json()["snapshot"]["state"] == "current"
    found = cli("find", "--near", "service s5 listens on port 8005", "--json").json()
    assert "Service s5 listens on port 8005" in json.dumps(found)


def test_one_job_or_many_the_store_ends_the_same(chat, files, tmp_path):
    """Answers that come back in any order are written in the order given: --jobs 1 and --jobs 8 agree."""
    ends = []
    for jobs in ("1", "8"):
        store = tmp_path / f"store-{jobs}"

        def run(*args, input=None, env=None):
            return run_in_process(store, *args, input=input, env=env)

        assert run("consolidate", *files, "--jobs", jobs, env=chat.env()).code == 0
        ends.append(state(run))
    assert ends[0] == ends[1]


def test_a_bad_reply_stops_the_run_there_and_the_next_run_does_the_rest(backend_cli, chat, files, tmp_path):
    """Transcript 5's reply is not the JSON: exit 10, the five before it are written (each its own
    transaction), nothing of it or after; run again with the model fixed: the store is as one whole run
    leaves it."""
    good = answer
    chat.answer = lambda m: "no JSON here" if m.startswith("transcript 5\n") else good(m)
    r = backend_cli("consolidate", *files, "--jobs", "2", env=chat.env())
    assert r.code == 10 and "Traceback" not in r.err, r
    last = r.err.splitlines()[-1]  # after the earlier transcripts' "dropped" lines
    assert last.startswith(f"cortexctl: {files[5]}: ") and "no JSON here" in last, r
    shas = {orjson.loads(line)["versions"][0]["provenance"].get("transcript_sha256")
            for line in backend_cli("export").out.splitlines()}
    want = {hashlib.sha256(transcript(n).encode()).hexdigest() for n in range(5)}
    assert shas == want  # 0-4 written, 5-7 not
    chat.answer = good
    r = backend_cli("consolidate", *files, "--jobs", "2", "--json", env=chat.env())
    assert r.code == 0 and (r.json()["consolidated"], r.json()["skipped"]) == (3, 5), r
    resumed = state(backend_cli)

    whole = tmp_path / "whole"

    def run(*args, env=None):
        return run_in_process(whole, *args, env=env)

    assert run("consolidate", *files, env=chat.env()).code == 0
    assert resumed == state(run)
    assert backend_cli("verify").code == 0


def test_bad_input_is_refused_before_any_request(backend_cli, chat, files, tmp_path):
    backend_cli("write", "fact", "a store to leave as it was")
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n")
    assert_refused(backend_cli, "consolidate", *files, str(empty), code=2, says=f"{empty}: the transcript is empty")
    assert_refused(backend_cli, "consolidate", files[0], str(tmp_path / "missing.txt"), code=2, says="no such file")
    assert_refused(backend_cli, "consolidate", *files, "--jobs", "0", code=2, says="jobs")
    assert_refused(backend_cli, "consolidate", *files, "--jobs", "33", code=2, says="jobs")
    assert_refused(backend_cli, "consolidate", "-", "-", code=2, says="stdin")
    (tmp_path / "bin").write_bytes(b"\xff\xfe")
    assert_refused(backend_cli, "consolidate", files[0], str(tmp_path / "bin"), code=10, says="not valid UTF-8")
    assert chat.requests == []


@pytest.mark.slow
def test_a_run_killed_midway_and_run_again_ends_as_one_whole_run(backend_store, chat, files, tmp_path):
    """A real `cortexctl consolidate` of 16 transcripts (--jobs 2) is killed (SIGKILL) once the server
    has had 12 requests and holds the 12th: some transcripts are written, the rest not. Run again, it
    skips the ones written, asks the model only about the rest, and the store equals a store one
    uninterrupted run made; verify is green."""
    for n in range(N, 2 * N):
        p = tmp_path / f"t{n:02d}.txt"
        p.write_text(transcript(n))
        files.append(str(p))
    env = {**os.environ, "CORTEXCTL_STORE": backend_store, **chat.env()}

    def run(*args):
        return run_in_process(backend_store, *args)

    chat.hold_after = 11
    proc = subprocess.Popen([*cortexctl_argv(), "consolidate", *files, "--jobs", "2"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        chat.arrived(12)  # up to 4 x jobs answers wait ahead of the writes: at least 4 transcripts are written
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(60)
    assert proc.returncode == -signal.SIGKILL
    chat.hold_after = None
    chat.release.set()
    asked = len(chat.requests)

    again = subprocess.run([*cortexctl_argv(), "consolidate", *files, "--jobs", "2", "--json"], env=env,
                           capture_output=True, timeout=300)
    assert again.returncode == 0, again.stderr.decode()
    doc = orjson.loads(again.stdout)
    assert 0 < doc["skipped"] <= 11 and doc["consolidated"] == 2 * N - doc["skipped"], doc
    assert len(chat.requests) - asked == doc["consolidated"]  # only the rest were asked about
    assert run("verify").code == 0

    whole = tmp_path / "whole"

    def run_whole(*args, env=None):
        return run_in_process(whole, *args, env=env)

    assert run_whole("consolidate", *files, env=chat.env()).code == 0
    assert state(run) == state(run_whole)
