"""Write-back: remember, remember --user, outcome, pattern write and pattern reinforce (SPEC §8).

- A fact about the world is a ``fact`` with subject ``cortex://knowledge/world``.
- A user fact is a ``fact`` with subject ``cortex://knowledge/user`` and the tag ``user``;
  the pinned block's user profile is made of them. A user fact whose normalized statement
  (``pattern.normalize``: case, spacing, trailing punctuation) equals one of the actor's
  live user facts is not written again: the existing one is touched (its access count + 1
  and its last use now, journaled as an ``update_head``).
- An outcome is an ``event`` of kind ``outcome`` with the status as its outcome; the intent,
  when given, is kept in the provenance.
- A pattern's statement holds its spec (``memory.pattern``). Reinforcing a spec whose name,
  trigger and steps match a live pattern of the actor's writes a new version of it with
  coverage + 1 and strength + ``NUDGE`` * (1 - strength); otherwise it writes a new candidate
  with coverage 1, strength ``CANDIDATE_STRENGTH`` and confidence ``CANDIDATE_CONFIDENCE``.

Every change goes through ``memories.write`` / ``memories.update`` or a journaled head
change, so ``verify`` replays it like any other.
"""

from __future__ import annotations

from typing import Iterable

from cortexctl.engine import memories
from cortexctl.engine.context import Context
from cortexctl.engine.reports import WriteBack
from cortexctl.engine.rows import plain
from cortexctl.errors import UsageError
from cortexctl.memory import codec
from cortexctl.memory import pattern as pat
from cortexctl.memory.types import MAX_COUNT, check_name, type_code
from cortexctl.store.interface import Filters, Tx

WORLD_SUBJECT = "cortex://knowledge/world"
USER_SUBJECT = "cortex://knowledge/user"
USER_TAG = "user"
OUTCOME_STATUSES = ("success", "failure", "partial")
NUDGE = 0.1
CANDIDATE_STRENGTH = 0.3
CANDIDATE_CONFIDENCE = 0.5
SCAN_LIMIT = 5000  # user facts / patterns looked at for deduplication, by salience


def live_of_type(tx: Tx, ctx: Context, type_name: str, *, tags: Iterable[str] = (), limit: int = SCAN_LIMIT,
                 own: bool = False, current: bool = False) -> list[tuple[dict, dict]]:
    """Visible, live memories of a type (with every tag), best salience first:
    (head with id/actor/access_count, decoded current data with ``_confidence``). ``current``:
    only those whose valid time has not ended (not superseded)."""
    from cortexctl.engine.find import scoring

    filters = Filters(actor=ctx.actor, types=(type_code(type_name),), tags=tuple(tags), scopes=ctx.viewer.scopes,
                      ended_by=ctx.clock() if current else None)
    top = tx.top_salience(filters, scoring(tx, ctx.actor, ctx.clock()), limit)
    ids = [i for i, _ in top]
    heads = {h["id"]: h for h in tx.heads_by_ids(ids, filters.viewer)}
    versions = tx.current_versions(ids)
    out = []
    for i in ids:
        head, v = heads.get(i), versions.get(i)
        if head is None or v is None or (own and head["actor"] != ctx.actor):
            continue
        data = codec.decode(v["data"])
        data["_confidence"] = v["confidence"]
        out.append((head, data))
    return out


def spec_of(doc: dict | None = None, **fields) -> pat.PatternSpec:
    """A pattern spec from a JSON object and/or fields (fields given win); InvalidData naming
    the field when it is not a valid spec."""
    from cortexctl.errors import InvalidData

    merged = dict(doc or {})
    merged.update({k: v for k, v in fields.items() if v not in (None, [], ())})
    try:
        return pat.from_dict(merged)
    except pat.SpecError as exc:
        raise InvalidData(str(exc), field="spec") from None


def _result(r, action: str, type_name: str, **extra) -> WriteBack:
    return WriteBack(id=r.id, version=r.version, action=action, seq=r.seq, type=type_name,
                     warnings=list(r.warnings), **extra)


def remember(ctx: Context, text: str, *, user: bool = False, provenance: dict | None = None,
             source: str = "stated") -> WriteBack:
    """A fact about the world, or (``user``) a user fact, deduplicated by normalized statement."""
    if not isinstance(text, str) or not text.strip():
        raise UsageError("remember needs some text", field="text")
    text = text.strip()
    data = {"subject": USER_SUBJECT if user else WORLD_SUBJECT, "source": source}
    if user:
        key = pat.normalize(text)
        with ctx.peek() as tx:
            same = [] if tx is None else [
                h for h, d in live_of_type(tx, ctx, "fact", tags=(USER_TAG,), own=True)
                if d.get("subject") == USER_SUBJECT and pat.normalize(d.get("statement", "")) == key
            ]
        if same:
            return touch(ctx, same[0]["id"])
    r = memories.write(ctx, "fact", text, data=data, tags=[USER_TAG] if user else [],
                       provenance=provenance or {"via": "remember"})
    return _result(r, "written", "fact")


def touch(ctx: Context, id_: str) -> WriteBack:
    """Count one more use of a memory (access count + 1, last used now), journaled."""
    with ctx.transaction() as tx:
        head = tx.heads_by_ids([id_], ctx.actor)[0]
        now = ctx.clock()
        fields = {"access_count": min(MAX_COUNT, head["access_count"] + 1), "last_used": now, "updated_at": now}
        tx.update_head(id_, fields)
        seq = tx.append_journal([("update_head", now, ctx.actor, id_, codec.encode({"id": id_, **plain(fields)}))])
    return WriteBack(id=id_, version=head["current_version"], action="touched", seq=seq, type="fact")


def outcome(ctx: Context, text: str, *, status: str, intent: str | None = None,
            provenance: dict | None = None) -> WriteBack:
    """An event recording how a task ended."""
    if status not in OUTCOME_STATUSES:
        raise UsageError(f"status must be one of {', '.join(OUTCOME_STATUSES)} (got {status!r})", field="status")
    if not isinstance(text, str) or not text.strip():
        raise UsageError("outcome needs some text", field="text")
    prov = dict(provenance or {"via": "outcome"})
    if intent is not None:
        check_name(intent, "intent")
        prov["intent"] = intent
    r = memories.write(ctx, "event", text.strip(), data={"kind": "outcome", "outcome": status}, provenance=prov)
    return _result(r, "written", "event")


def pattern_write(ctx: Context, spec: pat.PatternSpec, *, strength: float = 0.5, coverage: int = 1,
                  derived_from: Iterable[str] = (), confidence: float = 1.0,
                  provenance: dict | None = None) -> WriteBack:
    """A new pattern memory holding ``spec``."""
    data = {"strength": strength, "coverage": coverage, "derived_from": list(derived_from)}
    r = memories.write(ctx, "pattern", spec.encode(), data=data, confidence=confidence,
                       provenance=provenance or {"via": "pattern"})
    return _result(r, "written", "pattern", coverage=coverage, strength=strength)


def nudge(strength: float) -> float:
    """The strength after one more success: + NUDGE of the distance to 1."""
    return round(min(1.0, strength + NUDGE * (1.0 - strength)), 6)


def pattern_reinforce(ctx: Context, spec: pat.PatternSpec, *, derived_from: Iterable[str] = (),
                      provenance: dict | None = None) -> WriteBack:
    """Reinforce the actor's live pattern with the same identity, or write a new candidate."""
    derived = list(derived_from)
    with ctx.peek() as tx:
        same = [] if tx is None else [
            (h, d) for h, d in live_of_type(tx, ctx, "pattern", own=True)
            if pat.decode(d.get("statement", ""))[0].identity() == spec.identity()
        ]
    if not same:
        return pattern_write(ctx, spec, strength=CANDIDATE_STRENGTH, coverage=1, derived_from=derived,
                             confidence=CANDIDATE_CONFIDENCE, provenance=provenance)
    head, data = same[0]
    coverage = min(MAX_COUNT, int(data.get("coverage", 1)) + 1)
    strength = nudge(float(data.get("strength", 0.5)))
    merged = list(dict.fromkeys([*data.get("derived_from", []), *derived]))
    r = memories.update(ctx, head["id"], data={"coverage": coverage, "strength": strength, "derived_from": merged},
                         provenance=provenance or {"via": "reinforce"})
    return _result(r, "reinforced", "pattern", coverage=coverage, strength=strength)
