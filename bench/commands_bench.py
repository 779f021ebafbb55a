#!/usr/bin/env python3
"""Cold wall time of every command, as a fresh process each time.

    python bench/commands_bench.py [--memories 1000] [--runs 10] [--json]

Run it with the Python of the environment cortexctl is installed in. It builds
a throwaway store of N memories in a temporary directory, then times each
command's plain invocation as a fresh ``cortexctl`` process (median of
``--runs``), interleaved with the reference ``python -c "import duckdb"`` so
both see the same machine load, and prints each median with its ratio to the
reference. Commands that change the store act on a different memory, intent
or step each run. It is a report: nothing is asserted. See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ACTOR = "bench"


def _cortexctl() -> list[str]:
    script = Path(sys.executable).with_name("cortexctl")
    return [str(script)] if script.exists() else [sys.executable, "-m", "cortexctl"]


def _run(argv: list[str], env: dict, stdin: bytes | None = None) -> tuple[float, int]:
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, input=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        sys.stderr.write(f"warning: {' '.join(argv[1:])} exited {proc.returncode}: {proc.stderr.decode()[:200]}\n")
    return took, proc.returncode


def _seed(tmp: Path, n: int, env: dict) -> list[str]:
    lines = [json.dumps({"type": "fact", "text": f"memory {i} about the deploy key of service {i % 37}",
                         "tags": [f"t{i % 11}"]}) for i in range(n)]
    src = tmp / "seed.jsonl"
    src.write_text("\n".join(lines) + "\n")
    subprocess.run([*_cortexctl(), "import", str(src), "--quiet"], env=env, check=True, stdout=subprocess.DEVNULL)
    out = subprocess.run([*_cortexctl(), "find", "-k", "200", "--jsonl"], env=env, check=True,
                         capture_output=True).stdout
    return [json.loads(line)["id"] for line in out.splitlines()]


def _cases(ids: list[str], tmp: Path) -> dict[str, callable]:
    """command -> (run number -> argv after `cortexctl`)."""
    one = ids[0]
    small = tmp / "one.jsonl"
    small.write_text(json.dumps({"type": "fact", "text": "imported in the benchmark"}) + "\n")
    return {
        "write": lambda r: ["write", "fact", f"benchmark write {r}", "--tag", "bench"],
        "update": lambda r: ["update", ids[1], f"updated text {r}"],
        "show": lambda r: ["show", one],
        "history": lambda r: ["history", one],
        "tag": lambda r: ["tag", ids[2], "--add", f"x{r}"],
        "head": lambda r: ["head", ids[3], "--importance", str(r % 10)],
        "forget": lambda r: ["forget", ids[-1 - r], "--reason", "benchmark"],  # from the far end of ids
        "find": lambda r: ["find", "--tag", "t3", "-k", "10"],
        "find --near": lambda r: ["find", "--near", "deploy key of service 7", "-k", "10"],
        "attest": lambda r: ["attest", "--intent", f"bench-{r}", "--outcome", "success", ids[4], ids[5]],
        "compact": lambda r: ["compact", "--intent", "bench", "--step", f"s{r}", "--budget-tokens", "4000",
                              *ids[20:30]],
        "checkpoint load": lambda r: ["checkpoint", "load", "--intent", "bench", "--step", "s0"],
        "import": lambda r: ["import", str(small), "--quiet"],
        "export": lambda r: ["export", "--out", str(tmp / "out.jsonl")],
        "verify": lambda r: ["verify"],
        "reindex": lambda r: ["reindex", "--quiet"],
        "config show": lambda r: ["config", "show"],
        "healthcheck": lambda r: ["healthcheck"],
        "--help": lambda r: ["--help"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--json", action="store_true")
    opts = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="cortexctl-bench-"))
    try:
        env = {**os.environ, "CORTEXCTL_STORE": str(tmp / "store"), "CORTEXCTL_ACTOR": ACTOR,
               "CORTEXCTL_CONFIG": str(tmp / "none.toml")}
        (tmp / "none.toml").write_text("")
        ids = _seed(tmp, max(opts.memories, 200), env)
        if opts.runs > 150:
            ap.error("--runs must be at most 150 (forget needs a fresh memory per run)")
        reference = [sys.executable, "-c", "import duckdb"]
        rows = []
        for name, argv_of in _cases(ids, tmp).items():
            times, refs = [], []
            _run([*_cortexctl(), *argv_of(opts.runs + 1)], env)  # warm the page cache
            for r in range(opts.runs):
                refs.append(_run(reference, env)[0])
                times.append(_run([*_cortexctl(), *argv_of(r)], env)[0])
            med, ref = statistics.median(times), statistics.median(refs)
            rows.append({"command": name, "median_ms": round(med * 1000, 1), "reference_ms": round(ref * 1000, 1),
                         "ratio": round(med / ref, 2)})
        if opts.json:
            print(json.dumps({"memories": opts.memories, "runs": opts.runs, "results": rows}, indent=2))
        else:
            print(f"{'command':<18}{'median':>10}{'import duckdb':>15}{'ratio':>8}")
            for row in rows:
                print(f"{row['command']:<18}{row['median_ms']:>8.0f}ms{row['reference_ms']:>13.0f}ms"
                      f"{row['ratio']:>7.2f}x")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
