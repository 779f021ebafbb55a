"""A PostgreSQL store's bundle is one committed state even while writers go on: every table is
read in the same snapshot."""

from __future__ import annotations

import threading

from tests.contract.conftest import _open, entry, ident, memory, put
from tests.contract.test_bundle_crossing import member_rows
from tests.contract.test_bundle_io import exported


def test_an_export_while_writers_write_is_one_committed_state(tmp_path):
    storage = _open("postgres", tmp_path)
    put(storage, *(memory(n) for n in range(1, 2001)))
    with storage.transaction() as tx:
        tx.append_journal([entry("write", ident(n)) for n in range(1, 2001)])
    done = threading.Event()
    written: list[int] = []
    errors: list[Exception] = []

    def writer() -> None:  # each memory and its journal entry in one transaction
        n = 3000
        while not done.is_set():
            try:
                with storage.transaction() as tx:
                    head, versions = memory(n)
                    tx.insert_memories([head], versions)
                    tx.append_journal([entry("write", ident(n))])
                written.append(n)
                n += 1
            except Exception as exc:  # noqa: BLE001 - collected, asserted below
                errors.append(exc)
                return

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        while len(written) < 3 and not errors:
            done.wait(0.01)
        members, facts, files = exported(storage, tmp_path)
        after = len(written)
    finally:
        done.set()
        thread.join(30)
    assert errors == [] and after > 3
    rows = member_rows(files)
    heads = {r[0] for r in rows["heads"]}
    refs = {r[4] for r in rows["journal"]}
    assert heads == refs and {r[0] for r in rows["versions"]} == heads
    assert facts["journal_position"] == len(rows["journal"]) == len(heads) >= 2003
    assert {m["table"]: m["rows"] for m in members}["heads"] == len(heads)
