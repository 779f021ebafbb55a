#!/usr/bin/env python3
"""find A/B: the same cold finds on one store by two installs of cortexctl.

    python bench/find_ab.py --store DIR --a BEFORE/bin/cortexctl --b AFTER/bin/cortexctl [--runs 15] [--store-b DIR2]

The store is one built by ``bench/find_bench.py --keep`` (both installs must read its schema and
its search snapshot). Each run times one fresh ``find --near`` process of A, then of B, over the
same query, filter and store (and a ``find`` without ``--near``: the salience order alone), with the search snapshot (checked whole and stamped once by each install's ``healthcheck`` first,
as a writer leaves it) and then without it (moved aside), so load on the machine falls on both alike. Prints the median wall and CPU time of each and the
ratio B/A (below 1.0: B is faster). Nothing is asserted: it is a report. When the two write different
search snapshot formats, give B a copy of the store with its own snapshot (``--store-b``: copy DIR,
run B's ``cortexctl reindex --store DIR2``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cold_start import FIND_OK, bench_env, log, time_once  # noqa: E402
from find_bench import QUERIES, _rare_tag, checked  # noqa: E402


def _aside(snaps: dict) -> None:
    """find then reads DuckDB alone (the generation stamp does not name the file, so it is current
    again once back; the rename changes its change time, so its checked stamp no longer names it)."""
    for snap, aside in snaps.values():
        if snap.exists():
            os.rename(snap, aside)


def _back(snaps: dict) -> None:
    for snap, aside in snaps.values():
        if aside.exists():
            os.rename(aside, snap)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", type=Path, required=True)
    ap.add_argument("--a", required=True, help="the reference cortexctl (before)")
    ap.add_argument("--b", required=True, help="the cortexctl measured against it (after)")
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--memories", type=int, default=100_000, help="the store's size (picks a tag held by ~0.1%%)")
    ap.add_argument("--store-b", type=Path, help="B's copy of the store (default: the same store)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    stores = {"a": args.store, "b": args.store_b or args.store}
    env = bench_env(Path(tempfile.mkdtemp(prefix="cortex-findab-")))
    snaps = {side: (store / "cortex.snapshot", store.parent / f"cortex.snapshot.aside-{side}")
             for side, store in stores.items()}
    kinds = [True, False] if all(snap.exists() for snap, _ in snaps.values()) else [False]
    variants = [("", []), ("--type fact", ["--type", "fact"]), ("no --near", None)]  # None: salience order
    rare = _rare_tag(args.store, args.memories)
    if rare:
        variants.append((" ".join(f"--tag {t}" for t in rare), [x for t in rare for x in ("--tag", t)]))
    times: dict = {(side, name, k): [] for side in "ab" for name, _ in variants for k in kinds}
    for side, exe in (("a", args.a), ("b", args.b)):  # warm the page cache and both installs' bytecode
        time_once([exe, "find", "--near", "warm up", "--store", str(stores[side])], env, FIND_OK)
    log(f"timing {args.runs} runs ...")
    try:
        for with_snapshot in kinds:  # every run with the snapshot first: it is moved aside once, after them
            if with_snapshot:
                for side, exe in (("a", args.a), ("b", args.b)):
                    checked(exe, stores[side], env)
            else:
                _aside(snaps)
            for i in range(args.runs):
                q = QUERIES[i % len(QUERIES)]
                for name, extra in variants:
                    for side, exe in (("a", args.a), ("b", args.b)):
                        near = ["--near", q] if extra is not None else []
                        cmd = [exe, "find", *near, "--store", str(stores[side]), "-k", "10", *(extra or [])]
                        times[(side, name, with_snapshot)].append(time_once(cmd, env, FIND_OK))
    finally:
        _back(snaps)
    if False in kinds:  # moved aside and back, the snapshot's checked stamp no longer names it: stamped again
        for side, exe in (("a", args.a), ("b", args.b)):
            checked(exe, stores[side], env)
    rows = []
    for name, _ in variants:
        for k in kinds:
            a, b = times[("a", name, k)], times[("b", name, k)]
            wall_a, wall_b = (statistics.median(t[0] for t in x) for x in (a, b))
            cpu_a, cpu_b = (statistics.median(t[1] for t in x) for x in (a, b))
            rows.append({"filter": name, "snapshot": k, "a_wall_ms": 1000 * wall_a, "b_wall_ms": 1000 * wall_b,
                         "wall_ratio": wall_b / wall_a, "a_cpu_ms": 1000 * cpu_a, "b_cpu_ms": 1000 * cpu_b,
                         "cpu_ratio": cpu_b / cpu_a})
    if args.json:
        print(json.dumps({"runs": args.runs, "loadavg": os.getloadavg(), "find": rows}, indent=2))
        return 0
    print(f"find --near (and without it: salience order), median of {args.runs} fresh processes each (load average {os.getloadavg()[0]:.1f})")
    for r in rows:
        label = (r["filter"] or "plain") + (", snapshot" if r["snapshot"] else ", DuckDB")
        print(f"{label:<36} wall A {r['a_wall_ms']:7.1f} ms  B {r['b_wall_ms']:7.1f} ms  B/A {r['wall_ratio']:.2f}"
              f"   cpu A {r['a_cpu_ms']:7.1f} ms  B {r['b_cpu_ms']:7.1f} ms  B/A {r['cpu_ratio']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
