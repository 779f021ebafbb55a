#!/usr/bin/env python3
"""`cortexctl mcp` time to first answer, against references timed in the same run.

    python bench/mcp_start.py [--runs 9] [--json]

Each run starts a fresh `cortexctl mcp --store TMP` over stdio, writes `initialize`, the
`notifications/initialized` notification and `tools/list` at once (newline-delimited JSON-RPC,
as the SDK's client does), and times, from the spawn, the answer to `initialize` (time to first
answer), the answer to `tools/list`, and then a `find` call (the first call that opens the store:
the answer a client needs, answered before the SDK has loaded when the cache is there), twice: with the answers cache of an earlier start (`serve/early.py`: what every start but the first
after an install sees) and without it (the cache directory emptied before each such run: the first
start, which waits for the SDK). With --before PATH (another install's cortexctl, e.g. the main
checkout's), that one's first answer is timed too, in the same rounds. The references are fresh
processes of `python -c pass` (the interpreter's floor), of `python -c "import mcp.server"`
(what importing the SDK alone costs) and of a cold `cortexctl find` (the same find from the shell),
interleaved with the server's runs so that load falls on
all alike. Medians of wall time are printed with their ratio
to `python -c pass`; these machines are shared, so the ratios are the figures to compare.
Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cold_start import bench_env, find_cortexctl, log, run_checked  # noqa: E402

TARGET_S = 1.0


def _msg(id_: int | None, method: str, params: dict | None = None) -> bytes:
    doc: dict = {"jsonrpc": "2.0", "method": method}
    if id_ is not None:
        doc["id"] = id_
    if params is not None:
        doc["params"] = params
    return (json.dumps(doc) + "\n").encode()


INIT = {"protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "mcp_start bench", "version": "1"}}


def serve_once(exe: str, store: Path, env: dict, *, cold: bool = False) -> tuple[float, float, float]:
    """Seconds from spawn to the answers of initialize, tools/list and a first find call; ``cold``:
    with the answers cache removed first."""
    if cold:
        shutil.rmtree(Path(env["XDG_CACHE_HOME"]) / "cortexctl", ignore_errors=True)
    t0 = time.perf_counter()
    proc = subprocess.Popen([exe, "mcp", "--store", str(store)], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(_msg(1, "initialize", INIT) + _msg(None, "notifications/initialized") + _msg(2, "tools/list"))
    proc.stdin.flush()
    seen: dict[int, float] = {}
    try:
        while len(seen) < 3:
            line = proc.stdout.readline()
            if not line:
                raise SystemExit("bench: cortexctl mcp closed its stdout before answering")
            doc = json.loads(line)
            if "id" not in doc:
                continue
            if "error" in doc:
                raise SystemExit(f"bench: cortexctl mcp answered an error: {doc['error']}")
            seen[doc["id"]] = time.perf_counter() - t0
            if doc["id"] == 2:
                names = [t["name"] for t in doc["result"]["tools"]]
                if "find" not in names:
                    raise SystemExit(f"bench: no find tool in {names}")
                proc.stdin.write(_msg(3, "tools/call", {"name": "find", "arguments": {"near": "deploy key"}}))
                proc.stdin.flush()
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    return seen[1], seen[2], seen[3]


def time_cmd(cmd: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--cortexctl", help="the cortexctl console script (default: beside this Python)")
    ap.add_argument("--before", help="another install's cortexctl to time beside this one (its first answer)")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    args = ap.parse_args(argv)
    exe = find_cortexctl(args.cortexctl)
    with tempfile.TemporaryDirectory(prefix="cortexctl-mcp-start-") as tmp_name:
        tmp = Path(tmp_name)
        env = bench_env(tmp)
        env["XDG_CACHE_HOME"] = str(tmp / "xdg-cache")
        store = tmp / "store"
        run_checked([exe, "write", "fact", "The deploy key rotates monthly", "--store", str(store)], env)
        py = sys.executable
        runs: dict[str, list[float]] = {"pass": [], "import_sdk": [], "cli_find": [], "initialize": [],
                                        "tools_list": [], "first_find": [], "initialize_uncached": [],
                                        "tools_list_uncached": [], "first_find_uncached": []}
        if args.before:
            runs["initialize_before"] = []
        log(f"warming the bytecode cache, then {args.runs} interleaved runs ...")
        serve_once(exe, store, env)
        if args.before:
            serve_once(args.before, store, env)
        time_cmd([py, "-c", "import mcp.server"], env)
        for _ in range(args.runs):
            runs["pass"].append(time_cmd([py, "-c", "pass"], env))
            runs["import_sdk"].append(time_cmd([py, "-c", "import mcp.server"], env))
            runs["cli_find"].append(time_cmd([exe, "find", "--near", "deploy key", "--store", str(store)], env))
            init, listed, found = serve_once(exe, store, env, cold=True)
            runs["initialize_uncached"].append(init)
            runs["tools_list_uncached"].append(listed)
            runs["first_find_uncached"].append(found)
            init, listed, found = serve_once(exe, store, env)
            runs["initialize"].append(init)
            runs["tools_list"].append(listed)
            runs["first_find"].append(found)
            if args.before:
                runs["initialize_before"].append(serve_once(args.before, store, env)[0])
    med = {k: statistics.median(v) for k, v in runs.items()}
    report = {"runs": args.runs, "loadavg": os.getloadavg()[0],
              "median_s": {k: round(v, 4) for k, v in med.items()},
              "ratio_to_python_pass": {k: round(v / med["pass"], 2) for k, v in med.items()},
              "ratio_to_cli_find": {k: round(v / med["cli_find"], 2) for k, v in med.items()},
              "target_s": TARGET_S, "first_find_target_met": med["first_find"] <= TARGET_S}
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"cortexctl mcp start-up, medians of {args.runs} runs (load {report['loadavg']:.2f})")
    names = {"pass": "python -c pass", "import_sdk": "python -c 'import mcp.server'",
             "cli_find": "cortexctl find (cold, from the shell)",
             "initialize": "mcp: answer to initialize", "tools_list": "mcp: answer to tools/list",
             "first_find": "mcp: answer to a first find",
             "initialize_uncached": "mcp, no cache: initialize", "tools_list_uncached": "mcp, no cache: tools/list",
             "first_find_uncached": "mcp, no cache: a first find",
             "initialize_before": "--before: answer to initialize"}
    for k, label in names.items():
        if k not in med:
            continue
        print(f"  {label:38} {med[k] * 1000:8.0f} ms  {med[k] / med['pass']:6.2f}x python -c pass  "
              f"{med[k] / med['cli_find']:5.2f}x cortexctl find")
    print(f"  time to first answer (a find's result): {med['first_find'] * 1000:.0f} ms (target "
          f"{TARGET_S * 1000:.0f} ms: {'met' if report['first_find_target_met'] else 'not met'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
