"""A real OpenAI-compatible embeddings server on 127.0.0.1, for tests.

Vectors are deterministic: a bag of words hashed into ``dim`` dimensions and
salted with the model name, so two models give different vectors and texts
sharing words are near. Behaviour is set per test: ``fail_next`` answers the
next requests with an HTTP status (429, 500, ...), ``dims`` overrides the
dimension per model. Every request body is recorded.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def vector(text: str, model: str, dim: int) -> list[float]:
    vec = [0.0] * dim
    for word in re.findall(r"\w+", text.lower()):
        h = int.from_bytes(hashlib.sha256(f"{model}|{word}".encode()).digest()[:8], "little")
        vec[h % dim] += 1.0 if (h >> 63) else -1.0
    if not any(vec):
        vec[0] = 1.0
    return vec


class JsonHandler(BaseHTTPRequestHandler):
    """Quiet; reads and records a JSON request; answers JSON (429 with Retry-After: 0)."""

    def log_message(self, *args):
        pass

    def record(self, server) -> dict:
        """The request's JSON body, recorded in ``server.requests`` with its Authorization header."""
        length = int(self.headers.get("content-length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        server.requests.append({"path": self.path, "body": body, "auth": self.headers.get("authorization")})
        return body

    def send_json(self, status: int, doc: dict) -> None:
        payload = json.dumps(doc).encode()
        try:
            self.send_response(status)
            if status == 429:
                self.send_header("Retry-After", "0")
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except OSError:  # the client gave up (a timeout)
            pass


class LoopbackServer:
    """A threaded HTTP server on 127.0.0.1 serving ``handler``; ``url`` is its /v1 root."""

    def serve(self, handler) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class EmbedServer(LoopbackServer):
    def __init__(self, dim: int = 16) -> None:
        self.dim = dim
        self.dims: dict[str, int] = {}
        self.fail_next: list[int] = []
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        server = self

        class Handler(JsonHandler):
            def do_POST(self):
                with server.lock:
                    body = self.record(server)
                    status = server.fail_next.pop(0) if server.fail_next else 200
                if self.path != "/v1/embeddings":
                    status = 404
                if status != 200:
                    self.send_json(status, {"error": {"message": f"status {status}"}})
                    return
                model = body.get("model", "")
                dim = server.dims.get(model, server.dim)
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                data = [{"object": "embedding", "index": i, "embedding": vector(t, model, dim)}
                        for i, t in enumerate(texts)]
                payload = json.dumps({"object": "list", "data": data, "model": model}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.serve(Handler)

    def batch_sizes(self) -> list[int]:
        return [len(r["body"]["input"]) for r in self.requests]

    def env(self, model: str = "test-embed", **extra) -> dict[str, str]:
        env = {"CORTEXCTL_EMBED_BASE_URL": self.url, "CORTEXCTL_EMBED_MODEL": model}
        env.update({k: str(v) for k, v in extra.items()})
        return env


def dead_url() -> str:
    """A loopback URL where nothing listens (a port bound and closed again)."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}/v1"
