"""find --as-of and show --as-of against a model: random histories of writes, updates, tag changes,
forgets, unforgets, grants and revokes by two actors and a sub-agent, on a clock advancing by random
steps; a model (plain dicts) is recorded after every step, and the store read back as of each of
those times must answer as the model did then.

Every text holds one word of ``WORDS`` and a word of its own (one per version), so a search for a
word of ``WORDS`` matches exactly the memories whose text of then holds it: query expansion from
the best results can only add words no other memory holds.
"""

from __future__ import annotations

import copy
from datetime import datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cortexctl import Cortex
from cortexctl.engine.results import FindQuery
from cortexctl.errors import NotFound

T0 = datetime(2026, 2, 2, 8, 0)
WORDS = ("amber", "basil", "cedar")
TAGS = ("ops", "db")
OWNERS = ("alice", "carol")
VIEWERS = ("alice", "carol", "bob")  # bob: the sub-agent both may grant to
KINDS = ("write", "write", "update", "tag", "forget", "unforget", "grant", "revoke")

STEP = st.tuples(st.sampled_from(KINDS), st.integers(0, 10_000), st.integers(0, 10_000), st.integers(1, 7200))
STEPS = st.lists(STEP, min_size=4, max_size=18)


class World:
    """The store and its model, step by step."""

    def __init__(self, store) -> None:
        self.now = T0
        self.cx = {}
        for actor in VIEWERS:
            cx = Cortex(store=store, actor=actor)
            cx.context.clock = lambda: self.now
            self.cx[actor] = cx
        self.memories: dict[str, dict] = {}  # id -> {actor, visibility, version, tags, tombstoned, word}
        self.grants: dict[str, dict] = {}  # id -> {granter, tags, live}
        self.seen: list[tuple[datetime, dict, dict]] = []  # (time, memories, grants) after each step
        self.serial = 0

    def text(self, word: str) -> str:
        self.serial += 1
        return f"{word} {'qxz'[self.serial % 3]}{self.serial:05d}"

    def step(self, kind: str, a: int, b: int, seconds: int) -> None:
        self.now += timedelta(seconds=seconds)
        live = sorted(i for i, m in self.memories.items() if not m["tombstoned"])
        gone = sorted(i for i, m in self.memories.items() if m["tombstoned"])
        if kind == "write":
            actor, word = OWNERS[a % 2], WORDS[b % 3]
            tags = sorted(t for i, t in enumerate(TAGS) if (a >> (i + 1)) & 1)
            visibility = ("private", "scoped", "public", "scoped")[(b >> 2) % 4]
            id_ = self.cx[actor].write("fact", self.text(word), tags=tags, visibility=visibility).id
            self.memories[id_] = {"actor": actor, "visibility": visibility, "version": 1, "tags": tags,
                                  "tombstoned": False, "word": word}
        elif kind == "update" and live:
            id_ = live[a % len(live)]
            m = self.memories[id_]
            m["word"] = WORDS[b % 3]
            self.cx[m["actor"]].update(id_, self.text(m["word"]))
            m["version"] += 1
        elif kind == "tag" and live:
            id_ = live[a % len(live)]
            m, tag = self.memories[id_], TAGS[b % 2]
            if tag in m["tags"]:
                self.cx[m["actor"]].tag(id_, remove=[tag])
                m["tags"] = [t for t in m["tags"] if t != tag]
            else:
                self.cx[m["actor"]].tag(id_, add=[tag])
                m["tags"] = sorted([*m["tags"], tag])
        elif kind == "forget" and live:
            id_ = live[a % len(live)]
            self.cx[self.memories[id_]["actor"]].forget(id_, reason="model")
            self.memories[id_]["tombstoned"] = True
        elif kind == "unforget" and gone:
            id_ = gone[a % len(gone)]
            self.cx[self.memories[id_]["actor"]].unforget(id_)
            self.memories[id_]["tombstoned"] = False
        elif kind == "grant":
            granter = OWNERS[a % 2]
            tags = sorted(t for i, t in enumerate(TAGS) if (b >> i) & 1)
            g = self.cx[granter].grant("bob", tags=tags)
            self.grants[g.id] = {"granter": granter, "tags": tags, "live": True}
        elif kind == "revoke":
            live_grants = sorted(i for i, g in self.grants.items() if g["live"])
            if not live_grants:
                return
            id_ = live_grants[a % len(live_grants)]
            self.cx[self.grants[id_]["granter"]].revoke(id_)
            self.grants[id_]["live"] = False
        else:
            return
        self.seen.append((self.now, copy.deepcopy(self.memories), copy.deepcopy(self.grants)))


def visible(viewer: str, m: dict, grants: dict) -> bool:
    if m["actor"] == viewer or m["visibility"] == "public":
        return True
    return m["visibility"] == "scoped" and any(
        g["live"] and g["granter"] == m["actor"] and viewer == "bob" and (not g["tags"] or set(g["tags"]) & set(m["tags"]))
        for g in grants.values())


def check(world: World) -> None:
    now = world.now + timedelta(seconds=1)
    for actor in VIEWERS:
        world.cx[actor].context.clock = lambda: now  # read after the last step
    times = [(T0 - timedelta(seconds=1), {}, {})] + world.seen
    for when, memories, grants in times:
        at = when.isoformat() + "Z"
        for viewer in VIEWERS:
            cx = world.cx[viewer]
            seen = {i: m for i, m in memories.items() if visible(viewer, m, grants)}
            for tombstoned in (True, False):
                hits = cx.find_as_of(FindQuery(k=1000, include_tombstoned=tombstoned), at)[0]
                want = {i: (m["version"], m["tags"], m["tombstoned"]) for i, m in seen.items()
                        if tombstoned or not m["tombstoned"]}
                assert {h.id: (h.version, h.tags, h.tombstoned) for h in hits} == want, (at, viewer, tombstoned)
            for word in WORDS[:2]:
                hits = cx.find_as_of(FindQuery(k=1000, near=word), at)[0]
                want = {i for i, m in seen.items() if not m["tombstoned"] and m["word"] == word}
                assert {h.id for h in hits if h.matched} == want, (at, viewer, word)
                assert all(h.version == seen[h.id]["version"] for h in hits)
        for id_, m in world.memories.items():
            owner = world.cx[m["actor"]]
            then = memories.get(id_)
            if then is None:
                with pytest.raises(NotFound):
                    owner.show_as_of(id_, at)
                continue
            shown, stood = owner.show_as_of(id_, at)
            assert (shown.version, shown.current_version, shown.tags, shown.tombstone is not None) == (
                then["version"], then["version"], then["tags"], then["tombstoned"]), (at, id_)
            assert shown.data["statement"].split()[0] == then["word"]


def _run(tmp_path_factory, steps, backend: str = "duckdb") -> None:
    if backend == "duckdb":
        location = str(tmp_path_factory.mktemp("asof") / "store")
    else:
        from tests.pg import store_uri

        location = store_uri("asofprop")  # a new schema for each example
    world = World(location)
    for s in steps:
        world.step(*s)
    if world.seen:
        check(world)


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                HealthCheck.too_slow])
@given(steps=STEPS)
def test_find_and_show_as_of_answer_as_the_model_did_then(tmp_path_factory, steps):
    _run(tmp_path_factory, steps)


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                HealthCheck.too_slow])
@given(steps=STEPS)
def test_find_and_show_as_of_answer_as_the_model_did_then_on_postgresql(tmp_path_factory, steps):
    _run(tmp_path_factory, steps, "postgres")


@pytest.mark.slow
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(steps=st.lists(STEP, min_size=10, max_size=40))
def test_find_and_show_as_of_answer_as_the_model_did_then_over_long_histories(tmp_path_factory, steps):
    _run(tmp_path_factory, steps)


@pytest.mark.slow
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                HealthCheck.too_slow])
@given(steps=st.lists(STEP, min_size=10, max_size=40))
def test_find_and_show_as_of_answer_as_the_model_did_then_over_long_histories_on_postgresql(tmp_path_factory, steps):
    _run(tmp_path_factory, steps, "postgres")
