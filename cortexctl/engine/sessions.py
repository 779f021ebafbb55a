"""Sessions and summaries (SPEC §10): turns, listing, structured summaries, the two-stage query.

- A **turn** is an ``event`` of kind ``turn`` in the session (the head's ``session``),
  tagged ``turn``; its text is ``User: P`` / ``Thought: T`` / ``Assistant: R`` lines.
  Turns come back in the order they were written (time, then ID).
- A **summary** is an ``event`` of kind ``session_summary`` in the session, tagged
  ``session-summary``, embedded like every memory; its text is ``title — summary``
  (with the category and technologies) and the whole validated summary is kept in the
  version's provenance. A session with a live summary is *summarized*: it refuses a new
  turn (exit 8) unless ``reopen``, which forgets the summary (reason ``reopened``).
- ``find --summaries`` searches summaries only (zoom out); ``find --session ID`` searches
  one session's memories (zoom in).
"""

from __future__ import annotations

from cortexctl.engine import memories
from cortexctl.engine.context import Context
from cortexctl.errors import InvalidData, NotFound, Refused, UsageError
from cortexctl.memory.ids import memory_uri
from cortexctl.memory.types import check_name, type_code
from cortexctl.store.interface import Filters

TURN_TAG = "turn"
SUMMARY_TAG = "session-summary"
CATEGORIES = ("bugfix", "feature", "refactoring", "documentation", "new-app", "analysis", "other")
SCORES = ("productivity", "complexity", "quality")
MAX_TURNS = 100_000
MAX_TECH = 20
MAX_TRANSCRIPT_CHARS = 200_000  # sent to the model; the start and the end are kept

SUMMARY_PROMPT = """You summarize one working session between a user and an AI agent.
Read the turns and answer with ONE JSON object and nothing else:
{"title": "at most 12 words",
 "category": "one of: bugfix, feature, refactoring, documentation, new-app, analysis, other",
 "productivity": 0-100, "complexity": 0-100, "quality": 0-100,
 "summary": "what was asked, what was done, how it ended, in at most 120 words",
 "technologies": ["languages, tools, services named in the session"]}
Copy identifiers, paths and URLs verbatim. Do not invent anything the turns do not say."""


def _text(value, name: str, *, required: bool = True) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise UsageError(f"{name} needs some text", field=name)
    return value.strip()


def _session_memories(tx, ctx: Context, session: str, tag: str) -> list[dict]:
    """Live heads of the session with ``tag`` that the actor can see, oldest first."""
    from cortexctl.engine.find import scoring

    filters = Filters(actor=ctx.actor, types=(type_code("event"),), tags=(tag,), session=session,
                      scopes=ctx.viewer.scopes)
    ids = [i for i, _ in tx.top_salience(filters, scoring(tx, ctx.actor, ctx.clock()), MAX_TURNS)]
    heads = tx.heads_by_ids(ids, ctx.viewer)
    return sorted(heads, key=lambda h: (h["created_at"], h["id"]))


def add_turn(ctx: Context, session: str, prompt: str, response: str, thought: str | None = None, *,
             reopen: bool = False):
    """Save one turn as a memory of the session."""
    check_name(session, "session")
    p, r, t = _text(prompt, "prompt"), _text(response, "response"), _text(thought, "thought", required=False)
    text = f"User: {p}\n" + (f"Thought: {t}\n" if t else "") + f"Assistant: {r}"
    with ctx.peek() as tx:
        summaries = [] if tx is None else _session_memories(tx, ctx, session, SUMMARY_TAG)
    if summaries and not reopen:
        raise Refused(f"session {session} is summarized ({memory_uri(summaries[-1]['id'])}); it takes no new turns",
                      hint="add --reopen to forget its summary and add the turn")
    for s in summaries:
        memories.forget(ctx, s["id"], reason="reopened")
    return memories.write(ctx, "event", text, data={"kind": "turn"}, tags=[TURN_TAG], session=session,
                          provenance={"via": "session"})


def add_turns(ctx: Context, lines: list, *, reopen: bool = False) -> list:
    """Many turns at once, from JSON objects {session, prompt, thought?, response}: every one is
    checked (InvalidData naming its line) and every session's state checked before any is written."""
    turns = []
    for n, obj in enumerate(lines, 1):
        if not isinstance(obj, dict) or set(obj) - {"session", "prompt", "thought", "response"}:
            raise InvalidData(f"line {n}: expected an object with session, prompt, thought, response")
        try:
            check_name(obj.get("session"), "session")
            turns.append((obj["session"], _text(obj.get("prompt"), "prompt"), _text(obj.get("response"), "response"),
                          _text(obj.get("thought"), "thought", required=False)))
        except UsageError as exc:
            raise InvalidData(f"line {n}: {exc.message}") from None
    if not turns:
        raise InvalidData("no turns given")
    with ctx.peek() as tx:
        for session in dict.fromkeys(t[0] for t in turns):
            if tx is not None and _session_memories(tx, ctx, session, SUMMARY_TAG) and not reopen:
                raise Refused(f"session {session} is summarized; it takes no new turns",
                              hint="add --reopen to forget its summary and add the turns")
    return [add_turn(ctx, s, p, r, t, reopen=reopen) for s, p, r, t in turns]


def show(ctx: Context, session: str) -> list:
    """The session's turns, in order (as ``Memory``)."""
    check_name(session, "session")
    with ctx.reading() as tx:
        heads = _session_memories(tx, ctx, session, TURN_TAG)
        versions = tx.current_versions([h["id"] for h in heads])
    if not heads:
        raise NotFound(f"no session {session!r} (no turns you can see)")
    return [memories.memory_of(h, versions[h["id"]]) for h in heads]


def listing(ctx: Context) -> list[dict]:
    """Every session the actor can see: turns, first and last activity, summary."""
    from cortexctl.engine.results import iso

    with ctx.reading() as tx:
        rows = tx.sessions(ctx.viewer, TURN_TAG, SUMMARY_TAG)
    return [{"session": r["session"], "turns": r["turns"], "first": iso(r["first"]), "last": iso(r["last"]),
             "summarized": r["summary"] is not None,
             "summary": memory_uri(r["summary"]) if r["summary"] else None} for r in rows]


def transcript(turns) -> str:
    text = "\n\n".join(f"[turn {i}]\n{m.data['summary']}" for i, m in enumerate(turns, 1))
    if len(text) > MAX_TRANSCRIPT_CHARS:
        half = MAX_TRANSCRIPT_CHARS // 2
        text = text[:half] + "\n[...]\n" + text[-half:]
    return text


def check_summary(doc) -> dict:
    """A summary object validated; InvalidData naming the first bad field."""
    if not isinstance(doc, dict):
        raise InvalidData("summary: not a JSON object")
    out: dict = {}
    for key in ("title", "summary"):
        v = doc.get(key)
        if not isinstance(v, str) or not v.strip():
            raise InvalidData(f"summary: {key} must be non-empty text")
        out[key] = " ".join(v.split())[:2000]
    if doc.get("category") not in CATEGORIES:
        raise InvalidData(f"summary: category must be one of {', '.join(CATEGORIES)} (got {doc.get('category')!r})")
    out["category"] = doc["category"]
    for key in SCORES:
        v = doc.get(key)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 100:
            raise InvalidData(f"summary: {key} must be a number from 0 to 100 (got {v!r})")
        out[key] = int(round(v))
    tech = doc.get("technologies", [])
    if not isinstance(tech, list) or not all(isinstance(t, str) for t in tech):
        raise InvalidData("summary: technologies must be a list of texts")
    out["technologies"] = list(dict.fromkeys(t.strip() for t in tech if t.strip()))[:MAX_TECH]
    return out


def pending_sessions(ctx: Context) -> list[str]:
    """Sessions with turns and no live summary."""
    return [s["session"] for s in listing(ctx) if not s["summarized"] and s["turns"]]


def summarize(ctx: Context, session: str, *, chat=None) -> dict:
    """Ask the chat model for the session's summary, validate it, store it; returns the summary record."""
    from cortexctl.engine.loosejson import parse_object

    turns = show(ctx, session)
    if any(s["session"] == session and s["summarized"] for s in listing(ctx)):
        raise Refused(f"session {session} is already summarized", hint="add a turn with --reopen first")
    chat = chat or ctx.chat
    reply = chat.complete(SUMMARY_PROMPT, transcript(turns))
    summary = check_summary(parse_object(reply))
    text = f"{summary['title']} — {summary['summary']} (category: {summary['category']}" + (
        f"; technologies: {', '.join(summary['technologies'])})" if summary["technologies"] else ")")
    r = memories.write(ctx, "event", text, data={"kind": "session_summary"}, tags=[SUMMARY_TAG], session=session,
                       provenance={"via": "summarize", "summary": summary, "turns": len(turns)})
    return {"session": session, "uri": r.uri, "id": r.id, "turns": len(turns), **summary,
            "warnings": list(r.warnings)}


def summarize_many(ctx: Context, session: str | None, *, pending: bool = False) -> list[dict]:
    """``summarize`` for one session, or every pending one (each stored as it is made)."""
    if pending == (session is not None):
        raise UsageError("summarize needs one session, or pending (every session waiting), not both", field="session")
    if session is not None:
        return [summarize(ctx, session)]
    ctx.chat  # a missing endpoint is reported before anything else
    return [summarize(ctx, s) for s in pending_sessions(ctx)]
