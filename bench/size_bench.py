#!/usr/bin/env python3
"""Where a store's bytes go, per memory: the DuckDB file by table and column, its key indexes and
its free blocks, the HNSW index file, the search snapshot by array, and the total against the
target of 3 KB a memory (index included).

    python bench/size_bench.py --store DIR [--json]
    python bench/size_bench.py [--memories 100000] [--keep] [--json]

With --store, a store as it is (e.g. one `find_bench.py --keep` left); otherwise a throwaway store
of N synthetic memories (find_bench.py's corpus, hash embedder) made by `cortexctl import`. The
store is only read (a read-only DuckDB connection). A column's bytes are its segments' blocks, a
block shared by several segments split evenly among them (so the columns add up to the blocks the
tables use); "key indexes and metadata" is the file's used blocks less the tables'. Nothing is
asserted: it is a report.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

TARGET_KB = 3.0


def duck_parts(db: Path) -> tuple[dict, dict, int]:
    """({(table, column): bytes}, {block_size, total, used, free}, memories) of a DuckDB file."""
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        size = con.execute("SELECT block_size, total_blocks, used_blocks, free_blocks FROM pragma_database_size()"
                           " WHERE database_name = current_database()").fetchone()
        blocks = dict(zip(("block_size", "total", "used", "free"), map(int, size)))
        n = con.execute("SELECT count(*) FROM heads").fetchone()[0]
        sharers: dict[int, list[tuple[str, str]]] = defaultdict(list)
        for (table,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall():
            for column, block, extra in con.execute(
                    f"SELECT column_name, block_id, additional_block_ids FROM pragma_storage_info('{table}')"
                    " WHERE persistent AND block_id >= 0").fetchall():
                for b in (block, *(extra or ())):
                    sharers[b].append((table, column))
    finally:
        con.close()
    parts: dict[tuple[str, str], float] = defaultdict(float)
    for who in sharers.values():
        for tc in who:
            parts[tc] += blocks["block_size"] / len(who)
    return dict(parts), blocks, n


def snapshot_parts(path: Path) -> dict[str, int]:
    """{array: bytes} of the search snapshot (its header names each array's bytes in the file: none for
    an array of one value, which the header holds)."""
    import numpy as np

    if not path.exists():
        return {}
    with open(path, "rb") as fh:
        head = fh.read(24)
        hlen = int.from_bytes(head[8:16], "little")
        header = json.loads(fh.read(hlen))
    out = {}
    for name, spec in header.get("arrays", {}).items():
        out[name] = int(spec.get("nbytes", np.dtype(spec["dtype"]).itemsize * int(np.prod(spec["shape"]))))
    out["(header, alignment, CRCs)"] = path.stat().st_size - sum(out.values())
    return out


def measure(store: Path) -> dict:
    db = store / "cortex.duckdb"
    columns, blocks, n = duck_parts(db)
    bs = blocks["block_size"]
    tables: dict[str, float] = defaultdict(float)
    for (t, _), b in columns.items():
        tables[t] += b
    table_bytes = sum(tables.values())
    files = {e.name: e.stat().st_size for e in os.scandir(store) if e.is_file()}
    duck = {"tables": table_bytes, "key indexes and metadata": blocks["used"] * bs - table_bytes,
            "free blocks": blocks["free"] * bs,
            "header and tail": files["cortex.duckdb"] - blocks["total"] * bs}
    snap = snapshot_parts(store / "cortex.snapshot")
    index = {k: v for k, v in files.items() if re.fullmatch(r"cortex\.usearch(-[0-9a-f]{16})?", k)}  # split by class
    other = {k: v for k, v in files.items() if k not in ("cortex.duckdb", "cortex.snapshot", *index)}
    total = sum(files.values())
    return {
        "memories": n, "block_size": bs, "blocks": blocks,
        "files": files, "total_bytes": total,
        "per_memory_kb": {
            "duckdb": {k: v / n / 1024 for k, v in duck.items()},
            "duckdb_tables": {t: v / n / 1024 for t, v in sorted(tables.items(), key=lambda kv: -kv[1])},
            "duckdb_columns": {f"{t}.{c}": v / n / 1024 for (t, c), v in
                               sorted(columns.items(), key=lambda kv: -kv[1]) if v / n >= 10},
            "index": sum(index.values()) / n / 1024,
            "snapshot": {k: v / n / 1024 for k, v in sorted(snap.items(), key=lambda kv: -kv[1])},
            "other files": sum(other.values()) / n / 1024,
        },
        "duckdb_kb": files["cortex.duckdb"] / n / 1024,
        "snapshot_kb": files.get("cortex.snapshot", 0) / n / 1024,
        "total_kb": total / n / 1024,
        "ratio_to_target": total / n / 1024 / TARGET_KB,
    }


def build(n: int, tmp: Path) -> Path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from cold_start import bench_env, find_cortexctl, log
    from find_bench import write_corpus

    jsonl = tmp / "memories.jsonl"
    log(f"generating {n} memories ...")
    write_corpus(jsonl, n, 20261121, datetime.now(timezone.utc))
    log("importing with cortexctl import ...")
    store = tmp / "store"
    subprocess.run([find_cortexctl(None), "import", str(jsonl), "--store", str(store), "-q", "--keep-actors"],
                   env=bench_env(tmp), check=True, stdout=subprocess.DEVNULL)
    jsonl.unlink()
    return store


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", type=Path, help="measure this store as it is")
    ap.add_argument("--memories", type=int, default=100_000)
    ap.add_argument("--keep", action="store_true", help="keep the store built and print its path")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    store = args.store or build(args.memories, Path(tempfile.mkdtemp(prefix="cortex-sizebench-")))
    r = measure(store)
    if args.json:
        print(json.dumps(r, indent=2))
    else:
        pm = r["per_memory_kb"]
        print(f"store: {r['memories']} memories, {r['total_bytes'] / 2**20:.1f} MiB")
        print(f"{'part':<44} {'KB/memory':>10}")
        for k, v in pm["duckdb"].items():
            print(f"  duckdb: {k:<36} {v:10.3f}")
        for k, v in pm["duckdb_tables"].items():
            if v >= 0.005:
                print(f"    table {k:<36} {v:10.3f}")
        for k, v in pm["duckdb_columns"].items():
            print(f"      column {k:<33} {v:10.3f}")
        print(f"  {'HNSW index file':<42} {pm['index']:10.3f}")
        print(f"  {'search snapshot':<42} {r['snapshot_kb']:10.3f}")
        for k, v in pm["snapshot"].items():
            if v >= 0.005:
                print(f"      array {k:<34} {v:10.3f}")
        print(f"  {'other files':<42} {pm['other files']:10.3f}")
        print(f"{'total':<44} {r['total_kb']:10.3f}   = {r['ratio_to_target']:.2f}x the target of "
              f"{TARGET_KB:.0f} KB a memory")
    if args.keep and not args.store:
        print(f"kept: {store}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
