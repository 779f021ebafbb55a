"""The JSON documents of answers that are more than one result's ``to_json()``.

Every front end prints the same document for the same answer: the CLI under
``--json`` and the MCP server as a tool's structured result. Answers that are
one object carry their own ``to_json()`` (``Memory``, ``WriteResult``,
``HeadResult``, ``AttestResult``, ``CompactResult``, ``Checkpoint``,
``Pinned``, ``ContextBlock``, and the small ones in ``results.py``); the
answers around lists are here, once, each a result with ``to_json()`` (the
``--json`` document) and ``docs()`` (its items, one ``--jsonl`` line each).
Fields may be added to these documents, never renamed or removed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from cortexctl.engine.results import AsOf, FindHit, Memory, Note


def split_found(found: Iterable[str]) -> tuple[list[str], list[str]]:
    """find's remarks as (warnings, notes): a warning is a problem (a lane that could not run),
    a note says how the answer was found (the CLI shows notes only with -v)."""
    warnings, notes = [], []
    for w in found:
        (notes if isinstance(w, Note) else warnings).append(str(w))
    return warnings, notes


def any_matched(hits: Iterable[FindHit]) -> bool:
    """Whether find answered: at least one result matched the query (its words or meaning; every
    result matches a find without ``near``, which only filters). find's exit status is this."""
    return any(h.matched for h in hits)


def find_document(hits: Sequence[FindHit], found: Iterable[str], docs: list[dict] | None = None,
                  as_of: AsOf | None = None) -> dict:
    """``find --json``: whether anything matched, the count, the tokens of the results at the form
    shown, the warnings and notes, and one object per result (``docs``, when the caller has
    already made them); with ``as_of``, the record time it answers for (``{"at", "seq"}``)."""
    warnings, notes = split_found(found)
    results = [h.to_json() for h in hits] if docs is None else docs
    doc = {"matched": any_matched(hits), "count": len(results), "tokens": sum(h.tokens for h in hits),
           "warnings": warnings, "notes": notes, "results": results}
    if as_of is not None:
        doc["as_of"] = as_of.to_json()
    return doc


@dataclass
class PatternsAnswer:
    """``patterns``: the proven patterns whose trigger matches the goal, best first."""

    goal: str
    found: list

    def to_json(self) -> dict:
        return {"goal": self.goal, "count": len(self.found), "patterns": [p.to_json() for p in self.found]}

    def text(self) -> str:
        return "\n".join(p.text() for p in self.found) if self.found else ""


@dataclass
class FindAnswer:
    """``find``: the hits and the remarks on how they were found (``find_document``)."""

    hits: Sequence[FindHit]
    found: list
    as_of: AsOf | None = None  # find --as-of: the record time answered for

    @property
    def matched(self) -> bool:
        """At least one hit matched the query (``any_matched``)."""
        return any_matched(self.hits)

    def docs(self) -> list[dict]:
        return [h.to_json() for h in self.hits]

    def to_json(self, docs: list[dict] | None = None) -> dict:
        return find_document(self.hits, self.found, docs, self.as_of)


@dataclass
class Shown:
    """``show``: one memory, its text at the form asked for."""

    memory: Memory
    form: str = "full"
    as_of: AsOf | None = None  # show --as-of: the record time it stood at

    def to_json(self) -> dict:
        doc = self.memory.to_json(self.form)
        if self.as_of is not None:
            doc["as_of"] = self.as_of.to_json()
        return doc


@dataclass
class Listing:
    """A counted list: ``{**head, "count": n, key: [items]}`` (checkpoints, grants, sessions, turns,
    summaries); each item a result with ``to_json()`` or a document already."""

    key: str
    items: Sequence[Any]
    head: dict = field(default_factory=dict)

    def docs(self) -> list:
        return [i.to_json() if hasattr(i, "to_json") else i for i in self.items]

    def to_json(self, docs: list | None = None) -> dict:
        docs = self.docs() if docs is None else docs
        return {**self.head, "count": len(docs), self.key: docs}


@dataclass
class SessionTurns:
    """``session show``: a session's turns in order, each numbered from 1."""

    session: str
    turns: Sequence[Memory]

    def docs(self) -> list[dict]:
        return [{"turn": i, **m.to_json()} for i, m in enumerate(self.turns, 1)]

    def to_json(self, docs: list | None = None) -> dict:
        return Listing("turns", self.docs() if docs is None else docs, {"session": self.session}).to_json()


@dataclass
class History:
    """``history``: every version of one memory, oldest first."""

    versions: Sequence[Any]
    chain: Sequence[Any] = ()  # the supersede chain through the memory, oldest first (``ChainLink``)

    def docs(self) -> list[dict]:
        return [v.to_json() for v in self.versions]

    def to_json(self, docs: list | None = None) -> dict:
        return {"uri": f"cortex://m/{self.versions[0].id}", "versions": self.docs() if docs is None else docs,
                "chain": [c.to_json() for c in self.chain]}


@dataclass
class ConfigAnswer:
    """``config show``: every setting, its value and where it came from."""

    config_file: str | None
    rows: Sequence[tuple[str, Any, str]]

    @classmethod
    def of(cls, settings) -> "ConfigAnswer":
        """From ``config.Settings``: each key's value and source, in the settings' order; a
        URL's credentials (a store URI's password, an endpoint's user:password or api_key
        parameter) are shown as ``***``."""
        from cortexctl.dsn import redact

        def shown(key: str, value: Any) -> Any:
            return redact(value) if isinstance(value, str) else value

        return cls(str(settings.config_file) if settings.config_file else None,
                   [(k, shown(k, settings.values[k]), settings.sources[k]) for k in settings.values])

    def docs(self) -> list[dict]:
        return [{"key": k, "value": v, "source": s} for k, v, s in self.rows]

    def to_json(self, docs: list | None = None) -> dict:
        docs = self.docs() if docs is None else docs
        return {"config_file": self.config_file,
                "settings": {d["key"]: {"value": d["value"], "source": d["source"]} for d in docs}}


@dataclass
class ChangeLog:
    """``changes``: what happened to the memories the actor may see, in ``(since, until]``, oldest
    first (``results.Change``); ``more``: a limit cut the list short (later changes exist)."""

    since: Any
    until: Any
    changes: Sequence[Any]
    more: bool = False

    @property
    def changed(self) -> bool:
        """Something changed in the window (the command's exit status is 0 then, else 1)."""
        return bool(self.changes)

    def docs(self) -> list[dict]:
        return [c.to_json() for c in self.changes]

    def to_json(self, docs: list | None = None) -> dict:
        from cortexctl.engine.results import iso

        docs = self.docs() if docs is None else docs
        return {"since": iso(self.since), "until": iso(self.until), "count": len(docs), "more": self.more,
                "changes": docs}


def summaries(done: Sequence[dict]) -> Listing:
    """``session summarize``: the summaries made, one object each."""
    return Listing("summaries", list(done))


__all__ = ["split_found", "any_matched", "find_document", "PatternsAnswer", "FindAnswer", "Shown",
           "Listing", "SessionTurns", "History", "ConfigAnswer", "ChangeLog", "summaries"]
