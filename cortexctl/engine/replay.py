"""Replaying the journal: rebuild each memory's head and versions from its entries alone.

Every entry kind that changes a memory is applied here, in sequence order:

- ``write``: the head and every version (a write, or one imported memory), less the fields
  that hold what the current version or a new memory implies (``write_entry`` puts them back;
  entries older than a head field lack it, and get the same);
- ``update``: one new version, and the head's current version, time and forms;
- ``update_head``: the changed head fields (tags, frames, importance, visibility, time);
- ``tombstone``: the reason, time and actor;
- ``unforget``: the tombstone cleared (reason, time and actor back to none);
- ``attest``: for each affected memory, the access and citations deltas
  (citations floor at 0) and the time it was last used.

``Learning`` replays the ``learn_weights`` entries: each actor's learned weights
start at ``salience.DEFAULT_WEIGHTS`` and take the EMA step each entry stamps,
recomputed here from the weights replay has reached, the stamped rate and profile,
and the outcome of the attest it pairs with; the stamped profile is checked against
the factors of the replayed memories at the attest's time. ``checkpoint`` entries carry the
checkpoint record itself; the latest for each (actor, intent, step) is the stored one.
``Grants`` replays ``grant`` entries (the grant row: id, granter, subagent, type codes,
tags, created and expiry times) and ``revoke`` entries (id, revoked_at, revoked_by):
the result is the ``grants`` table, revoked rows included.

Times in payloads are integer microseconds since the epoch (UTC).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from cortexctl.engine import salience
from cortexctl.engine.rows import micros, version_implied, write_implied
from cortexctl.errors import IntegrityError
from cortexctl.memory import codec
from cortexctl.memory.types import MAX_COUNT
from cortexctl.store.interface import TIME_FIELDS, VERSION_FIELDS

_EPOCH = datetime(1970, 1, 1)
KINDS = ("write", "update", "update_head", "tombstone", "attest", "learn_weights", "checkpoint", "unforget",
         "grant", "revoke", "consolidate")


_TIMES: dict[int, datetime] = {}  # recent conversions: a memory's times are mostly one and the same


def _time(v: int) -> datetime:
    t = _TIMES.get(v)
    if t is None:
        if len(_TIMES) >= 4096:
            _TIMES.clear()
        t = _TIMES[v] = from_micros(v)
    return t


def _to_datetimes(plain: dict) -> dict:
    row = {**plain}
    for k in TIME_FIELDS:
        v = row.get(k)
        if isinstance(v, int):
            row[k] = _time(v)
    return row


def _as_is(plain: dict) -> dict:
    """A payload's record with its times left as integer microseconds (``Memory(micros=True)``)."""
    return plain


def from_micros(v: int) -> datetime:
    """Integer microseconds since the epoch as a (naive, UTC) time (``rows.micros`` the other way)."""
    return _EPOCH + timedelta(microseconds=v)


_VERSION_FIELDS = len(VERSION_FIELDS)


def write_entry(doc: dict) -> tuple[dict, list[dict]]:
    """A write entry's (head, versions) whole: each field the entry left out put back
    (``rows.write_implied``, ``rows.version_implied``), times still as integer microseconds.
    Raises KeyError or TypeError for an entry that lacks what cannot be left out."""
    head, versions = doc["head"], doc["versions"]
    # the entry's own fields over what is implied (a field the entry has is never replaced)
    versions = [{**version_implied(head, v), **v} if len(v) < _VERSION_FIELDS else v for v in versions]
    top = {v["version"]: v for v in versions}[head["current_version"]]
    return {**write_implied(top), **head}, versions


def _doc(seq: int, payload: bytes) -> dict:
    try:
        doc = codec.decode(payload)
    except IntegrityError:
        raise IntegrityError(f"journal entry {seq} does not decode") from None
    if not isinstance(doc, dict):
        raise IntegrityError(f"journal entry {seq} is not a record")
    return doc


class Memory:
    """One memory as the journal says it is: its times as datetimes, or with ``micros`` as the
    payloads hold them, integer microseconds since the epoch (``verify`` compares them so with rows
    read that way, and spares a conversion of every time of the store)."""

    __slots__ = ("head", "versions", "micros")

    def __init__(self, micros: bool = False) -> None:
        self.head: dict[str, Any] | None = None
        self.versions: dict[int, dict] = {}
        self.micros = micros

    def apply(self, seq: int, kind: str, payload: bytes) -> None:
        doc = _doc(seq, payload)
        _row = _as_is if self.micros else _to_datetimes
        try:
            if kind == "write":
                if self.head is not None:
                    raise IntegrityError(f"journal entry {seq} writes a memory that already exists")
                head, versions = write_entry(doc)
                self.head = _row(head)
                for v in versions:
                    self.versions[v["version"]] = _row(v)
                # The head's confidence is its current version's (entries older than the
                # head column do not carry it).
                self.head["confidence"] = self.versions[self.head["current_version"]]["confidence"]
                return
            if self.head is None:
                raise IntegrityError(f"journal entry {seq} ({kind}) comes before the memory's write")
            if kind == "update":
                v = _row(doc["version"])
                self.versions[v["version"]] = v
                self.head.update(current_version=v["version"], updated_at=_row(doc)["updated_at"],
                                 short=v["short"], medium=v["medium"], confidence=v["confidence"])
            elif kind in ("update_head", "tombstone", "unforget"):
                self.head.update(_row({k: v for k, v in doc.items() if k != "id"}))
            else:
                raise IntegrityError(f"journal entry {seq} has an unknown kind {kind!r}")
        except (KeyError, TypeError, AttributeError):
            raise IntegrityError(f"journal entry {seq} ({kind}) is missing fields") from None

    def attested(self, seq: int, event: "Attested") -> tuple[float, ...]:
        """Apply one attest; returns the memory's salience factors just before it."""
        if self.head is None:
            raise IntegrityError(f"journal entry {seq} (attest) cites the memory before its write")
        try:
            before = salience.factors(_to_datetimes(self.head) if self.micros else self.head, event.at)
            self.head["access_count"] = min(MAX_COUNT, self.head["access_count"] + event.access)
            self.head["citations"] = min(MAX_COUNT, max(0, self.head["citations"] + event.citations))
        except (KeyError, TypeError, ValueError, OverflowError):
            raise IntegrityError(f"journal entry {seq} (attest) meets a memory whose journaled head is "
                                 "missing salience fields") from None
        self.head["last_used"] = micros(event.at) if self.micros else event.at
        return before


class Attested:
    """What one attest did to each memory it affected."""

    __slots__ = ("access", "citations", "at")

    def __init__(self, access: int, citations: int, at: datetime) -> None:
        self.access, self.citations, self.at = access, citations, at


def attest_events(seq: int, payload: bytes) -> tuple[dict, list[str], Attested]:
    """An attest entry: its record, the IDs it affected, and what it did to each."""
    doc = _doc(seq, payload)
    try:
        affected = list(doc["affected"])
        event = Attested(int(doc["access_delta"]), int(doc["citations_delta"]),
                         _EPOCH + timedelta(microseconds=int(doc["at"])))
        if not all(isinstance(i, str) for i in affected):
            raise TypeError
    except (KeyError, TypeError, ValueError, OverflowError):
        raise IntegrityError(f"journal entry {seq} (attest) is missing fields") from None
    return doc, affected, event


class Learning:
    """Each actor's learned weights, replayed from the attest and learn_weights entries."""

    def __init__(self) -> None:
        self.weights: dict[str, tuple[float, ...]] = {}
        self.steps: dict[str, int] = {}
        self.seq: dict[str, int] = {}
        self.broken: set[str] = set()
        self.profiles: dict[int, tuple[tuple[float, ...], int]] = {}  # attest seq -> (stamped profile, affected)
        self._attest: tuple[int, dict] | None = None

    def attest(self, seq: int, doc: dict) -> None:
        self._attest = (seq, doc)

    def learn(self, seq: int, actor: str, payload: bytes) -> None:
        """Apply one learn_weights entry; IntegrityError names the first divergence."""
        if actor in self.broken:
            return
        try:
            self._learn(seq, actor, payload)
        except IntegrityError:
            self.broken.add(actor)
            raise

    def _learn(self, seq: int, actor: str, payload: bytes) -> None:
        doc = _doc(seq, payload)
        paired = self._attest
        self._attest = None
        if paired is None or paired[0] != seq - 1:
            raise IntegrityError(f"journal entry {seq} (learn_weights) does not follow its attest")
        attest = paired[1]
        if attest is None:
            raise IntegrityError(f"journal entry {seq} (learn_weights) pairs with an attest that does not decode")
        try:
            stamped_actor, alpha = doc["actor"], float(doc["alpha"])
            p = tuple(float(x) for x in doc["profile"])
            previous = tuple(float(x) for x in doc["previous"])
            new = tuple(float(x) for x in doc["new"])
            skipped = doc["skipped"]
            outcome, reason, affected = attest["outcome"], attest["reason"], len(attest["affected"])
        except (KeyError, TypeError, ValueError):
            raise IntegrityError(f"journal entry {seq} (learn_weights) is missing fields") from None
        if stamped_actor != actor:
            raise IntegrityError(f"journal entry {seq} (learn_weights) names actor {stamped_actor!r} "
                                 f"but was written by {actor!r}")
        if len(p) != len(salience.FACTORS) or any(not 0.0 <= x <= 1.0 for x in p):
            raise IntegrityError(f"journal entry {seq} (learn_weights) has an impossible factor profile")
        self.profiles[seq - 1] = (p, affected)
        have = self.weights.get(actor, salience.DEFAULT_WEIGHTS)
        if previous != have:
            raise IntegrityError(f"journal entry {seq} (learn_weights) starts from weights {fmt_weights(previous)} "
                                 f"but replay reached {fmt_weights(have)}")
        step = salience.ema_step(have, p, outcome, reason, affected, alpha)
        if new != step.weights or skipped != step.skipped:
            raise IntegrityError(f"journal entry {seq} (learn_weights) records weights {fmt_weights(new)} "
                                 f"but the step recomputes to {fmt_weights(step.weights)}")
        self.weights[actor] = step.weights
        self.steps[actor] = self.steps.get(actor, 0) + 1
        self.seq[actor] = seq


def fmt_weights(weights) -> str:
    return "(" + ", ".join(f"{w:.17g}" for w in weights) + ")"


class Grants:
    """The grants table as the journal's grant and revoke entries make it."""

    def __init__(self) -> None:
        self.rows: dict[str, dict] = {}
        self.problems: list[str] = []

    def apply(self, seq: int, kind: str, payload: bytes) -> None:
        doc = _doc(seq, payload)
        try:
            if kind == "grant":
                row = {"id": str(doc["id"]), "granter": str(doc["granter"]), "subagent": str(doc["subagent"]),
                       "types": [int(t) for t in doc["types"]], "tags": [str(t) for t in doc["tags"]],
                       "created_at": _time(int(doc["created_at"])),
                       "expires_at": None if doc["expires_at"] is None else _time(int(doc["expires_at"])),
                       "revoked_at": None, "revoked_by": None}
                if row["id"] in self.rows:
                    self.problems.append(f"journal entry {seq} grants {row['id']} a second time")
                self.rows[row["id"]] = row
            elif kind == "revoke":
                row = self.rows.get(str(doc["id"]))
                if row is None:
                    self.problems.append(f"journal entry {seq} revokes grant {doc['id']}, which was never granted")
                    return
                if row["revoked_at"] is not None:
                    self.problems.append(f"journal entry {seq} revokes grant {doc['id']} a second time")
                row["revoked_at"], row["revoked_by"] = _time(int(doc["revoked_at"])), str(doc["revoked_by"])
        except (KeyError, TypeError, ValueError):
            raise IntegrityError(f"journal entry {seq} ({kind}) is not a whole grant record") from None
