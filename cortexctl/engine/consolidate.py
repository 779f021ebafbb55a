"""consolidate (SPEC §9): file a transcript's durable learnings, through the chat model.

The model is asked (``PROMPT``) for one JSON object: ``facts`` and ``user_facts`` (lists
of statements), ``patterns`` (pattern specs) and ``outcome`` ({summary, status} or null).
The reply is parsed loosely (``loosejson``). A reply that is not that object writes nothing
and is reported with its first 200 characters. Then, in order:

- at most ``LIMITS`` items of each kind are kept; the rest are dropped (``over the limit``);
- the **verbatim guard**: an item holding a high-entropy token (hex, hash, ID, path, URL,
  key; ``memory.forms.high_entropy_tokens``) that does not appear verbatim in the
  transcript is dropped (``not in the transcript: TOKEN``);
- a fact equal after normalization to a live fact the actor can see is not written again
  (``already known``); a user fact goes through ``remember --user`` (a repeat is a touch);
  a pattern through ``pattern reinforce``; the outcome through ``outcome``;
- **supersedes**: the model is also shown the actor's own stored facts that still hold (up to
  ``STORED_FACTS``, best salience first) and may answer ``supersedes``: [{old, new}] when the
  transcript contradicts one. A proposal whose ``old`` is not one of those facts' statements
  quoted verbatim (whitespace at the ends aside) is dropped (``old fact not quoted verbatim``),
  and ``new`` goes through the verbatim guard above like a fact. A kept one writes ``new`` as a
  fact that supersedes the old one (``write --supersedes``: the old fact's valid time ends, both
  are linked); nothing is ever deleted.

Everything written carries the provenance ``{"via": "consolidated", "transcript_sha256":
...}`` (facts also ``source: consolidated``). ``dry_run`` reports the same without writing.

Many transcripts (``consolidate_many``): each one's writes are one transaction (``Context.group``)
with a ``consolidate`` journal entry, the transcript's SHA-256 as its ref and the acting actor as
its actor, payload ``{"written": [IDs], "dropped": n}``. A transcript is **done** for an actor when
such an entry exists: it is skipped (no model call, nothing written; ``again`` consolidates it
anyway), so a run killed midway and run again writes nothing twice and does the rest. The model is
asked about up to ``jobs`` transcripts at once (``_Asking``: threads that only make the HTTP
requests, each taking the next transcript as soon as its answer is in); the answers are written one
transcript at a time, in the order given, those that are in together on the store kept open
(``Context.holding``, at most ``HOLD_AT_MOST`` at a time). The stored facts shown to the model (for
supersedes) are those read after the last transcript written: with more than one job, what the
transcripts just before it write may not be among them. ``already known`` is checked against the
facts read once at the start and every fact the run writes, in the order given, so the store ends
the same whatever ``jobs`` is. The first transcript that fails (a reply that is not the JSON, the
endpoint unreachable) stops the run with its error; those before it are done.
"""

from __future__ import annotations

import hashlib

from cortexctl.engine import memories, writeback
from cortexctl.engine.context import Context
from cortexctl.engine.loosejson import parse_object
from cortexctl.errors import CortexError, InvalidData, Tombstoned, UsageError
from cortexctl.memory.ids import memory_uri
from cortexctl.memory import pattern as pat
from cortexctl.memory.forms import high_entropy_tokens

LIMITS = {"facts": 5, "user_facts": 5, "patterns": 3, "outcome": 1, "supersedes": 3}
STORED_FACTS = 20  # of the actor's own current facts shown to the model, for supersedes
STORED_HEADER = "--- Stored facts (quote one exactly in supersedes.old to replace it) ---"
MAX_TRANSCRIPT_BYTES = 1_000_000

PROMPT = """You file what is worth remembering from one agent transcript.
Most transcripts hold nothing durable: then answer with empty lists and a null outcome.
Answer with ONE JSON object and nothing else:
{"facts": ["objective, lasting truths about the code, the environment or the domain"],
 "user_facts": ["lasting truths about the user: name, role, preferences"],
 "patterns": [{"name": "...", "trigger": "when to use it", "preconditions": ["..."],
               "steps": ["the steps that worked, in order"], "gotchas": ["..."],
               "success_criteria": ["..."]}],
 "outcome": {"summary": "the task and how it ended", "status": "success|failure|partial"} or null,
 "supersedes": [{"old": "a stored fact, copied exactly", "new": "the fact that replaces it"}]}
Rules: no small talk, no guesses, nothing that only mattered for this turn. At most 5 facts,
5 user facts, 3 patterns, 3 supersedes. Give an outcome only when a concrete task was finished or failed.
Copy identifiers, hashes, paths and URLs exactly as the transcript has them.
When stored facts follow the transcript and the transcript shows one is no longer true, give it in
supersedes: "old" copied exactly from the list, "new" the fact as it now stands (not also in facts)."""


def _bad(reply: str) -> InvalidData:
    import json

    return InvalidData(f"the model's reply is not the expected JSON: {json.dumps(reply[:200], ensure_ascii=False)}")


def _items(doc: dict, reply: str) -> list[tuple[str, object]]:
    """(kind, item) in order, the reply's shape checked."""
    out: list[tuple[str, object]] = []
    for kind in ("facts", "user_facts"):
        items = doc.get(kind) or []
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise _bad(reply)
        out += [(kind, i.strip()) for i in items if i.strip()]
    patterns = doc.get("patterns") or []
    if not isinstance(patterns, list) or not all(isinstance(p, dict) for p in patterns):
        raise _bad(reply)
    out += [("patterns", p) for p in patterns]
    outcome = doc.get("outcome")
    if outcome is not None:
        if not isinstance(outcome, dict):
            raise _bad(reply)
        out.append(("outcome", outcome))
    supersedes = doc.get("supersedes") or []
    if not isinstance(supersedes, list) or not all(
            isinstance(p, dict) and isinstance(p.get("old"), str) and isinstance(p.get("new"), str) for p in supersedes):
        raise _bad(reply)
    out += [("supersedes", {"old": p["old"].strip(), "new": p["new"].strip()}) for p in supersedes]
    return out


def _text_of(kind: str, item) -> str:
    if kind == "patterns":
        return " ".join(str(v) for v in item.values())
    if kind == "outcome":
        return str(item.get("summary", ""))
    if kind == "supersedes":
        return item["new"]
    return item


def _short(kind: str, item) -> str:
    if kind == "patterns":
        return str(item.get("name", ""))
    return _text_of(kind, item)


def plan(ctx: Context, transcript: str, reply: str,
         stored: dict[str, str] | None = None) -> tuple[list[tuple[str, object]], list[dict]]:
    """What would be written, and what is dropped (kind, text, reason). ``stored``: the statements
    of the facts shown to the model -> their IDs (a supersede proposal must quote one)."""
    doc = parse_object(reply)
    keep: list[tuple[str, object]] = []
    dropped: list[dict] = []
    counts: dict[str, int] = {}
    for kind, item in _items(doc, reply):
        text = _text_of(kind, item)
        counts[kind] = counts.get(kind, 0) + 1
        reason = None
        if counts[kind] > LIMITS[kind]:
            reason = "over the limit"
        else:
            missing = [t for t in high_entropy_tokens(text) if t not in transcript]
            if missing:
                reason = f"not in the transcript: {missing[0]}"
            elif kind == "patterns":
                try:
                    item = pat.from_dict(item)
                except pat.SpecError as exc:
                    reason = str(exc)
            elif kind == "outcome" and (item.get("status") not in writeback.OUTCOME_STATUSES
                                        or not str(item.get("summary", "")).strip()):
                reason = "outcome needs a summary and a status of success, failure or partial"
            elif kind == "supersedes" and item["old"] not in (stored or {}):
                reason = "old fact not quoted verbatim"
            elif kind == "supersedes" and not item["new"]:
                reason = "supersedes needs the new fact"
        if reason:
            dropped.append({"kind": kind, "text": _short(kind, item if not isinstance(item, pat.PatternSpec)
                                                        else item.to_json()), "reason": reason})
        else:
            keep.append((kind, item))
    return keep, dropped


def _stored_facts(ctx: Context) -> dict[str, str]:
    """The actor's own facts that still hold, best salience first: statement -> ID."""
    with ctx.peek() as tx:
        rows = [] if tx is None else writeback.live_of_type(tx, ctx, "fact", limit=4 * STORED_FACTS, own=True,
                                                            current=True)
    out: dict[str, str] = {}
    for head, data in rows:
        statement = str(data.get("statement", "")).strip()
        if statement and len(out) < STORED_FACTS:
            out.setdefault(statement, head["id"])
    return out


def _with_stored(transcript: str, stored: dict[str, str]) -> str:
    """What the model reads: the transcript, then the stored facts it may supersede (none: the transcript)."""
    if not stored:
        return transcript
    return transcript + "\n\n" + STORED_HEADER + "\n" + "\n".join(f"- {s}" for s in stored)


def _known_facts(ctx: Context) -> set[str]:
    with ctx.peek() as tx:
        rows = [] if tx is None else writeback.live_of_type(tx, ctx, "fact")
    return {pat.normalize(d.get("statement", "")) for _, d in rows}


def _checked(transcript: str, where: str = "") -> str:
    """The transcript's SHA-256 (hex); UsageError when it is empty or too long."""
    name = f"{where}: the transcript" if where else "the transcript"
    if not isinstance(transcript, str) or not transcript.strip():
        raise UsageError(f"{name} is empty")
    raw = transcript.encode("utf-8", "surrogatepass")
    if len(raw) > MAX_TRANSCRIPT_BYTES:
        raise UsageError(f"{name} is longer than {MAX_TRANSCRIPT_BYTES} bytes")
    return hashlib.sha256(raw).hexdigest()


JOURNAL_KIND = "consolidate"
MAX_JOBS = 32
HOLD_AT_MOST = 8  # transcripts written on one open store (Context.holding) before it is let go


def done_transcripts(ctx: Context) -> set[str]:
    """The SHA-256 of every transcript the acting actor has consolidated (their journal entries)."""
    with ctx.peek() as tx:
        if tx is None:
            return set()
        return {ref for _s, _k, _ts, actor, ref, _p in tx.journal_entries((JOURNAL_KIND,)) if actor == ctx.actor}


def consolidate(ctx: Context, transcript: str, *, dry_run: bool = False, chat=None, again: bool = False) -> dict:
    """One transcript (``consolidate_many`` of one)."""
    return consolidate_many(ctx, [("", transcript)], dry_run=dry_run, chat=chat, again=again, jobs=1)[0]


def consolidate_many(ctx: Context, transcripts, *, dry_run: bool = False, chat=None, again: bool = False,
                     jobs: int = 1, on_done=None) -> list[dict]:
    """Each (source, text) of ``transcripts`` consolidated in order, one transaction each, those the
    actor has consolidated before skipped (the module docstring); one document each, ``on_done(doc)``
    called as each is written. Every transcript is checked before the first request."""
    from contextlib import nullcontext

    if isinstance(jobs, bool) or not isinstance(jobs, int) or not 1 <= jobs <= MAX_JOBS:
        raise UsageError(f"jobs must be a whole number from 1 to {MAX_JOBS} (got {jobs!r})", field="jobs")
    items = [(source, text, _checked(text, source)) for source, text in transcripts]
    done = set() if again else done_transcripts(ctx)
    chat = chat or ctx.chat
    docs: list[dict | None] = [None] * len(items)
    order: list[int] = []  # the transcripts to ask about, in the order given
    for i, (source, _text, sha) in enumerate(items):
        if sha in done:
            docs[i] = _skipped(source, sha, dry_run)
        else:
            order.append(i)
            done.add(sha)  # the same transcript twice in one run: the second is skipped
    known: set[str] | None = None if dry_run or not order else _known_facts(ctx)  # kept current by the writes
    asking = _Asking(chat, [items[i][1] for i in order], _stored_facts(ctx) if order else {}, jobs)

    def tell(told: int) -> int:
        """``on_done`` of each document ready, in the order given, from ``told`` on; the next to tell."""
        while told < len(docs) and docs[told] is not None:
            if on_done is not None:
                on_done(docs[told])
            told += 1
        return told

    def refresh() -> None:  # inside a transcript's transaction: the stored facts the next requests show
        asking.facts = _stored_facts(ctx)

    told = 0
    try:
        pos = 0
        while pos < len(order):
            asking.wait(pos)  # the store is not held while the model thinks
            with nullcontext() if dry_run else ctx.holding():  # the answers that came: one connection for them
                end = pos + HOLD_AT_MOST  # then others get their turn
                while pos < min(end, len(order)) and asking.ready(pos):
                    i = order[pos]
                    source, text, sha = items[i]
                    told = tell(told)  # the skipped ones before it
                    try:
                        stored, reply = asking.take(pos)
                        docs[i] = _one(ctx, source, text, sha, reply, stored, dry_run, known=known,
                                       then=refresh if pos + 1 < len(order) else None)
                    except CortexError as err:  # the run stops here: say which transcript
                        if source:
                            err.message = f"{source}: {err.message}"
                            err.args = (err.message,)
                        raise
                    pos += 1
                    told = tell(told)
    finally:
        asking.stop()
    tell(told)
    return [d for d in docs if d is not None]


class _Asking:
    """The model asked about transcripts in order, by ``jobs`` threads of their own: each takes the
    next transcript as soon as its last answer is in (at most ``4 x jobs`` answers waiting to be
    written), showing the stored facts as last read (``facts``, set by the writer). The threads only
    make HTTP requests; the store is read and written by the caller's thread alone."""

    def __init__(self, chat, texts: list[str], facts: dict[str, str], jobs: int) -> None:
        import threading

        self.chat, self.texts, self.facts = chat, texts, facts
        self.results: dict[int, tuple] = {}  # n -> (facts shown, reply or None, failure or None)
        self.next = 0  # the next transcript to ask about
        self.taken = 0  # answers handed to the writer
        self.ahead = 4 * jobs
        self.stopped = False
        self.cond = threading.Condition()
        for n in range(min(jobs, len(texts))):
            threading.Thread(target=self._work, name=f"cortexctl-chat-{n}", daemon=True).start()

    def _work(self) -> None:
        while True:
            with self.cond:
                self.cond.wait_for(lambda: self.stopped or self.next >= len(self.texts)
                                   or self.next - self.taken < self.ahead)
                if self.stopped or self.next >= len(self.texts):
                    return
                n, self.next = self.next, self.next + 1
                facts = self.facts
            try:
                got: tuple = (facts, self.chat.complete(PROMPT, _with_stored(self.texts[n], facts)), None)
            except BaseException as exc:  # noqa: BLE001 - raised again on the writer's thread
                got = (facts, None, exc)
            with self.cond:
                self.results[n] = got
                if got[2] is not None:
                    self.stopped = True  # the run stops at its first failure: nothing more is asked
                self.cond.notify_all()

    def wait(self, n: int) -> None:
        """Until the nth transcript's answer (or failure) is in."""
        with self.cond:
            self.cond.wait_for(lambda: n in self.results)

    def ready(self, n: int) -> bool:
        with self.cond:
            return n in self.results

    def take(self, n: int) -> tuple[dict[str, str], str]:
        """The stored facts shown and the reply for the nth transcript; its failure raised."""
        with self.cond:
            facts, reply, exc = self.results.pop(n)
            self.taken = n + 1
            self.cond.notify_all()
        if exc is not None:
            raise exc
        return facts, reply

    def stop(self) -> None:
        with self.cond:
            self.stopped = True
            self.cond.notify_all()


def _skipped(source: str, sha: str, dry_run: bool) -> dict:
    return {"source": source, "transcript_sha256": sha, "dry_run": dry_run, "skipped": True, "count": 0,
            "written": [], "dropped": []}


def _one(ctx: Context, source: str, transcript: str, sha: str, reply: str, stored: dict[str, str],
         dry_run: bool, then=None, known: set[str] | None = None) -> dict:
    """One transcript's answer written (or, dry, reported): in one transaction with its journal entry;
    ``then()`` is called inside it, after the writes (the next requests, made with the facts as they
    now stand, read through the same transaction)."""
    from contextlib import nullcontext

    keep, dropped = plan(ctx, transcript, reply, stored)
    with nullcontext() if dry_run else ctx.group() as tx:
        written = _write(ctx, transcript, sha, keep, dropped, stored, dry_run, known)
        if tx is not None:
            from cortexctl.memory import codec

            ids = [w["uri"].rsplit("/", 1)[-1] for w in written if w.get("uri")]
            tx.append_journal([(JOURNAL_KIND, ctx.clock(), ctx.actor, sha,
                                codec.encode({"written": ids, "dropped": len(dropped)}))])
        if then is not None and written:
            then()
    return {"source": source, "transcript_sha256": sha, "dry_run": dry_run, "skipped": False,
            "count": len(written), "written": written, "dropped": dropped}


def _write(ctx: Context, transcript: str, sha: str, keep, dropped: list[dict], stored: dict[str, str],
           dry_run: bool, known: set[str] | None = None) -> list[dict]:
    """Write what ``plan`` kept; ``known``: the normalized statements of the facts the actor sees (read
    now when None), the facts written added to it."""
    if known is None:
        known = _known_facts(ctx) if any(k == "facts" for k, _ in keep) else set()
    prov = {"via": "consolidated", "transcript_sha256": sha}
    written: list[dict] = []
    for kind, item in keep:
        if kind == "facts":
            if pat.normalize(item) in known:
                dropped.append({"kind": kind, "text": item, "reason": "already known"})
                continue
            known.add(pat.normalize(item))
        entry = {"kind": kind, "text": item.name if kind == "patterns" else _text_of(kind, item)}
        if kind == "supersedes":
            entry["supersedes"] = memory_uri(stored[item["old"]])
            entry["old_text"] = item["old"]
            if not dry_run:
                try:
                    r = memories.write(ctx, "fact", item["new"], sets=["source=consolidated"], provenance=prov,
                                       supersedes=stored[item["old"]])
                except (InvalidData, Tombstoned) as exc:  # superseded or forgotten since it was shown
                    dropped.append({"kind": kind, "text": item["new"], "reason": exc.message})
                    continue
                entry.update(uri=r.uri, action="superseded")
                known.add(pat.normalize(item["new"]))
            written.append(entry)
            continue
        if not dry_run:
            if kind in ("facts", "user_facts"):
                r = writeback.remember(ctx, item, user=kind == "user_facts", provenance=prov, source="consolidated")
                known.add(pat.normalize(item))
            elif kind == "patterns":
                r = writeback.pattern_reinforce(ctx, item, provenance=prov)
            else:
                r = writeback.outcome(ctx, item["summary"], status=item["status"], provenance=prov)
            entry.update(uri=r.uri, action=r.action)
        written.append(entry)
    return written
