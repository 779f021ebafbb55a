"""Feedback: learned salience weights, rate buckets and checkpoints."""

from __future__ import annotations

from datetime import timedelta

from tests.contract.conftest import T0, WEIGHTS


def test_learned_weights_are_none_until_set_and_count_their_steps(storage):
    with storage.transaction() as tx:
        assert tx.weights("alice") is None
        tx.set_weights("alice", WEIGHTS, seq=2, at=T0)
        tx.set_weights("alice", (0.1, 0.2, 0.3, 0.2, 0.2), seq=4, at=T0 + timedelta(seconds=1))
        tx.set_weights("bob", WEIGHTS, seq=6, at=T0)
    with storage.reading() as tx:
        assert tx.weights("alice") == (0.1, 0.2, 0.3, 0.2, 0.2)
        assert tx.all_weights()["alice"] == {"weights": (0.1, 0.2, 0.3, 0.2, 0.2), "steps": 2, "seq": 4,
                                             "updated_at": T0 + timedelta(seconds=1)}
        assert set(tx.all_weights()) == {"alice", "bob"}


def test_a_rate_bucket_gives_its_burst_refills_and_forgives_a_clock_step_back(storage):
    with storage.transaction() as tx:
        take = lambda at, intent="i", actor="alice": tx.take_token(actor, intent, at, rate=1.0, burst=5.0)  # noqa: E731
        assert [take(T0) for _ in range(6)] == [True] * 5 + [False]
        assert take(T0 + timedelta(milliseconds=900)) is False
        assert take(T0 + timedelta(seconds=1)) is True
        assert take(T0, intent="other") is True and take(T0, actor="bob") is True
        assert take(T0 - timedelta(hours=1)) is True


def test_a_checkpoint_is_stored_replaced_and_listed(storage):
    row = {"actor": "alice", "intent": "i", "step": "s", "created_at": T0, "seq": 1, "record": b"r1"}
    with storage.transaction() as tx:
        assert tx.checkpoint("alice", "i", "s") is None
        tx.put_checkpoint(row)
        tx.put_checkpoint({**row, "seq": 2, "record": b"r2"})
        tx.put_checkpoint({**row, "step": "t", "seq": 3})
    with storage.reading() as tx:
        assert tx.checkpoint("alice", "i", "s") == {**row, "seq": 2, "record": b"r2"}
        assert tx.checkpoint("bob", "i", "s") is None
        assert set(tx.all_checkpoints()) == {("alice", "i", "s"), ("alice", "i", "t")}
