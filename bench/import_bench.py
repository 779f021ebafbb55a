#!/usr/bin/env python3
"""Import throughput, phase by phase, against usearch's own batched add in the same run.

    python bench/import_bench.py [--memories 100000] [--before DIR] [--runs 1] [--keep] [--json]

Writes N synthetic memories (find_bench.py's corpus) and imports them into a fresh store with
``Cortex.import_jsonl`` (the built-in hash embedder, the default batch size), in a fresh process each
time, timing its phases:

- ``checking``: the first pass (parse, check, embed, postings, journal payloads; worker processes);
- ``rows``: from the start until the last batch has committed: every memory journaled and in its
  tables (the issue's "journaled rows" figure is N / this);
- ``index``: the time the graph builder spent adding vectors (it runs beside the batches, on every
  core); ``after rows``: from the last commit to the end (the graph's last vectors, the file's
  rewrite when it is worth it, the index file and the search snapshot);
- peak RSS of the process and of its workers, and CPU seconds.

The reference, in the same run: usearch's ``Index.add`` of the same vectors (read back from the
store) in one call for each index file the import made (by visibility class, at most
``vector_index.PART_MAX`` a file), with the graph settings of each file's size (``hnsw.new``) and
every core: the ceiling the import's graph build is measured against. ``--before DIR`` also imports with another source tree
(``git archive <commit> cortexctl | tar -x -C DIR``). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

CHILD = r"""
import json, os, resource, sys, time
t0 = time.perf_counter()
from cortexctl import Cortex
from cortexctl.engine import transfer
from cortexctl.store import vector_index
marks = {"index": 0.0}
commit = transfer._commit_batch
def timed_commit(*a, **k):
    got = commit(*a, **k)
    marks["rows"] = time.perf_counter()
    return got
transfer._commit_batch = timed_commit
read = transfer.read_prepared
def timed_read(*a, **k):
    got = read(*a, **k)
    marks["checking"] = time.perf_counter()
    return got
transfer.read_prepared = timed_read
add = vector_index.IndexLoader._add
def timed_add(self, *a, **k):
    t = time.perf_counter()
    try:
        return add(self, *a, **k)
    finally:
        marks["index"] += time.perf_counter() - t
vector_index.IndexLoader._add = timed_add
src, store = sys.argv[1], sys.argv[2]
start = time.perf_counter()
with open(src, "rb") as fh:
    report = Cortex(store=store, actor="bench").import_jsonl(fh, keep_actors=True)
end = time.perf_counter()
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print("RESULT " + json.dumps({
    "imported": report.imported, "total": end - start, "checking": marks["checking"] - start,
    "rows": marks["rows"] - start, "after_rows": end - marks["rows"], "index_busy": marks["index"],
    "cpu": me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime,
    "rss_mb": me.ru_maxrss / 1024, "workers_rss_mb": kids.ru_maxrss / 1024,
}))
"""

CEILING = r"""
import json, os, sys, time
import duckdb, numpy as np
from cortexctl.index import hnsw
from cortexctl.parallel import cores
con = duckdb.connect(sys.argv[1] + "/cortex.duckdb", read_only=True)
model, dim = con.execute("SELECT model, dim FROM vectors LIMIT 1").fetchone()
got = con.execute("SELECT key, vec FROM vectors WHERE model = ? ORDER BY key", [model]).fetchnumpy()
blob = got["vec"]
con.close()
# float16 since schema version 7 (two bytes a value), float32 in a store an older tree made
width = "<f2" if len(blob) and len(blob[0]) == 2 * dim else "<f4"
matrix = np.frombuffer(b"".join(blob), dtype=width).reshape(-1, dim).astype(np.float32)
keys = np.asarray(got["key"], dtype=np.uint64)
# the same files as the import made (a store split by visibility class, files of at most PART_MAX):
# each file's vectors added in one call with the settings of its size
groups = [keys]
try:
    from pathlib import Path
    from cortexctl.store import vector_index as vi

    class _Store:
        path = Path(sys.argv[1])
    rec = vi.read_record(_Store)
    if rec is not None and len(rec.parts) > 1:
        groups = []
        for part in rec.parts:
            held = hnsw.slot_rows(vi.part_path(_Store, part), vi.fingerprint_of(rec, part))[0]
            groups.append(np.sort(held[held != hnsw.FREE_KEY]))
except ImportError:  # a tree from before the files by class
    pass
t = time.perf_counter()
for held in groups:
    index = hnsw.new(dim, len(held))
    index.add(held, matrix[np.searchsorted(keys, held)], threads=cores())
    del index
print("RESULT " + json.dumps({"vectors": len(matrix), "seconds": time.perf_counter() - t, "threads": cores(),
                              "files": len(groups)}))
"""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def child(code: str, tree: Path, *args: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    env.pop("CORTEXCTL_FOLD", None)
    # in the tree itself: `python -c` puts the working directory first on the path
    out = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, cwd=tree)
    if out.returncode:
        raise SystemExit(f"child failed:\n{out.stderr[-3000:]}")
    got = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    log(got[-1])  # kept in the log should a later step fail
    return json.loads(got[-1].removeprefix("RESULT "))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, default=100_000)
    ap.add_argument("--before", type=Path, help="another source tree to import with (the reference run)")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--corpus", type=Path, help="a JSONL file to import instead of the generated corpus")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    from find_bench import write_corpus

    tmp = Path(tempfile.mkdtemp(prefix="cortex-import-bench-"))
    trees = [("now", HERE.parent)] + ([("before", args.before.resolve())] if args.before else [])
    result: dict = {"memories": args.memories, "cores": os.cpu_count(), "loadavg_start": os.getloadavg()[0],
                    "runs": []}
    try:
        corpus = args.corpus.resolve() if args.corpus else None  # the child runs in its tree
        if corpus is None:
            corpus = tmp / "corpus.jsonl"
            log(f"writing {args.memories:,} memories ...")
            write_corpus(corpus, args.memories, 7, datetime(2026, 11, 1, tzinfo=timezone.utc))
        for run in range(args.runs):
            for name, tree in trees:
                store = tmp / f"{name}-{run}"
                log(f"import ({name}, run {run + 1}) ...")
                got = child(CHILD, tree, str(corpus), str(store))
                got.update(tree=name, run=run)
                result["runs"].append(got)
                log(f"  {got['total']:.1f} s, rows {got['rows']:.1f} s, peak RSS {got['rss_mb']:.0f} MB")
                if name == "now" and run == 0:
                    log("usearch's own batched add of the same vectors ...")
                    result["ceiling"] = child(CEILING, HERE.parent, str(store))
                if not args.keep:
                    shutil.rmtree(store)
        result["loadavg_end"] = os.getloadavg()[0]
    finally:
        if args.keep:
            log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    n, ceiling = result["memories"], result["ceiling"]
    print(f"{n:,} memories, {result['cores']} cores, load {result['loadavg_start']:.1f} -> {result['loadavg_end']:.1f}")
    print(f"usearch Index.add of the same {ceiling['vectors']:,} vectors into the same {ceiling.get('files', 1)} "
          f"file(s), {ceiling['threads']} threads: {ceiling['seconds']:.1f} s (the ceiling)")
    print(f"{'tree':8s} {'total s':>8s} {'/s':>7s} {'checking':>9s} {'rows s':>7s} {'rows/s':>7s} {'after':>6s} "
          f"{'graph busy':>10s} {'ceiling/busy':>12s} {'CPU s':>7s} {'RSS MB':>7s} {'workers':>7s}")
    for r in result["runs"]:
        print(f"{r['tree']:8s} {r['total']:8.1f} {n / r['total']:7.0f} {r['checking']:9.1f} {r['rows']:7.1f} "
              f"{n / r['rows']:7.0f} {r['after_rows']:6.1f} {r['index_busy']:10.1f} "
              f"{ceiling['seconds'] / max(r['index_busy'], 1e-9):12.2f} {r['cpu']:7.1f} {r['rss_mb']:7.0f} "
              f"{r['workers_rss_mb']:7.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
