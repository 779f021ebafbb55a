#!/usr/bin/env python3
"""backup / bundle verify / bundle drill / restore benchmark, against DuckDB's own EXPORT DATABASE.

    python bench/backup_bench.py [--memories 100000] [--store PATH] [--commands backup,verify,drill,restore] [--json]

Builds a throwaway store of N memories (the corpus of bench/find_bench.py, imported with
`cortexctl import`), or reuses --store, then times one fresh process each of

- `cortexctl backup --dest DIR` (snapshot copy, Parquet export of every state table,
  manifest, meta, fsync, the full read-back check, rename);
- `cortexctl bundle verify BUNDLE`;
- `cortexctl bundle drill BUNDLE`;
- `cortexctl restore BUNDLE --mode replace` into an empty directory (build, search snapshot,
  verify, swap; the index file is built by a background fold once the command has returned: the
  bench also times until that fold is done, "index in place");
- with `restore-inline` in --commands, the same restore with `CORTEXCTL_FOLD=inline` (the index
  built inside the command, as before background builds);

and, as the reference, in a separate Python process in the same run, DuckDB's own
`EXPORT DATABASE ... (FORMAT parquet)` of a copy of the store's database file (timed both
with and without making that copy). Prints seconds, ratios to the reference, bundle bytes
and bytes per memory. Nothing is asserted: it is a report.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cold_start import bench_env, dir_size, find_cortexctl, log  # noqa: E402
from find_bench import write_corpus  # noqa: E402

from cortexctl.store.fold import wait_idle  # noqa: E402

REFERENCE = r"""
import shutil, sys, time
import duckdb
db, work = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
shutil.copyfile(db, work + "/copy.duckdb")
t1 = time.perf_counter()
con = duckdb.connect(work + "/copy.duckdb", read_only=True)
con.execute("SET enable_progress_bar = false")
con.execute("EXPORT DATABASE '" + work + "/export' (FORMAT parquet)")
con.close()
t2 = time.perf_counter()
print("seconds", t1 - t0, t2 - t1)
"""


def timed(cmd: list[str], env: dict) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, stdin=subprocess.DEVNULL)
    dt = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"bench: command failed (exit {proc.returncode}): {' '.join(cmd)}\n"
                         + proc.stderr.decode(errors="replace"))
    return dt, proc.stdout.decode()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--memories", type=int, default=100_000)
    ap.add_argument("--store", type=Path, help="reuse this store instead of building one")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--cortexctl")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--commands", default="backup,verify,drill,restore",
                    help="which to time, of backup,verify,drill,restore,restore-inline (the later ones need backup)")
    args = ap.parse_args()
    wanted = set(args.commands.split(","))
    cortexctl = find_cortexctl(args.cortexctl)

    with tempfile.TemporaryDirectory(prefix="cortexctl-backup-bench-") as tmp_s:
        tmp = Path(tmp_s)
        env = bench_env(tmp)
        result: dict = {"python": sys.version.split()[0]}
        store = args.store or tmp / "store"
        if args.store is None:
            jsonl = tmp / "memories.jsonl"
            log(f"generating {args.memories} memories ...")
            write_corpus(jsonl, args.memories, args.seed, datetime.now(timezone.utc))
            log("importing with cortexctl import ...")
            dt, _ = timed([cortexctl, "import", str(jsonl), "--store", str(store), "-q", "--keep-actors"], env)
            result["import_seconds"] = dt
            jsonl.unlink()
        db = store / "cortex.duckdb"
        result["store_bytes"] = db.stat().st_size

        log("reference: EXPORT DATABASE (FORMAT parquet) of a copy, in a separate process ...")
        ref_work = tmp / "ref"
        ref_work.mkdir()
        _, out = timed([sys.executable, "-c", REFERENCE, str(db), str(ref_work)], env)
        copy_s, export_s = (float(x) for x in out.split("seconds")[-1].split())
        result["reference"] = {"copy_seconds": copy_s, "export_seconds": export_s,
                               "bytes": dir_size(ref_work / "export")}
        shutil.rmtree(ref_work)

        log("cortexctl backup ...")
        dest = tmp / "bundles"
        dt, out = timed([cortexctl, "backup", "--store", str(store), "--dest", str(dest), "--json"], env)
        doc = json.loads(out)
        bundle = doc["path"]
        memories = doc["counts"].get("heads", 0)
        result["memories"] = memories
        result["bundle_bytes"] = doc["bytes"]
        result["bytes_per_memory"] = doc["bytes"] / max(memories, 1)
        times = {"backup": dt}
        if "verify" in wanted:
            log("cortexctl bundle verify ...")
            times["bundle verify"], _ = timed([cortexctl, "bundle", "verify", bundle], env)
        if "drill" in wanted:
            log("cortexctl bundle drill ...")
            times["bundle drill"], _ = timed([cortexctl, "bundle", "drill", bundle], env)
        if "restore" in wanted:
            log("cortexctl restore --mode replace into an empty directory ...")
            restored = tmp / "restored"
            t0 = time.perf_counter()
            times["restore --mode replace"], _ = timed(
                [cortexctl, "restore", bundle, "--mode", "replace", "--store", str(restored)], env)
            wait_idle(restored)  # the background fold that builds the index file
            times["  index in place"] = time.perf_counter() - t0
            shutil.rmtree(restored, ignore_errors=True)
        if "restore-inline" in wanted:
            log("cortexctl restore --mode replace, the index built inline ...")
            times["restore, index inline"], _ = timed(
                [cortexctl, "restore", bundle, "--mode", "replace", "--store", str(tmp / "restored-inline")],
                {**env, "CORTEXCTL_FOLD": "inline"})
            shutil.rmtree(tmp / "restored-inline", ignore_errors=True)
        result["seconds"] = times
        ref_total = copy_s + export_s
        result["ratio_to_copy_and_export"] = {k: v / ref_total for k, v in times.items()}
        result["ratio_to_export"] = {k: v / export_s for k, v in times.items()}

    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"store: {result['memories']} memories, database {result['store_bytes'] / 1e6:.1f} MB")
    ref = result["reference"]
    print(f"reference: copy {ref['copy_seconds']:.2f} s + EXPORT DATABASE (parquet) {ref['export_seconds']:.2f} s"
          f" = {ref_total:.2f} s, {ref['bytes'] / 1e6:.1f} MB")
    for k, v in times.items():
        print(f"{k + ':':26s} {v:7.2f} s  = {result['ratio_to_copy_and_export'][k]:5.2f}x copy+export"
              f"  ({result['ratio_to_export'][k]:5.2f}x export alone)")
    print(f"bundle: {result['bundle_bytes'] / 1e6:.1f} MB, {result['bytes_per_memory']:.0f} bytes per memory")


if __name__ == "__main__":
    main()
