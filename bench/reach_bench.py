#!/usr/bin/env python3
"""Vectors an index file's graph cannot reach, and what linking them costs.

    python bench/reach_bench.py --store PATH [--json]

For each index file of the store (read, never changed: each is copied to a temp directory), in the
same run:

- the reference: usearch's own ``save`` of the file's graph, loaded into memory;
- the walk (``hnsw.unreachable``): the vectors no walk from the graph's entry reaches, which no
  search can find;
- the link (``hnsw.link_cut_off`` on the copy as saved), timed against the save;
- of the vectors that were cut off, how many a search at the default expansion finds by their own
  vector, before and after the link.

Nothing is asserted: it is a report.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cortexctl import Cortex  # noqa: E402
from cortexctl.index import hnsw  # noqa: E402
from cortexctl.store import vector_index as vi  # noqa: E402


def _found_by_own_vector(index, keys) -> int:
    import numpy as np

    if not len(keys):
        return 0
    got = index.search(np.vstack([index.get(int(k)) for k in keys]).astype(np.float32), 10)
    return sum(int(k) in {int(x) for x in row} for k, row in zip(keys, np.asarray(got.keys).reshape(len(keys), -1)))


def main() -> int:
    from usearch.index import Index

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", required=True, type=Path)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not args.store.is_dir():
        print(f"reach_bench: no store at {args.store}", file=sys.stderr)
        return 1
    cx = Cortex(store=args.store, actor="bench")
    rec = vi.read_record(cx.store)
    if rec is None:
        print(f"reach_bench: no index record in {args.store}", file=sys.stderr)
        return 1
    rows = []
    with tempfile.TemporaryDirectory(prefix="cortex-reach-") as tmp:
        for part in rec.parts:
            copy = Path(tmp) / "copy.usearch"
            shutil.copyfile(vi.part_path(cx.store, part), copy)
            index = Index.restore(str(copy), view=False)
            index.expansion_search = hnsw.expansion_for(len(index), int(index.connectivity))
            saved = Path(tmp) / "saved.usearch"
            t = time.perf_counter()
            index.save(str(saved))
            save_s = time.perf_counter() - t
            t = time.perf_counter()
            cut = hnsw.unreachable(saved)
            walk_s = time.perf_counter() - t
            before = _found_by_own_vector(index, cut)
            t = time.perf_counter()
            left = hnsw.link_cut_off(saved, index)
            link_s = time.perf_counter() - t
            del index
            linked = Index.restore(str(saved), view=False)
            linked.expansion_search = hnsw.expansion_for(len(linked), int(linked.connectivity))
            rows.append({"file": part.file, "vectors": len(linked), "cut_off": len(cut), "left": left,
                         "found_before": before, "found_after": _found_by_own_vector(linked, cut),
                         "save_s": round(save_s, 3), "walk_s": round(walk_s, 3), "link_s": round(link_s, 3)})
            del linked
            copy.unlink()
            saved.unlink()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    total = sum(r["vectors"] for r in rows)
    cut = sum(r["cut_off"] for r in rows)
    for r in rows:
        print(f"{r['file']:34} {r['vectors']:>9,} vectors  {r['cut_off']:>5} cut off "
              f"(found by own vector {r['found_before']} -> {r['found_after']}, {r['left']} left)  "
              f"walk {r['walk_s']:.2f} s, link {r['link_s']:.2f} s = {r['link_s'] / max(r['save_s'], 1e-9):.2f}x "
              f"the save ({r['save_s']:.2f} s)")
    found = sum(r["found_after"] for r in rows)
    print(f"all: {cut:,} of {total:,} vectors cut off ({cut / max(total, 1):.4%}); after the link "
          f"{found:,} of them found by their own vector; link {sum(r['link_s'] for r in rows):.2f} s = "
          f"{sum(r['link_s'] for r in rows) / max(sum(r['save_s'] for r in rows), 1e-9):.2f}x the saves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
