"""The DuckDB backend's answers to ``LexicalSearch.search_terms`` and ``score_terms``, ``VectorSearch.nearest`` and
``Integrity.index_problems``, shared by its two views: ``DuckTx`` (the tables) and
``SnapshotTx`` (the search snapshot). Both hold the reads these run over (postings,
vectors, ``passing``) and ``store``, the ``DuckStorage`` they came from (for the index file)."""

from __future__ import annotations

from cortexctl.store.interface import Filters


class Lanes:
    """Mixed into a view that has the backend's private reads and a ``store``."""

    __slots__ = ()

    def search_terms(self, terms: dict[int, float], filters: Filters, n: int) -> list[tuple[str, float]]:
        from cortexctl.store import lexical

        return lexical.search(self, terms, filters, n, self.docs_passing)

    def score_terms(self, terms: dict[int, float], docs, viewer) -> dict[str, float]:
        from cortexctl.store import lexical

        return lexical.score_docs(self, terms, docs, viewer)

    def nearest(self, query_vector, model: str, filters: Filters, n: int, *, exact: bool = False):
        from cortexctl.store import vector_index
        from cortexctl.store.interface import IndexUnusable

        try:
            return vector_index.nearest(self, self.store, model, query_vector, filters, n, exact=exact)
        except IndexUnusable as exc:
            exc.building = self.store.folding()  # a background fold is building the file
            raise

    def index_problems(self, model: str) -> list[str]:
        from cortexctl.store import vector_index

        return vector_index.verify_index(self, self.store, model)


__all__ = ["Lanes"]
