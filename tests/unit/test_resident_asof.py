"""``find --as-of`` in a resident Cortex (the one `cortexctl mcp` keeps) keeps the replayed past of each
record time while the store stays as it is (``Tx.journal_memo``), and answers exactly as a fresh Cortex
does, before and after every kind of change made by another Cortex."""

from __future__ import annotations

import io
import json
from datetime import datetime, timedelta

import pytest

from cortexctl import Cortex
from cortexctl.engine.results import FindQuery
from cortexctl.store import snapshot

pytestmark = pytest.mark.slow  # a history, then every change, each compared with a fresh Cortex

START = datetime(2026, 11, 20, 9, 0, 0)
NOW = datetime(2026, 11, 23, 12, 0, 0)
WORDS = "deploy key rotation friday latency budget payments owner oncall bastion credentials lock".split()
QUERIES = [{"near": "deploy key rotation"}, {}, {"near": "owner oncall", "tags": ["t1"], "k": 20}]


def _cx(store, actor: str = "alice", *, resident: bool = False, at: datetime = NOW) -> Cortex:
    cx = Cortex(store=store, actor=actor, resident=resident)
    cx.context.clock = lambda: at
    return cx


def _answers(cx: Cortex, times: list[datetime]) -> list:
    out = []
    for t in times:
        for q in QUERIES:
            hits, _notes, as_of = cx.find_as_of(FindQuery(**q), t)
            out.append((as_of.seq, [h.to_json() for h in hits]))
    return out


def test_a_resident_cortex_answers_as_of_a_time_as_a_fresh_one_after_every_change(store):
    clock = [START]
    writer = Cortex(store=store, actor="alice")
    writer.context.clock = lambda: clock[0]
    lines = "".join(json.dumps({"type": "fact", "text": f"{WORDS[i % len(WORDS)]} {WORDS[i * 7 % len(WORDS)]} "
                                f"note {i}", "tags": [f"t{i % 3}"]}) + "\n" for i in range(150))
    writer.import_jsonl(io.BytesIO(lines.encode()))
    ids = [h.id for h in writer.find(FindQuery(k=150))]
    for step, id_ in enumerate(ids[:24]):  # a history: each hour something changes
        clock[0] = START + timedelta(hours=step + 1)
        if step % 4 == 0:
            writer.update(id_, f"deploy key rotation changed at step {step}")
        elif step % 4 == 1:
            writer.tag(id_, add=["t1"])
        elif step % 4 == 2:
            writer.forget(id_, reason="stale")
        else:
            writer.attest("rotate", "success", [f"cortex://alice/{id_}"])
    clock[0] = START + timedelta(hours=30)
    writer.reindex()
    assert snapshot.state(store) == "current"
    times = [START + timedelta(hours=h, minutes=30) for h in (0, 11, 23)]
    resident = _cx(store, resident=True)

    def same() -> None:
        assert snapshot.state(store) == "current"  # read through the snapshot and its delta
        assert _answers(resident, times) == _answers(_cx(store), times)

    same()
    kept = resident.store.maps
    same()  # the second time from the pasts kept
    pasts = [v for v in kept.values() if hasattr(v, "memo")]
    assert pasts and len(pasts[0].memo["asof.pasts"]) == 3  # every record time asked for was kept

    # another Cortex's changes of every kind, each after the times asked for: the pasts kept are let
    # go and the memories changed now join as they stood then
    clock[0] = START + timedelta(hours=40)
    writer.update(ids[30], "deploy key rotation, weekly now")
    same()
    writer.tag(ids[31], add=["t1"])
    same()
    writer.forget(ids[32], reason="stale")
    same()
    hits = writer.find(FindQuery(near="latency budget", k=2))
    writer.attest("budget", "success", [h.uri for h in hits])
    same()
    writer.grant("bob", types=["fact"])
    assert _answers(_cx(store, "bob", resident=True), times) == _answers(_cx(store, "bob"), times)
    writer.write("fact", "deploy key rotation note written after every time asked for")
    same()
