#!/usr/bin/env python3
"""Write latency across folds: what a writer waits for while the index file and the search snapshot
are folded (store/fold.py), against the fold as it was made inside the write, in the same run.

    python bench/fold_bench.py [--memories 100000] [--writes 2500] [--store DIR] [--keep] [--json]

A store of N synthetic memories (find_bench.py's corpus, hash embedder, `cortexctl import`), or
--store DIR as it is, copied afresh for each way of folding:

- ``background``: the default; a write that finds the tail or the delta grown starts a fold in
  another process and returns;
- ``inline``: ``CORTEXCTL_FOLD=inline``, the same fold run in the writing process after its write;
- ``in the write (before)``: the fold as cortexctl made it before: the index folded and the whole
  snapshot rebuilt from DuckDB, in the writing process (``vector_index.update``), the reference.

Each writes W memories one by one in one process (one in ten an update of an earlier one, which
drops a vector key) and times every write. Reported: p50, p99, max, p99/p50 (the target: <= 3 at
1M), how many writes found the snapshot not current afterwards (find then reads DuckDB), and the
time of one fold of each kind on the store as the writes left it. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODES = ("background", "inline", "in the write (before)")


def writer(store: Path, writes: int, mode: str) -> dict:
    """In a process of its own: W writes, each timed."""
    import random

    from cortexctl import Cortex
    from cortexctl.store import fold, snapshot, vector_index

    if mode == "in the write (before)":
        fold.run = lambda st, model: vector_index.update(st, model)  # the fold as it was: whole, in the write
    cx = Cortex(store=store, actor="bench")
    cx.store.refresh_snapshot()  # a copied store's snapshot is stale until the next fold
    r = random.Random(7)
    mine: list[str] = []
    times, stale = [], 0
    for i in range(writes):
        text = f"fold bench memory {i} about {r.choice(('walrus', 'deploy', 'latency', 'roadmap'))} {r.random():.6f}"
        t0 = time.perf_counter()
        if mine and i % 10 == 9:
            cx.update(r.choice(mine), text=text)
        else:
            mine.append(cx.write("fact", text).id)
        times.append(time.perf_counter() - t0)
        if snapshot.state(store) != "current":
            stale += 1
    t0 = time.perf_counter()
    fold.wait_idle(store)
    waited = time.perf_counter() - t0
    return {"times": times, "stale_after": stale, "waited_at_end_s": waited}


def one_fold(store: Path, kind: str) -> float:
    """Seconds of one fold of ``kind`` after 1,000 more writes (made with folds in the background)."""
    from cortexctl import Cortex
    from cortexctl.store import fold, vector_index

    os.environ["CORTEXCTL_FOLD"] = "inline"
    vector_index.FOLD_AT = 10**9
    fold.FOLD_DELTA = 10**9
    cx = Cortex(store=store, actor="bench")
    cx.store.refresh_snapshot()
    for i in range(1000):
        cx.write("fact", f"one fold bench memory {i}")
    t0 = time.perf_counter()
    if kind == "fold":
        fold.run(cx.store, cx.embedder.model)
    else:
        vector_index.update(cx.store, cx.embedder.model)
        cx.store.refresh_snapshot()
    return time.perf_counter() - t0


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(p * len(s)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--memories", type=int, default=100_000)
    ap.add_argument("--writes", type=int, default=2500)
    ap.add_argument("--store", type=Path)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--writer", nargs=3, metavar=("STORE", "WRITES", "MODE"), help=argparse.SUPPRESS)
    ap.add_argument("--one-fold", nargs=2, metavar=("STORE", "KIND"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.writer:
        print(json.dumps(writer(Path(args.writer[0]), int(args.writer[1]), args.writer[2])))
        return 0
    if args.one_fold:
        print(json.dumps(one_fold(Path(args.one_fold[0]), args.one_fold[1])))
        return 0
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from cold_start import bench_env, log
    from size_bench import build

    tmp = Path(tempfile.mkdtemp(prefix="cortex-foldbench-"))
    try:
        store = args.store or build(args.memories, tmp)
        env = {k: v for k, v in bench_env(tmp).items() if k != "CORTEXCTL_FOLD"}
        out: dict = {"memories": None, "writes": args.writes, "modes": {}, "one_fold_s": {}}
        for mode in MODES:
            work = tmp / "work"
            shutil.rmtree(work, ignore_errors=True)
            shutil.copytree(store, work)
            log(f"{mode}: {args.writes} writes ...")
            e = dict(env, **({"CORTEXCTL_FOLD": "inline"} if mode != "background" else {}))
            got = json.loads(subprocess.run([sys.executable, __file__, "--writer", str(work), str(args.writes), mode],
                                            env=e, check=True, capture_output=True, text=True).stdout)
            t = got["times"]
            out["modes"][mode] = {"p50_ms": pct(t, 0.5) * 1e3, "p90_ms": pct(t, 0.9) * 1e3, "p99_ms": pct(t, 0.99) * 1e3,
                                  "max_ms": max(t) * 1e3, "p99_over_p50": pct(t, 0.99) / pct(t, 0.5),
                                  "stale_after": got["stale_after"], "waited_at_end_s": got["waited_at_end_s"]}
        for kind in ("fold", "whole"):
            work = tmp / "work"
            shutil.rmtree(work, ignore_errors=True)
            shutil.copytree(store, work)
            log(f"one {kind} fold after 1,000 writes ...")
            out["one_fold_s"][kind] = json.loads(subprocess.run(
                [sys.executable, __file__, "--one-fold", str(work), kind], env=env, check=True,
                capture_output=True, text=True).stdout)
        shutil.rmtree(tmp / "work", ignore_errors=True)
        import duckdb

        con = duckdb.connect(str(store / "cortex.duckdb"), read_only=True)
        out["memories"] = con.execute("SELECT count(*) FROM heads").fetchone()[0]
        con.close()
        out["one_fold_ratio"] = out["one_fold_s"]["fold"] / out["one_fold_s"]["whole"]
        ref = out["modes"]["in the write (before)"]
        for m in out["modes"].values():
            m["max_vs_before"] = m["max_ms"] / ref["max_ms"]
        if args.json:
            print(json.dumps(out, indent=2))
        else:
            print(f"store: {out['memories']} memories; {args.writes} writes each (one in ten an update)")
            print(f"{'fold':<24} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'max ms':>9} {'p99/p50':>8} "
                  f"{'max/before':>10} {'stale':>6}")
            for mode, m in out["modes"].items():
                print(f"{mode:<24} {m['p50_ms']:8.1f} {m['p90_ms']:8.1f} {m['p99_ms']:8.1f} {m['max_ms']:9.1f} "
                      f"{m['p99_over_p50']:8.2f} {m['max_vs_before']:10.3f} {m['stale_after']:6d}")
            f = out["one_fold_s"]
            print(f"one fold after 1,000 writes: {f['fold']:.2f} s (from the snapshot and its delta) against "
                  f"{f['whole']:.2f} s (snapshot rebuilt from DuckDB): {out['one_fold_ratio']:.2f}x")
    finally:
        if args.keep and not args.store:
            print(f"store kept: {tmp / 'store'}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
