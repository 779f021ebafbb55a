"""A resident Cortex (the one `cortexctl mcp` keeps) keeps the index view and the snapshot mappings (its store's maps)
between calls, and answers exactly as a fresh Cortex does after every kind of change by others."""

from __future__ import annotations

import io
import json
import subprocess
from datetime import datetime, timedelta

import pytest

from cortexctl import Cortex
from cortexctl.engine.results import FindQuery
from cortexctl.engine.salience import HALF_LIFE_SECONDS
from cortexctl.store.vector_index import EXACT_MAX
from cortexctl.store import snapshot
from tests.conftest import cortexctl_argv

pytestmark = pytest.mark.slow  # a long run of changes against a resident Cortex

NOW = datetime(2026, 11, 23, 12, 0, 0)
WORDS = "deploy key rotation friday latency budget payments owner oncall bastion credentials lock".split()
QUERIES = [{"near": "deploy key rotation"}, {"near": "latency budget", "k": 3}, {"near": "walrus colony"},
           {"near": "owner oncall", "tags": ["t1"]}, {}, {"near": "credentials", "form": "medium", "k": 20}]


def _cx(store, *, resident: bool = False) -> Cortex:
    cx = Cortex(store=store, actor="alice", resident=resident)
    cx.context.clock = lambda: NOW
    return cx


def _answers(cx: Cortex) -> list[list[dict]]:
    return [[h.to_json() for h in cx.find(FindQuery(**q))] for q in QUERIES]


def test_a_resident_cortex_answers_as_a_fresh_one_after_every_change(store):
    writer = _cx(store)
    lines = "".join(json.dumps({"type": "fact", "text": f"{WORDS[i % len(WORDS)]} {WORDS[i * 7 % len(WORDS)]} "
                                f"note {i}", "tags": [f"t{i % 3}"]}) + "\n" for i in range(EXACT_MAX + 200))
    writer.import_jsonl(io.BytesIO(lines.encode()))
    writer.reindex()
    assert snapshot.state(store) == "current"
    resident = _cx(store, resident=True)

    def same() -> None:
        assert _answers(resident) == _answers(_cx(store))

    same()
    kept_view = resident.store.maps[("index_view", str(store / "cortex.usearch"))][1]
    kept_snap = resident.store.maps[str(store / snapshot.SNAPSHOT_NAME)][1]
    same()  # the second time from what was kept
    assert resident.store.maps[("index_view", str(store / "cortex.usearch"))][1] is kept_view
    assert resident.store.maps[str(store / snapshot.SNAPSHOT_NAME)][1] is kept_snap

    # another process's writes of every kind: answered through the delta
    new = writer.write("fact", "deploy key of the walrus colony").id
    writer.update(new, "deploy key of the walrus colony, rotated weekly")
    hits = writer.find(FindQuery(near="deploy key", k=3))
    writer.attest("rotate", "success", [h.uri for h in hits[:2]])
    writer.tag(hits[2].id, add=["walrus"])
    writer.forget(hits[1].id, reason="superseded")
    same()
    assert _answers(resident)[2][0]["id"] == new

    # a fold writes a new snapshot (and index) file: the kept ones are let go
    writer.reindex(rebuild=True)
    same()
    assert resident.store.maps[str(store / snapshot.SNAPSHOT_NAME)][1] is not kept_snap
    assert resident.store.maps[("index_view", str(store / "cortex.usearch"))][1] is not kept_view

    # the snapshot moved aside: find reads DuckDB, the same answers
    (store / snapshot.SNAPSHOT_NAME).rename(store / "aside")
    same()
    (store / "aside").rename(store / snapshot.SNAPSHOT_NAME)
    same()


def test_an_ordinary_cortex_keeps_nothing(store):
    cx = _cx(store)
    cx.write("fact", "nothing kept")
    cx.find(FindQuery(near="kept"))
    assert cx.store.maps is None


def _written_with_clock(cx: Cortex, at: datetime, *args, **kwargs) -> str:
    cx.context.clock = lambda: at
    try:
        return cx.write(*args, **kwargs).id
    finally:
        cx.context.clock = lambda: NOW


@pytest.fixture
def ranked_store(store):
    """Filler memories and two that trade places in salience order 150 s after NOW: A (written at NOW,
    importance 4) is ahead of B (written a half-life before, importance 9) by 0.1 * 6e-5 of confidence
    at NOW; A's recency then falls twice as fast as B's. One fact's valid time ends 450 s after NOW."""
    got = _ranked(store)
    assert snapshot.state(store) == "current"
    return got


@pytest.fixture
def ranked_pg():
    """``ranked_store``'s memories in a PostgreSQL store: (its URI, A, B, the ending fact)."""
    from tests.pg import store_uri

    uri = store_uri("ranked")
    return (uri, *_ranked(uri))


def _ranked(store) -> tuple[str, str, str]:
    writer = _cx(store)
    lines = "".join(json.dumps({"type": "fact", "text": f"filler {WORDS[i % len(WORDS)]} {i}", "importance": 0,
                                "confidence": 0.0}) + "\n" for i in range(EXACT_MAX + 200))
    writer.import_jsonl(io.BytesIO(lines.encode()))
    half_life = timedelta(seconds=HALF_LIFE_SECONDS)
    b = _written_with_clock(writer, NOW - half_life, "fact", "bravo deploy key", importance=9, confidence=0.5)
    a = _written_with_clock(writer, NOW, "fact", "alpha deploy key", importance=4,
                            confidence=0.5 + 1.5 * (1 - 0.5 ** (150 / HALF_LIFE_SECONDS)))
    ending = writer.write("fact", "walrus colony deploy key, until shortly", importance=0, confidence=0.0,
                          sets=[f"valid_to={(NOW + timedelta(seconds=450)).isoformat()}Z"]).id
    writer.reindex()
    return a, b, ending


@pytest.mark.parametrize("later", [0, 60, 300, 599, 601, 7200, 40 * 86400, -3600])
def test_a_resident_cortex_answers_as_a_fresh_one_as_its_clock_moves(ranked_store, store, later):
    """The salience lane's contenders and the filters' masks are kept across calls: whatever the clock
    does between two calls (a few seconds, past the contenders' hold, days, backwards), the answers are
    those of a fresh Cortex at the same time."""
    _clock_moves(store, *ranked_store, later)


@pytest.mark.parametrize("later", [0, 300, 500, 601, 40 * 86400, -3600])
def test_a_resident_cortex_on_postgresql_answers_as_a_fresh_one_as_its_clock_moves(ranked_pg, later):
    """The same on PostgreSQL, where a resident storage keeps the salience contenders for a state of
    the store (its change counter) and the filters' valid times by how many lie before them."""
    _clock_moves(*ranked_pg, later)


def _clock_moves(store, a: str, b: str, ending: str, later: int) -> None:
    resident = _cx(store, resident=True)
    queries = [{"k": 1}, {"k": 2}, {"near": "deploy key", "k": 3}, {"near": "walrus colony"}, {"k": 3}]

    def answers(cx, at):
        cx.context.clock = lambda: at
        return [[h.to_json() for h in cx.find(FindQuery(**q))] for q in queries]

    first = answers(resident, NOW)
    assert first == answers(_cx(store), NOW)
    assert first[0][0]["id"] == a  # A leads at NOW ...
    assert ending in [h["id"] for h in first[3]]  # ... and the walrus fact has not ended
    at = NOW + timedelta(seconds=later)
    then = answers(resident, at)
    assert then == answers(_cx(store), at)
    if 150 < later:
        assert then[0][0]["id"] == b  # B overtook A
    if 450 <= later:
        assert ending not in [h["id"] for h in then[3]]  # its valid time ended
        assert ending in [h["id"] for h in first[4]] and ending not in [h["id"] for h in then[4]]


def test_a_resident_cortex_sees_another_process_write_between_two_calls(store):
    """A write made by another cortexctl process (the delta file rewritten) between two calls of a
    resident Cortex: the next call answers from the new delta, as a fresh Cortex does."""
    writer = _cx(store)
    lines = "".join(json.dumps({"type": "fact", "text": f"{WORDS[i % len(WORDS)]} note {i}"}) + "\n"
                    for i in range(EXACT_MAX + 200))
    writer.import_jsonl(io.BytesIO(lines.encode()))
    writer.reindex()
    writer.write("fact", "deploy key kept in the vault")  # a delta before the resident's first call
    resident = _cx(store, resident=True)
    query = FindQuery(near="walrus colony deploy key", k=5)
    before = [h.to_json() for h in resident.find(query)]
    assert [h.to_json() for h in resident.find(query)] == before  # from what it kept
    kept = resident.store.maps["search_parts"]
    proc = subprocess.run(cortexctl_argv() + ["write", "fact", "the walrus colony guards the deploy key",
                                              "--store", str(store), "--actor", "alice", "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    new = json.loads(proc.stdout)["id"]
    assert snapshot.state(store) == "current"  # answered through the new delta
    after = [h.to_json() for h in resident.find(FindQuery(near="walrus colony deploy key", k=5))]
    assert after == [h.to_json() for h in _cx(store).find(query)]
    assert after[0]["id"] == new and after != before
    assert resident.store.maps["search_parts"] is not kept


def test_what_a_resident_cortex_keeps_stays_bounded_as_its_clock_moves(ranked_store, store):
    """Every call brings a new time (the filters' end of validity is now): the parts keep one mask for
    the times before the one valid time of the store ends and one for those after (not one per time),
    what they keep stays bounded, and the answers stay a fresh Cortex's."""
    from cortexctl.store.snapshot import query

    resident = _cx(store, resident=True)
    for i in range(3 * query._KEEP_NODES):
        at = NOW + timedelta(seconds=7 * i)
        resident.context.clock = lambda: at
        got = [h.to_json() for h in resident.find(FindQuery(k=2))]
        for part in resident.store.maps["search_parts"].parts:
            assert len(part._memo) <= query._KEEP_NODES + 16
            assert len(part._masks) <= 2 and len(part._salient) <= 2
    fresh = _cx(store)
    fresh.context.clock = lambda: at
    assert got == [h.to_json() for h in fresh.find(FindQuery(k=2))]


@pytest.mark.parametrize("array", ["by_term_term", "by_term_start", "by_term_doc", "doc_number", "doc_head_row",
                                   "result_json", "data_blob", "head_session_code"])
def test_a_resident_cortex_on_a_damaged_snapshot_answers_as_a_fresh_one_every_time(store, array):
    """A block of the snapshot damaged before the resident Cortex maps it: each call meets the damage
    (nothing half-read is kept as if it were sound) and answers from DuckDB, as a fresh Cortex does."""
    from cortexctl.memory.terms import term_id, terms

    from tests import tamper

    writer = _cx(store)
    writer.import_jsonl(io.BytesIO("".join(  # words enough for the term list to span blocks of its own
        json.dumps({"type": "fact", "text": f"{WORDS[i % len(WORDS)]} {WORDS[i * 5 % len(WORDS)]} note {i} "
                    f"zq{i}x zr{i}y", "session": f"s{i % 4}",
                    **({"frames": [f"deliver:task:T-{i}"]} if i % 50 == 0 else {})}) + "\n"
        for i in range(3000)).encode()))
    writer.reindex()
    assert snapshot.state(store) == "current"
    path = store / snapshot.SNAPSHOT_NAME
    header, start = snapshot._header_of(path)
    offset = header["arrays"][array]["offset"]
    if array == "by_term_term":  # the entry of a term the query holds
        snap, _ = snapshot.open_current(store)
        try:
            at = int(snap.raw("by_term_term").searchsorted(term_id(terms("deploy")[0])))
        finally:
            snap.close()
        offset += header["arrays"][array]["nbytes"] // header["arrays"][array]["shape"][0] * at
    assert header["arrays"][array]["nbytes"] > 3
    tamper.flip_bytes(path, start + offset + 3)
    resident = _cx(store, resident=True)
    for query in [FindQuery(near="deploy key rotation", k=5), FindQuery(near="deploy", k=5)] * 2:
        want = [h.to_json() for h in _cx(store).find(query)]
        assert want and [h.to_json() for h in resident.find(query)] == want
