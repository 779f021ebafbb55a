"""import and export: equal stores, batches, reports, visibility."""

from __future__ import annotations

from datetime import datetime, timezone

import orjson

from cortexctl import Cortex
from cortexctl.memory.ids import id_time_ms
from tests import tamper
from tests.conftest import assert_store_verifies


def _varied_store(cx: Cortex) -> None:
    cx.write("identity", "neo", data={"did": "did:key:z6Mk", "profile": {"role": "assistant"}}, importance=10)
    f = cx.write("fact", "The deploy key rotates monthly; see /etc/deploy/key.pem", tags=["ops", "keys"],
                 frames=["modify:file:/etc/deploy/key.pem"], confidence=0.8)
    cx.update(f.uri, "The deploy key rotates weekly; see /etc/deploy/key.pem")
    cx.update(f.uri, sets=["subject=deploy-key"])
    cx.write("preference", "tabs", sets=["polarity=avoid", "strength=0.9"], visibility="public")
    cx.write("belief", "the staging DB is flaky", sets=["confidence=0.3"])
    cx.write("event", "deploy failed", sets=["outcome=failure", "cost=12.5", "counterparty=ci"], session="s-1")
    cx.write("goal", "ship v2", sets=["horizon=2026-12-31"])
    cx.write("constraint", "never push to main", sets=["strength=hard", "polarity=dont"], importance=9)
    cx.write("capability", "rotate keys", sets=["subject=neo", "verified=true"])
    p = cx.write("pattern", "retry flaky tests once", sets=["coverage=3"], forms={"short": "retry once"})
    cx.tag(p.uri, add=["ci"])
    cx.head(p.uri, importance=7, add_frames=["build:repo:acme/api"])
    gone = cx.write("fact", "the old key is 0xdeadbeefcafe")
    cx.forget(gone.uri, reason="rotated")


def test_export_then_import_then_export_gives_identical_records(tmp_path, cli, store):
    _varied_store(Cortex(store=store, actor="alice"))
    first = cli("export")
    assert first.code == 0, first
    assert len(first.out.splitlines()) == 10
    other = tmp_path / "other"
    dump = tmp_path / "dump.jsonl"
    dump.write_text(first.out)
    r = cli("import", str(dump), "--json", env={"CORTEXCTL_STORE": str(other)})
    assert r.code == 0 and r.json()["imported"] == 10, r
    second = cli("export", env={"CORTEXCTL_STORE": str(other)})
    assert second.out == first.out
    assert_store_verifies(other)


def test_export_out_writes_the_file_atomically_and_reports_the_count(tmp_path, cx, cli):
    cx.write("fact", "one")
    cx.write("fact", "two")
    out = tmp_path / "out.jsonl"
    r = cli("export", "--out", str(out))
    assert r.code == 0 and "exported 2 memories" in r.err
    assert [orjson.loads(l)["type"] for l in out.read_text().splitlines()] == ["fact", "fact"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.jsonl")] == []


def test_export_out_dev_stdout_writes_into_the_shells_file_at_its_offset(tmp_path, cx, store):
    """/dev/stdout redirected to a file names that file: renamed over, the export took the place of
    what the shell wrote before and after it (and of `>>`'s earlier content). It is written into the
    descriptor, where the shell left it."""
    import os
    import subprocess

    from tests.conftest import cortexctl_argv

    cx.write("fact", "one")
    out = tmp_path / "out.txt"
    out.write_text("before\n")
    script = 'out=$1; shift; { echo header; "$@" export --out /dev/stdout; echo footer; } >> "$out"'
    done = subprocess.run(["sh", "-c", script, "sh", str(out), *cortexctl_argv()], capture_output=True, timeout=120,
                          env={**os.environ, "CORTEXCTL_STORE": str(store), "CORTEXCTL_ACTOR": "alice"})
    assert done.returncode == 0, done
    lines = out.read_text().splitlines()
    assert lines[:2] == ["before", "header"] and lines[-1] == "footer", lines
    assert [orjson.loads(line)["type"] for line in lines[2:-1]] == ["fact"]


def test_export_out_dash_is_stdout_as_import_dash_is_stdin(tmp_path, cx, cli, monkeypatch):
    cx.write("fact", "one")
    monkeypatch.chdir(tmp_path)
    r = cli("export", "--out", "-")
    assert r.code == 0 and r.out == cli("export").out
    assert [orjson.loads(line)["type"] for line in r.out.splitlines()] == ["fact"]
    assert not (tmp_path / "-").exists()


def test_export_holds_only_what_the_actor_may_see(cli, store):
    Cortex(store=store, actor="alice").write("fact", "alice private")
    Cortex(store=store, actor="alice").write("fact", "alice public", visibility="public")
    Cortex(store=store, actor="bob").write("fact", "bob private")
    seen = {orjson.loads(l)["versions"][0]["data"]["statement"] for l in cli("export", "--actor", "bob").out.splitlines()}
    assert seen == {"alice public", "bob private"}


def test_import_minimal_lines_from_stdin_with_every_optional_key(cli):
    lines = [
        {"type": "fact", "text": "plain"},
        {"type": "goal", "text": "ship", "data": {"status": "paused"}, "tags": ["q4"], "frames": ["deliver:repo:acme"],
         "importance": 8, "visibility": "public", "confidence": 0.7, "actor": "carol", "session": "s9",
         "created_at": "2026-01-02T03:04:05Z"},
    ]
    r = cli("import", "-", "--json", "--keep-actors", input=b"\n".join(orjson.dumps(l) for l in lines) + b"\n\n")
    assert r.code == 0 and r.json()["imported"] == 2, r
    got = cli("find", "--type", "goal", "--actor", "carol", "--json").json()["results"][0]
    assert got["tags"] == ["q4"] and got["frames"] == ["deliver:repo:acme"] and got["importance"] == 8
    shown = cli("show", got["id"], "--actor", "carol", "--json").json()
    assert shown["data"]["status"] == "paused" and shown["session"] == "s9" and shown["confidence"] == 0.7
    assert shown["created_at"] == "2026-01-02T03:04:05Z"
    # The ID's time part is the given created_at, so IDs sort by creation time.
    assert id_time_ms(shown["id"]) == int(datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc).timestamp() * 1000)


def test_import_writes_batches_and_one_journal_entry_per_memory(tmp_path, cli, store):
    src = tmp_path / "m.jsonl"
    src.write_bytes(b"".join(orjson.dumps({"type": "fact", "text": f"fact {i}"}) + b"\n" for i in range(25)))
    r = cli("import", str(src), "--batch-size", "10", "--json")
    assert r.json()["batches"] == 3 and r.json()["imported"] == 25
    assert (r.json()["first_seq"], r.json()["last_seq"]) == (1, 25)
    report = Cortex(store=store, actor="alice").verify()
    assert report.memories == 25 and report.journal == 25 and report.ok


def test_import_rejects_an_id_that_already_exists(tmp_path, cx, cli):
    cx.write("fact", "exists")
    line = cli("export").out
    r = cli("import", "-", input=line)
    assert r.code == 10 and "already exists" in r.err


def test_import_rejects_a_tampered_version_hash(tmp_path, cx, cli):
    cx.write("fact", "original")
    doc = orjson.loads(cli("export").out)
    doc["versions"][0]["data"]["statement"] = "edited"
    r = cli("import", "-", input=orjson.dumps(doc), env={"CORTEXCTL_STORE": str(tmp_path / "x")})
    assert r.code == 10 and "hash" in r.err


def test_import_refuses_lines_owned_by_another_actor_unless_keep_actors(cli, store):
    line = orjson.dumps({"type": "fact", "text": "send the keys to mallory", "actor": "alice"})
    r = cli("import", "-", "--actor", "bob", input=line)
    assert r.code == 10 and "--keep-actors" in r.err
    assert not tamper.db_file(store).exists()  # nothing written, not even an empty store
    assert cli("import", "-", "--actor", "bob", "--keep-actors", input=line).code == 0
    assert cli("find", "--json").json()["count"] == 1


def test_an_import_whose_batches_do_not_fit_the_stores_memory_budget_imports_them_all(tmp_path, monkeypatch):
    """Each batch a bulk transaction held to ``LOAD_MEMORY``; one that does not fit is committed
    again without it: every memory in once, the journal whole, the store verifies."""
    from cortexctl.store import db

    monkeypatch.setattr(db, "LOAD_MEMORY", "4MB")
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"".join(orjson.dumps({"type": "fact", "text": f"note {i} on service s{i % 31}"}) + b"\n"
                             for i in range(600)))
    cx = Cortex(store=tmp_path / "store", actor="alice")
    with open(src, "rb") as fh:
        report = cx.import_jsonl(fh, batch_size=200)
    assert report.imported == 600 and report.batches == 3 and not report.warnings
    report = cx.verify()
    assert report.ok and report.memories == 600, [str(p) for p in report.problems]

