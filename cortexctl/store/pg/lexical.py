"""The lexical lane on PostgreSQL: BM25 postings in tables, ranked by ``store/lexical.py`` (``LexicalReads``)."""

from __future__ import annotations


class LexicalReads:
    """``interface.LexicalSearch`` and the postings parts of ``Integrity`` over a ``PgTx``'s connection."""
