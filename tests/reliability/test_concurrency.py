"""Writers and readers on one store at once, for a while: every acknowledged write is there with its
content, nothing crashes, a busy store is exit 4 in one line, and the journal holds exactly what
was acknowledged.

Writers: `write`, `update`, `attest` and `import` (real `cortexctl` processes in loops) and an MCP
server taking write, update and attest calls. Readers: `find`, `show`, `export`, `context` and
`backup`. 30 seconds on DuckDB and on PostgreSQL (tests/pg.py); `CORTEXCTL_SOAK=1` runs 10 minutes
(`CORTEXCTL_SOAK_SECONDS` overrides either). The counts are printed (`-s`) and appended to the file
`CORTEXCTL_SOAK_REPORT` names.

Busy waits are what a real setup would give: an agent's own commands and its MCP server keep the
default `--wait` (5 s, what an agent loop tolerates before it retries), `backup` runs as from cron
with `--wait 60`, and `import` (a bulk load an operator starts) with `--wait 30`. Any of them may
still find the store busy past its wait: that is exit 4, one line, and nothing written.
"""

from __future__ import annotations

import os
import random
import re
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest

from tests.conftest import Run, run_process

pytestmark = pytest.mark.slow

SOAK = os.environ.get("CORTEXCTL_SOAK") == "1"
SECONDS = float(os.environ.get("CORTEXCTL_SOAK_SECONDS") or (600 if SOAK else 30))
REPORT = os.environ.get("CORTEXCTL_SOAK_REPORT")  # read before each test's environment is cleaned
SEED = os.environ.get("CORTEXCTL_SOAK_SEED") or "22"
WORDS = ("deploy", "key", "rotation", "walrus", "backup", "pipeline", "cache", "release", "schema", "token",
         "incident", "monitor", "budget", "latency", "replica", "shard")
BUSY = re.compile(r"store .* is busy \([^)]*\); gave up after [0-9.]+s"
                  r"( \((retry, or wait longer with --wait SECONDS|retry the call; [^)]*)\))?")  # hint: on a line
ANCHOR = "the anchor note that no writer changes"
WRITERS = ("write", "update", "attest", "import", "mcp")
IMPORT_STOPPED = re.compile(r"import stopped after (\d+) of (\d+) memories")


@dataclass
class Ledger:
    """What the writers were told was written, and everything every process said."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    ids: list[str] = field(default_factory=list)  # acknowledged memories, in acknowledgement order
    versions: dict[tuple[str, int], str] = field(default_factory=dict)  # (id, version) -> its text
    seqs: list[int] = field(default_factory=list)  # journal sequence numbers acknowledged
    unnumbered: int = 0  # journal entries acknowledged without their numbers (a stopped import's)
    citations: Counter = field(default_factory=Counter)  # id -> successful attests citing it
    imported_texts: set[str] = field(default_factory=set)
    runs: list[tuple[str, str, int, str]] = field(default_factory=list)  # (who, command, exit, stderr)
    counts: Counter = field(default_factory=Counter)  # (who, outcome) -> n
    problems: list[str] = field(default_factory=list)  # checks that failed inside a thread
    seconds: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))  # who -> run times

    def some_ids(self, rng: random.Random, n: int) -> list[str]:
        with self.lock:
            return rng.sample(self.ids, min(n, len(self.ids)))

    def record_run(self, who: str, run: Run) -> bool:
        """Keep what a process said; True when it exited 0."""
        with self.lock:
            self.runs.append((who, " ".join(run.args[:2]), run.code, run.err))
            self.counts[who, "ok" if run.code == 0 else f"exit {run.code}"] += 1
        return run.code == 0

    def acknowledge(self, memory_id: str, version: int, text: str, seq: int, *, changing: bool = True) -> None:
        """A version a writer was told is written; ``changing``: a new memory the others may update
        and cite."""
        with self.lock:
            if version == 1 and changing:
                self.ids.append(memory_id)
            self.versions[memory_id, version] = text
            self.seqs.append(seq)

    def fail(self, message: str) -> None:
        with self.lock:
            self.problems.append(message)


class Soak:
    def __init__(self, tmp_path: Path, store: str, seconds: float) -> None:
        self.tmp_path, self.store = tmp_path, store
        self.ledger = Ledger()
        self.stop = threading.Event()
        self.deadline = time.monotonic() + seconds
        self.env = {"CORTEXCTL_STORE": store}

    def running(self) -> bool:
        """Until the time is up and every writer has had a write acknowledged (however busy the
        machine, the run checks each kind of write)."""
        if time.monotonic() >= self.deadline:
            with self.ledger.lock:
                if all(self.ledger.counts[w, "ok"] for w in WRITERS):
                    self.stop.set()
        return not self.stop.is_set()

    def cortexctl(self, who: str, *args) -> Run:
        started = time.monotonic()
        run = run_process(Path(self.tmp_path), *args, env=self.env, timeout=600)
        with self.ledger.lock:
            self.ledger.seconds[who].append(time.monotonic() - started)  # reported, never asserted
        self.ledger.record_run(who, run)
        return run

    # -- writers ---------------------------------------------------------------------------------------
    def writer(self, rng: random.Random) -> None:
        self._versions("write", lambda i: f"writer note {i}: the {rng.choice(WORDS)} {rng.choice(WORDS)} goes here",
                       lambda text: ["fact", text, "--tag", "soak"])

    def updater(self, rng: random.Random) -> None:
        # some_ids is never empty: the seed is acknowledged before the start
        self._versions("update", lambda i: f"updated note {i}: the {rng.choice(WORDS)} changed",
                       lambda text: [self.ledger.some_ids(rng, 1)[0], text])

    def _versions(self, command: str, make_text, make_args) -> None:
        """``command`` in a loop; each version it acknowledges goes in the ledger with its text."""
        i = 0
        while self.running():
            i += 1
            text = make_text(i)
            run = self.cortexctl(command, command, *make_args(text), "--json")
            if run.code == 0:
                doc = run.json()
                self.ledger.acknowledge(doc["id"], doc["version"], text, doc["seq"])

    def attester(self, rng: random.Random) -> None:
        i = 0
        while self.running():
            cited = self.ledger.some_ids(rng, rng.randint(1, 3))
            i += 1  # an intent of its own each time: the rate limit is per intent
            run = self.cortexctl("attest", "attest", "--intent", f"cli-{i}", "--outcome", "success", *cited,
                                 "--json")
            if run.code == 0:
                self._attested(run.json(), cited)

    def _attested(self, doc: dict, cited: list[str]) -> None:
        affected = [uri.rsplit("/", 1)[-1] for uri in doc["affected"]]
        if sorted(affected) != sorted(set(cited)) or doc["skipped"]:
            self.ledger.fail(f"attest of {cited} affected {doc['affected']}, skipped {doc['skipped']}")
        with self.ledger.lock:
            self.ledger.seqs += [doc["seq"], doc["learn_seq"]]
            self.ledger.citations.update(affected)

    def importer(self, rng: random.Random) -> None:
        i = 0
        while self.running():
            i += 1
            texts = [f"imported batch {i} line {j}: {rng.choice(WORDS)} {rng.choice(WORDS)}" for j in range(120)]
            src = self.tmp_path / f"import-{i}.jsonl"
            src.write_bytes(b"".join(orjson.dumps({"type": "fact", "text": t, "tags": ["soak"]}) + b"\n"
                                     for t in texts))
            run = self.cortexctl("import", "import", src, "--batch-size", "40", "--wait", "30", "--json")
            if run.code == 0:
                doc = run.json()
                if doc["imported"] != len(texts) or doc["last_seq"] - doc["first_seq"] + 1 < len(texts):
                    self.ledger.fail(f"import said {doc}")
                with self.ledger.lock:  # other writers get in between its batches: its first and last
                    self.ledger.seqs += [doc["first_seq"], doc["last_seq"]]  # are its own, not all between
                    self.ledger.unnumbered += len(texts) - 2
                    self.ledger.imported_texts.update(texts)
            elif m := IMPORT_STOPPED.search(run.err):  # whole batches are in, and it says how many
                done = int(m.group(1))
                with self.ledger.lock:
                    self.ledger.unnumbered += done
                    self.ledger.imported_texts.update(texts[:done])

    def mcp_client(self, rng: random.Random, server) -> None:
        i = 0
        while self.running():
            i += 1
            kind = ("write", "update", "attest")[i % 3]
            ids = self.ledger.some_ids(rng, rng.randint(1, 3))
            if kind == "write":
                text = f"mcp note {i}: the {rng.choice(WORDS)} {rng.choice(WORDS)} is noted"
                result = server.call("write", {"type": "fact", "text": text, "tags": ["soak"]})
            elif kind == "update":
                text = f"mcp update {i}: the {rng.choice(WORDS)} moved"
                result = server.call("update", {"ref": ids[0], "text": text})
            else:
                result = server.call("attest", {"intent": f"mcp-{i}", "outcome": "success", "cited": ids})
            doc = result.structured_content
            with self.ledger.lock:
                self.ledger.counts["mcp", "ok" if not result.is_error else f"exit {doc.get('exit_code')}"] += 1
                if result.is_error:
                    self.ledger.runs.append(("mcp", kind, doc.get("exit_code"), result.content[0].text))
            if result.is_error:
                continue
            if kind == "attest":
                self._attested(doc, ids)
            else:
                self.ledger.acknowledge(doc["id"], doc["version"], text, doc["seq"])

    # -- readers ---------------------------------------------------------------------------------------
    def finder(self, rng: random.Random) -> None:
        """The text of a memory acknowledged and never changed (imported, or the anchor): it comes
        first, matched (so no exit 1)."""
        while self.running():
            with self.ledger.lock:
                text = rng.choice(sorted(self.ledger.imported_texts) or [ANCHOR])
            run = self.cortexctl("find", "find", "--near", text, "-k", "5", "--json")
            if run.code == 0 and run.json()["results"][0]["text"] != text:
                self.ledger.fail(f"find --near {text!r} did not answer it first: {run}")

    def shower(self, rng: random.Random) -> None:
        while self.running():
            with self.ledger.lock:
                known = list(self.ledger.versions.items())
            (memory_id, version), text = rng.choice(known)
            run = self.cortexctl("show", "show", f"cortex://m/{memory_id}/v/{version}", "--json")
            if run.code == 0 and run.json()["data"]["statement"] != text:
                self.ledger.fail(f"show of {memory_id} v{version}: {run.json()['data']} is not {text!r}")

    def exporter_and_context(self, rng: random.Random) -> None:
        i = 0
        while self.running():
            i += 1
            if i % 2:
                run = self.cortexctl("context", "context", "--goal", f"the {rng.choice(WORDS)}", "--json")
                continue
            with self.ledger.lock:  # acknowledged before the export starts: it must hold them
                before = dict(self.ledger.versions)
            out = self.tmp_path / "export.jsonl"
            run = self.cortexctl("export", "export", "--out", out)
            if run.code == 0:
                exported = exported_versions(out.read_bytes())
                missing = [k for k, text in before.items() if exported.get(k) != text]
                if missing:
                    self.ledger.fail(f"export lacks acknowledged versions {sorted(missing)[:5]}")

    def backer(self, rng: random.Random) -> None:
        dest = self.tmp_path / "backups"
        while self.running():
            self.cortexctl("backup", "backup", "--dest", dest, "--keep", "2", "--wait", "60", "--quiet")


def exported_versions(jsonl: bytes) -> dict[tuple[str, int], str]:
    found = {}
    for line in jsonl.splitlines():
        doc = orjson.loads(line)
        for v in doc["versions"]:
            found[doc["id"], v["version"]] = v["data"]["statement"]
    return found


def _soak(tmp_path: Path, store: str, seconds: float) -> Soak:
    from tests.mcp.client import McpServer, isolated_env

    soak = Soak(tmp_path, store, seconds)
    for text, changing in (("the first note about the deploy key", True), (ANCHOR, False)):
        seed = run_process(tmp_path, "write", "fact", text, "--json", env=soak.env)
        assert seed.code == 0, seed
        soak.ledger.acknowledge(seed.json()["id"], 1, text, seed.json()["seq"], changing=changing)
    rng = random.Random(SEED)
    server = McpServer(store, actor="alice", env=isolated_env(tmp_path / "mcp-home"), timeout=600)
    workers = [(soak.writer,), (soak.updater,), (soak.attester,), (soak.importer,), (soak.mcp_client, server),
               (soak.finder,), (soak.shower,), (soak.exporter_and_context,), (soak.backer,)]
    errors: list[BaseException] = []

    def run(target, *args):
        try:
            target(random.Random(rng.random()), *args)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
            soak.stop.set()

    threads = [threading.Thread(target=run, args=w, daemon=True) for w in workers]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        soak.stop.set()
        server.close()
    if errors:
        raise errors[0]
    soak.mcp_stderr = server.stderr()
    return soak


def _check(soak: Soak) -> None:
    ledger, tmp_path = soak.ledger, soak.tmp_path
    _report(soak)
    assert not ledger.problems, ledger.problems[:10]
    # every process: no traceback; every failure a busy store in its one line
    assert "Traceback" not in soak.mcp_stderr, soak.mcp_stderr[-3000:]
    for who, command, code, err in ledger.runs:
        assert "Traceback" not in err, (who, command, code, err)
        if code == 0:
            continue
        assert code == 4, (who, command, code, err)
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1, (who, command, err)  # one line, or one JSON object under --json
        if lines[0].startswith("{"):
            doc = orjson.loads(lines[0])
            assert doc["error"] == "busy" and doc["exit_code"] == 4, err
            message = doc["message"]
        elif who == "mcp":  # the CLI's line without "cortexctl: "
            message = lines[0]
        else:
            assert lines[0].startswith("cortexctl: "), err
            message = lines[0].removeprefix("cortexctl: ")
        if who == "import":  # one stopped between batches adds what is in and where to resume
            assert BUSY.match(message) and (message == BUSY.match(message)[0] or IMPORT_STOPPED.search(message)), err
        else:
            assert BUSY.fullmatch(message), (who, err)

    verify = run_process(tmp_path, "verify", env=soak.env, timeout=600)
    assert verify.code == 0, verify
    # the journal is exactly what was acknowledged: each number once, none missing, none more
    assert len(set(ledger.seqs)) == len(ledger.seqs), "two acknowledgements of one journal entry"
    health = run_process(tmp_path, "healthcheck", "--json", env=soak.env)
    assert health.code == 0, health
    journal = health.json()["store"]["journal_entries"]
    assert journal == len(ledger.seqs) + ledger.unnumbered, (journal, len(ledger.seqs), ledger.unnumbered)
    assert max(ledger.seqs) <= journal
    # every acknowledged version with its text, every imported memory, every citation counted
    export = run_process(tmp_path, "export", env=soak.env, timeout=600)
    assert export.code == 0, export
    exported = exported_versions(export.out.encode())
    lost = {k: v for k, v in ledger.versions.items() if exported.get(k) != v}
    assert not lost, f"{len(lost)} acknowledged versions lost or changed: {list(lost.items())[:5]}"
    assert ledger.imported_texts <= set(exported.values())
    for bundle in sorted((tmp_path / "backups").glob("backup-*")):  # what backup left, read back whole
        checked = run_process(tmp_path, "bundle", "verify", bundle, env=soak.env, timeout=600)
        assert checked.code == 0, checked
    citations = {doc["id"]: doc["salience"]["citations"] for doc in export.jsonl()}
    assert {i: citations[i] for i in ledger.citations} == dict(ledger.citations)
    assert all(citations[i] == 0 for i in citations if i not in ledger.citations)


def _report(soak: Soak) -> None:
    """The counts, on stdout (``-s``) and appended to the file ``CORTEXCTL_SOAK_REPORT`` names
    (what a run under xdist keeps)."""
    import contextlib
    import io

    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        _counts(soak)
    print(text.getvalue())
    if REPORT:
        with open(REPORT, "a", encoding="utf-8") as fh:
            fh.write(text.getvalue())


def _counts(soak: Soak) -> None:
    ledger = soak.ledger
    acknowledged = len(ledger.versions) - 2 + len(ledger.imported_texts)  # less the two seeds
    print(f"\nsoak on {soak.store}: acknowledged {acknowledged} writes "
          f"({len(ledger.ids) - 1} memories, {len(ledger.versions) - len(ledger.ids) - 1} updates, "
          f"{len(ledger.imported_texts)} imported, {sum(ledger.citations.values())} citations), lost 0")
    for (who, outcome), n in sorted(ledger.counts.items()):
        print(f"  {who:8} {outcome:8} {n}")
    for who, times in sorted(ledger.seconds.items()):
        times = sorted(times)
        print(f"  {who:8} median {times[len(times) // 2]:.2f}s, longest {times[-1]:.2f}s")
    waits = Counter((who, m.group(1)) for who, _, code, err in ledger.runs
                    if code == 4 and (m := re.search(r"is busy \((.*?)\)", err)))
    for (who, why), n in sorted(waits.items()):
        print(f"  {who:8} busy: {why}: {n}")


def test_writers_and_readers_together_lose_nothing_acknowledged(tmp_path):
    soak = _soak(tmp_path, str(tmp_path / "store"), SECONDS)
    _check(soak)


def test_writers_and_readers_together_lose_nothing_acknowledged_on_postgres(tmp_path):
    from tests.pg import store_uri

    soak = _soak(tmp_path, store_uri("soak"), SECONDS)
    _check(soak)
