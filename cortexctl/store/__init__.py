"""DuckDB: the only importer of duckdb. Connections, locks, migrations, records, journal."""
