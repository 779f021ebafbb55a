"""cortexctl: long-term memory for AI agents over a local single-file store (or a PostgreSQL one).

The public API: ``Cortex`` (open a store as an actor and use it) and the
error tree. Importing this package imports nothing heavy; duckdb and friends
load when a store is first opened.
"""

from __future__ import annotations

from cortexctl.errors import (  # noqa: F401
    AmbiguousRef,
    BudgetUnreachable,
    ConfigError,
    CortexError,
    IntegrityError,
    InvalidData,
    NotFound,
    ProviderUnreachable,
    RateLimited,
    Refused,
    SchemaTooNew,
    StoreBusy,
    StoreUnreachable,
    Tombstoned,
    UsageError,
)

__version__ = "0.1.0"


def __getattr__(name: str):
    if name == "Cortex":
        from cortexctl.engine.cortex import Cortex

        return Cortex
    if name == "FindQuery":
        from cortexctl.engine.results import FindQuery

        return FindQuery
    raise AttributeError(name)


__all__ = ["Cortex", "FindQuery", "CortexError", "__version__"]
