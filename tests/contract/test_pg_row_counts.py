"""The PostgreSQL store keeps its heads and vectors counted (``meta`` 'rows:heads' and 'rows:vectors',
by statement triggers), so a write asks whether memories wait for a vector without counting every row
under the writer lock, and numbers its states ('changes'), so a resident storage keeps what its reads
worked out while the state stays. Both must hold whoever changes the rows: cortexctl's inserts, its
COPY, its deletes, and statements behind its back."""

from __future__ import annotations

from cortexctl.memory.terms import text_terms
from tests import tamper
from tests.contract.conftest import _open, ident, memory, put, unit_rows
from tests.pg import writer_role


def _counted(storage) -> dict[str, int]:
    return {k: int(v) for k, v in tamper.rows(storage.address, "SELECT key, value FROM meta WHERE key LIKE %s", ["rows:%"])}


def _real(storage) -> dict[str, int]:
    return {f"rows:{t}": tamper.rows(storage.address, f"SELECT count(*) FROM {t}")[0][0] for t in ("heads", "vectors")}


def _made_before(storage) -> None:
    """The store as a cortexctl before the counts left it: no triggers, no counts."""
    for fn in ("cortexctl_count_rows", "cortexctl_count_change"):
        tamper.rows(storage.address, f"DROP FUNCTION {fn}() CASCADE")
    tamper.rows(storage.address, "DELETE FROM meta WHERE key LIKE %s OR key = 'changes'", ["rows:%"])


def _pending(storage) -> bool:
    with storage.transaction() as tx:
        return tx.maybe_pending("m")


def test_the_first_write_that_asks_counts_the_rows_and_every_change_after_keeps_them_exact(tmp_path):
    storage = _open("postgres", tmp_path)
    put(storage, memory(1))
    assert _counted(storage) == _real(storage) == {"rows:heads": 1, "rows:vectors": 0}  # counted from the start
    _made_before(storage)
    put(storage, memory(2))
    assert _counted(storage) == {}  # nothing asked yet
    assert _pending(storage) is True  # two heads, no vector
    assert _counted(storage) == _real(storage) == {"rows:heads": 2, "rows:vectors": 0}
    with storage.transaction() as tx:
        tx.insert_vectors([ident(1)], [1], "m", unit_rows(1))  # one row: an INSERT
        assert tx.maybe_pending("m") is True  # this transaction's own rows count
        tx.insert_vectors([ident(2)], [1], "m", unit_rows(1, seed=1))
    assert _pending(storage) is False
    put(storage, *[memory(n) for n in range(3, 40)])
    with storage.transaction() as tx:
        tx.insert_vectors([ident(n) for n in range(3, 40)], [1] * 37, "m", unit_rows(37, seed=2))  # a COPY
    assert _counted(storage) == _real(storage) == {"rows:heads": 39, "rows:vectors": 39}
    assert _pending(storage) is False
    with storage.transaction() as tx:
        tx.drop_vectors(ident(5))
    assert _counted(storage) == _real(storage) == {"rows:heads": 39, "rows:vectors": 38}
    assert _pending(storage) is True


def test_rows_changed_behind_cortexctls_back_are_counted_too(tmp_path):
    storage = _open("postgres", tmp_path)
    put(storage, memory(1), memory(2))
    with storage.transaction() as tx:
        tx.insert_vectors([ident(1), ident(2)], [1, 1], "m", unit_rows(2))
    assert _pending(storage) is False
    tamper.rows(storage.address, "DELETE FROM vectors WHERE id = %s", [ident(2)])
    assert _pending(storage) is True
    assert _counted(storage) == _real(storage)
    tamper.rows(storage.address, "TRUNCATE vectors")
    assert _counted(storage) == _real(storage) == {"rows:heads": 2, "rows:vectors": 0}
    assert _pending(storage) is True


def test_a_reading_transaction_answers_without_making_the_counts(tmp_path):
    storage = _open("postgres", tmp_path)
    put(storage, memory(1))
    _made_before(storage)
    with storage.reading() as tx:
        assert tx.maybe_pending("m") is True
    assert _counted(storage) == {}
    assert _pending(storage) is True and _counted(storage) == {"rows:heads": 1, "rows:vectors": 0}


def test_a_migration_has_the_rows_counted_again_and_the_changes_numbered_anew(tmp_path):
    storage = _open("postgres", tmp_path)
    put(storage, memory(1))
    tamper.rows(storage.address, "UPDATE meta SET value = '7' WHERE key = 'rows:heads'")  # as a rebuilt table would
    before = tamper.rows(storage.address, "SELECT value FROM meta WHERE key = 'changes'")
    for statement in ("ALTER TABLE heads DROP COLUMN valid_from, DROP COLUMN valid_to, DROP COLUMN supersedes,"
                      " DROP COLUMN superseded_by", "DELETE FROM schema_migrations WHERE number >= 5"):
        tamper.rows(storage.address, statement)  # the store as schema version 4 left it
    tamper.set_schema_version(storage.address, "4")
    put(_open("postgres", tmp_path), memory(2))  # a new process: it migrates the store to the newest
    assert _counted(storage) == _real(storage) == {"rows:heads": 2, "rows:vectors": 0}
    assert tamper.rows(storage.address, "SELECT value FROM meta WHERE key = 'changes'") != before
    assert _pending(storage) is True


def test_a_user_who_may_only_change_rows_writes_and_is_answered_by_counting(tmp_path):
    """The triggers need CREATE on the store's schema: a user granted only the rows writes as well,
    and maybe_pending counts every time instead."""
    from cortexctl.store import open_storage

    owner = _open("postgres", tmp_path)
    put(owner, memory(1))
    _made_before(owner)
    with writer_role(owner) as (_role, uri):
        limited = open_storage(uri, wait=5.0)
        put(limited, memory(2))
        for _ in range(2):  # the second time without trying again
            with limited.transaction() as tx:
                assert tx.maybe_pending("m") is True
                tx.insert_vectors([ident(1), ident(2)], [1, 1], "m", unit_rows(2))
                assert tx.maybe_pending("m") is False
                tx.drop_vectors(ident(1)), tx.drop_vectors(ident(2))
        assert _counted(owner) == {}
        with owner.reading() as tx:
            assert tx.existing_ids([ident(1), ident(2)]) == {ident(1), ident(2)}


def test_a_resident_storage_follows_rows_changed_behind_cortexctls_back(tmp_path):
    """What a resident storage keeps of one state of the store (hidden documents, term statistics) is
    named by the change counter the triggers raise: a statement from any client makes a new state."""
    from cortexctl.store import open_storage
    from cortexctl.store.interface import Filters

    storage = _open("postgres", tmp_path)
    put(storage, memory(1), memory(2, actor="bob"), memory(3))
    with storage.transaction() as tx:
        tx.add_terms([(ident(1), text_terms("otters swim")), (ident(2), text_terms("otters otters")),
                      (ident(3), text_terms("beavers swim"))])
    resident = open_storage(storage.address, wait=5.0, resident=True)
    query = dict.fromkeys(text_terms("otters"), 1.0)

    def found(view) -> list[str]:
        with view() as tx:
            return [i for i, _ in tx.search_terms(query, Filters("alice"), 5)]

    try:
        first = found(resident.searching)
        assert found(resident.searching) == found(storage.reading) == first and ident(2) not in first
        tamper.rows(storage.address, "UPDATE heads SET visibility = 'public' WHERE id = %s", [ident(2)])
        second = found(resident.searching)
        assert second == found(storage.reading) and ident(2) in second
        tamper.rows(storage.address, "DELETE FROM lex_postings WHERE doc = (SELECT doc FROM lex_docs WHERE id = %s)",
                    [ident(1)])
        third = found(resident.searching)
        assert third == found(storage.reading) and ident(1) not in third
    finally:
        resident.close()


def test_a_resident_storage_keeps_salience_contenders_only_for_the_heads_the_filters_pass(tmp_path):
    """The contenders are kept by the filters with their times taken as how many valid times lie at or
    before them: a valid time that ends between two calls gives other contenders."""
    from datetime import timedelta

    from cortexctl.store import open_storage
    from cortexctl.store.interface import Filters, Scoring
    from tests.contract.conftest import T0

    ending, _ = first = memory(1, importance=10, at=T0)
    ending["valid_to"] = T0 + timedelta(seconds=100)
    storage = _open("postgres", tmp_path)
    put(storage, first, memory(2, importance=6, at=T0), memory(3, importance=2, at=T0))
    resident = open_storage(storage.address, wait=5.0, resident=True)

    def top(view, later: int) -> list[str]:
        at = T0 + timedelta(seconds=later)
        with view() as tx:
            return [i for i, _ in tx.top_salience(Filters("alice", ended_by=at), Scoring(at, 86400.0, (0.2,) * 5), 2)]

    try:
        assert top(resident.searching, 0) == top(storage.reading, 0) == [ident(1), ident(2)]
        assert top(resident.searching, 50) == [ident(1), ident(2)]  # not ended yet: the same contenders
        assert top(resident.searching, 200) == top(storage.reading, 200) == [ident(2), ident(3)]
    finally:
        resident.close()


def test_what_a_resident_storage_keeps_stays_bounded_by_viewers_and_filters(tmp_path):
    from cortexctl.store import open_storage
    from cortexctl.store.interface import Filters
    from cortexctl.store.pg.lexical import VIEWERS_KEPT
    from cortexctl.store.pg.tx import FILTERS_KEPT

    storage = _open("postgres", tmp_path)
    put(storage, *[memory(n, actor=f"a{n % 3}", visibility="public" if n % 2 else "private") for n in range(1, 9)])
    with storage.transaction() as tx:
        tx.add_terms([(ident(n), text_terms(f"otters {n} swim")) for n in range(1, 9)])
    resident = open_storage(storage.address, wait=5.0, resident=True)
    query = dict.fromkeys(text_terms("otters"), 1.0)
    try:
        for n in range(VIEWERS_KEPT + FILTERS_KEPT + 5):
            filters = Filters(f"a{n}", tags=(f"t{n}",) if n > VIEWERS_KEPT else ())
            with resident.searching() as tx:
                got = (tx.search_terms(query, filters, 5), tx.passing([ident(k) for k in range(1, 9)], filters))
            with storage.reading() as tx:
                assert got == (tx.search_terms(query, filters, 5), tx.passing([ident(k) for k in range(1, 9)], filters))
        kept = resident._kept[1]
        assert len(kept["hidden"]) <= VIEWERS_KEPT and len(kept["by id"]) <= FILTERS_KEPT
    finally:
        resident.close()
