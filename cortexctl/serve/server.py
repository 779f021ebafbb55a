"""``cortexctl mcp``: the store as an MCP server, on the official ``mcp`` SDK (2.x, ``MCPServer``).

Every tool is built from an operation (``cortexctl/ops``): its input schema
from the operation's parameters, its annotations from its hints, its body the
operation's engine call; a new operation with a ``Tool`` is served without a
change here. It answers with the document ``--json`` prints for the same command (``to_json()`` of the engine's result, or an
envelope from ``engine/documents.py``), as the tool result's structured content
and, serialized, as its text. A bad argument or an engine error is a result with
``isError`` and the error's one-line message (its ``--json`` error object as the
structured content): the server never dies on bad input.

Sharing the store: the engine opens and closes the store inside each call, so
between calls this process holds nothing of it and a shell ``cortexctl write``,
cron ``backup`` or a second server goes through. Calls within this server are
serialized by one lock (the SDK runs a synchronous tool on a worker thread, so
parallel calls would otherwise run at once). What is safe to keep stays between
calls: the ``Cortex`` (settings, actor) and its embedder.

stdout carries protocol messages only: the SDK's stdio transport serves the wire
from a private duplicate of fd 1 and points fd 1 at stderr while it runs, and
logging and Python warnings go to stderr.
"""

from __future__ import annotations

import hmac
import inspect
import logging
import sys
from typing import Annotated, Any, Callable, Literal

import orjson
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from cortexctl import __version__, ops
from cortexctl.engine.cortex import Cortex
from cortexctl.errors import CortexError, NotFound
from cortexctl.ops import Operation, Param
from cortexctl.serve.calls import Answer, Serving, error_line, failed, for_client, to_doc

log = logging.getLogger("cortexctl.serve")

# A tool's result: a CallToolResult whose structured content is a JSON object (the --json document).
Result = Annotated[CallToolResult, dict[str, Any]]

INSTRUCTIONS = """Long-term memory over a local cortexctl store.
At the start of a session, `changes` with `since` set to the end of your last one says what was
written, updated, superseded or forgotten meanwhile (its answer's `until` is the next `since`).
Typical loop: `context` (or `pinned`) at the start of a task; `find` to look things up and `show` to
read one memory; `write`/`remember`/`outcome` to record what was learned; `attest` with the memory URIs
you relied on and whether the task succeeded, so salience learns what helps; `compact` to fit the
memories in context into a token budget (a checkpoint `checkpoint_load` reloads).
References (REF) are URIs (cortex://m/<ID>), IDs, or the short refs find shows.
Results are the same JSON documents `cortexctl <command> --json` prints."""


_doc = to_doc


def _result(answer: Answer) -> CallToolResult:
    """A call's answer as the SDK's result (written as ``calls.wire_result`` writes it)."""
    return CallToolResult(content=[TextContent(type="text", text=answer.text)], structured_content=answer.doc,
                          is_error=answer.is_error)


def _failed(message: str, doc: dict | None = None) -> CallToolResult:
    return _result(failed(message, doc))


def validation_line(tool: str, exc: ValidationError) -> str:
    """A pydantic ValidationError of a tool's arguments as one line that names each argument."""
    parts = []
    for e in exc.errors():
        where = ".".join(str(p) for p in e.get("loc", ())) or "arguments"
        parts.append(f"{where}: {e.get('msg', 'invalid')}")
    return f"bad arguments to {tool}: " + "; ".join(parts)


def read(s: Serving, body: Callable[[Cortex], str]) -> str:
    """A resource's text under the server's lock; a NotFound is the SDK's not-found error, others a
    ResourceError."""
    with s.lock:
        try:
            return body(s.cx)
        except NotFound as err:
            raise ResourceNotFoundError(error_line(for_client(err))) from None
        except CortexError as err:
            raise ResourceError(error_line(for_client(err))) from None


# -- tools, built from the operations (cortexctl/ops) ------------------------------------------------
_TYPES = {str: str, int: int, float: float, bool: bool, dict: dict[str, Any]}


def annotation(p: Param) -> Any:
    """A parameter's type for the SDK (pydantic): lists of text, Literal choices, ``X | None`` when it
    may be left out with no default, and its help as the schema's description."""
    if p.many:
        base: Any = list[str]
    elif p.choices is not None:
        base = Literal[p.choices]  # type: ignore[valid-type]
    else:
        base = _TYPES[p.type]
    if not p.many and not p.required and p.default is None:
        base = base | None
    return Annotated[base, Field(description=p.help)] if p.help else base


def signature(op: Operation) -> inspect.Signature:
    """The signature the SDK reads as the tool's input schema: one keyword per parameter, in order."""
    params = []
    for p in op.params:
        default = inspect.Parameter.empty if p.required else ([] if p.many else p.default)
        params.append(inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation(p),
                                        default=default))
    return inspect.Signature(params, return_annotation=Result)


def tool_for(s: Serving, op: Operation) -> Tool:
    """The MCP tool of one operation: its schema from the parameters, its annotations from the hints,
    its body the engine call under the server's lock, answering the result's document."""

    def body(**values: Any) -> CallToolResult:
        return _result(s.run(op, values))

    body.__signature__ = signature(op)  # type: ignore[attr-defined]
    body.__name__ = op.name
    assert op.tool is not None
    hints = ToolAnnotations(title=op.tool.title, read_only_hint=op.read_only, destructive_hint=op.destructive,
                            idempotent_hint=op.read_only or op.idempotent, open_world_hint=op.open_world)
    return Tool.from_function(body, name=op.name, description=op.tool.description, annotations=hints)


def _tools(s: Serving) -> list[Tool]:
    """Every operation that has a tool, in the order they are declared."""
    return [tool_for(s, op) for op in ops.tools()]


def build(cx: Cortex | Serving) -> MCPServer:
    """The MCP server for one Cortex (or the ``Serving`` of one, shared with ``early.py``): its tools,
    resources and argument checking."""
    s = cx if isinstance(cx, Serving) else Serving(cx)
    tools = _tools(s)
    by_name = {t.name: t for t in tools}
    app = MCPServer("cortexctl", version=__version__, instructions=INSTRUCTIONS, tools=tools, log_level="WARNING")

    async def check_arguments(ctx, call_next):
        """Refuse a tools/call whose arguments the tool's schema rejects, as one line naming them
        (the SDK's own message is pydantic's multi-line report), and unknown arguments (which
        validation would silently drop)."""
        if ctx.method == "tools/call" and isinstance(ctx.params, dict):
            tool = by_name.get(ctx.params.get("name"))
            args = ctx.params.get("arguments") or {}
            if tool is not None and isinstance(args, dict):
                known = tool.parameters.get("properties", {})
                unknown = sorted(set(args) - set(known))
                if unknown:
                    line = (f"bad arguments to {tool.name}: unknown argument {', '.join(unknown)} "
                            f"(it takes {', '.join(known) or 'none'})")
                    return _failed(line, {"error": "usage", "message": line, "exit_code": 2})
                try:
                    tool.fn_metadata.validate_arguments(args)
                except ValidationError as exc:
                    line = validation_line(tool.name, exc)
                    return _failed(line, {"error": "usage", "message": line, "exit_code": 2})
        return await call_next(ctx)

    app.middleware.append(check_arguments)

    def memory_json(id: str, version: int | None = None) -> str:
        return orjson.dumps(_doc(read(s, lambda cx: cx.show(id, version=version).to_json("full")))).decode()

    @app.resource("cortex://m/{id}", name="memory", mime_type="application/json",
                  description="One memory at its latest version: the document `cortexctl show --json` prints.")
    def memory(id: str) -> str:
        return memory_json(id)

    @app.resource("cortex://m/{id}/v/{version}", name="memory-version", mime_type="application/json",
                  description="One version of a memory (old versions stay readable forever).")
    def memory_version(id: str, version: int) -> str:
        return memory_json(id, version)

    pinned_help = ("The pinned block as text, ready for the prompt: identity, inviolable rules, hard constraints, "
                   "user profile and the goal.")

    @app.resource("cortex://pinned", name="pinned", mime_type="text/plain", description=pinned_help)
    def pinned_block() -> str:
        return read(s, lambda cx: cx.pinned(NO_GOAL).text())

    @app.resource("cortex://pinned/{goal}", name="pinned-for-goal", mime_type="text/plain",
                  description=pinned_help + " The goal is the rest of the URI (percent-encoded).")
    def pinned_for_goal(goal: str) -> str:
        from urllib.parse import unquote

        return read(s, lambda cx: cx.pinned(unquote(goal)).text())

    return app


NO_GOAL = "none stated"


# -- transports ---------------------------------------------------------------------------------
def _quiet_stdio() -> None:
    """Logging and Python warnings on stderr, once, before the SDK configures its own."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="cortexctl mcp: %(levelname)s: %(name)s: %(message)s")
    logging.captureWarnings(True)


class BearerGate:
    """ASGI middleware: an HTTP request without ``Authorization: Bearer <token>`` is answered 401."""

    def __init__(self, app, token: str) -> None:
        self.app = app
        self.token = token.encode()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            got = b""
            for key, value in scope.get("headers", ()):
                if key.lower() == b"authorization":
                    got = value
                    break
            scheme, _, given = got.partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(given.strip(), self.token):
                body = b'{"error": "unauthorized", "message": "a bearer token is required"}'
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"www-authenticate", b'Bearer realm="cortexctl"'),
                                        (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def start(s: Serving) -> MCPServer:
    """The server of ``cortexctl mcp`` over stdio, built (on the start-up thread, ``serve/early.py``)
    over the ``Serving`` the early answers share; its Cortex made now if no early call has (so a
    store that cannot be served fails the start, as ever)."""
    _quiet_stdio()
    s.cx  # noqa: B018 - made here, on this thread, if not yet
    return build(s)


def run_stdio(app: MCPServer, wire) -> None:
    """Serve one stdio session over ``wire`` (``serve/early.py``: the client's messages, the early
    ones first, and stdout) until the client closes stdin: ``MCPServer.run_stdio_async`` with the
    streams given."""
    import anyio
    from mcp.server.stdio import stdio_server

    async def session() -> None:
        async with stdio_server(anyio.wrap_file(wire), anyio.wrap_file(wire)) as (read, write):
            lowlevel = app._lowlevel_server
            await lowlevel.run(read, write, lowlevel.create_initialization_options())

    anyio.run(session)


def serve(cx: Cortex, *, transport: str = "stdio", host: str = "127.0.0.1", port: int = 8765,
          token: str | None = None) -> None:
    """Serve until stdin closes (stdio, without the early answers: ``cortexctl mcp`` serves stdio
    through ``serve/early.py``) or the process is interrupted (http)."""
    import anyio

    _quiet_stdio()
    app = build(cx)
    if transport == "stdio":
        anyio.run(app.run_stdio_async)
        return
    import uvicorn

    assert token, "the http transport needs a token"
    asgi = BearerGate(app.streamable_http_app(host=host), token)
    where = f"[{host}]" if ":" in host else host
    from cortexctl.dsn import redact

    sys.stderr.write(f"cortexctl mcp: serving {redact(cx.store.location)} as {cx.actor} at http://{where}:{port}/mcp\n")
    sys.stderr.flush()
    config = uvicorn.Config(asgi, host=host, port=port, log_level="warning", lifespan="on")
    anyio.run(uvicorn.Server(config).serve)


__all__ = ["build", "serve", "start", "run_stdio", "Serving", "BearerGate"]
