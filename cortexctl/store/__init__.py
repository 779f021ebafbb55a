"""The store room: the only importer of duckdb and the only holder of SQL.

``interface`` is what the engine sees (the capability protocols that make up ``Tx``,
``Storage``, ``Filters``, ``Scoring``), and ``open_storage`` below is the one place a
backend is built. The DuckDB backend: ``db`` (``DuckStorage``: locks, waiting, opening) and
``duck`` (``DuckTx``) run the queries of ``records``, ``search``, ``feedback``, ``grants``
and ``integrity``; ``lexical`` ranks by words over its postings, ``vector_index`` keeps
the HNSW file beside it and searches it, ``snapshot`` is find's read cache, ``bundle``
reads and writes bundles' Parquet members; ``migrations`` makes the schema current.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cortexctl.store.interface import Storage

DEFAULT_WAIT = 5.0  # seconds a command waits for a busy store (``--wait``)


POSTGRES_EXTRA = "the PostgreSQL backend needs the postgres extra: pip install 'cortexctl[postgres]'"


def open_storage(location, *, wait: float = DEFAULT_WAIT, resident: bool = False) -> Storage:
    """The one place a backend is chosen and built: the ``Storage`` at ``location``, a store
    directory (DuckDB) or a ``postgresql://`` URI (PostgreSQL; psycopg is imported only then,
    ConfigError when the ``postgres`` extra is not installed). ``wait``: seconds to wait for a
    busy store; ``resident``: a long-lived process (``cortexctl mcp``) that may keep read
    caches between calls. Nothing is opened yet."""
    from cortexctl.dsn import is_postgres

    if is_postgres(str(location)):
        try:
            import pgvector.psycopg  # noqa: F401  (the extra's presence, checked before the backend imports it)
            import psycopg  # noqa: F401
            import psycopg_pool  # noqa: F401
        except ImportError:
            from cortexctl.errors import ConfigError

            raise ConfigError(POSTGRES_EXTRA) from None
        from cortexctl.store import pg

        return pg.PgStorage(str(location), wait=wait, resident=resident)
    from cortexctl.store.db import DuckStorage

    return DuckStorage(location, wait=wait, resident=resident)


def storage_for(settings, *, resident: bool = False) -> Storage:
    """``open_storage`` for the settings' store (``location``: its directory or DSN, ``wait``)."""
    return open_storage(settings.location, wait=settings.wait, resident=resident)
