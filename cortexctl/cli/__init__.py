"""The command line: the only importer of typer and rich. Thin adapters over the engine."""
