"""restore --mode merge, as a property: merging a bundle twice equals merging it once, the result
verifies, and merging it into an empty store gives the store as it was when the bundle was made."""

from __future__ import annotations

import io

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
import pytest

from cortexctl import Cortex
from cortexctl.errors import CortexError
from tests.conftest import assert_store_verifies

pytestmark = pytest.mark.slow  # many random stores, backed up and merged

WORDS = st.sampled_from(["deploy", "key", "rotates", "weekly", "bob", "on-call", "latency", "budget", "tabs", "main"])
TEXT = st.lists(WORDS, min_size=1, max_size=5).map(" ".join)
TAG = st.sampled_from(["ops", "people", "ci", "keys"])

OP = st.one_of(
    st.tuples(st.just("write"), TEXT, st.lists(TAG, max_size=2, unique=True)),
    st.tuples(st.just("update"), st.integers(0, 20), TEXT),
    st.tuples(st.just("tag"), st.integers(0, 20), TAG),
    st.tuples(st.just("forget"), st.integers(0, 20)),
)
OPS = st.lists(OP, min_size=1, max_size=8)


def _apply(cx: Cortex, uris: list[str], ops) -> None:
    for op in ops:
        try:
            if op[0] == "write":
                uris.append(cx.write("fact", op[1], tags=op[2]).uri)
            elif not uris:
                continue
            elif op[0] == "update":
                cx.update(uris[op[1] % len(uris)], op[2])
            elif op[0] == "tag":
                cx.tag(uris[op[1] % len(uris)], add=[op[2]])
            else:
                cx.forget(uris[op[1] % len(uris)], reason="gone")
        except CortexError:
            pass  # e.g. changing a forgotten memory: refused, nothing written


def _export(cx: Cortex) -> str:
    sink = io.BytesIO()
    cx.export_jsonl(sink)
    return sink.getvalue().decode()


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(before=OPS, after=OPS)
def test_merging_a_bundle_twice_equals_once_and_into_an_empty_store_gives_the_store_at_bundle_time(
        tmp_path_factory, before, after):
    base = tmp_path_factory.mktemp("merge")
    a = Cortex(store=base / "a", actor="alice")
    uris: list[str] = []
    a.write("fact", "the first memory", tags=["ops"])
    _apply(a, uris, before)
    at_bundle = _export(a)
    bundle = a.backup(dest=base / "bundles").path
    _apply(a, uris, after)

    first = a.restore(bundle, mode="merge")
    assert first.conflicts == []
    once = _export(a)
    assert_store_verifies(base / "a")
    again = a.restore(bundle, mode="merge")
    assert again.conflicts == []
    assert _export(a) == once
    assert_store_verifies(base / "a")

    b = Cortex(store=base / "b", actor="alice")
    b.restore(bundle, mode="merge")
    assert _export(b) == at_bundle
    assert_store_verifies(base / "b")
