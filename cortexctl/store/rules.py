"""Who sees what, which memories a search may return, and how they rank: each rule once, as an
expression (``store/predicate.py``) that DuckDB's SQL and the search snapshot's numpy both compile.

- ``visibility(viewer)``: a memory is seen by its owner; by everyone when ``public``; and, when
  ``scoped``, by a sub-agent one of whose live grants covers it (the granter's memory, of one of
  the grant's types when it names some, carrying one of its tags when it names some:
  ``interface.Scope``). Never another's ``private`` memory.
- ``filters(f)``: visible to ``f``'s viewer, not forgotten unless asked, of one of the types,
  holding every tag, of the session, with every frame (frames: SQL only, the snapshot holds none),
  valid at ``f.valid_at`` (``valid_at``) and not ended by ``f.ended_by`` (``not_ended``).
- ``salience(scoring)``: ``engine/salience.py`` gives the formula and its reasons; this is its
  form for ranking, operation by operation as the database computes it.
- ``tokens_now``: what an attest rate bucket holds at a time (every backend's ``take_token``).
- ``model_unusable``: when the semantic lane cannot run for a model (every backend's ``nearest``).
"""

from __future__ import annotations

from cortexctl.store.interface import Filters, Scoring, Viewer
from cortexctl.store.predicate import (Add, Cmp, Col, Const, Div, Epoch, Eq, Greatest, HasAllTags, HasAnyTag, HasFrame,
                                       If, In, Mul, Not, Pow, Sub, all_of, any_of)

# salience.py's constants (the store does not import the engine): a test holds them equal
HALF_LIFE_FACTOR = 0.5
ACCESS_HALF = 5.0
CITATIONS_HALF = 3.0
IMPORTANCE_SCALE = 10.0


def visibility(viewer: Viewer):
    actor = Col("actor")
    seen = [Eq(actor, Const(viewer.actor)), Eq(Col("visibility"), Const("public"))]
    covers = []
    for granter, types, tags in viewer.scopes:
        cond = [Eq(actor, Const(granter))]
        if types:
            cond.append(In(Col("type"), tuple(int(t) for t in types)))
        if tags:
            cond.append(HasAnyTag(tuple(tags)))
        covers.append(all_of(*cond))
    if covers:
        seen.append(all_of(Eq(Col("visibility"), Const("scoped")), any_of(*covers)))
    return any_of(*seen)


def filters(f: Filters):
    cond = [visibility(f.viewer)]
    if not f.include_tombstoned:
        cond.append(Not(Col("tombstoned")))
    if f.types:
        cond.append(In(Col("type"), tuple(f.types)))
    if f.tags:
        cond.append(HasAllTags(tuple(f.tags)))
    if f.session is not None:
        cond.append(Eq(Col("session"), Const(f.session)))
    for verb, kind, ref in f.frames:
        cond.append(HasFrame(verb, kind, ref))
    if f.valid_at is not None:
        cond.append(valid_at(f.valid_at))
    if f.ended_by is not None:
        cond.append(not_ended(f.ended_by))
    return all_of(*cond)


def valid_at(at):
    """The memory's valid interval [valid_from, valid_to) holds ``at`` (a NULL end is open)."""
    return all_of(Not(Cmp(Col("valid_from"), ">", Const(at))), Not(Cmp(Col("valid_to"), "<=", Const(at))))


def not_ended(at):
    """The memory's valid time has not ended by ``at`` (no valid_to, or one after ``at``)."""
    return Not(Cmp(Col("valid_to"), "<=", Const(at)))


# Seconds of the clock a long-lived process keeps the salience lane's contenders for (``salient_fall``).
SALIENT_HOLD = 600.0


def salient_fall(scoring: Scoring) -> tuple[float, float]:
    """(hold, fall): for how many seconds of the clock the salience lane's contenders, once taken, hold,
    and how far any memory's salience can fall meanwhile. Salience only falls as time passes (its
    recency does), by at most ``w_recency * (1 - 0.5 ** (hold / half_life))``, so contenders taken with
    that much room below the cut still hold every memory that can be among the best until then. No
    hold (0) where the weights or half-life let salience rise with time."""
    hold = SALIENT_HOLD if scoring.weights[0] >= 0 and scoring.half_life > 0 else 0.0
    return hold, (scoring.weights[0] * (1.0 - 0.5 ** (hold / scoring.half_life)) if hold else 0.0)


def salience(scoring: Scoring):
    """0 for a forgotten memory, else the weighted sum of the five factors."""
    w_rec, w_imp, w_acc, w_cit, w_conf = (Const(float(w)) for w in scoring.weights)
    age = Greatest(Sub(Epoch(Const(scoring.now)), Col("recent")), Const(0.0))
    acc, cit = Col("access"), Col("citations")
    score = Add((
        Mul(w_rec, Pow(Const(HALF_LIFE_FACTOR), Div(age, Const(float(scoring.half_life))))),
        Div(Mul(w_imp, Col("importance")), Const(IMPORTANCE_SCALE)),
        Div(Mul(w_acc, acc), Add((acc, Const(ACCESS_HALF)))),
        Div(Mul(w_cit, cit), Add((cit, Const(CITATIONS_HALF)))),
        Mul(w_conf, Col("confidence")),
    ))
    return If(Col("tombstoned"), Const(0.0), score)


def tokens_now(bucket, now, *, rate: float, burst: float) -> float:
    """What an attest rate bucket holds at ``now``: ``bucket`` is its stored (tokens, stamped at) or
    None. It refills at ``rate`` a second up to ``burst``; a missing bucket is full, and so is one
    stamped after ``now`` (a clock that went back), so a clock step never locks an intent out."""
    if bucket is not None and bucket[1] <= now:
        tokens, then = bucket
        return min(burst, tokens + (now - then).total_seconds() * rate)
    return burst


def model_unusable(tx, model: str, dim: int) -> tuple[list, str | None] | None:
    """``nearest``'s answer when the store has no vector of ``model`` or has them at another dimension
    than the query's ``dim`` (no results, and a warning saying to reindex); None when it can search."""
    have = tx.model_dim(model)
    if have is None:
        if not tx.count_heads():
            return [], None
        return [], f"semantic lane empty: no memory has a vector from {model} yet (run: cortexctl reindex)"
    if have != dim:
        return [], (f"semantic lane skipped: the query's vector has {dim} dimensions but the store's vectors "
                    f"from {model} have {have} (run: cortexctl reindex)")
    return None


__all__ = ["visibility", "filters", "valid_at", "not_ended", "salience", "salient_fall", "SALIENT_HOLD", "tokens_now",
           "model_unusable"]
