"""A real OpenAI-compatible chat-completions server on 127.0.0.1, for tests.

Each test queues what the next requests get: ``replies`` (the message content of a 200
answer), ``statuses`` (an HTTP status to answer instead: 429 comes with Retry-After: 0)
and ``delay`` (seconds to wait before answering, to outlast a client's timeout). Every
request is recorded with its Authorization header. ``answer`` (the request's user message ->
the reply) answers each request by what it asks instead of from the queue, whatever order
concurrent requests arrive in. ``hold_after = N`` makes every request after the Nth wait until
``release`` is set; ``arrived(n)`` waits until n requests have come in.
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
        self.answer = None
        self.hold_after: int | None = None
        self.release = threading.Event()
        self.came = threading.Condition(self.lock)
        server = self

        class Handler(JsonHandler):
            def do_POST(self):
                with server.lock:
                    body = self.record(server)
                    nth = len(server.requests)
                    server.came.notify_all()
                    status = server.statuses.pop(0) if server.statuses else 200
                    if server.answer is not None and status == 200:
                        reply = server.answer(body["messages"][1]["content"])
                    else:
                        reply = server.replies.pop(0) if status == 200 and server.replies else "{}"
                if server.hold_after is not None and nth > server.hold_after:
                    server.release.wait(60)
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

    def arrived(self, n: int, timeout: float = 60) -> None:
        """Wait until ``n`` requests have come in (AssertionError after ``timeout`` seconds)."""
        with self.came:
            assert self.came.wait_for(lambda: len(self.requests) >= n, timeout), f"{len(self.requests)} of {n}"

    def env(self, model: str = "test-chat", **extra) -> dict[str, str]:
        env = {"CORTEXCTL_CHAT_BASE_URL": self.url, "CORTEXCTL_CHAT_MODEL": model}
        env.update({k: str(v) for k, v in extra.items()})
        return env
