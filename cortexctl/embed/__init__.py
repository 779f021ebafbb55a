"""Embedders: text to unit vectors, each stamped with the model tag stored beside its vectors.

Chosen in this order unless ``embedding.provider`` pins one: an
OpenAI-compatible ``/v1/embeddings`` endpoint when ``embedding.base_url`` is
set, else the built-in hash embedder, which needs nothing and works offline.
``local`` (never chosen by ``auto``) is a real model on this machine, from the
``model`` extra; ``embedding.model`` names which (``LOCAL_MODELS``): the
multilingual-e5-small transformer (``embed/local.py``, the default) or the
static WordLlama table (``embed/wordllama.py``). Only the chosen one's module
is imported, and only then.

A memory is embedded with ``embed``/``embed_bytes`` and a search with
``embed_query``: a model trained with roles (e5: ``passage:`` and ``query:``)
needs to know which; the others embed both alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, Sequence

if TYPE_CHECKING:
    import numpy as np

    from cortexctl.config import Settings


#: ``embedding.model`` values for ``provider = "local"``; None (unset) is the first
LOCAL_MODELS = ("multilingual-e5-small", "wordllama-l2-256")


class Embedder(Protocol):
    #: "hash", "openai" or "local": what made the vectors (``health`` shows it; ``find`` weighs by it)
    provider: str
    #: the tag stored with every vector this embedder makes; another tag means re-embed
    model: str
    #: the vector length, or None until a remote endpoint has answered once
    dim: int | None
    #: True when embedding needs the network (so a failure is tolerated, never fatal to a write)
    remote: bool
    #: True when embedding a text costs more than reading its stored vector back (an endpoint, a
    #: transformer; not the hash embedder or the static WordLlama table): ``find --as-of`` then reads
    #: the stored vectors of the versions it needs rather than embed their texts again
    costly: bool

    def embed(self, texts: Sequence[str]) -> "np.ndarray":
        """float32 rows of unit length (zero rows for text with no words), one per text."""
        ...

    def embed_bytes(self, text: str) -> bytes:
        """One text's vector as little-endian float32 bytes."""
        ...

    def embed_query(self, text: str) -> "np.ndarray":
        """A search's vector (one float32 row of unit length), in the query role."""
        ...


def from_settings(settings: "Settings") -> Embedder:
    """The active embedder for these settings. Builds no connection."""
    provider = settings.get("embedding.provider")
    base_url = settings.get("embedding.base_url")
    if provider == "hash" or (provider == "auto" and not base_url):
        from cortexctl.embed.hashing import HashEmbedder

        return HashEmbedder(settings.get("embedding.dimensions") or None)
    from cortexctl.errors import ConfigError

    if provider == "local":
        name = settings.get("embedding.model") or LOCAL_MODELS[0]
        if name not in LOCAL_MODELS:
            raise ConfigError(f"embedding -> model {name!r} is not a local model: one of {', '.join(LOCAL_MODELS)}")
        if name == "wordllama-l2-256":
            from cortexctl.embed import wordllama as module
        else:
            from cortexctl.embed import local as module
        if not module.available():
            raise ConfigError(f"embedding -> provider is 'local' ({name}) but the model extra is not installed",
                              hint="pip install 'cortexctl[model]'")
        return module.WordLlamaEmbedder() if name == "wordllama-l2-256" else module.LocalEmbedder()
    from cortexctl.embed.http import HttpEmbedder

    if not base_url:
        raise ConfigError("embedding -> provider is 'openai' but embedding -> base_url is not set")
    return HttpEmbedder.from_settings(settings)
