"""Give back the space a bulk load left free inside the DuckDB file (``Holding.reclaim_space``).

A checkpoint writes the blocks of every row group and key index a transaction changed before it
frees the old ones, and an import commits batch after batch, each closing with a checkpoint. The
last checkpoints free about one copy of the tables' newest row groups: after a fresh import of
100,000 memories, 45% of the file's blocks are free (1.3 KB a memory). DuckDB reuses free blocks
for later writes but never gives back one that is not at the end of the file (``CHECKPOINT`` and
``VACUUM`` leave the file as it is).

So the file is copied, only its live blocks, with ``COPY FROM DATABASE`` (tables, keys, indexes and
defaults as they are) into the store's scratch area, synced, and renamed over the store's file, all
under the writer lock. A kill at any moment leaves the old file or the new, whole one; what the copy
left in the scratch area is swept by the next writer. Readers that had the old file open read it to
the end of their view. The new file's identity differs, so the search snapshot and its delta stamped
with the old one are not trusted: the generation moves on around the rename as around a commit.

It is done only when at least ``SHARE`` of the file is free (a small import into a big store leaves
a small share, and copying the whole store for it would cost more than it gives back).
"""

from __future__ import annotations

from cortexctl.files import fsync_path, leftover_temps, move_in

SHARE = 0.25  # rewrite when at least this share of the file's blocks is free
# DuckDB's memory for the copy: unbounded, it caches the whole old file (1.2 GB of RSS at 100k
# memories); at 256 MB it takes 10-30% longer and the process stays at about 330 MB.
COPY_MEMORY = "256MB"


def free_blocks(con) -> dict:
    """The file's blocks: {block_size, total, used, free} (``PRAGMA database_size``)."""
    row = con.execute("SELECT block_size, total_blocks, used_blocks, free_blocks FROM pragma_database_size()"
                      " WHERE database_name = current_database()").fetchone()
    return dict(zip(("block_size", "total", "used", "free"), (int(v) for v in row)))


def worth_it(blocks: dict) -> bool:
    return blocks["free"] > 0 and blocks["free"] >= SHARE * blocks["total"]


def run(storage) -> dict:
    """``storage``: the store's ``DuckStorage``. Under the writer lock, with no connection of this process open on the file: rewrite it when
    worth it. {"action": "rewrite" or "none", "bytes_before", "bytes", "reason"?}."""
    import duckdb

    from cortexctl.store import scratch, snapshot
    from cortexctl.store.bundle import _sql_text

    db = storage.db_path
    wal = db.with_name(db.name + ".wal")
    if not db.is_file():
        return {"action": "none", "reason": "no store"}
    for left in leftover_temps(db):  # a copy across file systems killed midway (``move_in``)
        left.unlink(missing_ok=True)
    before = db.stat().st_size
    if wal.exists():  # a writer was killed mid-commit: its log belongs to this very file
        return {"action": "none", "reason": "write-ahead log present", "bytes_before": before, "bytes": before}
    con = duckdb.connect(str(db), read_only=True)
    try:
        blocks = free_blocks(con)
    finally:
        con.close()
    if not worth_it(blocks):
        return {"action": "none", "reason": "little free space", "bytes_before": before, "bytes": before}
    with scratch.space(scratch.areas(storage)[:1], "reclaim") as work:  # beside the store: renamed into it
        new = work / db.name
        con = duckdb.connect()
        try:
            scratch.limit_memory(con, COPY_MEMORY, work / "spill")
            con.execute(f"ATTACH '{_sql_text(str(db))}' AS old_store (READ_ONLY)")
            con.execute(f"ATTACH '{_sql_text(str(new))}' AS new_store")
            con.execute("COPY FROM DATABASE old_store TO new_store")
            con.execute("DETACH new_store")
            con.execute("DETACH old_store")
        finally:
            con.close()
        if new.with_name(new.name + ".wal").exists():  # closed without its checkpoint: keep the old file
            return {"action": "none", "reason": "copy not checkpointed", "bytes_before": before, "bytes": before}
        fsync_path(new)
        token, counter = snapshot.mark_dirty(storage.path)
        move_in(new, db)  # copied beside it when the scratch area is on another file system
        fsync_path(db.parent)
        snapshot.mark_clean(storage.path, token, counter)
    storage.tighten()
    return {"action": "rewrite", "bytes_before": before, "bytes": db.stat().st_size}
