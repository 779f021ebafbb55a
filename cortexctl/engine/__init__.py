"""Use cases: the only thing the CLI calls."""
