"""Short and medium forms read as sentences for every type and every value of every enum
(issue 12, item 6): no doubled words, no "do never" or "dont do not", no "can can", no
"unknown observation", and polarity words that agree with the value."""

from __future__ import annotations

import itertools
import re

import pytest

from cortexctl.memory import forms, schema
from cortexctl.memory.types import (
    CONSTRAINT_SOURCE,
    CONSTRAINT_STRENGTH,
    EVENT_OUTCOME,
    GOAL_STATUS,
    POLARITY,
    SOURCE_KIND,
    TYPES,
)

# every enum field of every type, and main texts a person writes (some already carry the verb)
ENUMS = {
    "fact": {"source": SOURCE_KIND},
    "preference": {"polarity": POLARITY},
    "event": {"outcome": EVENT_OUTCOME},
    "goal": {"status": GOAL_STATUS},
    "constraint": {"polarity": POLARITY, "strength": CONSTRAINT_STRENGTH, "source": CONSTRAINT_SOURCE},
    "capability": {"verified": (True, False)},
}
TEXTS = {
    "identity": ["alice"],
    "fact": ["the deploy key rotates monthly"],
    "preference": ["tabs over spaces"],
    "belief": ["the flaky test is a race"],
    "event": ["code review from bob"],
    "goal": ["ship v2"],
    "constraint": ["never push to main", "do not run database migrations without a backup",
                   "don't merge on Fridays", "push to main", "rotate keys monthly", "always run the tests"],
    "capability": ["can run the Go test suite", "run the Go test suite"],
    "pattern": ["retry flaky tests once"],
}
BAD = [r"\bdo never\b", r"\bdont do\b", r"\bdon't do not\b", r"\bdo do not\b", r"\bcan can\b",
       r"\bunknown observation\b", r"\bmust not: (?:never|do not|don't)\b", r"\bmust: never\b",
       r"\bprefers .* \(avoid\b", r"\bdont\b", r"=\d"]
POSITIVE = {"prefer": "prefers", "do": "prefers", "avoid": "avoids", "dont": "avoids", "neutral": "no preference"}


def cases():
    for type_name in TYPES:
        enums = ENUMS.get(type_name, {})
        for text in TEXTS[type_name]:
            for values in itertools.product(*enums.values()):
                yield type_name, text, dict(zip(enums, values))


CASES = list(cases())


def doubled(text: str) -> list[str]:
    words = re.findall(r"[A-Za-z']+", text.lower())
    return [a for a, b in zip(words, words[1:]) if a == b]


@pytest.mark.parametrize("type_name,text,values", CASES,
                         ids=[f"{t}-{x[:12]}-{'-'.join(map(str, v.values()))}" for t, x, v in CASES])
def test_short_and_medium_read_as_sentences(type_name, text, values):
    data = schema.normalize(type_name, {schema.MAIN_FIELD[type_name]: text, "kind": "observation",
                                        **values} if type_name == "event" else
                            {schema.MAIN_FIELD[type_name]: text, **values})
    short = forms.render_short(type_name, data)
    medium = forms.render_medium(type_name, data)
    for form in (short, medium):
        assert text in form
        assert doubled(form) == [], form
        for bad in BAD:
            assert not re.search(bad, form), (bad, form)
    if type_name == "preference":
        word = POSITIVE[values["polarity"]]
        assert short.startswith(word) or word in short, short
        assert not (values["polarity"] in ("avoid", "dont") and "prefers" in short), short
    if type_name == "constraint":
        negated = re.match(r"(never|do not|don't)\b", text)
        if values["polarity"] in ("dont", "avoid") and not negated:
            assert re.search(r"\b(must not|avoid)\b", short), short
        if values["polarity"] in ("do", "prefer", "neutral"):
            assert "must not" not in short and "avoid" not in short, short
    if type_name == "event" and values["outcome"] != "unknown":
        assert {"success": "succeeded", "failure": "failed", "partial": "partly"}[values["outcome"]] in short


def test_the_readings_the_issue_quotes_are_gone():
    def short(type_name, **data):
        return forms.render_short(type_name, schema.normalize(type_name, data))

    assert short("preference", topic="tabs over spaces", polarity="avoid", strength=0.8) == \
        "avoids tabs over spaces (strength 0.80)"
    assert short("constraint", statement="never push to main", strength="hard") == "[hard] never push to main"
    assert short("constraint", statement="do not run database migrations without a backup", strength="hard",
                 polarity="dont") == "[hard] do not run database migrations without a backup"
    assert short("constraint", statement="push to main", polarity="dont") == "[soft] must not: push to main"
    assert short("capability", description="can run the Go test suite") == "can run the Go test suite (unverified)"
    assert short("event", summary="code review from bob") == "observation: code review from bob"
