"""import --skip-existing: a line whose memory the store holds as it is (same owner, same version
hashes in order) is skipped and counted; the same ID with other content is a conflict."""

from __future__ import annotations

import orjson

from cortexctl import Cortex
from tests.cli.test_bad_input import store_state
from tests.cli.test_transfer import _varied_store
from tests.conftest import assert_clean_error, assert_store_verifies


def _export(cli) -> list[dict]:
    r = cli("export")
    assert r.code == 0, r
    return [orjson.loads(l) for l in r.out.splitlines()]


def _jsonl(docs) -> bytes:
    return b"".join(orjson.dumps(d) + b"\n" for d in docs)


def test_reimporting_an_export_into_the_same_store_writes_nothing_and_counts_the_lines(tmp_path, cli, store):
    _varied_store(Cortex(store=store, actor="alice"))
    dump = tmp_path / "dump.jsonl"
    dump.write_text(cli("export").out)
    before = store_state(store)

    r = cli("import", str(dump), "--skip-existing", "--json")

    assert r.code == 0, r
    doc = r.json()
    assert (doc["imported"], doc["skipped_existing"], doc["skipped"], doc["batches"]) == (0, 10, 0, 0), doc
    assert doc["problems"] == [] and doc["first_seq"] is None
    assert store_state(store) == before  # not a row, not a journal entry, not a file
    human = cli("import", str(dump), "--skip-existing")
    assert human.code == 0 and "imported 0 memories" in human.out and "skipped 10 already in the store" in human.out
    assert human.err == "", human
    assert store_state(store) == before
    assert_store_verifies(store)


def test_without_skip_existing_the_same_file_is_still_rejected_whole(tmp_path, cli, store):
    _varied_store(Cortex(store=store, actor="alice"))
    dump = tmp_path / "dump.jsonl"
    dump.write_text(cli("export").out)
    before = store_state(store)
    r = cli("import", str(dump))
    assert r.code == 10 and r.err.count("already exists in the store") == 10, r
    assert store_state(store) == before
    assert r.err.splitlines()[-1].endswith("(pass --skip-existing to skip the memories the store already holds)")


def test_a_rejection_with_other_bad_lines_points_to_skip_invalid(tmp_path, cli, store):
    _varied_store(Cortex(store=store, actor="alice"))
    dump = tmp_path / "dump.jsonl"
    dump.write_text(cli("export").out + '{"type": "fact"}\n')
    r = cli("import", str(dump))
    assert r.code == 10 and "pass --skip-invalid" in r.err.splitlines()[-1], r


def test_new_lines_are_imported_beside_the_skipped_ones_and_the_store_verifies(tmp_path, cli, store):
    cx = Cortex(store=store, actor="alice")
    cx.write("fact", "first")
    cx.write("fact", "second")
    docs = _export(cli)
    journal = cx.verify().journal
    new = [{"type": "fact", "text": f"new {i}"} for i in range(3)]
    src = tmp_path / "mixed.jsonl"
    src.write_bytes(_jsonl([docs[0], new[0], docs[1], new[1], new[2]]))

    r = cli("import", str(src), "--skip-existing", "--json", "--batch-size", "2")

    assert r.code == 0, r
    assert (r.json()["imported"], r.json()["skipped_existing"]) == (3, 2), r.json()
    assert cx.verify().journal == journal + 3  # one entry per imported memory, none for a skipped one
    assert cli("find", "--json", "-k", "10").json()["count"] == 5
    assert_store_verifies(store)


def test_a_changed_line_is_a_conflict_and_nothing_is_written(tmp_path, cli, store):
    cx = Cortex(store=store, actor="alice")
    a = cx.write("fact", "the deploy key rotates monthly")
    cx.write("fact", "unchanged")
    docs = _export(cli)
    changed = next(d for d in docs if d["id"] == a.id)
    changed["versions"][0]["data"]["statement"] = "the deploy key rotates weekly"
    del changed["versions"][0]["hash"]  # an edited record, not a tampered one: it reads as valid
    src = tmp_path / "changed.jsonl"
    src.write_bytes(_jsonl(docs + [{"type": "fact", "text": "brand new"}]))
    line = docs.index(changed) + 1
    before = store_state(store)

    r = cli("import", str(src), "--skip-existing")

    assert r.code == 10, r
    assert f"line {line}: memory {a.id} already exists in the store with other content (version 1 differs)" in r.err
    assert "nothing was imported" in r.err and "Traceback" not in r.err
    assert store_state(store) == before

    # --json: the conflict is in the error document's problems, stdout stays empty.
    r = cli("import", str(src), "--skip-existing", "--json")
    assert r.code == 10 and r.out == "", r
    err = orjson.loads(r.err.strip().splitlines()[-1])
    assert [p["line"] for p in err["problems"]] == [line] and err["exit_code"] == 10
    assert store_state(store) == before

    # With --skip-invalid too, the conflict is reported and skipped, the rest goes in.
    r = cli("import", str(src), "--skip-existing", "--skip-invalid", "--json")
    assert r.code == 0, r
    doc = r.json()
    assert (doc["imported"], doc["skipped_existing"], doc["skipped"]) == (1, 1, 1), doc
    assert cx.show(a.id).data["statement"] == "the deploy key rotates monthly"  # the stored one is kept
    assert_store_verifies(store)


def test_more_versions_in_the_store_than_in_the_line_is_a_conflict(tmp_path, cli, store):
    cx = Cortex(store=store, actor="alice")
    a = cx.write("fact", "the deploy key rotates monthly")
    old = _export(cli)
    cx.update(a.uri, "the deploy key rotates weekly")  # the store moved on since the export
    r = cli("import", "-", "--skip-existing", input=_jsonl(old))
    assert r.code == 10 and "with other content (2 versions stored, 1 in the line)" in r.err, r


def test_a_short_line_with_the_id_and_text_of_a_stored_memory_is_skipped(cli, store):
    cx = Cortex(store=store, actor="alice")
    a = cx.write("fact", "plain text", tags=["x"])
    before = store_state(store)
    same = {"type": "fact", "text": "plain text", "id": a.id, "tags": ["other"]}  # head fields are not compared
    r = cli("import", "-", "--skip-existing", "--json", input=_jsonl([same]))
    assert r.code == 0 and r.json()["skipped_existing"] == 1 and r.json()["imported"] == 0, r
    assert store_state(store) == before
    other = {"type": "fact", "text": "other text", "id": a.id}
    r = cli("import", "-", "--skip-existing", input=_jsonl([other]))
    assert r.code == 10 and "with other content (version 1 differs)" in r.err, r


def test_another_owner_under_a_stored_id_is_a_conflict(cli, store):
    cx = Cortex(store=store, actor="alice")
    a = cx.write("fact", "alice's note")
    doc = _export(cli)[0]
    doc["actor"] = "bob"
    before = store_state(store)
    r = cli("import", "-", "--skip-existing", "--keep-actors", input=_jsonl([doc]))
    assert r.code == 10 and f"memory {a.id} already exists in the store with another owner" in r.err, r
    assert store_state(store) == before


def test_skip_existing_does_not_let_invalid_lines_through(cli, store):
    cx = Cortex(store=store, actor="alice")
    cx.write("fact", "kept")
    docs = _export(cli)
    before = store_state(store)
    r = cli("import", "-", "--skip-existing", input=_jsonl(docs) + b"{not json\n")
    assert r.code == 10 and "line 2: not valid JSON" in r.err and "1 of 2 lines invalid" in r.err, r
    assert store_state(store) == before


def test_a_line_repeating_a_new_id_is_still_reported(cli, store):
    cx = Cortex(store=store, actor="alice")
    cx.write("fact", "kept")
    line = {"type": "fact", "text": "twice", "id": "01JD3K0000000000000000000Z"}
    r = cli("import", "-", "--skip-existing", input=_jsonl([line, line]))
    assert r.code == 10 and "line 2: id 01JD3K0000000000000000000Z appears again (first on line 1)" in r.err, r


def test_skip_existing_into_a_store_that_does_not_exist_yet_imports_everything(tmp_path, cli, store):
    _varied_store(Cortex(store=store, actor="alice"))
    dump = tmp_path / "dump.jsonl"
    dump.write_text(cli("export").out)
    other = tmp_path / "other"
    r = cli("import", str(dump), "--skip-existing", "--json", env={"CORTEXCTL_STORE": str(other)})
    assert r.code == 0 and (r.json()["imported"], r.json()["skipped_existing"]) == (10, 0), r
    assert_store_verifies(other)


def test_the_usage_errors_of_import_are_unchanged_by_skip_existing(tmp_path, cli, store):
    assert_clean_error(cli("import", str(tmp_path / "missing.jsonl"), "--skip-existing"), 2)
    assert_clean_error(cli("import", str(tmp_path), "--skip-existing"), 2)
    assert_clean_error(cli("import", "-", "--skip-existing", "--batch-size", "0", input=b""), 2)
