#!/usr/bin/env python3
"""Full `verify` benchmark, against DuckDB reading the same tables once.

    python bench/verify_bench.py [--memories 100000] [--store PATH] [--jobs 1,2] [--runs 1]
                                 [--before DIR] [--json]

Builds a throwaway store of N memories (find_bench.py's corpus, `cortexctl import`,
hash embedder) or reuses --store, then times, each in a fresh process:

- the reference: DuckDB reading every table verify reads, once
  (`SELECT count(*), sum(hash(...))` over heads, versions, journal, frames,
  lex_docs, lex_postings and vectors, whole rows);
- the issue's reference: SHA-256 (hashlib) of the store's files (the DuckDB file, the index file,
  the search snapshot) in 64 MiB pieces, one process per core;
- `cortexctl verify --jobs J --json` for each J of --jobs;
- with --before DIR, the `verify` of another cortexctl source tree
  (`git archive <commit> cortexctl | tar -x -C DIR`), run as
  `python -m cortexctl verify` with DIR first on PYTHONPATH, in DIR.

Each figure is the median wall time of --runs runs, with its ratio to the
reference timed in the same run and the CPU seconds the processes used (user +
system, workers included); the load average is printed before and after, since
the machine may be shared. Nothing is asserted: it is a report.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cold_start import find_cortexctl, log  # noqa: E402
from find_bench import write_corpus  # noqa: E402

TABLES = ("heads", "versions", "journal", "frames", "lex_docs", "lex_postings", "vectors")
REFERENCE = """
import sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
for t in sys.argv[2:]:
    con.execute(f"SELECT count(*), sum(hash(x)) FROM {t} AS x").fetchall()
"""


# The reference for a full verify: hashing the same bytes with hashlib on all cores. The
# store's files (the DuckDB file, the index file and the search snapshot) in 64 MiB pieces, SHA-256
# each, one process per core.
HASHLIB = """
import hashlib, os, sys
from concurrent.futures import ProcessPoolExecutor
PIECE = 64 << 20
def piece(job):
    path, offset = job
    with open(path, "rb") as fh:
        fh.seek(offset)
        return hashlib.sha256(fh.read(PIECE)).hexdigest()
jobs = [(p, o) for p in sys.argv[1:] if os.path.exists(p) for o in range(0, os.path.getsize(p), PIECE)]
with ProcessPoolExecutor(len(os.sched_getaffinity(0))) as pool:
    list(pool.map(piece, jobs))
print(sum(os.path.getsize(p) for p in sys.argv[1:] if os.path.exists(p)))
"""
STORE_FILES = ("cortex.duckdb", "cortex.usearch", "cortex.snapshot")


def timed(argv: list[str], env: dict | None = None, cwd: Path | None = None) -> tuple[float, float, subprocess.CompletedProcess]:
    """Wall seconds, CPU seconds (user + system of the process and its children) and the result."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done


def build(store: Path, n: int) -> None:
    corpus = store.parent / f"verify-bench-{n}.jsonl"
    log(f"writing {n:,} memories to {corpus}")
    write_corpus(corpus, n, 20261121, datetime.now(timezone.utc))
    log("importing (this takes a while)")
    done = subprocess.run([find_cortexctl(None), "import", str(corpus), "--store", str(store), "--json", "-q",
                           "--keep-actors", "--actor", "bench"], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"import failed: {done.stderr[-2000:]}")
    corpus.unlink()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--memories", type=int, default=100_000)
    ap.add_argument("--store", type=Path, help="reuse (or build once into) this store")
    ap.add_argument("--jobs", default="1,2", help="comma-separated worker counts to time")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--before", type=Path, help="a cortexctl source tree to time as the 'before'")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    tmp = None
    store = args.store.resolve() if args.store else None  # the "before" verify runs in its tree
    if store is None:
        tmp = tempfile.TemporaryDirectory(prefix="verify-bench-")
        store = Path(tmp.name) / "store"
    if not (store / "cortex.duckdb").exists():
        build(store, args.memories)

    cortexctl = find_cortexctl(None)
    runs: dict[str, list[tuple[float, float]]] = {}
    plan = [("reference (DuckDB reads the tables once)",
             [sys.executable, "-c", REFERENCE, str(store / "cortex.duckdb"), *TABLES], None),
            ("hashlib SHA-256 of the store's files, all cores",
             [sys.executable, "-c", HASHLIB, *(str(store / f) for f in STORE_FILES),
              *(str(f) for f in sorted(store.glob("cortex.usearch-*")) if not f.name.endswith(".checked"))], None)]
    if args.before:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(args.before), os.environ.get("PYTHONPATH")])))
        plan.append(("verify before", [sys.executable, "-m", "cortexctl", "verify", "--json", "--store", str(store)],
                     env))
    for j in [int(x) for x in args.jobs.split(",") if x]:
        plan.append((f"verify --jobs {j}", [cortexctl, "verify", "--json", "--store", str(store), "--jobs", str(j)],
                     None))

    load_before = os.getloadavg()
    memories = None
    for _ in range(args.runs):
        for name, argv, env in plan:
            # run in the other tree: `python -m` puts the working directory first on the path, which
            # from this checkout's root would be this tree's cortexctl, not the other's
            wall, cpu, done = timed(argv, env, cwd=args.before if name == "verify before" else None)
            if done.returncode != 0:
                sys.exit(f"{name} failed ({done.returncode}): {done.stderr[-2000:]}")
            if name.startswith("verify"):
                memories = json.loads(done.stdout).get("memories", memories)
            runs.setdefault(name, []).append((wall, cpu))
            log(f"{name}: {wall:.2f} s wall, {cpu:.2f} s CPU")
    load_after = os.getloadavg()

    ref = statistics.median(w for w, _ in runs[plan[0][0]])
    result = {
        "memories": memories, "store": str(store), "cpus": len(os.sched_getaffinity(0)),
        "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in load_after],
        "timings": {name: {"wall_s": round(statistics.median(w for w, _ in r), 3),
                           "cpu_s": round(statistics.median(c for _, c in r), 3),
                           "x_reference": round(statistics.median(w for w, _ in r) / ref, 2)}
                    for name, r in runs.items()},
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{memories:,} memories, {result['cpus']} CPUs, load average {load_before[0]:.2f} before, "
              f"{load_after[0]:.2f} after")
        for name, t in result["timings"].items():
            print(f"  {name:44s} {t['wall_s']:8.2f} s  {t['cpu_s']:8.2f} s CPU  {t['x_reference']:6.2f}x reference")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
