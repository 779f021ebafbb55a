"""import prepares files of more than one chunk in worker processes: the store it makes, the
problems it reports and what it leaves behind are those of the one-process path."""

from __future__ import annotations

import io

import orjson
import pytest

from cortexctl import Cortex
from cortexctl.engine import transfer
from cortexctl.engine.transfer import ImportRejected
from tests import tamper
from tests.conftest import assert_store_verifies, leftovers

pytestmark = pytest.mark.slow  # worker processes


def _lines(n: int, start: int = 0) -> list[dict]:
    out = []
    for i in range(start, start + n):
        line = {"type": "fact", "text": f"note {i} about service s{i % 31} and the {i % 7} walruses",
                "tags": [f"t{i % 5}"], "created_at": "2026-03-04T05:06:07Z"}
        if i % 11 == 0:
            line["frames"] = [f"deliver:repo:acme/r{i % 3}"]
        out.append(line)
    return out


def _jsonl(docs) -> bytes:
    return b"".join(orjson.dumps(d) + b"\n" for d in docs)


@pytest.fixture
def small_jobs(monkeypatch):
    """Worker jobs of 40 lines, so that a few hundred lines make several of them."""
    monkeypatch.setattr(transfer, "POOL_MIN_CHUNK", 40)
    monkeypatch.setattr(transfer, "_workers", lambda: 2)


def _tables(path) -> dict:
    return {t: sorted(tamper.rows(path, f"SELECT {cols} FROM {t}")) for t, cols in (
        ("heads", "*"), ("versions", "*"), ("frames", "*"), ("vectors", "id, version, model, dim, vec"),
        ("lex_docs", "id, len"), ("journal", "seq, kind, actor, ref, payload"))}


def test_workers_make_the_same_store_as_one_process(tmp_path, small_jobs, monkeypatch):
    data = _jsonl(_lines(300))
    a, b = tmp_path / "a", tmp_path / "b"
    ra = Cortex(store=a, actor="alice").import_jsonl(io.BytesIO(data), batch_size=25)
    monkeypatch.setattr(transfer, "_workers", lambda: 1)
    rb = Cortex(store=b, actor="alice").import_jsonl(io.BytesIO(data), batch_size=25)
    assert ra.imported == rb.imported == 300 and ra.batches == rb.batches == 12
    ta, tb = _tables(a), _tables(b)
    # IDs are made from created_at and randomness, journal times from the clock: compare the rest.
    assert len(ta["vectors"]) == 300
    for t in ta:
        assert len(ta[t]) == len(tb[t]), t
    assert sorted(r[2] for r in ta["vectors"]) == sorted(r[2] for r in tb["vectors"])
    texts_a = {r[0]: r for r in ta["heads"]}
    assert sorted(r[1:] for r in ta["heads"]) == sorted(r[1:] for r in tb["heads"])
    assert len(texts_a) == 300
    for path in (a, b):
        assert_store_verifies(path)
        assert leftovers(path, path.parent) == []


def test_workers_store_the_vectors_the_embedder_makes(tmp_path, small_jobs):
    cx = Cortex(store=tmp_path / "s", actor="alice")
    cx.import_jsonl(io.BytesIO(_jsonl(_lines(200))), batch_size=30)
    rows = tamper.rows(tmp_path / "s", "SELECT h.short, x.vec FROM vectors x JOIN heads h ON h.id = x.id")
    texts = dict(tamper.rows(tmp_path / "s", "SELECT h.id, v.data FROM heads h JOIN versions v ON v.id = h.id"))
    assert len(rows) == len(texts) == 200
    from cortexctl.memory import codec

    import numpy as np

    from cortexctl.store.search import VECTOR_DTYPE

    statements = [codec.decode(d)["statement"] for d in texts.values()]
    want = {bytes(np.asarray(v, dtype=VECTOR_DTYPE).tobytes()) for v in cx.embedder.embed(statements)}  # as stored
    assert {bytes(r[1]) for r in rows} == want


def test_bad_lines_in_several_chunks_are_all_reported_in_line_order_and_nothing_is_written(tmp_path, small_jobs):
    docs = [orjson.dumps(d) for d in _lines(200)]
    bad = {3: b"{not json", 77: b'{"type": "fact"}', 150: b'{"type": "nope", "text": "x"}', 199: b"[1, 2]"}
    for n, raw in bad.items():
        docs[n - 1] = raw
    dup_id = "01JD3K0000000000000000000Z"
    docs[10] = orjson.dumps({"type": "fact", "text": "first", "id": dup_id})
    docs[180] = orjson.dumps({"type": "fact", "text": "again", "id": dup_id})
    store = tmp_path / "s"
    with pytest.raises(ImportRejected) as err:
        Cortex(store=store, actor="alice").import_jsonl(io.BytesIO(b"\n".join(docs) + b"\n"), batch_size=20)
    assert [p.line for p in err.value.problems] == [3, 77, 150, 181, 199]
    assert "appears again (first on line 11)" in err.value.problems[3].message
    assert not store.exists()
    assert leftovers(tmp_path) == []


def test_skip_invalid_and_skip_existing_work_across_worker_chunks(tmp_path, small_jobs):
    store = tmp_path / "s"
    cx = Cortex(store=store, actor="alice")
    cx.import_jsonl(io.BytesIO(_jsonl(_lines(100))), batch_size=20)
    dump = io.BytesIO()
    cx.export_jsonl(dump)
    more = dump.getvalue() + _jsonl(_lines(100, start=100)) + b"{broken\n"
    r = cx.import_jsonl(io.BytesIO(more), batch_size=20, skip_existing=True, skip_invalid=True)
    assert (r.imported, r.existing, r.skipped) == (100, 100, 1)
    assert [p.line for p in r.problems] == [201]
    assert cx.verify().memories == 200
    assert_store_verifies(store)
