"""attest (SPEC §6): the outcome table, citations skipped and deduplicated, limits, the rate limit."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from cortexctl import Cortex
from tests import tamper
from tests.conftest import assert_clean_error, assert_store_verifies, cortexctl_argv


def _journal(store) -> list[tuple]:
    return tamper.journal(store)


def _counters(cx: Cortex, uri: str) -> tuple[int, int, object]:
    m = cx.show(uri)
    return m.access_count, m.citations, m.last_used


@pytest.mark.parametrize(
    ("outcome", "reason", "start_citations", "access", "citations"),
    [
        ("success", None, 0, 1, 1),
        ("success", "factual_error", 2, 1, 3),  # a reason never lowers a success
        ("failure", "factual_error", 2, 0, 1),
        ("failure", "wrong_assumption", 2, 0, 1),
        ("failure", "factual_error", 0, 0, 0),  # floor 0
        ("failure", "wrong_assumption", 0, 0, 0),
        ("failure", "timeout", 2, 0, 2),
        ("failure", None, 2, 0, 2),
    ],
)
def test_attest_outcome_table(cli, cx, outcome, reason, start_citations, access, citations):
    uri = cli("write", "fact", "The deploy key rotates monthly").out.strip()
    for i in range(start_citations):
        cx.attest(f"warmup-{i}", "success", [uri])
    before = _counters(cx, uri)
    args = ["attest", "--intent", "intent-1", "--outcome", outcome, uri, "--json"]
    if reason is not None:
        args += ["--reason", reason]
    run = cli(*args)
    assert run.code == 0, run
    doc = run.json()
    after = _counters(cx, uri)
    assert after[0] - before[0] == access
    assert after[1] == citations
    assert after[2] is not None and (before[2] is None or after[2] > before[2])  # every attest touches
    assert doc["affected"] == [uri]
    assert doc["access_delta"] == access
    assert doc["citations_delta"] == (1 if outcome == "success" else -1 if reason in (
        "factual_error", "wrong_assumption") else 0)
    assert doc["learn_seq"] == doc["seq"] + 1
    assert _journal(cx.store.path)[-2:] == [(doc["seq"], "attest"), (doc["seq"] + 1, "learn_weights")]
    blamed = outcome == "failure" and reason in ("factual_error", "wrong_assumption")
    assert doc["weights_updated"] == (outcome == "success" or blamed)
    assert (doc["step_skipped"] is None) == (outcome == "success" or blamed)
    assert abs(sum(doc["new_weights"].values()) - 1.0) < 1e-12
    assert_store_verifies(cx.store.path)


def test_duplicate_citations_count_once(cli, cx):
    uri = cli("write", "fact", "one memory").out.strip()
    id_ = uri.rsplit("/", 1)[1]
    run = cli("attest", "--intent", "i", "--outcome", "success", uri, uri, id_, id_[:10], f"{uri}/v/1", "--json")
    assert run.code == 0, run
    assert run.json()["affected"] == [uri]
    assert run.json()["skipped"] == []
    assert _counters(cx, uri)[:2] == (1, 1)


def test_each_kind_of_skipped_citation_is_listed_not_an_error(cli, cx, store):
    live = cli("write", "fact", "live memory").out.strip()
    gone = cli("write", "fact", "forgotten memory").out.strip()
    cli("forget", gone, "--reason", "obsolete")
    bobs = cli("write", "fact", "bob's private memory", env={"CORTEXCTL_ACTOR": "bob"}).out.strip()
    lines = "\n".join('{"type": "fact", "text": "twin %s", "id": "01JD3K000000000000000000%s"}' % (c, c)
                      for c in ("A1", "B2"))
    assert cli("import", "-", input=lines + "\n").code == 0
    missing = "cortex://m/01JD3K0000000000000000ZZZZ"
    run = cli("attest", "--intent", "i", "--outcome", "success", live, gone, bobs, missing, "cortex://m/xyz",
              "not a ref", "01JD3K", "--json")
    assert run.code == 0, run
    doc = run.json()
    assert doc["affected"] == [live]
    assert doc["skipped"] == [
        {"uri": gone, "why": "tombstoned"},
        {"uri": bobs, "why": "missing"},  # another actor's private memory is not the actor's to cite
        {"uri": missing, "why": "missing"},
        {"uri": "cortex://m/xyz", "why": "malformed"},
        {"uri": "not a ref", "why": "malformed"},
        {"uri": "01JD3K", "why": "ambiguous"},
    ]
    assert _counters(cx, gone)[:2] == (0, 0)
    assert Cortex(store=store, actor="bob").show(bobs).citations == 0


def test_all_citations_skipped_still_writes_both_entries(cli, cx, store):
    cli("write", "fact", "x")
    run = cli("attest", "--intent", "i", "--outcome", "success", "cortex://m/xyz", "--json")
    assert run.code == 0, run
    doc = run.json()
    assert doc["affected"] == [] and doc["weights_updated"] is False
    assert doc["step_skipped"] == "no memory was affected"
    assert _journal(store)[-2:] == [(doc["seq"], "attest"), (doc["seq"] + 1, "learn_weights")]
    assert_store_verifies(store)


def test_256_citations_pass_and_257_are_refused(cli, store):
    uri = cli("write", "fact", "x").out.strip()
    missing = [f"cortex://m/01JD3K{n:020d}" for n in range(300)]
    ok = cli("attest", "--intent", "i256", "--outcome", "success", uri, *missing[:255], "--json")
    assert ok.code == 0, ok
    assert len(ok.json()["skipped"]) == 255
    before = _journal(store)
    over = cli("attest", "--intent", "i257", "--outcome", "success", uri, *missing[:256])
    assert_clean_error(over, 2)
    assert "256" in over.err
    assert _journal(store) == before


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--intent", "", "--outcome", "success", "URI"], "--intent"),
        (["--outcome", "success", "URI"], "--intent"),
        (["--intent", "i", "--outcome", "maybe", "URI"], "--outcome"),
        (["--intent", "i", "URI"], "--outcome"),
        (["--intent", "i", "--outcome", "success"], "at least one"),
        (["--intent", "has space", "--outcome", "success", "URI"], "--intent"),
        (["--intent", "i", "--outcome", "failure", "--reason", "x" * 1001, "URI"], "--reason"),
        (["--intent", "i", "--outcome", "failure", "--reason", "two\nlines", "URI"], "--reason"),
    ],
)
def test_attest_usage_errors_change_nothing(cli, store, args, needle):
    uri = cli("write", "fact", "x").out.strip()
    before = _journal(store)
    run = cli("attest", *[uri if a == "URI" else a for a in args])
    assert_clean_error(run, 2)
    assert needle in run.err
    assert _journal(store) == before


def test_attest_on_a_missing_store_is_not_found_and_creates_nothing(cli, store):
    run = cli("attest", "--intent", "i", "--outcome", "success", "cortex://m/01JD3K00000000000000000000")
    assert_clean_error(run, 3)
    assert not store.exists()


def test_a_version_uri_cites_its_memory_only_when_the_version_exists(cli, cx):
    uri = cli("write", "fact", "versioned").out.strip()
    cli("update", uri, "versioned twice")
    run = cli("attest", "--intent", "i", "--outcome", "success", f"{uri}/v/2", f"{uri}/v/3", "--json")
    assert run.code == 0, run
    assert run.json()["affected"] == [uri]
    assert run.json()["skipped"] == [{"uri": f"{uri}/v/3", "why": "missing"}]


def test_huge_citations_are_listed_cut_short(cli):
    uri = cli("write", "fact", "x").out.strip()
    run = cli("attest", "--intent", "i", "--outcome", "success", "x" * 100_000 + "a", "x" * 100_000 + "b",
              f"{uri}/v/{'9' * 5000}", "--json")
    assert run.code == 0, run
    skipped = run.json()["skipped"]
    assert len(skipped) == 3 and all(len(s["uri"]) == 200 and s["uri"].endswith("…") for s in skipped)
    assert [s["why"] for s in skipped] == ["malformed"] * 3


def test_rate_limit_holds_across_processes_and_changes_nothing(cli, cx, store):
    """Five attests in one process use the burst; a sixth from another process at the same
    moment is refused with nothing changed (both clocks are fixed, so no refill comes between);
    and the CLI refuses an attest over an empty bucket with exit 5 and one line."""
    from cortexctl.engine.rows import utcnow

    uri = cli("write", "fact", "rate limited memory").out.strip()
    now = utcnow()
    script = textwrap.dedent(f"""
        import datetime, sys
        from cortexctl import Cortex
        from cortexctl.errors import RateLimited
        cx = Cortex(store={str(store)!r}, actor="alice")
        cx.context.clock = lambda: datetime.datetime.fromisoformat({now.isoformat()!r})
        if sys.argv[1] == "burst":
            for _ in range(5):
                cx.attest("busy", "success", [{uri!r}])
            print("attested")
        else:
            try:
                cx.attest("busy", "success", [{uri!r}])
                print("attested")
            except RateLimited as exc:
                print("refused:", exc)
    """)

    def attest_in_a_process(what: str) -> str:
        proc = subprocess.run([sys.executable, "-c", script, what], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    assert attest_in_a_process("burst") == "attested\n"
    out = attest_in_a_process("sixth")
    assert out.startswith("refused:") and "rate limit" in out, out
    kinds = [k for _, k in _journal(store)]
    assert kinds.count("attest") == 5 and kinds.count("learn_weights") == 5
    assert _counters(cx, uri)[:2] == (5, 5)
    # the CLI on the real clock: a bucket emptied beyond refilling within the test
    tamper.drain_rate_bucket(store, "alice", "busy")
    run = subprocess.run(cortexctl_argv() + ["attest", "--intent", "busy", "--outcome", "success", uri],
                         capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ, "CORTEXCTL_STORE": str(store)})
    assert run.returncode == 5, run
    assert "rate limit" in run.stderr and len(run.stderr.strip().splitlines()) == 1
    assert [k for _, k in _journal(store)] == kinds
    assert _counters(cx, uri)[:2] == (5, 5)
    # Another intent, and another actor, have buckets of their own.
    assert cli("attest", "--intent", "other", "--outcome", "success", uri).code == 0
    assert cli("attest", "--intent", "busy", "--outcome", "success", "cortex://m/xyz",
               env={"CORTEXCTL_ACTOR": "bob"}).code == 0


@pytest.mark.slow
def test_concurrent_attests_never_exceed_the_bucket(cli, store):
    """Ten processes at once on one intent: each either attests (exit 0) or is refused
    (exit 5); those that attest are at most the burst plus what refilled meanwhile."""
    uri = cli("write", "fact", "contended memory").out.strip()
    env = {**__import__("os").environ, "CORTEXCTL_STORE": str(store), "CORTEXCTL_WAIT": "60"}
    procs = [subprocess.Popen(cortexctl_argv() + ["attest", "--intent", "hot", "--outcome", "success", uri],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) for _ in range(10)]
    codes = [p.wait(timeout=120) for p in procs]
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    assert set(codes) <= {0, 5}, codes
    # the bucket's bound, on the times the attests themselves stamped: the burst, plus what
    # refilled between the first and the last
    with Cortex(store=store, actor="alice").store.reading() as tx:
        stamped = [entry[2] for entry in tx.journal_entries(["attest"])]
    span = (max(stamped) - min(stamped)).total_seconds() if stamped else 0.0
    assert codes.count(0) <= 5 + int(span), (codes, span)
    kinds = [k for _, k in _journal(store)]
    assert kinds.count("attest") == codes.count(0) == kinds.count("learn_weights")
    assert Cortex(store=store, actor="alice").show(uri).access_count == codes.count(0)
    assert_store_verifies(store)


@pytest.mark.slow
def test_sigkill_during_attest_leaves_both_journal_entries_or_neither(store):
    """A process attesting in a loop is killed at varying moments; every time the store
    verifies, and attest and learn_weights entries come in pairs."""
    import os
    import signal
    import time

    cx = Cortex(store=store, actor="alice")
    uris = [cx.write("fact", f"memory number {i}").uri for i in range(6)]
    script = textwrap.dedent(f"""
        import sys
        from cortexctl import Cortex
        cx = Cortex(store={str(store)!r}, actor="alice")
        uris = {uris!r}
        i = int(sys.argv[1])
        while True:
            cx.attest(f"kill-{{i}}", "success" if i % 3 else "failure", uris[: 1 + i % 6], reason="factual_error")
            i += 1
            print(i, flush=True)
    """)
    done = 0
    for round_, delay in enumerate((0.05, 0.13, 0.21, 0.34, 0.55, 0.89)):
        proc = subprocess.Popen([sys.executable, "-c", script, str(round_ * 100_000)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        assert proc.stdout.readline(), proc.stderr.read()  # it is attesting
        time.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
        report = Cortex(store=store, actor="verifier").verify()
        assert report.ok, [str(p) for p in report.problems]
        kinds = [k for _, k in _journal(store)]
        assert kinds.count("attest") == kinds.count("learn_weights") > done
        assert kinds[-1] != "attest"
        done = kinds.count("attest")


def test_imported_counters_must_stay_exact(cli, cx):
    line = ('{"id": "01M7Y65MEPVQT7QJC2YDHMD6AA", "type": "fact", "actor": "alice", "versions": [{"version": 1,'
            ' "data": {"statement": "big"}}], "salience": {"access_count": %d, "citations": 0}}')
    run = cli("import", "-", input=line % (2**64 - 1) + "\n")
    assert run.code == 10, run
    assert "salience.access_count" in run.err
    assert cli("import", "-", input=line % (2**53 - 1) + "\n").code == 0
    for intent in ("i", "j"):
        assert cli("attest", "--intent", intent, "--outcome", "success", "01M7Y65MEPVQT7QJC2YDHMD6AA").code == 0
    assert cx.show("01M7Y65MEPVQT7QJC2YDHMD6AA").access_count == 2**53 - 1  # it stops at the bound
    assert_store_verifies(cx.store.path)
    exported = cli("export").out  # and what attest left still imports
    assert cli("import", "-", "--keep-actors", "--store", str(cx.store.path) + "-copy", input=exported,
               use_store=False).code == 0
