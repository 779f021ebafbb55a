"""Journal: every change, in one gap-free order."""

from __future__ import annotations

from datetime import timedelta

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


def test_seq_at_is_the_last_entry_stamped_at_or_before_a_time(storage):
    hour = timedelta(hours=1)
    with storage.transaction() as tx:
        assert tx.seq_at(T0) == 0
        tx.append_journal([entry("write", ident(1), at=T0), entry("update", ident(1), at=T0 + hour),
                           entry("update", ident(1), at=T0 + 2 * hour)])
    with storage.reading() as tx:
        assert tx.seq_at(T0 - hour) == 0
        assert tx.seq_at(T0) == 1
        assert tx.seq_at(T0 + hour + timedelta(microseconds=1)) == 2
        assert tx.seq_at(T0 + 5 * hour) == 3


def test_journal_window_keeps_a_range_of_kinds_and_refs_in_order_across_batches(storage):
    with storage.transaction() as tx:
        tx.append_journal([entry("write", ident(n), bytes([n])) for n in range(1, 6)]
                          + [entry("update", ident(2), b"u"), entry("checkpoint", "i/s", b"c"),
                             entry("tombstone", ident(4), b"t")])
    with storage.reading() as tx:
        assert [e[0] for e in tx.journal_window()] == list(range(1, 9))
        assert [e[0] for e in tx.journal_window(after=2, upto=6, batch=2)] == [3, 4, 5, 6]
        assert [e[0] for e in tx.journal_window(kinds=["update", "tombstone"])] == [6, 8]
        assert list(tx.journal_window(after=1, refs=[ident(2), ident(4)], batch=1)) == [
            (2, "write", T0, "alice", ident(2), bytes([2])), (4, "write", T0, "alice", ident(4), bytes([4])),
            (6, "update", T0, "alice", ident(2), b"u"), (8, "tombstone", T0, "alice", ident(4), b"t")]
        assert list(tx.journal_window(refs=[])) == []
        assert list(tx.journal_window(after=8)) == []


def test_journal_window_without_payloads_gives_the_same_entries_with_empty_payloads(storage):
    with storage.transaction() as tx:
        tx.append_journal([entry("write", ident(n), bytes([n]) * 50) for n in range(1, 4)])
    with storage.reading() as tx:
        whole = list(tx.journal_window(kinds=["write"]))
        bare = list(tx.journal_window(kinds=["write"], payloads=False))
        assert [e[:5] for e in bare] == [e[:5] for e in whole] and {e[5] for e in bare} == {b""}
        assert list(tx.journal_window(refs=[ident(2)], payloads=False)) == [(2, "write", T0, "alice", ident(2), b"")]


def test_a_journal_memo_lives_only_while_no_commit_comes(storage):
    """``journal_memo``: None (the backend keeps nothing), or a dict that a resident storage's views
    hand back again while the store stays as it is, and never again once a commit has come."""
    from cortexctl.store import open_storage

    with storage.transaction() as tx:
        tx.append_journal([entry("write", ident(1), b"a")])
    storage.update_index("hash-test")  # what a fold leaves: a backend's search cache, current
    resident = open_storage(storage.location, wait=5.0, resident=True)
    try:
        memos = []
        for _ in range(2):
            with resident.searching() as tx:
                memos.append(tx.journal_memo())
        with storage.reading() as tx:
            assert tx.journal_memo() is None  # the database itself: no cheap word that nothing changed
        if memos[0] is None:
            assert memos == [None, None] and storage.local_dir() is None  # DuckDB's snapshot keeps one
            return
        assert memos[1] is memos[0]
        memos[0]["mine"] = 1
        with storage.transaction() as tx:
            tx.append_journal([entry("update", ident(1), b"b")])
        with resident.searching() as tx:
            after = tx.journal_memo()
        assert after is None or (after is not memos[0] and "mine" not in after)
    finally:
        getattr(resident, "close", lambda: None)()
