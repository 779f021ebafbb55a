"""``cortexctl mcp``: the store as an MCP server, on the official ``mcp`` SDK (2.x, ``MCPServer``).

Every tool is thin over the engine and answers with the document ``--json``
prints for the same command (``to_json()`` of the engine's result, or an
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
import logging
import sys
import threading
from typing import Annotated, Any, Callable, Literal

import orjson
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from cortexctl import __version__
from cortexctl.engine.cortex import Cortex
from cortexctl.errors import CortexError, NotFound
from cortexctl.memory.types import TYPES

log = logging.getLogger("cortexctl.serve")

# A tool's result: a CallToolResult whose structured content is a JSON object (the --json document).
Result = Annotated[CallToolResult, dict[str, Any]]

INSTRUCTIONS = """Long-term memory over a local cortexctl store.
Typical loop: `context` (or `pinned`) at the start of a task; `find` to look things up and `show` to
read one memory; `write`/`remember`/`outcome` to record what was learned; `attest` with the memory URIs
you relied on and whether the task succeeded, so salience learns what helps; `compact` to fit the
memories in context into a token budget (a checkpoint `checkpoint_load` reloads).
References (REF) are URIs (cortex://m/<ID>), IDs, or the short refs find shows.
Results are the same JSON documents `cortexctl <command> --json` prints."""


def _doc(value: Any) -> dict:
    """The value as the CLI's --json serializer writes it (orjson, non-string keys, str() fallback)."""
    return orjson.loads(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS, default=str))


def _ok(doc: dict) -> CallToolResult:
    doc = _doc(doc)
    text = orjson.dumps(doc, option=orjson.OPT_NON_STR_KEYS).decode()
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=doc)


def _failed(message: str, doc: dict | None = None) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], structured_content=doc, is_error=True)


def error_line(err: CortexError) -> str:
    """The engine's one-line message, with its hint as the CLI shows it."""
    return err.message + (f" ({err.hint})" if err.hint else "")


def validation_line(tool: str, exc: ValidationError) -> str:
    """A pydantic ValidationError of a tool's arguments as one line that names each argument."""
    parts = []
    for e in exc.errors():
        where = ".".join(str(p) for p in e.get("loc", ())) or "arguments"
        parts.append(f"{where}: {e.get('msg', 'invalid')}")
    return f"bad arguments to {tool}: " + "; ".join(parts)


class Serving:
    """One server's state: the Cortex it serves and the lock that serializes its calls."""

    def __init__(self, cx: Cortex) -> None:
        self.cx = cx
        self.lock = threading.Lock()

    def call(self, name: str, body: Callable[[Cortex], Any]) -> CallToolResult:
        """Run one tool body under the lock; its document, or its error as an isError result."""
        with self.lock:
            try:
                doc = body(self.cx)
            except CortexError as err:
                log.info("%s: %s", name, err.message)
                return _failed(error_line(err), err.to_json())
            except Exception as exc:  # noqa: BLE001 - a bug must not take the server down
                log.exception("%s: internal error", name)
                return _failed(f"internal error: {type(exc).__name__}: {exc} (this is a bug, please report it)",
                               {"error": "internal", "message": str(exc), "exit_code": 70})
        for w in doc.get("warnings", ()) if isinstance(doc, dict) else ():
            log.warning("%s: %s", name, w)
        return _ok(doc)

    def read(self, body: Callable[[Cortex], str]) -> str:
        """A resource's text under the lock; a NotFound is the SDK's not-found error, others a ResourceError."""
        with self.lock:
            try:
                return body(self.cx)
            except NotFound as err:
                raise ResourceNotFoundError(error_line(err)) from None
            except CortexError as err:
                raise ResourceError(error_line(err)) from None


# -- argument types, with the descriptions a model reads ------------------------------------
Ref = Annotated[str, Field(description="A memory: its URI (cortex://m/<ID>), its ID, or a short ref find showed.")]
Form = Literal["short", "medium", "full"]
Texts = list[str]
Goal = Annotated[str, Field(description="The current task, as you would state it.")]
Budget = Annotated[int | None, Field(description="Token budget (default from config).")]


def _tools(s: Serving) -> list[Tool]:
    """Every tool, declared with its schema (from the signature), description and annotations."""
    from cortexctl.engine import documents
    from cortexctl.engine.results import FindQuery

    def find(
        near: Annotated[str | None, Field(description="Find by meaning: text to search for. Omit for "
                                                      "salience order.")] = None,
        types: Annotated[Texts, Field(description=f"Only these types ({', '.join(TYPES)}).")] = [],
        tags: Annotated[Texts, Field(description="Every tag given must be present.")] = [],
        frames: Annotated[Texts, Field(description="Frames VERB, VERB:KIND or VERB:KIND:REF; all must "
                                                   "match.")] = [],
        k: Annotated[int, Field(description="At most this many results.")] = 10,
        budget_tokens: Annotated[int | None, Field(description="At most this many tokens of results, "
                                                               "each at the form shown.")] = None,
        form: Annotated[Form, Field(description="The form of each result's text.")] = "short",
        session: Annotated[str | None, Field(description="Only this session's memories (zoom in).")] = None,
        summaries: Annotated[bool, Field(description="Only session summaries (zoom out).")] = False,
        include_tombstoned: Annotated[bool, Field(description="Also forgotten memories.")] = False,
    ) -> Result:
        query = FindQuery(types=types, tags=tags, frames=frames, include_tombstoned=include_tombstoned, k=k,
                          form=form, near=near, budget_tokens=budget_tokens, session=session, summaries=summaries)

        def body(cx):
            hits, found = cx.find_with_warnings(query)
            return documents.find_document(hits, found)

        return s.call("find", body)

    def show(
        ref: Ref,
        version: Annotated[int | None, Field(description="This version instead of the latest.")] = None,
        form: Annotated[Form, Field(description="The form of the text field.")] = "full",
    ) -> Result:
        return s.call("show", lambda cx: cx.show(ref, version=version).to_json(form))

    def write(
        type: Annotated[Literal[TYPES], Field(description="The memory's type.")],  # type: ignore[valid-type]
        text: Annotated[str | None, Field(description="The main text (statement, name, topic, summary or "
                                                      "description, by type).")] = None,
        data: Annotated[dict[str, Any] | None, Field(description="The type's other fields as an object "
                                                                 "(text wins over its main field).")] = None,
        tags: Annotated[Texts, Field(description="Tags.")] = [],
        frames: Annotated[Texts, Field(description="Frames VERB:KIND:REF.")] = [],
        importance: Annotated[int, Field(description="Declared importance 0-10.")] = 5,
        visibility: Literal["private", "scoped", "public"] = "private",
        confidence: Annotated[float, Field(description="Confidence in this version, 0-1.")] = 1.0,
        session: Annotated[str | None, Field(description="The session this memory belongs to.")] = None,
        short_form: Annotated[str | None, Field(description="Your own short form (<= 50 tokens).")] = None,
        medium_form: Annotated[str | None, Field(description="Your own medium form (<= 200 tokens).")] = None,
        dedupe: Annotated[bool, Field(description="When a live memory of yours has the same type and text, "
                                                  "answer with it and write nothing.")] = False,
    ) -> Result:
        forms = {k: v for k, v in (("short", short_form), ("medium", medium_form)) if v is not None} or None
        return s.call("write", lambda cx: cx.write(
            type, text, data=data, tags=tags, frames=frames, importance=importance, visibility=visibility,
            confidence=confidence, forms=forms, session=session, dedupe=dedupe).to_json())

    def update(
        ref: Ref,
        text: Annotated[str | None, Field(description="New main text.")] = None,
        data: Annotated[dict[str, Any] | None, Field(description="Fields to replace, as an object.")] = None,
        confidence: Annotated[float | None, Field(description="Confidence in the new version, 0-1.")] = None,
        short_form: Annotated[str | None, Field(description="Your own short form (<= 50 tokens).")] = None,
        medium_form: Annotated[str | None, Field(description="Your own medium form (<= 200 tokens).")] = None,
    ) -> Result:
        forms = {k: v for k, v in (("short", short_form), ("medium", medium_form)) if v is not None} or None
        return s.call("update", lambda cx: cx.update(ref, text, data=data, confidence=confidence,
                                                     forms=forms).to_json())

    def forget(ref: Ref, reason: Annotated[str, Field(description="Why it is forgotten.")]) -> Result:
        return s.call("forget", lambda cx: cx.forget(ref, reason=reason).to_json())

    def remember(
        text: Annotated[str, Field(description="The fact.")],
        user: Annotated[bool, Field(description="A fact about the user (part of the pinned user profile; "
                                                "a repeat touches the existing one).")] = False,
    ) -> Result:
        return s.call("remember", lambda cx: cx.remember(text, user=user).to_json())

    def outcome(
        text: Annotated[str, Field(description="What was done and how it ended.")],
        status: Literal["success", "failure", "partial"],
        intent: Annotated[str | None, Field(description="The intent this outcome belongs to.")] = None,
    ) -> Result:
        return s.call("outcome", lambda cx: cx.outcome(text, status=status, intent=intent).to_json())

    def attest(
        intent: Annotated[str, Field(description="The intent's ID.")],
        outcome: Literal["success", "failure"],
        cited: Annotated[Texts, Field(description="The memories the intent relied on (URIs, IDs or refs), "
                                                  "1 to 256.")],
        reason: Annotated[str | None, Field(description="Why it failed (factual_error and wrong_assumption "
                                                        "lower citations).")] = None,
    ) -> Result:
        return s.call("attest", lambda cx: cx.attest(intent, outcome, cited, reason=reason).to_json())

    def compact(
        intent: Annotated[str, Field(description="The intent's ID.")],
        step: Annotated[str, Field(description="The step's ID.")],
        budget_tokens: Annotated[int, Field(description="The token budget for kept memories and stubs.")],
        in_context: Annotated[Texts, Field(description="The memories in context (URIs, IDs or refs).")],
        load_bearing: Annotated[Texts, Field(description="Memories to keep whole.")] = [],
    ) -> Result:
        return s.call("compact", lambda cx: cx.compact(intent, step, budget_tokens, in_context,
                                                       load_bearing=load_bearing).to_json())

    def checkpoint_load(
        intent: Annotated[str, Field(description="The intent's ID.")],
        step: Annotated[str, Field(description="The step's ID.")],
    ) -> Result:
        return s.call("checkpoint_load", lambda cx: cx.load_checkpoint(intent, step).to_json())

    def context(
        goal: Goal,
        query: Annotated[str | None, Field(description="Retrieve by this text instead of the goal.")] = None,
        budget_tokens: Budget = None,
    ) -> Result:
        return s.call("context", lambda cx: cx.context_block(goal, query=query,
                                                             budget_tokens=budget_tokens).to_json())

    def pinned(goal: Goal, budget_tokens: Budget = None) -> Result:
        return s.call("pinned", lambda cx: cx.pinned(goal, budget_tokens=budget_tokens).to_json())

    def patterns(goal: Goal) -> Result:
        return s.call("patterns", lambda cx: documents.PatternsAnswer(goal, cx.patterns(goal)).to_json())

    def session_add(
        session: Annotated[str, Field(description="The session's ID.")],
        prompt: Annotated[str, Field(description="What the user asked.")],
        response: Annotated[str, Field(description="What the agent answered.")],
        thought: Annotated[str | None, Field(description="The agent's reasoning.")] = None,
        reopen: Annotated[bool, Field(description="Add to a summarized session (its summary is "
                                                  "forgotten).")] = False,
    ) -> Result:
        return s.call("session_add", lambda cx: cx.session_add(session, prompt, response, thought,
                                                               reopen=reopen).to_json())

    def session_summarize(
        session: Annotated[str | None, Field(description="The session to summarize.")] = None,
        pending: Annotated[bool, Field(description="Every session with turns and no summary.")] = False,
    ) -> Result:
        return s.call("session_summarize", lambda cx: documents.summaries_document(
            cx.session_summarize(session, pending=pending)))

    def healthcheck() -> Result:
        return s.call("healthcheck", lambda cx: cx.healthcheck())

    def ann(title: str, *, read_only: bool = False, destructive: bool = False, idempotent: bool = False,
            open_world: bool = False) -> ToolAnnotations:
        return ToolAnnotations(title=title, read_only_hint=read_only,
                               destructive_hint=destructive,
                               idempotent_hint=True if read_only else idempotent, open_world_hint=open_world)

    RO = {"read_only": True}
    table = [
        (find, "Find memories by meaning (near), type, tag and frame. Three lanes (lexical, semantic, "
               "salience) are merged; each result says which lanes found it and why it ranked. Without near: "
               "salience order. Read-only: find never changes salience.", ann("Find memories", **RO)),
        (show, "Read one memory: its data, forms, head fields and history position, at its latest version "
               "or a given one.", ann("Show a memory", **RO)),
        (write, "Write a new typed memory; answers with its URI. A live memory of yours with the same type "
                "and text is named in warnings (dedupe: answer with it instead).", ann("Write a memory")),
        (update, "Write a new version of a memory (given fields replace the current ones); old versions "
                 "stay readable with show(version=N).", ann("Update a memory")),
        (forget, "Tombstone a memory: hidden from find, history kept, updates refused (the shell's "
                 "`cortexctl unforget` undoes it).", ann("Forget a memory", destructive=True)),
        (remember, "Remember a fact about the world, or about the user (user=true; a repeat is not written "
                   "again).", ann("Remember a fact")),
        (outcome, "Record how a task ended: an event with status success, failure or partial.",
         ann("Record an outcome")),
        (attest, "Tell the store which memories an intent relied on and whether it succeeded: their use "
                 "counts and citations change and salience learns (rate limited per intent).",
         ann("Attest an outcome")),
        (compact, "Fit the memories in context into a token budget: load-bearing ones, identities, hard "
                  "constraints and active goals kept whole, the rest as stubs {ref, short form, salience}; "
                  "stores a checkpoint (replacing one for the same intent and step). Over budget: an error, "
                  "nothing stored.", ann("Compact the context", destructive=True, idempotent=True)),
        (checkpoint_load, "Reload the checkpoint compact stored for an intent and step.",
         ann("Load a checkpoint", **RO)),
        (context, "Everything for the prompt in one call: the pinned block, the memories relevant to the "
                  "goal (or query), and proven procedural patterns, within a token budget; 'text' is "
                  "ready to paste.", ann("Context for a task", **RO)),
        (pinned, "The block to keep in every turn: identity, inviolable rules, hard constraints, user "
                 "profile and the goal, within the pinned budget.", ann("Pinned block", **RO)),
        (patterns, "Proven procedural patterns (reinforced enough times) whose trigger matches the goal, "
                   "best first.", ann("Proven patterns", **RO)),
        (session_add, "Save one turn (prompt, thought, response) of a session as a memory.",
         ann("Save a session turn")),
        (session_summarize, "Summarize a session (or every pending one) with the configured chat model "
                            "and store the summary; find(summaries=true) searches them.",
         ann("Summarize a session", open_world=True)),
        (healthcheck, "Is the store fine? Status (healthy, degraded, unhealthy), counts, index, providers "
                      "and last backup; secrets never appear.", ann("Health check", **RO)),
    ]
    return [Tool.from_function(fn, name=fn.__name__, description=desc, annotations=a) for fn, desc, a in table]


def build(cx: Cortex) -> MCPServer:
    """The MCP server for one Cortex: its tools, resources and argument checking."""
    s = Serving(cx)
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
        return orjson.dumps(_doc(s.read(lambda cx: cx.show(id, version=version).to_json("full")))).decode()

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
        return s.read(lambda cx: cx.pinned(NO_GOAL).text())

    @app.resource("cortex://pinned/{goal}", name="pinned-for-goal", mime_type="text/plain",
                  description=pinned_help + " The goal is the rest of the URI (percent-encoded).")
    def pinned_for_goal(goal: str) -> str:
        from urllib.parse import unquote

        return s.read(lambda cx: cx.pinned(unquote(goal)).text())

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


def serve(cx: Cortex, *, transport: str = "stdio", host: str = "127.0.0.1", port: int = 8765,
          token: str | None = None) -> None:
    """Serve until stdin closes (stdio) or the process is interrupted (http)."""
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
    sys.stderr.write(f"cortexctl mcp: serving {cx.store.path} as {cx.actor} at http://{where}:{port}/mcp\n")
    sys.stderr.flush()
    config = uvicorn.Config(asgi, host=host, port=port, log_level="warning", lifespan="on")
    anyio.run(uvicorn.Server(config).serve)


__all__ = ["build", "serve", "Serving", "BearerGate"]
