"""The lexical lane on PostgreSQL: BM25 postings in tables, ranked by ``store/lexical.py`` (``LexicalReads``).

The postings are the DuckDB store's: ``lex_docs`` gives each memory a doc number
(the next above every one given so far, a fresh one when its text changes) and its
length in terms; ``lex_postings`` holds (term ID, doc, term frequency) rows. They
change in the same transaction as the memory, so the lane is never behind the
store, and ``store/lexical.py`` ranks over them exactly as it does over DuckDB's
tables: the same BM25 with feedback, the same scores on both backends.

Postings come back to Python as numpy arrays packed by the server into one
``bytea`` (``packed_columns``: no Python object per row): a common word's
postings at 100k memories are tens of thousands of rows.
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any, Sequence

from cortexctl.store.interface import Filters, Viewer
from cortexctl.store.predicate import id_range

_CURSORS = itertools.count(1)  # server-side cursor names, unique in the process
TF_MAX = 32767  # lex_postings.tf is a smallint: a term repeated more often counts this many times


_SEND = {"i8": "int8send", "i4": "int4send", "i2": "int2send"}


def packed_columns(con, source: str, params: Sequence[Any], columns: Sequence[tuple[str, str, str]],
                   order: str = "") -> dict:
    """``SELECT <columns> <source>`` as numpy arrays, one per column, read as one ``bytea``.

    ``columns``: (SQL expression, name, kind) of NOT NULL integer columns, kind ``i8``
    (bigint), ``i4`` or ``i2``. The server packs every row's binary form into one value
    (``string_agg`` of ``int8send``...; ``order`` is its ORDER BY), which arrives in one
    message and becomes the arrays without a Python object per row.
    """
    import numpy as np

    packed = " || ".join(f"{_SEND[kind]}({expr})" for expr, _, kind in columns)
    order_by = f" ORDER BY {order}" if order else ""
    row = con.execute(f"SELECT string_agg({packed}, ''::bytea{order_by}) {source}", list(params),
                      binary=True).fetchone()
    raw = bytes(row[0]) if row and row[0] is not None else b""
    rows = np.frombuffer(raw, dtype=np.dtype([(name, ">" + kind) for _, name, kind in columns]))
    return {name: rows[name].astype("<" + kind) for _, name, kind in columns}


_COPY_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + bytes(8)  # a binary COPY's header: signature, flags, extension
_COPY_TRAILER = b"\xff\xff"


def _copy_postings(con, first: int, lens: Sequence[int], docs: Sequence[tuple[str, Sequence[int]]]) -> None:
    """The postings of ``docs`` (doc numbers from ``first``) into ``lex_postings`` by one binary COPY whose
    rows numpy lays out (3 fields: 8-byte term, 8-byte doc, 2-byte tf), with no Python object per row."""
    import numpy as np

    total = int(sum(lens))
    terms = np.fromiter(itertools.chain.from_iterable(t for _, t in docs), dtype=np.int64, count=total)
    doc = np.repeat(np.arange(first, first + len(docs), dtype=np.int64), np.asarray(lens, dtype=np.int64))
    order = np.lexsort((terms, doc))
    terms, doc = terms[order], doc[order]
    start = np.ones(total, dtype=bool)
    start[1:] = (terms[1:] != terms[:-1]) | (doc[1:] != doc[:-1])
    at = np.flatnonzero(start)
    tf = np.minimum(np.diff(np.append(at, total)), TF_MAX)
    rows = np.zeros(len(at), dtype=np.dtype([("n", ">i2"), ("lt", ">i4"), ("term", ">i8"), ("ld", ">i4"),
                                            ("doc", ">i8"), ("lf", ">i4"), ("tf", ">i2")]))
    rows["n"], rows["lt"], rows["ld"], rows["lf"] = 3, 8, 8, 2
    rows["term"], rows["doc"], rows["tf"] = terms[at], doc[at], tf
    with con.cursor() as cur, cur.copy("COPY lex_postings (term, doc, tf) FROM STDIN (FORMAT BINARY)") as copy:
        copy.write(_COPY_SIGNATURE)
        data = memoryview(rows.tobytes())
        step = 1 << 20
        for i in range(0, len(data), step):
            copy.write(data[i:i + step])
        copy.write(_COPY_TRAILER)


KEPT_MAX = 200_000  # term counts a resident storage keeps for one state of the store
POSTINGS_KEPT = 4_000_000  # postings it keeps (10 bytes each), beyond which it starts again
VIEWERS_KEPT = 16  # viewers whose hidden documents it keeps


class LexicalReads:
    """``interface.LexicalSearch`` and the postings parts of ``Integrity`` over a ``PgTx``'s connection,
    with the reads ``store/lexical.py`` ranks over (doc_count, postings_of, doc_ids, hidden_docs,
    term_df, doc_terms)."""

    # -- writing ---------------------------------------------------------------------------
    def add_terms(self, docs: Sequence[tuple[str, Sequence[int]]]) -> None:
        """Postings for new memories: each gets the next doc number, in the order given."""
        if not docs:
            return
        if len(docs) <= 8:  # a write's: numbered by the server, docs and postings in one statement
            ids, lens, p_ids, p_terms, p_tfs = [], [], [], [], []
            for id_, tids in docs:
                ids.append(id_)
                lens.append(len(tids))
                for t, c in Counter(tids).items():
                    p_ids.append(id_)
                    p_terms.append(int(t))
                    p_tfs.append(min(c, TF_MAX))
            self._con.execute(
                "WITH d AS (INSERT INTO lex_docs (doc, id, len)"
                " SELECT (SELECT coalesce(max(doc), 0) FROM lex_docs) + u.n, u.id, u.len"
                " FROM unnest(%s::text[], %s::int[]) WITH ORDINALITY AS u(id, len, n) RETURNING doc, id)"
                " INSERT INTO lex_postings (term, doc, tf) SELECT p.term, d.doc, p.tf"
                " FROM unnest(%s::text[], %s::bigint[], %s::smallint[]) AS p(id, term, tf) JOIN d ON d.id = p.id",
                [ids, lens, p_ids, p_terms, p_tfs])
            return
        first = int(self._rows("SELECT coalesce(max(doc), 0) + 1 FROM lex_docs")[0][0])
        lens = [len(tids) for _, tids in docs]
        self._insert("lex_docs", ("doc", "id", "len"), [(first + i, d[0], lens[i]) for i, d in enumerate(docs)])
        _copy_postings(self._con, first, lens, docs)

    def replace_terms(self, id_: str, term_ids: Sequence[int]) -> None:
        self._con.execute("DELETE FROM lex_postings WHERE doc IN (SELECT doc FROM lex_docs WHERE id = %s)", [id_])
        self._con.execute("DELETE FROM lex_docs WHERE id = %s", [id_])
        self.add_terms([(id_, term_ids)])

    # -- searching ---------------------------------------------------------------------------
    def search_terms(self, terms: dict[int, float], filters: Filters, n: int) -> list[tuple[str, float]]:
        from cortexctl.store import lexical

        return lexical.search(self, terms, filters, n)

    def score_terms(self, terms: dict[int, float], docs, viewer) -> dict[str, float]:
        from cortexctl.store import lexical

        return lexical.score_docs(self, terms, docs, viewer)

    def text_twins(self, actor: str, type_code: int, n_terms: int, term: int, limit: int = 20) -> list[str]:
        rows = self._rows(
            "SELECT h.id FROM lex_docs d JOIN heads h ON h.id = d.id WHERE d.len = %s AND h.actor = %s AND h.type = %s"
            " AND h.tombstoned_at IS NULL AND d.doc IN (SELECT doc FROM lex_postings WHERE term = %s)"
            f" ORDER BY h.id LIMIT {int(limit)}", [int(n_terms), actor, int(type_code), int(term)])
        return [r[0] for r in rows]

    # -- the reads store/lexical.py ranks over -------------------------------------------------
    def doc_count(self) -> int:
        kept = self._kept()
        if kept is not None and "docs" in kept:
            return kept["docs"]
        got = int(self._rows("SELECT count(*) FROM lex_docs")[0][0])
        if kept is not None:
            kept["docs"] = got
        return got

    def postings_of(self, terms: Sequence[int]):
        """Every posting of these terms: numpy arrays term (int64), doc (uint64), tf (uint16)."""
        import numpy as np

        if not terms:
            return {"term": np.zeros(0, np.int64), "doc": np.zeros(0, np.uint64), "tf": np.zeros(0, np.uint16)}
        kept = self._kept()
        if kept is None:  # grouped by term in term order, whatever the plan (BM25 sums a doc's terms in this order)
            got = packed_columns(self._con, "FROM lex_postings WHERE term = ANY(%s::bigint[])",
                                 [[int(t) for t in terms]], [("term", "term", "i8"), ("doc", "doc", "i8"),
                                                             ("tf", "tf", "i2")])
            order = np.argsort(got["term"], kind="stable")
            return {"term": got["term"][order], "doc": got["doc"][order].astype(np.uint64),
                    "tf": got["tf"][order].astype(np.uint16)}
        # A resident storage keeps each term's postings for this state of the store, and hands them on
        # in the same order: the same sums
        held = kept.setdefault("postings", {})  # term -> (docs, tfs)
        if kept.get("postings held", 0) > POSTINGS_KEPT:  # a long-lived process read very many: start again
            held.clear()
            kept["postings held"] = 0
        want = sorted({int(t) for t in terms})
        missing = [t for t in want if t not in held]
        if missing:
            got = packed_columns(self._con, "FROM lex_postings WHERE term = ANY(%s::bigint[])", [missing],
                                 [("term", "term", "i8"), ("doc", "doc", "i8"), ("tf", "tf", "i2")])
            order = np.argsort(got["term"], kind="stable")
            term, doc, tf = got["term"][order], got["doc"][order].astype(np.uint64), got["tf"][order].astype(np.uint16)
            bounds = np.searchsorted(term, missing + [missing[-1] + 1])
            for t, lo, hi in zip(missing, bounds[:-1].tolist(), bounds[1:].tolist()):
                held[t] = (doc[lo:hi], tf[lo:hi])
            kept["postings held"] = kept.get("postings held", 0) + len(term)
        parts = [held[t] for t in want]
        return {"term": np.repeat(np.array(want, dtype=np.int64), [len(d) for d, _ in parts]),
                "doc": np.concatenate([d for d, _ in parts]), "tf": np.concatenate([f for _, f in parts])}

    def doc_ids(self, docs: Sequence[int]) -> dict[int, str]:
        if not len(docs):
            return {}
        kept = self._kept()
        if kept is None:
            return {int(d): i for d, i in self._rows("SELECT doc, id FROM lex_docs WHERE doc = ANY(%s::bigint[])",
                                                     [[int(d) for d in docs]])}
        known = kept.setdefault("doc ids", {})  # a resident storage's, for this state of the store
        want = [int(d) for d in docs]
        missing = [d for d in dict.fromkeys(want) if d not in known]
        if missing:
            if len(known) > KEPT_MAX:
                known.clear()
            got = dict(self._rows("SELECT doc, id FROM lex_docs WHERE doc = ANY(%s::bigint[])", [missing]))
            known.update((d, got.get(d)) for d in missing)
        return {d: known[d] for d in want if known.get(d) is not None}

    def hidden_docs(self, viewer: str | Viewer):
        """The doc numbers of the memories ``viewer`` may not see (uint64 array): term statistics
        leave them out, so scores reveal nothing of another actor's private words."""
        import numpy as np

        from cortexctl.store import rules
        from cortexctl.store.interface import viewer_of
        from cortexctl.store.predicate import to_sql

        who = viewer_of(viewer)
        kept = self._kept()
        if kept is not None and who in kept.get("hidden", {}):
            return kept["hidden"][who]
        seen, params = to_sql(rules.visibility(who), "h", "postgres")  # tx.py's visible_sql
        # a doc whose head a held view does not see at all (pg/isolation.py) is hidden as well
        got = packed_columns(self._con, f"FROM lex_docs d LEFT JOIN heads h ON h.id = d.id"
                                        f" WHERE h.id IS NULL OR NOT ({seen})", params,
                             [("d.doc", "doc", "i8")])
        hidden = got["doc"].astype(np.uint64)
        if kept is not None:
            hidden.flags.writeable = False
            by_viewer, viewers = kept.setdefault("hidden", {}), kept.setdefault("viewer", {})
            if len(by_viewer) >= VIEWERS_KEPT:  # many viewers: start again (their term counts too)
                by_viewer.clear(), viewers.clear(), kept.pop("df", None)
            by_viewer[who] = hidden
            viewers[id(hidden)] = who  # term_df knows whose statistics it is asked for
        return hidden

    def term_df(self, terms: Sequence[int], hidden) -> dict[int, int]:
        """Document frequency of each term, leaving out the ``hidden`` doc numbers (counted here
        from the terms' postings: ``hidden`` may hold most of a large store's docs)."""
        import numpy as np

        if not terms:
            return {}
        kept = self._kept()
        who = None if kept is None else kept.get("viewer", {}).get(id(hidden))
        known: dict[int, int] = {}
        if who is not None:  # ``hidden`` is the kept one of this state: its counts are kept too
            counts = kept.setdefault("df", {}).setdefault(who, {})
            if len(counts) > KEPT_MAX:  # a long-lived process asked for very many terms: start again
                counts.clear()
            known = {int(t): counts[int(t)] for t in terms if int(t) in counts}
            terms = [t for t in terms if int(t) not in known]
        if terms:
            got = packed_columns(self._con, "FROM lex_postings WHERE term = ANY(%s::bigint[])",
                                 [[int(t) for t in terms]], [("term", "term", "i8"), ("doc", "doc", "i8")])
            term, doc = got["term"], got["doc"]
            if len(hidden) and len(doc):
                keep = ~np.isin(doc, np.asarray(hidden, dtype=np.int64), kind="table")
                term = term[keep]
            found, freq = np.unique(term, return_counts=True)
            counted = dict.fromkeys((int(t) for t in terms), 0)
            counted.update(zip(found.tolist(), freq.tolist()))
            if who is not None:
                counts.update(counted)
            known.update(counted)
        return {t: c for t, c in known.items() if c}

    def doc_terms(self, docs: Sequence[int]) -> dict[int, tuple[dict[int, int], int]]:
        """Each doc's term frequencies and length: doc -> ({term: tf}, length)."""
        if not len(docs):
            return {}
        want = [int(d) for d in docs]
        out: dict[int, tuple[dict[int, int], int]] = {
            int(d): ({}, int(n)) for d, n in self._rows("SELECT doc, len FROM lex_docs WHERE doc = ANY(%s::bigint[])",
                                                       [want])}
        for doc, term, tf in self._rows("SELECT doc, term, tf FROM lex_postings WHERE doc = ANY(%s::bigint[])", [want]):
            out[int(doc)][0][int(term)] = int(tf)
        return out

    # -- integrity ---------------------------------------------------------------------------
    def lexical_mismatches(self, expected, after: str | None = None, upto: str | None = None, strays: bool = True,
                           batch: int = 5000):
        """(id, problem) for every memory (ID in ``(after, upto]``) whose postings are not
        ``expected(type, data)``'s terms, then (``strays``) those of memories that do not exist.

        The range's postings are read as one packed value, its current texts by one server-side
        cursor ``batch`` rows at a time, each beside its postings document and length;
        ``store/search.py``'s comparison names a memory whose term count, any term, any
        frequency or its length differs. (``lex_docs`` has one row per memory and doc
        number here: its ``id`` is unique, so DuckDB's walk for repeated rows is not needed.)
        """
        import numpy as np

        from cortexctl.store.search import batch_mismatches

        where, params = id_range("d.id", after, upto, "postgres", self._c())
        got = packed_columns(self._con, f"FROM lex_postings p JOIN lex_docs d ON d.doc = p.doc WHERE {where}", params,
                             [("p.doc", "doc", "i8"), ("p.term", "term", "i8"), ("p.tf", "tf", "i2")], order="p.doc")
        p_doc, p_term, p_tf = got["doc"], got["term"], got["tf"].astype(np.int64)
        where, params = id_range("h.id", after, upto, "postgres", self._c())
        with self._con.cursor(name=f"cortexctl_lexical_{next(_CURSORS)}") as current:
            current.execute("SELECT h.id, v.type, v.data, d.doc, d.len FROM heads h"
                            " JOIN versions v ON v.id = h.id AND v.version = h.current_version"
                            f" LEFT JOIN lex_docs d ON d.id = h.id WHERE {where} ORDER BY h.id", params)
            while rows := current.fetchmany(batch):
                yield from batch_mismatches(expected, [(r[0], r[1], bytes(r[2]), r[3], r[4]) for r in rows],
                                            p_doc, p_term, p_tf)
        if strays:
            yield from self.stray_terms()

    def stray_terms(self):
        """(id, problem) for the postings documents of memories that do not exist."""
        for (id_,) in self._rows("SELECT d.id FROM lex_docs d WHERE NOT EXISTS (SELECT 1 FROM heads h WHERE h.id = d.id)"
                                 " ORDER BY d.id"):
            yield id_, "lexical postings for a memory that does not exist"


__all__ = ["LexicalReads", "packed_columns"]
