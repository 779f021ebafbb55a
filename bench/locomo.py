#!/usr/bin/env python3
"""LoCoMo evidence recall@5/10/25 of `find --near` with the built-in defaults.

Imports the development half of LoCoMo (../shared/bench/locomo-dev, or
--data DIR) into one fresh store, one tag per conversation, runs every
question through the engine's find (the same code as `cortexctl find --near
QUESTION --tag CONV -k 25`), and scores the rankings with the dataset's own
eval_recall.py, so the figures sit beside its baselines.

    python bench/locomo.py                # prints the table
    python bench/locomo.py --cli 20       # also checks 20 questions through the real CLI
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent / "shared" / "bench" / "locomo-dev"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--k", type=int, default=25)
    ap.add_argument("--cli", type=int, default=0, metavar="N", help="check N questions through the CLI too")
    args = ap.parse_args()
    if not (args.data / "memories.jsonl").exists():
        print(f"no LoCoMo data at {args.data} (give --data DIR)", file=sys.stderr)
        return 2

    from cortexctl import Cortex
    from cortexctl.engine.results import FindQuery
    from cortexctl.memory.ids import new_id

    work = Path(tempfile.mkdtemp(prefix="cortex-locomo-"))
    store = work / "store"
    ours: dict[str, str] = {}
    lines = []
    for raw in (args.data / "memories.jsonl").read_text().splitlines():
        m = json.loads(raw)
        id_ = new_id()
        ours[id_] = m["id"]
        lines.append(json.dumps({"id": id_, "type": "event", "text": m["text"], "tags": [m["conv"]],
                                 "data": {"occurred_at": m["at_iso"]}}))
    src = work / "locomo.jsonl"
    src.write_text("\n".join(lines) + "\n")
    cx = Cortex(store=store, actor="bench")
    t0 = time.perf_counter()
    with open(src, "rb") as fh:
        report = cx.import_jsonl(fh)
    t_import = time.perf_counter() - t0

    queries = [json.loads(x) for x in (args.data / "queries.jsonl").read_text().splitlines()]
    rankings = work / "rankings.jsonl"
    t0 = time.perf_counter()
    with open(rankings, "w") as out:
        for q in queries:
            hits = cx.find(FindQuery(near=q["question"], tags=[q["conv"]], k=args.k))
            out.write(json.dumps({"qid": q["qid"], "ranked_ids": [ours[h.id] for h in hits]}) + "\n")
    t_find = time.perf_counter() - t0
    print(f"store: {report.imported} memories imported in {t_import:.2f}s; "
          f"{len(queries)} queries in {t_find:.2f}s ({1000 * t_find / len(queries):.1f} ms each, in-process)")

    if args.cli:
        env = dict(os.environ, CORTEXCTL_STORE=str(store), CORTEXCTL_ACTOR="bench")
        exe = Path(sys.executable).with_name("cortexctl")
        same = 0
        for q in queries[: args.cli]:
            run = subprocess.run([str(exe), "find", "--near", q["question"], "--tag", q["conv"], "-k",
                                  str(args.k), "--jsonl"], capture_output=True, env=env)
            if run.returncode not in (0, 1):  # 1: nothing matched, an answer like grep's
                raise SystemExit(run.stderr.decode())
            cli_ids = [ours[json.loads(x)["id"]] for x in run.stdout.decode().splitlines()]
            hits = cx.find(FindQuery(near=q["question"], tags=[q["conv"]], k=args.k))
            same += cli_ids == [ours[h.id] for h in hits]
        print(f"CLI check: {same}/{args.cli} questions ranked identically through `cortexctl find`")

    result = subprocess.run(
        [sys.executable, str(args.data / "eval_recall.py"), "--memories", str(args.data / "memories.jsonl"),
         "--queries", str(args.data / "queries.jsonl"), "--scorer", f"rankings:{rankings}",
         "--scorer", "bm25", "--scorer", "hash"],
        capture_output=True, text=True,
    )
    print(result.stdout.rstrip())
    if result.returncode:
        print(result.stderr, file=sys.stderr)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
