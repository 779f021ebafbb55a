"""session add, show, list and summarize: sessions of turns and their summaries (SPEC §10)."""

from __future__ import annotations

from cortexctl.cli.spec import Option, command_for
from cortexctl.ops import lookup

GROUP = "Sessions: save turns, list and show them, summarize them."
def session_add(config, *, session, prompt, thought, response, turns, reopen, store, actor, wait, json,
                jsonl) -> None:
    from cortexctl.cli.common import emit_result, open_cortex, read_jsonl
    from cortexctl.cli.output import Output
    from cortexctl.errors import UsageError

    cx = open_cortex(config, store, actor, wait)
    if turns is None:
        result = lookup("session_add").run(cx, session=session, prompt=prompt, response=response, thought=thought,
                                           reopen=reopen)
        emit_result(json, jsonl, result, result.uri)
        return
    if any(v is not None for v in (session, prompt, thought, response)):
        raise UsageError("--turns takes the turns from a file: give no --session, --prompt, --thought or --response")
    added = lookup("session_add_many").run(cx, turns=read_jsonl(turns, "--turns"), reopen=reopen)
    out = Output(json=json, jsonl=jsonl)
    if out.machine:
        out.emit_many(added.docs(), added.to_json)
    else:
        for r in added.items:
            out.line(r.uri)


def _turns(out, shown) -> None:
    for i, m in enumerate(shown.turns, 1):
        out.line(f"--- turn {i} {m.uri}")
        out.line(m.data["summary"])


def _sessions(out, listing) -> None:
    out.table(["session", "turns", "first", "last", "summarized"],
              [(r["session"], r["turns"], r["first"], r["last"], "yes" if r["summarized"] else "no")
               for r in listing.items])


def _summaries(out, done) -> None:
    for s in done.items:
        out.line(f"{s['session']} {s['uri']} [{s['category']}] {s['title']}")
    if not done.items:
        out.hint("no session waits for a summary")


COMMANDS = [
    command_for(
        lookup("session_add"), ("session", "add"), "Save one turn of a session as a memory.", run=session_add,
        optional=("session", "prompt", "response"),
        options=(Option("turns", ("--turns",), "Many turns: JSONL of {session, prompt, thought, response}, or -.",
                        metavar="FILE|-"),),
        notes="A turn is an event of kind turn in the session, tagged turn. A summarized\n"
              "session refuses new turns (exit 8) unless --reopen. --turns reads one JSON\n"
              "object per line; every line is checked before any turn is written.",
        examples=(
                  "cortexctl session add --turns turns.jsonl --json",'cortexctl session add --session s-42 --prompt "fix the flaky test" '
                  '--thought "timing issue" --response "added a retry around the poll"',),
        exits=(0, 2, 4, 8, 10), group_help=GROUP, op=("session_add", "session_add_many"),
    ),
    command_for(
        lookup("session_show"), ("session", "show"), "A session's turns, in order.", positional=("session",),
        human=_turns,
        examples=("cortexctl session show s-42", "cortexctl session show s-42 --json"),
        exits=(0, 2, 3, 4), group_help=GROUP,
    ),
    command_for(
        lookup("session_list"), ("session", "list"),
        "Every session: turns, first and last activity, summarized or not.",
        human=_sessions,
        examples=("cortexctl session list", "cortexctl session list --json"),
        exits=(0, 2, 4), group_help=GROUP,
    ),
    command_for(
        lookup("session_summarize"), ("session", "summarize"),
        "Summarize a session (or every pending one) with the chat model.", positional=("session",),
        human=_summaries,
        notes="""The chat endpoint (config section chat) returns a title, a category (bugfix,
feature, refactoring, documentation, new-app, analysis, other), productivity,
complexity and quality scores 0-100, a summary and technologies; it is
validated and stored as an event of kind session_summary, tagged
session-summary, with its own embedding. find --summaries searches
summaries; find --session ID searches one session.""",
        examples=("cortexctl session summarize s-42", "cortexctl session summarize --pending --json"),
        exits=(0, 2, 3, 4, 8, 9, 10), group_help=GROUP,
    ),
]
