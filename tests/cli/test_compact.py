"""compact and checkpoint load (SPEC §7): kept and stubs, the budget edge, pinning, the mirror."""

from __future__ import annotations

import json
import os

import pytest

from tests import tamper
from tests.conftest import assert_clean_error, assert_store_verifies, run_in_process


def _journal_len(store) -> int:
    return tamper.count(store, "journal")


def _context(store):
    w = lambda *a: run_in_process(store, "write", *a).out.strip()  # noqa: E731
    return {
        "fact": w("fact", "The deploy key rotates on the first Monday of every month"),
        "preference": w("preference", "Short answers in code review"),
        "soft": w("constraint", "Prefer squash merges", "--set", "strength=soft"),
        "paused": w("goal", "Migrate the CI to the new runners", "--set", "status=paused"),
        "identity": w("identity", "Alice, the release agent"),
        "hard": w("constraint", "Never push to main directly", "--set", "strength=hard"),
        "active": w("goal", "Ship release 2.4", "--set", "status=active"),
    }


@pytest.fixture
def context(store_once):
    """A fact, a preference, a soft constraint and a paused goal (compactable), and an identity,
    a hard constraint and an active goal (pinned); written once per session, copied per test."""
    return store_once(_context)


def _compact(cli, context_uris, budget, step="s1", *extra, as_json=True):
    return cli("compact", "--intent", "intent-1", "--step", step, "--budget-tokens", str(budget), *extra,
               *context_uris, *(["--json"] if as_json else []))


def test_compact_keeps_pinned_and_load_bearing_and_stubs_the_rest(cli, context):
    uris = list(context.values())
    run = _compact(cli, uris, 10_000, "s1", "--load-bearing", context["fact"])
    assert run.code == 0, run
    doc = run.json()
    kept = {k["uri"]: k["why"] for k in doc["kept"]}
    assert kept == {context["fact"]: "load-bearing", context["identity"]: "identity",
                    context["hard"]: "hard constraint", context["active"]: "active goal"}
    stubs = [c["ref"] for c in doc["compacted"]]
    assert stubs == [context["preference"], context["soft"], context["paused"]]
    for c in doc["compacted"]:
        assert set(c) == {"ref", "short", "salience", "tokens"} and 0 < c["salience"] <= 1
    shows = {u: cli("show", u, "--json").json() for u in uris}
    want = sum(-(-len(shows[u]["forms"]["medium"].encode()) // 4) for u in kept) + sum(
        -(-len(shows[u]["forms"]["short"].encode()) // 4) for u in stubs)
    assert doc["total_tokens"] == want
    assert doc["snapshot_uri"] == "cortex://journal/logs/intent-1/s1"
    assert doc["snapshot_path"] is None


def test_compact_at_exactly_the_budget_stores_and_one_over_stores_nothing(cli, context, store):
    uris = list(context.values())
    total = _compact(cli, uris, 10_000, "probe").json()["total_tokens"]
    before = _journal_len(store)
    over = _compact(cli, uris, total - 1, "tight", as_json=False)
    assert_clean_error(over, 6)
    assert "budget unreachable" in over.err
    assert _journal_len(store) == before
    assert_clean_error(cli("checkpoint", "load", "--intent", "intent-1", "--step", "tight"), 3)
    exact = _compact(cli, uris, total, "tight")
    assert exact.code == 0, exact
    assert exact.json()["total_tokens"] == total
    assert _journal_len(store) == before + 1


def test_nothing_compactable_keeps_everything(cli, context):
    pinned = [context["identity"], context["hard"], context["active"]]
    run = _compact(cli, pinned, 10_000)
    assert run.code == 0, run
    assert run.json()["compacted"] == [] and len(run.json()["kept"]) == 3


def test_all_items_pinned_over_budget_is_unreachable(cli, context, store):
    pinned = [context["identity"], context["hard"], context["active"]]
    before = _journal_len(store)
    run = _compact(cli, pinned, 5, as_json=False)
    assert_clean_error(run, 6)
    assert _journal_len(store) == before


def test_load_bearing_memories_are_kept_even_when_not_listed(cli, context):
    run = _compact(cli, [context["preference"]], 10_000, "s1", "--load-bearing", context["fact"])
    assert run.code == 0, run
    assert [k["uri"] for k in run.json()["kept"]] == [context["fact"]]


def test_checkpoint_round_trip_and_mirror(cli, context, tmp_path):
    mirror = tmp_path / "thoughts"
    run = _compact(cli, list(context.values()), 10_000, "step-7", "--checkpoint-dir", str(mirror))
    assert run.code == 0, run
    doc = run.json()
    path = mirror / "intent-1" / "step-7.snapshot"
    assert doc["snapshot_path"] == str(path) and doc["mirror_error"] is None
    loaded = cli("checkpoint", "load", "--intent", "intent-1", "--step", "step-7", "--json")
    assert loaded.code == 0, loaded
    assert loaded.json() == doc["checkpoint"]
    assert json.loads(path.read_text()) == doc["checkpoint"]
    assert loaded.json()["kept"] == [k["uri"] for k in doc["kept"]]
    assert loaded.json()["compacted"] == [{k: c[k] for k in ("ref", "short", "salience")} for c in doc["compacted"]]
    assert os.stat(path).st_mode & 0o777 == 0o600


def test_a_later_compact_of_the_same_step_replaces_the_checkpoint(cli, context, store):
    assert _compact(cli, [context["fact"]], 10_000, "s").code == 0
    assert _compact(cli, [context["preference"]], 10_000, "s").code == 0
    loaded = cli("checkpoint", "load", "--intent", "intent-1", "--step", "s", "--json").json()
    assert [c["ref"] for c in loaded["compacted"]] == [context["preference"]]
    assert_store_verifies(store)


def test_mirror_into_a_file_fails_but_the_checkpoint_stands(cli, context, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    run = _compact(cli, [context["fact"]], 10_000, "s", "--checkpoint-dir", str(blocker))
    assert run.code == 0, run
    assert run.json()["snapshot_path"] is None and run.json()["mirror_error"]
    assert "mirror was not written" in run.err
    assert cli("checkpoint", "load", "--intent", "intent-1", "--step", "s").code == 0


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes into read-only directories")
def test_mirror_into_a_read_only_directory_fails_but_the_checkpoint_stands(cli, context, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        run = _compact(cli, [context["fact"]], 10_000, "s", "--checkpoint-dir", str(ro))
    finally:
        ro.chmod(0o700)
    assert run.code == 0, run
    assert run.json()["snapshot_path"] is None and "Permission denied" in run.json()["mirror_error"]
    assert cli("checkpoint", "load", "--intent", "intent-1", "--step", "s").code == 0


def test_compact_never_changes_salience(cli, context, cx):
    uris = list(context.values())
    cx.attest("warm", "success", uris[:2])
    before = [cli("show", u, "--json").json()["salience"] for u in uris]
    assert _compact(cli, uris, 10_000).code == 0
    assert [cli("show", u, "--json").json()["salience"] for u in uris] == before


def test_in_context_file_takes_refs_and_find_jsonl(cli, context, tmp_path):
    listing = tmp_path / "context.txt"
    listing.write_text(f"# what the agent holds\n{context['fact']}\n\n{context['preference']}\n")
    run = cli("compact", "--intent", "i", "--step", "1", "--budget-tokens", "1000", "--in-context-file",
              str(listing), "--json")
    assert run.code == 0, run
    assert [c["ref"] for c in run.json()["compacted"]] == [context["fact"], context["preference"]]
    found = cli("find", "--near", "deploy key", "--jsonl")
    piped = cli("compact", "--intent", "i", "--step", "2", "--budget-tokens", "1000", "--in-context-file", "-",
                "--json", input=found.out)
    assert piped.code == 0, piped
    assert context["fact"] in [c["ref"] for c in piped.json()["compacted"]]


def test_forgotten_memories_are_dropped_and_all_forgotten_is_an_error(cli, context, store):
    cli("forget", context["preference"], "--reason", "stale")
    run = _compact(cli, [context["fact"], context["preference"]], 1000)
    assert run.code == 0, run
    assert run.json()["dropped"] == [{"uri": context["preference"], "why": "forgotten"}]
    before = _journal_len(store)
    assert_clean_error(_compact(cli, [context["preference"]], 1000, "s2", as_json=False), 2)
    assert _journal_len(store) == before


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["--intent", "i", "--step", "s", "--budget-tokens", "100"], 2, "in context"),
        (["--intent", "", "--step", "s", "--budget-tokens", "100", "FACT"], 2, "--intent"),
        (["--intent", "i", "--step", "../up", "--budget-tokens", "100", "FACT"], 2, "--step"),
        (["--intent", "i", "--step", "s", "--budget-tokens", "0", "FACT"], 2, "--budget-tokens"),
        (["--intent", "i", "--step", "s", "FACT"], 2, "--budget-tokens"),
        (["--intent", "i", "--step", "s", "--budget-tokens", "100", "cortex://m/xyz"], 2, "malformed"),
        (["--intent", "i", "--step", "s", "--budget-tokens", "100", "cortex://m/01JD3K00000000000000000000"], 3,
         "no memory"),
        (["--intent", "i", "--step", "s", "--budget-tokens", "100", "--in-context-file", "/nonexistent/x"], 2,
         "no such file"),
        (["--intent", "i", "--step", "s", "--budget-tokens", "100", "--in-context-file", "DIR"], 2, "directory"),
        (["--intent", "i", "--step", "s", "--budget-tokens", "100", "--in-context-file="], 2, "must not be empty"),
        (["--intent", "i", "--step", "s", "--budget-tokens", "100", "FACT/v/9"], 3, "no version 9"),
        (["--intent", "i", "--step", "s", "--budget-tokens", "100", "FACT/v/" + "9" * 5000], 2, "malformed"),
    ],
)
def test_compact_bad_input_stores_nothing(cli, context, store, tmp_path, args, code, needle):
    before = _journal_len(store)
    args = [a.replace("FACT", context["fact"]) if a.startswith("FACT") else str(tmp_path) if a == "DIR" else a
            for a in args]
    run = cli("compact", *args)
    assert_clean_error(run, code)
    assert needle in run.err
    assert _journal_len(store) == before


def test_checkpoint_load_errors(cli, context):
    assert_clean_error(cli("checkpoint", "load", "--intent", "i", "--step", "none"), 3)
    assert_clean_error(cli("checkpoint", "load", "--intent", "i"), 2)
    assert_clean_error(cli("checkpoint", "load", "--intent", "a/b", "--step", "s"), 2)


def test_checkpoints_are_the_actors_own(cli, context):
    assert _compact(cli, [context["fact"]], 1000, "mine").code == 0
    run = cli("checkpoint", "load", "--intent", "intent-1", "--step", "mine", env={"CORTEXCTL_ACTOR": "bob"})
    assert_clean_error(run, 3)


def test_in_context_file_with_a_byte_order_mark(cli, context, tmp_path):
    listing = tmp_path / "bom.txt"
    listing.write_bytes(b"\xef\xbb\xbf" + context["fact"].encode() + b"\n")
    run = cli("compact", "--intent", "i", "--step", "1", "--budget-tokens", "1000", "--in-context-file",
              str(listing), "--json")
    assert run.code == 0, run


def test_an_empty_checkpoint_dir_is_a_usage_error(cli, context, store):
    before = _journal_len(store)
    assert_clean_error(_compact(cli, [context["fact"]], 1000, "s", "--checkpoint-dir", "", as_json=False), 2)
    assert _journal_len(store) == before


def test_a_closed_stdin_is_a_usage_error(cli, context, store):
    import subprocess

    from tests.conftest import cortexctl_argv

    proc = subprocess.run(cortexctl_argv() + ["compact", "--intent", "i", "--step", "s", "--budget-tokens", "9",
                                              "--in-context-file", "-"],
                          capture_output=True, text=True, env={**os.environ, "CORTEXCTL_STORE": str(store)},
                          preexec_fn=lambda: os.close(0))
    assert proc.returncode == 2, proc
    assert proc.stderr.strip().splitlines() == ["cortexctl: --in-context-file -: stdin is closed"], proc


def test_an_in_context_line_of_bad_json_is_invalid_data(cli, context, store):
    run = cli("compact", "--intent", "i", "--step", "s", "--budget-tokens", "9", "--in-context-file", "-",
              input='{"uri": \n')
    assert_clean_error(run, 10)
    run = cli("compact", "--intent", "i", "--step", "s", "--budget-tokens", "9", "--in-context-file", "-",
              input='{"ref": "x"}\n')
    assert_clean_error(run, 10)


@pytest.mark.parametrize("argv", [
    ["compact", "--intent", "i", "--step", "s", "--budget-tokens", "9", "--in-context-file", "-"],
    ["import", "-"],
    ["write", "fact", "--data", "-"],
])
def test_a_stdin_open_only_for_writing_is_a_usage_error(argv, context, store):
    import subprocess

    from tests.conftest import cortexctl_argv

    def reopen_stdin_for_writing():
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 0)

    proc = subprocess.run(cortexctl_argv() + argv, capture_output=True, text=True,
                          env={**os.environ, "CORTEXCTL_STORE": str(store)}, preexec_fn=reopen_stdin_for_writing)
    assert proc.returncode == 2, proc
    assert len(proc.stderr.strip().splitlines()) == 1 and "stdin cannot be read" in proc.stderr, proc


def test_an_ambiguous_prefix_and_too_many_memories_store_nothing(cli, context, store, tmp_path):
    lines = "\n".join('{"type": "fact", "text": "twin %s", "id": "01JD3K000000000000000000%s"}' % (c, c)
                      for c in ("A1", "B2"))
    assert cli("import", "-", input=lines + "\n").code == 0
    before = _journal_len(store)
    run = _compact(cli, ["01JD3K"], 1000, "s", as_json=False)
    assert_clean_error(run, 2)
    assert "ambiguous" in run.err
    listing = tmp_path / "many.txt"
    listing.write_text((context["fact"] + "\n") * 10_001)
    run = cli("compact", "--intent", "i", "--step", "s", "--budget-tokens", "9", "--in-context-file", str(listing))
    assert_clean_error(run, 2)
    assert "at most 10000" in run.err
    assert _journal_len(store) == before
