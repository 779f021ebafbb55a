"""attest: feed the outcome of an intent back into the salience of the memories it cited.

One call, one transaction (SPEC §6):

0. with no store at the path, NotFound (exit 3): nothing is created;
1. take a token from the (actor, intent) bucket (``RATE`` a second, burst ``BURST``,
   kept in the store so it holds across processes); none left: RateLimited, and
   nothing changes;
2. resolve each distinct citation to a memory the actor may see; malformed,
   missing (or not visible, or naming a version it does not have), ambiguous and
   forgotten ones are skipped and listed (each cut to 200 characters),
   and citations naming the same memory count once;
3. bump every affected memory: access +1 on success; citations +1 on success,
   -1 (floor 0) on a failure blamed on the memories, else 0; last used = now;
4. one EMA step of the actor's learned weights (``engine/salience.py``);
5. journal ``attest`` at seq N and ``learn_weights`` at N + 1, the latter even when
   the step is skipped.

Journal payloads (canonical CBOR; times in microseconds since the epoch, UTC):

- attest: ``{intent, outcome, reason, affected: [id...], skipped: [[citation, why]...],
  citations_delta, access_delta, at}``;
- learn_weights: ``{actor, intent, attest_seq, alpha, profile: [5], previous: [5],
  new: [5], skipped: why | null, at}``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from cortexctl.engine import salience
from cortexctl.engine.reports import AttestResult
from cortexctl.errors import RateLimited, UsageError
from cortexctl.memory import codec
from cortexctl.memory.ids import parse_ref
from cortexctl.engine.refs import NO_VERSION, look_up
from cortexctl.engine.rows import micros
from cortexctl.memory.types import check_label
from cortexctl.store.interface import SALIENCE_FIELDS, Tx, Viewer

if TYPE_CHECKING:
    from cortexctl.engine.context import Context

MAX_CITED = 256
MAX_REASON_CHARS = 1000
RATE, BURST = 1.0, 5.0  # tokens a second, bucket size

MALFORMED, MISSING, TOMBSTONED = "malformed", "missing", "tombstoned"  # and refs.AMBIGUOUS


def check(intent: object, outcome: object, reason: object, cited: list) -> None:
    """Every usage error attest can have, before the store is opened."""
    check_label(intent, "intent")
    if outcome not in salience.OUTCOMES:
        raise UsageError(f"outcome {outcome!r}: must be success or failure", field="outcome")
    if reason is not None:
        if not isinstance(reason, str) or not reason.strip() or not reason.isprintable():
            raise UsageError("reason must be printable text", field="reason")
        if len(reason) > MAX_REASON_CHARS:
            raise UsageError(f"reason is longer than {MAX_REASON_CHARS} characters ({len(reason)} given)",
                             field="reason")
    if not cited:
        raise UsageError("attest needs at least one cited memory URI")
    if len(cited) > MAX_CITED:
        raise UsageError(f"attest takes at most {MAX_CITED} cited URIs ({len(cited)} given)")


def attest(ctx: Context, intent: str, outcome: str, cited: Iterable[str], *, reason: str | None = None) -> AttestResult:
    cited = list(cited)
    check(intent, outcome, reason, cited)
    parsed: dict[str, object] = {}  # citation text -> Ref, or MALFORMED
    for text in dict.fromkeys(cited):
        try:
            parsed[text] = parse_ref(text)
        except UsageError:
            parsed[text] = MALFORMED
    actor = ctx.actor
    with ctx.transaction(existing=True) as tx:
        now = ctx.clock()  # under the writer lock: journal order and bucket times agree
        if not tx.take_token(actor, intent, now, rate=RATE, burst=BURST):
            raise RateLimited(
                f"attest for intent {intent!r} is over its rate limit ({RATE:g}/s, burst {BURST:g})",
                hint="wait a second and try again",
            )
        affected, skipped, heads = _resolve(tx, ctx.viewer, parsed)
        delta = salience.citations_delta(outcome, reason)
        access = 1 if outcome == salience.SUCCESS else 0
        profile = salience.profile([salience.factors(heads[i], now) for i in affected])
        previous = tx.weights(actor) or salience.DEFAULT_WEIGHTS
        step = salience.ema_step(previous, profile, outcome, reason, len(affected))
        tx.bump(affected, access=access, citations=delta, at=now)
        at = micros(now)
        seq = tx.next_seq()
        attest_payload = codec.encode({
            "intent": intent, "outcome": outcome, "reason": reason, "affected": affected,
            "skipped": [list(s) for s in skipped], "citations_delta": delta, "access_delta": access, "at": at,
        })
        learn_payload = codec.encode({
            "actor": actor, "intent": intent, "attest_seq": seq, "alpha": salience.EMA_RATE,
            "profile": list(profile), "previous": list(previous), "new": list(step.weights),
            "skipped": step.skipped, "at": at,
        })
        tx.append_journal([("attest", now, actor, intent, attest_payload),
                           ("learn_weights", now, actor, actor, learn_payload)])
        tx.set_weights(actor, step.weights, seq=seq + 1, at=now)
    return AttestResult(
        seq=seq, learn_seq=seq + 1, intent=intent, outcome=outcome, reason=reason, affected=affected,
        skipped=skipped, citations_delta=delta, access_delta=access, previous_weights=tuple(previous),
        new_weights=step.weights, step_skipped=step.skipped,
    )


MAX_SHOWN = 200


def _shown(text: object) -> str:
    """A skipped citation as listed and journaled: at most ``MAX_SHOWN`` characters."""
    text = str(text)
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 1] + "…"


def _resolve(tx: Tx, actor: str | Viewer, parsed: dict) -> tuple[list[str], list[tuple[str, str]], dict[str, dict]]:
    """(affected IDs in citation order, skipped (citation, why), heads of the affected)."""
    affected: list[str] = []
    skipped: list[tuple[str, str]] = []
    heads: dict[str, dict] = {}
    found = look_up(tx, actor, {t: r for t, r in parsed.items() if r != MALFORMED}, SALIENCE_FIELDS)
    for text in parsed:
        head = found.get(text, MALFORMED)
        if isinstance(head, str):  # a version URI cites its memory only if the version exists
            skipped.append((_shown(text), MISSING if head == NO_VERSION else head))
        elif head["tombstoned_at"] is not None:
            skipped.append((_shown(text), TOMBSTONED))
        elif head["id"] not in heads:
            heads[head["id"]] = head
            affected.append(head["id"])
    return affected, skipped, heads
