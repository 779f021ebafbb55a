"""Procedural pattern specs, stored in a pattern's statement as ``cortex.pattern.v1:`` + JSON.

A spec has a name, a trigger (when to apply it), preconditions (check before),
steps (the proven sequence), gotchas (learned failure modes) and success criteria
(check after). A plain statement, without the prefix, reads as a spec with one
freeform step: the statement itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from cortexctl.errors import InvalidData, check_nesting
from cortexctl.memory.terms import terms

PREFIX = "cortex.pattern.v1:"
LISTS = ("preconditions", "steps", "gotchas", "success_criteria")
MAX_ITEMS = 50


class SpecError(ValueError):
    """A pattern spec that is not a valid spec; the message names the field and the rule."""


@dataclass(frozen=True)
class PatternSpec:
    name: str
    trigger: str = ""
    preconditions: tuple[str, ...] = ()
    steps: tuple[str, ...] = ()
    gotchas: tuple[str, ...] = ()
    success_criteria: tuple[str, ...] = field(default=())

    def to_json(self) -> dict:
        return {"name": self.name, "trigger": self.trigger, **{k: list(getattr(self, k)) for k in LISTS}}

    def encode(self) -> str:
        """The statement that stores this spec."""
        return PREFIX + json.dumps(self.to_json(), ensure_ascii=False, separators=(",", ":"))

    def identity(self) -> tuple:
        """Same name, trigger and steps (normalized) means the same pattern."""
        return (normalize(self.name), normalize(self.trigger), tuple(normalize(s) for s in self.steps))

    def render(self) -> str:
        """The spec as prompt-ready text."""
        lines = [f"{self.name}" + (f" (when: {self.trigger})" if self.trigger else "")]
        for key, label in (("preconditions", "check first"), ("steps", "steps"), ("gotchas", "gotchas"),
                           ("success_criteria", "done when")):
            items = getattr(self, key)
            if items:
                if key == "steps":
                    lines += [f"  {label}:"] + [f"    {i}. {s}" for i, s in enumerate(items, 1)]
                else:
                    lines.append(f"  {label}: " + "; ".join(items))
        return "\n".join(lines)


def normalize(text: str) -> str:
    """Lower case, whitespace collapsed, trailing punctuation and surrounding quotes dropped."""
    text = " ".join(str(text).split()).lower()
    return text.strip(" \"'`").rstrip(".!;,").strip()


def _text(value, where: str, *, required: bool = False) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise SpecError(f"spec: {where} must be text")
    value = " ".join(value.split())
    if required and not value:
        raise SpecError(f"spec: {where} must not be empty")
    return value


def from_dict(doc) -> PatternSpec:
    """A spec from its JSON object; unknown keys are refused."""
    if not isinstance(doc, dict):
        raise SpecError("spec: must be a JSON object")
    unknown = sorted(set(doc) - {"name", "trigger", *LISTS})
    if unknown:
        raise SpecError(f"spec: unknown field {unknown[0]!r} (fields: name, trigger, {', '.join(LISTS)})")
    lists = {}
    for key in LISTS:
        items = doc.get(key) or []
        if isinstance(items, str):
            items = [items]
        if not isinstance(items, list) or len(items) > MAX_ITEMS:
            raise SpecError(f"spec: {key} must be a list of at most {MAX_ITEMS} texts")
        lists[key] = tuple(t for t in (_text(i, f"{key} item") for i in items) if t)
    spec = PatternSpec(name=_text(doc.get("name"), "name", required=True),
                       trigger=_text(doc.get("trigger"), "trigger"), **lists)
    if not spec.steps:
        raise SpecError("spec: steps must hold at least one step")
    return spec


def decode(statement: str) -> tuple[PatternSpec, bool]:
    """The spec a statement stores, and whether it was structured (False: a plain statement,
    read as one freeform step; also a damaged structured statement)."""
    if statement.startswith(PREFIX):
        try:
            return from_dict(check_nesting(json.loads(statement[len(PREFIX):]), "pattern")), True
        except (ValueError, SpecError, RecursionError, InvalidData):
            pass
    return PatternSpec(name=_first_words(statement), steps=(statement,)), False


def _first_words(text: str, n: int = 8) -> str:
    words = text.split()
    return " ".join(words[:n]) + ("…" if len(words) > n else "")


def words(text: str) -> set[str]:
    """The content words of a text (stemmed, stopwords dropped, as find's lexical lane has them)."""
    return set(terms(text))


def trigger_matches(spec: PatternSpec, goal: str) -> bool:
    """A pattern applies to a goal when its trigger (or, without one, its name) shares a
    content word with the goal. An empty goal matches every pattern."""
    goal_words = words(goal)
    if not goal_words:
        return True
    return bool(words(spec.trigger or spec.name) & goal_words)
