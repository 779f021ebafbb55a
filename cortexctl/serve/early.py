"""The stdio front of ``cortexctl mcp``: the first answers before the MCP SDK has loaded.

Importing the SDK (its protocol types are pydantic models) takes most of a second, and a client
waits for it before its ``initialize`` is answered. So the server starts the SDK on a thread and,
meanwhile, answers ``initialize`` and ``tools/list`` itself, with the SDK's own answers of an earlier
start, kept in the user cache directory (``mcp-answers.json``). They are used only when:

- the cache's key matches this start's: the cortexctl version, the Python version, the files of the
  SDK and pydantic (path, size, modification time), this package's ``server.py`` and every tool's
  declaration (``cortexctl/ops``); anything else and the whole cache is dropped;
- the client's ``initialize`` params are the ones the cached answer was given to, byte for byte
  once canonical (the SDK negotiates the protocol version from them), and ``tools/list`` comes
  with the same params (no cursor, or the same one) after that ``initialize``.

After an ``initialize`` answered so (on a protocol version in CALL_VERSIONS), a ``tools/call`` is
answered too, by the server's own tool body (``calls.py``, shared with ``server.py``) and written
as the SDK writes a result, when the request is of the plain shape and ``calls.exact_values`` can
tell its arguments are ones the SDK's checks take, and to which values; a bad argument, an unknown
tool or anything unusual waits for the SDK and its own error document. Such a call is not handed
on. The SDK's import starts at once when the cache holds nothing, else when a message needs it or
none has come for IDLE_S: importing it while a call runs would slow both (one GIL).

Anything else (another message, another client, no cache) waits for the SDK, as before. When the
SDK is ready the messages read so far are handed to it in order; ``initialize`` is among them (the
SDK's session has to see the handshake), and its second answer is not written, since the client
has had the first. A ``tools/list`` answered early is not handed on. The answers the SDK gives to
``initialize`` and the first ``tools/list`` are recorded in the cache for the next start.

As the SDK's own stdio transport does, the wire is served from private duplicates of fd 0 and 1
while fd 0 reads the null device and fd 1 writes to stderr, so nothing else reaches stdout; both
are restored at the end. This module imports nothing heavy: the SDK is imported by ``start``.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import select
import sys
import threading
from pathlib import Path
from typing import Any, Callable

from cortexctl import ops
from cortexctl.ops import Operation
from cortexctl.serve.calls import Serving, exact_values, plain_json, wire_result

CACHE_FILE = "mcp-answers.json"
MAX_CLIENTS = 8  # initialize params kept in the cache (one per client program, in practice)
# The protocol versions on which the SDK writes a tool call's result as ``calls.wire_result`` does (the
# older ones have no structuredContent; the 2026 one is not reached by initialize): calls are answered
# early only on these.
CALL_VERSIONS = ("2025-06-18", "2025-11-25")
IDLE_S = 0.1  # no message for this long: the SDK starts loading


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def cache_path() -> Path:
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("cortexctl", appauthor=False)) / CACHE_FILE


def fingerprint() -> str:
    """What the SDK's answers to initialize and tools/list depend on, as one hash."""
    import importlib.util

    from cortexctl import __version__

    h = hashlib.sha256(f"{__version__}\0{sys.version}\0".encode())
    for name in ("mcp", "mcp_types", "pydantic", "pydantic_core"):
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None else None
        if origin:
            st = os.stat(origin)
            h.update(f"{name}:{origin}:{st.st_size}:{st.st_mtime_ns}\0".encode())
    h.update(Path(__file__).with_name("server.py").read_bytes())
    for op in ops.tools():
        h.update(repr((op.name, op.params, op.read_only, op.destructive, op.idempotent, op.open_world,
                       op.tool)).encode())
    return h.hexdigest()


class Answers:
    """The cached answers of this fingerprint: initialize params -> {"initialize": result,
    "tools/list": {params: result}}."""

    def __init__(self, path: Path | None, key: str) -> None:
        """``path`` None: no cache (nothing read, nothing written)."""
        self.path, self.key = path, key
        self.by_init: dict[str, dict] = {}
        if path is None:
            return
        try:
            doc = json.loads(path.read_bytes())
            if isinstance(doc, dict) and doc.get("key") == key and isinstance(doc.get("answers"), dict):
                self.by_init = doc["answers"]
        except (OSError, ValueError, RecursionError):
            pass

    def initialize(self, init: str) -> Any | None:
        entry = self.by_init.get(init)
        return entry.get("initialize") if isinstance(entry, dict) else None

    def tools_list(self, init: str, params: str) -> Any | None:
        entry = self.by_init.get(init)
        lists = entry.get("tools/list") if isinstance(entry, dict) else None
        return lists.get(params) if isinstance(lists, dict) else None

    def record(self, init: str, method: str, result: Any, params: str | None = None) -> None:
        """Keep one answer of the SDK's, and write the cache (best effort: a cache that cannot be
        written only costs the next start its early answers)."""
        entry = self.by_init.setdefault(init, {})
        if method == "initialize":
            if entry.get("initialize") == result:
                return
            entry["initialize"] = result
        else:
            lists = entry.setdefault("tools/list", {})
            if lists.get(params) == result:
                return
            lists[params] = result
        while len(self.by_init) > MAX_CLIENTS:
            del self.by_init[next(iter(self.by_init))]
        if self.path is None:
            return
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(_canon({"key": self.key, "answers": self.by_init}), encoding="utf-8")
            os.replace(tmp, self.path)
        except (OSError, ValueError):  # ValueError: a path the OS cannot take (a NUL byte)
            try:
                tmp.unlink()
            except (OSError, ValueError):
                pass


class Wire:
    """What passes between the client and the SDK: the lines read early, replayed first; the SDK's
    answers, less the ones the client already has; the answers worth recording noted on the way."""

    def __init__(self, reader, out_fd: int, answers: Answers) -> None:
        self.reader = reader
        self.out_fd = out_fd
        self.answers = answers
        self.replay: list[bytes] = []
        self.drop: set[str] = set()  # ids of requests answered early: the SDK's answer is not written
        self.watch: dict[str, tuple[str, str, str | None]] = {}  # id -> (init params, method, params)
        self.init: str | None = None
        self.recorded = False
        self._out = b""

    # -- the early part, on the main thread --
    def send(self, id_: Any, result: Any) -> None:
        line = _canon({"jsonrpc": "2.0", "id": id_, "result": result}) + "\n"
        os.write(self.out_fd, line.encode("utf-8"))

    def note(self, doc: Any) -> None:
        """Watch a request whose answer the cache lacks, to record the SDK's."""
        if self.recorded or not isinstance(doc, dict) or "id" not in doc:
            return
        method = doc.get("method")
        if method == "initialize" and self.init is None:
            self.init = _canon(doc.get("params"))
            if self.answers.initialize(self.init) is None:
                self.watch[_canon(doc["id"])] = (self.init, method, None)
        elif method == "tools/list" and self.init is not None:
            params = _canon(doc.get("params"))
            if self.answers.tools_list(self.init, params) is None:
                self.watch[_canon(doc["id"])] = (self.init, method, params)
            self.recorded = True  # the first tools/list after initialize is the one recorded

    # -- the SDK's streams (anyio wraps them; readline and write run on worker threads) --
    def readline(self) -> str:
        if self.replay:
            raw = self.replay.pop(0)
        else:
            raw = self.reader.readline()
            if raw and not self.recorded:
                try:
                    self.note(json.loads(raw))
                except (ValueError, RecursionError):  # not JSON, or nested past the parser: the SDK says so
                    pass
        return raw.decode("utf-8", errors="replace")

    def write(self, text: str) -> int:
        self._out += text.encode("utf-8")
        while b"\n" in self._out:
            line, _, self._out = self._out.partition(b"\n")
            if self._keep(line):
                os.write(self.out_fd, line + b"\n")
        return len(text)

    def _keep(self, line: bytes) -> bool:
        if not self.drop and not self.watch:
            return True
        try:
            doc = json.loads(line)
        except (ValueError, RecursionError):
            return True
        if not isinstance(doc, dict) or "method" in doc or "id" not in doc:
            return True
        key = _canon(doc["id"])
        if key in self.drop:
            self.drop.discard(key)
            return False
        watched = self.watch.pop(key, None)
        if watched is not None and "result" in doc:
            init, method, params = watched
            self.answers.record(init, method, doc["result"], params)
        return True

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


def _claim() -> tuple[int, int, Callable[[], None]]:
    """Private duplicates of fd 0 and fd 1; fd 0 then reads the null device and fd 1 writes to stderr."""
    in_fd = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    out_fd = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)

    def release() -> None:
        os.dup2(in_fd, 0)
        os.dup2(out_fd, 1)

    return in_fd, out_fd, release


class Lines:
    """The client's lines, read from fd ``fd`` with a buffer of our own, so that whether one is
    waiting can be asked (``waiting``) without reading it."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = bytearray()
        self.scanned = 0  # the buffer has no newline before this
        self.eof = False

    def readline(self) -> bytes:
        while True:
            end = self.buf.find(b"\n", self.scanned)
            if end >= 0:
                line = bytes(self.buf[:end + 1])
                del self.buf[:end + 1]
                self.scanned = 0
                return line
            self.scanned = len(self.buf)
            if self.eof:
                line, self.buf, self.scanned = bytes(self.buf), bytearray(), 0
                return line
            chunk = os.read(self.fd, 1 << 16)
            if chunk:
                self.buf += chunk
            else:
                self.eof = True

    def waiting(self, timeout: float) -> bool:
        """Whether a line (or the end of input) can be read within ``timeout`` seconds."""
        if self.eof or self.buf.find(b"\n", self.scanned) >= 0:
            return True
        ready, _, _ = select.select([self.fd], [], [], timeout)
        return bool(ready)


def serve_stdio(start: Callable[[], Any], run: Callable[[Any, Wire], None], serving: Serving | None = None) -> None:
    """Serve over stdio: ``start()`` (on a thread) imports the SDK and builds the server; ``run(app,
    wire)`` serves the rest of the session over ``wire``. Until the server is built, ``initialize``
    and ``tools/list`` are answered from the cache when it holds them, and the tool calls of
    ``serving`` whose arguments can be checked exactly (the module docstring)."""
    sys.stdout.flush()
    in_fd, out_fd, release = _claim()
    built: dict[str, Any] = {}
    ready = threading.Event()

    def build() -> None:
        try:
            built["app"] = start()
        except BaseException as exc:  # noqa: BLE001 - raised again on the main thread
            built["error"] = exc
        finally:
            ready.set()

    thread = threading.Thread(target=build, name="cortexctl-mcp-start", daemon=True)

    def go() -> None:
        if thread.ident is None:
            thread.start()

    try:
        try:
            answers = Answers(cache_path(), fingerprint())
        except Exception:  # noqa: BLE001 - no cache is the plain start, never a failure
            answers = Answers(None, "")
        if not answers.by_init:
            go()  # nothing to answer early: the SDK at once
        wire = Wire(Lines(in_fd), out_fd, answers)
        _early(wire, ready, go, serving)
        go()
        thread.join()
        if "error" in built:
            raise built["error"]
        run(built["app"], wire)
    finally:
        sys.stdout.flush()
        release()


def _no_twins(pairs: list[tuple[str, Any]]) -> dict:
    """An object without repeated keys (which JSON parsers read differently); else ValueError."""
    doc = dict(pairs)
    if len(doc) != len(pairs):
        raise ValueError("a repeated key")
    return doc


def _call_of(doc: dict, by_name: dict[str, Operation]) -> tuple[Operation, dict[str, Any]] | None:
    """The operation and the values of a tools/call request the early front can answer exactly as the
    SDK would, or None: a request of the plain shape (no other members, an integer or text id, a
    known tool's name and its arguments, nothing else) whose arguments ``exact_values`` takes."""
    id_ = doc.get("id")
    if (not set(doc) <= {"jsonrpc", "id", "method", "params"} or doc.get("jsonrpc") != "2.0"
            or isinstance(id_, bool) or not isinstance(id_, (int, str)) or not plain_json(id_)):
        return None
    params = doc.get("params")
    if not isinstance(params, dict) or not set(params) <= {"name", "arguments"}:
        return None
    op = by_name.get(params.get("name")) if isinstance(params.get("name"), str) else None
    if op is None:
        return None
    values = exact_values(op, params.get("arguments"))
    return None if values is None else (op, values)


def _early(wire: Wire, ready: threading.Event, go: Callable[[], None], serving: Serving | None) -> None:
    """Answer what the cache holds, and the tool calls that can be answered exactly, until the SDK is
    ready or a message needs it. The SDK is started (``go``) at the first moment no message waits
    (IDLE_S without one), or when one needs it: importing it while a call runs slows both."""
    answers = wire.answers
    by_name: dict[str, Operation] = {}
    calls_ok = False  # initialize answered early, on a protocol version whose call results are known
    while not ready.is_set():
        if not wire.reader.waiting(IDLE_S):
            go()
        raw = wire.reader.readline()
        if not raw:
            return
        wire.replay.append(raw)
        try:
            doc = json.loads(raw, object_pairs_hook=_no_twins)
        except (ValueError, RecursionError):
            return
        if not isinstance(doc, dict):
            return
        method = doc.get("method")
        if method == "notifications/initialized":
            continue
        wire.note(doc)
        if "id" not in doc or wire.init is None:
            return
        if method == "initialize" and wire.replay == [raw]:
            result = answers.initialize(wire.init)
            if result is None:
                return
            wire.send(doc["id"], result)
            wire.drop.add(_canon(doc["id"]))
            calls_ok = (serving is not None and isinstance(result, dict)
                        and result.get("protocolVersion") in CALL_VERSIONS)
            if calls_ok:
                by_name = {op.name: op for op in ops.tools()}
        elif method == "tools/list":
            result = answers.tools_list(wire.init, _canon(doc.get("params")))
            if result is None:
                return
            wire.replay.pop()
            wire.send(doc["id"], result)
        elif method == "tools/call" and calls_ok and serving is not None:
            call = _call_of(doc, by_name)
            if call is None:
                return
            try:
                serving.cx  # noqa: B018 - a store that cannot be served: the SDK's start says so
            except Exception:  # noqa: BLE001
                return
            op, values = call
            wire.replay.pop()
            wire.send(doc["id"], wire_result(serving.run(op, values)))
        else:
            return
