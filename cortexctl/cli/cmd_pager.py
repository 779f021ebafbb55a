"""pinned, context and patterns: what an agent puts in its prompt every turn (SPEC §8)."""

from __future__ import annotations

from cortexctl.cli.spec import COMMON, Command, Option

GOAL = Option("goal", ("--goal",), "The current task, as the agent would state it.", metavar="TEXT", required=True)
BUDGET = Option("budget_tokens", ("--budget-tokens",), "Token budget (default from config).", type=int, metavar="N")


def _emit(json, jsonl, result, warnings=()) -> None:
    from cortexctl.cli.output import Output

    out = Output(json=json, jsonl=jsonl)
    for w in warnings:
        out.warn(w)
    if out.machine:
        out.emit(result.to_json())
    else:
        out.line(result.text().rstrip("\n"))


def pinned(config, *, goal, budget_tokens, store, actor, wait, json, jsonl) -> None:
    from cortexctl.cli.common import open_cortex

    _emit(json, jsonl, open_cortex(config, store, actor, wait).pinned(goal, budget_tokens=budget_tokens))


def context(config, *, goal, query, budget_tokens, store, actor, wait, json, jsonl) -> None:
    from cortexctl.cli.common import open_cortex

    block = open_cortex(config, store, actor, wait).context_block(goal, query=query, budget_tokens=budget_tokens)
    _emit(json, jsonl, block, block.warnings)


def patterns(config, *, goal, store, actor, wait, json, jsonl) -> None:
    from cortexctl.cli.common import open_cortex
    from cortexctl.engine.documents import PatternsAnswer

    _emit(json, jsonl, PatternsAnswer(goal, open_cortex(config, store, actor, wait).patterns(goal)))


JSON_NOTE = "--json is documented in cortexctl(1) and README (fields are only ever added)."

COMMANDS = [
    Command(
        ("pinned",), "The pinned block: identity, rules, hard constraints, user profile, goal.", pinned,
        options=(GOAL, BUDGET, *COMMON),
        notes="""Within pager.pinned_budget_tokens (2,000). Over budget, cut in order: user
facts (least salient first), hard constraints, the goal (shortened, never
through an ID, hash, path or URL), rules (last first); the identity never.
What was left out is listed. Each memory shows its ref [ID] to cite.
""" + JSON_NOTE,
        examples=('cortexctl pinned --goal "rotate the deploy key"',
                  'cortexctl pinned --goal "fix the flaky test" --budget-tokens 500 --json'),
        exits=(0, 2, 4, 6),
    ),
    Command(
        ("context",), "Everything for the prompt: pinned block, relevant memories, proven patterns.", context,
        options=(GOAL, Option("query", ("--query",), "Retrieve by this text instead of the goal.", metavar="TEXT"),
                 BUDGET, *COMMON),
        notes="""Retrieval runs every lane of find for types fact, event, pattern,
preference and goal (top 8). Retrieved memories and proven patterns share
--budget-tokens (pager.context_budget_tokens, 6,000): memories whole in rank
order, then patterns whole; the rest is listed as left out. A URI appears
once across sections. """ + JSON_NOTE,
        examples=('cortexctl context --goal "rotate the deploy key"',
                  'cortexctl context --goal "ship v2" --query "release checklist" --budget-tokens 3000 --json'),
        exits=(0, 2, 4, 6),
    ),
    Command(
        ("patterns",), "Proven procedural patterns whose trigger matches the goal.", patterns,
        options=(GOAL, *COMMON),
        notes="""Patterns with coverage of at least pager.min_pattern_successes (3) whose
trigger (or name) shares a word with the goal, by confidence, then strength.""",
        examples=('cortexctl patterns --goal "deploy key expired"',
                  'cortexctl patterns --goal "deploy" --json'),
        exits=(0, 2, 4),
    ),
]
