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
- replaying the journal from nothing rebuilds every head and every version
  exactly, column for column: a change made to the tables behind the journal's
  back (a field edited, a row added or deleted, a forget undone) shows up as a
  divergence naming the memory and the field.
"""

from __future__ import annotations

from cortexctl.engine import replay, semantic
from cortexctl.engine.models import Problem, VerifyReport
from cortexctl.errors import IntegrityError, NotFound
from cortexctl.memory import codec
from cortexctl.memory.ids import memory_uri
from cortexctl.store import integrity
from cortexctl.store import search as search_sq
from cortexctl.store.db import NoStore

MAX_PER_CHECK = 100  # problems listed per check before summarizing


def verify(cx) -> VerifyReport:
    try:
        with cx.store.read() as con:
            report = _verify(con, str(cx.store.path))
            p = _Problems()
            _search(con, p)
            for message in semantic.verify_index(con, cx.store, cx.embedder.model):
                p.add("index", message)
            report.problems.extend(p.close())
            return report
    except NoStore:
        raise NotFound(f"no store at {cx.store.path}") from None


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


def _verify(con, store: str) -> VerifyReport:
    p = _Problems()

    n_versions = 0
    for rows in integrity.version_hash_rows(con):
        for id_, version, type_code, data, stored in rows:
            n_versions += 1
            if codec.version_hash(type_code, data) != stored:
                p.add("hash", "hash does not match the stored data (corrupt or tampered)", memory_uri(id_, version))

    for id_, current, n, top, why in integrity.head_version_mismatches(con):
        p.add("heads", f"{why} (head says {current}, versions {n}, latest {top})", memory_uri(id_))
    for id_ in integrity.orphan_versions(con):
        p.add("heads", "versions without a head", memory_uri(id_))

    for id_, frame, side in integrity.frame_mismatches(con):
        p.add("frames", f"frame {frame} {side}", memory_uri(id_))

    n_journal, lo, _hi = integrity.journal_bounds(con)
    if n_journal and lo != 1:
        p.add("journal", f"first sequence number is {lo}, not 1")
    for seq, nxt in integrity.journal_gaps(con):
        p.add("journal", f"gap after entry {seq}: next is {nxt}")

    _replay(con, p)
    return VerifyReport(store=store, memories=integrity.count_heads(con), versions=n_versions,
                        journal=n_journal, problems=p.close())


def _search(con, p: _Problems) -> None:
    """The lexical postings match every memory's current text; every vector is whole and current."""
    for id_, problem in search_sq.lexical_mismatches(con, _expected_terms):
        p.add("lexical", problem, memory_uri(id_))
    for id_, version, problem in search_sq.vector_problems(con):
        p.add("vectors", problem, memory_uri(id_, version))


def _expected_terms(type_code: int, data: bytes) -> list[int]:
    from cortexctl.memory import schema
    from cortexctl.memory.terms import text_terms
    from cortexctl.memory.types import type_name

    return text_terms(schema.search_text(type_name(type_code), codec.decode(data)))


def _replay(con, p: _Problems) -> None:
    """Rebuild each memory from the journal and compare it with the tables."""
    for journal, heads, versions in integrity.by_memory(con):
        rebuilt: dict[str, replay.Memory] = {}
        broken: set[str] = set()
        for ref, seq, kind, payload in journal:
            if ref in broken:
                continue
            try:
                rebuilt.setdefault(ref, replay.Memory()).apply(seq, kind, payload)
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


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
