"""What shell completion offers for values that are not a fixed choice of one command.

Each completer takes the values parsed so far (by parameter name) and the word
being typed, and returns the candidates that start with it. They are declared on
an ``Argument`` or ``Option`` (``complete=``) and called only by the Typer tree
(``cli/tree.py``) when a shell asks; the taxonomy is imported inside them, so
declaring a completer costs no start-up time.
"""

from __future__ import annotations

from typing import Any


def _starting(candidates, incomplete: str) -> list[str]:
    return [c for c in candidates if c.startswith(incomplete or "")]


def memory_types(values: dict[str, Any], incomplete: str) -> list[str]:
    """The nine memory types."""
    from cortexctl.memory.types import TYPES

    return _starting(TYPES, incomplete)


def data_fields(values: dict[str, Any], incomplete: str) -> list[str]:
    """``FIELD=`` for the fields of the type given so far (every type's when none is), and
    ``FIELD=VALUE`` for each value of an enumerated field once its ``FIELD=`` is typed."""
    from cortexctl.memory.schema import enum_fields, field_names
    from cortexctl.memory.types import TYPES

    given = values.get("type_name")
    types = [given] if given in TYPES else list(TYPES)
    if "=" in (incomplete or ""):
        name = incomplete.split("=", 1)[0]
        allowed: dict[str, None] = {}
        for t in types:
            allowed.update(dict.fromkeys(enum_fields(t).get(name, ())))
        return _starting([f"{name}={v}" for v in allowed], incomplete)
    names: dict[str, None] = {}
    for t in types:
        names.update(dict.fromkeys(field_names(t)))
    return _starting([f"{n}=" for n in names], incomplete)


def frames(values: dict[str, Any], incomplete: str) -> list[str]:
    """A verb, then ``VERB:KIND`` once a verb and a colon are typed."""
    from cortexctl.memory.types import OBJ_KINDS, VERBS

    verb, sep, _ = (incomplete or "").partition(":")
    if sep and verb in VERBS:
        return _starting([f"{verb}:{k}" for k in OBJ_KINDS], incomplete)
    return _starting(VERBS, incomplete)


def grant_subagent(values: dict[str, Any], incomplete: str) -> list[str]:
    """``list`` (``grant list``); a sub-agent's name is the user's to type."""
    return _starting(("list",), incomplete)
