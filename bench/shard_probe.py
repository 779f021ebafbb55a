#!/usr/bin/env python3
"""What a smaller index file per find would give: one visibility's vectors in a file of their own,
against the store's whole index file, opened and searched cold.

    python bench/shard_probe.py --store PATH [--visibility public] [--runs 12] [--n 50] [--json]

A cold `find --near` at a million memories spends most of its vector lane in usearch's view of the
whole index file (a pass over every node), one search and the unmapping as the lane returns
(bench/README.md, "Cold find at 1M"). A viewer who sees only the public memories (and its own few)
searches the whole graph for `first_want` nearest so that enough of them pass its filter. This probe
builds, in a temporary directory, an index of only the store's live memories of one visibility
(their current vectors, cortexctl's own build settings for that size) and times, each in a fresh
process and interleaved run by run with the same queries (stored vectors of that visibility):

- the store's index file: view, a search as wide as find asks for such a viewer
  (`vector_index.first_want(n, total, passing)`), and letting the view go (the reference);
- the visibility's own file: view, a search for `first_want(n, size, size)` (nothing to filter
  out), and letting it go.

Each view searches at the expansion `find` gives it (`hnsw.expansion_for`, or the count asked for
when that is wider), and the small file holds only the vectors of the store's index model.

It prints the median of each phase and of the whole, and the ratio of the small file's whole to the
reference's. The page cache is warm for both (as for a find run a second time); nothing about
permissions or deltas is modelled: it measures only the index's part. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# One cold open, search and release of an index file, in a fresh process: milliseconds of each.
PROBE = """
import sys, time
import numpy as np
from pathlib import Path
from cortexctl.index import hnsw
path, want, queries, i = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
q = np.load(queries)[i]
t0 = time.perf_counter()
view = hnsw._view(Path(path), False)
view.expansion_search = hnsw.expansion_for(len(view), int(view.connectivity))  # as find's open_view sets it
t1 = time.perf_counter()
hnsw.search(view, q, want)
t2 = time.perf_counter()
del view
t3 = time.perf_counter()
print((t1 - t0) * 1000, (t2 - t1) * 1000, (t3 - t2) * 1000)
"""


def build(store: Path, visibility: str, model: str, tmp: Path,
          n_queries: int) -> tuple[Path, Path, int, int, float]:
    """The index file of the visibility's vectors of ``model`` and a file of queries; (file, queries,
    its size, the store's live memories, build seconds)."""
    import duckdb
    import numpy as np

    sys.path.insert(0, str(ROOT))
    from cortexctl.index import hnsw

    con = duckdb.connect(str(store / "cortex.duckdb"), read_only=True)
    try:
        total = con.execute("SELECT count(*) FROM heads WHERE tombstoned_at IS NULL").fetchone()[0]
        rows = con.execute(
            "SELECT x.key, x.vec FROM vectors x JOIN heads h ON h.id = x.id AND h.current_version = x.version"
            " WHERE h.visibility = ? AND h.tombstoned_at IS NULL AND x.model = ? ORDER BY x.key",
            [visibility, model]).fetchall()
    finally:
        con.close()
    if not rows:
        raise SystemExit(f"no live memory of visibility {visibility!r} with a vector in {store}")
    keys = np.array([r[0] for r in rows], dtype=np.uint64)
    vectors = np.stack([np.frombuffer(r[1], dtype=np.float16) for r in rows]).astype(np.float32)
    index = hnsw.new(vectors.shape[1], len(keys))
    started = time.perf_counter()
    hnsw.add(index, keys, vectors)
    seconds = time.perf_counter() - started
    path = tmp / f"{visibility}.usearch"
    index.save(str(path))
    picked = vectors[np.random.default_rng(1).choice(len(vectors), min(n_queries, len(vectors)), replace=False)]
    queries = tmp / "queries.npy"
    np.save(queries, picked / np.linalg.norm(picked, axis=1, keepdims=True))
    return path, queries, len(keys), int(total), seconds


def probe(path: Path, want: int, queries: Path, i: int) -> list[float]:
    out = subprocess.run([sys.executable, "-c", PROBE, str(path), str(want), str(queries), str(i)], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    return [float(x) for x in out.split()]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", type=Path, required=True, help="a DuckDB store with its index file")
    ap.add_argument("--visibility", default="public", help="the memories the small file holds (default public)")
    ap.add_argument("--runs", type=int, default=12)
    ap.add_argument("--n", type=int, default=50, help="results the vector lane keeps (find's default lane size)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from cortexctl.store.vector_index import first_want

    if args.runs < 1:
        raise SystemExit("--runs must be at least 1")
    whole = args.store / "cortex.usearch"
    if not whole.is_file():
        raise SystemExit(f"{whole}: no index file (run `cortexctl reindex` first)")
    model = json.loads((args.store / "cortex.usearch.json").read_text())["model"]
    with tempfile.TemporaryDirectory() as tmp:
        small, queries, size, total, built = build(args.store, args.visibility, model, Path(tmp), args.runs)
        wide, narrow = first_want(args.n, total, size), first_want(args.n, size, size)
        runs = {"whole": [], "small": []}
        for i in range(min(args.runs, size)):
            runs["whole"].append(probe(whole, wide, queries, i))
            runs["small"].append(probe(small, narrow, queries, i))
        small_bytes = small.stat().st_size
    med = {k: [statistics.median(r[j] for r in v) for j in range(3)] + [statistics.median(sum(r) for r in v)]
           for k, v in runs.items()}
    result = {"store": str(args.store), "memories": total, "visibility": args.visibility, "its_memories": size,
              "build_s": round(built, 2), "whole_file_bytes": whole.stat().st_size, "small_file_bytes": small_bytes,
              "want_whole": wide, "want_small": narrow, "runs": len(runs["whole"]),
              "median_ms": {k: {"view": round(v[0], 1), "search": round(v[1], 1), "release": round(v[2], 1),
                                "total": round(v[3], 1)} for k, v in med.items()},
              "ratio": round(med["small"][3] / med["whole"][3], 3)}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"store: {total:,} live memories; {size:,} of them {args.visibility} "
          f"(their file built in {built:.1f} s, {small_bytes / 1e6:.0f} MB against {whole.stat().st_size / 1e6:.0f} MB)")
    for name, label, want in (("whole", "the store's index file", wide), ("small", f"a {args.visibility}-only file", narrow)):
        v = med[name]
        print(f"  {label:28} search {want:>5} wide: view {v[0]:6.1f}  search {v[1]:6.1f}  release {v[2]:6.1f}"
              f"  = {v[3]:6.1f} ms")
    print(f"  ratio (small / whole, medians of {len(runs['whole'])} cold runs each): {result['ratio']:.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
