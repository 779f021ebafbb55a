"""How ``store/bundle.export_tables`` writes each table: in key order, without sorting wide rows that
are stored in key order already, and as scanned when DuckDB's sort runs out of memory."""

from __future__ import annotations

import duckdb
import pytest

from cortexctl.store import bundle as sb

ROWS = 100_000
PIECES = 19  # md5 hex digests a row's blob: 608 bytes, 61 MB in all, more than LIMIT lets DuckDB sort
LIMIT = "64MB"  # DuckDB 1.x: the sort of these rows runs out of memory under it, a scan does not


def _db(tmp_path, *, rising: bool, pieces: int = PIECES):
    """A database of one table ``t`` (key k, a blob b of its own bytes), its rows stored with rising
    or falling keys, written out and opened again (nothing of it held in memory)."""
    path = tmp_path / "t.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, b BLOB)")
    blob = " || ".join(f"md5(i::VARCHAR || '.{j}')" for j in range(pieces))
    key, order = ("i + 1", "ASC") if rising else (f"{ROWS} - i", "DESC")
    con.execute(f"INSERT INTO t SELECT * FROM (SELECT {key} AS k, ({blob})::BLOB AS b FROM range({ROWS}) s(i))"
                f" ORDER BY k {order}")
    con.close()
    con = duckdb.connect(str(path))
    con.execute(f"SET temp_directory = '{tmp_path}'")
    return con


def _member(con, tmp_path) -> tuple[list[int], int]:
    """(keys in file order, an order-free digest) of the member written for ``t``."""
    path = tmp_path / "out" / "t.parquet"
    keys = [r[0] for r in con.execute(f"SELECT k FROM read_parquet('{path}')").fetchall()]
    digest = con.execute(f"SELECT bit_xor(hash(k, b)) FROM read_parquet('{path}')").fetchone()[0]
    return keys, digest


def _export(con, tmp_path, limit: str) -> list[dict]:
    (tmp_path / "out").mkdir(exist_ok=True)
    con.execute(f"SET memory_limit = '{limit}'")
    con.execute("SET threads = 2")
    return sb.export_tables(con, tmp_path / "out")


def _digest(con) -> int:
    return con.execute("SELECT bit_xor(hash(k, b)) FROM t").fetchone()[0]


@pytest.mark.parametrize("rising", [True, False])
def test_a_member_holds_its_rows_in_key_order_however_they_are_stored(tmp_path, rising):
    con = _db(tmp_path, rising=rising, pieces=1)
    assert _export(con, tmp_path, "512MB") == [{"table": "t", "name": "t.parquet", "rows": ROWS}]
    keys, digest = _member(con, tmp_path)
    assert keys == sorted(keys) and len(keys) == ROWS and digest == _digest(con)


def test_wide_rows_stored_in_key_order_are_written_in_it_under_a_limit_no_sort_meets(tmp_path):
    """61 MB of blobs under a 64 MB limit: a sort of them runs out of memory, the scan does not."""
    con = _db(tmp_path, rising=True)
    con.execute(f"SET memory_limit = '{LIMIT}'")
    with pytest.raises(duckdb.OutOfMemoryException):  # what the export must not do
        con.execute(f"COPY (SELECT * FROM t ORDER BY k) TO '{tmp_path / 'sorted.parquet'}' (FORMAT parquet)")
    _export(con, tmp_path, LIMIT)
    keys, digest = _member(con, tmp_path)
    assert keys == list(range(1, ROWS + 1)) and digest == _digest(con)


def test_wide_rows_out_of_key_order_that_cannot_be_sorted_are_written_as_stored(tmp_path):
    con = _db(tmp_path, rising=False)
    assert _export(con, tmp_path, LIMIT)[0]["rows"] == ROWS
    keys, digest = _member(con, tmp_path)
    assert sorted(keys) == list(range(1, ROWS + 1)) and digest == _digest(con)


def test_the_key_order_check_sees_one_row_out_of_place(tmp_path):
    con = _db(tmp_path, rising=True, pieces=1)
    assert sb._in_key_order(con, "t", ["k"])
    con.execute("UPDATE t SET k = -1 WHERE k = 10")  # a key's update is stored as a new row, after the others
    assert not sb._in_key_order(con, "t", ["k"])
    con.execute("CREATE TABLE u (a VARCHAR, b INTEGER, c BLOB)")
    con.execute("INSERT INTO u VALUES ('x', 1, ''), ('x', 2, ''), ('y', 0, '')")
    assert sb._in_key_order(con, "u", ["a", "b"])
    con.execute("INSERT INTO u VALUES ('x', 3, '')")
    assert not sb._in_key_order(con, "u", ["a", "b"])
    con.execute("CREATE TABLE v (a VARCHAR, b INTEGER)")
    con.execute("INSERT INTO v VALUES ('x', 1), ('x', NULL)")  # NULL last, as ORDER BY puts it
    assert sb._in_key_order(con, "v", ["a", "b"])
    con.execute("INSERT INTO v VALUES ('x', 2)")
    assert not sb._in_key_order(con, "v", ["a", "b"])


def test_an_interrupt_while_members_are_written_stops_every_statement_and_leaves_the_connection_usable(tmp_path):
    """^C reaches the main thread while the members are written two at a time: it is raised there,
    the other member's statement is interrupted too (no writer thread is left running), and the
    connection answers afterwards. The interrupt is sent as the first member file appears."""
    import os
    import signal
    import threading

    con = _db(tmp_path, rising=True)
    con.execute("CREATE TABLE u AS SELECT k + 0 AS k, b FROM t")  # a second table: both written at once
    out = tmp_path / "out"
    out.mkdir()
    before = threading.active_count()

    def interrupt_once_writing() -> None:
        while not any(out.iterdir()):
            threading.Event().wait(0.001)
        os.kill(os.getpid(), signal.SIGINT)

    class Interrupted(Exception):
        """What ^C raises here (not KeyboardInterrupt, which would end the test session were it late)."""

    def raise_interrupted(signum, frame):
        raise Interrupted

    previous = signal.signal(signal.SIGINT, raise_interrupted)
    try:
        watcher = threading.Thread(target=interrupt_once_writing)
        watcher.start()
        with pytest.raises(Interrupted):
            sb.export_tables(con, out)
        watcher.join()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert threading.active_count() == before
    assert con.execute("SELECT count(*) FROM t").fetchone()[0] == ROWS

    def whole(name: str) -> bool:
        try:
            return con.execute(f"SELECT count(*) FROM read_parquet('{out / name}')").fetchone()[0] == ROWS
        except duckdb.Error:
            return False

    # both statements were stopped, not waited for (waiting would have finished both members)
    assert not (whole("t.parquet") and whole("u.parquet"))
