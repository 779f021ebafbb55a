"""The search snapshot: what ``find`` reads of a store, as arrays in one file beside the database.

A package: ``format`` (the generation file, the snapshot file's layout, header, CRC blocks and
mapping), ``builder`` (the rows collected and written as arrays), ``delta`` (the delta file, and which
files are current), ``merge`` (the next snapshot's arrays made from the previous snapshot and its
delta, without DuckDB, equal to a build's) and ``query`` (``_Part`` and ``SnapshotTx``, find's reads).

``cortex.snapshot`` is a cache, like the index file: derived from the DuckDB
file, rebuilt from it, never trusted blindly. It holds the heads' filter and
salience columns (valid times among them: int64 microseconds, ``builder.NO_TIME`` for none,
and in the header how many heads hold each, so that a file where none does is not read for them), the lexical postings (by term and by doc), doc numbers to
IDs, the vector keys, the learned weights and what a result shows, as arrays
that a reader maps with numpy and touches only where it looks. A cold ``find``
answered from it neither imports DuckDB nor decodes a column segment.

Trust rests on the **generation file** ``cortex.gen``: ``TOKEN COUNTER STATE``.
Every committing writer (``DuckStorage.transaction``) writes the next counter as
``dirty`` *before* COMMIT (fsynced when a snapshot file exists: a store that
never built one pays no sync for it), and the same counter as ``clean``
after. The token is random, made when the file is first written (a missing or
unreadable file gets a new one). A snapshot is stamped with the token and the
counter of the clean generation it was built at, plus the identity (inode, size,
modification time) of ``cortex.duckdb`` and its WAL and the schema version; it
is used only when all of them agree now. So:

- a commit since the build (or one killed between COMMIT and its clean mark,
  which leaves ``dirty``) means the counter differs: bypassed;
- a snapshot copied from another store carries another token; a database file
  replaced under it (a restore, a copy, a writer that does not know the
  generation file) changes the file identity: bypassed;
- a truncated or damaged file fails its header check (magic, length, CRC of the
  header) or, for the pages actually read, the CRC of each 16 KiB block
  (checked the first time a block is touched): ``SnapshotUnusable`` (a ``CacheUnusable``), and find
  answers from DuckDB instead. The writer reads every block back to make those CRCs and leaves a
  checked stamp beside the file (``files.stamp_checked``, as the index file's): a reader of that
  very file (the same inode, size and modification and change times) checks 32 blocks spread over
  it and takes the rest as sound; any write to the file since changes its change time, and every
  block is checked again as it is read. ``healthcheck`` (``check_whole``) and a fold's merge read
  every block whatever the stamp says; ``healthcheck`` stamps a sound file.

A bypassed snapshot costs find nothing but a few small reads: it then reads
DuckDB as it always did. The next fold of the index (``FOLD_AT`` new vectors,
the end of an import, ``reindex``) writes a new one: built under the writer
lock into a temp file, fsynced and renamed over the old one.

**The delta** ``cortex.snapdelta`` keeps the snapshot useful between folds. What
changed follows **the journal**: every change to a memory is a journal entry (verify
replays the journal and holds the heads to it), so a snapshot records the journal
position it covers (``journal_seq``), and so does each delta. After its COMMIT and
clean mark, still on its connection and under the writer lock, the writer reads the
journal after the covered position (``delta.changed_since``: the memory an entry
names, the memories an attest bumped, and the memories given a vector since the build,
whose keys only grow) and the rows of every memory changed since the build (the
previous delta's and these: heads, current data, docs, postings, vectors with their
values) and, once its connection is closed and the database file's identity is final,
writes them as plain rows (JSON with a CRC: the writer never loads numpy), stamped like
a snapshot with its generation and its journal position, and naming the snapshot it
completes (its stamp and header CRC). No write method has to say what it changed. ``find``
makes the delta's arrays (``_arrays``, as a build does) and answers those memories from
them and every other from the snapshot (their rows, docs and vectors there count as
gone); the store-wide numbers (vector counts, dimensions, the keys given since the
build, learned weights, grants) come from the delta. A writer builds a delta only on a
current snapshot or delta, so a writer killed before writing its delta leaves the store
bypassing both until the next fold; a change that is not one memory's (``DuckTx.wide``:
a model's vectors dropped, the dropped keys cleared, a bundle attached), a journal
entry of a kind it does not know, or more than ``DELTA_MAX`` memories removes the delta
instead.

The journal position does not replace the generation file: a reader checks the
generation and the file identity alone (a few small reads, no DuckDB), while the
journal is inside the database. A writer killed mid-write leaves the generation dirty
(or, before its COMMIT, the database without its entries), so what a reader trusts is
still decided by the stamps above; the journal only tells the next writer what to put
in the delta.

**Visibility, the filters and salience** are stated once, in ``store/rules.py``, as expressions
(``store/predicate.py``) that DuckDB gets as SQL and the snapshot evaluates over its arrays
(``query._Part`` is their ``predicate.Columns``), so both answer alike: a head is seen by its owner,
by everyone when public, and when scoped by a sub-agent one of whose live grants covers it; frame
filters are SQL only (the snapshot holds no frames: find asks DuckDB). The grants are carried in the
header (``grants``: those not revoked, store-wide, with their expiry) like the learned weights, so a
delta's header has them anew after every write, a grant or a revocation included (which touch no
memory's rows). A written file also keeps, where they help (``format.SALIENT_FROM`` heads or more,
``SALIENT_GROUP_MIN`` a group on average), the heads grouped by the columns salience reads other than
recency, most recent first in each group (``format.salient_groups``, derived from the heads as the
file is written, by a build and by a merge alike): the salience lane then looks at the start of each
group rather than at every head (``query._Part._grouped_contenders``).

**A resident process** (``cortexctl mcp``: ``DuckStorage.maps``) keeps the snapshot's mapping while
the file is the same (``format._map``), the delta's document while the file holds the same bytes
(``delta._delta_doc``), and ``query.SnapshotTx``'s parts while both are the same objects: with them
what find worked out, none of which depends on anything but the files and the call's arguments:
the filters' masks (by the filters, their times taken as how many valid times lie at or before
them), the salience lane's contenders (for ``SALIENT_HOLD`` seconds of the clock, with room for the
fall of recency meanwhile: ``_Part.top_salience``), hidden docs by viewer, term spans and document
frequencies, sessions by code. Each call still checks the stamps as above, so a write by anyone
makes the next call start from the new delta.

Anything the snapshot does not hold (frame filters, the full form, vectors
for an exact search, memories newer than the index file) is read from DuckDB,
opened on first need; if the store moved on meanwhile, the read is refused
(``SnapshotUnusable``) and find starts over on DuckDB alone.
"""

from __future__ import annotations

from cortexctl.store.snapshot.builder import build, collect
from cortexctl.store.snapshot.delta import (DELTA_MAX, check_whole, collect_delta, delta_start, open_current, remove,
                                            state, write_delta)
from cortexctl.store.snapshot.format import (DELTA_NAME, FORMAT, GEN_NAME, MAGIC, SNAPSHOT_NAME, Snapshot,
                                             SnapshotUnusable, _header_of, mark_clean, mark_dirty, read_gen, write)
from cortexctl.store.snapshot.query import SnapshotTx

__all__ = ["SNAPSHOT_NAME", "DELTA_NAME", "GEN_NAME", "MAGIC", "FORMAT", "DELTA_MAX", "Snapshot", "SnapshotTx",
           "SnapshotUnusable", "build",
           "collect", "write", "open_current", "state", "check_whole", "mark_dirty", "mark_clean", "read_gen", "remove",
           "delta_start", "collect_delta", "write_delta", "_header_of"]
