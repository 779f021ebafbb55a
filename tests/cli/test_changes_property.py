"""changes, as a property: over random sequences of writes, updates, tags, forgets and un-forgets
by two actors (one change a minute, on a fixed clock), every span (since, until] an actor asks
about lists exactly what a model of the sequence says, in order, and only memories it may see."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cortexctl import Cortex
from cortexctl.errors import CortexError

T0 = datetime(2026, 11, 20, 9, 0, 0)
ACTORS = ("alice", "bob")
TEXT = st.lists(st.sampled_from(["deploy", "key", "rotates", "weekly", "pager", "budget"]), min_size=1,
                max_size=4).map(" ".join)

OP = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(ACTORS), TEXT, st.sampled_from(["private", "public"])),
    st.tuples(st.just("update"), st.integers(0, 30), TEXT),
    st.tuples(st.just("tag"), st.integers(0, 30), st.sampled_from(["ops", "keys"])),
    st.tuples(st.just("forget"), st.integers(0, 30)),
    st.tuples(st.just("unforget"), st.integers(0, 30)),
)
CASE = dict(ops=st.lists(OP, min_size=1, max_size=14),
            spans=st.lists(st.tuples(st.integers(-1, 16), st.integers(-1, 16), st.sampled_from(ACTORS)), min_size=1,
                           max_size=4))


def _minute(i: int) -> datetime:
    return T0 + timedelta(minutes=i)


def _play(store, ops) -> tuple[list[tuple], dict[str, tuple[str, str]]]:
    """Apply ``ops`` (the i-th at minute i; one refused writes nothing); the model: (minute, kind,
    id, version, actor) of each change made, and id -> (owner, visibility)."""
    seed = Cortex(store=store, actor="alice")
    seed.context.clock = lambda: _minute(-5)  # before every span: the store exists whatever the ops
    made: list[tuple] = [(-5, "written", seed.write("fact", "the seed").id, 1, "alice")]
    memories: list[dict] = [{"id": made[0][2], "owner": "alice", "visibility": "private", "version": 1}]
    for i, op in enumerate(ops):
        m = memories[op[1] % len(memories)] if op[0] != "write" else None
        cx = Cortex(store=store, actor=op[1] if m is None else m["owner"])
        cx.context.clock = lambda at=_minute(i): at
        try:
            if op[0] == "write":
                r = cx.write("fact", op[2], visibility=op[3])
                memories.append({"id": r.id, "owner": op[1], "visibility": op[3], "version": 1})
                made.append((i, "written", r.id, 1, op[1]))
            elif op[0] == "update":
                r = cx.update(m["id"], op[2])
                if r.changed:
                    m["version"] = r.version
                    made.append((i, "updated", m["id"], r.version, m["owner"]))
            elif op[0] == "tag":
                if cx.tag(m["id"], add=[op[2]]).changed:
                    made.append((i, "changed", m["id"], None, m["owner"]))
            elif op[0] == "forget":
                cx.forget(m["id"], reason="gone")
                made.append((i, "forgotten", m["id"], None, m["owner"]))
            else:
                cx.unforget(m["id"])
                made.append((i, "unforgotten", m["id"], None, m["owner"]))
        except CortexError:
            pass  # changing a forgotten memory, forgetting twice, un-forgetting a live one: refused
    return made, {m["id"]: (m["owner"], m["visibility"]) for m in memories}


def _check(store, ops, spans) -> None:
    made, memories = _play(store, ops)
    for a, b, viewer in spans:
        since, until = min(a, b), max(a, b)
        cx = Cortex(store=store, actor=viewer)
        cx.context.clock = lambda: _minute(20)
        got = cx.changes(since=_minute(since).isoformat() + "Z", until=_minute(until).isoformat() + "Z")
        want = [(_minute(i), kind, id_, version, actor) for i, kind, id_, version, actor in made
                if since < i <= until and (memories[id_][0] == viewer or memories[id_][1] == "public")]
        assert [(c.at, c.kind, c.id, c.version, c.actor) for c in got.changes] == want, (since, until, viewer)


HEALTH = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]


@settings(max_examples=6, deadline=None, suppress_health_check=HEALTH)
@given(**CASE)
def test_every_span_lists_what_the_model_says_an_actor_may_see(tmp_path_factory, ops, spans):
    _check(tmp_path_factory.mktemp("changes") / "store", ops, spans)


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=HEALTH)
@given(**CASE)
def test_every_span_lists_what_the_model_says_an_actor_may_see_many_sequences(tmp_path_factory, ops, spans):
    _check(tmp_path_factory.mktemp("changes") / "store", ops, spans)
