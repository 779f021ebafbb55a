"""The built-in hash embedder: signed feature hashing of stems and character n-grams.

Offline, deterministic, the same on every machine, and it needs no corpus
statistics. Each word that is not a stopword gives its Porter stem (weight 1)
and every character 3- and 4-gram of ``<word>`` (weight 0.3, on the unstemmed
word, so "paint", "painter" and a misspelt "paitning" share features). A
feature ``f`` lands in slot ``crc32(f) % dim`` with sign + when bit 31 of
``crc32(f)`` is set, else -; a text's vector is the sum over its words (raw
counts), scaled to unit length.

It knows spelling, not meaning: on LoCoMo it finds 0.445 of the evidence in
its top 10 alone (BM25 0.577), and ``find`` weighs it low (``engine/find.py``).
Embedding a batch costs about 15 us a memory once the words are cached.
"""

from __future__ import annotations

import functools
import math
import sys
import zlib
from typing import Sequence

from cortexctl.memory.terms import STOPWORDS, WORD_RE, normalize_word, stem

DEFAULT_DIM = 384
VERSION = "hash-v1"
W_CHAR = 0.3  # weight of each char n-gram feature relative to a stemmed word
CHAR_N = (3, 4)


def _h(f: str) -> int:  # stable 32-bit feature hash (same in every process)
    return zlib.crc32(f.encode("utf-8"))


@functools.lru_cache(maxsize=200_000)
def word_features(raw):
    """(hashes, weights) of one lowercased regex word: its Porter stem (weight 1) and the
    char 3/4-grams of '<word>' (weight W_CHAR; word = possessive-stripped, unstemmed).
    Stopwords have no features."""
    w = normalize_word(raw)
    s = stem(w) if w else None
    if s is None or s in STOPWORDS:
        return (), ()
    hs, ws = [_h("w:" + s)], [1.0]
    ww = "<" + w + ">"
    for n in CHAR_N:
        for i in range(len(ww) - n + 1):
            hs.append(_h("c:" + ww[i:i + n]))
            ws.append(W_CHAR)
    return tuple(hs), tuple(ws)


class _ChunkCache:
    # Buffers of numpy arrays are made on first use, so importing this module never loads numpy.
    """Whitespace chunk ('Caroline:', 'sunrise!') -> its features, kept in flat numpy buffers
    that grow by doubling (amortised O(1) per new chunk)."""

    def __init__(self):
        import numpy as np

        self.ids = {"\x01": 0}                      # chunk 0 = text separator, no features
        self.n_chunks, self.n_feats = 1, 0
        self.ptr = np.zeros(1024, np.int64)         # ptr[c]..ptr[c+1] = features of chunk c
        self.H = np.zeros(4096, np.uint32)
        self.W = np.zeros(4096, np.float32)

    def _add(self, chunk):
        import numpy as np

        hs, ws = [], []
        for w in WORD_RE.findall(chunk):
            h, wt = word_features(w)
            hs += h
            ws += wt
        c, f, k = self.n_chunks, self.n_feats, len(hs)
        if c + 2 > len(self.ptr):
            self.ptr = np.resize(self.ptr, 2 * len(self.ptr))
        while f + k > len(self.H):
            self.H, self.W = np.resize(self.H, 2 * len(self.H)), np.resize(self.W, 2 * len(self.W))
        self.H[f:f + k], self.W[f:f + k] = hs, ws
        self.ptr[c + 1] = f + k
        self.ids[chunk] = c
        self.n_chunks, self.n_feats = c + 1, f + k
        return c

    def lookup(self, chunks):
        import numpy as np

        ids = list(map(self.ids.get, chunks))
        if None in ids:
            for k, c in enumerate(chunks):
                if ids[k] is None:
                    i = self.ids.get(c)
                    ids[k] = i if i is not None else self._add(c)
        return np.array(ids, np.int64)


_CACHE: _ChunkCache | None = None


def embed(texts: Sequence[str], dim: int = DEFAULT_DIM):
    """texts -> float32 (n, dim), rows L2-normalised (zero rows for texts without features).
    Features: see word_features.  slot(f) = crc32(f) % dim, sign(f) = +1 if bit 31 of crc32(f)
    is set else -1;  row[slot] += sign * weight for every occurrence."""
    import numpy as np

    global _CACHE
    if _CACHE is None:
        _CACHE = _ChunkCache()
    n = len(texts)
    if n == 0:
        return np.zeros((0, dim), np.float32)
    joined = "\n\x01\n".join(texts).lower()
    if joined.count("\x01") != n - 1:            # a text contains the separator itself
        joined = "\n\x01\n".join(t.replace("\x01", " ") for t in texts).lower()
    cid = _CACHE.lookup(joined.split())
    ptr, H, W = _CACHE.ptr, _CACHE.H, _CACHE.W
    rows = np.cumsum(cid == 0)                     # separator chunks bump the row index
    cnt = ptr[cid + 1] - ptr[cid]                  # expand chunks -> features
    r = np.repeat(rows, cnt)
    pos = np.arange(len(r)) + np.repeat(ptr[cid] - (np.cumsum(cnt) - cnt), cnt)
    h, w = H[pos], W[pos]
    w = np.where(h >> 31, w, -w)
    m = np.bincount(r * dim + (h % dim), weights=w, minlength=n * dim)
    m = m.reshape(n, dim).astype(np.float32)
    norm = np.linalg.norm(m, axis=1, keepdims=True)
    norm[norm == 0] = 1.0
    return m / norm


def embed_one(text: str, dim: int = DEFAULT_DIM) -> bytes:
    """One text's vector as little-endian float32 bytes, in plain Python (no numpy):
    the same numbers as ``embed`` up to float rounding."""
    from array import array

    vec = [0.0] * dim
    for raw in WORD_RE.findall(text.lower()):
        hs, ws = word_features(raw)
        for h, w in zip(hs, ws):
            vec[h % dim] += w if h >> 31 else -w
    norm = math.sqrt(sum(x * x for x in vec))
    out = array("f", [x / norm for x in vec] if norm > 0 else vec)
    if sys.byteorder != "little":
        out.byteswap()
    return out.tobytes()


class HashEmbedder:
    provider = "hash"
    remote = False
    costly = False

    def __init__(self, dim: int | None = None) -> None:
        self.dim = int(dim or DEFAULT_DIM)
        self.model = f"{VERSION}/{self.dim}"

    def embed(self, texts: Sequence[str]):
        return embed(list(texts), self.dim)

    def embed_bytes(self, text: str) -> bytes:
        return embed_one(text, self.dim)

    def embed_query(self, text: str):
        return embed([text], self.dim)[0]
