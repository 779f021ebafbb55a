"""A resident Cortex (the one `cortexctl mcp` keeps) keeps the index view and the snapshot mappings (its store's maps)
between calls, and answers exactly as a fresh Cortex does after every kind of change by others."""

from __future__ import annotations

import io
import json
from datetime import datetime

import pytest

from cortexctl import Cortex
from cortexctl.engine.results import FindQuery
from cortexctl.store.vector_index import EXACT_MAX
from cortexctl.store import snapshot

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
    kept_view = resident.store.maps["index_view"][1]
    kept_snap = resident.store.maps[str(store / snapshot.SNAPSHOT_NAME)][1]
    same()  # the second time from what was kept
    assert resident.store.maps["index_view"][1] is kept_view
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
    assert resident.store.maps["index_view"][1] is not kept_view

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
