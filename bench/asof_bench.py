#!/usr/bin/env python3
"""find --as-of benchmark: the store as it stood at a record time, against plain find.

    python bench/asof_bench.py [--memories 100000] [--changes 1000] [--runs 5] [--json] [--keep | --reuse DIR]

Builds a throwaway store of N synthetic memories (bench/find_bench.py's corpus, imported in
process on a fixed clock: 91% at first, 9% an hour later), then two hours later changes 1% of
the first ones (text updates, tag changes and forgets; ``build`` says why not 10%). So record
time T10 (half an hour after the first import) has 10% of the memories changed or written after
it, and T1 (an hour and a half after) 1%. Then it prints, as ratios to plain find in the same run:

- the engine call, warm (median of --runs rounds over the queries): ``find --near`` and
  find without --near (salience order), plain and ``--as-of`` T1 and T10;
- the semantic lane's two ways under --as-of (over-fetching the HNSW index by |C|, or an
  exact search), which sets ``engine/asof.py``'s EXACT_VECTORS; and --as-of with the changed
  memories' stored vectors read back, as for a costly embedder (``Embedder.costly``: an endpoint,
  e5), rather than embedded again by the hash embedder;
- the CLI, cold, once each: ``cortexctl find --near TEXT`` with and without --as-of.

The target (issue 23): --as-of within 2x plain find. Nothing is asserted: it is a report.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cold_start import ACTOR, bench_env, find_cortexctl, log  # noqa: E402
from find_bench import QUERIES, write_corpus  # noqa: E402

NOW = datetime.utcnow().replace(microsecond=0)
IMPORTED = NOW - timedelta(days=3)


def build(store: Path, tmp: Path, n: int, changes: int) -> dict:
    """The store and its history; the record times T1 and T10 and what changed after each.

    The import holds 90% of the memories (the clock at IMPORTED); an hour later 9% more are
    imported (new memories: they did not exist at T10); two hours later ``changes`` of the first
    ones change, one engine call each (text updates, tag changes and forgets, half, a quarter and a
    quarter), at most 1% of N. Changing 10% one call at a time takes the better part of an hour on
    a shared machine; memories written after T weigh on find --as-of as changed ones do in the
    over-fetched lanes, and less in the replay (there is nothing of theirs to replay)."""
    from cortexctl import Cortex
    from cortexctl.store.interface import Viewer

    jsonl = tmp / "corpus.jsonl"
    write_corpus(jsonl, n, 7, IMPORTED)
    lines = jsonl.read_bytes().splitlines(keepends=True)
    base, later = lines[: n - n * 9 // 100], lines[n - n * 9 // 100:]
    cx = Cortex(store=store, actor=ACTOR)
    clock = [IMPORTED]
    cx.context.clock = lambda: clock[0]
    t0 = time.perf_counter()
    mine: list[str] = []
    for hours, part in ((0, base), (1, later)):
        clock[0] = IMPORTED + timedelta(hours=hours)
        (tmp / "part.jsonl").write_bytes(b"".join(part))
        with open(tmp / "part.jsonl", "rb") as fh:
            cx.import_jsonl(fh, keep_actors=True)
        if not mine:  # the actor's memories of the first import: those that change
            with cx.store.reading() as tx:
                mine = sorted(h["id"] for h, _ in tx.iter_visible(Viewer(ACTOR)) if h["actor"] == ACTOR)
    log(f"imported {n} in {time.perf_counter() - t0:.1f}s")
    r = random.Random(11)
    chosen = r.sample(mine, min(len(mine), changes, n // 100))
    t0 = time.perf_counter()
    for i, id_ in enumerate(chosen):
        clock[0] = IMPORTED + timedelta(hours=2, microseconds=i)
        kind = i % 4
        if kind < 2:
            cx.update(id_, f"changed fact number {i} about the {r.choice(QUERIES)}")
        elif kind == 2:
            cx.tag(id_, add=["changed"])
        else:
            cx.forget(id_, reason="bench")
    log(f"changed {len(chosen)} in {time.perf_counter() - t0:.1f}s")
    clock[0] = NOW
    cx.reindex()
    return {"T1": IMPORTED + timedelta(hours=1, minutes=30), "T10": IMPORTED + timedelta(minutes=30),
            "changed_T1": len(chosen), "changed_T10": len(chosen) + len(later)}


def engine_times(store: Path, runs: int, at: datetime | None, near: bool, costly: bool = False,
                 resident: bool = False) -> float:
    """Median seconds of one find (warm: one round first, not counted). ``costly``: the hash embedder
    taken for a costly one (``Embedder.costly``), so that --as-of reads stored vectors back.
    ``resident``: a resident Cortex, as ``cortexctl mcp`` keeps (its search state and the pasts it
    replayed are kept while the store stays as it is)."""
    from cortexctl import Cortex
    from cortexctl.engine.results import FindQuery

    cx = Cortex(store=store, actor=ACTOR, resident=resident)
    if costly:
        cx.context.embedder.costly = True

    def once(q: str) -> float:
        query = FindQuery(k=10, near=q if near else None)
        t0 = time.perf_counter()
        if at is None:
            cx.find_with_warnings(query)
        else:
            cx.find_as_of(query, at.isoformat() + "Z")
        return time.perf_counter() - t0

    queries = QUERIES if near else QUERIES[:4]
    for q in queries:
        once(q)
    return statistics.median(once(q) for _ in range(runs) for q in queries)


def cli_once(cortexctl: str, store: Path, env: dict, *args: str) -> float:
    t0 = time.perf_counter()
    p = subprocess.run([cortexctl, "find", "--store", str(store), *args], env=env, capture_output=True)
    dt = time.perf_counter() - t0
    if p.returncode not in (0, 1):
        raise SystemExit(f"bench: find failed ({p.returncode}): {p.stderr.decode()}")
    return dt


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--memories", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--changes", type=int, default=1000, help="engine calls changing memories (at most 1%% of N)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--cortexctl", default=None)
    ap.add_argument("--reuse", metavar="DIR", help="time the store a --keep run left in DIR (no build)")
    args = ap.parse_args(argv)
    tmp = Path(args.reuse) if args.reuse else Path(tempfile.mkdtemp(prefix="cortexctl-asof-bench-"))
    keep = args.keep or bool(args.reuse)
    try:
        env = bench_env(tmp)
        import os

        os.environ.update({k: v for k, v in env.items() if k.startswith(("XDG_", "CORTEXCTL_"))})
        store = tmp / "store"
        if args.reuse:
            made = json.loads((tmp / "made.json").read_text())
            args.memories = made.pop("memories")
            made.update({k: datetime.fromisoformat(made[k]) for k in ("T1", "T10")})
        else:
            made = build(store, tmp, args.memories, args.changes)
            (tmp / "made.json").write_text(json.dumps({**made, "memories": args.memories}, default=str))
        from cortexctl.engine import asof

        out: dict = {"memories": args.memories, "changed_T1": made["changed_T1"], "changed_T10": made["changed_T10"],
                     "exact_vectors_above": asof.EXACT_VECTORS}
        for near in (True, False):
            lane = "near" if near else "salience"
            plain = engine_times(store, args.runs, None, near)
            out[f"{lane}_plain_ms"] = round(plain * 1000, 2)
            for name in ("T1", "T10"):
                t = engine_times(store, args.runs, made[name], near)
                out[f"{lane}_{name}_ms"] = round(t * 1000, 2)
                out[f"{lane}_{name}_ratio"] = round(t / plain, 2)
        for near in (True, False):  # in a resident process (cortexctl mcp)
            lane = "resident_near" if near else "resident_salience"
            plain = engine_times(store, args.runs, None, near, resident=True)
            out[f"{lane}_plain_ms"] = round(plain * 1000, 2)
            for name in ("T1", "T10"):
                t = engine_times(store, args.runs, made[name], near, resident=True)
                out[f"{lane}_{name}_ms"] = round(t * 1000, 2)
                out[f"{lane}_{name}_ratio"] = round(t / plain, 2)
        exact_above = asof.EXACT_VECTORS
        for way, limit in (("hnsw", 10**9), ("exact", 0)):
            asof.EXACT_VECTORS = limit
            for name in ("T1", "T10"):
                out[f"semantic_{way}_{name}_ms"] = round(engine_times(store, args.runs, made[name], True) * 1000, 2)
        asof.EXACT_VECTORS = exact_above
        for name in ("T1", "T10"):
            out[f"semantic_stored_{name}_ms"] = round(engine_times(store, args.runs, made[name], True, costly=True) * 1000, 2)
        cortexctl = find_cortexctl(args.cortexctl)
        q = QUERIES[0]
        cli_once(cortexctl, store, env, "--near", q)  # the page cache and bytecode, once
        plain = cli_once(cortexctl, store, env, "--near", q)
        out["cli_plain_ms"] = round(plain * 1000, 1)
        for name in ("T1", "T10"):
            t = cli_once(cortexctl, store, env, "--near", q, "--as-of", made[name].isoformat() + "Z")
            out[f"cli_{name}_ms"] = round(t * 1000, 1)
            out[f"cli_{name}_ratio"] = round(t / plain, 2)
        if args.json:
            print(json.dumps(out))
        else:
            for k, v in out.items():
                print(f"{k:28} {v}")
        return 0
    finally:
        if keep:
            log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
