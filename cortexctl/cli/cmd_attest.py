"""attest: feed an intent's outcome back into the salience of the memories it cited."""

from __future__ import annotations

from cortexctl.cli.spec import command_for
from cortexctl.ops import lookup


def attest(config, *, cited, intent, outcome, reason, store, actor, wait, json, jsonl) -> None:
    from cortexctl.cli.common import open_cortex
    from cortexctl.cli.output import Output
    from cortexctl.engine.salience import FACTORS
    from cortexctl.errors import UsageError

    out = Output(json=json, jsonl=jsonl)
    if intent is None:
        raise UsageError("attest needs --intent ID")
    if outcome is None:
        raise UsageError("attest needs --outcome success|failure")
    result = lookup("attest").run(open_cortex(config, store, actor, wait), intent=intent, outcome=outcome,
                                  cited=cited, reason=reason)
    if out.machine:
        out.emit(result.to_json())
        return
    # the delta each affected memory got: nothing affected, nothing changed
    delta = f"{result.citations_delta:+d}" if result.citations_delta and result.affected else "0"
    out.line(f"attest {result.seq} (learn-weights {result.learn_seq}): {result.outcome}, "
             f"{len(result.affected)} memor{'y' if len(result.affected) == 1 else 'ies'} affected, citations {delta}")
    for uri, why in result.skipped:
        out.line(f"skipped {uri} ({why})")
    if result.step_skipped:
        out.line(f"weights unchanged: {result.step_skipped}")
    else:
        out.line("weights: " + ", ".join(f"{f} {a:.3f}->{b:.3f}" for f, a, b in
                                          zip(FACTORS, result.previous_weights, result.new_weights)))


COMMANDS = [
    command_for(
        lookup("attest"), ("attest",), "Record an intent's outcome and feed it back into salience.", run=attest,
        positional=("cited",), optional=("intent", "outcome", "cited"),
        notes="""Each distinct memory cited is touched (last used = now). On success its
access count and citations go up by 1; on failure with reason factual_error
or wrong_assumption its citations go down by 1 (never below 0); any other
failure changes no count. Citations that are malformed, name no memory you
can see, are ambiguous or name a forgotten memory are skipped and listed; the
same memory cited twice counts once. The actor's learned salience weights
take one EMA step (see cortexctl(1), SALIENCE). Two journal entries commit
together: attest at N, learn-weights at N+1. At most 256 citations; at most
1 call a second per actor and intent, in bursts of up to 5.""",
        examples=(
            "cortexctl attest --intent 01JD3KX2 --outcome success cortex://m/01JD3K... cortex://m/01JD3M...",
            "cortexctl attest --intent deploy-7 --outcome failure --reason factual_error 01JD3K --json",
        ),
        exits=(0, 2, 4, 5),
        exit_notes={2: "empty intent, no citations, more than 256, or a bad outcome",
                    5: "over the rate limit for this actor and intent; nothing changed"},
    ),
]
