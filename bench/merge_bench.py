#!/usr/bin/env python3
"""The next search snapshot made from the previous one plus its delta (``snapshot.merge``) against the
same snapshot rebuilt from DuckDB (``snapshot.collect``: the DuckDB read and the arrays), in the same
run: seconds, their ratio, and the peak RSS of each.

    python bench/merge_bench.py [--memories 100000] [--writes 1000] [--repeat 3] [--store DIR] [--json]

A throwaway store of N synthetic memories (find_bench.py's corpus, hash embedder) made by
`cortexctl import` (which ends with a fold: the snapshot is current), then ``--writes`` writes through
the engine, half new memories and half updates of existing ones (a new vector each, the old key
dropped), which the delta holds. Each side then runs ``--repeat`` times, each in a fresh process (so
that its peak RSS is its own; ``resource.getrusage``, which starts from the parent's, kept small:
"RSS at start" is the floor), and the best time is reported. Both sides are
timed from an open store to the arrays in memory: ``merge`` includes reading the delta's document,
``collect`` opening the read connection. The arrays are not written out (the same ``format.write``
follows either). With --store, a store left by an earlier run (``--keep``) is used as it is.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def child(side: str, store: Path) -> dict:
    """One timing in this process: ``merge`` or ``collect``."""
    from cortexctl.store import snapshot

    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if side == "merge":
        from cortexctl.store.snapshot.merge import merge

        t0 = time.perf_counter()
        pair = snapshot.open_current(store)
        if pair is None or pair[1] is None:
            raise SystemExit("bench: the store has no current snapshot and delta")
        arrays, _ = merge(*pair)
        elapsed = time.perf_counter() - t0
    else:
        from cortexctl.store.db import DuckStorage

        t0 = time.perf_counter()
        with DuckStorage(store).read() as con:
            arrays, _ = snapshot.collect(con)
        elapsed = time.perf_counter() - t0
    return {"side": side, "seconds": elapsed, "memories": int(len(arrays["head_id"])),
            "postings": int(len(arrays["by_term_doc"])),
            "rss_start_mb": rss_before / 1024, "rss_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def write_some(store: Path, writes: int, seed: int = 7) -> dict:
    """``writes`` writes through the engine: half new memories, half updates of existing ones."""
    from cortexctl import Cortex
    from cortexctl.store import snapshot

    from cortexctl.memory.types import TYPE_CODES

    r = random.Random(seed)
    with Cortex(store=store, actor="bench").store.read() as con:
        owners = con.execute("SELECT id, actor FROM heads WHERE tombstoned_at IS NULL AND type = ? ORDER BY id",
                             [TYPE_CODES["fact"]]).fetchall()
    by: dict[str, Cortex] = {}

    def cx(actor: str) -> Cortex:
        if actor not in by:
            by[actor] = Cortex(store=store, actor=actor)
        return by[actor]

    t0 = time.perf_counter()
    updates = r.sample(owners, min(writes // 2, len(owners)))
    for i in range(writes):
        if i % 2 and updates:
            id_, actor = updates.pop()
            cx(actor).update(id_, f"revised note {i}: the quokka census moved to friday #{r.randrange(10**6)}")
        else:
            cx("bench").write("fact", f"new note {i}: okapi migration plan #{r.randrange(10**6)}", tags=["bench"])
    elapsed = time.perf_counter() - t0
    pair = snapshot.open_current(store)
    if pair is None or pair[1] is None:
        raise SystemExit("bench: the writes left no current delta (a fold ran, or the delta grew past DELTA_MAX)")
    changed = len(pair[1]["ids"])
    pair[0].close()
    return {"writes": writes, "seconds": elapsed, "delta_memories": changed}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--memories", type=int, default=100_000)
    ap.add_argument("--writes", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--store", type=Path, help="a store with a current snapshot and delta, used as it is")
    ap.add_argument("--keep", action="store_true", help="keep the store built and print its path")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--child", choices=("merge", "collect", "write"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        got = write_some(args.store, args.writes) if args.child == "write" else child(args.child, args.store)
        print(json.dumps(got))
        return 0
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from cold_start import log
    from size_bench import build

    report: dict = {}
    store = args.store
    if store is None:
        store = build(args.memories, Path(tempfile.mkdtemp(prefix="cortex-mergebench-")))
        log(f"writing {args.writes} memories (half new, half updates) ...")
        # in a child too: this process stays small, since a child's peak RSS starts from its parent's
        report["writes"] = json.loads(subprocess.run(
            [sys.executable, __file__, "--child", "write", "--store", str(store), "--writes", str(args.writes)],
            check=True, stdout=subprocess.PIPE, text=True).stdout)
    runs: dict[str, list[dict]] = {"merge": [], "collect": []}
    for _ in range(args.repeat):
        for side in ("collect", "merge"):  # alternated, so that both see the machine alike
            out = subprocess.run([sys.executable, __file__, "--child", side, "--store", str(store)],
                                 check=True, stdout=subprocess.PIPE, text=True).stdout
            runs[side].append(json.loads(out))
            log(f"{side}: {runs[side][-1]['seconds']:.2f} s, peak RSS {runs[side][-1]['rss_peak_mb']:.0f} MB")
    best = {side: min(r, key=lambda x: x["seconds"]) for side, r in runs.items()}
    report.update({
        "memories": best["merge"]["memories"], "postings": best["merge"]["postings"],
        "merge": best["merge"], "collect": best["collect"],
        "speedup": best["collect"]["seconds"] / best["merge"]["seconds"],
        "rss_ratio": best["merge"]["rss_peak_mb"] / best["collect"]["rss_peak_mb"],
        "runs": runs,
    })
    if args.keep:
        report["store"] = str(store)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        m, c = best["merge"], best["collect"]
        print(f"store: {report['memories']} memories, {report['postings']} postings"
              + (f"; delta: {report['writes']['delta_memories']} memories" if "writes" in report else ""))
        print(f"{'':<10} {'seconds':>8} {'peak RSS MB':>12} {'RSS at start':>13}")
        for name, r in (("collect", c), ("merge", m)):
            print(f"{name:<10} {r['seconds']:>8.2f} {r['rss_peak_mb']:>12.0f} {r['rss_start_mb']:>13.0f}")
        print(f"merge is {report['speedup']:.1f}x faster; peak RSS {report['rss_ratio']:.2f}x of collect's")
        if args.keep:
            print(f"store kept: {store}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
