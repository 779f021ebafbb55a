"""pattern write and pattern reinforce: procedural patterns (SPEC §8)."""

from __future__ import annotations

from cortexctl.cli.spec import Option, command_for
from cortexctl.ops import lookup

SPEC_OPTIONS = (
    Option("name", ("--name",), "The pattern's name.", metavar="TEXT"),
    Option("trigger", ("--trigger",), "When to apply it.", metavar="TEXT"),
    Option("preconditions", ("--precondition",), "Check before applying (repeatable).", many=True, metavar="TEXT"),
    Option("steps", ("--step",), "One step, in order (repeatable).", many=True, metavar="TEXT"),
    Option("gotchas", ("--gotcha",), "A learned failure mode (repeatable).", many=True, metavar="TEXT"),
    Option("success_criteria", ("--success",), "Check after applying (repeatable).", many=True, metavar="TEXT"),
)
SPEC_NOTES = """The spec (name, trigger, preconditions, steps, gotchas, success_criteria)
comes from --spec, then the flags (a flag given replaces the spec's field).
It is stored in the pattern's statement as cortex.pattern.v1: + JSON. A name
and at least one step are required."""
GROUP = "Procedural patterns: write a spec, reinforce it after a success."


def _spec(spec, name, trigger, preconditions, steps, gotchas, success_criteria):
    from cortexctl.cli.common import read_data
    from cortexctl.engine.writeback import spec_of

    return spec_of(read_data(spec, "--spec", "a JSON object (a pattern spec)"), name=name, trigger=trigger,
                   preconditions=preconditions, steps=steps, gotchas=gotchas, success_criteria=success_criteria)


def _emit(json, jsonl, result) -> None:
    from cortexctl.cli.common import emit_result

    emit_result(json, jsonl, result,
                f"{result.uri} {result.action} coverage={result.coverage} strength={result.strength:g}")


def pattern_write(config, *, spec, name, trigger, preconditions, steps, gotchas, success_criteria, strength,
                  coverage, store, actor, wait, json, jsonl) -> None:
    from cortexctl.cli.common import open_cortex

    s = _spec(spec, name, trigger, preconditions, steps, gotchas, success_criteria)
    _emit(json, jsonl, lookup("pattern_write").run(open_cortex(config, store, actor, wait), spec=s, strength=strength,
                                                   coverage=coverage))


def pattern_reinforce(config, *, spec, name, trigger, preconditions, steps, gotchas, success_criteria, store,
                      actor, wait, json, jsonl) -> None:
    from cortexctl.cli.common import open_cortex

    s = _spec(spec, name, trigger, preconditions, steps, gotchas, success_criteria)
    _emit(json, jsonl, lookup("pattern_reinforce").run(open_cortex(config, store, actor, wait), spec=s))


COMMANDS = [
    command_for(
        lookup("pattern_write"), ("pattern", "write"), "Write a procedural pattern from a spec.", run=pattern_write,
        options=SPEC_OPTIONS,
        notes=SPEC_NOTES,
        examples=(
            'cortexctl pattern write --name "rotate deploy key" --trigger "deploy key expired" '
            '--step "vault write keys/deploy" --step "restart the runner"',
            "cortexctl pattern write --spec @rotate.json --json",
        ),
        exits=(0, 2, 4, 10), group_help=GROUP,
    ),
    command_for(
        lookup("pattern_reinforce"), ("pattern", "reinforce"),
        "Count one more success of a pattern, or write it as a new candidate.", run=pattern_reinforce,
        options=SPEC_OPTIONS,
        notes=SPEC_NOTES + """
\b
When one of your live patterns has the same name, trigger and steps (after
normalization), it gets a new version with coverage + 1 and strength
+ 0.1 x (1 - strength). Otherwise a new candidate is written with coverage
1, strength 0.3 and confidence 0.5. `patterns` shows a pattern once its
coverage reaches min_pattern_successes (default 3).""",
        examples=(
            'cortexctl pattern reinforce --name "rotate deploy key" --trigger "deploy key expired" '
            '--step "vault write keys/deploy" --step "restart the runner"',
            "cortexctl pattern reinforce --spec - --json < rotate.json",
        ),
        exits=(0, 2, 4, 10), group_help=GROUP,
    ),
]
