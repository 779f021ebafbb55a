"""pinned, context and patterns: what an agent puts in its prompt every turn (SPEC §8)."""

from __future__ import annotations

from cortexctl.cli.spec import command_for
from cortexctl.ops import lookup


def _print(out, result) -> None:
    out.line(result.text().rstrip("\n"))


JSON_NOTE = "--json is documented in cortexctl(1) and README (fields are only ever added)."

COMMANDS = [
    command_for(
        lookup("pinned"), ("pinned",), "The pinned block: identity, rules, hard constraints, user profile, goal.",
        human=_print,
        notes="""Within pager.pinned_budget_tokens (2,000). Over budget, cut in order: user
facts (least salient first), hard constraints, the goal (shortened, never
through an ID, hash, path or URL), rules (last first); the identity never.
What was left out is listed. Each memory shows its ref [ID] to cite.
""" + JSON_NOTE,
        examples=('cortexctl pinned --goal "rotate the deploy key"',
                  'cortexctl pinned --goal "fix the flaky test" --budget-tokens 500 --json'),
        exits=(0, 2, 4, 6),
    ),
    command_for(
        lookup("context"), ("context",),
        "Everything for the prompt: pinned block, relevant memories, proven patterns.",
        human=_print,
        notes="""Retrieval runs every lane of find for types fact, event, pattern,
preference and goal (top 8). Retrieved memories and proven patterns share
--budget-tokens (pager.context_budget_tokens, 6,000): memories whole in rank
order, then patterns whole; the rest is listed as left out. A URI appears
once across sections. """ + JSON_NOTE,
        examples=('cortexctl context --goal "rotate the deploy key"',
                  'cortexctl context --goal "ship v2" --query "release checklist" --budget-tokens 3000 --json'),
        exits=(0, 2, 4, 6),
    ),
    command_for(
        lookup("patterns"), ("patterns",), "Proven procedural patterns whose trigger matches the goal.",
        human=_print,
        notes="""Patterns with coverage of at least pager.min_pattern_successes (3) whose
trigger (or name) shares a word with the goal, by confidence, then strength.""",
        examples=('cortexctl patterns --goal "deploy key expired"',
                  'cortexctl patterns --goal "deploy" --json'),
        exits=(0, 2, 4),
    ),
]
