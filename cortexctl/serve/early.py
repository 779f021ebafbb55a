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
import sys
import threading
from pathlib import Path
from typing import Any, Callable

CACHE_FILE = "mcp-answers.json"
MAX_CLIENTS = 8  # initialize params kept in the cache (one per client program, in practice)


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def cache_path() -> Path:
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("cortexctl", appauthor=False)) / CACHE_FILE


def fingerprint() -> str:
    """What the SDK's answers to initialize and tools/list depend on, as one hash."""
    import importlib.util

    from cortexctl import __version__, ops

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


def serve_stdio(start: Callable[[], Any], run: Callable[[Any, Wire], None]) -> None:
    """Serve over stdio: ``start()`` (on a thread) imports the SDK and builds the server; ``run(app,
    wire)`` serves the rest of the session over ``wire``. Until the server is built, ``initialize``
    and ``tools/list`` are answered from the cache when it holds them (the module docstring)."""
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
    thread.start()
    try:
        try:
            answers = Answers(cache_path(), fingerprint())
        except Exception:  # noqa: BLE001 - no cache is the plain start, never a failure
            answers = Answers(None, "")
        reader = os.fdopen(in_fd, "rb", closefd=False)
        wire = Wire(reader, out_fd, answers)
        _early(wire, ready)
        thread.join()
        if "error" in built:
            raise built["error"]
        run(built["app"], wire)
    finally:
        sys.stdout.flush()
        release()


def _early(wire: Wire, ready: threading.Event) -> None:
    """Answer what the cache holds until the SDK is ready or a message needs it."""
    answers = wire.answers
    while not ready.is_set():
        raw = wire.reader.readline()
        if not raw:
            return
        wire.replay.append(raw)
        try:
            doc = json.loads(raw)
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
        elif method == "tools/list":
            result = answers.tools_list(wire.init, _canon(doc.get("params")))
            if result is None:
                return
            wire.replay.pop()
            wire.send(doc["id"], result)
        else:
            return
