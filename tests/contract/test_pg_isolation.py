"""Actor isolation held by PostgreSQL (``store/pg/isolation.py``): a view opened for an actor
(``reading(as_actor=...)``, which find uses) cannot be handed another actor's private memory by any
query, even one that asks for every row; every other view, and every other role, sees the whole
store as before."""

from __future__ import annotations

import uuid

import pytest

from cortexctl.errors import ConfigError
from tests import tamper
from tests.contract.conftest import _open, entry, grant, ident, memory, put
from tests.contract.test_bundle_io import exported
from tests.pg import writer_role

ALL = [ident(n) for n in range(1, 7)]
# 1 alice private, 2 alice public, 3 alice scoped (no grant to bob), 4 bob private,
# 5 carol scoped (carol granted bob a scope), 6 carol private
BOB_SEES = {ident(2), ident(4), ident(5)}


def _filled(storage) -> None:
    put(storage, memory(1, frames=["about:topic:x"]), memory(2, visibility="public"), memory(3, visibility="scoped"),
        memory(4, actor="bob", frames=["about:topic:x"]), memory(5, actor="carol", visibility="scoped"),
        memory(6, actor="carol"))
    with storage.transaction() as tx:
        tx.append_journal([entry("write", ident(n), actor=a) for n, a in
                           ((1, "alice"), (2, "alice"), (3, "alice"), (4, "bob"), (5, "carol"), (6, "carol"))]
                          + [entry("learn_weights", None, actor="carol"), entry("attest", ident(6), actor="bob")])
        tx.insert_grant(grant(1, "carol", "bob", tags=("elsewhere",)))  # any grant opens the floor; the engine narrows


def _seen(storage, actor: str | None) -> dict[str, set]:
    """What every query that names no viewer hands back, in a view opened for ``actor``."""
    with storage.reading(as_actor=actor) as tx:
        asked = [ident(n) for n in range(1, 9)]  # and the two some tests add
        return {"heads": set(tx.heads_of(asked)), "versions": set(tx.current_versions(asked)),
                "data": set(tx.search_data(asked)),
                "frames": {r[0] for r in tx._rows("SELECT id FROM frames")},
                "journal": {(r[0], r[1]) for r in tx._rows("SELECT actor, ref FROM journal")},
                "count": {tx.count_heads()}}


@pytest.fixture
def store(tmp_path):
    storage = _open("postgres", tmp_path)
    _filled(storage)
    return storage


def test_a_view_held_to_an_actor_gets_no_other_actors_private_memory_from_a_query_that_asks_for_all(store):
    held = _seen(store, "bob")
    assert held["heads"] == held["versions"] == held["data"] == BOB_SEES
    assert held["frames"] == {ident(4)}
    # bob's own entries and the entries of memories he sees; one with no memory (carol's weights) too
    assert held["journal"] == {("alice", ident(2)), ("bob", ident(4)), ("carol", ident(5)), ("carol", None),
                               ("bob", ident(6))}
    assert held["count"] == {6}  # the count the database keeps (find says when an actor sees nothing)
    whole = _seen(store, None)
    assert whole["heads"] == whole["versions"] == whole["data"] == set(ALL)
    assert len(whole["journal"]) == 8


def test_an_actor_nobody_granted_anything_sees_only_public_memories_and_its_own(store):
    assert _seen(store, "dave")["heads"] == {ident(2)}
    assert _seen(store, "alice")["heads"] == {ident(1), ident(2), ident(3)}


def test_the_engines_answers_are_the_same_held_or_not(store):
    """The floor is never above the engine's own rule: what the engine lets an actor see, the
    database does too, and the lexical lane's statistics (which leave out the docs a viewer may not
    see) come out the same."""
    from cortexctl.memory.terms import term_id, terms, text_terms
    from cortexctl.store.interface import Filters, Viewer

    with store.transaction() as tx:
        tx.add_terms([(i, text_terms(f"walrus plan number {n} of the fleet")) for n, i in enumerate(ALL)])
    asked = {term_id(t): 1.0 for t in terms("walrus fleet plan")}
    for who in (Viewer("bob", (("carol", (), ("elsewhere",)),)), Viewer("alice"), Viewer("bob")):
        f = Filters(actor=who.actor, include_tombstoned=True, scopes=who.scopes)
        with store.reading(as_actor=who.actor) as held, store.reading() as whole:
            assert held.heads_by_ids(ALL, who) == whole.heads_by_ids(ALL, who)
            assert held.count_heads(f) == whole.count_heads(f)
            assert held.passing(ALL, f) == whole.passing(ALL, f)
            assert sorted(held.hidden_docs(who)) == sorted(whole.hidden_docs(who))
            assert held.search_terms(asked, f, 10) == whole.search_terms(asked, f, 10)
            docs = [("x", [term_id(t) for t in terms("a walrus of the fleet")])]
            assert held.score_terms(asked, docs, who) == whole.score_terms(asked, docs, who)


def test_a_find_opens_its_view_held_to_the_acting_actor(tmp_path):
    """Shown by taking the held role's right to read the heads away behind cortexctl's back: a find
    then fails on it (so it ran as that role), and writing, show and verify (views not held) go on."""
    from cortexctl import Cortex
    from cortexctl.engine.results import FindQuery
    from cortexctl.store.pg import isolation
    from tests.pg import store_uri

    uri = store_uri("held", tmp_path)
    cx = Cortex(store=uri, actor="bob")
    mine = cx.write("fact", "bob's walrus plan").id
    assert [h.id for h in cx.find(FindQuery(near="walrus"))] == [mine]
    tamper.rows(uri, f"REVOKE SELECT ON heads FROM {isolation.ROLE}")
    with pytest.raises(ConfigError, match="permission denied for table heads"):
        cx.find(FindQuery(near="walrus"))
    cx.write("fact", "another walrus")
    assert cx.show(mine).short.startswith("bob's walrus")
    tamper.rows(uri, f"GRANT SELECT ON heads TO {isolation.ROLE}")
    assert len(cx.find(FindQuery(near="walrus"))) == 2


def test_a_store_made_before_is_given_its_policies_by_the_next_write(tmp_path):
    from cortexctl.store.pg import isolation

    first = _open("postgres", tmp_path)
    _filled(first)
    for table in isolation.SEEN:
        tamper.rows(first.address, f"DROP POLICY {table}_seen ON {table}")
    tamper.rows(first.address, "DELETE FROM meta WHERE key = 'isolation'")
    later = _open("postgres", tmp_path)  # another process: it has not seen the store current yet
    assert _seen(later, "bob")["heads"] == set(ALL)  # nothing holds it: the engine's rule alone
    with later.reading() as tx:
        assert tx.health_counts()["isolation"] == "engine"
    put(later, memory(7, actor="bob"))
    assert _seen(later, "bob")["heads"] == BOB_SEES | {ident(7)}
    with later.reading() as tx:
        assert tx.health_counts()["isolation"] == "database"


def test_a_restored_store_is_held_as_the_one_it_came_from(store, tmp_path):
    _, facts, files = exported(store, tmp_path)
    other = _open("postgres", tmp_path, "other")
    other.restore_bundle(files, facts["schema_version"], lambda staged: None)
    assert _seen(other, "bob")["heads"] == BOB_SEES
    assert _seen(other, None)["heads"] == set(ALL)


def test_a_user_who_may_not_take_on_the_role_reads_the_engines_way_and_says_so(store):
    """A user without CREATEROLE, not a member of the role, who owns a store of its own: its writes
    and finds work, unheld, and its health counts say the database does not hold them."""
    from cortexctl.store import open_storage

    from tests.pg import store_uri, with_parts

    role = f"r_{uuid.uuid4().hex[:10]}"
    admin = store.address
    tamper.rows(admin, f'CREATE ROLE "{role}" LOGIN')
    tamper.rows(admin, f'GRANT CREATE ON DATABASE "{_database(admin)}" TO "{role}"')
    try:
        plain = open_storage(with_parts(store_uri("plain"), user=role), wait=5.0)
        _filled(plain)
        assert _seen(plain, "bob")["heads"] == set(ALL)
        with plain.reading() as tx:
            assert tx.health_counts()["isolation"] == "engine"
        with store.reading() as tx:
            assert tx.health_counts()["isolation"] == "database"
    finally:
        tamper.rows(admin, f'DROP OWNED BY "{role}" CASCADE')
        tamper.rows(admin, f'DROP OWNED BY "{role}"')
        tamper.rows(admin, f'DROP ROLE "{role}"')


def test_a_role_granted_the_tables_rights_sees_and_writes_every_row(store):
    """Row security is on for every role that is not the owner: cortexctl's permissive policy lets
    such a role (a team's writer) through, all of the store, as before."""
    from cortexctl.store import open_storage

    with writer_role(store) as (_role, uri):
        writer = open_storage(uri, wait=5.0)
        put(writer, memory(8, actor="carol"))
        put(writer, *[memory(n, actor="carol") for n in range(100, 120)])  # many rows: INSERTs, not a COPY
        assert _seen(writer, None)["heads"] == set(ALL) | {ident(8)}
        assert _seen(writer, "bob")["heads"] == set(ALL) | {ident(8)}  # not a member: not held


def _database(uri: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(uri).path.lstrip("/") or "postgres"


def test_a_granter_whose_name_needs_quoting_is_still_recognised(tmp_path):
    """The granters reach the policy as an array literal: names with commas, quotes, braces and
    backslashes come back whole (no grant then leaks to a name that merely looks alike)."""
    storage = _open("postgres", tmp_path)
    odd = 'we"ird, {actor}\\ x'
    put(storage, memory(1, actor=odd, visibility="scoped"), memory(2, actor="we", visibility="scoped"))
    with storage.transaction() as tx:
        tx.insert_grant(grant(1, odd, "bob"))
    assert _seen(storage, "bob")["heads"] == {ident(1)}
    assert _seen(storage, odd)["heads"] == {ident(1)}


def test_policies_from_a_newer_cortexctl_are_left_alone_and_this_one_reads_unheld(store, tmp_path):
    """A newer cortexctl's policies may ask for settings this one does not make: this one neither puts
    its own back over them nor takes the role on (the engine's rule alone holds its finds)."""
    from cortexctl.store.pg import isolation

    newer = str(isolation.VERSION + 1)
    tamper.rows(store.address, "UPDATE meta SET value = %s WHERE key = 'isolation'", [newer])
    tamper.rows(store.address, "DROP POLICY heads_seen ON heads")  # what "newer" would have changed
    later = _open("postgres", tmp_path)
    put(later, memory(7, actor="bob"))
    assert tamper.rows(store.address, "SELECT value FROM meta WHERE key = 'isolation'") == [(newer,)]
    assert _seen(later, "bob")["heads"] == set(ALL) | {ident(7)}
    with later.reading() as tx:
        assert tx.health_counts()["isolation"] == "engine"


def test_a_writer_that_inherits_the_role_still_reads_and_writes_every_row_and_its_finds_are_held(store):
    """A grant of the role made without INHERIT FALSE gives its member the role's rights in every
    query: the policies bind the role itself (current_user), so that member's backups, verify and
    writes still see the whole store, and only its views that take the role on are held."""
    from cortexctl.store import open_storage
    from cortexctl.store.pg import isolation

    with writer_role(store) as (role, uri):
        tamper.rows(store.address, f'GRANT {isolation.ROLE} TO "{role}"')  # INHERIT TRUE, PostgreSQL's default
        member = open_storage(uri, wait=5.0)
        put(member, memory(8, actor="carol"))
        assert _seen(member, None)["heads"] == set(ALL) | {ident(8)}
        assert len(_seen(member, None)["journal"]) == 8
        assert _seen(member, "bob")["heads"] == BOB_SEES
        with member.reading() as tx:
            assert tx.health_counts()["isolation"] == "database"


def test_a_long_lived_writer_meets_the_policies_another_process_puts_on_and_inserts_rows_all_the_same(tmp_path):
    """PostgreSQL refuses COPY into a table under row security: a resident writer (not the owner) that
    wrote many rows before the policies existed writes many rows after, as INSERTs."""
    from cortexctl.store import open_storage
    from cortexctl.store.pg import isolation

    owner = _open("postgres", tmp_path)
    put(owner, memory(1))
    for table in isolation.SEEN:  # a store made before the policies
        tamper.rows(owner.address, f"DROP POLICY {table}_seen ON {table}")
        tamper.rows(owner.address, f"DROP POLICY {table}_any ON {table}")
        tamper.rows(owner.address, f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")
    tamper.rows(owner.address, "DELETE FROM meta WHERE key = 'isolation'")
    with writer_role(owner) as (_role, uri):
        writer = open_storage(uri, wait=5.0, resident=True)
        put(writer, *[memory(n, actor="carol") for n in range(100, 120)])  # a COPY: no row security yet
        put(_open("postgres", tmp_path), memory(2))  # the owner's next process puts the policies on
        put(writer, *[memory(n, actor="carol") for n in range(200, 220)])
        assert tamper.rows(owner.address, "SELECT count(*) FROM heads") == [(42,)]
