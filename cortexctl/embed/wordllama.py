"""A static local embedding model: WordLlama l2_supercat, 256 dimensions, from the ``model`` extra.

``embedding.provider = "local"`` with ``embedding.model = "wordllama-l2-256"``
chooses it. The ``wordllama`` wheel bundles the model: a table of one 256-float
vector per token of the Llama 2 tokenizer (``weights/l2_supercat_256.safetensors``,
float16) and that tokenizer (``tokenizers/l2_supercat_tokenizer_config.json``).
A text's vector is the mean of its tokens' rows, scaled to unit length: no
network, no matrix product, ~10k memories/s on one core.

The two files are read straight from the installed package (found with
``importlib.util.find_spec``; the ``wordllama`` package itself is never
imported): its own ``WordLlama.load`` looks for the tokenizer under a directory
the wheel does not ship and would fetch it from Hugging Face on first use, and
importing it sets up the root logger. The arithmetic is the package's
``WordLlamaInference.embed(norm=True)`` (the model tests compare the two).

No role: a search and a memory are embedded alike. No centring either: the
cosines of unrelated LoCoMo turns already sit low (median 0.19, 90th
percentile 0.39; the question's evidence: median 0.41) and subtracting a centre
moved recall@10 by less than a point. ``find`` weighs the vectors by the model
(``engine/find.py``).

Vectors are stored with the tag ``MODEL``; the extra pins ``wordllama`` to
0.4.x, and other weights come with a new tag (``reindex`` then re-embeds).
The table is loaded once per process (``table()``, ~0.1 s).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

NAME = "wordllama-l2-256"
MODEL = "local:wordllama-l2-256/1"
DIM = 256
WEIGHTS = ("weights", "l2_supercat_256.safetensors")
TOKENIZER = ("tokenizers", "l2_supercat_tokenizer_config.json")

_TABLE = None


def package_dir() -> Path | None:
    """Where the ``wordllama`` package is installed (nothing is imported), or None."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("wordllama")
    except ValueError:  # a module set to None in sys.modules: as Python sees a package not installed
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def available() -> bool:
    """True when the model's two files are installed."""
    root = package_dir()
    return root is not None and root.joinpath(*WEIGHTS).is_file() and root.joinpath(*TOKENIZER).is_file()


def table():
    """The process's (token vectors float32 [vocab x DIM], tokenizer), loaded on first use."""
    global _TABLE
    if _TABLE is None:
        import numpy as np
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        root = package_dir()
        weights = load_file(str(root.joinpath(*WEIGHTS)))["embedding.weight"]
        tok = Tokenizer.from_file(str(root.joinpath(*TOKENIZER)))
        tok.no_padding()
        tok.no_truncation()
        _TABLE = (np.ascontiguousarray(weights, dtype=np.float32), tok)
    return _TABLE


class WordLlamaEmbedder:
    provider = "local"
    remote = False
    costly = False
    model = MODEL
    dim = DIM

    def embed(self, texts: Sequence[str]):
        """float32 rows of unit length, one per text (a zero row for a text with no token)."""
        import numpy as np

        texts = list(texts)
        out = np.zeros((len(texts), DIM), np.float32)
        if not texts:
            return out
        vectors, tok = table()
        for row, enc in zip(out, tok.encode_batch(texts, add_special_tokens=False)):
            if enc.ids:
                row[:] = vectors[np.minimum(enc.ids, len(vectors) - 1)].sum(axis=0)
        norms = np.linalg.norm(out, axis=1, keepdims=True)  # the mean's direction: dividing by the count is moot
        np.divide(out, norms, out=out, where=norms > 0)
        return out

    def embed_query(self, text: str):
        """A search: embedded as a memory is (the model has no roles)."""
        return self.embed([text])[0]

    def embed_bytes(self, text: str) -> bytes:
        return self.embed([text])[0].astype("<f4").tobytes()
