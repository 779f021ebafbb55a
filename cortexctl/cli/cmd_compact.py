"""compact, checkpoint load and checkpoint list: fit a working context into a token budget, and reload it."""

from __future__ import annotations

from cortexctl.cli.spec import Option, command_for
from cortexctl.ops import lookup


def _read_refs(value: str) -> list[str]:
    from cortexctl.cli.common import read_input
    from cortexctl.engine.compact import refs_from_text
    from cortexctl.errors import InvalidData

    raw, where = read_input(value, "--in-context-file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InvalidData(f"{where}: not valid UTF-8") from None
    return refs_from_text(text, where)


def compact(config, *, refs, intent, step, budget_tokens, load_bearing, in_context_file, checkpoint_dir, store,
            actor, wait, json, jsonl) -> None:
    from cortexctl.cli.common import open_cortex
    from cortexctl.cli.output import Output
    from cortexctl.errors import UsageError

    out = Output(json=json, jsonl=jsonl)
    if intent is None or step is None or budget_tokens is None:
        raise UsageError("compact needs --intent ID, --step STEP and --budget-tokens N")
    in_context = list(refs)
    if in_context_file is not None:
        in_context += _read_refs(in_context_file)
    result = lookup("compact").run(open_cortex(config, store, actor, wait), intent=intent, step=step,
                                   budget_tokens=budget_tokens, in_context=in_context, load_bearing=load_bearing,
                                   checkpoint_dir=checkpoint_dir)
    if result.mirror_error:
        out.warn(f"checkpoint stored, but its mirror was not written: {result.mirror_error}")
    if out.machine:
        out.emit(result.to_json())
        return
    out.line(result.checkpoint.uri)
    out.table(["", "uri", "tokens", "why / short form"],
              [*(("kept", k.uri, k.tokens, k.why) for k in result.kept),
               *(("stub", c.ref, t, c.short) for c, t in zip(result.checkpoint.compacted, result.compacted_tokens))])
    for uri, why in result.dropped:
        out.hint(f"dropped {uri} ({why})")
    out.hint(f"{result.total_tokens} of {budget_tokens} tokens; {len(result.kept)} kept, "
             f"{len(result.compacted_tokens)} compacted"
             + (f"; mirror: {result.snapshot_path}" if result.snapshot_path else ""))


def checkpoint_load(config, *, intent, step, store, actor, wait, json, jsonl) -> None:
    from cortexctl.cli.common import open_cortex
    from cortexctl.cli.output import Output
    from cortexctl.errors import UsageError

    out = Output(json=json, jsonl=jsonl)
    if intent is None or step is None:
        raise UsageError("checkpoint load needs --intent ID and --step STEP")
    cx = open_cortex(config, store, actor, wait)
    record = lookup("checkpoint_load").run(cx, intent=intent, step=step)
    if out.machine:  # the record as stored; the forms are show's
        out.emit(record.to_json())
        return
    kept = cx.checkpoint_kept_forms(record)
    out.line(record.uri)
    out.table(["", "uri", "salience", "form"],
              [*(("kept", u, "", m if m is not None else "(not readable)") for u, m in kept),
               *(("stub", c.ref, f"{c.salience:.3f}", c.short) for c in record.compacted)])


def _checkpoints(out, listing) -> None:
    from cortexctl.engine.results import iso

    out.table(["intent", "step", "created", "kept", "stubs", "budget"],
              [(r.intent, r.step, iso(r.created_at), len(r.kept), len(r.compacted), r.budget_tokens)
               for r in listing.items])


COMMANDS = [
    command_for(
        lookup("compact"), ("compact",), "Fit the memories in context into a budget; store a checkpoint.",
        run=compact, positional=("in_context",), names={"in_context": "refs"},
        optional=("intent", "step", "budget_tokens", "in_context"),
        options=(
            Option("in_context_file", ("--in-context-file",), "Read the memories in context from a file, - for stdin.",
                   metavar="FILE"),
            Option("checkpoint_dir", ("--checkpoint-dir",), "Also mirror the checkpoint as JSON under this directory.",
                   metavar="DIR"),
        ),
        notes="""The memories in context (URIs on the command line, or one per line in
--in-context-file, - for stdin; a line may also be a JSON object with a
"uri", as find --jsonl prints) are split into kept and compacted. Kept: the
--load-bearing memories and, automatically, every identity, hard constraint
and active goal; each counts at its medium form's tokens. The rest become
stubs {ref, short form, salience}, each counted at its short form's tokens.
When that total is over --budget-tokens, nothing is stored and the exit code
is 6: shed memories from the context and try again (summarize and link, never
truncate). Otherwise the checkpoint record is stored (cortex://journal/logs/
INTENT/STEP) and, with --checkpoint-dir, mirrored as JSON to
DIR/INTENT/STEP.snapshot; a mirror that cannot be written is reported on
stderr and the checkpoint stands. compact never changes salience.""",
        examples=(
            "cortexctl compact --intent 01JD3KX2 --step step-7 --budget-tokens 4000 cortex://m/01JD3K... "
            "cortex://m/01JD3M...",
            'cortexctl find --near "release" --jsonl | cortexctl compact --intent rel-1 --step 1 --budget-tokens 800 '
            "--in-context-file -",
            "cortexctl compact --intent rel-1 --step 2 --budget-tokens 800 --load-bearing 01JD3K --checkpoint-dir "
            "~/.agent/thoughts 01JD3M",
        ),
        exits=(0, 2, 3, 4, 6),
        exit_notes={3: "a memory in context does not exist (or is not yours to see)",
                    6: "budget unreachable: nothing was stored"},
    ),
    command_for(
        lookup("checkpoint_load"), ("checkpoint", "load"), "Print the checkpoint compact stored for an intent and step.",
        run=checkpoint_load, optional=("intent", "step"),
        group_help="Checkpoints stored by compact.",
        notes="Prints the checkpoint record compact stored for this intent and step: the\n"
              "kept memories with their medium forms (as compact counted them; --json prints\n"
              "the record as stored, kept URIs only) and the stubs {ref, short, salience}.",
        examples=("cortexctl checkpoint load --intent 01JD3KX2 --step step-7",
                  "cortexctl checkpoint load --intent rel-1 --step 2 --json"),
        exits=(0, 2, 3, 4), exit_notes={3: "no checkpoint for this intent and step"},
    ),
    command_for(
        lookup("checkpoint_list"), ("checkpoint", "list"), "List your checkpoints, newest first.",
        human=_checkpoints,
        group_help="Checkpoints stored by compact.",
        notes="One row per checkpoint compact stored for the acting actor: intent, step,\n"
              "time, how many memories were kept and stubbed, and the budget.",
        examples=("cortexctl checkpoint list", "cortexctl checkpoint list --intent rel-1 --json"),
        exits=(0, 2, 3, 4), exit_notes={3: "no store at the path"},
    ),
]
