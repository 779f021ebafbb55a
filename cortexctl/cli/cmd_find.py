"""find: memories by meaning (--near) and by type, tag and frame."""

from __future__ import annotations

from cortexctl.cli import complete
from cortexctl.cli.spec import Option, command_for
from cortexctl.ops import lookup

LANES = {"lexical": "L", "semantic": "S", "salience": "R", "context": "C"}


def _ended(h, refs: dict[str, str] | None = None) -> str:
    """The mark of a result whose valid time has ended ("" for the others)."""
    from cortexctl.engine.results import iso

    if h.superseded_by is not None:
        return f"superseded by {(refs or {}).get(h.superseded_by, h.superseded_by)}"
    return f"ended {iso(h.valid_to)}" if h.ended else ""


def find(config, *, near, types, tags, frames, include_tombstoned, include_superseded, valid_at, k, budget_tokens,
         form, session, summaries, as_of, verbose, include_unmatched, quiet, store, actor, wait, json, jsonl) -> int:
    """Exit status as grep's: 0 when a result matched (the engine's ``matched``), else 1."""
    from cortexctl.cli.common import end_without_teardown, open_cortex
    from cortexctl.cli.output import Output
    from cortexctl.engine.documents import split_found

    out = Output(json=json, jsonl=jsonl, quiet=quiet)
    cx = open_cortex(config, store, actor, wait)
    if cx.context.storage.local_dir() is not None:  # a server's connections are closed as they should be
        end_without_teardown()
    answer = lookup("find").run(cx, near=near, types=types, tags=tags, frames=frames, k=k, budget_tokens=budget_tokens,
                                form=form, session=session, summaries=summaries,
                                include_tombstoned=include_tombstoned, include_superseded=include_superseded,
                                valid_at=valid_at, as_of=as_of)
    status = 0 if answer.matched else 1
    hits = answer.hits
    warnings, notes = split_found(answer.found)
    for w in warnings + (notes if verbose and not quiet else []):
        out.warn(w)
    if quiet:
        return status
    if out.machine:
        out.emit_many(answer.docs(), answer.to_json)
        return status
    if answer.as_of is not None:  # once, for people: on a terminal before the table, else on stderr
        (out.line if out.tty else out.hint)(answer.as_of.text())
    if out.tty:
        refs = cx.short_refs([h.id for h in hits] + [h.superseded_by for h in hits if h.superseded_by]) if hits else {}
        ref = {h.id: refs.get(h.id, h.id) + ("†" if h.tombstoned else "") for h in hits}
        text = {h.id: h.text + (f"  ({_ended(h, refs)})" if h.ended else "") for h in hits}
        if near is not None:
            out.table(["#", "ref", "type", "score", "lanes", form],
                      [(h.rank, ref[h.id], h.type, f"{h.score:.3f}",
                        "".join(LANES[x] for x in h.lanes) + ("" if h.matched else " (no match)"), text[h.id])
                       for h in hits])
            if hits and not answer.matched:
                out.hint(f"nothing matched {near!r} by words or meaning: these are your most salient memories")
        else:
            out.table(["#", "ref", "type", form], [(h.rank, ref[h.id], h.type, text[h.id]) for h in hits])
        if not hits:
            out.hint("no memories match")
        return status
    # piped: a non-match is never an answer unless asked for
    shown = hits if include_unmatched else [h for h in hits if h.matched]
    if include_superseded:  # a fourth column: how its valid time ended ("" while it holds)
        out.table([], [(f"cortex://m/{h.id}", h.type, h.text, _ended(h)) for h in shown])
    else:
        out.table([], [(f"cortex://m/{h.id}", h.type, h.text) for h in shown])
    if not answer.matched:
        if near is None:
            out.hint("cortexctl: no memories match")
        elif hits and not include_unmatched:
            out.hint(f"cortexctl: nothing matched {near!r} by words or meaning "
                     f"(--include-unmatched prints the most salient memories instead)")
        else:
            out.hint(f"cortexctl: nothing matched {near!r} by words or meaning")
    return status


COMMANDS = [
    command_for(
        lookup("find"), ("find",), "Find memories by meaning, type, tag and frame.", run=find,
        flags={"types": ("--type",), "tags": ("--tag",), "frames": ("--frame",), "k": ("-k",)},
        completers={"types": complete.memory_types, "frames": complete.frames},
        options=(Option("verbose", ("--verbose", "-v"), "Also say how the answer was found (an exact search, an "
                                                        "index rebuilt or being built).", type=bool, default=False),
                 Option("include_unmatched", ("--include-unmatched",), "Piped output: also print the results only "
                        "salience brought (\"(no match)\" on a terminal).", type=bool, default=False),
                 Option("quiet", ("--quiet", "-q"), "Print nothing: the exit status says whether anything matched "
                        "(warnings still go to stderr).", type=bool, default=False)),
        notes="""With --near, three lanes search the memories that pass the filters: lexical
(BM25 over the text), semantic (embedding similarity) and salience
(importance, recency, use); a memory in a session also borrows from the
lexical score of its neighbours there (lane "context"), so the reply to a
matching turn comes with it; a date the query names (May 2023, 2023-05-23,
yesterday, last week) lifts the matched memories of that time; results are
merged by one score (see cortexctl(1), FIND). --json shows per result the lanes that found it, its
similarity, lexical score, salience and score. A memory whose text is the
query comes first, then memories holding the query as a phrase. A result that
neither the words nor the meaning of the query found, only its salience, is
marked "(no match)" ("matched": false in --json). Without --near, results
come in salience order.
\b
In scripts, find answers like grep: exit 0 when at least one result matched
(without --near: when any memory passes the filters), 1 when nothing did.
Piped (stdout not a terminal), it prints one line per matched result (URI,
type, text, tab-separated) and leaves out results only salience brought
(--include-unmatched prints them too); when nothing matched it says so in
one line on stderr. -q prints nothing; the exit status alone answers.
--json and --jsonl keep every result, each with "matched", and --json says
"matched" for the whole answer.
\b
The ref column is each memory's short ref: the shortest ending of its ID
(8 characters or more) that names only that memory; show, update, attest and
every REF take it back, as they take a full ID or a start of one.
\b
Filters combine with AND: every --type given is allowed, every --tag given
must be present, every --frame given must match (VERB, VERB:KIND or
VERB:KIND:REF). -k and --budget-tokens bound the results; each result counts
at the form shown, and the results are the longest run of the ranking that
fits the budget.
\b
Valid time: find leaves out memories whose valid time has ended (superseded,
or past their valid_to; see cortexctl supersede). --include-superseded shows
them too, each marked "superseded by REF" or "ended T" (piped: a fourth
column, empty for the others; --json: superseded_by and ended). --valid-at T
(RFC 3339, a date, or an age like 2d) keeps the memories valid at T: valid_from at or before
T, valid_to after it, an unset end open.
\b
The two-stage session query: --summaries searches session summaries (see
session summarize) to pick a session, --session ID then searches inside it.
\b
--as-of T answers as the store stood at record time T (when cortexctl
learned it): the versions current then, tombstones, tags and other head
fields, grants and salience of then. T is an RFC 3339 time, a date or an
age (3h, 2d, 1w); a time in the future is exit 2, and before the first
journal entry nothing is found (exit 1). Each result's version is the one
current at T; --json adds "as_of": {"at", "seq"} (the journal entry the
answer stands at) and the human output says it once. Which memories pass
the filters, and their texts and fields, are exactly those of T; with
--near the lexical and semantic scores use today's term statistics and
embedding model.""",
        examples=(
            'cortexctl find --near "how do we rotate the deploy key"',
            'cortexctl find --near "deploy" --type fact --tag ops -k 5 --json',
            'cortexctl find --near "release checklist" --budget-tokens 400 --form medium',
            "cortexctl find --frame build:repo",
            'cortexctl find --summaries --near "flaky test"',
            'cortexctl find --session s-42 --near "retry"',
            "cortexctl find --include-tombstoned --jsonl | jq -r .uri",
            'cortexctl find --near "deploy key" --include-superseded',
            "cortexctl find --valid-at 2026-03-01 --type fact",
            'cortexctl find --near "deploy key" --as-of 2d',
            "cortexctl find --tag ops --as-of 2026-11-01T09:00:00Z --json",
            'if cortexctl find -q --near "deploy key"; then echo known; fi',
        ),
        exits=(0, 1, 2, 3, 4, 7, 10),
        exit_notes={0: "a result matched", 1: "nothing matched", 2: "a bad option value (a --valid-at that is not a time, ...)",
                    3: "no store"},
    ),
]
