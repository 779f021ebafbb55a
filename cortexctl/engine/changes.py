"""What changed: ``diff`` (two versions of one memory, field by field and line by line) and
``changes`` (what was written, updated, superseded, forgotten, un-forgotten or otherwise changed
in a span of record time, read from the journal).

``revert`` (a new version equal to an old one) writes, so it lives beside ``update`` in
``memories.py``.
"""

from __future__ import annotations

from itertools import islice
from typing import Any, Iterable, Iterator

from cortexctl.engine import when
from cortexctl.engine.context import Context
from cortexctl.engine.documents import ChangeLog
from cortexctl.engine.refs import resolve
from cortexctl.engine.reports import Change, FieldChange, VersionDiff
from cortexctl.errors import IntegrityError, NotFound, UsageError
from cortexctl.memory import codec
from cortexctl.memory.ids import parse_ref
from cortexctl.memory.types import type_name as stored_type

# -- diff ------------------------------------------------------------------------------------------


def version_number(value: Any, field: str) -> int | None:
    """A version as given (an int from a tool, text from the shell): a whole number >= 1, or None
    when not given; UsageError naming ``field`` otherwise."""
    if value is None:
        return None
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():  # not '²': int() refuses it
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{field} must be a version number, a whole number from 1 (got {value!r})", field=field)
    return value


def diff(ctx: Context, ref: str, from_version: Any = None, to_version: Any = None) -> VersionDiff:
    """How version ``to_version`` of a memory differs from ``from_version``. Neither given: the
    current version against the one before it (a memory with one version: itself, an empty
    diff); ``from_version`` alone: that version against the current one. A version URI as
    ``ref`` gives ``from_version``."""
    a = version_number(from_version, "from_version")
    b = version_number(to_version, "to_version")
    parsed = parse_ref(ref)
    if parsed.version is not None:
        if a is not None and a != parsed.version:
            raise UsageError(f"from_version {a} disagrees with {ref!r}, which names version {parsed.version}",
                             field="from_version")
        a = parsed.version
    if b is not None and a is None:
        raise UsageError("to_version needs from_version (the version to compare it with)", field="to_version")
    with ctx.reading() as tx:
        head = resolve(tx, ctx.viewer, ref)
        current = head["current_version"]
        if a is None:
            a, b = max(1, current - 1), current
        elif b is None:
            b = current
        rows = {}
        for n in dict.fromkeys((a, b)):
            got = tx.versions(head["id"], n)
            if not got:
                raise NotFound(f"memory {head['id']} has no version {n} (latest is {current})")
            rows[n] = got[0]
    before, after = rows[a], rows[b]
    type_before, type_after = stored_type(before["type"]), stored_type(after["type"])
    data_before, data_after = codec.decode(before["data"]), codec.decode(after["data"])
    return VersionDiff(id=head["id"], from_=a, to=b, current_version=current,
                       fields=list(_field_changes(before, after, data_before, data_after)),
                       text_lines=_text_diff(type_before, data_before, a, type_after, data_after, b))


def _field_changes(before: dict, after: dict, data_before: dict, data_after: dict) -> Iterator[FieldChange]:
    for key in [*data_before, *(k for k in data_after if k not in data_before)]:
        old, new = data_before.get(key), data_after.get(key)
        if old != new or (key in data_before) != (key in data_after):
            yield FieldChange(f"data.{key}", old, new)
    if before["confidence"] != after["confidence"]:
        yield FieldChange("confidence", before["confidence"], after["confidence"])
    for form in ("short", "medium"):
        if before[form] != after[form]:
            yield FieldChange(f"forms.{form}", before[form], after[form])


def _text_diff(type_a: str, data_a: dict, a: int, type_b: str, data_b: dict, b: int) -> list[str]:
    import difflib

    from cortexctl.memory.forms import render_full

    return list(difflib.unified_diff(render_full(type_a, data_a).splitlines(),
                                     render_full(type_b, data_b).splitlines(),
                                     fromfile=f"v{a}", tofile=f"v{b}", lineterm=""))


# -- changes ---------------------------------------------------------------------------------------
# What ``changes`` reports, and the journal kind each comes from.
KINDS = ("written", "updated", "superseded", "forgotten", "unforgotten", "changed")
_JOURNAL_KIND = {"written": "write", "updated": "update", "superseded": "update_head", "forgotten": "tombstone",
                 "unforgotten": "unforget", "changed": "update_head"}
# Head fields a use of a memory moves (attest, a repeated remember): not a change of what it says.
_USE_FIELDS = frozenset({"access_count", "citations", "last_used", "updated_at"})
MAX_LIMIT = 1_000_000
_BATCH = 1000


def changes(ctx: Context, *, since: str, until: str | None = None, kinds: Iterable[str] = (),
            limit: int | None = None) -> ChangeLog:
    """What happened in record time ``(since, until]`` (``until``: now when not given) to the
    memories the actor may see now, oldest first, from the journal: each write, update,
    supersede (an ``update_head`` that sets ``superseded_by``), forget, un-forget, and change of
    head fields (tags, importance, visibility, frames, valid time); a use of a memory (its
    counters) is not a change. ``kinds`` keeps only those kinds (``KINDS``); ``limit`` the first
    that many (``more`` says when there were others)."""
    now = ctx.clock()
    start = when.parse_past(since, now, field="since")
    end = now if until is None else when.parse(until, now, field="until")
    if end < start:
        raise UsageError(f"until ({until.strip()}) is before since ({since.strip()})", field="until")
    wanted = tuple(dict.fromkeys(kinds or ()))
    for k in wanted:
        if k not in KINDS:
            raise UsageError(f"kinds must each be one of {', '.join(KINDS)} (got {k!r})", field="kinds")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT):
        raise UsageError(f"limit must be a whole number from 1 to {MAX_LIMIT} (got {limit!r})", field="limit")
    keep = set(wanted or KINDS)
    journal_kinds = sorted({_JOURNAL_KIND[k] for k in keep})
    found: list[Change] = []
    more = False
    with ctx.reading() as tx:
        cursor, upto = tx.seq_at(start), tx.seq_at(end)
        viewer = ctx.viewer
        while cursor < upto and not more:
            # A page at a time, each read whole before the view is asked whom the viewer sees:
            # a backend may serve the window from an open cursor that another query would end.
            page = list(islice(tx.journal_window(cursor, upto, journal_kinds, batch=_BATCH), _BATCH))
            if not page:
                break
            cursor = page[-1][0]
            batch = [c for c in (_change_of(*entry) for entry in page) if c is not None and c.kind in keep]
            seen = {h["id"]: h for h in tx.heads_by_ids(sorted({c.id for c in batch}), viewer, ("id", "short"))}
            for c in batch:
                h = seen.get(c.id)
                if h is None:
                    continue
                if limit is not None and len(found) >= limit:
                    more = True
                    break
                if c.text is None:
                    c.text = h["short"]
                found.append(c)
            if len(page) < _BATCH:
                break
    return ChangeLog(since=start, until=end, changes=found, more=more)


def _change_of(seq: int, kind: str, ts, actor: str, ref: str | None, payload: bytes) -> Change | None:
    """The change a journal entry records, or None for an entry that changes nothing ``changes``
    reports (a use of a memory). ``text`` is left None where the head's current short form
    stands for it."""
    if ref is None:
        return None
    try:
        doc = codec.decode(payload)
        if kind == "write":
            top = doc["head"]["current_version"]
            short = next((v.get("short") for v in doc["versions"] if v["version"] == top), None)
            return Change(seq, ts, "written", ref, top, actor, short)
        if kind == "update":
            v = doc["version"]
            return Change(seq, ts, "updated", ref, v["version"], actor, v.get("short"))
        if kind == "tombstone":
            return Change(seq, ts, "forgotten", ref, None, actor, None, {"reason": doc.get("tombstone_reason")})
        if kind == "unforget":
            return Change(seq, ts, "unforgotten", ref, None, actor, None)
        fields = sorted(k for k in doc if k != "id" and k not in _USE_FIELDS)
        if not fields:
            return None
        if doc.get("superseded_by") is not None:
            return Change(seq, ts, "superseded", ref, None, actor, None, {"superseded_by": doc["superseded_by"]})
        return Change(seq, ts, "changed", ref, None, actor, None, {"fields": fields})
    except (IntegrityError, KeyError, TypeError, AttributeError):
        raise IntegrityError(f"journal entry {seq} ({kind}) does not decode as one (damaged store)") from None


__all__ = ["diff", "changes", "version_number", "KINDS"]
