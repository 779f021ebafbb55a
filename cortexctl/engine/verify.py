"""verify: prove the store is sound, reporting every problem found.

Checks, over every actor's memories:

- every version's hash recomputes from its type byte and data;
- every head matches its latest version (number, type, forms), versions run 1..N
  with no gaps, and no version lacks a head;
- the frame index agrees with the heads' frames, duplicates included;
- the journal's sequence numbers run 1..N with no gaps;
- the lexical postings hold exactly the terms of every memory's current text;
- every vector is whole (its length matches its dimension) and belongs to
  its memory's current version; the index file, when there is one for the
  active model, is the one the store recorded (whole-file CRC-32) and agrees
  with the vectors;
- every attest entry is immediately followed by its learn_weights entry, and
  every learn_weights entry immediately follows an attest;
- replaying the journal from nothing rebuilds every head and every version
  exactly, column for column, salience counters (access count, citations, last
  used) included: a change made to the tables behind the journal's back (a
  field edited, a row added or deleted, a forget undone) shows up as a
  divergence naming the memory and the field;
- replaying the learn_weights entries reproduces every actor's learned weights
  bit for bit, each EMA step recomputed (the first divergence is named by its
  journal entry), and the latest checkpoint entry of each (actor, intent, step)
  is the stored checkpoint record;
- valid times and supersede links: no interval ends before it begins, a memory's
  ``superseded_by`` and its successor's ``supersedes`` agree both ways, no memory
  links to itself and the links form no cycle (check "valid");
- replaying the grant and revoke entries rebuilds the grants table row for row
  (a grant added, edited, un-revoked or deleted behind the journal's back is a
  finding of check "grants").
"""

from __future__ import annotations

import bisect
import gc
import operator
import os
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING

from cortexctl.engine import replay, salience
from cortexctl.engine.reports import Problem, VerifyReport
from cortexctl.engine.results import iso
from cortexctl.errors import CortexError, IntegrityError, NotFound, UsageError
from cortexctl.memory import codec
from cortexctl.memory.ids import memory_uri
from cortexctl.store.interface import (HEAD_FIELDS, INFINITE_MICROS, TIME_FIELDS, VERSION_FIELDS, NoStore,
                                      OverBudget, Tx)

if TYPE_CHECKING:
    from cortexctl.engine.context import Context

MAX_PER_CHECK = 100  # problems listed per check before summarizing
BATCH = 5000  # memories per run of the per-memory checks
PARALLEL_FROM = 20_000  # memories: below this, starting worker processes costs more than it saves
CHUNKS_PER_JOB = 1  # ID ranges per worker at least (each range costs a scan of every table it reads)
RANGE_RUNS = 20  # runs per ID range at most: a run's queries look at the IDs up to its range's end


def default_jobs() -> int:
    """The CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def verify(ctx: Context, jobs: int | None = None) -> VerifyReport:
    """Prove the store sound. The per-memory checks (hashes, replay, postings) run over ID
    ranges in up to ``jobs`` processes (None or 0: the setting ``verify.jobs``, else one per
    CPU); findings are merged in ID order, so the report is the same for any ``jobs``. Every
    view is bounded (``Storage.reading(bounded=True)``); what does not fit is checked again
    through a view that is not."""
    store = ctx.storage
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or not 0 <= jobs <= 256):
        raise UsageError(f"jobs must be a whole number from 0 (one per CPU) to 256, not {jobs!r}", field="jobs")
    if not jobs:
        jobs = ctx.settings.values.get("verify.jobs") or default_jobs()
    try:
        with _collector_paused():
            try:  # bounded: DuckDB would otherwise cache all it read (1.1 GB of a 1M store's verify)
                with store.reading(bounded=True) as tx:
                    return _verify(tx, store, ctx.embedder.model, int(jobs))
            except OverBudget:  # a store whose whole-store checks need more: verified unbounded
                with store.reading() as tx:
                    return _verify(tx, store, ctx.embedder.model, int(jobs))
    except NoStore:
        raise NotFound(f"no store at {store.location}") from None


@contextmanager
def _collector_paused():
    """The cyclic garbage collector off while verify runs: the checks make millions of short-lived
    rows, dicts and tuples and no cycles, and the collector's passes over every live object cost
    about a sixth of verify's time."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class _Problems:
    def __init__(self) -> None:
        self.items: list[Problem] = []
        self.counts: dict[str, int] = {}

    def add(self, check: str, message: str, ref: str | None = None) -> None:
        self.counts[check] = self.counts.get(check, 0) + 1
        if self.counts[check] <= MAX_PER_CHECK:
            self.items.append(Problem(check, message, ref))

    def extend(self, other: _Problems) -> None:
        """Add ``other``'s problems after these, as if they had been added here one by one."""
        listed: dict[str, int] = {}
        for item in other.items:
            listed[item.check] = listed.get(item.check, 0) + 1
            self.add(item.check, item.message, item.ref)
        for check, n in other.counts.items():
            self.counts[check] = self.counts.get(check, 0) + n - listed.get(check, 0)

    def close(self) -> list[Problem]:
        for check, n in self.counts.items():
            if n > MAX_PER_CHECK:
                self.items.append(Problem(check, f"... and {n - MAX_PER_CHECK} more problems of this kind"))
        return self.items


def _verify(tx: Tx, store, model: str, jobs: int) -> VerifyReport:
    attested, learning, wide = _replay_wide(tx)
    heads = tx.count_heads()
    parallel = jobs > 1 and heads >= PARALLEL_FROM
    ranges: list[tuple[str | None, str | None]] = [(None, None)]
    if parallel or heads > RANGE_RUNS * BATCH:
        ends = tx.memory_batch_ends(BATCH)
        ranges = _ranges(ends, max(-(-(len(ends) + 1) // RANGE_RUNS), jobs * CHUNKS_PER_JOB if parallel else 1))
    parts = _split(attested, ranges)
    pool = None
    try:
        if not parallel or len(ranges) == 1:
            results = (_check_range(tx, after, upto, part, BATCH) for (after, upto), part in zip(ranges, parts))
        else:
            from cortexctl.parallel import ordered_map

            # fresh interpreters: this process holds the store open, and must not fork
            address = store.worker_address(tx)  # the workers read what ``tx`` reads
            pool = ordered_map(check_range, [(address, after, upto, part, BATCH, store.wait)
                                             for (after, upto), part in zip(ranges, parts)],
                               workers=min(jobs, len(ranges)), ahead=len(ranges), fresh=True)
            results = iter(pool)
        # the checks over the whole store, while the workers go through their ranges
        whole = _Problems()
        # in ID order whatever order the backend gives them: the report is the same from run to run
        for id_, current, n, top, why in sorted(tx.head_version_mismatches(), key=operator.itemgetter(0)):
            whole.add("heads", f"{why} (head says {current}, versions {n}, latest {top})", memory_uri(id_))
        for id_ in sorted(tx.orphan_versions()):
            whole.add("heads", "versions without a head", memory_uri(id_))
        for id_, frame, side in sorted(tx.frame_mismatches()):
            whole.add("frames", f"frame {frame} {side}", memory_uri(id_))
        for id_, message in valid_problems(tx.valid_links()):
            whole.add("valid", message, memory_uri(id_))
        n_journal, lo, _hi = tx.journal_bounds()
        if n_journal and lo != 1:
            whole.add("journal", f"first sequence number is {lo}, not 1")
        for seq, nxt in tx.journal_gaps():
            whole.add("journal", f"gap after entry {seq}: next is {nxt}")
        for seq, kind in tx.unknown_kinds(replay.KINDS):
            whole.add("journal", f"entry {seq} has an unknown kind {kind!r}")
        for seq, kind, _neighbour in tx.unpaired_attests():
            if kind == "attest":
                whole.add("journal", f"attest entry {seq} is not immediately followed by its learn_weights entry")
            else:
                whole.add("journal", f"learn_weights entry {seq} does not immediately follow an attest entry")
        tail = _Problems()
        for id_, problem in tx.stray_terms():
            tail.add("lexical", problem, memory_uri(id_))
        for id_, version, problem in tx.vector_problems():
            tail.add("vectors", problem, memory_uri(id_, version))
        for message in tx.index_problems(model):
            tail.add("index", message)
        memories = heads

        # the ranges' findings, in ID order
        hashes, memory, lexical = _Problems(), _Problems(), _Problems()
        factors: dict[int, dict[int, tuple[float, ...]]] = {}
        unwritten: list[tuple[str, int]] = []
        n_versions = 0
        for r in results:
            n_versions += r.versions
            hashes.extend(r.hashes)
            memory.extend(r.replay)
            lexical.extend(r.lexical)
            for seq, rows in r.factors.items():
                factors.setdefault(seq, {}).update(rows)
            unwritten.extend(r.unwritten)
    except BaseException:
        try:
            if pool is not None:  # an interrupt, a worker's error: the workers' ranges are stopped, not waited for
                stopping, pool = pool, None
                stopping.close(stop=True)
        finally:
            if parallel:
                from cortexctl.store import scratch

                # a worker stopped mid-range ended at once, its view's spill directory left: removed
                # now that the pool has ended (a reader's sweep: only dead processes' entries)
                scratch.sweep(scratch.areas(store), kinds=("read",))
        raise
    finally:
        if pool is not None:
            pool.close()

    p = _Problems()
    p.extend(hashes)
    p.extend(whole)
    p.extend(wide)
    p.extend(memory)
    for id_, seq in sorted(unwritten):
        p.add("replay", f"journal entry {seq} (attest) cites a memory that was never written", memory_uri(id_))
    for seq, (stamped, n) in sorted(learning.profiles.items()):
        rows = factors.get(seq, {})
        if len(rows) == n and salience.profile([rows[i] for i in range(n)]) != stamped:
            p.add("replay", f"journal entry {seq + 1} (learn_weights) stamps a factor profile that the "
                            "replayed memories do not give")
    report = VerifyReport(store=store.location, memories=memories, versions=n_versions,
                          journal=n_journal, problems=p.close())
    search = _Problems()
    search.extend(lexical)
    search.extend(tail)
    report.problems.extend(search.close())
    return report


def valid_problems(rows: list[tuple]) -> list[tuple[str, str]]:
    """(id, problem) for the valid times and supersede links of ``Tx.valid_links``'s rows: links agree
    both ways (A.superseded_by == B iff B.supersedes == A), link no memory to itself, form no cycle,
    and no interval ends before it begins."""
    heads = {r[0]: r for r in rows}
    out: list[tuple[str, str]] = []
    for id_, valid_from, valid_to, supersedes, superseded_by in rows:
        # an empty interval (a memory superseded at the very time it began to hold) ends no earlier
        # than it begins: it is sound
        if valid_from is not None and valid_to is not None and valid_to < valid_from:
            out.append((id_, f"valid interval ends ({iso(valid_to)}) before it begins ({iso(valid_from)})"))
        for field, other, back in (("supersedes", supersedes, 4), ("superseded_by", superseded_by, 3)):
            if other is None:
                continue
            if other == id_:
                out.append((id_, f"{field} links the memory to itself"))
            elif other not in heads or heads[other][back] != id_:
                out.append((id_, f"{field} is {other}, but that memory does not link back"))
    done: set[str] = set()
    for id_ in heads:  # cycles of superseded_by links, each walk going only where no walk went before
        path: dict[str, int] = {}
        at = id_
        while at is not None and at in heads and at not in done and at not in path:
            path[at] = len(path)
            at = heads[at][4]
        if at in path and heads[at][4] != at:  # a self link is said above
            ring = list(path)[path[at]:]
            out.append((min(ring), f"supersede links form a cycle: {' -> '.join([*ring, at])}"))
        done.update(path)
    return sorted(out)


def _ranges(ends: list[str], n: int) -> list[tuple[str | None, str | None]]:
    """Split the runs ending at ``ends`` (and the last, open run) into up to ``n`` ID ranges
    ``(after, upto]`` that together cover every ID, each made of whole runs."""
    runs = len(ends) + 1
    n = max(1, min(n, runs))
    cuts = [ends[(runs * k) // n - 1] for k in range(1, n)]
    bounds: list[str | None] = [None, *cuts, None]
    return list(zip(bounds[:-1], bounds[1:]))


def _split(attested: Attests, ranges: list[tuple[str | None, str | None]]) -> list[Attests]:
    """Each range's share of the attest events."""
    if len(ranges) == 1:
        return [attested]
    cuts = [upto for _after, upto in ranges[:-1]]
    parts: list[Attests] = [{} for _ in ranges]
    for id_, events in attested.items():
        parts[bisect.bisect_left(cuts, id_)][id_] = events
    return parts


class _RangeResult:
    """What the per-memory checks found over one ID range."""

    def __init__(self) -> None:
        self.versions = 0
        self.hashes, self.replay, self.lexical = _Problems(), _Problems(), _Problems()
        self.factors: dict[int, dict[int, tuple[float, ...]]] = {}
        self.unwritten: list[tuple[str, int]] = []  # (id, first attest seq) of attested IDs never written


def check_range(address: str, after: str | None, upto: str | None, attested: Attests, batch: int,
                wait: float) -> _RangeResult:
    """A worker process's share: the per-memory checks over IDs in ``(after, upto]``, on a
    read-only connection of its own (many processes may read a store at once), kept for the
    worker's next ranges of the same verify (``_worker_tx``) and let go after an error. The view is
    bounded (``Storage.reading(bounded=True)``: each worker's database would otherwise cache what it
    read); a range that does not fit is checked again, and the worker's later ranges, through a
    view that is not. An error is what the view makes of it (a damaged file names the file), said
    in one line."""
    global _BOUNDED
    with _collector_paused():
        while True:
            try:
                return _check_range(_worker_tx(address, wait, _BOUNDED), after, upto, attested, batch)
            except BaseException as exc:
                try:
                    _let_go(exc)
                except OverBudget:  # only a bounded view says so
                    _BOUNDED = False
                    continue
                except BaseException as seen:  # noqa: BLE001 - what the view made of ``exc``
                    exc = seen
                if isinstance(exc, CortexError) or not isinstance(exc, Exception):
                    raise exc from None
                first = (str(exc).strip().splitlines() or [""])[0]
                raise CortexError(f"verify worker: {type(exc).__name__}: {first}") from None


_KEPT: tuple[tuple[str, float, bool], ExitStack, Tx] | None = None  # a worker's reading view, kept between its ranges
_BOUNDED = True  # a worker's views are bounded until a range does not fit


def _worker_tx(address: str, wait: float, bounded: bool) -> Tx:
    """The worker's reading view of the store at ``address``, opened by its first range and kept for
    the next ones (a worker process serves one verify, and ends with it): each range reads the tables
    it reads through the same connection and its cache of the file, not a new one's."""
    global _KEPT
    if _KEPT is not None and _KEPT[0] == (address, wait, bounded):
        return _KEPT[2]
    _let_go()
    from cortexctl.store import open_storage

    with ExitStack() as stack:
        tx = stack.enter_context(open_storage(address, wait=wait).reading(bounded=bounded))
        _KEPT = ((address, wait, bounded), stack.pop_all(), tx)
    _let_go_at_exit()
    return tx


def _let_go_at_exit() -> None:
    """The kept view closed as the worker process ends (its spill directory removed then), not left
    to the interpreter's teardown."""
    global _AT_EXIT
    if not _AT_EXIT:
        import atexit

        atexit.register(_let_go)
        _AT_EXIT = True


_AT_EXIT = False


def _let_go(exc: BaseException | None = None) -> None:
    """Close the kept view. After ``exc``, the view is closed with it: what the view makes of it
    (``IntegrityError`` naming a damaged file, ``OverBudget``) is raised here; else nothing is."""
    global _KEPT
    kept, _KEPT = _KEPT, None
    if kept is None:
        return
    if exc is not None:
        kept[1].__exit__(type(exc), exc, exc.__traceback__)
        return
    try:
        kept[1].close()
    except Exception:  # noqa: BLE001 - a view that cannot close cleanly is let go all the same
        pass


def _check_range(tx: Tx, after: str | None, upto: str | None, attested: Attests, batch: int) -> _RangeResult:
    r = _RangeResult()
    r.versions, mismatched = tx.hash_mismatches(codec.HASH_DOMAIN, after=after, upto=upto)
    for id_, version in mismatched:
        r.hashes.add("hash", "hash does not match the stored data (corrupt or tampered)", memory_uri(id_, version))
    attested = dict(attested)
    _replay(tx, r.replay, attested, r.factors, batch, after, upto)
    r.unwritten = [(id_, events[0][0]) for id_, events in attested.items()]
    for id_, problem in tx.lexical_mismatches(_expected_terms, after=after, upto=upto, strays=False):
        r.lexical.add("lexical", problem, memory_uri(id_))
    return r


_TEXT = None


def _expected_terms(type_code: int, data: bytes) -> list[int]:
    global _TEXT
    if _TEXT is None:
        from cortexctl.memory import schema
        from cortexctl.memory.terms import text_terms
        from cortexctl.memory.types import TYPE_NAMES, type_name

        _TEXT = (schema.search_text, text_terms, TYPE_NAMES, type_name)
    search_text, text_terms, names, type_name = _TEXT
    name = names.get(type_code) or type_name(type_code)  # type_name raises for an unknown code
    return text_terms(search_text(name, codec.decode(data)))


Attests = dict[str, list[tuple[int, int, replay.Attested]]]  # id -> (seq, place among affected, event)


def _replay_wide(tx: Tx) -> tuple[Attests, replay.Learning, _Problems]:
    """Replay the entries that are not about one memory: learned weights and checkpoints,
    each compared with its table. Returns each memory's attest events, in sequence order."""
    p = _Problems()
    attested: Attests = {}
    learning = replay.Learning()
    checkpoints: dict[tuple[str, str, str], tuple[int, object, bytes]] = {}
    grants = replay.Grants()
    for seq, kind, ts, actor, ref, payload in tx.journal_entries(("attest", "learn_weights", "checkpoint",
                                                                  "grant", "revoke")):
        try:
            if kind in ("grant", "revoke"):
                grants.apply(seq, kind, payload)
            elif kind == "attest":
                learning.attest(seq, None)  # a learn_weights entry after an unreadable attest says so
                doc, ids, event = replay.attest_events(seq, payload)
                learning.attest(seq, doc)
                for place, id_ in enumerate(ids):
                    attested.setdefault(id_, []).append((seq, place, event))
            elif kind == "learn_weights":
                learning.learn(seq, actor, payload)
            else:
                record = _checkpoint_record(seq, payload)
                checkpoints[(record.created_by, record.intent, record.step)] = (seq, ts, payload)
        except IntegrityError as exc:
            p.add("replay", exc.message)
    stored = tx.all_weights()
    for actor in sorted(set(stored) | set(learning.weights)):
        if actor in learning.broken:
            continue
        row, want = stored.get(actor), learning.weights.get(actor)
        if row is None:
            p.add("weights", f"actor {actor!r}: the journal learned weights but none are stored")
        elif want is None:
            p.add("weights", f"actor {actor!r}: weights are stored but the journal never learned any")
        elif row["weights"] != want:
            p.add("weights", f"actor {actor!r}: stored weights {replay.fmt_weights(row['weights'])} but replay "
                             f"gives {replay.fmt_weights(want)}")
        elif (row["steps"], row["seq"]) != (learning.steps[actor], learning.seq[actor]):
            p.add("weights", f"actor {actor!r}: stored after {row['steps']} steps (entry {row['seq']}) but the "
                             f"journal has {learning.steps[actor]} (entry {learning.seq[actor]})")
    have = tx.all_checkpoints()
    for key in sorted(set(have) | set(checkpoints)):
        label = f"checkpoint {key[1]}/{key[2]} of actor {key[0]!r}"
        row, want = have.get(key), checkpoints.get(key)
        if row is None:
            p.add("checkpoints", f"{label} is in the journal but missing from the store")
        elif want is None:
            p.add("checkpoints", f"{label} is in the store but not in the journal")
        elif (row["seq"], row["created_at"], row["record"]) != want:
            p.add("checkpoints", f"{label} differs from journal entry {want[0]}")
    for message in grants.problems:
        p.add("grants", message)
    stored_grants = tx.all_grants()
    for id_ in sorted(set(stored_grants) | set(grants.rows)):
        row, want = stored_grants.get(id_), grants.rows.get(id_)
        if row is None:
            p.add("grants", f"grant {id_} is in the journal but missing from the store")
        elif want is None:
            p.add("grants", f"grant {id_} is in the store but not in the journal")
        elif row != want:
            differ = ", ".join(k for k in want if row.get(k) != want[k])
            p.add("grants", f"grant {id_} differs from the journal ({differ})")
    return attested, learning, p


def _checkpoint_record(seq: int, payload: bytes):
    from cortexctl.engine.compact import decode_record

    try:
        return decode_record(payload)
    except IntegrityError:
        raise IntegrityError(f"journal entry {seq} (checkpoint) does not decode") from None


def _replay(tx: Tx, p: _Problems, attested: Attests, factors: dict[int, dict[int, tuple[float, ...]]],
            batch: int, after: str | None, upto: str | None) -> None:
    """Rebuild each memory (ID in ``(after, upto]``) from the journal and compare it with the
    tables; ``factors`` gets each attested memory's salience factors just before each attest.
    The attest events of the memories met are taken out of ``attested``."""
    for journal, heads, versions in tx.by_memory(batch, after, upto, rows=True):
        rebuilt: dict[str, replay.Memory] = {}
        broken: set[str] = set()
        entries = list(journal)  # (ref, seq, kind, payload), in (ref, seq) order
        if attested:  # the run's attest events: look up whichever is fewer, the run's IDs or the events' IDs
            run = {h[0] for h in heads} | {e[0] for e in entries}
            n = len(entries)
            for id_ in (run if len(run) <= len(attested) else [i for i in attested if i in run]):
                entries.extend((id_, seq, "attest", (place, event)) for seq, place, event in attested.pop(id_, ()))
            if len(entries) > n:
                entries.sort(key=_REF_SEQ)
        for ref, seq, kind, payload in entries:
            if ref in broken:
                continue
            try:
                mem = rebuilt.setdefault(ref, replay.Memory(micros=True))
                if kind == "attest":
                    place, event = payload
                    factors.setdefault(seq, {})[place] = mem.attested(seq, event)
                else:
                    mem.apply(seq, kind, payload)
            except IntegrityError as exc:
                p.add("replay", exc.message, memory_uri(ref))
                broken.add(ref)
        stored_versions: dict[str, dict[int, tuple]] = {}
        for v in versions:
            stored_versions.setdefault(v[0], {})[v[1]] = v
        stored_heads = {h[0]: h for h in heads}
        for id_ in sorted(set(stored_heads) | set(rebuilt) - broken):
            if id_ in broken:
                continue
            mem = rebuilt.get(id_)
            uri = memory_uri(id_)
            if mem is None or mem.head is None:
                p.add("replay", "memory is in the store but the journal never wrote it", uri)
                continue
            head = stored_heads.get(id_)
            if head is None:
                p.add("replay", "the journal wrote this memory but its head is missing", uri)
                continue
            # a memory equal to its rows as a whole needs no field-by-field comparison
            if _in_order(_HEAD_ROW, mem.head) != head:
                for field, value in zip(HEAD_FIELDS, head):
                    if mem.head.get(field) != value:
                        p.add("replay", f"head field {field} is {_show(field, value)} but the journal says "
                                        f"{_show(field, mem.head.get(field))}", uri)
            have = stored_versions.get(id_, {})
            if have.keys() == mem.versions.keys() and all(
                    _in_order(_VERSION_ROW, mem.versions[n]) == row for n, row in have.items()):
                continue
            for n in sorted(set(have) | set(mem.versions)):
                if n not in have:
                    p.add("replay", f"version {n} is in the journal but missing from the store", uri)
                elif n not in mem.versions:
                    p.add("replay", f"version {n} is in the store but not in the journal", uri)
                else:
                    for field, value in zip(VERSION_FIELDS, have[n]):
                        if mem.versions[n].get(field) != value:
                            p.add("replay", f"version {n} field {field} differs from the journal", uri)


_REF_SEQ = operator.itemgetter(0, 1)
_HEAD_ROW = operator.itemgetter(*HEAD_FIELDS)
_VERSION_ROW = operator.itemgetter(*VERSION_FIELDS)


def _in_order(get, record) -> tuple | None:
    """A replayed record's values in column order; None when it lacks a column."""
    try:
        return get(record)
    except (KeyError, TypeError):
        return None

def _show(field: str, value) -> str:
    if field in TIME_FIELDS and type(value) is int:  # rows and replay hold times as microseconds
        if abs(value) == INFINITE_MICROS:
            value = "infinity" if value > 0 else "-infinity"
        else:
            try:
                value = iso(replay.from_micros(value))
            except OverflowError:
                pass
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
