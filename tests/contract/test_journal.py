"""Journal: every change, in one gap-free order."""

from __future__ import annotations

from tests.contract.conftest import T0, entry, ident


def test_journal_entries_get_consecutive_sequence_numbers_from_one(storage):
    with storage.transaction() as tx:
        assert tx.next_seq() == 1
        assert tx.append_journal([entry("write", ident(1), b"a"), entry("update", ident(1), b"b")]) == 1
        assert tx.next_seq() == 3
    with storage.transaction() as tx:
        assert tx.append_journal([entry("checkpoint", "i/s", b"c")]) == 3
    with storage.reading() as tx:
        assert tx.journal_bounds() == (3, 1, 3)
        assert tx.journal_gaps() == []
        assert list(tx.journal_entries(["update", "checkpoint"])) == [
            (2, "update", T0, "alice", ident(1), b"b"), (3, "checkpoint", T0, "alice", "i/s", b"c")]


def test_an_empty_journal_has_no_bounds_and_journal_entries_come_in_batches_in_order(storage):
    with storage.transaction() as tx:
        assert tx.journal_bounds() == (0, None, None)
        assert list(tx.journal_entries(["write"])) == []
        tx.append_journal([entry("write", ident(n), bytes([n])) for n in range(1, 6)])
    with storage.reading() as tx:
        assert [e[0] for e in tx.journal_entries(["write"], batch=2)] == [1, 2, 3, 4, 5]
        assert list(tx.journal_entries(["attest"])) == []
