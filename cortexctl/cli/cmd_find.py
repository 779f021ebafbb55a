"""find: memories by meaning (--near) and by type, tag and frame."""

from __future__ import annotations

from cortexctl.cli import complete
from cortexctl.cli.spec import Option, command_for
from cortexctl.ops import lookup

LANES = {"lexical": "L", "semantic": "S", "salience": "R"}


def find(config, *, near, types, tags, frames, include_tombstoned, k, budget_tokens, form, session, summaries,
         verbose, store, actor, wait, json, jsonl) -> None:
    from cortexctl.cli.common import open_cortex
    from cortexctl.cli.output import Output
    from cortexctl.engine.documents import split_found

    out = Output(json=json, jsonl=jsonl)
    cx = open_cortex(config, store, actor, wait)
    answer = lookup("find").run(cx, near=near, types=types, tags=tags, frames=frames, k=k, budget_tokens=budget_tokens,
                                form=form, session=session, summaries=summaries,
                                include_tombstoned=include_tombstoned)
    hits = answer.hits
    warnings, notes = split_found(answer.found)
    for w in warnings + (notes if verbose else []):
        out.warn(w)
    if out.machine:
        out.emit_many(answer.docs(), answer.to_json)
        return
    if out.tty:
        refs = cx.short_refs([h.id for h in hits]) if hits else {}
        ref = {h.id: refs.get(h.id, h.id) + ("†" if h.tombstoned else "") for h in hits}
        if near is not None:
            out.table(["#", "ref", "type", "score", "lanes", form],
                      [(h.rank, ref[h.id], h.type, f"{h.score:.3f}",
                        "".join(LANES[x] for x in h.lanes) + ("" if h.matched else " (no match)"), h.text)
                       for h in hits])
            if hits and not any(h.matched for h in hits):
                out.hint(f"nothing matched {near!r} by words or meaning: these are your most salient memories")
        else:
            out.table(["#", "ref", "type", form], [(h.rank, ref[h.id], h.type, h.text) for h in hits])
        if not hits:
            out.hint("no memories match")
    else:
        out.table([], [(f"cortex://m/{h.id}", h.type, h.text) for h in hits])


COMMANDS = [
    command_for(
        lookup("find"), ("find",), "Find memories by meaning, type, tag and frame.", run=find,
        flags={"types": ("--type",), "tags": ("--tag",), "frames": ("--frame",), "k": ("-k",)},
        completers={"types": complete.memory_types, "frames": complete.frames},
        options=(Option("verbose", ("--verbose", "-v"), "Also say how the answer was found (an exact search, an "
                                                        "index rebuilt).", type=bool, default=False),),
        notes="""With --near, three lanes search the memories that pass the filters: lexical
(BM25 over the text), semantic (embedding similarity) and salience
(importance, recency, use); results are merged by one score (see
cortexctl(1), FIND). --json shows per result the lanes that found it, its
similarity, lexical score, salience and score. A memory whose text is the
query comes first, then memories holding the query as a phrase. A result that
neither the words nor the meaning of the query found, only its salience, is
marked "(no match)" ("matched": false in --json). Without --near, results
come in salience order.
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
The two-stage session query: --summaries searches session summaries (see
session summarize) to pick a session, --session ID then searches inside it.""",
        examples=(
            'cortexctl find --near "how do we rotate the deploy key"',
            'cortexctl find --near "deploy" --type fact --tag ops -k 5 --json',
            'cortexctl find --near "release checklist" --budget-tokens 400 --form medium',
            "cortexctl find --frame build:repo",
            'cortexctl find --summaries --near "flaky test"',
            'cortexctl find --session s-42 --near "retry"',
            "cortexctl find --include-tombstoned --jsonl | jq -r .uri",
        ),
        exits=(0, 2, 3, 4, 7),
        exit_notes={3: "no store"},
    ),
]
