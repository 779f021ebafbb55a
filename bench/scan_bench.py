#!/usr/bin/env python3
"""Searching a small index file by comparing each vector against walking its graph.

    python bench/scan_bench.py [--sizes 5000,16384,20000,50000] [--queries 400] [--json]

For each size, one f16 graph built as a whole build builds it (``hnsw.new``) from memories
of a few repeated words embedded by the built-in embedder (the shape of ``tests/unit``'s stores,
where walks miss most), saved and opened as a find opens it (``hnsw.open_view``). In the same run:

- the walk: usearch's search of the graph at the expansion a find uses (``hnsw.expansion_for``);
- the scan: each vector compared (what ``hnsw.search`` does up to ``hnsw.SCAN_MAX``);
- recall@10 of the walk against the exact ten (a memory as near as the tenth counts: ties).

Nothing is asserted: it is a report.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cortexctl.embed import hashing  # noqa: E402
from cortexctl.index import hnsw  # noqa: E402

WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
         "quebec romeo sierra tango uniform victor whiskey xray yankee zulu").split()


def _text(i: int) -> str:
    return f"note {i} " + " ".join(WORDS[(i * p) % len(WORDS)] for p in (1, 3, 7, 11)) + f" item{i}"


def _timed(view, queries, exact: bool) -> tuple[float, list]:
    t0 = time.perf_counter()
    found = [view.search(q, 10, exact=exact)[0] for q in queries]
    return (time.perf_counter() - t0) / len(queries), found


def measure(size: int, n_queries: int, workdir: Path) -> dict:
    import numpy as np

    x = hashing.embed([_text(i) for i in range(size)])
    index = hnsw.new(x.shape[1], size)
    hnsw.add(index, np.arange(size, dtype=np.uint64), x)
    path = workdir / f"ix{size}"
    fp = hnsw.save_beside(index, path.with_suffix(".tmp"))
    hnsw.install(path.with_suffix(".tmp"), path, fp)
    view = hnsw.open_view(path, fp)
    step = max(1, size // (n_queries // 2))
    texts = [f"item{i} zulu" for i in range(0, size, step)][: n_queries // 2]
    texts += [f"note {i} kilo" for i in range(7, size, step)][: n_queries - len(texts)]
    queries = hashing.embed(texts)
    _timed(view, queries[:20], False), _timed(view, queries[:20], True)  # pages in, both ways
    walk_s, walked = _timed(view, queries, False)
    scan_s, _scanned = _timed(view, queries, True)
    hits = 0
    for q, keys in zip(queries, walked):
        sims = x @ q
        tenth = np.sort(sims)[-10]
        hits += int((sims[keys.astype(np.int64)] >= tenth - 1e-3).sum())
    return {"size": size, "expansion": view.expansion_search, "walk_ms": walk_s * 1e3, "scan_ms": scan_s * 1e3,
            "scan_per_walk": scan_s / walk_s, "walk_recall_at_10": hits / (10 * len(queries))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=f"5000,{hnsw.SCAN_MAX},20000,50000")
    ap.add_argument("--queries", type=int, default=400)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        print(f"scan_bench: --sizes {args.sizes!r}: not a list of numbers", file=sys.stderr)
        return 2
    if args.queries < 2 or any(s < 10 for s in sizes):
        print("scan_bench: --queries needs 2 or more and each size 10 or more", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(s, args.queries, Path(tmp)) for s in sizes]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"SCAN_MAX = {hnsw.SCAN_MAX}: a file this size or smaller is scanned")
    print(f"{'vectors':>8} {'expansion':>9} {'walk ms':>8} {'scan ms':>8} {'scan/walk':>9} {'walk recall@10':>14}")
    for r in rows:
        print(f"{r['size']:>8} {r['expansion']:>9} {r['walk_ms']:>8.3f} {r['scan_ms']:>8.3f} "
              f"{r['scan_per_walk']:>8.2f}x {r['walk_recall_at_10']:>14.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
