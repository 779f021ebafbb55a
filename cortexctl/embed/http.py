"""An OpenAI-compatible ``/v1/embeddings`` client over httpx.

Covers OpenAI, Ollama, llama.cpp, vLLM, LM Studio and gateways. Texts go in
batches of ``embedding.batch_size``; a 429 or 5xx answer, a timeout or a
refused connection is retried with exponential backoff (``Retry-After`` is
honoured up to 10 s) before it becomes ``ProviderUnreachable`` (exit 9). Every
answer is checked: one vector per input, all of one length, finite numbers,
and the length ``embedding.dimensions`` names when it is set (``ConfigError``
otherwise). ``probe()`` embeds one tiny text before a long job trusts the
endpoint.

``base_url`` is the API root as the OpenAI SDK takes it, e.g.
``https://api.openai.com/v1`` or ``http://127.0.0.1:11434/v1``; a URL with no
path gets ``/v1``.
"""

from __future__ import annotations

import math
import os
import random
import time
from typing import Sequence
from urllib.parse import urlsplit

from cortexctl.errors import ConfigError, ProviderUnreachable

RETRIES = 4  # for 429 and 5xx answers
CONNECT_RETRIES = 2  # for refused connections and timeouts: a dead endpoint must not stall a write
MAX_RETRY_AFTER = 10.0


def endpoint(base_url: str) -> str:
    base = base_url.rstrip("/")
    if urlsplit(base).path in ("", "/"):
        base += "/v1"
    return base + "/embeddings"


def client(api_key: str | None, timeout: float):
    """An httpx client that sends the key, when there is one, as a bearer token."""
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.Client(timeout=timeout, headers=headers)


def retry_after(resp, delay: float) -> float:
    """Seconds to wait before retrying: ``Retry-After`` (at most MAX_RETRY_AFTER), else jittered ``delay``."""
    raw = resp.headers.get("retry-after")
    if raw:
        try:
            return min(max(float(raw), 0.0), MAX_RETRY_AFTER)
        except ValueError:
            pass
    return delay * random.uniform(0.5, 1.5)


def post_json(http, url: str, body: dict, *, what: str, retries: int = RETRIES, backoff: float = 0.25,
              unreachable_hint: str | None = None, refused_hint: str | None = None) -> dict:
    """POST ``body``; the JSON answer. 429 and 5xx are retried with backoff (``Retry-After``
    honoured), refused connections and timeouts ``CONNECT_RETRIES`` times; then, and for any
    other answer than 200 or one that is not JSON, ProviderUnreachable (exit 9)."""
    import httpx

    host = urlsplit(url).netloc.rpartition("@")[2]  # never the user:password a URL may carry
    delay = backoff
    failures = 0
    for attempt in range(retries + 1):
        last = attempt == retries
        try:
            resp = http.post(url, json=body)
        except httpx.HTTPError as exc:
            failures += 1
            if last or failures > CONNECT_RETRIES:
                raise ProviderUnreachable(
                    f"{what} {host} unreachable: {type(exc).__name__}"
                    f"{': ' + str(exc).splitlines()[0] if str(exc) else ''}",
                    hint=unreachable_hint,
                ) from None
            time.sleep(delay * random.uniform(0.2, 0.6))
            delay *= 2
            continue
        if resp.status_code == 429 or resp.status_code >= 500:
            if last:
                raise ProviderUnreachable(f"{what} {host} answered HTTP {resp.status_code} after {retries + 1} tries")
            time.sleep(retry_after(resp, delay))
            delay *= 2
            continue
        if resp.status_code != 200:
            detail = resp.text.strip().splitlines()[0][:200] if resp.text.strip() else ""
            raise ProviderUnreachable(
                f"{what} {host} refused the request: HTTP {resp.status_code}{' ' + detail if detail else ''}",
                hint=refused_hint,
            )
        try:
            return resp.json()
        except ValueError:
            raise ProviderUnreachable(f"{what} {host} answered with something that is not JSON") from None
    raise AssertionError("unreachable")


class HttpEmbedder:
    provider = "openai"
    remote = True
    costly = True

    def __init__(
        self, base_url: str, model: str, *, api_key: str | None = None, timeout: float = 30.0,
        dimensions: int | None = None, batch_size: int = 64, retries: int = RETRIES,
        backoff: float = 0.25,
    ) -> None:
        self.url = endpoint(base_url)
        self.host = urlsplit(self.url).netloc.rpartition("@")[2]  # never the user:password a URL may carry
        self.name = model
        self.model = f"openai:{model}"
        self.want_dim = dimensions
        self.dim: int | None = dimensions
        self.api_key = api_key
        self.timeout = timeout
        self.batch_size = max(1, int(batch_size))
        self.retries = retries
        self.backoff = backoff
        self.probed = False
        self._client = None

    @classmethod
    def from_settings(cls, settings) -> "HttpEmbedder":
        model = settings.get("embedding.model")
        if not model:
            raise ConfigError("embedding -> model must be set when embedding -> base_url is")
        key_env = settings.get("embedding.api_key_env")
        key = os.environ.get(key_env) if key_env else None
        if key is not None and (not key.isascii() or not key.isprintable()):
            raise ConfigError(f"${key_env}: the API key must be printable ASCII text")
        return cls(
            settings.get("embedding.base_url"), model,
            api_key=key,
            timeout=float(settings.get("embedding.timeout")),
            dimensions=settings.get("embedding.dimensions"),
            batch_size=settings.get("embedding.batch_size"),
        )

    # -- requests -----------------------------------------------------------------
    def _post(self, texts: list[str]) -> dict:
        if self._client is None:
            self._client = client(self.api_key, self.timeout)
        body: dict = {"model": self.name, "input": texts, "encoding_format": "float"}
        if self.want_dim:
            body["dimensions"] = self.want_dim
        return post_json(
            self._client, self.url, body, what="embedding endpoint", retries=self.retries, backoff=self.backoff,
            unreachable_hint="check embedding -> base_url, or unset it to use the built-in hash embedder",
            refused_hint="check embedding -> model and the API key variable embedding -> api_key_env names",
        )

    def _vectors(self, doc: dict, n: int) -> list[list[float]]:
        bad = ProviderUnreachable(f"embedding endpoint {self.host} answered in an unexpected shape")
        data = doc.get("data") if isinstance(doc, dict) else None
        if not isinstance(data, list) or len(data) != n:
            raise ProviderUnreachable(
                f"embedding endpoint {self.host} returned {len(data) if isinstance(data, list) else 'no'} "
                f"vectors for {n} texts"
            )
        try:
            items = sorted(data, key=lambda d: d.get("index", 0))
            vecs = [item["embedding"] for item in items]
        except (AttributeError, KeyError, TypeError):
            raise bad from None
        for v in vecs:
            if not isinstance(v, list) or not v or not all(
                isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in v
            ):
                raise bad
        dims = {len(v) for v in vecs}
        if len(dims) != 1:
            raise bad
        got = dims.pop()
        if self.want_dim and got != self.want_dim:
            raise ConfigError(
                f"embedding endpoint {self.host} returned {got}-dimensional vectors for model "
                f"{self.name!r}, but embedding -> dimensions is {self.want_dim}",
                hint=f"set embedding -> dimensions to {got}, or pick the model that makes {self.want_dim}",
            )
        if self.dim is not None and got != self.dim:
            raise ConfigError(
                f"embedding endpoint {self.host} changed dimension for model {self.name!r}: {got}, not {self.dim}"
            )
        self.dim = got
        return vecs

    # -- the Embedder interface ------------------------------------------------------
    def probe(self) -> int:
        """Embed one tiny text; returns the dimension. Raises what ``embed`` raises."""
        if not self.probed:
            self.embed(["probe"])
        return self.dim  # type: ignore[return-value]

    def embed(self, texts: Sequence[str]):
        import numpy as np

        texts = [t if t.strip() else "." for t in texts]
        chunks = []
        for i in range(0, len(texts), self.batch_size):
            batch = texts[i : i + self.batch_size]
            chunks.extend(self._vectors(self._post(batch), len(batch)))
        self.probed = True
        if not chunks:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        out = np.asarray(chunks, dtype=np.float32)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out

    def embed_bytes(self, text: str) -> bytes:
        return self.embed([text])[0].astype("<f4").tobytes()

    def embed_query(self, text: str):
        return self.embed([text])[0]

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
