"""Answering find from a current snapshot and its delta: ``_Part`` (one file's arrays: the filters'
masks, salience, postings, vectors) and ``SnapshotTx`` (the read-only ``Tx`` find gets)."""

from __future__ import annotations

import json
from contextlib import ExitStack
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Sequence

from cortexctl.store import rules
from cortexctl.store.interface import Filters, Scoring, Viewer, viewer_of
from cortexctl.store.lanes import Lanes
from cortexctl.store.lexical import count_in, hidden_table
from cortexctl.store.predicate import epoch_seconds, evaluate
from cortexctl.store.snapshot.builder import NO_TIME, rendered
from cortexctl.store.snapshot.delta import _MemSnap
from cortexctl.store.snapshot.format import (EPOCH, SNAPSHOT_NAME, Snapshot, SnapshotUnusable, _stamp_ok, _us, seek,
                                              spans, unpack_data)

SESSION_PASSES = 64  # sessions a first ``session_around`` finds by a pass each over the column (0.5 ms a pass
# at 1M), not a sort of it (50-135 ms)


# -- answering find ------------------------------------------------------------------------------
def _ids_bytes(ids: Sequence[str]):
    import numpy as np

    return np.array([i.encode("ascii", "replace") for i in ids], dtype="S26") if len(ids) else np.zeros(0, "S26")


class _Ids(Sequence):
    """Memory IDs held as the snapshot's fixed-width bytes, each decoded only when it is asked for:
    an exact search's candidates can be hundreds of thousands, of which it names a few."""

    def __init__(self, raw) -> None:
        self.raw = raw

    def __len__(self) -> int:
        return len(self.raw)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [b.decode() for b in self.raw[i].tolist()]
        return self.raw[i].decode()


# What the rules' columns (``store/predicate.py``) are in a snapshot's arrays.
_ARRAYS = {"tombstoned": "head_forgotten", "type": "head_type", "importance": "head_importance",
           "access": "head_access_count", "citations": "head_citations", "confidence": "head_confidence",
           "recent": "head_recent_s"}


_TIME_ARRAYS = {"valid_from": "head_valid_from_us", "valid_to": "head_valid_to_us"}

# What a part kept by a resident process (``SnapshotTx``) holds at most of each kind before it starts over
# (masks and nodes are a byte per head each: 16 + 64 of them are 8 MB at 100k memories).
_KEEP_MASKS, _KEEP_NODES, _KEEP_TERMS = 16, 64, 50_000
SALIENT_HOLD = rules.SALIENT_HOLD  # seconds of the clock the salience lane's contenders are kept for


@dataclass
class _Salient:
    """The salience lane's contenders of a part from ``now`` to ``until`` (epoch seconds): their
    rows, update times and IDs (``_Part.top_salience``)."""

    now: float
    until: float
    rows: object
    updated: list
    ids: list


def _time(us: int | None) -> datetime | None:
    return None if us is None else EPOCH + timedelta(microseconds=us)


def _valid(us: int) -> datetime | None:
    return None if us == NO_TIME else EPOCH + timedelta(microseconds=us)


def _as_number(a):
    import numpy as np

    return a if a.dtype == np.bool_ or a.dtype == np.float64 else a.astype(np.float64)


def _floor(approx, limit: int, fall: float, hold: float) -> float:
    """The lowest approximate salience a contender of the salience lane may have: the ``limit``-th
    best of ``approx``, less room for the vectorised power's error (about an ulp) and for the fall of
    recency while the contenders are held (``rules.salient_fall``)."""
    import numpy as np

    cut = float(-np.partition(-approx, limit - 1)[limit - 1])
    return cut - 1e-9 * max(1.0, abs(cut)) - fall - 1e-9 * bool(hold)


class _Rows:
    """Some rows of a ``_Part`` as ``predicate.Columns`` (salience is computed for these alone).
    ``dense``: many of them (a filter's mask), read through the whole column checked once rather
    than block by block."""

    def __init__(self, part: "_Part", rows, *, dense: bool = False) -> None:
        self.part, self.rows, self.dense = part, rows, dense
        self._got: dict = {}  # name -> the rows' column: salience reads some columns twice

    def array(self, name: str):
        got = self._got.get(name)
        if got is None:
            if self.dense:
                got = self.part.array(name)[self.rows]
            else:
                got = _as_number(self.part.snap.take(_ARRAYS[name], self.rows))
            self._got[name] = got
        return got

    def equals(self, name: str, value):
        return self.part.equals(name, value)[self.rows]

    def isin(self, name: str, values: tuple):
        return self.part.isin(name, values)[self.rows]

    def has_tag(self, tag: str):
        return self.part.has_tag(tag)[self.rows]

    def times(self, name: str):
        at, null = self.part.times(name)
        return at[self.rows], null[self.rows]


class _Part:
    """One snapshot file as find reads it: the base, less the memories a delta holds (``dead``),
    or the delta itself."""

    def __init__(self, snap, dead_ids: Sequence[str] = ()) -> None:
        self.snap, self.h = snap, snap.header
        self.n = int(snap.header["arrays"]["head_id"]["shape"][0])
        self.dead_ids = frozenset(dead_ids)
        self._dead_rows = None
        self._masks: dict = {}  # Filters -> mask
        self._memo: dict = {}  # rule node -> its bool array (predicate.evaluate)
        self._tables: dict = {}  # header table (actors, sessions, tags) -> value -> code
        self._has_tag: dict = {}
        self._times: dict = {}  # valid time column -> (µs, NULL)
        self._tag_owner = None  # the row of each entry of tag_code
        self._sorted_times: dict = {}  # valid time column -> its non-NULL values, sorted (``_mask_key``)
        self._salient: dict = {}  # (mask key, half-life, weights, limit) -> _Salient (``top_salience``)
        self._hidden: dict = {}  # Viewer -> the doc numbers it may not see (``hidden_docs``)
        self._one_doc = None  # each head has one doc at most (``_one_doc_a_head``), once asked
        self._spans: dict = {}  # term -> (lo, hi) in the by-term postings, or None (``_term_spans``)
        self._sessions = None  # (session codes sorted, their rows) (``session_around``), once asked again
        self._session_asks = 0
        self.dead_docs = self._docs_of_dead() if self.dead_ids else None

    def _docs_of_dead(self):
        """The sorted doc numbers of the rows a delta overrides (None when none)."""
        import numpy as np

        rows, _ = self._rows(sorted(self.dead_ids), alive=False)
        docs = self.snap.take("head_doc", rows)
        docs = docs[docs >= 0].astype(np.uint64)
        return np.unique(docs) if len(docs) else None

    # -- heads --------------------------------------------------------------------------------
    def dead_rows(self):
        """Bool array of the rows a delta overrides (None when there are none)."""
        import numpy as np

        if not self.dead_ids:
            return None
        if self._dead_rows is None:
            rows, _ = self._rows(sorted(self.dead_ids), alive=False)
            self._dead_rows = np.zeros(self.n, dtype=np.bool_)
            self._dead_rows[rows] = True
        return self._dead_rows

    def count(self) -> int:
        d = self.dead_rows()
        return self.n - (int(d.sum()) if d is not None else 0)

    def _rows(self, ids: Sequence[str], *, alive: bool = True):
        """(rows in the heads arrays, the IDs found) of these IDs."""
        import numpy as np

        if alive and self.dead_ids:
            ids = [i for i in ids if i not in self.dead_ids]
        want = _ids_bytes(list(ids))
        if not len(want) or not self.n:
            return np.zeros(0, np.int64), []
        h_id = self.snap.raw("head_id")
        pos = np.searchsorted(h_id, want)
        pos = np.minimum(pos, self.n - 1)
        got = self.snap.take("head_id", pos)
        hit = got == want
        rows = pos[hit].astype(np.int64)
        return rows, [i for i, h in zip(ids, hit.tolist()) if h]

    def mask(self, filters: Filters):
        """Which heads pass ``filters`` (``rules.filters``; bool array, not to be changed): frame
        filters are not answered here (``predicate.Unsupported``: the snapshot holds no frames).
        Kept by ``_mask_key``, so a resident process's part (``SnapshotTx``) answers the same filters
        at another time from the mask it has while no valid time lies between."""
        key = self._mask_key(filters)
        got = self._masks.get(key)
        if got is not None:
            return got
        if len(self._memo) > _KEEP_NODES:  # a kept part sees a new time in every call: bounded
            self._memo.clear()
        m = evaluate(rules.filters(filters), self, memo=self._memo)
        dead = self.dead_rows()
        if dead is not None:
            m = m & ~dead
        if len(self._masks) >= _KEEP_MASKS:
            self._masks.clear()
            self._salient.clear()
        self._masks[key] = m
        return m

    def _mask_key(self, filters: Filters):
        """What the mask of ``filters`` depends on: the filters without their times, and for each
        time the number of the part's valid times at or before it (``rules.valid_at`` and
        ``rules.not_ended`` compare a column with the time: the same number of values at or before
        it, the same rows pass)."""
        if filters.ended_by is None and filters.valid_at is None:
            return filters
        return (replace(filters, ended_by=None, valid_at=None),
                None if filters.ended_by is None else self._at_or_before("valid_to", filters.ended_by),
                None if filters.valid_at is None else (self._at_or_before("valid_from", filters.valid_at),
                                                       self._at_or_before("valid_to", filters.valid_at)))

    def _at_or_before(self, name: str, at: datetime) -> int:
        """How many heads hold a ``name`` at or before ``at`` (as ``predicate`` compares them)."""
        import numpy as np

        got = self._sorted_times.get(name)
        if got is None:
            values, null = self.times(name)
            got = self._sorted_times[name] = np.sort(values[~null])
        if not len(got):
            return 0
        return int(np.searchsorted(got, (at - EPOCH) // timedelta(microseconds=1), side="right"))

    def seen(self, viewer: Viewer):
        """Which heads ``viewer`` may see (``rules.visibility``; bool array, not to be changed; a
        delta's overrides not taken out)."""
        return evaluate(rules.visibility(viewer), self, memo=self._memo)

    # -- the columns, as ``predicate.evaluate`` reads them ---------------------------------------
    def array(self, name: str):
        return _as_number(self.snap.whole(_ARRAYS[name]))

    def _code(self, name: str, value) -> int:
        table = self._tables.get(name)
        if table is None:
            table = self._tables[name] = {v: i for i, v in enumerate(self.h[name])}
        return table.get(value, -2)

    def equals(self, name: str, value):
        s = self.snap
        if name == "actor":
            return s.whole("head_actor_code") == self._code("actors", value)
        if name == "session":
            return s.whole("head_session_code") == (self._code("sessions", value) if value is not None else -2)
        if name == "type":
            return s.whole("head_type") == value
        if name == "visibility":
            return s.whole("head_visibility_code") == self._code("visibilities", value)
        raise KeyError(name)

    def times(self, name: str):
        """(µs since 1970, NULL) of a valid time column; a file where no head holds it reads none of it."""
        import numpy as np

        got = self._times.get(name)
        if got is None:
            array = _TIME_ARRAYS[name]
            if not self.h.get("valid_set", {}).get(array):
                got = (np.zeros(self.n, dtype=np.int64), np.ones(self.n, dtype=np.bool_))
            else:
                at = self.snap.whole(array)
                got = (at, at == NO_TIME)
            self._times[name] = got
        return got

    def isin(self, name: str, values: tuple):
        import numpy as np

        if name != "type":
            raise KeyError(name)
        return np.isin(self.snap.whole("head_type"), np.array(values, dtype=np.int64))

    def has_tag(self, tag: str):
        """Which heads carry ``tag`` (bool array)."""
        import numpy as np

        got = self._has_tag.get(tag)
        if got is not None:
            return got
        has = np.zeros(self.n, dtype=np.bool_)
        code = self._code("tags", tag)
        if code >= 0:
            s = self.snap
            if self._tag_owner is None:
                self._tag_owner = np.repeat(np.arange(self.n), np.diff(s.whole("head_tags_start")))
            has[self._tag_owner[s.whole("tag_codes") == code]] = True
        self._has_tag[tag] = has
        return has

    def passing(self, ids: Sequence[str], filters: Filters) -> dict[str, int]:
        m = self.mask(filters)
        rows, found = self._rows(ids)
        ok = m[rows].tolist()
        cur = self.snap.take("head_current_version", rows).tolist()
        return {i: int(c) for i, o, c in zip(found, ok, cur) if o}

    def sessions_of(self, ids: Sequence[str], filters: Filters) -> dict[str, str]:
        """Of ``ids``, those passing ``filters`` that belong to a session: id -> session."""
        rows, found = self._rows(ids)
        ok = self.mask(filters)[rows].tolist()
        codes = self.snap.take("head_session_code", rows).tolist()
        names = self.h["sessions"]
        return {i: names[c] for i, o, c in zip(found, ok, codes) if o and c >= 0}

    def session_around(self, of: dict[str, str], filters: Filters, reach: int
                       ) -> dict[str, tuple[list[str], list[str]]]:
        """For each ID of ``of`` (id -> its session): the up to ``reach`` IDs of this part before
        it and after it in its session, in ID order, among those passing ``filters`` (the rows of
        each session are kept in ID order: the heads are)."""
        import numpy as np

        codes = {s: c for s in set(of.values()) if (c := self._code("sessions", s)) >= 0}
        if not codes:
            return {}
        col = self.snap.whole("head_session_code")
        if self._sessions is None and (self._session_asks or len(codes) > SESSION_PASSES):
            # the rows of each session, in row (ID) order, sorted once: for a process that asks again
            # (a resident one) or for many sessions at once; a cold find's few take a pass each
            order = np.argsort(col, kind="stable")
            self._sessions = (col[order], order)
        self._session_asks += 1
        m = self.mask(filters)
        members = {}
        for name, c in codes.items():
            if self._sessions is not None:
                by_code, order = self._sessions
                rows = order[int(np.searchsorted(by_code, c, side="left")):int(np.searchsorted(by_code, c, side="right"))]
            else:
                rows = np.flatnonzero(col == c)  # in row (ID) order
            rows = rows[m[rows]]
            members[name] = self.snap.take("head_id", rows)
        out: dict[str, tuple[list[str], list[str]]] = {}
        by_session: dict[str, list[str]] = {}
        for i, name in of.items():
            by_session.setdefault(name, []).append(i)
        for name, ids in by_session.items():
            got = members.get(name)
            if got is None or not len(got):
                continue
            want = _ids_bytes(ids)
            los = np.searchsorted(got, want, side="left").tolist()
            his = np.searchsorted(got, want, side="right").tolist()
            for i, lo, hi in zip(ids, los, his):
                out[i] = ([x.decode("ascii") for x in got[max(0, lo - reach):lo].tolist()],
                          [x.decode("ascii") for x in got[hi:hi + reach].tolist()])
        return out

    def salience_rows(self, rows, scoring: Scoring) -> list[float]:
        """``rules.salience`` of these rows, as the database computes it: once for each distinct
        set of the columns it reads (memories written together often share them all)."""
        import numpy as np

        rows = np.asarray(rows, dtype=np.int64)
        if len(rows) > 1:
            cols = np.stack([_as_number(self.snap.take(a, rows)).astype(np.float64) for a in _ARRAYS.values()], axis=1)
            _, first, inverse = np.unique(np.ascontiguousarray(cols).view(np.dtype((np.void, cols.shape[1] * 8))),
                                          return_index=True, return_inverse=True)  # equal bytes, equal inputs
            if len(first) < len(rows):
                got = evaluate(rules.salience(scoring), _Rows(self, rows[first]), exact=True)
                return np.broadcast_to(got, (len(first),))[inverse.reshape(-1)].tolist()
        got = evaluate(rules.salience(scoring), _Rows(self, rows), exact=True)
        return np.broadcast_to(got, (len(rows),)).tolist()

    def candidates(self, ids: Sequence[str], filters: Filters, scoring: Scoring) -> dict[str, tuple[int, bool, float]]:
        m = self.mask(filters)
        rows, found = self._rows(ids)
        ok = m[rows].tolist()
        cur = self.snap.take("head_current_version", rows).tolist()
        sal = self.salience_rows(rows, scoring)
        return {i: (int(c), bool(o), s) for i, c, o, s in zip(found, cur, ok, sal)}

    def top_salience(self, filters: Filters, scoring: Scoring, limit: int) -> list[tuple[float, int, str]]:
        """The ``limit`` best as (exact salience, updated, ID), best first; see SnapshotTx.top_salience.

        The contenders (``_contenders``) are kept for ``SALIENT_HOLD`` seconds of the clock: a
        memory's salience only falls as time passes (its recency does), by at most
        ``w_recency * (1 - 0.5 ** (elapsed / half_life))``, so the contenders are taken with that
        much more room below the cut and still hold every memory that can be among the best until
        then; their exact salience is computed anew at every call. The clock going back, other
        weights or filters take them anew."""

        if limit <= 0:
            return []
        now = epoch_seconds(scoring.now)
        key = (self._mask_key(filters), scoring.half_life, scoring.weights, limit)
        got = self._salient.get(key)
        if got is None or not got.now <= now <= got.until:
            if len(self._salient) >= _KEEP_MASKS:
                self._salient.clear()
            got = self._salient[key] = self._contenders(filters, scoring, limit, now)
        if not len(got.rows):
            return []
        exact = self.salience_rows(got.rows, scoring)
        return sorted(zip(exact, got.updated, got.ids), reverse=True)[:limit]

    def _contenders(self, filters: Filters, scoring: Scoring, limit: int, now: float) -> "_Salient":
        """The rows that may be among the ``limit`` most salient from ``now`` to the time returned
        with them (``top_salience``): an approximate vectorised salience, cut with room for the
        vectorised power's error (about an ulp) and for the fall of recency until then."""
        import numpy as np

        m = self.mask(filters)
        hold, fall = rules.salient_fall(scoring)
        if np.count_nonzero(m) > limit:
            rule = rules.salience(scoring)
            rows = self._grouped_contenders(m, rule, scoring, limit, fall, hold)
            if rows is None:  # every row of the mask, at once
                rows = np.flatnonzero(m)
                approx = np.broadcast_to(evaluate(rule, _Rows(self, rows, dense=True), exact=False), (len(rows),))
                rows = rows[approx >= _floor(approx, limit, fall, hold)]
        else:
            rows = np.flatnonzero(m)
            hold = float("inf")  # all of them are contenders while the part is the same
        s = self.snap
        return _Salient(now, now + hold, rows, s.take("head_updated_us", rows).tolist(),
                        [b.decode() for b in s.take("head_id", rows).tolist()])

    def _grouped_contenders(self, m, rule, scoring: Scoring, limit: int, fall: float, hold: float):
        """The rows of mask ``m`` (more than ``limit``) at or above the floor (``_floor``) of their
        approximate salience, found through the file's salience groups (``format.salient_groups``)
        rather than over every row; None when the file keeps no groups or salience may rise with
        age (a negative recency weight or half-life: the order within a group then says nothing).

        Within a group the approximate salience only falls along the order, so the start of each
        group, long enough to hold ``limit`` rows of the mask (or the whole group), holds that group's
        best; the floor taken over these rows is at most the floor over every row, so more rows
        reach it, never fewer. A group not looked at to its end is then looked at further only while
        the last row looked at still reaches the floor."""
        import numpy as np

        if "salient_start" not in self.h["arrays"] or not (scoring.weights[0] >= 0 and scoring.half_life > 0):
            return None
        s, n = self.snap, self.n
        starts = s.whole("salient_start").astype(np.int64)
        if len(starts) < 2 or starts[0] != 0 or starts[-1] != n or bool((starts[1:] <= starts[:-1]).any()):
            raise SnapshotUnusable(f"search snapshot {SNAPSHOT_NAME}: its salience groups do not cover its heads")
        lo, hi = starts[:-1], starts[1:]

        def rows_at(pos):
            r = s.take("salient_order", pos).astype(np.int64)
            if len(r) and (int(r.min()) < 0 or int(r.max()) >= n):
                raise SnapshotUnusable(f"search snapshot {SNAPSHOT_NAME}: its salience order names no head")
            return r

        def approx(rows):
            return np.broadcast_to(evaluate(rule, _Rows(self, rows), exact=False), (len(rows),))

        group = np.arange(len(lo))
        done, step = lo.copy(), np.full(len(lo), 2 * limit, dtype=np.int64)
        seen = np.zeros(len(lo), dtype=np.int64)  # rows of the mask met in each group
        found = []
        active = group
        while len(active):
            end = np.minimum(done[active] + step[active], hi[active])
            r = rows_at(spans(done[active], end))
            ok = m[r]
            found.append(r[ok])
            seen[active] += np.bincount(np.repeat(np.arange(len(active)), end - done[active])[ok],
                                        minlength=len(active))
            done[active], step[active] = end, step[active] * 4
            active = active[(seen[active] < limit) & (done[active] < hi[active])]
        rows = np.concatenate(found)
        got = approx(rows)
        floor = _floor(got, limit, fall, hold)
        keep = [rows[got >= floor]]
        slack = 1e-12 * max(1.0, abs(floor))  # the vectorised power may step back by an ulp along the order
        open_ = group[done < hi]
        while len(open_):
            open_ = open_[approx(rows_at(done[open_] - 1)) >= floor - slack]  # its last row looked at
            if not len(open_):
                break
            end = np.minimum(done[open_] + step[open_], hi[open_])
            r = rows_at(spans(done[open_], end))
            r = r[m[r]]
            keep.append(r[approx(r) >= floor])
            done[open_], step[open_] = end, step[open_] * 4
            open_ = open_[done[open_] < hi[open_]]
        return np.sort(np.concatenate(keep))

    def result_rows(self, ids: Sequence[str], form: str) -> dict[str, dict]:
        rows, found = self._rows(ids)
        out: dict[str, dict] = {}
        if not found:
            return out
        s, h = self.snap, self.h
        cols = [s.take(c, rows).tolist() for c in ("head_type", "head_current_version", "head_importance",
                                                    "head_visibility_code", "head_actor_code", "head_updated_us",
                                                    "head_valid_from_us", "head_valid_to_us")]
        tag_names, visibilities, actors = h["tags"], h["visibilities"], h["actors"]
        for i, r, t, cur, imp, vis, actor, upd, vf, vt in zip(found, rows.tolist(), *cols):
            lo, hi = (int(x) for x in s.span("result_start", r, r + 2))
            row = json.loads(s.span("result_json", lo, hi).tobytes()) if hi > lo else []
            short, medium, frames, tomb, sup, sup_by = row + [None, None, [], None, None, None][len(row):]
            if short is None or medium is None:  # a form the row leaves out is its data's rendering
                forms = self._rendered(r)
                short, medium = forms[0] if short is None else short, forms[1] if medium is None else medium
            lo, hi = (int(x) for x in s.span("head_tags_start", r, r + 2))
            out[i] = {"id": i, "type": t, "current_version": cur,
                      "tags": [tag_names[c] for c in s.span("tag_codes", lo, hi).tolist()], "frames": frames,
                      "importance": imp, "visibility": visibilities[vis], "actor": actors[actor],
                      "updated_at": EPOCH + timedelta(microseconds=upd), "tombstoned_at": _time(tomb),
                      "valid_from": _valid(vf), "valid_to": _valid(vt), "supersedes": sup, "superseded_by": sup_by,
                      "text": short if form == "short" else medium}
        return out

    def _data(self, r: int) -> tuple[int, bytes] | None:
        """Row ``r``'s current version's (type, data), None when it has none."""
        t = int(self.snap.span("data_type", r, r + 1)[0])
        if t < 0:
            return None
        lo, hi = (int(x) for x in self.snap.span("data_start", r, r + 2))
        blob = self.snap.span("data_blob", lo, hi).tobytes()
        return t, unpack_data(blob) if self.snap.packed else blob

    def _rendered(self, r: int) -> tuple[str, str]:
        """Row ``r``'s forms rendered from its data, as the builder left them out (``rendered``)."""
        got = self._data(r)
        forms = None if got is None else rendered(*got)
        if forms is None:  # the builder left a form out only where it rendered: not this file's row
            raise SnapshotUnusable(f"search snapshot {SNAPSHOT_NAME}: a result row leaves out a form its data"
                                   " does not give")
        return forms

    def search_data(self, ids: Sequence[str]) -> dict[str, tuple[int, bytes]]:
        rows, found = self._rows(ids)
        out: dict[str, tuple[int, bytes]] = {}
        for i, r in zip(found, rows.tolist()):
            got = self._data(r)
            if got is not None:
                out[i] = got
        return out

    # -- postings ---------------------------------------------------------------------------
    def _live_docs(self, docs):
        """Bool array: which of ``docs`` a delta does not override."""
        import numpy as np

        if self.dead_docs is None or not len(docs):
            return np.ones(len(docs), dtype=np.bool_)
        return ~np.isin(docs, self.dead_docs)

    def doc_count(self) -> int:
        return int(self.h["arrays"]["doc_number"]["shape"][0]) - (len(self.dead_docs) if self.dead_docs is not None else 0)

    def _term_spans(self, terms: Sequence[int]) -> list[tuple[int, int, int]]:
        import numpy as np

        p_term = self.snap.raw("by_term_term")
        if not len(p_term) or not terms:
            return []
        spans = self._spans  # kept: the postings of a term are where they are while the part is the same
        need = [int(t) for t in terms if t not in spans]
        if need:
            if len(spans) + len(need) > _KEEP_TERMS:
                spans.clear()
                need = [int(t) for t in terms]
            want = np.asarray(need, dtype=np.int64)
            pos = np.minimum(np.searchsorted(p_term, want), len(p_term) - 1)
            for t, p in zip(need, pos.tolist()):
                got = None  # kept only once its blocks are checked (a damaged one raises, every time)
                if int(self.snap.span("by_term_term", p, p + 1)[0]) == t:
                    lo, hi = (int(x) for x in self.snap.span("by_term_start", p, p + 2))
                    got = (lo, hi)
                spans[t] = got
        return [(int(t), got[0], got[1]) for t in terms if (got := spans[t]) is not None]

    def postings_of(self, terms: Sequence[int]):
        import numpy as np

        spans = self._term_spans(terms)
        if not spans:
            return {"term": np.zeros(0, np.int64), "doc": np.zeros(0, np.uint64), "tf": np.zeros(0, np.uint16)}
        out = {
            "term": np.concatenate([np.full(hi - lo, t, dtype=np.int64) for t, lo, hi in spans]),
            "doc": np.concatenate([self.snap.span("by_term_doc", lo, hi) for _, lo, hi in spans]),
            "tf": np.concatenate([self.snap.span("by_term_tf", lo, hi) for _, lo, hi in spans]),
        }
        if self.dead_docs is not None:
            keep = self._live_docs(out["doc"])
            out = {k: v[keep] for k, v in out.items()}
        return out

    def _doc_pos(self, docs: Sequence[int], name: str):
        import numpy as np

        arr = self.snap.raw(name)
        want = np.asarray([int(d) for d in docs], dtype=np.uint64)
        if self.dead_docs is not None:
            want = want[self._live_docs(want)]
        if not len(arr) or not len(want):
            return want, np.zeros(0, np.int64), np.zeros(0, np.bool_)
        pos = np.minimum(seek(arr, want), len(arr) - 1)
        return want, pos, self.snap.take(name, pos) == want

    def doc_ids(self, docs: Sequence[int]) -> dict[int, str]:
        want, pos, hit = self._doc_pos(docs, "doc_number")
        if not hit.any():
            return {}
        ids = self.snap.take("doc_id", pos[hit]).tolist()
        return {int(d): i.decode() for d, i in zip(want[hit].tolist(), ids)}

    def docs_passing(self, docs, filters: Filters):
        """Bool array over ``docs``: the doc is this part's (not one a delta overrides) and its
        memory passes ``filters``."""
        import numpy as np

        want = np.asarray(docs, dtype=np.uint64)
        out = np.zeros(len(want), dtype=np.bool_)
        arr = self.snap.raw("doc_number")
        if not len(arr) or not len(want) or not self.n:
            return out
        pos = np.minimum(seek(arr, want), len(arr) - 1)
        hit = self.snap.take("doc_number", pos) == want
        if self.dead_docs is not None:
            hit &= self._live_docs(want)
        row = self.snap.take("doc_head_row", pos).astype(np.int64)
        hit &= row >= 0
        out[hit] = self.mask(filters)[row[hit]]
        return out

    def hidden_docs(self, actor: str | Viewer):
        viewer = viewer_of(actor)
        got = self._hidden.get(viewer)
        if got is None:
            if len(self._hidden) >= _KEEP_MASKS:
                self._hidden.clear()
            got = self._hidden[viewer] = self._hidden_docs(viewer)
        return got

    def _hidden_docs(self, viewer: Viewer):
        """The docs of the heads ``viewer`` may not see, by each head's doc (``head_doc``: one pass
        over the heads), less those a delta overrides; in no particular order. Through the docs' head
        rows instead where a head has more than one doc (a damaged store: ``verify`` names it)."""
        import numpy as np

        s = self.snap
        if not self._one_doc_a_head():
            row = s.whole("doc_head_row")
            has = row >= 0
            seen = self.seen(viewer)[np.where(has, row, 0)] if self.n else np.zeros(len(row), np.bool_)
            docs = s.whole("doc_number")[has & ~seen].astype(np.uint64)
            return docs[self._live_docs(docs)] if self.dead_docs is not None else docs
        out = ~self.seen(viewer)
        dead = self.dead_rows()
        if dead is not None:
            out &= ~dead
        docs = s.whole("head_doc")[out]
        return docs[docs >= 0].astype(np.uint64)

    def _one_doc_a_head(self) -> bool:
        """Every doc with a head row is that head's only doc (``head_doc`` names each of them)."""
        import numpy as np

        if self._one_doc is None:
            s = self.snap
            self._one_doc = self.n > 0 and (self.h.get("one_doc_a_head") or (  # a file's header says so
                "one_doc_a_head" not in self.h
                and np.count_nonzero(s.whole("doc_head_row") >= 0) == np.count_nonzero(s.whole("head_doc") >= 0)))
        return self._one_doc

    def term_df(self, terms: Sequence[int], hidden) -> dict[int, int]:
        out: dict[int, int] = {}
        table = hidden_table(hidden)  # once for every term
        for t, lo, hi in self._term_spans(terms):
            docs = self.snap.span("by_term_doc", lo, hi)
            if self.dead_docs is not None:
                docs = docs[self._live_docs(docs)]
            c = int(len(docs) - count_in(docs, table))
            if c:
                out[t] = c
        return out

    def doc_terms(self, docs: Sequence[int]) -> dict[int, tuple[dict[int, int], int]]:
        want, pos, hit = self._doc_pos(docs, "doc_number")
        out: dict[int, tuple[dict[int, int], int]] = {}
        for d, p in zip(want[hit].tolist(), pos[hit].tolist()):
            out[int(d)] = ({}, int(self.snap.span("doc_length", p, p + 1)[0]))
        fw, fpos, fhit = self._doc_pos(list(out), "by_doc_doc")
        for d, p in zip(fw[fhit].tolist(), fpos[fhit].tolist()):
            lo, hi = (int(x) for x in self.snap.span("by_doc_start", p, p + 2))
            terms = self.snap.take("by_term_term", self.snap.span("by_doc_term_at", lo, hi))
            out[int(d)][0].update(zip(terms.tolist(), self.snap.span("by_doc_tf", lo, hi).tolist()))
        return out

    # -- vectors -------------------------------------------------------------------------------
    def model_code(self, model: str) -> int:
        return {m: i for i, m in enumerate(self.h["models"])}.get(model, -2)

    def covered(self, model: str, max_key: int) -> int:
        """Live and dropped keys of ``model`` up to ``max_key`` that this file holds."""
        c = self.model_code(model)
        live = (self.snap.whole("vector_model_code") == c) & (self.snap.whole("vector_key") <= max_key)
        dropped = (self.snap.whole("dropped_model_code") == c) & (self.snap.whole("dropped_key") <= max_key)
        return int(live.sum() + dropped.sum())

    def vectors_of_keys(self, keys: Sequence[int], model: str) -> list[tuple[int, str, int]]:
        import numpy as np

        v_key = self.snap.raw("vector_key")
        want = np.asarray([int(k) for k in keys], dtype=np.uint64)
        if not len(v_key) or not len(want):
            return []
        pos = np.minimum(seek(v_key, want), len(v_key) - 1)
        hit = self.snap.take("vector_key", pos) == want
        pos = pos[hit]
        hit_m = self.snap.take("vector_model_code", pos) == self.model_code(model)
        pos = pos[hit_m]
        return [(int(k), i.decode(), int(v)) for k, i, v in zip(
            self.snap.take("vector_key", pos).tolist(), self.snap.take("vector_id", pos).tolist(),
            self.snap.take("vector_version", pos).tolist()) if i.decode() not in self.dead_ids]

    def vector_keys_for(self, filters: Filters, model: str):
        import numpy as np

        m = self.mask(filters)
        s = self.snap
        row = s.whole("vector_head_row")
        sel = (s.whole("vector_model_code") == self.model_code(model)) & (row >= 0)
        r = np.where(sel, row, 0)
        sel &= m[r] & (s.whole("vector_version") == s.whole("head_current_version")[r]) if self.n else sel
        pos = np.flatnonzero(sel)
        return s.take("vector_id", pos), s.take("vector_key", pos)

    def vectors_after(self, model: str, after: int):
        """Positions in the vector arrays of ``model``'s vectors with a key above ``after``."""
        import numpy as np

        v_key = self.snap.raw("vector_key")
        start = int(seek(v_key, np.array([after], dtype=np.uint64), side="right")[0])
        sel = self.snap.span("vector_model_code", start, len(v_key)) == self.model_code(model)
        pos = start + np.flatnonzero(sel)
        if self.dead_ids and len(pos):
            ids = self.snap.take("vector_id", pos).tolist()
            pos = pos[[i.decode() not in self.dead_ids for i in ids]]
        return pos


_KEPT = "search_parts"  # the key of a resident process's ``_Kept`` in ``DuckStorage.maps``


@dataclass
class _Kept:
    """What a resident process keeps of its last search view (``SnapshotTx``): the snapshot's
    mapping and the delta's document it was made for, the delta's arrays, the parts, the header of
    the store-wide numbers, and the lexical lane's hidden docs and document frequencies by viewer."""

    snap: object
    doc: dict | None
    delta: object
    parts: list
    top: dict
    hidden: dict = None  # type: ignore[assignment]
    df: dict = None  # type: ignore[assignment]
    memo: dict = None  # type: ignore[assignment]  # ``Tx.journal_memo``'s, for this state of the store

    def __post_init__(self) -> None:
        self.hidden, self.df, self.memo = {}, {}, {}


class SnapshotTx(Lanes):
    """The read-only ``Tx`` of ``find``, answered from a current snapshot and its delta (what
    writers changed since the build: those memories are answered from the delta, the rest from
    the snapshot); anything they do not hold is read from DuckDB, opened on first need (``_duck``):
    the methods named in ``FROM_DUCKDB``, each one explicitly (a method neither answered here nor
    named there does not exist: no fall-through)."""

    def __init__(self, snap: Snapshot, store, delta: dict | None = None, kept: dict | None = None) -> None:
        """``kept`` (a resident process's, ``DuckStorage.maps``): the parts made last, with all they
        have worked out (masks, the salience lane's contenders, hidden docs, term spans, document
        frequencies), are taken again while the snapshot's mapping and the delta's document are the
        same objects (``open_current`` gives the same ones while the files are the same)."""
        self.snap, self.store = snap, store
        self._stack: ExitStack | None = None
        self._tx = None
        got = kept.get(_KEPT) if kept is not None else None
        if got is not None and got.snap is snap and got.doc is delta:
            self.delta, self.parts, self.top, self._state = got.delta, got.parts, got.top, got
            return
        self.delta = None if delta is None else _MemSnap(delta)
        if self.delta is None:
            self.parts = [_Part(snap)]
            self.top = snap.header  # the stamp checked, and the store-wide numbers
        else:
            self.parts = [_Part(snap, delta["ids"]), _Part(self.delta)]
            self.top = {**self.delta.header, **{k: delta[k] for k in ("token", "counter", "schema_version", "db")}}
        self._state = _Kept(snap, delta, self.delta, self.parts, self.top)
        if kept is not None and snap.kept:
            if self.delta is not None:
                self.delta.kept = True
            kept[_KEPT] = self._state

    def journal_memo(self) -> dict | None:
        """Kept with the parts: they live while the snapshot's mapping and the delta's document are the
        same objects, that is while no commit has come since (every commit moves the generation file
        past both stamps, and a current delta is rewritten by it)."""
        return self._state.memo

    def close(self) -> None:
        if self._stack is not None:
            self._stack.close()
        self.snap.close()
        if self.delta is not None:
            self.delta.close()

    # -- DuckDB for the rest -----------------------------------------------------------------
    def _duck(self):
        if self._tx is None:
            from cortexctl.store.duck import DuckTx

            stack = ExitStack()
            con = stack.enter_context(self.store.read())
            self._stack = stack
            if not _stamp_ok(self.store.path, self.top):
                raise SnapshotUnusable("the store changed during the search")
            self._tx = DuckTx(con, self.store)
        return self._tx

    def _merged(self, method: str, *args) -> dict:
        out: dict = {}
        for p in self.parts:
            out.update(getattr(p, method)(*args))
        return out

    # -- heads --------------------------------------------------------------------------------
    def count_heads(self, filters: Filters | None = None) -> int:
        if filters is None:
            return sum(p.count() for p in self.parts)
        if filters.frames:
            return self._duck().count_heads(filters)
        return sum(int(p.mask(filters).sum()) for p in self.parts)

    def passing(self, ids: Sequence[str], filters: Filters) -> dict[str, int]:
        if filters.frames:
            return self._duck().passing(ids, filters)
        return self._merged("passing", ids, filters)

    def candidates(self, ids: Sequence[str], filters: Filters, scoring: Scoring) -> dict[str, tuple[int, bool, float]]:
        if filters.frames:
            return self._duck().candidates(ids, filters, scoring)
        return self._merged("candidates", ids, filters, scoring)

    def session_neighbours(self, ids: Sequence[str], filters: Filters, reach: int = 1
                           ) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
        """Each session's members from every part (a delta's memories from the delta), in ID order."""
        if filters.frames:
            return self._duck().session_neighbours(ids, filters, reach)
        if not ids or reach < 1:
            return {}
        of = self._merged("sessions_of", ids, filters)
        if not of:
            return {}
        # the nearest in all parts are among the nearest in each part
        around: dict[str, tuple[list[str], list[str]]] = {i: ([], []) for i in of}
        for p in self.parts:
            for i, (before, after) in p.session_around(of, filters, reach).items():
                around[i][0].extend(before)
                around[i][1].extend(after)
        return {i: (tuple(sorted(before, reverse=True)[:reach]), tuple(sorted(after)[:reach]))
                for i, (before, after) in around.items()}

    def top_salience(self, filters: Filters, scoring: Scoring, limit: int) -> list[tuple[str, float]]:
        """As the database orders them (salience, then later update, then higher ID, all
        descending): an approximate vectorised salience picks the contenders, the exact one ranks them."""
        if filters.frames:
            return self._duck().top_salience(filters, scoring, limit)
        ranked = sorted((x for p in self.parts for x in p.top_salience(filters, scoring, limit)), reverse=True)
        return [(i, sal) for sal, _, i in ranked[:limit]]

    def weights(self, actor: str) -> tuple[float, ...] | None:
        w = self.top["weights"].get(actor)
        return None if w is None else tuple(float(x) for x in w)

    def live_grants(self, subagent: str, now: datetime) -> list[dict]:
        """From the header, as the learned weights (every format-3 file carries the grants)."""
        at = _us(now)
        out = []
        for id_, granter, sub, types, tags, created, expires in self.top["grants"]:
            if sub != subagent or (expires is not None and expires <= at):
                continue
            out.append({"id": id_, "granter": granter, "subagent": sub, "types": list(types), "tags": list(tags),
                        "created_at": EPOCH + timedelta(microseconds=created),
                        "expires_at": None if expires is None else EPOCH + timedelta(microseconds=expires),
                        "revoked_at": None, "revoked_by": None})
        return sorted(out, key=lambda g: g["id"])

    def result_rows(self, ids: Sequence[str], form: str) -> dict[str, dict]:
        if form not in ("short", "medium"):
            raise ValueError(form)
        return self._merged("result_rows", ids, form)

    def search_data(self, ids: Sequence[str]) -> dict[str, tuple[int, bytes]]:
        return self._merged("search_data", ids)

    # -- postings ---------------------------------------------------------------------------
    def doc_count(self) -> int:
        return sum(p.doc_count() for p in self.parts)

    def postings_of(self, terms: Sequence[int]):
        import numpy as np

        got = [p.postings_of(terms) for p in self.parts]
        return got[0] if len(got) == 1 else {k: np.concatenate([g[k] for g in got]) for k in got[0]}

    def doc_ids(self, docs: Sequence[int]) -> dict[int, str]:
        return self._merged("doc_ids", docs)

    def docs_passing(self, docs, filters: Filters):
        """Which of ``docs`` belong to a memory passing ``filters``, for all at once (a bool
        array: ``lexical.filtered_top``); None for frame filters (DuckDB answers those)."""
        if filters.frames:
            return None
        got = [p.docs_passing(docs, filters) for p in self.parts]
        return got[0] if len(got) == 1 else got[0] | got[1]

    def hidden_docs(self, actor: str | Viewer):
        """The same array for the same viewer while the parts are the same (``term_df`` knows it)."""
        import numpy as np

        viewer = viewer_of(actor)
        st = self._state
        got = st.hidden.get(viewer)
        if got is None:
            parts = [p.hidden_docs(viewer) for p in self.parts]
            got = parts[0] if len(parts) == 1 else np.concatenate(parts)
            if len(st.hidden) >= _KEEP_MASKS:
                st.hidden.clear()
                st.df.clear()
            st.hidden[viewer] = got
        return got

    def term_df(self, terms: Sequence[int], hidden) -> dict[int, int]:
        """Kept by term for ``hidden`` when it is one this view gave (``hidden_docs``)."""
        st = self._state
        viewer = next((v for v, h in st.hidden.items() if h is hidden), None)
        known = st.df.setdefault(viewer, {}) if viewer is not None else {}
        need = [t for t in dict.fromkeys(terms) if t not in known]
        if need:
            if len(known) + len(need) > _KEEP_TERMS:
                known.clear()
                need = list(dict.fromkeys(terms))
            got: dict[int, int] = {}
            for p in self.parts:
                for t, c in p.term_df(need, hidden).items():
                    got[t] = got.get(t, 0) + c
            known.update((t, got.get(t, 0)) for t in need)
        return {t: c for t in terms if (c := known[t])}

    def doc_terms(self, docs: Sequence[int]) -> dict[int, tuple[dict[int, int], int]]:
        return self._merged("doc_terms", docs)

    # -- vectors -------------------------------------------------------------------------------
    def model_dim(self, model: str) -> int | None:
        return self.top["dims"].get(model)

    def vector_stats(self, model: str) -> tuple[int, int, int | None]:
        live, top, _, _ = self.top["vector_counts"].get(model, (0, 0, 0, 0))
        return int(live), int(top), self.model_dim(model)

    def covered(self, model: str, max_key: int) -> int:
        live, top, dropped, top_dropped = self.top["vector_counts"].get(model, (0, 0, 0, 0))
        if max_key >= max(top, top_dropped):
            return int(live + dropped)
        n = self.parts[0].covered(model, max_key)  # the base's keys; drops since only moved some of them
        if self.delta is not None:  # and the keys given since the build
            n += sum(1 for k, m in self.delta.new_keys if m == model and k <= max_key)
        return n

    def vectors_of_keys(self, keys: Sequence[int], model: str) -> list[tuple[int, str, int]]:
        return [x for p in self.parts for x in p.vectors_of_keys(keys, model)]

    def vector_keys_for(self, filters: Filters, model: str):
        import numpy as np

        if filters.frames:
            return None
        got = [p.vector_keys_for(filters, model) for p in self.parts]
        if len(got) == 1:
            return _Ids(got[0][0]), got[0][1]
        return _Ids(np.concatenate([got[0][0], got[1][0]])), np.concatenate([got[0][1], got[1][1]])

    def vectors_after(self, model: str, after: int, dim: int):
        import numpy as np

        if len(self.parts[0].vectors_after(model, after)):  # the build's own delta: DuckDB has the vectors
            return self._duck().vectors_after(model, after, dim)
        if self.delta is None:
            return [], [], np.zeros((0, dim), dtype=np.float32)
        d = self.parts[1]
        pos = d.vectors_after(model, after)
        if not len(pos):
            return [], [], np.zeros((0, dim), dtype=np.float32)
        off, flat = d.snap.whole("vector_values_start"), d.snap.whole("vector_values")
        if not (off[pos + 1] - off[pos] == dim).all():
            return self._duck().vectors_after(model, after, dim)
        mat = np.stack([flat[off[p]:off[p] + dim] for p in pos.tolist()])
        return ([b.decode() for b in d.snap.take("vector_id", pos).tolist()],
                [int(v) for v in d.snap.take("vector_version", pos).tolist()], np.array(mat, dtype=np.float32))


# What SnapshotTx leaves to DuckDB, by name: the rest of ``interface.Tx`` (the view is read-only: a write
# reaches DuckDB's read-only connection, which refuses it) and the backend's own vector reads.
FROM_DUCKDB = (
    # Records, Journal, Listing
    "insert_memories", "insert_version", "update_head", "heads_by_ids", "heads_by_prefix", "existing_ids",
    "stored_hashes", "versions", "current_versions", "current_data", "iter_visible", "bump", "next_seq",
    "append_journal", "live_versions", "sessions",
    # LexicalSearch, VectorSearch
    "add_terms", "replace_terms", "insert_vectors", "drop_vectors", "drop_model", "drop_other_models", "other_models",
    "maybe_pending", "count_pending", "pending", "text_twins", "stored_vectors",
    # Feedback, Grants
    "set_weights", "all_weights", "take_token", "put_checkpoint", "checkpoint", "all_checkpoints", "grants_of",
    "insert_grant", "revoke_grant", "all_grants",
    # Integrity
    "hash_mismatches", "head_version_mismatches", "orphan_versions", "frame_mismatches", "valid_links", "journal_bounds",
    "journal_gaps", "unknown_kinds", "unpaired_attests", "journal_entries", "seq_at", "journal_window", "memory_batch_ends",
    "by_memory",
    "lexical_mismatches", "stray_terms", "vector_problems", "ref_counts", "health_counts",
    # BundleIO
    "table_counts", "version_digest", "attach_bundle", "bundle_plan", "bundle_memories", "heads_of",
    "bundle_missing_checkpoints", "bundle_grants", "bundle_links",
    # the DuckDB backend's own reads (store/vector_index.py)
    "vector_chunks", "vectors_at_keys", "iter_vectors", "vectors_between", "count_vectors", "dropped_keys", "clear_dropped",
)


def _from_duckdb(name: str):
    def method(self, *args, **kwargs):
        return getattr(self._duck(), name)(*args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"Answered by DuckDB (``DuckTx.{name}``)."
    return method


for _name in FROM_DUCKDB:
    assert not hasattr(SnapshotTx, _name), _name  # answered here already: not DuckDB's
    setattr(SnapshotTx, _name, _from_duckdb(_name))
del _name
