"""The sample corpus imports whole, every type is findable, and the store verifies."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from cortexctl.memory.types import TYPES
from tests.conftest import assert_store_verifies

SAMPLE = Path(__file__).resolve().parents[2] / "fixtures" / "sample.jsonl"


def test_sample_corpus_imports_and_every_type_is_findable(cli, store):
    r = cli("import", SAMPLE, "--json")
    assert r.code == 0 and r.json()["imported"] == 16, r
    found = cli("find", "-k", "100", "--json").json()["results"]
    assert set(Counter(h["type"] for h in found)) == set(TYPES)
    hard = cli("find", "--type", "constraint", "--form", "medium", "--json").json()["results"]
    assert any("strength: hard" in h["text"] for h in hard)
    event = next(h for h in found if "0x9f3c2a7b1e4d8c6f" in h["text"])
    assert event["type"] == "event"
    assert_store_verifies(store)
