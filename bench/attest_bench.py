#!/usr/bin/env python3
"""attest and compact benchmark on a big store.

    python bench/attest_bench.py [--memories 100000] [--runs 15] [--store PATH] [--json]

Builds a throwaway store of N synthetic memories (bench/find_bench.py's corpus,
imported with `cortexctl import`), or reuses --store, then prints:

- cold `cortexctl attest` wall time: median of --runs fresh processes, each a
  new intent citing 5 random memories, and its ratio to the floor
  `python -c "import duckdb"` timed the same way, interleaved, in the same run;
- attest in-process (the engine, no process start): median of 200 calls;
- cold `cortexctl compact` of 20 memories and `cortexctl checkpoint load`, both
  against the same floor;
- `verify` in-process, which replays the whole journal, attests included.

Nothing is asserted: it is a report.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cold_start import ACTOR, bench_env, find_cortexctl, log, time_once  # noqa: E402
from find_bench import write_corpus  # noqa: E402


def visible_ids(store: Path, n: int, seed: int) -> list[str]:
    import duckdb

    con = duckdb.connect(str(store / "cortex.duckdb"), read_only=True)
    try:
        ids = [r[0] for r in con.execute(
            "SELECT id FROM heads WHERE (actor = ? OR visibility = 'public') AND tombstoned_at IS NULL",
            [ACTOR]).fetchall()]
    finally:
        con.close()
    return random.Random(seed).sample(ids, min(n, len(ids)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--memories", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--seed", type=int, default=20261121)
    ap.add_argument("--store", type=Path, help="reuse a store (e.g. one kept by find_bench.py --keep)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    cortexctl = find_cortexctl(None)
    tmp = Path(tempfile.mkdtemp(prefix="cortex-attestbench-"))
    env = bench_env(tmp)
    store = args.store or tmp / "store"
    if args.store is None:
        jsonl = tmp / "memories.jsonl"
        log(f"generating and importing {args.memories} memories ...")
        write_corpus(jsonl, args.memories, args.seed, datetime.now(timezone.utc))
        proc = subprocess.run([cortexctl, "import", str(jsonl), "--store", str(store), "-q", "--keep-actors"],
                              env=env, capture_output=True)
        if proc.returncode:
            raise SystemExit(proc.stderr.decode())
    ids = visible_ids(store, 2000, args.seed)
    r = random.Random(args.seed)
    stamp = int(time.time())
    result: dict = {"store": str(store), "python": sys.version.split()[0]}

    floor_cmd = [sys.executable, "-c", "import duckdb"]
    time_once(floor_cmd, env)
    base = [cortexctl]
    time_once(base + ["attest", "--store", str(store), "--intent", f"warm-{stamp}", "--outcome", "success",
                      *r.sample(ids, 5)], env)
    floor, attest, compact, load = [], [], [], []
    for i in range(args.runs):  # interleaved, so load on the machine hits each alike
        floor.append(time_once(floor_cmd, env)[0])
        attest.append(time_once(base + ["attest", "--store", str(store), "--intent", f"bench-{stamp}-{i}",
                                        "--outcome", r.choice(["success", "failure"]), "--reason", "factual_error",
                                        *r.sample(ids, 5)], env)[0])
        compact.append(time_once(base + ["compact", "--store", str(store), "--intent", f"bench-{stamp}",
                                         "--step", str(i), "--budget-tokens", "100000", *r.sample(ids, 20)], env)[0])
        load.append(time_once(base + ["checkpoint", "load", "--store", str(store), "--intent", f"bench-{stamp}",
                                      "--step", str(i)], env)[0])
    ms = lambda xs: 1000 * statistics.median(xs)  # noqa: E731
    result["floor_ms"] = ms(floor)
    for name, xs in (("attest", attest), ("compact", compact), ("checkpoint_load", load)):
        result[f"{name}_ms"] = ms(xs)
        result[f"{name}_ratio"] = ms(xs) / result["floor_ms"]

    from cortexctl import Cortex

    cx = Cortex(store=store, actor=ACTOR)
    times = []
    for i in range(200):
        t0 = time.perf_counter()
        cx.attest(f"inproc-{stamp}-{i}", "success", r.sample(ids, 5))
        times.append(time.perf_counter() - t0)
    result["attest_inprocess_ms"] = ms(times)
    t0 = time.perf_counter()
    report = cx.verify()
    result["verify_s"] = time.perf_counter() - t0
    result["verify_ok"] = report.ok
    result["memories"] = report.memories
    result["journal"] = report.journal

    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"store: {result['memories']} memories, {result['journal']} journal entries")
    print(f"floor:                        {result['floor_ms']:8.1f} ms  python -c 'import duckdb'")
    for name, label in (("attest", "attest, 5 cited"), ("compact", "compact, 20 memories"),
                        ("checkpoint_load", "checkpoint load")):
        print(f"{label + ' (cold):':<30}{result[f'{name}_ms']:8.1f} ms  = {result[f'{name}_ratio']:.2f}x the floor")
    print(f"attest in-process:            {result['attest_inprocess_ms']:8.1f} ms  (median of 200)")
    print(f"verify (full replay):         {result['verify_s']:8.1f} s   ok={result['verify_ok']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
