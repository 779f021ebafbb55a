"""Bundles on PostgreSQL: export, restore and merge's reads (``PgTx``'s ``BundleReads``)."""

from __future__ import annotations


class BundleReads:
    """``interface.BundleIO`` over a ``PgTx``'s connection."""


def export(store, dest):
    raise NotImplementedError


def restore(store, members, schema_version: int, check) -> None:
    raise NotImplementedError
