#!/usr/bin/env python3
"""Cold wall time of `pinned` and `context` on a store of N memories (default 100,000).

    python bench/pager_bench.py [--memories 100000] [--runs 10] [--store DIR]

Builds (or reuses, with --store) a store of N facts plus a few user facts, hard
constraints and proven patterns, then times each command as a fresh process (median of
--runs), interleaved with the reference `python -c "import numpy, duckdb, usearch.index"`
so both see the same machine load, and prints each median with its ratio. A report:
nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REFERENCE = [sys.executable, "-c", "import numpy, duckdb, usearch.index"]


def _cortexctl() -> list[str]:
    script = Path(sys.executable).with_name("cortexctl")
    return [str(script)] if script.exists() else [sys.executable, "-m", "cortexctl"]


def _time(argv: list[str], env: dict) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        sys.stderr.write(f"warning: {argv[1:]} exited {proc.returncode}: {proc.stderr.decode()[:200]}\n")
    return took


def _seed(store: Path, n: int, env: dict) -> None:
    src = store.parent / "seed.jsonl"
    with src.open("w") as f:
        for i in range(n):
            f.write(json.dumps({"type": "fact", "text": f"memory {i} about the deploy key of service {i % 37}"}) + "\n")
    subprocess.run([*_cortexctl(), "import", str(src), "--quiet"], env=env, check=True, stdout=subprocess.DEVNULL)
    c = _cortexctl()
    for i in range(15):
        subprocess.run([*c, "remember", "--user", f"user preference number {i}"], env=env, check=True,
                       stdout=subprocess.DEVNULL)
    for i in range(5):
        subprocess.run([*c, "write", "constraint", f"never touch production {i}", "--set", "strength=hard"],
                       env=env, check=True, stdout=subprocess.DEVNULL)
    for i in range(3):
        subprocess.run([*c, "pattern", "write", "--name", f"rotate key {i}", "--trigger", "deploy key",
                        "--step", "rotate", "--coverage", "3"], env=env, check=True, stdout=subprocess.DEVNULL)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--memories", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--store")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="pager-bench-"))
    store = Path(args.store) if args.store else tmp / "store"
    env = {**os.environ, "CORTEXCTL_STORE": str(store), "CORTEXCTL_ACTOR": "bench"}
    if not store.exists():
        t0 = time.perf_counter()
        _seed(store, args.memories, env)
        print(f"seeded {args.memories} memories in {time.perf_counter() - t0:.1f} s ({store})")
    cases = {
        "pinned": [*_cortexctl(), "pinned", "--goal", "rotate the deploy key"],
        "context": [*_cortexctl(), "context", "--goal", "rotate the deploy key of service 7"],
    }
    times: dict[str, list[float]] = {"reference": [], **{k: [] for k in cases}}
    for _ in range(args.runs):
        for name, argv in cases.items():
            times["reference"].append(_time(REFERENCE, env))
            times[name].append(_time(argv, env))
    ref = statistics.median(times["reference"])
    print(f"reference (import numpy, duckdb, usearch.index): {ref * 1000:.0f} ms")
    for name in cases:
        med = statistics.median(times[name])
        print(f"{name}: {med * 1000:.0f} ms  ({med / ref:.2f}x)")


if __name__ == "__main__":
    main()
