"""The SDK's own client (ClientSession over stdio_client) on a real `cortexctl mcp` subprocess.

``McpServer`` starts the installed console script as a user's MCP client would, runs the
session on an event loop in a thread of its own, and gives tests plain calls:
``server.call("find", {"near": "x"})``. One server can be shared by the tests of a module.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import threading
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.conftest import cortexctl_argv


def rpc(id_, method, params=None) -> bytes:
    """One JSON-RPC message as a line (a request with ``id_``, a notification without)."""
    msg = {"jsonrpc": "2.0", "method": method}
    if id_ is not None:
        msg["id"] = id_
    if params is not None:
        msg["params"] = params
    return json.dumps(msg).encode() + b"\n"


def isolated_env(home: Path, **extra: str) -> dict[str, str]:
    """What a test server process gets: PATH, a HOME and XDG dirs of its own, no CORTEXCTL_* of ours."""
    home.mkdir(parents=True, exist_ok=True)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_DATA_HOME": str(home / ".local" / "share"), "NO_COLOR": "1", "LANG": "C.UTF-8"}
    env.update(extra)
    return env


class McpServer:
    def __init__(self, store: Path, *, actor: str = "alice", env: dict[str, str], args: tuple[str, ...] = (),
                 timeout: float = 60) -> None:
        self.store = store
        self.timeout = timeout
        self.params = StdioServerParameters(command=cortexctl_argv()[0],
                                            args=["mcp", "--store", str(store), "--actor", actor, *args], env=env)
        self.errlog = tempfile.TemporaryFile(mode="w+", encoding="utf-8")
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.ready = threading.Event()
        self.session: ClientSession | None = None
        self.init = None
        self._stop = asyncio.run_coroutine_threadsafe(self._make_event(), self.loop).result(timeout)
        self._main = asyncio.run_coroutine_threadsafe(self._serve(), self.loop)
        if not self.ready.wait(timeout):
            self.close()
            raise RuntimeError(f"the server did not initialize: {self.stderr()}")
        if self._main.done():
            self._main.result()

    async def _make_event(self) -> asyncio.Event:
        return asyncio.Event()

    async def _serve(self) -> None:
        try:
            async with stdio_client(self.params, errlog=self.errlog) as (r, w):
                async with ClientSession(r, w) as session:
                    self.init = await session.initialize()
                    self.session = session
                    self.ready.set()
                    await self._stop.wait()
        finally:
            self.ready.set()

    def run(self, make):
        """Await ``make(session)`` on the client's loop and return its result."""
        assert self.session is not None, self.stderr()
        return asyncio.run_coroutine_threadsafe(make(self.session), self.loop).result(self.timeout)

    def call(self, name: str, arguments: dict | None = None):
        return self.run(lambda s: s.call_tool(name, arguments or {}))

    def read(self, uri: str):
        return self.run(lambda s: s.read_resource(uri))

    def stderr(self) -> str:
        self.errlog.flush()
        self.errlog.seek(0)
        return self.errlog.read()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self._stop.set)
        try:
            self._main.result(self.timeout)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(self.timeout)
            self.loop.close()

    def __enter__(self) -> "McpServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
