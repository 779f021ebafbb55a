"""What verify and healthcheck read on PostgreSQL (``PgTx``'s ``IntegrityReads``)."""

from __future__ import annotations


class IntegrityReads:
    """``interface.Integrity`` (but vectors and postings) over a ``PgTx``'s connection."""
