#!/usr/bin/env python3
"""Cold-start and import benchmark for cortexctl.

    python bench/cold_start.py [--memories N] [--runs 10] [--import-n 10000] [--json]

Run it with the Python of the environment cortexctl is installed in (the
reference ``python -c "import duckdb"`` uses this same interpreter, and the
``cortexctl`` console script is looked up next to it). It builds a throwaway
store in a temporary directory from N synthetic memories, times imports (the
real CLI and the engine in-process), then times fresh processes of
``cortexctl --help``, ``show``, ``find -k 10`` against references, and prints
a table (or one JSON object with --json). It is a report: nothing is asserted.

Standard library plus the installed cortexctl only. See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

ACTOR = "bench"
OTHER_ACTORS = ("ops-agent", "planner", "research-agent")

# -- synthetic memories ----------------------------------------------------------
# Weighted mix of the nine types; every line is the import "short form".
TYPE_WEIGHTS = {
    "fact": 30, "event": 20, "preference": 14, "goal": 8, "belief": 7,
    "constraint": 7, "pattern": 6, "capability": 5, "identity": 3,
}
SERVICES = ["billing-api", "auth-service", "search-indexer", "payments", "notifications", "ledger",
            "checkout", "image-resizer", "feature-flags", "metrics-gateway", "user-profile", "scheduler"]
PEOPLE = ["Alice Moreau", "Bram de Vries", "Chen Wei", "Dana Okafor", "Eitan Levi", "Fatima Zahra",
          "Goran Petrovic", "Hana Sato", "Ines Duarte", "Jonas Berg", "Kavya Iyer", "Luca Bianchi"]
TOOLS = ["ripgrep", "terraform", "kubectl", "pytest", "ruff", "docker compose", "psql", "jq", "gh",
         "pre-commit", "make", "uv", "helm", "k9s"]
REPOS = ["github.com/acme/api", "github.com/acme/web", "github.com/acme/infra", "github.com/acme/mobile",
         "github.com/acme/data-pipeline", "gitlab.com/acme/ml-models", "github.com/acme/docs"]
HOSTS = ["build-01.internal", "db-primary.eu-west-1", "db-replica.eu-west-1", "bastion.acme.io",
         "ci-runner-7", "gpu-box-2", "staging.acme.io"]
LANGS = ["Python", "TypeScript", "Go", "Rust", "SQL", "Bash"]
TOPICS = ["tabs over spaces", "short pull requests", "squash merges", "dark mode in the editor",
          "async standups", "explicit type hints", "small commits with clear messages", "meetings before noon",
          "trunk-based development", "feature flags over long-lived branches", "plain-text notes",
          "emails summarised in bullet points", "metric units", "ISO 8601 dates", "British spelling in docs"]
TAGS = ["ops", "deploy", "security", "billing", "frontend", "backend", "oncall", "infra", "db", "ci",
        "docs", "ux", "perf", "incident", "hiring", "roadmap", "finance", "legal", "customer", "ml",
        "data", "mobile", "api", "testing", "release", "q3", "q4", "team", "travel", "personal"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]


class Gen:
    """Deterministic generator of realistic memory lines."""

    def __init__(self, seed: int, now: datetime) -> None:
        self.r = random.Random(seed)
        self.now = now
        self.types = list(TYPE_WEIGHTS)
        self.weights = list(TYPE_WEIGHTS.values())

    def _when(self, days: int = 730) -> datetime:
        return self.now - timedelta(seconds=self.r.randrange(60, days * 86400))

    @staticmethod
    def _iso(dt: datetime) -> str:
        return dt.strftime("%Y-%m-%dT%H:%M:%SZ")

    def _frame(self) -> str:
        r = self.r
        kind = r.choice(["repo", "service", "host", "tool", "person", "document", "task", "url", "dataset"])
        verb = {
            "repo": ["build", "modify", "analyze"], "service": ["monitor", "deliver", "modify"],
            "host": ["monitor", "acquire"], "tool": ["acquire", "build"], "person": ["negotiate", "delegate", "schedule"],
            "document": ["analyze", "find", "deliver"], "task": ["schedule", "delegate", "deliver"],
            "url": ["find", "analyze"], "dataset": ["acquire", "analyze", "build"],
        }[kind]
        ref = {
            "repo": lambda: r.choice(REPOS), "service": lambda: r.choice(SERVICES),
            "host": lambda: r.choice(HOSTS), "tool": lambda: r.choice(TOOLS).replace(" ", "-"),
            "person": lambda: r.choice(PEOPLE).split()[0].lower(),
            "document": lambda: f"docs/{r.choice(['adr', 'runbook', 'rfc'])}-{r.randrange(1, 400):03d}.md",
            "task": lambda: f"JIRA-{r.randrange(100, 9999)}",
            "url": lambda: f"https://wiki.acme.io/{r.choice(SERVICES)}/{r.choice(['overview', 'oncall', 'faq'])}",
            "dataset": lambda: f"s3://acme-data/{r.choice(['events', 'orders', 'clicks'])}/{r.randrange(2024, 2027)}",
        }[kind]()
        return f"{r.choice(verb)}:{kind}:{ref}"

    def line(self) -> dict:
        r = self.r
        t = r.choices(self.types, self.weights)[0]
        svc, person, tool, repo, host = (r.choice(SERVICES), r.choice(PEOPLE), r.choice(TOOLS),
                                         r.choice(REPOS), r.choice(HOSTS))
        n = r.randrange(2, 95)
        data: dict = {}
        if t == "fact":
            text = r.choice([
                f"The {svc} deploy key rotates every {r.choice([30, 60, 90])} days.",
                f"{person} owns the {svc} on-call rotation this quarter.",
                f"{svc} reads its config from {host} at start-up.",
                f"The staging database for {svc} is refreshed from production every {r.choice(['Sunday', 'night', 'Monday'])}.",
                f"{repo} requires two approvals before merging to main.",
                f"The {svc} p99 latency budget is {n * 10} ms.",
                f"{person} prefers to be contacted on chat rather than email.",
                f"{tool} is pinned to version {r.randrange(1, 9)}.{r.randrange(0, 30)} in CI for {repo}.",
            ])
            data = {"subject": svc, "predicate": r.choice(["owned_by", "config", "policy", "budget"]),
                    "confidence": round(r.uniform(0.6, 1.0), 2),
                    "source": r.choice(["stated", "observed", "inferred"])}
        elif t == "event":
            outcome = r.choice(["success", "success", "failure", "partial", "unknown"])
            text = r.choice([
                f"Deployed {svc} v{r.randrange(1, 6)}.{r.randrange(0, 40)} to {r.choice(['staging', 'production'])}.",
                f"Incident on {svc}: error rate rose to {n / 10:.1f}% for {r.randrange(3, 90)} minutes.",
                f"Met {person} to review the {svc} roadmap.",
                f"Rotated credentials on {host}.",
                f"Migrated {repo} CI from Jenkins to GitHub Actions.",
                f"Ran a load test against {svc} at {n * 100} requests per second.",
            ])
            data = {"kind": r.choice(["deploy", "incident", "meeting", "maintenance", "migration", "test"]),
                    "outcome": outcome, "counterparty": person if r.random() < 0.3 else "",
                    "occurred_at": self._iso(self._when())}
            if r.random() < 0.2:
                data["cost"] = round(r.uniform(5, 5000), 2)
        elif t == "preference":
            text = r.choice(TOPICS + [f"{tool} for day-to-day work", f"{r.choice(LANGS)} for new services"])
            data = {"polarity": r.choice(["prefer", "prefer", "avoid", "neutral"]),
                    "strength": round(r.uniform(0.2, 1.0), 2),
                    "rationale": r.choice(["", "Stated in a review.", "Keeps diffs readable.",
                                           f"Asked for by {person}."])}
        elif t == "goal":
            text = r.choice([
                f"Cut {svc} cold start below {n * 5} ms.",
                f"Ship the new onboarding flow by the end of {r.choice(MONTHS)}.",
                f"Reduce cloud spend on {svc} by {n % 40 + 5}%.",
                f"Get {repo} test coverage above {60 + n % 35}%.",
                f"Hire two engineers for the {svc} team.",
            ])
            data = {"status": r.choice(["active", "active", "paused", "completed", "abandoned"])}
            if r.random() < 0.5:
                data["horizon"] = self._iso(self.now + timedelta(days=r.randrange(7, 365)))
        elif t == "belief":
            text = r.choice([
                f"The {svc} slowdowns are caused by lock contention in the database.",
                f"{person} will approve the budget if the numbers are clear.",
                f"Moving {svc} to {r.choice(LANGS)} would halve its memory use.",
                f"Most {svc} errors come from one misbehaving client.",
            ])
            data = {"stance": r.choice(["believes", "suspects", "doubts"]), "confidence": round(r.uniform(0.2, 0.9), 2)}
        elif t == "constraint":
            text = r.choice([
                f"Never deploy {svc} on a Friday afternoon.",
                f"Do not run {tool} against production without a dry run.",
                f"Always open a change ticket before touching {host}.",
                f"Keep customer data in the EU region for {svc}.",
                f"Ask {person} before spending more than {n * 100} EUR.",
            ])
            data = {"polarity": r.choice(["do", "dont"]), "strength": r.choice(["soft", "firm", "hard"]),
                    "source": r.choice(["user", "operator", "system", "learned"])}
        elif t == "capability":
            text = r.choice([
                f"Can run {tool} on {host}.",
                f"Has write access to {repo}.",
                f"Can page the {svc} on-call engineer.",
                f"Can read the {svc} metrics dashboards.",
            ])
            data = {"subject": ACTOR, "verified": r.random() < 0.6}
        elif t == "pattern":
            text = r.choice([
                f"{svc} deploys fail more often when {tool} is upgraded the same day.",
                f"{person} replies within an hour on weekdays.",
                f"Incidents on {svc} cluster around the monthly billing run.",
                f"Reviews of {repo} take longer at the end of a sprint.",
            ])
            data = {"strength": round(r.uniform(0.3, 0.95), 2), "coverage": r.randrange(1, 40)}
        else:  # identity
            text = person
            data = {"profile": {"role": r.choice(["engineer", "manager", "designer", "SRE", "analyst"]),
                                "team": svc, "timezone": r.choice(["Europe/Paris", "UTC", "Asia/Tokyo", "America/New_York"])}}

        obj: dict = {"type": t, "text": text}
        if data:
            obj["data"] = data
        k = r.choices([0, 1, 2, 3], [15, 40, 30, 15])[0]
        if k:
            obj["tags"] = r.sample(TAGS, k)
        f = r.choices([0, 1, 2], [50, 38, 12])[0]
        if f:
            obj["frames"] = [self._frame() for _ in range(f)]
        obj["importance"] = r.choices(range(11), [1, 2, 3, 5, 8, 14, 12, 10, 8, 5, 3])[0]
        if r.random() < 0.12:  # a few memories of other agents, some shared
            obj["actor"] = r.choice(OTHER_ACTORS)
            obj["visibility"] = r.choice(["private", "scoped", "public", "public"])
        elif r.random() < 0.1:
            obj["visibility"] = r.choice(["scoped", "public"])
        if r.random() < 0.3:
            obj["session"] = f"sess-{r.randrange(1, 400):04d}"
        if r.random() < 0.8:
            obj["created_at"] = self._iso(self._when())
        if r.random() < 0.25:
            obj["confidence"] = round(r.uniform(0.5, 1.0), 2)
        return obj


def write_jsonl(path: Path, n: int, seed: int, now: datetime) -> int:
    """Write n lines; returns the file size. The same seed gives the same prefix for any n."""
    g = Gen(seed, now)
    with open(path, "w", encoding="utf-8") as fh:
        for _ in range(n):
            fh.write(json.dumps(g.line(), ensure_ascii=False, separators=(",", ":")) + "\n")
    return path.stat().st_size


# -- helpers -----------------------------------------------------------------------
def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def run_checked(cmd: list[str], env: dict, *, capture: bool = False) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
                          stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise SystemExit(f"bench: command failed (exit {proc.returncode}): {' '.join(cmd)}\n"
                         f"{proc.stderr.decode(errors='replace').strip()}")
    return proc


def _child_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


FIND_OK = (0, 1)  # find exits like grep: 1 is an answer (nothing matched), not a failure


def time_once(cmd: list[str], env: dict, ok: tuple[int, ...] = (0,)) -> tuple[float, float]:
    """(wall, cpu) seconds of one fresh process, stdout and stderr to /dev/null; an exit status
    not in ``ok`` stops the bench (``find --near`` passes ``FIND_OK``: 1 is its "nothing matched").

    CPU is user+sys of the child (from getrusage of waited-for children): unlike
    wall time it does not count time spent waiting for a CPU held by other load.
    """
    c0 = _child_cpu()
    t0 = time.perf_counter()
    rc = subprocess.call(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         stdin=subprocess.DEVNULL)
    dt = time.perf_counter() - t0
    cpu = _child_cpu() - c0
    if rc not in ok:
        run_checked(cmd, env)  # re-run to show the error
        raise SystemExit(f"bench: exit {rc}: {' '.join(cmd)}")
    return dt, cpu


def find_cortexctl(explicit: str | None) -> str:
    if explicit:
        return explicit
    beside = Path(sys.executable).parent / "cortexctl"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("cortexctl")
    if not found:
        raise SystemExit("bench: no cortexctl console script next to this Python or on PATH (use --cortexctl)")
    return found


def bench_env(tmp: Path) -> dict:
    """The environment of every child.

    No CORTEXCTL_* from the caller and no user config file. Bytecode is cached
    under the temporary directory (PYTHONPYCACHEPREFIX) whatever the caller's
    PYTHONDONTWRITEBYTECODE says: an installed cortexctl has .pyc files, and an
    editable install without them would recompile every cortexctl module on
    every start. Nothing is written into the source tree.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORTEXCTL_")}
    for name in ("PYTHONPROFILEIMPORTTIME", "PYTHONDONTWRITEBYTECODE", "PYTHONDEVMODE", "PYTHONTRACEMALLOC"):
        env.pop(name, None)
    env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    env["CORTEXCTL_ACTOR"] = ACTOR
    cfg = tmp / "xdg-config"
    cfg.mkdir(exist_ok=True)
    env["XDG_CONFIG_HOME"] = str(cfg)  # platformdirs: no ~/.config/cortexctl/config.toml
    return env


def pkg_version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def import_cli(cortexctl: str, jsonl: Path, store: Path, env: dict, expect: int) -> float:
    cmd = [cortexctl, "import", str(jsonl), "--store", str(store), "--json", "-q", "--keep-actors"]
    t0 = time.perf_counter()
    proc = run_checked(cmd, env, capture=True)
    dt = time.perf_counter() - t0
    report = json.loads(proc.stdout)
    if report.get("imported") != expect:
        raise SystemExit(f"bench: expected {expect} imported, got {report}")
    return dt


def import_inproc(jsonl: Path, store: Path, expect: int) -> tuple[float, float]:
    """(seconds for the engine import, seconds spent importing the modules beforehand)."""
    t0 = time.perf_counter()
    from cortexctl import Cortex
    import cortexctl.engine.transfer  # noqa: F401 - loaded lazily by import_jsonl; keep it out of the timing
    import duckdb  # noqa: F401
    t_mod = time.perf_counter() - t0
    t0 = time.perf_counter()
    with open(jsonl, "rb") as fh:
        report = Cortex(store=store, actor=ACTOR).import_jsonl(fh, keep_actors=True)
    dt = time.perf_counter() - t0
    if report.imported != expect:
        raise SystemExit(f"bench: expected {expect} imported in-process, got {report.imported}")
    return dt, t_mod


def _importtime_once(py: str, cmd_args: list[str], env: dict) -> dict[str, tuple[int, int, int]]:
    """One `python -X importtime -m cortexctl ...`: module -> (self us, cumulative us, depth)."""
    proc = subprocess.run([py, "-X", "importtime", "-m", "cortexctl", *cmd_args], env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    rows: dict[str, tuple[int, int, int]] = {}
    for line in proc.stderr.decode(errors="replace").splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        head, cum, name = line.split("|", 2)
        name = name[1:]  # one separator space, then two per nesting level
        depth = (len(name) - len(name.lstrip(" "))) // 2
        rows[name.strip()] = (int(head.split(":", 1)[1]), int(cum), depth)
    return rows


def importtime_top(py: str, cmd_args: list[str], env: dict, repeat: int = 5, top: int = 10) -> dict:
    """`python -X importtime -m cortexctl ...`, `repeat` times; per module the median over the runs.

    Returns the top modules by self time, the top packages (sum of their
    modules' self times), and the top-level imports (depth 0: not nested in
    another import, i.e. done by __main__ or lazily at run time) by cumulative time.
    """
    runs = [_importtime_once(py, cmd_args, env) for _ in range(repeat)]
    names = set().union(*runs)

    def med(name: str, k: int) -> float:  # a module missing from a run counts as 0 there
        return statistics.median(r[name][k] if name in r else 0 for r in runs) / 1000

    rows = [(n, med(n, 0), med(n, 1), min(r[n][2] for r in runs if n in r)) for n in names]
    by_pkg: dict[str, float] = {}
    for name, s, _, _ in rows:
        by_pkg[name.split(".")[0]] = by_pkg.get(name.split(".")[0], 0.0) + s
    return {
        "repeat": repeat,
        "modules": len(rows),
        "total_ms": statistics.median(sum(v[0] for v in r.values()) for r in runs) / 1000,
        "by_self": [{"module": n, "self_ms": s, "cumulative_ms": c}
                    for n, s, c, _ in sorted(rows, key=lambda x: -x[1])[:top]],
        "by_package": [{"package": p, "self_ms": s}
                       for p, s in sorted(by_pkg.items(), key=lambda x: -x[1])[:top]],
        "top_level": [{"module": n, "cumulative_ms": c}
                      for n, _, c, d in sorted(rows, key=lambda x: -x[2]) if d == 0][:top],
    }


# -- main --------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="cortexctl cold-start and import benchmark (a report; asserts nothing)")
    ap.add_argument("--memories", type=int, default=10_000, metavar="N", help="memories in the store (default 10000)")
    ap.add_argument("--runs", type=int, default=10, help="fresh processes per command, after one warm-up (default 10)")
    ap.add_argument("--import-n", type=int, default=10_000, metavar="N",
                    help="memories for the fresh-store import comparison, CLI vs in-process (default 10000)")
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    ap.add_argument("--seed", type=int, default=20261121, help="seed of the synthetic memories")
    ap.add_argument("--importtime", action="store_true",
                    help="also break down `find` start-up with python -X importtime (5 runs, top 10)")
    ap.add_argument("--cortexctl", metavar="PATH", help="the console script (default: next to this Python)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory and print its path")
    args = ap.parse_args(argv)
    if args.memories < 10 or args.import_n < 1 or args.runs < 1:
        ap.error("--memories must be 10 or more, --import-n and --runs 1 or more")

    py = sys.executable
    cortexctl = find_cortexctl(args.cortexctl)
    if pkg_version("cortexctl") is None:
        raise SystemExit(f"bench: cortexctl is not installed for {py}; run this with the venv's python")

    tmp = Path(tempfile.mkdtemp(prefix="cortexctl-bench-"))
    try:
        env = bench_env(tmp)
        # The in-process import reads the environment too: make it match the children's.
        os.environ.clear()
        os.environ.update(env)
        result = run(args, py, cortexctl, tmp, env)
    finally:
        if args.keep:
            log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result)
    return 0


def run(args, py: str, cortexctl: str, tmp: Path, env: dict) -> dict:
    now = datetime.now(timezone.utc).replace(microsecond=0)
    n, n_imp = args.memories, args.import_n
    res: dict = {
        "python": py, "python_version": platform.python_version(), "cortexctl_script": cortexctl,
        "versions": {p: pkg_version(p) for p in ("cortexctl", "duckdb", "typer", "rich", "pydantic", "usearch")},
        "cpus": os.cpu_count(), "platform": platform.platform(), "memories": n, "runs": args.runs,
    }

    res["loadavg_start"] = os.getloadavg()

    # 0. prime: run every timed code path once on a tiny store, so that the
    #    bytecode cache is filled and the page cache is warm before anything is timed
    log("priming (bytecode cache, page cache) ...")
    prime_jsonl = tmp / "prime.jsonl"
    write_jsonl(prime_jsonl, 20, args.seed + 1, now)
    prime = tmp / "prime-store"
    run_checked([cortexctl, "import", str(prime_jsonl), "--store", str(prime), "-q", "--keep-actors"], env)
    run_checked([cortexctl, "find", "-k", "10", "--store", str(prime)], env)
    run_checked([cortexctl, "--help"], env)
    run_checked([py, "-c", "import duckdb, cortexctl.cli.app"], env)
    shutil.rmtree(prime, ignore_errors=True)

    # 1. the store: N memories through the real CLI
    main_jsonl = tmp / f"memories-{n}.jsonl"
    t0 = time.perf_counter()
    size = write_jsonl(main_jsonl, n, args.seed, now)
    res["generate"] = {"n": n, "seconds": time.perf_counter() - t0, "jsonl_bytes": size}
    log(f"generated {n} memories ({size / 1e6:.1f} MB JSONL) in {res['generate']['seconds']:.2f} s")

    store = tmp / "store"
    log(f"cortexctl import {n} ...")
    dt = import_cli(cortexctl, main_jsonl, store, env, n)
    res["import_cli"] = {"n": n, "seconds": dt, "per_second": n / dt, "store_bytes": dir_size(store)}
    log(f"  {dt:.2f} s, {n / dt:,.0f} memories/s")

    # 2. the import comparison on fresh stores: CLI (unless step 1 already was it) and in-process
    if n_imp == n:
        imp_jsonl = main_jsonl
        res["import_cli_n"] = dict(res["import_cli"], reused=True)
    else:
        imp_jsonl = tmp / f"memories-{n_imp}.jsonl"
        write_jsonl(imp_jsonl, n_imp, args.seed, now)
        log(f"cortexctl import {n_imp} into a fresh store ...")
        dt = import_cli(cortexctl, imp_jsonl, tmp / "store-cli", env, n_imp)
        res["import_cli_n"] = {"n": n_imp, "seconds": dt, "per_second": n_imp / dt, "reused": False}
        log(f"  {dt:.2f} s, {n_imp / dt:,.0f} memories/s")
        shutil.rmtree(tmp / "store-cli", ignore_errors=True)
    log(f"Cortex.import_jsonl {n_imp} in-process into a fresh store ...")
    dt, t_mod = import_inproc(imp_jsonl, tmp / "store-inproc", n_imp)
    res["import_inproc"] = {"n": n_imp, "seconds": dt, "per_second": n_imp / dt, "module_import_seconds": t_mod}
    res["import_overhead_seconds"] = res["import_cli_n"]["seconds"] - dt
    log(f"  {dt:.2f} s, {n_imp / dt:,.0f} memories/s (modules loaded beforehand in {t_mod * 1000:.0f} ms)")
    shutil.rmtree(tmp / "store-inproc", ignore_errors=True)

    # 3. a real reference from the store (and a check that find returns results)
    out = run_checked([cortexctl, "find", "-k", "10", "--store", str(store), "--jsonl"], env, capture=True)
    hits = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    if len(hits) != 10:
        raise SystemExit(f"bench: find -k 10 returned {len(hits)} results, expected 10")
    ref = hits[len(hits) // 2]["id"]
    res["show_ref"] = ref

    # 4. cold wall time of fresh processes
    cmds = [
        ("python -c pass", [py, "-c", "pass"]),
        ("import duckdb", [py, "-c", "import duckdb"]),
        ("import cortexctl.cli.app", [py, "-c", "import cortexctl.cli.app"]),
        ("cortexctl --help", [cortexctl, "--help"]),
        ("show REF", [cortexctl, "show", ref, "--store", str(store)]),
        ("find -k 10", [cortexctl, "find", "-k", "10", "--store", str(store)]),
        ("write fact TEXT", [cortexctl, "write", "fact", "a memory written by the benchmark", "--tag", "bench",
                             "--store", str(store)]),
    ]
    log(f"cold start: 1 warm-up + {args.runs} runs of {len(cmds)} commands, interleaved ...")
    for _, cmd in cmds:  # warm-up: page cache
        time_once(cmd, env)
    wall: dict[str, list[float]] = {name: [] for name, _ in cmds}
    cpu: dict[str, list[float]] = {name: [] for name, _ in cmds}
    for _ in range(args.runs):  # round-robin, so drift hits every command alike
        for name, cmd in cmds:
            w, c = time_once(cmd, env)
            wall[name].append(w * 1000)
            cpu[name].append(c * 1000)
    ref_ms = statistics.median(wall["import duckdb"])
    ref_cpu = statistics.median(cpu["import duckdb"])
    res["reference"] = "import duckdb"
    res["cold"] = []
    for name, cmd in cmds:
        med = statistics.median(wall[name])
        med_cpu = statistics.median(cpu[name])
        res["cold"].append({
            "name": name, "argv": [os.path.basename(cmd[0]), *cmd[1:]],
            "median_ms": med, "min_ms": min(wall[name]), "max_ms": max(wall[name]),
            "ratio_to_import_duckdb": med / ref_ms,
            "cpu_median_ms": med_cpu, "cpu_ratio_to_import_duckdb": med_cpu / ref_cpu,
        })
    res["loadavg_end"] = os.getloadavg()

    if args.importtime:
        log("python -X importtime -m cortexctl find -k 10 ...")
        res["importtime_find"] = importtime_top(py, ["find", "-k", "10", "--store", str(store)], env)
    return res


def print_table(r: dict) -> None:
    v = r["versions"]
    la0, la1 = r["loadavg_start"][0], r["loadavg_end"][0]
    print(f"cortexctl {v['cortexctl']} cold-start benchmark: Python {r['python_version']}, duckdb {v['duckdb']}, "
          f"typer {v['typer']}, {r['cpus']} CPUs, load average {la0:.2f} -> {la1:.2f}")
    print(f"store: {r['memories']:,} memories, {r['import_cli']['store_bytes'] / 1e6:.1f} MB on disk "
          f"(from {r['generate']['jsonl_bytes'] / 1e6:.1f} MB of JSONL)")
    print()
    print(f"{'import':<44}{'memories':>9}{'wall':>10}{'memories/s':>12}")
    rows = [("cortexctl import (CLI, builds the store)", r["import_cli"])]
    if not r["import_cli_n"].get("reused"):
        rows.append(("cortexctl import (CLI, fresh store)", r["import_cli_n"]))
    rows.append(("Cortex(...).import_jsonl (in-process)", r["import_inproc"]))
    for label, d in rows:
        print(f"  {label:<42}{d['n']:>9,}{d['seconds']:>8.2f} s{d['per_second']:>12,.0f}")
    print(f"  CLI minus in-process, {r['import_inproc']['n']:,} memories (start-up + CLI): "
          f"{r['import_overhead_seconds'] * 1000:.0f} ms")
    print()
    print(f"cold start: {r['runs']} fresh processes each after 1 warm-up, stdout to /dev/null")
    print(f"{'':<28}{'median':>9}{'min':>8}{'max':>8}{'x duckdb':>10}{'cpu':>9}{'x duckdb':>10}")
    for c in r["cold"]:
        print(f"  {c['name']:<26}{c['median_ms']:>6.0f} ms{c['min_ms']:>5.0f} ms{c['max_ms']:>5.0f} ms"
              f"{c['ratio_to_import_duckdb']:>9.1f}x{c['cpu_median_ms']:>6.0f} ms{c['cpu_ratio_to_import_duckdb']:>9.1f}x")
    print()
    for c in r["cold"]:
        if c["name"] in ("cortexctl --help", "show REF", "find -k 10", "write fact TEXT"):
            print(f"{c['name']}: {c['median_ms']:.0f} ms = {c['ratio_to_import_duckdb']:.1f}x import duckdb")
    it = r.get("importtime_find")
    if it:
        print()
        print(f"python -X importtime -m cortexctl find -k 10 (median of {it['repeat']} runs): "
              f"{it['modules']} modules, {it['total_ms']:.0f} ms of imports in all")
        print(f"  {'top modules by self time':<34}{'self':>8}{'cumul.':>10}    top packages (sum of self)")
        for a, b in zip(it["by_self"], it["by_package"]):
            print(f"  {a['module']:<34}{a['self_ms']:>5.1f} ms{a['cumulative_ms']:>7.1f} ms    "
                  f"{b['package']:<22}{b['self_ms']:>6.1f} ms")
        print("  top-level imports (not nested in another import; lazy ones run inside the command)")
        for a in it["top_level"]:
            print(f"  {a['module']:<34}{a['cumulative_ms']:>5.1f} ms")


if __name__ == "__main__":
    sys.exit(main())
