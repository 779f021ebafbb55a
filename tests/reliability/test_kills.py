"""SIGKILL across the commands that write: import, update, supersede, revert, attest, compact, reindex,
consolidate, restore (replace and merge, plain and encrypted bundles), backup (plain and encrypted) and
the MCP server in the middle of a tool call.

Each kill is one real ``cortexctl`` process, killed after a random share of what a whole run of it
takes, or once the work it is doing shows on disk (its scratch directory appears); a kill that
arrives after the process ended does not count, and the loop goes on until enough have landed.
After every kill: the workers it started are gone, the next command that writes succeeds (or is
busy, exit 4, then succeeds), ``verify`` is green, an import left whole batches only, nothing is
left in the store's scratch area, beside the store, inside it or in $TMPDIR (a directory of the
test's own), and at the end every write that was acknowledged is in the store.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from tests import tamper
from tests.conftest import cortexctl_argv, leftovers

BASE = 2000  # memories in the store every scenario starts from
IMPORT_LINES, IMPORT_BATCH = 12000, 1000
RECLAIM_LINES = 6000  # an import into an empty store that leaves most of the file free: rewritten
KEY = "correct horse battery staple"


class Rig:
    """A store (a copy of the base), its own $TMPDIR, and the helpers every scenario needs."""

    def __init__(self, root: Path, base: Path | None) -> None:
        self.root = root
        self.store = root / "store"
        if base is not None:
            shutil.copytree(base, self.store)
        self.tmp = root / "tmp"
        self.tmp.mkdir(parents=True)
        self.acked: list[str] = []  # statements of writes that were acknowledged (exit 0)
        self.extra: dict[str, str] = {}

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CORTEXCTL_")}
        env.update(CORTEXCTL_STORE=str(self.store), CORTEXCTL_ACTOR="alice", TMPDIR=str(self.tmp),
                   CORTEXCTL_BACKUP_KEY=KEY, **self.extra, **extra)
        return env

    def spawn(self, *args, stdin=None) -> subprocess.Popen:
        return subprocess.Popen(cortexctl_argv() + [str(a) for a in args], env=self.env(),
                                stdin=stdin if stdin is not None else subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def run(self, *args, input: bytes | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(cortexctl_argv() + [str(a) for a in args], env=self.env(), input=input,
                              capture_output=True, timeout=600)

    def ok(self, *args) -> subprocess.CompletedProcess:
        r = self.run(*args)
        assert r.returncode == 0, (args, r.returncode, r.stderr.decode()[-2000:], r.stdout.decode()[-3000:])
        return r

    def heads(self) -> int:
        return tamper.count(self.store, "heads")

    def statements(self) -> list[str]:
        return [line["versions"][-1]["data"].get("statement", "")
                for line in map(orjson.loads, self.ok("export").stdout.splitlines())]

    def after_kill(self, what: str, n: int) -> None:
        """The next writer succeeds (busy only as exit 4), verify is green, nothing is left over."""
        text = f"written after killing {what} #{n}"
        for _ in range(20):
            r = self.run("write", "fact", text, "--wait", "30")
            if r.returncode != 4:
                break
        assert r.returncode == 0 and b"Traceback" not in r.stderr, (what, n, r.returncode, r.stderr.decode())
        self.acked.append(text)
        self.ok("verify")
        self.assert_nothing_left(what, n)

    def assert_nothing_left(self, what: str, n: int = 0) -> None:
        from cortexctl.store import fold

        fold.wait_idle(self.store)  # a fold the last write started in the background, with its work
        left = leftovers(self.store, self.store.parent) + [str(p) for p in self.tmp.iterdir()]
        assert left == [], (what, n, left)

    def assert_acked_present(self) -> None:
        have = set(self.statements())
        lost = [t for t in self.acked if t not in have]
        assert lost == [], f"{len(lost)} of {len(self.acked)} acknowledged writes lost: {lost[:5]}"


def _descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (Linux /proc), best effort."""
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{p}/task/{tid}/children") as fh:
                    kids = {int(k) for k in fh.read().split()}
            except OSError:
                continue
            todo += list(kids - found)
            found |= kids
    return found


def _running(pid: int) -> bool:
    """``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def _wait_gone(pids: set[int], what: str) -> None:
    """The workers of a killed command end with it (synchronised on their exit; the bound is a
    deadline for a hang, not a measure)."""
    deadline = time.monotonic() + 60
    while any(_running(p) for p in pids):
        assert time.monotonic() < deadline, f"{what}: workers still running after their parent was killed: " \
                                            f"{[p for p in pids if _running(p)]}"
        time.sleep(0.05)


def _scratch(rig: Rig) -> Path:
    return rig.store.parent / f".{rig.store.name}.scratch"


def _kill(proc: subprocess.Popen, *, delay: float | None = None, until=None, what: str) -> bool:
    """SIGKILL ``proc`` after ``delay`` seconds or once ``until()`` holds (whichever comes first
    when both are given); True when it was still running then (the kill landed)."""
    start = time.monotonic()
    while proc.poll() is None:
        if until is not None and until():
            break
        if delay is not None and time.monotonic() - start >= delay:
            break
        time.sleep(0.002)
    kids = _descendants(proc.pid)
    if proc.poll() is not None:
        return False
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    _wait_gone(kids, what)
    return proc.returncode == -signal.SIGKILL


def _whole(rig: Rig, *args) -> float:
    """How long a whole run takes on this machine, to spread kills over (not a bound)."""
    started = time.monotonic()
    rig.ok(*args)
    return time.monotonic() - started


def _loop(what: str, want: int, attempt, *, max_tries: int = 60) -> int:
    """Call ``attempt(n)`` (one kill, True when it landed) until ``want`` kills landed."""
    landed = tries = 0
    while landed < want:
        assert tries < max_tries, f"{what}: only {landed} of {tries} kills landed mid-work"
        landed += bool(attempt(tries))
        tries += 1
    print(f"{what}: {landed} kills landed mid-work in {tries} tries")  # the counts, with -rA
    return landed


# -- the store every scenario starts from ----------------------------------------------------------
def _lines(n: int, tag: str) -> bytes:
    return b"".join(orjson.dumps({"type": "fact", "text": f"{tag} fact {i} about rotation item{i % 97}",
                                  "tags": [tag]}) + b"\n" for i in range(n))


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    root = tmp_path_factory.mktemp("kills-base")
    src = root / "m.jsonl"
    src.write_bytes(_lines(BASE, "base"))
    Rig(root, None).ok("import", src)
    return root / "store"


@pytest.fixture
def rig(tmp_path, base):
    return Rig(tmp_path, base)


# -- import -----------------------------------------------------------------------------------------
def _import_kills(rig: Rig, want: int, seed: int) -> None:
    rng = random.Random(seed)
    src = rig.root / "more.jsonl"
    src.write_bytes(_lines(IMPORT_LINES, "more"))
    args = ("import", src, "--batch-size", IMPORT_BATCH)
    spill = _scratch(rig)

    def attempt(n: int) -> bool:
        before = rig.heads()
        if n % 2 == 0:  # once the checking pass spills to disk
            landed = _kill(rig.spawn(*args), until=lambda: spill.is_dir() and any(spill.iterdir()),
                           delay=30, what="import")
        else:
            landed = _kill(rig.spawn(*args), delay=rng.uniform(0.3, 4.0), what="import")
        added = rig.heads() - before
        assert added % IMPORT_BATCH == 0 or added == IMPORT_LINES, f"a partial batch: {added} memories"
        rig.after_kill("import", n)
        return landed

    _loop("import", want, attempt)
    rig.assert_acked_present()


def test_a_killed_import_leaves_whole_batches_no_spill_and_no_worker(rig):
    """The quick one (default lane): kills once the checking pass has spilled to disk."""
    src = rig.root / "more.jsonl"
    src.write_bytes(_lines(IMPORT_LINES, "more"))
    spill = _scratch(rig)

    def attempt(n: int) -> bool:
        before = rig.heads()
        landed = _kill(rig.spawn("import", src, "--batch-size", IMPORT_BATCH),
                       until=lambda: spill.is_dir() and any(spill.iterdir()), delay=30, what="import")
        added = rig.heads() - before
        assert added % IMPORT_BATCH == 0, f"a partial batch: {added} memories"
        rig.after_kill("import", n)
        return landed

    _loop("import", 1, attempt, max_tries=10)
    rig.assert_acked_present()


@pytest.mark.slow
def test_imports_killed_at_many_moments(rig):
    _import_kills(rig, 8, 11)


def _reclaim_kills(tmp_path: Path, want: int, seed: int) -> None:
    """Imports into an empty store, killed while the file is rewritten with its live blocks only
    (store/reclaim.py): once the rewrite's scratch directory appears, or a little after."""
    rng = random.Random(seed)
    src = tmp_path / "more.jsonl"
    src.write_bytes(_lines(RECLAIM_LINES, "more"))

    def attempt(n: int) -> bool:
        rig = Rig(tmp_path / f"r{n}", None)
        spill = _scratch(rig)
        later = 0.0 if n % 2 == 0 else rng.uniform(0.0, 0.5)
        seen: list[float] = []

        def rewriting() -> bool:
            if not seen and spill.is_dir() and any(e.name.startswith("reclaim-") for e in spill.iterdir()):
                seen.append(time.monotonic())
            return bool(seen) and time.monotonic() - seen[0] >= later

        landed = _kill(rig.spawn("import", src, "--batch-size", IMPORT_BATCH), until=rewriting, delay=120,
                       what="import")
        assert seen, "the import never rewrote the file"
        assert rig.heads() == RECLAIM_LINES  # every batch committed before the rewrite began
        rig.after_kill("import (rewrite)", n)
        rig.assert_acked_present()
        return landed

    _loop("import (rewrite)", want, attempt, max_tries=20)


def test_an_import_killed_while_the_file_is_rewritten_leaves_a_whole_store(tmp_path):
    _reclaim_kills(tmp_path, 1, 5)


@pytest.mark.slow
def test_imports_killed_at_many_moments_of_the_rewrite(tmp_path):
    _reclaim_kills(tmp_path, 6, 7)


# -- update, attest, compact, reindex ---------------------------------------------------------------
def _ids(rig: Rig, n: int) -> list[str]:
    return [r[0] for r in tamper.rows(rig.store, f"SELECT id FROM heads ORDER BY id LIMIT {n}")]


def _small_command_kills(rig: Rig, what: str, want: int, make_args, seed: int, *, check=None) -> None:
    """Kill ``cortexctl <make_args(n)>`` at moments spread over a whole run of it."""
    rng = random.Random(seed)
    whole = _whole(rig, *make_args(-1))

    def attempt(n: int) -> bool:
        proc = rig.spawn(*make_args(n))
        landed = _kill(proc, delay=rng.uniform(0.1, 1.05) * whole, what=what)
        if check is not None:
            check(n, landed)
        rig.after_kill(what, n)
        return landed

    _loop(what, want, attempt)
    rig.assert_acked_present()


@pytest.mark.slow
def test_updates_killed_keep_every_acknowledged_version(rig):
    target = _ids(rig, 1)[0]
    before = []

    def args(n: int):
        before.append(tamper.count(rig.store, "versions"))
        return ("update", target, f"the rotation is now rule {n}")

    def check(n: int, landed: bool) -> None:
        assert tamper.count(rig.store, "versions") - before[-1] in (0, 1), "an update wrote half a version"

    _small_command_kills(rig, "update", 5, args, 21, check=check)


@pytest.mark.slow
def test_supersedes_killed_link_both_ways_or_neither(rig):
    pairs = []

    def args(n: int):
        old, new = (json.loads(rig.ok("write", "fact", f"the rotation rule {n} {side}", "--json").stdout)["id"]
                    for side in ("then", "now"))
        pairs.append((old, new))
        return ("supersede", old, "--by", new)

    def check(n: int, landed: bool) -> None:
        old, new = pairs[-1]
        links = dict(tamper.rows(rig.store, f"SELECT id, coalesce(superseded_by, supersedes, '') FROM heads "
                                            f"WHERE id IN ('{old}', '{new}')"))
        assert links in ({old: "", new: ""}, {old: new, new: old}), ("a supersede linked one way", links)

    _small_command_kills(rig, "supersede", 5, args, 27, check=check)


@pytest.mark.slow
def test_reverts_killed_write_a_whole_version_or_none(rig):
    target = _ids(rig, 2)[1]
    rig.ok("update", target, "the rotation is now rule zero")
    before = []

    def args(n: int):
        before.append(tamper.count(rig.store, "versions"))
        return ("revert", target, "--to", "1" if n % 2 else "2")

    def check(n: int, landed: bool) -> None:
        assert tamper.count(rig.store, "versions") - before[-1] in (0, 1), "a revert wrote half a version"

    _small_command_kills(rig, "revert", 5, args, 29, check=check)


@pytest.mark.slow
def test_attests_killed(rig):
    cited = [f"cortex://m/{i}" for i in _ids(rig, 20)]
    _small_command_kills(rig, "attest", 5,
                         lambda n: ("attest", "--intent", f"intent-{n}", "--outcome", "success", *cited), 31)


@pytest.mark.slow
def test_compacts_killed(rig):
    cited = [f"cortex://m/{i}" for i in _ids(rig, 200)]
    _small_command_kills(rig, "compact", 5, lambda n: ("compact", "--intent", "deploy", "--step", f"s{n}",
                                                       "--budget-tokens", "100000", *cited), 41)


@pytest.mark.slow
def test_reindexes_killed(rig):
    def check(n: int, landed: bool) -> None:
        r = rig.run("find", "--near", "rotation item5", "--json")
        assert r.returncode == 0, r.stderr.decode()

    _small_command_kills(rig, "reindex", 5, lambda n: ("reindex", "--rebuild", "--quiet"), 51, check=check)


@pytest.mark.slow
def test_consolidates_killed(rig):
    from tests.chat_server import ChatServer

    chat = ChatServer().start()
    try:
        rig.extra = chat.env()
        rng = random.Random(61)

        def args(n: int):  # a transcript of its own each time: one consolidated before is skipped
            transcript = rig.root / f"t{n}.txt"
            transcript.write_text(f"user: the deploy key rotates monthly (run {n}), staging uses the blue cluster\n"
                                  "assistant: noted; I will rotate it on the first Monday\n")
            chat.replies.append(json.dumps({"facts": [f"The deploy key rotation rule {n} holds"],
                                            "patterns": [], "outcome": None}))
            chat.delay = rng.choice([0.0, 0.05, 0.3])
            return ("consolidate", transcript)

        _small_command_kills(rig, "consolidate", 5, args, 61)
    finally:
        chat.stop()


# -- restore and backup ------------------------------------------------------------------------------
def _bundle(rig: Rig, *, encrypt: bool, extra: int) -> str:
    """A bundle of the base store with ``extra`` more memories (made from a copy of it)."""
    source = Rig(rig.root / f"source-{encrypt}", rig.store)
    for i in range(extra):
        source.ok("write", "fact", f"only in the bundle {i}")
    r = source.ok("backup", "--dest", rig.root / "bundles", "--json", *(["--encrypt"] if encrypt else []))
    return json.loads(r.stdout)["path"]


def _restore_kills(rig: Rig, *, mode: str, encrypt: bool, want: int, seed: int) -> None:
    rng = random.Random(seed)
    bundle = _bundle(rig, encrypt=encrypt, extra=3)
    old = rig.heads()
    args = ("restore", bundle, "--mode", mode, *(["--force"] if mode == "replace" else []))
    timing = Rig(rig.root / "timing", rig.store)
    whole = _whole(timing, *args)
    what = f"restore {mode}{' encrypted' if encrypt else ''}"
    scratch = _scratch(rig)

    merged = []

    def attempt(n: int) -> bool:
        before = rig.heads()
        if encrypt and n % 2 == 0:  # once the members are being decrypted
            landed = _kill(rig.spawn(*args), until=lambda: scratch.is_dir() and any(
                p.name.startswith("bundle-") for p in scratch.iterdir()), delay=30, what=what)
        else:
            landed = _kill(rig.spawn(*args), delay=rng.uniform(0.1, 1.05) * whole, what=what)
        if mode == "replace":
            assert rig.heads() in (before, old + 3), "the store is neither the old one nor the restored one"
        else:  # the bundle's 3 memories are added together, once
            assert rig.heads() - before in ((0,) if merged else (0, 3)), "a merge added part of the bundle"
            merged.append(rig.heads() > before)
            merged[:] = [m for m in merged if m]
        rig.after_kill(what, n)
        if mode == "replace":  # the next replace overwrites what was written meanwhile
            rig.acked.clear()
        return landed

    _loop(what, want, attempt)
    rig.assert_acked_present()


def test_a_killed_encrypted_restore_leaves_no_plaintext(rig):
    """The quick one (default lane): killed while the members are decrypted."""
    _restore_kills(rig, mode="replace", encrypt=True, want=1, seed=1)


@pytest.mark.slow
@pytest.mark.parametrize("mode,encrypt,want", [("replace", False, 4), ("replace", True, 4),
                                               ("merge", False, 3), ("merge", True, 3)])
def test_restores_killed_at_many_moments(rig, mode, encrypt, want):
    _restore_kills(rig, mode=mode, encrypt=encrypt, want=want, seed=len(mode) * 10 + encrypt)


@pytest.mark.slow
@pytest.mark.parametrize("encrypt", [False, True])
def test_backups_killed(rig, encrypt):
    rng = random.Random(71 + encrypt)
    dest = rig.root / "bundles"
    args = ("backup", "--dest", dest, "--keep", "100", "--quiet", *(["--encrypt"] if encrypt else []))
    whole = _whole(rig, *args)
    what = f"backup{' encrypted' if encrypt else ''}"

    def attempt(n: int) -> bool:
        landed = _kill(rig.spawn(*args), delay=rng.uniform(0.05, 1.05) * whole, what=what)
        rig.after_kill(what, n)
        r = rig.ok("backup", "--dest", dest, "--keep", "100", "--json", *(["--encrypt"] if encrypt else []))
        assert leftovers(dest) == [], leftovers(dest)  # the next backup removed the partial bundle
        for b in dest.glob("backup-*"):
            rig.ok("bundle", "verify", b)
        rig.assert_nothing_left(what, n)
        assert json.loads(r.stdout)["encrypted"] is encrypt
        return landed

    _loop(what, 4, attempt)
    rig.assert_acked_present()


# -- the MCP server, mid-call ------------------------------------------------------------------------
class _Mcp:
    """``cortexctl mcp`` on stdio, spoken to line by line (JSON-RPC), so it can be killed between a
    request and its answer."""

    def __init__(self, rig: Rig) -> None:
        self.n = 0
        self.proc = subprocess.Popen(cortexctl_argv() + ["mcp"], env=rig.env(), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "kills", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, doc: dict) -> None:
        self.proc.stdin.write(json.dumps(doc).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict) -> dict:
        self.n += 1
        self.send({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params})
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise EOFError
            doc = json.loads(line)
            if doc.get("id") == self.n:
                return doc


@pytest.mark.slow
def test_the_mcp_server_killed_mid_call(rig):
    import threading

    rng = random.Random(81)

    def attempt(n: int) -> bool:
        server = _Mcp(rig)
        stop = threading.Event()
        acked: list[str] = []
        in_call = threading.Event()

        def calls() -> None:
            i = 0
            try:
                while not stop.is_set():
                    text = f"written through mcp {n}.{i}"
                    in_call.set()
                    doc = server.request("tools/call", {"name": "write", "arguments": {"type": "fact", "text": text}})
                    if "result" in doc and not doc["result"].get("isError"):
                        acked.append(text)
                    i += 1
            except (EOFError, OSError, ValueError):
                pass

        t = threading.Thread(target=calls, daemon=True)
        t.start()
        in_call.wait(30)
        landed = _kill(server.proc, delay=rng.uniform(0.05, 1.5), what="mcp mid-call")
        stop.set()
        t.join(30)
        assert landed and not t.is_alive()
        rig.acked += acked
        rig.after_kill("mcp mid-call", n)
        return landed

    _loop("mcp mid-call", 5, attempt)
    rig.assert_acked_present()
