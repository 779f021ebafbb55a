#!/usr/bin/env python3
"""HNSW build parameters: recall@10 against exact search, and build time, per setting.

    python bench/hnsw_params.py [--memories 100000] [--queries 200] [--settings 16:64,16:128,32:64:f32]
                                [--search 256,512,1024] [--vectors FILE.npy]

Embeds N memories of find_bench.py's corpus with the built-in hash embedder, builds one usearch
index per connectivity:expansion_add[:dtype] setting (cosine, every core; the dtype cortexctl
builds with unless one is given), and prints each build's
wall time (and its ratio to the first setting's, timed in the same run) and its recall@10 over
noisy stored vectors at each search expansion of --search (with the time a search takes). Recall is counted as
in find_bench.py: a hit when its similarity (computed exactly from the f32 vectors, whatever the
index's dtype) reaches the exact 10th best. Each build line also gives usearch's memory count and the
saved file's size per vector. --vectors keeps the embedded corpus in a .npy file between runs (a
smaller --memories takes its first rows: the corpus is made in order). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from find_bench import write_corpus  # noqa: E402


def _file_bytes(index) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        index.save(str(Path(tmp) / "i.usearch"))
        return (Path(tmp) / "i.usearch").stat().st_size


def main() -> int:
    import numpy as np
    from usearch.index import Index

    from cortexctl.embed.hashing import embed
    from cortexctl.index import hnsw

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--memories", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--settings", default="16:64,16:128,24:96,32:64")
    ap.add_argument("--search", default="256,512,1024", help="search expansions to try")
    ap.add_argument("--seed", type=int, default=20261121)
    ap.add_argument("--vectors", type=Path, help="a .npy file keeping the embedded corpus between runs: "
                    "read when it exists, else written")
    args = ap.parse_args()
    if args.vectors and args.vectors.exists():
        mat = np.load(args.vectors)[: args.memories]  # the corpus is made in order: a prefix is a smaller one
    else:
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / "c.jsonl"
            write_corpus(src, args.memories, args.seed, datetime.now(timezone.utc))
            texts = [json.loads(line)["text"] for line in open(src, encoding="utf-8")]
        mat = np.vstack([embed(texts[s : s + 4096]) for s in range(0, len(texts), 4096)])
        if args.vectors:
            np.save(args.vectors, mat)
    keys = np.arange(1, len(mat) + 1, dtype=np.uint64)
    rng = np.random.default_rng(7)
    picks = rng.integers(0, len(mat), args.queries)
    qs = mat[picks] + rng.normal(0, 0.02, size=(args.queries, mat.shape[1])).astype(np.float32)
    qs /= np.linalg.norm(qs, axis=1, keepdims=True)
    kth = -np.partition(-(qs @ mat.T), 9, axis=1)[:, 9]
    print(f"{len(mat)} vectors, {mat.shape[1]}-d; cortexctl builds connectivity:expansion_add "
          f"{':'.join(map(str, hnsw.build_settings(len(mat))))} and searches at expansion {hnsw.expansion_for(len(mat))} "
          f"({hnsw.expansion_for(len(mat), hnsw.CONNECTIVITY)} with connectivity {hnsw.CONNECTIVITY})")
    first = None
    for setting in args.settings.split(","):
        parts = setting.split(":")
        conn, exp_add = int(parts[0]), int(parts[1])
        dtype = parts[2] if len(parts) > 2 else hnsw.DTYPE
        index = Index(ndim=mat.shape[1], metric=hnsw.METRIC, dtype=dtype, connectivity=conn,
                      expansion_add=exp_add, expansion_search=hnsw.expansion_for(len(mat), conn))
        t0 = time.perf_counter()
        index.add(keys, mat)
        dt = time.perf_counter() - t0
        first = first or dt
        print(f"connectivity {conn:3d} expansion_add {exp_add:4d} {dtype}: build {dt:7.1f} s = {dt / first:4.2f}x"
              f"  ({len(mat) / dt:.0f} vectors/s, {index.memory_usage / len(mat):.0f} bytes/vector in memory,"
              f" {_file_bytes(index) / len(mat):.0f} in the file)", flush=True)
        for exp_search in (int(x) for x in args.search.split(",")):
            index.expansion_search = exp_search
            hits = 0
            t0 = time.perf_counter()
            for q, kk in zip(qs, kth):
                found = index.search(q, 10)
                exact = mat[np.asarray(found.keys, dtype=np.int64) - 1] @ q  # not the index's own (f16) figures
                hits += int(np.sum(exact >= kk - 1e-5))
            ms = 1000 * (time.perf_counter() - t0) / len(qs)
            print(f"    expansion_search {exp_search:5d}: recall@10 {hits / (10 * len(qs)):.4f}  ({ms:.2f} ms a search)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
