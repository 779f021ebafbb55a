#!/usr/bin/env python3
"""find through `cortexctl mcp`: p50/p99 of a resident server against a cold `cortexctl find`.

    python bench/mcp_bench.py --store /work/bench-data/store100k [--calls 300] [--cold-runs 9] [--json]
    python bench/mcp_bench.py --memories 20000
    python bench/mcp_bench.py --store DIR --writes 100   # the finds then read the snapshot's delta

With --store, the store is COPIED into a temporary directory first (the original is never
opened) and the copy's search snapshot is brought up to date with `cortexctl reindex` (a copy has
a new inode, which makes its snapshot stale; the original's is current). Without --store, a store
of --memories synthetic memories is built with `cortexctl import` (bench/find_bench.py's corpus).

--writes N then makes N writes (one transaction each, in this process, before the server starts) so
that every find reads the snapshot's delta as well, as a server does once its agent has written.

Then, in the same run:

- the installed `cortexctl mcp` is started over stdio with the MCP SDK's own client
  (ClientSession over stdio_client), a few warm-up calls are made, and --calls `find` calls with
  `near` (queries in turn, k 10) are timed end to end at the client: p50, p99 and max in ms,
  against the targets (p50 <= 30 ms, p99 <= 100 ms at 100k);
- the same finds in this process through the engine (`Cortex.find`, one Cortex kept), which is
  what the server does per call without the protocol and the process boundary: with
  `resident=True` as the server makes it (the index view, the snapshot mappings and find's search
  state kept between calls) and without;
- the server process's CPU time (user + sys, from /proc) over the timed calls, per call: what
  a find costs the server whatever else the machine is doing;
- cold `cortexctl find --near` (median of --cold-runs fresh processes), the reference: the
  report gives p50 through the server as a fraction of it.

The load average is printed before and after: these machines are shared. Nothing is asserted.
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
from cold_start import FIND_OK, bench_env, find_cortexctl, log, run_checked, time_once  # noqa: E402
from find_bench import QUERIES, write_corpus  # noqa: E402

P50_TARGET, P99_TARGET = 30.0, 100.0


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def prepare(args, tmp: Path, env: dict, exe: str) -> tuple[Path, str]:
    store = tmp / "store"
    if args.store:
        src = Path(args.store).expanduser()
        if not (src / "cortex.duckdb").is_file():
            raise SystemExit(f"bench: no store at {src}")
        log(f"copying {src} to {store} ...")
        shutil.copytree(src, store)
        log("bringing the copy's search snapshot up to date (cortexctl reindex) ...")
        run_checked([exe, "reindex", "--store", str(store)], env)
        return store, args.actor
    corpus = tmp / "corpus.jsonl"
    from datetime import datetime, timezone

    write_corpus(corpus, args.memories, 7, datetime.now(timezone.utc))
    log(f"importing {args.memories} memories ...")
    run_checked([exe, "import", str(corpus), "--store", str(store), "--actor", args.actor, "--keep-actors",
                 "--quiet"], env)
    run_checked([exe, "reindex", "--store", str(store)], env)
    return store, args.actor


def write_some(store: Path, actor: str, n: int) -> int:
    """n writes, one transaction each (each leaves the snapshot's delta); the delta's size in bytes."""
    from cortexctl import Cortex

    cx = Cortex(store=store, actor=actor)
    for i in range(n):
        cx.write("fact", f"{QUERIES[i % len(QUERIES)]}: note {i} written after the snapshot", tags=["bench"])
    delta = store / "cortex.snapdelta"
    return delta.stat().st_size if delta.exists() else 0


def _children_cpu() -> dict[int, float]:
    """pid -> CPU seconds (user + sys) of each child process of this one (Linux /proc)."""
    out: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:
            pids = (task / "children").read_text().split()
        except OSError:
            continue
        for pid in pids:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                out[int(pid)] = (int(fields[11]) + int(fields[12])) / tick
            except (OSError, IndexError, ValueError):
                pass
    return out


def through_server(exe: str, store: Path, actor: str, env: dict, calls: int) -> tuple[list[float], float, float]:
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=exe, args=["mcp", "--store", str(store), "--actor", actor], env=env)
    times: list[float] = []
    started: list[float] = []
    cpu: list[float] = []

    async def run() -> None:
        t0 = time.perf_counter()
        async with stdio_client(params) as (r, w):
            async with ClientSession(r, w) as s:
                await s.initialize()
                started.append((time.perf_counter() - t0) * 1000)
                for i in range(5):  # warm-up: imports, the embedder, the page cache
                    await s.call_tool("find", {"near": QUERIES[i % len(QUERIES)], "k": 10})
                before = _children_cpu()
                for i in range(calls):
                    q = QUERIES[i % len(QUERIES)]
                    t = time.perf_counter()
                    res = await s.call_tool("find", {"near": q, "k": 10})
                    times.append((time.perf_counter() - t) * 1000)
                    if res.is_error:
                        raise SystemExit(f"bench: find failed: {res.content[0].text}")
                after = _children_cpu()
                spent = [after[p] - before[p] for p in after if p in before]
                cpu.append(max(spent) * 1000 / calls if spent else float("nan"))

    anyio.run(run)
    return times, started[0], cpu[0]


def in_process(store: Path, actor: str, calls: int, resident: bool) -> list[float]:
    from cortexctl import Cortex, FindQuery

    cx = Cortex(store=store, actor=actor, resident=resident)
    for i in range(5):
        cx.find(FindQuery(near=QUERIES[i % len(QUERIES)], k=10))
    times = []
    for i in range(calls):
        t = time.perf_counter()
        cx.find(FindQuery(near=QUERIES[i % len(QUERIES)], k=10))
        times.append((time.perf_counter() - t) * 1000)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", help="an existing store to COPY and use (never modified)")
    ap.add_argument("--memories", type=int, default=20_000, help="without --store: build this many")
    ap.add_argument("--actor", default="bench", help="the actor the finds act as (bench/ stores: bench)")
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--cold-runs", type=int, default=9)
    ap.add_argument("--writes", type=int, default=0, help="make this many writes first (the finds read the delta)")
    ap.add_argument("--cortexctl", help="the cortexctl console script (default: beside this Python)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    exe = find_cortexctl(args.cortexctl)
    with tempfile.TemporaryDirectory(prefix="mcp-bench-") as td:
        tmp = Path(td)
        env = bench_env(tmp)
        env.pop("CORTEXCTL_ACTOR", None)
        store, actor = prepare(args, tmp, env, exe)
        delta_bytes = 0
        if args.writes:
            log(f"{args.writes} writes (the finds then read the snapshot's delta) ...")
            delta_bytes = write_some(store, actor, args.writes)
        # compile the SDK's modules into this run's bytecode cache first: the timed start is a warm one
        run_checked([sys.executable, "-c", "import cortexctl.serve.server"], env)
        load_before = loadavg()
        log(f"{args.calls} finds through cortexctl mcp ...")
        served, start_ms, server_cpu = through_server(exe, store, actor, env, args.calls)
        log(f"{args.calls} finds in this process, twice (a resident Cortex as the server keeps, and a plain one) ...")
        local = in_process(store, actor, args.calls, True)
        plain = in_process(store, actor, args.calls, False)
        log(f"{args.cold_runs} cold cortexctl find --near ...")
        cold = [time_once([exe, "find", "--near", QUERIES[i % len(QUERIES)], "-k", "10", "--store", str(store),
                           "--actor", actor], env, FIND_OK)[0] * 1000 for i in range(args.cold_runs)]
        load_after = loadavg()
    report = {
        "store": args.store or f"built: {args.memories} memories", "calls": args.calls,
        "writes": args.writes, "delta_bytes": delta_bytes,
        "server_start_ms": round(start_ms, 1),
        "mcp_find_ms": {"p50": round(pct(served, 0.5), 2), "p99": round(pct(served, 0.99), 2),
                        "max": round(max(served), 2), "mean": round(statistics.fmean(served), 2),
                        "server_cpu_per_call": round(server_cpu, 2)},
        "engine_find_ms": {"p50": round(pct(local, 0.5), 2), "p99": round(pct(local, 0.99), 2)},
        "engine_find_not_resident_ms": {"p50": round(pct(plain, 0.5), 2), "p99": round(pct(plain, 0.99), 2)},
        "cold_cli_find_ms": {"median": round(statistics.median(cold), 1), "runs": args.cold_runs},
        "targets_ms": {"p50": P50_TARGET, "p99": P99_TARGET},
        "load_average": {"before": load_before, "after": load_after},
    }
    report["mcp_p50_over_cold_cli"] = round(report["mcp_find_ms"]["p50"] / report["cold_cli_find_ms"]["median"], 3)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    m, e, c = report["mcp_find_ms"], report["engine_find_ms"], report["cold_cli_find_ms"]
    pl = report["engine_find_not_resident_ms"]
    ok50 = "met" if m["p50"] <= P50_TARGET else "NOT met"
    ok99 = "met" if m["p99"] <= P99_TARGET else "NOT met"
    print(f"store: {report['store']}; server up and initialized in {report['server_start_ms']} ms")
    if args.writes:
        print(f"{args.writes} writes before the finds: a delta of {delta_bytes} bytes")
    print(f"find through cortexctl mcp ({args.calls} calls): p50 {m['p50']} ms (target <= {P50_TARGET:g}: {ok50}), "
          f"p99 {m['p99']} ms (target <= {P99_TARGET:g}: {ok99}), max {m['max']} ms")
    print(f"  the server process's CPU (user+sys) per find: {m['server_cpu_per_call']} ms "
          "(what the call costs whatever the load)")
    print(f"find in-process, resident Cortex:         p50 {e['p50']} ms, p99 {e['p99']} ms "
          f"(a plain Cortex: p50 {pl['p50']} ms, p99 {pl['p99']} ms)")
    print(f"cold cortexctl find --near (median of {c['runs']}):  {c['median']} ms; "
          f"p50 through the server = {report['mcp_p50_over_cold_cli']:.3f}x of it")
    print(f"load average: {load_before} before, {load_after} after")


if __name__ == "__main__":
    main()
