"""compact and checkpoint load: squeeze a working context into a token budget, and reload it.

``compact`` (SPEC §7) takes the memories an agent has in context and splits them:

- **kept**: the caller's load-bearing memories (kept even when not otherwise
  listed) and those pinned automatically: every identity, every constraint of
  strength ``hard``, every goal with status ``active``. A kept memory counts at its
  medium form's tokens.
- **compacted**: everything else becomes a stub ``{ref, short, salience}``,
  counted at its short form's tokens; salience is the actor's (``engine/salience.py``).

Forgotten memories in the input are dropped (listed in the result); a reference
that names no memory the actor may see is an error, as is an input with nothing
live in it. When kept plus stubs exceed the budget the answer is BudgetUnreachable
and nothing is stored: summarize and link, never truncate.

The checkpoint record is stored in the ``checkpoints`` table as canonical CBOR, and
the same bytes are the payload of the ``checkpoint`` journal entry, in one
transaction; a later compact of the same (intent, step) replaces it. With a
checkpoint directory a JSON mirror goes to ``DIR/<intent>/<step>.snapshot``
after the commit, best-effort: a mirror that cannot be written is reported and
the checkpoint stands. compact reads salience and never changes it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from cortexctl.engine import salience
from cortexctl.engine.reports import Checkpoint, CompactedItem, CompactResult, KeptItem
from cortexctl.engine.refs import AMBIGUOUS, MISSING, look_up
from cortexctl.engine.rows import micros
from cortexctl.errors import (AmbiguousRef, BudgetUnreachable, IntegrityError, InvalidData, NotFound, UsageError,
                              check_nesting, too_deep)
from cortexctl.memory import codec
from cortexctl.memory.forms import count_tokens
from cortexctl.memory.ids import memory_uri, parse_ref
from cortexctl.memory.types import check_label, type_code
from cortexctl.store.interface import Tx

if TYPE_CHECKING:
    from cortexctl.engine.context import Context

MAX_IN_CONTEXT = 10_000
MAX_BUDGET = 10_000_000
LOAD_BEARING = "load-bearing"
_IDENTITY, _CONSTRAINT, _GOAL = type_code("identity"), type_code("constraint"), type_code("goal")


def refs_from_text(text: str, where: str) -> list[str]:
    """The references in an in-context file: one per line, either a REF or a JSON object
    with a ``uri`` (so ``find --jsonl`` output can be piped in); blank lines and lines
    starting with ``#`` are ignored."""
    import json

    out = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("{"):
            try:
                doc = check_nesting(json.loads(line), f"{where}: line {n}")
            except ValueError:
                raise InvalidData(f"{where}: line {n} is not valid JSON") from None
            except RecursionError:
                raise too_deep(f"{where}: line {n}") from None
            if not isinstance(doc, dict) or not isinstance(doc.get("uri"), str):
                raise InvalidData(f"{where}: line {n} is a JSON object without a \"uri\"")
            line = doc["uri"]
        out.append(line)
    return out


def check(intent: object, step: object, budget_tokens: object) -> None:
    check_label(intent, "intent")
    check_label(step, "step")
    if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int) or not 1 <= budget_tokens <= MAX_BUDGET:
        raise UsageError(f"budget_tokens must be a whole number from 1 to {MAX_BUDGET} (got {budget_tokens!r})",
                         field="budget_tokens")


def compact(ctx: Context, intent: str, step: str, budget_tokens: int, in_context: Iterable[str], *,
            load_bearing: Iterable[str] = (), checkpoint_dir: str | os.PathLike | None = None) -> CompactResult:
    check(intent, step, budget_tokens)
    in_context, load_bearing = list(in_context), list(load_bearing)
    if not in_context and not load_bearing:
        raise UsageError("compact needs the memories in context (URIs, or in_context_file)", field="in_context_file")
    if len(in_context) + len(load_bearing) > MAX_IN_CONTEXT:
        raise UsageError(f"compact takes at most {MAX_IN_CONTEXT} memories in context")
    if checkpoint_dir is not None and not str(checkpoint_dir):
        raise UsageError("checkpoint_dir must not be empty", field="checkpoint_dir")
    parsed = {text: parse_ref(text) for text in [*in_context, *load_bearing]}
    actor = ctx.actor
    with ctx.transaction(existing=True) as tx:
        now = ctx.clock()
        found = look_up(tx, ctx.viewer, parsed)
        heads: dict[str, dict] = {}
        order: list[str] = []
        dropped: list[tuple[str, str]] = []
        bearing: set[str] = set()
        for text, is_bearing in [*((t, False) for t in in_context), *((t, True) for t in load_bearing)]:
            head = _found(text, parsed[text], found[text])
            if head["tombstoned_at"] is not None:
                dropped.append((text, "forgotten"))
                continue
            if head["id"] not in heads:
                heads[head["id"]] = head
                order.append(head["id"])
            if is_bearing:
                bearing.add(head["id"])
        if not order:
            raise UsageError("nothing to compact: every memory in context is forgotten")
        pinned = _pinned(tx, [heads[i] for i in order])
        weights = tx.weights(actor) or salience.DEFAULT_WEIGHTS
        kept: list[KeptItem] = []
        stubs: list[CompactedItem] = []
        stub_tokens: list[int] = []
        for id_ in order:
            head = heads[id_]
            why = LOAD_BEARING if id_ in bearing else pinned.get(id_)
            if why:
                kept.append(KeptItem(memory_uri(id_), why, count_tokens(head["medium"]), head["medium"]))
            else:
                sal = round(salience.score(salience.factors(head, now), weights), 6)
                stubs.append(CompactedItem(memory_uri(id_), head["short"], sal))
                stub_tokens.append(count_tokens(head["short"]))
        total = sum(k.tokens for k in kept) + sum(stub_tokens)
        if total > budget_tokens:
            raise BudgetUnreachable(
                f"budget unreachable: {total} tokens at the least ({len(kept)} kept at medium form, "
                f"{len(stubs)} stubs at short form) against a budget of {budget_tokens}",
                hint="shed memories from the context, or raise budget_tokens", field="budget_tokens",
            )
        record = Checkpoint(intent=intent, step=step, created_at=now, created_by=actor,
                            budget_tokens=budget_tokens, kept=[k.uri for k in kept], compacted=stubs)
        blob = encode_record(record, micros(now))
        seq = tx.append_journal([("checkpoint", now, actor, f"{intent}/{step}", blob)])
        tx.put_checkpoint({"actor": actor, "intent": intent, "step": step, "created_at": now,
                           "seq": seq, "record": blob})
    result = CompactResult(seq=seq, checkpoint=record, kept=kept, compacted_tokens=stub_tokens,
                           dropped=dropped, snapshot_path=None)
    if checkpoint_dir is not None:
        try:
            result.snapshot_path = str(write_mirror(Path(checkpoint_dir), record))
        except OSError as exc:
            result.mirror_error = f"{exc.filename or checkpoint_dir}: {exc.strerror or type(exc).__name__}"
    return result


def _found(text: str, ref, head: dict | str) -> dict:
    """The head ``look_up`` found for ``text``, or the error for why there is none."""
    if head == MISSING:
        raise NotFound(f"no memory {text!r}", hint="compact takes memories the actor can see")
    if head == AMBIGUOUS:
        raise AmbiguousRef(f"ID prefix {text!r} is ambiguous", hint="give more characters of the ID")
    if isinstance(head, str):
        raise NotFound(f"{text!r}: the memory has no version {ref.version}")
    return head


def _pinned(tx: Tx, heads: list[dict]) -> dict[str, str]:
    """Which of these heads are pinned, and why: identity, hard constraint, active goal."""
    out = {h["id"]: "identity" for h in heads if h["type"] == _IDENTITY}
    maybe = {h["id"]: h["current_version"] for h in heads if h["type"] in (_CONSTRAINT, _GOAL)}
    for id_, (type_, blob) in tx.current_data(maybe).items():
        data = codec.decode(blob)
        if type_ == _CONSTRAINT and data.get("strength") == "hard":
            out[id_] = "hard constraint"
        elif type_ == _GOAL and data.get("status") == "active":
            out[id_] = "active goal"
    return out


def encode_record(record: Checkpoint, created_at_us: int) -> bytes:
    """The checkpoint record as canonical CBOR (times in microseconds since the epoch, UTC)."""
    return codec.encode({
        "schema_version": record.schema_version, "intent": record.intent, "step": record.step,
        "created_at": created_at_us, "created_by": record.created_by, "budget_tokens": record.budget_tokens,
        "kept": record.kept, "compacted": [c.to_json() for c in record.compacted],
    })


def decode_record(blob: bytes) -> Checkpoint:
    from datetime import datetime, timedelta

    try:
        doc = codec.decode(blob)
        return Checkpoint(
            intent=doc["intent"], step=doc["step"],
            created_at=datetime(1970, 1, 1) + timedelta(microseconds=doc["created_at"]),
            created_by=doc["created_by"], budget_tokens=doc["budget_tokens"], kept=list(doc["kept"]),
            compacted=[CompactedItem(c["ref"], c["short"], c["salience"]) for c in doc["compacted"]],
            schema_version=doc["schema_version"],
        )
    except (IntegrityError, KeyError, TypeError, ValueError, OverflowError):
        raise IntegrityError("a checkpoint record does not decode (damaged store)") from None


def write_mirror(directory: Path, record: Checkpoint) -> Path:
    """``DIR/<intent>/<step>.snapshot``: the record as JSON, written atomically."""
    import json

    from cortexctl.files import atomic_path

    folder = directory / record.intent
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = folder / f"{record.step}.snapshot"
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(record.to_json(), fh, indent=2, ensure_ascii=False)
            fh.write("\n")
    return path


def load(ctx: Context, intent: str, step: str) -> Checkpoint:
    check_label(intent, "intent")
    check_label(step, "step")
    missing = f"no checkpoint for intent {intent!r} step {step!r}"
    with ctx.reading() as tx:
        row = tx.checkpoint(ctx.actor, intent, step)
    if row is None:
        raise NotFound(missing)
    return decode_record(row["record"])


def kept_forms(ctx: Context, record: Checkpoint) -> list[tuple[str, str | None]]:
    """(uri, medium form) of each kept memory of ``record``, as compact counted it: the memory's
    current medium form, marked when it has been forgotten since; None when it is not readable."""
    from cortexctl.engine.refs import resolve

    out: list[tuple[str, str | None]] = []
    with ctx.reading() as tx:
        for uri in record.kept:
            try:
                head = resolve(tx, ctx.viewer, uri)
            except (NotFound, AmbiguousRef):
                out.append((uri, None))
                continue
            out.append((uri, head["medium"] + (" (forgotten since)" if head["tombstoned_at"] is not None else "")))
    return out


def checkpoints(ctx: Context, intent: str | None = None) -> list[Checkpoint]:
    """The acting actor's checkpoints (of one intent, if given), newest first."""
    if intent is not None:
        check_label(intent, "intent")
    with ctx.reading() as tx:
        rows = list(tx.all_checkpoints().values())
    mine = [r for r in rows if r["actor"] == ctx.actor and (intent is None or r["intent"] == intent)]
    mine.sort(key=lambda r: (r["created_at"], r["seq"]), reverse=True)
    return [decode_record(r["record"]) for r in mine]
