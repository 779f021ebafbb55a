"""A real OpenAI-compatible chat-completions server on 127.0.0.1, for tests.

Each test queues what the next requests get: ``replies`` (the message content of a 200
answer), ``statuses`` (an HTTP status to answer instead: 429 comes with Retry-After: 0)
and ``delay`` (seconds to wait before answering, to outlast a client's timeout). Every
request is recorded with its Authorization header.
"""

from __future__ import annotations

import threading
import time
from tests.embed_server import JsonHandler, LoopbackServer


class ChatServer(LoopbackServer):
    def __init__(self) -> None:
        self.replies: list[str] = []
        self.statuses: list[int] = []
        self.delay = 0.0
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        server = self

        class Handler(JsonHandler):
            def do_POST(self):
                with server.lock:
                    body = self.record(server)
                    status = server.statuses.pop(0) if server.statuses else 200
                    reply = server.replies.pop(0) if status == 200 and server.replies else "{}"
                if server.delay:
                    time.sleep(server.delay)
                if self.path != "/v1/chat/completions":
                    status = 404
                if status != 200:
                    self.send_json(status, {"error": {"message": f"status {status}"}})
                    return
                self.send_json(200, {"id": "c1", "object": "chat.completion", "model": body.get("model"),
                                 "choices": [{"index": 0, "finish_reason": "stop",
                                              "message": {"role": "assistant", "content": reply}}]})

        self.serve(Handler)

    def env(self, model: str = "test-chat", **extra) -> dict[str, str]:
        env = {"CORTEXCTL_CHAT_BASE_URL": self.url, "CORTEXCTL_CHAT_MODEL": model}
        env.update({k: str(v) for k, v in extra.items()})
        return env
