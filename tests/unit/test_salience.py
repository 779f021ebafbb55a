"""Salience and the learned weights: one formula in SQL and Python, the EMA step, replay in verify."""

from __future__ import annotations

import shutil
from datetime import datetime, timedelta

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cortexctl import Cortex, FindQuery
from cortexctl.engine import salience
from cortexctl.store import records
from cortexctl.store.interface import Scoring
from tests import tamper
from tests.conftest import assert_clean_error, clean_environment

unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
weights = st.lists(st.floats(min_value=0.0, max_value=1.0, allow_nan=False), min_size=5, max_size=5).filter(
    lambda w: sum(w) > 0.01).map(lambda w: tuple(x / sum(w) for x in w))


@settings(max_examples=60, deadline=None)
@given(
    age_s=st.floats(min_value=-3600, max_value=400 * 86400, allow_nan=False),
    used_s=st.none() | st.floats(min_value=-3600, max_value=400 * 86400, allow_nan=False),
    importance=st.integers(0, 10), access=st.integers(0, 10**6), citations=st.integers(0, 10**6),
    confidence=unit, w=weights, forgotten=st.booleans(),
)
@pytest.mark.slow
def test_the_sql_salience_is_the_documented_python_formula(age_s, used_s, importance, access, citations,
                                                          confidence, w, forgotten):
    now = datetime(2026, 6, 1, 12, 0, 0)
    head = {
        "updated_at": now - timedelta(seconds=age_s),
        "last_used": None if used_s is None else now - timedelta(seconds=used_s),
        "importance": importance, "access_count": access, "citations": citations, "confidence": confidence,
        "tombstoned_at": now if forgotten else None,
    }
    con = duckdb.connect()
    con.execute("CREATE TABLE heads (updated_at TIMESTAMP, last_used TIMESTAMP, importance UTINYINT,"
                " access_count UBIGINT, citations UBIGINT, confidence DOUBLE, tombstoned_at TIMESTAMP)")
    con.execute("INSERT INTO heads VALUES (?, ?, ?, ?, ?, ?, ?)", [
        head["updated_at"], head["last_used"], importance, access, citations, confidence, head["tombstoned_at"]])
    sql, params = records.salience_sql(Scoring(now, salience.HALF_LIFE_SECONDS, w))
    sql = con.execute(f"SELECT {sql} FROM heads h", params).fetchall()[0][0]
    py = salience.score(salience.factors(head, now), w)
    assert sql == pytest.approx(py, abs=1e-9)
    assert 0.0 <= py <= 1.0 + 1e-12
    if forgotten:
        assert py == 0.0


def test_factors_follow_the_documented_curves():
    now = datetime(2026, 6, 1)
    head = {"updated_at": now - timedelta(days=30), "last_used": None, "importance": 7, "access_count": 5,
            "citations": 3, "confidence": 0.8, "tombstoned_at": None}
    assert salience.factors(head, now) == pytest.approx((0.5, 0.7, 0.5, 0.5, 0.8))
    head["last_used"] = now  # an attest refreshes recency
    assert salience.factors(head, now)[0] == 1.0


@settings(max_examples=200, deadline=None)
@given(prev=weights, p=st.lists(unit, min_size=5, max_size=5),
       outcome=st.sampled_from(salience.OUTCOMES),
       reason=st.sampled_from([None, "factual_error", "wrong_assumption", "timeout"]),
       affected=st.integers(0, 3))
def test_an_ema_step_keeps_weights_a_distribution_and_moves_toward_its_target(prev, p, outcome, reason, affected):
    step = salience.ema_step(prev, p, outcome, reason, affected)
    assert all(w >= 0 for w in step.weights)
    assert sum(step.weights) == pytest.approx(1.0, abs=1e-12)
    blamed = outcome == "failure" and reason in salience.BLAMING_REASONS
    if affected == 0 or not (outcome == "success" or blamed):
        assert step.skipped and step.weights == prev
        return
    target = list(p) if outcome == "success" else [1 - x for x in p]
    if sum(target) == 0:
        assert step.skipped == "the factor profile is all zero" and step.weights == prev
        return
    assert step.skipped is None
    t = [x / sum(target) for x in target]
    for w0, w1, ti in zip(prev, step.weights, t):
        assert abs(w1 - ti) <= abs(w0 - ti) + 1e-12  # each weight closer to the target
    assert step.weights == salience.ema_step(prev, p, outcome, reason, affected).weights  # deterministic


def test_success_shifts_weight_toward_what_the_helpful_memories_had(store):
    cx = Cortex(store=store, actor="alice")
    important = cx.write("fact", "very important, never used", importance=10).uri
    r = cx.attest("i", "success", [important])
    assert r.new_weights[1] > r.previous_weights[1]  # importance
    assert r.new_weights[2] < r.previous_weights[2]  # access was 0 before the bump
    assert Cortex(store=store, actor="bob").attest("i", "success", ["cortex://m/xyz"]).previous_weights == \
        salience.DEFAULT_WEIGHTS  # weights are per actor


def test_find_ranks_the_salience_lane_by_the_actors_weights(store):
    cx = Cortex(store=store, actor="alice")
    cited = cx.write("fact", "cited often", importance=2).uri
    loud = cx.write("fact", "declared important", importance=9).uri
    assert [h.uri for h in cx.find(FindQuery(k=2))] == [loud, cited]
    for i in range(12):
        cx.attest(f"i{i}", "success", [cited])
    hits = cx.find(FindQuery(k=2))
    assert [h.uri for h in hits] == [cited, loud]
    assert hits[0].salience > hits[1].salience
    cx.forget(cited, reason="gone")
    assert [h.salience for h in cx.find(FindQuery(k=5, include_tombstoned=True)) if h.uri == cited] == [0.0]


# -- verify replays the feedback -----------------------------------------------------
@pytest.fixture(scope="module")
def fed_once(tmp_path_factory):
    base = tmp_path_factory.mktemp("fed")
    store = base / "store"
    with clean_environment(base):
        cx = Cortex(store=store, actor="alice")
        a = cx.write("fact", "alpha").uri
        b = cx.write("fact", "beta", importance=8).uri
        cx.attest("i1", "success", [a, b])
        cx.attest("i2", "failure", [a], reason="factual_error")
        cx.update(a, "alpha two")
        cx.attest("i3", "failure", [b], reason="timeout")
        Cortex(store=store, actor="bob").attest("i1", "success", ["cortex://m/xyz"])
        cx.compact("i1", "s1", 1000, [a, b])
        assert cx.verify().ok, cx.verify().problems
    return store, {"a": a.rsplit("/", 1)[1], "b": b.rsplit("/", 1)[1]}


@pytest.fixture
def fed(store, fed_once):
    """Attests by two actors, an update and a checkpoint: built once per module, copied per test."""
    template, ids = fed_once
    shutil.copytree(template, store)
    return Cortex(store=store, actor="alice"), dict(ids)


FEEDBACK_TAMPERING = {
    "citations bumped": ("UPDATE heads SET citations = citations + 1 WHERE id = $a", "citations"),
    "access count reset": ("UPDATE heads SET access_count = 0 WHERE id = $b", "access_count"),
    "last use moved": ("UPDATE heads SET last_used = last_used + INTERVAL 1 SECOND WHERE id = $a", "last_used"),
    "weights nudged": ("UPDATE learned_weights SET recency = recency + 1e-12 WHERE actor = 'alice'", "weights"),
    "weights steps edited": ("UPDATE learned_weights SET steps = 1 WHERE actor = 'alice'", "steps"),
    "weights row deleted": ("DELETE FROM learned_weights WHERE actor = 'bob'", "none are stored"),
    "weights row added": ("INSERT INTO learned_weights SELECT * REPLACE ('carol' AS actor) FROM learned_weights"
                          " WHERE actor = 'bob'", "never learned"),
    "learn_weights entry turned into another kind": (
        "UPDATE journal SET kind = 'update_head' WHERE seq = (SELECT min(seq) FROM journal"
        " WHERE kind = 'learn_weights')", "not immediately followed"),
    "attest entry deleted": ("DELETE FROM journal WHERE seq = (SELECT max(seq) FROM journal WHERE kind = 'attest')",
                             "does not immediately follow"),
    "checkpoint record edited": ("UPDATE checkpoints SET record = record || '\\x00'::BLOB", "differs"),
    "checkpoint deleted": ("DELETE FROM checkpoints", "missing from the store"),
}


@pytest.mark.parametrize("what", list(FEEDBACK_TAMPERING))
def test_verify_replays_counters_weights_and_checkpoints(fed, store, cli, what):
    cx, ids = fed
    statement, needle = FEEDBACK_TAMPERING[what]
    for key, value in ids.items():
        statement = statement.replace(f"${key}", f"'{value}'")
    tamper.sql(store, statement)
    report = cx.verify()
    assert not report.ok, what
    assert any(needle in p.message for p in report.problems), [str(p) for p in report.problems]
    r = cli("verify")
    assert r.code == 7, r


def test_a_forged_weight_step_is_named_as_the_first_divergence(fed, store):
    cx, _ = fed
    def swap(doc):
        doc["new"] = [doc["new"][1], doc["new"][0], *doc["new"][2:]]  # same sum, different weights

    seq = tamper.edit_payload(store, "learn_weights", swap, actor="alice")
    messages = [p.message for p in cx.verify().problems]
    assert f"journal entry {seq} (learn_weights) records weights" in messages[0] or any(
        f"journal entry {seq} (learn_weights) records weights" in m for m in messages), messages
    assert sum("learn_weights" in m for m in messages) == 1  # later entries of the actor are not piled on


def test_a_store_edit_in_attest_counters_is_an_integrity_failure_from_the_cli(fed, store, cli):
    _, ids = fed
    tamper.set_field(store, ids["b"], "citations", 99)
    r = cli("verify")
    assert r.code == 7 and "citations" in r.out + r.err


def test_rate_limit_refusal_is_exit_5_with_one_line(cli, store):
    uri = cli("write", "fact", "x").out.strip()
    cx = Cortex(store=store, actor="alice")
    now = cx.context.clock()
    cx.context.clock = lambda: now  # the six calls at one moment: no refill between them, however slow
    for _ in range(5):
        cx.attest("burst", "success", [uri])
    from cortexctl.errors import RateLimited

    with pytest.raises(RateLimited):
        cx.attest("burst", "success", [uri])
    assert cx.show(uri).access_count == 5
    r = cli("attest", "--intent", "burst2", "--outcome", "nope", uri)
    assert_clean_error(r, 2)


def test_a_forged_factor_profile_is_caught_even_with_consistent_weights(fed, store):
    cx, _ = fed
    def halve(doc):
        doc["profile"] = [x * 0.5 for x in doc["profile"]]  # the step is skipped (timeout): weights unchanged

    seq = tamper.edit_payload(store, "learn_weights", halve, actor="alice", last=True)
    messages = [p.message for p in cx.verify().problems]
    assert messages == [f"journal entry {seq} (learn_weights) stamps a factor profile that the replayed memories"
                        " do not give"], messages


def test_the_token_bucket_refills_and_survives_a_clock_step_back(store):
    cx = Cortex(store=store, actor="alice")
    cx.write("fact", "x")  # creates the tables
    with cx.store.transaction() as tx:
        t0 = datetime(2026, 1, 1, 12, 0, 0)
        take = lambda at: tx.take_token("alice", "i", at, rate=1.0, burst=5.0)  # noqa: E731
        assert [take(t0) for _ in range(6)] == [True] * 5 + [False]
        assert take(t0 + timedelta(milliseconds=900)) is False
        assert take(t0 + timedelta(seconds=1)) is True
        assert take(t0 + timedelta(seconds=1)) is False
        assert tx.take_token("alice", "other", t0, rate=1.0, burst=5.0) is True
        assert tx.take_token("bob", "i", t0, rate=1.0, burst=5.0) is True
        # The clock goes back an hour: the bucket stamped in the future counts as full.
        assert take(t0 - timedelta(hours=1)) is True
        # Buckets full again are pruned.
        take(t0 + timedelta(hours=2))
    assert tamper.count(store, "rate_buckets") == 1


def test_a_journaled_head_without_salience_fields_is_a_replay_problem_not_a_crash(fed, store, cli):
    _, ids = fed
    tamper.edit_payload(store, "write", lambda doc: doc["head"].pop("importance"), ref=ids["a"])
    r = cli("verify")
    assert r.code == 7, r
    assert "missing salience fields" in r.out + r.err
