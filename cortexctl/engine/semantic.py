"""The semantic lane's upkeep: embedding memories and keeping the store's vectors current.

The store keeps one vector per memory and model (``Tx.insert_vectors``) and
answers ``Tx.nearest``; how it searches them (an index file, pgvector, ...) is
its own. This module embeds what waits (``embed_pending``: with no
connection open while the endpoint works), refuses vectors of a dimension the
model's stored ones do not have, and runs ``reindex`` (embed, drop other models'
vectors, bring the store's index up to date with ``Storage.update_index``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cortexctl.store.interface import Tx

if TYPE_CHECKING:
    from cortexctl.engine.context import Context

EMBED_BATCH = 2048
LAZY_PENDING = 64  # pending memories a write embeds on the side


# -- embedding -----------------------------------------------------------------------
def embed_versions(embedder, items: list[tuple[str, int, str]]) -> tuple[list[str], list[int], object]:
    """Embed (id, version, search text) items; returns ids, versions, matrix."""
    import numpy as np

    ids = [i[0] for i in items]
    versions = [i[1] for i in items]
    chunks = [embedder.embed([i[2] for i in items[s : s + EMBED_BATCH]]) for s in range(0, len(items), EMBED_BATCH)]
    matrix = np.vstack(chunks) if chunks else np.zeros((0, embedder.dim or 1), dtype=np.float32)
    return ids, versions, matrix


def store_vectors(tx: Tx, embedder, ids, versions, matrix) -> int:
    """Store vectors made by ``embedder``; returns the last key. A dimension the model's
    stored vectors do not have is refused (a misconfigured endpoint)."""
    from cortexctl.errors import ConfigError

    dim = len(matrix[0]) // 4 if isinstance(matrix, list) else int(matrix.shape[1])
    have = tx.model_dim(embedder.model)
    if have is not None and have != dim:
        raise ConfigError(
            f"model {embedder.model} made {dim}-dimensional vectors, but the store holds "
            f"{have}-dimensional ones from it", hint="check embedding -> dimensions, or run: cortexctl reindex",
        )
    return tx.insert_vectors(ids, versions, embedder.model, matrix)


def embed_pending(ctx: Context, *, limit: int | None = None, ids: list[str] | None = None,
                  warnings: list[str] | None = None, progress=None) -> int:
    """Embed live memories the active model has not embedded yet (all, ``limit`` of them, or ``ids``).

    The embedding happens with no connection open; each batch is stored in one
    short transaction, skipping any memory that changed in between. A failing
    endpoint leaves the rest pending: the error is added to ``warnings``, or
    raised when ``warnings`` is None. Returns how many were embedded.
    """
    from cortexctl.errors import ConfigError, ProviderUnreachable
    from cortexctl.memory import codec, schema
    from cortexctl.memory.types import type_name
    from cortexctl.store.interface import NoStore

    embedder = ctx.embedder
    done = 0
    total = None
    while True:
        want = EMBED_BATCH if limit is None else min(EMBED_BATCH, limit - done)
        if want <= 0:
            return done
        try:
            with ctx.storage.reading() as tx:
                if total is None and progress is not None:
                    total = tx.count_pending(embedder.model)
                rows = tx.pending(embedder.model, limit=want, ids=ids)
        except NoStore:
            return done
        if not rows:
            return done
        items = [(id_, version, schema.search_text(type_name(t), codec.decode(data))) for id_, version, t, data in rows]
        try:
            got_ids, versions, matrix = embed_versions(embedder, items)
        except (ProviderUnreachable, ConfigError) as exc:
            if warnings is None:
                raise
            warnings.append(f"embedding pending: {exc.message}")
            return done
        with ctx.transaction() as tx:
            current = tx.live_versions(got_ids)
            keep = [i for i, (id_, v) in enumerate(zip(got_ids, versions)) if current.get(id_) == v]
            if keep:
                sel = [got_ids[i] for i in keep]
                for id_ in sel:
                    tx.drop_vectors(id_, model=embedder.model)
                if warnings is None:
                    store_vectors(tx, embedder, sel, [versions[i] for i in keep], matrix[keep])
                elif not store_or_warn(tx, embedder, sel, [versions[i] for i in keep], matrix[keep], warnings):
                    return done
        done += len(rows)
        if progress is not None:
            progress(done, max(total or 0, done))
        if ids is not None:
            return done


def reindex(ctx: Context, *, rebuild: bool = False, progress=None, later: bool = False) -> dict:
    """Embed everything pending for the active model, drop other models' vectors, fold or rebuild the
    index (``later``: the backend may build it in the background, ``Storage.update_index``)."""
    embedder = ctx.embedder
    ctx.require_store()
    replaced = 0
    if getattr(embedder, "remote", False):
        dim = embedder.probe()  # a dead or misconfigured endpoint fails here, before any work
        with ctx.transaction() as tx:
            have = tx.model_dim(embedder.model)
            if have is not None and have != dim:  # the endpoint now makes another length: start over
                replaced = tx.drop_model(embedder.model)
    embedded = embed_pending(ctx, progress=(lambda d, t: progress("embed", d, t)) if progress else None)
    with ctx.storage.reading() as tx:
        others = tx.other_models(embedder.model)
    dropped = replaced
    if others:  # no transaction when there is nothing to drop: a commit makes the search snapshot stale
        with ctx.transaction() as tx:
            dropped += tx.drop_other_models(embedder.model)
    done = ctx.storage.update_index(embedder.model, rebuild=rebuild, later=later,
                                    progress=(lambda d, t: progress("index", d, t)) if progress else None)
    return {"model": embedder.model, "dim": embedder.dim, "embedded": embedded, "dropped": dropped, "index": done}


def store_or_warn(tx: Tx, embedder, ids, versions, matrix, warnings: list[str]) -> int:
    """``store_vectors``, but a dimension mismatch leaves the memories pending with a warning."""
    from cortexctl.errors import ConfigError

    try:
        return store_vectors(tx, embedder, ids, versions, matrix)
    except ConfigError as exc:
        warnings.append(f"embedding pending: {exc.message}")
        return 0
