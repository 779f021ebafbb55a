"""A tool call's body and answer without the MCP SDK: what ``server.py`` serves through the SDK and
``early.py`` answers before the SDK has loaded, written once.

``Serving.call`` runs an operation's engine call under the server's lock and gives an ``Answer``
(the text, the structured document, whether it is an error); ``server.py`` makes it the SDK's
``CallToolResult``, ``early.py`` writes it as the SDK would on the wire (``wire_result``).
``exact_values`` is the part of the SDK's argument checking the early front can do exactly: it
gives the values the SDK would hand the tool's body, or None for anything it cannot be sure of
(left to the SDK). This module imports neither the SDK nor pydantic.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from dataclasses import dataclass
from typing import Any, Callable

import orjson

from cortexctl.dsn import hide_credentials, redact_text
from cortexctl.errors import CortexError, StoreBusy, bad_path, blocked_path, no_space
from cortexctl.ops import Operation

log = logging.getLogger("cortexctl.serve")

BUSY_HINT = "retry the call; the server waits for a busy store as long as its --wait, set when it starts"


def to_doc(value: Any) -> Any:
    """The value as the CLI's --json serializer writes it (orjson, non-string keys, str() fallback)."""
    return orjson.loads(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS, default=str))


def error_line(err: CortexError) -> str:
    """The engine's one-line message, with its hint as the CLI shows it."""
    return err.message + (f" ({err.hint})" if err.hint else "")


def for_client(err: CortexError) -> CortexError:
    """``err`` as a client is shown it: credentials hidden, and a busy store's hint saying what a
    client can do (a call has no --wait of its own)."""
    hide_credentials(err)
    if isinstance(err, StoreBusy):
        err.hint = BUSY_HINT
    return err


@dataclass(frozen=True)
class Answer:
    """A tool call's result: its text, its structured content (None: none) and whether it failed."""

    text: str
    doc: dict | None = None
    is_error: bool = False


def ok(doc: Any) -> Answer:
    doc = to_doc(doc)
    return Answer(orjson.dumps(doc, option=orjson.OPT_NON_STR_KEYS).decode(), doc)


def failed(message: str, doc: dict | None = None) -> Answer:
    return Answer(message, doc, True)


def wire_result(answer: Answer) -> dict:
    """The ``result`` of a tools/call response as the SDK writes it (``CallToolResult`` dumped by
    alias, None left out) on the protocol versions ``early.py`` answers calls on."""
    doc: dict[str, Any] = {"content": [{"type": "text", "text": answer.text}]}
    if answer.doc is not None:
        doc["structuredContent"] = answer.doc
    doc["isError"] = answer.is_error
    return doc


class Serving:
    """One server's state: the Cortex it serves (made on first use by ``make``, or given) and the lock
    that serializes its calls."""

    def __init__(self, cx: Any = None, *, make: Callable[[], Any] | None = None) -> None:
        self._cx, self._make = cx, make
        self.lock = threading.Lock()
        self._made = threading.Lock()

    @property
    def cx(self) -> Any:
        """The Cortex; made once, whichever thread asks first (its errors are raised to that caller)."""
        if self._cx is None:
            with self._made:
                if self._cx is None:
                    assert self._make is not None
                    self._cx = self._make()
        return self._cx

    def call(self, name: str, body: Callable[[Any], Any]) -> Answer:
        """Run one tool body under the lock; its document, or its error as an isError answer."""
        with self.lock:
            try:
                doc = body(self.cx)
            except CortexError as err:
                for_client(err)
                log.info("%s: %s", name, err.message)
                return failed(error_line(err), err.to_json())
            except Exception as exc:  # noqa: BLE001 - a bug must not take the server down
                full = no_space(exc) or bad_path(exc) or blocked_path(exc)
                if full is not None:
                    return failed(error_line(full), full.to_json())
                log.exception("%s: internal error", name)
                text = redact_text(str(exc))
                return failed(f"internal error: {type(exc).__name__}: {text} (this is a bug, please report it)",
                              {"error": "internal", "message": text, "exit_code": 70})
        for w in doc.get("warnings", ()) if isinstance(doc, dict) else ():
            log.warning("%s: %s", name, w)
        return ok(doc)

    def run(self, op: Operation, values: dict[str, Any]) -> Answer:
        """An operation's tool body: its engine call with the checked values, answering its document."""
        return self.call(op.name, lambda cx: op.run(cx, **values).to_json())


# -- the arguments the early front can check exactly as the SDK does ---------------------------------
MAX_DEPTH = 16  # deeper arguments are left to the SDK (its JSON parser has a nesting limit of its own)
_INT_LIMIT = 2 ** 63


def plain_json(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` (as Python's json module read it) is read alike by the SDK's JSON parser:
    text that is valid UTF-8 (no lone surrogate escapes), finite numbers, 64-bit integers, no deep
    nesting."""
    if depth > MAX_DEPTH:
        return False
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if isinstance(value, bool) or value is None:
        return True
    if isinstance(value, int):
        return -_INT_LIMIT <= value < _INT_LIMIT
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(plain_json(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(plain_json(k, depth + 1) and plain_json(v, depth + 1) for k, v in value.items())
    return False


def _kept_text(value: str) -> bool:
    """A text argument the SDK passes on as text: its pre-parsing (``FuncMetadata.pre_parse_json``)
    replaces a string that reads as a JSON array, object, true, false or null with that value for a
    parameter not typed plain ``str``; such strings are left to the SDK whatever the type."""
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):
        return True
    return isinstance(parsed, (str, int, float)) and not isinstance(parsed, bool)


def _exact(p: Any, value: Any) -> tuple[bool, Any]:
    """(True, the value the SDK's validation gives) when ``value`` is one it takes as is, else (False, _)."""
    if value is None:
        return (not p.many and not p.required and p.default is None), None
    if p.many:
        good = isinstance(value, list) and all(isinstance(v, str) for v in value)
        return good, list(value) if good else None
    if p.choices is not None:
        return isinstance(value, str) and value in p.choices and _kept_text(value), value
    if p.type is str:
        return isinstance(value, str) and _kept_text(value), value
    if p.type is bool:
        return isinstance(value, bool), value
    if p.type is int:
        return type(value) is int, value
    if p.type is float:
        good = type(value) in (int, float)
        return good, float(value) if good else None
    if p.type is dict:
        return isinstance(value, dict), value
    return False, None


def exact_values(op: Operation, arguments: Any) -> dict[str, Any] | None:
    """The keyword values the SDK would call ``op``'s tool body with for ``arguments`` (every
    parameter, defaults filled in), when the SDK's checks (the server's ``check_arguments`` and the
    tool's pydantic model) would take them; None when they would not, or when this cannot tell."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict) or not plain_json(arguments):
        return None
    params = {p.name: p for p in op.params}
    if not set(arguments) <= set(params):
        return None
    values: dict[str, Any] = {}
    for name, p in params.items():
        if name not in arguments:
            if p.required:
                return None
            values[name] = [] if p.many else p.default
            continue
        good, value = _exact(p, arguments[name])
        if not good:
            return None
        values[name] = value
    return values
