"""Grants: what a sub-agent may see of its granter's ``scoped`` memories."""

from __future__ import annotations

from datetime import timedelta

import pytest

from cortexctl.errors import IntegrityError
from cortexctl.store.interface import Filters, Viewer
from tests.contract.conftest import FACT, GOAL, T0, grant, grant_id, ident, memory, put


def test_grants_are_stored_listed_revoked_and_live_until_they_expire(storage):
    with storage.transaction() as tx:
        tx.insert_grant(grant(1, "alice", "bob", types=(FACT,), tags=("ops",), expires=T0 + timedelta(hours=2)))
        tx.insert_grant(grant(2, "alice", "carol"))
        tx.insert_grant(grant(3, "carol", "bob"))
    with storage.transaction() as tx:
        tx.revoke_grant(grant_id(3), at=T0 + timedelta(minutes=5), by="carol")
    with pytest.raises(IntegrityError), storage.transaction() as tx:
        tx.insert_grant(grant(1, "x", "y"))
    with storage.reading() as tx:
        assert [g["id"] for g in tx.live_grants("bob", T0 + timedelta(hours=1))] == [grant_id(1)]
        assert tx.live_grants("bob", T0 + timedelta(hours=2)) == []  # expired at its expiry
        assert tx.live_grants("bob", T0 + timedelta(hours=1))[0] == grant(
            1, "alice", "bob", types=(FACT,), tags=("ops",), expires=T0 + timedelta(hours=2))
        assert [g["id"] for g in tx.grants_of("carol")] == [grant_id(2), grant_id(3)]
        assert [g["id"] for g in tx.grants_of("alice")] == [grant_id(1), grant_id(2)]
        every = tx.all_grants()
        assert every[grant_id(3)]["revoked_at"] == T0 + timedelta(minutes=5)
        assert every[grant_id(3)]["revoked_by"] == "carol" and len(every) == 3


def test_a_viewers_scopes_show_the_granters_scoped_memories_they_cover_and_never_private_ones(storage):
    put(storage, memory(1, visibility="scoped", tags=("ops",)), memory(2, visibility="private", tags=("ops",)),
        memory(3, visibility="scoped", tags=("dev",)), memory(4, visibility="scoped", type_=GOAL, tags=("ops",)),
        memory(5, actor="carol", visibility="scoped", tags=("ops",)), memory(6, visibility="public"))
    bob = Viewer("bob", (("alice", (FACT,), ("ops", "x")),))
    with storage.reading() as tx:
        seen = {h["id"] for h in tx.heads_by_ids([ident(i) for i in range(1, 7)], bob)}
        assert seen == {ident(1), ident(6)}
        assert {h["id"] for h, _ in tx.iter_visible(bob)} == {ident(1), ident(6)}
        assert [h["id"] for h in tx.heads_by_prefix(ident(2), bob)] == []
        assert [h["id"] for h in tx.heads_by_prefix(ident(1), bob)] == [ident(1)]
        assert tx.count_heads(Filters("bob", scopes=bob.scopes)) == 2
        assert tx.count_heads(Filters("bob")) == 1  # without the scopes: the public one alone
        anything = Viewer("bob", (("alice", (), ()),))
        assert {h["id"] for h, _ in tx.iter_visible(anything)} == {ident(1), ident(3), ident(4), ident(6)}


def test_a_writing_transaction_sees_every_grant_committed_before_it_and_its_own(storage):
    """grant's set rule looks for a live grant of the same scope with ``grants_of`` inside the
    transaction that inserts: what it reads there must be every earlier commit and its own rows."""
    with storage.transaction() as tx:
        tx.insert_grant(grant(1, "alice", "bob", tags=("ops",)))
    with storage.transaction() as tx:
        assert [g["id"] for g in tx.grants_of("alice")] == [grant_id(1)]
        tx.insert_grant(grant(2, "alice", "bob", types=(FACT,)))
        assert [g["id"] for g in tx.grants_of("alice")] == [grant_id(1), grant_id(2)]
        tx.revoke_grant(grant_id(1), at=T0 + timedelta(minutes=1), by="bob")  # the sub-agent's revoke
        assert [g["revoked_by"] for g in tx.grants_of("bob")] == ["bob", None]
    with pytest.raises(RuntimeError), storage.transaction() as tx:  # rolled back: neither row changes
        tx.insert_grant(grant(3, "alice", "bob"))
        raise RuntimeError("abandoned")
    with storage.transaction() as tx:
        assert [g["id"] for g in tx.grants_of("bob")] == [grant_id(1), grant_id(2)]
