#!/usr/bin/env python3
"""`cortexctl consolidate` of many transcripts against the chat endpoint's own rate.

    python bench/consolidate_bench.py [--transcripts 500] [--latency 0.2] [--jobs 4] [--json]

A fake OpenAI-compatible chat server on 127.0.0.1 (threaded, standard library) answers every
request after --latency seconds with a reply made from the transcript it carries: two facts (one
every transcript repeats: "already known" after the first), a user fact (touched after the first),
a pattern (reinforced after the first) and, for every other transcript, an outcome: what a model
that finds something in each transcript gives consolidate to write (4-5 writes a transcript).

In the same run, interleaved per round:

- the reference: --transcripts requests straight to the server, --jobs at a time, through the same
  HTTP client consolidate uses (`cortexctl.embed.chat.ChatClient`, one request per transcript):
  the endpoint's own rate at that concurrency;
- `cortexctl consolidate FILE... --jobs J` in a fresh process on a fresh store, spawn to exit.

Printed: both rates (transcripts per second), their ratio (the target: consolidate >= 0.9x the
endpoint's rate), and the process's CPU time per transcript. These machines are shared: the ratio is
the figure to compare run to run. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cold_start import bench_env, find_cortexctl, log  # noqa: E402

TARGET = 0.9


def transcript(n: int) -> str:
    return (f"transcript {n}\nuser: service s{n} listens on port {8000 + n}; staging is the blue cluster\n"
            f"agent: noted, s{n} answers on {8000 + n}. You prefer tea, I remember.\n")


def reply(message: str) -> str:
    m = re.match(r"transcript (\d+)", message)
    n = int(m.group(1)) if m else 0
    return json.dumps({
        "facts": [f"Service s{n} listens on port {8000 + n}", "Staging is the blue cluster"],
        "user_facts": ["Prefers tea"],
        "patterns": [{"name": "port lookup", "trigger": "a port question", "steps": ["look", "answer"]}],
        "outcome": {"summary": f"Noted the port of s{n}", "status": "success"} if n % 2 == 0 else None,
    })


class FakeChat:
    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.count = 0
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                with lock:
                    outer.count += 1
                time.sleep(outer.latency)
                content = reply(body["messages"][1]["content"])
                payload = json.dumps({"id": "b", "object": "chat.completion", "model": body.get("model"),
                                      "choices": [{"index": 0, "finish_reason": "stop",
                                                   "message": {"role": "assistant", "content": content}}]}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def reference(url: str, n: int, jobs: int) -> float:
    """Seconds for n requests straight to the endpoint, jobs at a time, through consolidate's client."""
    from cortexctl.embed.chat import ChatClient

    client = ChatClient(url, "bench-chat")
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(lambda i: client.complete("system", transcript(i)), range(n)))
    return time.perf_counter() - t0


def consolidate(exe: str, files: list[str], store: Path, env: dict, jobs: int) -> tuple[float, float, dict]:
    """(wall seconds, CPU seconds, the --json document) of one cortexctl consolidate process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([exe, "consolidate", *files, "--jobs", str(jobs), "--json", "--store", str(store)],
                          env=env, capture_output=True, stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"bench: consolidate failed (exit {proc.returncode}): {proc.stderr.decode()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, json.loads(proc.stdout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--transcripts", type=int, default=500)
    ap.add_argument("--latency", type=float, default=0.2, help="the fake endpoint's seconds per request")
    ap.add_argument("--jobs", type=int, default=4, help="requests at once, for both")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--cortexctl", help="the cortexctl console script (default: beside this Python)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    exe = find_cortexctl(args.cortexctl)
    chat = FakeChat(args.latency)
    refs, runs, cpus = [], [], []
    try:
        with tempfile.TemporaryDirectory(prefix="cortexctl-consolidate-bench-") as tmp_name:
            tmp = Path(tmp_name)
            env = bench_env(tmp)
            env.update(CORTEXCTL_CHAT_BASE_URL=chat.url, CORTEXCTL_CHAT_MODEL="bench-chat")
            files = []
            for i in range(args.transcripts):
                p = tmp / f"t{i:05d}.txt"
                p.write_text(transcript(i))
                files.append(str(p))
            for r in range(args.rounds):
                log(f"round {r + 1}: {args.transcripts} requests straight to the endpoint ...")
                refs.append(reference(chat.url, args.transcripts, args.jobs))
                log(f"round {r + 1}: cortexctl consolidate of {args.transcripts} transcripts ...")
                wall, cpu, doc = consolidate(exe, files, tmp / f"store-{r}", env, args.jobs)
                if doc["consolidated"] != args.transcripts or doc["count"] < 3 * args.transcripts:
                    raise SystemExit(f"bench: unexpected result {doc['consolidated']} / {doc['count']}")
                runs.append(wall)
                cpus.append(cpu)
    finally:
        chat.stop()
    ref, run = statistics.median(refs), statistics.median(runs)
    report = {
        "transcripts": args.transcripts, "latency_s": args.latency, "jobs": args.jobs, "rounds": args.rounds,
        "loadavg": os.getloadavg()[0],
        "endpoint_per_s": round(args.transcripts / ref, 2), "consolidate_per_s": round(args.transcripts / run, 2),
        "ratio": round(ref / run, 3), "target": TARGET, "met": ref / run >= TARGET,
        "cpu_ms_per_transcript": round(1000 * statistics.median(cpus) / args.transcripts, 1),
    }
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"consolidate of {args.transcripts} transcripts, endpoint latency {args.latency * 1000:.0f} ms, "
          f"--jobs {args.jobs} (load {report['loadavg']:.2f})")
    print(f"  endpoint, requests straight to it  {report['endpoint_per_s']:8.2f} /s  ({ref:.1f} s)")
    print(f"  cortexctl consolidate (process)    {report['consolidate_per_s']:8.2f} /s  ({run:.1f} s)")
    print(f"  ratio {report['ratio']:.3f} (target {TARGET}: {'met' if report['met'] else 'not met'}); "
          f"consolidate's CPU {report['cpu_ms_per_transcript']} ms per transcript")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
