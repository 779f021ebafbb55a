"""Vectors in pgvector and find's nearest-neighbour lane on PostgreSQL (``PgTx``'s ``VectorReads``)."""

from __future__ import annotations


class VectorReads:
    """``interface.VectorSearch`` and the vector parts of ``Integrity`` over a ``PgTx``'s connection."""


class NoLoader:
    """``Storage.index_loader`` on PostgreSQL: the database keeps its HNSW index as rows arrive."""

    def add(self, last_key, ids, versions, matrix) -> None:
        pass

    def close(self) -> None:
        pass


def update_index(store, model: str, *, rebuild: bool = False, progress=None, wait=None) -> dict:
    raise NotImplementedError


def after_vectors(store, model: str) -> None:
    pass


def health(store, model):
    raise NotImplementedError
