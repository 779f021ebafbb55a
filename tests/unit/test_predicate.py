"""Visibility, the filters and salience are stated once (store/rules.py) and compiled twice: to SQL
for DuckDB and to numpy over the search snapshot's arrays (and over heads in hand, as ``find
--as-of`` replays them: ``engine/asof.Heads``). These tests hold them to the same
answers, bit for bit, on random stores and random viewers, grants, filters and scorings."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import datetime, timedelta

import duckdb
import numpy as np
import pytest

from cortexctl.engine import salience
from cortexctl.engine.asof import Heads
from cortexctl.store import migrations, predicate, records, rules
from cortexctl.store.interface import HEAD_FIELDS, Filters, Scoring, Viewer
from cortexctl.store.snapshot import format
from cortexctl.store.snapshot.builder import collect
from cortexctl.store.snapshot.delta import _MemSnap
from cortexctl.store.snapshot.format import SnapshotUnusable
from cortexctl.store.snapshot.query import _Part

STORES = 40
QUERIES_PER_STORE = 15  # 40 x 15 = 600 examples, each checked for visibility, filters and salience
ACTORS = ("alice", "bob", "carol", "dave")
TAGS = ("ops", "dev", "x", "y")
TYPES = (1, 2, 3, 6)
NOW = datetime(2026, 11, 23, 12, 0, 0, 123456)


def _ident(n: int) -> str:
    return f"01J{n:023d}"


def _time(r: random.Random, spread_days: float = 400.0) -> datetime:
    return NOW + timedelta(microseconds=r.randint(int(-spread_days * 86400e6), int(3600e6)))


def _head(r: random.Random, n: int) -> dict:
    updated = _time(r)
    return {
        "id": _ident(n), "type": r.choice(TYPES), "actor": r.choice(ACTORS),
        "visibility": r.choice(("private", "public", "scoped")),
        "tags": r.sample(TAGS, r.randint(0, 3)), "frames": [],
        "importance": r.randint(0, 10), "session": r.choice((None, None, "s1", "s2")),
        "current_version": 1, "created_at": updated - timedelta(days=1), "updated_at": updated,
        "short": f"memory {n}", "medium": f"memory {n} at length", "tombstone_reason": None,
        "tombstoned_at": updated if r.random() < 0.2 else None, "tombstoned_by": None,
        "access_count": r.choice((0, 1, r.randint(0, 50), r.randint(0, 10**9))),
        "citations": r.choice((0, 2, r.randint(0, 50), r.randint(0, 10**6))),
        "last_used": None if r.random() < 0.5 else _time(r),
        "confidence": r.choice((0.0, 1.0, r.random())),
        "valid_from": r.choice((None, None, *VALID_TIMES)), "valid_to": r.choice((None, None, *VALID_TIMES)),
        "supersedes": None, "superseded_by": None,
    }


# valid times are drawn from a few instants, so that a query's time often meets an interval's very end
VALID_TIMES = tuple(NOW + timedelta(hours=h) for h in range(-3, 4))


def _instant(r: random.Random) -> datetime:
    return r.choice(VALID_TIMES) + r.choice((timedelta(0), timedelta(0), timedelta(microseconds=r.choice((-1, 1)))))


def _scopes(r: random.Random) -> tuple:
    return tuple((r.choice((*ACTORS, "nobody")), tuple(r.sample(TYPES, r.randint(0, 2))),
                  tuple(r.sample((*TAGS, "unknown"), r.randint(0, 2)))) for _ in range(r.choice((0, 0, 1, 2, 3))))


def _filters(r: random.Random) -> Filters:
    return Filters(actor=r.choice((*ACTORS, "zed")), scopes=_scopes(r), types=tuple(r.sample(TYPES, r.randint(0, 2))),
                   tags=tuple(r.sample((*TAGS, "unknown"), r.choice((0, 0, 1, 2)))),
                   include_tombstoned=r.random() < 0.3, session=r.choice((None, None, "s1", "s3")),
                   valid_at=_instant(r) if r.random() < 0.4 else None,
                   ended_by=_instant(r) if r.random() < 0.5 else None)


def _scoring(r: random.Random) -> Scoring:
    w = [r.random() for _ in range(5)]
    if r.random() < 0.3:
        w[r.randrange(5)] = 0.0
    total = sum(w) or 1.0
    return Scoring(NOW + timedelta(microseconds=r.randint(-10**12, 10**12)),
                   r.choice((salience.HALF_LIFE_SECONDS, 3600.0, r.uniform(60.0, 90 * 86400.0))),
                   tuple(x / total for x in w))


def _store(r: random.Random):
    """An in-memory DuckDB of random heads, and the same heads as the snapshot's arrays."""
    con = duckdb.connect()
    migrations.migrate(con)
    heads = [_head(r, n) for n in range(1, r.randint(1, 60))]
    records.bulk_insert(con, "heads", HEAD_FIELDS, heads)
    part = _Part(_MemSnap.of(*collect(con)))
    heads.sort(key=lambda h: h["id"])
    ids = np.array([h["id"] for h in heads])
    return con, part, ids, Heads(heads)


def _sql_ids(con, where: str, params: list) -> set[str]:
    return {i for (i,) in con.execute(f"SELECT h.id FROM heads h WHERE {where}", params).fetchall()}


def test_sql_and_the_snapshot_agree_on_visibility_filters_and_salience_on_random_stores():
    """600 examples (40 random stores x 15 random queries). Each: the memories a random viewer
    (an actor and up to three grants' scopes, unknown granters and tags among them) sees, the
    memories random filters pass (types, tags, session, tombstones), and every memory's salience
    under a random scoring, as SQL and as the snapshot's numpy: the same sets, the same floats (==),
    and the same top of the salience order."""
    r = random.Random(20261125)
    examples = 0
    for _ in range(STORES):
        con, part, ids, held = _store(r)
        rows = np.arange(len(ids))
        for _ in range(QUERIES_PER_STORE):
            f = _filters(r)
            scoring = _scoring(r)
            where, params = records.visible_sql(f.viewer)
            assert set(ids[part.seen(f.viewer)].tolist()) == _sql_ids(con, where, params), f.viewer
            where, params = records.filter_sql(f)
            assert set(ids[part.mask(f)].tolist()) == _sql_ids(con, where, params), f
            sal_sql, sal_params = records.salience_sql(scoring)
            want = dict(con.execute(f"SELECT h.id, {sal_sql} FROM heads h", sal_params).fetchall())
            got = dict(zip(ids.tolist(), part.salience_rows(rows, scoring)))
            assert got == want, scoring
            # find --as-of evaluates the same rules over heads replayed from the journal
            assert set(ids[predicate.evaluate(rules.filters(f), held)].tolist()) == _sql_ids(con, where, params), f
            assert dict(zip(ids.tolist(), predicate.evaluate(rules.salience(scoring), held).tolist())) == want
            # the vectorised salience that picks the lane's contenders: far inside the room they are cut with
            approx = np.broadcast_to(predicate.evaluate(rules.salience(scoring), held, exact=False), (len(ids),))
            assert all(abs(a - want[i]) <= 1e-12 * max(1.0, abs(want[i])) for i, a in zip(ids.tolist(), approx.tolist()))
            limit = r.randint(1, 8)
            top_sql = records.top_salience(con, where, params, (sal_sql, sal_params), limit)
            top_np = [(i, s) for s, _, i in part.top_salience(f, scoring, limit)]
            assert top_np == top_sql
            examples += 1
        con.close()
    assert examples == STORES * QUERIES_PER_STORE >= 500


def test_valid_at_and_ended_by_treat_an_unset_end_as_open_and_valid_to_as_exclusive():
    """One memory per shape of interval, asked at its ends, in SQL and in the snapshot alike."""
    r = random.Random(5)
    con = duckdb.connect()
    migrations.migrate(con)
    t0, t1 = VALID_TIMES[1], VALID_TIMES[4]
    shapes = {1: (None, None), 2: (t0, None), 3: (None, t1), 4: (t0, t1)}
    heads = []
    for n, (vf, vt) in shapes.items():
        h = _head(r, n)
        h.update(actor="alice", tombstoned_at=None, valid_from=vf, valid_to=vt)
        heads.append(h)
    records.bulk_insert(con, "heads", HEAD_FIELDS, heads)
    part = _Part(_MemSnap.of(*collect(con)))
    ids = np.array([h["id"] for h in heads])
    before, after = t0 - timedelta(microseconds=1), t1 + timedelta(microseconds=1)
    cases = {(t0, None): {1, 2, 3, 4}, (before, None): {1, 3}, (t1, None): {1, 2}, (after, None): {1, 2},
             (None, t1): {1, 2}, (None, before): {1, 2, 3, 4}, (None, after): {1, 2}}
    for (at, ended), want in cases.items():
        f = Filters("alice", valid_at=at, ended_by=ended)
        where, params = records.filter_sql(f)
        expected = {_ident(n) for n in want}
        assert _sql_ids(con, where, params) == expected == set(ids[part.mask(f)].tolist()), (at, ended)
    con.close()


def test_a_comparison_is_for_the_valid_time_columns_only():
    with pytest.raises(TypeError):
        predicate.to_sql(predicate.Cmp(predicate.Col("actor"), "<", predicate.Const(NOW)))
    sql, params = predicate.to_sql(rules.not_ended(NOW), "h", "postgres")
    assert sql == "(NOT (h.valid_to IS NOT NULL AND h.valid_to <= %s::timestamp))" and params == [NOW]


def test_a_frame_filter_is_sql_only():
    with pytest.raises(predicate.Unsupported):
        predicate.evaluate(predicate.HasFrame("deliver"), object())
    sql, params = records.filter_sql(Filters("alice", frames=(("deliver", "project", None),)))
    assert "frames" in sql and params[-2:] == ["deliver", "project"]


def test_a_viewer_without_grants_sees_its_own_and_public_memories_in_sql_as_before():
    sql, params = records.visible_sql(Viewer("alice"))
    assert sql == "(h.actor = ? OR h.visibility = ?)" and params == ["alice", "public"]


def test_the_rules_use_the_salience_constants_of_the_engine():
    assert (rules.ACCESS_HALF, rules.CITATIONS_HALF) == (salience.ACCESS_HALF, salience.CITATIONS_HALF)


def test_heads_in_hand_answer_frame_filters():
    held = Heads([{"frames": ["build:repo:github.com/acme/api"]}, {"frames": ["deliver:file:x"]}, {"frames": []}])
    assert predicate.evaluate(predicate.HasFrame("build"), held).tolist() == [True, False, False]
    assert predicate.evaluate(predicate.HasFrame("build", "repo", "github.com/acme/web"), held).tolist() == [False] * 3
    assert predicate.evaluate(predicate.HasFrame("deliver", "file", "x"), held).tolist() == [False, True, False]


def _grouped_store(r: random.Random):
    """A store whose heads share salience's columns in few ways (long groups, some of them wholly
    forgotten) and whose recency takes few values (ties along a group), held twice: with the
    salience groups a written file keeps (``format.salient_groups``) and without them."""
    con = duckdb.connect()
    migrations.migrate(con)
    times = [_time(r) for _ in range(r.randint(1, 12))]
    heads = []
    for n in range(1, r.randint(30, 300)):
        h = _head(r, n)
        h.update(importance=r.choice((3, 7)), access_count=r.choice((0, 5)), citations=r.choice((0, 0, 2)),
                 confidence=r.choice((0.5, 1.0)), updated_at=r.choice(times), last_used=None)
        h["created_at"] = h["updated_at"] - timedelta(days=1)
        heads.append(h)
    records.bulk_insert(con, "heads", HEAD_FIELDS, heads)
    arrays, extras = collect(con)
    groups = format.salient_groups(arrays)
    assert groups is not None
    grouped = _Part(_MemSnap.of({**arrays, "salient_order": groups[0], "salient_start": groups[1]}, extras))
    return con, grouped, _Part(_MemSnap.of(arrays, extras))


def test_the_salience_groups_give_the_lane_every_contender_the_whole_mask_gives(monkeypatch):
    """The salience lane of a file with salience groups looks at the start of each group (its most
    recent heads) rather than at every head. On random stores of long groups with tied recency
    (recency weights of 0 among the scorings: a whole group ties), random filters, scorings and
    limits: its contenders hold every contender the whole mask gives, and its top is SQL's."""
    monkeypatch.setattr(format, "SALIENT_FROM", 1)
    monkeypatch.setattr(format, "SALIENT_GROUP_MIN", 1)
    r = random.Random(20261128)
    grouped_runs = 0
    for _ in range(40):
        con, grouped, whole = _grouped_store(r)
        for _ in range(10):
            f = _filters(r)
            scoring = _scoring(r)
            if r.random() < 0.3:
                scoring = replace(scoring, weights=(0.0, *scoring.weights[1:]))
            limit = r.randint(1, 8)
            now = predicate.epoch_seconds(scoring.now)
            want = whole._contenders(f, scoring, limit, now)
            got = grouped._contenders(f, scoring, limit, now)
            assert set(want.rows.tolist()) <= set(got.rows.tolist())
            where, params = records.filter_sql(f)
            top_sql = records.top_salience(con, where, params, records.salience_sql(scoring), limit)
            assert [(i, s) for s, _, i in grouped.top_salience(f, scoring, limit)] == top_sql
            if np.count_nonzero(grouped.mask(f)) > limit:  # else every row of the mask is a contender
                hold, fall = rules.salient_fall(scoring)
                grouped_runs += grouped._grouped_contenders(grouped.mask(f), rules.salience(scoring), scoring, limit,
                                                            fall, hold) is not None
        con.close()
    assert grouped_runs >= 80  # the rest pass `limit` or fewer heads: each of them is a contender


def test_a_salience_order_naming_no_head_makes_the_file_unusable(monkeypatch):
    monkeypatch.setattr(format, "SALIENT_FROM", 1)
    monkeypatch.setattr(format, "SALIENT_GROUP_MIN", 1)
    con = duckdb.connect()
    migrations.migrate(con)
    r = random.Random(7)
    records.bulk_insert(con, "heads", HEAD_FIELDS, [_head(r, n) for n in range(1, 40)])
    arrays, extras = collect(con)
    order, starts = format.salient_groups(arrays)
    order[len(order) // 2] = len(order) + 5
    part = _Part(_MemSnap.of({**arrays, "salient_order": order, "salient_start": starts}, extras))
    scoring = Scoring(NOW, salience.HALF_LIFE_SECONDS, salience.DEFAULT_WEIGHTS)
    with pytest.raises(SnapshotUnusable, match="salience order"):
        part.top_salience(Filters(actor="alice", include_tombstoned=True), scoring, 1)
