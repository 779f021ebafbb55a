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
  is the stored checkpoint record.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cortexctl.engine import replay, salience, semantic
from cortexctl.engine.models import Problem, VerifyReport
from cortexctl.errors import IntegrityError, NotFound
from cortexctl.memory import codec
from cortexctl.memory.ids import memory_uri
from cortexctl.store.interface import NoStore, Tx

if TYPE_CHECKING:
    from cortexctl.engine.context import Context

MAX_PER_CHECK = 100  # problems listed per check before summarizing


def verify(ctx: Context) -> VerifyReport:
    store = ctx.storage
    try:
        with store.reading() as tx:
            report = _verify(tx, str(store.path))
            p = _Problems()
            _search(tx, p)
            for message in semantic.verify_index(tx, store, ctx.embedder.model):
                p.add("index", message)
            report.problems.extend(p.close())
            return report
    except NoStore:
        raise NotFound(f"no store at {store.path}") from None


class _Problems:
    def __init__(self) -> None:
        self.items: list[Problem] = []
        self.counts: dict[str, int] = {}

    def add(self, check: str, message: str, ref: str | None = None) -> None:
        self.counts[check] = self.counts.get(check, 0) + 1
        if self.counts[check] <= MAX_PER_CHECK:
            self.items.append(Problem(check, message, ref))

    def close(self) -> list[Problem]:
        for check, n in self.counts.items():
            if n > MAX_PER_CHECK:
                self.items.append(Problem(check, f"... and {n - MAX_PER_CHECK} more problems of this kind"))
        return self.items


def _verify(tx: Tx, store: str) -> VerifyReport:
    p = _Problems()

    n_versions = 0
    for rows in tx.version_hashes():
        for id_, version, type_code, data, stored in rows:
            n_versions += 1
            if codec.version_hash(type_code, data) != stored:
                p.add("hash", "hash does not match the stored data (corrupt or tampered)", memory_uri(id_, version))

    for id_, current, n, top, why in tx.head_version_mismatches():
        p.add("heads", f"{why} (head says {current}, versions {n}, latest {top})", memory_uri(id_))
    for id_ in tx.orphan_versions():
        p.add("heads", "versions without a head", memory_uri(id_))

    for id_, frame, side in tx.frame_mismatches():
        p.add("frames", f"frame {frame} {side}", memory_uri(id_))

    n_journal, lo, _hi = tx.journal_bounds()
    if n_journal and lo != 1:
        p.add("journal", f"first sequence number is {lo}, not 1")
    for seq, nxt in tx.journal_gaps():
        p.add("journal", f"gap after entry {seq}: next is {nxt}")
    for seq, kind in tx.unknown_kinds(replay.KINDS):
        p.add("journal", f"entry {seq} has an unknown kind {kind!r}")
    for seq, kind, neighbour in tx.unpaired_attests():
        if kind == "attest":
            p.add("journal", f"attest entry {seq} is not immediately followed by its learn_weights entry")
        else:
            p.add("journal", f"learn_weights entry {seq} does not immediately follow an attest entry")

    attested, learning = _replay_wide(tx, p)
    factors: dict[int, dict[int, tuple[float, ...]]] = {}
    _replay(tx, p, attested, factors)
    for seq, (stamped, n) in sorted(learning.profiles.items()):
        rows = factors.get(seq, {})
        if len(rows) == n and salience.profile([rows[i] for i in range(n)]) != stamped:
            p.add("replay", f"journal entry {seq + 1} (learn_weights) stamps a factor profile that the "
                            "replayed memories do not give")
    return VerifyReport(store=store, memories=tx.count_heads(), versions=n_versions,
                        journal=n_journal, problems=p.close())


def _search(tx: Tx, p: _Problems) -> None:
    """The lexical postings match every memory's current text; every vector is whole and current."""
    for id_, problem in tx.lexical_mismatches(_expected_terms):
        p.add("lexical", problem, memory_uri(id_))
    for id_, version, problem in tx.vector_problems():
        p.add("vectors", problem, memory_uri(id_, version))


def _expected_terms(type_code: int, data: bytes) -> list[int]:
    from cortexctl.memory import schema
    from cortexctl.memory.terms import text_terms
    from cortexctl.memory.types import type_name

    return text_terms(schema.search_text(type_name(type_code), codec.decode(data)))


Attests = dict[str, list[tuple[int, int, replay.Attested]]]  # id -> (seq, place among affected, event)


def _replay_wide(tx: Tx, p: _Problems) -> tuple[Attests, replay.Learning]:
    """Replay the entries that are not about one memory: learned weights and checkpoints,
    each compared with its table. Returns each memory's attest events, in sequence order."""
    attested: Attests = {}
    learning = replay.Learning()
    checkpoints: dict[tuple[str, str, str], tuple[int, object, bytes]] = {}
    for seq, kind, ts, actor, ref, payload in tx.journal_entries(("attest", "learn_weights", "checkpoint")):
        try:
            if kind == "attest":
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
    return attested, learning


def _checkpoint_record(seq: int, payload: bytes):
    from cortexctl.engine.compact import decode_record

    try:
        return decode_record(payload)
    except IntegrityError:
        raise IntegrityError(f"journal entry {seq} (checkpoint) does not decode") from None


def _replay(tx: Tx, p: _Problems, attested: Attests, factors: dict[int, dict[int, tuple[float, ...]]]) -> None:
    """Rebuild each memory from the journal and compare it with the tables; ``factors``
    gets each attested memory's salience factors just before each attest."""
    for journal, heads, versions in tx.by_memory():
        rebuilt: dict[str, replay.Memory] = {}
        broken: set[str] = set()
        entries = [(ref, seq, kind, payload) for ref, seq, kind, payload in journal]
        for id_ in {h["id"] for h in heads} | {e[0] for e in entries}:
            entries.extend((id_, seq, "attest", (place, event)) for seq, place, event in attested.pop(id_, ()))
        entries.sort(key=lambda e: (e[0], e[1]))
        for ref, seq, kind, payload in entries:
            if ref in broken:
                continue
            try:
                mem = rebuilt.setdefault(ref, replay.Memory())
                if kind == "attest":
                    place, event = payload
                    factors.setdefault(seq, {})[place] = mem.attested(seq, event)
                else:
                    mem.apply(seq, kind, payload)
            except IntegrityError as exc:
                p.add("replay", exc.message, memory_uri(ref))
                broken.add(ref)
        stored_versions: dict[str, dict[int, dict]] = {}
        for v in versions:
            stored_versions.setdefault(v["id"], {})[v["version"]] = v
        stored_heads = {h["id"]: h for h in heads}
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
            for field, value in head.items():
                if mem.head.get(field) != value:
                    p.add("replay", f"head field {field} is {_show(value)} but the journal says "
                                    f"{_show(mem.head.get(field))}", uri)
            have = stored_versions.get(id_, {})
            for n in sorted(set(have) | set(mem.versions)):
                if n not in have:
                    p.add("replay", f"version {n} is in the journal but missing from the store", uri)
                elif n not in mem.versions:
                    p.add("replay", f"version {n} is in the store but not in the journal", uri)
                else:
                    for field, value in have[n].items():
                        if mem.versions[n].get(field) != value:
                            p.add("replay", f"version {n} field {field} differs from the journal", uri)
    for id_, events in sorted(attested.items()):
        p.add("replay", f"journal entry {events[0][0]} (attest) cites a memory that was never written",
              memory_uri(id_))


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
