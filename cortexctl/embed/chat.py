"""An OpenAI-compatible ``/v1/chat/completions`` client over httpx (config section ``chat``).

Same conventions as the embeddings client (``embed/http.py``): the key only from the
environment variable ``chat.api_key_env`` names, sent as a bearer token and never printed;
429 and 5xx answers retried with backoff honouring ``Retry-After``; a refused connection
or a timeout, once retries are spent, is ProviderUnreachable (exit 9).
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from cortexctl.embed.http import client, post_json
from cortexctl.errors import ConfigError, ProviderUnreachable

HOW_TO_CONFIGURE = ("set chat -> base_url and chat -> model in the config file "
                    "(or CORTEXCTL_CHAT_BASE_URL and CORTEXCTL_CHAT_MODEL), e.g. http://127.0.0.1:11434/v1")


def endpoint(base_url: str) -> str:
    base = base_url.rstrip("/")
    if urlsplit(base).path in ("", "/"):
        base += "/v1"
    return base + "/chat/completions"


class ChatClient:
    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, timeout: float = 60.0,
                 backoff: float = 0.25) -> None:
        self.url = endpoint(base_url)
        self.host = urlsplit(self.url).netloc.rpartition("@")[2]  # never the user:password a URL may carry
        self.model = model
        self.api_key = api_key
        self.timeout = timeout
        self.backoff = backoff

    @classmethod
    def from_settings(cls, settings) -> "ChatClient":
        base_url, model = settings.get("chat.base_url"), settings.get("chat.model")
        if not base_url or not model:
            raise ConfigError(f"no chat endpoint configured: {HOW_TO_CONFIGURE}")
        key_env = settings.get("chat.api_key_env")
        key = os.environ.get(key_env) if key_env else None
        if key is not None and (not key.isascii() or not key.isprintable()):
            raise ConfigError(f"${key_env}: the API key must be printable ASCII text")
        return cls(base_url, model, api_key=key, timeout=float(settings.get("chat.timeout")))

    def complete(self, system: str, user: str) -> str:
        """The model's reply to one system and one user message (temperature 0)."""
        body = {"model": self.model, "temperature": 0,
                "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}
        with client(self.api_key, self.timeout) as http:
            doc = post_json(http, self.url, body, what="chat endpoint", backoff=self.backoff,
                            unreachable_hint="check chat -> base_url",
                            refused_hint="check chat -> model and the API key variable chat -> api_key_env names")
        try:
            content = doc["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            content = None
        if not isinstance(content, str):
            raise ProviderUnreachable(f"chat endpoint {self.host} answered without a message")
        return content
