"""Salience: how much a memory is worth keeping in view, and how each actor learns it.

Every memory has five factors, each in [0, 1]:

=============  =====================================================================
recency        0.5 ** (age / 30 days); age is the time since the memory was last
               used (attested) or changed, whichever is later, and never negative
importance     importance / 10 (the declared importance, 0-10)
access         a / (a + 5), a = access count (successful attests citing it)
citations      c / (c + 3), c = citations (up by success, down by blamed failure)
confidence     the current version's confidence (0-1)
=============  =====================================================================

and its salience, as seen by an actor, is the weighted sum ``sum(w_i * f_i)`` under
that actor's learned weights; the weights are non-negative and sum to 1, so salience
is in [0, 1]. A forgotten (tombstoned) memory has salience 0. The form ``find`` ranks by is
``store.rules.salience`` (compiled to SQL and to the search snapshot's numpy); a test holds the
two to the same numbers.

Each actor starts from ``DEFAULT_WEIGHTS`` and each ``attest`` takes one EMA step:

- the profile p is the mean factor vector of the memories the attest affected,
  taken at the attest's time, before its bumps;
- on success the target is p / sum(p): weight moves toward the factors the
  helpful memories were strong in;
- on a failure blamed on the memories (reason ``factual_error`` or
  ``wrong_assumption``) the target is q / sum(q) with q = 1 - p: weight moves
  away from the factors the misleading memories were strong in;
- then ``w' = (1 - alpha) * w + alpha * target`` with alpha = ``EMA_RATE``,
  a convex combination, so the weights stay non-negative and sum to 1.

The step is skipped (the weights stay as they were, and the learn-weights journal
entry says why) when nothing was affected, when the target's sum is 0, or when a
failure's reason does not blame the memories (it says nothing about which factors
predict a useful memory). The rate alpha, the profile, and the weights before and
after are stamped in the learn-weights entry, so replay recomputes the step
exactly: the arithmetic below is plain IEEE double arithmetic in a fixed order.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Sequence

FACTORS = ("recency", "importance", "access", "citations", "confidence")
DEFAULT_WEIGHTS = (0.3, 0.3, 0.15, 0.15, 0.1)
HALF_LIFE_SECONDS = 30 * 86400.0
ACCESS_HALF = 5.0  # access count at which the access factor is 0.5
CITATIONS_HALF = 3.0  # citations at which the citations factor is 0.5
EMA_RATE = 0.1

SUCCESS, FAILURE = "success", "failure"
OUTCOMES = (SUCCESS, FAILURE)
BLAMING_REASONS = ("factual_error", "wrong_assumption")


@dataclass(frozen=True)
class Step:
    """One EMA step: the weights after it, and why it was skipped (None when taken)."""

    weights: tuple[float, ...]
    skipped: str | None


def factors(head: dict, now: datetime) -> tuple[float, ...]:
    """The five factors of one head (a dict with the heads table's columns) at ``now``."""
    if head["tombstoned_at"] is not None:
        return (0.0,) * len(FACTORS)
    last = head["updated_at"]
    if head["last_used"] is not None and head["last_used"] > last:
        last = head["last_used"]
    age = max((now - last).total_seconds(), 0.0)
    a, c = float(head["access_count"]), float(head["citations"])
    return (
        0.5 ** (age / HALF_LIFE_SECONDS),
        head["importance"] / 10.0,
        a / (a + ACCESS_HALF),
        c / (c + CITATIONS_HALF),
        float(head["confidence"]),
    )


def score(f: Sequence[float], weights: Sequence[float]) -> float:
    total = 0.0
    for w, x in zip(weights, f):
        total += w * x
    return total


def profile(rows: Sequence[Sequence[float]]) -> tuple[float, ...]:
    """The mean factor vector of ``rows`` (all zeros for none)."""
    if not rows:
        return (0.0,) * len(FACTORS)
    sums = [0.0] * len(FACTORS)
    for f in rows:
        for i, x in enumerate(f):
            sums[i] += x
    return tuple(s / len(rows) for s in sums)


def blames(outcome: str, reason: str | None) -> bool:
    """Whether a failure is blamed on the cited memories."""
    return outcome == FAILURE and reason in BLAMING_REASONS


def citations_delta(outcome: str, reason: str | None) -> int:
    if outcome == SUCCESS:
        return 1
    return -1 if blames(outcome, reason) else 0


def ema_step(prev: Sequence[float], p: Sequence[float], outcome: str, reason: str | None,
             affected: int, alpha: float = EMA_RATE) -> Step:
    """The weights after one attest (see the module docstring)."""
    prev = tuple(float(w) for w in prev)
    if affected == 0:
        return Step(prev, "no memory was affected")
    if outcome == SUCCESS:
        target = list(p)
    elif blames(outcome, reason):
        target = [1.0 - x for x in p]
    else:
        return Step(prev, "the failure is not blamed on the memories")
    total = 0.0
    for x in target:
        total += x
    if total <= 0.0:
        return Step(prev, "the factor profile is all zero")
    return Step(tuple((1.0 - alpha) * w + alpha * (x / total) for w, x in zip(prev, target)), None)
