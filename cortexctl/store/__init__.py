"""The store room: the only importer of duckdb and the only holder of SQL.

``interface`` is what the engine sees (the ``Storage`` and ``Tx`` protocols, ``Filters``,
``Scoring``); ``db`` (``Store``: locks, waiting, opening) and ``duck`` (``DuckTx``) are the
DuckDB backend, running the queries of ``records``, ``search``, ``feedback`` and
``integrity``; ``migrations`` makes the schema current.
"""
