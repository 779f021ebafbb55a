#!/usr/bin/env python3
"""find --near benchmark: cold query time, HNSW recall, import throughput.

    python bench/find_bench.py [--memories 100000] [--million] [--runs 10] [--json]

Builds a throwaway store of N synthetic memories (the generator of
bench/cold_start.py, each made distinct by a few words of detail) with
`cortexctl import` and the built-in hash embedder, then prints:

- import throughput (memories/s, end to end: parsing, validation, embedding,
  postings, inserts, journal and the one index build at the end), the import
  process's peak resident memory and the store's bytes per memory;
- cold `cortexctl find --near TEXT` wall time, median of --runs fresh
  processes over different queries, and its ratio to the floor
  `python -c "import numpy, duckdb, usearch.index"` timed the same way in the
  same run;
- HNSW recall@10 against exact search over the same vectors (a result counts
  when its similarity reaches the exact 10th best, so ties among identical
  memories do not count against the index).

--writes N first makes N changes of the kinds an agent makes (write, update,
attest, tag, one command each) with the snapshot moved aside, then N more with
it in place after a `reindex` (so that they leave its delta), and reports the
median time of each kind of command both ways; the finds then run against the
snapshot and its delta. --exact also times `find --near` with the index file set
aside, as after a restore while the background build runs (an exact search of
every candidate's vector): median wall time and the median of each process's
peak resident memory, against the same find with the index in the same run (the
fold lock is held meanwhile, so that no find starts the build). --million uses
1,000,000 memories. --actor NAME times the cold finds as that viewer (default: the
bench's actor, who owns the corpus's memories but those of three other agents; an actor
of its own sees only the public tenth, and with the index split by visibility class
views only those files); the share of the store the viewer sees is printed. Nothing is
asserted: it is a report.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cold_start import FIND_OK, Gen, bench_env, find_cortexctl, log, time_once  # noqa: E402

SYLLABLES = ("ka ri to mu sen va lo pe dri na qui zo bel tar fen go mi ru sha vel cor da "
             "lin pra ste mo nu gar hel dor ti").split()


def write_corpus(path: Path, n: int, seed: int, now: datetime) -> None:
    """n memories from bench/cold_start.py's generator, each made distinct the way real ones are:
    a detail of two to four words from a 20,000-word vocabulary (Zipf-distributed) and a number."""
    import json

    g = Gen(seed, now)
    r = random.Random(seed + 1)
    vocab = ["".join(r.choice(SYLLABLES) for _ in range(r.randint(2, 4))) for _ in range(20_000)]
    cum = list(itertools.accumulate(1.0 / (i + 1) for i in range(len(vocab))))
    with open(path, "w", encoding="utf-8") as fh:
        for _ in range(n):
            line = g.line()
            words = r.choices(vocab, cum_weights=cum, k=r.randint(2, 4))
            line["text"] = f"{line['text']} ({' '.join(words)} #{r.randrange(1, 100_000)})"
            fh.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")

QUERIES = [
    "how do we rotate the deploy key", "who owns the on-call rotation", "latency budget for payments",
    "never deploy on friday", "load test requests per second", "database refreshed from production",
    "credentials rotated on the bastion", "test coverage goal", "lock contention in the database",
    "approvals before merging to main", "migrated CI to GitHub Actions", "cloud spend reduction",
    "error rate incident", "prefers chat over email", "pinned tool version in CI", "roadmap review meeting",
]


def checked(cortexctl: str, store: Path, env: dict) -> None:
    """The store's search snapshot read whole and stamped checked by ``cortexctl healthcheck``, as
    its writer leaves it: moving it aside and back (the runs without it) changes its change time, so
    the stamp no longer names it. An install that knows no checked stamp reads it and stamps
    nothing."""
    import subprocess

    subprocess.run([cortexctl, "healthcheck", "--store", str(store)], env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _peak_once(cmd: list[str], env: dict) -> tuple[float, float]:
    """(wall seconds, peak resident MB) of one fresh process: its own ``ru_maxrss`` from ``os.wait4``."""
    import subprocess

    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    dt = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) not in FIND_OK:
        raise SystemExit(f"bench: exit {os.waitstatus_to_exitcode(status)}: {' '.join(cmd)}")
    return dt, usage.ru_maxrss / 1024


def _holders(path: Path) -> str:
    """The processes that hold a lock on ``path`` (from /proc/locks), as "pid 123 (python3)"."""
    try:
        st = path.stat()
        where = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"  # as /proc/locks says it
        pids = sorted({int(f[4]) for f in (line.split() for line in open("/proc/locks"))
                       if len(f) > 5 and f[1] != "->" and f[5] == where})
    except (OSError, ValueError):
        return "another process"
    said = []
    for pid in pids:
        try:
            said.append(f"pid {pid} ({Path(f'/proc/{pid}/comm').read_text().strip()})")
        except OSError:
            said.append(f"pid {pid}")
    return ", ".join(said) or "another process"


def exact_search(cortexctl: str, env: dict, store: Path, runs: int) -> dict:
    """``find --near`` with the index file and without it (set aside, and put back after: the same
    bytes, which its record still names), interleaved, the fold lock held throughout so that a find
    that meets no index file starts no build. Medians of wall time and of peak RSS."""
    import fcntl

    index = store / "cortex.usearch"
    aside = store.parent / "cortex.usearch.aside"
    if not index.exists():
        raise SystemExit(f"bench: --exact needs the store's index file ({index})")
    got: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    lock = os.open(store / "cortex.fold.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # a fold under way, or a process that holds the lock and never ends
            print(f"bench: waiting for {store / 'cortex.fold.lock'} (held by {_holders(store / 'cortex.fold.lock')})",
                  file=sys.stderr, flush=True)
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            for i in range(runs):
                q = QUERIES[i % len(QUERIES)]
                cmd = [cortexctl, "find", "--near", q, "--store", str(store), "-k", "10"]
                got[True].append(_peak_once(cmd, env))
                os.rename(index, aside)
                try:
                    got[False].append(_peak_once(cmd, env))
                finally:
                    os.rename(aside, index)
        finally:
            if aside.exists():
                os.rename(aside, index)
    finally:
        os.close(lock)

    def median(indexed: bool, at: int) -> float:
        return statistics.median(r[at] for r in got[indexed])

    return {"indexed_ms": 1000 * median(True, 0), "indexed_rss_mb": median(True, 1),
            "exact_ms": 1000 * median(False, 0), "exact_rss_mb": median(False, 1)}


def viewer_share(store: Path, actor: str) -> dict:
    """The viewer of the cold finds, how many live memories it may see, and how many there are."""
    from cortexctl import Cortex
    from cortexctl.store.interface import Filters

    cx = Cortex(store=store, actor=actor)
    with cx.store.reading() as tx:
        return {"actor": actor, "sees": tx.count_heads(Filters(actor=actor)), "of": tx.count_heads()}


def hnsw_recall(store: Path, samples: int = 200, k: int = 10) -> dict:
    import numpy as np

    from cortexctl import Cortex
    from cortexctl.store import vector_index as semantic
    from cortexctl.index import hnsw

    cx = Cortex(store=store, actor="bench")
    model = cx.embedder.model
    with cx.store.reading() as tx:
        count, max_key, dim = tx.vector_stats(model)
        keys, mats = [], []
        for kk, m in tx.iter_vectors(model, dim):
            keys.append(kk)
            mats.append(m)
        rec, why = semantic.index_state(tx, cx.store, model, dim)
    if rec is None or why != "ok":
        raise SystemExit(f"bench: the index file cannot be used ({why}): run cortexctl reindex")
    allk = np.concatenate(keys)
    allm = np.vstack(mats)
    # each sample is searched in the index file that holds it, against the exact nearest among that
    # file's vectors (a store split by visibility class: a find searches a viewer's files alike)
    files = []
    for part in rec.parts:
        view = hnsw.open_view(semantic.part_path(cx.store, part), semantic.fingerprint_of(rec, part))  # whole-file CRC too
        held = hnsw.slot_rows(semantic.part_path(cx.store, part), semantic.fingerprint_of(rec, part))[0]
        at = np.flatnonzero(np.isin(allk, held[held != hnsw.FREE_KEY]))
        files.append((view, at))
    file_of = np.full(len(allk), -1, dtype=np.int64)
    for i, (_view, at) in enumerate(files):
        file_of[at] = i
    # the files a class's viewer searches: every file naming the class of the file holding the query's
    # vector (a class past vi.PART_MAX is in several files by key range), their answers merged
    siblings = []
    for part in rec.parts:
        named = set(part.classes or ())
        siblings.append([j for j, other in enumerate(rec.parts)
                         if part.classes is None or other.classes is None or named & set(other.classes)])
    got_class = 0
    rng = random.Random(7)
    picks = [rng.randrange(len(allk)) for _ in range(samples)]
    # queries: stored vectors with noise, so the query itself is not always the unique best
    nrng = np.random.default_rng(7)
    got = total = 0
    t_hnsw = 0.0
    for p in picks:
        index, at = files[file_of[p]]
        q = allm[p] + nrng.normal(0, 0.02, size=dim).astype(np.float32)
        q /= np.linalg.norm(q)
        sims = allm[at] @ q
        kth = np.partition(-sims, k - 1)[k - 1] * -1
        t0 = time.perf_counter()
        hk, hs = hnsw.search(index, q, k)
        t_hnsw += time.perf_counter() - t0
        exact = allm[np.searchsorted(allk, hk)] @ q  # the true similarities, not the index's (f16) figures
        got += int(np.sum(exact >= kth - 1e-5))
        total += k
        near = siblings[file_of[p]]
        if len(near) > 1:  # the merged answer against the exact one among those files' vectors
            pool = np.concatenate([files[j][1] for j in near])
            kth = np.partition(-(allm[pool] @ q), k - 1)[k - 1] * -1
            hk = np.concatenate([hnsw.search(files[j][0], q, k)[0] for j in near])
            best = np.sort(allm[np.searchsorted(allk, hk)] @ q)[::-1][:k]
            got_class += int(np.sum(best >= kth - 1e-5))
        else:
            got_class += int(np.sum(exact >= kth - 1e-5))
    return {"recall_at_10": got / total, "recall_at_10_by_class": got_class / total, "samples": samples,
            "vectors": int(len(allk)), "files": len(rec.parts),
            "index_state": why, "hnsw_search_ms": 1000 * t_hnsw / samples}


def _rare_tag(store: Path, n: int) -> list[str] | None:
    """The tag (or pair of tags) held by the number of memories nearest 0.1% of the store."""
    import duckdb

    con = duckdb.connect(str(store / "cortex.duckdb"), read_only=True)
    try:
        rows = [([t], c) for t, c in con.execute(
            "SELECT t, count(*) FROM (SELECT unnest(tags) AS t FROM heads) GROUP BY t").fetchall()]
        rows += [([a, b], c) for a, b, c in con.execute(  # pairs: the corpus has few tags, none that rare
            "SELECT a, b, count(*) FROM (SELECT id, unnest(tags) AS a FROM heads) x"
            " JOIN (SELECT id, unnest(tags) AS b FROM heads) y USING (id) WHERE a < b GROUP BY a, b").fetchall()]
    finally:
        con.close()
    if not rows:
        return None
    tags, count = min(rows, key=lambda r: abs(r[1] - max(n // 1000, 1)))
    log(f"narrow filter: --tag {' --tag '.join(tags)} ({count} memories)")
    return tags


def changes(cortexctl: str, env: dict, store: Path, snap: Path, aside: Path, n: int) -> dict:
    """Median seconds of each kind of change, made n times without the snapshot (moved aside:
    no delta to write) and then n times with it (each leaves the delta), in that order."""
    import subprocess

    def run(*argv: str) -> tuple[float, str]:
        t0 = time.perf_counter()
        out = subprocess.run([cortexctl, *argv, "--store", str(store)], env=env, capture_output=True, text=True)
        if out.returncode:
            raise SystemExit(out.stderr)
        return time.perf_counter() - t0, out.stdout

    got: dict = {}
    if not snap.exists():
        log("reindex (builds the snapshot) ...")
        run("reindex")
    for with_snapshot in (False, True):
        if with_snapshot:
            os.rename(aside, snap)
            log("reindex (rebuilds the snapshot) ...")
            run("reindex")
        else:
            os.rename(snap, aside)
        times: dict[str, list[float]] = {"write": [], "update": [], "attest": [], "tag": []}
        for i in range(n):
            dt, out = run("write", "fact", f"bench change {i} {'with' if with_snapshot else 'without'} the snapshot",
                          "--json")
            times["write"].append(dt)
            id_ = json.loads(out)["id"]
            times["update"].append(run("update", id_, f"bench change {i}, updated")[0])
            times["attest"].append(run("attest", "--intent", f"bench-{i}", "--outcome", "success", id_)[0])
            times["tag"].append(run("tag", id_, "--add", "bench")[0])
        got["with_snapshot" if with_snapshot else "without_snapshot"] = {
            k: statistics.median(v) for k, v in times.items()}
    got["delta_bytes"] = (store / "cortex.snapdelta").stat().st_size if (store / "cortex.snapdelta").exists() else 0
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--memories", type=int, default=100_000)
    ap.add_argument("--million", action="store_true", help="1,000,000 memories")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--seed", type=int, default=20261121)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--actor", help="the viewer of the cold finds (default: the bench's actor)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary store and print its path")
    ap.add_argument("--store", type=Path, help="reuse a store built by an earlier --keep run (skips the import)")
    ap.add_argument("--no-ab", action="store_true",
                    help="time find only as the store is (by default, with and without its search snapshot)")
    ap.add_argument("--exact", action="store_true",
                    help="also time find --near with the index file set aside (an exact search), with peak memory")
    ap.add_argument("--writes", type=int, default=0,
                    help="make this many changes (write, update, attest, tag) without and then with the snapshot "
                         "before timing find, so that find reads the snapshot's delta")
    args = ap.parse_args()
    n = 1_000_000 if args.million else args.memories
    cortexctl = find_cortexctl(None)
    tmp = Path(tempfile.mkdtemp(prefix="cortex-findbench-"))
    env = bench_env(tmp)
    result: dict = {"memories": n, "python": sys.version.split()[0]}

    store = args.store or tmp / "store"
    if args.store is None:
        jsonl = tmp / "memories.jsonl"
        log(f"generating {n} memories ...")
        write_corpus(jsonl, n, args.seed, datetime.now(timezone.utc))
        log("importing with cortexctl import ...")
        import subprocess

        t0 = time.perf_counter()
        with open(tmp / "import.out", "w+b") as out, open(tmp / "import.err", "w+b") as err:
            proc = subprocess.Popen([cortexctl, "import", str(jsonl), "--store", str(store), "--json", "-q",
                                     "--keep-actors"], env=env, stdout=out, stderr=err)
            _, status, usage = os.wait4(proc.pid, 0)  # the child's own peak memory
            proc.returncode = os.waitstatus_to_exitcode(status)
            dt = time.perf_counter() - t0
            out.seek(0)
            err.seek(0)
            if proc.returncode:
                raise SystemExit(err.read().decode())
            report = json.loads(out.read())
        store_bytes = sum(f.stat().st_size for f in store.iterdir() if f.is_file())
        result["import"] = {"seconds": dt, "per_second": report["imported"] / dt, "index": report["index"],
                            "peak_rss_mb": usage.ru_maxrss / 1024,
                            "store_bytes_per_memory": store_bytes / n,
                            "jsonl_bytes_per_memory": jsonl.stat().st_size / n}

    py = sys.executable
    floor_cmd = [py, "-c", "import numpy, duckdb, usearch.index"]
    snap = store / "cortex.snapshot"
    aside = store.parent / "cortex.snapshot.aside"
    if args.actor:
        env["CORTEXCTL_ACTOR"] = args.actor
    result["viewer"] = viewer_share(store, env["CORTEXCTL_ACTOR"])
    if args.writes:
        result["writes"] = changes(cortexctl, env, store, snap, aside, args.writes)
    variants = [("", [])]
    rare_tag = _rare_tag(store, n)
    if rare_tag:
        variants.append((" ".join(f"--tag {t}" for t in rare_tag), [x for t in rare_tag for x in ("--tag", t)]))
    variants.append(("--type fact", ["--type", "fact"]))
    kinds = [True, False] if snap.exists() and not args.no_ab else [snap.exists()]
    time_once(floor_cmd, env)  # warm the page cache
    time_once([cortexctl, "find", "--near", "warm up", "--store", str(store)], env, FIND_OK)
    floor: list[float] = []
    times: dict = {(v, k): [] for v, _ in variants for k in kinds}
    try:
        for with_snapshot in kinds:  # every run with the snapshot first: it is moved aside once, after them
            if with_snapshot:
                checked(cortexctl, store, env)
            elif snap.exists():
                os.rename(snap, aside)  # find then reads DuckDB alone (the stamp does not name the file)
            for i in range(args.runs):  # the floor between runs, so load on the machine hits all alike
                floor.append(time_once(floor_cmd, env)[0])
                q = QUERIES[i % len(QUERIES)]
                for name, extra in variants:
                    cmd = [cortexctl, "find", "--near", q, "--store", str(store), "-k", "10", *extra]
                    times[(name, with_snapshot)].append(time_once(cmd, env, FIND_OK)[0])
    finally:
        if aside.exists():
            os.rename(aside, snap)
    if False in kinds:  # moved aside and back: its checked stamp no longer names it
        checked(cortexctl, store, env)
    result["floor_ms"] = 1000 * statistics.median(floor)
    result["find"] = [{"filter": name, "snapshot": k, "median_ms": 1000 * statistics.median(t),
                       "ratio": statistics.median(t) / statistics.median(floor)} for (name, k), t in times.items()]
    main_row = result["find"][0]
    result["find_near_ms"] = main_row["median_ms"]
    result["find_near_ratio"] = main_row["ratio"]
    if args.exact:
        log("timing find --near without its index file ...")
        result["exact"] = exact_search(cortexctl, env, store, args.runs)
    result["loadavg"] = os.getloadavg()
    log("measuring HNSW recall ...")
    result["hnsw"] = hnsw_recall(store)

    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"store: {'as given' if args.store else f'{n} memories'} (hash embedder, "
              f"{result['hnsw']['vectors']} vectors)")
        if "writes" in result:
            w = result["writes"]
            for kind in w["without_snapshot"]:
                a, b = w["without_snapshot"][kind], w["with_snapshot"][kind]
                print(f"{kind + ' (one command)':<20} {1000 * b:8.1f} ms leaving the delta, {1000 * a:8.1f} ms without a "
                      f"snapshot = {b / a:.2f}x")
            print(f"delta after {args.writes} rounds: {w['delta_bytes']} bytes; the finds below read it")
        if "import" in result:
            imp = result["import"]
            print(f"import:           {imp['per_second']:8.0f} memories/s  ({imp['seconds']:.1f} s, "
                  f"index {imp['index']['action']})   target >= 10000/s")
            print(f"import peak RSS:  {imp['peak_rss_mb']:8.0f} MB   target <= 1.5 GB at 1M")
            print(f"store on disk:    {imp['store_bytes_per_memory']:8.0f} bytes/memory  "
                  f"(JSONL {imp['jsonl_bytes_per_memory']:.0f} bytes/memory)")
        v = result["viewer"]
        print(f"viewer:           {v['actor']}, who sees {v['sees']:,} of {v['of']:,} memories ({v['sees'] / max(v['of'], 1):.1%}); "
              f"index in {result['hnsw']['files']} file(s)")
        print(f"floor:            {result['floor_ms']:8.1f} ms  python -c 'import numpy, duckdb, usearch.index'")
        for row in result["find"]:
            label = "find --near cold" + (f" {row['filter']}" if row["filter"] else "")
            how = "snapshot" if row["snapshot"] else "DuckDB"
            print(f"{label + ' (' + how + ')':<42} {row['median_ms']:8.1f} ms  = {row['ratio']:.2f}x the floor")
        print("target <= 1.3x at 100k, <= 1.5x at 1M; load average %.2f %.2f %.2f" % result["loadavg"])
        if "exact" in result:
            e = result["exact"]
            print(f"find --near, index set aside (exact): {e['exact_ms']:8.1f} ms, peak RSS {e['exact_rss_mb']:.0f} MB; "
                  f"with the index {e['indexed_ms']:.1f} ms, {e['indexed_rss_mb']:.0f} MB "
                  f"= {e['exact_ms'] / e['indexed_ms']:.2f}x the time, {e['exact_rss_mb'] / e['indexed_rss_mb']:.2f}x the memory")
        h = result["hnsw"]
        print(f"HNSW recall@10:   {h['recall_at_10']:8.4f}     over {h['samples']} queries "
              f"({h['hnsw_search_ms']:.2f} ms each)   target >= 0.99")
        print(f"  a class's files merged: {h['recall_at_10_by_class']:.4f} (a query searched in every file of its "
              "vector's class, against the exact answer among them)")
    if args.keep:
        print(f"kept: {store}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
