"""The DuckDB backend's transaction: ``DuckTx`` implements ``interface.Tx`` over one connection.

Each method runs the queries of ``records`` (heads, versions, frames, journal),
``search`` (vectors, postings), ``feedback`` (weights, buckets, checkpoints)
and ``integrity`` (verify's reads). Filters become SQL here, once per
``Filters`` value: find asks about the same filters several times per query.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Sequence

from cortexctl.store import records
from cortexctl.store import search as sq
from cortexctl.store.interface import HEAD_FIELDS, Filters, Scoring, Viewer
from cortexctl.store.lanes import Lanes


class DuckTx(Lanes):
    """One DuckDB connection seen through ``interface.Tx`` (the caller owns BEGIN/COMMIT).

    Beside the protocol it holds the backend's own reads: postings for ``store/lexical.py``
    and vector keys for the index file (``store/vector_index.py``)."""

    __slots__ = ("con", "store", "_where", "wide")

    def __init__(self, con, store=None) -> None:
        self.con = con
        self.store = store  # the DuckStorage it came from (its index file); None for a bare connection
        self._where: dict[Filters, tuple[str, list[Any]]] = {}
        # What this transaction changed, the search snapshot's delta (store/snapshot/) reads from the
        # journal: every change to a memory is a journal entry, and vectors come with growing keys.
        # ``wide``: a change that is neither, not one memory's (a model's vectors dropped, the
        # dropped keys cleared, a bundle attached): the snapshot then waits for the next fold.
        self.wide = False

    def _sql(self, filters: Filters) -> tuple[str, list[Any]]:
        got = self._where.get(filters)
        if got is None:
            got = self._where[filters] = records.filter_sql(filters)
        return got

    @staticmethod
    def _scoring(scoring: Scoring) -> tuple[str, list[Any]]:
        return records.salience_sql(scoring)

    # -- heads and versions ---------------------------------------------------------
    def insert_memories(self, heads: list[dict], versions: list[dict]) -> None:
        records.insert_memories(self.con, heads, versions)

    def defer_compaction(self) -> None:
        """Leave what this transaction writes unmerged with earlier writes' at close (a bulk
        load's transactions that do not tidy: ``Storage.transaction(bulk=True, tidy=False)``)."""
        # DuckDB's checkpoint at close merges small row groups into bigger ones ("vacuum"). Batch
        # after batch, that rewrites the tables' last row groups again and again (closes cost 2, 4,
        # 8, 16 batches' worth in turn). The setting lives until this connection closes.
        records.defer_compaction(self.con)

    def insert_version(self, version: dict) -> None:
        records.insert_version(self.con, version)

    def update_head(self, id_: str, fields: dict[str, Any]) -> None:
        moved = "visibility" in fields and self.con.execute(
            "SELECT visibility IS DISTINCT FROM ? FROM heads WHERE id = ?", [fields["visibility"], id_]).fetchall()
        records.update_head(self.con, id_, fields)
        if moved and moved[0][0]:  # another index file holds its class now
            sq.rekey_vectors(self.con, id_)

    def heads_by_ids(self, ids: Sequence[str], actor: str | Viewer, fields: Sequence[str] = HEAD_FIELDS) -> list[dict]:
        return records.heads_by_ids(self.con, ids, actor, fields)

    def heads_by_prefix(self, prefix: str, actor: str | Viewer, limit: int = 6) -> list[dict]:
        return records.heads_by_prefix(self.con, prefix, actor, limit)

    def existing_ids(self, ids: Sequence[str]) -> set[str]:
        return records.head_exists(self.con, ids)

    def stored_hashes(self, ids: Sequence[str]) -> dict[str, tuple[str, list[bytes]]]:
        return records.stored_hashes(self.con, ids)

    def versions(self, id_: str, version: int | None = None) -> list[dict]:
        return records.versions_of(self.con, id_, version)

    def current_versions(self, ids: Sequence[str]) -> dict[str, dict]:
        return records.current_versions(self.con, list(ids))

    def current_data(self, current: dict[str, int]) -> dict[str, tuple[int, bytes]]:
        return records.current_data(self.con, current)

    def count_heads(self, filters: Filters | None = None) -> int:
        if filters is None:
            return records.count_heads(self.con)
        return records.count_heads(self.con, *self._sql(filters))

    def iter_visible(self, actor: str | Viewer, batch: int = 2000):
        return records.iter_visible(self.con, actor, batch)

    def bump(self, ids: Sequence[str], *, access: int, citations: int, at: datetime) -> None:
        from cortexctl.store import feedback

        feedback.bump(self.con, ids, access=access, citations=citations, at=at)

    # -- journal --------------------------------------------------------------------------
    def next_seq(self) -> int:
        return records.next_seq(self.con)

    def append_journal(self, entries) -> int:
        return records.append_journal(self.con, list(entries))

    # -- filtered candidate sets and salience ------------------------------------------------
    def passing(self, ids: Sequence[str], filters: Filters) -> dict[str, int]:
        return records.passing(self.con, ids, *self._sql(filters))

    def live_versions(self, ids: Sequence[str]) -> dict[str, int]:
        return records.passing(self.con, ids, "h.tombstoned_at IS NULL", [])

    def top_salience(self, filters: Filters, scoring: Scoring, limit: int) -> list[tuple[str, float]]:
        where, params = self._sql(filters)
        return records.top_salience(self.con, where, params, self._scoring(scoring), limit)

    def candidates(self, ids: Sequence[str], filters: Filters, scoring: Scoring) -> dict[str, tuple[int, bool, float]]:
        where, params = self._sql(filters)
        return records.candidate_rows(self.con, ids, where, params, self._scoring(scoring))

    def session_neighbours(self, ids: Sequence[str], filters: Filters, reach: int = 1
                           ) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
        where, params = self._sql(filters)
        return records.session_neighbours(self.con, ids, where, params, reach)

    def sessions(self, actor: str | Viewer, turn_tag: str, summary_tag: str) -> list[dict]:
        return records.sessions(self.con, actor, turn_tag, summary_tag)

    def result_rows(self, ids: Sequence[str], form: str) -> dict[str, dict]:
        return records.result_rows(self.con, ids, form)

    def search_data(self, ids: Sequence[str]) -> dict[str, tuple[int, bytes]]:
        return {i: (int(v["type"]), v["data"]) for i, v in records.current_versions(self.con, list(ids)).items()}

    # -- lexical postings ----------------------------------------------------------------------
    def add_terms(self, docs) -> None:
        sq.lex_add(self.con, docs)

    def replace_terms(self, id_: str, term_ids: Sequence[int]) -> None:
        sq.lex_replace(self.con, id_, term_ids)

    def doc_count(self) -> int:
        return sq.doc_count(self.con)

    def postings_of(self, terms: Sequence[int]):
        return sq.postings_of(self.con, terms)

    def docs_passing(self, docs, filters: Filters):
        return None  # answered memory by memory (``passing``): see ``lexical.filtered_top``

    def doc_ids(self, docs: Sequence[int]) -> dict[int, str]:
        return sq.doc_ids(self.con, docs)

    def hidden_docs(self, actor: str | Viewer):
        return sq.hidden_docs(self.con, actor)

    def term_df(self, terms: Sequence[int], hidden) -> dict[int, int]:
        return sq.term_df(self.con, terms, hidden)

    def doc_terms(self, docs: Sequence[int]):
        return sq.doc_terms(self.con, docs)

    # -- vectors ----------------------------------------------------------------------------------
    def insert_vectors(self, ids: Sequence[str], versions: Sequence[int], model: str, matrix) -> int:
        return sq.insert_vectors(self.con, ids, versions, model, matrix)

    def model_dim(self, model: str) -> int | None:
        return sq.model_dim(self.con, model)

    def drop_vectors(self, id_: str, *, model: str | None = None) -> None:
        sq.drop_vectors(self.con, id_, model=model)

    def drop_model(self, model: str) -> int:
        self.wide = True
        return sq.drop_model(self.con, model)

    def drop_other_models(self, model: str) -> int:
        self.wide = True
        return sq.drop_other_models(self.con, model)

    def other_models(self, model: str) -> bool:
        return sq.other_models(self.con, model)

    def maybe_pending(self, model: str) -> bool:
        return sq.maybe_pending(self.con, model)

    def count_pending(self, model: str) -> int:
        return sq.count_pending(self.con, model)

    def pending(self, model: str, *, limit: int | None = None, ids: Sequence[str] | None = None):
        return sq.pending(self.con, model, limit=limit, ids=None if ids is None else list(ids))

    def vector_stats(self, model: str) -> tuple[int, int, int | None]:
        return sq.vector_stats(self.con, model)

    def count_vectors(self, model: str, *, after: int = 0) -> int:
        return sq.count_vectors(self.con, model, after)

    def covered(self, model: str, max_key: int) -> int:
        return sq.covered(self.con, model, max_key)

    def dropped_keys(self, model: str) -> list[int]:
        return sq.dropped_keys(self.con, model)

    def clear_dropped(self, model: str | None = None) -> None:
        self.wide = True
        sq.clear_dropped(self.con, model)

    def clear_folded(self, model: str, keys: Sequence[int]) -> None:
        """Take ``keys`` out of the dropped keys once a background fold has taken them out of both the
        index file and the search snapshot (``store/fold.py``): the snapshot's delta follows it, so
        it is not a wide change."""
        sq.clear_dropped(self.con, model, keys)

    def iter_vectors(self, model: str, dim: int, *, after: int = 0, batch: int = 50_000):
        return sq.iter_vectors(self.con, model, dim, after=after, batch=batch)

    def vector_classes(self, model: str, *, after: int = 0):
        return sq.vector_classes(self.con, model, after=after)

    def class_counts(self, model: str) -> dict[str, int]:
        return sq.class_counts(self.con, model)

    def vector_chunks(self, filters: Filters, model: str, dim: int):
        where, params = self._sql(filters)
        return sq.vector_chunks(self.con, where, params, model, dim)

    def vector_keys_for(self, filters: Filters, model: str):
        return None  # the vectors come with the same query (vector_chunks)

    def vectors_of_keys(self, keys: Sequence[int], model: str) -> list[tuple[int, str, int]]:
        return sq.vectors_of_keys(self.con, keys, model)

    def vectors_at_keys(self, keys: Sequence[int], model: str, dim: int):
        return sq.vectors_at_keys(self.con, keys, model, dim)

    def stored_vectors(self, pairs: Sequence[tuple[str, int]], model: str) -> dict:
        return sq.stored_vectors(self.con, pairs, model)

    def vectors_between(self, model: str, lo: int, hi: int) -> dict[int, tuple[str, int]]:
        return sq.vectors_between(self.con, model, lo, hi)

    def vectors_after(self, model: str, after: int, dim: int):
        return sq.vectors_after(self.con, model, after, dim)

    # -- learned weights, rate buckets, checkpoints ------------------------------------------------
    def weights(self, actor: str) -> tuple[float, ...] | None:
        from cortexctl.store import feedback

        return feedback.weights_of(self.con, actor)

    def set_weights(self, actor: str, weights: Sequence[float], *, seq: int, at: datetime) -> None:
        from cortexctl.store import feedback

        feedback.set_weights(self.con, actor, weights, seq=seq, at=at)

    def all_weights(self) -> dict[str, dict]:
        from cortexctl.store import feedback

        return feedback.all_weights(self.con)

    def take_token(self, actor: str, intent: str, now: datetime, *, rate: float, burst: float) -> bool:
        from cortexctl.store import feedback

        return feedback.take_token(self.con, actor, intent, now, rate=rate, burst=burst)

    def put_checkpoint(self, row: dict) -> None:
        from cortexctl.store import feedback

        feedback.put_checkpoint(self.con, row)

    def checkpoint(self, actor: str, intent: str, step: str) -> dict | None:
        from cortexctl.store import feedback

        return feedback.checkpoint(self.con, actor, intent, step)

    def all_checkpoints(self) -> dict[tuple[str, str, str], dict]:
        from cortexctl.store import feedback

        return feedback.all_checkpoints(self.con)

    # -- scoped grants ------------------------------------------------------------------------
    # A grant changes no memory's rows: the snapshot's delta keeps every memory, and its header
    # (rewritten after every committing write) carries the grants anew.
    def live_grants(self, subagent: str, now: datetime) -> list[dict]:
        from cortexctl.store import grants

        return grants.live_grants(self.con, subagent, now)

    def grants_of(self, actor: str) -> list[dict]:
        from cortexctl.store import grants

        return grants.grants_of(self.con, actor)

    def insert_grant(self, row: dict) -> None:
        from cortexctl.store import grants

        grants.insert_grant(self.con, row)

    def revoke_grant(self, id_: str, *, at: datetime, by: str) -> None:
        from cortexctl.store import grants

        grants.revoke_grant(self.con, id_, at=at, by=by)

    def all_grants(self) -> dict[str, dict]:
        from cortexctl.store import grants

        return grants.all_grants(self.con)

    # -- integrity (verify) ---------------------------------------------------------------------
    def hash_mismatches(self, domain: bytes, after: str | None = None, upto: str | None = None):
        from cortexctl.store import integrity

        return integrity.hash_mismatches(self.con, domain, after, upto)

    def head_version_mismatches(self) -> list[tuple]:
        from cortexctl.store import integrity

        return integrity.head_version_mismatches(self.con)

    def orphan_versions(self) -> list[str]:
        from cortexctl.store import integrity

        return integrity.orphan_versions(self.con)

    def frame_mismatches(self) -> list[tuple]:
        from cortexctl.store import integrity

        return integrity.frame_mismatches(self.con)

    def valid_links(self) -> list[tuple]:
        from cortexctl.store import integrity

        return integrity.valid_links(self.con)

    def journal_bounds(self) -> tuple[int, int | None, int | None]:
        from cortexctl.store import integrity

        return integrity.journal_bounds(self.con)

    def journal_gaps(self) -> list[tuple[int, int]]:
        from cortexctl.store import integrity

        return integrity.journal_gaps(self.con)

    def unknown_kinds(self, known: Sequence[str]) -> list[tuple[int, str]]:
        from cortexctl.store import integrity

        return integrity.unknown_kinds(self.con, known)

    def unpaired_attests(self) -> list[tuple[int, str, str | None]]:
        from cortexctl.store import integrity

        return integrity.unpaired_attests(self.con)

    def journal_entries(self, kinds: Sequence[str], batch: int = 10000):
        from cortexctl.store import integrity

        return integrity.entries_of(self.con, tuple(kinds), batch)

    def journal_memo(self) -> dict | None:
        return None  # a view of the database itself: nothing tells cheaply that no commit came since

    def seq_at(self, at) -> int:
        from cortexctl.store import integrity

        return integrity.seq_at(self.con, at)

    def journal_window(self, after: int = 0, upto: int | None = None, kinds: Sequence[str] = (),
                       refs: Sequence[str] | None = None, batch: int = 10000, payloads: bool = True):
        from cortexctl.store import integrity

        return integrity.journal_window(self.con, after, upto, tuple(kinds), None if refs is None else list(refs),
                                        batch, payloads)

    def memory_batch_ends(self, batch: int = 5000) -> list[str]:
        from cortexctl.store import integrity

        return integrity.memory_batch_ends(self.con, batch)

    def by_memory(self, batch: int = 5000, after: str | None = None, upto: str | None = None, rows: bool = False):
        from cortexctl.store import integrity

        return integrity.by_memory(self.con, batch, after, upto, rows)

    def lexical_mismatches(self, expected, after: str | None = None, upto: str | None = None, strays: bool = True):
        return sq.lexical_mismatches(self.con, expected, after=after, upto=upto, strays=strays)

    def stray_terms(self):
        return sq.stray_terms(self.con)

    def vector_problems(self):
        return sq.vector_problems(self.con)


    def text_twins(self, actor: str, type_code: int, n_terms: int, term: int) -> list[str]:
        return sq.text_twins(self.con, actor, type_code, n_terms, term)

    def ref_counts(self, parts: Sequence[str]) -> dict[str, int]:
        return records.ref_counts(self.con, parts)

    def health_counts(self) -> dict:
        from cortexctl.store import integrity

        integrity.read_every_block(self.con)  # a damaged block fails here, not as "healthy"
        return records.health_counts(self.con)

    # -- bundles -----------------------------------------------------------------------
    def table_counts(self, tables: Sequence[str]) -> dict[str, int]:
        from cortexctl.store import bundle

        return bundle.table_counts(self.con, tables)

    def version_digest(self) -> str:
        from cortexctl.store import bundle

        return bundle.version_digest(self.con)

    def attach_bundle(self, files: dict) -> None:
        from cortexctl.store import bundle

        self.wide = True
        bundle.attach_members(self.con, files)

    def bundle_plan(self):
        from cortexctl.store import bundle

        return bundle.merge_plan(self.con)

    def bundle_memories(self, ids: Sequence[str], after: dict[str, int]) -> list[tuple[dict, list[dict]]]:
        from cortexctl.store import bundle
        from cortexctl.store.interface import VERSION_FIELDS

        heads = bundle.bundle_heads(self.con, ids, HEAD_FIELDS)
        versions = bundle.bundle_versions(self.con, ids, VERSION_FIELDS, after)
        return [(heads[i], versions.get(i, [])) for i in ids if i in heads]

    def heads_of(self, ids: Sequence[str]) -> dict[str, dict]:
        from cortexctl.store import bundle

        return bundle.heads_of(self.con, ids, HEAD_FIELDS)

    def bundle_missing_checkpoints(self) -> list[dict]:
        from cortexctl.store import bundle
        from cortexctl.store.interface import CHECKPOINT_FIELDS

        return bundle.bundle_missing_checkpoints(self.con, CHECKPOINT_FIELDS)

    def bundle_grants(self) -> list[dict]:
        from cortexctl.store import bundle

        return bundle.bundle_grants(self.con)

    def bundle_links(self) -> list[tuple]:
        from cortexctl.store import bundle

        return bundle.bundle_links(self.con)


__all__ = ["DuckTx"]
