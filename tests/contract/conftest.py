"""The storage contract's fixtures: one store per backend, and rows to put in it.

``_open`` is the only place a backend is named: add a backend to ``BACKENDS``
and to ``_open`` and every contract test runs against it too (``storage`` and
``other_storage`` are two stores of it). Vectors come from the built-in hashing
embedder (``embedded``), terms from ``memory.terms``: what the engine hands a store.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol

import pytest

from cortexctl.store.interface import Filters, Scoring

BACKENDS = ["duckdb", "postgres"]

T0 = datetime(2026, 3, 1, 12, 0, 0)
FACT, GOAL = 2, 6  # type codes (memory.types); the store keeps them as small integers
WEIGHTS = (0.2, 0.2, 0.2, 0.2, 0.2)
SCORING = Scoring(T0 + timedelta(days=1), 7 * 86400.0, WEIGHTS)


def _open(name: str, tmp_path, label: str = "store"):
    if name == "duckdb":
        from cortexctl.store import open_storage

        return open_storage(tmp_path / label, wait=5.0)
    if name == "postgres":
        from cortexctl.store import open_storage
        from tests.pg import store_uri

        return open_storage(store_uri(label, tmp_path), wait=5.0)
    raise AssertionError(f"unknown backend {name}")


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def storage(backend, tmp_path):
    """An empty store of each backend (nothing exists until the first transaction)."""
    return _open(backend, tmp_path)


@pytest.fixture
def other_storage(backend, tmp_path):
    """A second empty store of the same backend (where a bundle is restored, say)."""
    return _open(backend, tmp_path, "other")


def ident(n: int) -> str:
    """A valid 26-character memory ID; IDs sort as their numbers do."""
    return f"01J{n:023d}"


def memory(n: int, *, actor: str = "alice", visibility: str = "private", type_: int = FACT,
           tags=(), frames=(), importance: int = 5, at: datetime = T0, short: str | None = None,
           tombstoned: bool = False, versions: int = 1, confidence: float = 1.0) -> tuple[dict, list[dict]]:
    """A head and its versions as the engine hands them to ``Tx.insert_memories``."""
    id_ = ident(n)
    short = short if short is not None else f"memory {n}"
    vs = [{
        "id": id_, "version": v, "type": type_, "data": f"data {n} v{v}".encode(), "hash": bytes([n % 256, v]) * 16,
        "created_at": at + timedelta(seconds=v - 1), "created_by": actor, "confidence": confidence,
        "provenance": '{"via":"write"}', "short": short if v == versions else f"{short} (v{v})",
        "medium": f"{short} at length" if v == versions else f"{short} (v{v}) at length", "forms_override": False,
    } for v in range(1, versions + 1)]
    head = {
        "id": id_, "type": type_, "actor": actor, "visibility": visibility, "tags": sorted(tags),
        "frames": sorted(frames), "importance": importance, "session": None, "current_version": versions,
        "created_at": at, "updated_at": at + timedelta(seconds=versions - 1), "short": vs[-1]["short"],
        "medium": vs[-1]["medium"], "tombstone_reason": "old" if tombstoned else None,
        "tombstoned_at": at + timedelta(hours=1) if tombstoned else None,
        "tombstoned_by": actor if tombstoned else None, "access_count": 0, "citations": 0, "last_used": None,
        "confidence": confidence, "valid_from": None, "valid_to": None, "supersedes": None, "superseded_by": None,
    }
    return head, vs


def put(storage, *memories) -> None:
    """Insert these (head, versions) pairs in one transaction."""
    with storage.transaction() as tx:
        tx.insert_memories([h for h, _ in memories], [v for _, vs in memories for v in vs])


def entry(kind: str, ref: str | None = None, payload: bytes = b"p", actor: str = "alice", at=T0):
    """A journal entry as the engine hands it to ``Tx.append_journal``."""
    return (kind, at, actor, ref, payload)


def unit_rows(n: int, dim: int = 4, seed: int = 0):
    """``n`` random unit vectors (float32)."""
    import numpy as np

    m = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def as_stored(storage, rows):
    """``rows`` (float32) as ``storage`` gives them back: rounded to its ``vector_dtype``."""
    import numpy as np

    return np.asarray(rows, dtype=np.float32).astype(storage.vector_dtype).astype(np.float32)


def self_score(storage, row) -> float:
    """The similarity a unit query ``row`` scores against itself as ``storage`` holds it: their dot
    product (a stored vector is of unit length before it is rounded)."""
    import numpy as np

    return float(np.asarray(row, dtype=np.float64) @ as_stored(storage, row).astype(np.float64))


def embedded(texts, dim: int = 64):
    """(model, matrix): the vectors of ``texts`` from the built-in hashing embedder the engine
    uses when no endpoint is configured (``embed/hashing.py``)."""
    from cortexctl.embed.hashing import HashEmbedder

    embedder = HashEmbedder(dim)
    return embedder.model, embedder.embed(list(texts))


def in_session(n: int, session: str, **kw) -> tuple[dict, list[dict]]:
    head, versions = memory(n, **kw)
    head["session"] = session
    return head, versions


def grant_id(n: int) -> str:
    return f"01G{n:023d}"


def grant(n: int, granter: str, subagent: str, *, types=(), tags=(), expires=None, at=T0) -> dict:
    """A grant row as the engine hands it to ``Tx.insert_grant``."""
    return {"id": grant_id(n), "granter": granter, "subagent": subagent, "types": list(types), "tags": list(tags),
            "created_at": at, "expires_at": expires, "revoked_at": None, "revoked_by": None}


def mixed_memories(n: int = 20) -> list[tuple[dict, list[dict]]]:
    """``n`` memories of two owners, every visibility, two types, tags, importances and times, one
    forgotten and some with two versions: the corpus the searching tests compare views over."""
    return [memory(i, actor="alice" if i % 3 else "bob",
                   visibility="public" if i % 4 == 0 else "scoped" if i % 4 == 2 or i % 7 == 1 else "private",
                   type_=FACT if i % 2 else GOAL, tags=("a",) if i % 3 == 0 else ("a", "b") if i % 5 == 0 else (),
                   importance=1 + i % 9, at=T0 + timedelta(minutes=i), tombstoned=i == 7, versions=1 + i % 2)
            for i in range(1, n + 1)]


# Filters over ``mixed_memories``: owners, a type, tags, the forgotten, and viewers holding grants' scopes.
MIXED_FILTERS = (
    Filters(actor="alice"), Filters(actor="bob", types=(FACT,)), Filters(actor="alice", tags=("a", "b")),
    Filters(actor="alice", include_tombstoned=True), Filters(actor="carol"),
    Filters(actor="carol", scopes=(("alice", (), ("a",)), ("bob", (GOAL,), ()))),
    Filters(actor="bob", scopes=(("alice", (FACT, GOAL), ("a", "b")),), include_tombstoned=True),
    Filters(actor="alice", scopes=(("bob", (FACT,), ()), ("nobody", (), ()))),
)


def journaled(tx, kind: str, *ns: int) -> None:
    """Journal entries naming these memories, as the engine writes one with every change to a memory."""
    tx.append_journal([entry(kind, ident(n)) for n in ns])


def methods(protocol) -> set[str]:
    """The methods a protocol declares, its capabilities' included (``Tx`` is their union)."""
    return {name for klass in protocol.__mro__ if klass not in (object, Protocol)
            for name, value in vars(klass).items() if callable(value) and not name.startswith("_")}
