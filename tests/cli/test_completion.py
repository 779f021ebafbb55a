"""Shell completion offers the taxonomy: memory types, data fields and their enumerated values, frames."""

from __future__ import annotations

import re

import pytest

from cortexctl.memory.types import CONSTRAINT_SOURCE, GOAL_STATUS, OBJ_KINDS, SOURCE_KIND, TYPES, VERBS


def offered(cli, line: str) -> list[str]:
    """What zsh would be offered for the last word of ``line`` (Typer's zsh protocol)."""
    r = cli(env={"_CORTEXCTL_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": line})
    assert r.code == 0, r
    return [re.sub(r"\\+:", ":", v) for v in re.findall(r'"((?:[^"\\]|\\.)*)"', r.out)]


def bash_offered(cli, line: str) -> list[str]:
    words = line.split(" ")
    r = cli(env={"_CORTEXCTL_COMPLETE": "complete_bash", "COMP_WORDS": line, "COMP_CWORD": str(len(words) - 1)})
    assert r.code == 0, r
    return r.out.split()


def test_write_offers_every_memory_type(cli):
    assert offered(cli, "cortexctl write ") == list(TYPES)
    assert bash_offered(cli, "cortexctl write ") == list(TYPES)


def test_write_type_completion_narrows_to_what_is_typed(cli):
    assert offered(cli, "cortexctl write pr") == ["preference"]
    assert offered(cli, "cortexctl write c") == ["constraint", "capability"]


def test_find_type_offers_every_memory_type(cli):
    assert offered(cli, "cortexctl find --type ") == list(TYPES)
    assert bash_offered(cli, "cortexctl find --type g") == ["goal"]


def test_set_offers_the_fields_of_the_type_being_written(cli):
    assert offered(cli, "cortexctl write preference tabs --set ") == [
        "topic=", "polarity=", "strength=", "rationale="]


@pytest.mark.parametrize("line, values", [
    ("cortexctl write goal ship --set status=", [f"status={v}" for v in GOAL_STATUS]),
    ("cortexctl write fact x --tag a --set source=", [f"source={v}" for v in SOURCE_KIND]),
    ("cortexctl write constraint 'no pushes' --set source=", [f"source={v}" for v in CONSTRAINT_SOURCE]),
    ("cortexctl write constraint x --set strength=h", ["strength=hard"]),
])
def test_set_offers_the_values_of_an_enumerated_field(cli, line, values):
    assert offered(cli, line) == values


def test_set_without_a_known_type_offers_every_types_fields(cli):
    got = offered(cli, "cortexctl update 01JD3K --set ")
    assert {"statement=", "polarity=", "status=", "outcome=", "name="} <= set(got)
    assert len(got) == len(set(got))


def test_frame_offers_verbs_then_object_kinds(cli):
    assert offered(cli, "cortexctl find --frame ") == list(VERBS)
    assert offered(cli, "cortexctl write fact x --frame build:") == [f"build:{k}" for k in OBJ_KINDS]
    assert offered(cli, "cortexctl find --frame build:re") == ["build:repo"]


def test_declared_choices_are_still_offered(cli):
    assert offered(cli, "cortexctl find --form ") == ["short", "medium", "full"]
    assert offered(cli, "cortexctl write fact x --visibility s") == ["scoped"]


def test_completion_touches_no_store(cli, store):
    offered(cli, "cortexctl write ")
    assert not store.exists()


def test_grant_offers_list_and_its_type_option_every_memory_type(cli):
    assert bash_offered(cli, "cortexctl grant l") == ["list"]
    assert offered(cli, "cortexctl grant bob --type ") == list(TYPES)
