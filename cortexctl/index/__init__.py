"""The usearch HNSW index file: a cache of the vectors in DuckDB, never the ground truth."""
